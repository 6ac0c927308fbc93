"""javax.jms messages <-> the JMS model (bridge/connectors/jms_native/objects.py) in a real JVM (JPype) with
ActiveMQ's own JMS client: a round trip per message type through a real broker, every property type, and
messages a Java producer (tests/java/JmsTool.java) sent, read field by field."""
from __future__ import annotations

import math
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from mappings.jms.model import (
    BytesBody,
    DeliveryMode,
    Destination,
    JavaType,
    JavaValue,
    JmsHeaders,
    JmsMessage,
    MapBody,
    NoBody,
    ObjectBody,
    StreamBody,
    TextBody,
    TypedMap,
)
from mappings.report import ConversionReport
from tests.support.activemq import BrokerEndpoints
from tests.support.jmstool import COMPILE_JARS, JAVA_DIR, JmsTool, typed

jpype = pytest.importorskip("jpype", reason="jpype1 not installed (pip install 'mqbridge[jms]')")
pytestmark = pytest.mark.activemq

NOW = 1_700_000_000_000


@pytest.fixture(scope="module")
def connection(activemq: BrokerEndpoints) -> Iterator[Any]:
    from bridge.connectors.jms_native import jvm

    jvm.start(jvm.expand_jars(str(JAVA_DIR / j) for j in COMPILE_JARS))
    factory = jpype.JClass("org.apache.activemq.ActiveMQConnectionFactory")(activemq.openwire_url)
    factory.setTrustedPackages(jpype.java.util.Arrays.asList(["java.util", "java.lang"]))
    conn = factory.createConnection()
    conn.start()
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def session(connection: Any) -> Any:
    return connection.createSession(False, 1)   # AUTO_ACKNOWLEDGE


def _objects() -> Any:
    from bridge.connectors.jms_native import objects  # imports JPype's Java types: after the JVM started
    return objects


def _send_receive(session: Any, model: JmsMessage,
                  lossy: frozenset[str] = frozenset()) -> tuple[JmsMessage, ConversionReport]:
    objects = _objects()
    report = ConversionReport()
    queue = session.createQueue(f"native.{uuid.uuid4().hex[:8]}")
    msg, args = objects.from_model(session, model, now_ms=NOW, report=report, lossy=lossy)
    producer = session.createProducer(queue)
    producer.send(msg, args.delivery_mode, args.priority, args.time_to_live)
    consumer = session.createConsumer(queue)
    got = consumer.receive(10_000)
    consumer.close()
    producer.close()
    assert got is not None, "the message did not arrive"
    from bridge.connectors.jms_native.batch_read import batch_read

    model_ = objects.to_model(got)
    reader = batch_read(objects.JMSX)
    assert reader is not None
    assert objects.from_row(got, reader([got])[0]) == model_   # the source's one call per batch reads the same
    return model_, report


EVERY_TYPE = TypedMap([
    ("b", JavaValue(JavaType.BOOLEAN, True)), ("y", JavaValue(JavaType.BYTE, -128)),
    ("s", JavaValue(JavaType.SHORT, 32767)), ("i", JavaValue(JavaType.INT, -(2**31))),
    ("l", JavaValue(JavaType.LONG, 2**63 - 1)), ("f", JavaValue(JavaType.FLOAT, 1.5)),
    ("d", JavaValue(JavaType.DOUBLE, math.pi)), ("t", JavaValue(JavaType.STRING, "h\u00e9 \u20ac")),
], what="property")

BODIES = {
    "text": TextBody("caf\u00e9 \U0001f600"),
    "null text": TextBody(None),
    "bytes": BytesBody(bytes(range(256))),
    "map": MapBody(TypedMap([*EVERY_TYPE.pairs, ("c", JavaValue(JavaType.CHAR, "\u00e9")),
                             ("raw", JavaValue(JavaType.BYTES, b"\x00\xff")),
                             ("none", JavaValue(JavaType.STRING, None))], what="entry")),
    "stream": StreamBody(tuple(v for _, v in EVERY_TYPE.pairs) + (JavaValue(JavaType.CHAR, "x"),
                                                                  JavaValue(JavaType.BYTES, b"\x01\x02"))),
    "message": NoBody(),
}


