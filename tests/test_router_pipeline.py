"""The route worker's pipeline (RouteOptions.pipeline): several batches in flight at the target, each
confirmed at the source only after the target accepted it, strictly in order, and a refused batch
delivered again, with every batch after it, before anything after it is confirmed.

Real embedded queue store as the source; the target is a small double of the Target ABC whose
acceptance takes a chosen time (the first batch the longest, so later ones settle first) or fails."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bridge.connectors.base import ConnectorError, Inbound, Outbound, Target
from bridge.connectors.embedded import EmbeddedSource, EmbeddedTarget, QueueStore
from bridge.routing.convert import RouteConverter
from bridge.routing.router import BATCH, Router, RouteWorker
from mappings.mq import constants as C
from mappings.mq.message import build_message, decode_message, encode_message
from mappings.mq.mqmd import Mqmd
from mappings.mq.rfh2 import Rfh2, RfhElement, RfhFolder
from mappings.mqtt.publication import MqttPublication
from mappings.rules.model import Route

COUNT = BATCH * 6 + 17


def _message(n: int) -> bytes:
    rfh = Rfh2(folders=(RfhFolder("mqps", (RfhElement("Top", "out/seq"),)),))
    return encode_message(build_message(Mqmd(persistence=C.MQPER_PERSISTENT), (rfh,), str(n).encode()))


def _seq(out: Outbound) -> int:
    assert isinstance(out.message, MqttPublication)
    return int(out.message.payload)


class SlowTarget(Target):
    """Accepts batch k after delays[k] seconds (default 0.01); raises for the attempts listed in fail."""

    protocol = "mqtt"

    def __init__(self, delays: dict[int, float], fail: set[int]) -> None:
        self.delays = delays
        self.fail = fail
        self.attempts: list[list[int]] = []     # every submitted batch, in submission order
        self.accepted: set[int] = set()         # sequence numbers the target accepted so far
        self.pending = 0
        self.max_pending = 0

    async def start(self) -> None:
        return None

    async def send(self, items: list[Outbound]) -> None:
        await (await self.submit(items))

    async def submit(self, items: list[Outbound]) -> asyncio.Future[None]:
        k = len(self.attempts)
        seqs = [_seq(o) for o in items]
        self.attempts.append(seqs)
        self.pending += 1
        self.max_pending = max(self.max_pending, self.pending)

        async def settle() -> None:
            try:
                await asyncio.sleep(self.delays.get(k, 0.01))
            finally:
                self.pending -= 1
            if k in self.fail:
                raise ConnectorError(f"attempt {k} refused")
            self.accepted.update(seqs)

        return asyncio.ensure_future(settle())


class WatchedSource(EmbeddedSource):
    """Records what is confirmed, and checks at that moment that the target already has it."""

    def __init__(self, target: SlowTarget, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.target = target
        self.confirmed: list[int] = []

    async def confirm(self, items: list[Inbound]) -> None:
        seqs = [_body_seq(i) for i in items]
        assert self.target.accepted.issuperset(seqs), "confirmed before the target accepted"
        await super().confirm(items)
        self.confirmed.extend(seqs)


def _body_seq(item: Inbound) -> int:
    assert isinstance(item.message, bytes)
    return int(decode_message(item.message).body)


def _run_route(tmp_path: Path, delays: dict[int, float], fail: set[int], pipeline: int = 4
               ) -> tuple[SlowTarget, WatchedSource, QueueStore]:
    store = QueueStore(tmp_path / "queues.sqlite").open()
    store.put_many([("IN", _message(n)) for n in range(COUNT)])
    executor = ThreadPoolExecutor(2)
    route = Route.model_validate({"name": "p", "from": {"queue": "IN"}, "to": {"mqtt": "out/seq"},
                                  "options": {"pipeline": pipeline}})
    target = SlowTarget(delays, fail)
    source = WatchedSource(target, store, "IN", executor)

    async def main() -> None:
        router = Router(None, store, None, "gw", executor)  # type: ignore[arg-type]  # no broker needed
        worker = RouteWorker(router, route, source, target, EmbeddedTarget(store, executor), "BACKOUT.p",
                             RouteConverter(route, "mq", "mqtt"))
        await worker.start()
        for _ in range(1000):
            if len(source.confirmed) >= COUNT:
                break
            await asyncio.sleep(0.01)
        await worker.stop()

    asyncio.run(main())
    executor.shutdown()
    return target, source, store


def test_pipeline_confirms_in_order_after_acceptance(tmp_path: Path) -> None:
    target, source, store = _run_route(tmp_path, delays={0: 0.3}, fail=set())
    assert target.max_pending > 1                      # batches really were in flight together
    assert target.max_pending <= 4                     # and no more than the pipeline allows
    assert [s for batch in target.attempts for s in batch] == list(range(COUNT))   # submitted in order
    assert source.confirmed == list(range(COUNT))      # confirmed in order, each after acceptance
    assert store.depth("IN") == 0 and store.depth("BACKOUT.p") == 0
    store.close()


def test_refused_batch_is_delivered_again_with_those_after_it_before_they_are_confirmed(tmp_path: Path) -> None:
    # attempt 1 (the second batch) is refused while batches 2.. are already in flight
    target, source, store = _run_route(tmp_path, delays={1: 0.2}, fail={1})
    assert source.confirmed == list(range(COUNT))
    assert store.depth("IN") == 0 and store.depth("BACKOUT.p") == 0   # a target refusal is no poison
    flat = [s for batch in target.attempts for s in batch]
    # the refused batch came again, then every batch that was in flight behind it, in order: the
    # target's last copy of each message is in source order (earlier copies are at-least-once duplicates)
    last = {s: i for i, s in enumerate(flat)}
    assert sorted(last, key=last.__getitem__) == list(range(COUNT))
    assert flat.count(BATCH + 1) == 2
    store.close()


def test_a_stopping_route_confirms_the_batches_the_target_accepts_meanwhile(tmp_path: Path) -> None:
    """Stopped while batches are in flight: those the target accepts within the settling time are confirmed
    (not backed out, so a reload or a stop does not deliver them a second time); the rest stay on the queue."""
    store = QueueStore(tmp_path / "queues.sqlite").open()
    store.put_many([("IN", _message(n)) for n in range(COUNT)])
    executor = ThreadPoolExecutor(2)
    route = Route.model_validate({"name": "p", "from": {"queue": "IN"}, "to": {"mqtt": "out/seq"}})
    target = SlowTarget({0: 0.3, 1: 0.3, 2: 0.3, 3: 0.3}, set())
    source = WatchedSource(target, store, "IN", executor)

    async def main() -> None:
        router = Router(None, store, None, "gw", executor)  # type: ignore[arg-type]  # no broker needed
        worker = RouteWorker(router, route, source, target, EmbeddedTarget(store, executor), "BACKOUT.p",
                             RouteConverter(route, "mq", "mqtt"))
        await worker.start()
        for _ in range(500):
            if len(target.attempts) >= 2:
                break
            await asyncio.sleep(0.005)
        assert len(target.attempts) >= 2 and not target.accepted   # in flight, none accepted yet
        await worker.stop()
        await asyncio.sleep(0.5)   # anything still settling at the target settles now

    asyncio.run(main())
    executor.shutdown()
    assert target.accepted and set(source.confirmed) == target.accepted
    assert store.depth("IN") == COUNT - len(source.confirmed)
    remaining = {_body_seq_bytes(m.data): m.backout_count for m in store.browse("IN", limit=COUNT)}
    assert not remaining.keys() & target.accepted
    store.close()


def _body_seq_bytes(data: bytes) -> int:
    return int(decode_message(data).body)
