# Tests the JMS connector: JMS model <-> STOMP frame rules (pure), and JmsTarget/JmsSource against a real
# ActiveMQ, with JmsTool (OpenWire) as the oracle for the Java types the broker built.
from __future__ import annotations

import asyncio
import json
import re
import threading
import uuid
from typing import Any

import pytest
import stomp
import stomp.exception
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.connectors.base import ConnectorError, Inbound, Outbound
from bridge.connectors.jms import JmsSource, JmsTarget
from bridge.connectors.stomp_link import InboundFrame, StompLink, StompLinkConfig, StompLinkError
from bridge.routing.convert import backout_message
from mappings.jms.model import (
    BytesBody,
    DeliveryMode,
    Destination,
    JavaType,
    JmsHeaders,
    JmsMessage,
    MapBody,
    NoBody,
    ObjectBody,
    StreamBody,
    TextBody,
    TypedMap,
    identifier_problem,
    jboolean,
    jbyte,
    jbytes,
    jchar,
    jdouble,
    jfloat,
    jint,
    jlong,
    jshort,
    jstring,
)
from mappings.report import Change, ConversionReport
from mappings.stomp.frames import (
    BODY_TYPE_PROPERTY,
    STOMP_HEADERS,
    backout_to_jms,
    destination_from_stomp,
    frame_to_jms,
    jms_to_frame,
    redelivery_count,
    stomp_destination,
)
from mappings.stomp.xstream import map_body_to_xstream_xml, xstream_map_entries
from tests.jms_strategies import typed_maps
from tests.support.activemq import BrokerEndpoints
from tests.support.gateway import wait_for
from tests.support.jmstool import JmsTool, typed

# ------------------------------------------------------------------------------ pure frame rules


def names(report: ConversionReport, change: Change | None = None) -> list[str]:
    return [f.name for f in report.findings if change is None or f.change is change]


def test_destinations() -> None:
    assert stomp_destination("orders") == "/queue/orders"
    assert stomp_destination("topic:a.b") == "/topic/a.b"
    assert stomp_destination("/queue/x") == "/queue/x"
    assert destination_from_stomp("/queue/q.1") == Destination.queue("q.1")
    assert destination_from_stomp("/topic/t") == Destination.topic("t")
    assert destination_from_stomp("/temp-queue/ID:x") == Destination.queue("ID:x")
    assert destination_from_stomp("") is None


def test_text_has_no_content_length_and_bytes_have_one() -> None:
    text = jms_to_frame(JmsMessage(body=TextBody("héllo")), "q")
    assert (text.destination, text.body, text.content_length) == ("/queue/q", "héllo".encode(), False)
    data = jms_to_frame(JmsMessage(body=BytesBody(b"\x00\x01")), "topic:t")
    assert (data.destination, data.body, data.content_length) == ("/topic/t", b"\x00\x01", True)


def test_text_with_nul_uses_amq_msg_type_and_reports_it() -> None:
    report = ConversionReport()
    frame = jms_to_frame(JmsMessage(body=TextBody("a\x00b")), "q", report)
    assert frame.content_length and frame.headers["amq-msg-type"] == "text"
    assert names(report, Change.COERCED) == ["body"]


def test_null_text_and_plain_message_are_reported() -> None:
    r1, r2 = ConversionReport(), ConversionReport()
    assert jms_to_frame(JmsMessage(body=TextBody(None)), "q", r1).body == b""
    assert jms_to_frame(JmsMessage(body=NoBody()), "q", r2).body == b""
    assert names(r1) == ["body"] and names(r2) == ["body"]


def test_headers_go_to_their_stomp_headers() -> None:
    h = JmsHeaders(delivery_mode=DeliveryMode.NON_PERSISTENT, expiration=1_900_000_000_000, priority=8,
                   correlation_id="c-1", reply_to=Destination.topic("replies.x"), type="order")
    frame = jms_to_frame(JmsMessage(h, body=TextBody("x")), "q")
    assert frame.headers == {"persistent": "false", "priority": "8", "expires": "1900000000000",
                             "correlation-id": "c-1", "reply-to": "/topic/replies.x", "type": "order"}
    frame = jms_to_frame(JmsMessage(JmsHeaders(reply_to=Destination.queue("r")), body=TextBody("x")), "q")
    assert frame.headers["persistent"] == "true" and frame.headers["reply-to"] == "/queue/r"


