"""The IBM MQ connector under the router, against the fake MQI of tests.mq_fake: the backout threshold and
the backout destination, and a route's selector as the MQ V7+ SelectionString of the MQOD/MQSD."""
from __future__ import annotations

import asyncio
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import bridge.connectors.mq  # noqa: F401 - registers connector type "mq"
from bridge.connectors.base import ConnectorError, Outbound, Target
from bridge.connectors.embedded import QueueStore
from bridge.connectors.mq import mqi
from bridge.connectors.mq.connection import MqSourceSpec
from bridge.connectors.mq.endpoints import MqSource, MqTarget
from bridge.connectors.registry import CONNECTOR_FACTORIES
from bridge.routing.router import Router, backout_queue_name
from mappings.mq.message import decode_message
from mappings.rules.model import parse_rules
from tests.mq_fake import (
    IBMMQ,
    MD_CLASS,
    FakeQueueManager,
    fake_conn,
    install_fake_mqi,
    msg_file,
    new_queue_manager,
    run_async,
    usr_n,
)
from tests.mq_support import usr_message


@pytest.fixture
def qm() -> FakeQueueManager:
    return new_queue_manager()


@pytest.fixture
def fake(qm: FakeQueueManager, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    return install_fake_mqi(qm, monkeypatch)


def test_router_sends_a_message_past_the_backout_threshold_to_the_backout_queue(
        qm: FakeQueueManager, fake: types.ModuleType, tmp_path: Path) -> None:
    """MQBACK raises BackoutCount each time the route fails the batch; at the threshold the router puts
    the message on the backout queue with the reason and commits it off the MQ queue."""
    rules = parse_rules("""
connectors:
  qm1: {type: mq, queue_manager: QM1}
routes:
  - name: mq-in
    from: {connector: qm1, queue: IN}
    to: {mqtt: "out/{topic}"}
    options: {backout_threshold: 2}
""")
    qm.preload("IN", msg_file())
    BACKOUT = backout_queue_name("mq-in")   # noqa: N806
    store = QueueStore(tmp_path / "q.sqlite3").open()
    executor = ThreadPoolExecutor(2)
    router = Router(None, store, None, "gw", executor)  # type: ignore[arg-type]

    class Broken(Target):
        calls = 0

        async def start(self) -> None:
            return None

        async def send(self, items: list[Outbound]) -> None:
            Broken.calls += 1
            raise RuntimeError("a bug in the target")   # not a ConnectorError: the batch is backed out

    async def go() -> None:
        worker = router.build(rules, rules.routes[0])
        worker.target = Broken()
        await worker.start()
        for _ in range(500):
            if store.depth(BACKOUT) and qm.commits:   # on the backout queue, and committed off IN
                break
            await asyncio.sleep(0.02)
        await worker.stop()

    try:
        run_async(go())
        assert Broken.calls == 2 and store.depth(BACKOUT) == 1 and qm.depth("IN") == 0
        backed = decode_message(store.browse(BACKOUT)[0].data)
        assert "backout threshold 2" in (backed.rfh2_folder("mqbridge").value("Reason") or "")  # type: ignore[union-attr]
        original = decode_message(msg_file())
        # the original MQ message keeps its identity and body, the reason added to its RFH2 (docs/connectors.md)
        assert (backed.md.correl_id, backed.md.persistence, backed.md.reply_to_q) == (
            original.md.correl_id, original.md.persistence, original.md.reply_to_q)
        assert backed.body == original.body and backed.rfh2_folder("mqps") == original.rfh2_folder("mqps")
    finally:
        store.close()
        executor.shutdown()


def test_backout_destination_on_the_queue_manager(qm: FakeQueueManager, fake: types.ModuleType) -> None:
    """A message already past the threshold goes to an MQ backout queue (put + commit there, then the
    get is committed); stopping the route closes the backout connection too."""
    rules = parse_rules("""
connectors:
  qm1: {type: mq, queue_manager: QM1}
routes:
  - name: mq-in
    from: {connector: qm1, queue: IN}
    to: {mqtt: "out/{topic}"}
    options:
      backout_threshold: 3
      backout_destination: {connector: qm1, queue: DEV.DEAD.LETTER.QUEUE}
""")
    qm.preload("IN", msg_file(), backout=3)
    executor = ThreadPoolExecutor(1)
    router = Router(None, None, None, "gw", executor)  # type: ignore[arg-type]

    async def go() -> MqTarget:
        worker = router.build(rules, rules.routes[0])
        assert isinstance(worker.backout, MqTarget)
        await worker.start()
        for _ in range(500):
            if qm.depth("DEV.DEAD.LETTER.QUEUE") and qm.commits >= 2:
                break
            await asyncio.sleep(0.02)
        await worker.stop()
        return worker.backout

    try:
        backout = run_async(go())
    finally:
        executor.shutdown()
    assert qm.depth("DEV.DEAD.LETTER.QUEUE") == 1 and qm.depth("IN") == 0
    stored = qm.queues["DEV.DEAD.LETTER.QUEUE"][0]
    md = mqi.read_md(MD_CLASS().unpack(stored.md))
    backed = decode_message(mqi.join_message(md, stored.data))
    assert "backout threshold 3" in (backed.rfh2_folder("mqbridge").value("Reason") or "")  # type: ignore[union-attr]
    assert backout.conn._executor is None and backout.conn.qmgr is None   # closed with the route
    assert all(not c.alive for c in qm.conns)


def test_selector_is_the_mqod_selection_string_and_the_rest_stay_in_order(
        qm: FakeQueueManager, fake: types.ModuleType) -> None:
    """MQ V7+ message selection: the queue manager hands out only the matching messages; the others stay
    on the queue, in order, for other consumers. The fake evaluates the SelectionString on the message
    as stored (IBM's packed MD + data) with mappings.selector.compile."""
    for i, region in enumerate(["us", "eu", "eu", "us", "eu", "us"]):
        qm.preload("IN", usr_message(i, region))
    selector = "region = 'eu' AND n > 1"
    source = MqSource(fake_conn(fake), MqSourceSpec("IN", None, "", {}, selector))

    async def go() -> tuple[list[int], list[int]]:
        first = await source.receive(10)
        await source.backout(first)               # MQBACK: back to their places, BackoutCount 1
        again = await source.receive(10)
        await source.confirm(again)
        await source.close()
        return [usr_n(i) for i in first], [i.redelivery_count for i in again]

    got, counts = run_async(go())
    assert got == [2, 4] and counts == [1, 1]
    assert [usr_n(s) for s in qm.queues["IN"]] == [0, 1, 3, 5]     # untouched, in arrival order
    assert qm.selections["IN"] == selector
    assert qm.opens[0] == ("queue", "IN", mqi.MQOO_INPUT_AS_Q_DEF | mqi.MQOO_FAIL_IF_QUIESCING)
    if IBMMQ is not None:
        assert fake.OD is IBMMQ.OD     # IBM's own MQOD took our SelectionString (Version 4, UTF-8)


def test_without_a_selector_the_queue_is_opened_by_name(qm: FakeQueueManager, fake: types.ModuleType) -> None:
    qm.preload("IN", usr_message(1, "us"))
    source = MqSource(fake_conn(fake), MqSourceSpec("IN", None, "", {}))

    async def go() -> int:
        items = await source.receive(5)
        await source.confirm(items)
        await source.close()
        return len(items)

    assert run_async(go()) == 1 and qm.selections["IN"] is None


def test_a_selection_string_the_queue_manager_refuses_names_the_selector(
        qm: FakeQueueManager, fake: types.ModuleType) -> None:
    conn = fake_conn(fake)
    spec = MqSourceSpec("IN", None, "", {}, "region = ")   # the rules file would refuse it first
    with pytest.raises(ConnectorError) as info:
        run_async(conn.call(conn._sync_get, spec, 5))
    assert "refused the route's selector 'region = '" in str(info.value) and "2459" in str(info.value)
    run_async(conn.close())


def test_route_selector_reaches_the_queue_and_the_subscription(qm: FakeQueueManager, fake: types.ModuleType) -> None:
    rules = parse_rules("""
connectors:
  qm1: {type: mq, queue_manager: QM1}
routes:
  - name: from-q
    from: {connector: qm1, queue: IN}
    to: {mqtt: "out/{topic}"}
    options: {selector: "JMSPriority >= 5"}
  - name: from-topic
    from: {connector: qm1, topic: sensors/hall}
    to: {mqtt: "hall"}
    options: {selector: "region = 'eu'", admin_topics: {SENSORS: sensors}}
""")
    q_route, t_route = rules.routes
    q_source = CONNECTOR_FACTORIES["mq"](rules, q_route, q_route.source, "source")
    t_source = CONNECTOR_FACTORIES["mq"](rules, t_route, t_route.source, "source")
    assert isinstance(q_source, MqSource) and isinstance(t_source, MqSource)
    assert q_source.spec.selector == "JMSPriority >= 5" and t_source.spec.selector == "region = 'eu'"
    qm.preload("IN", usr_message(1, "us", priority=4))
    qm.preload("IN", usr_message(2, "us", priority=7))
    target = MqTarget(fake_conn(fake, name="pub"), {})

    async def go() -> tuple[list[int], list[int]]:
        from_q = await q_source.receive(10)
        await q_source.confirm(from_q)
        task = asyncio.ensure_future(t_source.receive(10))   # subscribes, then waits
        while not qm.sub_calls:
            await asyncio.sleep(0.01)
        await target.send([Outbound("a", usr_message(3, "us"), "topic:sensors/hall"),
                           Outbound("b", usr_message(4, "eu"), "topic:sensors/hall")])
        from_t = await task
        await t_source.confirm(from_t)
        for c in (q_source, t_source, target):
            await c.close()
        return [usr_n(i) for i in from_q], [usr_n(i) for i in from_t]

    from_q, from_t = run_async(go())
    assert from_q == [2] and [usr_n(s) for s in qm.queues["IN"]] == [1]
    assert from_t == [4] and qm.selections[t_route.source.subscription or qm.sub_calls[0]["name"]] == "region = 'eu'"
    assert [usr_n(s) for s in qm.queues["SUBQ." + qm.sub_calls[0]["name"]]] == [3]   # stays on the managed queue
