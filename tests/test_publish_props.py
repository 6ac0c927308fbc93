"""The PUBLISH property fast path (bridge/mqtt/publish_props.py) against the general decoder: same
properties where it takes a block, the general decoder's verdict (and error) where it gives up, and the
forwarded items exactly the client's bytes minus Topic Alias and Message Expiry Interval; then through a
running broker with a raw publisher that interleaves them."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.mqtt import packets as P
from bridge.mqtt import properties as PR
from bridge.mqtt.incoming import forwarded
from bridge.mqtt.properties import ProtocolError, decode_properties
from bridge.mqtt.publish_props import decode_publish_properties
from tests.support.mqtt5_client import V5
from tests.support.mqtt_clients import RawClient

NOT_FORWARDED = (PR.TOPIC_ALIAS, PR.MESSAGE_EXPIRY_INTERVAL)


def _s(raw: bytes) -> bytes:
    return len(raw).to_bytes(2, "big") + raw


text = st.text(max_size=8).map(lambda t: t.encode("utf-8", "surrogatepass"))
# one property item as bytes: valid ones of every PUBLISH kind, and some that are not (bad UTF-8, U+0000,
# values out of range, identifiers a PUBLISH may not carry, a Subscription Identifier)
item = st.one_of(
    st.tuples(text, text).map(lambda kv: b"\x26" + _s(kv[0]) + _s(kv[1])),
    st.integers(0, 65535).map(lambda v: b"\x23" + v.to_bytes(2, "big")),
    st.integers(0, 2**32 - 1).map(lambda v: b"\x02" + v.to_bytes(4, "big")),
    st.integers(0, 3).map(lambda v: b"\x01" + bytes((v,))),
    text.map(lambda t: b"\x03" + _s(t)),
    text.map(lambda t: b"\x08" + _s(t)),
    st.binary(max_size=6).map(lambda b: b"\x09" + _s(b)),
    st.sampled_from([b"\x0b\x05", b"\x11\x00\x00\x00\x01", b"\x26\x00\x02\xc3\x28\x00\x00", b"\x26\x00\x01\x00\x00\x00",
                     b"\x03\x00\x05ab", b"\x81\x01", b"\x26\x00"]),
)


def _block(items: list[bytes], tail: bytes) -> bytes:
    body = b"".join(items)
    return P.encode_length(len(body)) + body + tail


def _compare(buf: bytes) -> None:
    fast = decode_publish_properties(buf, 0, len(buf))
    try:
        general = decode_properties(buf, 0, len(buf), P.PUBLISH, "PUBLISH")
    except ProtocolError:
        assert fast is None   # an error is always the general decoder's to name
        return
    if fast is None:
        return   # a shape the fast path leaves to the general decoder (e.g. a Subscription Identifier)
    props, forward, stop = fast
    assert (props, stop) == general
    assert list(props) == list(general[0])   # the order of first appearance too
    again, end = decode_properties(P.encode_length(len(forward)) + forward, 0, len(forward) + 4, P.PUBLISH, "X")
    assert again == (forwarded(props, 0.0)[0] or {})


def _whole(item: bytes) -> bool:
    """One property item that reads as exactly itself."""
    try:
        decode_properties(P.encode_length(len(item)) + item, 0, len(item) + 4, P.PUBLISH, "X")
    except ProtocolError:
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(st.lists(item, max_size=6), st.binary(max_size=4))
def test_the_fast_path_agrees_with_the_general_decoder(items, tail):
    buf = _block(items, tail)
    _compare(buf)
    fast = decode_publish_properties(buf, 0, len(buf))
    if fast is not None and all(_whole(i) for i in items):
        # forwarded: the client's own bytes, in its order, without alias and expiry (when every item is whole
        # on its own: a length field that runs into the next items makes them one value)
        expected = b"".join(i for i in items if i[0] not in NOT_FORWARDED)
        assert fast[1] == expected


@settings(max_examples=400, deadline=None)
@given(st.lists(item, max_size=5), st.integers(0, 60), st.integers(0, 255))
def test_a_damaged_block_is_never_taken_for_something_else(items, at, byte):
    buf = bytearray(_block(items, b"payload"))
    if buf:
        buf[at % len(buf)] = byte
    _compare(bytes(buf))


def test_truncated_blocks_give_the_general_decoders_error():
    buf = _block([b"\x26" + _s(b"key") + _s(b"value")], b"")
    for cut in range(1, len(buf)):
        part = buf[:cut]
        assert decode_publish_properties(part, 0, len(part)) is None
        try:
            decode_properties(part, 0, len(part), P.PUBLISH, "PUBLISH")
        except ProtocolError:
            continue
        raise AssertionError(f"a block cut at {cut} decoded")


def test_interleaved_alias_and_expiry_reach_a_subscriber_with_user_properties_in_order(gateway):
    """A raw MQTT 5 publisher sends User Properties around a Topic Alias and a Message Expiry Interval (and
    a second publication by the alias alone): a paho MQTT 5 subscriber gets every User Property in the
    client's order, duplicates kept, the Content Type, and the remaining expiry; never the alias."""
    sub = V5(gateway.port, "fp-sub").connect()
    assert sub.subscribe("fp/#", 0) == [0]
    raw = RawClient(gateway.port)
    raw.send(P.encode(P.Connect(5, "fp-pub", properties={PR.TOPIC_ALIAS_MAXIMUM: 5})))
    raw.reader.level = 5
    assert isinstance(raw.recv(), P.Connack)
    items = [b"\x26" + _s(b"z") + _s(b"1"), b"\x23\x00\x03", b"\x26" + _s(b"a") + _s(b"2"),
             b"\x02\x00\x00\x0e\x10", b"\x03" + _s(b"text/x"), b"\x26" + _s(b"z") + _s(b"3")]
    for topic, payload in ((b"fp/t", b"one"), (b"", b"two")):
        body = _s(topic) + _block(items, payload)
        raw.send(b"\x30" + P.encode_length(len(body)) + body)
    got = sub.wait(2)
    assert [m.payload for m in got] == [b"one", b"two"] and {m.topic for m in got} == {"fp/t"}
    for m in got:
        assert m.properties.UserProperty == [("z", "1"), ("a", "2"), ("z", "3")]
        assert m.properties.ContentType == "text/x"
        assert 3590 <= m.properties.MessageExpiryInterval <= 3600
        assert not hasattr(m.properties, "TopicAlias")
    raw.close()
    sub.close()
