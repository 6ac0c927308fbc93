"""The payload form's converter (RouteConverter), one per route: applies the route's options to the
mapping library's conversion of its (source protocol, target protocol) pair. Built once per route, so
constant parts (encoders, options) are reused. Also: what a poison message becomes on a backout queue."""
from __future__ import annotations

import dataclasses
import time

from bridge.connectors.base import Inbound, Outbound
from bridge.routing.base import (
    FIXED_PERSISTENCE,
    Convert,
    Result,
    check_pair,
    checked_topic,
    mq_persistence,
    override_jms,
    rename_properties,
)
from bridge.routing.mqtt_stomp import MqttToStompEncoder, mqtt_to_jms_message
from mappings.conversions.jms_mq import MqToJmsOptions, jms_to_mq_bytes, mq_bytes_to_jms
from mappings.conversions.mqtt_jms import jms_to_mqtt
from mappings.conversions.mqtt_mq import (
    MqToMqttOptions,
    MqttToMqEncoder,
    MqttToMqOptions,
    UserIdSource,
    mq_to_mqtt,
    packet_id_from_msg_id,
)
from mappings.errors import MappingError
from mappings.jms.json_forms import map_to_typed_json, stream_to_typed_json
from mappings.jms.model import JmsMessage, MapBody, StreamBody
from mappings.mq import constants as C
from mappings.mq.message import MqMessage, build_message, decode_message, encode_message
from mappings.mq.mqmd import Mqmd
from mappings.mq.rfh2 import Rfh2, RfhElement, RfhFolder
from mappings.mqtt.publication import MqttPublication
from mappings.report import ConversionReport
from mappings.rules.model import MqttEndpoint, QueueEndpoint, Route, render_topic


class RouteConverter:
    """A :class:`~bridge.routing.base.Converter` of the payload form (the MQTT payload is the body)."""

    def __init__(self, route: Route, source_protocol: str, target_proto: str) -> None:
        check_pair(route, source_protocol, target_proto)
        self.route = route
        self.source_protocol = source_protocol
        self.target_protocol = target_proto
        opts = route.options
        # the route's persistence (as_source: the QoS rule of MQ Telemetry Table 1) and priority, written by the encoder
        self._mq_encoder = MqttToMqEncoder(MqttToMqOptions(
            user_id_source=UserIdSource(opts.user_identifier), configured_user_id=opts.configured_user_id,
            persistence=FIXED_PERSISTENCE[opts.persistence],
            priority=C.MQPRI_PRIORITY_AS_Q_DEF if opts.priority is None else opts.priority,
            reply_to_queue=opts.reply_to_queue))
        table: dict[tuple[str, str], Convert] = {
            ("mqtt", "mq"): self._mqtt_to_mq,
            ("mq", "mqtt"): self._mq_to_mqtt,
            ("mqtt", "jms"): self._mqtt_to_jms,
            ("jms", "mqtt"): self._jms_to_mqtt,
            ("mq", "jms"): self._mq_to_jms,
            ("jms", "mq"): self._jms_to_mq,
        }
        convert = table[(source_protocol, target_proto)]
        if (source_protocol, target_proto) == ("mqtt", "jms"):   # straight to STOMP frames, cached per topic
            convert = MqttToStompEncoder(route).convert
        self.convert: Convert = convert

    # -- MQTT -> MQ: MQ Telemetry Tables 1-3 ------------------------------------------------------------

    def _mqtt_to_mq(self, item: Inbound) -> Result:
        pub = item.message
        assert isinstance(pub, MqttPublication)
        data, report = self._mq_encoder.encode(pub)
        target = self.route.target
        assert isinstance(target, QueueEndpoint)
        out = Outbound(item.key, data, target.destination, len(pub.payload))
        return out, C.MQFMT_RF_HEADER_2.strip(), report

    # -- MQ -> MQTT: MQ Telemetry Tables 4-5 ------------------------------------------------------------

    def _mq_to_mqtt(self, item: Inbound) -> Result:
        return mq_to_publication(self.route, item)

    # -- MQTT -> JMS: Eclipse Amlen "Conversion between MQTT and JMS", SwiftMQ "MQTT Swiftlet" ----------

    def _mqtt_to_jms(self, item: Inbound) -> Result:
        """The model path (a JmsMessage); ``convert`` takes MqttToStompEncoder's frames built from it."""
        return mqtt_to_jms_message(self.route, item)

    # -- JMS -> MQTT ------------------------------------------------------------------------------------

    def _jms_to_mqtt(self, item: Inbound) -> Result:
        jms = item.message
        assert isinstance(jms, JmsMessage)
        target = self.route.target
        assert isinstance(target, MqttEndpoint)
        topic = checked_topic(render_topic(target.mqtt, topic=item.destination.replace(".", "/"),
                                           dest=item.destination))
        opts = self.route.options
        jms = override_jms(jms, opts)   # persistence -> the QoS rule (PERSISTENT 2, NON_PERSISTENT 0)
        pub, report = jms_to_mqtt(jms, topic=topic, now_ms=int(time.time() * 1000))
        if opts.json_style == "typed" and isinstance(jms.body, MapBody | StreamBody):   # docs/json-forms.md
            typed = map_to_typed_json(jms.body) if isinstance(jms.body, MapBody) else stream_to_typed_json(jms.body)
            pub = dataclasses.replace(pub, payload=typed.encode("utf-8"))
        return Outbound(item.key, pub, topic, len(pub.payload)), "publish", report

    # -- MQ <-> JMS: IBM MQ docs "Mapping JMS fields onto IBM MQ fields" (docs/jms-mq.md) -------------------

    def _mq_to_jms(self, item: Inbound) -> Result:
        raw = item.message
        assert isinstance(raw, bytes)
        jms, report = mq_bytes_to_jms(raw, now_ms=int(time.time() * 1000), options=MqToJmsOptions(
            drop_bad_properties=self.route.options.bad_property == "drop"))
        jms = override_jms(rename_properties(jms, self.route.options.property_map, report), self.route.options)
        target = self.route.target
        assert isinstance(target, QueueEndpoint)
        return Outbound(item.key, jms, target.destination, len(raw)), jms.body_type.java_class, report

    def _jms_to_mq(self, item: Inbound) -> Result:
        jms = item.message
        assert isinstance(jms, JmsMessage)
        jms = rename_properties(jms, self.route.options.property_map, report := ConversionReport())
        # the route's persistence/priority on the JMS headers, so the encoder writes MQMD and jms/Dlv, jms/Pri alike
        data, conv = jms_to_mq_bytes(override_jms(jms, self.route.options), now_ms=int(time.time() * 1000))
        report.extend(conv)
        target = self.route.target
        assert isinstance(target, QueueEndpoint)
        return Outbound(item.key, data, target.destination, item.size), C.MQFMT_RF_HEADER_2.strip(), report