def test_what_headers_cannot_carry_is_reported() -> None:
    h = JmsHeaders(correlation_id=b"\x01\x02", reply_to=Destination.queue("R", "QM1"), message_id="ID:1",
                   timestamp=5)
    report = ConversionReport()
    frame = jms_to_frame(JmsMessage(h, body=TextBody("x")), "q", report)
    assert "correlation-id" not in frame.headers and frame.headers["reply-to"] == "/queue/R"
    assert sorted(names(report, Change.DROPPED)) == ["JMSCorrelationID", "JMSMessageID", "JMSReplyTo",
                                                     "JMSTimestamp"]


def test_typed_properties_become_strings_with_a_finding_each() -> None:
    props = TypedMap([("s", jstring("v")), ("i", jint(5)), ("b", jboolean(True)), ("f", jfloat(1.5)),
                      ("d", jdouble(0.1)), ("l", jlong(2**40)), ("c", jchar("z")), ("raw", jbytes(b"\x01")),
                      ("n", jstring(None)), ("priority", jstring("9"))], what="property")
    report = ConversionReport()
    frame = jms_to_frame(JmsMessage(properties=props, body=TextBody("x")), "q", report)
    assert {k: frame.headers[k] for k in ("s", "i", "b", "f", "d", "l", "c")} == {
        "s": "v", "i": "5", "b": "true", "f": "1.5", "d": "0.1", "l": str(2**40), "c": "z"}
    assert "raw" not in frame.headers and "n" not in frame.headers
    assert frame.headers["priority"] == "4"   # the JMS header, not the property
    assert sorted(names(report, Change.COERCED)) == ["b", "c", "d", "f", "i", "l"]
    assert sorted(names(report, Change.DROPPED)) == ["n", "priority", "raw"]


def test_nul_in_a_header_value_is_dropped_not_sent() -> None:
    report = ConversionReport()
    frame = jms_to_frame(JmsMessage(JmsHeaders(type="a\x00b"), TypedMap([("p", jstring("\x00"))], what="property"),
                                    TextBody("x")), "q", report)
    assert "type" not in frame.headers and "p" not in frame.headers
    assert sorted(names(report, Change.DROPPED)) == ["JMSType", "p"]


def test_map_body_uses_the_xstream_xml_form() -> None:
    body = MapBody(TypedMap([("s", jstring("5")), ("i", jint(1)), ("f", jfloat(0.5)), ("d", jdouble(float("inf"))),
                             ("b", jbytes(b"\x01\x02")), ("c", jchar("\x00")), ("t", jboolean(False)),
                             ("x", jstring("a<&>\r\x01")), ("n", jstring(None)), ("null", jlong(-5))]))
    report = ConversionReport()
    frame = jms_to_frame(JmsMessage(body=body), "q", report)
    assert frame.headers["transformation"] == "jms-map-xml" and not frame.content_length
    assert frame.body.decode() == (
        "<map><entry><string>s</string><string>5</string></entry><entry><string>i</string><int>1</int></entry>"
        "<entry><string>f</string><float>0.5</float></entry><entry><string>d</string><double>Infinity</double>"
        "</entry><entry><string>b</string><byte-array>AQI=</byte-array></entry><entry><string>c</string>"
        "<char></char></entry><entry><string>t</string><boolean>false</boolean></entry><entry><string>x</string>"
        "<string>a&lt;&amp;&gt;&#xd;&#x1;</string></entry><entry><string>null</string><long>-5</long></entry>"
        "</map>")
    assert names(report, Change.DROPPED) == ["map:n"]
    # the reader of what the broker sends back understands the same form
    assert xstream_map_entries(frame.body.decode(), ConversionReport()) == TypedMap(
        [(k, v) for k, v in body.entries.pairs if k != "n"])
    assert map_body_to_xstream_xml(MapBody(), ConversionReport()) == "<map></map>"


def test_stream_and_object_are_sent_in_another_type_and_reported() -> None:
    report = ConversionReport()
    frame = jms_to_frame(JmsMessage(body=StreamBody((jint(1), jstring("x")))), "q", report)
    assert frame.headers[BODY_TYPE_PROPERTY] == "jms_stream" and not frame.content_length
    assert json.loads(frame.body) == [{"type": "int", "value": 1}, {"type": "String", "value": "x"}]
    assert names(report) == ["body"]
    # and a frame so marked reads back as the same StreamMessage
    back = frame_to_jms({**frame.headers, "destination": "/queue/q"}, frame.body)
    assert back.body == StreamBody((jint(1), jstring("x")))
    report = ConversionReport()
    frame = jms_to_frame(JmsMessage(body=ObjectBody(b"\xac\xed\x00\x05", "java.lang.String")), "q", report)
    assert frame.content_length and frame.body == b"\xac\xed\x00\x05"
    assert frame.headers[BODY_TYPE_PROPERTY] == "jms_object"
    assert names(report) == ["body"]


