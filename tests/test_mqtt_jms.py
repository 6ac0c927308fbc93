"""MQTT <-> JMS (amlen-mqtt-jms-conversion.txt) and SwiftMQ's informational BytesMessage properties."""
from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mappings.conversions.mqtt_jms import (
    ConvertMessageType,
    InfoPropertyNames,
    format_timestamp,
    is_text_payload,
    jms_to_mqtt,
    mqtt_to_jms,
    parse_timestamp,
)
from mappings.errors import MappingError
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
    is_jms_identifier,
    jboolean,
    jbytes,
    jchar,
    jdouble,
    jfloat,
    jint,
    jlong,
    jstring,
)
from mappings.mqtt.publication import MqttPublication
from mappings.report import Change
from tests.test_jms_bodies import WMB_MAP as SEED_MAP
from tests.test_jms_bodies import WMB_STREAM as SEED_STREAM


def findings(report):
    return [(f.change, f.name) for f in report.findings]


# ------------------------------------------------------------------ the auto rule, byte by byte


def reference_is_text(data: bytes) -> bool:
    """An independent reading of the rule: RFC 3629 Table 3 well-formed sequences, then the control test."""
    i, n = 0, len(data)
    while i < n:
        b = data[i]
        if b < 0x80:
            if b < 0x20 and b not in (0x09, 0x0A, 0x0D):
                return False
            i += 1
            continue
        if 0xC2 <= b <= 0xDF:
            ranges = [(0x80, 0xBF)]
        elif b == 0xE0:
            ranges = [(0xA0, 0xBF), (0x80, 0xBF)]
        elif 0xE1 <= b <= 0xEC or 0xEE <= b <= 0xEF:
            ranges = [(0x80, 0xBF)] * 2
        elif b == 0xED:
            ranges = [(0x80, 0x9F), (0x80, 0xBF)]
        elif b == 0xF0:
            ranges = [(0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF)]
        elif 0xF1 <= b <= 0xF3:
            ranges = [(0x80, 0xBF)] * 3
        elif b == 0xF4:
            ranges = [(0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF)]
        else:
            return False
        for k, (lo, hi) in enumerate(ranges, start=1):
            if i + k >= n or not lo <= data[i + k] <= hi:
                return False
        i += 1 + len(ranges)
    return True


@pytest.mark.parametrize(
    ("payload", "text"),
    [
        (b"", True),                          # empty: a valid (empty) UTF-8 string
        (b"hello world", True),
        (b"tab\there\r\nnew line", True),     # HT, CR, LF are the allowed controls
        (b"\x7f", True),                      # DEL is not < 0x20
        ("\u0085".encode(), True),            # C1 control U+0085 is C2 85: no byte < 0x20
        ("h\u00e9llo \u20ac \U0001F600".encode(), True),
        (b"\xef\xbb\xbfBOM", True),
        (b"\xef\xbf\xbf", True),              # U+FFFF: a noncharacter, still valid UTF-8
        (b"\xf4\x8f\xbf\xbf", True),          # U+10FFFF, the last code point
        (b"\x00", False),                     # NUL is valid UTF-8 but a control byte
        (b"a\x01b", False),
        (b"\x0b", False), (b"\x0c", False), (b"\x1b[0m", False), (b"\x1f", False),
        (b"\xc0\x80", False),                 # overlong NUL
        (b"\xc1\xbf", False),                 # overlong 2-byte
        (b"\xe0\x80\xaf", False),             # overlong 3-byte '/'
        (b"\xf0\x80\x80\xaf", False),         # overlong 4-byte
        (b"\xed\xa0\x80", False),             # UTF-16 surrogate D800
        (b"\xed\xbf\xbf", False),             # surrogate DFFF
        (b"\xed\xa0\xbd\xed\xb8\x80", False), # CESU-8 surrogate pair
        (b"\xf4\x90\x80\x80", False),         # U+110000
        (b"\xf5\x80\x80\x80", False), (b"\xff", False), (b"\xfe", False),
        (b"\xe2\x82", False),                 # truncated euro sign
        (b"abc\xf0\x9f\x98", False),          # truncated emoji at the end
        (b"\x80", False),                     # lone continuation byte
        (b"\xc3(", False),                    # bad continuation
    ],
)
def test_auto_rule(payload, text):
    assert is_text_payload(payload) is text
    assert reference_is_text(payload) is text
    msg, _ = mqtt_to_jms(MqttPublication("t", payload))
    assert msg.body == (TextBody(payload.decode()) if text else BytesBody(payload))


