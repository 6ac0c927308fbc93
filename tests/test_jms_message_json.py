"""Whole JMS messages as JSON/YAML data: golden form, shorthand input, round trips, error paths."""

from __future__ import annotations

import json
import math

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from mappings.errors import MappingError
from mappings.jms.message_json import (
    TEMPORARY,
    destination_from_text,
    message_from_dict,
    message_from_json,
    message_to_dict,
    message_to_json,
)
from mappings.jms.model import (
    BytesBody,
    DeliveryMode,
    Destination,
    DestinationKind,
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
    jbytes,
    jchar,
    jdouble,
    jfloat,
    jint,
    jlong,
    jstring,
)
from tests.jms_strategies import java_values, messages


def test_golden_form():
    msg = JmsMessage(
        JmsHeaders(
            destination=Destination.queue("Q1", "QM1"),
            timestamp=1700000000120,
            message_id="ID:01",
            correlation_id=b"\x00\x01",
            reply_to=Destination.topic("r"),
            type="t",
        ),
        TypedMap([("colour", jstring("blue")), ("ratio", jfloat(2.24))]),
        MapBody(TypedMap([("n", jint(5)), ("x", jdouble(math.nan))])),
    )
    assert json.loads(message_to_json(msg)) == {
        "headers": {
            "JMSDestination": "queue://QM1/Q1",
            "JMSDeliveryMode": 2,
            "JMSExpiration": 0,
            "JMSPriority": 4,
            "JMSTimestamp": 1700000000120,
            "JMSMessageID": "ID:01",
            "JMSCorrelationID": {"base64": "AAE="},
            "JMSReplyTo": "topic://r",
            "JMSType": "t",
            "JMSRedelivered": False,
        },
        "properties": {"colour": {"type": "String", "value": "blue"}, "ratio": {"type": "float", "value": 2.24}},
        "body": {"type": "jms_map", "map": {"n": {"type": "int", "value": 5}, "x": {"type": "double", "value": "NaN"}}},
    }
    assert '"ratio": {"type": "float", "value": 2.24}' in message_to_json(msg)
    assert message_from_json(message_to_json(msg)) == msg


@pytest.mark.parametrize(
    "body",
    [
        NoBody(),
        TextBody(None),
        TextBody("hi"),
        BytesBody(b"\x00"),
        ObjectBody(None),
        ObjectBody(b"\xac\xed", "a.B"),
        StreamBody((jchar("A"), jbytes(None), jlong(-1))),
    ],
)
def test_every_body_round_trips(body):
    msg = JmsMessage(body=body)
    assert message_from_json(message_to_json(msg, indent=2)) == msg
    assert message_from_dict(message_to_dict(msg)) == msg


@given(messages)
def test_json_round_trip(msg):
    text = message_to_json(msg)
    text.encode("utf-8")
    assert message_from_json(text) == msg


@given(st.lists(java_values(xml_safe=False), max_size=5))
def test_values_xml_cannot_carry_still_round_trip(items):
    msg = JmsMessage(body=StreamBody(tuple(items)))
    text = message_to_json(msg)
    text.encode("utf-8")
    assert message_from_json(text) == msg


def test_yaml_input_with_shorthand_properties():
    doc = yaml.safe_load("""
headers:
  JMSDestination: topic://sensors/t1
  JMSDeliveryMode: NON_PERSISTENT
  JMSPriority: 7
properties:
  site: north
  count: 5
  big: 9000000000
  ok: true
  ratio: {type: double, value: .nan}
body:
  type: jms_text
  text: hello
""")
    msg = message_from_dict(doc)
    assert msg.headers == JmsHeaders(
        destination=Destination.topic("sensors/t1"), delivery_mode=DeliveryMode.NON_PERSISTENT, priority=7
    )
    assert list(msg.properties.pairs)[:4] == [
        ("site", jstring("north")),
        ("count", jint(5)),
        ("big", jlong(9000000000)),
        ("ok", JavaValue(JavaType.BOOLEAN, True)),
    ]
    assert math.isnan(msg.properties["ratio"].value)
    assert msg.body == TextBody("hello")


def test_empty_document_is_a_default_message():
    assert message_from_json("{}") == JmsMessage()


