"""One converter per (source protocol, target protocol): applies a route's options to the mapping
library's pure functions. Built once per route, so constant parts (encoders, options) are reused."""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from bridge.connectors.base import Inbound, Outbound
from bridge.routing.mqtt_stomp import MqttToStompEncoder
from mappings.conversions.jms_mq import jms_to_mq_bytes, mq_bytes_to_jms
from mappings.conversions.mqtt_jms import ConvertMessageType, jms_to_mqtt, mqtt_to_jms
from mappings.conversions.mqtt_mq import MqToMqttOptions, MqttToMqEncoder, MqttToMqOptions, UserIdSource, mq_to_mqtt
from mappings.errors import MappingError
from mappings.jms.json_forms import map_to_typed_json, stream_to_typed_json
from mappings.jms.model import DeliveryMode, JmsMessage, MapBody, StreamBody
from mappings.mq import constants as C
from mappings.mq.message import MqMessage, build_message, decode_message, encode_message
from mappings.mq.mqmd import Mqmd
from mappings.mq.rfh2 import Rfh2, RfhElement, RfhFolder
from mappings.mqtt.publication import MqttPublication
from mappings.mqtt.topics import TopicError, validate_topic_name
from mappings.report import ConversionReport
from mappings.rules.model import MqttEndpoint, QueueEndpoint, Route, RouteOptions, render_dotted_topic, render_topic

Result = tuple[Outbound, str, ConversionReport]   # converted message, target type, findings
Convert = Callable[[Inbound], Result]


def target_protocol(route: Route, connector_type: str) -> str:
    if isinstance(route.target, MqttEndpoint):
        return "mqtt"
    return "jms" if connector_type == "jms" else "mq"


def _persistence(route: Route, source_persistent: bool) -> int:
    p = route.options.persistence
    if p == "persistent":
        return C.MQPER_PERSISTENT
    if p == "not_persistent":
        return C.MQPER_NOT_PERSISTENT
    return C.MQPER_PERSISTENT if source_persistent else C.MQPER_NOT_PERSISTENT


def override_mqmd(data: bytes, route: Route, source_persistent: bool) -> bytes:
    """The route's persistence/priority overrides on an MQ message (MQMD Persistence, Priority)."""
    opts = route.options
    if opts.persistence == "as_source" and opts.priority is None:
        return data
    msg = decode_message(data)
    md = dataclasses.replace(msg.md, persistence=_persistence(route, source_persistent),
                             priority=opts.priority if opts.priority is not None else msg.md.priority)
    return encode_message(dataclasses.replace(msg, md=md))


def override_jms(jms: JmsMessage, opts: RouteOptions) -> JmsMessage:
    """The route's persistence/priority overrides on a JMS message (JMSDeliveryMode, JMSPriority)."""
    if opts.persistence == "as_source" and opts.priority is None:
        return jms
    headers = jms.headers
    mode = {"persistent": DeliveryMode.PERSISTENT, "not_persistent": DeliveryMode.NON_PERSISTENT}.get(
        opts.persistence, headers.delivery_mode)
    priority = opts.priority if opts.priority is not None else headers.priority
    return dataclasses.replace(jms, headers=dataclasses.replace(headers, delivery_mode=mode, priority=priority))


def _checked_topic(topic: str) -> str:
    try:
        validate_topic_name(topic)
    except TopicError as exc:
        raise MappingError(str(exc), structure="route", field="to.mqtt") from None
    return topic


