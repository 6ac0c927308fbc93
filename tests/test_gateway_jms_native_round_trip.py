"""Issue #16, "Tests against real systems": a Java producer's messages of all six types, with properties of every
JMS type and the header fields, go through the native JMS connector (ActiveMQ's own client in the gateway) to an
embedded MQ queue and back out through the native connector to a Java consumer, or out to MQTT as envelopes and
back; the consumer's view (tests/java/JmsTool.java) equals the producer's field by field and type by type."""
from __future__ import annotations

import base64
import json
import math
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bridge.connectors.embedded import QueueStore, default_path
from bridge.connectors.jms_native import TEMPORARY
from bridge.connectors.jms_native.connector import endpoint_destination
from bridge.convlog import log_files
from mappings.conversions.jms_mq import mq_bytes_to_jms
from mappings.jms.model import (
    DeliveryMode,
    DestinationKind,
    JavaType,
    JavaValue,
    JmsMessage,
    MapBody,
    ObjectBody,
    StreamBody,
    TextBody,
    to_float32,
)
from mappings.mq import constants as C
from mappings.mq.message import decode_message
from tests.support.activemq import BrokerEndpoints
from tests.support.gateway import GatewayProcess, wait_for
from tests.support.jmstool import JmsTool, native_connector_yaml, typed
from tests.support.mqtt_clients import PahoClient

pytest.importorskip("jpype", reason="jpype1 not installed (pip install 'mqbridge[jms]')")
pytestmark = pytest.mark.activemq

Json = dict[str, Any]

# JmsTool's names of the Java types (what a sent TYPED value reads back as)
JAVA_CLASS = {"boolean": "java.lang.Boolean", "byte": "java.lang.Byte", "short": "java.lang.Short",
              "char": "java.lang.Character", "int": "java.lang.Integer", "long": "java.lang.Long",
              "float": "java.lang.Float", "double": "java.lang.Double", "String": "java.lang.String"}
MODEL_TYPE = {"boolean": JavaType.BOOLEAN, "byte": JavaType.BYTE, "short": JavaType.SHORT, "char": JavaType.CHAR,
              "int": JavaType.INT, "long": JavaType.LONG, "float": JavaType.FLOAT, "double": JavaType.DOUBLE,
              "String": JavaType.STRING, "byte[]": JavaType.BYTES}
TTL_MS = 3_600_000
EXPIRY_SLACK_MS = 2_000         # JMSExpiration is re-based on the gateway's clock at each send
ALL_BYTES = bytes(range(256))


def every_type(case: str, seq: int) -> dict[str, Json]:
    """Properties of every JMS property type (JMS 1.1 §3.5.4: no char, no byte[]), extremes included, and a
    message group."""
    return {
        "case": typed("String", case), "yes": typed("boolean", True), "no": typed("boolean", False),
        "b": typed("byte", -128), "s": typed("short", 32767), "i": typed("int", -2147483648),
        "l": typed("long", 9223372036854775807), "f": typed("float", 0.5), "fmax": typed("float", 3.4028235e38),
        "d": typed("double", -1.7976931348623157e308), "dnan": typed("double", "NaN"),
        "dsmall": typed("double", 1e-300), "str": typed("String", "caf\u00e9 <&> \"q\" 'a'"),
        "empty": typed("String", ""),
        "JMSXGroupID": typed("String", f"orders-{case}"), "JMSXGroupSeq": typed("int", seq),
    }


def every_value(xml: bool) -> list[Json]:
    """Map and Stream entries of every Java type, byte[] and char included, and a null. ``xml``: no character
    XML 1.0 cannot hold (an MQ message's map/stream body is XML: the mapping refuses a NUL char, backout)."""
    return [typed("boolean", True), typed("byte", 127), typed("short", -32768), typed("char", "\u00e9"),
            typed("int", 2147483647), typed("long", -9223372036854775808), typed("float", -2.25),
            typed("double", 1e300), typed("String", "zw\u00f6lf"), typed("byte[]", ALL_BYTES),
            typed("byte[]", b""), typed("String", None), typed("char", "\t" if xml else "\x00"), typed("String", "")]


