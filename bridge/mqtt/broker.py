"""The broker: wires the rooms together and dispatches each decoded packet to the one that handles it.

Nothing here owns a socket or an event loop: the server feeds decoded packets from a
``ClientConnection`` in (``handle``, ``connection_lost``) and the rooms write back through it. The rooms:
connect (CONNECT, takeover, connection end), wills, publish (PUBLISH/PUBREL, routing to sessions),
subscribe (SUBSCRIBE/UNSUBSCRIBE), retained, messages (stored publications, id reservation), sessions
(open, end, expiry, recovery), flow (route sessions pushing back on publishers), route_sessions (those of
routes that are gone); store.py has every statement on the broker's tables. The gateway's routes use the
public API below (``attach_route_session``, ``publish``, ``deliver_to_client``, ``take_pressing``,
``when_relieved``, ``retire_route_sessions``, ``settle_route_sessions``).
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable

from bridge.config import BrokerConfig
from bridge.mqtt import identity
from bridge.mqtt import packets as P
from bridge.mqtt import properties as PR
from bridge.mqtt.acl import Acl, Grants
from bridge.mqtt.connect import ROUTE_CLIENT_PREFIX, Connections
from bridge.mqtt.connection import ClientConnection
from bridge.mqtt.flow import FlowControl
from bridge.mqtt.messages import StoredMessages
from bridge.mqtt.publish import Publisher
from bridge.mqtt.retained import RetainedMessages
from bridge.mqtt.route_sessions import RouteSessions
from bridge.mqtt.session import Link, Message, OutMsg, Session
from bridge.mqtt.sessions import SessionTable
from bridge.mqtt.shared import SharedGroups
from bridge.mqtt.sink import RouteSink
from bridge.mqtt.stats import BrokerStats
from bridge.mqtt.store import RecoveredState, Store
from bridge.mqtt.subscribe import Subscriptions
from bridge.mqtt.topics import SubscriptionTrie

__all__ = ["ROUTE_CLIENT_PREFIX", "Broker", "BrokerStats"]

log = logging.getLogger("mqbridge.broker")
trace_log = logging.getLogger("mqbridge.trace")


class Broker:
    """Shared state of the MQTT broker. One instance per gateway, used from one thread (the event loop)."""

    def __init__(self, config: BrokerConfig, store: Store, *, clock: Callable[[], float] = time.time,
                 trace_clients: frozenset[str] = frozenset()) -> None:
        self.config = config
        self.store = store
        self.after_commit = store.after_commit   # one bound method for every connection (not one each)
        self.clock = clock
        self.limits = config.limits
        self.trie = SubscriptionTrie()
        self.stats = BrokerStats(started=clock())
        self.trace_clients = set(trace_clients)
        # the rooms, each given the shared state it works on
        self.messages = StoredMessages(store, clock)
        self.retained = RetainedMessages(store, clock)
        self.sessions: dict[str, Session] = {}
        self.flow = FlowControl(self.sessions)
        self.shared = SharedGroups()
        self.publisher = Publisher(config, store, self.sessions, self.trie, self.retained, self.messages,
                                   self.flow.pressing, self.stats, self.shared, clock)
        self.subscriptions = Subscriptions(store, self.trie, self.retained, self.messages, self.publisher,
                                           self.shared)
        self.table = SessionTable(self.sessions, store, self.limits, clock, self.subscriptions, self.messages)
        self.connects = Connections(config, self.table, self.publisher, self.flow, self.stats, clock,
                                    self.trace_clients)
        self.connections: dict[str, ClientConnection] = self.connects.connections
        self.routes = RouteSessions(ROUTE_CLIENT_PREFIX, self.sessions, store, self.subscriptions, self.messages,
                                    self.table, self.flow)
        # the hot path's handlers, resolved once
        self._pressing = self.flow.pressing
        self._hold = self.flow.hold
        self._on_publish = self.publisher.on_publish
        self._on_pubrel = self.publisher.on_pubrel
        self._on_connect = self.connects.on_connect
        self._on_subscribe = self.subscriptions.on_subscribe
        self._on_unsubscribe = self.subscriptions.on_unsubscribe
        # public operations that are a room's
        self.publish = self.publisher.publish
        self.deliver_to_client = self.publisher.deliver_to_client
        self.publish_system = self.publisher.publish_system
        self.connection_lost = self.connects.connection_lost
        self.take_pressing = self.flow.take_pressing
        self.when_relieved = self.flow.when_relieved
        self.held_publishers = self.flow.held_publishers
        self.expire_sessions = self.table.expire
        self.table.on_end = self.connects.delayed_wills.session_ended
        self.table.on_orphans = self.publisher.reassign
        self.table.grants = self.publisher.grants = self.connects.auth.grants
        self.publish_due_wills = self.connects.delayed_wills.publish_due
        self.retire_route_sessions = self.routes.retire
        self.settle_route_sessions = self.routes.settle
        self.drop_retired_route_session = self.routes.drop

    @property
    def listener_control(self) -> Callable[[str, bool], list[str]] | None:
        """Set by the server: ``$SYS/SCADA/MQIsdpListener/<port>|all`` ON/OFF -> what changed."""
        return self.publisher.listener_control

    @listener_control.setter
    def listener_control(self, hook: Callable[[str, bool], list[str]] | None) -> None:
        self.publisher.listener_control = hook

    @property
    def acl(self) -> Acl | None:
        """The ACL file's rules in force (None: no ACL file)."""
        return self.connects.auth.acl

    def route_grants(self, client_id: str, acl_user: str | None, *, reading: bool = False) -> Grants | None:
        """A route's ACL rules: its ``acl_user``'s; None without an ACL file. Without an acl_user a route
        publishes under the anonymous rules and reads unrestricted (None): bridge/routing/route_acl.py."""
        if acl_user is None:
            return None if reading else self.connects.auth.grants(client_id, None, identity.CLAIMED)
        return self.connects.auth.grants(client_id, acl_user, identity.ROUTE)

    def _route_reads(self, session: Session) -> None:
        """A route's session (its username is the route's acl_user) reads under the ACL in force: its
        subscriptions are filtered from now on; what it holds stays (acknowledged to its publishers)."""
        session.acl = self.route_grants(session.client_id, session.username, reading=True)
        self.subscriptions.apply_acl(session)

    def reload_acl(self, acl: Acl | None) -> list[str]:
        """``mqbridge reload``: the ACL file's new rules, for every session (connected or not) from now on. A
        route's session (also one kept for a route that is gone) is filtered from now on; what it holds
        was acknowledged to its publishers and stays."""
        changes = self.connects.auth.install_acl(acl)
        if changes:
            auth = self.connects.auth
            for session in list(self.sessions.values()):
                if session.client_id.startswith(ROUTE_CLIENT_PREFIX):
                    self._route_reads(session)
                else:
                    self.table.apply_acl(session, auth.grants(session.client_id, session.username, session.user_via))
        return changes

    def recover(self, state: RecoveredState) -> None:
        """Rebuild sessions, queues and retained messages from the store after a (re)start."""
        self.retained.recover(state.retained)
        restored = self.table.recover(state, self.publisher.guards)
        self.publisher.recover_shared()
        for cid, session in self.sessions.items():   # a route's (or a gone route's kept) session: as it reads
            if cid.startswith(ROUTE_CLIENT_PREFIX):
                self._route_reads(session)
        self.connects.delayed_wills.recover(state.wills)
        self.routes.recover(state.route_since)
        log.info("recovered %d persistent sessions, %d queued/in-flight deliveries, %d retained",
                 len(state.sessions), restored, len(self.retained))

    # -- packets ----------------------------------------------------------------------------------

    def handle(self, conn: ClientConnection, packet: P.Packet) -> None:
        """One decoded packet from ``conn``. Raises ProtocolError to have the connection closed."""
        if conn.trace:
            trace_log.info("%s <- %s", conn.client_id, packet)
        if isinstance(packet, P.Publish):
            pressing = self._pressing
            if pressing:
                pressing.clear()   # left by a publication no connection made (a will, a route's target)
            self._on_publish(conn, packet)
            if pressing:
                self._hold(conn)
            return
        session = conn.session
        if isinstance(packet, P.PacketIdOnly):
            if session is None:
                raise P.ProtocolError("packet before CONNECT", packet=P.PACKET_NAMES[packet.type])
            t = packet.type
            if t == P.PUBACK:
                session.on_puback(packet.packet_id)
            elif t == P.PUBREC:
                session.on_pubrec(packet.packet_id, packet.reason_code)
            elif t == P.PUBCOMP:
                session.on_pubcomp(packet.packet_id)
            elif t == P.PUBREL:
                self._pressing.clear()
                self._on_pubrel(conn, session, packet.packet_id)
                if self._pressing:
                    self._hold(conn)
            else:
                raise P.ProtocolError("a client must not send UNSUBACK", packet="UNSUBACK")
            return
        if isinstance(packet, P.Connect):
            if conn.client_id is not None:
                raise P.ProtocolError("second CONNECT on one connection", packet="CONNECT")
            self._on_connect(conn, packet)
            return
        if session is None:
            raise P.ProtocolError("packet before CONNECT", packet=P.packet_name(packet))
        if isinstance(packet, P.Subscribe):
            self._on_subscribe(conn, session, packet)
        elif isinstance(packet, P.Unsubscribe):
            self._on_unsubscribe(conn, session, packet)
        elif isinstance(packet, P.Disconnect):
            self._on_disconnect5(conn, session, packet)
        elif isinstance(packet, P.Auth):
            raise P.ProtocolError("AUTH, but the CONNECT named no authentication method", packet="AUTH")
        elif isinstance(packet, P.Bare):
            if packet.type == P.PINGREQ:
                conn.send(P.PINGRESP_BYTES)
            elif packet.type == P.DISCONNECT:
                conn.will = None   # never publish the will after DISCONNECT
                conn.abort("client sent DISCONNECT")
            else:
                raise P.ProtocolError("a client must not send PINGRESP", packet="PINGRESP")
        else:
            raise P.ProtocolError(f"a client must not send {P.packet_name(packet)}",
                                  packet=P.packet_name(packet))

    def _on_disconnect5(self, conn: ClientConnection, session: Session, packet: P.Disconnect) -> None:
        """MQTT 5 DISCONNECT: the will is published only for reason 0x04; a Session Expiry Interval may
        change the session's, unless CONNECT set 0 (§3.14.2.2.2)."""
        expiry = (packet.properties or {}).get(PR.SESSION_EXPIRY_INTERVAL)
        if expiry is not None:
            if conn.expiry_at_connect == 0 and expiry:
                raise P.ProtocolError("Session Expiry Interval set by DISCONNECT after 0 in CONNECT",
                                      packet="DISCONNECT")
            self.table.set_expiry(session, min(expiry, self.table.longest_expiry) if expiry else None)
        if packet.reason_code == P.Reason.SUCCESS:   # [MQTT-3.1.2-10]: 0x04 and the error codes keep it
            conn.will = None
            self.connects.delayed_wills.disarm(conn.client_id)
        reason = "client sent DISCONNECT" if not packet.reason_code else \
            f"client sent DISCONNECT {packet.reason_code:#04x}"
        conn.abort(reason)

    # -- sessions -----------------------------------------------------------------------------------

    def attach_route_session(self, client_id: str, topic_filter: str, link: Link, *, max_inflight: int,
                             max_queued: int, direct: Callable[[Message, bool], None],
                             direct_out: Callable[[OutMsg, bool, bool], None],
                             acl_user: str | None = None, sink: RouteSink | None = None) -> Session:
        """A route's broker session (``$route:<name>``), as a persistent client that never expires would
        have it after CONNECT and SUBSCRIBE at QoS 2 to ``topic_filter`` alone (its other filters are
        unsubscribed): flow-controlled (FlowControl), taking deliveries in-process (``direct``: QoS 0,
        ``direct_out``: QoS 1/2) and writing acknowledgements to ``link``. Its in-flight deliveries are
        re-sent (DUP) and its queue resumed. Under an ACL file its subscription delivers only what
        ``acl_user`` may read (the route checked at start that it may read some; None: unrestricted).
        ``sink``: the route takes clients' QoS 1/2 publications itself when it can (sink.py)."""
        session, _present = self.table.open(client_id, clean=False, level=P.MQTT_311, expiry_seconds=0,
                                            now=self.clock(), username=acl_user, user_via=identity.ROUTE)
        self._route_reads(session)
        self.routes.revive(client_id)
        session.max_inflight = max_inflight
        session.max_queued = max_queued
        self.flow.enable(session)
        session.check_relief()
        routes = self.routes
        for old in [f for f in session.subscriptions if f != topic_filter]:
            routes.unsubscribe(session, old)
        if session.subscriptions.get(topic_filter) != 2:
            routes.subscribe(session, topic_filter)   # given what retired route sessions hold for it
        session.direct = direct
        session.direct_out = direct_out
        session.sink = sink
        self.connections.pop(client_id, None)
        session.resume(link)
        return session

    def queue_for_route(self, session: Session, msg: Message, qos: int) -> bool:
        """A publication a route's sink took and could not commit goes to the route's session after all, as
        if the sink had not been there (stored, then delivered to the route). True: the store was written
        (what waited for the sink's commit waits for that commit instead)."""
        writes = self.publisher.deliver(session, msg, qos)
        self.publisher.messages.release_if_unreferenced(msg)
        return writes

    def without_properties(self, topic: str, client_id: str | None = None) -> list[str]:
        """The sessions below MQTT 5 that a publication to ``topic`` (or to ``client_id`` alone) reaches: they
        receive its payload without its MQTT 5 properties."""
        if client_id is not None:
            session = self.sessions.get(client_id)
            return [client_id] if session is not None and session.protocol_level < P.MQTT_5 else []
        sessions = self.sessions
        return sorted(cid for cid in self.trie.match(topic) if not cid.startswith(ROUTE_CLIENT_PREFIX)
                      and (s := sessions.get(cid)) is not None and s.protocol_level < P.MQTT_5)

    def delete_session(self, client_id: str) -> str:
        """Admin: delete an offline persistent session. Returns '' or the reason it cannot."""
        session = self.sessions.get(client_id)
        if session is None:
            return f"no session {client_id!r}"
        if client_id in self.connections:
            return f"session {client_id!r} is connected: disconnect the client first"
        self.table.drop(session)
        return ""
