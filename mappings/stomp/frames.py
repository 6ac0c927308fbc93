"""JMS messages <-> STOMP 1.2 frames as ActiveMQ 5.17 reads and writes them (pure functions):
``jms_to_frame`` (outbound SEND) and ``frame_to_jms`` (inbound MESSAGE).

Each rule cites the observed ActiveMQ behaviour in docs/stomp-facts.md (§ numbers). Everything STOMP
cannot carry becomes a ``ConversionReport`` finding, which the router writes to the conversion log; the
list of those losses, per body type, header and property, is docs/connectors.md ("JMS over STOMP: what
is lost").
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mappings.conversions.mqtt_jms import property_to_string
from mappings.errors import MappingError
from mappings.jms.json_forms import stream_from_typed_json, stream_to_typed_json
from mappings.jms.model import (
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
    identifier_problem,
    jstring,
)
from mappings.mq.message import decode_message
from mappings.report import ConversionReport
from mappings.stomp.text import decode_modified_utf8, encode_modified_utf8
from mappings.stomp.wire import encode_send_head
from mappings.stomp.xstream import NON_BMP, SURROGATES, map_body_to_xstream_xml, object_body, xstream_map_entries

SUBSCRIBE_TRANSFORMATION = "jms-xml"       # §3/§4: Map -> jms-map-xml, Object -> jms-object-xml
MAP_TRANSFORMATION = "jms-map-xml"        # §1: SEND side of a MapMessage (typed, §4)
BODY_TYPE_PROPERTY = "MQBRIDGE_BODY_TYPE"  # marks a Stream/Object body carried in another type
OBJECT_CLASS_PROPERTY = "MQBRIDGE_OBJECT_CLASS"

# Headers STOMP or ActiveMQ give a meaning of their own (frames, §1, §2, §5); a JMS property of that
# name would be read as the header, so it is not sent, and on receipt they are not properties.
TRANSFORMATION_ERROR = "transformation-error"   # ActiveMQ: it could not apply the subscription's transformation
STOMP_HEADERS = frozenset({
    "destination", "content-length", "content-type", "receipt", "receipt-id", "transaction", "message-id",
    "subscription", "ack", "id", "selector", "correlation-id", "reply-to", "type", "priority", "persistent",
    "expires", "timestamp", "redelivered", "transformation", "amq-msg-type", "login", "passcode", "host",
    "accept-version", "heart-beat", "client-id",
})
# JMS-defined properties the provider sets itself: a SEND header of that name is discarded (§9).
BROKER_SET_PROPERTIES = {
    "JMSXUserID": "ActiveMQ discards a JMSXUserID header on a STOMP SEND (it sets JMSXUserID itself, from the "
                  "connection's user, when populateJMSXUserID is on)",
}
_READ_ONLY_HEADERS = frozenset({"message-id", "destination", "subscription", "ack", "redelivered", "timestamp",
                                "expires", "priority", "persistent", "correlation-id", "reply-to", "type",
                                "transformation", "content-length", "content-type", "JMSXDeliveryCount"})


# ------------------------------------------------------------------------------------ frames


@dataclass(slots=True)
class SendFrame:
    """A STOMP SEND frame without its receipt: ``content_length`` says whether the link adds one;
    ``head`` is the encoded command and headers (stomp_link.encode_send_head), computed when not given
    (the MQTT -> STOMP fast path gives the one it cached)."""

    destination: str
    headers: dict[str, str]
    body: bytes
    content_length: bool
    head: bytes = b""

    def __post_init__(self) -> None:
        if not self.head:
            self.head = encode_send_head(self.destination, self.headers)


def stomp_destination(destination: str) -> str:
    """A route's destination (``orders``, ``topic:orders``, ``temp-queue://ID:..`` (another connection's
    TemporaryQueue, ActiveMQ's ``/remote-temp-queue/``), or already ``/queue/..``) -> STOMP form."""
    if destination.startswith("/"):
        return destination
    if destination.startswith(("temp-queue://", "temp-topic://")):
        kind, name = destination.split("://", 1)
        return f"/remote-{kind}/{name}"
    if destination.startswith("topic:"):
        return "/topic/" + destination[len("topic:"):]
    if destination.startswith("queue:"):
        return "/queue/" + destination[len("queue:"):]
    return "/queue/" + destination


