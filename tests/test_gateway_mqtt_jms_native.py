"""MQTT 3.1.1 and MQTT 5 <-> JMS through one running gateway with a native JMS connector (``client: native``:
ActiveMQ's own JMS client in the gateway's JVM) and the session's ActiveMQ, with paho-mqtt 2.x clients and the
Java JMS client (tests/java/JmsTool.java). Rules: Eclipse Amlen "Conversion between MQTT and JMS" with the
SwiftMQ informational properties (docs/connectors.md, "MQTT 5 properties"); the STOMP connector's side of the
same checks is tests/test_gateway_mqtt5_jms_fields.py.

Where native carries more than STOMP it is asserted as such: JMS_SWIFTMQ_MQTT_PUBQOS arrives as a
java.lang.Integer and JMSXUserID as the MQTT user name (STOMP: a String, and dropped); a JMS property of any
type reaches an MQTT 5 user property as its text, reported as coerced from its Java type (STOMP has only
Strings to give)."""
from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import paho.mqtt.client as mqtt
import pytest

from tests.support.activemq import BrokerEndpoints
from tests.support.gateway import GatewayProcess, wait_for
from tests.support.jmstool import JmsTool, native_connector_yaml, typed
from tests.support.mqtt5_client import V5, publish_props
from tests.support.mqtt_clients import PahoClient
from tests.test_gateway_activemq import records

pytest.importorskip("jpype", reason="jpype1 not installed (pip install 'mqbridge[jms]')")
pytestmark = pytest.mark.activemq

TAG = uuid.uuid4().hex[:10]
STRING, INTEGER = "java.lang.String", "java.lang.Integer"


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, activemq: BrokerEndpoints) -> Iterator[GatewayProcess]:
    base = tmp_path_factory.mktemp("gw-mqtt-jms-native")
    rules = base / "rules.yaml"
    rules.write_text(native_connector_yaml(activemq.openwire_url) + f"""\
routes:
  - {{name: m2j, from: {{mqtt: "m2j/{TAG}/#"}}, to: {{connector: amq, queue: m2j.{TAG}}}}}
  - {{name: j2m, from: {{connector: amq, queue: j2m.{TAG}}}, to: {{mqtt: "j2m/{TAG}"}}}}
  - {{name: j2o, from: {{connector: amq, queue: j2o.{TAG}}}, to: {{mqtt: "j2o/{TAG}"}}}}
""")
    (base / "gw").mkdir()
    gateway = GatewayProcess(base / "gw", {"rules": str(rules)}).start(timeout=60)
    yield gateway
    gateway.stop()


def _now_ms() -> int:
    return int(time.time() * 1000)


def _v5(gw: GatewayProcess, name: str, username: str | None = None) -> V5:
    client = V5(gw.port, f"{name}-{TAG}")
    if username is not None:
        client.client.username_pw_set(username)
    return client.connect()


def _publish(client: V5, topic: str, payload: bytes | str, qos: int = 1, **props: Any) -> None:
    client.client.publish(topic, payload, qos, properties=publish_props(**props) if props else None
                          ).wait_for_publish(10)