@given(st.binary(max_size=40))
def test_auto_rule_matches_the_reference_reading(data):
    assert is_text_payload(data) is reference_is_text(data)


@given(st.text(max_size=40).filter(lambda s: all(ord(c) >= 0x20 or c in "\t\r\n" for c in s)))
def test_any_control_free_text_is_a_text_message(text):
    msg, report = mqtt_to_jms(MqttPublication("t", text.encode()))
    assert msg.body == TextBody(text) and not report


def test_convert_text_accepts_controls_and_falls_back_to_bytes_for_invalid_utf8():
    msg, report = mqtt_to_jms(MqttPublication("t", b"a\x00b"), convert="text")
    assert msg.body == TextBody("a\x00b") and not report
    msg, report = mqtt_to_jms(MqttPublication("t", b"\xc0\x80"), convert=ConvertMessageType.TEXT)
    assert msg.body == BytesBody(b"\xc0\x80")
    assert findings(report) == [(Change.COERCED, "payload")]
    assert "not valid UTF-8" in report.findings[0].detail


def test_convert_bytes_always_gives_bytes():
    msg, _ = mqtt_to_jms(MqttPublication("t", b"plain text"), convert="bytes")
    assert msg.body == BytesBody(b"plain text")


def test_payload_format_indicator():
    msg, report = mqtt_to_jms(MqttPublication("t", b"a\x01b", payload_format_indicator=1))
    assert msg.body == TextBody("a\x01b") and not report
    msg, report = mqtt_to_jms(MqttPublication("t", b"\xff", payload_format_indicator=1))
    assert msg.body == BytesBody(b"\xff") and findings(report) == [(Change.COERCED, "payload")]
    msg, _ = mqtt_to_jms(MqttPublication("t", b"a\x01b", payload_format_indicator=0))
    assert msg.body == BytesBody(b"a\x01b")  # 0 is "as if absent": the content rule applies
    msg, _ = mqtt_to_jms(MqttPublication("t", b"text", payload_format_indicator=0))
    assert msg.body == TextBody("text")
    msg, _ = mqtt_to_jms(MqttPublication("t", b"text", payload_format_indicator=1), convert="bytes")
    assert msg.body == BytesBody(b"text")


def test_bad_convert_type_and_topic():
    with pytest.raises(MappingError) as info:
        mqtt_to_jms(MqttPublication("t"), convert="json")
    assert info.value.field == "ConvertMessageType"
    with pytest.raises(MappingError) as info:
        mqtt_to_jms(MqttPublication(""))
    assert info.value.field == "topic"


# ------------------------------------------------------------------ MQTT -> JMS headers and properties


def test_headers_from_an_mqtt5_publication():
    pub = MqttPublication(
        "sensors/t1", b"21.5", qos=1, client_id="dev1", username="alice", content_type="text/plain",
        response_topic="replies/dev1", correlation_data=b"req-9", message_expiry_interval=60,
        user_properties=(("JMSMessageID", "ID:abc"), ("JMSTimestamp", "2023-11-14T22:13:20.120Z")),
    )
    msg, report = mqtt_to_jms(pub, now_ms=1700000001000)
    assert msg.headers == JmsHeaders(
        destination=Destination.topic("sensors/t1"), delivery_mode=DeliveryMode.PERSISTENT,
        expiration=1700000061000, timestamp=1700000000120, message_id="ID:abc", correlation_id="req-9",
        reply_to=Destination.topic("replies/dev1"), type="text/plain",
    )
    assert msg.properties == TypedMap([("JMSXUserID", jstring("alice")), ("JMS_SWIFTMQ_CID", jstring("dev1")),
                                       ("JMS_SWIFTMQ_MQTT_PUBQOS", jint(1))])
    assert not report


