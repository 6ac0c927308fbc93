# Owns the JMS connector: JMS model <-> STOMP frame mapping (pure functions) and JmsSource/JmsTarget.
"""JMS providers (ActiveMQ first) over STOMP 1.2, on ``bridge.connectors.stomp_link.StompLink``.

Every rule below is one function and cites the observed ActiveMQ 5.17 behaviour in
``docs/stomp-facts.md`` (§ numbers) or the amlen seed (``amlen-mqtt-jms-conversion.txt``). Everything
STOMP cannot carry becomes a ``ConversionReport`` finding, which the router writes to the conversion
log; the README section "JMS over STOMP: what is lost" lists the same losses for users.

Outbound (JMS model -> SEND frame), ``jms_to_frame``:

- TextMessage: no ``content-length`` (§1: ActiveMQ then makes a TextMessage). A text holding NUL
  cannot end a frame without ``content-length``, so it goes with ``content-length`` and
  ``amq-msg-type: text`` (still a TextMessage; both headers become String properties: finding).
  A null text is sent as "" (§2: the two are indistinguishable: finding).
- BytesMessage: ``content-length`` (§1).
- MapMessage: ``transformation: jms-map-xml`` and the XStream XML form (§1, §4; not the JSON form,
  which ActiveMQ silently turns into a TextMessage for some maps, §9); the broker
  keeps ``transformation`` as a String property (finding). A null map value cannot be written: dropped.
  ActiveMQ's XStream/Jettison turns a character above U+FFFF in a map key or String value into two
  U+FFFD, on SEND and on receipt (tested): reported per entry on SEND, undetectable on receipt.
- StreamMessage: **cannot be produced over STOMP** (§3: not even read). Decision: sent as a
  TextMessage holding the typed JSON array (docs/json-forms.md) with the String property
  ``MQBRIDGE_BODY_TYPE = jms_stream``; a finding says so, and ``frame_to_jms`` turns such a frame
  back into a StreamMessage, so Stream survives a trip through the gateway but a plain JMS consumer
  sees a TextMessage. Refusing instead would block the route: the router retries a refused batch.
- ObjectMessage: its Java-serialized bytes cannot be handed to ActiveMQ over STOMP (the broker only
  builds objects from XStream JSON/XML, §1); sent as a BytesMessage of those bytes with
  ``MQBRIDGE_BODY_TYPE = jms_object`` (and ``MQBRIDGE_OBJECT_CLASS``): finding.
- plain Message: an empty TextMessage (finding).
- Headers (§1 table): JMSCorrelationID -> ``correlation-id`` (the byte[] form cannot: dropped),
  JMSReplyTo -> ``reply-to: /queue/x`` | ``/topic/x`` (a queue manager or URI options: dropped),
  JMSType -> ``type``, JMSPriority -> ``priority``, JMSExpiration (absolute ms) -> ``expires``,
  JMSDeliveryMode -> ``persistent: true|false`` (explicit: absent means NON_PERSISTENT on STOMP).
  JMSMessageID and JMSTimestamp are the broker's to set: dropped with a finding when present.
- Properties (§1): every property becomes a STOMP header, i.e. a **String** property on the JMS side;
  each non-String one is reported as coerced (``int -> String``). byte[] and null values cannot be
  headers: dropped. Names that are STOMP/ActiveMQ headers (``priority``, ``receipt``, ...) would be
  read as such: dropped. ``JMSXUserID`` is discarded by ActiveMQ on SEND (§9): dropped. Any header
  value holding NUL would end the frame (§9), or an unpaired surrogate (a Java String may hold one;
  UTF-8 cannot): dropped. ActiveMQ turns a character above U+FFFF in a header value into U+FFFD
  U+FFFD (tests/test_stomp_encoding.py, as in map bodies, §4): coerced, one finding per header.

Inbound (MESSAGE frame -> JMS model), ``frame_to_jms``; subscriptions ask for ``transformation:
jms-xml`` (§3, §4: XStream XML keeps every Map value's Java type, where Jettison's JSON turns
numeric-looking Strings into numbers):

- ``content-length`` present -> BytesMessage (§2); ``transformation: jms-map-xml`` -> MapMessage
  with typed entries; ``jms-object-xml`` -> ObjectMessage whose data is the object as JSON (a
  HashMap or String, written like amlen Table 1's "MapMessage -> JSON") or as the broker's XStream
  XML (other classes) - never Java serialization (finding); otherwise TextMessage (UTF-8). An empty
  TextMessage may really have been a StreamMessage or a plain Message (§3): finding. A frame
  carrying ``MQBRIDGE_BODY_TYPE: jms_stream`` is read back as a StreamMessage.
- Headers: ``message-id``, ``destination``, ``correlation-id``, ``reply-to``, ``type``, ``priority``,
  ``persistent`` (absent = NON_PERSISTENT, §2), ``expires``, ``timestamp``, ``redelivered``.
- Every other header is a property, read as a String (§2: the Java type is lost: one finding per
  property); names that are not JMS identifiers (STOMP allows ``my-prop``) are dropped.
- Redelivery: ``redelivered: true`` counts as one earlier delivery (§5: there is no delivery-count
  header; a ``JMSXDeliveryCount`` header is used when a provider sends one).

Sending: a route's batch is one STOMP transaction whose COMMIT asks for the receipt (JmsTarget).
Acknowledgement (§5): ``ack: client-individual``; confirm = ACK. Backout does **not** NACK, because
ActiveMQ moves a NACKed message straight to ``ActiveMQ.DLQ``: the source keeps the message
unacknowledged and hands it to the route again with its count raised, so the router's own backout
threshold and backout destination decide (as for the other sources).
"""
from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from bridge.connectors.base import ConnectorError, Inbound, Inbox, Outbound, Source, Target
from bridge.connectors.stomp_link import (
    EncodedSend,
    InboundFrame,
    LinkState,
    StompLink,
    StompLinkConfig,
    StompLinkError,
    encode_send_head,
)
from bridge.router import CONNECTOR_FACTORIES
from mappings.errors import MappingError
from mappings.jms import (
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
    identifier_problem,
    jstring,
    to_float32,
)
from mappings.jms_json import map_to_json, stream_from_typed_json, stream_to_typed_json
from mappings.mqmessage import decode_message
from mappings.mqtt_jms import property_to_string
from mappings.report import ConversionReport, Finding
from mappings.rules import JmsConnector, QueueEndpoint, Route, RulesFile
from mappings.typed_xml import format_float