XSTREAM_MAP = """<map>
  <entry>
    <string>b</string>
    <byte-array>AQ==</byte-array>
  </entry>
  <entry>
    <string>s</string>
    <string>5</string>
  </entry>
  <entry>
    <string>c</string>
    <char></char>
  </entry>
  <entry>
    <string>f</string>
    <float>1.0E10</float>
  </entry>
  <entry>
    <string>ctl</string>
    <string>a&#x1;b&lt;&amp;&gt;&amp;#x41;</string>
  </entry>
  <entry>
    <string>n</string>
    <null/>
  </entry>
  <entry>
    <string>l</string>
    <long>5</long>
  </entry>
</map>"""


def test_xstream_xml_map_is_read_with_exact_types() -> None:
    """The sample is what ActiveMQ 5.17 sent for a MapMessage (captured from a jms-xml subscription)."""
    report = ConversionReport()
    entries = xstream_map_entries(XSTREAM_MAP, report)
    assert entries == TypedMap([("b", jbytes(b"\x01")), ("s", jstring("5")), ("c", jchar("\x00")),
                                ("f", jfloat(1e10)), ("ctl", jstring("a\x01b<&>&#x41;")), ("l", jlong(5))])
    assert names(report, Change.DROPPED) == ["map:n"]


def test_frame_classification_and_headers() -> None:
    base = {"destination": "/queue/q", "message-id": "ID:m1", "priority": "6", "persistent": "true",
            "expires": "0", "timestamp": "1700000000000", "subscription": "route", "ack": "a1"}
    assert frame_to_jms({**base, "content-length": "2"}, b"\x00\x01").body == BytesBody(b"\x00\x01")
    assert frame_to_jms({**base, "transformation": "jms-xml"}, "hé".encode()).body == TextBody("hé")
    m = frame_to_jms({**base, "transformation": "jms-map-xml"}, XSTREAM_MAP.encode())
    assert isinstance(m.body, MapBody) and m.body.entries["l"] == jlong(5)
    o = frame_to_jms({**base, "transformation": "jms-object-xml"}, b"<string>os</string>")
    assert o.body == ObjectBody(b'"os"', "java.lang.String")
    h = frame_to_jms({**base, "correlation-id": "c", "reply-to": "/topic/r", "type": "T", "redelivered": "true",
                      "expires": "1700000060000"}, b"x").headers
    assert h == JmsHeaders(destination=Destination.queue("q"), delivery_mode=DeliveryMode.PERSISTENT,
                           expiration=1700000060000, priority=6, timestamp=1700000000000, message_id="ID:m1",
                           correlation_id="c", reply_to=Destination.topic("r"), type="T", redelivered=True)
    np = frame_to_jms({k: v for k, v in base.items() if k != "persistent"}, b"x")
    assert np.headers.delivery_mode is DeliveryMode.NON_PERSISTENT   # stomp-facts §2: absent = NON_PERSISTENT


def test_frame_properties_are_strings_and_bad_names_are_dropped() -> None:
    report = ConversionReport()
    m = frame_to_jms({"destination": "/queue/q", "message-id": "ID:1", "pInt": "70000", "my-prop": "x"}, b"t",
                     report)
    assert m.properties == TypedMap([("pInt", jstring("70000"))], what="property")
    assert [(f.change, f.name) for f in report.findings] == [(Change.COERCED, "pInt"), (Change.DROPPED, "my-prop")]


def test_empty_frame_is_reported_as_maybe_stream() -> None:
    report = ConversionReport()
    m = frame_to_jms({"destination": "/queue/q", "transformation": "jms-xml"}, b"", report)
    assert m.body == TextBody("") and names(report, Change.DROPPED) == ["body"]


def test_redelivery_count() -> None:
    assert redelivery_count({}) == 0
    assert redelivery_count({"redelivered": "true"}) == 1
    assert redelivery_count({"redelivered": "true", "JMSXDeliveryCount": "4"}) == 3