def test_qos_zero_is_non_persistent_and_clock_fills_timestamp():
    msg, _ = mqtt_to_jms(MqttPublication("t", qos=0), now_ms=5000)
    assert msg.headers.delivery_mode is DeliveryMode.NON_PERSISTENT and msg.headers.timestamp == 5000
    msg, _ = mqtt_to_jms(MqttPublication("t", qos=2))
    assert msg.headers.delivery_mode is DeliveryMode.PERSISTENT and msg.headers.timestamp == 0


def test_user_property_rules():
    pub = MqttPublication("t", user_properties=(
        ("colour", "red"), ("a-b", "x"), ("1st", "x"), ("NULL", "x"), ("between", "x"), ("JMSType", "x"),
        ("JMS_IBM_Format", "x"), ("JMSXGroupID", "g1"), ("colour", "blue"), ("size", "L"),
        ("colour", "green"),
        ("", "x"), ("$cost", "5"),
    ))
    msg, report = mqtt_to_jms(pub, info=None)
    assert msg.properties == TypedMap([("colour", jstring("green")), ("JMSXGroupID", jstring("g1")),
                                       ("size", jstring("L")), ("$cost", jstring("5"))])
    assert findings(report) == [
        (Change.DROPPED, "a-b"), (Change.DROPPED, "1st"), (Change.DROPPED, "NULL"),
        (Change.DROPPED, "between"),
        (Change.DROPPED, "JMSType"), (Change.DROPPED, "JMS_IBM_Format"),
        (Change.DROPPED, "colour"), (Change.DROPPED, "colour"), (Change.DROPPED, ""),
    ]
    assert "last wins" in report.findings[6].detail
    assert "reserved" in report.findings[4].detail


def test_duplicate_header_user_properties_last_wins():
    pub = MqttPublication("t", user_properties=(("JMSMessageID", "ID:1"), ("JMSMessageID", "ID:2")))
    msg, report = mqtt_to_jms(pub, info=None)
    assert msg.headers.message_id == "ID:2" and findings(report) == [(Change.DROPPED, "JMSMessageID")]


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("2023-11-14T22:13:20.120Z", 1700000000120),
        ("2023-11-14T22:13:20Z", 1700000000000),
        ("2023-11-14T23:13:20.120+01:00", 1700000000120),
        ("2023-11-14T23:43:20.120+0130", 1700000000120),
        ("2023-11-14T17:13:20.1-05:00", 1700000000100),
        ("2023-11-14t22:13:20.120z", 1700000000120),
        ("1970-01-01T00:00:00.000Z", 0),
        ("1969-12-31T23:59:59.999Z", -1),
    ],
)
def test_timestamp_input_forms(text, ms):
    assert parse_timestamp(text) == (ms, False)
    msg, report = mqtt_to_jms(MqttPublication("t", user_properties=(("JMSTimestamp", text),)), info=None)
    assert msg.headers.timestamp == ms and not report


def test_timestamp_beyond_milliseconds_is_truncated_and_reported():
    assert parse_timestamp("2023-11-14T22:13:20.123456789Z") == (1700000000123, True)
    assert parse_timestamp("2023-11-14T22:13:20.123000Z") == (1700000000123, False)
    pub = MqttPublication("t", user_properties=(("JMSTimestamp", "2023-11-14T22:13:20.1239Z"),))
    _, report = mqtt_to_jms(pub)
    assert findings(report) == [(Change.TRUNCATED, "JMSTimestamp")]


@pytest.mark.parametrize(
    "text",
    ["2023-11-14", "2023-11-14 22:13:20Z", "2023-11-14T22:13:20", "2023-13-14T22:13:20Z",
     "2023-02-30T00:00:00Z", "2023-11-14T24:00:00Z", "2023-11-14T22:13:60Z", "2023-11-14T22:13:20+25:00",
     "2023-11-14T22:13:20+01:60", "2023-11-14T22:13:20.Z", "20231114T221320Z", "+2023-11-14T22:13:20Z",
     "２０２３-11-14T22:13:20Z"],
)
def test_bad_timestamps(text):
    with pytest.raises(MappingError) as info:
        parse_timestamp(text)
    assert info.value.structure == "JMSTimestamp"
    msg, report = mqtt_to_jms(MqttPublication("t", user_properties=(("JMSTimestamp", text),)), now_ms=7)
    assert msg.headers.timestamp == 7 and findings(report) == [(Change.DROPPED, "JMSTimestamp")]