log = logging.getLogger("mqbridge.jms")

SUBSCRIBE_TRANSFORMATION = "jms-xml"       # §3/§4: Map -> jms-map-xml, Object -> jms-object-xml
MAP_TRANSFORMATION = "jms-map-xml"        # §1: SEND side of a MapMessage (typed, §4)
BODY_TYPE_PROPERTY = "MQBRIDGE_BODY_TYPE"  # marks a Stream/Object body carried in another type
OBJECT_CLASS_PROPERTY = "MQBRIDGE_OBJECT_CLASS"
DEFAULT_PREFETCH = 256

# Headers STOMP or ActiveMQ give a meaning of their own (frames, §1, §2, §5); a JMS property of that
# name would be read as the header, so it is not sent, and on receipt they are not properties.
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
    """A route's destination (``orders``, ``topic:orders``, or already ``/queue/..``) -> STOMP form."""
    if destination.startswith("/"):
        return destination
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


# ------------------------------------------------------------------------------ outbound


_XML_UNSAFE = re.compile("[\x00-\x1f&<>\ud800-\udfff\ufffe\uffff]")
_XSTREAM_TAGS = {JavaType.STRING: "string", JavaType.BOOLEAN: "boolean", JavaType.BYTES: "byte-array"}


def _xml_escape(text: str) -> str:
    """Element text as XStream writes it: & < > escaped, control characters (and CR, which an XML
    parser would normalise) as character references, which XStream's reader accepts (XML 1.1 style)."""
    def one(m: re.Match[str]) -> str:
        c = m.group()
        return {"&": "&amp;", "<": "&lt;", ">": "&gt;"}.get(c) or f"&#x{ord(c):x};"

    return _XML_UNSAFE.sub(one, text)


def _xstream_xml_value(value: JavaValue) -> str:
    """One typed value as its XStream XML element (§4 XML sample: ``<short>3</short>``)."""
    v = value.value
    t = value.type
    tag = _XSTREAM_TAGS.get(t, t.value)
    if t is JavaType.BYTES:
        text = base64.b64encode(v).decode("ascii")  # type: ignore[arg-type]
    elif t in (JavaType.FLOAT, JavaType.DOUBLE):
        text = format_float(v, t)  # type: ignore[arg-type]
    elif t is JavaType.BOOLEAN:
        text = "true" if v else "false"
    elif t is JavaType.CHAR and v == "\x00":
        text = ""   # XStream's own form for char 0
    else:
        text = _xml_escape(str(v))
    return f"<{tag}>{text}</{tag}>"