def messages(reply_queue: str, *, xml: bool) -> list[Json]:
    """One message per body (a null text and an empty-bodied Message too), the header fields set on each:
    JMSCorrelationID, JMSType, JMSReplyTo, JMSPriority, both delivery modes and a time to live on some."""
    values = every_value(xml)
    bodies: list[tuple[str, str, Any]] = [
        ("text", "Text", "gr\u00fc\u00dfe \u20ac <x/> &amp;\n\ttab"),
        ("null-text", "Text", None),
        ("bytes", "Bytes", {"hex": ALL_BYTES.hex()}),
        ("map", "Map", {f"k{n}_{v['type'].replace('[]', 's')}": v for n, v in enumerate(values)}),
        ("stream", "Stream", values),
        ("object", "Object", {"class": "java.util.HashMap", "value": {
            "n": typed("int", 7), "raw": typed("byte[]", b"\x00\xff\x7f"), "s": typed("String", "\u00e9t\u00e9"),
            "d": typed("double", 0.1), "c": typed("char", "x"), "l": typed("long", -1)}}),
        ("object-string", "Object", {"class": "java.lang.String", "value": "serialized \u00e9"}),
        ("message", "Message", None),
    ]
    out = []
    for seq, (case, kind, body) in enumerate(bodies, start=1):
        # a correlation id IBM MQ keeps in CorrelId alone (`ID:` + 48 hex) on some, a free string on the others
        correlation = f"ID:{seq:048x}" if seq % 4 == 0 else f"corr-{case}-\u00e9"
        headers: Json = {"correlationId": correlation, "type": f"type.{case}", "priority": seq % 10,
                         "replyTo": f"{'topic' if seq % 4 == 1 else 'queue'}://{reply_queue}",
                         "deliveryMode": "NON_PERSISTENT" if seq % 2 else "PERSISTENT"}
        if seq % 3 == 0:
            headers["expiration"] = TTL_MS
        msg: Json = {"type": kind, "properties": every_type(case, seq), "headers": headers}
        if kind != "Message":
            msg["body"] = body
        out.append(msg)
    return out


# ------------------------------------------------------------------------------ what the consumer must see


def typed_out(tv: Json) -> Json:
    """A sent TYPED value as JmsTool prints the received one."""
    if tv["type"] == "byte[]":
        data = bytes.fromhex(tv["hex"])
        return {"type": "byte[]", "base64": base64.b64encode(data).decode(), "hex": data.hex()}
    if tv["value"] is None:
        return {"type": None, "value": None}
    return {"type": JAVA_CLASS[tv["type"]], "value": tv["value"]}


def expected_body(sent: Json) -> Any:
    body = sent.get("body")
    kind = sent["type"]
    if kind == "Bytes":
        return typed_out({"type": "byte[]", **body})
    if kind == "Map":
        return {k: typed_out(v) for k, v in body.items()}
    if kind == "Stream":
        return [typed_out(v) for v in body]
    if kind == "Object":
        value = body["value"]
        return {"class": body["class"],
                "value": {k: typed_out(v) for k, v in value.items()} if isinstance(value, dict) else value}
    return body


def same(a: Any, b: Any) -> bool:
    """Equality where NaN equals NaN (a double NaN prints as the string "NaN") and -0.0 differs from 0.0."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def assert_received_as_sent(sent: list[Json], got: list[Json], dest: str, sent_at_ms: int, received_at_ms: int,
                            *, text_null_as_empty: bool = False) -> None:
    """Every message of ``sent`` is in ``got`` (matched by its ``case`` property) with the same class, body,
    properties (name, Java type, value: no more, no fewer) and headers; JMSExpiration within the time the
    trip took, JMSMessageID/JMSTimestamp the provider's own. ``text_null_as_empty``: a null text arrives as ''."""
    by_case = {m["properties"]["case"]["value"]: m for m in got}
    assert len(by_case) == len(got) == len(sent), [m["properties"].get("case") for m in got]
    for spec in sent:
        case = spec["properties"]["case"]["value"]
        m = by_case[case]
        assert m["type"] == spec["type"], (case, m["class"])
        body = expected_body(spec)
        if text_null_as_empty and spec["type"] == "Text" and body is None:
            body = ""
        assert same(m["body"], body), (case, m["body"], body)
        props = {k: typed_out(v) for k, v in spec["properties"].items()}
        assert same(m["properties"], props), (case, m["properties"], props)
        h, want = m["headers"], spec["headers"]
        assert h["destination"] == dest, case
        assert (h["correlationId"], h["type"], h["replyTo"], h["priority"], h["deliveryMode"]) == (
            want["correlationId"], want["type"], want["replyTo"], want["priority"], want["deliveryMode"]), (case, h)
        if "expiration" in want:   # sent_at + TTL, re-based on each send's clock: within the trip's duration
            assert sent_at_ms + TTL_MS - EXPIRY_SLACK_MS <= h["expiration"] <= received_at_ms + TTL_MS, (case, h)
        else:
            assert h["expiration"] == 0, (case, h)
        assert h["redelivered"] is False, case


