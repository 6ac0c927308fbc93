"""The JMS message model: typed values, identifiers, typed maps, destinations, headers, bodies."""
from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mappings.errors import MappingError
from mappings.jms.model import (
    BodyType,
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
    check_property_name,
    is_float32,
    is_jms_identifier,
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
    to_float32,
)

# ------------------------------------------------------------------ typed values


@pytest.mark.parametrize(
    ("factory", "low", "high"),
    [(jbyte, -128, 127), (jshort, -32768, 32767), (jint, -(2**31), 2**31 - 1), (jlong, -(2**63), 2**63 - 1)],
)
def test_integer_ranges_are_inclusive_and_checked(factory, low, high):
    assert factory(low).value == low
    assert factory(high).value == high
    for bad in (low - 1, high + 1):
        with pytest.raises(MappingError, match="outside"):
            factory(bad)


@pytest.mark.parametrize(
    ("jtype", "value", "reason"),
    [
        (JavaType.INT, True, "expected int"),
        (JavaType.INT, 1.0, "expected int"),
        (JavaType.BOOLEAN, 1, "expected bool"),
        (JavaType.DOUBLE, 1, "expected float"),
        (JavaType.FLOAT, 0.1, "32-bit float"),
        (JavaType.CHAR, "ab", "one UTF-16"),
        (JavaType.CHAR, "\U0001F600", "one UTF-16"),
        (JavaType.STRING, b"x", "expected str"),
        (JavaType.BYTES, "x", "expected bytes"),
        (JavaType.BYTES, bytearray(b"x"), "expected bytes"),
        (JavaType.INT, None, "cannot be null"),
        (JavaType.CHAR, None, "cannot be null"),
    ],
)
def test_invalid_values_raise_mapping_error(jtype, value, reason):
    with pytest.raises(MappingError, match=reason) as info:
        JavaValue(jtype, value)
    assert info.value.structure == f"Java {jtype.value} value"


def test_unknown_type_is_rejected():
    with pytest.raises(MappingError, match="unknown Java type"):
        JavaValue("int", 1)  # type: ignore[arg-type]


def test_null_is_allowed_only_for_object_types():
    assert jstring(None).value is None
    assert jbytes(None).value is None


def test_jfloat_rounds_to_32_bits():
    v = jfloat(2.24)
    assert v.value != 2.24 and is_float32(v.value)
    assert abs(v.value - 2.24) < 1e-6
    assert to_float32(1e39) == math.inf  # overflow goes to infinity, like a Java (float) cast


def test_nan_equals_nan_but_signed_zeros_differ():
    assert jdouble(math.nan) == jdouble(math.nan)
    assert hash(jdouble(math.nan)) == hash(jdouble(math.nan))
    assert jdouble(0.0) != jdouble(-0.0)
    assert jint(1) != jlong(1)
    assert jboolean(True) != jint(1)


def test_chars_cover_the_whole_utf16_unit_range():
    assert jchar("\u0000").value == "\x00"
    assert jchar("\uffff").value == "\uffff"
    assert jchar("\ud800").value == "\ud800"  # a lone surrogate is a legal Java char


# ------------------------------------------------------------------ identifiers


@pytest.mark.parametrize("name", ["a", "_x", "$v", "JMSXUserID", "JMS_IBM_Format", "ünïcödé", "a1", "€uro"])
def test_valid_identifiers(name):
    assert is_jms_identifier(name)
    assert check_property_name(name) == name


@pytest.mark.parametrize(
    "name",
    ["", "1a", "a-b", "a.b", "a b", "NULL", "null", "True", "false", "NOT", "and", "Or", "between", "LIKE",
     "in", "IS", "escape", "a\x00"],
)
def test_invalid_identifiers(name):
    assert not is_jms_identifier(name)
    with pytest.raises(MappingError) as info:
        check_property_name(name)
    assert info.value.structure == "JMS property name"
    assert info.value.field == repr(name)


def test_reserved_words_are_only_rejected_whole():
    assert is_jms_identifier("NULLABLE") and is_jms_identifier("isEmpty") and is_jms_identifier("Inx")


def test_non_string_name_is_not_an_identifier():
    assert not is_jms_identifier(3)


# ------------------------------------------------------------------ typed maps


def test_typed_map_keeps_order_and_compares_with_order():
    a = TypedMap([("x", jint(1)), ("y", jint(2))])
    b = TypedMap([("y", jint(2)), ("x", jint(1))])
    assert list(a) == ["x", "y"]
    assert a["y"] == jint(2) and a.get("z") is None and "x" in a and len(a) == 2
    assert a != b and dict(a) == dict(b)
    assert TypedMap({"x": jint(1), "y": jint(2)}) == a
    assert hash(a) == hash(TypedMap(a.pairs))


def test_typed_map_rejects_duplicates_and_bad_pairs():
    with pytest.raises(MappingError, match="duplicate property") as info:
        TypedMap([("x", jint(1)), ("x", jint(2))], what="property")
    assert info.value.field == "x"
    with pytest.raises(MappingError, match="JavaValue"):
        TypedMap([("x", 1)])  # type: ignore[list-item]
    with pytest.raises(MappingError, match="name must be str"):
        TypedMap([(1, jint(1))])  # type: ignore[list-item]
    with pytest.raises(MappingError, match="pairs"):
        TypedMap([("x",)])  # type: ignore[list-item]


# ------------------------------------------------------------------ destinations


