"""EnvelopeConverter (bridge/routing/envelope.py) on plain values: addressing, fallback, templates, the
gateway's informational properties, MQ persistence overrides, and the MQ -> MQTT topic and QoS."""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass

import pytest
from hypothesis import given, settings

from bridge.connectors.base import Inbound
from bridge.routing.envelope import EnvelopeConverter
from mappings.errors import MappingError
from mappings.jms.model import Destination, JmsHeaders, JmsMessage, TextBody, jint, jstring
from mappings.mq import constants as C
from mappings.mq.message import build_message, decode_message, encode_message
from mappings.mq.mqmd import Mqmd
from mappings.mq.rfh2 import Rfh2, RfhElement, RfhFolder
from mappings.mqtt.publication import MqttPublication
from mappings.rules.model import Route, parse_rules
from tests.jms_strategies import messages


def route(yaml_route: str, connectors: str = "connectors: {amq: {type: jms}}\n") -> Route:
    return parse_rules(connectors + "routes:\n" + yaml_route).routes[0]


def from_mqtt(payload: object, topic: str = "rep/x", qos: int = 1, client: str = "svc",
              user: str | None = None, retain: bool = False) -> Inbound:
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    pub = MqttPublication(topic, data, qos=qos, client_id=client, username=user, retain=retain)
    return Inbound("k", "mqtt", pub, "publish", len(data), topic, time.time(), client_id=client, qos=qos)


REPLY = """\
  - name: rep
    from: {mqtt: "rep/#"}
    to: {connector: amq, reply_to: true, allow: ["queue://r.", "topic://t."]%s}
    options: {mqtt_format: envelope}
"""


def test_reply_to_target_addresses_queue_and_topic_by_the_envelope() -> None:
    conv = EnvelopeConverter(route(REPLY % ""), "mqtt", "jms")
    out, kind, report = conv.convert(from_mqtt({"headers": {"JMSDestination": "queue:///r.1"}}))
    assert out.destination == "queue:r.1" and kind == "Message" and not report
    assert isinstance(out.message, JmsMessage) and out.message.headers.destination == Destination.queue("r.1")
    out, _, _ = conv.convert(from_mqtt({"headers": {"JMSDestination": "topic://t.a/b"}}))
    assert out.destination == "topic:t.a/b"


def test_fallback_is_used_and_reported_only_when_the_envelope_names_nothing() -> None:
    conv = EnvelopeConverter(route(REPLY % ", topic: t.lost"), "mqtt", "jms")
    out, _, report = conv.convert(from_mqtt({"body": {"type": "jms_text", "text": "x"}}))
    assert out.destination == "topic:t.lost"
    assert [(f.change.value, f.name) for f in report.findings] == [("defaulted", "JMSDestination")]
    _, _, report = conv.convert(from_mqtt({"headers": {"JMSDestination": "queue:///r.x"}}, retain=True))
    assert [(f.change.value, f.name) for f in report.findings] == [("dropped", "retain")]
    with pytest.raises(MappingError, match="headers.JMSDestination: 'queue:///q.other' is not an allowed"):
        conv.convert(from_mqtt({"headers": {"JMSDestination": "queue:///q.other"}}))


def test_fixed_target_wins_over_the_envelope_destination_and_says_so() -> None:
    conv = EnvelopeConverter(route("""\
  - name: fixed
    from: {mqtt: "in/#"}
    to: {connector: amq, topic: "out/{2}"}   # MQTT levels, written as ActiveMQ dots
    options: {mqtt_format: envelope}
"""), "mqtt", "jms")
    out, _, report = conv.convert(from_mqtt({"headers": {"JMSDestination": "queue:///elsewhere"}}, topic="in/a/b"))
    assert out.destination == "topic:out.a"
    assert [(f.change.value, f.name) for f in report.findings] == [("dropped", "JMSDestination")]
    out, _, report = conv.convert(from_mqtt({}, topic="in/z/y"))
    assert out.destination == "topic:out.z" and not report


def test_gateway_informational_properties_cannot_be_spoofed_by_the_envelope() -> None:
    conv = EnvelopeConverter(route(REPLY % ""), "mqtt", "jms")
    out, _, report = conv.convert(from_mqtt({"headers": {"JMSDestination": "queue:///r.1"},
                                             "properties": {"JMS_SWIFTMQ_CID": "admin", "JMSXUserID": "root"}},
                                            client="svc", user="bob", qos=2))
    props = out.message.properties  # type: ignore[attr-defined]
    assert props["JMS_SWIFTMQ_CID"] == jstring("svc") and props["JMSXUserID"] == jstring("bob")
    assert props["JMS_SWIFTMQ_MQTT_PUBQOS"] == jint(2)
    assert {f.name for f in report.findings if f.change.value == "dropped"} == {"JMS_SWIFTMQ_CID", "JMSXUserID"}


