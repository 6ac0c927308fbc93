"""MQTT 5.0 packet bodies: decode (after the fixed header) and encode, with typed errors.

MQTT Version 5.0 (OASIS) chapter 3: each packet's variable header and payload. The reason code of an
acknowledgement and of DISCONNECT/AUTH may be left out when it is 0 and there are no properties
(§3.4.2.1, §3.14.2.1, §3.15.2.1); the encoders here leave it out then, as the decoders accept.
"""
from __future__ import annotations

from bridge.mqtt import properties as PR
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
)
from bridge.mqtt.properties import Props, decode_properties, encode_properties
from bridge.mqtt.publish_props import decode_publish_properties
from bridge.mqtt.wire import (
    AUTH,
    CONNACK,
    CONNECT,
    DISCONNECT,
    MQTT_5,
    PACKET_NAMES,
    PINGREQ,
    PINGRESP,
    PUBACK,
    PUBCOMP,
    PUBLISH,
    PUBREC,
    PUBREL,
    SUBACK,
    SUBSCRIBE,
    U16,
    UNSUBACK,
    UNSUBSCRIBE,
    ProtocolError,
    Reason,
    encode_binary,
    encode_length,
    encode_string,
    read_binary,
    read_packet_id,
    read_publish_head,
    read_string,
)

# the reason codes each packet may carry (§3.x.2.1)
_PUBACK_CODES = frozenset({0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99})
_PUBREL_CODES = frozenset({0x00, 0x92})
_DISCONNECT_CODES = frozenset({
    0x00, 0x04, 0x80, 0x81, 0x82, 0x83, 0x87, 0x89, 0x8B, 0x8D, 0x8E, 0x8F, 0x90, 0x93, 0x94, 0x95, 0x96,
    0x97, 0x98, 0x99, 0x9A, 0x9B, 0x9C, 0x9D, 0x9E, 0x9F, 0xA0, 0xA1, 0xA2})
_AUTH_CODES = frozenset({0x00, 0x18, 0x19})
_ACK_CODES = {PUBACK: _PUBACK_CODES, PUBREC: _PUBACK_CODES, PUBREL: _PUBREL_CODES, PUBCOMP: _PUBREL_CODES}


def decode_connect_payload(buf: bytes, pos: int, end: int, flags: int, keepalive: int) -> Connect:
    """A level 5 CONNECT after its keep alive: properties, client id, will properties/topic/payload,
    user name, password (§3.1.2.11 - §3.1.3)."""
    name = "CONNECT"
    props, pos = decode_properties(buf, pos, end, CONNECT, name)
    client_id, pos = read_string(buf, pos, end, name, "client identifier")
    will = None
    if flags & 0x04:
        will_props, pos = decode_properties(buf, pos, end, PR.WILL, name)
        will_topic, pos = read_string(buf, pos, end, name, "will topic")
        will_payload, pos = read_binary(buf, pos, end, name, "will payload")
        will = Will(will_topic, will_payload, (flags >> 3) & 0x03, bool(flags & 0x20), will_props or None)
    username = password = None
    if flags & 0x80:
        username, pos = read_string(buf, pos, end, name, "user name")
    if flags & 0x40:
        password, pos = read_binary(buf, pos, end, name, "password")
    if pos != end:
        raise ProtocolError(f"{end - pos} unexpected bytes after the payload", packet=name, offset=pos)
    return Connect(MQTT_5, client_id, bool(flags & 0x02), keepalive, will, username, password, props or None)


def _publish(buf: bytes, flags: int, end: int) -> Publish:
    qos, dup, topic, pid, pos = read_publish_head(buf, flags, end)
    if pos < end and buf[pos] == 0:   # no properties: the common case, without the property decoder
        return Publish(topic, bytes(buf[pos + 1:end]), qos, bool(flags & 0x01), dup, pid, None)
    fast = decode_publish_properties(buf, pos, end)
    if fast is None:   # anything unusual, errors included: the general decoder
        props, pos = decode_properties(buf, pos, end, PUBLISH, "PUBLISH")
        return Publish(topic, bytes(buf[pos:end]), qos, bool(flags & 0x01), dup, pid, props or None)
    props, forward, pos = fast
    return Publish(topic, bytes(buf[pos:end]), qos, bool(flags & 0x01), dup, pid, props or None, forward)


def _reason_and_props(buf: bytes, pos: int, end: int, ptype: int, codes: frozenset[int]) -> tuple[int, Props | None]:
    name = PACKET_NAMES[ptype]
    if pos >= end:
        return 0, None
    code = buf[pos]
    if code not in codes:
        raise ProtocolError(f"reason code {code:#04x} is not valid in {name}", packet=name, offset=pos)
    if pos + 1 >= end:
        return code, None
    props, stop = decode_properties(buf, pos + 1, end, ptype, name)
    if stop != end:
        raise ProtocolError(f"{end - stop} unexpected bytes after the properties", packet=name, offset=stop)
    return code, props or None


