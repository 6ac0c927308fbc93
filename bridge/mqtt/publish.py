"""PUBLISH and PUBREL from clients, and routing a publication to the sessions it matches.

The hot path of the broker: one publication is matched once against the subscription tree and handed
to each matching session (QoS min(publication, subscription)); a QoS 1/2 delivery to a persistent
session stores the message first, and the acknowledgement (PUBACK, PUBREC, PUBCOMP) leaves only once
what it acknowledges is committed. WebSphere MQ Telemetry docs "Qualities of service provided by an
MQTT client" (QoS 2: stored until PUBREL, published then, once); MQTT 3.1.1 §4.4 for a QoS 1 re-send.
"""
from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable

from bridge.config import BrokerConfig
from bridge.mqtt import identity
from bridge.mqtt import packets as P
from bridge.mqtt.acl import Grants
from bridge.mqtt.connection import ClientConnection
from bridge.mqtt.incoming import publish_properties
from bridge.mqtt.messages import StoredMessages
from bridge.mqtt.properties import pack
from bridge.mqtt.retained import RetainedMessages
from bridge.mqtt.session import Message, Session
from bridge.mqtt.shared import SharedGroups
from bridge.mqtt.shared_guard import SharedGuards
from bridge.mqtt.stats import BrokerStats
from bridge.mqtt.store import RELEASED, SENT, Store
from bridge.mqtt.topics import (
    ACL_CHECK,
    RETAIN_AS_PUBLISHED,
    SHARED_GROUP,
    SubscriptionTrie,
    TopicError,
    validate_topic_name,
)

log = logging.getLogger("mqbridge.broker")

LISTENER_CONTROL_PREFIX = "$SYS/SCADA/MQIsdpListener/"
# MQ Telemetry Table 4: a client's subscription to this topic sets the QoS of messages sent to it without one
DEFAULT_QOS_FILTER = "DEFAULT.QoS"


def unreadable(session: Session, grant: int, topic: str) -> bool:
    """A subscription only partly readable under the ACL (ACL_CHECK) matched a topic its client may not read."""
    return bool(grant & ACL_CHECK) and (session.acl is None or not session.acl.may_read(topic))


def publication_digest(topic_b: bytes, payload: bytes, qos: int, retain: bool) -> bytes:
    """What identifies a publication's content for re-send detection: BLAKE2b-128 of topic, QoS, retain
    and payload (the topic length first, so no topic/payload split can collide)."""
    h = hashlib.blake2b(len(topic_b).to_bytes(2, "big"), digest_size=16)
    h.update(topic_b)
    h.update(bytes((qos, int(retain))))
    h.update(payload)
    return h.digest()