@pytest.mark.parametrize(
    ("uri", "kind", "name", "qmgr"),
    [
        ("queue://QM1/Q.REPLY", DestinationKind.QUEUE, "Q.REPLY", "QM1"),
        ("queue:///Q", DestinationKind.QUEUE, "Q", ""),
        ("topic://a/b/c", DestinationKind.TOPIC, "a/b/c", ""),
        ("queue://QM/A/B", DestinationKind.QUEUE, "A/B", "QM"),
    ],
)
def test_destination_uris(uri, kind, name, qmgr):
    d = Destination.parse(uri)
    assert (d.kind, d.name, d.queue_manager) == (kind, name, qmgr)
    assert d.uri == uri


def test_destination_options_round_trip():
    d = Destination.parse("queue://QM/Q?persistence=1&priority=5")
    assert d.options == (("persistence", "1"), ("priority", "5"))
    assert Destination.parse(d.uri) == d


@pytest.mark.parametrize(
    "uri", ["Q", "http://x", "topic://", "queue://QM", "queue://QM/", "queue://QM/Q?x", "queue://QM/Q?=1", 7]
)
def test_bad_destination_uris(uri):
    with pytest.raises(MappingError) as info:
        Destination.parse(uri)
    assert info.value.structure == "Destination URI"


def test_destination_validation():
    with pytest.raises(MappingError, match="non-empty"):
        Destination.queue("")
    with pytest.raises(MappingError, match="no queue manager"):
        Destination(DestinationKind.TOPIC, "t", "QM")
    with pytest.raises(MappingError, match="cannot be written"):
        Destination.queue("Q", "QM/1")
    assert Destination.topic("a?b%c").uri == "topic://a%3Fb%25c"
    assert Destination.parse("topic://a%3Fb%25c") == Destination.topic("a?b%c")
    with pytest.raises(MappingError, match="unknown kind"):
        Destination("queue", "Q")  # type: ignore[arg-type]


@given(
    st.sampled_from(list(DestinationKind)),
    st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20),
    st.text(st.characters(blacklist_characters="/?", blacklist_categories=("Cs",)), max_size=8),
)
def test_destination_uri_round_trip(kind, name, qmgr):
    if kind is DestinationKind.TOPIC:
        qmgr = ""
    d = Destination(kind, name, qmgr)
    assert Destination.parse(d.uri) == d


# ------------------------------------------------------------------ headers and messages


def test_header_defaults_are_the_jms_defaults():
    h = JmsHeaders()
    assert h.delivery_mode is DeliveryMode.PERSISTENT and h.priority == 4
    assert h.expiration == 0 and h.timestamp == 0 and not h.redelivered
    assert JmsHeaders(delivery_mode=1).delivery_mode is DeliveryMode.NON_PERSISTENT  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"priority": 10}, "JMSPriority"),
        ({"priority": -1}, "JMSPriority"),
        ({"priority": True}, "JMSPriority"),
        ({"delivery_mode": 3}, "JMSDeliveryMode"),
        ({"delivery_mode": True}, "JMSDeliveryMode"),
        ({"expiration": 2**63}, "JMSExpiration"),
        ({"timestamp": "now"}, "JMSTimestamp"),
        ({"message_id": 5}, "JMSMessageID"),
        ({"correlation_id": 5}, "JMSCorrelationID"),
        ({"type": b"x"}, "JMSType"),
        ({"redelivered": 1}, "JMSRedelivered"),
        ({"destination": "queue:///Q"}, "JMSDestination"),
        ({"reply_to": "queue:///Q"}, "JMSReplyTo"),
    ],
)
def test_bad_headers_name_the_field(kwargs, field):
    with pytest.raises(MappingError) as info:
        JmsHeaders(**kwargs)
    assert info.value.field == field and info.value.structure == "JMS header"


def test_correlation_id_may_be_bytes():
    assert JmsHeaders(correlation_id=b"\x00\x01").correlation_id == b"\x00\x01"


def test_message_validates_property_names_and_body():
    msg = JmsMessage(properties={"a": jint(1)}, body=TextBody("hi"))
    assert isinstance(msg.properties, TypedMap) and msg.body_type is BodyType.TEXT
    with pytest.raises(MappingError, match="reserved word"):
        JmsMessage(properties={"AND": jint(1)})
    with pytest.raises(MappingError, match="six JMS body types"):
        JmsMessage(body="text")  # type: ignore[arg-type]
    with pytest.raises(MappingError, match="JmsHeaders"):
        JmsMessage(headers={})  # type: ignore[arg-type]


def test_bodies_and_their_payload_values():
    bodies = [NoBody(), TextBody(None), BytesBody(b"\x00"), MapBody(TypedMap()), StreamBody(()),
              ObjectBody(b"\xac\xed", "com.example.Thing")]
    assert [b.body_type.payload_value for b in bodies] == [
        "jms_none", "jms_text", "jms_bytes", "jms_map", "jms_stream", "jms_object"]
    assert [b.body_type.java_class for b in bodies] == [
        "Message", "TextMessage", "BytesMessage", "MapMessage", "StreamMessage", "ObjectMessage"]


def test_body_validation():
    with pytest.raises(MappingError):
        TextBody(b"x")  # type: ignore[arg-type]
    with pytest.raises(MappingError):
        BytesBody("x")  # type: ignore[arg-type]
    with pytest.raises(MappingError, match="empty"):
        MapBody(TypedMap([("", jint(1))]))
    with pytest.raises(MappingError):
        StreamBody((1,))  # type: ignore[arg-type]
    with pytest.raises(MappingError):
        ObjectBody("x")  # type: ignore[arg-type]
    with pytest.raises(MappingError, match="class name"):
        ObjectBody(None, "")
    assert MapBody({"k": jint(1)}).entries == TypedMap([("k", jint(1))])  # type: ignore[arg-type]
    assert StreamBody([jint(1)]).items == (jint(1),)  # type: ignore[arg-type]
