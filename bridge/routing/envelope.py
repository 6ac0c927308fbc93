"""Routes with ``options.mqtt_format: envelope``: the MQTT side carries the whole JMS message as JSON
(mappings/conversions/envelope.py), and a ``reply_to`` target sends each reply where its envelope says."""
from __future__ import annotations

import dataclasses
import time

from bridge.connectors.base import Inbound, Outbound
from bridge.routing.base import (
    Convert,
    Result,
    check_pair,
    checked_topic,
    fixed_destination,
    override_jms,
    rename_properties,
    temporary_reply_to,
)
from bridge.routing.convert import mq_to_publication
from mappings.conversions.envelope import (
    DESTINATION_FIELD,
    STRUCTURE,
    envelope_payload,
    envelope_qos,
    read_envelope,
    reply_choice,
    reply_destination,
)
from mappings.conversions.jms_mq import MqToJmsOptions, jms_to_mq_bytes, mq_bytes_to_jms
from mappings.conversions.mqtt_jms import SWIFTMQ_NAMES
from mappings.conversions.mqtt_mq import UserIdSource, user_id_of
from mappings.errors import MappingError
from mappings.jms.model import Destination, DestinationKind, JavaValue, JmsMessage, jint, jstring
from mappings.mq import constants as C
from mappings.mqtt.publication import MqttPublication
from mappings.report import ConversionReport
from mappings.rules.model import MqttEndpoint, QueueEndpoint, Route, dotted_to_mqtt, render_topic


