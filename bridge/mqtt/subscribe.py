"""SUBSCRIBE and UNSUBSCRIBE: a session's subscriptions in the topic tree and the store.

``add``/``remove`` are the one way a subscription changes, for a client's SUBSCRIBE/UNSUBSCRIBE and for
a route's session (Broker.attach_route_session). A client's new subscription is sent the retained
messages it matches, RETAIN set, at QoS min(retained, granted). MQTT 3.1 closes the connection on an
invalid filter; 3.1.1 refuses that filter alone (SUBACK 0x80), except an empty one, which no topic filter
may be ([MQTT-4.7.3-1]): that closes the connection, as does any invalid filter in UNSUBSCRIBE, which has
no per-filter answer ([MQTT-4.8.0-1]: a protocol violation closes the connection).

MQTT 5 (§3.8-3.11): the subscription options No Local, Retain As Published and Retain Handling (0: send
the retained messages, 1: only for a new subscription, 2: never), a Subscription Identifier carried by
the deliveries it causes, reason codes per filter in SUBACK and UNSUBACK (0x8F Topic Filter invalid, 0x11
No subscription existed). Shared subscriptions ``$share/{name}/{filter}`` (shared.py) join a group: no
retained messages are sent for them (§4.8.2), and No Local on one is a Protocol Error.
"""
from __future__ import annotations

import logging

from bridge.mqtt import packets as P
from bridge.mqtt import properties as PR
from bridge.mqtt.acl import Verdict
from bridge.mqtt.connection import ClientConnection
from bridge.mqtt.messages import StoredMessages
from bridge.mqtt.publish import Publisher
from bridge.mqtt.retained import RetainedMessages
from bridge.mqtt.session import Session
from bridge.mqtt.shared import SharedGroups, parse_shared
from bridge.mqtt.store import Store
from bridge.mqtt.topics import NO_LOCAL, SHARED_GROUP, SubscriptionTrie, TopicError, validate_topic_filter

log = logging.getLogger("mqbridge.broker")


def _verdict(session: Session, topic_filter: str) -> Verdict:
    """How much of ``topic_filter`` the session's ACL lets it read (ALL without an ACL)."""
    return session.acl.subscribe(topic_filter) if session.acl is not None else Verdict.ALL


