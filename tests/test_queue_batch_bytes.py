"""A batch read from stored messages holds at most BATCH_BYTES (bridge/connectors/base.py), however few messages
that is, and always at least one: the embedded queue store's get under syncpoint (with and without a route
selector) and the embedded source the router reads through. (The MQ source: tests/test_mq_connector.py.)"""
from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bridge.connectors import embedded
from bridge.connectors.embedded import EmbeddedSource, QueueStore
from mappings.mq.message import build_message, encode_message
from mappings.mq.mqmd import Mqmd
from mappings.rules.model import RouteOptions
from mappings.selector.views import source_selector


def _message(body_bytes: int) -> bytes:
    return encode_message(build_message(Mqmd(), (), b"x" * body_bytes))


@pytest.fixture
def store(tmp_path: Path):
    s = QueueStore(tmp_path / "q.sqlite3").open()
    yield s
    s.close()


def test_get_locked_stops_once_the_batch_holds_max_bytes(store: QueueStore) -> None:
    one, big = _message(1000), _message(50_000)
    store.put_many([("Q", one)] * 10 + [("Q", big)] + [("Q", one)] * 2 + [("R", big), ("R", one)] + [("S", one)] * 5)
    budget = 2 * len(one) + 1   # the third message crosses it: three are taken, no fourth
    sizes = [[len(m.data) for m in store.get_locked("Q", 64, max_bytes=budget)] for _ in range(5)]
    assert sizes == [[len(one)] * 3] * 3 + [[len(one), len(big)], [len(one)] * 2]
    (alone,) = store.get_locked("R", 64, max_bytes=budget)   # larger than the budget by itself: still taken
    assert len(alone.data) == len(big)   # (the store gave it a MsgId and put time)
    assert len(store.get_locked("S", 4, max_bytes=10**9)) == 4   # the count still applies
    assert len(store.get_locked("S", 64)) == 1                   # without a budget: the count only
    assert store.depth("Q") == 13                               # handed out, nothing deleted before confirm


def test_a_selected_get_keeps_the_budget_too(store: QueueStore) -> None:
    one = _message(1000)
    store.put_many([("Q", one)] * 6)
    selection = embedded.StoreSelection(source_selector(RouteOptions(selector="JMSPriority >= 0"), "mq"), "Q")
    assert len(store.get_locked("Q", 64, selection, max_bytes=len(one) + 1)) == 2
    assert len(store.get_locked("Q", 64, selection)) == 4


def test_the_embedded_source_cuts_its_batches_at_batch_bytes(store: QueueStore,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    one = _message(4000)
    store.put_many([("Q", one)] * 9)
    monkeypatch.setattr(embedded, "BATCH_BYTES", 4 * len(one))

    async def go() -> list[int]:
        sizes = []
        with ThreadPoolExecutor(1) as pool:
            source = EmbeddedSource(store, "Q", pool)
            while sum(sizes) < 9:
                items = await asyncio.wait_for(source.receive(128), 10)
                sizes.append(len(items))
                await source.confirm(items)
            await source.close()
        return sizes

    assert asyncio.run(go()) == [4, 4, 1]
    assert store.depth("Q") == 0