def test_mq_target_persistence_priority_and_user_identifier_options() -> None:
    conv = EnvelopeConverter(route("""\
  - name: m
    from: {mqtt: "in/#"}
    to: {queue: Q.OUT}
    options: {mqtt_format: envelope, persistence: not_persistent, priority: 8, user_identifier: user_name}
""", ""), "mqtt", "mq")
    out, kind, _ = conv.convert(from_mqtt({"headers": {"JMSCorrelationID": "abc", "JMSType": "t"},
                                           "body": {"type": "jms_text", "text": "hi"}}, user="bob", qos=1))
    msg = decode_message(out.message)  # type: ignore[arg-type]
    assert out.destination == "Q.OUT" and kind == "MQHRF2"
    assert msg.md.persistence == C.MQPER_NOT_PERSISTENT and msg.md.priority == 8
    assert msg.md.user_identifier.strip() == "bob"
    assert msg.md.correl_id == b"abc".ljust(24, b"\x00") and msg.body == b"hi"


def test_mq_source_keeps_the_payload_forms_topic_and_qos() -> None:
    conv = EnvelopeConverter(route("""\
  - name: out
    from: {queue: Q.IN}
    to: {mqtt: "dev/{topic}"}
    options: {mqtt_format: envelope}
""", ""), "mq", "mqtt")
    rfh = Rfh2(folders=(RfhFolder("mqps", (RfhElement("Top", "a/b"),)),))
    raw = encode_message(build_message(Mqmd(persistence=C.MQPER_NOT_PERSISTENT, reply_to_q="R.Q",
                                            msg_type=C.MQMT_REQUEST), (rfh,), b"body",
                                       body_format=C.MQFMT_STRING))
    out, kind, _ = conv.convert(Inbound("k", "mq", raw, "MQHRF2", len(raw), "Q.IN", time.time()))
    pub = out.message
    assert isinstance(pub, MqttPublication) and kind == "publish"
    assert pub.topic == "dev/a/b" and pub.qos == 0                        # MQ Telemetry Table 4: NOT_PERSISTENT -> 0
    doc = json.loads(pub.payload)
    assert doc["headers"]["JMSReplyTo"] == "queue:///R.Q" and doc["body"] == {"type": "jms_text", "text": "body"}
    assert doc["headers"]["JMSDestination"] == "topic://a/b"              # mqps/Top (IBM MQ JMS mapping)


def test_jms_source_publishes_the_envelope_with_qos_from_delivery_mode() -> None:
    conv = EnvelopeConverter(route("""\
  - name: req
    from: {connector: amq, queue: rq}
    to: {mqtt: "svc/{dest}"}
    options: {mqtt_format: envelope}
"""), "jms", "mqtt")
    msg = JmsMessage(body=TextBody("q"))
    out, _, report = conv.convert(Inbound("k", "jms", msg, "TextMessage", 1, "rq.x", time.time()))
    assert out.destination == "svc/rq/x" and out.message.qos == 2 and not report  # type: ignore[attr-defined]
    assert json.loads(out.message.payload)["body"] == {"type": "jms_text", "text": "q"}  # type: ignore[attr-defined]


def test_the_envelope_names_a_jms_destination_in_mqtt_as_the_payload_form_does() -> None:
    """``{topic}`` of a JMS source's destination: ``.`` is a level, ``%2E`` a dot inside one (the dotted naming
    undone, as the payload form's routes do); before, the envelope route published to ``svc/plant/v1%2E2``."""
    conv = EnvelopeConverter(route("""\
  - name: req
    from: {connector: amq, topic: "plant.>"}
    to: {mqtt: "svc/{topic}"}
    options: {mqtt_format: envelope}
"""), "jms", "mqtt")
    msg = JmsMessage(body=TextBody("q"))
    out, _, _ = conv.convert(Inbound("k", "jms", msg, "TextMessage", 1, "plant.v1%2E2", time.time()))
    assert out.destination == "svc/plant/v1.2"


@dataclass
class _Frame:
    headers: dict[str, str]


