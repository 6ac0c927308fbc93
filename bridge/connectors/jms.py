"""The JMS connector over STOMP 1.2 (ActiveMQ first): JmsSource and JmsTarget on
``bridge.connectors.stomp_link.StompLink``. The JMS <-> frame mapping is mappings/stomp/frames.py;
what STOMP cannot carry is listed in docs/stomp-facts.md.

Sending: a route's batch is one STOMP transaction whose COMMIT asks for the receipt (JmsTarget).
Acknowledgement (docs/stomp-facts.md §5): ``ack: client-individual``; confirm = ACK. Backout does **not**
NACK, because ActiveMQ moves a NACKed message straight to ``ActiveMQ.DLQ``: the source keeps the message
unacknowledged and hands it to the route again with its count raised, so the router's own backout
threshold and backout destination decide (as for the other sources).
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from bridge.connectors.base import ConnectorError, Inbound, Inbox, Outbound, Source, Target
from bridge.connectors.jms_native.connector import NativeJmsSource, NativeJmsTarget, native_jvm
from bridge.connectors.registry import CONNECTOR_FACTORIES
from bridge.connectors.stomp_link import (
    EncodedSend,
    InboundFrame,
    LinkState,
    StompLink,
    StompLinkConfig,
    StompLinkError,
)
from bridge.connectors.stomp_poison import Action, Mode, PoisonWatch
from bridge.threadnames import name_this_thread
from mappings.jms.model import DeliveryMode, JmsMessage
from mappings.report import ConversionReport, Finding
from mappings.rules.model import JmsConnector, QueueEndpoint, Route, RulesFile
from mappings.stomp.frames import (
    SUBSCRIBE_TRANSFORMATION,
    SendFrame,
    backout_to_jms,
    destination_name,
    frame_to_jms,
    jms_to_frame,
    redelivery_count,
    stomp_destination,
)

log = logging.getLogger("mqbridge.jms")

DEFAULT_PREFETCH = 256

# ------------------------------------------------------------------------------- connectors


def link_config(conn: JmsConnector, client_id: str | None = None) -> StompLinkConfig:
    return StompLinkConfig(host=conn.host, port=conn.port, login=conn.user, passcode=conn.password,
                           vhost=conn.vhost, client_id=client_id, heartbeat_send_ms=conn.heartbeat_ms,
                           heartbeat_receive_ms=conn.heartbeat_ms, heartbeat_grace=conn.heartbeat_grace,
                           backoff_max=conn.reconnect_max_seconds)


def _findings(report: ConversionReport) -> list[Finding]:
    return list(report.findings)


class JmsTarget(Target):
    """Sends a batch as one STOMP transaction (BEGIN, the SENDs in order, COMMIT with a receipt:
    StompLink.send_many) and returns once the COMMIT's receipt is in: the route confirms its source
    only then (at least once). One receipt per batch keeps the broker to one store sync and avoids
    the Nagle/delayed-ACK stall that many small RECEIPT frames hit (bench/README.md)."""

    protocol = "jms"

    def __init__(self, config: StompLinkConfig, receipt_timeout: float = 30.0, *,
                 map_byte_arrays: bool = False) -> None:
        self.link = StompLink(config)
        self.receipt_timeout = receipt_timeout
        self.map_byte_arrays = map_byte_arrays
        self._io = ThreadPoolExecutor(1, thread_name_prefix="jms-target", initializer=name_this_thread)
        self._receipts = ThreadPoolExecutor(1, thread_name_prefix="jms-receipts", initializer=name_this_thread)

    async def start(self) -> None:
        self.link.start(timeout=None)   # connects in the background; sends fail (and are retried) until up

    def link_status(self) -> dict[str, object]:
        return self.link.link_status()

    def frames(self, items: list[Outbound]) -> list[SendFrame]:
        out = []
        for item in items:
            msg = item.message
            if type(msg) is SendFrame:   # converted straight to a frame (bridge/routing/mqtt_stomp.py)
                out.append(msg)
                continue
            report = ConversionReport()
            if isinstance(msg, bytes):
                msg = backout_to_jms(msg)
            if not isinstance(msg, JmsMessage):
                raise ConnectorError(f"JMS target got a {type(msg).__name__}, not a JMS message")
            out.append(jms_to_frame(msg, item.destination, report, map_byte_arrays=self.map_byte_arrays))
            if report:
                item.extra["findings"] = _findings(report)
        return out

    async def send(self, items: list[Outbound]) -> None:
        await (await self.submit(items))

    async def submit(self, items: list[Outbound]) -> asyncio.Future[None]:
        """Write the batch's transaction now (on the one I/O thread, so batches reach the provider in
        the order of the calls) and return a task that ends when its COMMIT receipt is in; receipts
        are waited for in order on a thread of their own, so a route can keep batches in flight."""
        batch: list[EncodedSend] = [(f.head, f.body, f.content_length) for f in self.frames(items)]
        loop = asyncio.get_running_loop()
        try:
            wait = await loop.run_in_executor(self._io, lambda: self.link.submit_encoded(batch, transactional=True))
        except StompLinkError as exc:
            raise ConnectorError(f"JMS provider: {exc}") from exc
        return loop.create_task(self._accepted(wait))

    async def _accepted(self, wait: Callable[[float | None], None]) -> None:
        try:
            await asyncio.get_running_loop().run_in_executor(self._receipts, wait, self.receipt_timeout)
        except StompLinkError as exc:
            raise ConnectorError(f"JMS provider: {exc}") from exc

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._io, self.link.close)
        self._io.shutdown(wait=False)
        self._receipts.shutdown(wait=False)


@dataclass
class _Delivery:
    frame: InboundFrame
    backouts: int = 0
    extra: dict[str, object] = field(default_factory=dict)


class JmsSource(Source):
    """A STOMP subscription with ``ack: client-individual`` (§5), the route's selector and a prefetch
    window. Messages stay unacknowledged at the provider until ``confirm``."""

    def __init__(self, config: StompLinkConfig, destination: str, *, selector: str | None = None,
                 prefetch: int = DEFAULT_PREFETCH, subscription_name: str | None = None) -> None:
        self.link = StompLink(config)
        self.destination = stomp_destination(destination)
        self.headers = {"transformation": SUBSCRIBE_TRANSFORMATION, "activemq.prefetchSize": str(prefetch)}
        if selector:
            self.headers["selector"] = selector
        if subscription_name:
            self.headers["activemq.subscriptionName"] = subscription_name
        self._queue = Inbox()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._io = ThreadPoolExecutor(1, thread_name_prefix="jms-source", initializer=name_this_thread)
        self.stale_dropped = 0
        self.watch = PoisonWatch(self.destination)   # a message the provider cannot deliver (stomp_poison)
        self._probe: InboundFrame | None = None
        self._watch_lock = threading.Lock()
        self.link.on_connection = self._on_connection

    def link_status(self) -> dict[str, object]:
        return self.link.link_status()

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.link.subscribe(self.destination, self._on_frame, ack="client-individual", headers=self.headers,
                            sub_id="route")
        self.link.start(timeout=None)

    # The watch is called from the receiver thread, the ack worker and link callbacks: under _watch_lock, never
    # held while taking the link's lock (link callbacks come with the link's lock held, then take this one).
    def _on_connection(self, up: bool) -> None:   # link lock held: record and return
        with self._watch_lock:
            if up:
                self.watch.established()
                return
            changed = self.watch.dropped()
            headers = self.watch.subscription_headers(self.headers)
        if changed:
            self.link.set_subscription_headers("route", headers)

    def _on_frame(self, frame: InboundFrame) -> None:   # stomp.py receiver thread
        with self._watch_lock:
            probing = self.watch.mode is Mode.PROBE
            action = self.watch.frame(frame.headers, frame.body)
            reason = self.watch.reason
            if probing and action is not Action.LEAVE:
                self._probe = frame
        if action is Action.LEAVE:
            return   # left unacknowledged: the provider delivers it again
        if action is Action.RECHECK:
            self._resubscribe()
            return
        item = frame_to_inbound(frame)
        if action is Action.POISON:
            item.poison = reason
        loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(self._queue.put_nowait, item)

    async def receive(self, max_items: int) -> list[Inbound]:
        items: list[Inbound] = []
        while not items:
            first = await self._queue.get()
            batch = [first]
            while len(batch) < max_items and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            for item in batch:
                frame = item.handle
                assert isinstance(frame, InboundFrame)
                if frame.generation != self.link.generation:
                    self.stale_dropped += 1   # its connection is gone: the provider redelivers it
                    continue
                items.append(item)
        return items

    def _ack_all(self, frames: list[InboundFrame]) -> None:
        skipped = 0
        probe = False
        for frame in frames:
            if not self.link.ack(frame):   # a frame of an older connection, or the link is down
                skipped += 1
            elif frame is self._probe:
                probe = True
        if skipped:   # at least once: the provider delivers them again (a duplicate, marked redelivered)
            log.warning("%s: %d of %d confirmed messages not acknowledged (link %s; they came over an earlier "
                        "connection or the link is down): they will come again", self.destination, skipped,
                        len(frames), self.link.state.value)
        acked = len(frames) - skipped
        if acked:
            with self._watch_lock:
                changed = self.watch.acked(acked, probe=probe)
                if changed:
                    self._probe = None
            if changed:
                self._resubscribe()

    def _resubscribe(self) -> None:
        """Connect again with the subscription the watch's new mode asks for."""
        with self._watch_lock:
            headers = self.watch.subscription_headers(self.headers)
            mode = self.watch.mode.value
            self.watch.expect_drop()
        self.link.set_subscription_headers("route", headers)
        self.link.reconnect(f"subscription mode {mode}")

    async def confirm(self, items: list[Inbound]) -> None:
        frames = [i.handle for i in items if isinstance(i.handle, InboundFrame)]
        await asyncio.get_running_loop().run_in_executor(self._io, self._ack_all, frames)

    async def backout(self, items: list[Inbound]) -> None:
        # Not NACK: ActiveMQ sends a NACKed message to ActiveMQ.DLQ at once (§5). Keep it unacknowledged
        # and hand it to the route again, counted, so the route's backout threshold decides.
        self._queue.put_back(items)

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._io, self.link.close)
        self._io.shutdown(wait=False)

    @property
    def up(self) -> bool:
        return self.link.state is LinkState.UP


