"""javax.jms messages <-> the JMS model (mappings/jms/model.py), through JPype: every header, property and
body of JMS 1.1 ("Java Message Service Specification 1.1", chapter 3), both ways.

Import this module only once the JVM runs (jvm.start): it imports JPype's Java types.

To the model (``to_model``): the ten header fields (JMSCorrelationID as its String, as bytes when the
provider gives only those), the JMSX properties the provider set (JMSXDeliveryCount,
JMSXGroupID, JMSXGroupSeq, JMSXUserID, JMSXAppID), every property with its Java type, and the body: text
(null kept), bytes, map and stream entries with their Java types (byte[] and char included), an
ObjectMessage as its serialized bytes and class name, a plain Message as no body. ActiveMQ's client hands
an ObjectMessage's bytes over as they are, both ways (``_raw_object``): the gateway never deserializes
them, so the class need not be on its class path nor trusted, and no foreign class's code runs in it.
Other providers' ObjectMessages are deserialized to be read, so there the class must be on the class path
(and trusted by the provider), and written from bytes the same way. A temporary destination becomes a
queue or topic with the option ``temporary=true``.

From the model (``from_model``): a message made by the provider's session, with the properties set through
their typed setters and the body written entry by entry; JMSCorrelationID (string or byte[]), JMSReplyTo and
JMSType set on it; JMSDeliveryMode, JMSPriority and JMSExpiration returned as the send arguments (JMS sets
them at send, not on the message); JMSMessageID, JMSTimestamp, JMSRedelivered and JMSXDeliveryCount are the
provider's and reported as dropped when present (JMSXDeliveryCount only above 1). What JMS cannot carry
is a finding: a byte[] or char property (JMS 1.1 §3.5.4 allows neither), a property the provider refuses, a
byte[] JMSCorrelationID the provider keeps as other bytes (read back after setting it; ActiveMQ keeps a String).
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

from jpype import (
    JArray,
    JBoolean,
    JByte,
    JChar,
    JClass,
    JDouble,
    JException,
    JFloat,
    JInt,
    JLong,
    JObject,
    JShort,
    JString,
)

from bridge.connectors.jms_native import TEMPORARY
from bridge.connectors.jms_native.batch_read import CORRELATION_BYTES, HEADERS, JMSX_VALUES, NAMES, TEXT, VALUES
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
    NoBody,
    ObjectBody,
    StreamBody,
    TextBody,
    TypedMap,
)
from mappings.jms.serialized import class_name
from mappings.report import ConversionReport, Finding

DELIVERY_COUNT = "JMSXDeliveryCount"   # set by the provider on delivery: read, never written
GROUP_SEQ = "JMSXGroupSeq"
JMSX = ("JMSXDeliveryCount", "JMSXGroupID", "JMSXGroupSeq", "JMSXUserID", "JMSXAppID")

_J = {name: JClass(f"javax.jms.{name}") for name in (
    "TextMessage", "BytesMessage", "MapMessage", "StreamMessage", "ObjectMessage", "Queue", "Topic",
    "TemporaryQueue", "TemporaryTopic", "MessageEOFException", "JMSException")}
_MESSAGE = JClass("javax.jms.Message")
_BYTES_OUT = JClass("java.io.ByteArrayOutputStream")
_OBJECT_OUT = JClass("java.io.ObjectOutputStream")
_BYTES_IN = JClass("java.io.ByteArrayInputStream")
_OBJECT_IN = JClass("java.io.ObjectInputStream")


def _optional_class(name: str) -> Any:
    try:
        return JClass(name)
    except TypeError:   # not on this JVM's class path (another provider's client)
        return None


# ActiveMQ's ObjectMessage keeps its serialized bytes as "content" (a ByteSequence, deflated when the
# connection compresses): read and written as they are (_raw_object)
_AMQ_OBJECT = _optional_class("org.apache.activemq.command.ActiveMQObjectMessage")
_BYTE_SEQUENCE = _optional_class("org.apache.activemq.util.ByteSequence")

# boxed Java class name -> (model type, Python value of it)
_FROM_JAVA: dict[str, tuple[JavaType, Any]] = {
    "java.lang.Boolean": (JavaType.BOOLEAN, lambda o: bool(o.booleanValue())),
    "java.lang.Byte": (JavaType.BYTE, lambda o: int(o.byteValue())),
    "java.lang.Short": (JavaType.SHORT, lambda o: int(o.shortValue())),
    "java.lang.Character": (JavaType.CHAR, lambda o: str(o.charValue())),
    "java.lang.Integer": (JavaType.INT, lambda o: int(o.intValue())),
    "java.lang.Long": (JavaType.LONG, lambda o: int(o.longValue())),
    "java.lang.Float": (JavaType.FLOAT, lambda o: float(o.floatValue())),
    "java.lang.Double": (JavaType.DOUBLE, lambda o: float(o.doubleValue())),
    "java.lang.String": (JavaType.STRING, str),
    "[B": (JavaType.BYTES, lambda o: bytes(o)),
}
# the same by the boxed value's JPype class (java_value: no call into the JVM)
_BY_CLASS: dict[Any, tuple[JavaType, Any]] = {JClass(name): entry for name, entry in _FROM_JAVA.items()}
# model type -> (typed setter suffix for properties/map entries and stream writes, JPype converter)
_TO_JAVA: dict[JavaType, tuple[str, Any]] = {
    JavaType.BOOLEAN: ("Boolean", JBoolean), JavaType.BYTE: ("Byte", JByte), JavaType.SHORT: ("Short", JShort),
    JavaType.CHAR: ("Char", JChar), JavaType.INT: ("Int", JInt), JavaType.LONG: ("Long", JLong),
    JavaType.FLOAT: ("Float", JFloat), JavaType.DOUBLE: ("Double", JDouble), JavaType.STRING: ("String", str),
    JavaType.BYTES: ("Bytes", lambda v: JArray(JByte)(v)),
}
# model type -> its box (java.lang.Integer for int, ...), whose valueOf takes the JPype primitive
_BOXES = {jtype: JClass(f"java.lang.{name}") for jtype, name in (
    (JavaType.BOOLEAN, "Boolean"), (JavaType.BYTE, "Byte"), (JavaType.SHORT, "Short"), (JavaType.INT, "Integer"),
    (JavaType.LONG, "Long"), (JavaType.FLOAT, "Float"), (JavaType.DOUBLE, "Double"))}
_SET_CORRELATION_BYTES = _MESSAGE.setJMSCorrelationIDAsBytes   # finish reads back what the provider kept
# model type -> javax.jms.Message's typed property setter (JMS 1.1 §3.5.4: no byte[] or char properties)
_PROPERTY_SETTERS = {jtype: getattr(_MESSAGE, f"set{suffix}Property") for jtype, (suffix, _) in _TO_JAVA.items()
                     if jtype not in (JavaType.BYTES, JavaType.CHAR)}


def java_value(obj: Any, where: str) -> JavaValue:
    """A boxed Java value (a property, a map or stream entry) as a typed model value; None: a null String. The
    value's JPype class says its type without a call into the JVM; only another class is asked its name."""
    if obj is None:
        return JavaValue(JavaType.STRING, None)
    entry = _BY_CLASS.get(type(obj))
    if entry is None:
        name = str(obj.getClass().getName())
        entry = _FROM_JAVA.get(name)
        if entry is None:
            raise TypeError(f"{where}: a {name} is not a JMS value type")
    jtype, convert = entry
    return JavaValue(jtype, convert(obj))


