"""The IBM MQ connector's control flow (bridge/connectors/mq/) against the fake MQI of tests.mq_fake:
puts under syncpoint with MQCMIT per batch, gets under syncpoint with MQCMIT/MQBACK, set-identity
authority, topics and durable subscriptions, one thread per connection, reconnection with backoff.

No queue manager can run on this machine, so the tests are in layers: the MQI layer against golden bytes
and IBM's MD class (test_mq_connector_mqi.py), the control flow against a fake of the pymqi/ibmmq class
family (here, and the connector under the router in test_mq_connector_router.py), and a real queue
manager when MQBRIDGE_TEST_QMGR names one (test_mq_connector_real.py).
"""
from __future__ import annotations

import asyncio
import dataclasses
import threading
import types

import pytest

import bridge.connectors.mq  # noqa: F401 - registers connector type "mq"
from bridge.connectors.base import ConnectorError, Inbound, Outbound
from bridge.connectors.mq import connection as mq_connection
from bridge.connectors.mq import mqi
from bridge.connectors.mq.connection import MqConnection, MqSourceSpec
from bridge.connectors.mq.endpoints import MqSource, MqTarget
from bridge.connectors.mqtt_internal import route_client_id
from bridge.connectors.registry import CONNECTOR_FACTORIES
from mappings.conversions.mqtt_mq import subscription_name
from mappings.errors import MappingError
from mappings.mq import constants as C
from mappings.rules.model import MqConnector, parse_rules
from tests.mq_fake import (
    CONFIG,
    MD_CLASS,
    FakeQueueManager,
    fake_conn,
    install_fake_mqi,
    make_fake_mqi,
    msg_file,
    new_queue_manager,
    run_async,
)


@pytest.fixture
def qm() -> FakeQueueManager:
    return new_queue_manager()