def test_a_temporary_reply_queue_is_marked_and_reached_only_when_allowed() -> None:
    """QueueRequestor: ActiveMQ hands STOMP consumers ``reply-to: /remote-temp-queue/ID:..``."""
    req = EnvelopeConverter(route("""\
  - name: req
    from: {connector: amq, queue: rq}
    to: {mqtt: "svc/req"}
    options: {mqtt_format: envelope}
"""), "jms", "mqtt")
    msg = JmsMessage(JmsHeaders(reply_to=Destination.queue("ID:h-1-2:1:1")), body=TextBody("q"))
    item = Inbound("k", "jms", msg, "TextMessage", 1, "rq", time.time(),
                   handle=_Frame({"reply-to": "/remote-temp-queue/ID:h-1-2:1:1"}))
    out, _, _ = req.convert(item)
    reply_to = json.loads(out.message.payload)["headers"]["JMSReplyTo"]  # type: ignore[attr-defined]
    assert reply_to == "queue:///ID:h-1-2:1:1?temporary=true"
    plain = Inbound("k", "jms", msg, "TextMessage", 1, "rq", time.time(),
                    handle=_Frame({"reply-to": "/queue/ID:h-1-2:1:1"}))
    out, _, _ = req.convert(plain)
    assert json.loads(out.message.payload)["headers"]["JMSReplyTo"] == "queue:///ID:h-1-2:1:1"  # type: ignore

    reply = {"headers": {"JMSDestination": reply_to}}
    allowed = EnvelopeConverter(route("""\
  - name: rep
    from: {mqtt: "rep/#"}
    to: {connector: amq, reply_to: true, allow: ["queue://r.", "temp-queue://ID:"]}
    options: {mqtt_format: envelope}
"""), "mqtt", "jms")
    out, _, report = allowed.convert(from_mqtt(reply))
    assert out.destination == "/remote-temp-queue/ID:h-1-2:1:1" and not report
    with pytest.raises(MappingError, match="not an allowed reply destination"):
        EnvelopeConverter(route(REPLY % ""), "mqtt", "jms").convert(from_mqtt(reply))   # queue://ID: not enough


_TO_MQTT = """\
  - name: out
    from: {connector: amq, queue: rq}
    to: {mqtt: "svc/out"}
    options: {mqtt_format: envelope}
"""
_BACK = """\
  - name: back
    from: {mqtt: "svc/#"}
    to: {connector: amq, reply_to: true, allow: ["queue://", "topic://"], queue: fallback}
    options: {mqtt_format: envelope, swiftmq_properties: false}
"""


@settings(max_examples=150, deadline=None)
@given(messages)
def test_jms_to_mqtt_and_back_through_two_envelope_routes_keeps_the_message(message: JmsMessage) -> None:
    """The round trip that ties the two directions: only JMSDestination is the route's to decide."""
    out, _, report = EnvelopeConverter(route(_TO_MQTT), "jms", "mqtt").convert(
        Inbound("k", "jms", message, "TextMessage", 1, "rq", time.time()))
    assert not report
    pub = out.message
    assert isinstance(pub, MqttPublication)
    back, _, _ = EnvelopeConverter(route(_BACK), "mqtt", "jms").convert(
        Inbound("k2", "mqtt", pub, "publish", len(pub.payload), pub.topic, time.time(), qos=pub.qos))
    got = back.message
    assert isinstance(got, JmsMessage)
    named = message.headers.destination
    expected = Destination.queue("fallback") if named is None else Destination(named.kind, named.name)
    assert got.headers.destination == expected
    assert dataclasses.replace(got.headers, destination=None) == dataclasses.replace(message.headers,
                                                                                     destination=None)
    assert got.properties == message.properties and got.body == message.body


def test_payload_and_envelope_reply_to_targets_share_their_addressing_rules() -> None:
    """A payload-form reply_to target (an MQTT 5 responder's topic is the JMSReplyTo URI) and the envelope form
    choose alike: an allowed URI as the connector names it, else the route's fallback with a defaulted finding,
    a templated fallback topic filled in (the payload form sent to the template's text before)."""
    from bridge.routing.mqtt_stomp import mqtt_to_jms_message

    payload = route("""\
  - name: rep
    from: {mqtt: "#"}
    to: {connector: amq, reply_to: true, allow: ["queue://r."], topic: "replies.{1}"}
""")
    out, _, report = mqtt_to_jms_message(payload, from_mqtt(b"x", topic="queue:///r.one"))
    assert out.destination == "r.one" and not report
    out, _, report = mqtt_to_jms_message(payload, from_mqtt(b"x", topic="plain/topic"))
    assert out.destination == "topic:replies.plain"
    assert [(f.change.value, f.name) for f in report.findings] == [("defaulted", "JMSDestination")]
    with pytest.raises(MappingError, match="not an allowed reply destination"):
        mqtt_to_jms_message(payload, from_mqtt(b"x", topic="queue:///elsewhere"))
