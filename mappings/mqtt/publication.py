"""The MQTT publication model shared by every MQTT-side mapping (3.1, 3.1.1 and the 5.0 properties)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True, init=False)
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
    user_properties: tuple[tuple[str, str], ...] = ()  # ordered, duplicates ok
    message_expiry_interval: int | None = None    # seconds
    # the broker checked ``username`` (a password or a client certificate); else the client only said it
    user_authenticated: bool = False

    # A route builds one per message. The generated __init__ of a frozen dataclass sets each field through
    # object.__setattr__ (looked up per field); the slots' own setters cost about half (2.4 against 4.0 µs
    # with keywords, 1.4 against 2.9 positionally: bench/HISTORY.md, session 18). Same signature and defaults
    # (tests/test_mqtt_publication_init.py).
    def __init__(self, topic: str, payload: bytes = b"", qos: int = 0, retain: bool = False, dup: bool = False,
                 packet_id: int | None = None, client_id: str | None = None, username: str | None = None,
                 payload_format_indicator: int | None = None, content_type: str | None = None,
                 response_topic: str | None = None, correlation_data: bytes | None = None,
                 user_properties: tuple[tuple[str, str], ...] = (), message_expiry_interval: int | None = None,
                 user_authenticated: bool = False) -> None:
        _topic(self, topic)
        _payload(self, payload)
        _qos(self, qos)
        _retain(self, retain)
        _dup(self, dup)
        _packet_id(self, packet_id)
        _client_id(self, client_id)
        _username(self, username)
        _payload_format_indicator(self, payload_format_indicator)
        _content_type(self, content_type)
        _response_topic(self, response_topic)
        _correlation_data(self, correlation_data)
        _user_properties(self, user_properties)
        _message_expiry_interval(self, message_expiry_interval)
        _user_authenticated(self, user_authenticated)


def _setter(name: str) -> Any:  # noqa: ANN401 - a slot's member descriptor's __set__
    return MqttPublication.__dict__[name].__set__


_topic, _payload, _qos, _retain, _dup = map(_setter, ("topic", "payload", "qos", "retain", "dup"))
_packet_id, _client_id, _username = map(_setter, ("packet_id", "client_id", "username"))
_payload_format_indicator, _content_type, _response_topic, _correlation_data = map(
    _setter, ("payload_format_indicator", "content_type", "response_topic", "correlation_data"))
_user_properties, _message_expiry_interval, _user_authenticated = map(
    _setter, ("user_properties", "message_expiry_interval", "user_authenticated"))