@pytest.fixture
def fake(qm: FakeQueueManager, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    return install_fake_mqi(qm, monkeypatch)


def test_target_puts_under_syncpoint_and_commits_the_batch(qm: FakeQueueManager, fake: types.ModuleType) -> None:
    msgs = [msg_file("mqtt_qos1_retained"), msg_file("jms_text_big_endian"), msg_file("mqtt_qos0_empty")]
    target = MqTarget(fake_conn(fake), {})

    async def go() -> None:
        await target.send([Outbound(f"k{i}", m, "DEV.QUEUE.1") for i, m in enumerate(msgs)])
        await target.close()

    run_async(go())
    assert qm.commits == 1 and qm.depth("DEV.QUEUE.1") == 3
    assert qm.opens[0] == ("queue", "DEV.QUEUE.1",
                           mqi.MQOO_OUTPUT | mqi.MQOO_FAIL_IF_QUIESCING | mqi.MQOO_SET_IDENTITY_CONTEXT)
    for stored, original in zip(qm.queues["DEV.QUEUE.1"], msgs, strict=True):
        md_sent, data_sent = mqi.split_message(original)
        assert stored.data == data_sent   # headers + body exactly as the mapping library made them
        got = mqi.read_md(MD_CLASS().unpack(stored.md))
        if md_sent.msg_id == C.MQMI_NONE:
            assert got.msg_id.startswith(b"AMQ FAKE")   # the queue manager gave it a MsgId
        else:
            assert got.msg_id == md_sent.msg_id
        assert (got.encoding, got.coded_char_set_id, got.format, got.persistence, got.user_identifier) == (
            md_sent.encoding, md_sent.coded_char_set_id, md_sent.format, md_sent.persistence,
            md_sent.user_identifier)
    conn = qm.connects[0]
    assert conn["name"] == "QM1" and conn["cd"].ChannelName == b"DEV.APP.SVRCONN"
    assert conn["cd"].ConnectionName == b"mq(1414)" and "sco" not in conn
    assert conn["csp"].CSPUserId == "app" and conn["csp"].CSPPassword == "passw0rd"


def test_failed_put_backs_out_the_whole_batch(qm: FakeQueueManager, fake: types.ModuleType) -> None:
    qm.fail_put_after = 1
    target = MqTarget(fake_conn(fake), {})
    with pytest.raises(ConnectorError, match="2053"):
        run_async(target.send([Outbound("a", msg_file(), "Q"), Outbound("b", msg_file(), "Q")]))
    assert qm.depth("Q") == 0 and qm.commits == 0 and qm.backouts == 1
    qm.fail_put_after = None
    run_async(target.send([Outbound("a", msg_file(), "Q"), Outbound("b", msg_file(), "Q")]))
    assert qm.depth("Q") == 2 and qm.commits == 1
    run_async(target.close())


def test_pymqi_flavour_gets_user_and_password_and_tls_goes_in_cd_and_sco(qm: FakeQueueManager) -> None:
    fake = make_fake_mqi(qm, with_csp=False)
    config = MqConnector(type="mq", queue_manager="QM1", user="u", password="p",
                         cipher="ANY_TLS12_OR_HIGHER", key_repository="/etc/mqm/key")
    target = MqTarget(fake_conn(fake, config), {})
    run_async(target.send([Outbound("a", msg_file(), "Q")]))
    run_async(target.close())
    conn = qm.connects[0]
    assert conn["user"] == "u" and conn["password"] == "p" and "csp" not in conn
    assert conn["cd"].SSLCipherSpec == b"ANY_TLS12_OR_HIGHER" and conn["cd"].Version >= 7
    assert conn["sco"].KeyRepository == b"/etc/mqm/key"


def test_without_setid_authority_the_put_still_goes_with_default_context(
        qm: FakeQueueManager, fake: types.ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    qm.setid_allowed = False
    target = MqTarget(fake_conn(fake), {})
    run_async(target.send([Outbound("a", msg_file(), "Q")]))
    run_async(target.send([Outbound("b", msg_file(), "Q")]))
    run_async(target.close())
    assert qm.depth("Q") == 2
    assert mqi.read_md(MD_CLASS().unpack(qm.queues["Q"][0].md)).user_identifier == "app"
    assert "+setid" in caplog.text and caplog.text.count("no authority") == 1   # warned once, then cached


def test_no_put_authority_is_a_connector_error_not_a_fallback(qm: FakeQueueManager, fake: types.ModuleType) -> None:
    qm.put_allowed = False
    conn = fake_conn(fake)
    target = MqTarget(conn, {})
    with pytest.raises(ConnectorError, match="2035"):
        run_async(target.send([Outbound("a", msg_file(), "Q")]))
    assert not conn._no_identity   # the set-identity fallback was tried and did not stick
    assert [o[2] & mqi.MQOO_SET_IDENTITY_CONTEXT for o in qm.opens] == [mqi.MQOO_SET_IDENTITY_CONTEXT, 0]
    run_async(target.close())


def test_bytes_that_are_not_an_mq_message_put_nothing_and_are_not_retried(
        qm: FakeQueueManager, fake: types.ModuleType) -> None:
    """Not a ConnectorError (which the router retries forever): the router backs the batch out instead."""
    target = MqTarget(fake_conn(fake), {})
    with pytest.raises(MappingError, match="StrucId"):
        run_async(target.send([Outbound("a", msg_file(), "Q"), Outbound("b", b"XX" * 200, "Q")]))
    with pytest.raises(TypeError, match="not MQ bytes"):
        run_async(target.send([Outbound("c", "text", "Q")]))
    assert qm.connects == [] and qm.depth("Q") == 0
    run_async(target.close())


def test_topic_target_opens_the_nearest_admin_topic_object(qm: FakeQueueManager, fake: types.ModuleType) -> None:
    qm.subs["S1"] = "sensors/hall/temp"
    target = MqTarget(fake_conn(fake), {"SENSORS": "sensors"})
    run_async(target.send([Outbound("a", msg_file(), "topic:sensors/hall/temp"),
                      Outbound("b", msg_file(), "topic:{topic}")]))   # template: from the RFH2 mqps.Top
    run_async(target.close())
    assert [o[1] for o in qm.opens] == ["SENSORS|hall/temp"]   # one open: the template renders the same topic
    assert qm.depth("SUBQ.S1") == 2


def test_topic_object_split() -> None:
    admin = {"SENSORS": "sensors", "HALL": "sensors/hall"}
    assert mq_connection.topic_object(admin, "sensors/hall/temp") == ("HALL", "temp")
    assert mq_connection.topic_object(admin, "sensors/yard") == ("SENSORS", "yard")
    assert mq_connection.topic_object(admin, "sensors") == ("SENSORS", "")
    assert mq_connection.topic_object(admin, "sensorsX/a") == ("", "sensorsX/a")   # level boundaries only
    assert mq_connection.topic_object({}, "a/b") == ("", "a/b")                     # SYSTEM.BASE.TOPIC


def test_source_gets_under_syncpoint_rebuilds_bytes_and_commits(qm: FakeQueueManager, fake: types.ModuleType) -> None:
    originals = [msg_file("jms_text_big_endian"), msg_file("mqtt_qos1_retained"), msg_file("mq_plain_string")]
    for m in originals:
        qm.preload("IN", m)
    source = MqSource(fake_conn(fake), MqSourceSpec("IN", None, "", {}))

    async def go() -> list[Inbound]:
        items = await source.receive(2)
        assert qm.depth("IN") == 1 and qm.commits == 0   # taken, not yet committed
        await source.confirm(items)
        rest = await source.receive(10)
        await source.confirm(rest)
        await source.close()
        return items + rest

    items = run_async(go())
    assert len(items) == 3
    for item, original in zip(items, originals, strict=True):
        md_o, data_o = mqi.split_message(original)
        md_g, data_g = mqi.split_message(item.message)  # type: ignore[arg-type]
        assert data_g == data_o
        if md_o.msg_id == C.MQMI_NONE:
            assert md_g.msg_id.startswith(b"AMQ FAKE")
            md_o = dataclasses.replace(md_o, msg_id=md_g.msg_id)
        if md_o.version == 1:   # byte for byte, the MQMD in its own byte order (LE and BE fixtures)
            assert item.message == mqi.join_message(md_o, data_o)
        else:                   # a v2 MQMD whose v2 fields are defaults comes back as the v1 MQMD
            assert md_g == dataclasses.replace(md_o, version=1)
        assert item.key == f"mq:{md_g.msg_id.hex()}" and item.source_type == md_o.format.strip()
    first = items[0]
    assert first.redelivery_count == 0 and first.destination == "IN" and first.protocol == "mq"
    assert qm.depth("IN") == 0 and qm.commits == 2


def test_source_ends_a_batch_at_batch_bytes(qm: FakeQueueManager, fake: types.ModuleType,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """However many messages the router asks for, a batch stops once it holds BATCH_BYTES (the one that
    crosses it included): large messages are not read into memory 128 at a time."""
    message = msg_file("mq_plain_string")
    for _ in range(5):
        qm.preload("IN", message)
    monkeypatch.setattr(mq_connection, "BATCH_BYTES", len(mqi.split_message(message)[1]) + 1)
    source = MqSource(fake_conn(fake), MqSourceSpec("IN", None, "", {}))

    async def go() -> list[int]:
        sizes = []
        while sum(sizes) < 5:
            items = await source.receive(128)
            sizes.append(len(items))
            await source.confirm(items)
        await source.close()
        return sizes

    assert run_async(go()) == [2, 2, 1]
    assert qm.depth("IN") == 0 and qm.commits == 3


def test_backout_raises_backout_count_and_redelivers(qm: FakeQueueManager, fake: types.ModuleType) -> None:
    qm.preload("IN", msg_file())
    source = MqSource(fake_conn(fake), MqSourceSpec("IN", None, "", {}))

    async def go() -> list[int]:
        counts = []
        for _ in range(3):
            items = await source.receive(5)
            counts.append(items[0].redelivery_count)
            await source.backout(items)
        await source.close()
        return counts

    assert run_async(go()) == [0, 1, 2]
    assert qm.depth("IN") == 1 and qm.backouts >= 3


def test_all_mqi_calls_of_a_connection_run_on_its_one_thread(qm: FakeQueueManager, fake: types.ModuleType) -> None:
    qm.preload("IN", msg_file())
    source = MqSource(fake_conn(fake, name="s"), MqSourceSpec("IN", None, "", {}))
    target = MqTarget(fake_conn(fake, name="t"), {})

    async def go() -> None:
        items = await source.receive(5)
        await target.send([Outbound("a", items[0].message, "OUT")])  # type: ignore[arg-type]
        await source.confirm(items)
        await source.close()
        await target.close()

    run_async(go())
    main = threading.get_ident()
    assert len(qm.threads) == 2
    thread_sets = list(qm.threads.values())
    assert all(len(t) == 1 and main not in t for t in thread_sets)
    assert thread_sets[0] != thread_sets[1]
    assert qm.depth("OUT") == 1 and qm.depth("IN") == 0


def test_connection_broken_reconnects_and_redelivers(
        qm: FakeQueueManager, fake: types.ModuleType, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(mq_connection, "RECONNECT_MIN", 0.01)
    qm.preload("IN", msg_file())
    conn = fake_conn(fake)
    conn.delay = 0.01
    source = MqSource(conn, MqSourceSpec("IN", None, "", {}))

    async def go() -> tuple[int, int]:
        items = await source.receive(5)
        qm.break_connections()                  # e.g. the queue manager restarts
        await source.confirm(items)             # cannot commit: the QM backed the get out
        assert "deliver" in caplog.text and qm.depth("IN") == 1
        again = await source.receive(5)         # 2009 on the old handle, reconnect, get again
        await source.confirm(again)
        await source.close()
        return again[0].redelivery_count, conn.generation

    redelivered, generation = run_async(go())
    assert redelivered == 1 and generation == 2 and qm.depth("IN") == 0 and len(qm.connects) == 2


def test_target_reconnects_after_broken_connection(qm: FakeQueueManager, fake: types.ModuleType) -> None:
    target = MqTarget(fake_conn(fake), {})
    run_async(target.send([Outbound("a", msg_file(), "Q")]))
    qm.break_connections()
    with pytest.raises(ConnectorError, match="reconnecting"):
        run_async(target.send([Outbound("b", msg_file(), "Q")]))
    run_async(target.send([Outbound("b", msg_file(), "Q")]))   # the router retries the batch: new connection
    run_async(target.close())
    assert qm.depth("Q") == 2 and len(qm.connects) == 2


def test_connect_failures_back_off(qm: FakeQueueManager, fake: types.ModuleType) -> None:
    now = [100.0]
    conn = MqConnection("t", CONFIG, mqi_loader=lambda: fake, clock=lambda: now[0])
    qm.fail_connects = 2
    target = MqTarget(conn, {})
    with pytest.raises(ConnectorError, match="MQCONNX to QM1 over DEV.APP.SVRCONN at mq\\(1414\\) failed"):
        run_async(target.send([Outbound("a", msg_file(), "Q")]))
    with pytest.raises(ConnectorError, match="next attempt in 0.5s"):   # no MQCONNX inside the backoff
        run_async(target.send([Outbound("a", msg_file(), "Q")]))
    assert len(qm.connects) == 1
    now[0] += 0.5
    with pytest.raises(ConnectorError, match="failed"):
        run_async(target.send([Outbound("a", msg_file(), "Q")]))
    assert conn.retry_at == pytest.approx(101.5)   # 0.5 s, then 1 s
    now[0] += 1.0
    run_async(target.send([Outbound("a", msg_file(), "Q")]))
    run_async(target.close())
    assert len(qm.connects) == 3 and qm.depth("Q") == 1 and conn.delay == mq_connection.RECONNECT_MIN


def test_topic_source_is_a_durable_subscription_named_client_id_colon_topic(
        qm: FakeQueueManager, fake: types.ModuleType) -> None:
    rules = parse_rules("""
connectors:
  qm1: {type: mq, queue_manager: QM1}
routes:
  - name: from-mq-topic
    from: {connector: qm1, topic: sensors/hall/temp}
    to: {mqtt: "plant/{topic}"}
    options: {admin_topics: {SENSORS: sensors}}
""")
    route = rules.routes[0]
    source = CONNECTOR_FACTORIES["mq"](rules, route, route.source, "source")
    assert isinstance(source, MqSource)
    expected = subscription_name(route_client_id("from-mq-topic"), "sensors/hall/temp")
    assert source.spec.subscription == expected and expected.endswith(":sensors/hall/temp")
    target = MqTarget(fake_conn(fake, name="pub"), {})

    async def go() -> Inbound:
        task = asyncio.ensure_future(source.receive(5))   # subscribes, then waits
        while not qm.sub_calls:
            await asyncio.sleep(0.01)
        await target.send([Outbound("a", msg_file(), "topic:sensors/hall/temp")])
        items = await task
        await source.confirm(items)
        await source.close()
        await target.close()
        return items[0]

    item = run_async(go())
    call = qm.sub_calls[0]
    assert call["name"] == expected and call["object"] == "SENSORS" and call["string"] == "hall/temp"
    want = mqi.MQSO_CREATE | mqi.MQSO_RESUME | mqi.MQSO_DURABLE | mqi.MQSO_MANAGED
    assert call["options"] & want == want
    assert (f"sub {expected}", mqi.MQCO_KEEP_SUB) in qm.closes   # the durable subscription outlives us
    assert item.destination == "topic:sensors/hall/temp"