@pytest.mark.parametrize(
    ("doc", "path", "reason"),
    [
        ("[]", "(document)", "expected an object"),
        ('{"header": {}}', "header", "unknown member"),
        ('{"headers": {"JMSPriority": 12}}', "headers.JMSPriority", "0..9"),
        ('{"headers": {"JMSPriority": "4"}}', "headers.JMSPriority", "integer"),
        ('{"headers": {"JMSDeliveryMode": 3}}', "headers.JMSDeliveryMode", "PERSISTENT"),
        ('{"headers": {"JMSDeliveryMode": "SOMETIMES"}}', "headers.JMSDeliveryMode", "integer"),
        ('{"headers": {"JMSDestination": "Q1"}}', "headers.JMSDestination", "queue://"),
        ('{"headers": {"JMSRedelivered": 1}}', "headers.JMSRedelivered", "true or false"),
        ('{"headers": {"JMSCorrelationID": {"hex": "00"}}}', "headers.JMSCorrelationID", "base64"),
        ('{"headers": {"JMSCorrelationID": {"base64": "!!"}}}', "headers.JMSCorrelationID.base64", "base64"),
        ('{"headers": {"JMSCorrelationID": [1]}}', "headers.JMSCorrelationID", "string"),
        ('{"headers": {"JMSFoo": 1}}', "headers.JMSFoo", "unknown header"),
        ('{"headers": {"JMSPriority": 1, "JMSPriority": 2}}', "headers.JMSPriority", "duplicate"),
        ('{"properties": {"AND": "x"}}', "properties.'AND'", "reserved"),
        ('{"properties": {"n": 1e400}}', "properties.n", "expected an object"),
        ('{"properties": {"n": 99999999999999999999}}', "properties.n", "does not fit"),
        ('{"properties": {"n": {"type": "short", "value": 40000}}}', "properties.n", "outside"),
        ('{"properties": {"n": null}}', "properties.n", "expected an object"),
        ('{"body": {"type": "jms_xml"}}', "body.type", "expected one of"),
        ('{"body": {"type": "jms_text", "base64": ""}}', "body.base64", "not a member"),
        ('{"body": {"type": "jms_text", "text": 5}}', "body.text", "string"),
        ('{"body": {"type": "jms_bytes", "base64": "***"}}', "body.base64", "base64"),
        ('{"body": {"type": "jms_map", "map": {"k": {"type": "int", "value": "1"}}}}', "body.map.k", "integer"),
        ('{"body": {"type": "jms_map", "map": {"": {"type": "int", "value": 1}}}}', "body.map.''", "empty"),
        ('{"body": {"type": "jms_map", "map": []}}', "body.map", "expected an object"),
        ('{"body": {"type": "jms_stream", "stream": {}}}', "body.stream", "array"),
        ('{"body": {"type": "jms_stream", "stream": [{"type": "char", "value": "ab"}]}}', "body.stream[0]", "UTF-16"),
        ('{"body": {"type": "jms_object", "class": 5}}', "body.class", "string"),
    ],
)
def test_errors_name_the_member(doc, path, reason):
    with pytest.raises(MappingError, match=reason) as info:
        message_from_json(doc)
    assert info.value.field == path and info.value.structure == "JMS message JSON"


def test_malformed_json_gives_line_and_column():
    with pytest.raises(MappingError, match="line 2, column") as info:
        message_from_json('{"headers":\n  {,}}')
    assert info.value.offset == 2


@given(st.text(max_size=60))
def test_reader_raises_only_mapping_error(text):
    try:
        message_from_json(text)
    except MappingError:
        pass


def test_destinations_in_activemq_form_are_read() -> None:
    assert destination_from_text("queue://ORDERS") == Destination.queue("ORDERS")
    assert destination_from_text("queue:///ORDERS") == Destination.queue("ORDERS")
    assert destination_from_text("queue://QM1/ORDERS") == Destination.queue("ORDERS", "QM1")
    assert destination_from_text("temp-queue://ID:h-1:2:1") == Destination(
        DestinationKind.QUEUE, "ID:h-1:2:1", "", (TEMPORARY,))
    assert destination_from_text("temp-topic://ID:t") == Destination(DestinationKind.TOPIC, "ID:t", "", (TEMPORARY,))
