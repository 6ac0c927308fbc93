"""MQTT codec: bytes <-> packet dataclasses, sans-I/O, with typed protocol errors; the one import for
every level (``from bridge.mqtt import packets as P``).

Spec: WebSphere Message Broker docs, the "WebSphere MQ Telemetry Transport" chapters (MQTT 3.1:
fixed header, remaining length, CONNECT..DISCONNECT, UTF strings) and MQTT 3.1.1 (OASIS) for level 4,
which tightened the reserved flag bits and the UTF-8 rules. Level 5 bodies: codec5.py; the primitives
and reason codes: wire.py; the packet dataclasses: packet_model.py.
"""
from __future__ import annotations

from bridge.mqtt.codec5 import (
    decode_body5,
    decode_connect_payload,
    encode5,
    encode_ack5,
    encode_auth5,
    encode_connack5,
    encode_disconnect5,
    encode_publish5,
    encode_suback5,
    encode_unsuback5,
)
from bridge.mqtt.packet_model import (
    Auth,
    Bare,
    Connack,
    Connect,
    Disconnect,
    Packet,
    PacketIdOnly,
    Publish,
    Suback,
    Subscribe,
    Unsuback,
    Unsubscribe,
    Will,
    packet_name,
)
from bridge.mqtt.wire import (
    AUTH,
    CONNACK,
    CONNACK_REASON,
    CONNECT,
    DISCONNECT,
    MAX_REMAINING_LENGTH,
    MQTT_5,
    MQTT_31,
    MQTT_311,
    PACKET_NAMES,
    PINGREQ,
    PINGRESP,
    PROTOCOL_NAMES,
    PUBACK,
    PUBCOMP,
    PUBLISH,
    PUBREC,
    PUBREL,
    SUBACK,
    SUBSCRIBE,
    UNSUBACK,
    UNSUBSCRIBE,
    ConnackCode,
    PacketTooLarge,
    ProtocolError,
    Reason,
    encode_length,
    read_publish_head,
)
from bridge.mqtt.wire import U16 as _U16
from bridge.mqtt.wire import encode_string as _str
from bridge.mqtt.wire import read_binary as _binary
from bridge.mqtt.wire import read_packet_id as _packet_id
from bridge.mqtt.wire import read_string as _string

__all__ = [
    "AUTH", "CONNACK", "CONNACK_REASON", "CONNECT", "DISCONNECT", "MAX_REMAINING_LENGTH", "MQTT_5", "MQTT_31",
    "MQTT_311", "PACKET_NAMES", "PINGREQ", "PINGRESP", "PROTOCOL_NAMES", "PUBACK", "PUBCOMP", "PUBLISH",
    "PUBREC", "PUBREL", "SUBACK", "SUBSCRIBE", "UNSUBACK", "UNSUBSCRIBE", "Auth", "Bare", "Connack",
    "ConnackCode", "Connect", "Disconnect", "Packet", "PacketIdOnly", "PacketTooLarge", "ProtocolError",
    "Publish", "Reason", "Suback", "Subscribe", "Unsuback", "Unsubscribe", "Will", "encode_ack5",
    "encode_auth5", "encode_connack5", "encode_disconnect5", "encode_length", "encode_publish5",
    "encode_suback5", "encode_unsuback5", "packet_name",
]

SUBACK_FAILURE = 0x80               # 3.1.1 only
# The largest CONNECT the 3.1 layout allows (3.1.1's is 2 bytes shorter): variable header 12 bytes
# (protocol name "MQIsdp" with its length, level, flags, keep alive), then client id, will topic, will
# message, user name and password, each a 2-byte length and at most 65,535 bytes
MAX_CONNECT_LENGTH = 12 + 5 * (2 + 65_535)
LARGE_BODY = 64 * 1024              # PacketReader copies a body at least this large through a memoryview


# ----------------------------------------------------------------------------------------------
# Decoding
# ----------------------------------------------------------------------------------------------