def test_timestamp_output_form():
    assert format_timestamp(1700000000120) == "2023-11-14T22:13:20.120Z"
    assert format_timestamp(0) == "1970-01-01T00:00:00.000Z"
    assert format_timestamp(-1) == "1969-12-31T23:59:59.999Z"
    with pytest.raises(MappingError):
        format_timestamp(2**62)


@given(st.integers(-62135596800000, 253402300799999))
def test_timestamp_round_trip(ms):
    assert parse_timestamp(format_timestamp(ms)) == (ms, False)


def test_correlation_data_and_response_topic_forms():
    msg, report = mqtt_to_jms(MqttPublication("t", correlation_data=b"\x00\xff", response_topic="queue://QM1/R"))
    assert msg.headers.correlation_id == b"\x00\xff"
    assert findings(report) == [(Change.COERCED, "correlation data")]
    assert msg.headers.reply_to == Destination.queue("R", "QM1")
    msg, _ = mqtt_to_jms(MqttPublication("t", response_topic="topic://x/y"))
    assert msg.headers.reply_to == Destination.topic("x/y")
    msg, _ = mqtt_to_jms(MqttPublication("t", response_topic="queue://nope"))
    assert msg.headers.reply_to == Destination.topic("queue://nope")


def test_empty_response_topic_is_dropped():
    msg, report = mqtt_to_jms(MqttPublication("t", response_topic=""))
    assert msg.headers.reply_to is None and findings(report) == [(Change.DROPPED, "response topic")]


def test_expiry_without_a_clock_and_retain_are_reported():
    msg, report = mqtt_to_jms(MqttPublication("t", retain=True, message_expiry_interval=5))
    assert msg.headers.expiration == 0
    assert findings(report) == [(Change.DROPPED, "message expiry interval"), (Change.DROPPED, "retain")]


# ------------------------------------------------------------------ SwiftMQ informational properties


def test_swiftmq_properties_on_a_bytes_message():
    msg, _ = mqtt_to_jms(MqttPublication("t", b"\x00\x01", qos=2, client_id="c1", username="u1"))
    assert msg.body == BytesBody(b"\x00\x01")
    assert msg.properties == TypedMap([("JMSXUserID", jstring("u1")), ("JMS_SWIFTMQ_CID", jstring("c1")),
                                       ("JMS_SWIFTMQ_MQTT_PUBQOS", jint(2))])


def test_info_property_names_are_configurable_and_optional():
    names = InfoPropertyNames(user_id=None, client_id="ClientId", qos="PubQos")
    msg, _ = mqtt_to_jms(MqttPublication("t", qos=1, client_id="c1", username="u1"), info=names)
    assert msg.properties == TypedMap([("ClientId", jstring("c1")), ("PubQos", jint(1))])
    msg, _ = mqtt_to_jms(MqttPublication("t", qos=1), info=None)
    assert len(msg.properties) == 0
    msg, _ = mqtt_to_jms(MqttPublication("t", qos=0))  # no user name, no client id: only the QoS
    assert msg.properties == TypedMap([("JMS_SWIFTMQ_MQTT_PUBQOS", jint(0))])


def test_info_property_wins_over_a_user_property():
    pub = MqttPublication("t", username="real", user_properties=(("JMSXUserID", "forged"),))
    msg, report = mqtt_to_jms(pub)
    assert msg.properties["JMSXUserID"] == jstring("real")
    assert findings(report) == [(Change.DROPPED, "JMSXUserID")]


@pytest.mark.parametrize("kwargs", [{"qos": "bad-name"}, {"client_id": "AND"}, {"user_id": "X", "qos": "X"}])
def test_bad_info_property_names(kwargs):
    with pytest.raises(MappingError) as info:
        InfoPropertyNames(**kwargs)
    assert info.value.structure == "InfoPropertyNames"


# ------------------------------------------------------------------ JMS -> MQTT bodies


