"""MQTT codec: the MQTT 3.1/3.1.1 byte layouts, round trips, and the decoder on hostile input."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.mqtt import packets as P

# ---- golden bytes -------------------------------------------------------------------------------


def test_connect_31_golden_bytes() -> None:
    # MQTT V3.1, CONNECT variable header: protocol name "MQIsdp", version 3, flags, keep alive 10
    pkt = P.Connect(P.MQTT_31, "abc", clean_session=True, keepalive=10)
    data = P.encode(pkt)
    assert data == bytes([0x10, 17, 0, 6]) + b"MQIsdp" + bytes([3, 0x02, 0, 10, 0, 3]) + b"abc"
    assert P.PacketReader().feed(data) == [pkt]


def test_connect_311_with_will_user_password() -> None:
    pkt = P.Connect(
        P.MQTT_311,
        "dev-1",
        clean_session=False,
        keepalive=30,
        will=P.Will("w/t", b"bye", 1, True),
        username="u",
        password=b"p\x00w",
    )
    data = P.encode(pkt)
    # flags: user 0x80, password 0x40, will retain 0x20, will QoS 1 -> 0x08, will 0x04
    assert data[2:9] == b"\x00\x04MQTT\x04"
    assert data[9] == 0x80 | 0x40 | 0x20 | 0x08 | 0x04
    assert P.PacketReader().feed(data) == [pkt]


def test_publish_qos1_golden_bytes() -> None:
    data = P.encode(P.Publish("a/b", b"hi", qos=1, retain=True, packet_id=10))
    assert data == bytes([0x33, 9, 0, 3]) + b"a/b" + bytes([0, 10]) + b"hi"


def test_remaining_length_encoding_boundaries() -> None:
    for n, enc in (
        (0, b"\x00"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (16383, b"\xff\x7f"),
        (16384, b"\x80\x80\x01"),
        (2097151, b"\xff\xff\x7f"),
        (2097152, b"\x80\x80\x80\x01"),
        (268435455, b"\xff\xff\xff\x7f"),
    ):
        assert P.encode_length(n) == enc


def test_acks_and_bare_packets_round_trip() -> None:
    for t in (P.PUBACK, P.PUBREC, P.PUBREL, P.PUBCOMP, P.UNSUBACK):
        data = P.encode_ack(t, 513)
        assert data[1:] == b"\x02\x02\x01"
        assert P.PacketReader().feed(data) == [P.PacketIdOnly(t, 513)]
    assert P.encode_ack(P.PUBREL, 1)[0] == 0x62
    for t in (P.PINGREQ, P.PINGRESP, P.DISCONNECT):
        assert P.PacketReader().feed(bytes([t << 4, 0])) == [P.Bare(t)]


# ---- round trips (hypothesis) -------------------------------------------------------------------

text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)
topic_names = text.filter(lambda t: t != "")
pids = st.integers(1, 65535)

publishes = st.builds(
    lambda topic, payload, qos, retain, dup, pid: P.Publish(
        topic, payload, qos, retain, dup if qos else False, pid if qos else None
    ),
    topic_names,
    st.binary(max_size=300),
    st.integers(0, 2),
    st.booleans(),
    st.booleans(),
    pids,
)
connects = st.builds(
    lambda level, cid, clean, ka, will, user, pw: P.Connect(
        level, cid, clean, ka, will, user, pw if user is not None else None
    ),
    st.sampled_from([P.MQTT_31, P.MQTT_311]),
    text,
    st.booleans(),
    st.integers(0, 65535),
    st.none() | st.builds(P.Will, topic_names, st.binary(max_size=50), st.integers(0, 2), st.booleans()),
    st.none() | text,
    st.none() | st.binary(max_size=20),
)
subscribes = st.builds(
    P.Subscribe, pids, st.lists(st.tuples(topic_names, st.integers(0, 2)), min_size=1, max_size=5).map(tuple)
)
unsubscribes = st.builds(P.Unsubscribe, pids, st.lists(topic_names, min_size=1, max_size=5).map(tuple))
subacks = st.builds(P.Suback, pids, st.lists(st.sampled_from([0, 1, 2, 0x80]), max_size=5).map(tuple))
acks = st.builds(P.PacketIdOnly, st.sampled_from([P.PUBACK, P.PUBREC, P.PUBREL, P.PUBCOMP, P.UNSUBACK]), pids)
any_packet = st.one_of(
    publishes,
    connects,
    subscribes,
    unsubscribes,
    subacks,
    acks,
    st.builds(P.Connack, st.integers(0, 5), st.booleans()),
    st.sampled_from([P.Bare(P.PINGREQ), P.Bare(P.PINGRESP), P.Bare(P.DISCONNECT)]),
)


@given(st.lists(any_packet, min_size=1, max_size=8), st.data())
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_stream_round_trip_in_arbitrary_chunks(packets: list[P.Packet], data: st.DataObject) -> None:
    stream = b"".join(P.encode(p) for p in packets)
    reader = P.PacketReader()
    out: list[P.Packet] = []
    pos = 0
    while pos < len(stream):
        step = data.draw(st.integers(1, max(1, len(stream) - pos)))
        out.extend(reader.feed(stream[pos : pos + step]))
        pos += step
    assert out == packets
    assert reader.buffered == 0


@given(st.binary(max_size=400))
@settings(max_examples=2000)
def test_decoder_raises_only_protocol_errors(blob: bytes) -> None:
    for level in (P.MQTT_31, P.MQTT_311):
        reader = P.PacketReader(max_size=10_000, level=level)
        try:
            reader.feed(blob)
        except P.ProtocolError:
            pass


@given(any_packet, st.integers(0, 10_000), st.integers(0, 255))
@settings(max_examples=1000)
def test_single_byte_mutation_never_escapes_as_other_exception(packet: P.Packet, where: int, value: int) -> None:
    data = bytearray(P.encode(packet))
    data[where % len(data)] = value
    try:
        P.PacketReader(max_size=100_000).feed(bytes(data))
    except P.ProtocolError:
        pass


@given(publishes)
def test_every_truncation_is_incomplete_not_an_error(packet: P.Publish) -> None:
    data = P.encode(packet)
    for cut in range(len(data)):
        assert P.PacketReader().feed(data[:cut]) == []


# ---- malformed input: each is a ProtocolError with a reason ----------------------------------------


def _err(data: bytes, level: int = P.MQTT_311, max_size: int = P.MAX_REMAINING_LENGTH) -> P.ProtocolError:
    with pytest.raises(P.ProtocolError) as info:
        P.PacketReader(max_size, level).feed(data)
    return info.value


def test_fifth_remaining_length_byte_rejected() -> None:
    e = _err(bytes([0x30, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]))
    assert "more than 4 bytes" in e.reason


def test_oversize_rejected_before_buffering() -> None:
    e = _err(bytes([0x30]) + P.encode_length(2_000_000), max_size=1_000_000)
    assert isinstance(e, P.PacketTooLarge)
    assert "2000000" in e.reason


@pytest.mark.parametrize("first", [0x60, 0x80, 0xA0, 0x11, 0x41, 0x52, 0x72, 0xC1, 0xE2])
def test_bad_fixed_header_flags(first: int) -> None:
    body = b"\x00\x01" if first >> 4 in (4, 5, 6, 7) else (b"\x00\x01\x00\x01a\x00" if first >> 4 in (8, 10) else b"")
    e = _err(bytes([first]) + P.encode_length(len(body)) + body)
    assert "flags" in e.reason or "remaining length" in e.reason


def test_mqtt31_allows_dup_on_pubrel_and_subscribe_retries() -> None:
    assert P.PacketReader(level=P.MQTT_31).feed(bytes([0x6A, 2, 0, 7])) == [P.PacketIdOnly(P.PUBREL, 7, dup=True)]
    with pytest.raises(P.ProtocolError):
        P.PacketReader(level=P.MQTT_311).feed(bytes([0x6A, 2, 0, 7]))


def test_unknown_packet_types() -> None:
    assert "unknown packet type 0" in _err(bytes([0x00, 0])).reason
    assert "unknown packet type 15" in _err(bytes([0xF0, 0])).reason


def test_invalid_utf8_topic_names_offset() -> None:
    body = b"\x00\x03a\xc0\xaf" + b"x"  # overlong encoding of '/'
    e = _err(bytes([0x30, len(body)]) + body)
    assert "not valid UTF-8" in e.reason and e.offset == 3


def test_surrogate_and_nul_in_strings() -> None:
    body = b"\x00\x03\xed\xa0\x80"  # U+D800 encoded
    assert "not valid UTF-8" in _err(bytes([0x30, len(body)]) + body).reason
    body = b"\x00\x03a\x00b"
    assert "U+0000" in _err(bytes([0x30, len(body)]) + body).reason


def test_truncated_string_in_complete_packet() -> None:
    body = b"\x00\x09abc"
    e = _err(bytes([0x30, len(body)]) + body)
    assert "declares 9 bytes" in e.reason


def test_packet_id_zero_rejected() -> None:
    assert "identifier 0" in _err(bytes([0x40, 2, 0, 0])).reason
    body = b"\x00\x01a\x00\x00"
    assert "identifier 0" in _err(bytes([0x32, len(body)]) + body).reason


def test_qos3_and_dup_on_qos0() -> None:
    body = b"\x00\x01a\x00\x01"
    assert "QoS 3" in _err(bytes([0x36, len(body)]) + body).reason
    body = b"\x00\x01a"
    assert "DUP" in _err(bytes([0x38, len(body)]) + body).reason


def test_connect_errors() -> None:
    good = P.encode(P.Connect(P.MQTT_311, "c"))
    bad_proto = good.replace(b"MQTT\x04", b"MQTT\x06")   # level 5 is MQTT 5.0 (tests/test_packets5.py)
    e = _err(bad_proto)
    assert e.connack == P.ConnackCode.UNACCEPTABLE_PROTOCOL_VERSION
    e = _err(good.replace(b"\x00\x04MQTT\x04", b"\x00\x04HTTP\x04"))
    assert e.connack == P.ConnackCode.UNACCEPTABLE_PROTOCOL_VERSION
    flags_at = 9
    reserved = bytearray(good)
    reserved[flags_at] |= 0x01
    assert "reserved connect flag" in _err(bytes(reserved)).reason
    will_qos_no_will = bytearray(good)
    will_qos_no_will[flags_at] |= 0x08
    assert "without the will flag" in _err(bytes(will_qos_no_will)).reason
    pw_no_user = bytearray(good)
    pw_no_user[flags_at] |= 0x40
    assert "password flag" in _err(bytes(pw_no_user)).reason


def test_subscribe_errors() -> None:
    body = b"\x00\x01"
    assert "no topic filters" in _err(bytes([0x82, len(body)]) + body).reason
    body = b"\x00\x01\x00\x01a\x03"
    assert "requested QoS" in _err(bytes([0x82, len(body)]) + body).reason
    body = b"\x00\x01\x00\x01a"
    assert "missing requested QoS" in _err(bytes([0x82, len(body)]) + body).reason


def test_fixed_length_packets_checked() -> None:
    assert "remaining length 3" in _err(bytes([0x40, 3, 0, 1, 0])).reason
    assert "remaining length 1" in _err(bytes([0xC0, 1, 0])).reason


def test_server_reader_takes_only_a_connect_of_at_most_connect_max_first():
    """A server's reader (``connect_max``) refuses a first byte other than CONNECT's as soon as it arrives,
    and a CONNECT announcing more than ``connect_max`` once its length is read; after the CONNECT,
    ``max_size`` applies."""
    with pytest.raises(P.ProtocolError, match="PUBLISH before CONNECT"):
        P.PacketReader(1000, connect_max=100).feed(b"\x30")
    with pytest.raises(P.ProtocolError, match="type 0 before CONNECT"):
        P.PacketReader(1000, connect_max=100).feed(b"\x00")
    with pytest.raises(P.PacketTooLarge, match="before CONNECT, remaining length 101 exceeds the limit of 100"):
        P.PacketReader(1000, connect_max=100).feed(b"\x10" + P.encode_length(101))
    connect = P.encode(P.Connect(P.MQTT_311, "c"))
    publish = P.encode(P.Publish("t", b"x" * 500))
    reader = P.PacketReader(1000, connect_max=100)
    assert reader.feed(connect[:3]) == []
    assert reader.feed(connect[3:] + publish) == [P.Connect(P.MQTT_311, "c"), P.Publish("t", b"x" * 500)]
    assert reader.connect_max is None
    with pytest.raises(P.PacketTooLarge):
        reader.feed(P.encode(P.Publish("t", b"x" * 1000)))
    # a client's reader expects no CONNECT first
    assert P.PacketReader().feed(publish) == [P.Publish("t", b"x" * 500)]


def test_largest_connect_fits_max_connect_length():
    will = P.Will("w" * 65_535, b"m" * 65_535)
    data = P.encode(P.Connect(P.MQTT_31, "i" * 65_535, True, 60, will, "u" * 65_535, b"p" * 65_535))
    reader = P.PacketReader(10 * 1024 * 1024, level=P.MQTT_31, connect_max=P.MAX_CONNECT_LENGTH)
    (packet,) = reader.feed(data)
    assert isinstance(packet, P.Connect) and len(data) - 1 - 3 == P.MAX_CONNECT_LENGTH


def test_packets_before_a_bad_one_in_the_same_bytes_are_returned() -> None:
    """A good PUBLISH and a broken packet read together: the PUBLISH is returned (the broker handles it,
    nothing is lost), the error is kept for the caller, and the next feed raises it."""
    reader = P.PacketReader()
    good = P.encode(P.Publish("a/b", b"kept", 1, packet_id=3))
    out = reader.feed(good + b"\x00\x00")   # packet type 0 does not exist
    assert out == [P.Publish("a/b", b"kept", 1, packet_id=3)]
    assert reader.error is not None and "unknown packet type 0" in reader.error.reason
    with pytest.raises(P.ProtocolError):
        reader.feed(b"")