def destination_to_stomp(dest: Destination, name: str, report: ConversionReport) -> str:
    """JMSReplyTo -> ``/queue/x`` | ``/topic/x`` (§1 header table)."""
    if dest.queue_manager:
        report.dropped(name, f"queue manager {dest.queue_manager!r}: a STOMP destination has none")
    if dest.options:
        report.dropped(name, f"URI options {dest.options!r}: a STOMP destination has none")
    return f"/{dest.kind.value}/{dest.name}"


def destination_from_stomp(value: str) -> Destination | None:
    """``/queue/x`` | ``/topic/x`` (also ActiveMQ's ``/temp-queue/``, ``/temp-topic/``) -> Destination."""
    for prefix, kind in (("/queue/", DestinationKind.QUEUE), ("/topic/", DestinationKind.TOPIC),
                         ("/temp-queue/", DestinationKind.QUEUE), ("/temp-topic/", DestinationKind.TOPIC),
                         ("/remote-temp-queue/", DestinationKind.QUEUE),
                         ("/remote-temp-topic/", DestinationKind.TOPIC)):
        if value.startswith(prefix) and len(value) > len(prefix):
            return Destination(kind, value[len(prefix):])
    if value and not value.startswith("/"):
        return Destination.queue(value)
    return None


def destination_name(value: str) -> str:
    """The JMS name of a STOMP destination header (what routes see as ``Inbound.destination``)."""
    dest = destination_from_stomp(value)
    return dest.name if dest is not None else value




def _body_frame(msg: JmsMessage, headers: dict[str, str], report: ConversionReport,
                map_byte_arrays: bool = False) -> tuple[bytes, bool]:
    """The body rule (§1 SEND table, module docstring): (body bytes, content-length?)."""
    body = msg.body
    if isinstance(body, TextBody):
        text = body.text
        if text is None:
            report.defaulted("body", "null text sent as \"\" (STOMP cannot tell them apart)")
            text = ""
        try:
            data = encode_modified_utf8(text)   # §10: what ActiveMQ's TextMessage reader takes
        except UnicodeEncodeError:
            report.coerced("body", "text has an unpaired surrogate: replaced by U+FFFD")
            data = encode_modified_utf8(SURROGATES.sub("\ufffd", text))
        return data, False
    if isinstance(body, BytesBody):
        return body.data, True
    if isinstance(body, MapBody):
        headers["transformation"] = MAP_TRANSFORMATION
        report.coerced("transformation", f"{MAP_TRANSFORMATION}: the broker keeps it as a String property")
        return encode_modified_utf8(map_body_to_xstream_xml(body, report, byte_arrays=map_byte_arrays)), False
    if isinstance(body, StreamBody):
        headers[BODY_TYPE_PROPERTY] = "jms_stream"
        report.coerced("body", "StreamMessage cannot be sent over STOMP: sent as a TextMessage holding the "
                               f"typed JSON array, marked {BODY_TYPE_PROPERTY}=jms_stream")
        return encode_modified_utf8(stream_to_typed_json(body)), False
    if isinstance(body, ObjectBody):
        headers[BODY_TYPE_PROPERTY] = "jms_object"
        if body.class_name:
            headers[OBJECT_CLASS_PROPERTY] = body.class_name
        report.coerced("body", "ObjectMessage cannot be sent over STOMP: sent as a BytesMessage of its "
                               f"serialized bytes, marked {BODY_TYPE_PROPERTY}=jms_object")
        return body.data or b"", True
    report.coerced("body", "a plain Message (no body) is sent as an empty TextMessage")
    return b"", False


def _header_frame(h: JmsHeaders, headers: dict[str, str], report: ConversionReport) -> None:
    """JMS header fields -> STOMP headers (§1 header table)."""
    headers["persistent"] = "true" if h.delivery_mode is DeliveryMode.PERSISTENT else "false"
    headers["priority"] = str(h.priority)
    if h.expiration:
        headers["expires"] = str(h.expiration)
    if h.correlation_id is not None:
        if isinstance(h.correlation_id, bytes):
            report.dropped("JMSCorrelationID", "the byte[] form cannot be a STOMP header")
        else:
            headers["correlation-id"] = h.correlation_id
    if h.reply_to is not None:
        headers["reply-to"] = destination_to_stomp(h.reply_to, "JMSReplyTo", report)
    if h.type is not None:
        headers["type"] = h.type
    if h.message_id is not None:
        report.dropped("JMSMessageID", "set by the broker on a STOMP SEND")
    if h.timestamp:
        report.dropped("JMSTimestamp", "set by the broker on a STOMP SEND")