class EnvelopeConverter:
    """A :class:`~bridge.routing.base.Converter` for the MQTT-facing pairs of an envelope route (the
    rules refuse the others)."""

    def __init__(self, route: Route, source_protocol: str, target_proto: str) -> None:
        check_pair(route, source_protocol, target_proto)
        self.route = route
        self.source_protocol = source_protocol
        self.target_protocol = target_proto
        table: dict[tuple[str, str], Convert] = {
            ("jms", "mqtt"): self._jms_to_envelope,
            ("mq", "mqtt"): self._mq_to_envelope,
            ("mqtt", "jms"): self._envelope_to_jms,
            ("mqtt", "mq"): self._envelope_to_mq,
        }
        convert = table.get((source_protocol, target_proto))
        if convert is None:
            raise MappingError("mqtt_format envelope needs an MQTT end", structure="route", field=route.name)
        self.convert: Convert = convert

    # -- to MQTT ------------------------------------------------------------------------------------

    def _publication(self, item: Inbound, jms: JmsMessage, topic: str, qos: int) -> Outbound:
        payload = envelope_payload(jms)
        pub = MqttPublication(topic=topic, payload=payload, qos=qos, payload_format_indicator=1)
        return Outbound(item.key, pub, topic, len(payload))

    def _jms_to_envelope(self, item: Inbound) -> Result:
        jms = item.message
        assert isinstance(jms, JmsMessage)
        target = self.route.target
        assert isinstance(target, MqttEndpoint)
        topic = checked_topic(render_topic(target.mqtt, topic=dotted_to_mqtt(item.destination),
                                           dest=item.destination))
        jms = override_jms(temporary_reply_to(jms, item), self.route.options)
        return self._publication(item, jms, topic, envelope_qos(jms)), "publish", ConversionReport()

    def _mq_to_envelope(self, item: Inbound) -> Result:
        """Topic and QoS exactly as the payload form (MQ Telemetry Tables 4-5); the payload is the MQ
        message read as JMS (IBM MQ docs "Mapping JMS fields onto IBM MQ fields"), whose findings are
        what the envelope lost."""
        raw = item.message
        assert isinstance(raw, bytes)
        plain, _, _ = mq_to_publication(self.route, item)
        pub = plain.message
        assert isinstance(pub, MqttPublication)
        jms, report = mq_bytes_to_jms(raw, now_ms=int(time.time() * 1000), options=MqToJmsOptions(
            drop_bad_properties=self.route.options.bad_property == "drop"))
        jms = override_jms(jms, self.route.options)   # as the payload form's MQMD (the QoS above)
        if jms.headers.destination is None:   # what a JMS consumer of that queue would see
            jms = dataclasses.replace(jms, headers=dataclasses.replace(
                jms.headers, destination=Destination.queue(item.destination)))
        return self._publication(item, jms, pub.topic, pub.qos), "publish", report

    # -- from MQTT ----------------------------------------------------------------------------------

    def _read(self, item: Inbound, report: ConversionReport) -> tuple[MqttPublication, JmsMessage]:
        """The envelope as a JMS message with the gateway's properties (JMSDestination still the envelope's)."""
        pub = item.message
        assert isinstance(pub, MqttPublication)
        # JMSTimestamp is the provider's to set over STOMP: only an MQ message gets the default (PutDate/PutTime)
        now_ms = int(time.time() * 1000) if self.target_protocol == "mq" else 0
        jms, found = read_envelope(pub.payload, qos=pub.qos, now_ms=now_ms)
        report.extend(found)
        if pub.retain:
            report.dropped("retain", "JMS has no retained-message flag")
        opts = self.route.options
        props = dict(jms.properties.items())
        if self.target_protocol == "mq":   # MQ Telemetry Table 1: UserIdentifier (JMSXUserID -> MQMD)
            _set_user_id(props, self._user_id(pub), report)
        elif opts.swiftmq_properties:
            _set_info_properties(props, pub, report)
        if props != dict(jms.properties.items()):
            jms = JmsMessage(jms.headers, props, jms.body)   # one construction: names validated once more
        return pub, rename_properties(jms, opts.property_map, report)

    def _user_id(self, pub: MqttPublication) -> str | None:
        opts = self.route.options
        return user_id_of(pub, UserIdSource(opts.user_identifier), opts.configured_user_id)[1]

    def _addressed(self, pub: MqttPublication, jms: JmsMessage, report: ConversionReport) -> tuple[JmsMessage, str]:
        """Where the message goes: the envelope's allowed JMSDestination (reply_to targets), else the
        route's destination. Returns the message with JMSDestination set and the target's destination."""
        target = self.route.target
        assert isinstance(target, QueueEndpoint)
        fixed = fixed_destination(target, pub)
        temp = False
        if target.reply_to:
            dest, temp = self._reply_destination(jms, fixed, report)
        else:
            assert fixed is not None
            dest, named = fixed, jms.headers.destination
            if named is not None and named != dest:
                report.dropped("JMSDestination", f"{named.uri}: the route sends to {dest.uri}")
        if dest != jms.headers.destination:
            jms = JmsMessage(dataclasses.replace(jms.headers, destination=dest), jms.properties, jms.body)
        kind = dest.kind.value
        if temp:
            return jms, f"/remote-temp-{kind}/{dest.name}"   # ActiveMQ's STOMP name of another connection's one
        if self.target_protocol == "jms":
            return jms, f"{kind}:{dest.name}"
        return jms, ("topic:" if dest.kind is DestinationKind.TOPIC else "") + dest.name

    def _reply_destination(self, jms: JmsMessage, fallback: Destination | None,
                           report: ConversionReport) -> tuple[Destination, bool]:
        """The allowed destination the envelope names (and whether it is temporary), else the fallback."""
        target = self.route.target
        assert isinstance(target, QueueEndpoint)
        dest, temp = reply_choice(reply_destination(jms, target.allow), fallback, report,
                                  absent="the envelope names no reply destination")
        if temp and self.target_protocol != "jms":
            raise MappingError(f"{dest.name!r} is a JMS temporary destination and the target is "
                               f"{self.target_protocol}", structure=STRUCTURE, field=DESTINATION_FIELD)
        return dest, temp

    def _envelope_to_jms(self, item: Inbound) -> Result:
        report = ConversionReport()
        pub, jms = self._read(item, report)
        jms, dest = self._addressed(pub, override_jms(jms, self.route.options), report)
        return Outbound(item.key, jms, dest, len(pub.payload)), jms.body_type.java_class, report

    def _envelope_to_mq(self, item: Inbound) -> Result:
        """Through the JMS -> MQ mapping (IBM MQ docs "Mapping JMS fields onto IBM MQ fields": CorrelId,
        ReplyToQ/ReplyToQMgr, RFH2 jms/usr folders); the route's persistence/priority overrides as for the
        payload form."""
        report = ConversionReport()
        pub, jms = self._read(item, report)
        jms, dest = self._addressed(pub, override_jms(jms, self.route.options), report)
        data, conv = jms_to_mq_bytes(jms, now_ms=int(time.time() * 1000))
        report.extend(conv)
        return Outbound(item.key, data, dest, len(pub.payload)), C.MQFMT_RF_HEADER_2.strip(), report


def _set_info_properties(props: dict[str, JavaValue], pub: MqttPublication, report: ConversionReport) -> None:
    """The SwiftMQ informational properties (as mqtt_to_jms adds them): the gateway's values win over
    same-named envelope properties, so an MQTT client cannot claim another user or client id."""
    names = SWIFTMQ_NAMES
    extras = [(names.user_id, None if pub.username is None else jstring(pub.username)),
              (names.client_id, None if pub.client_id is None else jstring(pub.client_id)),
              (names.qos, jint(pub.qos))]
    for name, value in extras:
        if name is None or value is None:
            continue
        if name in props and props[name] != value:
            report.dropped(name, "envelope property replaced by the gateway's informational property")
        props[name] = value


def _set_user_id(props: dict[str, JavaValue], user: str | None, report: ConversionReport) -> None:
    """JMSXUserID (-> MQMD.UserIdentifier) is the gateway's to set, from the route's user_identifier."""
    if user is None:
        return
    if "JMSXUserID" in props and props["JMSXUserID"] != jstring(user):
        report.dropped("JMSXUserID", "envelope property replaced by the route's user_identifier")
    props["JMSXUserID"] = jstring(user)