def test_backout_message_becomes_bytes_with_reason_properties() -> None:
    item = Inbound(key="jms:ID:1", protocol="jms", message=b"payload", source_type="TextMessage", size=7,
                   destination="q", received=0.0)
    msg = backout_to_jms(backout_message(item, "r1", "conversion failed: why"))
    assert msg.body == BytesBody(b"payload")
    assert msg.properties["mqbridgeReason"] == jstring("conversion failed: why")
    assert msg.properties["mqbridgeRoute"] == jstring("r1")


# ------------------------------------------------------------------------------ real ActiveMQ

activemq = pytest.mark.activemq


def run(coro: Any) -> Any:  # noqa: ANN401 - whatever the coroutine returns
    return asyncio.run(asyncio.wait_for(coro, 60))


@pytest.fixture
def link_config(activemq: BrokerEndpoints) -> StompLinkConfig:
    return StompLinkConfig(activemq.host, activemq.stomp_port, heartbeat_send_ms=2000, heartbeat_receive_ms=2000)


async def _send(config: StompLinkConfig, items: list[Outbound]) -> None:
    target = JmsTarget(config)
    await target.start()
    try:
        assert await asyncio.get_running_loop().run_in_executor(None, target.link.wait_until_up, 20)
        await target.send(items)
    finally:
        await target.close()


async def _receive(config: StompLinkConfig, dest: str, count: int, *, selector: str | None = None,
                   confirm: bool = True, timeout: float = 20) -> list[Inbound]:
    source = JmsSource(config, dest, selector=selector)
    await source.start()
    items: list[Inbound] = []
    try:
        async with asyncio.timeout(timeout):
            while len(items) < count:
                items += await source.receive(count - len(items))
        if confirm:
            await source.confirm(items)
    finally:
        await source.close()
    return items


@activemq
def test_target_builds_the_right_jms_messages(link_config: StompLinkConfig, jmstool: JmsTool,
                                              unique_name: str) -> None:
    q = f"jt.{unique_name}"
    msgs = [
        JmsMessage(JmsHeaders(correlation_id="c1", reply_to=Destination.queue("rq"), type="T", priority=7,
                              delivery_mode=DeliveryMode.NON_PERSISTENT),
                   TypedMap([("pi", jint(5)), ("ps", jstring("v"))], what="property"), TextBody("héllo")),
        JmsMessage(body=BytesBody(b"\x00\x01")),
        JmsMessage(body=MapBody(TypedMap([("i", jint(1)), ("s", jstring("5")), ("f", jfloat(0.5)),
                                          ("l", jlong(2**40)), ("c", jchar("z")), ("b", jbytes(b"\x01")),
                                          ("bo", jboolean(True)), ("sh", jshort(2)), ("by", jbyte(-1)),
                                          ("d", jdouble(0.1))]))),
        JmsMessage(body=StreamBody((jint(1), jstring("x")))),
    ]
    outs = [Outbound(f"k{i}", m, q) for i, m in enumerate(msgs)]
    run(_send(link_config, outs))
    got = jmstool.receive(f"queue://{q}", 4)   # a NON_PERSISTENT message may overtake persistent ones
    by_body = {m["type"] + ("S" if m["properties"].get(BODY_TYPE_PROPERTY) else ""): m for m in got}
    text, data, mapm, stream = by_body["Text"], by_body["Bytes"], by_body["Map"], by_body["TextS"]
    assert text["class"].endswith("ActiveMQTextMessage") and text["body"] == "héllo"
    h = text["headers"]
    assert (h["correlationId"], h["type"], h["replyTo"], h["priority"], h["deliveryMode"]) == (
        "c1", "T", "queue://rq", 7, "NON_PERSISTENT")
    assert text["properties"] == {"pi": {"type": "java.lang.String", "value": "5"},
                                  "ps": {"type": "java.lang.String", "value": "v"}}
    assert data["class"].endswith("ActiveMQBytesMessage") and data["body"]["hex"] == "0001"
    assert data["headers"]["deliveryMode"] == "PERSISTENT"
    assert mapm["class"].endswith("ActiveMQMapMessage")
    assert {k: v["type"] for k, v in mapm["body"].items()} == {
        "i": "java.lang.Integer", "s": "java.lang.String", "f": "java.lang.Float", "l": "java.lang.Long",
        "c": "java.lang.Character", "b": "byte[]", "bo": "java.lang.Boolean", "sh": "java.lang.Short",
        "by": "java.lang.Byte", "d": "java.lang.Double"}
    assert mapm["body"]["s"]["value"] == "5" and mapm["body"]["l"]["value"] == 2**40
    assert stream["class"].endswith("ActiveMQTextMessage")   # STOMP cannot make a StreamMessage
    assert stream["properties"][BODY_TYPE_PROPERTY]["value"] == "jms_stream"
    # every loss is on the Outbound for the conversion log
    assert [f.name for f in outs[0].extra["findings"]] == ["pi"]   # type: ignore[union-attr]
    assert "findings" not in outs[1].extra