def _text(obj: Any) -> str | None:
    return None if obj is None else str(obj)


# --------------------------------------------------------------------------------------------------
# Java -> model
# --------------------------------------------------------------------------------------------------
def destination(dest: Any) -> Destination | None:
    if dest is None:
        return None
    options = (TEMPORARY,) if isinstance(dest, _J["TemporaryQueue"] | _J["TemporaryTopic"]) else ()
    if isinstance(dest, _J["Queue"]):
        return Destination(DestinationKind.QUEUE, str(dest.getQueueName()), "", options)
    if isinstance(dest, _J["Topic"]):
        return Destination(DestinationKind.TOPIC, str(dest.getTopicName()), "", options)
    raise TypeError(f"{dest.getClass().getName()} is neither a Queue nor a Topic")


def correlation_id(msg: Any) -> str | bytes | None:
    """JMSCorrelationID: its String form; the byte[] form when the provider gives no String for it (JMS 1.1
    leaves a byte[] id to the provider: one may keep it as bytes only). A provider that gives both (ActiveMQ: the
    bytes' UTF-8 text; IBM MQ: ``ID:<hex>``) is read as the String, which is what a JMS consumer compares."""
    text = msg.getJMSCorrelationID()
    try:
        raw = None if text is not None else msg.getJMSCorrelationIDAsBytes()
    except _J["JMSException"]:
        raw = None
    return _correlation(text, raw)


