"""The MQTT publication model shared by every MQTT-side mapping (3.1, 3.1.1 and the 5.0 properties)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class MqttPublication:
    topic: str
    payload: bytes = b""
    qos: int = 0
    retain: bool = False
    dup: bool = False
    packet_id: int | None = None      # present for QoS 1/2
    client_id: str | None = None      # the publishing client
    username: str | None = None
    # MQTT 5 properties (carried even before the broker speaks 5.0)
    payload_format_indicator: int | None = None   # 0 bytes, 1 UTF-8
    content_type: str | None = None
    response_topic: str | None = None
    correlation_data: bytes | None = None
    user_properties: tuple[tuple[str, str], ...] = field(default_factory=tuple)  # ordered, duplicates ok
    message_expiry_interval: int | None = None    # seconds
    # the broker checked ``username`` (a password or a client certificate); else the client only said it
    user_authenticated: bool = False
