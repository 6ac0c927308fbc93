"""MQTT 5 publication properties <-> IBM MQ message fields (mappings.conversions.mqtt5_mq, used by
mappings.conversions.mqtt_mq): the exact MQ side (MQMD fields, RFH2 Format and folders, consistent bytes),
round trips MQTT 5 -> MQ -> MQTT 5, every finding, and MQ-origin messages (IBM MQ JMS mapping, plain MQI)."""
from __future__ import annotations

import dataclasses
import math
import struct
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mappings.conversions.jms_mq import jms_to_mq_bytes
from mappings.conversions.mqtt_jms import format_timestamp
from mappings.conversions.mqtt_mq import MqToMqttOptions, MqttToMqEncoder, MqttToMqOptions, UserIdSource, mq_to_mqtt
from mappings.errors import MappingError
from mappings.jms.model import (
    RESERVED_WORDS,
    Destination,
    JmsHeaders,
    JmsMessage,
    TextBody,
    TypedMap,
    jboolean,
    jint,
    jstring,
)
from mappings.jms.typed_xml import xml_char_problem
from mappings.mq import constants as C
from mappings.mq.message import MqMessage, build_message, decode_message, encode_message
from mappings.mq.mqmd import Mqmd
from mappings.mq.rfh2 import Rfh2, RfhElement, RfhFolder
from mappings.mqtt.publication import MqttPublication
from mappings.report import ConversionReport

PUB = MqttPublication(topic="a/b", payload=b"hello", qos=1, packet_id=7, client_id="c1", username="alice")
NOW = 1_700_000_000_000     # 2023-11-14 22:13:20 GMT
MQLONG_MAX = 2**31 - 1
NO_CORREL = bytes(24)
_PROPERTY_FIELDS = ("payload_format_indicator", "content_type", "response_topic", "correlation_data",
                    "user_properties", "message_expiry_interval")


# ---- helpers --------------------------------------------------------------------------------------
def encode(pub: MqttPublication, options: MqttToMqOptions = MqttToMqOptions()
           ) -> tuple[MqMessage, ConversionReport, bytes]:
    """Encode, decode, and check the bytes are self-consistent (StrucLength, Format chain, folder lengths)."""
    data, report = MqttToMqEncoder(options).encode(pub)
    msg = decode_message(data)
    assert encode_message(msg) == data
    (rfh,) = msg.headers
    assert isinstance(rfh, Rfh2)
    order = C.integer_byte_order(msg.md.encoding)
    md_len = msg.md.length
    assert data[md_len:md_len + 4] == b"RFH "
    (struc_length,) = struct.unpack_from(order + "i", data, md_len + 8)
    assert struc_length == len(data) - md_len - len(pub.payload) and struc_length % 4 == 0
    assert msg.body == bytes(pub.payload)
    return msg, report, data


def plain(pub: MqttPublication) -> MqttPublication:
    """``pub`` without its MQTT 5 properties."""
    return dataclasses.replace(pub, payload_format_indicator=None, content_type=None, response_topic=None,
                               correlation_data=None, user_properties=(), message_expiry_interval=None)


def elements(msg: MqMessage, name: str) -> list[tuple[str, str | None, str | None]] | None:
    folder = msg.rfh2_folder(name)
    return None if folder is None else [(e.name, e.value, e.dt) for e in folder.elements]


def folder_names(msg: MqMessage) -> list[str]:
    return [f.name for f in msg.headers[0].folders]


def changes(report: ConversionReport) -> list[tuple[str, str]]:
    return [(f.change.value, f.name) for f in report.findings]


def back(msg: MqMessage, **kw: object) -> tuple[MqttPublication, ConversionReport]:
    """MQ -> MQTT; the encoder leaves MsgId MQMI_NONE (the queue manager assigns one), so packet id 1."""
    return mq_to_mqtt(msg, packet_id_allocator=lambda: 1, **kw)  # type: ignore[arg-type]


def back_changes(report: ConversionReport) -> list[tuple[str, str]]:
    """The findings of MQ -> MQTT besides the allocated packet id."""
    return [c for c in changes(report) if c != ("defaulted", "packet id")]


def props(**kw: object) -> MqttPublication:
    return dataclasses.replace(PUB, **kw)


