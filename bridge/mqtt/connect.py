"""CONNECT, takeover and the end of a connection.

CONNECT checks the client identifier (MQTT 3.1: 1..23 characters; 3.1.1: empty means an assigned id
with a clean session; ``$route:`` is the gateway's own), the will topic and the credentials (auth.py),
closes an older connection of the same client id (takeover: its will is published), opens the session and
answers CONNACK (after the session row is committed, for a persistent session), then resumes the
session's deliveries. When a connection ends the will is published unless the client sent DISCONNECT.
WebSphere Message Broker docs on the MQ Telemetry Transport (CONNECT return codes, keep alive);
MQTT 3.1.1 for level 4 (assigned client ids, session present); MQTT 5.0 §3.1-3.2 for level 5 (Session
Expiry Interval, Receive Maximum, Maximum Packet Size, Topic Alias Maximum, the CONNACK properties, no
enhanced authentication: an Authentication Method is refused with 0x8C).
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

from bridge.config import BrokerConfig
from bridge.mqtt import identity
from bridge.mqtt import packets as P
from bridge.mqtt import properties as PR
from bridge.mqtt.auth import Authenticator
from bridge.mqtt.connection import ClientConnection
from bridge.mqtt.flow import FlowControl
from bridge.mqtt.publish import Publisher
from bridge.mqtt.session import NO_LIMIT, Session
from bridge.mqtt.sessions import SessionTable
from bridge.mqtt.shared import PREFIX as SHARED_PREFIX
from bridge.mqtt.stats import BrokerStats
from bridge.mqtt.topics import TopicError, validate_topic_name
from bridge.mqtt.wills import DelayedWills, publish_will

log = logging.getLogger("mqbridge.broker")

ROUTE_CLIENT_PREFIX = "$route:"   # the broker sessions of the gateway's own routes; no client may use it
MAX_31_CLIENT_ID = 23   # MQTT 3.1: "The Client Identifier ... between 1 and 23 characters"


class Connections:
    """Client id -> its live connection; CONNECT and the end of a connection."""

    def __init__(self, config: BrokerConfig, table: SessionTable, publisher: Publisher, flow: FlowControl,
                 stats: BrokerStats, clock: Callable[[], float], trace_clients: set[str]) -> None:
        self.connections: dict[str, ClientConnection] = {}
        self.config = config
        self.table = table
        self.publisher = publisher
        self.flow = flow
        self.stats = stats
        self.clock = clock
        self.trace_clients = trace_clients
        self.auth = Authenticator(config)   # PasswordFileError: the broker cannot start
        self.delayed_wills = DelayedWills(publisher, clock, table.store)

    def on_connect(self, conn: ClientConnection, packet: P.Connect) -> None:
        level = packet.protocol_level
        conn.reader.level = level
        conn.protocol_level = level
        client_id = packet.client_id
        props = packet.properties or {}
        conn.max_packet_out = props.get(PR.MAXIMUM_PACKET_SIZE, NO_LIMIT)   # also for a refusing CONNACK
        if PR.AUTHENTICATION_DATA in props and PR.AUTHENTICATION_METHOD not in props:
            raise P.ProtocolError("Authentication Data without an Authentication Method", packet="CONNECT")
        if PR.AUTHENTICATION_METHOD in props:
            raise P.ProtocolError(f"authentication method {props[PR.AUTHENTICATION_METHOD]!r} is not supported",
                                  packet="CONNECT", code=P.Reason.BAD_AUTHENTICATION_METHOD)
        if level == P.MQTT_31 and not 1 <= len(client_id) <= MAX_31_CLIENT_ID:
            raise P.ProtocolError(f"client identifier of {len(client_id)} characters (3.1 allows 1..23)",
                                  packet="CONNECT", connack=P.ConnackCode.IDENTIFIER_REJECTED)
        max_keepalive = self.table.limits.max_keepalive
        if level != P.MQTT_5 and max_keepalive and packet.keepalive > max_keepalive:
            raise P.ProtocolError(f"keep alive {packet.keepalive} s is longer than the server allows "
                                  f"({max_keepalive} s)",
                                  packet="CONNECT", connack=P.ConnackCode.IDENTIFIER_REJECTED)
        if client_id.startswith(ROUTE_CLIENT_PREFIX):
            raise P.ProtocolError(f"client identifier prefix {ROUTE_CLIENT_PREFIX!r} is reserved for routes",
                                  packet="CONNECT", connack=P.ConnackCode.IDENTIFIER_REJECTED)
        if client_id.startswith(SHARED_PREFIX):   # shared subscription groups stand in the tree under these
            raise P.ProtocolError(f"client identifier prefix {SHARED_PREFIX!r} is reserved",
                                  packet="CONNECT", connack=P.ConnackCode.IDENTIFIER_REJECTED)
        assigned = not client_id
        if assigned:
            if not packet.clean_session and level != P.MQTT_5:   # MQTT 5 assigns one in either case
                raise P.ProtocolError("empty client identifier without clean session",
                                      packet="CONNECT", connack=P.ConnackCode.IDENTIFIER_REJECTED)
            client_id = f"auto-{uuid.uuid4().hex}"
        if packet.will is not None:
            try:
                validate_topic_name(packet.will.topic)
                response = (packet.will.properties or {}).get(PR.RESPONSE_TOPIC)
                if response is not None:
                    validate_topic_name(response)
            except TopicError as exc:
                raise P.ProtocolError(f"will topic: {exc}", packet="CONNECT",
                                      code=P.Reason.TOPIC_NAME_INVALID) from None
        user, via = self._login(conn, packet)
        why = self.auth.client_id_refused(client_id, user, via)
        if why is not None:
            self.auth.log.warning("client %r user %r from %s refused: %s", client_id, user, conn.peer, why)
            raise P.ProtocolError(why, packet="CONNECT", connack=P.ConnackCode.IDENTIFIER_REJECTED)
        grants = self.auth.grants(client_id, user, via)
        will = packet.will
        if grants is not None and will is not None and not will.topic.startswith("$") \
                and not grants.may_publish(will.topic):
            self.stats.acl_denied_publish += 1
            raise P.ProtocolError(f"the ACL does not let it publish its will to {will.topic!r}", packet="CONNECT",
                                  connack=P.ConnackCode.NOT_AUTHORIZED)

        # takeover: the older connection is closed, and its will published (it did not DISCONNECT)
        old = self.connections.get(client_id)
        if old is not None and old is not conn:
            log.info("client %s: session taken over by %s (was %s)", client_id, conn.peer, old.peer)
            self.connection_lost(old, "session taken over by a new connection")
            old.abort("session taken over", P.Reason.SESSION_TAKEN_OVER)
        # a will waiting for its delay: the session resumes in time (not sent), or ends (sent now)
        self.delayed_wills.reconnected(client_id, session_ends=packet.clean_session)

        now = self.clock()
        conn.client_id = client_id
        conn.keepalive = packet.keepalive
        conn.clean_session = packet.clean_session
        conn.username = user
        conn.user_via = via
        conn.will = packet.will
        conn.connected_at = now
        conn.trace = client_id in self.trace_clients
        self.stats.connections_total += 1

        longest = self.table.longest_expiry
        ack_props: PR.Props = {}
        if level == P.MQTT_5:
            requested = props.get(PR.SESSION_EXPIRY_INTERVAL, 0)
            expiry = min(requested, longest)   # 0xFFFFFFFF (never) too: the server's limit says
            if expiry != requested:
                ack_props[PR.SESSION_EXPIRY_INTERVAL] = expiry
            conn.expiry_at_connect = requested
            session, session_present = self.table.open(client_id, clean=packet.clean_session, level=level,
                                                       expiry_seconds=expiry, now=now, persistent=expiry > 0,
                                                       username=user, user_via=via)
            self._limits5(conn, session, props, ack_props, assigned and client_id)
            if max_keepalive and not 0 < conn.keepalive <= max_keepalive:
                conn.keepalive = ack_props[PR.SERVER_KEEP_ALIVE] = max_keepalive
        else:
            session, session_present = self.table.open(client_id, clean=packet.clean_session, level=level,
                                                       expiry_seconds=longest, now=now, username=user,
                                                       user_via=via)
            session.max_inflight = self.table.limits.max_inflight
            session.max_packet_out = conn.max_packet_out
            session.aliases_out = 0   # (a level 5 client may have had the session before)
            session.topic_aliases_out = None
        conn.session = session
        if grants is not None or session.acl is not None:
            self.table.apply_acl(session, grants)   # a resumed session's, under this client's rules
        self.connections[client_id] = conn
        self.delayed_wills.arm(client_id, user, via, packet.will, session.persistent)
        present = session_present and level >= P.MQTT_311
        if level == P.MQTT_5:
            connack = P.encode_connack5(P.Reason.SUCCESS, present, ack_props)
        else:
            connack = P.encode_connack(P.ConnackCode.ACCEPTED, present)
        # CONNACK waits for the session row (a persistent session must exist once acknowledged)
        if session.persistent:
            conn.send_durable(connack)
        else:
            conn.send(connack)
        log.info("client %s connected from %s (%s level %d, clean=%s, keepalive=%ds)", client_id,
                 conn.peer, packet.protocol_name, level, packet.clean_session, conn.keepalive)
        session.resume(conn)

    def _login(self, conn: ClientConnection, packet: P.Connect) -> tuple[str | None, str]:
        """The client's user name and how it was established (identity.py); ProtocolError: refused."""
        if conn.identity_from_certificate:
            user = self.auth.certificate_login(conn.listener, conn.peer, packet.client_id, conn.peer_certificate)
            if user is None:
                raise P.ProtocolError("not authorized: no user name in a client certificate", packet="CONNECT",
                                      connack=P.ConnackCode.NOT_AUTHORIZED)
            return user, identity.CERTIFICATE
        refused = self.auth.check(conn.listener, conn.peer, packet.client_id, packet.username, packet.password)
        if refused is not None:
            raise P.ProtocolError("not authorized", packet="CONNECT", connack=refused)
        # checked when a password database exists (auth.check); else only what the client said
        return packet.username, identity.PASSWORD if packet.username is not None and self.auth.users \
            else identity.CLAIMED

    def _limits5(self, conn: ClientConnection, session: Session, props: PR.Props, ack: PR.Props,
                 assigned: str | bool) -> None:
        """What an MQTT 5 client's CONNECT asks of the server's sending (Receive Maximum, Maximum Packet
        Size) and what CONNACK tells it of the server's limits."""
        limits = self.table.limits
        session.max_inflight = min(limits.max_inflight, props.get(PR.RECEIVE_MAXIMUM, 65535))
        conn.quiet_problems(props.get(PR.REQUEST_PROBLEM_INFORMATION, 1) == 0)
        session.max_packet_out = conn.max_packet_out   # taken from the CONNECT first thing (on_connect)
        conn.topic_alias_max = limits.topic_alias_maximum
        # aliases are per network connection (§3.3.2.3.4): a resumed session starts with none known
        session.aliases_out = min(props.get(PR.TOPIC_ALIAS_MAXIMUM, 0), limits.topic_aliases_out)
        session.topic_aliases_out = None
        if assigned:
            ack[PR.ASSIGNED_CLIENT_IDENTIFIER] = assigned
        if limits.max_inbound_qos2 < 65535:
            ack[PR.RECEIVE_MAXIMUM] = limits.max_inbound_qos2
        ack[PR.MAXIMUM_PACKET_SIZE] = limits.max_message_size + 1 + len(P.encode_length(limits.max_message_size))
        if limits.topic_alias_maximum:
            ack[PR.TOPIC_ALIAS_MAXIMUM] = limits.topic_alias_maximum

    def connection_lost(self, conn: ClientConnection, reason: str) -> None:
        """The connection ended (any reason). Publishes the will unless the client sent DISCONNECT."""
        self.flow.forget(conn)
        client_id = conn.client_id
        if client_id is None or self.connections.get(client_id) is not conn:
            return
        del self.connections[client_id]
        will = conn.will
        conn.will = None
        session = conn.session
        delay = (will.properties or {}).get(PR.WILL_DELAY_INTERVAL, 0) if will is not None else 0
        if will is not None and not delay:
            publish_will(self.publisher, client_id, conn.username, conn.user_via, will, reason)
        if session is not None:
            self.table.left(session)
        if will is not None and delay:
            if session is not None and self.table.sessions.get(client_id) is session:
                # the session outlives the connection: the will waits (MQTT 5 §3.1.3.2.2), at most until
                # the session expires (SessionTable.drop publishes it then)
                self.delayed_wills.add(client_id, conn.username, conn.user_via, will,
                                       min(delay, session.expiry_seconds or delay), reason)
            else:
                publish_will(self.publisher, client_id, conn.username, conn.user_via, will, reason)
