"""What a session does when its queue is full (max_queued deliveries or max_queued_bytes).

A client's session drops the delivery and counts it, logged once until its queue has drained to the
low-water mark. A route's session (``$route:<name>``, given an ``on_flow``) treats the limit as soft:
what reaches it is queued all the same and it says once that it is pushing back (``on_flow(True)``), so
that the broker holds the publishers that fill it (``flow.FlowControl``); drained, it says so again
(``on_flow(False)``). A session has an ``Overflow`` only once its queue was full, or when it is a route's.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sized
from typing import Protocol

from bridge.mqtt.message import Message, SessionStats

log = logging.getLogger("mqbridge.broker")


class QueueView(Protocol):
    client_id: str
    queue: Sized
    queued_bytes: int
    max_queued: int
    max_queued_bytes: int
    stats: SessionStats


class Overflow:
    __slots__ = ("on_flow", "pushing", "dropping")

    def __init__(self, on_flow: Callable[[bool], None] | None = None) -> None:
        self.on_flow = on_flow
        self.pushing = False
        self.dropping = False

    def full(self, session: QueueView, msg: Message) -> bool:
        """The queue is full: True when ``msg`` is queued all the same (a route's session)."""
        if self.on_flow is None:
            session.stats.dropped += 1
            if not self.dropping:
                self.dropping = True
                log.warning("session %s: queue full (%d deliveries, %d bytes; max_queued %d, max_queued_bytes %d): "
                            "QoS 1/2 deliveries to it are dropped and counted until it drains (first: %s, %d bytes)",
                            session.client_id, len(session.queue), session.queued_bytes, session.max_queued,
                            session.max_queued_bytes, msg.topic, len(msg.payload))
            return False
        if not self.pushing:
            self.pushing = True
            self.on_flow(True)
        return True

    @property
    def engaged(self) -> bool:
        return self.pushing or self.dropping

    def relieve(self, session: QueueView) -> None:
        """The queue shrank: at the low-water mark (90 % of max_queued and of max_queued_bytes) it is drained."""
        if (len(session.queue) <= session.max_queued * 9 // 10
                and session.queued_bytes <= session.max_queued_bytes * 9 // 10):
            self.drained(session)

    def drained(self, session: QueueView) -> None:
        """The queue is down to the low-water mark (or the session's deliveries were discarded)."""
        if self.dropping:
            self.dropping = False
            log.info("session %s: queue drained to %d deliveries, %d bytes (%d dropped so far)", session.client_id,
                     len(session.queue), session.queued_bytes, session.stats.dropped)
        if self.pushing:
            self.pushing = False
            if self.on_flow is not None:
                self.on_flow(False)