# ---- user properties -> usr -----------------------------------------------------------------------
def test_user_properties_go_to_usr_in_order_duplicates_last_wins():
    msg, report, _ = encode(props(user_properties=(("k", "v"), ("m", "1"), ("k", "w"))))
    assert folder_names(msg) == ["mqtt", "mqps", "usr"]
    assert elements(msg, "usr") == [("k", "w", None), ("m", "1", None)]   # k keeps its first position
    assert changes(report) == [("dropped", "k")]
    assert msg.headers[0].format == C.MQFMT_NONE
    assert msg.md == decode_message(MqttToMqEncoder().encode(PUB)[0]).md   # no MQMD field from user properties
    pub, report = back(msg)
    assert pub.user_properties == (("k", "w"), ("m", "1")) and back_changes(report) == []


@pytest.mark.parametrize("name", [
    "a b",          # not a Java identifier
    "1abc",         # not a Java identifier
    "AND",          # a JMS selector keyword
    "JMSFoo",       # JMS prefix (Amlen: only JMSX may come from MQTT)
    "JMSXFoo",      # JMSX: a JMS name, but the usr folder takes no "JMS" prefix at all
    "JMSXUserID",
    "caf\u00e9",    # a Java identifier, not an ASCII XML name
    "",
])
def test_user_property_names_the_usr_folder_cannot_carry_are_dropped(name):
    msg, report, _ = encode(props(user_properties=(("ok", "1"), (name, "x"))))
    assert elements(msg, "usr") == [("ok", "1", None)]
    assert changes(report) == [("dropped", name)]
    pub, _ = back(msg)
    assert pub.user_properties == (("ok", "1"),)


def test_only_dropped_user_properties_write_no_usr_folder():
    msg, report, _ = encode(props(user_properties=(("JMSXFoo", "x"),)))
    assert "usr" not in folder_names(msg) and changes(report) == [("dropped", "JMSXFoo")]


def test_jms_message_id_and_timestamp_user_properties_go_to_the_mqmd():
    raw = bytes(range(24))
    stamp = datetime(2023, 11, 14, 22, 13, 20, 120_000, tzinfo=UTC)
    ms = int(stamp.timestamp() * 1000)
    pub = props(user_properties=(("JMSMessageID", "ID:" + raw.hex()), ("JMSTimestamp", "2023-11-14T22:13:20.120Z"),
                                 ("x", "1")))
    msg, report, _ = encode(pub)
    assert msg.md.msg_id == raw
    assert (msg.md.put_date, msg.md.put_time) == ("20231114", "22132012")   # GMT, hundredths
    assert elements(msg, "jms") == [("Tms", str(ms), None)]
    assert elements(msg, "usr") == [("x", "1", None)]                      # neither is a usr property
    assert report.findings == []
    back_pub, back_report = back(msg, options=MqToMqttOptions(fallback_topic="t"))   # and they come back, first
    assert back_pub.user_properties == pub.user_properties
    assert not {name for change, name in back_changes(back_report) if change == "dropped"} & {
        "MQMD.MsgId", "MQMD.PutDate", "MQMD.PutTime", "jms/Tms"}


@pytest.mark.parametrize("value", ["not-an-id", "ID:" + "ab" * 23 + "a", "ID:" + "zz" * 24])
def test_jms_message_id_not_in_id_form_is_dropped(value):
    msg, report, _ = encode(props(user_properties=(("JMSMessageID", value),)))
    assert msg.md.msg_id == C.MQMI_NONE and msg.rfh2_folder("usr") is None
    assert changes(report) == [("dropped", "JMSMessageID")]


def test_invalid_jms_timestamp_is_dropped():
    msg, report, _ = encode(props(user_properties=(("JMSTimestamp", "yesterday"),)))
    assert (msg.md.put_date, msg.md.put_time) == ("", "") and msg.rfh2_folder("jms") is None
    assert changes(report) == [("dropped", "JMSTimestamp")]


# ---- Content Type -> mcd --------------------------------------------------------------------------
def test_content_type_goes_to_mcd_type_of_a_bytes_message():
    msg, report, _ = encode(props(content_type="application/json", payload=b"\x00\x01"))
    assert folder_names(msg) == ["mqtt", "mqps", "mcd"]
    assert elements(msg, "mcd") == [("Msd", "jms_bytes", None), ("Type", "application/json", None)]
    assert msg.headers[0].format == C.MQFMT_NONE and report.findings == []
    pub, report = back(msg)
    assert pub.content_type == "application/json" and pub.payload_format_indicator is None
    assert back_changes(report) == []


