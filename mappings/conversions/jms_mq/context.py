"""The working state of one JMS <-> MQ conversion on the model path: :class:`ToMq` (what JMS -> MQ builds),
:class:`ToJms` (what MQ -> JMS reads and builds), :class:`Rule` (one field pair, both directions) and the MQCHAR
field writer the rules share."""
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mappings.conversions.jms_mq.spec import (
    BODY_TABLE,
    INT_RE,
    JMS,
    MCD,
    MQLONG_MAX,
    MQPS,
    JmsToMqOptions,
    folder_int,
)
from mappings.errors import MappingError
from mappings.jms.model import (
    BodyType,
    JavaType,
    JavaValue,
    JmsMessage,
)
from mappings.mq import constants as C
from mappings.mq.mqmd import Mqmd
from mappings.report import ConversionReport


# --------------------------------------------------------------------------------------------------
# Working state of one conversion
# --------------------------------------------------------------------------------------------------
@dataclass(slots=True)
class ToMq:
    """What JMS -> MQ builds: MQMD keyword arguments and folder elements, plus what it has used."""

    message: JmsMessage
    now_ms: int
    options: JmsToMqOptions
    report: ConversionReport
    md: dict[str, Any] = field(default_factory=dict)
    mcd: dict[str, str] = field(default_factory=dict)
    jms: dict[str, str] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)        # property names a rule consumed
    body: dict[str, Any] = field(default_factory=dict)  # JMS_IBM_Format/Character_Set/Encoding: the body's fields

    @property
    def body_ccsid(self) -> int:
        return self.body.get("ccsid", self.options.body_ccsid)

    @property
    def body_encoding(self) -> int:
        return self.body.get("encoding", self.options.encoding)

    def int_prop(self, name: str) -> int | None:
        """An int property read as getIntProperty reads it: a String of decimal digits converts (JMS property value
        conversion; STOMP carries every property as a String), with a finding, since it reads back as an int."""
        value = self.message.properties.get(name)
        if value is not None and value.type is JavaType.STRING and isinstance(value.value, str) \
                and INT_RE.fullmatch(value.value) and -(2**31) <= int(value.value) <= MQLONG_MAX:
            self.used.add(name)
            self.report.coerced(name, f"String {value.value!r} read as an int (JMS property conversion): reads "
                                "back as an int")
            return int(value.value)
        return self.prop(name, JavaType.INT)

    def prop(self, name: str, jtype: JavaType) -> Any:
        """The value of the JMSX/JMS_IBM property ``name`` (None when absent); marks it used."""
        value = self.message.properties.get(name)
        if value is None:
            return None
        self.used.add(name)
        if value.value is None:
            self.report.dropped(name, "null: the MQMD has no null, it reads back as absent")
            return None
        if value.type is not jtype:
            raise MappingError(f"must be a {jtype.value}, got {value.type.value} {value.value!r}",
                               structure="JMS property", field=name)
        return value.value


@dataclass(slots=True)
class ToJms:
    """What MQ -> JMS reads (MQMD, folders) and builds (header keyword arguments, properties)."""

    md: Mqmd
    now_ms: int
    report: ConversionReport
    jms: dict[str, str | None]
    mcd: dict[str, str | None]
    mqps: dict[str, str | None]
    headers: dict[str, Any] = field(default_factory=dict)
    props: list[tuple[str, JavaValue]] = field(default_factory=list)
    used: set[str] = field(default_factory=set)        # "folder/element" names a rule consumed
    body_format: str = BODY_TABLE[BodyType.BYTES][1]   # Format, CCSID (0 resolved) and Encoding of the body
    body_ccsid: int = C.CCSID_UTF8
    body_encoding: int = C.MQENC_NORMAL
    encoding_default: int = C.MQENC_NORMAL             # the encoding before the body's header (JMS_IBM_Encoding)
    drop_bad_properties: bool = False                  # MqToJmsOptions.drop_bad_properties

    def folder_value(self, folder: str, name: str) -> tuple[bool, str | None]:
        values = {JMS: self.jms, MCD: self.mcd, MQPS: self.mqps}[folder]
        if name not in values:
            return False, None
        self.used.add(f"{folder}/{name}")
        return True, values[name]

    def folder_int(self, name: str, low: int, high: int) -> int | None:
        """An integer element of the jms folder (IBM writes them without dt, MQRFH2 docs); None when absent."""
        present, text = self.folder_value(JMS, name)
        if not present:
            return None
        return folder_int(text, low, high, name)


@dataclass(frozen=True, slots=True)
class Rule:
    """One row group of the WMB tables: the JMS field, the MQ fields, and both directions."""

    jms_field: str
    mqmd_fields: tuple[str, ...]
    rfh2_fields: tuple[str, ...]
    source: str                                        # the WMB rows / IBM lines it implements
    to_mq: Callable[[ToMq], None]
    to_jms: Callable[[ToJms], None]



def mqchar(ctx: ToMq, value: str, mqmd_field: str, length: int, name: str) -> str:
    """A value for a single-byte MQCHAR field: '?' for other characters, cut to ``length`` bytes, cut at a
    NUL; a value the MQMD cannot give back as it is (padding blanks are trimmed, IBM in) is reported."""
    text = value.encode("latin-1", "replace").decode("latin-1")
    if text != value:
        ctx.report.coerced(name, f"characters outside one byte written as '?' in MQMD.{mqmd_field}")
    if len(text) > length:
        ctx.report.truncated(name, f"MQMD.{mqmd_field} holds {length} bytes")
        text = text[:length]
    cut = text.find("\x00")
    if cut >= 0:
        ctx.report.truncated(name, f"MQMD.{mqmd_field} text ends at a NUL")
        text = text[:cut]
    if text != text.strip(" "):
        ctx.report.coerced(name, f"MQMD.{mqmd_field} is blank padded: reads back as {text.strip(' ')!r}")
    return text


