"""MQTT publication -> JMS for routes from the built-in broker to a JMS provider: the model path and the
STOMP frame cache built from it, side by side (tests/test_mqtt_stomp_fast.py holds them equal).

The model path (:func:`mqtt_to_jms_message`): mqtt_to_jms (Eclipse Amlen "Conversion between MQTT and
JMS", Table 1, with the SwiftMQ "MQTT Swiftlet" informational properties), the route's property_map and
overrides; the JMS target then writes the frame (mappings.stomp.frames.jms_to_frame, docs/stomp-facts.md
§1). For an MQTT 3.1.1 publication (no MQTT 5 properties) everything but the body depends only on (topic,
client id, user name, QoS, retain) and on whether the body is text (ConvertMessageType): the destination,
the frame's headers and their encoded bytes, and every finding of both steps (JMSTimestamp "set by the
broker", retain dropped, a NUL in a header, ...). :class:`MqttToStompEncoder` computes those once per key
**by running the model path itself** on a stand-in publication with an empty (text) or non-UTF-8 (bytes)
payload, and caches them; a message then costs the text test of its payload and a lookup. What the cache
cannot hold goes through the model path: MQTT 5 properties, and under ConvertMessageType ``text`` a
payload that is not valid UTF-8 or holds NUL (its findings name the payload).

:class:`MqttToJmsModels` keeps the model itself per key the same way, for the native JMS target, which
writes the model with the provider's client (tests/test_mqtt_jms_models.py holds it equal to the model path).

Why both: the model path builds a JmsMessage, a report and a frame per message. One QoS 1 publication of
100 text bytes through ``RouteConverter.convert`` (the cache) against ``_mqtt_to_jms`` + ``jms_to_frame``
(the model), interleaved on a loaded 2-core machine, 2026-11-25: 73,000-81,000 against 3,300-4,300 per
second, about 20 times (bench/README.md, "MQTT -> STOMP frame in one step", for the route's figures).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace

from bridge.connectors.base import Inbound, Outbound
from bridge.routing.base import Result, fixed_destination, override_jms, rename_properties, reply_to_provider
from mappings.conversions.envelope import admitted, reply_choice
from mappings.conversions.mqtt_jms import ConvertMessageType, mqtt_to_jms, text_problem
from mappings.errors import MappingError
from mappings.jms.model import BytesBody, DestinationKind, JmsMessage, TextBody, destination_of_uri
from mappings.mqtt.publication import MqttPublication
from mappings.report import ConversionReport, Finding
from mappings.rules.model import QueueEndpoint, Route
from mappings.stomp.frames import SendFrame, jms_to_frame
from mappings.stomp.text import encode_modified_utf8_bytes


def mqtt_to_jms_message(route: Route, item: Inbound) -> Result:
    """The model path: the route's MQTT publication as a JmsMessage to its destination (route form,
    ``topic:x`` when the target's topic is a template)."""
    pub = item.message
    assert isinstance(pub, MqttPublication)
    opts = route.options
    jms, report = mqtt_to_jms(pub, convert=ConvertMessageType(opts.convert_message_type),
                              now_ms=int(time.time() * 1000),
                              **({} if opts.swiftmq_properties else {"info": None}))
    jms = reply_to_provider(override_jms(rename_properties(jms, opts.property_map, report), opts), pub.response_topic)
    target = route.target
    assert isinstance(target, QueueEndpoint)
    dest = target.destination
    if target.reply_to:
        dest = reply_target(target, pub, report)
    elif target.topic is not None and "{" in target.topic:
        rendered = fixed_destination(target, pub)
        assert rendered is not None
        dest = "topic:" + rendered.name
    return Outbound(item.key, jms, dest, len(pub.payload)), jms.body_type.java_class, report


def reply_target(target: QueueEndpoint, pub: MqttPublication, report: ConversionReport) -> str:
    """A payload-form ``reply_to`` target: the destination is the publication's topic, the Response Topic an
    MQTT 5 responder was given (a JMSReplyTo queue's URI, ``queue:///Q`` or ``queue:///ID:..?temporary=true``
    for a requester's TemporaryQueue), if an ``allow`` prefix admits it; else the route's fallback queue or
    topic (the envelope's rules: reply_choice). Returns the route's destination text (``Q``, ``topic:T``,
    ``temp-queue://ID:..``)."""
    named = destination_of_uri(pub.topic)
    if named is not None:
        admitted(named, target.allow, "route", "topic")
    dest, temp = reply_choice(named, fixed_destination(target, pub), report, structure="route", field="topic",
                              absent=f"{pub.topic!r} names no reply destination (a queue:// or topic:// URI, as "
                                     "the MQTT 5 Response Topic gives it)")
    if temp:
        return f"temp-{dest.kind.value}://{dest.name}"
    return dest.name if dest.kind is DestinationKind.QUEUE else f"topic:{dest.name}"


# Stand-in payloads: the model path classifies them as the body kind of the key (auto/text: "" is a
# TextMessage; auto/bytes: 0xFF is not UTF-8, so a BytesMessage, with no finding under either rule).
_TEXT_STAND_IN = b""
_BYTES_STAND_IN = b"\xff"