class RouteConverter:
    def __init__(self, route: Route, source_protocol: str, target_proto: str) -> None:
        self.route = route
        self.source_protocol = source_protocol
        self.target_protocol = target_proto
        opts = route.options
        self._mq_encoder = MqttToMqEncoder(MqttToMqOptions(
            user_id_source=UserIdSource(opts.user_identifier), configured_user_id=opts.configured_user_id))
        table: dict[tuple[str, str], Convert] = {
            ("mqtt", "mq"): self._mqtt_to_mq,
            ("mq", "mqtt"): self._mq_to_mqtt,
            ("mqtt", "jms"): self._mqtt_to_jms,
            ("jms", "mqtt"): self._jms_to_mqtt,
            ("mq", "jms"): self._mq_to_jms,
            ("jms", "mq"): self._jms_to_mq,
        }
        convert = table.get((source_protocol, target_proto))
        if convert is None:
            raise MappingError(f"no conversion from {source_protocol} to {target_proto} yet",
                               structure="route", field=route.name)
        if (source_protocol, target_proto) == ("mqtt", "jms"):   # straight to STOMP frames, cached per topic
            convert = MqttToStompEncoder(self._mqtt_to_jms, ConvertMessageType(opts.convert_message_type)).convert
        self.convert: Convert = convert

    # -- MQTT -> MQ: seed mq-telemetry Tables 1-3 -----------------------------------------------------

    def _mqtt_to_mq(self, item: Inbound) -> Result:
        pub = item.message
        assert isinstance(pub, MqttPublication)
        data, report = self._mq_encoder.encode(pub)
        data = override_mqmd(data, self.route, pub.qos > 0)
        target = self.route.target
        assert isinstance(target, QueueEndpoint)
        out = Outbound(item.key, data, target.destination, len(pub.payload))
        return out, C.MQFMT_RF_HEADER_2.strip(), report

    # -- MQ -> MQTT: seed mq-telemetry Tables 4-5 -----------------------------------------------------

    def _mq_to_mqtt(self, item: Inbound) -> Result:
        raw = item.message
        assert isinstance(raw, bytes)
        msg = decode_message(raw)
        if self.route.options.persistence != "as_source":   # Table 4 then gives the QoS of the new persistence
            msg = dataclasses.replace(msg, md=dataclasses.replace(
                msg.md, persistence=_persistence(self.route, msg.md.persistence == C.MQPER_PERSISTENT)))
        target = self.route.target
        assert isinstance(target, MqttEndpoint)
        mqps = msg.rfh2_folder("mqps")
        top = (mqps.value("Top") if mqps is not None else None) or ""
        fallback = render_topic(target.mqtt, topic=top, dest=item.destination)
        pub, report = mq_to_mqtt(msg, subscriber_qos=None, packet_id_allocator=lambda: 1,
                                 options=MqToMqttOptions(default_qos=self.route.options.default_qos,
                                                         fallback_topic=fallback))
        topic = _checked_topic(render_topic(target.mqtt, topic=top, dest=item.destination,
                                            client=pub.client_id or ""))
        pub = dataclasses.replace(pub, topic=topic, packet_id=None)
        return Outbound(item.key, pub, topic, len(pub.payload)), "publish", report

    # -- MQTT -> JMS: amlen-mqtt-jms-conversion.txt Table 1, SwiftMQ properties ------------------------

    def _mqtt_to_jms(self, item: Inbound) -> Result:
        pub = item.message
        assert isinstance(pub, MqttPublication)
        opts = self.route.options
        jms, report = mqtt_to_jms(pub, convert=ConvertMessageType(opts.convert_message_type),
                                  now_ms=int(time.time() * 1000),
                                  **({} if opts.swiftmq_properties else {"info": None}))
        jms = override_jms(_rename_properties(jms, opts.property_map, report), opts)
        target = self.route.target
        assert isinstance(target, QueueEndpoint)
        dest = target.destination
        if target.topic is not None and "{" in target.topic:
            dest = "topic:" + render_dotted_topic(target.topic, topic=pub.topic, client=pub.client_id or "")
        return Outbound(item.key, jms, dest, len(pub.payload)), type(jms.body).__name__, report

    # -- JMS -> MQTT ------------------------------------------------------------------------------------

    def _jms_to_mqtt(self, item: Inbound) -> Result:
        jms = item.message
        assert isinstance(jms, JmsMessage)
        target = self.route.target
        assert isinstance(target, MqttEndpoint)
        topic = _checked_topic(render_topic(target.mqtt, topic=item.destination.replace(".", "/"),
                                            dest=item.destination))
        opts = self.route.options
        jms = override_jms(jms, opts)   # persistence -> the QoS rule (PERSISTENT 2, NON_PERSISTENT 0)
        pub, report = jms_to_mqtt(jms, topic=topic, now_ms=int(time.time() * 1000))
        if opts.json_style == "typed" and isinstance(jms.body, MapBody | StreamBody):   # docs/json-forms.md
            typed = map_to_typed_json(jms.body) if isinstance(jms.body, MapBody) else stream_to_typed_json(jms.body)
            pub = dataclasses.replace(pub, payload=typed.encode("utf-8"))
        _mqtt5_only_losses(pub, report)
        return Outbound(item.key, pub, topic, len(pub.payload)), "publish", report


    # -- MQ <-> JMS: the seed's MQJMSTransform / JMSMQTransform tables, mq-wire-facts.md §6 ----------------

    def _mq_to_jms(self, item: Inbound) -> Result:
        raw = item.message
        assert isinstance(raw, bytes)
        jms, report = mq_bytes_to_jms(raw, now_ms=int(time.time() * 1000))
        jms = override_jms(_rename_properties(jms, self.route.options.property_map, report), self.route.options)
        target = self.route.target
        assert isinstance(target, QueueEndpoint)
        return Outbound(item.key, jms, target.destination, len(raw)), type(jms.body).__name__, report

    def _jms_to_mq(self, item: Inbound) -> Result:
        jms = item.message
        assert isinstance(jms, JmsMessage)
        jms = _rename_properties(jms, self.route.options.property_map, report := ConversionReport())
        data, conv = jms_to_mq_bytes(jms, now_ms=int(time.time() * 1000))
        report.extend(conv)
        data = override_mqmd(data, self.route, jms.headers.delivery_mode is DeliveryMode.PERSISTENT)
        target = self.route.target
        assert isinstance(target, QueueEndpoint)
        return Outbound(item.key, data, target.destination, item.size), C.MQFMT_RF_HEADER_2.strip(), report


