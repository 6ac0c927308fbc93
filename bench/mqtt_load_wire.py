"""The load generator's MQTT 3.1.1 and 5.0 wire bytes, hand-rolled (CONNECT, SUBSCRIBE, PUBLISH and the
packet type numbers the clients scan for), and ``selfcheck``, which decodes them with mqbridge's own codec
(bridge.mqtt.packets) to show they are well formed."""
from __future__ import annotations

from bridge.mqtt import packets as P

CONNACK_T, PUBLISH_T, PUBACK_T, PUBREC_T, PUBREL_T, PUBCOMP_T, SUBACK_T, PINGRESP_T = 2, 3, 4, 5, 6, 7, 9, 13
PINGREQ = b"\xc0\x00"
DISCONNECT = b"\xe0\x00"
TS_BYTES = 8   # latency payloads start with a CLOCK_MONOTONIC timestamp in ns, big-endian


def varlen(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _s(text: str) -> bytes:
    raw = text.encode()
    return len(raw).to_bytes(2, "big") + raw


def connect_packet(client_id: str, clean: bool = True, keepalive: int = 0, v5: bool = False) -> bytes:
    """MQTT 5: a persistent session (clean False) asks for a Session Expiry Interval of 0xFFFFFFFF."""
    props = b""
    if v5:
        props = b"\x00" if clean else b"\x05\x11\xff\xff\xff\xff"
    body = _s("MQTT") + bytes((5 if v5 else 4, 0x02 if clean else 0)) + keepalive.to_bytes(2, "big") + props + \
        _s(client_id)
    return b"\x10" + varlen(len(body)) + body


def subscribe_packet(packet_id: int, topic_filter: str, qos: int, v5: bool = False) -> bytes:
    body = packet_id.to_bytes(2, "big") + (b"\x00" if v5 else b"") + _s(topic_filter) + bytes((qos,))
    return b"\x82" + varlen(len(body)) + body


def publish_properties(user_props: int = 0, alias: int = 0) -> bytes:
    """An MQTT 5 PUBLISH's properties with their length: ``user_props`` pairs ("k<i>", "v<i>"), a Topic
    Alias."""
    items = b"".join(b"\x26" + _s(f"k{i}") + _s(f"value-{i}") for i in range(user_props))
    if alias:
        items += b"\x23" + alias.to_bytes(2, "big")
    return varlen(len(items)) + items


def publish_parts(topic: str, payload_len: int, qos: int, props: bytes = b"") -> tuple[bytes, int]:
    """Fixed header + topic of a PUBLISH (the packet id, for QoS > 0, the MQTT 5 ``props`` and the payload
    follow)."""
    t = _s(topic)
    remaining = len(t) + (2 if qos else 0) + len(props) + payload_len
    return bytes((0x30 | (qos << 1),)) + varlen(remaining) + t, remaining


def publish_packet(topic: str, payload: bytes, qos: int = 0, packet_id: int = 0, props: bytes = b"") -> bytes:
    head, _ = publish_parts(topic, len(payload), qos, props)
    return head + (packet_id.to_bytes(2, "big") if qos else b"") + props + payload


def selfcheck() -> None:
    """Decode the hand-rolled packets with mqbridge's codec; an AssertionError names the first mismatch."""
    r = P.PacketReader()
    got = r.feed(connect_packet("c1", False, 30) + subscribe_packet(7, "b/#", 1)
                 + publish_packet("b/1", b"x" * 200, 1, 9) + publish_packet("b/2", b"y" * 64, 0)
                 + publish_packet("b/3", b"z" * 300, 2, 65535))
    assert got[0] == P.Connect(4, "c1", False, 30), got[0]
    assert got[1] == P.Subscribe(7, (("b/#", 1),)), got[1]
    assert got[2] == P.Publish("b/1", b"x" * 200, 1, packet_id=9), got[2]
    assert got[3] == P.Publish("b/2", b"y" * 64, 0), got[3]
    assert got[4] == P.Publish("b/3", b"z" * 300, 2, packet_id=65535), got[4]
    assert P.encode_publish(b"b/1", b"x" * 200, 1, False, False, 9) == publish_packet("b/1", b"x" * 200, 1, 9)
    r5 = P.PacketReader()
    got = r5.feed(connect_packet("c5", False, 0, v5=True))
    assert got[0] == P.Connect(5, "c5", False, 0, properties={0x11: 0xFFFFFFFF}), got[0]
    r5.level = 5
    got = r5.feed(subscribe_packet(3, "b/#", 1, v5=True) + publish_packet("b/1", b"x", 1, 7, publish_properties(2, 1))
                  + publish_packet("", b"y", 0, 0, publish_properties(0, 1)))
    assert got[0] == P.Subscribe(3, (("b/#", 1),)), got[0]
    assert got[1] == P.Publish("b/1", b"x", 1, packet_id=7, properties={
        0x26: [("k0", "value-0"), ("k1", "value-1")], 0x23: 1}), got[1]
    assert got[2] == P.Publish("", b"y", 0, properties={0x23: 1}), got[2]
    print("selfcheck: hand-rolled CONNECT/SUBSCRIBE/PUBLISH bytes decode with bridge.mqtt.packets: ok")

