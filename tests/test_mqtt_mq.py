"""MQTT <-> MQ (mq-telemetry-mqtt-mq-mapping.txt Tables 1-5): rules, golden bytes, round trips, errors."""
from __future__ import annotations

import dataclasses
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mappings.conversions.mqtt_mq import (
    MqToMqttOptions,
    MqttToMqEncoder,
    MqttToMqOptions,
    TopicObjectIndex,
    UserIdSource,
    mq_to_mqtt,
    mqtt_to_mq,
    subscription_name,
)
from mappings.errors import MappingError
from mappings.mq import constants as C
from mappings.mq.message import build_message, decode_message, encode_message
from mappings.mq.mqmd import Mqmd, encode_mqmd
from mappings.mq.rfh2 import Rfh1, Rfh2, RfhElement, RfhFolder
from mappings.mqtt.publication import MqttPublication
from tests.mq_fixtures import FIXTURE_DIR

PUB = MqttPublication(topic="a/b", payload=b"hi", qos=1, packet_id=7, client_id="c1", username="alice")


def _changed_fields(md: Mqmd) -> dict[str, object]:
    base = Mqmd()
    names = [f.name for f in dataclasses.fields(md)]
    return {n: getattr(md, n) for n in names if getattr(md, n) != getattr(base, n)}


# ---- Table 1: MQMD ------------------------------------------------------------------------------
@pytest.mark.parametrize(("qos", "persistence"), [(0, 0), (1, 1), (2, 1)])
def test_table1_mqmd(qos, persistence):
    pub = dataclasses.replace(PUB, qos=qos, packet_id=None if qos == 0 else 7)
    msg, report = mqtt_to_mq(pub)
    assert msg.md.priority == C.MQPRI_PRIORITY_AS_Q_DEF
    changed = _changed_fields(msg.md)
    # everything else keeps MQMD_DEFAULT (CCSID 1208 describes the RFH2 we write)
    assert changed == {"coded_char_set_id": 1208, "format": "MQHRF2  ", "user_identifier": "c1",
                       **({"persistence": persistence} if persistence != 2 else {})}
    assert not report


@pytest.mark.parametrize(
    ("source", "configured", "expected"),
    [(UserIdSource.CLIENT_ID, "", "c1"), (UserIdSource.USER_NAME, "", "alice"),
     (UserIdSource.CONFIGURED, "mqxr", "mqxr")],
)
def test_table1_user_identifier_sources(source, configured, expected):
    opts = MqttToMqOptions(user_id_source=source, configured_user_id=configured)
    assert mqtt_to_mq(PUB, opts)[0].md.user_identifier == expected


def test_authenticated_user_source_trusts_only_a_checked_user_name():
    opts = MqttToMqOptions(user_id_source=UserIdSource.AUTHENTICATED_USER)
    assert mqtt_to_mq(PUB, opts)[0].md.user_identifier == "c1"            # alice only claimed
    checked = dataclasses.replace(PUB, user_authenticated=True)
    assert mqtt_to_mq(checked, opts)[0].md.user_identifier == "alice"
    encoder = MqttToMqEncoder(opts)   # cached per publisher: the same names, checked or not, differ
    for pub, expected in ((PUB, "c1"), (checked, "alice"), (PUB, "c1")):
        assert decode_message(encoder.encode(pub)[0]).md.user_identifier.rstrip() == expected


def test_user_identifier_truncated_coerced_or_defaulted():
    msg, report = mqtt_to_mq(dataclasses.replace(PUB, client_id="a-very-long-client-id"))
    assert msg.md.user_identifier == "a-very-long-"
    assert [(f.change.value, f.name) for f in report.findings] == [("truncated", "MQMD.UserIdentifier")]
    msg, report = mqtt_to_mq(dataclasses.replace(PUB, username="\u4e2d\u6587"),
                             MqttToMqOptions(user_id_source=UserIdSource.USER_NAME))
    assert msg.md.user_identifier == "??"
    assert report.findings[0].change.value == "coerced"
    msg, report = mqtt_to_mq(dataclasses.replace(PUB, username=None),
                             MqttToMqOptions(user_id_source=UserIdSource.USER_NAME))
    assert msg.md.user_identifier == "" and report.findings[0].change.value == "defaulted"