def _decode_connect(buf: bytes, pos: int, end: int) -> Connect:
    name = "CONNECT"
    proto, pos = _string(buf, pos, end, name, "protocol name")
    if pos + 4 > end:
        raise ProtocolError("truncated variable header", packet=name, offset=pos)
    level = buf[pos]
    flags = buf[pos + 1]
    keepalive = (buf[pos + 2] << 8) | buf[pos + 3]
    if (proto, level) not in (("MQIsdp", MQTT_31), ("MQTT", MQTT_311), ("MQTT", MQTT_5)):
        raise ProtocolError(f"unsupported protocol {proto!r} level {level}", packet=name, offset=pos,
                            connack=ConnackCode.UNACCEPTABLE_PROTOCOL_VERSION)
    flags_offset = pos + 1
    pos += 4
    if flags & 0x01 and level != MQTT_31:   # 3.1 leaves it unused: ignored
        raise ProtocolError("reserved connect flag bit 0 is set", packet=name, offset=flags_offset)
    clean = bool(flags & 0x02)
    will_flag = bool(flags & 0x04)
    will_qos = (flags >> 3) & 0x03
    will_retain = bool(flags & 0x20)
    password_flag = bool(flags & 0x40)
    username_flag = bool(flags & 0x80)
    if will_qos == 3:
        raise ProtocolError("will QoS 3 is not allowed", packet=name, offset=flags_offset)
    if not will_flag and (will_qos or will_retain):
        raise ProtocolError("will QoS/retain set without the will flag", packet=name, offset=flags_offset)
    if level == MQTT_311 and password_flag and not username_flag:   # MQTT 5 allows a password alone
        raise ProtocolError("password flag set without user name flag", packet=name, offset=flags_offset)
    if level == MQTT_5:
        try:
            return decode_connect_payload(buf, pos, end, flags, keepalive)
        except ProtocolError as exc:   # answered with a level 5 CONNACK
            exc.level = MQTT_5
            raise

    client_id, pos = _string(buf, pos, end, name, "client identifier")
    will = None
    if will_flag:
        will_topic, pos = _string(buf, pos, end, name, "will topic")
        will_payload, pos = _binary(buf, pos, end, name, "will message")
        will = Will(will_topic, will_payload, will_qos, will_retain)
    username = password = None
    # 3.1 clients may set the flags and omit the fields at the end of the payload; tolerate that.
    if username_flag and (pos < end or level == MQTT_311):
        username, pos = _string(buf, pos, end, name, "user name")
    if password_flag and (pos < end or level == MQTT_311):
        password, pos = _binary(buf, pos, end, name, "password")
    if pos != end:
        raise ProtocolError(f"{end - pos} unexpected bytes after the payload", packet=name, offset=pos)
    return Connect(level, client_id, clean, keepalive, will, username, password)


def _decode_publish(buf: bytes, flags: int, end: int) -> Publish:
    qos, dup, topic, pid, pos = read_publish_head(buf, flags, end)
    return Publish(topic, bytes(buf[pos:end]), qos, bool(flags & 0x01), dup, pid)


def _decode_subscribe(buf: bytes, pos: int, end: int) -> Subscribe:
    name = "SUBSCRIBE"
    pid = _packet_id(buf, pos, end, name)
    pos += 2
    topics: list[tuple[str, int]] = []
    while pos < end:
        topic, pos = _string(buf, pos, end, name, "topic filter")
        if pos >= end:
            raise ProtocolError("missing requested QoS", packet=name, offset=pos)
        req = buf[pos]
        if req > 2:  # reserved upper bits set, or QoS 3
            raise ProtocolError(f"requested QoS byte {req:#04x} is invalid", packet=name, offset=pos)
        topics.append((topic, req))
        pos += 1
    if not topics:
        raise ProtocolError("no topic filters", packet=name, offset=pos)
    return Subscribe(pid, tuple(topics))


