"""A route from an MQTT topic filter to the embedded queue store that takes clients' QoS 1/2 publications
directly (bridge.mqtt.sink): converted as they arrive, put to their queue in group commits (one transaction
with whatever arrived while the one before committed), and acknowledged to each publisher only after the
commit that holds its message, which is the one durable copy (no rows in the broker's store). Conversion-log
records are written after that commit, as for a batch the target accepted. Issue #18; docs/broker.md
"Routes that take publications directly".

What the intake does not take goes through the route's broker session as before: publications that are not
a client's PUBLISH/PUBREL (wills, other routes' messages, retained ones), anything while the session has
deliveries queued or in flight (so nothing overtakes them), and anything beyond MAX_PENDING uncommitted
messages. A commit that fails hands its messages to the route's session instead (``Broker.queue_for_route``),
and their publishers' acknowledgements wait for the broker's commit of them: nothing acknowledged is lost.
"""
from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable
from concurrent.futures import Executor

from bridge.connectors.embedded import QueueStore, QueueStoreError
from bridge.connectors.mqtt_internal import MqttSource, publication_inbound
from bridge.mqtt.broker import Broker
from bridge.mqtt.session import Message
from bridge.mqtt.sink import Gate
from bridge.routing.steps import Good, Poison, RouteSteps

log = logging.getLogger("mqbridge.router")

MAX_PENDING = 20_000   # messages taken and not yet committed; beyond: the route's session takes them


class _Commit:
    """The publications of one queue-store transaction and the callbacks waiting for it."""

    __slots__ = ("good", "poison", "taken", "callbacks")

    def __init__(self) -> None:
        self.good: list[Good] = []
        self.poison: list[Poison] = []
        self.taken: list[tuple[Message, int]] = []   # every publication in it, as taken (for a failed commit)
        self.callbacks: list[Callable[[], None]] = []

    def gate(self, callback: Callable[[], None]) -> None:
        self.callbacks.append(callback)


class DirectIntake:
    """The route's RouteSink (bridge.mqtt.sink): conversion in the publisher's turn, group commits behind it."""

    def __init__(self, worker: RouteSteps, source: MqttSource, broker: Broker, store: QueueStore,
                 executor: Executor) -> None:
        self.worker = worker
        self.source = source
        self.broker = broker
        self.store = store
        self.executor = executor
        self.pending = 0                  # taken, not committed (open and writing)
        self.commits = 0
        self._open: _Commit | None = None
        self._writing: asyncio.Future[list[bytes]] | None = None
        self._scheduled = False
        self._idle = asyncio.Event()
        self._idle.set()

    # -- RouteSink ---------------------------------------------------------------------------------------

    def room(self) -> bool:
        return self.pending < MAX_PENDING

    def take(self, msg: Message, qos: int) -> Gate | None:
        item = publication_inbound(msg, msg.topic, msg.payload, qos, False, False, None, f"mqtt:{msg.key()}")
        try:
            verdict = self.worker.classify(item)
        except Exception as exc:   # a bug, not the message's fault: kept on the backout queue with the reason
            log.error("route %s: message %s could not be converted", self.worker.route.name, item.key, exc_info=exc)
            verdict = Poison(item, f"conversion failed: internal error: {exc!r}", False)
        if verdict is None:   # the route's selector did not match: not the route's message, nothing to wait for
            self.worker.filtered += 1
            return None
        batch = self._open
        if batch is None:
            batch = self._open = _Commit()
            self._idle.clear()
        if isinstance(verdict, tuple):
            batch.good.append(verdict)
        else:
            batch.poison.append(verdict)
        batch.taken.append((msg, qos))
        self.pending += 1
        if not self._scheduled and self._writing is None:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)
        return batch.gate

    # -- commits -----------------------------------------------------------------------------------------

    def _flush(self) -> None:
        """Put the open batch in one transaction (run in the executor; one at a time, so in order)."""
        self._scheduled = False
        batch = self._open
        if batch is None or self._writing is not None:
            return
        self._open = None
        rows = [(out.destination, out.message) for _, out, _, _ in batch.good]
        rows += [(out.destination, out.message) for out in self.worker.backout_outbound(batch.poison)]
        writing = asyncio.get_running_loop().run_in_executor(self.executor, self.store.put_many, rows)
        self._writing = writing
        writing.add_done_callback(lambda done: self._written(batch, done))

    def _written(self, batch: _Commit, done: asyncio.Future[list[bytes]]) -> None:
        self._writing = None
        exc = done.exception() if not done.cancelled() else asyncio.CancelledError()
        if exc is None:
            self.commits += 1
            try:
                if batch.good:
                    self.worker.accepted_now(batch.good)
                if batch.poison:
                    self.worker.backed_out_now(batch.poison)
            except Exception as bug:   # the messages are on their queues: their publishers get their answer
                log.error("route %s: recording a commit failed", self.worker.route.name, exc_info=bug)
            callbacks = batch.callbacks
        else:
            callbacks = self._to_session(batch, exc)
            later = self._open   # taken while it failed: the store is failing, so these go the same way now
            if later is not None:
                self._open = None
                self.pending -= len(later.taken)
                self._to_session(later, exc)
        self.pending -= len(batch.taken)
        for callback in callbacks:
            callback()
        if self._open is not None:
            self._flush()
        else:
            self._idle.set()

    def _to_session(self, batch: _Commit, exc: BaseException) -> list[Callable[[], None]]:
        """The commit failed: its publications go to the route's session (the classic path retries them); the
        acknowledgements wait for the broker's commit of them. Returns what may be called now (nothing)."""
        if not isinstance(exc, (sqlite3.Error, QueueStoreError, OSError)):
            log.error("route %s: direct commit failed", self.worker.route.name, exc_info=exc)
        else:
            log.error("route %s: embedded queue store: %s; %d messages go through the route's session",
                      self.worker.route.name, exc, len(batch.taken))
        self.worker.last_error = f"embedded queue store: {exc}"
        session = self.source.session()
        if session is None:   # cannot happen while the route runs; nothing acknowledged either way
            log.critical("route %s: no session for %d uncommitted messages: their publishers get no "
                         "acknowledgement", self.worker.route.name, len(batch.taken))
            return []
        for msg, qos in batch.taken:
            self.broker.queue_for_route(session, msg, qos)
        callbacks = batch.callbacks
        if callbacks:
            self.broker.store.after_commit(lambda: [callback() for callback in callbacks])
        return []

    async def drain(self) -> None:
        """Commit what was taken (the route stops): every publisher waiting on it gets its answer."""
        while not self._idle.is_set():
            if self._open is not None and self._writing is None:
                self._flush()
            await self._idle.wait()