# ---- Table 2: RFH2 ------------------------------------------------------------------------------
def test_table2_rfh2_qos1_retained():
    msg, _ = mqtt_to_mq(dataclasses.replace(PUB, retain=True, topic="x/<&>"))
    (rfh,) = msg.headers
    assert rfh.format == C.MQFMT_NONE and rfh.folder("mcd") is None   # a jms-bytes message
    assert rfh.folder("mqtt").elements == (RfhElement("clientId", "c1"), RfhElement("qos", "1"),
                                           RfhElement("msgid", "7"))
    assert rfh.folder("mqps").elements == (RfhElement("Top", "x/<&>"), RfhElement("Ret", "1"))


def test_table2_qos0_has_no_msgid_and_not_retained_has_no_ret():
    msg, _ = mqtt_to_mq(dataclasses.replace(PUB, qos=0, packet_id=None))
    rfh = msg.headers[0]
    assert [e.name for e in rfh.folder("mqtt").elements] == ["clientId", "qos"]
    assert [e.name for e in rfh.folder("mqps").elements] == ["Top"]


def test_table2_client_id_limit():
    long_id = "\u00e9" * 12 + "x"  # 25 UTF-8 bytes
    msg, report = mqtt_to_mq(dataclasses.replace(PUB, client_id=long_id))
    assert msg.headers[0].folder("mqtt").value("clientId") == "\u00e9" * 11   # 22 bytes, whole characters
    assert ("truncated", "mqtt/clientId") in [(f.change.value, f.name) for f in report.findings]
    msg, _ = mqtt_to_mq(dataclasses.replace(PUB, client_id=long_id), MqttToMqOptions(client_id_limit=None))
    assert msg.headers[0].folder("mqtt").value("clientId") == long_id


def test_golden_bytes_by_hand():
    """Bytes of a QoS 1 retained publication built from the reference layouts (§2, §5) by hand."""
    data, report = MqttToMqEncoder().encode(dataclasses.replace(PUB, retain=True))
    md = bytearray(324)
    md[0:4] = b"MD  "
    for off, value in ((4, 1), (12, 8), (16, -1), (24, 546), (28, 1208), (40, -1), (44, 1)):
        md[off : off + 4] = struct.pack("<i", value)
    md[32:40] = b"MQHRF2  "
    for off, length in ((100, 48), (148, 48), (196, 12), (240, 32), (276, 28), (304, 8), (312, 8), (320, 4)):
        md[off : off + length] = b" " * length
    md[196:198] = b"c1"
    md[272:276] = struct.pack("<i", 0)
    f1 = b"<mqtt><clientId>c1</clientId><qos>1</qos><msgid>7</msgid></mqtt>"   # 64 bytes
    f2 = b"<mqps><Top>a/b</Top><Ret>1</Ret></mqps>"                             # 39 -> 40
    rfh = (b"RFH " + struct.pack("<iiii", 2, 36 + 4 + 64 + 4 + 40, 546, -2) + b"        "
           + struct.pack("<ii", 0, 1208) + struct.pack("<i", 64) + f1 + struct.pack("<i", 40) + f2 + b" ")
    assert data == bytes(md) + rfh + b"hi"
    assert not report


# ---- Table 3: body ------------------------------------------------------------------------------
@pytest.mark.parametrize("payload", [b"", b"\x00\xff" * 100])
def test_table3_body_is_a_copy(payload):
    msg, _ = mqtt_to_mq(dataclasses.replace(PUB, payload=payload))
    assert msg.body == payload and decode_message(encode_message(msg)).body == payload


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        (dict(qos=3), "qos"), (dict(qos=1, packet_id=None), "packet_id"),
        (dict(qos=2, packet_id=0), "packet_id"),
        (dict(topic=""), "topic"), (dict(client_id=None), "client_id"), (dict(client_id=""), "client_id"),
        (dict(topic="a\x01b"), "mqps/Top"), (dict(payload="text"), "payload"),
        (dict(packet_id="7"), "packet_id"), (dict(qos=1.0), "qos"), (dict(client_id=5), "client_id"),
        (dict(username=b"u"), "username"), (dict(user_properties=(("a",),)), "user_properties"),
    ],
)
def test_mqtt_to_mq_errors(changes, field):
    pub = dataclasses.replace(PUB, **changes)
    for convert in (mqtt_to_mq, MqttToMqEncoder().encode):
        with pytest.raises(MappingError) as err:
            convert(pub)
        assert err.value.field == field