class Subscriptions:
    """Subscriptions of all sessions: the session's table, the topic tree, the store rows."""

    def __init__(self, store: Store, trie: SubscriptionTrie, retained: RetainedMessages,
                 messages: StoredMessages, publisher: Publisher, shared: SharedGroups) -> None:
        self.store = store
        self.shared = shared
        self.trie = trie
        self.retained = retained
        self.messages = messages
        self.publisher = publisher

    def add(self, session: Session, topic_filter: str, qos: int, options: int | None = None,
            sub_id: int | None = None) -> bool:
        """Subscribe (or change the QoS and options). True: the store was written (a persistent session)."""
        if options is None:
            options = qos
        self.restore(session, topic_filter, options, sub_id)
        if session.persistent:
            self.store.save_subscription(session.client_id, topic_filter, options, sub_id)
            return True
        return False

    def remove(self, session: Session, topic_filter: str) -> bool:
        """Unsubscribe. True: the store was written."""
        if session.subscriptions.pop(topic_filter, None) is None:
            return False
        self._untree(topic_filter, session.client_id)
        if session.persistent:
            self.store.delete_subscription(session.client_id, topic_filter)
            return True
        return False

    def remove_all(self, session: Session) -> None:
        """The session ends: out of the topic tree (its store rows go with the session's)."""
        cid = session.client_id
        for topic_filter in session.subscriptions:
            self._untree(topic_filter, cid)
        session.subscriptions.clear()

    def restore(self, session: Session, topic_filter: str, options: int, sub_id: int | None) -> None:
        """A subscription in the session and the topic tree (a shared one: in its group), not the store.
        Under an ACL, a subscription that may read only some of its topics has each one checked; a shared one
        must be able to read all (its group delivers to one member, unchecked)."""
        group = parse_shared(topic_filter)
        verdict = _verdict(session, group[1] if group else topic_filter)
        if group is not None:
            if verdict is not Verdict.ALL:
                self._leave_unreadable(session, topic_filter)
                return
            if self.shared.join(topic_filter, session.client_id, options & 3, options, sub_id):
                self.trie.add(group[1], topic_filter, 2, SHARED_GROUP)
        else:
            self.trie.add(topic_filter, session.client_id, options & 3, options, sub_id, verdict is not Verdict.ALL)
        session.subscriptions[topic_filter] = options

    def apply_acl(self, session: Session) -> None:
        """The session's ACL rules changed (a CONNECT, a reload): its subscriptions are checked again."""
        for topic_filter, options in list(session.subscriptions.items()):
            group = parse_shared(topic_filter)
            if group is None:
                sub = self.trie.get(topic_filter, session.client_id)
                self.restore(session, topic_filter, options, sub.sub_id if sub is not None else None)
            elif _verdict(session, group[1]) is not Verdict.ALL:
                self._leave_unreadable(session, topic_filter)

    def _leave_unreadable(self, session: Session, topic_filter: str) -> None:
        log.warning("client %s: shared subscription %r left: its ACL does not let it read every topic of it",
                    session.client_id, topic_filter)
        self.remove(session, topic_filter)

    def _untree(self, topic_filter: str, client_id: str) -> None:
        group = parse_shared(topic_filter)
        if group is None:
            self.trie.remove(topic_filter, client_id)
        elif self.shared.leave(topic_filter, client_id):
            self.trie.remove(group[1], topic_filter)

    def on_subscribe(self, conn: ClientConnection, session: Session, packet: P.Subscribe) -> None:
        v5 = conn.protocol_level == P.MQTT_5
        sub_id = (packet.properties or {}).get(PR.SUBSCRIPTION_IDENTIFIER) if v5 else None
        codes: list[int] = []
        problems: list[str] = []   # why each refused filter was refused: the SUBACK's Reason String
        granted: list[tuple[str, int]] = []
        writes = False
        for topic_filter, options in packet.topics:
            qos = options & 3
            try:
                shared = parse_shared(topic_filter)
                if shared is None:
                    validate_topic_filter(topic_filter)
            except TopicError as exc:
                if conn.protocol_level == P.MQTT_31 or not topic_filter:
                    raise P.ProtocolError(f"invalid topic filter: {exc}", packet="SUBSCRIBE") from None
                log.warning("client %s: SUBSCRIBE refused: %s", session.client_id, exc)
                codes.append(P.Reason.TOPIC_FILTER_INVALID if v5 else P.SUBACK_FAILURE)
                problems.append(f"{topic_filter!r}: {exc}")
                continue
            if shared is not None and v5 and options & NO_LOCAL:
                raise P.ProtocolError(f"No Local on the shared subscription {topic_filter!r}", packet="SUBSCRIBE")
            verdict = _verdict(session, shared[1] if shared else topic_filter)
            if verdict is Verdict.NONE or shared is not None and verdict is not Verdict.ALL:
                self.publisher.stats.acl_denied_subscribe += 1
                log.info("client %s (user %s): SUBSCRIBE %r refused by the ACL", session.client_id, session.username,
                         topic_filter)
                codes.append(P.Reason.NOT_AUTHORIZED if v5 else P.SUBACK_FAILURE)
                problems.append(f"{topic_filter!r}: not authorized")
                continue
            existed = topic_filter in session.subscriptions
            writes |= self.add(session, topic_filter, qos, options, sub_id)
            codes.append(qos)
            handling = (options >> 4) & 3
            if shared is None and (handling == 0 or handling == 1 and not existed):
                granted.append((topic_filter, qos))
        if not v5:
            suback = P.encode_suback(packet.packet_id, codes)
        elif problems:
            suback = conn.refusal(lambda props: P.encode_suback5(packet.packet_id, codes, props),
                                  "refused: " + "; ".join(problems))
        else:
            suback = P.encode_suback5(packet.packet_id, codes)
        if writes:
            conn.send_durable(suback)
        else:
            conn.send(suback)
        deliver = self.publisher.deliver
        release_if_unreferenced = self.messages.release_if_unreferenced
        ids = [sub_id] if sub_id else None
        acl = session.acl
        for topic_filter, qos in granted:
            for msg in self.retained.matching(topic_filter):
                if acl is not None and not acl.may_read(msg.topic):
                    continue
                deliver(session, msg, msg.qos if msg.qos < qos else qos, True, ids)
                release_if_unreferenced(msg)

    def on_unsubscribe(self, conn: ClientConnection, session: Session, packet: P.Unsubscribe) -> None:
        v5 = conn.protocol_level == P.MQTT_5
        codes: list[int] = []
        problems: list[str] = []
        for topic_filter in packet.topics:
            try:
                validate_topic_filter(topic_filter)
            except TopicError as exc:
                if not v5 or not topic_filter:
                    raise P.ProtocolError(f"invalid topic filter: {exc}", packet="UNSUBSCRIBE") from None
                codes.append(P.Reason.TOPIC_FILTER_INVALID)
                problems.append(f"{topic_filter!r}: {exc}")
                continue
            existed = topic_filter in session.subscriptions
            codes.append(P.Reason.SUCCESS if existed else P.Reason.NO_SUBSCRIPTION_EXISTED)
        writes = False
        for topic_filter, code in zip(packet.topics, codes, strict=True):
            if code == P.Reason.SUCCESS or not v5:
                writes |= self.remove(session, topic_filter)
        if not v5:
            ack = P.encode_ack(P.UNSUBACK, packet.packet_id)
        elif problems:
            ack = conn.refusal(lambda props: P.encode_unsuback5(packet.packet_id, codes, props),
                               "refused: " + "; ".join(problems))
        else:
            ack = P.encode_unsuback5(packet.packet_id, codes)
        if writes:
            conn.send_durable(ack)
        else:
            conn.send(ack)