@pytest.mark.parametrize("kind", BODIES)
def test_every_body_type_and_property_type_round_trip_through_activemq(session: Any, kind: str) -> None:
    model = JmsMessage(JmsHeaders(delivery_mode=DeliveryMode.NON_PERSISTENT, priority=7, expiration=NOW + 3_600_000,
                                  correlation_id="corr-\u00e9", reply_to=Destination.queue("replies.q"),
                                  type="order"),
                       TypedMap([*EVERY_TYPE.pairs, ("JMSXGroupID", JavaValue(JavaType.STRING, "g1")),
                                 ("JMSXGroupSeq", JavaValue(JavaType.INT, 3)),
                                 ("JMSXUserID", JavaValue(JavaType.STRING, "app"))], what="property"),
                       BODIES[kind])
    got, report = _send_receive(session, model)
    assert report.findings == []
    assert got.body.body_type is model.body.body_type
    if isinstance(model.body, MapBody):   # a MapMessage's names have no order (JMS 1.1 MapMessage.getMapNames)
        assert dict(got.body.entries.pairs) == dict(model.body.entries.pairs)
        assert {n: v.type for n, v in got.body.entries.pairs} == {n: v.type for n, v in model.body.entries.pairs}
    else:
        assert got.body == model.body
    for name, value in model.properties.pairs:
        assert got.properties[name] == value and got.properties[name].type is value.type, name
    h = got.headers
    assert (h.delivery_mode, h.priority, h.correlation_id, h.type) == (DeliveryMode.NON_PERSISTENT, 7, "corr-\u00e9",
                                                                        "order")
    assert h.reply_to == Destination.queue("replies.q")
    assert h.destination is not None and h.destination.kind.value == "queue" and h.destination.name.startswith(
        "native.")   # the queue _send_receive made
    # from_model's time to live is expiration - now_ms (1 h): the provider adds it to its send time
    assert h.timestamp > 0 and h.expiration == h.timestamp + 3_600_000
    assert h.message_id and h.message_id.startswith("ID:")
    assert got.properties["JMSXDeliveryCount"] == JavaValue(JavaType.INT, 1)   # the provider's


def test_a_character_above_u_ffff_survives_or_is_reported(session: Any, connection: Any) -> None:
    """The probe at connect says where the provider loses such characters, and exactly there the loss is a
    finding (ActiveMQ 5.17's OpenWire: String properties, read back as U+FFFD)."""
    lossy = _objects().probe_characters(connection)
    value = JavaValue(JavaType.STRING, "a\U0001f600b")
    for where, model in (
        ("property", JmsMessage(properties=TypedMap([("t", value)], what="property"), body=TextBody("x"))),
        ("map", JmsMessage(body=MapBody(TypedMap([("t", value)], what="entry")))),
    ):
        got, report = _send_receive(session, model, lossy)
        back = got.properties.get("t") if where == "property" else got.body.entries.get("t")
        reported = {f.name for f in report.findings if f.change.value == "coerced"}
        assert (back != value) == (where in lossy), where   # the probe saw what a real message meets
        assert reported == ({"t" if where == "property" else "body.t"} if where in lossy else set()), where
    assert "property" in lossy   # ActiveMQ 5.17 (Debian): the loss this reports


def test_what_jms_cannot_carry_is_reported(session: Any) -> None:
    model = JmsMessage(JmsHeaders(message_id="ID:old", timestamp=5, redelivered=True),
                       TypedMap([("raw", JavaValue(JavaType.BYTES, b"\x01")), ("ch", JavaValue(JavaType.CHAR, "z")),
                                 ("JMSXDeliveryCount", JavaValue(JavaType.INT, 4))], what="property"),
                       TextBody("x"))
    got, report = _send_receive(session, model)
    found = {(f.change.value, f.name) for f in report.findings}
    assert found == {("dropped", "raw"), ("coerced", "ch"), ("dropped", "JMSXDeliveryCount"),
                     ("dropped", "JMSMessageID"), ("dropped", "JMSTimestamp"), ("dropped", "JMSRedelivered")}
    assert "raw" not in got.properties and got.properties["ch"] == JavaValue(JavaType.STRING, "z")
    assert got.properties["JMSXDeliveryCount"] == JavaValue(JavaType.INT, 1) and got.headers.message_id != "ID:old"