def expected_model(spec: Json) -> tuple[dict[str, JavaValue], Any]:
    """The properties and body of ``spec`` as the JMS model reads them (MQ side: mq_bytes_to_jms)."""
    def value(tv: Json) -> JavaValue:
        if tv["type"] == "byte[]":
            return JavaValue(JavaType.BYTES, bytes.fromhex(tv["hex"]))
        v = tv["value"]
        if tv["type"] == "float":
            v = to_float32(float(v))
        elif tv["type"] == "double":
            v = float(v)
        return JavaValue(MODEL_TYPE[tv["type"]], v)
    props = {k: value(v) for k, v in spec["properties"].items()}
    body = spec.get("body")
    if spec["type"] == "Map":
        return props, {k: value(v) for k, v in body.items()}
    if spec["type"] == "Stream":
        return props, tuple(value(v) for v in body)
    return props, body


# ------------------------------------------------------------------------------ gateway plumbing


def write_rules(path: Path, activemq: BrokerEndpoints, routes: list[Json]) -> None:
    """The native connector ``amq`` and ``routes``; its client trusts every class, so the gateway reads an
    ObjectMessage by deserializing it (the next test: by its serialized bytes when the client refuses)."""
    factory = json.dumps({"brokerURL": activemq.openwire_url, "trustAllPackages": True})
    connector = native_connector_yaml(None, "connection_factory: org.apache.activemq.ActiveMQConnectionFactory",
                                      f"factory_properties: {factory}")
    path.write_text(connector + "routes: " + json.dumps(routes) + "\n")


def records(gw: GatewayProcess, route: str, count: int) -> list[Json]:
    """The egress records of ``route`` once there are ``count``."""
    def read() -> list[Json]:
        out = [json.loads(line) for f in log_files(gw.data_dir / "convlog") for line in f.read_text().splitlines()
               if line]
        return [r for r in out if r["direction"] == "egress" and r["route"] == route]
    return wait_for(lambda: len(r := read()) >= count and r, 20, what=f"{count} egress records of {route}")


def arrived(gw: GatewayProcess, store: QueueStore, queue: str, count: int) -> None:
    """Wait for ``count`` messages on the embedded ``queue``; a failure says where the messages are."""
    try:
        wait_for(lambda: store.depth(queue) >= count, 30, what=f"{count} messages on {queue}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; queues {store.queues()}; gateway log:\n{gw.log()[-6000:]}") from None


def changes(record: Json) -> set[tuple[str, str]]:
    return {(f["change"], f["name"]) for f in record["findings"]}


@pytest.fixture
def tag() -> str:
    return uuid.uuid4().hex[:8]


def now_ms() -> int:
    return int(time.time() * 1000)


# ------------------------------------------------------------------------------ the tests


