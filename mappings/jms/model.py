"""The JMS message model: typed Java values, property names, destinations, headers and the six body types."""
from __future__ import annotations

import functools
import math
import struct
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum

from mappings.errors import MappingError

# --------------------------------------------------------------------------------------------------
# Java types and typed values
# WebSphere Message Broker docs "JMS message structure": header and property
# values "can be any of the Java following types: Boolean, byte, short, char, long, int, float, double,
# string or byte[ ]".
# --------------------------------------------------------------------------------------------------


class JavaType(StrEnum):
    BOOLEAN = "boolean"
    BYTE = "byte"
    SHORT = "short"
    CHAR = "char"
    INT = "int"
    LONG = "long"
    FLOAT = "float"
    DOUBLE = "double"
    STRING = "String"
    BYTES = "byte[]"


INTEGER_RANGES: dict[JavaType, tuple[int, int]] = {
    JavaType.BYTE: (-(2**7), 2**7 - 1),
    JavaType.SHORT: (-(2**15), 2**15 - 1),
    JavaType.INT: (-(2**31), 2**31 - 1),
    JavaType.LONG: (-(2**63), 2**63 - 1),
}

#: Types whose value may be ``None`` (Java object references: a null String or byte[]).
NULLABLE_TYPES = frozenset({JavaType.STRING, JavaType.BYTES})

JavaPrimitive = bool | int | float | str | bytes | None


def to_float32(value: float) -> float:
    """Round a Python float to the nearest IEEE-754 single (Java float); overflow gives +-inf."""
    if math.isnan(value) or math.isinf(value):
        return value
    try:
        return float(struct.unpack(">f", struct.pack(">f", value))[0])
    except OverflowError:
        return math.copysign(math.inf, value)


def is_float32(value: float) -> bool:
    """True when ``value`` is exactly representable as a Java float (NaN and infinities included)."""
    return math.isnan(value) or to_float32(value) == value


def _check_value(jtype: JavaType, value: object, where: str) -> None:
    """Raise MappingError unless ``value`` is a legal value of ``jtype``; ``where`` names the holder."""

    def fail(reason: str) -> MappingError:
        return MappingError(reason, structure=f"Java {jtype.value} value", field=where)

    if value is None:
        if jtype in NULLABLE_TYPES:
            return
        raise fail("a primitive type cannot be null")
    if jtype is JavaType.BOOLEAN:
        if not isinstance(value, bool):
            raise fail(f"expected bool, got {type(value).__name__}")
    elif jtype in INTEGER_RANGES:
        if isinstance(value, bool) or not isinstance(value, int):
            raise fail(f"expected int, got {type(value).__name__}")
        low, high = INTEGER_RANGES[jtype]
        if not low <= value <= high:
            raise fail(f"{value} is outside {low}..{high}")
    elif jtype in (JavaType.FLOAT, JavaType.DOUBLE):
        if isinstance(value, bool) or not isinstance(value, float):
            raise fail(f"expected float, got {type(value).__name__}")
        if jtype is JavaType.FLOAT and not is_float32(value):
            raise fail(f"{value!r} is not representable as a 32-bit float (round it with to_float32)")
    elif jtype is JavaType.CHAR:
        if not isinstance(value, str) or len(value) != 1 or ord(value) > 0xFFFF:
            raise fail("expected one UTF-16 code unit (a str of length 1, U+0000..U+FFFF)")
    elif jtype is JavaType.STRING:
        if not isinstance(value, str):
            raise fail(f"expected str, got {type(value).__name__}")
    elif jtype is JavaType.BYTES:
        if not isinstance(value, bytes):
            raise fail(f"expected bytes, got {type(value).__name__}")


@dataclass(frozen=True, slots=True)
class JavaValue:
    """One typed Java value. Validated on construction: ranges, float32 exactness, char width."""

    type: JavaType
    value: JavaPrimitive

    def __post_init__(self) -> None:
        if not isinstance(self.type, JavaType):
            raise MappingError(f"unknown Java type {self.type!r}", structure="JavaValue", field="type")
        _check_value(self.type, self.value, "value")

    def __eq__(self, other: object) -> bool:
        # NaN must equal NaN so that round-trip tests can compare models (Java's Double.equals agrees).
        if not isinstance(other, JavaValue):
            return NotImplemented
        if self.type is not other.type:
            return False
        a, b = self.value, other.value
        if isinstance(a, float) and isinstance(b, float):
            if math.isnan(a) and math.isnan(b):
                return True
            return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
        return a == b

    def __hash__(self) -> int:
        v = self.value
        if isinstance(v, float) and math.isnan(v):
            return hash((self.type, "NaN"))
        return hash((self.type, v))