_NON_BMP = re.compile("[\U00010000-\U0010FFFF]")


def map_body_to_xstream_xml(body: MapBody, report: ConversionReport) -> str:
    """MapMessage -> XStream ``<map><entry><string>k</string><int>1</int></entry>...</map>`` for
    ``transformation: jms-map-xml`` (§1, §4). Not the JSON form: Jettison fails on some maps (a key
    ``null``) and ActiveMQ then silently makes a TextMessage of the JSON text (found by
    test_map_bodies_keep_every_java_type_through_the_broker)."""
    parts = ["<map>"]
    for key, value in body.entries.pairs:
        if value.value is None:
            report.dropped(f"map:{key}", f"null {value.type.value}: not sent (XStream map form)")
            continue
        if _NON_BMP.search(key) or (value.type is JavaType.STRING and _NON_BMP.search(value.value)):  # type: ignore[arg-type]
            report.coerced(f"map:{key}", "a character above U+FFFF becomes U+FFFD U+FFFD in ActiveMQ's "
                                         "map transformation (both directions)")
        parts.append(f"<entry><string>{_xml_escape(key)}</string>{_xstream_xml_value(value)}</entry>")
    parts.append("</map>")
    return "".join(parts)


def _body_frame(msg: JmsMessage, headers: dict[str, str], report: ConversionReport) -> tuple[bytes, bool]:
    """The body rule (§1 SEND table, module docstring): (body bytes, content-length?)."""
    body = msg.body
    if isinstance(body, TextBody):
        text = body.text
        if text is None:
            report.defaulted("body", "null text sent as \"\" (STOMP cannot tell them apart)")
            text = ""
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            report.coerced("body", "text has an unpaired surrogate: replaced by U+FFFD")
            data = text.encode("utf-8", "replace")
        if b"\x00" in data:
            headers["amq-msg-type"] = "text"
            report.coerced("body", "text contains NUL: sent with content-length and amq-msg-type: text, "
                                   "which the broker adds as String properties")
            return data, True
        return data, False
    if isinstance(body, BytesBody):
        return body.data, True
    if isinstance(body, MapBody):
        headers["transformation"] = MAP_TRANSFORMATION
        report.coerced("transformation", f"{MAP_TRANSFORMATION}: the broker keeps it as a String property")
        return map_body_to_xstream_xml(body, report).encode("utf-8"), False
    if isinstance(body, StreamBody):
        headers[BODY_TYPE_PROPERTY] = "jms_stream"
        report.coerced("body", "StreamMessage cannot be sent over STOMP: sent as a TextMessage holding the "
                               f"typed JSON array, marked {BODY_TYPE_PROPERTY}=jms_stream")
        data = stream_to_typed_json(body).encode("utf-8")
        return data, False
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


def jms_to_frame(msg: JmsMessage, destination: str, report: ConversionReport | None = None) -> SendFrame:
    """A JMS message as the SEND frame that makes ActiveMQ build the closest JMS message."""
    report = report if report is not None else ConversionReport()
    headers: dict[str, str] = {}
    _property_frame(msg.properties, headers, report)
    _header_frame(msg.headers, headers, report)
    data, content_length = _body_frame(msg, headers, report)
    for name in [n for n, v in headers.items() if "\x00" in v]:   # NUL would end the frame early
        report.dropped(_JMS_NAMES.get(name, name), "contains U+0000, which a STOMP header cannot carry")
        del headers[name]
    for name in [n for n, v in headers.items() if _SURROGATES.search(v)]:   # a Java string may hold one
        report.dropped(_JMS_NAMES.get(name, name), "contains an unpaired surrogate, which UTF-8 cannot carry")
        del headers[name]
    for name, value in headers.items():
        if _NON_BMP.search(value):
            report.coerced(_JMS_NAMES.get(name, name), "a character above U+FFFF becomes U+FFFD U+FFFD in "
                                                        "ActiveMQ's STOMP header decoding")
    return SendFrame(stomp_destination(destination), headers, data, content_length)


BACKOUT_FOLDER = "mqbridge"