def test_every_message_type_property_type_and_header_crosses_an_mq_queue_and_back(
    gateway_factory: Callable[..., GatewayProcess], activemq: BrokerEndpoints, jmstool: JmsTool, tmp_path: Path,
    tag: str,
) -> None:
    """Java producer -> ActiveMQ queue A -> native connector -> embedded MQ queue Q -> native connector ->
    ActiveMQ queue B -> Java consumer. The route out of Q starts only after the MQ messages were read on Q."""
    a, b, q, reply = f"rt.a.{tag}", f"rt.b.{tag}", f"RT.Q.{tag}", f"rt.reply.{tag}"
    routes: list[Json] = [
        {"name": "a2q", "from": {"connector": "amq", "queue": a}, "to": {"queue": q}},
        {"name": "q2b", "from": {"queue": q}, "to": {"connector": "amq", "queue": b}, "enabled": False},
    ]
    rules = tmp_path / "rules.yaml"
    write_rules(rules, activemq, routes)
    gw = gateway_factory({"rules": str(rules)})
    sent = messages(reply, xml=True)
    t0 = now_ms()
    ids = jmstool.send(f"queue://{a}", *sent)

    store = QueueStore(default_path(gw.data_dir)).open()
    try:
        arrived(gw, store, q, len(sent))
        raws = [m.data for m in store.browse(q)]
    finally:
        store.close()
    on_mq = {}
    for raw in raws:
        jms, _ = mq_bytes_to_jms(raw, now_ms=now_ms())
        on_mq[jms.properties["case"].value] = (jms, decode_message(raw))
    for spec in sent:
        jms, mq = on_mq[spec["properties"]["case"]["value"]]
        check_mq_message(spec, jms, mq)

    routes[1]["enabled"] = True
    write_rules(rules, activemq, routes)
    status, answer = gw.admin("/reload", "POST")
    assert status == 200, answer
    got = jmstool.receive(f"queue://{b}", len(sent), timeout=30)
    assert_received_as_sent(sent, got, f"queue://{b}", t0, now_ms(), text_null_as_empty=True)

    # what the conversion log says was changed, per case: JMS -> MQ drops the provider's JMSMessageID (not an
    # `ID:` + 48 hex MsgId), writes a null text as an empty body (what the consumer got: '') and names the
    # object's class only in its serialized bytes; MQ -> JMS leaves JMSMessageID and JMSTimestamp to the provider
    provider = {("dropped", "JMSMessageID")}
    to_mq = {"null-text": {("coerced", "TextMessage body")}, "object": {("dropped", "ObjectMessage class name")},
             "object-string": {("dropped", "ObjectMessage class name")}}
    spec_of = {f"jms:{id_}": spec for id_, spec in zip(ids, sent, strict=True)}
    for rec in records(gw, "a2q", len(sent)):
        spec = spec_of[rec["message_key"]]
        # an MQI reader sees no topic reply-to (no MQMD form: jms/Rto keeps it, and the JMS consumer got it)
        topic_reply = {("dropped", "MQMD.ReplyToQ")} if spec["headers"]["replyTo"].startswith("topic:") else set()
        assert rec["status"] == "ok", rec
        assert changes(rec) == provider | topic_reply | to_mq.get(spec["properties"]["case"]["value"], set()), rec
    for rec in records(gw, "q2b", len(sent)):
        assert rec["status"] == "ok", rec
        assert changes(rec) == provider | {("dropped", "JMSTimestamp"), ("dropped", "MQMD.PutDate")}, rec


def test_an_object_message_of_a_class_the_providers_client_does_not_trust_arrives_all_the_same(
    gateway_factory: Callable[..., GatewayProcess], activemq: BrokerEndpoints, jmstool: JmsTool, tmp_path: Path,
    tag: str,
) -> None:
    """ActiveMQ's client refuses to deserialize a HashMap or BigDecimal with its default trusted packages: the
    connector reads the serialized bytes instead (the route used to reconnect over and over, and ActiveMQ's
    redelivery limit then moved the message to ActiveMQ.DLQ, with no conversion-log record)."""
    a, b, q = f"ob.a.{tag}", f"ob.b.{tag}", f"OB.Q.{tag}"
    rules = tmp_path / "rules.yaml"
    rules.write_text(native_connector_yaml(activemq.openwire_url) + "routes: " + json.dumps([
        {"name": "a2q", "from": {"connector": "amq", "queue": a}, "to": {"queue": q}},
        {"name": "q2b", "from": {"queue": q}, "to": {"connector": "amq", "queue": b}}]) + "\n")
    gw = gateway_factory({"rules": str(rules)})
    sent = [m for m in messages(f"ob.reply.{tag}", xml=True) if m["type"] == "Object"]
    sent.append({**sent[1], "body": {"class": "java.math.BigDecimal", "value": "-12.50"},
                 "properties": {**sent[1]["properties"], "case": typed("String", "big-decimal")}})
    t0 = now_ms()
    ids = jmstool.send(f"queue://{a}", *sent)
    got = jmstool.receive(f"queue://{b}", len(sent), timeout=30)
    assert_received_as_sent(sent, got, f"queue://{b}", t0, now_ms())
    recs = records(gw, "a2q", len(sent))
    assert {r["message_key"] for r in recs} == {f"jms:{id_}" for id_ in ids}
    assert [r["source_type"] for r in recs] == ["ObjectMessage"] * len(sent)
    for rec in recs:   # the class name is in the serialized bytes (what the consumer got), not on MQ
        assert rec["status"] == "ok" and rec["redelivery_count"] == 0, rec
        assert ("dropped", "ObjectMessage class name") in changes(rec), rec
    assert "Forbidden class" not in gw.log()


