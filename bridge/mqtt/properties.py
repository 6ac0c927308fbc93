"""MQTT 5 properties (MQTT Version 5.0 §2.2.2): decoded into a dict {property id: value}, encoded back.

User Property values are a list of (name, value) pairs in the order received, duplicates kept;
Subscription Identifier values a list of ints. Every other property appears at most once: a second one
is a Protocol Error, as is a property the packet may not carry or a value outside its range (each error
names the property and its byte offset).
"""
from __future__ import annotations

from typing import Any

from bridge.mqtt.wire import (
    AUTH,
    CONNACK,
    CONNECT,
    DISCONNECT,
    PUBACK,
    PUBCOMP,
    PUBLISH,
    PUBREC,
    PUBREL,
    SUBACK,
    SUBSCRIBE,
    U16,
    U32,
    UNSUBACK,
    UNSUBSCRIBE,
    ProtocolError,
    Reason,
    encode_binary,
    encode_length,
    encode_string,
    read_binary,
    read_string,
    read_varint,
)

Props = dict[int, Any]

PAYLOAD_FORMAT_INDICATOR = 0x01
MESSAGE_EXPIRY_INTERVAL = 0x02
CONTENT_TYPE = 0x03
RESPONSE_TOPIC = 0x08
CORRELATION_DATA = 0x09
SUBSCRIPTION_IDENTIFIER = 0x0B
SESSION_EXPIRY_INTERVAL = 0x11
ASSIGNED_CLIENT_IDENTIFIER = 0x12
SERVER_KEEP_ALIVE = 0x13
AUTHENTICATION_METHOD = 0x15
AUTHENTICATION_DATA = 0x16
REQUEST_PROBLEM_INFORMATION = 0x17
WILL_DELAY_INTERVAL = 0x18
REQUEST_RESPONSE_INFORMATION = 0x19
RESPONSE_INFORMATION = 0x1A
SERVER_REFERENCE = 0x1C
REASON_STRING = 0x1F
RECEIVE_MAXIMUM = 0x21
TOPIC_ALIAS_MAXIMUM = 0x22
TOPIC_ALIAS = 0x23
MAXIMUM_QOS = 0x24
RETAIN_AVAILABLE = 0x25
USER_PROPERTY = 0x26
MAXIMUM_PACKET_SIZE = 0x27
WILDCARD_SUBSCRIPTION_AVAILABLE = 0x28
SUBSCRIPTION_IDENTIFIER_AVAILABLE = 0x29
SHARED_SUBSCRIPTION_AVAILABLE = 0x2A

WILL = -1   # not a packet type: the Will Properties of a CONNECT

# id -> (name, data type)
_BYTE, _U16T, _U32T, _VARINT, _UTF8, _BIN, _PAIR = range(7)
SPEC: dict[int, tuple[str, int]] = {
    PAYLOAD_FORMAT_INDICATOR: ("Payload Format Indicator", _BYTE),
    MESSAGE_EXPIRY_INTERVAL: ("Message Expiry Interval", _U32T),
    CONTENT_TYPE: ("Content Type", _UTF8),
    RESPONSE_TOPIC: ("Response Topic", _UTF8),
    CORRELATION_DATA: ("Correlation Data", _BIN),
    SUBSCRIPTION_IDENTIFIER: ("Subscription Identifier", _VARINT),
    SESSION_EXPIRY_INTERVAL: ("Session Expiry Interval", _U32T),
    ASSIGNED_CLIENT_IDENTIFIER: ("Assigned Client Identifier", _UTF8),
    SERVER_KEEP_ALIVE: ("Server Keep Alive", _U16T),
    AUTHENTICATION_METHOD: ("Authentication Method", _UTF8),
    AUTHENTICATION_DATA: ("Authentication Data", _BIN),
    REQUEST_PROBLEM_INFORMATION: ("Request Problem Information", _BYTE),
    WILL_DELAY_INTERVAL: ("Will Delay Interval", _U32T),
    REQUEST_RESPONSE_INFORMATION: ("Request Response Information", _BYTE),
    RESPONSE_INFORMATION: ("Response Information", _UTF8),
    SERVER_REFERENCE: ("Server Reference", _UTF8),
    REASON_STRING: ("Reason String", _UTF8),
    RECEIVE_MAXIMUM: ("Receive Maximum", _U16T),
    TOPIC_ALIAS_MAXIMUM: ("Topic Alias Maximum", _U16T),
    TOPIC_ALIAS: ("Topic Alias", _U16T),
    MAXIMUM_QOS: ("Maximum QoS", _BYTE),
    RETAIN_AVAILABLE: ("Retain Available", _BYTE),
    USER_PROPERTY: ("User Property", _PAIR),
    MAXIMUM_PACKET_SIZE: ("Maximum Packet Size", _U32T),
    WILDCARD_SUBSCRIPTION_AVAILABLE: ("Wildcard Subscription Available", _BYTE),
    SUBSCRIPTION_IDENTIFIER_AVAILABLE: ("Subscription Identifier Available", _BYTE),
    SHARED_SUBSCRIPTION_AVAILABLE: ("Shared Subscription Available", _BYTE),
}

