"""The bytes of a delivery for the session's client at its protocol level: MQTT 3.1/3.1.1 the bare
publication; MQTT 5 its forwarded properties, the remaining Message Expiry Interval and the Subscription
Identifiers, Topic Aliases where the client accepts them, and nothing larger than the client's Maximum
Packet Size (§3.1.2.11.4: not sent; counted).

Topic Aliases towards a client (§3.3.2.3.4): the first ``aliases_out`` distinct topic names longer than an
alias (3 bytes) get one, for the rest of the connection; no replacement, so a connection with many topics
never pays a name plus an alias twice. An alias counts as known to the client only once a packet naming it
is handed to the connection (which keeps order), so a PUBLISH too large to send leaves it unassigned."""
from __future__ import annotations

from typing import Protocol

from bridge.mqtt import packets as P
from bridge.mqtt.message import Message, OutMsg, SessionStats


class Receiver(Protocol):
    """What the encoding needs of a session."""

    protocol_level: int
    max_packet_out: int
    aliases_out: int                     # Topic Aliases this connection may use (0: none)
    topic_aliases_out: dict[str, int] | None
    stats: SessionStats

    def clock(self) -> float: ...


def _alias(session: Receiver, msg: Message) -> tuple[bytes, int] | None:
    """The topic bytes and Topic Alias for ``msg`` to this client; None: send the name without one."""
    known = session.topic_aliases_out
    if known is not None:
        alias = known.get(msg.topic)
        if alias is not None:
            return b"", alias
    else:
        known = session.topic_aliases_out = {}
    if len(known) >= session.aliases_out or len(msg.topic_b) <= 3:
        return None
    return msg.topic_b, len(known) + 1


def _sent(session: Receiver, msg: Message, alias: tuple[bytes, int] | None) -> None:
    """The PUBLISH naming a new alias goes out: from now on the client knows it."""
    if alias is not None and alias[0]:
        session.topic_aliases_out[msg.topic] = alias[1]   # type: ignore[index]


class QoS0Link(Protocol):
    def send_qos0(self, data: bytes) -> bool: ...


def send_qos0_5(session: Receiver, link: QoS0Link, msg: Message, retain: bool, sub_ids: list[int] | None
                ) -> bool | None:
    """Send a QoS 0 delivery to a level 5 client: True sent, False dropped (its output is full), None not
    sent and counted (expired, or too large for the client). (Level 3/4: ``Message.qos0_bytes``.)"""
    alias = _alias(session, msg) if session.aliases_out else None
    data = msg.qos0_5 if not retain and not sub_ids and msg.expires is None and alias is None else None
    if data is None:
        now = session.clock()
        if msg.expired(now):
            session.stats.expired += 1
            return None
        data = msg.publish5(0, retain, False, None, now, sub_ids, alias)
    if len(data) > session.max_packet_out:
        session.stats.too_large += 1
        return None
    if not link.send_qos0(data):
        return False   # a new alias stays unassigned: the client never saw the packet naming it
    _sent(session, msg, alias)
    return True


def delivery_bytes(session: Receiver, out: OutMsg, dup: bool, pid: int | None, checked: bool = True) -> bytes | None:
    """A QoS 1/2 delivery with packet id ``pid``; None: too large for the client (``checked``), counted."""
    msg = out.msg
    if session.protocol_level != P.MQTT_5:
        return P.encode_publish(msg.topic_b, msg.payload, out.qos, out.retain, dup, pid)
    alias = _alias(session, msg) if session.aliases_out else None
    data = msg.publish5(out.qos, out.retain, dup, pid, session.clock(), out.sub_ids, alias)
    if checked and len(data) > session.max_packet_out:
        session.stats.too_large += 1
        return None
    _sent(session, msg, alias)
    return data
