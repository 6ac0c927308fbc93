"""MQTT 5.0 codec (wire.py, properties.py, codec5.py, through the packets.py facade): round trips, bytes
worked out by hand from OASIS "MQTT Version 5.0", typed errors on malformed input (fuzzing: test_packets5_fuzz.py).

Error offsets are byte offsets inside the packet body (after the fixed header), as in test_packets.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from bridge.mqtt import packets as P
from bridge.mqtt import properties as PR
from bridge.mqtt.properties import Props, decode_properties, encode_properties

R = P.Reason

# ---- helpers: bytes written out here, independently of the encoder ---------------------------------


def _vbi(n: int) -> bytes:
    """A variable byte integer (§1.5.5)."""
    out = bytearray()
    while True:
        n, low = n >> 7, n & 0x7F
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _s(text: str) -> bytes:
    raw = text.encode("utf-8")
    return len(raw).to_bytes(2, "big") + raw


def _frame(first: int, body: bytes) -> bytes:
    return bytes((first,)) + _vbi(len(body)) + body


def _publish_with(props: bytes, qos: int = 0) -> bytes:
    """A PUBLISH on topic "t"; at QoS 0 its property length is at body offset 3, the first property at 4."""
    body = _s("t") + (b"\x00\x01" if qos else b"") + _vbi(len(props)) + props + b"payload"
    return _frame(0x30 | qos << 1, body)


def _connect_with(props: bytes, will_props: bytes | None = None) -> bytes:
    """A level 5 CONNECT of client "c": property length at body offset 10, the first property at 11;
    with a will, its property length follows the client id (offset 14 + len(props))."""
    flags = 0x02 | (0x04 if will_props is not None else 0)
    body = _s("MQTT") + bytes((5, flags, 0, 60)) + _vbi(len(props)) + props + _s("c")
    if will_props is not None:
        body += _vbi(len(will_props)) + will_props + _s("w") + b"\x00\x01x"
    return _frame(0x10, body)


def _subscribe_with(props: bytes, *filters: tuple[str, int]) -> bytes:
    """A SUBSCRIBE with packet id 1: property length at body offset 2, the first property at 3."""
    body = b"\x00\x01" + _vbi(len(props)) + props + b"".join(_s(t) + bytes((o,)) for t, o in filters)
    return _frame(0x82, body)


def _read5(data: bytes) -> list[P.Packet]:
    return P.PacketReader(level=P.MQTT_5).feed(data)


def _round_trip(packet: P.Packet) -> bytes:
    """Encode at level 5; decode it whole and byte by byte; returns the bytes."""
    data = P.encode(packet, P.MQTT_5)
    assert _read5(data) == [packet]
    reader = P.PacketReader(level=P.MQTT_5)
    assert [p for i in range(len(data)) for p in reader.feed(data[i : i + 1])] == [packet]
    assert reader.buffered == 0
    return data


def _err(data: bytes, level: int = P.MQTT_5) -> P.ProtocolError:
    with pytest.raises(P.ProtocolError) as info:
        P.PacketReader(level=level).feed(data)
    return info.value


def _ids(rows: list[tuple[bytes, str, int, Any]]) -> list[str]:
    """Readable ids for (bytes, packet name, offset, label or code) rows."""
    return [f"{name}-{last:#04x}" if isinstance(last, int) else f"{name}-{last}" for _, name, _, last in rows]


def _check(e: P.ProtocolError, packet: str, offset: int, *words: str, code: int | None = None) -> None:
    assert (e.packet, e.offset) == (packet, offset), e
    for word in words:
        assert word in e.reason, e
    assert e.code == code, e


USERS = [("k", "1"), ("a", ""), ("k", "2"), ("k", "1"), ("ü", "∂")]   # order and duplicates kept

# ---- round trips ------------------------------------------------------------------------------------


def test_connect_with_properties_will_properties_and_credentials() -> None:
    will = P.Will("last/will", b"\x00gone", qos=2, retain=True, properties={
        PR.WILL_DELAY_INTERVAL: 30, PR.MESSAGE_EXPIRY_INTERVAL: 600, PR.CONTENT_TYPE: "text/plain",
        PR.RESPONSE_TOPIC: "reply/here", PR.CORRELATION_DATA: b"\x01\x00\x02", PR.PAYLOAD_FORMAT_INDICATOR: 1,
        PR.USER_PROPERTY: USERS})
    packet = P.Connect(P.MQTT_5, "dev-5", clean_session=False, keepalive=45, will=will, username="üser",
                       password=b"\x00pw", properties={
                           PR.SESSION_EXPIRY_INTERVAL: 3600, PR.RECEIVE_MAXIMUM: 20,
                           PR.MAXIMUM_PACKET_SIZE: 65536, PR.TOPIC_ALIAS_MAXIMUM: 10,
                           PR.REQUEST_RESPONSE_INFORMATION: 1, PR.REQUEST_PROBLEM_INFORMATION: 0,
                           PR.AUTHENTICATION_METHOD: "SCRAM-SHA-1", PR.AUTHENTICATION_DATA: b"abc",
                           PR.USER_PROPERTY: [("x", "1"), ("x", "1")]})
    data = _round_trip(packet)
    at = data.index(b"\x00\x04MQTT\x05")
    # connect flags: user name 0x80, password 0x40, will retain 0x20, will QoS 2 (0x10), will 0x04
    assert data[at + 7] == 0x80 | 0x40 | 0x20 | 0x10 | 0x04
    (decoded,) = P.PacketReader().feed(data)   # a server's reader before CONNECT: the packet names its level
    assert isinstance(decoded, P.Connect) and decoded.will is not None and decoded.will.properties is not None
    assert decoded.will.properties[PR.USER_PROPERTY] == USERS


def test_connect_level5_password_without_user_name_and_no_properties() -> None:
    packet = P.Connect(P.MQTT_5, "", keepalive=0, password=b"token")
    data = _round_trip(packet)
    # empty property length, empty client id, then the password alone (MQTT 5 allows it, 3.1.1 does not)
    assert data.endswith(b"\x00" + b"\x00\x00" + b"\x00\x05token")
    assert data[data.index(b"MQTT\x05") + 5] == 0x40 | 0x02


ALL_PUBLISH_PROPS: Props = {
    PR.PAYLOAD_FORMAT_INDICATOR: 1, PR.MESSAGE_EXPIRY_INTERVAL: 0xFFFFFFFF, PR.CONTENT_TYPE: "application/json",
    PR.RESPONSE_TOPIC: "resp/1", PR.CORRELATION_DATA: b"\x00\xff", PR.TOPIC_ALIAS: 65535,
    PR.SUBSCRIPTION_IDENTIFIER: [1, 268_435_455, 1], PR.USER_PROPERTY: USERS,
}


@pytest.mark.parametrize("qos", [0, 1, 2])
def test_publish_every_property(qos: int) -> None:
    packet = P.Publish("a/b", b"\x00payload", qos, retain=qos == 1, dup=qos == 2, packet_id=7 if qos else None,
                       properties=dict(ALL_PUBLISH_PROPS))
    data = _round_trip(packet)
    assert data[0] == 0x30 | qos << 1 | (0x01 if qos == 1 else 0) | (0x08 if qos == 2 else 0)
    (decoded,) = _read5(data)
    assert isinstance(decoded, P.Publish) and decoded.properties is not None
    assert decoded.properties[PR.SUBSCRIPTION_IDENTIFIER] == [1, 268_435_455, 1]
    assert decoded.properties[PR.USER_PROPERTY] == USERS
    assert b"\x0b\xff\xff\xff\x7f" in data   # the largest Subscription Identifier takes 4 bytes


def test_publish_without_properties_and_with_topic_alias_only() -> None:
    data = _round_trip(P.Publish("t", b"x"))
    assert data == b"\x30\x05\x00\x01t\x00x"   # the property length 0 is always present
    _round_trip(P.Publish("", b"x", 1, packet_id=9, properties={PR.TOPIC_ALIAS: 3}))


ACK_TYPES = [(P.PUBACK, 0x40, 0x10), (P.PUBREC, 0x50, 0x97), (P.PUBREL, 0x62, 0x92), (P.PUBCOMP, 0x70, 0x92)]


@pytest.mark.parametrize(("ptype", "first", "code"), ACK_TYPES, ids=[P.PACKET_NAMES[t] for t, _, _ in ACK_TYPES])
def test_acks_short_forms_and_properties(ptype: int, first: int, code: int) -> None:
    # reason 0 and no properties: packet id only, remaining length 2 (§3.4.2.1)
    assert _round_trip(P.PacketIdOnly(ptype, 0x1234)) == bytes((first, 2, 0x12, 0x34))
    # a reason code only: no property length
    assert _round_trip(P.PacketIdOnly(ptype, 0x1234, reason_code=code)) == bytes((first, 3, 0x12, 0x34, code))
    # reason code and properties
    props = {PR.REASON_STRING: "why", PR.USER_PROPERTY: [("a", "1"), ("a", "1")]}
    data = _round_trip(P.PacketIdOnly(ptype, 0x1234, reason_code=code, properties=props))
    assert data[2:6] == bytes((0x12, 0x34, code, len(data) - 6))
    _round_trip(P.PacketIdOnly(ptype, 1, reason_code=0, properties={PR.REASON_STRING: "ok"}))
    # a receiver also takes the 4-byte form with an empty property length
    assert _read5(bytes((first, 4, 0, 5, code, 0))) == [P.PacketIdOnly(ptype, 5, reason_code=code)]


def test_subscribe_options_and_subscription_identifier() -> None:
    topics = (("a/+", 0x00), ("b/#", 0x01 | 0x04), ("c", 0x02 | 0x08 | 0x10), ("$share/g/d", 0x01 | 0x20))
    packet = P.Subscribe(300, topics, {PR.SUBSCRIPTION_IDENTIFIER: 268_435_455, PR.USER_PROPERTY: USERS})
    data = _round_trip(packet)
    assert data[0] == 0x82
    (decoded,) = _read5(data)
    assert isinstance(decoded, P.Subscribe) and decoded.topics == topics
    assert decoded.properties == {PR.SUBSCRIPTION_IDENTIFIER: 268_435_455, PR.USER_PROPERTY: USERS}


def test_unsubscribe_suback_unsuback() -> None:
    _round_trip(P.Unsubscribe(2, ("a/+", "b"), {PR.USER_PROPERTY: USERS}))
    _round_trip(P.Unsubscribe(2, ("a",)))
    _round_trip(P.Suback(3, (0x00, 0x01, 0x02, 0x80, 0x8F, 0xA1), {PR.REASON_STRING: "some refused"}))
    data = _round_trip(P.Unsuback(4, (0x00, 0x11, 0x87), {PR.USER_PROPERTY: [("u", "v")]}))
    assert data[:2] == b"\xb0" + bytes((len(data) - 2,))
    # level 5 UNSUBACK carries reason codes: an Unsuback, not the 3.1.1 PacketIdOnly
    assert _read5(b"\xb0\x05\x00\x04\x00\x00\x11") == [P.Unsuback(4, (0x00, 0x11))]


def test_connack_with_properties() -> None:
    props = {PR.SESSION_EXPIRY_INTERVAL: 0, PR.ASSIGNED_CLIENT_IDENTIFIER: "auto-1", PR.SERVER_KEEP_ALIVE: 30,
             PR.RECEIVE_MAXIMUM: 100, PR.TOPIC_ALIAS_MAXIMUM: 0, PR.MAXIMUM_QOS: 1, PR.RETAIN_AVAILABLE: 0,
             PR.MAXIMUM_PACKET_SIZE: 1 << 20, PR.WILDCARD_SUBSCRIPTION_AVAILABLE: 1,
             PR.SUBSCRIPTION_IDENTIFIER_AVAILABLE: 1, PR.SHARED_SUBSCRIPTION_AVAILABLE: 0,
             PR.RESPONSE_INFORMATION: "r/", PR.SERVER_REFERENCE: "other:1883", PR.REASON_STRING: "hi",
             PR.AUTHENTICATION_METHOD: "m", PR.AUTHENTICATION_DATA: b"d", PR.USER_PROPERTY: USERS}
    data = _round_trip(P.Connack(0, True, props))
    assert data[2:4] == b"\x01\x00"
    assert _round_trip(P.Connack(R.NOT_AUTHORIZED)) == b"\x20\x03\x00\x87\x00"


def test_disconnect_forms() -> None:
    assert _round_trip(P.Disconnect()) == b"\xe0\x00"   # 0 bytes: Normal disconnection
    assert _round_trip(P.Disconnect(R.DISCONNECT_WITH_WILL)) == b"\xe0\x01\x04"
    data = _round_trip(P.Disconnect(R.SERVER_SHUTTING_DOWN, {PR.REASON_STRING: "bye"}))
    assert data == b"\xe0\x08\x8b\x06\x1f\x00\x03bye"
    _round_trip(P.Disconnect(0, {PR.SESSION_EXPIRY_INTERVAL: 10, PR.SERVER_REFERENCE: "s",
                                 PR.USER_PROPERTY: USERS}))
    assert _read5(b"\xe0\x02\x00\x00") == [P.Disconnect()]


def test_auth_and_pings() -> None:
    assert _round_trip(P.Auth()) == b"\xf0\x00"
    _round_trip(P.Auth(R.CONTINUE_AUTHENTICATION, {PR.AUTHENTICATION_METHOD: "SCRAM-SHA-256",
                                                   PR.AUTHENTICATION_DATA: b"\x00\x01", PR.USER_PROPERTY: USERS}))
    _round_trip(P.Auth(R.REAUTHENTICATE, {PR.AUTHENTICATION_METHOD: "x", PR.REASON_STRING: "again"}))
    for ptype in (P.PINGREQ, P.PINGRESP):
        assert _round_trip(P.Bare(ptype)) == bytes((ptype << 4, 0))


# ---- golden bytes (worked out by hand from the spec) --------------------------------------------------


def test_golden_connack_publish_subscribe() -> None:
    # session present 0, reason 0; properties (6 bytes): Topic Alias Maximum 0x22 00 0A, Receive Maximum 0x21 00 14
    data = P.encode(P.Connack(0, False, {PR.TOPIC_ALIAS_MAXIMUM: 10, PR.RECEIVE_MAXIMUM: 20}), P.MQTT_5)
    assert data == bytes.fromhex("2009 0000 06 22000a 210014")
    # 0x32: PUBLISH QoS 1; topic "a/b", packet id 10, properties 0x0D: 0x03 "text/plain", payload "hi"
    data = P.encode(P.Publish("a/b", b"hi", 1, packet_id=10, properties={PR.CONTENT_TYPE: "text/plain"}),
                    P.MQTT_5)
    assert data == bytes.fromhex("3217 0003") + b"a/b" + bytes.fromhex("000a 0d 03000a") + b"text/plain" + b"hi"
    # options 0x2D = 0b0010_1101: Retain Handling 2, Retain As Published, No Local, QoS 1
    data = P.encode(P.Subscribe(1, (("a/#", 0x2D),), {PR.SUBSCRIPTION_IDENTIFIER: 5}), P.MQTT_5)
    assert data == bytes.fromhex("820b 0001 02 0b05 0003") + b"a/#" + b"\x2d"


def test_golden_connect_disconnect_and_acks() -> None:
    # CONNECT "c", Clean Start, keep alive 60, Session Expiry Interval 3600 (0x11 00000E10)
    data = P.encode(P.Connect(P.MQTT_5, "c", properties={PR.SESSION_EXPIRY_INTERVAL: 3600}))
    assert data == bytes.fromhex("1013 0004") + b"MQTT" + bytes.fromhex("05 02 003c 05 1100000e10 0001") + b"c"
    assert P.encode(P.PacketIdOnly(P.PUBREL, 7), P.MQTT_5) == b"\x62\x02\x00\x07"
    # PUBACK 0x97 (Quota exceeded) with Reason String "q": 0x1F 00 01 71
    data = P.encode(P.PacketIdOnly(P.PUBACK, 7, reason_code=0x97, properties={PR.REASON_STRING: "q"}), P.MQTT_5)
    assert data == bytes.fromhex("4008 0007 97 04 1f000171")
    # DISCONNECT 0x8E (Session taken over), no properties: the property length is left out
    assert P.encode(P.Disconnect(R.SESSION_TAKEN_OVER), P.MQTT_5) == b"\xe0\x01\x8e"
    assert _read5(b"\xe0\x01\x8e") == [P.Disconnect(0x8E)]


# one value per property and its encoding after the identifier (Table 2-4 data types)
PROPERTY_BYTES: list[tuple[int, Any, str]] = [
    (0x01, 1, "01"), (0x02, 0x01020304, "01020304"), (0x03, "ab", "0002 6162"), (0x08, "ab", "0002 6162"),
    (0x09, b"\x00", "0001 00"), (0x0B, 200, "c801"), (0x11, 5, "00000005"), (0x12, "ab", "0002 6162"),
    (0x13, 0x0102, "0102"), (0x15, "ab", "0002 6162"), (0x16, b"\x00", "0001 00"), (0x17, 0, "00"),
    (0x18, 7, "00000007"), (0x19, 1, "01"), (0x1A, "ab", "0002 6162"), (0x1C, "ab", "0002 6162"),
    (0x1F, "ab", "0002 6162"), (0x21, 0x0102, "0102"), (0x22, 0x0102, "0102"), (0x23, 0x0102, "0102"),
    (0x24, 1, "01"), (0x25, 0, "00"), (0x26, [("a", "b")], "0001 61 0001 62"), (0x27, 0x01020304, "01020304"),
    (0x28, 1, "01"), (0x29, 0, "00"), (0x2A, 1, "01"),
]
# where each property may appear (Table 2-4); "WILL" = the Will Properties of a CONNECT
NAMES = {"WILL": PR.WILL, **{name: t for t, name in P.PACKET_NAMES.items()}}
_ACKS = ["PUBACK", "PUBREC", "PUBREL", "PUBCOMP", "SUBACK", "UNSUBACK"]
PROPERTY_PACKETS: dict[int, list[str]] = {
    0x01: ["PUBLISH", "WILL"], 0x02: ["PUBLISH", "WILL"], 0x03: ["PUBLISH", "WILL"], 0x08: ["PUBLISH", "WILL"],
    0x09: ["PUBLISH", "WILL"], 0x0B: ["PUBLISH", "SUBSCRIBE"], 0x11: ["CONNECT", "CONNACK", "DISCONNECT"],
    0x12: ["CONNACK"], 0x13: ["CONNACK"], 0x15: ["CONNECT", "CONNACK", "AUTH"],
    0x16: ["CONNECT", "CONNACK", "AUTH"], 0x17: ["CONNECT"], 0x18: ["WILL"], 0x19: ["CONNECT"],
    0x1A: ["CONNACK"], 0x1C: ["CONNACK", "DISCONNECT"], 0x1F: ["CONNACK", *_ACKS, "DISCONNECT", "AUTH"],
    0x21: ["CONNECT", "CONNACK"], 0x22: ["CONNECT", "CONNACK"], 0x23: ["PUBLISH"], 0x24: ["CONNACK"],
    0x25: ["CONNACK"],
    0x26: ["CONNECT", "CONNACK", "PUBLISH", "WILL", *_ACKS, "SUBSCRIBE", "UNSUBSCRIBE", "DISCONNECT", "AUTH"],
    0x27: ["CONNECT", "CONNACK"], 0x28: ["CONNACK"], 0x29: ["CONNACK"], 0x2A: ["CONNACK"],
}


@pytest.mark.parametrize(("pid", "value", "hexed"), PROPERTY_BYTES,
                         ids=[PR.property_name(pid) for pid, _, _ in PROPERTY_BYTES])
def test_each_property_data_type(pid: int, value: Any, hexed: str) -> None:
    item = bytes((pid,)) + bytes.fromhex(hexed)
    assert encode_properties({pid: value}) == bytes((len(item),)) + item
    packet = NAMES[PROPERTY_PACKETS[pid][0]]
    expected = [value] if pid == PR.SUBSCRIPTION_IDENTIFIER and packet == P.PUBLISH else value
    assert decode_properties(bytes((len(item),)) + item, 0, len(item) + 1, packet, "X") == ({pid: expected},
                                                                                             len(item) + 1)


def test_allowed_table_matches_the_spec() -> None:
    expected: dict[int, set[int]] = {}
    for pid, where in PROPERTY_PACKETS.items():
        for name in where:
            expected.setdefault(NAMES[name], set()).add(pid)
    assert {k: set(v) for k, v in PR.ALLOWED.items()} == expected
    assert set(PR.SPEC) == set(PROPERTY_PACKETS)


# ---- malformed input --------------------------------------------------------------------------------


def test_unknown_and_truncated_properties() -> None:
    _check(_err(_publish_with(b"\x05\x00")), "PUBLISH", 4, "unknown property identifier 0x05")
    # an identifier is a variable byte integer: 0x80 0x01 is 128
    _check(_err(_publish_with(b"\x80\x01\x00")), "PUBLISH", 4, "unknown property identifier 0x80")
    # Message Expiry Interval with 2 of its 4 bytes inside the property length (the payload follows)
    _check(_err(_publish_with(b"\x02\x00\x00")), "PUBLISH", 5, "truncated Message Expiry Interval")
    _check(_err(_publish_with(b"\x23\x00")), "PUBLISH", 5, "truncated Topic Alias")
    _check(_err(_publish_with(b"\x01")), "PUBLISH", 5, "truncated Payload Format Indicator")
    _check(_err(_publish_with(b"\x03\x00\x05ab")), "PUBLISH", 5, "Content Type declares 5 bytes but only 2 remain")
    _check(_err(_publish_with(b"\x09\x00")), "PUBLISH", 5, "truncated length of Correlation Data")
    _check(_err(_publish_with(b"\x26\x00\x01k")), "PUBLISH", 8, "truncated length of User Property value")
    _check(_err(_publish_with(b"\x0b\x81")), "PUBLISH", 5, "truncated Subscription Identifier")


def test_property_length_past_the_end() -> None:
    _check(_err(_frame(0x30, _s("t") + b"\x09\x01\x00")), "PUBLISH", 3, "property length 9 exceeds the 2 bytes")
    _check(_err(_frame(0xE0, b"\x00\x05\x1f")), "DISCONNECT", 1, "property length 5 exceeds the 1 bytes")
    _check(_err(_frame(0x40, b"\x00\x01\x00\x7f")), "PUBACK", 3, "property length 127")


def test_property_length_past_the_end_offset_is_its_first_byte() -> None:
    _check(_err(_frame(0x30, _s("t") + b"\x80\x01\x01\x00")), "PUBLISH", 3, "property length 128 exceeds")


def test_variable_byte_integer_of_five_bytes() -> None:
    five = b"\x80\x80\x80\x80\x01"
    _check(_err(_frame(0x30, _s("t") + five)), "PUBLISH", 3, "property length has more than 4 bytes")
    _check(_err(_publish_with(b"\x0b" + five)), "PUBLISH", 5, "Subscription Identifier has more than 4 bytes")
    _check(_err(_subscribe_with(b"\x0b" + five, ("a", 0))), "SUBSCRIBE", 4,
           "Subscription Identifier has more than 4 bytes")
    e = _err(b"\x30" + five + b"\x00\x01t\x00")   # the remaining length itself
    assert e.offset == 5 and "remaining length has more than 4 bytes" in e.reason


def test_invalid_utf8_and_nul_in_properties() -> None:
    _check(_err(_publish_with(b"\x26\x00\x02\xc3\x28\x00\x00")), "PUBLISH", 7,
           "User Property name is not valid UTF-8")
    # a UTF-16 surrogate (U+D800) encoded in the value
    _check(_err(_publish_with(b"\x26\x00\x01k\x00\x03\xed\xa0\x80")), "PUBLISH", 10,
           "User Property value is not valid UTF-8")
    _check(_err(_frame(0x40, b"\x00\x01\x10\x06\x26\x00\x01\xff\x00\x00")), "PUBACK", 7,
           "User Property name is not valid UTF-8")
    _check(_err(_publish_with(b"\x03\x00\x03a\x00b")), "PUBLISH", 8, "Content Type contains U+0000")
    _check(_err(_connect_with(b"\x15\x00\x01\x00")), "CONNECT", 14, "Authentication Method contains U+0000")


def test_subscription_options_reserved_bits_qos3_retain_handling3() -> None:
    # options at body offset 6 (pid 0-1, property length 2, filter "a" 3-5); reserved bits: Malformed
    _check(_err(_subscribe_with(b"", ("a", 0x41))), "SUBSCRIBE", 6, "reserved bits", "0x41")
    _check(_err(_subscribe_with(b"", ("a", 0x80))), "SUBSCRIBE", 6, "reserved bits", "0x80")
    e = _err(_subscribe_with(b"", ("a", 0x30)))
    assert (e.packet, e.offset) == ("SUBSCRIBE", 6) and "Retain Handling 3" in e.reason
    e = _err(_subscribe_with(b"", ("a", 0x01), ("b", 0x03)))
    assert (e.packet, e.offset) == ("SUBSCRIBE", 10) and "QoS 3" in e.reason
    _check(_err(_frame(0x82, b"\x00\x01\x00" + _s("a"))), "SUBSCRIBE", 6, "missing subscription options")


@pytest.mark.parametrize("options", [0x03, 0x30])
def test_subscription_options_qos3_and_retain_handling3_are_protocol_errors(options: int) -> None:
    assert _err(_subscribe_with(b"", ("a", options))).code == R.PROTOCOL_ERROR


BAD_REASON_CODES: list[tuple[bytes, str, int, Any]] = [
    (_frame(0x62, b"\x00\x01\x10"), "PUBREL", 2, 0x10),
    (_frame(0x70, b"\x00\x01\x10"), "PUBCOMP", 2, 0x10),
    (_frame(0x40, b"\x00\x01\x92"), "PUBACK", 2, 0x92),
    (_frame(0x50, b"\x00\x01\x02\x00"), "PUBREC", 2, 0x02),
    (_frame(0xE0, b"\x01"), "DISCONNECT", 0, 0x01),
    (_frame(0xE0, b"\x84\x00"), "DISCONNECT", 0, 0x84),
    (_frame(0xF0, b"\x04\x00"), "AUTH", 0, 0x04),
]


@pytest.mark.parametrize(("data", "name", "offset", "code"), BAD_REASON_CODES, ids=_ids(BAD_REASON_CODES))
def test_reason_code_not_valid_for_the_packet(data: bytes, name: str, offset: int, code: int) -> None:
    _check(_err(data), name, offset, f"reason code {code:#04x} is not valid in {name}")


def test_auth_is_refused_below_level_5() -> None:
    auth = P.encode(P.Auth(R.CONTINUE_AUTHENTICATION, {PR.AUTHENTICATION_METHOD: "m"}), P.MQTT_5)
    for level in (P.MQTT_31, P.MQTT_311):
        _check(_err(b"\xf0\x00", level), "AUTH", 0, "MQTT 5")
        _check(_err(auth, level), "AUTH", 0, "MQTT 5")
    assert _read5(auth) == [P.Auth(R.CONTINUE_AUTHENTICATION, {PR.AUTHENTICATION_METHOD: "m"})]


def test_duplicate_properties() -> None:
    # twice in SUBSCRIBE: a Protocol Error at the second one
    _check(_err(_subscribe_with(b"\x0b\x01\x0b\x02", ("a", 0))), "SUBSCRIBE", 5,
           "Subscription Identifier (0x0b) appears twice", code=R.PROTOCOL_ERROR)
    # twice in PUBLISH (a server's, one per matching subscription): accepted in order
    (packet,) = _read5(_publish_with(b"\x0b\x02\x0b\x01"))
    assert isinstance(packet, P.Publish) and packet.properties == {PR.SUBSCRIPTION_IDENTIFIER: [2, 1]}
    assert packet.payload == b"payload"
    # any other property twice: a Protocol Error at the second one
    _check(_err(_publish_with(b"\x03\x00\x01a\x03\x00\x01b")), "PUBLISH", 8, "Content Type (0x03) appears twice",
           code=R.PROTOCOL_ERROR)
    _check(_err(_frame(0x40, b"\x00\x01\x80\x08\x1f\x00\x01a\x1f\x00\x01b")), "PUBACK", 8,
           "Reason String (0x1f) appears twice", code=R.PROTOCOL_ERROR)
    _check(_err(_connect_with(b"\x11\x00\x00\x00\x01\x11\x00\x00\x00\x02")), "CONNECT", 16,
           "Session Expiry Interval (0x11) appears twice", code=R.PROTOCOL_ERROR)
    _check(_err(_connect_with(b"", b"\x18\x00\x00\x00\x01\x18\x00\x00\x00\x01")), "CONNECT", 20,
           "Will Delay Interval (0x18) appears twice", code=R.PROTOCOL_ERROR)


NOT_ALLOWED: list[tuple[bytes, str, int, Any]] = [
    (_publish_with(b"\x11\x00\x00\x00\x01"), "PUBLISH", 4, "Session Expiry Interval (0x11)"),
    (_publish_with(b"\x18\x00\x00\x00\x01"), "PUBLISH", 4, "Will Delay Interval (0x18)"),
    (_connect_with(b"\x23\x00\x01"), "CONNECT", 11, "Topic Alias (0x23)"),
    (_connect_with(b"", b"\x0b\x01"), "CONNECT", 15, "Subscription Identifier (0x0b)"),
    (_subscribe_with(b"\x1f\x00\x00", ("a", 0)), "SUBSCRIBE", 3, "Reason String (0x1f)"),
    (_frame(0xA2, b"\x00\x01\x02\x0b\x01\x00\x01a"), "UNSUBSCRIBE", 3, "Subscription Identifier (0x0b)"),
    (_frame(0x90, b"\x00\x01\x02\x0b\x01\x00"), "SUBACK", 3, "Subscription Identifier (0x0b)"),
    (_frame(0xE0, b"\x00\x04\x03\x00\x01a"), "DISCONNECT", 2, "Content Type (0x03)"),
    (_frame(0xF0, b"\x18\x05\x11\x00\x00\x00\x01"), "AUTH", 2, "Session Expiry Interval (0x11)"),
]


@pytest.mark.parametrize(("data", "name", "offset", "label"), NOT_ALLOWED, ids=_ids(NOT_ALLOWED))
def test_property_not_allowed_in_the_packet(data: bytes, name: str, offset: int, label: str) -> None:
    e = _err(data)
    assert (e.packet, e.offset) == (name, offset) and f"property {label} is not allowed" in e.reason


@pytest.mark.parametrize(("data", "name", "offset", "label"), NOT_ALLOWED[:2], ids=_ids(NOT_ALLOWED[:2]))
def test_property_not_allowed_is_a_malformed_packet(data: bytes, name: str, offset: int, label: str) -> None:
    assert _err(data).code in (None, R.MALFORMED_PACKET)


# values out of range: 0 where it is not allowed (offset: the identifier), a byte other than 0 or 1 (the value)
BAD_VALUES: list[tuple[bytes, str, int, Any]] = [
    (_connect_with(b"\x21\x00\x00"), "CONNECT", 11, "Receive Maximum 0 is not allowed"),
    (_connect_with(b"\x27\x00\x00\x00\x00"), "CONNECT", 11, "Maximum Packet Size 0 is not allowed"),
    (_frame(0x20, b"\x00\x00\x03\x21\x00\x00"), "CONNACK", 3, "Receive Maximum 0 is not allowed"),
    (_publish_with(b"\x23\x00\x00"), "PUBLISH", 4, "Topic Alias 0 is not allowed"),
    (_publish_with(b"\x0b\x00"), "PUBLISH", 4, "Subscription Identifier 0 is not allowed"),
    (_subscribe_with(b"\x26\x00\x00\x00\x00\x0b\x00", ("a", 0)), "SUBSCRIBE", 8,
     "Subscription Identifier 0 is not allowed"),
    (_publish_with(b"\x01\x02"), "PUBLISH", 5, "Payload Format Indicator 2 is invalid"),
    (_connect_with(b"", b"\x01\xff"), "CONNECT", 16, "Payload Format Indicator 255 is invalid"),
    (_connect_with(b"\x17\x02"), "CONNECT", 12, "Request Problem Information 2 is invalid"),
    (_connect_with(b"\x19\x02"), "CONNECT", 12, "Request Response Information 2 is invalid"),
    (_frame(0x20, b"\x00\x00\x02\x24\x02"), "CONNACK", 4, "Maximum QoS 2 is invalid"),
]


@pytest.mark.parametrize(("data", "name", "offset", "message"), BAD_VALUES, ids=_ids(BAD_VALUES))
def test_property_value_out_of_range(data: bytes, name: str, offset: int, message: str) -> None:
    _check(_err(data), name, offset, message, code=R.PROTOCOL_ERROR)


def test_packet_structure_errors() -> None:
    _check(_err(_frame(0x40, b"\x00\x01\x00\x00\xff")), "PUBACK", 4, "1 unexpected bytes after the properties")
    _check(_err(_frame(0xF0, b"\x00\x00\xff\xff")), "AUTH", 2, "2 unexpected bytes after the properties")
    body = _connect_with(b"")[2:] + b"!"
    _check(_err(_frame(0x10, body)), "CONNECT", len(body) - 1, "1 unexpected bytes after the payload")
    _check(_err(_frame(0x82, b"\x00\x01\x00")), "SUBSCRIBE", 3, "no topic filters", code=R.PROTOCOL_ERROR)
    _check(_err(_frame(0xA2, b"\x00\x01\x00")), "UNSUBSCRIBE", 3, "no topic filters", code=R.PROTOCOL_ERROR)
    _check(_err(_frame(0x40, b"\x00\x00")), "PUBACK", 0, "packet identifier 0")
    _check(_err(_frame(0x40, b"\x00")), "PUBACK", 0, "truncated packet identifier")
    _check(_err(_frame(0x36, _s("t") + b"\x00\x01\x00")), "PUBLISH", 0, "QoS 3")
    _check(_err(_frame(0x38, _s("t") + b"\x00")), "PUBLISH", 0, "DUP set on a QoS 0")
    _check(_err(_frame(0x30, _s("t"))), "PUBLISH", 3, "truncated property length")
    for first in (0xE1, 0xF2, 0x42, 0x60, 0xA0):
        assert "fixed header flags" in _err(_frame(first, b"\x00\x01")).reason
    _check(_err(_frame(0xC0, b"\x00")), "PINGREQ", 1, "remaining length 1 is invalid")
    # a 3.1.1 CONNECT body labelled level 5 lacks the property length: its client id length is misread
    level4 = bytearray(P.encode(P.Connect(P.MQTT_311, "c")))
    level4[8] = 5
    _check(_err(bytes(level4)), "CONNECT", 11, "client identifier declares")


def test_connack_trailing_bytes_rejected() -> None:
    _check(_err(_frame(0x20, b"\x00\x00\x00\xff")), "CONNACK", 3, "unexpected bytes")