def test_an_object_message_keeps_its_serialized_form_and_class(session: Any) -> None:
    objects = _objects()
    table = jpype.java.util.HashMap()
    table.put("k", jpype.java.lang.Integer(5))
    msg = session.createObjectMessage(table)
    first = objects.to_model(msg)
    assert isinstance(first.body, ObjectBody) and first.body.class_name == "java.util.HashMap"
    assert first.body.data and first.body.data[:2] == b"\xac\xed"   # Java serialization's stream magic
    got, report = _send_receive(session, first)
    assert report.findings == [] and got.body == first.body


def test_a_temporary_queue_reply_to_is_carried_by_name(session: Any) -> None:
    objects = _objects()
    temp = session.createTemporaryQueue()
    msg = session.createTextMessage("req")
    msg.setJMSReplyTo(temp)
    model = objects.to_model(msg)
    assert model.headers.reply_to is not None and objects.TEMPORARY in model.headers.reply_to.options
    assert model.headers.reply_to.name == str(temp.getQueueName())
    report = ConversionReport()
    again, _ = objects.from_model(session, model, now_ms=NOW, report=report,
                                  temporary=lambda d: jpype.JClass("org.apache.activemq.command.ActiveMQTempQueue")(
                                      d.name))
    assert report.findings == [] and str(again.getJMSReplyTo().getQueueName()) == str(temp.getQueueName())
    report = ConversionReport()
    objects.from_model(session, model, now_ms=NOW, report=report)        # no way to name it: reported
    assert [(f.change.value, f.name) for f in report.findings] == [("dropped", "JMSReplyTo")]


def test_messages_a_java_producer_sent_are_read_field_by_field(session: Any, jmstool: JmsTool) -> None:
    """JmsTool (a plain Java JMS client) sends; the converter reads every typed value it set."""
    objects = _objects()
    queue = f"native.java.{uuid.uuid4().hex[:8]}"
    props = {"b": typed("boolean", False), "y": typed("byte", 7), "s": typed("short", -2), "i": typed("int", 42),
             "l": typed("long", 2**40), "f": typed("float", 0.25), "d": typed("double", -1e300),
             "t": typed("String", "t\u00e9xt")}
    jmstool.send(
        f"queue://{queue}",
        {"type": "Map", "body": {"c": typed("char", "q"), "raw": typed("byte[]", b"\x00\x01"),
                                 "n": typed("int", 9)}, "properties": props,
         "headers": {"correlationId": "c-1", "type": "t-1", "priority": 2}},
        {"type": "Stream", "body": [typed("short", 1), typed("String", "two"), typed("double", 3.0)]},
        {"type": "Text", "body": None},
    )
    consumer = session.createConsumer(session.createQueue(queue))
    got = [objects.to_model(consumer.receive(10_000)) for _ in range(3)]
    consumer.close()
    m = got[0]
    assert isinstance(m.body, MapBody) and dict(m.body.entries.pairs) == {
        "c": JavaValue(JavaType.CHAR, "q"), "raw": JavaValue(JavaType.BYTES, b"\x00\x01"),
        "n": JavaValue(JavaType.INT, 9)}
    expected = {"b": JavaValue(JavaType.BOOLEAN, False), "y": JavaValue(JavaType.BYTE, 7),
                "s": JavaValue(JavaType.SHORT, -2), "i": JavaValue(JavaType.INT, 42),
                "l": JavaValue(JavaType.LONG, 2**40), "f": JavaValue(JavaType.FLOAT, 0.25),
                "d": JavaValue(JavaType.DOUBLE, -1e300), "t": JavaValue(JavaType.STRING, "t\u00e9xt")}
    for name, value in expected.items():
        assert m.properties[name] == value and m.properties[name].type is value.type, name
    assert (m.headers.correlation_id, m.headers.type, m.headers.priority) == ("c-1", "t-1", 2)
    assert got[1].body == StreamBody((JavaValue(JavaType.SHORT, 1), JavaValue(JavaType.STRING, "two"),
                                      JavaValue(JavaType.DOUBLE, 3.0)))
    assert got[2].body == TextBody(None)


