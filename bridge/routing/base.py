"""What every route conversion shares: the ``Converter`` interface the route worker calls
(RouteConverter for the payload form, EnvelopeConverter for ``mqtt_format: envelope``), its result,
and the route options applied to a converted message (property_map, persistence and priority
overrides, the rendered MQTT topic's check)."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Protocol

from bridge.connectors.base import Inbound, Outbound
from mappings.conversions.envelope import is_temporary, temporary
from mappings.errors import MappingError
from mappings.jms.model import DeliveryMode, Destination, DestinationKind, JmsMessage, names_uri
from mappings.mq import constants as C
from mappings.mqtt.publication import MqttPublication
from mappings.mqtt.topics import TopicError, validate_topic_name
from mappings.report import ConversionReport
from mappings.rules.model import (
    ROUTE_PAIRS,
    MqttEndpoint,
    QueueEndpoint,
    Route,
    RouteOptions,
    dotted_to_mqtt,
    mqtt_to_dotted,
    render_dotted_topic,
)

Result = tuple[Outbound, str, ConversionReport]   # converted message, target type, findings
Convert = Callable[[Inbound], Result]

#: The (source, target) protocol pairs a route can convert.
PAIRS = ROUTE_PAIRS


class Converter(Protocol):
    """A route's conversion, built once per route so that constant parts (encoders, options) are reused."""

    route: Route
    source_protocol: str
    target_protocol: str
    convert: Convert   # one message of the source -> what the target sends, its type and the findings


def check_pair(route: Route, source_protocol: str, target_protocol: str) -> None:
    if (source_protocol, target_protocol) not in PAIRS:
        raise MappingError(f"no conversion from {source_protocol} to {target_protocol} yet",
                           structure="route", field=route.name)


def target_protocol(route: Route, connector_type: str) -> str:
    if isinstance(route.target, MqttEndpoint):
        return "mqtt"
    return "jms" if connector_type == "jms" else "mq"


# -- persistence and priority -------------------------------------------------------------------------

#: MQMD.Persistence a route's ``persistence`` option sets; None: as the source (``as_source``).
FIXED_PERSISTENCE: dict[str, int | None] = {
    "persistent": C.MQPER_PERSISTENT, "not_persistent": C.MQPER_NOT_PERSISTENT, "as_source": None}

def mq_persistence(opts: RouteOptions, source_persistent: bool) -> int:
    """MQMD.Persistence of a route's message: the option's, else as the source."""
    fixed = FIXED_PERSISTENCE[opts.persistence]
    if fixed is not None:
        return fixed
    return C.MQPER_PERSISTENT if source_persistent else C.MQPER_NOT_PERSISTENT


def override_jms(jms: JmsMessage, opts: RouteOptions) -> JmsMessage:
    """The route's persistence/priority overrides on a JMS message (JMSDeliveryMode, JMSPriority)."""
    if opts.persistence == "as_source" and opts.priority is None:
        return jms
    headers = jms.headers
    mode = {"persistent": DeliveryMode.PERSISTENT, "not_persistent": DeliveryMode.NON_PERSISTENT}.get(
        opts.persistence, headers.delivery_mode)
    priority = opts.priority if opts.priority is not None else headers.priority
    return dataclasses.replace(jms, headers=dataclasses.replace(headers, delivery_mode=mode, priority=priority))


# -- names ---------------------------------------------------------------------------------------------

# An MQTT 5 Response Topic and the JMSReplyTo of a JMS provider route use the provider's topic naming, as the
# route's topic targets do (docs/rules.md "Topic templates"): MQTT ``resp/a`` is JMS topic ``resp.a`` and back,
# so one reply route from ``resp.>`` brings each requester's reply to its own Response Topic. A Response Topic
# written as a ``topic://`` or ``queue://`` URI names a provider destination already and is kept as it is.

def reply_to_provider(jms: JmsMessage, response_topic: str | None) -> JmsMessage:
    """JMSReplyTo for a Response Topic that is an MQTT topic name: that topic in the provider's dotted naming."""
    if response_topic is None or jms.headers.reply_to is None \
            or names_uri(response_topic):
        return jms
    reply = Destination.topic(mqtt_to_dotted(response_topic))
    return dataclasses.replace(jms, headers=dataclasses.replace(jms.headers, reply_to=reply))


_STOMP_TEMPORARY = ("/temp-queue/", "/temp-topic/", "/remote-temp-queue/", "/remote-temp-topic/")


def temporary_reply_to(jms: JmsMessage, item: Inbound) -> JmsMessage:
    """The JMS model has no temporary kind and the JMS connector reads ActiveMQ's ``reply-to:
    /remote-temp-queue/ID:..`` as a queue of that name; marked ``?temporary=true`` (the envelope's
    JMSReplyTo, an MQTT 5 Response Topic ``queue:///ID:..?temporary=true``) a reply can reach the
    requester's TemporaryQueue (javax.jms.QueueRequestor)."""
    headers = getattr(item.handle, "headers", None)
    reply = jms.headers.reply_to
    if reply is None or not isinstance(headers, Mapping):
        return jms
    raw = headers.get("reply-to", "")
    if not isinstance(raw, str) or not raw.startswith(_STOMP_TEMPORARY) or is_temporary(reply):
        return jms
    return dataclasses.replace(jms, headers=dataclasses.replace(jms.headers, reply_to=temporary(reply)))


def response_topic_from_provider(pub: MqttPublication, jms: JmsMessage) -> MqttPublication:
    """The Response Topic of a JMSReplyTo topic (plain, no options) named in the provider's dotted naming."""
    reply = jms.headers.reply_to
    if pub.response_topic is None or reply is None or reply.kind is not DestinationKind.TOPIC or reply.options:
        return pub
    return dataclasses.replace(pub, response_topic=dotted_to_mqtt(reply.name))


def fixed_destination(target: QueueEndpoint, pub: MqttPublication) -> Destination | None:
    """A JMS or MQ target's own destination for ``pub``: its queue, or its topic with a template filled in the
    provider's dotted naming; None for a reply_to target without a fallback."""
    if target.queue is not None:
        return Destination.queue(target.queue)
    if target.topic is None:
        return None
    if "{" in target.topic:
        return Destination.topic(render_dotted_topic(target.topic, topic=pub.topic, client=pub.client_id or ""))
    return Destination.topic(target.topic)


def checked_topic(topic: str) -> str:
    """A rendered ``to.mqtt`` topic, refused (MappingError) when it is not a valid topic name, or when it
    starts with ``$``: those are the broker's own ($SYS statistics, listener control), which a message
    from a route must not forge (the message goes to the route's backout destination with the reason)."""
    try:
        validate_topic_name(topic)
    except TopicError as exc:
        raise MappingError(str(exc), structure="route", field="to.mqtt") from None
    if topic.startswith("$"):
        raise MappingError(f"{topic!r}: topics starting with '$' are the broker's own; a route may not publish "
                           "there", structure="route", field="to.mqtt")
    return topic


def rename_properties(jms: JmsMessage, mapping: dict[str, str], report: ConversionReport) -> JmsMessage:
    """The route's property_map on a JMS message; each renamed property is reported."""
    if not mapping:
        return jms
    props = jms.properties
    renamed = {mapping.get(k, k): v for k, v in props.items()}
    for k in props:
        if k in mapping:
            report.renamed(k, f"-> {mapping[k]} (route property_map)")
    return dataclasses.replace(jms, properties=renamed)  # JmsMessage re-validates the names