def frame_to_inbound(frame: InboundFrame) -> Inbound:
    """A received frame as the router's Inbound: the JMS message, its findings, its redelivery count."""
    report = ConversionReport()
    msg = frame_to_jms(frame.headers, frame.body, report)
    return Inbound(
        key=f"jms:{frame.message_id}", protocol="jms", message=msg, source_type=msg.body_type.java_class,
        size=len(frame.body), destination=destination_name(frame.destination), received=time.time(),
        redelivery_count=redelivery_count(frame.headers), qos=1 if msg.headers.delivery_mode == 2 else 0,
        persistent=msg.headers.delivery_mode is DeliveryMode.PERSISTENT, priority=msg.headers.priority,
        handle=frame, findings=_findings(report))


# ------------------------------------------------------------------------------- factory

Factory = Callable[[RulesFile, Route, QueueEndpoint, str], Source | Target]


def jms_factory(rules: RulesFile, route: Route, endpoint: QueueEndpoint, role: str) -> Source | Target:
    """``type: jms`` connectors: a STOMP link per route endpoint."""
    conn = rules.connector(endpoint.connector)
    assert isinstance(conn, JmsConnector)
    if conn.client == "native":
        native_jvm(conn, endpoint.connector)   # the endpoint's check does the lookups, on its worker
        if role == "source":
            return NativeJmsSource(conn, route.name, endpoint.destination, selector=route.options.selector,
                                   connector=endpoint.connector, subscription=endpoint.subscription,
                                   backout_threshold=route.options.backout_threshold)
        kind = "topic" if endpoint.topic is not None else "queue"
        return NativeJmsTarget(conn, route.name, endpoint.connector, endpoint.destination,
                               f"route {route.name}: to.{kind}")
    if role == "source":
        client_id = f"mqbridge-{route.name}" if endpoint.subscription else None
        return JmsSource(link_config(conn, client_id), endpoint.destination, selector=route.options.selector,
                         subscription_name=endpoint.subscription)
    return JmsTarget(link_config(conn), map_byte_arrays=conn.map_byte_arrays == "native")


CONNECTOR_FACTORIES["jms"] = jms_factory
