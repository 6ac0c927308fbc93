"""A broker message's MQTT 5 properties <-> the publication model's named fields (mappings/mqtt), both ways
through the routes: what a route from MQTT reads, and what a route to MQTT publishes (an MQTT 5 subscriber
receives it; a 3.1/3.1.1 subscriber receives the payload only, as those levels have no properties)."""
from __future__ import annotations

import math
from typing import Any

from bridge.mqtt import properties as PR
from bridge.mqtt.session import Message
from mappings.report import ConversionReport, Finding

# publication field -> property id
FIELDS = (("payload_format_indicator", PR.PAYLOAD_FORMAT_INDICATOR), ("content_type", PR.CONTENT_TYPE),
          ("response_topic", PR.RESPONSE_TOPIC), ("correlation_data", PR.CORRELATION_DATA))


def publication_fields(msg: Message, now: float) -> dict[str, Any]:
    """The MqttPublication keyword arguments for ``msg``'s properties and remaining expiry."""
    out: dict[str, Any] = {}
    props = msg.props
    if props:
        for name, pid in FIELDS:
            value = props.get(pid)
            if value is not None:
                out[name] = value
        users = props.get(PR.USER_PROPERTY)
        if users:
            out["user_properties"] = tuple(users)
    if msg.expires is not None:
        out["message_expiry_interval"] = max(1, math.ceil(msg.expires - now))
    return out


def message_properties(pub: Any, now: float) -> tuple[PR.Props | None, float | None]:
    """A publication's MQTT 5 fields as the broker's (properties, expiry time)."""
    props: PR.Props = {}
    for name, pid in FIELDS:
        value = getattr(pub, name)
        if value is not None:
            props[pid] = value
    if pub.user_properties:
        props[PR.USER_PROPERTY] = list(pub.user_properties)
    interval = pub.message_expiry_interval
    return props or None, (None if interval is None else now + interval)


def property_losses(pub: Any, clients: list[str]) -> list[Finding]:
    """Findings for the MQTT 5 fields of ``pub`` that the 3.1/3.1.1 ``clients`` it reached did not receive."""
    shown = ", ".join(clients[:5]) + (f" and {len(clients) - 5} more" if len(clients) > 5 else "")
    why = f"MQTT 3.1/3.1.1 subscriber(s) {shown} received the payload only"
    report = ConversionReport()
    for name, pid in FIELDS:
        if getattr(pub, name) is not None:
            report.dropped(PR.property_name(pid), why)
    for key, _ in pub.user_properties:
        report.dropped(f"user property {key}", why)
    if pub.message_expiry_interval is not None:
        report.dropped(PR.property_name(PR.MESSAGE_EXPIRY_INTERVAL), why)
    return list(report.findings)
