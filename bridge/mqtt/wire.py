"""MQTT wire primitives shared by every protocol level: packet types, protocol errors, reason codes, and
the data representations (two-byte lengths, UTF-8 strings, binary data, variable byte integers).

WebSphere Message Broker docs, "WebSphere MQ Telemetry Transport" (3.1); MQTT 3.1.1 (OASIS) for level 4;
MQTT Version 5.0 (OASIS) §1.5 "Data representation" and §2.4 "Reason Code" for level 5.
"""
from __future__ import annotations

import struct
from enum import IntEnum

# Packet types (fixed header byte 1, bits 7-4).
CONNECT = 1
CONNACK = 2
PUBLISH = 3
PUBACK = 4
PUBREC = 5
PUBREL = 6
PUBCOMP = 7
SUBSCRIBE = 8
SUBACK = 9
UNSUBSCRIBE = 10
UNSUBACK = 11
PINGREQ = 12
PINGRESP = 13
DISCONNECT = 14
AUTH = 15   # MQTT 5 only

PACKET_NAMES = {
    CONNECT: "CONNECT", CONNACK: "CONNACK", PUBLISH: "PUBLISH", PUBACK: "PUBACK", PUBREC: "PUBREC",
    PUBREL: "PUBREL", PUBCOMP: "PUBCOMP", SUBSCRIBE: "SUBSCRIBE", SUBACK: "SUBACK",
    UNSUBSCRIBE: "UNSUBSCRIBE", UNSUBACK: "UNSUBACK", PINGREQ: "PINGREQ", PINGRESP: "PINGRESP",
    DISCONNECT: "DISCONNECT", AUTH: "AUTH",
}

MQTT_31 = 3    # protocol name "MQIsdp"
MQTT_311 = 4   # protocol name "MQTT"
MQTT_5 = 5     # protocol name "MQTT"
PROTOCOL_NAMES = {MQTT_31: "MQIsdp", MQTT_311: "MQTT", MQTT_5: "MQTT"}

MAX_REMAINING_LENGTH = 268_435_455  # 4 bytes of 7 bits
MAX_VARINT = MAX_REMAINING_LENGTH


class ConnackCode(IntEnum):
    """MQTT 3.1 / 3.1.1 CONNACK return codes."""
    ACCEPTED = 0
    UNACCEPTABLE_PROTOCOL_VERSION = 1
    IDENTIFIER_REJECTED = 2
    SERVER_UNAVAILABLE = 3
    BAD_USERNAME_OR_PASSWORD = 4
    NOT_AUTHORIZED = 5


class Reason(IntEnum):
    """MQTT 5 reason codes (§2.4), those a server sends or receives."""
    SUCCESS = 0x00                  # also Normal disconnection, Granted QoS 0
    GRANTED_QOS_1 = 0x01
    GRANTED_QOS_2 = 0x02
    DISCONNECT_WITH_WILL = 0x04
    NO_MATCHING_SUBSCRIBERS = 0x10
    NO_SUBSCRIPTION_EXISTED = 0x11
    CONTINUE_AUTHENTICATION = 0x18
    REAUTHENTICATE = 0x19
    UNSPECIFIED_ERROR = 0x80
    MALFORMED_PACKET = 0x81
    PROTOCOL_ERROR = 0x82
    IMPLEMENTATION_SPECIFIC_ERROR = 0x83
    UNSUPPORTED_PROTOCOL_VERSION = 0x84
    CLIENT_IDENTIFIER_NOT_VALID = 0x85
    BAD_USER_NAME_OR_PASSWORD = 0x86
    NOT_AUTHORIZED = 0x87
    SERVER_UNAVAILABLE = 0x88
    SERVER_BUSY = 0x89
    BANNED = 0x8A
    SERVER_SHUTTING_DOWN = 0x8B
    BAD_AUTHENTICATION_METHOD = 0x8C
    KEEP_ALIVE_TIMEOUT = 0x8D
    SESSION_TAKEN_OVER = 0x8E
    TOPIC_FILTER_INVALID = 0x8F
    TOPIC_NAME_INVALID = 0x90
    PACKET_IDENTIFIER_IN_USE = 0x91
    PACKET_IDENTIFIER_NOT_FOUND = 0x92
    RECEIVE_MAXIMUM_EXCEEDED = 0x93
    TOPIC_ALIAS_INVALID = 0x94
    PACKET_TOO_LARGE = 0x95
    MESSAGE_RATE_TOO_HIGH = 0x96
    QUOTA_EXCEEDED = 0x97
    ADMINISTRATIVE_ACTION = 0x98
    PAYLOAD_FORMAT_INVALID = 0x99
    RETAIN_NOT_SUPPORTED = 0x9A
    QOS_NOT_SUPPORTED = 0x9B
    USE_ANOTHER_SERVER = 0x9C
    SERVER_MOVED = 0x9D
    SHARED_SUBSCRIPTIONS_NOT_SUPPORTED = 0x9E
    CONNECTION_RATE_EXCEEDED = 0x9F
    MAXIMUM_CONNECT_TIME = 0xA0
    SUBSCRIPTION_IDENTIFIERS_NOT_SUPPORTED = 0xA1
    WILDCARD_SUBSCRIPTIONS_NOT_SUPPORTED = 0xA2


