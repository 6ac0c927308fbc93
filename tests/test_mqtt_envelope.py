"""The MQTT envelope (mappings/conversions/envelope.py): JMS message <-> MQTT 3.1.1 payload, defaults, errors
naming the member path, and reply addressing by allow prefix."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mappings.conversions.envelope import (
    allowed,
    envelope_payload,
    envelope_qos,
    read_envelope,
    reply_destination,
)
from mappings.errors import MappingError
from mappings.jms.model import (
    DeliveryMode,
    Destination,
    JmsHeaders,
    JmsMessage,
    MapBody,
    TextBody,
    TypedMap,
    jchar,
    jfloat,
    jint,
    jlong,
    jstring,
)
from tests.jms_strategies import messages

NOW = 1_700_000_000_123


def request() -> JmsMessage:
    return JmsMessage(
        JmsHeaders(destination=Destination.queue("rr.req"), message_id="ID:req-1", correlation_id="c-42",
                   reply_to=Destination.queue("rr.rep.a"), type="order", priority=7,
                   delivery_mode=DeliveryMode.NON_PERSISTENT, expiration=NOW + 60_000, timestamp=NOW),
        TypedMap([("region", jstring("eu")), ("n", jint(5)), ("big", jlong(2**40)), ("r", jfloat(2.5))],
                 what="property"),
        MapBody(TypedMap([("sku", jstring("A-1")), ("grade", jchar("B"))])))


def test_request_envelope_carries_every_header_and_type() -> None:
    doc = json.loads(envelope_payload(request()))
    h = doc["headers"]
    assert h["JMSMessageID"] == "ID:req-1" and h["JMSCorrelationID"] == "c-42"
    assert h["JMSReplyTo"] == "queue:///rr.rep.a" and h["JMSDestination"] == "queue:///rr.req"
    assert h["JMSType"] == "order" and h["JMSPriority"] == 7 and h["JMSDeliveryMode"] == 1
    assert h["JMSExpiration"] == NOW + 60_000 and h["JMSTimestamp"] == NOW
    assert doc["properties"]["n"] == {"type": "int", "value": 5}
    assert doc["properties"]["big"] == {"type": "long", "value": 2**40}
    assert doc["body"] == {"type": "jms_map", "map": {"sku": {"type": "String", "value": "A-1"},
                                                      "grade": {"type": "char", "value": "B"}}}


def test_qos_follows_delivery_mode() -> None:
    assert envelope_qos(request()) == 0
    persistent = dataclasses.replace(request(), headers=JmsHeaders(delivery_mode=DeliveryMode.PERSISTENT))
    assert envelope_qos(persistent) == 2


@given(messages, st.integers(0, 2))
def test_envelope_round_trip_is_lossless(message: JmsMessage, qos: int) -> None:
    back, report = read_envelope(envelope_payload(message), qos=qos, now_ms=NOW)
    assert back == message          # every header given, so no default applies whatever the QoS
    assert not report


def test_reply_envelope_minimal_form_takes_defaults_from_the_publication() -> None:
    payload = json.dumps({"headers": {"JMSCorrelationID": "ID:req-1", "JMSDestination": "queue:///rr.rep.a"},
                          "properties": {"ok": True, "count": 3},
                          "body": {"type": "jms_text", "text": "done"}}).encode()
    for qos, mode in ((0, DeliveryMode.NON_PERSISTENT), (1, DeliveryMode.PERSISTENT), (2, DeliveryMode.PERSISTENT)):
        msg, report = read_envelope(payload, qos=qos, now_ms=NOW)
        assert msg.headers.delivery_mode is mode and msg.headers.timestamp == NOW
        assert msg.headers.correlation_id == "ID:req-1" and msg.body == TextBody("done")
        assert msg.properties["count"] == jint(3) and msg.properties["ok"].value is True
        assert not report
    bare, _ = read_envelope(b"{}", qos=0, now_ms=NOW)     # no headers member at all
    assert bare.headers.delivery_mode is DeliveryMode.NON_PERSISTENT and bare.headers.timestamp == NOW
    given_mode = json.dumps({"headers": {"JMSDeliveryMode": "PERSISTENT", "JMSTimestamp": 5}}).encode()
    msg, _ = read_envelope(given_mode, qos=0, now_ms=NOW)
    assert msg.headers.delivery_mode is DeliveryMode.PERSISTENT and msg.headers.timestamp == 5


@pytest.mark.parametrize("payload, field, reason", [
    (b"\xff{}", None, "not valid UTF-8"),
    (b"reply 42", None, "malformed JSON at line 1, column 1"),
    (b'{"headers": {}}\n{', None, "malformed JSON at line 2"),
    (b"[1, 2]", "(document)", "expected an object"),
    (b'{"header": {}}', "header", "unknown member"),
    (b'{"headers": {"JMSPriority": 12}}', "headers.JMSPriority", "12 is not 0..9"),
    (b'{"headers": {"JMSReplyTo": "replies"}}', "headers.JMSReplyTo", "does not start with queue:// or topic://"),
    (b'{"headers": {"JMSCorrelationId": "x"}}', "headers.JMSCorrelationId", "unknown header"),
    (b'{"properties": {"n": {"type": "int", "value": "5"}}}', "properties.n", ""),
    (b'{"properties": {"bad-name": 1}}', "properties.'bad-name'", ""),
    (b'{"body": {"type": "jms_text", "text": 5}}', "body.text", "expected a string or null"),
    (b'{"body": {"type": "jms_map", "map": {"k": {"type": "byte", "value": 300}}}}', "body.map.k", ""),
    (b'{"body": {"type": "text"}}', "body.type", "expected one of"),
])
def test_a_bad_envelope_names_the_member(payload: bytes, field: str | None, reason: str) -> None:
    with pytest.raises(MappingError) as exc:
        read_envelope(payload, qos=1, now_ms=NOW)
    assert exc.value.structure == "MQTT envelope"
    assert exc.value.field == field
    assert reason in exc.value.reason
    assert str(exc.value).startswith("MQTT envelope")


def test_reply_destination_by_allow_prefix() -> None:
    prefixes = ("queue://rr.rep.", "topic://replies.")
    to = lambda d: JmsMessage(JmsHeaders(destination=d))  # noqa: E731
    assert reply_destination(to(Destination.queue("rr.rep.a")), prefixes) == Destination.queue("rr.rep.a")
    assert reply_destination(to(Destination.queue("rr.rep.a", "QM1")), prefixes) == Destination.queue("rr.rep.a",
                                                                                                     "QM1")
    assert reply_destination(to(Destination.topic("replies.x")), prefixes) == Destination.topic("replies.x")
    assert reply_destination(JmsMessage(), prefixes) is None
    for outside in (Destination.queue("rr.req"), Destination.topic("rr.rep.a"), Destination.queue("replies.x")):
        with pytest.raises(MappingError) as exc:
            reply_destination(to(outside), prefixes)
        assert exc.value.field == "headers.JMSDestination" and "not an allowed reply destination" in exc.value.reason
    assert allowed(Destination.queue("anything"), ("queue://",))
    assert not allowed(Destination.queue("anything"), ())


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["headers", "properties", "body", "type", "value", "text", "map", "base64",
                         "JMSPriority", "JMSReplyTo", "JMSCorrelationID", "JMSDestination", "n"]), inner, max_size=4),
    max_leaves=12)


@given(st.one_of(st.binary(max_size=64), _json.map(lambda v: json.dumps(v).encode())), st.integers(0, 2))
def test_any_payload_is_a_message_or_a_mapping_error(payload: bytes, qos: int) -> None:
    """Bad input never escapes as another exception: the route backs it out with the reason."""
    try:
        message, _ = read_envelope(payload, qos=qos, now_ms=NOW)
    except MappingError as exc:
        assert exc.structure == "MQTT envelope" and exc.reason
    else:
        assert isinstance(message, JmsMessage)
