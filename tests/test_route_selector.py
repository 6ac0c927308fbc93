"""A route's selector on non-JMS sources (mappings/selector/views.py): the JMS view of MQTT publications
and MQ messages, and the embedded queue's get that skips what the selector does not match (real SQLite)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bridge.connectors.embedded import EmbeddedSource, QueueStore, StoreSelection
from mappings.conversions.envelope import envelope_payload
from mappings.conversions.jms_mq import jms_to_mq_bytes
from mappings.errors import MappingError
from mappings.jms.model import DeliveryMode, JmsHeaders, JmsMessage, TextBody, jbytes, jdouble, jint, jstring
from mappings.mq import constants as C
from mappings.mq.mqmd import Mqmd, encode_mqmd
from mappings.mqtt.publication import MqttPublication
from mappings.rules.model import RouteOptions
from mappings.selector.views import MqttViews, jms_lookup, mq_view, mqtt_view, source_selector
from tests.mq_support import usr_message

NOW = 1_763_000_000.0


# -- the JMS views ---------------------------------------------------------------------------------------


def test_mqtt_view_is_the_mqtt_to_jms_mapping() -> None:
    opts = RouteOptions()
    v0 = mqtt_view(MqttPublication("plant/1/temp", b"\x00\xff", qos=0, client_id="dev-1", username="alice"),
                   opts, NOW)
    assert v0["JMSDeliveryMode"] == "NON_PERSISTENT"          # amlen Table 1: QoS 0
    assert v0["JMSPriority"] == 4 and v0["JMSTimestamp"] == int(NOW * 1000)
    assert v0["JMS_SWIFTMQ_MQTT_PUBQOS"] == 0 and v0["JMS_SWIFTMQ_CID"] == "dev-1" and v0["JMSXUserID"] == "alice"
    assert not any("plant" in str(v) for v in v0.values())    # the topic is not a property
    v2 = mqtt_view(MqttPublication("t", b"x", qos=2, client_id="dev-2"), opts, NOW)
    assert v2["JMSDeliveryMode"] == "PERSISTENT" and v2["JMS_SWIFTMQ_MQTT_PUBQOS"] == 2
    assert "JMSXUserID" not in v2                               # no user name: NULL
    off = mqtt_view(MqttPublication("t", b"x", qos=1, client_id="dev-2"), RouteOptions(swiftmq_properties=False), NOW)
    assert "JMS_SWIFTMQ_CID" not in off and "JMS_SWIFTMQ_MQTT_PUBQOS" not in off
    assert off["JMSDeliveryMode"] == "PERSISTENT"


def test_mq_view_is_the_ibm_jms_mapping_with_typed_properties() -> None:
    view = mq_view(usr_message(7, "eu", priority=6, persistent=False), NOW)
    assert view["region"] == "eu" and view["n"] == 7               # i4 stays a number
    assert view["JMSPriority"] == 6 and view["JMSDeliveryMode"] == "NON_PERSISTENT"
    assert view["JMSRedelivered"] is False and view["JMSXDeliveryCount"] == 1
    # a JMS message through JMSMQTransform: headers and typed properties come back for the selector
    jms = JmsMessage(JmsHeaders(delivery_mode=DeliveryMode.PERSISTENT, priority=8, correlation_id="c-1",
                                type="order"),
                     {"price": jdouble(2.5), "qty": jint(3), "who": jstring("bob"), "raw": jbytes(b"\x01")},
                     TextBody("hi"))
    data, _ = jms_to_mq_bytes(jms, now_ms=int(NOW * 1000))
    view = mq_view(data, NOW)
    assert (view["price"], view["qty"], view["who"]) == (2.5, 3, "bob")
    assert "raw" not in view                                       # byte[]: no selector type, NULL
    assert view["JMSCorrelationID"] == "c-1" and view["JMSType"] == "order" and view["JMSPriority"] == 8


def test_cached_mqtt_views_equal_the_mapping_for_each_message() -> None:
    opts = RouteOptions()
    views = MqttViews(opts)
    pubs = [MqttPublication("a", b"1", qos=1, client_id="c1"), MqttPublication("b", b"2", qos=1, client_id="c1"),
            MqttPublication("a", b"3", qos=0, client_id="c1"), MqttPublication("a", b"4", qos=1, client_id="c2"),
            MqttPublication("a", b"5", qos=1, client_id="c1", user_properties=(("JMSTimestamp",
                                                                                 "2024-01-02T03:04:05.678Z"),))]
    for i, pub in enumerate(pubs * 2):
        received = NOW + i
        assert views(pub, received) == mqtt_view(pub, opts, received), pub
    assert views(pubs[-1], NOW)["JMSTimestamp"] == 1704164645678   # the user property, not the receive time
    assert len(views._cache) == 3                                   # one per (QoS, client id); the last not cached


def test_envelope_routes_select_on_the_jms_message_the_payload_carries() -> None:
    opts = RouteOptions(selector="JMSType = 'order' AND qty > 2", mqtt_format="envelope")
    sel = source_selector(opts, "mqtt")
    assert sel is not None

    def pub(qty: int) -> MqttPublication:
        jms = JmsMessage(JmsHeaders(type="order"), {"qty": jint(qty)}, TextBody("x"))
        return MqttPublication("req/1", envelope_payload(jms), qos=1)

    assert sel.matches(pub(3), NOW) and not sel.matches(pub(2), NOW)
    with pytest.raises(MappingError):   # not an envelope: the route sends it to its backout destination
        sel.matches(MqttPublication("req/1", b"plain text", qos=1), NOW)


def test_byte_correlation_id_is_seen_as_id_hex() -> None:
    jms = JmsMessage(JmsHeaders(correlation_id=b"\x01\xab"))
    assert jms_lookup(jms)["JMSCorrelationID"] == "ID:01ab"


def test_source_selector_compiles_once_and_empty_means_none() -> None:
    assert source_selector(RouteOptions(), "mqtt") is None
    assert source_selector(RouteOptions(selector="  "), "mq") is None
    sel = source_selector(RouteOptions(selector="JMSDeliveryMode = 'PERSISTENT' AND JMS_SWIFTMQ_CID LIKE 'dev-%'"),
                          "mqtt")
    assert sel is not None
    assert sel.matches(MqttPublication("t", b"", qos=1, client_id="dev-9"), NOW)
    assert not sel.matches(MqttPublication("t", b"", qos=0, client_id="dev-9"), NOW)
    assert not sel.matches(MqttPublication("t", b"", qos=1, client_id="other"), NOW)
    with pytest.raises(MappingError, match="no MQ message bytes"):
        source_selector(RouteOptions(selector="x = 1"), "mq").matches("not bytes", NOW)  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="jms"):
        source_selector(RouteOptions(selector="x = 1"), "jms")


# -- the embedded store's get with a selector -----------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> QueueStore:
    s = QueueStore(tmp_path / "q.sqlite3", synchronous="OFF").open()
    yield s  # type: ignore[misc]
    s.close()


def _selection(text: str) -> StoreSelection:
    sel = source_selector(RouteOptions(selector=text), "mq")
    assert sel is not None
    return StoreSelection(sel, "IN")


def test_get_skips_non_matching_leaves_them_in_order_and_evaluates_each_once(store: QueueStore) -> None:
    regions = ["us", "eu", "us", "eu", "eu", "us", "eu"]
    store.put_many([("IN", usr_message(i, r)) for i, r in enumerate(regions)])
    selection = _selection("region = 'eu' AND n > 1")
    got = store.get_locked("IN", 2, selection)
    assert [mq_view(m.data, NOW)["n"] for m in got] == [3, 4]       # matching, oldest first
    assert selection.evaluated == 5                                # stopped after the second match
    rest = store.get_locked("IN", 10, selection)
    assert [mq_view(m.data, NOW)["n"] for m in rest] == [6]
    assert selection.evaluated == 7                                # each message's view built once
    store.confirm([m.seq for m in got + rest])
    left = store.browse("IN")
    assert [mq_view(m.data, NOW)["n"] for m in left] == [0, 1, 2, 5]   # untouched, in their order
    assert all(m.backout_count == 0 for m in left)
    assert store.get_locked("IN", 10, selection) == []
    assert selection.evaluated == 7                                # known verdicts: no new views


def test_a_backed_out_message_is_judged_again_by_its_new_backout_count(store: QueueStore) -> None:
    store.put_many([("IN", usr_message(1, "eu")), ("IN", usr_message(2, "eu"))])
    selection = _selection("JMSRedelivered = TRUE")
    assert store.get_locked("IN", 10, selection) == []
    first = store.get_locked("IN", 1)                # another consumer takes it and backs it out
    store.backout([first[0].seq])
    again = store.get_locked("IN", 10, selection)
    assert [m.seq for m in again] == [first[0].seq] and again[0].backout_count == 1
    assert selection.evaluated == 3


def test_verdicts_of_messages_taken_by_others_are_forgotten(store: QueueStore) -> None:
    store.put_many([("IN", usr_message(i, "us")) for i in range(5)])
    selection = _selection("region = 'eu'")
    selection.begin_scan()
    assert store.get_locked("IN", 10, selection) == []
    selection.end_scan(complete=True)
    assert len(selection.verdicts) == 5
    other = store.get_locked("IN", 3)                # e.g. a route with the complementary selector
    store.confirm([m.seq for m in other])
    selection.begin_scan()
    store.get_locked("IN", 10, selection)
    selection.end_scan(complete=True)
    assert sorted(selection.verdicts) == [m.seq for m in store.browse("IN")]


def test_a_message_without_a_jms_view_stays_on_the_queue(store: QueueStore, caplog: pytest.LogCaptureFixture) -> None:
    bad = encode_mqmd(Mqmd(format=C.MQFMT_RF_HEADER_2)) + b"RFH \x00\x00"   # promises an RFH2 it lacks
    store.put_many([("IN", bad), ("IN", usr_message(1, "eu"))])
    selection = _selection("region = 'eu'")
    got = store.get_locked("IN", 10, selection)
    assert len(got) == 1 and mq_view(got[0].data, NOW)["region"] == "eu"
    assert store.depth("IN") == 2 and "left on the queue" in caplog.text


def test_embedded_source_hands_out_only_matching_messages(store: QueueStore) -> None:
    store.put_many([("IN", usr_message(i, "eu" if i % 3 == 0 else "us")) for i in range(9)])
    sel = source_selector(RouteOptions(selector="region = 'eu'"), "mq")

    async def go() -> list[int]:
        with ThreadPoolExecutor(1) as pool:
            source = EmbeddedSource(store, "IN", pool, selector=sel)
            items = await asyncio.wait_for(source.receive(100), 10)
            await source.confirm(items)
            await source.close()   # the deletes of what was confirmed are committed
            return [int(mq_view(i.message, NOW)["n"]) for i in items]  # type: ignore[arg-type]

    assert asyncio.run(go()) == [0, 3, 6]
    assert [mq_view(m.data, NOW)["n"] for m in store.browse("IN")] == [1, 2, 4, 5, 7, 8]