@activemq
def test_source_reads_every_jms_type(link_config: StompLinkConfig, jmstool: JmsTool, unique_name: str) -> None:
    q = f"js.{unique_name}"
    jmstool.send(
        f"queue://{q}",
        {"type": "Text", "body": "t", "properties": {"p": typed("int", 3)},
         "headers": {"replyTo": "topic://r.x", "correlationId": "cc", "type": "tt", "priority": 6}},
        {"type": "Bytes", "body": {"hex": "00ff"}},
        {"type": "Map", "body": {"i": typed("int", 1), "s": typed("String", "a\u0001<&"), "f": typed("float", 0.5),
                                 "b": typed("byte[]", b"\x01"), "l": typed("long", 2**62)}},
        {"type": "Object", "body": {"class": "java.util.HashMap", "value": {"k": typed("int", 1)}}},
        {"type": "Object", "body": {"class": "java.lang.String", "value": "os"}},
        {"type": "Stream", "body": [typed("int", 1)]},
    )
    text, data, mapm, obj, objs, stream = run(_receive(link_config, q, 6))
    assert [i.source_type for i in (text, data, mapm, obj, objs, stream)] == [
        "TextMessage", "BytesMessage", "MapMessage", "ObjectMessage", "ObjectMessage", "TextMessage"]
    assert isinstance(text.message, JmsMessage)
    th = text.message.headers
    assert (th.correlation_id, th.reply_to, th.type, th.priority) == ("cc", Destination.topic("r.x"), "tt", 6)
    assert text.message.properties["p"] == jstring("3")
    assert [f.name for f in text.findings] == ["p"]
    assert text.key.startswith("jms:ID:") and text.destination == q and text.redelivery_count == 0
    assert data.message.body == BytesBody(b"\x00\xff")  # type: ignore[attr-defined]
    entries = mapm.message.body.entries  # type: ignore[attr-defined]
    assert dict(entries) == {"i": jint(1), "s": jstring("a\x01<&"), "f": jfloat(0.5), "b": jbytes(b"\x01"),
                             "l": jlong(2**62)}
    assert entries["s"] == jstring("a\x01<&") and entries["l"].type is JavaType.LONG
    assert obj.message.body == ObjectBody(b'{"k":1}', "java.util.HashMap")  # type: ignore[attr-defined]
    assert objs.message.body == ObjectBody(b'"os"', "java.lang.String")  # type: ignore[attr-defined]
    assert stream.message.body == TextBody("") and [f.name for f in stream.findings] == ["body"]  # type: ignore[attr-defined]


@activemq
def test_source_selector_moves_only_matching(link_config: StompLinkConfig, jmstool: JmsTool,
                                             unique_name: str) -> None:
    q = f"sel.{unique_name}"
    jmstool.send(f"queue://{q}", *({"type": "Text", "body": f"m{i}", "properties": {"n": typed("int", i)}}
                                   for i in range(6)))
    got = run(_receive(link_config, q, 3, selector="n >= 3"))
    assert sorted(i.message.body.text for i in got) == ["m3", "m4", "m5"]  # type: ignore[attr-defined]
    rest = jmstool.receive(f"queue://{q}", 3)
    assert sorted(m["body"] for m in rest) == ["m0", "m1", "m2"]


@activemq
def test_unconfirmed_messages_come_again_marked_redelivered(link_config: StompLinkConfig, jmstool: JmsTool,
                                                            unique_name: str) -> None:
    q = f"redeliver.{unique_name}"
    jmstool.send(f"queue://{q}", {"type": "Text", "body": "once"})
    (first,) = run(_receive(link_config, q, 1, confirm=False))
    assert first.redelivery_count == 0
    (again,) = run(_receive(link_config, q, 1))
    assert again.key == first.key and again.redelivery_count == 1
    with pytest.raises(Exception, match="received 0 of 1"):
        jmstool.receive(f"queue://{q}", 1, timeout=1)