def _decode_unsubscribe(buf: bytes, pos: int, end: int) -> Unsubscribe:
    name = "UNSUBSCRIBE"
    pid = _packet_id(buf, pos, end, name)
    pos += 2
    topics: list[str] = []
    while pos < end:
        topic, pos = _string(buf, pos, end, name, "topic filter")
        topics.append(topic)
    if not topics:
        raise ProtocolError("no topic filters", packet=name, offset=pos)
    return Unsubscribe(pid, tuple(topics))


def _decode_suback(buf: bytes, pos: int, end: int) -> Suback:
    pid = _packet_id(buf, pos, end, "SUBACK")
    codes = tuple(buf[pos + 2:end])
    for i, code in enumerate(codes):
        if code not in (0, 1, 2, SUBACK_FAILURE):
            raise ProtocolError(f"invalid return code {code:#04x}", packet="SUBACK", offset=pos + 2 + i)
    return Suback(pid, codes)


# Fixed header flag rules. 3.1.1 fixes the reserved bits. The 3.1 text calls DUP, QoS and RETAIN "not used"
# in every other packet and sends PUBREL/SUBSCRIBE/UNSUBSCRIBE at QoS 1 with DUP on retries and RETAIN
# "not used": at level 3 only those three's QoS bits are checked, the rest ignored.
_REQUIRED_FLAGS = {
    CONNECT: 0, CONNACK: 0, PUBACK: 0, PUBREC: 0, PUBREL: 2, PUBCOMP: 0, SUBSCRIBE: 2, SUBACK: 0,
    UNSUBSCRIBE: 2, UNSUBACK: 0, PINGREQ: 0, PINGRESP: 0, DISCONNECT: 0, AUTH: 0,
}
_MQISDP = b"\x00\x06MQIsdp"   # the start of a 3.1 CONNECT's variable header
_FIXED_LENGTH = {CONNACK: 2, PUBACK: 2, PUBREC: 2, PUBREL: 2, PUBCOMP: 2, UNSUBACK: 2,
                 PINGREQ: 0, PINGRESP: 0, DISCONNECT: 0}


def decode_body(ptype: int, flags: int, body: bytes, level: int = MQTT_311) -> Packet:
    """Decode one packet body (everything after the fixed header). Raises ProtocolError."""
    end = len(body)
    name = PACKET_NAMES.get(ptype)
    if name is None:
        raise ProtocolError(f"unknown packet type {ptype}", offset=0)
    if ptype == PUBLISH:
        if level == MQTT_5:
            return decode_body5(ptype, flags, body)
        return _decode_publish(body, flags, end)
    if ptype == AUTH and level != MQTT_5:
        raise ProtocolError("unknown packet type 15 (AUTH exists in MQTT 5 only)", packet=name, offset=0)
    required = _REQUIRED_FLAGS[ptype]
    if level == MQTT_31 or ptype == CONNECT and body.startswith(_MQISDP):   # (a CONNECT names its own level)
        bad = required == 2 and flags & 0x06 != 0x02
    else:
        bad = flags != required
    if bad:
        raise ProtocolError(f"fixed header flags {flags:#06b} are invalid (must be {required:#06b})",
                            packet=name, offset=0)
    if level == MQTT_5 and ptype != CONNECT:
        return decode_body5(ptype, flags, body)
    fixed = _FIXED_LENGTH.get(ptype)
    if fixed is not None and end != fixed:
        raise ProtocolError(f"remaining length {end} is invalid (must be {fixed})", packet=name, offset=1)
    if ptype == CONNECT:
        return _decode_connect(body, 0, end)
    if ptype in (PUBACK, PUBREC, PUBREL, PUBCOMP, UNSUBACK):
        return PacketIdOnly(ptype, _packet_id(body, 0, end, name), bool(flags & 0x08))
    if ptype == SUBSCRIBE:
        return _decode_subscribe(body, 0, end)
    if ptype == UNSUBSCRIBE:
        return _decode_unsubscribe(body, 0, end)
    if ptype == CONNACK:
        if body[0] & 0xFE:
            raise ProtocolError("reserved CONNACK flags set", packet=name, offset=2)
        return Connack(body[1], bool(body[0] & 1))
    if ptype == SUBACK:
        return _decode_suback(body, 0, end)
    return Bare(ptype)


