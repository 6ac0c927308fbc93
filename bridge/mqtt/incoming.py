"""What a client's MQTT 5 publication carries in (OASIS "MQTT Version 5.0" §3.3.2.3): its Topic Alias
resolved against the connection's, what a client may not send refused, and what is forwarded to
subscribers (a PUBLISH's properties, or a will's) with the expiry it implies."""
from __future__ import annotations

from bridge.mqtt import packets as P
from bridge.mqtt import properties as PR
from bridge.mqtt.connection import ClientConnection
from bridge.mqtt.properties import Props
from bridge.mqtt.topics import TopicError, validate_topic_name

# the MQTT 5 PUBLISH properties a subscriber receives unchanged (§3.3.4: the server forwards them)
FORWARDED = frozenset({PR.PAYLOAD_FORMAT_INDICATOR, PR.CONTENT_TYPE, PR.RESPONSE_TOPIC, PR.CORRELATION_DATA,
                       PR.USER_PROPERTY})


def forwarded(props: Props, now: float) -> tuple[Props | None, float | None]:
    """What a level 5 publication (a PUBLISH's properties, or a will's) carries to subscribers: the
    properties forwarded unchanged, and when it expires (Message Expiry Interval from ``now``)."""
    interval = props.get(PR.MESSAGE_EXPIRY_INTERVAL)
    kept = props if props.keys() <= FORWARDED else {k: v for k, v in props.items() if k in FORWARDED}
    return kept or None, None if interval is None else now + interval


def publish_properties(conn: ClientConnection, topic: str, props: Props, now: float
                       ) -> tuple[str, Props | None, float | None]:
    """An MQTT 5 PUBLISH's properties: resolve its Topic Alias (§3.3.2.3.4), check what a client may
    send; returns the topic, the properties forwarded to subscribers and when the message expires."""
    alias = props.get(PR.TOPIC_ALIAS)
    if alias is not None:
        if alias > conn.topic_alias_max:
            raise P.ProtocolError(f"Topic Alias {alias} exceeds the Topic Alias Maximum {conn.topic_alias_max}",
                                  packet="PUBLISH", code=P.Reason.TOPIC_ALIAS_INVALID)
        aliases = conn.topic_aliases
        if aliases is None:
            aliases = conn.topic_aliases = {}
        if topic:
            aliases[alias] = topic
        else:
            known = aliases.get(alias)
            if known is None:
                raise P.ProtocolError(f"Topic Alias {alias} was never set on this connection", packet="PUBLISH")
            topic = known
    elif not topic:
        raise P.ProtocolError("empty topic name without a Topic Alias", packet="PUBLISH",
                              code=P.Reason.TOPIC_NAME_INVALID)
    if PR.SUBSCRIPTION_IDENTIFIER in props:
        raise P.ProtocolError("a client's PUBLISH may not carry a Subscription Identifier", packet="PUBLISH")
    response = props.get(PR.RESPONSE_TOPIC)
    if response is not None:
        try:
            validate_topic_name(response)
        except TopicError as exc:
            raise P.ProtocolError(f"Response Topic: {exc}", packet="PUBLISH") from None
    return (topic, *forwarded(props, now))
