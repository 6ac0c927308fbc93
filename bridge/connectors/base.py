"""What every connector offers the router: a Source hands out messages and confirms them only after
the target accepted them; a Target accepts a batch or raises. Messages travel as Inbound/Outbound."""
from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from mappings.report import Finding

# A source that reads stored messages into memory for a batch (the embedded queue store, an MQ queue) ends
# the batch once it holds this many bytes, however few messages that is (always at least one): a batch of
# the router's 128 messages of 10 MiB each, with 4 batches in flight, would otherwise hold 5 GiB.
BATCH_BYTES = 16 * 1024 * 1024


@dataclass(slots=True)
class Inbound:
    """One message taken from a source and not yet confirmed there."""

    key: str                   # ties the ingress record to the egress record(s); stable on redelivery
    protocol: str              # "mqtt" | "mq" | "jms"
    message: object            # MqttPublication | bytes (MQ message) | JmsMessage
    source_type: str           # "publish", the MQ Format, "TextMessage", ...
    size: int                  # payload bytes as received
    destination: str           # topic / queue it came from
    received: float            # unix time the gateway took it in
    client_id: str | None = None
    redelivery_count: int = 0
    qos: int = 0
    persistent: bool | None = None
    priority: int | None = None
    handle: object = None      # the source's own reference (sequence number, frame, packet id)
    findings: list[Finding] = field(default_factory=list)   # what the source's own reading lost
    poison: str | None = None  # the source's verdict that it cannot be carried (why): to the backout destination


@dataclass(slots=True)
class Outbound:
    """A converted message for a target."""

    key: str
    message: object            # bytes (MQ message) | JmsMessage | MqttPublication
    destination: str
    size: int = 0
    extra: dict[str, object] = field(default_factory=dict)


class Inbox(asyncio.Queue["Inbound"]):
    """A source's queue of received messages that can also take messages back at the front, in order
    (a backed-out batch is retried before anything received after it)."""

    def put_back(self, items: list[Inbound]) -> None:
        for item in reversed(items):
            item.redelivery_count += 1
            self._queue.appendleft(item)  # type: ignore[attr-defined]  # asyncio.Queue's subclass storage
        for _ in items:
            self._wakeup_next(self._getters)  # type: ignore[attr-defined]


class ConnectorError(Exception):
    """The external system refused or is unreachable; the batch is retried, nothing is confirmed."""


class Source(ABC):
    @abstractmethod
    async def start(self) -> None: ...

    async def check(self) -> None:
        """Before the route replaces anything: what can be verified now (RouteSetupError says which setting is
        wrong), off the event loop when it blocks."""
        return None

    @abstractmethod
    async def receive(self, max_items: int) -> list[Inbound]:
        """Wait for at least one message; return up to ``max_items``."""

    @abstractmethod
    async def confirm(self, items: list[Inbound]) -> None:
        """The target has the messages: remove them from the source (commit / ack)."""

    @abstractmethod
    async def backout(self, items: list[Inbound]) -> None:
        """Put the messages back for a later attempt (their redelivery count goes up)."""

    async def close(self) -> None:
        return None


class Target(ABC):
    protocol: str = ""

    @abstractmethod
    async def start(self) -> None: ...

    async def check(self) -> None:
        """As Source.check."""
        return None

    @abstractmethod
    async def send(self, items: list[Outbound]) -> None:
        """Deliver every item durably (committed / receipted) or raise ConnectorError."""

    async def submit(self, items: list[Outbound]) -> asyncio.Future[None]:
        """Start delivering ``items``; the future returned ends when the target accepted them all
        (or raises ConnectorError). A target that can keep several batches in flight (the router's
        pipeline) returns as soon as the batch is on its way, and batches submitted one after another
        must reach the target in that order. By default the whole send happens here."""
        await self.send(items)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done

    async def close(self) -> None:
        return None