@activemq
def test_backout_keeps_the_message_and_counts(link_config: StompLinkConfig, jmstool: JmsTool,
                                              unique_name: str) -> None:
    q = f"backout.{unique_name}"
    jmstool.send(f"queue://{q}", {"type": "Text", "body": "b"})

    async def scenario() -> tuple[int, int]:
        source = JmsSource(link_config, q)
        await source.start()
        try:
            (item,) = await source.receive(10)
            await source.backout([item])     # not NACK: ActiveMQ would move it to the DLQ (§5)
            (again,) = await source.receive(10)
            await source.confirm([again])
            return item.redelivery_count, again.redelivery_count
        finally:
            await source.close()

    assert run(scenario()) == (1, 1)
    with pytest.raises(Exception, match="received 0 of 1"):
        jmstool.receive(f"queue://{q}", 1, timeout=1)


@activemq
def test_target_fails_with_connector_error_when_the_broker_is_unreachable(unique_name: str) -> None:
    from tests.support.gateway import free_port
    config = StompLinkConfig("127.0.0.1", free_port(), connect_timeout=1.0)

    async def scenario() -> None:
        target = JmsTarget(config)
        await target.start()
        try:
            await target.send([Outbound("k", JmsMessage(body=TextBody("x")), "q")])
        finally:
            await target.close()

    with pytest.raises(ConnectorError, match="JMS provider"):
        run(scenario())


@activemq
def test_transactional_batch_is_all_or_nothing(link_config: StompLinkConfig, jmstool: JmsTool,
                                               unique_name: str) -> None:
    """send_many(transactional=True) awaits one RECEIPT (the COMMIT's). A frame the provider refuses
    (ActiveMQ drops the connection on a malformed header) fails the batch and commits none of it."""
    link = StompLink(link_config)
    link.start(timeout=20)
    q = f"tx.{unique_name}"
    try:
        def good(body: bytes) -> tuple[str, bytes, dict[str, str], bool]:
            return (f"/queue/{q}", body, {}, False)

        link.send_many([good(b"a"), good(b"b")], transactional=True)
        with pytest.raises(StompLinkError):
            link.send_many([good(b"x"), (f"/queue/{q}", b"y", {"priority": "high"}, False), good(b"z")],
                           transactional=True)
        assert link.wait_until_up(20)   # reconnected
        link.send_many([good(b"c")], transactional=True)
    finally:
        link.close()
    assert [m["body"] for m in jmstool.receive(f"queue://{q}", 3)] == ["a", "b", "c"]
    with pytest.raises(Exception, match="received 0 of 1"):
        jmstool.receive(f"queue://{q}", 1, timeout=1)


def client_id_free(config: StompLinkConfig, client_id: str) -> bool:
    """Can a connection with this client id be made now? (ActiveMQ refuses a duplicate client id.)"""
    conn = stomp.Connection12([(config.host, config.port)])
    try:
        conn.connect(wait=True, headers={"client-id": client_id})
    except stomp.exception.StompException:
        return False
    if not conn.is_connected():
        return False
    conn.disconnect()
    return True


@activemq
def test_durable_topic_subscription_keeps_messages_while_the_source_is_away(
        link_config: StompLinkConfig, jmstool: JmsTool, unique_name: str) -> None:
    """A route endpoint with ``subscription`` makes an ActiveMQ durable subscriber (CONNECT client-id +
    SUBSCRIBE activemq.subscriptionName): what is published while the gateway is down is kept for it."""
    import dataclasses

    topic = f"dur.{unique_name}"
    config = dataclasses.replace(link_config, client_id=f"mqbridge-{unique_name}"[:60])

    async def attach(count: int) -> list[Inbound]:
        source = JmsSource(config, f"topic:{topic}", subscription_name="route-sub")
        await source.start()
        items: list[Inbound] = []
        try:
            assert await asyncio.get_running_loop().run_in_executor(None, source.link.wait_until_up, 20)
            async with asyncio.timeout(20):
                while len(items) < count:
                    items += await source.receive(10)
            await source.confirm(items)
        finally:
            await source.close()
        return items

    async def subscribe_only() -> None:
        source = JmsSource(config, f"topic:{topic}", subscription_name="route-sub")
        await source.start()
        try:
            assert await asyncio.get_running_loop().run_in_executor(None, source.link.wait_until_up, 20)
        finally:
            await source.close()

    run(subscribe_only())
    # ActiveMQ drops a closed connection's client id asynchronously; a message published before then is
    # dispatched to the closing consumer (see the report's known issues). Send once the id is free.
    wait_for(lambda: client_id_free(link_config, config.client_id or ""), 20, interval=0.1,
             what="ActiveMQ to release the client id")
    jmstool.send(f"topic://{topic}", {"type": "Text", "body": "while away"})
    (item,) = run(attach(1))
    assert item.message.body == TextBody("while away")  # type: ignore[attr-defined]
    assert item.destination == topic


