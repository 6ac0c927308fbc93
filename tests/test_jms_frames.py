# Tests the JMS connector's frame rules, pure (mappings.stomp.frames, mappings.stomp.xstream): JMS model <->
# STOMP frame, what a frame cannot carry, and that no frame a provider sends makes the source raise.
from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.connectors.base import Inbound
from bridge.routing.convert import backout_message
from mappings.jms.model import (
    BytesBody,
    DeliveryMode,
    Destination,
    JmsHeaders,
    JmsMessage,
    MapBody,
    NoBody,
    ObjectBody,
    StreamBody,
    TextBody,
    TypedMap,
    jboolean,
    jbytes,
    jchar,
    jdouble,
    jfloat,
    jint,
    jlong,
    jstring,
)
from mappings.report import Change, ConversionReport
from mappings.stomp.frames import (
    BODY_TYPE_PROPERTY,
    backout_to_jms,
    destination_from_stomp,
    frame_to_jms,
    jms_to_frame,
    redelivery_count,
    stomp_destination,
)
from mappings.stomp.text import decode_modified_utf8, encode_modified_utf8
from mappings.stomp.xstream import map_body_to_xstream_xml, xstream_map_entries


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


def test_text_is_written_in_modified_utf8_and_read_back() -> None:
    """ActiveMQ's TextMessage reader takes Java's modified UTF-8 (docs/stomp-facts.md §10): NUL as C0 80
    (so no content-length, and no amq-msg-type property), a character above U+FFFF as two 3-byte
    surrogates. Nothing is lost, so nothing is reported."""
    report = ConversionReport()
    frame = jms_to_frame(JmsMessage(body=TextBody("a\x00b\U0001f600c")), "q", report)
    assert not frame.content_length and "amq-msg-type" not in frame.headers
    assert frame.body == b"a\xc0\x80b\xed\xa0\xbd\xed\xb8\x80c" and report.findings == []
    back = ConversionReport()
    assert frame_to_jms({}, frame.body, back).body == TextBody("a\x00b\U0001f600c") and back.findings == []
    # standard UTF-8 from another writer reads the same
    assert frame_to_jms({}, "a\U0001f600".encode()).body == TextBody("a\U0001f600")


def test_modified_utf8_round_trips_any_text_and_names_a_bad_byte() -> None:
    for text in ["", "plain", "\x00", "\U00010000\U0010ffff", "é\u4e2d\U0001f600\x00x", "\ud7ff\ue000\uffff"]:
        assert decode_modified_utf8(encode_modified_utf8(text)) == text
        assert decode_modified_utf8(text.encode("utf-8")) == text
    try:
        decode_modified_utf8(b"ok\xed\xa0\xbdx")        # a high surrogate alone
    except UnicodeDecodeError as exc:
        assert exc.start == 2
    else:
        raise AssertionError("an unpaired surrogate was read")
    report = ConversionReport()
    assert frame_to_jms({}, b"ok\xed\xa0\xbdx", report).body == TextBody("ok\ufffdx")
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
    frame = jms_to_frame(JmsMessage(body=body), "q", report, map_byte_arrays=True)
    assert frame.headers["transformation"] == "jms-map-xml" and not frame.content_length
    assert frame.body.decode() == (
        "<map><entry><string>s</string><string>5</string></entry><entry><string>i</string><int>1</int></entry>"
        "<entry><string>f</string><float>0.5</float></entry><entry><string>d</string><double>Infinity</double>"
        "</entry><entry><string>b</string><byte-array>AQI=</byte-array></entry><entry><string>c</string>"
        "<char></char></entry><entry><string>t</string><boolean>false</boolean></entry><entry><string>x</string>"
        "<string>a&lt;&amp;&gt;&#xd;&#x1;</string></entry><entry><string>n</string><null/></entry>"
        "<entry><string>null</string><long>-5</long></entry></map>")
    assert names(report, Change.DROPPED) == []      # a null value is <null/>, as ActiveMQ writes it
    # the reader of what the broker sends back understands the same form
    assert xstream_map_entries(frame.body.decode(), ConversionReport()) == body.entries
    assert map_body_to_xstream_xml(MapBody(), ConversionReport()) == "<map></map>"


def test_map_byte_arrays_go_as_base64_strings_unless_the_connector_says_native() -> None:
    """ActiveMQ's XStream refuses <byte-array> under its default SERIALIZABLE_PACKAGES and then makes a
    TextMessage with transformation-error (docs/stomp-facts.md §11): by default the value is its base64
    String, reported."""
    report = ConversionReport()
    frame = jms_to_frame(JmsMessage(body=MapBody(TypedMap([("b", jbytes(b"\x01\x02"))]))), "q", report)
    assert frame.body == b"<map><entry><string>b</string><string>AQI=</string></entry></map>"
    assert names(report, Change.COERCED) == ["transformation", "map:b"]


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
                                ("f", jfloat(1e10)), ("ctl", jstring("a\x01b<&>&#x41;")), ("n", jstring(None)),
                                ("l", jlong(5))])
    assert names(report, Change.DROPPED) == []   # a null value is kept (before: "dropped map:n")


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


def test_a_transformation_error_from_the_provider_is_a_finding_not_a_property() -> None:
    """ActiveMQ marks a MESSAGE it could not transform (``transformation-error``) and sends what it could:
    the body is reported as coerced, and the marker is not taken for a property."""
    report = ConversionReport()
    msg = frame_to_jms({"destination": "/queue/q", "message-id": "ID:1", "transformation-error": "no xstream"},
                       b"<map/>", report)
    assert [(f.change, f.name) for f in report.findings] == [(Change.COERCED, "body")]
    assert "no xstream" in report.findings[0].detail and "transformation-error" not in msg.properties


def test_a_jms_message_backed_out_keeps_its_headers_and_properties() -> None:
    """On the backout queue as IBM MQ classes for JMS would put it (mcd, jms, usr folders), with the mqbridge
    folder beside them; and behind an MQDLH on a dead-letter queue."""
    from mappings.conversions.jms_mq import mq_bytes_to_jms
    from mappings.mq.message import decode_message

    jms = JmsMessage(JmsHeaders(correlation_id="c-1", type="order", priority=7),
                     TypedMap([("n", jint(7)), ("s", jstring("x"))], what="property"),
                     TextBody("hello"))
    item = Inbound(key="jms:ID:1", protocol="jms", message=jms, source_type="TextMessage", size=5,
                   destination="q", received=0.0)
    raw = backout_message(item, "r1", "conversion failed: why", now=1_700_000_000.0)
    back, _ = mq_bytes_to_jms(raw, now_ms=0)
    assert back.body == TextBody("hello") and back.headers.correlation_id == "c-1" and back.headers.type == "order"
    assert back.headers.priority == 7 and back.properties["n"] == jint(7)
    folder = decode_message(raw).rfh2_folder("mqbridge")
    assert folder is not None and ("Reason", "conversion failed: why") in [(e.name, e.value) for e in folder.elements]
    dead = decode_message(backout_message(item, "r1", "why", dead_letter=True, now=1_700_000_000.0))
    assert dead.md.format.strip() == "MQDEAD" and dead.rfh2_folder("usr") is not None