# What jms_to_mqtt maps to MQTT 5 publish properties; the built-in broker delivers MQTT 3.1/3.1.1 only
# (MqttTarget publishes topic, payload, QoS and retain), so each of them is reported as lost.
_MQTT5_FIELDS = (("response_topic", "JMSReplyTo"), ("correlation_data", "JMSCorrelationID"),
                 ("content_type", "JMSType"), ("message_expiry_interval", "JMSExpiration"))


def _mqtt5_only_losses(pub: MqttPublication, report: ConversionReport) -> None:
    for attr, jms_name in _MQTT5_FIELDS:
        if getattr(pub, attr) is not None:
            report.dropped(jms_name, f"MQTT 5 {attr.replace('_', ' ')}: the built-in broker speaks MQTT 3.1.1")
    for name, _ in pub.user_properties:
        report.dropped(name, "MQTT 5 user property: the built-in broker speaks MQTT 3.1.1")


def _rename_properties(jms: JmsMessage, mapping: dict[str, str], report: ConversionReport) -> JmsMessage:
    if not mapping:
        return jms
    props = jms.properties
    renamed = {mapping.get(k, k): v for k, v in props.items()}
    for k in props:
        if k in mapping:
            report.renamed(k, f"-> {mapping[k]} (route property_map)")
    return dataclasses.replace(jms, properties=renamed)  # JmsMessage re-validates the names


def backout_message(item: Inbound, route: str, reason: str) -> bytes:
    """What a poison message becomes on a backout queue: an MQ message whose RFH2 folder ``mqbridge``
    says why, followed by the original bytes unchanged (MQ: the whole message; MQTT/JMS: the body)."""
    raw = item.message
    if isinstance(raw, bytes):
        body = raw
    elif isinstance(raw, MqttPublication):
        body = raw.payload
    elif isinstance(raw, JmsMessage):   # its body as an MQTT subscriber gets it (amlen Table 1)
        try:
            body = jms_to_mqtt(raw, topic="backout")[0].payload
        except MappingError:
            body = repr(raw).encode("utf-8", "replace")
    else:
        body = repr(raw).encode("utf-8", "replace")
    folder = RfhFolder("mqbridge", (
        RfhElement("Route", route), RfhElement("Reason", reason[:2000]),
        RfhElement("SourceProtocol", item.protocol), RfhElement("Source", item.destination),
        RfhElement("Key", item.key), RfhElement("Redelivered", str(item.redelivery_count)),
    ))
    msg: MqMessage = build_message(Mqmd(persistence=C.MQPER_PERSISTENT, format=C.MQFMT_RF_HEADER_2),
                                   (Rfh2(folders=(folder,)),), body)
    return encode_message(msg)