def check_mq_message(spec: Json, jms: JmsMessage, mq: Any) -> None:
    """The MQ message on Q carries what IBM MQ classes for JMS would read back as the sent message."""
    case = spec["properties"]["case"]["value"]
    props, body = expected_model(spec)
    assert dict(jms.properties.items()) == {**props, "JMSXDeliveryCount": JavaValue(JavaType.INT, 1)}, case
    h = spec["headers"]
    persistent = h["deliveryMode"] == "PERSISTENT"
    assert mq.md.persistence == (C.MQPER_PERSISTENT if persistent else C.MQPER_NOT_PERSISTENT), case
    assert jms.headers.delivery_mode is (DeliveryMode.PERSISTENT if persistent else DeliveryMode.NON_PERSISTENT)
    assert mq.md.priority == h["priority"] == jms.headers.priority, case
    assert (jms.headers.correlation_id, jms.headers.type) == (h["correlationId"], h["type"]), case
    assert jms.headers.reply_to is not None and jms.headers.reply_to.uri.replace(":///", "://") == h["replyTo"]
    if h["replyTo"].startswith("queue://"):
        assert mq.md.reply_to_q.strip() == jms.headers.reply_to.name, case
    else:   # a topic is no ReplyToQ: jms/Rto only
        assert mq.md.reply_to_q.strip() == "", case
    if h["correlationId"].startswith("ID:"):
        assert mq.md.correl_id == bytes.fromhex(h["correlationId"][3:]), case
    if "expiration" in h:
        assert 0 < mq.md.expiry <= TTL_MS // 100, case
    else:
        assert mq.md.expiry == C.MQEI_UNLIMITED, case
    # a message group from a queue: GroupId (the id NUL-padded, whole in jms/Gid), MsgSeqNumber, MSG_IN_GROUP
    group = spec["properties"]["JMSXGroupID"]["value"].encode()
    seq = spec["properties"]["JMSXGroupSeq"]["value"]
    assert (mq.md.group_id, mq.md.msg_seq_number) == (group.ljust(24, b"\0"), seq), case
    assert mq.md.msg_flags == C.MQMF_MSG_IN_GROUP, case
    kind = spec["type"]
    if kind == "Map":
        assert isinstance(jms.body, MapBody) and dict(jms.body.entries.items()) == body, case
    elif kind == "Stream":
        assert isinstance(jms.body, StreamBody) and jms.body.items == body, case
    elif kind == "Text":
        assert isinstance(jms.body, TextBody) and jms.body.text == (body or ""), case
    elif kind == "Object":
        assert isinstance(jms.body, ObjectBody) and jms.body.data, case
    assert jms.body_type.java_class == ("Message" if kind == "Message" else f"{kind}Message"), case