def _correlation(text: Any, raw: Any) -> str | bytes | None:
    """The model's JMSCorrelationID of the String form ``text`` and the byte[] form ``raw`` (correlation_id)."""
    if text is not None:
        return str(text)
    return None if raw is None else bytes(raw)


def to_model(msg: Any) -> JmsMessage:
    """A received (or built) javax.jms.Message as the model; its body is read from the start."""
    return JmsMessage(_headers(msg), _properties(msg), _body(msg))


def from_row(msg: Any, row: Any) -> JmsMessage:
    """``to_model`` of a received message from its batch_read row (the same model, read in one call per batch);
    only a body other than text is read from the message itself."""
    # by index: JPype's array iterator is Python code, several times slower than its C indexing
    dest, mode, expiration, priority, timestamp, message_id, correlation, reply_to, jms_type, redelivered = (
        row[i] for i in range(len(HEADERS)))
    headers = JmsHeaders(
        destination=destination(dest), delivery_mode=DeliveryMode(int(mode)), expiration=int(expiration),
        priority=int(priority), timestamp=int(timestamp), message_id=_text(message_id),
        correlation_id=_correlation(correlation, row[CORRELATION_BYTES]),
        reply_to=destination(reply_to), type=_text(jms_type),
        redelivered=bool(redelivered))
    names, values, jmsx = row[NAMES], row[VALUES], row[JMSX_VALUES]
    keys = [str(names[i]) for i in range(len(names))]
    props = [(name, java_value(values[i], f"property {name}")) for i, name in enumerate(keys)]
    for i, name in enumerate(JMSX):
        value = jmsx[i]
        if name not in keys and _jmsx_set(name, value):
            props.append((name, java_value(value, f"property {name}")))
    body = TextBody(_text(row[TEXT])) if isinstance(msg, _J["TextMessage"]) else _body(msg)
    return JmsMessage(headers, TypedMap(props, what="property"), body)


def unreadable(msg: Any, why: str) -> tuple[JmsMessage, list[Finding]]:
    """What can be read of a message ``to_model`` failed on (``why``): its headers, each property and its body
    when they read; the findings name what is missing. For the route's backout destination."""
    report = ConversionReport()
    try:
        headers = _headers(msg)
    except Exception as exc:   # noqa: BLE001 - whatever the provider raises: the message goes on without them
        headers = JmsHeaders()
        report.dropped("headers", f"cannot be read: {exc}")
    try:
        props = _properties(msg, report)
    except Exception as exc:   # noqa: BLE001 - as above (the names themselves)
        props = TypedMap(what="property")
        report.dropped("properties", f"cannot be read: {exc}")
    try:
        body = _body(msg)
    except Exception:   # noqa: BLE001 - as above
        body = NoBody()
        report.dropped("body", f"cannot be read: {why}")
    return JmsMessage(headers, props, body), list(report.findings)


