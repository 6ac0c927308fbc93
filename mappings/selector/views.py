"""A route's ``selector`` for every source kind: one semantics, the JMS selector evaluated against the
JMS view of the source message (JMS 1.1 §3.8.1; the language is mappings.selector.compile, compiled once).

The view of each source kind is described at ``mq_view``, ``mqtt_view`` and ``source_selector``.
Properties are seen under their source names, before the route's ``property_map`` renames them. A
name the view does not hold is NULL, so ``x = 1`` is UNKNOWN and does not select.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from mappings.conversions.envelope import read_envelope
from mappings.conversions.jms_mq import mq_bytes_to_jms
from mappings.conversions.mqtt_jms import ConvertMessageType, mqtt_to_jms
from mappings.errors import MappingError
from mappings.jms.model import DeliveryMode, JavaType, JmsMessage
from mappings.mqtt.publication import MqttPublication
from mappings.rules.model import RouteOptions
from mappings.selector.compile import Selector, compile_selector, selector_lookup

_NUMERIC = (JavaType.BYTE, JavaType.SHORT, JavaType.INT, JavaType.LONG, JavaType.FLOAT, JavaType.DOUBLE)


def jms_lookup(message: JmsMessage) -> dict[str, Any]:
    """The values a selector sees for ``message``: header fields by their JMS names, properties by name.
    A byte[] property has no selector type and is left out (NULL); a byte[] JMSCorrelationID is seen as
    ``ID:`` + hex, as IBM MQ classes for JMS return it from getJMSCorrelationID."""
    props: dict[str, Any] = {}
    for name, value in message.properties.items():
        t = value.type
        if t is JavaType.BOOLEAN or t is JavaType.STRING or t in _NUMERIC:
            props[name] = value.value
        elif t is JavaType.CHAR:
            props[name] = str(value.value)
    h = message.headers
    correlation = h.correlation_id
    if isinstance(correlation, bytes):
        correlation = "ID:" + correlation.hex()
    return selector_lookup(
        props,
        delivery_mode=int(h.delivery_mode) if isinstance(h.delivery_mode, DeliveryMode) else h.delivery_mode,
        priority=h.priority, message_id=h.message_id, timestamp=h.timestamp, correlation_id=correlation,
        jms_type=h.type, redelivered=h.redelivered)


def mqtt_view(pub: MqttPublication, options: RouteOptions, received: float) -> dict[str, Any]:
    """The JMS view of an MQTT publication. The payload decides only the body type, which a selector
    cannot see, so it is left out of the conversion: the view costs no payload scan.

    The view is the MQTT -> JMS mapping (mappings/conversions/mqtt_jms.py: Eclipse Amlen docs "Conversion
    between MQTT and JMS", Amlen Table 1, and the SwiftMQ docs "MQTT Swiftlet" informational properties):
    JMSDeliveryMode NON_PERSISTENT for QoS 0 and PERSISTENT for 1/2, JMSPriority 4, JMSTimestamp the time
    the gateway received it, ``JMS_SWIFTMQ_MQTT_PUBQOS`` (int QoS), ``JMS_SWIFTMQ_CID`` (publishing client
    id) and ``JMSXUserID`` (its user name) unless the route turns ``swiftmq_properties`` off. The topic is
    NOT a property: JMSDestination cannot be named in a selector (JMS 1.1 §3.8.1.1) and the route's topic
    filter (``from.mqtt``) is what selects topics. On a route with ``mqtt_format: envelope`` the payload IS
    the JMS message (mappings/conversions/envelope.py): its headers and properties are the view, and a
    payload that is no envelope goes to the backout destination.
    """
    header_only = dataclasses.replace(pub, payload=b"")
    jms, _ = mqtt_to_jms(header_only, convert=ConvertMessageType(options.convert_message_type),
                         now_ms=int(received * 1000),
                         **({} if options.swiftmq_properties else {"info": None}))
    return jms_lookup(jms)


VIEW_CACHE_MAX = 4096   # distinct MQTT header combinations kept per route (cleared when exceeded)


class MqttViews:
    """``mqtt_view`` for a route's stream of publications, cached. Of a publication, the view depends
    on QoS, client id, user name and the MQTT 5 properties, and on the receive time only through
    JMSTimestamp; a route sees few distinct combinations (one per publishing client and QoS, typically),
    so the mapping runs once per combination and each message gets a copy with its own JMSTimestamp.
    Publications that carry a JMSTimestamp user property (it becomes the header) are not cached."""

    def __init__(self, options: RouteOptions) -> None:
        self.options = options
        self._cache: dict[tuple[object, ...], dict[str, Any]] = {}

    def __call__(self, pub: MqttPublication, received: float) -> dict[str, Any]:
        props = pub.user_properties
        if any(name == "JMSTimestamp" for name, _ in props):
            return mqtt_view(pub, self.options, received)
        key = (pub.qos, pub.client_id, pub.username, pub.content_type, pub.response_topic, pub.correlation_data,
               pub.payload_format_indicator, pub.message_expiry_interval, props)
        cached = self._cache.get(key)
        if cached is None:
            if len(self._cache) >= VIEW_CACHE_MAX:
                self._cache.clear()
            cached = self._cache[key] = mqtt_view(pub, self.options, 0.0)
        view = dict(cached)
        view["JMSTimestamp"] = int(received * 1000)
        return view


def mq_view(data: bytes, received: float) -> dict[str, Any]:
    """The JMS view of MQ message bytes (MQMD + headers + body), as IBM MQ classes for JMS read it.

    That is the MQMD/MQRFH2 -> JMS mapping (mappings/conversions/jms_mq.py; IBM MQ docs "Mapping IBM MQ
    fields onto JMS fields"): JMSPriority, JMSDeliveryMode from Persistence, JMSCorrelationID,
    JMSMessageID, JMSTimestamp, JMSType, JMSRedelivered and JMSXDeliveryCount from BackoutCount, the usr
    folder's properties, JMS_IBM_* properties. The embedded store evaluates this view itself; IBM MQ gets
    the selector as the MQOD/MQSD SelectionString and its queue manager does (MQ V7+ message selection
    accepts the JMS header names).
    """
    jms, _ = mq_bytes_to_jms(data, now_ms=int(received * 1000))
    return jms_lookup(jms)


@dataclasses.dataclass(frozen=True, slots=True)
class SourceSelector:
    """A route's compiled selector with the view of its source kind. ``matches`` raises MappingError
    when the view cannot be built (the message cannot be read as JMS): the caller decides what then."""

    selector: Selector
    view: Callable[[object, float], dict[str, Any]]

    @property
    def text(self) -> str:
        return self.selector.text

    def matches(self, message: object, received: float) -> bool:
        return self.selector.matches(self.view(message, received))


def source_selector(options: RouteOptions, source_kind: str) -> SourceSelector | None:
    """The selector of a route whose source is ``source_kind`` ("mqtt" | "mq"), or None when the route
    has none (or an empty one, which selects everything). JMS sources are not handled here: the provider
    evaluates the selector (STOMP ``selector`` header)."""
    text = options.selector
    if text is None or not text.strip():
        return None
    selector = compile_selector(text)   # validated with the rules already: this cannot fail here
    if source_kind == "mqtt":
        views = MqttViews(options)
        envelope = options.mqtt_format == "envelope"

        def view(message: object, received: float) -> dict[str, Any]:
            if not isinstance(message, MqttPublication):
                raise MappingError("an MQTT source gave no MQTT publication", structure="selector")
            if envelope:
                return jms_lookup(read_envelope(message.payload, qos=message.qos, now_ms=int(received * 1000))[0])
            return views(message, received)
    elif source_kind == "mq":
        def view(message: object, received: float) -> dict[str, Any]:
            if not isinstance(message, bytes | bytearray):
                raise MappingError("an MQ source gave no MQ message bytes", structure="selector")
            return mq_view(bytes(message), received)
    else:
        raise ValueError(f"no selector view for {source_kind!r} sources (JMS providers filter themselves)")
    return SourceSelector(selector, view)