def _property_frame(props: TypedMap, headers: dict[str, str], report: ConversionReport) -> None:
    """Typed properties -> String headers (§1: "always java.lang.String")."""
    for name, value in props.pairs:
        if name in STOMP_HEADERS or name in (BODY_TYPE_PROPERTY, OBJECT_CLASS_PROPERTY):
            report.dropped(name, "a STOMP header of that name has its own meaning")
            continue
        if name in BROKER_SET_PROPERTIES:
            report.dropped(name, BROKER_SET_PROPERTIES[name])
            continue
        if value.value is None:
            report.dropped(name, f"null {value.type.value}: a STOMP header cannot be null")
            continue
        if value.type is JavaType.BYTES:
            report.dropped(name, "byte[] cannot be a STOMP header")
            continue
        text = property_to_string(value)
        assert text is not None
        if value.type is not JavaType.STRING:
            report.coerced(name, f"{value.type.value} -> String (STOMP headers are text)")
        headers[name] = text


_JMS_NAMES = {"correlation-id": "JMSCorrelationID", "type": "JMSType", "reply-to": "JMSReplyTo"}


def jms_to_frame(msg: JmsMessage, destination: str, report: ConversionReport | None = None, *,
                 map_byte_arrays: bool = False) -> SendFrame:
    """A JMS message as the SEND frame that makes ActiveMQ build the closest JMS message
    (``map_byte_arrays``: a MapMessage's byte[] values as XStream ``<byte-array>``, §11)."""
    report = report if report is not None else ConversionReport()
    headers: dict[str, str] = {}
    _property_frame(msg.properties, headers, report)
    _header_frame(msg.headers, headers, report)
    data, content_length = _body_frame(msg, headers, report, map_byte_arrays)
    for name in [n for n, v in headers.items() if "\x00" in v]:   # NUL would end the frame early
        report.dropped(_JMS_NAMES.get(name, name), "contains U+0000, which a STOMP header cannot carry")
        del headers[name]
    for name in [n for n, v in headers.items() if SURROGATES.search(v)]:   # a Java string may hold one
        report.dropped(_JMS_NAMES.get(name, name), "contains an unpaired surrogate, which UTF-8 cannot carry")
        del headers[name]
    for name, value in headers.items():
        if NON_BMP.search(value):
            report.coerced(_JMS_NAMES.get(name, name), "a character above U+FFFF becomes U+FFFD U+FFFD in "
                                                        "ActiveMQ's STOMP header decoding")
    return SendFrame(stomp_destination(destination), headers, data, content_length)


BACKOUT_FOLDER = "mqbridge"


def backout_to_jms(data: bytes) -> JmsMessage:
    """A router backout message (MQ message with an RFH2 folder ``mqbridge``, see
    bridge.routing.convert.backout_message) as a BytesMessage: the original body, and the folder's elements as
    String properties ``mqbridgeReason``, ``mqbridgeRoute``, ... so a JMS backout queue shows why."""
    try:
        msg = decode_message(data)
    except MappingError:
        return JmsMessage(body=BytesBody(data))
    props: list[tuple[str, JavaValue]] = []
    folder = msg.rfh2_folder(BACKOUT_FOLDER)
    if folder is not None:
        for el in folder.elements:
            name = "mqbridge" + el.name
            if el.value is not None and identifier_problem(name) is None:
                props.append((name, jstring(el.value)))
    return JmsMessage(JmsHeaders(delivery_mode=DeliveryMode.PERSISTENT), TypedMap(props, what="property"),
                      BytesBody(msg.body))