def _record(gw: GatewayProcess, route: str, has: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """The route's one egress record that ``has`` picks (waited for: the log is written after the send)."""
    (rec,) = wait_for(lambda: [r for r in records(gw) if r["direction"] == "egress" and r["route"] == route
                               and has(r)], 15, what=f"the egress record of {route}")
    return rec


def _findings(rec: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {(f["change"], f["name"]): f["detail"] for f in rec["findings"]}


# ------------------------------------------------------------------------------ MQTT -> JMS


def test_mqtt5_user_properties_reach_jms_as_strings_and_the_informational_ones_keep_their_types(
        gw: GatewayProcess, jmstool: JmsTool) -> None:
    """User properties -> String properties (Amlen: no type is guessed, "42" stays a String); names JMS cannot
    have are dropped with a finding. Native only: the publisher QoS property is an int and JMSXUserID the MQTT
    user name, as SwiftMQ has them (STOMP: a String, and dropped by ActiveMQ)."""
    pub = _v5(gw, "props", username="alice")
    _publish(pub, f"m2j/{TAG}/props", "p", UserProperty=[("plant", "north"), ("count", "42"), ("bad-name", "x"),
                                                          ("JMSFoo", "y")])
    (got,) = jmstool.receive(f"queue://m2j.{TAG}", 1, timeout=20)
    pub.close()
    props = got["properties"]
    assert props["plant"] == {"type": STRING, "value": "north"}
    assert props["count"] == {"type": STRING, "value": "42"}
    assert not {"bad-name", "JMSFoo"} & set(props)
    assert props["JMS_SWIFTMQ_MQTT_PUBQOS"] == {"type": INTEGER, "value": 1}   # STOMP: a String
    assert props["JMS_SWIFTMQ_CID"] == {"type": STRING, "value": f"props-{TAG}"}
    assert props["JMSXUserID"] == {"type": STRING, "value": "alice"}          # STOMP: dropped
    found = _findings(_record(gw, "m2j", lambda r: ("dropped", "JMSFoo") in _findings(r)))
    assert ("dropped", "bad-name") in found
    assert not {("coerced", "JMS_SWIFTMQ_MQTT_PUBQOS"), ("dropped", "JMSXUserID")} & set(found), found


def test_mqtt5_request_properties_and_expiry_become_jms_headers(gw: GatewayProcess, jmstool: JmsTool) -> None:
    """Response Topic -> JMSReplyTo (a topic in the provider's dotted naming), Correlation Data ->
    JMSCorrelationID, Content Type -> JMSType, Message Expiry Interval -> JMSExpiration (now + interval)."""
    pub = _v5(gw, "req")
    start = _now_ms()
    _publish(pub, f"m2j/{TAG}/req", "price?", ResponseTopic=f"r5/{TAG}/rep", CorrelationData=b"corr-8812",
             ContentType="quote", MessageExpiryInterval=120)
    _publish(pub, f"m2j/{TAG}/req", "no expiry")
    asked, plain = jmstool.receive(f"queue://m2j.{TAG}", 2, timeout=20)
    end = _now_ms()
    pub.close()
    h = asked["headers"]
    assert asked["type"] == "Text" and asked["body"] == "price?"
    assert h["replyTo"] == f"topic://r5.{TAG}.rep"
    assert h["correlationId"] == "corr-8812"
    assert h["type"] == "quote"
    assert start + 119_000 <= h["expiration"] <= end + 120_000
    assert plain["body"] == "no expiry" and plain["headers"]["expiration"] == 0   # no interval: never expires
    assert plain["headers"]["replyTo"] is None and plain["headers"]["correlationId"] is None


def test_correlation_data_the_provider_cannot_keep_is_reported(gw: GatewayProcess, jmstool: JmsTool) -> None:
    """Correlation Data that is not UTF-8 becomes a byte[] JMSCorrelationID; ActiveMQ keeps a correlation id
    as a String (the bytes decoded as UTF-8), so the consumer gets other bytes and the egress record says so."""
    pub = _v5(gw, "corr")
    _publish(pub, f"m2j/{TAG}/corr", "c", CorrelationData=b"\xff\xfe\x00id")
    (got,) = jmstool.receive(f"queue://m2j.{TAG}", 1, timeout=20)
    pub.close()
    assert got["headers"]["correlationId"] == "\ufffd\ufffd\x00id"   # what ActiveMQ made of the bytes
    found = _findings(_record(gw, "m2j", lambda r: ("coerced", "JMSCorrelationID") in _findings(r)))
    assert "fffe00" in found[("coerced", "JMSCorrelationID")]
    assert ("coerced", "correlation data") in found   # the rule's own: not UTF-8, so set as bytes


@pytest.mark.parametrize("level", ["mqtt311", "mqtt5"])
def test_qos_sets_the_delivery_mode(gw: GatewayProcess, jmstool: JmsTool, level: str,
                                    clients: Callable[..., PahoClient]) -> None:
    """QoS 0 -> NON_PERSISTENT, QoS 1 and 2 -> PERSISTENT (MQTT 3.1.1 publications take the target's
    per-key model cache, MQTT 5 ones the model path)."""
    if level == "mqtt5":
        v5 = _v5(gw, "qos5")
        for qos in (0, 1, 2):
            _publish(v5, f"m2j/{TAG}/qos", f"q{qos}", qos)
        v5.close()
    else:
        old = clients(gw.port, f"qos3-{TAG}", protocol=mqtt.MQTTv311).connect()
        for qos in (0, 1, 2):
            old.publish(f"m2j/{TAG}/qos", f"q{qos}", qos=qos)
    got = jmstool.receive(f"queue://m2j.{TAG}", 3, timeout=20)
    modes = {m["body"]: m["headers"]["deliveryMode"] for m in got}   # non-persistent ones may overtake
    assert modes == {"q0": "NON_PERSISTENT", "q1": "PERSISTENT", "q2": "PERSISTENT"}
    assert {m["properties"]["JMS_SWIFTMQ_MQTT_PUBQOS"]["value"] for m in got} == {0, 1, 2}


# ------------------------------------------------------------------------------ JMS -> MQTT


def test_typed_jms_properties_reach_mqtt5_user_properties_as_text(gw: GatewayProcess, jmstool: JmsTool) -> None:
    """Every JMS property type -> a user property holding its text (Amlen: booleans true/false, integers in
    decimal, float/double as the shortest round-trip decimal); each non-String one is a `coerced` finding
    naming its Java type, which only the native connector sees (over STOMP every property is a String)."""
    sub = _v5(gw, "j2m-props")
    assert sub.subscribe(f"j2m/{TAG}", 1) == [1]
    jmstool.send(f"queue://j2m.{TAG}", {"type": "Text", "body": "typed", "properties": {
        "i": typed("int", 42), "l": typed("long", 2**40), "b": typed("boolean", True), "d": typed("double", 2.5),
        "f": typed("float", 0.1), "y": typed("byte", -7), "s": typed("short", 300), "t": typed("String", "x")}})
    (msg,) = sub.wait(1, timeout=20)
    sub.close()
    users = dict(msg.properties.UserProperty)
    assert {k: users[k] for k in "ilbdfyst"} == {"i": "42", "l": str(2**40), "b": "true", "d": "2.5", "f": "0.1",
                                                 "y": "-7", "s": "300", "t": "x"}
    found = _findings(_record(gw, "j2m", lambda r: ("coerced", "i") in _findings(r)))
    assert found[("coerced", "i")] == "int -> String" and found[("coerced", "l")] == "long -> String"
    assert found[("coerced", "b")] == "boolean -> String" and found[("coerced", "f")] == "float -> String"
    assert ("coerced", "t") not in found


def test_jms_headers_reach_an_mqtt5_subscriber(gw: GatewayProcess, jmstool: JmsTool) -> None:
    """JMSReplyTo -> Response Topic (a topic's dotted naming undone; a queue as its URI), JMSCorrelationID ->
    Correlation Data, JMSType -> Content Type, JMSExpiration -> Message Expiry Interval (what remains),
    JMSDeliveryMode -> QoS (PERSISTENT 2, NON_PERSISTENT 0), a TextMessage -> Payload Format Indicator 1."""
    sub = _v5(gw, "j2m-hdr")
    assert sub.subscribe(f"j2m/{TAG}", 2) == [2]
    jmstool.send(
        f"queue://j2m.{TAG}",
        {"type": "Text", "body": "reply", "headers": {"correlationId": "corr-77", "type": "quote-reply",
                                                      "replyTo": f"topic://back.{TAG}.x", "expiration": 90_000}},
        {"type": "Bytes", "body": {"hex": "00ff"}, "headers": {"deliveryMode": "NON_PERSISTENT",
                                                              "replyTo": f"queue://q.{TAG}"}})
    got = {m.payload: m for m in sub.wait(2, timeout=20)}   # the non-persistent one may overtake
    sub.close()
    text, raw = got[b"reply"], got[b"\x00\xff"]
    assert text.properties.ResponseTopic == f"back/{TAG}/x"
    assert text.properties.CorrelationData == b"corr-77"
    assert text.properties.ContentType == "quote-reply"
    assert 85 <= text.properties.MessageExpiryInterval <= 90
    assert text.properties.PayloadFormatIndicator == 1 and text.qos == 2
    assert raw.properties.ResponseTopic == f"queue:///q.{TAG}" and raw.qos == 0
    assert not hasattr(raw.properties, "PayloadFormatIndicator")
    assert not hasattr(raw.properties, "MessageExpiryInterval")


def test_an_mqtt311_subscriber_gets_the_payload_and_the_record_names_what_it_missed(
        gw: GatewayProcess, jmstool: JmsTool, clients: Callable[..., PahoClient]) -> None:
    """MQTT 3.1.1 has no properties: the subscriber gets the payload at the QoS the delivery mode gives, and
    the egress record has a `dropped` finding per MQTT 5 field and user property, naming the subscriber."""
    sub = clients(gw.port, f"old-{TAG}", protocol=mqtt.MQTTv311).connect()
    assert sub.subscribe(f"j2o/{TAG}", 2) == [2]
    jmstool.send(f"queue://j2o.{TAG}", {"type": "Text", "body": "for 3.1.1", "properties": {"n": typed("int", 5)},
                                        "headers": {"correlationId": "c-1", "type": "t"}})
    (msg,) = sub.wait_messages(1, timeout=20)
    assert (msg.payload, msg.qos) == (b"for 3.1.1", 2)
    found = _findings(_record(gw, "j2o", lambda r: True))
    for name in ("user property n", "Correlation Data", "Content Type", "Payload Format Indicator"):
        assert f"old-{TAG}" in found[("dropped", name)], (name, found)
