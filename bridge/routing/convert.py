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
    response_topic_from_provider,
    temporary_reply_to,
)
from bridge.routing.mq_memo import MqToMqttMemo
from bridge.routing.mqtt_stomp import MqttToJmsModels, MqttToStompEncoder, mqtt_to_jms_message
from mappings.conversions.jms_mq import MqToJmsOptions, jms_to_mq, jms_to_mq_bytes, mq_bytes_to_jms
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
from mappings.mq.headers import Mqdlh
from mappings.mq.message import MqMessage, build_message, decode_message, encode_message
from mappings.mq.mqmd import Mqmd
from mappings.mq.rfh2 import Rfh2, RfhElement, RfhFolder
from mappings.mqtt.publication import MqttPublication
from mappings.report import ConversionReport
from mappings.rules.model import MqttEndpoint, QueueEndpoint, Route, dotted_to_mqtt, render_topic


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
        if (source_protocol, target_proto) == ("mq", "mqtt"):   # remembered by header (mq_memo)
            convert = MqToMqttMemo(route, mq_to_publication).convert
        if (source_protocol, target_proto) == ("mqtt", "jms"):   # straight to STOMP frames, cached per topic
            convert = MqttToStompEncoder(route).convert
        self.convert: Convert = convert

    def model_path(self) -> None:
        """For a target that writes JmsMessage values itself (the native JMS connector): MQTT -> JMS builds the
        model, not STOMP frames."""
        if (self.source_protocol, self.target_protocol) == ("mqtt", "jms"):
            self.convert = MqttToJmsModels(self.route).convert   # the model path's messages, cached per key

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
        topic = checked_topic(render_topic(target.mqtt, topic=dotted_to_mqtt(item.destination),
                                           dest=item.destination))
        opts = self.route.options
        # persistence -> the QoS rule (PERSISTENT 2, NON_PERSISTENT 0); a requester's TemporaryQueue as
        # JMSReplyTo: the Response Topic queue:///ID:..?temporary=true, which a reply_to route sends back to
        jms = override_jms(temporary_reply_to(jms, item), opts)
        pub, report = jms_to_mqtt(jms, topic=topic, now_ms=int(time.time() * 1000))
        pub = response_topic_from_provider(pub, jms)
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


DEAD_LETTER_QUEUE = "SYSTEM.DEAD.LETTER.QUEUE"
MQRC_FORMAT_ERROR, MQRC_BACKOUT_THRESHOLD_REACHED = 2110, 2362
PUT_APPL_NAME = "mqbridge"


def backout_message(item: Inbound, route: str, reason: str, *, dead_letter: bool = False, threshold: bool = False,
                    now: float | None = None) -> bytes:
    """What a poison message becomes on the backout destination. An MQ message keeps its MQMD (MsgId,
    CorrelId, ReplyToQ, Persistence ...), as IBM MQ's backout requeue does, and says why where MQ tools read
    it: on a dead-letter queue (``dead_letter``) in an MQDLH (Reason 2362 MQRC_BACKOUT_THRESHOLD_REACHED, or 2110
    MQRC_FORMAT_ERROR for a message the route cannot convert; DestQName the queue the route read it from, so
    that a dead-letter handler's RETRY gives it back to the route; PutApplName mqbridge), elsewhere in a
    ``mqbridge`` folder added to its RFH2 (its other folders' bytes unchanged). A JMS message becomes the MQ
    message IBM MQ classes for JMS would put (its headers and properties in the mcd, jms and usr folders), with
    the ``mqbridge`` folder (or behind the MQDLH). A message from MQTT becomes an MQ message whose RFH2
    ``mqbridge`` folder says why, followed by its payload."""
    folder = RfhFolder("mqbridge", (
        RfhElement("Route", route), RfhElement("Reason", reason[:2000]),
        RfhElement("SourceProtocol", item.protocol), RfhElement("Source", item.destination),
        RfhElement("Key", item.key), RfhElement("Redelivered", str(item.redelivery_count)),
    ))
    raw = item.message
    original: MqMessage | None = None
    if isinstance(raw, bytes) and item.protocol == "mq":
        try:
            original = decode_message(raw)
        except MappingError:
            original = None   # not MQ's format: carried whole as the body, below
    elif isinstance(raw, JmsMessage):
        try:
            original = jms_to_mq(raw, now_ms=int((time.time() if now is None else now) * 1000))[0]
        except MappingError:
            original = None   # its body as an MQTT subscriber gets it, below
    if original is not None:
        if dead_letter:
            return encode_message(_dead_letter(original, item.destination, threshold, now))
        return encode_message(_with_folder(original, folder))
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
    msg: MqMessage = build_message(Mqmd(persistence=C.MQPER_PERSISTENT, format=C.MQFMT_RF_HEADER_2),
                                   (Rfh2(folders=(folder,)),), body)
    return encode_message(msg)


def _dead_letter(msg: MqMessage, queue: str, threshold: bool, now: float | None) -> MqMessage:
    """``msg`` behind an MQDLH: the header describes what follows it as the MQMD did (Format, Encoding,
    CodedCharSetId); the MQMD is the message's own, its Format MQDEAD."""
    stamp = time.gmtime(time.time() if now is None else now)
    dlh = Mqdlh(reason=MQRC_BACKOUT_THRESHOLD_REACHED if threshold else MQRC_FORMAT_ERROR,
                dest_q_name=queue[:48], encoding=msg.md.encoding, coded_char_set_id=msg.md.coded_char_set_id,
                put_appl_type=C.MQAT_UNIX, put_appl_name=PUT_APPL_NAME, put_date=time.strftime("%Y%m%d", stamp),
                put_time=time.strftime("%H%M%S00", stamp))
    return build_message(msg.md, (dlh, *msg.headers), msg.body, body_format=msg.body_format)


def _with_folder(msg: MqMessage, folder: RfhFolder) -> MqMessage:
    """``msg`` with ``folder`` in its first RFH2 (one is put first when it has none)."""
    headers = list(msg.headers)
    for i, header in enumerate(headers):
        if isinstance(header, Rfh2):
            headers[i] = dataclasses.replace(header, folders=(*header.folders, folder))
            break
    else:
        headers.insert(0, Rfh2(encoding=msg.md.encoding, coded_char_set_id=msg.md.coded_char_set_id,
                               folders=(folder,)))
    return build_message(msg.md, tuple(headers), msg.body, body_format=msg.body_format)