def test_a_source_whose_provider_is_unreachable_waits_and_retries_without_failing(
        session: Any, caplog: pytest.LogCaptureFixture) -> None:
    """The route's receive must not raise (it would end the route) nor spin: it retries with a pause that
    doubles (1 s, 2 s, ...)."""
    import asyncio
    import logging
    import socket

    from bridge.connectors.jms_native.connector import NativeJmsSource
    from mappings.rules.model import JmsConnector

    with socket.socket() as s:   # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conn = JmsConnector(type="jms", client="native", jars=tuple(str(JAVA_DIR / j) for j in COMPILE_JARS),
                        connection_factory="org.apache.activemq.ActiveMQConnectionFactory",
                        factory_properties={"brokerURL": f"tcp://127.0.0.1:{port}"})
    source = NativeJmsSource(conn, "down", "q.down")

    async def go() -> None:
        await source.start()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(source.receive(10), 7.5)
        await source.close()

    with caplog.at_level(logging.WARNING, logger="mqbridge.jms"):
        asyncio.run(go())
    attempts = [r.created for r in caplog.records if "connecting again" in r.getMessage()]
    assert 3 <= len(attempts) <= 4, attempts   # at 0, 1, 3 and 7 s; a fixed 1 s pause would make 8
    gaps = [b - a for a, b in zip(attempts, attempts[1:], strict=False)]
    assert all(later > 1.5 * earlier for earlier, later in zip(gaps, gaps[1:], strict=False)), gaps   # doubling


def test_factory_properties_take_booleans_and_numbers_and_name_a_refused_value(session: Any) -> None:
    """ActiveMQ's own send tuning (docs/connectors.md) is a boolean bean property: YAML's false reaches
    setCopyMessageOnSend(boolean); a value of the wrong type names the setting."""
    from bridge.connectors.base import ConnectorError
    from bridge.connectors.jms_native.provider import Provider
    from mappings.rules.model import JmsConnector

    def connector(**props: Any) -> JmsConnector:
        return JmsConnector(type="jms", client="native", jars=tuple(str(JAVA_DIR / j) for j in COMPILE_JARS),
                            connection_factory="org.apache.activemq.ActiveMQConnectionFactory",
                            factory_properties={"brokerURL": "tcp://127.0.0.1:1", **props})

    factory = Provider(connector(copyMessageOnSend=False, useAsyncSend=True, sendTimeout=1500),
                       "connectors.amq").factory()
    assert (factory.isCopyMessageOnSend(), factory.isUseAsyncSend(), factory.getSendTimeout()) == (False, True, 1500)
    with pytest.raises(ConnectorError, match=r"connectors\.amq\.factory_properties\.useAsyncSend: 'yes' refused"):
        Provider(connector(useAsyncSend="yes"), "connectors.amq").factory()


def _native_target(activemq: BrokerEndpoints) -> Any:
    from bridge.connectors.jms_native.connector import NativeJmsTarget
    from mappings.rules.model import JmsConnector

    conn = JmsConnector.model_validate({
        "type": "jms", "client": "native", "jars": [str(JAVA_DIR / j) for j in COMPILE_JARS],
        "connection_factory": "org.apache.activemq.ActiveMQConnectionFactory",
        "factory_properties": {"brokerURL": activemq.openwire_url}})
    return NativeJmsTarget(conn, "batch", "amq")


def _text_batch(queue: str) -> list[Any]:
    """TextMessages as the route's model cache gives them: a few share their headers and properties."""
    from bridge.connectors.base import Outbound

    shared = (JmsHeaders(delivery_mode=DeliveryMode.NON_PERSISTENT, priority=7,
                         expiration=int(time.time() * 1000) + 3_600_000, timestamp=NOW),
              TypedMap([*EVERY_TYPE.pairs, ("none", JavaValue(JavaType.STRING, None))], what="property"))
    other = (JmsHeaders(priority=2), TypedMap([("JMSXGroupID", JavaValue(JavaType.STRING, "g"))], what="property"))
    texts = [(shared, "caf\u00e9 \U0001f600"), (shared, None), (other, "x"), (shared, "")]
    return [Outbound(f"k{n}", JmsMessage(*meta, TextBody(text)), queue) for n, (meta, text) in enumerate(texts)]


def _received(session: Any, queue: str, count: int) -> list[JmsMessage]:
    consumer = session.createConsumer(session.createQueue(queue))
    got = [consumer.receive(10_000) for _ in range(count)]
    extra = consumer.receive(500)
    consumer.close()
    assert None not in got and extra is None, "not exactly the batch arrived"
    return [_objects().to_model(m) for m in got]