def test_content_type_of_a_text_message():
    msg, report, _ = encode(props(content_type="text/plain", payload_format_indicator=1, payload="h\u00e9".encode()))
    assert elements(msg, "mcd") == [("Msd", "jms_text", None), ("Type", "text/plain", None)]
    assert msg.headers[0].format == C.MQFMT_STRING and report.findings == []
    pub, _ = back(msg)
    assert (pub.content_type, pub.payload_format_indicator) == ("text/plain", 1)


@pytest.mark.parametrize(("uri", "expected"), [
    ("mcd://MRM/set1/type1?format=CWF", [("Msd", "MRM"), ("Set", "set1"), ("Type", "type1"), ("Fmt", "CWF")]),
    ("mcd://MRM/set1", [("Msd", "MRM"), ("Set", "set1")]),
    ("mcd://xml", [("Msd", "xml")]),
])
def test_mcd_uri_content_type_splits_into_mcd_elements(uri, expected):
    msg, report, _ = encode(props(content_type=uri))
    assert elements(msg, "mcd") == [(n, v, None) for n, v in expected]
    assert report.findings == []
    pub, report = back(msg)
    assert pub.content_type == uri and back_changes(report) == []


# ---- Payload Format Indicator ---------------------------------------------------------------------
def test_payload_format_indicator_1_with_utf8_makes_an_mqstr_body():
    payload = "gr\u00fc\u00dfe \U0001f600".encode()
    msg, report, _ = encode(props(payload_format_indicator=1, payload=payload))
    assert msg.headers[0].format == "MQSTR   " and msg.body_ccsid == C.CCSID_UTF8
    assert folder_names(msg) == ["mqtt", "mqps"]       # no content type: no mcd folder
    assert report.findings == []
    pub, report = back(msg)
    assert pub.payload_format_indicator == 1 and pub.payload == payload and back_changes(report) == []


def test_payload_format_indicator_1_without_utf8_is_written_as_bytes():
    msg, report, _ = encode(props(payload_format_indicator=1, payload=b"\xff\xfe", content_type="x/y"))
    assert msg.headers[0].format == C.MQFMT_NONE
    assert elements(msg, "mcd") == [("Msd", "jms_bytes", None), ("Type", "x/y", None)]
    assert changes(report) == [("coerced", "payload format indicator")]
    pub, _ = back(msg)
    assert pub.payload_format_indicator is None and pub.payload == b"\xff\xfe"


def test_payload_format_indicator_survives_a_channel_ccsid_other_than_1208():
    msg, report, _ = encode(props(payload_format_indicator=1, payload="\u00e9".encode()),
                            MqttToMqOptions(coded_char_set_id=C.CCSID_ISO8859_1))
    assert msg.body_ccsid == C.CCSID_UTF8 or report.findings
    pub, _ = back(msg)
    assert pub.payload_format_indicator == 1


# ---- Response Topic -------------------------------------------------------------------------------
def test_topic_response_topic_goes_to_jms_rto_only():
    msg, report, _ = encode(props(response_topic="reply/here"))
    assert elements(msg, "jms") == [("Rto", "topic://reply/here", None)]
    assert (msg.md.reply_to_q, msg.md.reply_to_q_mgr) == ("", "")
    assert report.findings == []
    pub, report = back(msg)
    assert pub.response_topic == "reply/here" and back_changes(report) == []


def test_topic_response_topic_with_the_reply_to_queue_option():
    options = MqttToMqOptions(reply_to_queue="MQTT.REPLY")
    msg, report, _ = encode(props(response_topic="reply/here"), options)
    assert elements(msg, "jms") == [("Rto", "topic://reply/here", None)]
    assert (msg.md.reply_to_q, msg.md.reply_to_q_mgr) == ("MQTT.REPLY", "")
    assert report.findings == []
    pub, _ = back(msg)
    assert pub.response_topic == "reply/here"          # jms/Rto wins over ReplyToQ


@pytest.mark.parametrize(("uri", "queue", "qmgr"), [("queue:///REPLY.Q", "REPLY.Q", ""),
                                                    ("queue://QM2/REPLY.Q", "REPLY.Q", "QM2")])