def _headers(msg: Any) -> JmsHeaders:
    return JmsHeaders(
        destination=destination(msg.getJMSDestination()),
        delivery_mode=DeliveryMode(int(msg.getJMSDeliveryMode())),
        expiration=int(msg.getJMSExpiration()), priority=int(msg.getJMSPriority()),
        timestamp=int(msg.getJMSTimestamp()), message_id=_text(msg.getJMSMessageID()),
        correlation_id=correlation_id(msg), reply_to=destination(msg.getJMSReplyTo()),
        type=_text(msg.getJMSType()), redelivered=bool(msg.getJMSRedelivered()))


def _properties(msg: Any, unreadable: ConversionReport | None = None) -> TypedMap:
    """The listed properties, then the JMSX ones the provider answers for; with ``unreadable``, a property that
    cannot be read is left out as a finding there instead of failing the whole message."""
    props: list[tuple[str, JavaValue]] = []
    names = [str(n) for n in _enumerate(msg.getPropertyNames())]
    for name in [*names, *(x for x in JMSX if x not in names)]:
        try:
            value = msg.getObjectProperty(name)
            if name in names or _jmsx_set(name, value):
                props.append((name, java_value(value, f"property {name}")))
        except Exception as exc:   # noqa: BLE001 - whatever the provider raises, or no JMS type
            if unreadable is None:
                raise
            unreadable.dropped(name, f"cannot be read: {exc}")
    return TypedMap(props, what="property")


def _jmsx_set(name: str, value: Any) -> bool:
    """Whether a JMSX property the provider did not list but answers for is set: not null, and not a group
    sequence of 0, which ActiveMQ answers for every message outside a group (JMS 1.1 §3.5.9: a group's first
    message is 1), and which would otherwise reach MQ as a coerced MsgSeqNumber on every message."""
    return value is not None and not (name == GROUP_SEQ and int(value) == 0)


def _enumerate(enumeration: Any) -> list[Any]:
    out = []
    while enumeration.hasMoreElements():
        out.append(enumeration.nextElement())
    return out


def _body(msg: Any) -> Any:
    if isinstance(msg, _J["TextMessage"]):
        return TextBody(_text(msg.getText()))
    if isinstance(msg, _J["BytesMessage"]):
        msg.reset()
        data = JArray(JByte)(int(msg.getBodyLength()))
        msg.readBytes(data)
        return BytesBody(bytes(data))
    if isinstance(msg, _J["MapMessage"]):
        names = [str(n) for n in _enumerate(msg.getMapNames())]
        return MapBody(TypedMap([(n, java_value(msg.getObject(n), f"map entry {n}")) for n in names], what="entry"))
    if isinstance(msg, _J["StreamMessage"]):
        msg.reset()
        items = []
        while True:
            try:
                items.append(java_value(msg.readObject(), f"stream item {len(items)}"))
            except _J["MessageEOFException"]:
                break
        return StreamBody(tuple(items))
    if isinstance(msg, _J["ObjectMessage"]):
        raw = _raw_object(msg)
        if raw is not None:
            return ObjectBody(raw, class_name(raw))
        obj = msg.getObject()
        if obj is None:
            return ObjectBody(None)
        out = _BYTES_OUT()
        stream = _OBJECT_OUT(out)
        stream.writeObject(obj)
        stream.close()
        return ObjectBody(bytes(out.toByteArray()), str(obj.getClass().getName()))
    return NoBody()


def _raw_object(msg: Any) -> bytes | None:
    """An ActiveMQ ObjectMessage's serialized bytes, not deserialized; None: another provider's message, or
    one without content (a null object, or one built here with setObject)."""
    if _AMQ_OBJECT is None or not isinstance(msg, _AMQ_OBJECT):
        return None
    content = msg.getContent()
    if content is None:
        return None
    offset = int(content.getOffset())
    data = bytes(content.getData())[offset:offset + int(content.getLength())]
    return zlib.decompress(data) if msg.isCompressed() else data