@pytest.mark.parametrize("refused", [False, True])
def test_a_text_batch_sent_in_one_call_keeps_every_property_type(
        activemq: BrokerEndpoints, session: Any, monkeypatch: pytest.MonkeyPatch, refused: bool) -> None:
    """The native target's one-call batch (batch.BatchSend) carries what the call-per-step path does; when the
    provider refuses it midway (here after the whole batch went), the transaction is rolled back and the batch
    sent call by call: each message arrives once."""
    from bridge.connectors.jms_native import batch, connector

    calls: list[int] = []
    real = batch.batch_send()
    assert real is not None   # Java 9 or later: the test's JDK

    def refusing(*args: Any) -> None:
        calls.append(len(args[1]))
        real(*args)
        raise jpype.JClass("javax.jms.JMSException")("refused for the test")

    monkeypatch.setattr(connector, "batch_send", lambda: refusing if refused else real)
    target = _native_target(activemq)
    queue = f"native.batch.{uuid.uuid4().hex[:8]}"
    items = _text_batch(queue)
    try:
        target._send(items)
    finally:
        target.client.close()
    assert calls == ([4] if refused else [])
    got = {m.body.text: m for m in _received(session, queue, len(items))}   # persistent or not: any order
    assert set(got) == {item.message.body.text for item in items}
    for item in items:
        sent = item.message
        msg = got[sent.body.text]
        assert {n: (v.type, v.value) for n, v in msg.properties.pairs if not n.startswith("JMSX")} == \
            {n: (v.type, v.value) for n, v in sent.properties.pairs if not n.startswith("JMSX")}
        assert msg.properties.get("JMSXGroupID") == sent.properties.get("JMSXGroupID")
        assert (msg.headers.delivery_mode, msg.headers.priority) == (sent.headers.delivery_mode, sent.headers.priority)
        assert (msg.headers.expiration > 0) == (sent.headers.expiration > 0)
        assert [(f.change.value, f.name) for f in item.extra.get("findings", [])] == (
            [("dropped", "JMSTimestamp")] if sent.headers.timestamp else [])


def test_route_setup_looks_jndi_names_up_on_the_endpoints_worker_not_the_event_loop(
        activemq: BrokerEndpoints, monkeypatch: pytest.MonkeyPatch) -> None:
    """A JNDI directory may take its time to answer: the router's check of a native endpoint runs check_native
    on the endpoint's worker thread; a name the directory lacks still stops the setup naming the setting."""
    import asyncio
    import threading

    from bridge.connectors.jms import jms_factory
    from bridge.connectors.jms_native.provider import Provider
    from bridge.connectors.registry import RouteSetupError
    from mappings.rules.model import parse_rules
    from tests.support.jmstool import native_connector_yaml

    rules = parse_rules(native_connector_yaml(
        None, "jndi:", "  initial_context_factory: org.apache.activemq.jndi.ActiveMQInitialContextFactory",
        f'  provider_url: "{activemq.openwire_url}"', "  connection_factory: ConnectionFactory", "  environment:",
        "    queue.orders: jndi.check.out") + """\
routes:
  - {name: out, from: {mqtt: "a/#"}, to: {connector: amq, queue: orders}}
  - {name: in, from: {connector: amq, queue: orders}, to: {queue: IN}}
  - {name: bad, from: {mqtt: "b/#"}, to: {connector: amq, queue: missing}}
""")
    threads: list[str] = []
    lookup = Provider.lookup

    def recording(self: Provider, name: str, setting: str) -> Any:
        threads.append(threading.current_thread().name)
        return lookup(self, name, setting)

    monkeypatch.setattr(Provider, "lookup", recording)

    async def setup() -> str:
        target = jms_factory(rules, rules.routes[0], rules.routes[0].target, "target")
        source = jms_factory(rules, rules.routes[1], rules.routes[1].source, "source")
        bad = jms_factory(rules, rules.routes[2], rules.routes[2].target, "target")
        assert threads == []   # nothing looked up while the route was built on the loop
        await target.check()
        await source.check()
        with pytest.raises(RouteSetupError) as refused:
            await bad.check()
        for end in (target, source, bad):
            await end.close()
        return str(refused.value)

    refused = asyncio.run(setup())
    assert "route bad: to.queue: JNDI name 'missing' not found" in refused
    assert len(threads) == 6 and {t.rsplit("_", 1)[0] for t in threads} == {"jms-native-out", "jms-native-in",
                                                                            "jms-native-bad"}, threads