class Publisher:
    """Takes publications in (from clients, wills, routes) and delivers them to sessions."""

    def __init__(self, config: BrokerConfig, store: Store, sessions: dict[str, Session], trie: SubscriptionTrie,
                 retained: RetainedMessages, messages: StoredMessages, pressing: list[Session],
                 stats: BrokerStats, shared: SharedGroups, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.store = store
        self.sessions = sessions
        self.trie = trie
        self.retained = retained
        self.messages = messages
        self.pressing = pressing     # FlowControl.pressing: pushing-back sessions a delivery reached
        self.stats = stats
        self.shared = shared
        self.guards = SharedGuards(store, messages.release)   # clean members' shared deliveries, durable
        self.clock = clock
        # set by the server: ``$SYS/SCADA/MQIsdpListener/<port>|all`` ON/OFF -> what changed
        self.listener_control: Callable[[str, bool], list[str]] | None = None
        # a client's ACL rules now (Authenticator.grants, set by the broker): for wills, published later
        self.grants: Callable[[str, str | None, str | None], Grants | None] = lambda client_id, user, via: None

    # -- from clients -------------------------------------------------------------------------------

    def on_publish(self, conn: ClientConnection, packet: P.Publish) -> None:
        session = conn.session
        if session is None:
            raise P.ProtocolError("PUBLISH before CONNECT", packet="PUBLISH")
        topic = packet.topic
        props = packet.properties
        expires = None
        if props is not None:
            topic, props, expires = publish_properties(conn, topic, props, self.clock())
        try:
            validate_topic_name(topic)
        except TopicError as exc:
            raise P.ProtocolError(str(exc), packet="PUBLISH", code=P.Reason.TOPIC_NAME_INVALID) from None
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
        if session.acl is not None and not session.acl.may_publish(topic):
            self._denied(conn, session, topic, qos, packet.packet_id)
            return
        # Message(topic, payload, qos, retain, origin, store_id, username, key_id, redelivery, packet_id, props,
        # expires, user_via, items) by position: 0.4 against 0.75 us with keywords (tests/test_mqtt_message_init.py)
        if qos == 0:
            self.publish(Message(topic, packet.payload, 0, packet.retain, conn.client_id, None, conn.username, None,
                                 0, None, props, expires, conn.user_via, packet.forward if props else None))
            return
        pid = packet.packet_id
        assert pid is not None
        if conn.protocol_level == P.MQTT_5 and not self._within_receive_maximum(conn, session):
            return
        if qos == 1:
            msg = Message(topic, packet.payload, 1, packet.retain, conn.client_id, None, conn.username, None, 0, pid,
                          props, expires, conn.user_via, packet.forward if props else None)
            ack = P.encode_ack(P.PUBACK, pid)
            msg.waits = []   # route sinks may take it (sink.py)
            if session.persistent:
                writes = self._publish_qos1_persistent(session, msg, pid, packet.dup)
            else:   # a clean session cannot re-send after a reconnect: nothing to remember
                writes = self.publish(msg)
            self._acknowledge(conn, ack, writes, msg)
            return
        # QoS 2: store until PUBREL, publish then, once
        ack = P.encode_ack(P.PUBREC, pid)
        inbound = session.take_inbound()
        if pid in inbound.qos2:
            conn.send(ack)   # a re-sent PUBLISH (DUP): acknowledge again, publish nothing
            return
        msg = Message(topic, packet.payload, 2, packet.retain, conn.client_id, None, conn.username, None, 0, pid,
                      props, expires, conn.user_via, packet.forward if props else None)
        if not self._may_hold_inbound(conn, session, msg):
            return
        inbound.hold(pid, msg)
        if session.persistent:
            inbound.ops[pid] = self.store.save_inbound_qos2(session.client_id, pid, topic, packet.payload,
                                                                    packet.retain, pack(props), expires)
            conn.send_durable(ack)
        else:
            conn.send(ack)

    def _denied(self, conn: ClientConnection, session: Session, topic: str, qos: int, pid: int | None) -> None:
        """The ACL does not let the client publish to ``topic``: the publication is acknowledged (MQTT 5: with
        0x87 Not authorized) and not routed, as mosquitto does, and counted."""
        self.stats.acl_denied_publish += 1
        log.debug("client %s (user %s): PUBLISH to %r denied by the ACL", conn.client_id, session.username, topic)
        if qos and pid is not None:
            ack = P.PUBACK if qos == 1 else P.PUBREC
            if conn.protocol_level == P.MQTT_5:
                conn.send(conn.refusal(lambda props: P.encode_ack5(ack, pid, P.Reason.NOT_AUTHORIZED, props),
                                       f"not authorized to publish to {topic!r}"))
            else:
                conn.send(P.encode_ack(ack, pid))

    def _within_receive_maximum(self, conn: ClientConnection, session: Session) -> bool:
        """MQTT 5 §4.9: a client may have at most the Receive Maximum the CONNACK announced
        (``limits.max_inbound_qos2``) QoS 1 and 2 publications the server has not answered with PUBACK or
        PUBCOMP; one more closes the connection with DISCONNECT 0x93 (Receive Maximum exceeded) once the
        answers it was owed have left (what they acknowledge is committed), and this one is not taken (no
        acknowledgement: the client still owns it). The answers wait for store commits (``send_gated``)."""
        limit = self.config.limits.max_inbound_qos2
        inbound = session.inbound
        qos2 = len(inbound.qos2) if inbound is not None else 0   # PUBREC sent, no PUBREL yet
        if conn.held_count() + qos2 < limit:   # the held items bound the held answers: the common case
            return True
        owed = conn.held_acks() + qos2
        if owed < limit:
            return True
        self.stats.receive_maximum_exceeded += 1
        reason = f"{owed} QoS 1/2 publications not yet acknowledged, beyond the Receive Maximum of {limit}"
        log.warning("client %s (%s): closing: %s", conn.client_id, conn.peer, reason)
        conn.abort_after_commit(reason, P.Reason.RECEIVE_MAXIMUM_EXCEEDED)
        return False

    def _may_hold_inbound(self, conn: ClientConnection, session: Session, msg: Message) -> bool:
        """A client may leave at most max_inbound_qos2 QoS 2 publications (and max_queued_bytes of them)
        unreleased. One more closes the connection, unacknowledged: no PUBREC, so the client still owns
        it (it sends it again after reconnecting to a persistent session). MQTT 5 calls this "Receive
        Maximum exceeded"; 3.1.1 has no code for it."""
        limits = self.config.limits
        held = len(session.take_inbound().qos2)
        if held < limits.max_inbound_qos2 and session.inbound_bytes + msg.size() <= limits.max_queued_bytes:
            return True
        self.stats.inbound_qos2_refused += 1
        reason = (f"{held} QoS 2 publications ({session.inbound_bytes} bytes) not released (no PUBREL): limits "
                  f"max_inbound_qos2 {limits.max_inbound_qos2}, max_queued_bytes {limits.max_queued_bytes}")
        log.warning("client %s (%s): closing: %s", conn.client_id, conn.peer, reason)
        code = P.Reason.RECEIVE_MAXIMUM_EXCEEDED if held >= limits.max_inbound_qos2 else P.Reason.QUOTA_EXCEEDED
        conn.abort_after_commit(reason, code)   # the PUBRECs of the ones it holds leave first
        return False

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
        PUBACK lost to a crash still finds it after the restart (a route sink's publication: that commit and
        the sink's, which its PUBACK waits for). Returns whether the store was written."""
        index = session.take_inbound().qos1
        digest = publication_digest(msg.topic_b, msg.payload, 1, msg.retain)
        if dup:
            entry = index.get(pid)
            if entry is not None and entry[2] == digest:
                msg.key_id = entry[0]
                msg.redelivery = entry[1] + 1
                self.stats.resends_recognised += 1
        writes = self.publish(msg)
        key = msg.key()
        if key is not None and (msg.store_id is not None or msg.waits):   # stored, or taken by a route sink
            index[pid] = (key, msg.redelivery, digest)
            self.store.save_inbound_qos1(session.client_id, pid, key, msg.redelivery, digest)
            writes = True
        elif index.pop(pid, None) is not None:
            # not stored (no durable delivery): no key to keep, and the older entry is obsolete
            self.store.delete_inbound_qos1(session.client_id, pid)
            writes = True
        return writes

    def on_pubrel(self, conn: ClientConnection, session: Session, pid: int) -> None:
        inbound = session.inbound
        msg = inbound.release(pid) if inbound is not None else None
        writes = False
        if msg is not None:
            msg.waits = []   # route sinks may take it (sink.py)
            writes = self.publish(msg)
            if session.persistent and not self.store.cancel(inbound.ops.pop(pid, None)):  # type: ignore[union-attr]
                self.store.delete_inbound_qos2(session.client_id, pid)
                writes = True
        elif conn.protocol_level == P.MQTT_5:   # not held (released before: a PUBCOMP lost), §3.7.2.1
            conn.send(P.encode_ack5(P.PUBCOMP, pid, P.Reason.PACKET_IDENTIFIER_NOT_FOUND))
            return
        self._acknowledge(conn, P.encode_ack(P.PUBCOMP, pid), writes, msg)

    def _acknowledge(self, conn: ClientConnection, ack: bytes, writes: bool, msg: Message | None) -> None:
        """The acknowledgement of a routed publication leaves once what holds it is committed: the broker's
        store (``writes``) and the commits of the route sinks that took it (``msg.waits``)."""
        waits = None
        if msg is not None:
            waits, msg.waits = msg.waits, None   # later deliveries of it (a handover, a retry) are not offered
        if waits:
            if writes:
                waits.append(self.store.after_commit)
            conn.send_gated(ack, waits, True)
        elif writes:
            conn.send_durable(ack, True)
        else:
            conn.send(ack)

    # -- routing ------------------------------------------------------------------------------------

    def publish(self, msg: Message) -> bool:
        """Route a publication to every matching session; returns True when it wrote to the store."""
        writes = False
        if msg.retain:
            writes = self.retained.set(msg)
        trie = self.trie
        ids: dict[str, list[int]] | None = {} if trie.special else None
        matches = trie.match(msg.topic, msg.origin, ids)
        if matches:
            sessions = self.sessions
            deliver = self.deliver
            mqos = msg.qos
            if not mqos and not ids:
                writes |= self._fan_out_qos0(msg, matches)
                self.messages.release_if_unreferenced(msg)
                return writes
            for client_id, grant in matches.items():
                if grant > 3 or ids:   # Retain As Published, a shared group, Subscription Identifiers
                    writes |= self._deliver_special(client_id, grant, msg, ids)
                    continue
                session = sessions.get(client_id)   # the hot path: a plain subscription
                if session is not None:
                    qos = grant if grant < mqos else mqos
                    if qos:
                        writes |= deliver(session, msg, qos)
                    else:
                        session.deliver(msg, 0)   # what ``deliver`` does for QoS 0, one call fewer
            self.messages.release_if_unreferenced(msg)
        return writes

    def _fan_out_qos0(self, msg: Message, matches: dict[str, int]) -> bool:
        """A QoS 0 publication (no Subscription Identifiers matched) to its subscribers. For a plain subscriber
        whose connection is not held, traced or closed, what ``Session.deliver(msg, 0)`` and
        ``ClientConnection.send_qos0`` do is done here, inline: those two calls per subscriber (and asking the
        transport each time, queue_qos0) were about a fifth of the fan-out's time on asyncio's loop
        (bench/HISTORY.md, session 18). Any other subscriber (absent, a
        route, a Topic Alias or a Maximum Packet Size to consider, a held connection) goes the general way.
        tests/test_fanout_qos0.py holds the two ways to the same bytes and counters."""
        writes = False
        sessions = self.sessions
        data5 = msg.qos0_5      # the level 5 bytes, once the first plain level 5 delivery encoded them
        data4: bytes | None = None
        for client_id, grant in matches.items():
            if grant > 3:   # Retain As Published, a shared group
                writes |= self._deliver_special(client_id, grant, msg, None)
                continue
            session = sessions.get(client_id)
            if session is None:
                continue
            link = session.link
            # Session.deliver's and ClientConnection.send_qos0's own conditions for their short way (keep in step)
            if (link.__class__ is not ClientConnection or session.direct is not None
                    or link._held or link.trace or link.closed):  # type: ignore[union-attr]
                session.deliver(msg, 0)
                continue
            if session.protocol_level == 5:
                data = data5
                if data is None or session.aliases_out or len(data) > session.max_packet_out:
                    session.deliver(msg, 0)
                    data5 = msg.qos0_5
                    continue
            else:
                data = data4
                if data is None:
                    data = data4 = msg.qos0_bytes()
            if link.port.queue_qos0(data, link._qos0_limit):  # type: ignore[union-attr]
                link.packets_out += 1   # type: ignore[union-attr]
                link.bytes_out += len(data)   # type: ignore[union-attr]
                session.stats.sent += 1
            else:
                session.stats.dropped += 1
                if msg.drops is not None:
                    msg.drops.append(client_id)
        return writes

    def _deliver_special(self, client_id: str, grant: int, msg: Message, ids: dict[str, list[int]] | None) -> bool:
        if grant & SHARED_GROUP:
            return self.deliver_shared(client_id, msg)
        session = self.sessions.get(client_id)
        if session is None:
            return False
        if unreadable(session, grant, msg.topic):
            return False
        qos = grant & 3
        return self.deliver(session, msg, qos if qos < msg.qos else msg.qos,
                            msg.retain and bool(grant & RETAIN_AS_PUBLISHED), ids.get(client_id) if ids else None)

    def deliver_shared(self, key: str, msg: Message, exclude: str | None = None) -> bool:
        """A publication for the shared subscription ``key``: to the one member ``SharedGroups.pick`` chooses."""
        chosen = self.shared.pick(key, self.sessions, exclude)
        if chosen is None:
            return False
        client_id, member = chosen
        qos = member.qos if member.qos < msg.qos else msg.qos
        retain = msg.retain and bool(member.options & RETAIN_AS_PUBLISHED)
        ids = [member.sub_id] if member.sub_id else None
        return self.deliver(self.sessions[client_id], msg, qos, retain, ids, key)

    def _outlived(self, key: str) -> bool:
        """Whether group ``key`` has a persistent member: one that a restart leaves in the group."""
        sessions = self.sessions
        for cid in self.shared.members.get(key, ()):
            member = sessions.get(cid)
            if member is not None and member.persistent:
                return True
        return False

    def recover_shared(self) -> None:
        """After a restart: what clean members held from shared subscriptions when the gateway stopped goes
        to the groups' members now (MQTT 5.0 §4.8.2); a group left without members drops it, logged."""
        guards = self.guards
        recovered, lost = guards.take()
        handed = gone = 0
        for key, msg, seq in recovered:
            if self.deliver_shared(key, msg):   # True: given to a (persistent) member, which stores it
                handed += 1
            else:
                gone += 1
            guards.drop(key, seq, None, msg)   # after the member's row: a crash in between sends it twice
        for key, msg, seq in lost:
            guards.drop(key, seq, None, msg)
        if lost:
            self.stats.shared_qos2_lost += len(lost)
            log.warning("%d QoS 2 deliveries of shared subscriptions were sent to clean members, unacknowledged, when "
                        "the gateway stopped: not sent to another member (MQTT 5.0 §4.8.2), lost", len(lost))
        if handed:
            log.info("recovered %d deliveries of shared subscriptions that clean members held at the last stop: "
                     "handed to the groups' members", handed)
        if gone:
            log.warning("%d deliveries of shared subscriptions that clean members held at the last stop have no "
                        "member left in their group: dropped", gone)

    def reassign(self, session: Session) -> None:
        """``session`` ends (it left the groups already; a persistent member that is only disconnected stays
        a member and keeps its deliveries): what it still held from shared subscriptions goes to another
        member of each group, as MQTT 5.0 §4.8.2 says, except a QoS 2 delivery whose PUBLISH it was sent and
        did not answer with a PUBREC: that one must be completed to this client only [MQTT-4.8.2-4] and,
        its session ended, sent to no other [MQTT-4.8.2-5], so it ends here (counted, logged). Queued ones
        and QoS 1 ones whose PUBACK did not come go to another member (at least once); a released one
        (PUBREC received) was delivered."""
        last = 0   # held for a group it was the last member of: they end with it, as a clean session's do
        lost = 0   # QoS 2 sent, no PUBREC
        for out in session.deliveries():
            if out.shared is None or out.state == RELEASED:
                continue
            if not self.shared.members.get(out.shared):
                last += 1
            elif out.qos == 2 and out.state == SENT:
                lost += 1
            else:
                self.deliver_shared(out.shared, out.msg, exclude=session.client_id)
        if lost:
            self.stats.shared_qos2_lost += lost
            log.warning("session %s ended with %d QoS 2 deliveries of shared subscriptions sent and not "
                        "acknowledged (no PUBREC): not sent to another member (MQTT 5.0 §4.8.2), lost",
                        session.client_id, lost)
        if last:
            log.info("session %s ended holding %d deliveries of shared subscriptions it was the last member of",
                     session.client_id, last)

    def deliver(self, session: Session, msg: Message, qos: int, retain: bool = False,
                sub_ids: list[int] | None = None, shared: str | None = None) -> bool:
        """One delivery; a QoS 1/2 delivery to a persistent session stores the message first, unless the
        session is a route whose sink takes a client's publication itself (sink.py), or the publication is a
        route's whose source holds it while a connected client's QoS 1 delivery is in flight (source_hold.py)."""
        writes = False
        sink = session.sink
        if sink is not None and qos and msg.waits is not None and not session.queue and not session.inflight \
                and sink.room():
            if msg.key_id is None:   # its message key, as if it had been stored (a re-send keeps the first's)
                msg.key_id, writes = self.messages.reserve_id()
            gate = sink.take(msg, qos)
            if gate is not None:
                msg.waits.append(gate)
            return writes
        hold = None
        if qos and session.persistent:
            held = msg.held
            if held is not None and qos == 1 and shared is None and msg.store_id is None \
                    and session.link is not None and session.direct_out is None:
                # a route's publication to a connected client: its source holds it until the PUBACK
                hold = lambda out: held.take(session, out)  # noqa: E731
            else:
                if msg.store_id is None:
                    self.messages.store(msg)
                writes = True
        elif qos and shared is not None and self._outlived(shared):
            if msg.store_id is None:   # a clean member's: kept until it acknowledges (shared_guard.py)
                self.messages.store(msg)
            writes = True
            guards = self.guards
            hold = lambda out: guards.hold(shared, out)  # noqa: E731
        session.deliver(msg, qos, retain, sub_ids, shared, hold)
        if qos and session.pushing_back:
            self.pressing.append(session)
        return writes

    def deliver_to_client(self, client_id: str, msg: Message, default_qos: int = 2) -> int | None:
        """MQ Telemetry Table 4: a message sent to one client without a subscription, at most at the QoS
        the client granted itself by subscribing to ``DEFAULT.QoS`` (exactly that filter; a shared or
        wildcard one does not count), else at most ``default_qos`` (the route's). Returns the QoS it was
        delivered at; None: the client has no session."""
        session = self.sessions.get(client_id)
        if session is None:
            return None
        options = session.subscriptions.get(DEFAULT_QOS_FILTER)
        limit = default_qos if options is None else options & 3
        qos = msg.qos if msg.qos < limit else limit
        self.deliver(session, msg, qos)
        self.messages.release_if_unreferenced(msg)
        return qos

    # -- $ topics -----------------------------------------------------------------------------------

    def _on_system_publish(self, conn: ClientConnection, packet: P.Publish) -> None:
        """Clients may not publish into ``$`` topics, except the listener control of WebSphere MQ
        Telemetry ("Starting and stopping listeners")."""
        topic = packet.topic
        if topic.startswith(LISTENER_CONTROL_PREFIX):
            target = topic[len(LISTENER_CONTROL_PREFIX):]
            command = packet.payload.strip().upper()
            checked = identity.checked(conn.user_via)
            if not checked or conn.username not in self.config.listener_control_users:
                log.warning("client %s (user %s%s) may not control listeners (%s %r): ignored", conn.client_id,
                            conn.username, "" if checked else ", not authenticated", topic,
                            packet.payload[:16])
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
        self.retained.set(msg, persist=False)
        for client_id, grant in self.trie.match(topic).items():
            session = self.sessions.get(client_id)
            if session is None or unreadable(session, grant, topic):
                continue
            session.deliver(msg, 0)