def _ack(buf: bytes, ptype: int, flags: int, end: int) -> PacketIdOnly:
    name = PACKET_NAMES[ptype]
    pid = read_packet_id(buf, 0, end, name)
    code, props = _reason_and_props(buf, 2, end, ptype, _ACK_CODES[ptype])
    return PacketIdOnly(ptype, pid, False, code, props)


def _subscribe(buf: bytes, end: int) -> Subscribe:
    name = "SUBSCRIBE"
    pid = read_packet_id(buf, 0, end, name)
    props, pos = decode_properties(buf, 2, end, SUBSCRIBE, name)
    topics: list[tuple[str, int]] = []
    while pos < end:
        topic, pos = read_string(buf, pos, end, name, "topic filter")
        if pos >= end:
            raise ProtocolError("missing subscription options", packet=name, offset=pos)
        options = buf[pos]
        if options & 0xC0:
            raise ProtocolError(f"reserved bits of the subscription options {options:#04x} are set",
                                packet=name, offset=pos)
        if options & 0x03 == 3:
            raise ProtocolError("maximum QoS 3 is not allowed", packet=name, offset=pos, code=Reason.PROTOCOL_ERROR)
        if (options >> 4) & 0x03 == 3:
            raise ProtocolError("Retain Handling 3 is not allowed", packet=name, offset=pos,
                                code=Reason.PROTOCOL_ERROR)
        topics.append((topic, options))
        pos += 1
    if not topics:
        raise ProtocolError("no topic filters", packet=name, offset=pos, code=Reason.PROTOCOL_ERROR)
    return Subscribe(pid, tuple(topics), props or None)


def _unsubscribe(buf: bytes, end: int) -> Unsubscribe:
    name = "UNSUBSCRIBE"
    pid = read_packet_id(buf, 0, end, name)
    props, pos = decode_properties(buf, 2, end, UNSUBSCRIBE, name)
    topics: list[str] = []
    while pos < end:
        topic, pos = read_string(buf, pos, end, name, "topic filter")
        topics.append(topic)
    if not topics:
        raise ProtocolError("no topic filters", packet=name, offset=pos, code=Reason.PROTOCOL_ERROR)
    return Unsubscribe(pid, tuple(topics), props or None)


def decode_body5(ptype: int, flags: int, body: bytes) -> Packet:
    """One level 5 packet body other than CONNECT (packets.decode_body checked the fixed header flags)."""
    end = len(body)
    if ptype == PUBLISH:
        return _publish(body, flags, end)
    if ptype in _ACK_CODES:
        return _ack(body, ptype, flags, end)
    if ptype == SUBSCRIBE:
        return _subscribe(body, end)
    if ptype == UNSUBSCRIBE:
        return _unsubscribe(body, end)
    if ptype == DISCONNECT:
        code, props = _reason_and_props(body, 0, end, DISCONNECT, _DISCONNECT_CODES)
        return Disconnect(code, props)
    if ptype == AUTH:
        code, props = _reason_and_props(body, 0, end, AUTH, _AUTH_CODES)
        return Auth(code, props)
    if ptype in (PINGREQ, PINGRESP):
        if end:
            raise ProtocolError(f"remaining length {end} is invalid (must be 0)", packet=PACKET_NAMES[ptype],
                                offset=1)
        return Bare(ptype)
    if ptype == CONNACK:
        if end < 2:
            raise ProtocolError("truncated CONNACK", packet="CONNACK", offset=0)
        if body[0] & 0xFE:
            raise ProtocolError("reserved CONNACK flags set", packet="CONNACK", offset=0)
        props, stop = decode_properties(body, 2, end, CONNACK, "CONNACK") if end > 2 else ({}, 2)
        if stop != end:
            raise ProtocolError(f"{end - stop} unexpected bytes after the properties", packet="CONNACK", offset=stop)
        return Connack(body[1], bool(body[0] & 1), props or None)
    if ptype in (SUBACK, UNSUBACK):
        name = PACKET_NAMES[ptype]
        pid = read_packet_id(body, 0, end, name)
        props, pos = decode_properties(body, 2, end, ptype, name)
        codes = tuple(body[pos:end])
        if ptype == SUBACK:
            return Suback(pid, codes, props or None)
        return Unsuback(pid, codes, props or None)
    raise ProtocolError(f"unknown packet type {ptype}", offset=0)


# -- encoding ---------------------------------------------------------------------------------------


def _packet(first: int, body: bytes) -> bytes:
    return bytes((first,)) + encode_length(len(body)) + body