def _body_from_frame(headers: Mapping[str, str], body: bytes, report: ConversionReport
                     ) -> BytesBody | TextBody | MapBody | ObjectBody | StreamBody:
    """Frame classification, §3: content-length -> Bytes, jms-map-* -> Map, jms-object-* -> Object,
    else Text (which may hide a Stream or plain Message)."""
    transformation = headers.get("transformation", "")
    marked = headers.get(BODY_TYPE_PROPERTY)
    if "content-length" in headers and not headers.get("amq-msg-type") == "text":
        if marked == "jms_object":
            return ObjectBody(body, headers.get(OBJECT_CLASS_PROPERTY) or None)
        return BytesBody(body)
    try:
        text = decode_modified_utf8(body)   # §10
    except UnicodeDecodeError as exc:
        report.coerced("body", f"not valid (modified) UTF-8 at byte {exc.start}: replaced by U+FFFD")
        text = decode_modified_utf8(body, "replace")
    if transformation.startswith("jms-map-"):
        if transformation != "jms-map-xml":
            report.dropped("body", f"{transformation} body not read (the connector subscribes with jms-xml)")
            return MapBody()
        return MapBody(xstream_map_entries(text, report))
    if transformation.startswith("jms-object-"):
        return object_body(text, report)
    if marked == "jms_stream":
        try:
            return stream_from_typed_json(text)
        except MappingError as exc:
            report.coerced("body", f"marked jms_stream but {exc.reason}: kept as text")
    if not text:
        report.dropped("body", "an empty frame: the JMS message may have been a StreamMessage or a plain "
                               "Message, whose bodies STOMP cannot carry (read as an empty TextMessage)")
    return TextBody(text)


def _int_header(headers: Mapping[str, str], name: str, default: int, report: ConversionReport) -> int:
    raw = headers.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        report.dropped(name, f"{raw!r} is not a number")
        return default


def frame_to_jms(headers: Mapping[str, str], body: bytes, report: ConversionReport | None = None) -> JmsMessage:
    """A MESSAGE frame (received with ``transformation: jms-xml``) as a JMS message. Never raises:
    what cannot be read is dropped with a finding."""
    report = report if report is not None else ConversionReport()
    jbody = _body_from_frame(headers, body, report)
    failed = headers.get(TRANSFORMATION_ERROR)
    if failed is not None:   # ActiveMQ sent the message as it could, not as the JMS message it holds
        report.coerced("body", f"the provider could not transform the message for STOMP ({failed}): this is what "
                       "it sent instead")
    priority = _int_header(headers, "priority", 4, report)
    if not 0 <= priority <= 9:
        report.dropped("priority", f"{priority} is not 0..9")
        priority = 4
    reply_to = None
    if "reply-to" in headers:
        reply_to = destination_from_stomp(headers["reply-to"])
        if reply_to is None:
            report.dropped("reply-to", f"{headers['reply-to']!r} is not a destination")
    jheaders = JmsHeaders(
        destination=destination_from_stomp(headers.get("destination", "")),
        delivery_mode=DeliveryMode.PERSISTENT if headers.get("persistent") == "true" else DeliveryMode.NON_PERSISTENT,
        expiration=max(0, _int_header(headers, "expires", 0, report)),
        priority=priority,
        timestamp=max(0, _int_header(headers, "timestamp", 0, report)),
        message_id=headers.get("message-id"),
        correlation_id=headers.get("correlation-id"),
        reply_to=reply_to,
        type=headers.get("type"),
        redelivered=headers.get("redelivered") == "true",
    )
    props: list[tuple[str, JavaValue]] = []
    for name, value in headers.items():
        if name in _READ_ONLY_HEADERS or name in STOMP_HEADERS or name == TRANSFORMATION_ERROR:
            continue
        if name in (BODY_TYPE_PROPERTY, OBJECT_CLASS_PROPERTY) and not isinstance(jbody, TextBody | BytesBody):
            continue
        problem = identifier_problem(name)
        if problem is not None:
            report.dropped(name, f"not a JMS property name: {problem}")
            continue
        report.coerced(name, "STOMP header: the property's Java type is lost, read as String")
        props.append((name, jstring(value)))
    return JmsMessage(jheaders, TypedMap(props, what="property"), jbody)


def redelivery_count(headers: Mapping[str, str]) -> int:
    """Earlier deliveries of this message, as far as the frame tells (§5)."""
    raw = headers.get("JMSXDeliveryCount")
    if raw is not None and raw.isdigit():
        return max(0, int(raw) - 1)
    return 1 if headers.get("redelivered") == "true" else 0