def test_every_message_type_property_type_and_header_crosses_mqtt_as_an_envelope_and_back(
    gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient], activemq: BrokerEndpoints,
    jmstool: JmsTool, tmp_path: Path, tag: str,
) -> None:
    """Java producer -> ActiveMQ queue A -> native connector -> MQTT envelope on topic T (the built-in broker) ->
    envelope route from T -> native connector -> ActiveMQ queue B -> Java consumer: nothing is lost, not even a
    null text or a NUL char."""
    a, b, reply, topic = f"env.a.{tag}", f"env.b.{tag}", f"env.reply.{tag}", f"rt/{tag}/env"
    envelope: Json = {"mqtt_format": "envelope"}
    rules = tmp_path / "rules.yaml"
    write_rules(rules, activemq, [
        {"name": "a2m", "from": {"connector": "amq", "queue": a}, "to": {"mqtt": topic}, "options": envelope},
        # the gateway's informational properties (JMSXUserID, JMS_SWIFTMQ_*) would be new properties at B
        {"name": "m2b", "from": {"mqtt": topic}, "to": {"connector": "amq", "queue": b},
         "options": {**envelope, "swiftmq_properties": False}},
    ])
    gw = gateway_factory({"rules": str(rules)})
    watcher = clients(gw.port, f"watch-{tag}").connect()
    watcher.subscribe(topic, 2)
    sent = messages(reply, xml=False)
    t0 = now_ms()
    ids = jmstool.send(f"queue://{a}", *sent)
    got = jmstool.receive(f"queue://{b}", len(sent), timeout=30)
    assert_received_as_sent(sent, got, f"queue://{b}", t0, now_ms())

    # on the way: each envelope is the JMS message JSON with every Java type; QoS from JMSDeliveryMode
    envelopes = {json.loads(m.payload)["properties"]["case"]["value"]: (m, json.loads(m.payload))
                 for m in watcher.wait_messages(len(sent), timeout=20)}
    for spec in sent:
        pub, env = envelopes[spec["properties"]["case"]["value"]]
        persistent = spec["headers"]["deliveryMode"] == "PERSISTENT"
        assert pub.qos == (2 if persistent else 0)
        assert env["headers"]["JMSDeliveryMode"] == (2 if persistent else 1)
        assert env["headers"]["JMSReplyTo"] == spec["headers"]["replyTo"].replace("queue://", "queue:///")
        assert env["headers"]["JMSCorrelationID"] == spec["headers"]["correlationId"]
        assert env["properties"] == {**spec["properties"], "JMSXDeliveryCount": {"type": "int", "value": 1}}
        if spec["type"] == "Map":
            assert {k: v["type"] for k, v in env["body"]["map"].items()} == {
                k: v["type"] for k, v in spec["body"].items()}
        if spec["type"] == "Stream":
            assert [v["type"] for v in env["body"]["stream"]] == [v["type"] for v in spec["body"]]
        if spec["type"] == "Text" and spec.get("body") is None:
            assert env["body"] == {"type": "jms_text", "text": None}

    # nothing lost on the way out (the watcher, MQTT 3.1.1, saw no Payload Format Indicator; the route's own
    # session is no such subscriber); on the way in the provider sets JMSMessageID and JMSTimestamp, and the
    # route sends to B, not to the JMSDestination A the envelope names
    for rec in records(gw, "a2m", len(sent)):
        assert rec["status"] == "ok" and changes(rec) == {("dropped", "Payload Format Indicator")}, rec
        assert rec["findings"][0]["detail"] == f"MQTT 3.1/3.1.1 subscriber(s) watch-{tag} received the payload only"
    keys = {f"jms:{id_}" for id_ in ids}
    assert {r["message_key"] for r in records(gw, "a2m", len(sent))} == keys
    for rec in records(gw, "m2b", len(sent)):
        assert rec["status"] == "ok", rec
        assert changes(rec) == {("dropped", "JMSMessageID"), ("dropped", "JMSTimestamp"),
                                ("dropped", "JMSDestination")}, rec


@pytest.mark.parametrize(("text", "kind", "name", "temporary"), [
    ("ORDERS", DestinationKind.QUEUE, "ORDERS", False),
    ("queue:ORDERS", DestinationKind.QUEUE, "ORDERS", False),            # an envelope route's target
    ("topic:prices.eu", DestinationKind.TOPIC, "prices.eu", False),
    ("queue:///replies.1", DestinationKind.QUEUE, "replies.1", False),
    ("temp-queue://ID:h-1-2:1:1", DestinationKind.QUEUE, "ID:h-1-2:1:1", True),
    ("/remote-temp-queue/ID:h-1-2:1:1", DestinationKind.QUEUE, "ID:h-1-2:1:1", True),   # an envelope's reply
    ("/remote-temp-topic/ID:h-1-2:1:2", DestinationKind.TOPIC, "ID:h-1-2:1:2", True),
])
def test_the_native_target_reads_every_destination_form_a_route_gives_it(
        text: str, kind: DestinationKind, name: str, temporary: bool) -> None:
    """The envelope route names its JMS target "queue:Q" (and a temporary reply queue as the STOMP target
    takes it): the native target sent such messages to a queue literally named "queue:Q"."""
    dest = endpoint_destination(text)
    assert (dest.kind, dest.name, TEMPORARY in dest.options) == (kind, name, temporary)