def backout_to_jms(data: bytes) -> JmsMessage:
    """A router backout message (MQ message with an RFH2 folder ``mqbridge``, see
    route_convert.backout_message) as a BytesMessage: the original body, and the folder's elements as
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


# ------------------------------------------------------------------------------- inbound

# XStream XML (§4): <map><entry><string>k</string><int>1</int></entry>...</map>. The XML is regular
# and uses XML 1.1 character references (&#x1;) that XML 1.0 parsers refuse, so it is read here.
_ENTRY = re.compile(r"<entry>\s*(<([\w.-]+)\s*/>|<([\w.-]+)>(.*?)</\3>)\s*(<([\w.-]+)\s*/>|<([\w.-]+)>(.*?)</\7>)"
                    r"\s*</entry>", re.S)
_XSTREAM_TYPES = {
    "string": JavaType.STRING, "int": JavaType.INT, "long": JavaType.LONG, "short": JavaType.SHORT,
    "byte": JavaType.BYTE, "boolean": JavaType.BOOLEAN, "float": JavaType.FLOAT, "double": JavaType.DOUBLE,
    "char": JavaType.CHAR, "byte-array": JavaType.BYTES,
}
_XSTREAM_CLASSES = {"map": "java.util.HashMap", "string": "java.lang.String"}


_XML_ESCAPE = re.compile(r"&(#x[0-9A-Fa-f]+|#[0-9]+|lt|gt|amp|quot|apos);")
_SURROGATES = re.compile("[\ud800-\udfff]")
_XML_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}


def _xml_text(text: str) -> str:
    """Element text, unescaped in one pass; XStream writes control characters as XML 1.1 character
    references (``&#x1;``), which XML 1.0 parsers refuse and html.unescape drops."""
    def one(m: re.Match[str]) -> str:
        ref = m.group(1)
        if ref[0] != "#":
            return _XML_NAMED[ref]
        code = int(ref[2:], 16) if ref[1] == "x" else int(ref[1:])
        return chr(code) if code <= 0x10FFFF else "\ufffd"

    out = _XML_ESCAPE.sub(one, text)
    if _SURROGATES.search(out):   # XStream writes a non-BMP character as two UTF-16 references: pair them
        out = out.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return out


def _xstream_value(tag: str, text: str | None, where: str) -> JavaValue:
    """One XStream XML value element -> JavaValue; MappingError for what this reader does not know."""
    if tag == "null" or text is None and tag not in ("string", "char"):
        raise MappingError("null value", structure="XStream map", field=where)
    jtype = _XSTREAM_TYPES.get(tag)
    if jtype is None:
        raise MappingError(f"element <{tag}> is not a JMS map value type", structure="XStream map", field=where)
    raw = _xml_text(text or "")
    try:
        if jtype is JavaType.STRING:
            return JavaValue(jtype, raw)
        if jtype is JavaType.CHAR:
            return JavaValue(jtype, raw if raw else "\x00")   # XStream writes char 0 as <char></char>
        if jtype is JavaType.BOOLEAN:
            return JavaValue(jtype, raw == "true")
        if jtype in INTEGER_RANGES:
            return JavaValue(jtype, int(raw))
        if jtype in (JavaType.FLOAT, JavaType.DOUBLE):
            number = float(raw)
            return JavaValue(jtype, to_float32(number) if jtype is JavaType.FLOAT else number)
        return JavaValue(jtype, base64.b64decode(raw.encode("ascii"), validate=True))
    except (ValueError, binascii.Error) as exc:
        raise MappingError(f"<{tag}>{raw!r}: {exc}", structure="XStream map", field=where) from None


def xstream_map_entries(xml: str, report: ConversionReport, what: str = "map") -> TypedMap:
    """The entries of an XStream ``<map>`` (a MapMessage body or a HashMap object), typed."""
    pairs: list[tuple[str, JavaValue]] = []
    seen: set[str] = set()
    for m in _ENTRY.finditer(xml):
        key_tag, key_text = (m.group(2), None) if m.group(2) else (m.group(3), m.group(4))
        value_tag, value_text = (m.group(6), None) if m.group(6) else (m.group(7), m.group(8))
        key = _xml_text(key_text or "")
        if key_tag != "string":
            report.coerced(f"{what}:{key}", f"<{key_tag}> key read as a String")
        if not key or key in seen:
            report.dropped(f"{what}:{key}", "empty or duplicate key")
            continue
        try:
            value = _xstream_value(value_tag, value_text, key)
        except MappingError as exc:
            report.dropped(f"{what}:{key}", exc.reason)
            continue
        seen.add(key)
        pairs.append((key, value))
    return TypedMap(pairs)


def _object_body(xml: str, report: ConversionReport) -> ObjectBody:
    """A ``jms-object-xml`` body: HashMap -> JSON object, String -> JSON string, else the XML as is."""
    root = re.match(r"\s*<([\w.$-]+)", xml)
    tag = root.group(1) if root else ""
    class_name = _XSTREAM_CLASSES.get(tag, tag or None)
    if tag == "map":
        data = map_to_json(xstream_map_entries(xml, report, "object")).encode("utf-8")
        how = "the HashMap as a JSON object"
    elif tag == "string":
        inner = re.fullmatch(r"\s*<string>(.*)</string>\s*", xml, re.S)
        data = json.dumps(_xml_text(inner.group(1)) if inner else "", ensure_ascii=False).encode("utf-8")
        how = "the String as a JSON string"
    else:
        data = xml.encode("utf-8")
        how = "the broker's XStream XML"
    report.coerced("body", f"ObjectMessage ({class_name}) arrives over STOMP without Java serialization: "
                           f"body is {how}")
    return ObjectBody(data, class_name)


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
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        report.coerced("body", f"not valid UTF-8 at byte {exc.start}: replaced by U+FFFD")
        text = body.decode("utf-8", "replace")
    if transformation.startswith("jms-map-"):
        if transformation != "jms-map-xml":
            report.dropped("body", f"{transformation} body not read (the connector subscribes with jms-xml)")
            return MapBody()
        return MapBody(xstream_map_entries(text, report))
    if transformation.startswith("jms-object-"):
        return _object_body(text, report)
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
        if name in _READ_ONLY_HEADERS or name in STOMP_HEADERS:
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


# ------------------------------------------------------------------------------- connectors


def link_config(conn: JmsConnector, client_id: str | None = None) -> StompLinkConfig:
    return StompLinkConfig(host=conn.host, port=conn.port, login=conn.user, passcode=conn.password,
                           vhost=conn.vhost, client_id=client_id, heartbeat_send_ms=conn.heartbeat_ms,
                           heartbeat_receive_ms=conn.heartbeat_ms, backoff_max=conn.reconnect_max_seconds)


def _findings(report: ConversionReport) -> list[Finding]:
    return list(report.findings)


class JmsTarget(Target):
    """Sends a batch as one STOMP transaction (BEGIN, the SENDs in order, COMMIT with a receipt:
    StompLink.send_many) and returns once the COMMIT's receipt is in: the route confirms its source
    only then (at least once). One receipt per batch keeps the broker to one store sync and avoids
    the Nagle/delayed-ACK stall that many small RECEIPT frames hit (bench/README.md)."""

    protocol = "jms"

    def __init__(self, config: StompLinkConfig, receipt_timeout: float = 30.0) -> None:
        self.link = StompLink(config)
        self.receipt_timeout = receipt_timeout
        self._io = ThreadPoolExecutor(1, thread_name_prefix="jms-target")
        self._receipts = ThreadPoolExecutor(1, thread_name_prefix="jms-receipts")

    async def start(self) -> None:
        self.link.start(timeout=None)   # connects in the background; sends fail (and are retried) until up

    def frames(self, items: list[Outbound]) -> list[SendFrame]:
        out = []
        for item in items:
            msg = item.message
            if type(msg) is SendFrame:   # converted straight to a frame (bridge/mqtt_stomp_fast.py)
                out.append(msg)
                continue
            report = ConversionReport()
            if isinstance(msg, bytes):
                msg = backout_to_jms(msg)
            if not isinstance(msg, JmsMessage):
                raise ConnectorError(f"JMS target got a {type(msg).__name__}, not a JMS message")
            out.append(jms_to_frame(msg, item.destination, report))
            if report:
                item.extra["findings"] = _findings(report)
        return out

    async def send(self, items: list[Outbound]) -> None:
        await (await self.submit(items))

    async def submit(self, items: list[Outbound]) -> asyncio.Future[None]:
        """Write the batch's transaction now (on the one I/O thread, so batches reach the provider in
        the order of the calls) and return a task that ends when its COMMIT receipt is in; receipts
        are waited for in order on a thread of their own, so a route can keep batches in flight."""
        batch: list[EncodedSend] = [(f.head, f.body, f.content_length) for f in self.frames(items)]
        loop = asyncio.get_running_loop()
        try:
            wait = await loop.run_in_executor(self._io, lambda: self.link.submit_encoded(batch, transactional=True))
        except StompLinkError as exc:
            raise ConnectorError(f"JMS provider: {exc}") from exc
        return loop.create_task(self._accepted(wait))

    async def _accepted(self, wait: Callable[[float | None], None]) -> None:
        try:
            await asyncio.get_running_loop().run_in_executor(self._receipts, wait, self.receipt_timeout)
        except StompLinkError as exc:
            raise ConnectorError(f"JMS provider: {exc}") from exc

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._io, self.link.close)
        self._io.shutdown(wait=False)
        self._receipts.shutdown(wait=False)


