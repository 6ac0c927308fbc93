"""MQTT 5.0 codec fuzzing (tests/test_packets5.py has the round trips, golden bytes and typed errors):
random properties round-trip, random and mutated bytes give a packet or a ProtocolError, nothing else."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.mqtt import packets as P
from bridge.mqtt import properties as PR
from bridge.mqtt.properties import Props, decode_properties, encode_properties

R = P.Reason


def _frame(first: int, body: bytes) -> bytes:
    return bytes((first,)) + P.encode_length(len(body)) + body

# ---- fuzzing ----------------------------------------------------------------------------------------

text = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=12)
users = st.lists(st.tuples(text, text), min_size=1, max_size=4)
pids = st.integers(1, 65535)
u16 = st.integers(0, 65535)
u32 = st.integers(0, 2**32 - 1)
sub_ids = st.integers(1, 268_435_455)


def _prop_dicts(**optional: st.SearchStrategy[Any]) -> st.SearchStrategy[Props]:
    ids = {getattr(PR, name.upper()): strategy for name, strategy in optional.items()}
    return st.fixed_dictionaries({}, optional=ids)


def _props(**optional: st.SearchStrategy[Any]) -> st.SearchStrategy[Props | None]:
    return _prop_dicts(**optional).map(lambda d: d or None)


publish_prop_dicts = _prop_dicts(payload_format_indicator=st.integers(0, 1), message_expiry_interval=u32,
                                 content_type=text, response_topic=text, correlation_data=st.binary(max_size=20),
                                 subscription_identifier=st.lists(sub_ids, min_size=1, max_size=4),
                                 topic_alias=st.integers(1, 65535), user_property=users)
publish_props = publish_prop_dicts.map(lambda d: d or None)
ack_props = _props(reason_string=text, user_property=users)
_PUB_CODES = [0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99]
ACK_CODES = {P.PUBACK: _PUB_CODES, P.PUBREC: _PUB_CODES, P.PUBREL: [0x00, 0x92], P.PUBCOMP: [0x00, 0x92]}
options = st.builds(lambda q, nl, rap, rh: q | nl << 2 | rap << 3 | rh << 4,
                    st.integers(0, 2), st.integers(0, 1), st.integers(0, 1), st.integers(0, 2))

packets5 = st.one_of(
    st.builds(lambda topic, payload, qos, retain, dup, pid, props: P.Publish(
        topic, payload, qos, retain, dup and qos > 0, pid if qos else None, props),
        text, st.binary(max_size=40), st.integers(0, 2), st.booleans(), st.booleans(), pids, publish_props),
    st.sampled_from(list(ACK_CODES)).flatmap(lambda t: st.builds(
        lambda pid, code, props: P.PacketIdOnly(t, pid, False, code, props),
        pids, st.sampled_from(ACK_CODES[t]), ack_props)),
    st.builds(P.Subscribe, pids, st.lists(st.tuples(text.filter(bool), options), min_size=1, max_size=3).map(tuple),
              _props(subscription_identifier=sub_ids, user_property=users)),
    st.builds(P.Unsubscribe, pids, st.lists(text.filter(bool), min_size=1, max_size=3).map(tuple),
              _props(user_property=users)),
    st.builds(P.Suback, pids, st.lists(st.sampled_from([0, 1, 2, 0x80, 0x87, 0x8F, 0x9E, 0xA2]), min_size=1,
                                       max_size=4).map(tuple), ack_props),
    st.builds(P.Unsuback, pids, st.lists(st.sampled_from([0, 0x11, 0x80, 0x87, 0x8F]), min_size=1,
                                         max_size=4).map(tuple), ack_props),
    st.builds(P.Connack, st.sampled_from([0x00, 0x80, 0x84, 0x86, 0x87, 0x8A, 0x9C]), st.booleans(),
              _props(session_expiry_interval=u32, assigned_client_identifier=text, server_keep_alive=u16,
                     receive_maximum=st.integers(1, 65535), maximum_qos=st.integers(0, 1),
                     topic_alias_maximum=u16, reason_string=text, user_property=users)),
    st.builds(P.Disconnect, st.sampled_from([0x00, 0x04, 0x81, 0x8B, 0x8E, 0x9C, 0xA2]),
              _props(session_expiry_interval=u32, server_reference=text, reason_string=text, user_property=users)),
    st.builds(P.Auth, st.sampled_from([0x00, 0x18, 0x19]),
              _props(authentication_method=text, authentication_data=st.binary(max_size=20), reason_string=text,
                     user_property=users)),
    st.builds(lambda *fields: P.Connect(P.MQTT_5, *fields),
              text, st.booleans(), u16,
              st.none() | st.builds(P.Will, text.filter(bool), st.binary(max_size=20), st.integers(0, 2),
                                    st.booleans(), _props(will_delay_interval=u32, content_type=text,
                                                          payload_format_indicator=st.integers(0, 1),
                                                          user_property=users)),
              st.none() | text, st.none() | st.binary(max_size=10),
              _props(session_expiry_interval=u32, receive_maximum=st.integers(1, 65535),
                     maximum_packet_size=st.integers(1, 2**32 - 1), request_problem_information=st.integers(0, 1),
                     authentication_method=text, user_property=users)),
    st.sampled_from([P.Bare(P.PINGREQ), P.Bare(P.PINGRESP)]),
)


@given(publish_prop_dicts, st.binary(max_size=5), st.binary(max_size=5))
@settings(max_examples=300)
def test_publish_properties_round_trip(props: Props, before: bytes, after: bytes) -> None:
    data = encode_properties(props)
    buf = before + data + after   # decoded in place: only [pos, end) is read
    assert decode_properties(buf, len(before), len(before) + len(data), P.PUBLISH, "PUBLISH") == (
        props, len(before) + len(data))


@given(st.lists(packets5, min_size=1, max_size=6), st.data())
@settings(max_examples=120, suppress_health_check=[HealthCheck.too_slow])
def test_level5_stream_round_trip_in_arbitrary_chunks(packets: list[P.Packet], data: st.DataObject) -> None:
    stream = b"".join(P.encode(p, P.MQTT_5) for p in packets)
    reader = P.PacketReader(level=P.MQTT_5)
    out: list[P.Packet] = []
    pos = 0
    while pos < len(stream):
        step = data.draw(st.integers(1, len(stream) - pos))
        out.extend(reader.feed(stream[pos : pos + step]))
        pos += step
    assert out == packets and reader.buffered == 0


FOLLOWING = P.Publish("next", b"ok", 1, packet_id=1, properties={PR.USER_PROPERTY: [("a", "b")]})


def _feed_hostile(data: bytes) -> None:
    """Decode or ProtocolError, nothing else; after an error a new reader serves the next packet."""
    try:
        P.PacketReader(max_size=10_000, level=P.MQTT_5).feed(data)
    except P.ProtocolError as e:
        assert e.reason
        assert P.PacketReader(level=P.MQTT_5).feed(P.encode(FOLLOWING, P.MQTT_5)) == [FOLLOWING]


@given(st.binary(max_size=300))
@settings(max_examples=1000)
def test_random_bytes_only_protocol_errors(blob: bytes) -> None:
    _feed_hostile(blob)


@given(packets5, st.integers(0, 10_000), st.integers(0, 255))
@settings(max_examples=700)
def test_mutated_packets_only_protocol_errors(packet: P.Packet, where: int, value: int) -> None:
    data = bytearray(P.encode(packet, P.MQTT_5))
    data[where % len(data)] = value
    _feed_hostile(bytes(data))


@given(packets5, st.data())
@settings(max_examples=300)
def test_truncated_packets(packet: P.Packet, data: st.DataObject) -> None:
    encoded = P.encode(packet, P.MQTT_5)
    header = 2
    while encoded[header - 1] & 0x80:   # the remaining length's continuation bits
        header += 1
    body = encoded[header:]
    # a prefix is incomplete, never an error
    cut = data.draw(st.integers(0, len(encoded) - 1))
    assert P.PacketReader(level=P.MQTT_5).feed(encoded[:cut]) == []
    # a shortened body in a complete frame decodes or is a ProtocolError
    short = data.draw(st.integers(0, len(body)))
    _feed_hostile(_frame(encoded[0], body[:short]))