# ------------------------------------------------------------------------------ properties

NON_BMP = re.compile("[\U00010000-\U0010FFFF]")   # lost in ActiveMQ's map transformation (below)
_header_names = st.sampled_from(["destination", "message-id", "content-length", "transformation", "priority",
                                 "persistent", "expires", "timestamp", "reply-to", "correlation-id", "type",
                                 "redelivered", BODY_TYPE_PROPERTY, "JMSXDeliveryCount", "amq-msg-type"]) | st.text(
    min_size=1, max_size=8)
_header_values = st.sampled_from(["jms-map-xml", "jms-object-xml", "jms-map-json", "jms_stream", "jms_object",
                                  "text", "true", "9", "-1", "/queue/x", "/topic/", "abc", ""]) | st.text(max_size=12)


@settings(max_examples=300, deadline=None)
@given(headers=st.dictionaries(_header_names, _header_values, max_size=8),
       body=st.binary(max_size=60) | st.sampled_from([XSTREAM_MAP.encode(), b"<string>x</string>", b"<map>",
                                                      b'[{"type":"int","value":1}]', b"<entry><x>1</x></entry>"]))
def test_frame_to_jms_never_raises(headers: dict[str, str], body: bytes) -> None:
    """Whatever a provider sends, the source gets a JmsMessage (losses become findings), never an error
    that would leave the frame unacknowledged and stuck."""
    msg = frame_to_jms(headers, body)
    assert isinstance(msg, JmsMessage)


@activemq
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=typed_maps(xml_safe=False, max_size=6).filter(
    lambda m: all(v.value is not None and not NON_BMP.search(k + (v.value if isinstance(v.value, str) else ""))
                  for k, v in m.items())))
def test_map_bodies_keep_every_java_type_through_the_broker(link_config: StompLinkConfig, entries: TypedMap) -> None:
    """Map -> jms-map-json SEND -> ActiveMQ MapMessage -> jms-map-xml MESSAGE -> Map: same keys, types and
    values (entry order is the broker's HashMap order)."""
    q = f"maprt.{uuid.uuid4().hex}"
    frames: list[InboundFrame] = []
    got = threading.Event()

    def on_frame(frame: InboundFrame) -> None:
        frames.append(frame)
        got.set()

    link = StompLink(link_config)
    link.subscribe(f"/queue/{q}", on_frame, ack="auto", headers={"transformation": "jms-xml"})
    link.start(timeout=20)
    try:
        f = jms_to_frame(JmsMessage(body=MapBody(entries)), q)
        link.send_many([(f.destination, f.body, f.headers, f.content_length)])
        assert got.wait(20)
    finally:
        link.close()
    report = ConversionReport()
    back = frame_to_jms(frames[0].headers, frames[0].body, report)
    assert isinstance(back.body, MapBody)
    assert dict(back.body.entries) == dict(entries.pairs)
    assert not [f for f in report.findings if f.name.startswith("map:")]


@activemq
def test_activemq_map_transformation_loses_characters_above_the_bmp(link_config: StompLinkConfig,
                                                                    unique_name: str) -> None:
    """Pinned broker behaviour (the reason for the finding): U+10000 in a map String comes back as two
    U+FFFD. If an ActiveMQ upgrade fixes it, this fails and the finding can go."""
    report = ConversionReport()
    f = jms_to_frame(JmsMessage(body=MapBody(TypedMap([("k", jstring("\U00010000x"))]))), f"nb.{unique_name}",
                     report)
    assert ("coerced", "map:k") in {(x.change.value, x.name) for x in report.findings}
    frames: list[InboundFrame] = []
    got = threading.Event()
    link = StompLink(link_config)
    link.subscribe(f.destination, lambda fr: (frames.append(fr), got.set()), ack="auto",
                   headers={"transformation": "jms-xml"})
    link.start(timeout=20)
    try:
        link.send_many([(f.destination, f.body, f.headers, f.content_length)])
        assert got.wait(20)
    finally:
        link.close()
    back = frame_to_jms(frames[0].headers, frames[0].body)
    assert back.body == MapBody(TypedMap([("k", jstring("\ufffd\ufffdx"))]))