@dataclass
class _Delivery:
    frame: InboundFrame
    backouts: int = 0
    extra: dict[str, object] = field(default_factory=dict)


class JmsSource(Source):
    """A STOMP subscription with ``ack: client-individual`` (§5), the route's selector and a prefetch
    window. Messages stay unacknowledged at the provider until ``confirm``."""

    def __init__(self, config: StompLinkConfig, destination: str, *, selector: str | None = None,
                 prefetch: int = DEFAULT_PREFETCH, subscription_name: str | None = None) -> None:
        self.link = StompLink(config)
        self.destination = stomp_destination(destination)
        self.headers = {"transformation": SUBSCRIBE_TRANSFORMATION, "activemq.prefetchSize": str(prefetch)}
        if selector:
            self.headers["selector"] = selector
        if subscription_name:
            self.headers["activemq.subscriptionName"] = subscription_name
        self._queue = Inbox()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._io = ThreadPoolExecutor(1, thread_name_prefix="jms-source")
        self.stale_dropped = 0

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.link.subscribe(self.destination, self._on_frame, ack="client-individual", headers=self.headers,
                            sub_id="route")
        self.link.start(timeout=None)

    def _on_frame(self, frame: InboundFrame) -> None:   # stomp.py receiver thread
        item = frame_to_inbound(frame)
        loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(self._queue.put_nowait, item)

    async def receive(self, max_items: int) -> list[Inbound]:
        items: list[Inbound] = []
        while not items:
            first = await self._queue.get()
            batch = [first]
            while len(batch) < max_items and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            for item in batch:
                frame = item.handle
                assert isinstance(frame, InboundFrame)
                if frame.generation != self.link.generation:
                    self.stale_dropped += 1   # its connection is gone: the provider redelivers it
                    continue
                items.append(item)
        return items

    def _ack_all(self, frames: list[InboundFrame]) -> None:
        for frame in frames:
            self.link.ack(frame)   # False for a frame of an older connection: it comes again (duplicate)

    async def confirm(self, items: list[Inbound]) -> None:
        frames = [i.handle for i in items if isinstance(i.handle, InboundFrame)]
        await asyncio.get_running_loop().run_in_executor(self._io, self._ack_all, frames)

    async def backout(self, items: list[Inbound]) -> None:
        # Not NACK: ActiveMQ sends a NACKed message to ActiveMQ.DLQ at once (§5). Keep it unacknowledged
        # and hand it to the route again, counted, so the route's backout threshold decides.
        self._queue.put_back(items)

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._io, self.link.close)
        self._io.shutdown(wait=False)

    @property
    def up(self) -> bool:
        return self.link.state is LinkState.UP