# --------------------------------------------------------------------------------------------------
# model -> Java
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SendArgs:
    """What JMS takes at send (MessageProducer.send(destination, message, deliveryMode, priority, timeToLive))."""

    delivery_mode: int
    priority: int
    time_to_live: int      # milliseconds; 0: never expires


SUPPLEMENTARY = "\U0001f600"   # a character above U+FFFF (a surrogate pair in Java)
PROBE_WAIT_MS = 5000


def probe_characters(connection: Any) -> frozenset[str]:
    """Where this provider loses characters above U+FFFF between a producer and a consumer ("property":
    String properties, "map": String MapMessage entries), found by sending both to a temporary queue and
    reading them back (ActiveMQ 5.17's OpenWire reads such a property back as two U+FFFD). A provider that
    allows no temporary queue, or does not answer, is taken to carry them (logged by the caller)."""
    session = connection.createSession(False, 1)   # AUTO_ACKNOWLEDGE, beside the endpoint's transacted one
    try:
        queue = session.createTemporaryQueue()
        producer, consumer = session.createProducer(queue), session.createConsumer(queue)
        text = session.createTextMessage("probe")
        text.setStringProperty("p", SUPPLEMENTARY)
        entries = session.createMapMessage()
        entries.setString("m", SUPPLEMENTARY)
        producer.send(text)
        producer.send(entries)
        lossy: set[str] = set()
        got = consumer.receive(PROBE_WAIT_MS)
        if got is not None and str(got.getStringProperty("p")) != SUPPLEMENTARY:
            lossy.add("property")
        got = consumer.receive(PROBE_WAIT_MS)
        if got is not None and str(got.getString("m")) != SUPPLEMENTARY:
            lossy.add("map")
        consumer.close()
        producer.close()
        queue.delete()
        return frozenset(lossy)
    finally:
        session.close()


def _supplementary_lost(name: str, value: JavaValue, where: str, lossy: frozenset[str],
                        report: ConversionReport) -> None:
    if where in lossy and value.type is JavaType.STRING and isinstance(value.value, str) \
            and not value.value.isascii() and any(ord(c) > 0xFFFF for c in value.value):
        report.coerced(name, "characters above U+FFFF: this provider reads them back as U+FFFD (found by the "
                             "connector's probe at connect)")


def from_model(session: Any, message: JmsMessage, *, now_ms: int, report: ConversionReport,
               temporary: Any = None, lossy: frozenset[str] = frozenset()) -> tuple[Any, SendArgs]:
    """``message`` as a javax.jms.Message made by ``session`` (a javax.jms.Session), and its send arguments.
    ``temporary(destination)``: the provider's temporary destination of that name (None: not carried);
    ``lossy``: where the provider loses characters above U+FFFF (probe_characters), reported as coerced."""
    msg = new_message(session, message, report, lossy)
    prepared = prepare(session, message.headers, message.properties, temporary=temporary, lossy=lossy)
    return msg, finish(msg, prepared, now_ms, report)


@dataclass(frozen=True, slots=True)
class Prepared:
    """What from_model sets on a message besides its body, made once for given headers and properties: the
    setters with their Java arguments, what they cost (findings) and the send arguments. A target keeps it for
    the messages that share those headers and properties (a route's messages of one key, cached by
    bridge/routing/mqtt_stomp.MqttToJmsModels), on the session that made it: per message, only the body and
    the calls remain (JPype's per-call cost, not Python's conversions, is what is left)."""

    calls: tuple[tuple[Any, str | None, tuple[Any, ...]], ...]   # (javax.jms.Message setter, property, args)
    findings: tuple[Finding, ...]
    delivery_mode: int
    priority: int
    expiration: int
    # the properties as Java arrays (names, boxed values) for batch.BatchSend; None: a header is set too
    boxed: tuple[Any, Any] | None = None
    fixed: SendArgs | None = None   # the send arguments when they do not depend on the time (no JMSExpiration)