_ACK = frozenset({REASON_STRING, USER_PROPERTY})
ALLOWED: dict[int, frozenset[int]] = {
    CONNECT: frozenset({SESSION_EXPIRY_INTERVAL, AUTHENTICATION_METHOD, AUTHENTICATION_DATA,
                        REQUEST_PROBLEM_INFORMATION, REQUEST_RESPONSE_INFORMATION, RECEIVE_MAXIMUM,
                        TOPIC_ALIAS_MAXIMUM, USER_PROPERTY, MAXIMUM_PACKET_SIZE}),
    CONNACK: frozenset({SESSION_EXPIRY_INTERVAL, ASSIGNED_CLIENT_IDENTIFIER, SERVER_KEEP_ALIVE,
                        AUTHENTICATION_METHOD, AUTHENTICATION_DATA, RESPONSE_INFORMATION, SERVER_REFERENCE,
                        REASON_STRING, RECEIVE_MAXIMUM, TOPIC_ALIAS_MAXIMUM, MAXIMUM_QOS, RETAIN_AVAILABLE,
                        USER_PROPERTY, MAXIMUM_PACKET_SIZE, WILDCARD_SUBSCRIPTION_AVAILABLE,
                        SUBSCRIPTION_IDENTIFIER_AVAILABLE, SHARED_SUBSCRIPTION_AVAILABLE}),
    PUBLISH: frozenset({PAYLOAD_FORMAT_INDICATOR, MESSAGE_EXPIRY_INTERVAL, CONTENT_TYPE, RESPONSE_TOPIC,
                        CORRELATION_DATA, SUBSCRIPTION_IDENTIFIER, TOPIC_ALIAS, USER_PROPERTY}),
    WILL: frozenset({PAYLOAD_FORMAT_INDICATOR, MESSAGE_EXPIRY_INTERVAL, CONTENT_TYPE, RESPONSE_TOPIC,
                     CORRELATION_DATA, WILL_DELAY_INTERVAL, USER_PROPERTY}),
    PUBACK: _ACK, PUBREC: _ACK, PUBREL: _ACK, PUBCOMP: _ACK, SUBACK: _ACK, UNSUBACK: _ACK,
    SUBSCRIBE: frozenset({SUBSCRIPTION_IDENTIFIER, USER_PROPERTY}),
    UNSUBSCRIBE: frozenset({USER_PROPERTY}),
    DISCONNECT: frozenset({SESSION_EXPIRY_INTERVAL, SERVER_REFERENCE, REASON_STRING, USER_PROPERTY}),
    AUTH: frozenset({AUTHENTICATION_METHOD, AUTHENTICATION_DATA, REASON_STRING, USER_PROPERTY}),
}

# the values a byte property may take; Receive Maximum, Maximum Packet Size, Topic Alias and Subscription
# Identifier may not be 0
_BYTE_VALUES = {PAYLOAD_FORMAT_INDICATOR: (0, 1), REQUEST_PROBLEM_INFORMATION: (0, 1),
                REQUEST_RESPONSE_INFORMATION: (0, 1), MAXIMUM_QOS: (0, 1), RETAIN_AVAILABLE: (0, 1),
                WILDCARD_SUBSCRIPTION_AVAILABLE: (0, 1), SUBSCRIPTION_IDENTIFIER_AVAILABLE: (0, 1),
                SHARED_SUBSCRIPTION_AVAILABLE: (0, 1)}
_NOT_ZERO = frozenset({RECEIVE_MAXIMUM, MAXIMUM_PACKET_SIZE, TOPIC_ALIAS, SUBSCRIPTION_IDENTIFIER})


