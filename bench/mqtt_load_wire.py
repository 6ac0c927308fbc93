"""The load generator's MQTT 3.1.1 wire bytes, hand-rolled (CONNECT, SUBSCRIBE, PUBLISH and the packet
type numbers the clients scan for), and ``selfcheck``, which decodes them with mqbridge's own codec
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


def connect_packet(client_id: str, clean: bool = True, keepalive: int = 0) -> bytes:
    body = _s("MQTT") + bytes((4, 0x02 if clean else 0)) + keepalive.to_bytes(2, "big") + _s(client_id)
    return b"\x10" + varlen(len(body)) + body


def subscribe_packet(packet_id: int, topic_filter: str, qos: int) -> bytes:
    body = packet_id.to_bytes(2, "big") + _s(topic_filter) + bytes((qos,))
    return b"\x82" + varlen(len(body)) + body


def publish_parts(topic: str, payload_len: int, qos: int) -> tuple[bytes, int]:
    """Fixed header + topic of a PUBLISH (the packet id, for QoS > 0, and payload follow)."""
    t = _s(topic)
    remaining = len(t) + (2 if qos else 0) + payload_len
    return bytes((0x30 | (qos << 1),)) + varlen(remaining) + t, remaining


def publish_packet(topic: str, payload: bytes, qos: int = 0, packet_id: int = 0) -> bytes:
    head, _ = publish_parts(topic, len(payload), qos)
    return head + (packet_id.to_bytes(2, "big") if qos else b"") + payload


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
    print("selfcheck: hand-rolled CONNECT/SUBSCRIBE/PUBLISH bytes decode with bridge.mqtt.packets: ok")

