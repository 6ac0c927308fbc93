"""MQTT publication <-> JMS message (Eclipse Amlen docs "Conversion between MQTT and JMS", "Amlen Table 1"
below; SwiftMQ docs "MQTT Swiftlet" informational properties).

MQTT -> JMS (Amlen Table 1, "From MQTT"):
- body: ConvertMessageType ``bytes`` -> BytesMessage; ``text`` -> TextMessage when the payload is valid
  UTF-8 (control characters allowed), otherwise BytesMessage with a finding (the bytes are kept, not
  mangled). ``auto`` -> TextMessage exactly when the payload is valid UTF-8 and has no byte < 0x20
  other than HT, LF, CR; otherwise BytesMessage. "Valid UTF-8" is the strict RFC 3629 decoder: overlong
  forms (C0 80, E0 80 80), UTF-16 surrogates (ED A0 80), code points above U+10FFFF and truncated
  sequences are invalid; NUL (0x00) is valid UTF-8 but is a control byte, so it gives bytes; C1
  controls (C2 80..C2 9F) and DEL are >= 0x20 and allowed; an empty payload is text "".
  Payload format indicator 1 (MQTT 5: "UTF-8 encoded character data") under ``auto``: TextMessage
  whenever the payload is valid UTF-8, control characters included; invalid -> BytesMessage with a
  finding. PFI 0 "is equivalent to not sending" one (MQTT 5 §3.3.2.3.2), so the content rule applies.
- user properties -> String properties. Dropped, each with a finding: names that are not JMS
  identifiers (mappings.jms.model.identifier_problem) and names starting ``JMS`` but not ``JMSX`` ("JMS user
  properties must start with JMSX and cannot start with JMS"), except the two header names below.
  Duplicates: **last wins**; the entry keeps the position of the first occurrence, and each replaced
  value is reported (the Amlen document says which one a client sees is undefined; we define it).
- Content Type -> JMSType; Response Topic -> JMSReplyTo (a ``queue://`` / ``topic://`` URI is parsed,
  anything else is a topic name); Correlation Data -> JMSCorrelationID (a string when valid UTF-8,
  else the bytes form, with a finding); user property JMSMessageID -> JMSMessageID; user property
  JMSTimestamp (ISO 8601, see below) -> JMSTimestamp (invalid -> dropped with a finding).
- JMSDestination = ``topic://<topic>``; JMSDeliveryMode from QoS (0 -> NON_PERSISTENT, 1/2 ->
  PERSISTENT, as MQ persistence in MQ Telemetry Table 1); JMSExpiration = now + expiry interval, and
  JMSTimestamp = now when not given, if the caller passes ``now_ms`` (this module has no clock).
- SwiftMQ ("Interoperability between MQTT, AMQP, JMS"): publisher user name -> ``JMSXUserID``, client
  id -> ``JMS_SWIFTMQ_CID`` (String), publisher QoS -> ``JMS_SWIFTMQ_MQTT_PUBQOS`` (int). Names are
  configurable (InfoPropertyNames; None turns one off; ``info=None`` turns all off). They are added
  whatever the body type (SwiftMQ only ever makes BytesMessages) and win over a same-named user
  property (reported).

JMS -> MQTT (Amlen Table 1, "To MQTT"): Message -> empty payload; BytesMessage -> the bytes; TextMessage
-> UTF-8 (null -> empty); Map/Stream -> plain JSON (mappings.jms.json_forms, docs/json-forms.md); Object ->
the serialized bytes (null -> empty). Properties -> user properties as strings: boolean ``true`` /
``false``, integers in decimal, float/double as the shortest round-trip decimal (``2.24``, ``1e+16``)
or ``NaN``/``Infinity``/``-Infinity``, char as itself, byte[] only when valid UTF-8 (else dropped);
null values and strings MQTT cannot carry (U+0000, lone surrogates) are dropped; every non-String
value is reported as coerced. JMSMessageID and JMSTimestamp go first as user properties of those
names; JMSType -> Content Type; JMSReplyTo -> Response Topic (a topic's name, a queue's URI);
JMSCorrelationID -> Correlation Data. QoS: the caller's, else the configured publisher-QoS property,
else PERSISTENT -> 2 and NON_PERSISTENT -> 0 (as MQ persistence -> QoS, MQ Telemetry Table 4). The
informational properties are consumed, not forwarded: the publisher QoS as above, the client id and
user id (String) back into the publication's client_id and username.

JMSTimestamp text: written ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (UTC, milliseconds). Read: the same with
``Z``, ``+hh:mm`` or ``+hhmm`` (or ``-``), 0 to 9 fraction digits (beyond milliseconds truncated,
reported), ``T``/``Z`` in either case.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from mappings.errors import MappingError
from mappings.jms.json_forms import map_to_json, stream_to_json
from mappings.jms.model import (
    INTEGER_RANGES,
    BytesBody,
    DeliveryMode,
    Destination,
    DestinationKind,
    JavaType,
    JavaValue,
    JmsHeaders,
    JmsMessage,
    MapBody,
    ObjectBody,
    StreamBody,
    TextBody,
    TypedMap,
    destination_of_uri,
    identifier_problem,
    jint,
    jstring,
)
from mappings.jms.typed_xml import format_float
from mappings.mqtt.publication import MqttPublication
from mappings.report import ConversionReport

MESSAGE_ID = "JMSMessageID"
TIMESTAMP = "JMSTimestamp"
_MAX_EXPIRY = 2**32 - 1


class ConvertMessageType(StrEnum):
    AUTO = "auto"
    TEXT = "text"
    BYTES = "bytes"


@dataclass(frozen=True, slots=True)
class InfoPropertyNames:
    """Names of the SwiftMQ-style informational properties; None leaves that property out."""

    user_id: str | None = "JMSXUserID"
    client_id: str | None = "JMS_SWIFTMQ_CID"
    qos: str | None = "JMS_SWIFTMQ_MQTT_PUBQOS"

    def __post_init__(self) -> None:
        for field_name in ("user_id", "client_id", "qos"):
            name = getattr(self, field_name)
            if name is None:
                continue
            problem = identifier_problem(name)
            if problem:
                raise MappingError(problem, structure="InfoPropertyNames", field=field_name)
        names = [n for n in (self.user_id, self.client_id, self.qos) if n is not None]
        if len(set(names)) != len(names):
            raise MappingError("the informational property names must differ", structure="InfoPropertyNames")


SWIFTMQ_NAMES = InfoPropertyNames()


# ------------------------------------------------------------------------------ the auto rule

_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]")


def text_problem(payload: bytes, *, allow_controls: bool = False) -> str | None:
    """Why ``payload`` is not text by the Amlen auto rule (or only not UTF-8), or None if it is."""
    try:
        payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not valid UTF-8 at byte {exc.start} ({exc.reason})"
    if not allow_controls:
        match = _CONTROL.search(payload)
        if match:
            return f"control byte 0x{match.group()[0]:02X} at byte {match.start()}"
    return None


def is_text_payload(payload: bytes) -> bool:
    """Amlen Table 1: valid UTF-8 and no byte < 0x20 except 0x09, 0x0A, 0x0D."""
    return text_problem(payload) is None


# ------------------------------------------------------------------------------ timestamps

_ISO = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:?\d{2})", re.ASCII
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def format_timestamp(ms: int) -> str:
    """Epoch milliseconds -> ``2023-11-14T22:13:20.120Z``."""
    try:
        moment = _EPOCH + timedelta(milliseconds=ms)
    except OverflowError:
        raise MappingError(f"{ms} ms is outside years 1..9999", structure="JMSTimestamp") from None
    return (f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}:{moment.minute:02d}:"
            f"{moment.second:02d}.{moment.microsecond // 1000:03d}Z")


def parse_timestamp(text: str) -> tuple[int, bool]:
    """ISO 8601 text -> (epoch ms, fraction truncated?). Raises MappingError naming JMSTimestamp."""
    match = _ISO.fullmatch(text)
    if not match:
        raise MappingError(f"{text!r} is not YYYY-MM-DDTHH:MM:SS[.fff](Z|+hh:mm|+hhmm)",
                           structure="JMSTimestamp")
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    fraction = match.group(7) or ""
    zone = match.group(8)
    try:
        moment = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    except ValueError as exc:
        raise MappingError(f"{text!r}: {exc}", structure="JMSTimestamp") from None
    offset_min = 0
    if zone not in ("Z", "z"):
        digits = zone[1:].replace(":", "")
        hh, mm = int(digits[:2]), int(digits[2:])
        if hh > 23 or mm > 59:
            raise MappingError(f"{text!r}: bad UTC offset {zone}", structure="JMSTimestamp")
        offset_min = (hh * 60 + mm) * (-1 if zone[0] == "-" else 1)
    seconds = (moment - _EPOCH) // timedelta(seconds=1) - offset_min * 60
    ms = seconds * 1000 + int((fraction + "000")[:3])
    return ms, len(fraction.rstrip("0")) > 3


# ------------------------------------------------------------------------------ MQTT -> JMS


def _body_from_payload(pub: MqttPublication, convert: ConvertMessageType,
                       report: ConversionReport) -> BytesBody | TextBody:
    payload = pub.payload
    if convert is ConvertMessageType.BYTES:
        return BytesBody(payload)
    declared_text = convert is ConvertMessageType.TEXT or pub.payload_format_indicator == 1
    problem = text_problem(payload, allow_controls=declared_text)
    if problem is None:
        return TextBody(payload.decode("utf-8"))
    if declared_text:
        why = ("ConvertMessageType=text" if convert is ConvertMessageType.TEXT
               else "payload format indicator 1")
        report.coerced("payload", f"{why} but payload is {problem}: sent as BytesMessage")
    return BytesBody(payload)


def _reply_to(response_topic: str, report: ConversionReport) -> Destination | None:
    if not response_topic:
        report.dropped("response topic", "empty: not a topic name")
        return None
    return destination_of_uri(response_topic) or Destination.topic(response_topic)


def mqtt_to_jms(
    pub: MqttPublication,
    *,
    convert: ConvertMessageType | str = ConvertMessageType.AUTO,
    info: InfoPropertyNames | None = SWIFTMQ_NAMES,
    now_ms: int | None = None,
) -> tuple[JmsMessage, ConversionReport]:
    """Convert one MQTT publication to a JMS Text or Bytes message, with what was lost or coerced."""
    report = ConversionReport()
    try:
        convert = ConvertMessageType(convert)
    except ValueError:
        raise MappingError(f"{convert!r} is not auto, text or bytes", structure="MQTT -> JMS",
                           field="ConvertMessageType") from None
    if not pub.topic:
        raise MappingError("the publication has no topic", structure="MQTT -> JMS", field="topic")
    body = _body_from_payload(pub, convert, report)

    props: dict[str, JavaValue] = {}
    message_id: str | None = None
    timestamp = now_ms if now_ms is not None else 0
    seen_header: set[str] = set()
    for name, value in pub.user_properties:
        if name in (MESSAGE_ID, TIMESTAMP):
            if name in seen_header:
                report.dropped(name, "duplicate user property: earlier value replaced (last wins)")
            seen_header.add(name)
            if name == MESSAGE_ID:
                message_id = value
                continue
            try:
                timestamp, truncated = parse_timestamp(value)
            except MappingError as exc:
                report.dropped(name, exc.reason)
                continue
            if truncated:
                report.truncated(name, "fraction beyond milliseconds")
            continue
        problem = identifier_problem(name)
        if problem is None and name.startswith("JMS") and not name.startswith("JMSX"):
            problem = "names starting JMS are reserved (only JMSX may come from MQTT)"
        if problem is not None:
            report.dropped(name, f"not a JMS property name: {problem}")
            continue
        if name in props:
            report.dropped(name, "duplicate user property: earlier value replaced (last wins)")
        props[name] = jstring(value)

    if info is not None:
        extras = [(info.user_id, None if pub.username is None else jstring(pub.username)),
                  (info.client_id, None if pub.client_id is None else jstring(pub.client_id)),
                  (info.qos, jint(pub.qos))]
        for name, value in extras:
            if name is None or value is None:
                continue
            if name in props:
                report.dropped(name, "user property replaced by the informational property")
            props[name] = value

    correlation: str | bytes | None = None
    if pub.correlation_data is not None:
        try:
            correlation = pub.correlation_data.decode("utf-8")
        except UnicodeDecodeError:
            correlation = pub.correlation_data
            report.coerced("correlation data", "not valid UTF-8: JMSCorrelationID set as bytes")

    expiration = 0
    if pub.message_expiry_interval is not None:
        if now_ms is None:
            report.dropped("message expiry interval", "no clock given: JMSExpiration left 0 (never)")
        else:
            expiration = now_ms + pub.message_expiry_interval * 1000
    if pub.retain:
        report.dropped("retain", "JMS has no retained-message flag")

    headers = JmsHeaders(
        destination=Destination.topic(pub.topic),
        delivery_mode=DeliveryMode.NON_PERSISTENT if pub.qos == 0 else DeliveryMode.PERSISTENT,
        expiration=expiration,
        timestamp=timestamp,
        message_id=message_id,
        correlation_id=correlation,
        reply_to=None if pub.response_topic is None else _reply_to(pub.response_topic, report),
        type=pub.content_type,
    )
    return JmsMessage(headers, TypedMap(props.items(), what="property"), body), report


# ------------------------------------------------------------------------------ JMS -> MQTT

_BAD_MQTT_CHAR = re.compile("[\x00\ud800-\udfff]")


def property_to_string(value: JavaValue) -> str | None:
    """A typed JMS property as an MQTT string (module docstring), or None when it cannot be one."""
    v = value.value
    if v is None:
        return None
    jtype = value.type
    if jtype is JavaType.BOOLEAN:
        return "true" if v else "false"
    if jtype in INTEGER_RANGES:
        return str(v)
    if jtype in (JavaType.FLOAT, JavaType.DOUBLE):
        return format_float(v, jtype)  # type: ignore[arg-type]
    if jtype is JavaType.BYTES:
        try:
            return v.decode("utf-8")  # type: ignore[union-attr]
        except UnicodeDecodeError:
            return None
    return v  # type: ignore[return-value]


def mqtt_string(text: str, name: str, report: ConversionReport) -> str | None:
    """``text`` as an MQTT UTF-8 string, or None (dropped, reported) when MQTT cannot carry it."""
    if _BAD_MQTT_CHAR.search(text):
        report.dropped(name, "contains U+0000 or an unpaired surrogate, which MQTT strings cannot carry")
        return None
    return text


def user_property_value(name: str, value: JavaValue, report: ConversionReport) -> str | None:
    """A JMS property as the value of an MQTT 5 user property of the same name (None: dropped, reported).
    Amlen: "JMS user properties must start with JMSX and cannot start with JMS": a JMSFoo or JMS_IBM_Retain
    property (the provider's, or reserved) is not created."""
    if name.startswith("JMS") and not name.startswith("JMSX"):
        report.dropped(name, "not created as a user property: names starting JMS other than JMSX are reserved")
        return None
    text = property_to_string(value)
    if text is None:
        report.dropped(name, "null value" if value.value is None else "byte[] is not valid UTF-8")
        return None
    if value.type is not JavaType.STRING:
        report.coerced(name, f"{value.type.value} -> String")
    return mqtt_string(text, name, report)


def response_topic_of(reply: Destination, report: ConversionReport) -> str | None:
    """JMSReplyTo as an MQTT 5 Response Topic: a plain topic by its name, anything else as its URI."""
    plain_topic = reply.kind is DestinationKind.TOPIC and not reply.options
    topic = reply.name if plain_topic else reply.uri
    if "+" in topic or "#" in topic:
        report.dropped("JMSReplyTo", f"{topic!r} has a wildcard, which a Response Topic may not (MQTT 5 §3.3.2.3.5)")
        return None
    return mqtt_string(topic, "JMSReplyTo", report)


def _payload(message: JmsMessage) -> tuple[bytes, int | None]:
    body = message.body
    if isinstance(body, TextBody):
        text = body.text or ""
        try:
            return text.encode("utf-8"), 1
        except UnicodeEncodeError as exc:
            raise MappingError(f"text has an unpaired surrogate at index {exc.start}",
                               structure="TextMessage body") from None
    if isinstance(body, BytesBody):
        return body.data, None
    if isinstance(body, MapBody):
        return map_to_json(body).encode("utf-8"), 1
    if isinstance(body, StreamBody):
        return stream_to_json(body).encode("utf-8"), 1
    if isinstance(body, ObjectBody):
        return body.data or b"", None
    return b"", None


def _qos(message: JmsMessage, qos: int | None, info: InfoPropertyNames | None,
         report: ConversionReport) -> int:
    if qos is not None:
        if qos not in (0, 1, 2):
            raise MappingError(f"{qos!r} is not 0, 1 or 2", structure="JMS -> MQTT", field="qos")
        return qos
    if info is not None and info.qos is not None and info.qos in message.properties:
        value = message.properties[info.qos]
        text = property_to_string(value) if value.type is not JavaType.BYTES else None
        if text in ("0", "1", "2"):
            return int(text)  # type: ignore[arg-type]
        report.dropped(info.qos, f"{text!r} is not a QoS 0..2: QoS from JMSDeliveryMode")
    return 2 if message.headers.delivery_mode is DeliveryMode.PERSISTENT else 0


def jms_to_mqtt(
    message: JmsMessage,
    *,
    topic: str | None = None,
    qos: int | None = None,
    info: InfoPropertyNames | None = SWIFTMQ_NAMES,
    now_ms: int | None = None,
) -> tuple[MqttPublication, ConversionReport]:
    """Convert a JMS message to an MQTT publication (topic from JMSDestination unless given)."""
    report = ConversionReport()
    headers = message.headers
    if topic is None:
        if headers.destination is None:
            raise MappingError("no topic given and the message has no JMSDestination",
                               structure="JMS -> MQTT", field="JMSDestination")
        topic = headers.destination.name
    if not topic or _BAD_MQTT_CHAR.search(topic):
        raise MappingError(f"{topic!r} cannot be an MQTT topic name", structure="JMS -> MQTT", field="topic")
    payload, pfi = _payload(message)
    chosen_qos = _qos(message, qos, info, report)

    user_props: list[tuple[str, str]] = []
    if headers.message_id is not None:
        text = mqtt_string(headers.message_id, MESSAGE_ID, report)
        if text is not None:
            user_props.append((MESSAGE_ID, text))
    if headers.timestamp != 0:
        try:
            user_props.append((TIMESTAMP, format_timestamp(headers.timestamp)))
        except MappingError as exc:
            report.dropped(TIMESTAMP, exc.reason)

    client_id = username = None
    consumed = {info.qos} if info is not None and info.qos is not None else set()
    for name, value in message.properties.pairs:
        if name in consumed:
            continue
        if info is not None and name in (info.client_id, info.user_id) and value.type is JavaType.STRING:
            if name == info.client_id:
                client_id = value.value
            else:
                username = value.value
            continue
        text = user_property_value(name, value, report)
        if text is not None:
            user_props.append((name, text))

    content_type = None
    if headers.type is not None:
        content_type = mqtt_string(headers.type, "JMSType", report)
    response_topic = None if headers.reply_to is None else response_topic_of(headers.reply_to, report)
    correlation = headers.correlation_id
    correlation_data = correlation.encode("utf-8", "surrogatepass") if isinstance(correlation, str) else (
        correlation)

    expiry: int | None = None
    if headers.expiration != 0:
        if now_ms is None:
            report.dropped("JMSExpiration", "no clock given: no message expiry interval")
        else:
            remaining = math.ceil((headers.expiration - now_ms) / 1000)
            if remaining <= 0:
                report.truncated("JMSExpiration", "already expired: message expiry interval 0")
            expiry = min(max(remaining, 0), _MAX_EXPIRY)
    if headers.priority != 4:
        report.dropped("JMSPriority", f"{headers.priority} has no MQTT equivalent")
    if headers.redelivered:
        report.dropped("JMSRedelivered", "no MQTT equivalent")

    pub = MqttPublication(
        topic=topic,
        payload=payload,
        qos=chosen_qos,
        client_id=client_id,  # type: ignore[arg-type]
        username=username,  # type: ignore[arg-type]
        payload_format_indicator=pfi,
        content_type=content_type,
        response_topic=response_topic,
        correlation_data=correlation_data,
        user_properties=tuple(user_props),
        message_expiry_interval=expiry,
    )
    return pub, report