def trusted_value(jtype: JavaType, value: JavaPrimitive) -> JavaValue:
    """Build a JavaValue whose value the caller has ALREADY validated for ``jtype`` (decoder hot paths)."""
    made = object.__new__(JavaValue)
    object.__setattr__(made, "type", jtype)
    object.__setattr__(made, "value", value)
    return made


def jboolean(v: bool) -> JavaValue:
    return JavaValue(JavaType.BOOLEAN, v)


def jbyte(v: int) -> JavaValue:
    return JavaValue(JavaType.BYTE, v)


def jshort(v: int) -> JavaValue:
    return JavaValue(JavaType.SHORT, v)


def jchar(v: str) -> JavaValue:
    return JavaValue(JavaType.CHAR, v)


def jint(v: int) -> JavaValue:
    return JavaValue(JavaType.INT, v)


def jlong(v: int) -> JavaValue:
    return JavaValue(JavaType.LONG, v)


def jfloat(v: float) -> JavaValue:
    """A Java float; the Python float is rounded to 32 bits first."""
    return JavaValue(JavaType.FLOAT, to_float32(float(v)))


def jdouble(v: float) -> JavaValue:
    return JavaValue(JavaType.DOUBLE, float(v))


def jstring(v: str | None) -> JavaValue:
    return JavaValue(JavaType.STRING, v)


def jbytes(v: bytes | None) -> JavaValue:
    return JavaValue(JavaType.BYTES, v)


# --------------------------------------------------------------------------------------------------
# Property names: JMS 1.1 §3.5.1 / §3.8.1.1 — a Java identifier that is not a selector keyword.
# IBM MQ docs "MQRFH2 folder restrictions" lists the same reserved words for the RFH2 usr folder.
# --------------------------------------------------------------------------------------------------

RESERVED_WORDS = frozenset(
    {"NULL", "TRUE", "FALSE", "NOT", "AND", "OR", "BETWEEN", "LIKE", "IN", "IS", "ESCAPE"}
)

# Character.isJavaIdentifierStart: letters (L*), letter numbers (Nl), currency symbols (Sc) and
# connecting punctuation (Pc, which includes '_'). isJavaIdentifierPart adds digits (Nd), combining
# marks (Mn, Mc) and format characters (Cf). Java also allows some control characters as "ignorable";
# we do not, so that names stay printable.
_ID_START = frozenset({"Lu", "Ll", "Lt", "Lm", "Lo", "Nl", "Sc", "Pc"})
_ID_PART = _ID_START | {"Nd", "Mn", "Mc", "Cf"}


def identifier_problem(name: object) -> str | None:
    """Why ``name`` is not a valid JMS property identifier, or None when it is."""
    if not isinstance(name, str):
        return f"expected str, got {type(name).__name__}"
    return _str_identifier_problem(name)


@functools.lru_cache(maxsize=4096)   # the same few property names come with every message of a route
def _str_identifier_problem(name: str) -> str | None:
    if not name:
        return "empty name"
    if unicodedata.category(name[0]) not in _ID_START:
        return f"{name[0]!r} cannot start a Java identifier"
    for ch in name[1:]:
        if unicodedata.category(ch) not in _ID_PART:
            return f"{ch!r} is not allowed in a Java identifier"
    if name.upper() in RESERVED_WORDS:
        return f"{name!r} is a reserved word of the JMS selector language"
    return None


def is_jms_identifier(name: object) -> bool:
    return identifier_problem(name) is None


def check_property_name(name: object) -> str:
    problem = identifier_problem(name)
    if problem is not None:
        raise MappingError(problem, structure="JMS property name", field=repr(name))
    assert isinstance(name, str)
    return name


