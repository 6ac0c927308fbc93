"""javax.jms messages <-> the JMS model (mappings/jms/model.py), through JPype: every header, property and
body of JMS 1.1 ("Java Message Service Specification 1.1", chapter 3), both ways.

Import this module only once the JVM runs (jvm.start): it imports JPype's Java types.

To the model (``to_model``): the ten header fields, the JMSX properties the provider set (JMSXDeliveryCount,
JMSXGroupID, JMSXGroupSeq, JMSXUserID, JMSXAppID), every property with its Java type, and the body: text
(null kept), bytes, map and stream entries with their Java types (byte[] and char included), an
ObjectMessage as its serialized bytes and class name (it is deserialized to be read, so its class must be on
the class path and trusted by the provider), a plain Message as no body. A temporary destination becomes a
queue or topic with the option ``temporary=true``.

From the model (``from_model``): a message made by the provider's session, with the properties set through
their typed setters and the body written entry by entry; JMSCorrelationID (string or byte[]), JMSReplyTo and
JMSType set on it; JMSDeliveryMode, JMSPriority and JMSExpiration returned as the send arguments (JMS sets
them at send, not on the message); JMSMessageID, JMSTimestamp, JMSRedelivered and JMSXDeliveryCount are the
provider's and reported as dropped when present (JMSXDeliveryCount only above 1). What JMS cannot carry
is a finding: a byte[] or char property (JMS 1.1 §3.5.4 allows neither), a property the provider refuses.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jpype import JArray, JBoolean, JByte, JChar, JClass, JDouble, JException, JFloat, JInt, JLong, JShort

from bridge.connectors.jms_native import TEMPORARY
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
from mappings.report import ConversionReport

DELIVERY_COUNT = "JMSXDeliveryCount"   # set by the provider on delivery: read, never written
JMSX = ("JMSXDeliveryCount", "JMSXGroupID", "JMSXGroupSeq", "JMSXUserID", "JMSXAppID")

_J = {name: JClass(f"javax.jms.{name}") for name in (
    "TextMessage", "BytesMessage", "MapMessage", "StreamMessage", "ObjectMessage", "Queue", "Topic",
    "TemporaryQueue", "TemporaryTopic", "MessageEOFException", "JMSException")}
_BYTES_OUT = JClass("java.io.ByteArrayOutputStream")
_OBJECT_OUT = JClass("java.io.ObjectOutputStream")
_BYTES_IN = JClass("java.io.ByteArrayInputStream")
_OBJECT_IN = JClass("java.io.ObjectInputStream")

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
# model type -> (typed setter suffix for properties/map entries and stream writes, JPype converter)
_TO_JAVA: dict[JavaType, tuple[str, Any]] = {
    JavaType.BOOLEAN: ("Boolean", JBoolean), JavaType.BYTE: ("Byte", JByte), JavaType.SHORT: ("Short", JShort),
    JavaType.CHAR: ("Char", JChar), JavaType.INT: ("Int", JInt), JavaType.LONG: ("Long", JLong),
    JavaType.FLOAT: ("Float", JFloat), JavaType.DOUBLE: ("Double", JDouble), JavaType.STRING: ("String", str),
    JavaType.BYTES: ("Bytes", lambda v: JArray(JByte)(v)),
}


def java_value(obj: Any, where: str) -> JavaValue:
    """A boxed Java value (a property, a map or stream entry) as a typed model value; None: a null String."""
    if obj is None:
        return JavaValue(JavaType.STRING, None)
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


def to_model(msg: Any) -> JmsMessage:
    """A received (or built) javax.jms.Message as the model; its body is read from the start."""
    headers = JmsHeaders(
        destination=destination(msg.getJMSDestination()),
        delivery_mode=DeliveryMode(int(msg.getJMSDeliveryMode())),
        expiration=int(msg.getJMSExpiration()), priority=int(msg.getJMSPriority()),
        timestamp=int(msg.getJMSTimestamp()), message_id=_text(msg.getJMSMessageID()),
        correlation_id=_text(msg.getJMSCorrelationID()), reply_to=destination(msg.getJMSReplyTo()),
        type=_text(msg.getJMSType()), redelivered=bool(msg.getJMSRedelivered()))
    props: list[tuple[str, JavaValue]] = []
    names = [str(n) for n in _enumerate(msg.getPropertyNames())]
    for name in [*names, *(x for x in JMSX if x not in names)]:
        value = msg.getObjectProperty(name)
        if value is not None or name in names:
            props.append((name, java_value(value, f"property {name}")))
    return JmsMessage(headers, TypedMap(props, what="property"), _body(msg))


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
        obj = msg.getObject()
        if obj is None:
            return ObjectBody(None)
        out = _BYTES_OUT()
        stream = _OBJECT_OUT(out)
        stream.writeObject(obj)
        stream.close()
        return ObjectBody(bytes(out.toByteArray()), str(obj.getClass().getName()))
    return NoBody()


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
            and any(ord(c) > 0xFFFF for c in value.value):
        report.coerced(name, "characters above U+FFFF: this provider reads them back as U+FFFD (found by the "
                             "connector's probe at connect)")


def from_model(session: Any, message: JmsMessage, *, now_ms: int, report: ConversionReport,
               temporary: Any = None, lossy: frozenset[str] = frozenset()) -> tuple[Any, SendArgs]:
    """``message`` as a javax.jms.Message made by ``session`` (a javax.jms.Session), and its send arguments.
    ``temporary(destination)``: the provider's temporary destination of that name (None: not carried);
    ``lossy``: where the provider loses characters above U+FFFF (probe_characters), reported as coerced."""
    msg = _new_message(session, message, report, lossy)
    headers = message.headers
    if headers.correlation_id is not None:
        if isinstance(headers.correlation_id, bytes):
            msg.setJMSCorrelationIDAsBytes(JArray(JByte)(headers.correlation_id))
        else:
            msg.setJMSCorrelationID(headers.correlation_id)
    if headers.reply_to is not None:
        reply = java_destination(session, headers.reply_to, temporary)
        if reply is None:
            report.dropped("JMSReplyTo", f"{headers.reply_to.uri}: this provider's temporary destinations cannot "
                           "be named")
        else:
            msg.setJMSReplyTo(reply)
    if headers.type is not None:
        msg.setJMSType(headers.type)
    for name, why in (("JMSMessageID", headers.message_id), ("JMSTimestamp", headers.timestamp),
                      ("JMSRedelivered", headers.redelivered)):
        if why:
            report.dropped(name, "set by the provider at send")
    _set_properties(msg, message.properties, report, lossy)
    ttl = 0
    if headers.expiration:
        ttl = headers.expiration - now_ms
        if ttl <= 0:
            report.coerced("JMSExpiration", f"{headers.expiration} has passed: time to live 1 ms")
            ttl = 1
    return msg, SendArgs(int(headers.delivery_mode), headers.priority, ttl)


def java_destination(session: Any, dest: Destination, temporary: Any = None) -> Any:
    if TEMPORARY in dest.options:
        return temporary(dest) if temporary is not None else None
    if dest.kind is DestinationKind.QUEUE:
        return session.createQueue(dest.name)
    return session.createTopic(dest.name)


def _new_message(session: Any, message: JmsMessage, report: ConversionReport, lossy: frozenset[str]) -> Any:
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
        if body.data is not None:
            try:
                msg.setObject(_OBJECT_IN(_BYTES_IN(JArray(JByte)(body.data))).readObject())
            except JException as exc:
                report.dropped("body", f"ObjectMessage of {body.class_name}: cannot be deserialized here ({exc})")
        return msg
    return session.createMessage()


def _set_properties(msg: Any, props: TypedMap, report: ConversionReport, lossy: frozenset[str]) -> None:
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
        try:
            if value.value is None:
                msg.setObjectProperty(name, None)
            else:
                suffix, convert = _TO_JAVA[jtype]
                getattr(msg, f"set{suffix}Property")(name, convert(value.value))
        except _J["JMSException"] as exc:
            report.dropped(name, f"refused by the provider: {exc.getMessage()}")


__all__ = ["JMSX", "TEMPORARY", "SendArgs", "destination", "from_model", "java_destination", "java_value",
           "probe_characters", "to_model"]
