"""The broker core: sessions, routing, retained messages, wills and takeover — driven by packets.

Everything here reacts to decoded packets from a ``ClientConnection`` and writes back through it;
nothing here owns a socket. Specs: the seed message-broker-end-user-application-support.txt
("WebSphere MQ Telemetry Transport" chapters: CONNECT return codes, client identifier 1..23
characters for 3.1, QoS flows, retained publications, Last Will and Testament, keep alive),
mqtt-qos-flows.txt, swiftmq-mqtt-swiftlet.txt (sessions, takeover, retained, wills); MQTT 3.1.1 for
level 4 (assigned client ids, SUBACK 0x80, session present).
"""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from bridge.config import BrokerConfig
from bridge.mqtt import packets as P
from bridge.mqtt.connection import ClientConnection
from bridge.mqtt.session import Message, OutMsg, Session
from bridge.mqtt.store import RecoveredState, Store
from bridge.mqtt.topics import (
    SubscriptionTrie,
    TopicError,
    topic_matches,
    validate_topic_filter,
    validate_topic_name,
)

log = logging.getLogger("mqbridge.broker")
trace_log = logging.getLogger("mqbridge.trace")

LISTENER_CONTROL_PREFIX = "$SYS/SCADA/MQIsdpListener/"
ROUTE_CLIENT_PREFIX = "$route:"   # the broker sessions of the gateway's own routes; no client may use it
MESSAGE_ID_BLOCK = 65_536   # message ids reserved in the store per write
MAX_31_CLIENT_ID = 23   # seed: "The Client Identifier ... between 1 and 23 characters"


@dataclass(slots=True)
class BrokerStats:
    started: float = 0.0
    received: int = 0
    sent_qos0: int = 0
    connections_total: int = 0
    protocol_errors: int = 0
    dropped: int = 0
    # a persistent publisher's QoS 1 re-sends (DUP=1, same packet id and digest as the last one stored):
    # routed again as redeliveries under the first one's message key
    resends_recognised: int = 0


_INSERT_INBOUND_QOS1 = "INSERT OR REPLACE INTO inbound_qos1 VALUES (?, ?, ?, ?, ?)"


def publication_digest(topic_b: bytes, payload: bytes, qos: int, retain: bool) -> bytes:
    """What identifies a publication's content for re-send detection: BLAKE2b-128 of topic, QoS, retain
    and payload (the topic length first, so no topic/payload split can collide)."""
    h = hashlib.blake2b(len(topic_b).to_bytes(2, "big"), digest_size=16)
    h.update(topic_b)
    h.update(bytes((qos, int(retain))))
    h.update(payload)
    return h.digest()


