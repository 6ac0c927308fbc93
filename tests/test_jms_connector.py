# Tests the JMS connector: JmsTarget/JmsSource against a real ActiveMQ, with JmsTool (OpenWire) as the oracle
# for the Java types the broker built (the pure frame rules: test_jms_frames.py).
from __future__ import annotations

import asyncio
import logging
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
from bridge.connectors.stomp_link import InboundFrame, LinkState, StompLink, StompLinkConfig, StompLinkError
from mappings.jms.model import (
    BytesBody,
    DeliveryMode,
    Destination,
    JavaType,
    JmsHeaders,
    JmsMessage,
    MapBody,
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
    frame_to_jms,
    jms_to_frame,
)
from tests.jms_strategies import typed_maps
from tests.support.activemq import BrokerEndpoints
from tests.support.gateway import wait_for
from tests.support.jmstool import JmsTool, typed

# ------------------------------------------------------------------------------ real ActiveMQ

activemq = pytest.mark.activemq


def run(coro: Any) -> Any:  # noqa: ANN401 - whatever the coroutine returns
    return asyncio.run(asyncio.wait_for(coro, 60))


@pytest.fixture
def link_config(activemq: BrokerEndpoints) -> StompLinkConfig:
    return StompLinkConfig(activemq.host, activemq.stomp_port, heartbeat_send_ms=2000, heartbeat_receive_ms=2000)


async def _send(config: StompLinkConfig, items: list[Outbound]) -> None:
    target = JmsTarget(config, map_byte_arrays=True)   # the test broker's SERIALIZABLE_PACKAGES allow byte[]
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
                                                            unique_name: str, caplog: pytest.LogCaptureFixture) -> None:
    q = f"redeliver.{unique_name}"
    jmstool.send(f"queue://{q}", {"type": "Text", "body": "once"})
    (first,) = run(_receive(link_config, q, 1, confirm=False))
    assert first.redelivery_count == 0
    (again,) = run(_receive(link_config, q, 1))
    assert again.key == first.key and again.redelivery_count == 1
    if "confirmed messages not acknowledged" in caplog.text:
        # the link dropped between the receive and the confirm (seen once on a loaded CI machine): the source
        # said so, and at least once means the message comes once more, marked redelivered again
        (third,) = run(_receive(link_config, q, 1))
        assert third.key == first.key and third.redelivery_count == 2
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


@activemq
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=typed_maps(xml_safe=False, max_size=6).filter(
    lambda m: all(not NON_BMP.search(k + (v.value if isinstance(v.value, str) else "")) for k, v in m.items())))
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
        f = jms_to_frame(JmsMessage(body=MapBody(entries)), q, map_byte_arrays=True)
        link.send_many([(f.destination, f.body, f.headers, f.content_length)])
        assert got.wait(20)
    finally:
        link.close()
    report = ConversionReport()
    back = frame_to_jms(frames[0].headers, frames[0].body, report)
    assert isinstance(back.body, MapBody)
    # a null value comes back null; its type is not in the message (MapMessage.getObject gives null)
    assert dict(back.body.entries) == {k: jstring(None) if v.value is None else v for k, v in entries.pairs}
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


def test_confirm_of_frames_the_link_cannot_ack_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    """A confirmed message that cannot be ACKed (it came over an earlier connection, or the link is down)
    comes again: the source says so in the log instead of skipping it silently."""
    source = JmsSource(StompLinkConfig("127.0.0.1", 1), "orders")
    acked: list[object] = []

    class Link:   # the link's ack as after a reconnect: the first frame is of the older connection
        state = LinkState.UP

        def ack(self, frame: object) -> bool:
            acked.append(frame)
            return len(acked) > 1

    source.link = Link()  # type: ignore[assignment]
    frames = [InboundFrame(headers={"ack": str(i)}, body=b"", subscription="s", generation=1) for i in range(2)]
    with caplog.at_level(logging.WARNING, logger="mqbridge.jms"):
        source._ack_all(frames)
    assert acked == frames
    assert "1 of 2 confirmed messages not acknowledged" in caplog.text