@dataclass(frozen=True, slots=True)
class _Template:
    destination: str                 # Outbound.destination (route form, e.g. topic:x)
    frame_destination: str           # the STOMP destination header
    headers: dict[str, str]          # shared by every frame of the key: never mutated
    head: bytes                      # encode_send_head(frame_destination, headers)
    target_type: str                 # TextMessage | BytesMessage
    findings: tuple[Finding, ...]    # the conversion's (mqtt_to_jms, property_map), then jms_to_frame's
    content_length: bool


_Key = tuple[str, str | None, str | None, int, bool, bool]   # topic, client, user, qos, retain, text?


class MqttToStompEncoder:
    """A route's MQTT -> JMS conversion, producing SendFrame values the JMS target writes as they are."""

    MAX_CACHED = 10_000

    def __init__(self, route: Route) -> None:
        self.route = route
        convert = ConvertMessageType(route.options.convert_message_type)
        self._bytes = convert is ConvertMessageType.BYTES
        self._auto = convert is ConvertMessageType.AUTO
        self._templates: dict[_Key, _Template] = {}

    def key(self, pub: object, nul: bool = False) -> _Key | None:
        """The cache key of a publication; None: the model path (MQTT 5 properties, or a payload declared text
        that is not, or that holds NUL unless ``nul`` allows it: findings that name the payload)."""
        if type(pub) is not MqttPublication or _has_mqtt5(pub):
            return None
        payload = pub.payload
        if self._bytes:
            text = False
        elif self._auto:
            text = text_problem(payload) is None
        elif text_problem(payload, allow_controls=True) is None and (nul or b"\x00" not in payload):
            text = True
        else:
            return None
        return (pub.topic, pub.client_id, pub.username, pub.qos, pub.retain, text)

    def convert(self, item: Inbound) -> Result:
        pub = item.message
        key = self.key(pub)
        if key is None:
            return self._model_frame(item)
        assert isinstance(pub, MqttPublication)
        payload = pub.payload
        t = self._templates.get(key)
        if t is None:
            t = self._template(item, pub, key)
        body = payload if t.content_length else encode_modified_utf8_bytes(payload)   # a text body
        frame = SendFrame(t.frame_destination, t.headers, body, t.content_length, t.head)
        return Outbound(item.key, frame, t.destination, len(payload)), t.target_type, ConversionReport([*t.findings])

    def _template(self, item: Inbound, pub: MqttPublication, key: _Key) -> _Template:
        stand_in = replace(pub, payload=_TEXT_STAND_IN if key[-1] else _BYTES_STAND_IN)
        out, target_type, report = mqtt_to_jms_message(self.route, replace(item, message=stand_in))
        msg = out.message
        assert isinstance(msg, JmsMessage)
        frame_report = ConversionReport()
        frame = jms_to_frame(msg, out.destination, frame_report)
        if frame.body != stand_in.payload:   # cannot happen for Text/Bytes bodies; refuse rather than guess
            raise MappingError("fast path: the stand-in body changed", structure="MQTT -> STOMP")
        t = _Template(out.destination, frame.destination, frame.headers, frame.head, target_type,
                      (*report.findings, *frame_report.findings), frame.content_length)
        if len(self._templates) >= self.MAX_CACHED:
            self._templates.clear()
        self._templates[key] = t
        return t

    def _model_frame(self, item: Inbound) -> Result:
        """The model path, with the frame built here too (its findings follow the conversion's, as the
        router logs a JmsTarget's own)."""
        out, target_type, report = mqtt_to_jms_message(self.route, item)
        msg = out.message
        assert isinstance(msg, JmsMessage)
        out.message = jms_to_frame(msg, out.destination, report)
        return out, target_type, report


class MqttToJmsModels(MqttToStompEncoder):
    """For a target that writes JmsMessage values itself (the native JMS connector): the model path's message
    per key, computed once on the stand-in as for the frames, given each publication's body. Every message of
    a key shares its headers and properties (the native target prepares their Java side once per key), so
    JMSTimestamp is the template's: that target never sends it (the provider sets it at send, a finding
    either way). tests/test_mqtt_jms_models.py holds it equal to the model path."""

    def __init__(self, route: Route) -> None:
        super().__init__(route)
        self._models: dict[_Key, tuple[Outbound, str, tuple[Finding, ...]]] = {}

    def convert(self, item: Inbound) -> Result:
        pub = item.message
        key = self.key(pub, nul=True)   # NUL is no problem in a javax.jms TextMessage
        if key is None:
            return mqtt_to_jms_message(self.route, item)
        assert isinstance(pub, MqttPublication)
        cached = self._models.get(key)
        if cached is None:
            stand_in = replace(pub, payload=_TEXT_STAND_IN if key[-1] else _BYTES_STAND_IN)
            out, target_type, report = mqtt_to_jms_message(self.route, replace(item, message=stand_in))
            if len(self._models) >= self.MAX_CACHED:
                self._models.clear()
            cached = self._models[key] = (out, target_type, tuple(report.findings))
        out, target_type, findings = cached
        template = out.message
        assert isinstance(template, JmsMessage)
        body = TextBody(pub.payload.decode("utf-8")) if key[-1] else BytesBody(pub.payload)
        msg = JmsMessage(template.headers, template.properties, body)
        return Outbound(item.key, msg, out.destination, len(pub.payload)), target_type, ConversionReport([*findings])


def _has_mqtt5(pub: MqttPublication) -> bool:
    return bool(pub.user_properties) or pub.payload_format_indicator is not None or (
        pub.content_type is not None or pub.response_topic is not None or pub.correlation_data is not None
        or pub.message_expiry_interval is not None)