# --------------------------------------------------------------------------------------------------
# Ordered typed maps: used for message properties and for MapMessage bodies.
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, init=False)
class TypedMap(Mapping[str, JavaValue]):
    """An immutable, insertion-ordered map of names to JavaValues; equality is order-sensitive.

    Duplicate names raise MappingError. ``what`` names the holder in errors ("property", "map key").
    """

    pairs: tuple[tuple[str, JavaValue], ...]
    _index: dict[str, JavaValue] = field(compare=False, repr=False, hash=False)

    def __init__(
        self,
        items: Iterable[tuple[str, JavaValue]] | Mapping[str, JavaValue] = (),
        *,
        what: str = "map key",
    ) -> None:
        pairs = tuple(items.items()) if isinstance(items, Mapping) else tuple(items)
        index: dict[str, JavaValue] = {}
        for pair in pairs:
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise MappingError("expected (name, JavaValue) pairs", structure="TypedMap")
            name, value = pair
            if not isinstance(name, str):
                raise MappingError(f"name must be str, got {type(name).__name__}", structure="TypedMap")
            if not isinstance(value, JavaValue):
                raise MappingError("value must be a JavaValue", structure="TypedMap", field=name)
            if name in index:
                raise MappingError(f"duplicate {what}", structure="TypedMap", field=name)
            index[name] = value
        object.__setattr__(self, "pairs", pairs)
        object.__setattr__(self, "_index", index)

    def __getitem__(self, key: str) -> JavaValue:
        return self._index[key]

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self.pairs)

    def __len__(self) -> int:
        return len(self.pairs)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TypedMap):
            return self.pairs == other.pairs
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.pairs)


# --------------------------------------------------------------------------------------------------
# Destinations: `queue://QM/Q`, `queue:///Q`, `topic://a/b` (IBM MQ docs "Mapping JMS
# fields onto IBM MQ fields", JMSDestination)
# --------------------------------------------------------------------------------------------------


class DestinationKind(StrEnum):
    QUEUE = "queue"
    TOPIC = "topic"


@dataclass(frozen=True, slots=True)
class Destination:
    """A JMS queue or topic. ``queue_manager`` applies to queues only; ``options`` are `?k=v` extensions."""

    kind: DestinationKind
    name: str
    queue_manager: str = ""
    options: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.kind, DestinationKind):
            raise MappingError(f"unknown kind {self.kind!r}", structure="Destination", field="kind")
        if not isinstance(self.name, str) or not self.name:
            raise MappingError("name must be a non-empty string", structure="Destination", field="name")
        if self.kind is DestinationKind.TOPIC and self.queue_manager:
            raise MappingError("a topic has no queue manager", structure="Destination", field="queue_manager")
        if "/" in self.queue_manager or "?" in self.queue_manager:
            raise MappingError("'/' or '?' in a queue manager name cannot be written as a URI",
                               structure="Destination", field="queue_manager")

    @classmethod
    def queue(cls, name: str, queue_manager: str = "") -> Destination:
        return cls(DestinationKind.QUEUE, name, queue_manager)

    @classmethod
    def topic(cls, name: str) -> Destination:
        return cls(DestinationKind.TOPIC, name)

    @property
    def uri(self) -> str:
        """The URI; in the name, '%' and '?' are written %25 and %3F (MQTT topics may contain '?')."""
        name = self.name.replace("%", "%25").replace("?", "%3F")
        if self.kind is DestinationKind.QUEUE:
            base = f"queue://{self.queue_manager}/{name}"
        else:
            base = f"topic://{name}"
        if self.options:
            base += "?" + "&".join(f"{k}={v}" for k, v in self.options)
        return base

    @classmethod
    def parse(cls, uri: str) -> Destination:
        """Parse `queue://QM/Q`, `queue:///Q` or `topic://a/b`, each optionally followed by `?k=v&...`.

        A queue URI always has the slash after the queue manager (empty for the local one)."""
        if not isinstance(uri, str):
            raise MappingError("expected a string URI", structure="Destination URI")
        scheme, sep, rest = uri.partition("://")
        if not sep or scheme.lower() not in ("queue", "topic"):
            raise MappingError(f"{uri!r} does not start with queue:// or topic://",
                               structure="Destination URI")
        path, _, query = rest.partition("?")
        options: list[tuple[str, str]] = []
        if query:
            for part in query.split("&"):
                key, eq, value = part.partition("=")
                if not key or not eq:
                    raise MappingError(f"bad option {part!r} in {uri!r}", structure="Destination URI")
                options.append((key, value))
        if scheme.lower() == "topic":
            if not path:
                raise MappingError(f"{uri!r} has no topic name", structure="Destination URI")
            return cls(DestinationKind.TOPIC, _unescape(path), "", tuple(options))
        qmgr, slash, name = path.partition("/")
        if not slash or not name:
            raise MappingError(f"{uri!r} is not queue://QM/Q or queue:///Q", structure="Destination URI")
        return cls(DestinationKind.QUEUE, _unescape(name), qmgr, tuple(options))