def test_queue_response_topic_goes_to_rto_and_reply_to_q(uri, queue, qmgr):
    for options in (MqttToMqOptions(), MqttToMqOptions(reply_to_queue="MQTT.REPLY")):
        msg, report, _ = encode(props(response_topic=uri), options)
        assert elements(msg, "jms") == [("Rto", uri, None)]
        assert (msg.md.reply_to_q, msg.md.reply_to_q_mgr) == (queue, qmgr)
        assert report.findings == []
        pub, report = back(msg)
        assert pub.response_topic == uri and back_changes(report) == []


@pytest.mark.parametrize("topic", ["a?b%c", " x ", "caf\u00e9/&<>"])
def test_response_topics_with_uri_and_xml_special_characters_round_trip(topic):
    msg, report, _ = encode(props(response_topic=topic))
    assert report.findings == []
    assert back(msg)[0].response_topic == topic


def test_empty_response_topic_is_dropped():
    msg, report, _ = encode(props(response_topic=""))
    assert msg.rfh2_folder("jms") is None and changes(report) == [("dropped", "response topic")]


# ---- Correlation Data -----------------------------------------------------------------------------
def test_text_correlation_data_in_correl_id_and_jms_cid():
    msg, report, _ = encode(props(correlation_data=b"req-1"))
    assert msg.md.correl_id == b"req-1" + bytes(19)
    assert elements(msg, "jms") == [("Cid", "req-1", None)]
    assert report.findings == []
    assert back(msg)[0].correlation_data == b"req-1"


@pytest.mark.parametrize("text", ["x" * 30, "\u00e9" * 13, "a&b<c>\r\n\t ' \"" * 3])
def test_long_text_correlation_data_is_whole_in_jms_cid(text):
    data = text.encode()
    msg, report, _ = encode(props(correlation_data=data))
    assert msg.md.correl_id == data[:24].ljust(24, b"\x00")
    assert elements(msg, "jms") == [("Cid", text, None)]
    assert changes(report) == ([("truncated", "MQMD.CorrelId")] if len(data) > 24 else [])
    pub, report = back(msg)
    assert pub.correlation_data == data and back_changes(report) == []


def test_binary_correlation_data_up_to_24_bytes_is_correl_id_alone():
    data = b"\x00\xff\x01" * 8
    msg, report, _ = encode(props(correlation_data=data))
    assert msg.md.correl_id == data and msg.rfh2_folder("jms") is None and report.findings == []
    assert back(msg)[0].correlation_data == data


def test_binary_correlation_data_beyond_24_bytes_is_truncated():
    data = bytes(range(1, 31)) + b"\xff"
    msg, report, _ = encode(props(correlation_data=data))
    assert msg.md.correl_id == data[:24] and msg.rfh2_folder("jms") is None
    assert changes(report) == [("truncated", "MQMD.CorrelId")]
    assert back(msg)[0].correlation_data == data[:24]


@pytest.mark.parametrize(("data", "kept"), [(b"\xff\x00", b"\xff"), (b"ab\x00", b"ab"), (b"\x01\x00\x00", b"\x01")])
def test_correlation_data_ending_in_nul_is_coerced(data, kept):
    msg, report, _ = encode(props(correlation_data=data))
    assert msg.md.correl_id == data.ljust(24, b"\x00") and msg.rfh2_folder("jms") is None
    assert changes(report) == [("coerced", "MQMD.CorrelId")]
    assert back(msg)[0].correlation_data == kept


def test_empty_correlation_data_is_dropped():
    msg, report, _ = encode(props(correlation_data=b""))
    assert msg.md.correl_id == NO_CORREL and msg.rfh2_folder("jms") is None
    assert changes(report) == [("dropped", "correlation data")]
    assert back(msg)[0].correlation_data is None


