"""A client's MQTT 5 PUBLISH properties on the hot path: decoded in one loop, with the bytes a subscriber
is forwarded kept as received (OASIS "MQTT Version 5.0" §3.3.2.3).

``decode_properties`` (properties.py) reads any packet's properties through a table and a call per value;
a fan-out of a publication with two User Properties spent as long decoding them as delivering to ten
subscribers. This reader takes the shapes a PUBLISH may have and gives up (None) on anything else
(an unknown or repeated property, a value out of range, invalid UTF-8, a truncated block): the general
decoder then reads the same bytes and names the error, so what is accepted and every error message are
the general decoder's.

The forwarded items are the properties a server passes on unchanged (Payload Format Indicator, Content
Type, Response Topic, Correlation Data, User Properties) as the bytes the client sent, in its order:
the subscriber's PUBLISH reuses them instead of encoding the values again.
"""
from __future__ import annotations

from bridge.mqtt.properties import (
    CONTENT_TYPE,
    CORRELATION_DATA,
    MESSAGE_EXPIRY_INTERVAL,
    PAYLOAD_FORMAT_INDICATOR,
    RESPONSE_TOPIC,
    TOPIC_ALIAS,
    USER_PROPERTY,
    Props,
)
from bridge.mqtt.wire import read_varint


def _text(buf: bytes, pos: int, stop: int) -> tuple[str, int] | None:
    """A UTF-8 string inside ``buf[pos:stop]``: (text, position after it); None: not a valid one."""
    if pos + 2 > stop:
        return None
    end = pos + 2 + ((buf[pos] << 8) | buf[pos + 1])
    if end > stop:
        return None
    text = buf[pos + 2:end].decode("utf-8")   # UnicodeDecodeError: the caller gives up
    return (None if "\x00" in text else (text, end))


def decode_publish_properties(buf: bytes, pos: int, end: int) -> tuple[Props, bytes, int] | None:
    """The property length and properties of a PUBLISH at ``pos``: (properties as ``decode_properties``
    gives them, the forwarded items as received, position after them); None: let the general decoder
    read them (anything this reader does not take, errors included)."""
    length = buf[pos] if pos < end else 128
    if length < 128:
        pos += 1
    else:
        length, pos = read_varint(buf, pos, end, "PUBLISH", "property length")
    stop = pos + length
    if stop > end:
        return None
    props: Props = {}
    users: list[tuple[str, str]] | None = None
    start = pos
    kept: list[bytes] | None = None   # forwarded pieces, once a property that is not forwarded was cut out
    try:
        while pos < stop:
            at = pos
            pid = buf[pos]
            pos += 1
            if pid == USER_PROPERTY:   # inline: the common case, often several times
                mid = pos + 2 + ((buf[pos] << 8) | buf[pos + 1])
                done = mid + 2 + ((buf[mid] << 8) | buf[mid + 1])
                if done > stop:   # also when either length field itself lies beyond ``stop``
                    return None
                key = buf[pos + 2:mid].decode("utf-8")
                value = buf[mid + 2:done].decode("utf-8")
                if "\x00" in key or "\x00" in value:
                    return None
                pos = done
                if users is None:
                    users = props[USER_PROPERTY] = []
                users.append((key, value))
                continue
            if pid in props:
                return None   # a repeated property: a Protocol Error the general decoder names
            if pid == TOPIC_ALIAS or pid == MESSAGE_EXPIRY_INTERVAL:
                size = 2 if pid == TOPIC_ALIAS else 4
                if pos + size > stop:
                    return None
                number = int.from_bytes(buf[pos:pos + size], "big")
                if number == 0 and pid == TOPIC_ALIAS:
                    return None
                props[pid] = number
                pos += size
                if kept is None:
                    kept = [buf[start:at]]
                else:
                    kept.append(buf[start:at])
                start = pos   # not forwarded as received: the server sends its own
                continue
            if pid == PAYLOAD_FORMAT_INDICATOR:
                if pos >= stop or buf[pos] > 1:
                    return None
                props[pid] = buf[pos]
                pos += 1
            elif pid == CONTENT_TYPE or pid == RESPONSE_TOPIC:
                text = _text(buf, pos, stop)
                if text is None:
                    return None
                props[pid], pos = text
            elif pid == CORRELATION_DATA:
                if pos + 2 > stop:
                    return None
                done = pos + 2 + ((buf[pos] << 8) | buf[pos + 1])
                if done > stop:
                    return None
                props[pid] = buf[pos + 2:done]
                pos = done
            else:
                return None   # Subscription Identifier (refused later, named), unknown, not allowed
    except (UnicodeDecodeError, IndexError):   # IndexError: a length field beyond the packet's end
        return None
    if kept is None:
        forward = buf[start:stop]
    else:
        kept.append(buf[start:stop])
        forward = b"".join(kept)
    return props, bytes(forward), stop