@activemq
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(props=st.dictionaries(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True).filter(
           lambda n: n not in STOMP_HEADERS and identifier_problem(n) is None),
           st.text(max_size=20), max_size=5),
       corr=st.none() | st.text(max_size=20), jtype=st.none() | st.text(max_size=20))
def test_string_properties_and_headers_survive_the_broker(link_config: StompLinkConfig, props: dict[str, str],
                                                         corr: str | None, jtype: str | None) -> None:
    """Whatever a String property or header holds, it arrives the same or is reported (never a broken
    frame that would block the route)."""
    q = f"props.{uuid.uuid4().hex}"
    msg = JmsMessage(JmsHeaders(correlation_id=corr, type=jtype),
                     TypedMap([(k, jstring(v)) for k, v in props.items()], what="property"), TextBody("x"))
    report = ConversionReport()
    f = jms_to_frame(msg, q, report)
    frames: list[InboundFrame] = []
    got = threading.Event()
    link = StompLink(link_config)
    link.subscribe(f.destination, lambda fr: (frames.append(fr), got.set()), ack="auto",
                   headers={"transformation": "jms-xml"})
    link.start(timeout=20)
    try:
        link.send_many([(f.destination, f.body, f.headers, f.content_length)])
        assert got.wait(20)
    finally:
        link.close()
    back = frame_to_jms(frames[0].headers, frames[0].body)
    reported = {x.name for x in report.findings if x.change is Change.DROPPED}
    assert {k: v.value for k, v in back.properties.items()} == {k: v for k, v in props.items() if k not in reported}
    assert back.headers.correlation_id == (None if "JMSCorrelationID" in reported else corr)
    assert back.headers.type == (None if "JMSType" in reported else jtype)


@activemq
def test_source_and_target_survive_a_broker_restart(own_activemq: Any) -> None:
    """Persistent broker stopped and started on the same ports: the target fails with ConnectorError
    while it is down (the router retries) and works after; an unconfirmed message comes again with the
    same key, and nothing sent is lost."""
    ep = own_activemq.endpoints
    config = StompLinkConfig(ep.host, ep.stomp_port, heartbeat_send_ms=1000, heartbeat_receive_ms=1000,
                             backoff_max=0.5)
    q = "restart.q"

    def msg(text: str) -> Outbound:
        return Outbound(text, JmsMessage(body=TextBody(text)), q)

    async def scenario() -> tuple[list[str], list[int], int]:
        loop = asyncio.get_running_loop()
        target = JmsTarget(config)
        source = JmsSource(config, q)
        await target.start()
        await source.start()
        try:
            assert await loop.run_in_executor(None, target.link.wait_until_up, 20)
            await target.send([msg("before")])
            (first,) = await source.receive(10)          # delivered, never confirmed
            await loop.run_in_executor(None, own_activemq.restart)
            refused = 0
            async with asyncio.timeout(30):
                while True:
                    try:
                        await target.send([msg("after")])
                        break
                    except ConnectorError:
                        refused += 1
                        await loop.run_in_executor(None, target.link.wait_until_up, 1)
            items: list[Inbound] = []
            async with asyncio.timeout(30):
                while len(items) < 2:
                    items += await source.receive(10)
            await source.confirm(items)
            assert first.key == next(i.key for i in items if i.message.body == TextBody("before"))  # type: ignore[attr-defined]
            return ([i.message.body.text for i in items], [i.redelivery_count for i in items],  # type: ignore[attr-defined]
                    refused)
        finally:
            await source.close()
            await target.close()

    texts, counts, _refused = run(scenario())
    assert sorted(texts) == ["after", "before"]
    # ActiveMQ does not persist the redelivered mark across its own restart (persistJMSRedelivered is off
    # by default), so the message that comes again may say 0: the route sees it as new (a duplicate).
    assert counts[texts.index("after")] == 0