def prepare(session: Any, headers: JmsHeaders, properties: TypedMap, *, temporary: Any = None,
            lossy: frozenset[str] = frozenset()) -> Prepared:
    """The Prepared of ``headers`` and ``properties`` on ``session`` (from_model's arguments)."""
    report = ConversionReport()
    calls: list[tuple[Any, str | None, tuple[Any, ...]]] = []
    if headers.correlation_id is not None:
        if isinstance(headers.correlation_id, bytes):
            calls.append((_SET_CORRELATION_BYTES, None, (JArray(JByte)(headers.correlation_id),)))
        else:
            calls.append((_MESSAGE.setJMSCorrelationID, None, (JString(headers.correlation_id),)))
    if headers.reply_to is not None:
        reply = java_destination(session, headers.reply_to, temporary)
        if reply is None:
            report.dropped("JMSReplyTo", f"{headers.reply_to.uri}: this provider's temporary destinations cannot "
                           "be named")
        else:
            calls.append((_MESSAGE.setJMSReplyTo, None, (reply,)))
    if headers.type is not None:
        calls.append((_MESSAGE.setJMSType, None, (JString(headers.type),)))
    for name, why in (("JMSMessageID", headers.message_id), ("JMSTimestamp", headers.timestamp),
                      ("JMSRedelivered", headers.redelivered)):
        if why:
            report.dropped(name, "set by the provider at send")
    headers_set = bool(calls)
    boxes: list[tuple[Any, Any]] = []
    _property_calls(calls, boxes, properties, report, lossy)
    boxed = None if headers_set else (JArray(JString)([b[0] for b in boxes]), JArray(JObject)([b[1] for b in boxes]))
    mode = int(headers.delivery_mode)
    return Prepared(tuple(calls), tuple(report.findings), mode, headers.priority, headers.expiration, boxed,
                    None if headers.expiration else SendArgs(mode, headers.priority, 0))


def finish(msg: Any, prepared: Prepared, now_ms: int, report: ConversionReport) -> SendArgs:
    """Make ``prepared``'s calls on ``msg`` (a property the provider refuses is a finding) and return the send
    arguments (the time to live from JMSExpiration and ``now_ms``)."""
    for setter, name, args in prepared.calls:
        if name is None:
            setter(msg, *args)
            if setter is _SET_CORRELATION_BYTES:
                _correlation_kept(msg, bytes(args[0]), report)
            continue
        try:
            setter(msg, *args)
        except _J["JMSException"] as exc:
            report.dropped(name, f"refused by the provider: {exc.getMessage()}")
    return send_args(prepared, now_ms, report)


def _correlation_kept(msg: Any, sent: bytes, report: ConversionReport) -> None:
    """A byte[] JMSCorrelationID the provider keeps otherwise (ActiveMQ: as a String, the bytes decoded as UTF-8,
    so bytes that are not UTF-8 come back changed) is a finding: read back as the consumer would."""
    try:
        kept = msg.getJMSCorrelationIDAsBytes()
    except _J["JMSException"]:   # the provider cannot say: nothing known to report
        return
    if kept is None or bytes(kept) != sent:
        report.coerced("JMSCorrelationID", f"byte[] {sent.hex()}: this provider keeps "
                       f"{'none' if kept is None else bytes(kept).hex()} (its byte form of the id)")


def send_args(prepared: Prepared, now_ms: int, report: ConversionReport) -> SendArgs:
    """The send arguments of a message made with ``prepared`` (the time to live from JMSExpiration and
    ``now_ms``); ``report`` gets what ``prepared`` costs."""
    report.findings.extend(prepared.findings)
    ttl = 0
    if prepared.expiration:
        ttl = prepared.expiration - now_ms
        if ttl <= 0:
            report.coerced("JMSExpiration", f"{prepared.expiration} has passed: time to live 1 ms")
            ttl = 1
    return SendArgs(prepared.delivery_mode, prepared.priority, ttl)