# ---- fast path == model path ---------------------------------------------------------------------
# XML 1.0 cannot carry C0 controls, surrogates or U+FFFE/U+FFFF (those raise MappingError, tested above)
xml_char = st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\ufffe\uffff")
topics = st.text(xml_char, min_size=1, max_size=30)
publications = st.builds(
    MqttPublication, topic=topics, payload=st.binary(max_size=50), qos=st.sampled_from([0, 1, 2]),
    retain=st.booleans(), packet_id=st.integers(1, 65535),
    client_id=st.text(xml_char, min_size=1, max_size=30),
    username=st.none() | st.text(max_size=20),
)
options = st.builds(MqttToMqOptions, user_id_source=st.sampled_from(list(UserIdSource)),
                    configured_user_id=st.text(st.characters(max_codepoint=0xFF), max_size=14),
                    encoding=st.sampled_from([273, 546]), coded_char_set_id=st.sampled_from([1208, 819]),
                    mqmd_version=st.sampled_from([1, 2]), client_id_limit=st.sampled_from([23, None]))


@settings(max_examples=150, deadline=None)
@given(publications, options)
def test_fast_encoder_equals_model_path(pub, opts):
    msg, report = mqtt_to_mq(pub, opts)
    data, fast_report = MqttToMqEncoder(opts).encode(pub)
    assert data == encode_message(msg)
    assert fast_report.as_list() == report.as_list()


SHARED_ENCODER = MqttToMqEncoder(MqttToMqOptions(user_id_source=UserIdSource.USER_NAME))


@settings(max_examples=150, deadline=None)
@given(st.lists(publications, min_size=1, max_size=5))
def test_one_encoder_with_its_publisher_cache_equals_model_path(pubs):
    for pub in pubs:
        data, report = SHARED_ENCODER.encode(pub)
        msg, model_report = mqtt_to_mq(pub, SHARED_ENCODER.options)
        assert data == encode_message(msg) and report.as_list() == model_report.as_list()


def test_encoder_accepts_bytearray_payload_and_reports_mqtt5():
    pub = dataclasses.replace(PUB, payload=bytearray(b"ab"), response_topic="r")
    data, report = MqttToMqEncoder().encode(pub)
    # the Response Topic goes to jms/Rto (docs/mqtt5-mq.md): nothing lost
    assert data.endswith(b"ab") and b"<jms><Rto>topic://r</Rto></jms>" in data and report.findings == []


# ---- subscriptions and administrative topic objects -----------------------------------------------
def test_subscription_name():
    assert subscription_name("dev-1", "a/+/c") == "dev-1:a/+/c"


def test_nearest_administrative_topic_object():
    index = TopicObjectIndex({"sport": "SPORT", "sport/tennis": "TENNIS", "a/b/c": "ABC"})
    assert index.nearest("sport/tennis/wimbledon") == "TENNIS"
    assert index.nearest("sport/tennis") == "TENNIS"
    assert index.nearest("sport/golf") == "SPORT"
    assert index.nearest("sports/golf") == C.SYSTEM_BASE_TOPIC       # prefix only at level boundaries
    assert index.nearest("sport/tennisball") == "SPORT"
    assert index.nearest("a/b") == C.SYSTEM_BASE_TOPIC
    assert TopicObjectIndex([("x", "X")], default="MY.BASE").nearest("y") == "MY.BASE"
    with pytest.raises(MappingError):
        TopicObjectIndex([("x", "X"), ("x", "Y")])
    with pytest.raises(MappingError):
        TopicObjectIndex({"x": ""})


