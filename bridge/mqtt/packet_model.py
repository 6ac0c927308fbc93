"""The decoded MQTT packets, every protocol level: 3.1 and 3.1.1 leave the MQTT 5 fields at their defaults
(no properties, reason code 0)."""
from __future__ import annotations

from dataclasses import dataclass, field

from bridge.mqtt.properties import Props
from bridge.mqtt.wire import PACKET_NAMES, PROTOCOL_NAMES


@dataclass(frozen=True, slots=True)
class Will:
    topic: str
    payload: bytes
    qos: int = 0
    retain: bool = False
    properties: Props | None = None   # MQTT 5 Will Properties


@dataclass(frozen=True, slots=True)
class Connect:
    protocol_level: int
    client_id: str
    clean_session: bool = True        # MQTT 5: Clean Start
    keepalive: int = 60
    will: Will | None = None
    username: str | None = None
    password: bytes | None = None
    properties: Props | None = None

    @property
    def protocol_name(self) -> str:
        return PROTOCOL_NAMES.get(self.protocol_level, "?")


@dataclass(frozen=True, slots=True)
class Connack:
    return_code: int                  # MQTT 5: the reason code
    session_present: bool = False
    properties: Props | None = None


# PUBLISH and the acks are the hot path: a frozen dataclass's __init__ (object.__setattr__ per field) costs
# 4-5x a plain one, half of the whole decode. These two are plain slotted dataclasses: treat them as
# immutable all the same; nothing in mqbridge mutates a decoded packet.
@dataclass(slots=True)
class Publish:
    topic: str                        # MQTT 5: may be "" when a Topic Alias stands for it
    payload: bytes
    qos: int = 0
    retain: bool = False
    dup: bool = False
    packet_id: int | None = None
    properties: Props | None = None
    # MQTT 5: the forwarded properties' items as the client sent them (publish_props.py); None: not kept
    forward: bytes | None = field(default=None, compare=False, repr=False)


@dataclass(slots=True)
class PacketIdOnly:
    """PUBACK, PUBREC, PUBREL, PUBCOMP (and a 3.1/3.1.1 UNSUBACK): a packet type and a packet identifier;
    MQTT 5 adds a reason code and properties."""

    type: int
    packet_id: int
    dup: bool = False   # 3.1 allowed DUP on a retried PUBREL
    reason_code: int = 0
    properties: Props | None = None


@dataclass(frozen=True, slots=True)
class Subscribe:
    packet_id: int
    # (topic filter, options): the requested QoS, and for MQTT 5 the subscription options byte (bits 0-1
    # QoS, 2 No Local, 3 Retain As Published, 4-5 Retain Handling)
    topics: tuple[tuple[str, int], ...]
    properties: Props | None = None


@dataclass(frozen=True, slots=True)
class Suback:
    packet_id: int
    return_codes: tuple[int, ...]
    properties: Props | None = None


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    packet_id: int
    topics: tuple[str, ...]
    properties: Props | None = None


@dataclass(frozen=True, slots=True)
class Unsuback:
    """MQTT 5 UNSUBACK: a reason code per topic filter."""

    packet_id: int
    reason_codes: tuple[int, ...]
    properties: Props | None = None


@dataclass(frozen=True, slots=True)
class Disconnect:
    """MQTT 5 DISCONNECT, either direction (3.1/3.1.1: ``Bare(DISCONNECT)``)."""

    reason_code: int = 0
    properties: Props | None = None


@dataclass(frozen=True, slots=True)
class Auth:
    """MQTT 5 AUTH (enhanced authentication)."""

    reason_code: int = 0
    properties: Props | None = None


@dataclass(frozen=True, slots=True)
class Bare:
    """PINGREQ, PINGRESP and a 3.1/3.1.1 DISCONNECT: a fixed header and nothing else."""

    type: int


Packet = (Connect | Connack | Publish | PacketIdOnly | Subscribe | Suback | Unsubscribe | Unsuback | Disconnect
          | Auth | Bare)


def packet_name(packet: Packet) -> str:
    if isinstance(packet, (PacketIdOnly, Bare)):
        return PACKET_NAMES[packet.type]
    return type(packet).__name__.upper()