def encode_publish5(topic: bytes, payload: bytes, qos: int, retain: bool, dup: bool, packet_id: int | None,
                    props: bytes) -> bytes:
    """``topic`` UTF-8 encoded; ``props`` the encoded properties with their length (b"\\x00": none)."""
    first = 0x30 | (qos << 1) | (0x01 if retain else 0) | (0x08 if dup else 0)
    tl = len(topic)
    pid = bytes((packet_id >> 8, packet_id & 0xFF)) if qos else b""  # type: ignore[operator]
    remaining = 2 + tl + len(pid) + len(props) + len(payload)
    return bytes((first,)) + encode_length(remaining) + bytes((tl >> 8, tl & 0xFF)) + topic + pid + props + payload


def encode_ack5(ptype: int, packet_id: int, reason: int = 0, props: Props | None = None) -> bytes:
    flags = 2 if ptype == PUBREL else 0
    if not reason and not props:
        return bytes(((ptype << 4) | flags, 2, packet_id >> 8, packet_id & 0xFF))
    body = U16.pack(packet_id) + bytes((reason,)) + (encode_properties(props) if props else b"")
    return _packet((ptype << 4) | flags, body)


def encode_connack5(reason: int, session_present: bool, props: Props | None) -> bytes:
    return _packet(CONNACK << 4, bytes((1 if session_present else 0, reason)) + encode_properties(props))


def encode_suback5(packet_id: int, codes: tuple[int, ...] | list[int], props: Props | None = None) -> bytes:
    return _packet(SUBACK << 4, U16.pack(packet_id) + encode_properties(props) + bytes(codes))


def encode_unsuback5(packet_id: int, codes: tuple[int, ...] | list[int], props: Props | None = None) -> bytes:
    return _packet(UNSUBACK << 4, U16.pack(packet_id) + encode_properties(props) + bytes(codes))


def encode_disconnect5(reason: int = 0, props: Props | None = None) -> bytes:
    if not reason and not props:
        return bytes((DISCONNECT << 4, 0))
    return _packet(DISCONNECT << 4, bytes((reason,)) + (encode_properties(props) if props else b""))


def encode_auth5(reason: int = 0, props: Props | None = None) -> bytes:
    if not reason and not props:
        return bytes((AUTH << 4, 0))
    return _packet(AUTH << 4, bytes((reason,)) + (encode_properties(props) if props else b""))


def encode5(packet: Packet) -> bytes | None:
    """Encode a packet in its level 5 form (clients and tests); None: the same as 3.1.1 (PINGREQ...)."""
    if isinstance(packet, Publish):
        return encode_publish5(packet.topic.encode("utf-8"), packet.payload, packet.qos, packet.retain,
                               packet.dup, packet.packet_id, encode_properties(packet.properties))
    if isinstance(packet, PacketIdOnly):
        return encode_ack5(packet.type, packet.packet_id, packet.reason_code, packet.properties)
    if isinstance(packet, Connack):
        return encode_connack5(packet.return_code, packet.session_present, packet.properties)
    if isinstance(packet, Suback):
        return encode_suback5(packet.packet_id, packet.return_codes, packet.properties)
    if isinstance(packet, Unsuback):
        return encode_unsuback5(packet.packet_id, packet.reason_codes, packet.properties)
    if isinstance(packet, Disconnect):
        return encode_disconnect5(packet.reason_code, packet.properties)
    if isinstance(packet, Auth):
        return encode_auth5(packet.reason_code, packet.properties)
    if isinstance(packet, Subscribe):
        body = U16.pack(packet.packet_id) + encode_properties(packet.properties) + \
            b"".join(encode_string(t) + bytes((o,)) for t, o in packet.topics)
        return _packet(SUBSCRIBE << 4 | 2, body)
    if isinstance(packet, Unsubscribe):
        body = U16.pack(packet.packet_id) + encode_properties(packet.properties) + \
            b"".join(encode_string(t) for t in packet.topics)
        return _packet(UNSUBSCRIBE << 4 | 2, body)
    if isinstance(packet, Connect):
        flags = 0x02 if packet.clean_session else 0
        payload = encode_string(packet.client_id)
        if packet.will is not None:
            w = packet.will
            flags |= 0x04 | (w.qos << 3) | (0x20 if w.retain else 0)
            payload += encode_properties(w.properties) + encode_string(w.topic) + encode_binary(w.payload)
        if packet.username is not None:
            flags |= 0x80
            payload += encode_string(packet.username)
        if packet.password is not None:
            flags |= 0x40
            payload += encode_binary(packet.password)
        body = encode_string("MQTT") + bytes((MQTT_5, flags)) + U16.pack(packet.keepalive) + \
            encode_properties(packet.properties) + payload
        return _packet(CONNECT << 4, body)
    return None