def java_destination(session: Any, dest: Destination, temporary: Any = None) -> Any:
    if TEMPORARY in dest.options:
        return temporary(dest) if temporary is not None else None
    if dest.kind is DestinationKind.QUEUE:
        return session.createQueue(dest.name)
    return session.createTopic(dest.name)


def new_message(session: Any, message: JmsMessage, report: ConversionReport, lossy: frozenset[str]) -> Any:
    """A message of ``message``'s body type made by ``session``, its body written (nothing else set)."""
    body = message.body
    if isinstance(body, TextBody):
        return session.createTextMessage(body.text)
    if isinstance(body, BytesBody):
        msg = session.createBytesMessage()
        msg.writeBytes(JArray(JByte)(body.data))
        return msg
    if isinstance(body, MapBody):
        msg = session.createMapMessage()
        for name, value in body.entries.pairs:
            _supplementary_lost(f"body.{name}", value, "map", lossy, report)
            if value.value is None:
                msg.setObject(name, None)
            else:
                suffix, convert = _TO_JAVA[value.type]
                getattr(msg, f"set{suffix}")(name, convert(value.value))
        return msg
    if isinstance(body, StreamBody):
        msg = session.createStreamMessage()
        for value in body.items:
            if value.value is None:
                msg.writeObject(None)
            else:
                suffix, convert = _TO_JAVA[value.type]
                getattr(msg, f"write{suffix}")(convert(value.value))
        return msg
    if isinstance(body, ObjectBody):
        msg = session.createObjectMessage()
        if body.data is not None and _AMQ_OBJECT is not None and _BYTE_SEQUENCE is not None and \
                isinstance(msg, _AMQ_OBJECT):
            msg.setContent(_BYTE_SEQUENCE(JArray(JByte)(body.data)))   # sent as they are (_raw_object)
        elif body.data is not None:
            try:
                msg.setObject(_OBJECT_IN(_BYTES_IN(JArray(JByte)(body.data))).readObject())
            except JException as exc:
                report.dropped("body", f"ObjectMessage of {body.class_name}: cannot be deserialized here ({exc})")
        return msg
    return session.createMessage()


def _property_calls(calls: list[tuple[Any, str | None, tuple[Any, ...]]], boxes: list[tuple[Any, Any]],
                    props: TypedMap, report: ConversionReport, lossy: frozenset[str]) -> None:
    """The typed setter call of each property JMS can carry (``calls``) and the same as (name, boxed value) for
    ``Message.setObjectProperty`` (``boxes``); what it cannot carry is a finding."""
    for name, value in props.pairs:
        _supplementary_lost(name, value, "property", lossy, report)
        if name == DELIVERY_COUNT:
            if value.value != 1:   # a first delivery counts 1 at the target too
                report.dropped(name, f"{value.value}: the provider counts deliveries afresh")
            continue
        jtype = value.type
        if jtype is JavaType.BYTES:
            report.dropped(name, "a JMS property cannot be a byte[] (JMS 1.1 §3.5.4)")
            continue
        if jtype is JavaType.CHAR:
            report.coerced(name, "char -> String: a JMS property cannot be a char (JMS 1.1 §3.5.4)")
            jtype = JavaType.STRING
        jname = JString(name)
        if value.value is None:
            calls.append((_MESSAGE.setObjectProperty, name, (jname, None)))
            boxes.append((jname, None))
        elif jtype is JavaType.STRING:
            text = JString(value.value)
            calls.append((_PROPERTY_SETTERS[jtype], name, (jname, text)))
            boxes.append((jname, text))
        else:
            primitive = _TO_JAVA[jtype][1](value.value)
            calls.append((_PROPERTY_SETTERS[jtype], name, (jname, primitive)))
            boxes.append((jname, _BOXES[jtype].valueOf(primitive)))


__all__ = ["JMSX", "TEMPORARY", "Prepared", "SendArgs", "correlation_id", "destination", "finish", "from_model",
           "from_row", "java_destination", "java_value", "new_message", "prepare", "probe_characters", "send_args",
           "to_model", "unreadable"]
