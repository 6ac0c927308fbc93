"""Retained publications: the last retained message per topic, kept in memory and in the store.

An empty retained publication clears the topic's retained message. ``$SYS`` values are retained in
memory only (rebuilt at start). A new subscription is sent the retained messages its filter matches
(Subscriptions.on_subscribe).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

from bridge.mqtt.properties import pack, unpack
from bridge.mqtt.session import Message
from bridge.mqtt.store import Store, StoredPublication
from bridge.mqtt.topics import topic_matches


class RetainedMessages:
    """Topic -> the retained publication, with its store rows."""

    __slots__ = ("messages", "_store", "_clock")

    def __init__(self, store: Store, clock: Callable[[], float]) -> None:
        self.messages: dict[str, Message] = {}
        self._store = store
        self._clock = clock

    def __len__(self) -> int:
        return len(self.messages)

    def recover(self, retained: dict[str, StoredPublication]) -> None:
        for topic, r in retained.items():
            self.messages[topic] = Message(topic, r.payload, r.qos, True, r.origin, props=unpack(r.props),
                                           expires=r.expires)

    def set(self, msg: Message, persist: bool = True) -> bool:
        """Retain ``msg`` for its topic (or clear the topic: empty payload). True: the store was written."""
        topic = msg.topic
        if not msg.payload:
            if self.messages.pop(topic, None) is not None and persist:
                self._store.delete_retained(topic)
                return True
            return False
        self.messages[topic] = msg
        if persist:
            self._store.save_retained(topic, msg.payload, msg.qos, msg.origin, self._clock(), pack(msg.props),
                                      msg.expires)
        return persist

    def matching(self, topic_filter: str) -> Iterator[Message]:
        """The retained messages ``topic_filter`` matches; an expired one (MQTT 5 Message Expiry) is
        deleted instead."""
        now = self._clock()
        if "+" not in topic_filter and "#" not in topic_filter:
            msg = self.messages.get(topic_filter)
            if msg is not None and not self._expired(msg, now):
                yield msg
            return
        for topic, msg in list(self.messages.items()):
            if topic_matches(topic_filter, topic) and not self._expired(msg, now):
                yield msg

    def _expired(self, msg: Message, now: float) -> bool:
        if msg.expires is None or msg.expires > now:
            return False
        if self.messages.get(msg.topic) is msg:
            del self.messages[msg.topic]
            self._store.delete_retained(msg.topic)
        return True