@pytest.mark.parametrize(
    ("body", "payload", "pfi"),
    [
        (NoBody(), b"", None),
        (BytesBody(b"\x00\xff"), b"\x00\xff", None),
        (TextBody("h\u00e9"), "h\u00e9".encode(), 1),
        (TextBody(None), b"", 1),
        (ObjectBody(b"\xac\xed\x00\x05t\x00\x01x", "java.lang.String"), b"\xac\xed\x00\x05t\x00\x01x", None),
        (ObjectBody(None), b"", None),
        (MapBody(TypedMap([("b", jint(1)), ("a", jdouble(math.nan))])), b'{"b":1,"a":"NaN"}', 1),
        (StreamBody((jchar("A"), jbytes(b"\x00"))), b'["A","AA=="]', 1),
    ],
)
def test_bodies_to_mqtt(body, payload, pfi):
    pub, _ = jms_to_mqtt(JmsMessage(JmsHeaders(destination=Destination.topic("a/b")), body=body))
    assert (pub.topic, pub.payload, pub.payload_format_indicator) == ("a/b", payload, pfi)


def test_seed_map_and_stream_reach_mqtt_as_json():
    from mappings.jms.bodies import decode_map, decode_stream

    pub, _ = jms_to_mqtt(JmsMessage(body=decode_map(SEED_MAP)), topic="m")
    assert list(json.loads(pub.payload))[:2] == ["Item_8_of_10_Char", "Item_5_of_10_Double"]
    pub, _ = jms_to_mqtt(JmsMessage(body=decode_stream(SEED_STREAM)), topic="s")
    assert json.loads(pub.payload)[0] == "P2P Stream Message Number :7"


def test_topic_comes_from_the_destination_or_the_caller():
    pub, _ = jms_to_mqtt(JmsMessage(JmsHeaders(destination=Destination.queue("Q1", "QM"))))
    assert pub.topic == "Q1"
    pub, _ = jms_to_mqtt(JmsMessage(JmsHeaders(destination=Destination.queue("Q1"))), topic="x/y")
    assert pub.topic == "x/y"
    with pytest.raises(MappingError) as info:
        jms_to_mqtt(JmsMessage())
    assert info.value.field == "JMSDestination"
    with pytest.raises(MappingError) as info:
        jms_to_mqtt(JmsMessage(), topic="a\x00b")
    assert info.value.field == "topic"


def test_text_that_utf8_cannot_carry_is_an_error():
    with pytest.raises(MappingError, match="surrogate"):
        jms_to_mqtt(JmsMessage(body=TextBody("\ud800")), topic="t")


# ------------------------------------------------------------------ JMS -> MQTT properties and headers


def test_typed_properties_become_strings():
    props = TypedMap([
        ("flag", jboolean(True)), ("b", JavaValue(JavaType.BYTE, -8)), ("s", JavaValue(JavaType.SHORT, 300)),
        ("i", jint(999)), ("l", jlong(2**63 - 1)), ("f", jfloat(2.24)), ("d", jdouble(1e16)),
        ("nan", jdouble(math.nan)), ("inf", jfloat(-math.inf)), ("c", jchar("A")), ("text", jstring("x")),
        ("utf8", jbytes("é".encode())), ("binary", jbytes(b"\xff")), ("nul", jstring("a\x00")),
        ("none", jstring(None)), ("surrogate", jchar("\udc00")),
    ])
    pub, report = jms_to_mqtt(JmsMessage(properties=props), topic="t", info=None)
    assert pub.user_properties == (
        ("flag", "true"), ("b", "-8"), ("s", "300"), ("i", "999"), ("l", "9223372036854775807"),
        ("f", "2.24"),
        ("d", "1e+16"), ("nan", "NaN"), ("inf", "-Infinity"), ("c", "A"), ("text", "x"), ("utf8", "é"),
    )
    assert findings(report) == [
        (Change.COERCED, "flag"), (Change.COERCED, "b"), (Change.COERCED, "s"), (Change.COERCED, "i"),
        (Change.COERCED, "l"), (Change.COERCED, "f"), (Change.COERCED, "d"), (Change.COERCED, "nan"),
        (Change.COERCED, "inf"), (Change.COERCED, "c"), (Change.COERCED, "utf8"),
        (Change.DROPPED, "binary"), (Change.DROPPED, "nul"), (Change.DROPPED, "none"),
        (Change.COERCED, "surrogate"), (Change.DROPPED, "surrogate"),
    ]