# A 3.1.1 CONNACK return code's MQTT 5 reason code (§3.2.2.2 lists both)
CONNACK_REASON = {
    ConnackCode.ACCEPTED: Reason.SUCCESS,
    ConnackCode.UNACCEPTABLE_PROTOCOL_VERSION: Reason.UNSUPPORTED_PROTOCOL_VERSION,
    ConnackCode.IDENTIFIER_REJECTED: Reason.CLIENT_IDENTIFIER_NOT_VALID,
    ConnackCode.SERVER_UNAVAILABLE: Reason.SERVER_UNAVAILABLE,
    ConnackCode.BAD_USERNAME_OR_PASSWORD: Reason.BAD_USER_NAME_OR_PASSWORD,
    ConnackCode.NOT_AUTHORIZED: Reason.NOT_AUTHORIZED,
}


class ProtocolError(Exception):
    """The peer broke the protocol. ``offset`` is the byte offset inside the packet when known.

    ``connack`` is set when the right answer is a CONNACK with that return code before closing;
    ``code`` is the MQTT 5 reason code for a level 5 peer (None: Malformed Packet when the packet could
    not be decoded, else Protocol Error).
    """

    def __init__(self, reason: str, *, packet: str | None = None, offset: int | None = None,
                 connack: ConnackCode | None = None, code: int | None = None) -> None:
        self.reason = reason
        self.packet = packet
        self.offset = offset
        self.connack = connack
        self.code = code
        self.level: int | None = None   # the protocol level of the CONNECT it was found in, when known
        where = packet or "packet"
        if offset is not None:
            where += f" at offset {offset}"
        super().__init__(f"{where}: {reason}")


class PacketTooLarge(ProtocolError):
    """A packet above the maximum size (MQTT 5: DISCONNECT 0x95 Packet too large)."""

    def __init__(self, reason: str, *, packet: str | None = None, offset: int | None = None) -> None:
        super().__init__(reason, packet=packet, offset=offset, code=Reason.PACKET_TOO_LARGE)


U16 = struct.Struct(">H")
U32 = struct.Struct(">I")


def read_string(buf: bytes, pos: int, end: int, name: str, what: str) -> tuple[str, int]:
    """Read a length-prefixed UTF-8 string; validate it as MQTT requires."""
    if pos + 2 > end:
        raise ProtocolError(f"truncated length of {what}", packet=name, offset=pos)
    n = (buf[pos] << 8) | buf[pos + 1]
    start = pos + 2
    stop = start + n
    if stop > end:
        raise ProtocolError(f"{what} declares {n} bytes but only {end - start} remain",
                            packet=name, offset=pos)
    raw = buf[start:stop]
    try:
        text = raw.decode("utf-8")  # rejects overlongs, surrogates and truncated sequences
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"{what} is not valid UTF-8 ({exc.reason})", packet=name,
                            offset=start + exc.start) from None
    if "\x00" in text:
        raise ProtocolError(f"{what} contains U+0000", packet=name, offset=start + raw.index(0))
    return text, stop


def read_binary(buf: bytes, pos: int, end: int, name: str, what: str) -> tuple[bytes, int]:
    if pos + 2 > end:
        raise ProtocolError(f"truncated length of {what}", packet=name, offset=pos)
    n = (buf[pos] << 8) | buf[pos + 1]
    stop = pos + 2 + n
    if stop > end:
        raise ProtocolError(f"{what} declares {n} bytes but only {end - pos - 2} remain",
                            packet=name, offset=pos)
    return bytes(buf[pos + 2:stop]), stop


def read_packet_id(buf: bytes, pos: int, end: int, name: str) -> int:
    if pos + 2 > end:
        raise ProtocolError("truncated packet identifier", packet=name, offset=pos)
    pid = (buf[pos] << 8) | buf[pos + 1]
    if pid == 0:
        raise ProtocolError("packet identifier 0 is not allowed", packet=name, offset=pos)
    return pid


def read_publish_head(buf: bytes, flags: int, end: int) -> tuple[int, bool, str, int | None, int]:
    """A PUBLISH's fixed-header flags and variable header up to the packet id, every level: (QoS, DUP,
    topic name, packet id or None, position after them). QoS 3 and DUP on QoS 0 are refused."""
    name = "PUBLISH"
    qos = (flags >> 1) & 0x03
    if qos == 3:
        raise ProtocolError("QoS 3 is not allowed", packet=name, offset=0)
    dup = bool(flags & 0x08)
    if dup and qos == 0:
        raise ProtocolError("DUP set on a QoS 0 publication", packet=name, offset=0)
    topic, pos = read_string(buf, 0, end, name, "topic name")
    pid = None
    if qos:
        pid = read_packet_id(buf, pos, end, name)
        pos += 2
    return qos, dup, topic, pid, pos


def read_varint(buf: bytes, pos: int, end: int, name: str, what: str) -> tuple[int, int]:
    """A variable byte integer (§1.5.5): 1..4 bytes, 7 bits each, least significant first."""
    value = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            raise ProtocolError(f"truncated {what}", packet=name, offset=start)
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            if b == 0 and pos - start > 1:   # "the minimum number of bytes" (§1.5.5)
                raise ProtocolError(f"{what} is not in its shortest encoding", packet=name, offset=start)
            return value, pos
        shift += 7
        if pos - start == 4:
            raise ProtocolError(f"{what} has more than 4 bytes", packet=name, offset=start)


def encode_length(n: int) -> bytes:
    """A variable byte integer: the remaining length, a property length, a subscription identifier."""
    if n < 0 or n > MAX_REMAINING_LENGTH:
        raise ValueError(f"variable byte integer {n} out of range")
    if n < 128:
        return bytes((n,))
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def encode_string(s: str) -> bytes:
    raw = s.encode("utf-8")
    return U16.pack(len(raw)) + raw


def encode_binary(b: bytes) -> bytes:
    return U16.pack(len(b)) + b