class Broker:
    """Shared state of the MQTT broker. One instance per gateway, used from the event loop only."""

    def __init__(self, config: BrokerConfig, store: Store, *, clock: Callable[[], float] = time.time,
                 trace_clients: frozenset[str] = frozenset()) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.limits = config.limits
        self.sessions: dict[str, Session] = {}
        self.connections: dict[str, ClientConnection] = {}   # client id -> live connection
        self.trie = SubscriptionTrie()
        self.retained: dict[str, Message] = {}
        self.stats = BrokerStats(started=clock())
        self.trace_clients = set(trace_clients)
        self._next_message_id = 1
        # flow control for route sessions (soft max_queued): route session id -> the publishers it holds,
        # since when it pushes back, and the pushing-back sessions the packet being handled reached
        self.holds: dict[str, set[ClientConnection]] = {}
        self._pushing_since: dict[str, float] = {}
        self._pressing: list[Session] = []
        self._relief_waiters: dict[str, list[asyncio.Future[None]]] = {}   # routes into the broker (MqttTarget)
        self._id_reserved = 0     # ids below this are reserved in the store (meta message_id_reserved)
        # hooks set by the server / gateway
        self.listener_control: Callable[[str, bool], list[str]] | None = None

    # -- start-up ---------------------------------------------------------------------------------

    def recover(self, state: RecoveredState) -> None:
        """Rebuild sessions, queues and retained messages from the store after a (re)start."""
        self._next_message_id = state.next_message_id
        self._id_reserved = 0
        messages = {mid: Message(m.topic, m.payload, m.qos, m.retain, m.origin, store_id=mid, username=m.username,
                                 key_id=m.key_id, redelivery=m.redelivery)
                    for mid, m in state.messages.items()}
        for topic, (payload, qos, origin) in state.retained.items():
            self.retained[topic] = Message(topic, payload, qos, True, origin)
        restored = 0
        for cid, stored in state.sessions.items():
            session = self.new_session(cid, persistent=True, level=stored.protocol_level)
            session.last_seen = stored.last_seen
            session.expiry_seconds = stored.expiry_seconds
            for flt, qos in stored.subscriptions.items():
                session.subscriptions[flt] = qos
                self.trie.add(flt, cid, qos)
            for seq, mid, qos, retain, pid, state_ in stored.outbound:
                msg = messages.get(mid)
                if msg is None:
                    log.error("store: outbound row %s/%s refers to missing message %s", cid, seq, mid)
                    continue
                out = OutMsg(msg, qos, bool(retain), seq)
                out.packet_id = pid
                out.state = state_
                session.restore_outbound(out)
                restored += 1
            for pid, (topic, payload, retain) in stored.inbound_qos2.items():
                session.inbound_qos2[pid] = Message(topic, payload, 2, retain, cid)
            session.inbound_qos1.update(stored.inbound_qos1)
            self.sessions[cid] = session
        # messages no delivery refers to any more (a crash between writes): delete them
        for msg in messages.values():
            if msg.refs == 0:
                self.store.write("DELETE FROM messages WHERE id=?", (msg.store_id,))
        log.info("recovered %d persistent sessions, %d queued/in-flight deliveries, %d retained",
                 len(state.sessions), restored, len(self.retained))

    def new_session(self, client_id: str, *, persistent: bool, level: int) -> Session:
        return Session(client_id, persistent=persistent, protocol_level=level,
                       journal=self.store if persistent else None,
                       max_inflight=self.limits.max_inflight, max_queued=self.limits.max_queued,
                       on_release=self._release_message)

    def flow_control(self, session: Session) -> None:
        """Make ``session`` (a route's) push back instead of dropping: its max_queued becomes a soft
        limit; a QoS 1/2 publication that reaches it while it is at the limit is queued all the same and
        the publisher's connection is held (nothing more is processed from it) until the queue is down
        to the low-water mark. Ordinary client sessions keep the drop-and-count behaviour."""
        session.soft_limit = True
        session.on_flow = self._on_flow

    def _on_flow(self, session: Session, pushing: bool) -> None:
        cid = session.client_id
        if pushing:
            self._pushing_since[cid] = time.monotonic()
            log.warning("%s: %d queued, its limit (max_queued %d): pushing back, publishers that reach it are "
                        "held until it is down to %d", cid, len(session.queue), session.max_queued,
                        session.low_water())
            return
        for fut in self._relief_waiters.pop(cid, []):
            if not fut.done():
                fut.set_result(None)
        held = self.holds.pop(cid, set())
        since = self._pushing_since.pop(cid, time.monotonic())
        log.info("%s: %d queued: no longer pushing back after %.1f s; %d held publisher(s) resumed", cid,
                 len(session.queue), time.monotonic() - since, len(held))
        for conn in held:
            conn.unhold(cid)

    def take_pressing(self) -> list[Session]:
        """The pushing-back route sessions the publications made since the last call reached (for a
        publisher that is not a connection: a route into the broker)."""
        pressing = list(dict.fromkeys(self._pressing))
        self._pressing.clear()
        return pressing

    async def relieved(self, session: Session) -> None:
        """Return once ``session`` no longer pushes back (or is gone)."""
        if not session.pushing_back or self.sessions.get(session.client_id) is not session:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._relief_waiters.setdefault(session.client_id, []).append(fut)
        await fut

    def held_publishers(self, session_id: str) -> int:
        """How many publishers the route session holds: connections, and routes into the broker waiting."""
        return len(self.holds.get(session_id, ())) + len(self._relief_waiters.get(session_id, ()))

    def _hold(self, conn: ClientConnection) -> None:
        """The packet just handled from ``conn`` reached route sessions that push back: hold ``conn``."""
        pressing = self._pressing
        for session in pressing:
            cid = session.client_id
            if session.pushing_back and cid not in conn.held_by and self.sessions.get(cid) is session:
                conn.held_by.add(cid)
                self.holds.setdefault(cid, set()).add(conn)
        pressing.clear()

    def _release_message(self, msg: Message) -> None:
        if not self.store.cancel(msg.store_op):
            self.store.write("DELETE FROM messages WHERE id=?", (msg.store_id,))
        msg.store_id = None
        msg.store_op = None

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
                session.on_pubrec(packet.packet_id)
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

    # -- CONNECT ----------------------------------------------------------------------------------

    def _check_credentials(self, packet: P.Connect) -> bool:
        if packet.username is None:
            return self.config.allow_anonymous
        users = self.config.users
        if not users:
            return True
        expected = users.get(packet.username)
        if expected is None:
            return False
        given = packet.password or b""
        if expected.startswith("sha256:"):
            return hmac.compare_digest(hashlib.sha256(given).hexdigest(), expected[7:].lower())
        return hmac.compare_digest(given, expected.encode("utf-8"))

    def _on_connect(self, conn: ClientConnection, packet: P.Connect) -> None:
        level = packet.protocol_level
        conn.reader.level = level
        conn.protocol_level = level
        client_id = packet.client_id
        if level == P.MQTT_31 and not 1 <= len(client_id) <= MAX_31_CLIENT_ID:
            raise P.ProtocolError(f"client identifier of {len(client_id)} characters (3.1 allows 1..23)",
                                  packet="CONNECT", connack=P.ConnackCode.IDENTIFIER_REJECTED)
        if client_id.startswith(ROUTE_CLIENT_PREFIX):
            raise P.ProtocolError(f"client identifier prefix {ROUTE_CLIENT_PREFIX!r} is reserved for routes",
                                  packet="CONNECT", connack=P.ConnackCode.IDENTIFIER_REJECTED)
        if not client_id:
            if not packet.clean_session:
                raise P.ProtocolError("empty client identifier without clean session",
                                      packet="CONNECT", connack=P.ConnackCode.IDENTIFIER_REJECTED)
            client_id = f"auto-{uuid.uuid4().hex}"
        if packet.will is not None:
            try:
                validate_topic_name(packet.will.topic)
            except TopicError as exc:
                raise P.ProtocolError(f"will topic: {exc}", packet="CONNECT") from None
        if not self._check_credentials(packet):
            code = (P.ConnackCode.NOT_AUTHORIZED if packet.username is None
                    else P.ConnackCode.BAD_USERNAME_OR_PASSWORD)
            raise P.ProtocolError("not authorized", packet="CONNECT", connack=code)

        # takeover: the older connection is closed, and its will published (it did not DISCONNECT)
        old = self.connections.get(client_id)
        if old is not None and old is not conn:
            log.info("client %s: session taken over by %s (was %s)", client_id, conn.peer, old.peer)
            self.connection_lost(old, "session taken over by a new connection")
            old.abort("session taken over")

        now = self.clock()
        conn.client_id = client_id
        conn.keepalive = packet.keepalive
        conn.clean_session = packet.clean_session
        conn.username = packet.username
        conn.will = packet.will
        conn.connected_at = now
        conn.trace = client_id in self.trace_clients
        self.stats.connections_total += 1

        existing = self.sessions.get(client_id)
        session_present = False
        if packet.clean_session:
            if existing is not None:
                self._drop_session(existing)
            session = self.new_session(client_id, persistent=False, level=level)
            self.sessions[client_id] = session
        elif existing is not None and existing.persistent:
            session = existing
            session_present = True
        else:
            if existing is not None:
                self._drop_session(existing)
            session = self.new_session(client_id, persistent=True, level=level)
            session.expiry_seconds = int(self.limits.session_expiry_hours * 3600)
            self.sessions[client_id] = session
        session.protocol_level = level
        session.last_seen = now
        if session.persistent:
            self.store.write("INSERT OR REPLACE INTO sessions VALUES (?, ?, ?, ?)",
                             (client_id, level, now, session.expiry_seconds))
        conn.session = session
        self.connections[client_id] = conn
        present = session_present and level == P.MQTT_311
        # CONNACK waits for the session row (a persistent session must exist once acknowledged)
        if session.persistent:
            conn.send_durable(P.encode_connack(P.ConnackCode.ACCEPTED, present))
        else:
            conn.send(P.encode_connack(P.ConnackCode.ACCEPTED, present))
        log.info("client %s connected from %s (%s level %d, clean=%s, keepalive=%ds)", client_id,
                 conn.peer, packet.protocol_name, level, packet.clean_session, packet.keepalive)
        session.resume(conn)

    # -- PUBLISH ------------------------------------------------------------------------------------

    def _on_publish(self, conn: ClientConnection, packet: P.Publish) -> None:
        session = conn.session
        if session is None:
            raise P.ProtocolError("PUBLISH before CONNECT", packet="PUBLISH")
        topic = packet.topic
        try:
            validate_topic_name(topic)
        except TopicError as exc:
            raise P.ProtocolError(str(exc), packet="PUBLISH") from None
        session.stats.received += 1
        session.stats.bytes_in += len(packet.payload)
        self.stats.received += 1
        qos = packet.qos
        if topic[0] == "$":
            self._on_system_publish(conn, packet)
            if qos == 1:
                conn.send(P.encode_ack(P.PUBACK, packet.packet_id))  # type: ignore[arg-type]
            elif qos == 2:
                conn.send(P.encode_ack(P.PUBREC, packet.packet_id))  # type: ignore[arg-type]
            return
        if qos == 0:
            self.publish(Message(topic, packet.payload, 0, packet.retain, conn.client_id, username=conn.username))
            return
        pid = packet.packet_id
        assert pid is not None
        if qos == 1:
            msg = Message(topic, packet.payload, 1, packet.retain, conn.client_id, username=conn.username)
            ack = P.encode_ack(P.PUBACK, pid)
            if session.persistent:
                writes = self._publish_qos1_persistent(session, msg, pid, packet.dup)
            else:   # a clean session cannot re-send after a reconnect: nothing to remember
                writes = self.publish(msg)
            if writes:
                conn.send_durable(ack)
            else:
                conn.send(ack)
            return
        # QoS 2: store until PUBREL, publish then, once (seed QoS 2 flow)
        ack = P.encode_ack(P.PUBREC, pid)
        if pid in session.inbound_qos2:
            conn.send(ack)   # a re-sent PUBLISH (DUP): acknowledge again, publish nothing
            return
        msg = Message(topic, packet.payload, 2, packet.retain, conn.client_id, username=conn.username)
        session.inbound_qos2[pid] = msg
        if session.persistent:
            session.inbound_ops[pid] = self.store.write(
                "INSERT OR REPLACE INTO inbound_qos2 VALUES (?, ?, ?, ?, ?)",
                (session.client_id, pid, topic, packet.payload, int(packet.retain)))
            conn.send_durable(ack)
        else:
            conn.send(ack)

    def _publish_qos1_persistent(self, session: Session, msg: Message, pid: int, dup: bool) -> bool:
        """A QoS 1 publication from a persistent session. MQTT 3.1.1 §4.4: after a reconnect the client
        re-sends an unacknowledged PUBLISH with DUP=1 and the same packet id, and it cannot reuse the id
        before the PUBACK. So DUP=1 with the packet id and digest of the last publication stored from this
        session is taken for a re-send of it (its PUBACK was lost: connection drop, crash after the
        commit) and routed again as a redelivery under the first one's message key (``Message.key_id``,
        ``redelivery`` + 1). It is routed again even when the first is still pending somewhere: a new use
        of the packet id with the same content whose first (DUP=0) transmission was lost to a connection
        drop also arrives as DUP=1, and acknowledging that without routing it would lose it; routing it
        costs at most a duplicate, which QoS 1 allows and the audit counts as allowed. Anything else is a
        new publication. The (packet id -> key) index is written in the same commit as the message, so a
        PUBACK lost to a crash still finds it after the restart. Returns whether the store was written."""
        index = session.inbound_qos1
        digest = publication_digest(msg.topic_b, msg.payload, 1, msg.retain)
        if dup:
            entry = index.get(pid)
            if entry is not None and entry[2] == digest:
                msg.key_id = entry[0]
                msg.redelivery = entry[1] + 1
                self.stats.resends_recognised += 1
        writes = self.publish(msg)
        mid = msg.store_id
        if mid is not None:
            key = msg.key_id if msg.key_id is not None else mid
            index[pid] = (key, msg.redelivery, digest)
            self.store.write(_INSERT_INBOUND_QOS1, (session.client_id, pid, key, msg.redelivery, digest))
        elif index.pop(pid, None) is not None:
            # not stored (no durable delivery): no key to keep, and the older entry is obsolete
            self.store.write("DELETE FROM inbound_qos1 WHERE client_id=? AND packet_id=?", (session.client_id, pid))
            writes = True
        return writes

    def _on_pubrel(self, conn: ClientConnection, session: Session, pid: int) -> None:
        msg = session.inbound_qos2.pop(pid, None)
        writes = False
        if msg is not None:
            writes = self.publish(msg)
            if session.persistent and not self.store.cancel(session.inbound_ops.pop(pid, None)):
                self.store.write("DELETE FROM inbound_qos2 WHERE client_id=? AND packet_id=?",
                                 (session.client_id, pid))
                writes = True
        ack = P.encode_ack(P.PUBCOMP, pid)
        if writes:
            conn.send_durable(ack)
        else:
            conn.send(ack)

    def publish(self, msg: Message) -> bool:
        """Route a publication to every matching session; returns True when it wrote to the store."""
        writes = False
        topic = msg.topic
        if msg.retain:
            writes = self._set_retained(msg)
        matches = self.trie.match(topic)
        if matches:
            sessions = self.sessions
            for client_id, sub_qos in matches.items():
                session = sessions.get(client_id)
                if session is not None:
                    writes |= self._deliver(session, msg, sub_qos if sub_qos < msg.qos else msg.qos)
            self._release_if_unreferenced(msg)
        return writes

    def _deliver(self, session: Session, msg: Message, qos: int, retain: bool = False) -> bool:
        """One delivery; a QoS 1/2 delivery to a persistent session stores the message first."""
        writes = False
        if qos and session.persistent:
            if msg.store_id is None:
                self._store_message(msg)
            writes = True
        session.deliver(msg, qos, retain)
        if qos and session.pushing_back:
            self._pressing.append(session)
        return writes

    def _release_if_unreferenced(self, msg: Message) -> None:
        if msg.store_id is not None and msg.refs == 0:   # stored but every queue refused it
            self._release_message(msg)

    def deliver_to_client(self, client_id: str, msg: Message) -> bool:
        """Seed Table 4: a message sent to one client without a subscription. False: no session."""
        session = self.sessions.get(client_id)
        if session is None:
            return False
        self._deliver(session, msg, msg.qos)
        self._release_if_unreferenced(msg)
        return True

    def _store_message(self, msg: Message) -> None:
        mid = self._next_message_id
        self._next_message_id += 1
        if mid >= self._id_reserved:
            # a message id is a message key (mqtt:<id>) and must not come back after a restart when the
            # messages table is empty again: reserve ids durably, a block at a time (committed with or
            # before this message)
            self._id_reserved = mid + MESSAGE_ID_BLOCK
            self.store.write("INSERT OR REPLACE INTO meta VALUES ('message_id_reserved', ?)",
                             (str(self._id_reserved),))
        msg.store_id = mid
        msg.store_op = self.store.write(
            "INSERT INTO messages (id, topic, payload, qos, retain, origin, created, username, key_id, redelivery) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (mid, msg.topic, msg.payload, msg.qos, int(msg.retain), msg.origin, self.clock(), msg.username,
             msg.key_id, msg.redelivery))

    def _set_retained(self, msg: Message, persist: bool = True) -> bool:
        topic = msg.topic
        if not msg.payload:
            # an empty retained publication clears the retained message (and is forwarded as usual)
            if self.retained.pop(topic, None) is not None and persist:
                self.store.write("DELETE FROM retained WHERE topic=?", (topic,))
                return True
            return False
        self.retained[topic] = msg
        if persist:
            self.store.write("INSERT OR REPLACE INTO retained VALUES (?, ?, ?, ?, ?)",
                             (topic, msg.payload, msg.qos, msg.origin, self.clock()))
        return persist

    def _on_system_publish(self, conn: ClientConnection, packet: P.Publish) -> None:
        """Clients may not publish into ``$`` topics, except the seed's listener control."""
        topic = packet.topic
        if topic.startswith(LISTENER_CONTROL_PREFIX):
            target = topic[len(LISTENER_CONTROL_PREFIX):]
            command = packet.payload.strip().upper()
            if conn.client_id not in self.config.listener_control_clients:
                log.warning("client %s may not control listeners (%s %r): ignored", conn.client_id,
                            topic, packet.payload[:16])
                return
            if command not in (b"ON", b"OFF") or self.listener_control is None:
                log.warning("listener control from %s: payload must be ON or OFF, got %r",
                            conn.client_id, packet.payload[:16])
                return
            changed = self.listener_control(target, command == b"ON")
            log.info("listener control by %s: %s %s -> %s", conn.client_id, target,
                     command.decode(), changed or "no listener changed")
            return
        log.warning("client %s published to %s: $ topics are reserved, ignored", conn.client_id, topic)

    def publish_system(self, topic: str, value: str) -> None:
        """$SYS/broker/... values: retained in memory only (rebuilt at start), never stored."""
        msg = Message(topic, value.encode("utf-8"), 0, True, None)
        self._set_retained(msg, persist=False)
        for client_id, _qos in self.trie.match(topic).items():
            session = self.sessions.get(client_id)
            if session is not None:
                session.deliver(msg, 0)

    # -- SUBSCRIBE / UNSUBSCRIBE ------------------------------------------------------------------

    def _on_subscribe(self, conn: ClientConnection, session: Session, packet: P.Subscribe) -> None:
        codes: list[int] = []
        granted: list[tuple[str, int]] = []
        writes = False
        for topic_filter, qos in packet.topics:
            try:
                validate_topic_filter(topic_filter)
            except TopicError as exc:
                if conn.protocol_level == P.MQTT_31:
                    raise P.ProtocolError(f"invalid topic filter: {exc}", packet="SUBSCRIBE") from None
                log.warning("client %s: SUBSCRIBE refused: %s", session.client_id, exc)
                codes.append(P.SUBACK_FAILURE)
                continue
            self.trie.add(topic_filter, session.client_id, qos)
            session.subscriptions[topic_filter] = qos
            if session.persistent:
                self.store.write("INSERT OR REPLACE INTO subscriptions VALUES (?, ?, ?)",
                                 (session.client_id, topic_filter, qos))
                writes = True
            codes.append(qos)
            granted.append((topic_filter, qos))
        suback = P.encode_suback(packet.packet_id, codes)
        if writes:
            conn.send_durable(suback)
        else:
            conn.send(suback)
        # retained publications for each new subscription, RETAIN set, QoS min(retained, granted)
        for topic_filter, qos in granted:
            for msg in self._retained_matching(topic_filter):
                self._deliver(session, msg, msg.qos if msg.qos < qos else qos, retain=True)
                self._release_if_unreferenced(msg)

    def _retained_matching(self, topic_filter: str) -> Iterator[Message]:
        if "+" not in topic_filter and "#" not in topic_filter:
            msg = self.retained.get(topic_filter)
            if msg is not None:
                yield msg
            return
        for topic, msg in list(self.retained.items()):
            if topic_matches(topic_filter, topic):
                yield msg

    def _on_unsubscribe(self, conn: ClientConnection, session: Session, packet: P.Unsubscribe) -> None:
        writes = False
        for topic_filter in packet.topics:
            if session.subscriptions.pop(topic_filter, None) is not None:
                self.trie.remove(topic_filter, session.client_id)
                if session.persistent:
                    self.store.write("DELETE FROM subscriptions WHERE client_id=? AND topic_filter=?",
                                     (session.client_id, topic_filter))
                    writes = True
        ack = P.encode_ack(P.UNSUBACK, packet.packet_id)
        if writes:
            conn.send_durable(ack)
        else:
            conn.send(ack)

    # -- connection end, sessions -------------------------------------------------------------------

    def connection_lost(self, conn: ClientConnection, reason: str) -> None:
        """The connection ended (any reason). Publishes the will unless the client sent DISCONNECT."""
        for cid in conn.held_by:   # no longer a publisher a route session holds
            held = self.holds.get(cid)
            if held is not None:
                held.discard(conn)
        conn.held_by.clear()
        client_id = conn.client_id
        if client_id is None or self.connections.get(client_id) is not conn:
            return
        del self.connections[client_id]
        will = conn.will
        conn.will = None
        session = conn.session
        if will is not None and will.topic.startswith("$"):
            # like any client publication: $ topics are reserved (else a will could forge $SYS values)
            log.warning("client %s: will to %s not published: $ topics are reserved", client_id, will.topic)
        elif will is not None:
            log.info("client %s: publishing will to %s (%s)", client_id, will.topic, reason)
            self.publish(Message(will.topic, will.payload, will.qos, will.retain, client_id, username=conn.username))
        if session is None:
            return
        session.detach()
        now = self.clock()
        session.last_seen = now
        if session.persistent:
            self.store.write("UPDATE sessions SET last_seen=? WHERE client_id=?", (now, client_id))
        else:
            self._drop_session(session)

    def _drop_session(self, session: Session) -> None:
        cid = session.client_id
        for topic_filter in session.subscriptions:
            self.trie.remove(topic_filter, cid)
        session.subscriptions.clear()
        session.discard_messages()
        if self.sessions.get(cid) is session:
            del self.sessions[cid]
        if session.persistent:
            for table in ("sessions", "subscriptions", "outbound", "inbound_qos2", "inbound_qos1"):
                self.store.write(f"DELETE FROM {table} WHERE client_id=?", (cid,))

    def delete_session(self, client_id: str) -> str:
        """Admin: delete an offline persistent session. Returns '' or the reason it cannot."""
        session = self.sessions.get(client_id)
        if session is None:
            return f"no session {client_id!r}"
        if client_id in self.connections:
            return f"session {client_id!r} is connected: disconnect the client first"
        self._drop_session(session)
        return ""

    def expire_sessions(self) -> int:
        now = self.clock()
        expired = [s for s in self.sessions.values()
                   if s.persistent and s.link is None and s.expiry_seconds
                   and now - s.last_seen > s.expiry_seconds]
        for session in expired:
            log.info("session %s expired after %.0f s idle", session.client_id, now - session.last_seen)
            self._drop_session(session)
        return len(expired)