def names_uri(text: str) -> bool:
    """Whether ``text`` is written as a destination URI (``queue://`` or ``topic://``, any case): the rule by
    which an MQTT 5 Response Topic or a reply publication's topic names a JMS destination rather than an MQTT
    topic (Amlen "Conversion between MQTT and JMS")."""
    return text[:8].lower() in ("queue://", "topic://")


def destination_of_uri(text: str) -> Destination | None:
    """The destination ``text`` names as a URI; None when it is not written as one (``names_uri``) or does not
    parse (then it is taken as a topic name, as any other text)."""
    if not names_uri(text):
        return None
    try:
        return Destination.parse(text)
    except MappingError:
        return None


def _unescape(name: str) -> str:
    return name.replace("%3F", "?").replace("%3f", "?").replace("%25", "%")


# --------------------------------------------------------------------------------------------------
# Headers (WebSphere Message Broker docs "JMS input message header and property data": the ten fixed
# header fields)
# --------------------------------------------------------------------------------------------------


class DeliveryMode(IntEnum):
    """javax.jms.DeliveryMode constants (the values the RFH2 `Dlv` element carries: IBM MQ docs
    "Mapping JMS fields onto IBM MQ fields")."""

    NON_PERSISTENT = 1
    PERSISTENT = 2


DEFAULT_PRIORITY = 4
_LONG_MIN, _LONG_MAX = INTEGER_RANGES[JavaType.LONG]


@dataclass(frozen=True, slots=True)
class JmsHeaders:
    """The ten JMS header fields. ``expiration``/``timestamp`` are epoch ms, 0 meaning "not set"."""

    destination: Destination | None = None
    delivery_mode: DeliveryMode = DeliveryMode.PERSISTENT
    expiration: int = 0
    priority: int = DEFAULT_PRIORITY
    timestamp: int = 0
    message_id: str | None = None
    correlation_id: str | bytes | None = None
    reply_to: Destination | None = None
    type: str | None = None
    redelivered: bool = False

    def __post_init__(self) -> None:
        def fail(name: str, reason: str) -> MappingError:
            return MappingError(reason, structure="JMS header", field=name)

        if self.destination is not None and not isinstance(self.destination, Destination):
            raise fail("JMSDestination", "must be a Destination")
        if self.reply_to is not None and not isinstance(self.reply_to, Destination):
            raise fail("JMSReplyTo", "must be a Destination")
        try:
            if isinstance(self.delivery_mode, bool):
                raise ValueError
            object.__setattr__(self, "delivery_mode", DeliveryMode(self.delivery_mode))
        except ValueError:
            raise fail("JMSDeliveryMode", f"{self.delivery_mode!r} is not 1 or 2") from None
        for name, value in (("JMSExpiration", self.expiration), ("JMSTimestamp", self.timestamp)):
            if isinstance(value, bool) or not isinstance(value, int) or not _LONG_MIN <= value <= _LONG_MAX:
                raise fail(name, f"{value!r} is not a Java long")
        priority = self.priority
        if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 9:
            raise fail("JMSPriority", f"{self.priority!r} is not 0..9")
        if self.message_id is not None and not isinstance(self.message_id, str):
            raise fail("JMSMessageID", "must be a string")
        if self.correlation_id is not None and not isinstance(self.correlation_id, str | bytes):
            raise fail("JMSCorrelationID", "must be a string or bytes")
        if self.type is not None and not isinstance(self.type, str):
            raise fail("JMSType", "must be a string")
        if not isinstance(self.redelivered, bool):
            raise fail("JMSRedelivered", "must be a bool")


# --------------------------------------------------------------------------------------------------
# Bodies: the six JMS message types and their Message_MetaData payload values
# (WebSphere Message Broker docs "Representation of messages across the JMS Transport", Message_MetaData
# table)
# --------------------------------------------------------------------------------------------------


