"""The bytes of a delivery for the session's client at its protocol level: MQTT 3.1/3.1.1 the bare
publication; MQTT 5 its forwarded properties, the remaining Message Expiry Interval and the Subscription
Identifiers, and nothing larger than the client's Maximum Packet Size (§3.1.2.11.4: not sent; counted)."""
from __future__ import annotations

from typing import Protocol

from bridge.mqtt import packets as P
from bridge.mqtt.message import Message, OutMsg, SessionStats


class Receiver(Protocol):
    """What the encoding needs of a session."""

    protocol_level: int
    max_packet_out: int
    stats: SessionStats

    def clock(self) -> float: ...


def qos0_bytes5(session: Receiver, msg: Message, retain: bool, sub_ids: list[int] | None) -> bytes | None:
    """A QoS 0 delivery to a level 5 client; None: not sent (expired, or too large for the client). (Level
    3/4: ``Message.qos0_bytes``.)"""
    data = msg.qos0_5 if not retain and not sub_ids and msg.expires is None else None
    if data is None:
        now = session.clock()
        if msg.expired(now):
            session.stats.expired += 1
            return None
        data = msg.publish5(0, retain, False, None, now, sub_ids)
    if len(data) > session.max_packet_out:
        session.stats.too_large += 1
        return None
    return data


def delivery_bytes(session: Receiver, out: OutMsg, dup: bool, pid: int | None, checked: bool = True) -> bytes | None:
    """A QoS 1/2 delivery with packet id ``pid``; None: too large for the client (``checked``), counted."""
    msg = out.msg
    if session.protocol_level != P.MQTT_5:
        return P.encode_publish(msg.topic_b, msg.payload, out.qos, out.retain, dup, pid)
    data = msg.publish5(out.qos, out.retain, dup, pid, session.clock(), out.sub_ids)
    if checked and len(data) > session.max_packet_out:
        session.stats.too_large += 1
        return None
    return data