# ---- Tables 4-5: MQ -> MQTT -----------------------------------------------------------------------
def _mq(persistence: int = 1, folders: tuple[RfhFolder, ...] = (), msg_id_tail: bytes = b"\x12\x34",
        **md: object):
    base = Mqmd(persistence=persistence, msg_id=b"AMQ QM1" + bytes(15) + msg_id_tail, **md)
    if folders:
        return build_message(base, (Rfh2(folders=folders),), b"payload")
    return build_message(base, (), b"payload", body_format=C.MQFMT_STRING)


MQPS = RfhFolder("mqps", (RfhElement("Top", "t/1"),))


@pytest.mark.parametrize(
    ("mqtt_qos", "subscriber", "expected"),
    [(0, 2, 0), (1, 2, 1), (2, 1, 1), (2, 0, 0), (2, None, 2)],
)
def test_table4_qos_mqtt_origin(mqtt_qos, subscriber, expected):
    mqtt = RfhFolder("mqtt", (RfhElement("clientId", "c9"), RfhElement("qos", str(mqtt_qos))))
    pub, _ = mq_to_mqtt(_mq(persistence=1, folders=(mqtt, MQPS)), subscriber_qos=subscriber)
    assert pub.qos == expected and pub.client_id == "c9"


@pytest.mark.parametrize(
    ("persistence", "subscriber", "expected"), [(0, 2, 0), (1, 2, 2), (1, 1, 1), (1, None, 2), (0, None, 0)],
)
def test_table4_qos_mq_origin(persistence, subscriber, expected):
    pub, report = mq_to_mqtt(_mq(persistence, (MQPS,)), subscriber_qos=subscriber)
    assert pub.qos == expected and not report


def test_table4_default_qos_subscription_and_unresolved_persistence():
    pub, _ = mq_to_mqtt(_mq(1, (MQPS,)), options=MqToMqttOptions(default_qos=1))
    assert pub.qos == 1
    pub, report = mq_to_mqtt(_mq(C.MQPER_PERSISTENCE_AS_Q_DEF, (MQPS,)))
    assert pub.qos == 0 and report.findings[0].change.value == "defaulted"
    pub, _ = mq_to_mqtt(_mq(C.MQPER_PERSISTENCE_AS_Q_DEF, (MQPS,)),
                        options=MqToMqttOptions(unresolved_persistence=C.MQPER_PERSISTENT))
    assert pub.qos == 2


def test_table4_retain_and_table5_topic_packet_id_payload():
    mqps = RfhFolder("mqps", (RfhElement("Top", "t/1"), RfhElement("Ret", "1")))
    pub, _ = mq_to_mqtt(_mq(1, (mqps,), msg_id_tail=b"\xab\xcd"), subscriber_qos=1)
    assert (pub.topic, pub.retain, pub.packet_id, pub.payload, pub.dup) == ("t/1", True, 0xABCD, b"payload",
                                                                             False)
    pub, _ = mq_to_mqtt(_mq(0, (MQPS,)))
    assert pub.packet_id is None and pub.retain is False


def test_table5_zero_packet_id_uses_allocator_or_fails():
    msg = _mq(1, (MQPS,), msg_id_tail=b"\x00\x00")
    with pytest.raises(MappingError) as err:
        mq_to_mqtt(msg)
    assert err.value.field == "MsgId"
    pub, report = mq_to_mqtt(msg, packet_id_allocator=lambda: 42)
    assert pub.packet_id == 42 and report.findings[0].name == "packet id"
    with pytest.raises(MappingError, match="allocator"):
        mq_to_mqtt(msg, packet_id_allocator=lambda: 0)


def test_topic_fallback_for_unsolicited_messages():
    plain = decode_message((FIXTURE_DIR / "mq_plain_string.bin").read_bytes())
    with pytest.raises(MappingError) as err:
        mq_to_mqtt(plain)
    assert err.value.field == "Top"
    pub, report = mq_to_mqtt(plain, options=MqToMqttOptions(fallback_topic="SYSTEM.MQTT.TRANSMIT.QUEUE"))
    assert pub.topic == "SYSTEM.MQTT.TRANSMIT.QUEUE" and pub.payload == b"hello from MQ"
    assert pub.qos == 2 and pub.packet_id == 0x12AB
    names = [f.name for f in report.findings]
    assert "topic" in names and "MQMD.ReplyToQ" not in names and "MQMD.ReplyToQMgr" not in names
    assert pub.response_topic == "queue://QM1/REPLY.Q"   # MQTT 5 Response Topic (docs/mqtt5-mq.md)


