"""SUBSCRIBE and UNSUBSCRIBE: a session's subscriptions in the topic tree and the store.

``add``/``remove`` are the one way a subscription changes, for a client's SUBSCRIBE/UNSUBSCRIBE and for
a route's session (Broker.attach_route_session). A client's new subscription is sent the retained
messages it matches, RETAIN set, at QoS min(retained, granted). MQTT 3.1 closes the connection on an
invalid filter; 3.1.1 refuses that filter alone (SUBACK 0x80), except an empty one, which no topic filter
may be ([MQTT-4.7.3-1]): that closes the connection, as does any invalid filter in UNSUBSCRIBE, which has
no per-filter answer ([MQTT-4.8.0-1]: a protocol violation closes the connection).
"""
from __future__ import annotations

import logging

from bridge.mqtt import packets as P
from bridge.mqtt.connection import ClientConnection
from bridge.mqtt.messages import StoredMessages
from bridge.mqtt.publish import Publisher
from bridge.mqtt.retained import RetainedMessages
from bridge.mqtt.session import Session
from bridge.mqtt.store import Store
from bridge.mqtt.topics import SubscriptionTrie, TopicError, validate_topic_filter

log = logging.getLogger("mqbridge.broker")


class Subscriptions:
    """Subscriptions of all sessions: the session's table, the topic tree, the store rows."""

    def __init__(self, store: Store, trie: SubscriptionTrie, retained: RetainedMessages,
                 messages: StoredMessages, publisher: Publisher) -> None:
        self.store = store
        self.trie = trie
        self.retained = retained
        self.messages = messages
        self.publisher = publisher

    def add(self, session: Session, topic_filter: str, qos: int) -> bool:
        """Subscribe (or change the QoS). True: the store was written (a persistent session)."""
        self.trie.add(topic_filter, session.client_id, qos)
        session.subscriptions[topic_filter] = qos
        if session.persistent:
            self.store.save_subscription(session.client_id, topic_filter, qos)
            return True
        return False

    def remove(self, session: Session, topic_filter: str) -> bool:
        """Unsubscribe. True: the store was written."""
        if session.subscriptions.pop(topic_filter, None) is None:
            return False
        self.trie.remove(topic_filter, session.client_id)
        if session.persistent:
            self.store.delete_subscription(session.client_id, topic_filter)
            return True
        return False

    def remove_all(self, session: Session) -> None:
        """The session ends: out of the topic tree (its store rows go with the session's)."""
        cid = session.client_id
        for topic_filter in session.subscriptions:
            self.trie.remove(topic_filter, cid)
        session.subscriptions.clear()

    def on_subscribe(self, conn: ClientConnection, session: Session, packet: P.Subscribe) -> None:
        codes: list[int] = []
        granted: list[tuple[str, int]] = []
        writes = False
        for topic_filter, qos in packet.topics:
            try:
                validate_topic_filter(topic_filter)
            except TopicError as exc:
                if conn.protocol_level == P.MQTT_31 or not topic_filter:
                    raise P.ProtocolError(f"invalid topic filter: {exc}", packet="SUBSCRIBE") from None
                log.warning("client %s: SUBSCRIBE refused: %s", session.client_id, exc)
                codes.append(P.SUBACK_FAILURE)
                continue
            writes |= self.add(session, topic_filter, qos)
            codes.append(qos)
            granted.append((topic_filter, qos))
        suback = P.encode_suback(packet.packet_id, codes)
        if writes:
            conn.send_durable(suback)
        else:
            conn.send(suback)
        deliver = self.publisher.deliver
        release_if_unreferenced = self.messages.release_if_unreferenced
        for topic_filter, qos in granted:
            for msg in self.retained.matching(topic_filter):
                deliver(session, msg, msg.qos if msg.qos < qos else qos, retain=True)
                release_if_unreferenced(msg)

    def on_unsubscribe(self, conn: ClientConnection, session: Session, packet: P.Unsubscribe) -> None:
        for topic_filter in packet.topics:
            try:
                validate_topic_filter(topic_filter)
            except TopicError as exc:
                raise P.ProtocolError(f"invalid topic filter: {exc}", packet="UNSUBSCRIBE") from None
        writes = False
        for topic_filter in packet.topics:
            writes |= self.remove(session, topic_filter)
        ack = P.encode_ack(P.UNSUBACK, packet.packet_id)
        if writes:
            conn.send_durable(ack)
        else:
            conn.send(ack)