# ---- Message Expiry Interval ----------------------------------------------------------------------
@pytest.mark.parametrize("seconds", [1, 30, 3600, MQLONG_MAX // 10])
def test_expiry_interval_in_tenths(seconds):
    msg, report, _ = encode(props(message_expiry_interval=seconds))
    assert msg.md.expiry == seconds * 10 and report.findings == []
    assert msg.rfh2_folder("jms") is None                 # no jms/Exp
    pub, report = back(msg)
    assert pub.message_expiry_interval == seconds and back_changes(report) == []


@pytest.mark.parametrize("seconds", [MQLONG_MAX // 10 + 1, 2**31, 2**32 - 1])
def test_expiry_interval_beyond_an_mqlong_of_tenths_is_truncated(seconds):
    msg, report, _ = encode(props(message_expiry_interval=seconds))
    assert msg.md.expiry == MQLONG_MAX and changes(report) == [("truncated", "MQMD.Expiry")]
    assert back(msg)[0].message_expiry_interval == math.ceil(MQLONG_MAX / 10)


def test_expiry_interval_zero_reads_back_or_is_reported():
    msg, report, _ = encode(props(message_expiry_interval=0))
    assert report.findings or back(msg)[0].message_expiry_interval == 0


@pytest.mark.parametrize(("tenths", "seconds"), [(1, 1), (9, 1), (10, 1), (11, 2), (95, 10), (100, 10),
                                                 (MQLONG_MAX, 214748365), (0, None), (C.MQEI_UNLIMITED, None)])
def test_mq_expiry_to_seconds_rounds_up(tenths, seconds):
    md = Mqmd(expiry=tenths, persistence=0)
    msg = build_message(md, (Rfh2(folders=(RfhFolder("mqps", (RfhElement("Top", "t"),)),)),), b"x")
    assert back(msg)[0].message_expiry_interval == seconds


# ---- everything together, and the MQMD/RFH2 the properties leave alone ----------------------------
ALL = props(payload="h\u00e9llo".encode(), payload_format_indicator=1, content_type="text/plain",
            response_topic="queue://QM2/REPLY.Q", correlation_data=b"req-1",
            user_properties=(("a", "1"), ("b", "x y")), message_expiry_interval=30)


def test_all_properties_exact_mq_message():
    msg, report, _ = encode(ALL)
    assert folder_names(msg) == ["mqtt", "mqps", "mcd", "jms", "usr"]
    assert elements(msg, "mqtt") == [("clientId", "c1", None), ("qos", "1", None), ("msgid", "7", None)]
    assert elements(msg, "mqps") == [("Top", "a/b", None)]
    assert elements(msg, "mcd") == [("Msd", "jms_text", None), ("Type", "text/plain", None)]
    assert sorted(elements(msg, "jms")) == [("Cid", "req-1", None), ("Rto", "queue://QM2/REPLY.Q", None)]
    assert elements(msg, "usr") == [("a", "1", None), ("b", "x y", None)]
    rfh = msg.headers[0]
    assert rfh.format == "MQSTR   " and msg.body_ccsid == C.CCSID_UTF8
    md = msg.md
    assert (md.correl_id, md.reply_to_q, md.reply_to_q_mgr, md.expiry) == (b"req-1" + bytes(19), "REPLY.Q", "QM2",
                                                                             300)
    assert report.findings == []
    pub, report = back(msg)
    assert pub == dataclasses.replace(ALL, packet_id=1, username=None) and back_changes(report) == []


@pytest.mark.parametrize("options", [
    MqttToMqOptions(),
    MqttToMqOptions(encoding=C.MQENC_NORMAL, mqmd_version=C.MQMD_VERSION_2),
    MqttToMqOptions(persistence=C.MQPER_NOT_PERSISTENT, priority=3, user_id_source=UserIdSource.USER_NAME),
    MqttToMqOptions(user_id_source=UserIdSource.CONFIGURED, configured_user_id="mqxr", coded_char_set_id=1208),
])
@pytest.mark.parametrize("qos", [0, 2])
def test_properties_change_only_their_mqmd_fields_and_add_folders(options, qos):
    pub = dataclasses.replace(ALL, qos=qos, packet_id=None if qos == 0 else 9)
    msg, _, _ = encode(pub, options)
    base, _, _ = encode(plain(pub), options)
    assert msg.md == dataclasses.replace(base.md, correl_id=b"req-1" + bytes(19), reply_to_q="REPLY.Q",
                                         reply_to_q_mgr="QM2", expiry=300, msg_type=C.MQMT_REQUEST)
    rfh, base_rfh = msg.headers[0], base.headers[0]
    assert rfh.folders[:2] == base_rfh.folders
    assert dataclasses.replace(rfh, format=C.MQFMT_NONE, folders=()) == dataclasses.replace(base_rfh, folders=())
    pub_back, _ = back(msg)
    assert pub_back == dataclasses.replace(pub, packet_id=pub_back.packet_id, username=None)


def test_without_properties_the_bytes_are_the_plain_encoders():
    encoder = MqttToMqEncoder()
    for pub in (ALL, dataclasses.replace(ALL, retain=True, qos=0, packet_id=None)):
        reference, _ = MqttToMqEncoder().encode(plain(pub))
        with_props, _ = encoder.encode(pub)
        assert with_props != reference
        assert encoder.encode(plain(pub))[0] == reference          # same encoder, after a publication with them
        assert MqttToMqEncoder().encode(plain(pub))[0] == reference
        # Payload Format Indicator 0 "is equivalent to not sending" one (MQTT 5 §3.3.2.3.2)
        assert encoder.encode(dataclasses.replace(plain(pub), payload_format_indicator=0))[0] == reference


# ---- bad input ------------------------------------------------------------------------------------
_BAD_FIELD = "accepted instead of a MappingError naming the field"


@pytest.mark.parametrize(("name", "value"), [
    ("content_type", 5),
    ("response_topic", 5),
    ("correlation_data", "abc"),
    ("correlation_data", 5),
    ("message_expiry_interval", "10"),
    ("message_expiry_interval", -5),
    ("message_expiry_interval", 1.5),
    ("message_expiry_interval", 2**32),
    ("payload_format_indicator", 2),
    ("payload_format_indicator", "1"),
    ("user_properties", (("k", 5),)),
    ("user_properties", ((5, "v"),)),
])
def test_wrong_property_values_raise_a_mapping_error_naming_the_field(name, value):
    with pytest.raises(MappingError) as err:
        MqttToMqEncoder().encode(props(**{name: value}))
    assert err.value.field == name


@pytest.mark.parametrize(("kw", "field"), [({"content_type": "a\x01b"}, "Type"),
                                           ({"response_topic": "r\x01"}, "Rto"),
                                           ({"user_properties": (("k", "a\x01"),)}, "k")])
def test_text_xml_cannot_carry_is_a_mapping_error_naming_the_element(kw, field):
    with pytest.raises(MappingError) as err:
        MqttToMqEncoder().encode(props(**kw))
    assert field in str(err.value)


# ---- MQ -> MQTT 5: messages MQ applications wrote -------------------------------------------------
def test_message_written_by_the_ibm_mq_jms_mapping():
    jms = JmsMessage(
        JmsHeaders(destination=Destination.queue("APP.IN"), expiration=NOW + 60_000, timestamp=NOW,
                   correlation_id="order-17", reply_to=Destination.queue("REPLY.Q", "QM2"), type="order.v1",
                   priority=6),
        TypedMap([("count", jint(42)), ("urgent", jboolean(True)), ("region", jstring("eu-west"))], what="property"),
        TextBody("h\u00e9llo"))
    data, _ = jms_to_mq_bytes(jms, now_ms=NOW)
    pub, report = back(decode_message(data), options=MqToMqttOptions(fallback_topic="from/jms"))
    assert pub.payload == "h\u00e9llo".encode() and pub.payload_format_indicator == 1
    assert pub.content_type == "order.v1"
    assert pub.response_topic == "queue://QM2/REPLY.Q"
    assert pub.correlation_data == b"order-17"
    assert pub.message_expiry_interval == 60          # a 60 s time to live: Expiry 600 tenths
    # a JMS message: JMSTimestamp (jms/Tms) first, as JMS -> MQTT 5 gives it (no JMSMessageID: MsgId is none)
    assert pub.user_properties == (("JMSTimestamp", format_timestamp(NOW)), ("count", "42"), ("urgent", "true"),
                                   ("region", "eu-west"))
    found = changes(report)
    assert ("coerced", "count") in found and ("coerced", "urgent") in found and ("coerced", "region") not in found
    dropped = {name for change, name in found if change == "dropped"}
    assert "jms/Dst" in dropped and "jms/Pri" in dropped and "MQMD.Priority" in dropped
    assert not dropped & {"MQMD.CorrelId", "MQMD.ReplyToQ", "MQMD.ReplyToQMgr", "MQMD.Expiry", "jms/Rto", "jms/Cid",
                          "jms/Exp", "mcd/Msd", "mcd/Type", "usr/count", "MQRFH2 folder usr", "MQRFH2 folder mcd"}


def test_jms_id_form_correlation_id_reads_as_correl_id_bytes():
    raw = bytes(range(1, 23)) + b"\x00\x00"
    jms = JmsMessage(JmsHeaders(correlation_id="ID:" + raw.hex()), TypedMap(what="property"), TextBody("x"))
    data, _ = jms_to_mq_bytes(jms, now_ms=NOW)
    msg = decode_message(data)
    assert msg.rfh2_folder("jms") is None or msg.rfh2_folder("jms").get("Cid") is None
    pub, _ = back(msg, options=MqToMqttOptions(fallback_topic="t"))
    assert pub.correlation_data == raw.rstrip(b"\x00")


def mqi(body: bytes = "r\u00e9ponse".encode(), fmt: str = C.MQFMT_STRING, **md: object) -> MqMessage:
    fields = {"version": 2, "coded_char_set_id": C.CCSID_UTF8, "persistence": C.MQPER_NOT_PERSISTENT, **md}
    msg = build_message(Mqmd(**fields), (), body, body_format=fmt)  # type: ignore[arg-type]
    return decode_message(encode_message(msg))


def test_mqi_message_without_rfh2():
    msg = mqi(correl_id=b"req-17".ljust(24, b"\x00"), reply_to_q="REPLY.Q", expiry=95)
    pub, report = back(msg, options=MqToMqttOptions(fallback_topic="t"))
    assert pub.payload_format_indicator == 1 and pub.payload == "r\u00e9ponse".encode()
    assert pub.correlation_data == b"req-17"
    assert pub.response_topic == "queue:///REPLY.Q"
    assert pub.message_expiry_interval == 10
    assert (pub.content_type, pub.user_properties) == (None, ())
    assert back_changes(report) == [("defaulted", "topic")]     # nothing the MQMD holds is reported dropped


def test_mqi_reply_to_queue_manager_and_no_correl_id():
    pub, _ = back(mqi(reply_to_q="REPLY.Q", reply_to_q_mgr="QM9"), options=MqToMqttOptions(fallback_topic="t"))
    assert pub.response_topic == "queue://QM9/REPLY.Q"
    assert pub.correlation_data is None and pub.message_expiry_interval is None


@pytest.mark.parametrize(("body", "fmt", "ccsid"), [
    ("r\u00e9ponse".encode("latin-1"), C.MQFMT_STRING, C.CCSID_ISO8859_1),   # text, but not in 1208
    (b"\xff\xfe", C.MQFMT_STRING, C.CCSID_UTF8),                            # MQSTR 1208 that is not UTF-8
    (b"hello", C.MQFMT_NONE, C.CCSID_UTF8),                                 # bytes
])
def test_no_payload_format_indicator_unless_mqstr_utf8(body, fmt, ccsid):
    pub, _ = back(mqi(body, fmt, coded_char_set_id=ccsid, expiry=10), options=MqToMqttOptions(fallback_topic="t"))
    assert pub.payload_format_indicator is None and pub.payload == body


def _rfh2_message(md: Mqmd, *folders: RfhFolder, body: bytes = b"\xff") -> MqMessage:
    mqps = RfhFolder("mqps", (RfhElement("Top", "t/1"),))
    return decode_message(encode_message(build_message(md, (Rfh2(folders=(*folders, mqps)),), body)))


def test_rfh2_elements_win_over_the_mqmd():
    jms = RfhFolder("jms", (RfhElement("Rto", "topic://r/1"), RfhElement("Cid", "cid-x"), RfhElement("Exp", "17")))
    md = Mqmd(persistence=0, correl_id=b"other".ljust(24, b"\x00"), expiry=50)
    pub, _ = back(_rfh2_message(md, jms))
    assert (pub.response_topic, pub.correlation_data) == ("r/1", b"cid-x")
    assert pub.message_expiry_interval == 5               # MQMD Expiry, not jms/Exp


def test_usr_elements_become_user_properties_in_order_typed_ones_coerced():
    usr = RfhFolder("usr", (RfhElement("b", "7", "i4"), RfhElement("a", "x"), RfhElement("c", "1", "boolean"),
                            RfhElement("d", "-9000000000", "i8"), RfhElement("e", "y", "string")))
    pub, report = back(_rfh2_message(Mqmd(persistence=0), usr))
    assert pub.user_properties == (("b", "7"), ("a", "x"), ("c", "true"), ("d", "-9000000000"), ("e", "y"))
    assert back_changes(report) == [("coerced", "b"), ("coerced", "c"), ("coerced", "d")]


def test_fields_the_properties_read_are_not_reported_dropped_others_are():
    mcd = RfhFolder("mcd", (RfhElement("Msd", "jms_bytes"), RfhElement("Type", "ct")))
    jms = RfhFolder("jms", (RfhElement("Dst", "topic://t"), RfhElement("Pri", "5"), RfhElement("Exp", "17"),
                            RfhElement("Rto", "queue://QMX/RQ"), RfhElement("Cid", "cid-x")))
    usr = RfhFolder("usr", (RfhElement("u", "1"),))
    md = Mqmd(version=2, persistence=0, correl_id=b"cid-x".ljust(24, b"\x00"), reply_to_q="RQ", reply_to_q_mgr="QMX",
              expiry=50, priority=5, report=C.MQRO_COA)
    pub, report = back(_rfh2_message(md, mcd, jms, usr))
    assert (pub.content_type, pub.response_topic, pub.correlation_data) == ("ct", "queue://QMX/RQ", b"cid-x")
    assert (pub.message_expiry_interval, pub.user_properties) == (5, (("u", "1"),))
    assert sorted(back_changes(report)) == sorted([("dropped", "jms/Dst"), ("dropped", "jms/Pri"),
                                                   ("dropped", "MQMD.Priority"), ("dropped", "MQMD.Report")])


def test_a_jms_folder_nothing_reads_is_reported_whole():
    jms = RfhFolder("jms", (RfhElement("Dst", "topic://t"), RfhElement("Pri", "5")))
    _, report = back(_rfh2_message(Mqmd(persistence=0), jms))
    assert back_changes(report) == [("dropped", "MQRFH2 folder jms")]



@pytest.mark.parametrize(("folder", "field"), [
    (RfhFolder("jms", (RfhElement("Rto", "garbage"),)), "Rto"),
    (RfhFolder("usr", (RfhElement("n", "abc", "i4"),)), "n"),
])
def test_unreadable_rfh2_values_are_a_mapping_error_naming_the_element(folder, field):
    with pytest.raises(MappingError) as err:
        back(_rfh2_message(Mqmd(persistence=0), folder))
    assert err.value.field == field

# ---- round trip property --------------------------------------------------------------------------
_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cs")), max_size=20).filter(
    lambda s: xml_char_problem(s) is None)
_NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,11}", fullmatch=True).filter(
    lambda n: not n.startswith("JMS") and n.upper() not in RESERVED_WORDS)
_USER_PROPERTIES = st.lists(st.tuples(_NAMES, _TEXT), max_size=5, unique_by=lambda p: p[0]).map(tuple)
_CORRELATION = (_TEXT.map(str.encode) | st.binary(max_size=24)).filter(
    lambda b: 1 <= len(b) <= 24 and not b.endswith(b"\x00"))
_MQ_NAME = st.from_regex(r"[A-Z0-9._]{1,48}", fullmatch=True)
_RESPONSE_TOPIC = (
    _TEXT.filter(lambda t: t and not {"+", "#"} & set(t) and not t.lower().startswith(("queue://", "topic://")))
    | st.builds(lambda q: f"queue:///{q}", _MQ_NAME)
    | st.builds(lambda qm, q: f"queue://{qm}/{q}", _MQ_NAME, _MQ_NAME))
_CONTENT_TYPE = _TEXT.filter(lambda t: not t.startswith("mcd:"))
_BODY = st.tuples(st.none(), st.binary(max_size=30)) | st.tuples(st.just(1), st.text(max_size=20).map(str.encode))


@settings(max_examples=300, deadline=None)
@given(user_properties=_USER_PROPERTIES, correlation=st.none() | _CORRELATION,
       expiry=st.none() | st.integers(1, 2**31 // 10), response_topic=st.none() | _RESPONSE_TOPIC,
       content_type=st.none() | _CONTENT_TYPE, body=_BODY, retain=st.booleans(),
       options=st.sampled_from([MqttToMqOptions(), MqttToMqOptions(encoding=C.MQENC_NORMAL, mqmd_version=2)]))
def test_round_trip_mqtt5_mq_mqtt5(user_properties, correlation, expiry, response_topic, content_type, body, retain,
                                   options):
    pfi, payload = body
    pub = MqttPublication(topic="a/b", payload=payload, qos=1, packet_id=1, retain=retain, client_id="c1",
                          payload_format_indicator=pfi, content_type=content_type, response_topic=response_topic,
                          correlation_data=correlation, user_properties=user_properties,
                          message_expiry_interval=expiry)
    msg, report, _ = encode(pub, options)
    assert report.findings == []
    assert (msg.headers[0].format == C.MQFMT_STRING) == (pfi == 1)
    result, report = back(msg)
    assert result == pub
    assert back_changes(report) == []