def test_headers_to_mqtt():
    headers = JmsHeaders(
        destination=Destination.topic("a"), message_id="ID:414d51", timestamp=1700000000120,
        correlation_id="corr", reply_to=Destination.queue("R", "QM1"), type="application/json",
        expiration=1700000010500, priority=9, redelivered=True,
    )
    pub, report = jms_to_mqtt(JmsMessage(headers, TypedMap([("k", jstring("v"))])), now_ms=1700000000000)
    assert pub.user_properties == (("JMSMessageID", "ID:414d51"),
                                   ("JMSTimestamp", "2023-11-14T22:13:20.120Z"),
                                   ("k", "v"))
    assert (pub.content_type, pub.response_topic, pub.correlation_data) == ("application/json",
                                                                           "queue://QM1/R", b"corr")
    assert pub.message_expiry_interval == 11 and pub.qos == 2
    assert findings(report) == [(Change.DROPPED, "JMSPriority"), (Change.DROPPED, "JMSRedelivered")]


def test_expiry_edge_cases():
    expired = JmsMessage(JmsHeaders(expiration=1000))
    pub, report = jms_to_mqtt(expired, topic="t", now_ms=5000)
    assert pub.message_expiry_interval == 0 and findings(report) == [(Change.TRUNCATED, "JMSExpiration")]
    pub, report = jms_to_mqtt(expired, topic="t")
    assert pub.message_expiry_interval is None and findings(report) == [(Change.DROPPED, "JMSExpiration")]


def test_bytes_correlation_id_and_topic_reply_to():
    headers = JmsHeaders(correlation_id=b"\x01\x02", reply_to=Destination.topic("r/1"))
    pub, _ = jms_to_mqtt(JmsMessage(headers), topic="t")
    assert pub.correlation_data == b"\x01\x02" and pub.response_topic == "r/1"


def test_qos_choice():
    persistent = JmsMessage(JmsHeaders(delivery_mode=DeliveryMode.PERSISTENT))
    non_persistent = JmsMessage(JmsHeaders(delivery_mode=DeliveryMode.NON_PERSISTENT))
    assert jms_to_mqtt(persistent, topic="t")[0].qos == 2
    assert jms_to_mqtt(non_persistent, topic="t")[0].qos == 0
    assert jms_to_mqtt(persistent, topic="t", qos=1)[0].qos == 1
    with pytest.raises(MappingError):
        jms_to_mqtt(persistent, topic="t", qos=3)
    with_pubqos = JmsMessage(properties={"JMS_SWIFTMQ_MQTT_PUBQOS": jint(1)})
    pub, report = jms_to_mqtt(with_pubqos, topic="t")
    assert pub.qos == 1 and pub.user_properties == () and not report
    as_string = JmsMessage(properties={"JMS_SWIFTMQ_MQTT_PUBQOS": jstring("0")})
    assert jms_to_mqtt(as_string, topic="t")[0].qos == 0
    bad = JmsMessage(properties={"JMS_SWIFTMQ_MQTT_PUBQOS": jint(7)})
    pub, report = jms_to_mqtt(bad, topic="t")
    assert pub.qos == 2 and findings(report) == [(Change.DROPPED, "JMS_SWIFTMQ_MQTT_PUBQOS")]


def test_out_of_range_timestamp_is_dropped():
    pub, report = jms_to_mqtt(JmsMessage(JmsHeaders(timestamp=2**62)), topic="t")
    assert pub.user_properties == () and findings(report) == [(Change.DROPPED, "JMSTimestamp")]


# ------------------------------------------------------------------ round trips

mqtt_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=20)
user_names = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,8}", fullmatch=True).filter(
    lambda n: is_jms_identifier(n) and not n.startswith("JMS"))