def frame_to_inbound(frame: InboundFrame) -> Inbound:
    """A received frame as the router's Inbound: the JMS message, its findings, its redelivery count."""
    report = ConversionReport()
    msg = frame_to_jms(frame.headers, frame.body, report)
    return Inbound(
        key=f"jms:{frame.message_id}", protocol="jms", message=msg, source_type=msg.body_type.java_class,
        size=len(frame.body), destination=destination_name(frame.destination), received=time.time(),
        redelivery_count=redelivery_count(frame.headers), qos=1 if msg.headers.delivery_mode == 2 else 0,
        persistent=msg.headers.delivery_mode is DeliveryMode.PERSISTENT, priority=msg.headers.priority,
        handle=frame, findings=_findings(report))


# ------------------------------------------------------------------------------- factory

Factory = Callable[[RulesFile, Route, QueueEndpoint, str], Source | Target]


def jms_factory(rules: RulesFile, route: Route, endpoint: QueueEndpoint, role: str) -> Source | Target:
    """``type: jms`` connectors: a STOMP link per route endpoint."""
    conn = rules.connector(endpoint.connector)
    assert isinstance(conn, JmsConnector)
    if role == "source":
        client_id = f"mqbridge-{route.name}" if endpoint.subscription else None
        return JmsSource(link_config(conn, client_id), endpoint.destination, selector=route.options.selector,
                         subscription_name=endpoint.subscription)
    return JmsTarget(link_config(conn))


CONNECTOR_FACTORIES["jms"] = jms_factory