class PacketReader:
    """Incremental decoder: ``feed(data)`` returns the complete packets; keeps partial ones.

    The protocol level (3, 4 or 5) decides which fixed-header flags are legal; set ``level`` after
    CONNECT. ``max_size`` bounds the remaining length: a larger packet raises PacketTooLarge
    before its body is buffered. A server's reader sets ``connect_max``: until a CONNECT has been
    decoded, the first byte must be CONNECT's (else ProtocolError at that byte) and its remaining
    length at most ``connect_max``, so a connection that has not connected buffers at most that much.
    """

    __slots__ = ("_buf", "level", "max_size", "connect_max", "error")

    def __init__(self, max_size: int = MAX_REMAINING_LENGTH, level: int = MQTT_311,
                 connect_max: int | None = None) -> None:
        self._buf: bytearray | None = None   # a packet's bytes so far; None: none (an idle connection's memory)
        self.max_size = max_size
        self.level = level
        self.connect_max = connect_max   # None: no CONNECT expected first (a client's reader, or connected)
        # a bad packet behind good ones in the same bytes: they are returned, and this error is for the caller
        # to act on after them (a later ``feed`` raises it)
        self.error: ProtocolError | None = None

    def feed(self, data: bytes) -> list[Packet]:
        if self.error is not None:
            raise self.error
        buf = self._buf
        if buf is None:
            buf = self._buf = bytearray(data)
        else:
            buf += data
        out: list[Packet] = []
        pos = 0
        n = len(buf)
        try:
            while pos < n:
                first = buf[pos]
                limit = self.max_size
                connect_max = self.connect_max
                if connect_max is not None:
                    if first >> 4 != CONNECT:   # its flags: decode_body (3.1 leaves them unused)
                        name = PACKET_NAMES.get(first >> 4, f"type {first >> 4}")
                        raise ProtocolError(f"{name} before CONNECT (fixed header byte {first:#04x}): the first "
                                            "packet must be CONNECT", offset=0)
                    limit = connect_max
                # remaining length: 1..4 bytes, 7 bits each, little end first
                length = 0
                mult = 1
                i = pos + 1
                while True:
                    if i >= n:
                        return out  # need more bytes for the length
                    b = buf[i]
                    length += (b & 0x7F) * mult
                    i += 1
                    if not b & 0x80:
                        break
                    if i - pos - 1 == 4:
                        raise ProtocolError("remaining length has more than 4 bytes", offset=i - pos)
                    mult <<= 7
                if length > limit:
                    what = "before CONNECT, " if connect_max is not None else ""
                    raise PacketTooLarge(f"{what}remaining length {length} exceeds the limit of {limit}",
                                         packet=PACKET_NAMES.get(first >> 4), offset=1)
                if n - i < length:
                    return out
                if length < LARGE_BODY:
                    body = bytes(buf[i:i + length])
                else:   # one copy, not two (a bytearray slice, then bytes of it)
                    with memoryview(buf) as view:
                        body = bytes(view[i:i + length])
                pos = i + length
                packet = decode_body(first >> 4, first & 0x0F, body, self.level)
                out.append(packet)
                if connect_max is not None:   # the CONNECT (a server's reader checked the first byte)
                    self.connect_max = None   # connected: max_size from the next packet on
                    self.level = packet.protocol_level   # type: ignore[union-attr]  # what follows is of its level
            return out
        except ProtocolError as exc:
            if not out:
                raise
            self.error = exc   # what came before it was well formed: handled first, nothing lost
            return out
        finally:
            if pos:
                # CPython gives a bytearray's memory back when it shrinks below half its allocation
                del buf[:pos]
            if not buf:
                self._buf = None

    @property
    def buffered(self) -> int:
        return len(self._buf) if self._buf is not None else 0

    def clear(self) -> None:
        """Forget what is buffered (the connection is closing)."""
        self._buf = None


# ----------------------------------------------------------------------------------------------
# Encoding
# ----------------------------------------------------------------------------------------------