class BodyType(StrEnum):
    MESSAGE = "jms_none"
    TEXT = "jms_text"
    BYTES = "jms_bytes"
    MAP = "jms_map"
    STREAM = "jms_stream"
    OBJECT = "jms_object"

    @property
    def payload_value(self) -> str:
        """The Message_MetaData payload value (equals the RFH2 mcd.Msd value: IBM MQ docs "The
        MQRFH2 header and JMS")."""
        return self.value

    @property
    def java_class(self) -> str:
        return _JAVA_CLASS[self]


_JAVA_CLASS = {
    BodyType.MESSAGE: "Message",
    BodyType.TEXT: "TextMessage",
    BodyType.BYTES: "BytesMessage",
    BodyType.MAP: "MapMessage",
    BodyType.STREAM: "StreamMessage",
    BodyType.OBJECT: "ObjectMessage",
}


@dataclass(frozen=True, slots=True)
class NoBody:
    """The base javax.jms.Message: no payload."""

    body_type = BodyType.MESSAGE


@dataclass(frozen=True, slots=True)
class TextBody:
    text: str | None

    body_type = BodyType.TEXT

    def __post_init__(self) -> None:
        if self.text is not None and not isinstance(self.text, str):
            raise MappingError("text must be a str or None", structure="TextMessage body")


@dataclass(frozen=True, slots=True)
class BytesBody:
    data: bytes = b""

    body_type = BodyType.BYTES

    def __post_init__(self) -> None:
        if not isinstance(self.data, bytes):
            raise MappingError("data must be bytes", structure="BytesMessage body")


@dataclass(frozen=True, slots=True)
class MapBody:
    """MapMessage: names are any non-empty strings (JMS 1.1 MapMessage), values typed, order kept."""

    entries: TypedMap = field(default_factory=TypedMap)

    body_type = BodyType.MAP

    def __post_init__(self) -> None:
        if not isinstance(self.entries, TypedMap):
            object.__setattr__(self, "entries", TypedMap(self.entries))
        for name in self.entries:
            if name == "":
                raise MappingError("a map name cannot be empty", structure="MapMessage body", field="''")


@dataclass(frozen=True, slots=True)
class StreamBody:
    items: tuple[JavaValue, ...] = ()

    body_type = BodyType.STREAM

    def __post_init__(self) -> None:
        items = tuple(self.items)
        for i, item in enumerate(items):
            if not isinstance(item, JavaValue):
                raise MappingError("items must be JavaValues", structure="StreamMessage body", field=f"[{i}]")
        object.__setattr__(self, "items", items)


@dataclass(frozen=True, slots=True)
class ObjectBody:
    """ObjectMessage: the Java-serialized bytes (None for a null object) and, if known, the class name."""

    data: bytes | None
    class_name: str | None = None

    body_type = BodyType.OBJECT

    def __post_init__(self) -> None:
        if self.data is not None and not isinstance(self.data, bytes):
            raise MappingError("data must be bytes or None", structure="ObjectMessage body")
        if self.class_name is not None and (not isinstance(self.class_name, str) or not self.class_name):
            raise MappingError("class name must be a non-empty str", structure="ObjectMessage body",
                               field="class_name")


Body = NoBody | TextBody | BytesBody | MapBody | StreamBody | ObjectBody


@dataclass(frozen=True, slots=True)
class JmsMessage:
    headers: JmsHeaders = field(default_factory=JmsHeaders)
    properties: TypedMap = field(default_factory=TypedMap)
    body: Body = field(default_factory=NoBody)

    def __post_init__(self) -> None:
        if not isinstance(self.headers, JmsHeaders):
            raise MappingError("headers must be JmsHeaders", structure="JmsMessage", field="headers")
        props = self.properties
        if not isinstance(props, TypedMap):
            props = TypedMap(props, what="property")
            object.__setattr__(self, "properties", props)
        for name in props:
            check_property_name(name)
        if not isinstance(self.body, NoBody | TextBody | BytesBody | MapBody | StreamBody | ObjectBody):
            raise MappingError("body must be one of the six JMS body types", structure="JmsMessage",
                               field="body")

    @property
    def body_type(self) -> BodyType:
        return self.body.body_type