def test_discarded_headers_are_reported():
    usr = RfhFolder("usr", (RfhElement("a", "1"),))
    mqps = RfhFolder("mqps", (RfhElement("Top", "t"), RfhElement("Sud", "data")))
    msg = build_message(Mqmd(persistence=0, correl_id=b"\x01" * 24, expiry=100),
                        (Rfh1(pairs=(("x", "y"),)), Rfh2(folders=(usr, mqps))), b"")
    pub, report = mq_to_mqtt(msg)
    assert pub.topic == "t"
    assert {f.name for f in report.findings} == {"MQRFH header 1", "mqps/Sud"}
    # Expiry, CorrelId and the usr folder are MQTT 5 properties now (docs/mqtt5-mq.md)
    assert pub.message_expiry_interval == 10 and pub.correlation_data == b"\x01" * 24
    assert pub.user_properties == (("a", "1"),)
    assert all(f.change.value == "dropped" for f in report.findings)


def test_typed_mqtt_qos_is_read():
    mqtt = RfhFolder("mqtt", (RfhElement("qos", "1", "i4"),))
    assert mq_to_mqtt(_mq(1, (mqtt, MQPS)))[0].qos == 1


@pytest.mark.parametrize("bad", ["3", "x", "-1", ""])
def test_bad_mqtt_qos_in_message(bad):
    mqtt = RfhFolder("mqtt", (RfhElement("qos", bad),))
    with pytest.raises(MappingError) as err:
        mq_to_mqtt(_mq(1, (mqtt, MQPS)))
    assert err.value.field == "qos"


@pytest.mark.parametrize("kwargs", [dict(subscriber_qos=3), dict(options=MqToMqttOptions(default_qos=5))])
def test_bad_qos_arguments(kwargs):
    with pytest.raises(MappingError):
        mq_to_mqtt(_mq(1, (MQPS,)), **kwargs)


@settings(max_examples=100, deadline=None)
@given(publications)
def test_round_trip_through_mq(pub):
    data, _ = MqttToMqEncoder(MqttToMqOptions(client_id_limit=None)).encode(pub)
    # the queue manager assigns a MsgId; Table 5 takes the packet id from its last 2 bytes
    msg = decode_message(data)
    tail = (pub.packet_id or 1).to_bytes(2, "big")
    msg_id = b"AMQ QM1".ljust(22, b"\x00") + tail
    msg = dataclasses.replace(msg, md=dataclasses.replace(msg.md, msg_id=msg_id))
    back, report = mq_to_mqtt(decode_message(encode_message(msg)), subscriber_qos=2)
    assert (back.topic, back.payload, back.qos, back.retain, back.client_id) == (
        pub.topic, pub.payload, pub.qos, pub.retain, pub.client_id)
    assert back.packet_id == (pub.packet_id if pub.qos else None)
    assert not report


def test_mqmd_bytes_of_mq_origin_message():
    # MQ -> MQTT works from bytes too: a persistent MQ message with no RFH2 and a fallback topic
    data = encode_mqmd(Mqmd(format="MQSTR   ", persistence=1, msg_id=bytes(22) + b"\x00\x05")) + b"x"
    pub, _ = mq_to_mqtt(decode_message(data), subscriber_qos=1, options=MqToMqttOptions(fallback_topic="q"))
    assert (pub.qos, pub.packet_id, pub.payload) == (1, 5, b"x")


_anything = st.none() | st.booleans() | st.integers() | st.text(max_size=10) | st.binary(max_size=10) | \
    st.lists(st.integers(), max_size=2)
_PUB_FIELDS = [f.name for f in dataclasses.fields(MqttPublication)]


@settings(deadline=None, max_examples=200)
@given(st.sampled_from(_PUB_FIELDS), _anything)
def test_any_wrong_publication_field_raises_only_mapping_error(name, value):
    pub = dataclasses.replace(PUB, **{name: value})
    for convert in (mqtt_to_mq, MqttToMqEncoder().encode, SHARED_ENCODER.encode):
        try:
            convert(pub)
        except MappingError:
            pass