def encode_publish(topic: bytes, payload: bytes, qos: int, retain: bool, dup: bool,
                   packet_id: int | None) -> bytes:
    """Hot path: ``topic`` is already UTF-8 encoded."""
    first = 0x30 | (qos << 1) | (0x01 if retain else 0) | (0x08 if dup else 0)
    tl = len(topic)
    if qos:
        remaining = 4 + tl + len(payload)
        header = bytes((first,)) + encode_length(remaining) + bytes((tl >> 8, tl & 0xFF)) + topic + \
            bytes((packet_id >> 8, packet_id & 0xFF))  # type: ignore[operator]
    else:
        remaining = 2 + tl + len(payload)
        header = bytes((first,)) + encode_length(remaining) + bytes((tl >> 8, tl & 0xFF)) + topic
    return header + payload


def encode_ack(ptype: int, packet_id: int) -> bytes:
    flags = 2 if ptype == PUBREL else 0
    return bytes(((ptype << 4) | flags, 2, packet_id >> 8, packet_id & 0xFF))


PINGRESP_BYTES = bytes((PINGRESP << 4, 0))
PINGREQ_BYTES = bytes((PINGREQ << 4, 0))
DISCONNECT_BYTES = bytes((DISCONNECT << 4, 0))


def encode_connack(return_code: int, session_present: bool = False) -> bytes:
    return bytes((CONNACK << 4, 2, 1 if session_present else 0, return_code))


def encode_suback(packet_id: int, codes: tuple[int, ...] | list[int]) -> bytes:
    body = _U16.pack(packet_id) + bytes(codes)
    return bytes((SUBACK << 4,)) + encode_length(len(body)) + body


def encode(packet: Packet, level: int = MQTT_311) -> bytes:
    """Encode any packet (clients and tests use this; the broker uses the fast helpers above). A CONNECT
    names its own level; the other packets take the form of ``level``."""
    if level == MQTT_5 or isinstance(packet, Connect) and packet.protocol_level == MQTT_5:
        data = encode5(packet)
        if data is not None:
            return data
    if isinstance(packet, Publish):
        return encode_publish(packet.topic.encode("utf-8"), packet.payload, packet.qos, packet.retain,
                              packet.dup, packet.packet_id)
    if isinstance(packet, PacketIdOnly):
        return encode_ack(packet.type, packet.packet_id)
    if isinstance(packet, Connack):
        return encode_connack(packet.return_code, packet.session_present)
    if isinstance(packet, Suback):
        return encode_suback(packet.packet_id, packet.return_codes)
    if isinstance(packet, Bare):
        return bytes((packet.type << 4, 0))
    if isinstance(packet, Subscribe):
        body = _U16.pack(packet.packet_id) + b"".join(_str(t) + bytes((q,)) for t, q in packet.topics)
        return bytes((SUBSCRIBE << 4 | 2,)) + encode_length(len(body)) + body
    if isinstance(packet, Unsubscribe):
        body = _U16.pack(packet.packet_id) + b"".join(_str(t) for t in packet.topics)
        return bytes((UNSUBSCRIBE << 4 | 2,)) + encode_length(len(body)) + body
    if isinstance(packet, Connect):
        flags = 0x02 if packet.clean_session else 0
        payload = _str(packet.client_id)
        if packet.will is not None:
            flags |= 0x04 | (packet.will.qos << 3) | (0x20 if packet.will.retain else 0)
            payload += _str(packet.will.topic) + _U16.pack(len(packet.will.payload)) + packet.will.payload
        if packet.username is not None:
            flags |= 0x80
            payload += _str(packet.username)
        if packet.password is not None:
            flags |= 0x40
            payload += _U16.pack(len(packet.password)) + packet.password
        body = _str(packet.protocol_name) + bytes((packet.protocol_level, flags)) + \
            _U16.pack(packet.keepalive) + payload
        return bytes((CONNECT << 4,)) + encode_length(len(body)) + body
    raise TypeError(f"cannot encode {packet!r}")

