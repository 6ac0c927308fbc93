"""Stored publications: the messages table, message ids and their reservation.

A QoS 1/2 publication is stored once, when its first delivery to a persistent session needs it, and
deleted (or its insert withdrawn before the writer took it) when the last delivery referring to it ends.
Its id is its message key (``mqtt:<id>``), so ids are reserved durably a block at a time and never come
back after a restart, even when the messages table is empty again.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from bridge.mqtt.properties import pack
from bridge.mqtt.session import Message
from bridge.mqtt.store import Store

log = logging.getLogger("mqbridge.broker")

MESSAGE_ID_BLOCK = 65_536   # message ids reserved in the store per write


class StoredMessages:
    """Stores and releases the broker's durable publications."""

    __slots__ = ("_store", "_clock", "_next_id", "_reserved")

    def __init__(self, store: Store, clock: Callable[[], float]) -> None:
        self._store = store
        self._clock = clock
        self._next_id = 1
        self._reserved = 0     # ids below this are reserved in the store (meta message_id_reserved)

    def recover(self, next_id: int, messages: Iterable[Message]) -> None:
        """After a restart: continue from ``next_id``; delete the messages no delivery refers to any more
        (a crash between writes)."""
        self._next_id = next_id
        self._reserved = 0
        for msg in messages:
            if msg.refs == 0:
                self._store.delete_message(msg.store_id)

    @property
    def next_id(self) -> int:
        """The id the next stored message gets: every message stored so far has a smaller one."""
        return self._next_id

    def reserve_id(self) -> tuple[int, bool]:
        """A message id that no stored message has or will have, also after a restart (a route sink's
        message key: bridge.mqtt.sink), and whether the store was written to reserve it (a new block: the
        id may be used durably only after that commit)."""
        mid = self._next_id
        self._next_id += 1
        if mid < self._reserved:
            return mid, False
        self._reserved = mid + MESSAGE_ID_BLOCK
        self._store.reserve_message_ids(self._reserved)
        return mid, True

    def store(self, msg: Message) -> None:
        mid, _ = self.reserve_id()   # the reservation is committed with or before this message
        store = self._store
        msg.store_id = mid
        msg.store_op = store.insert_message(mid, msg.topic, msg.payload, msg.qos, msg.retain, msg.origin,
                                            self._clock(), msg.username, msg.key_id, msg.redelivery, msg.packet_id,
                                            pack(msg.props), msg.expires, msg.user_via)

    def release(self, msg: Message) -> None:
        """The last delivery referring to ``msg`` ended: withdraw its insert, or delete its row."""
        if not self._store.cancel(msg.store_op):
            self._store.delete_message(msg.store_id)
        msg.store_id = None
        msg.store_op = None

    def release_if_unreferenced(self, msg: Message) -> None:
        if msg.store_id is not None and msg.refs == 0:   # stored but every queue refused it
            self.release(msg)