def mq_to_publication(route: Route, item: Inbound) -> Result:
    """An MQ message as the route's MQTT publication (MQ Telemetry Tables 4-5): the route's persistence
    override first (MQ Telemetry Table 4 then gives the QoS of the new persistence), the topic rendered from the
    route's template (mqps/Top, the queue, the publisher's client id)."""
    raw = item.message
    assert isinstance(raw, bytes)
    msg = decode_message(raw)
    opts = route.options
    if opts.persistence != "as_source":
        msg = dataclasses.replace(msg, md=dataclasses.replace(
            msg.md, persistence=mq_persistence(opts, msg.md.persistence == C.MQPER_PERSISTENT)))
    target = route.target
    assert isinstance(target, MqttEndpoint)
    mqps = msg.rfh2_folder("mqps")
    top = (mqps.value("Top") if mqps is not None else None) or ""
    fallback = render_topic(target.mqtt, topic=top, dest=item.destination)
    # to one client (no subscription) the limit is the client's DEFAULT.QoS subscription, else default_qos:
    # the broker applies it at delivery (Publisher.deliver_to_client), so the QoS here is Table 4's unlimited
    limit = opts.default_qos if target.client_id is None else 2
    pub, report = mq_to_mqtt(msg, subscriber_qos=None, packet_id_allocator=lambda: 1,
                             options=MqToMqttOptions(default_qos=limit, fallback_topic=fallback))
    topic = checked_topic(render_topic(target.mqtt, topic=top, dest=item.destination, client=pub.client_id or ""))
    # the MsgId's id (MQ Telemetry Table 5) is what each subscriber's delivery takes where it is free; a
    # MsgId ending in 0000 gives none, and the session's own allocator numbers the delivery
    pub = dataclasses.replace(pub, topic=topic,
                              packet_id=pub.packet_id if packet_id_from_msg_id(msg.md.msg_id) else None)
    return Outbound(item.key, pub, topic, len(pub.payload)), "publish", report


def backout_message(item: Inbound, route: str, reason: str) -> bytes:
    """What a poison message becomes on a backout queue: an MQ message whose RFH2 folder ``mqbridge``
    says why, followed by the original bytes unchanged (MQ: the whole message; MQTT/JMS: the body)."""
    raw = item.message
    if isinstance(raw, bytes):
        body = raw
    elif isinstance(raw, MqttPublication):
        body = raw.payload
    elif isinstance(raw, JmsMessage):   # its body as an MQTT subscriber gets it (Amlen Table 1)
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