@given(
    topic=mqtt_text.filter(bool),
    payload=st.binary(max_size=30) | mqtt_text.map(str.encode),
    qos=st.integers(0, 2),
    client_id=st.none() | mqtt_text,
    username=st.none() | mqtt_text,
    content_type=st.none() | mqtt_text,
    # a Response Topic is a topic name (MQTT 5 §3.3.2.3.5): no wildcards, which the JMS -> MQTT rule drops
    response_topic=st.none() | mqtt_text.filter(
        lambda t: t and "+" not in t and "#" not in t and not t.lower().startswith(("queue://", "topic://"))),
    correlation=st.none() | mqtt_text.map(str.encode),
    props=st.lists(st.tuples(user_names, mqtt_text), max_size=5, unique_by=lambda kv: kv[0]),
    message_id=st.none() | mqtt_text,
)
def test_mqtt_jms_mqtt_round_trip(topic, payload, qos, client_id, username, content_type, response_topic,
                                  correlation, props, message_id):
    header_props = () if message_id is None else (("JMSMessageID", message_id),)
    pub = MqttPublication(topic, payload, qos, client_id=client_id, username=username,
                          content_type=content_type,
                          response_topic=response_topic, correlation_data=correlation,
                          user_properties=header_props + tuple(props))
    msg, report = mqtt_to_jms(pub)
    assert not report
    back, report = jms_to_mqtt(msg)
    assert not report
    expected_pfi = 1 if is_text_payload(payload) else None
    assert back == MqttPublication(topic, payload, qos, client_id=client_id, username=username,
                                   payload_format_indicator=expected_pfi, content_type=content_type,
                                   response_topic=response_topic, correlation_data=correlation,
                                   user_properties=header_props + tuple(props))


@given(
    text=st.none() | mqtt_text,
    props=st.lists(st.tuples(user_names, mqtt_text), max_size=5, unique_by=lambda kv: kv[0]),
    persistent=st.booleans(),
    timestamp=st.integers(1, 253402300799999),
    message_id=st.none() | mqtt_text,
    correlation=st.none() | mqtt_text,
    # a Response Topic holds no wildcard (test_jms_to_mqtt_creates_no_reserved_jms_names_and_no_wildcard_...)
    reply=st.none() | mqtt_text.filter(lambda t: t and "+" not in t and "#" not in t).map(Destination.topic),
)
def test_jms_mqtt_jms_round_trip_for_what_mqtt_can_carry(text, props, persistent, timestamp, message_id,
                                                         correlation, reply):
    msg = JmsMessage(
        JmsHeaders(destination=Destination.topic("a/b"),
                   delivery_mode=DeliveryMode.PERSISTENT if persistent else DeliveryMode.NON_PERSISTENT,
                   timestamp=timestamp, message_id=message_id, correlation_id=correlation, reply_to=reply),
        TypedMap([(k, jstring(v)) for k, v in props]),
        TextBody(text),
    )
    pub, _ = jms_to_mqtt(msg, info=None)
    back, _ = mqtt_to_jms(pub, convert="text", info=None)
    assert back == JmsMessage(msg.headers, msg.properties, TextBody(text or ""))


def test_jms_to_mqtt_creates_no_reserved_jms_names_and_no_wildcard_response_topic():
    """Amlen: "JMS user properties must start with JMSX and cannot start with JMS"; and a Response Topic
    may not hold a wildcard (MQTT 5 §3.3.2.3.5): both dropped with a finding."""
    props = TypedMap([("JMSFoo", JavaValue(JavaType.STRING, "a")), ("JMS_IBM_Retain", JavaValue(JavaType.INT, 1)),
                      ("JMSXGroupID", JavaValue(JavaType.STRING, "g")), ("plain", JavaValue(JavaType.STRING, "v"))],
                     what="property")
    for reply in ("reply/+/x", "reply/#"):
        msg = JmsMessage(JmsHeaders(reply_to=Destination.topic(reply)), props, TextBody("x"))
        pub, report = jms_to_mqtt(msg, topic="t", info=None)
        assert pub.user_properties == (("JMSXGroupID", "g"), ("plain", "v")) and pub.response_topic is None
        assert {(f.change, f.name) for f in report.findings} == {
            (Change.DROPPED, "JMSFoo"), (Change.DROPPED, "JMS_IBM_Retain"), (Change.DROPPED, "JMSReplyTo")}
    pub, _ = jms_to_mqtt(JmsMessage(JmsHeaders(reply_to=Destination.topic("reply/x")), body=TextBody("x")),
                         topic="t", info=None)
    assert pub.response_topic == "reply/x"