def decode_properties(buf: bytes, pos: int, end: int, packet: int, name: str) -> tuple[Props, int]:
    """Read a property length and the properties after it; returns (properties, position after them).
    ``packet`` says which properties are allowed (a packet type, or WILL); ``name`` is for errors."""
    start = pos
    length, pos = read_varint(buf, pos, end, name, "property length")
    stop = pos + length
    if stop > end:
        raise ProtocolError(f"property length {length} exceeds the {end - pos} bytes that remain",
                            packet=name, offset=start)
    allowed = ALLOWED[packet]
    props: Props = {}
    while pos < stop:
        at = pos
        pid, pos = read_varint(buf, pos, stop, name, "property identifier")
        spec = SPEC.get(pid)
        if spec is None:
            raise ProtocolError(f"unknown property identifier {pid:#04x}", packet=name, offset=at)
        label, kind = spec
        if pid not in allowed:   # a Malformed Packet (§2.2.2.2)
            raise ProtocolError(f"property {label} ({pid:#04x}) is not allowed here", packet=name, offset=at)
        value: Any
        if kind == _BYTE:
            if pos >= stop:
                raise ProtocolError(f"truncated {label}", packet=name, offset=pos)
            value = buf[pos]
            pos += 1
            if value not in _BYTE_VALUES.get(pid, (value,)):
                raise ProtocolError(f"{label} {value} is invalid (0 or 1)", packet=name, offset=pos - 1,
                                    code=Reason.PROTOCOL_ERROR)
        elif kind == _U16T:
            if pos + 2 > stop:
                raise ProtocolError(f"truncated {label}", packet=name, offset=pos)
            value = (buf[pos] << 8) | buf[pos + 1]
            pos += 2
        elif kind == _U32T:
            if pos + 4 > stop:
                raise ProtocolError(f"truncated {label}", packet=name, offset=pos)
            value = U32.unpack_from(buf, pos)[0]
            pos += 4
        elif kind == _VARINT:
            value, pos = read_varint(buf, pos, stop, name, label)
        elif kind == _UTF8:
            value, pos = read_string(buf, pos, stop, name, label)
        elif kind == _BIN:
            value, pos = read_binary(buf, pos, stop, name, label)
        else:
            key, pos = read_string(buf, pos, stop, name, "User Property name")
            val, pos = read_string(buf, pos, stop, name, "User Property value")
            value = (key, val)
        if value == 0 and pid in _NOT_ZERO:
            raise ProtocolError(f"{label} 0 is not allowed", packet=name, offset=at, code=Reason.PROTOCOL_ERROR)
        if pid == USER_PROPERTY:
            props.setdefault(USER_PROPERTY, []).append(value)
        elif pid == SUBSCRIPTION_IDENTIFIER and packet == PUBLISH:
            props.setdefault(SUBSCRIPTION_IDENTIFIER, []).append(value)   # a server's PUBLISH may repeat it
        elif pid in props:
            raise ProtocolError(f"property {label} ({pid:#04x}) appears twice", packet=name, offset=at,
                                code=Reason.PROTOCOL_ERROR)
        else:
            props[pid] = value
    return props, stop


def encode_properties(props: Props | None) -> bytes:
    """The property length and the properties (b"\\x00" for none)."""
    if not props:
        return b"\x00"
    body = encode_property_items(props)
    return encode_length(len(body)) + body


def encode_property_items(props: Props) -> bytes:
    """The properties without their length (to be joined with others)."""
    out = bytearray()
    for pid, value in props.items():
        kind = SPEC[pid][1]
        if pid == USER_PROPERTY:
            for key, val in value:
                out.append(pid)
                out += encode_string(key)
                out += encode_string(val)
            continue
        if pid == SUBSCRIPTION_IDENTIFIER and isinstance(value, list):
            for sid in value:
                out.append(pid)
                out += encode_length(sid)
            continue
        out.append(pid)
        if kind == _BYTE:
            out.append(value)
        elif kind == _U16T:
            out += U16.pack(value)
        elif kind == _U32T:
            out += U32.pack(value)
        elif kind == _VARINT:
            out += encode_length(value)
        elif kind == _UTF8:
            out += encode_string(value)
        else:
            out += encode_binary(value)
    return bytes(out)


def property_name(pid: int) -> str:
    spec = SPEC.get(pid)
    return spec[0] if spec else f"property {pid:#04x}"


def pack(props: Props | None) -> bytes | None:
    """A publication's properties as the store keeps them (None: none)."""
    return encode_properties(props) if props else None


def unpack(blob: bytes | None, packet: int = PUBLISH) -> Props | None:
    """What ``pack`` stored: a publication's properties (``packet`` WILL: a will's)."""
    if not blob:
        return None
    props, _ = decode_properties(blob, 0, len(blob), packet, "stored properties")
    return props or None
