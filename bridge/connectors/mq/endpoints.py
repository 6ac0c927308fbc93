"""The mq connector's source and target: a route endpoint's view of its :class:`MqConnection`.
The target puts a batch and commits it; the source gets a batch under syncpoint and commits or backs it
out when the router confirms or backs out."""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass

from bridge.connectors.base import ConnectorError, Inbound, Outbound, Source, Target
from bridge.connectors.mq.connection import TOPIC_PREFIX, MqConnection, MqSourceSpec
from bridge.connectors.mq.mqi import join_message, split_message
from mappings.errors import MappingError
from mappings.mq import constants as MQC
from mappings.mq.message import decode_message
from mappings.mq.mqmd import Mqmd
from mappings.rules.model import render_topic

log = logging.getLogger("mqbridge.mq")


@dataclass(slots=True)
class _Handle:
    generation: int


class MqTarget(Target):
    protocol = "mq"

    def __init__(self, conn: MqConnection, topics: Mapping[str, str]) -> None:
        self.conn = conn
        self.topics = topics

    async def start(self) -> None:
        return None   # connects on the first send, so a queue manager that is down does not stop the gateway

    async def send(self, items: list[Outbound]) -> None:
        """Put the batch and commit it. Bytes that are not an MQ message raise TypeError/MappingError,
        not ConnectorError: retrying cannot help, so the router backs the batch out at its source
        (and past the threshold moves the message to the backout destination)."""
        batch = []
        for item in items:
            if not isinstance(item.message, bytes | bytearray):
                raise TypeError(f"mq target: message {item.key} is {type(item.message).__name__}, not MQ bytes")
            md, data = split_message(bytes(item.message))   # before any MQI call: a bad message puts nothing
            batch.append((self._destination(item), md, data))
        await self.conn.call(self.conn._sync_put, batch, self.topics)

    @staticmethod
    def _destination(item: Outbound) -> str:
        dest = item.destination
        if dest.startswith(TOPIC_PREFIX) and "{" in dest:   # topic template: fill from the RFH2 mqps.Top
            try:                                             # (and mqtt.clientId: MQ Telemetry Table 2)
                msg = decode_message(bytes(item.message))  # type: ignore[arg-type]
                mqps, mqtt = msg.rfh2_folder("mqps"), msg.rfh2_folder("mqtt")
            except MappingError:
                mqps = mqtt = None
            top = (mqps.value("Top") if mqps is not None else None) or ""
            client = (mqtt.value("clientId") if mqtt is not None else None) or ""
            dest = TOPIC_PREFIX + render_topic(dest[len(TOPIC_PREFIX):], topic=top, client=client)
        return dest

    async def close(self) -> None:
        await self.conn.close()


class MqSource(Source):
    def __init__(self, conn: MqConnection, spec: MqSourceSpec) -> None:
        self.conn = conn
        self.spec = spec
        self._warned: str | None = None

    async def start(self) -> None:
        return None

    async def receive(self, max_items: int) -> list[Inbound]:
        while True:
            try:
                generation, got = await self.conn.call(self.conn._sync_get, self.spec, max_items)
            except ConnectorError as exc:
                if str(exc) != self._warned:
                    log.warning("mq source %s: %s", self.spec.describe(), exc)
                    self._warned = str(exc)
                await asyncio.sleep(self.conn.retry_delay())
                continue
            self._warned = None
            if got:
                return [self._inbound(md, data, generation) for md, data in got]

    def _inbound(self, md: Mqmd, data: bytes, generation: int) -> Inbound:
        raw = join_message(md, data)
        persistent = md.persistence == MQC.MQPER_PERSISTENT
        return Inbound(
            key=f"mq:{md.msg_id.hex()}", protocol="mq", message=raw,
            source_type=md.format.strip() or "NONE", size=len(raw),
            destination=self.spec.queue if self.spec.queue is not None else f"{TOPIC_PREFIX}{self.spec.topic}",
            received=time.time(), redelivery_count=md.backout_count,
            qos=1 if persistent else 0, persistent=persistent,
            priority=md.priority if 0 <= md.priority <= 9 else None,
            handle=_Handle(generation))

    async def _end(self, items: list[Inbound], commit: bool) -> None:
        if not items:
            return
        generation = items[0].handle.generation if isinstance(items[0].handle, _Handle) else -1
        ok = await self.conn.call(self.conn._sync_end, generation, commit)
        if not ok and commit:
            log.warning("mq source %s: %d messages were not committed (connection lost); the queue manager "
                        "delivers them again, so the target may see them twice", self.spec.describe(),
                        len(items))

    async def confirm(self, items: list[Inbound]) -> None:
        await self._end(items, commit=True)

    async def backout(self, items: list[Inbound]) -> None:
        await self._end(items, commit=False)

    async def close(self) -> None:
        await self.conn.close()