def _behind_a_held_batch(activemq: BrokerEndpoints, monkeypatch: pytest.MonkeyPatch, name: str, count: int,
                         first_open: Any, resend: bool = False) -> tuple[Any, str, list[BaseException | None]]:
    """``count`` batches of 3 TextMessages submitted to a native target while the first one's connect is held
    (``first_open(opened, probe)`` decides how it ends) until the others are queued; ``resend``: then every batch
    again with ``send``, oldest first, as the router does. Returns the target, its queue and each future's
    exception."""
    import asyncio
    import threading

    from bridge.connectors.base import Outbound

    target = _native_target(activemq)
    queue = f"native.{name}.{uuid.uuid4().hex[:8]}"
    batches = [[Outbound(f"k{b}.{n}", JmsMessage(JmsHeaders(), TypedMap([], what="property"),
                                                 TextBody(f"{b}.{n}")), queue) for n in range(3)]
               for b in range(count)]
    opened, inside, go = target.client.open, threading.Event(), threading.Event()

    def held_once(probe: bool = False) -> Any:
        monkeypatch.setattr(target.client, "open", opened)
        inside.set()
        go.wait(10)
        return first_open(opened, probe)

    monkeypatch.setattr(target.client, "open", held_once)

    async def run() -> list[BaseException | None]:
        futures = [await target.submit(batches[0])]
        assert await asyncio.to_thread(inside.wait, 10)
        futures += [await target.submit(batch) for batch in batches[1:]]
        go.set()
        await asyncio.wait(futures)
        results = [future.exception() for future in futures]
        if resend:
            for batch in batches:
                await target.send(batch)
        await target.close()
        return results

    return target, queue, asyncio.run(run())


def test_batches_queued_behind_a_failed_one_fail_unsent_so_the_resend_keeps_their_order(
        activemq: BrokerEndpoints, session: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The target keeps several batches in flight (submit): when one fails, those queued behind it fail without
    reaching the provider, and the router's resend (send, oldest first) delivers them once, in order."""
    from bridge.connectors.base import ConnectorError

    def down(opened: Any, probe: bool) -> Any:   # the first batch's connect fails once the others are queued
        raise ConnectorError("JMS provider: down for the test")

    _, queue, (first, *behind) = _behind_a_held_batch(activemq, monkeypatch, "order", 3, down, resend=True)
    assert "down for the test" in str(first)
    assert len(behind) == 2 and all("an earlier batch failed" in str(exc) for exc in behind), behind
    got = [m.body.text for m in _received(session, queue, 9)]
    assert got == [f"{b}.{n}" for b in range(3) for n in range(3)]


def test_batches_queued_behind_the_one_being_sent_go_together_in_one_transaction(
        activemq: BrokerEndpoints, session: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches submitted while the worker sends one are sent after it in one transaction (one commit, one round
    trip to the provider), in their order, and each batch's future ends with that commit."""
    target, queue, results = _behind_a_held_batch(activemq, monkeypatch, "group", 4,
                                                  lambda opened, probe: opened(probe))
    assert results == [None] * 4
    assert target.commits == 2   # the first batch alone, then the three queued behind it together
    got = [m.body.text for m in _received(session, queue, 12)]
    assert got == [f"{b}.{n}" for b in range(4) for n in range(3)]


@pytest.mark.parametrize("make", [
    lambda: jpype.java.util.HashMap(), lambda: jpype.JString("text"), lambda: jpype.JArray(jpype.JInt)([1, 2]),
    lambda: jpype.java.util.concurrent.TimeUnit.SECONDS, lambda: jpype.java.math.BigDecimal("1.5"),
])
def test_the_class_named_by_serialized_bytes_is_the_objects_class(session: Any, make: Any) -> None:
    """mappings.jms.serialized reads the class of an ObjectMessage's bytes as Java wrote them (the connector
    carries ActiveMQ's ObjectMessages without deserializing them)."""
    from mappings.jms.serialized import class_name

    obj = make()
    out = jpype.java.io.ByteArrayOutputStream()
    stream = jpype.java.io.ObjectOutputStream(out)
    stream.writeObject(obj)
    stream.close()
    expected = str(obj.getClass().getName())
    assert class_name(bytes(out.toByteArray())) == ("java.util.concurrent.TimeUnit" if expected.startswith(
        "java.util.concurrent.TimeUnit") else expected)
