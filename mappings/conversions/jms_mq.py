"""JMS message <-> IBM MQ message (MQMD + MQRFH2 mcd/jms/usr + body), as IBM MQ classes for JMS map them.

Specification: message-broker-end-user-application-support.txt, "JMS message transformation" (the
JMSMQTransform and MQJMSTransform tables, quoted per rule below as "seed JMS->MQMD", "seed JMS->jms
folder", "seed MQMD->JMS", "seed jms folder->JMS"), and ../shared/reference/mq-wire-facts.md §6 (6.1
message shape, 6.2 outgoing, 6.3 incoming with the RFH2-wins precedence, 6.4 bodies), §5.3/§5.4 folders.
The seed's broker names are the IBM JMS property names: JMSQApplid/JMSApplid = JMSXAppID, JMSUser =
JMSXUserID, JMSGroupid/JMSGroupseq = JMSXGroupID/JMSXGroupSeq (§6.2, S6).

Shape: every field pair is one :class:`Rule` with both directions side by side (``to_mq`` and
``to_jms``); :data:`RULES` is the table both directions run, and :data:`JMS_TO_MQ` /
:data:`MQ_TO_JMS` list what each rule reads and writes. The Msd/Format per body type is the one table
:data:`BODY_TABLE`. Both functions are pure: the clock is the ``now_ms`` argument.

The report promise: :func:`jms_to_mq` reports every step after which :func:`mq_to_jms` (same ``now_ms``)
would not give back an equal message (properties compared as a set of names: JMS gives them no order;
usr order is kept), and every value an MQ-native reader sees cut short. :func:`mq_to_jms` reports every
MQ field that did not reach the JMS message and every MQMD value that lost to the RFH2 (§6.3).

Decisions the sources leave open (also in :data:`DECISIONS`) are documented where they are made.
"""
from __future__ import annotations

import datetime as _dt
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mappings.errors import MappingError
from mappings.jms.bodies import decode_map, decode_stream, encode_map, encode_stream
from mappings.jms.model import (
    INTEGER_RANGES,
    NULLABLE_TYPES,
    RESERVED_WORDS,
    Body,
    BodyType,
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
    identifier_problem,
)
from mappings.jms.typed_xml import DT_TO_TYPE, decode_value, encode_value
from mappings.mq import constants as C
from mappings.mq.ccsid import codec_for
from mappings.mq.message import MqMessage, build_message, decode_message, encode_message
from mappings.mq.mqmd import MQMD_DEFAULT, Mqmd
from mappings.mq.rfh2 import Rfh1, Rfh2, RfhElement, RfhFolder
from mappings.report import ConversionReport

MCD, JMS, USR, MQPS = "mcd", "jms", "usr", "mqps"
RFH2_JMS = "MQRFH2 jms folder"
_LONG_MIN, _LONG_MAX = INTEGER_RANGES[JavaType.LONG]
_MQLONG_MAX = 2**31 - 1
_XML_WS = " \t\r\n"

DECISIONS: tuple[str, ...] = (
    "JMSPriority: MQMD.Priority wins (§6.3); jms/Pri (seed jms folder->JMS row) is used when MQMD.Priority is "
    "not a real priority (MQPRI_PRIORITY_AS_Q_DEF etc.), else 4, the JMS default (defaulted).",
    "JMSExpiration: jms/Exp wins (§6.3); without it, MQMD.Expiry > 0 gives now_ms + Expiry*100 (seed MQMD->JMS "
    "row 'Expiry -> JMSExpiration'; §6.3 alone would give 0). JMS->MQ: Expiry = ceil(TTL/100) with TTL = "
    "JMSExpiration - now_ms; an already expired message gets Expiry 1 (coerced); a TTL too large for an MQLONG "
    "gives Expiry -1 with Exp still written (§6.2).",
    "JMSXDeliveryCount: BackoutCount = JMSXDeliveryCount - 1 (seed JMS->MQMD); without it BackoutCount is 1 "
    "when JMSRedelivered, else 0; on receive JMSXDeliveryCount = BackoutCount + 1 and JMSRedelivered = "
    "BackoutCount > 0 (seed MQMD->JMS, §6.3).",
    "JMSCorrelationID: always written to jms/Cid (seed JMS->jms folder row); CorrelId holds the 24 bytes of an "
    "'ID:'+48 hex value, else the UTF-8 bytes cut or NUL-padded to 24. The bytes form goes to CorrelId only and "
    "reads back as the 'ID:' string (coerced).",
    "JMSXGroupID: 'ID:'+48 hex -> GroupId; any other string -> its UTF-8 bytes cut/padded to 24 in GroupId and "
    "the whole string in jms/Gid. JMSXGroupSeq -> MsgSeqNumber (jms/Seq when < 1). Either sets MQMF_MSG_IN_GROUP;"
    " JMS_IBM_Last_Msg_In_Group true sets MQMF_LAST_MSG_IN_GROUP.",
    "JMSType: a canonical 'mcd://domain[/set[/type]][?format=fmt]' on a Text or Bytes message fills mcd "
    "Msd/Set/Type/Fmt (§6.2); any other JMSType goes verbatim to mcd/Type. A received non-jms_* Msd gives the "
    "JMSType URI back and the message class from Format.",
    "Text bodies: a null text is written as an empty body and reads back as '' (coerced). Object bodies: a null "
    "object is an empty body; the class name is not carried (dropped).",
    "Properties: usr holds names that are Java identifiers and XML names (ASCII letters, digits, '_') not "
    "starting 'JMS' (§5.3); char values go as String (coerced: dt=char is not an RFH2 property type, §5.3).",
    "JMS_IBM_MsgType/Feedback/PutApplType <-> MsgType/Feedback/PutApplType (§6.2); on receive the property is set "
    "only when the MQMD value differs from what JMS -> MQ writes without it (MsgType: REQUEST with a reply-to queue, "
    "else DATAGRAM; Feedback 0; PutApplType 0). Report, AccountingToken, ApplIdentityData, ApplOriginData, Offset, "
    "OriginalLength and the segmentation flags have no JMS field (dropped when not default).",
    "MQMD character fields (UserIdentifier, PutApplName, ReplyToQ, ReplyToQMgr) are single-byte: other "
    "characters become '?' (coerced), longer values are cut (truncated).",
)


# --------------------------------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class JmsToMqOptions:
    """How the JMS side writes: §6.1 JMS uses Encoding 273 and CCSID 1208 (R1)."""

    encoding: int = C.MQENC_NORMAL            # MQMD.Encoding and RFH2.Encoding (the body's numbers)
    body_ccsid: int = C.CCSID_UTF8            # RFH2.CodedCharSetId: Text/Map/Stream bodies are encoded in it
    priority_as_q_def: bool = False           # JMSPriority 4 (the JMS default) -> MQPRI_PRIORITY_AS_Q_DEF
    with_rfh2: bool = True                    # False: WMQ_TARGET_CLIENT=MQ, the MQMD alone (§6.1)


@dataclass(frozen=True, slots=True)
class MqToJmsOptions:
    default_ccsid: int = C.CCSID_UTF8         # body text CCSID when the message says MQCCSI_Q_MGR (0)


# --------------------------------------------------------------------------------------------------
# Body table (mq-wire-facts.md §5.4 Msd values, §6.1 Format per JMS type, S19)
# --------------------------------------------------------------------------------------------------
BODY_TABLE: dict[BodyType, tuple[str, str]] = {
    # body type:        (mcd Msd,      RFH2 Format of the body)
    BodyType.MESSAGE: ("jms_none", C.MQFMT_NONE),
    BodyType.TEXT: ("jms_text", C.MQFMT_STRING),
    BodyType.BYTES: ("jms_bytes", C.MQFMT_NONE),
    BodyType.MAP: ("jms_map", C.MQFMT_STRING),
    BodyType.STREAM: ("jms_stream", C.MQFMT_STRING),
    BodyType.OBJECT: ("jms_object", C.MQFMT_NONE),
}
#: Msd (lower case) -> body type; "jms_byte" is the WMB V6.0 spelling, read for tolerance (mappings.jms.domain).
MSD_TO_BODY: dict[str, BodyType] = {msd: t for t, (msd, _f) in BODY_TABLE.items()} | {"jms_byte": BodyType.BYTES}


# --------------------------------------------------------------------------------------------------
# Working state of one conversion
# --------------------------------------------------------------------------------------------------
@dataclass(slots=True)
class _ToMq:
    """What JMS -> MQ builds: MQMD keyword arguments and folder elements, plus what it has used."""

    message: JmsMessage
    now_ms: int
    options: JmsToMqOptions
    report: ConversionReport
    md: dict[str, Any] = field(default_factory=dict)
    mcd: dict[str, str] = field(default_factory=dict)
    jms: dict[str, str] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)        # property names a rule consumed

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
class _ToJms:
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

    def folder_value(self, folder: str, name: str) -> tuple[bool, str | None]:
        values = {JMS: self.jms, MCD: self.mcd, MQPS: self.mqps}[folder]
        if name not in values:
            return False, None
        self.used.add(f"{folder}/{name}")
        return True, values[name]

    def folder_int(self, name: str, low: int, high: int) -> int | None:
        """An integer element of the jms folder (IBM writes them without dt, §5.3); None when absent."""
        present, text = self.folder_value(JMS, name)
        if not present:
            return None
        value = (text or "").strip(_XML_WS)
        if not re.fullmatch(r"[+-]?[0-9]+", value, re.ASCII) or not low <= int(value) <= high:
            raise MappingError(f"{text!r} is not an integer in {low}..{high}", structure=RFH2_JMS, field=name)
        return int(value)


@dataclass(frozen=True, slots=True)
class Rule:
    """One row group of the seed tables: the JMS field, the MQ fields, and both directions."""

    jms_field: str
    mqmd_fields: tuple[str, ...]
    rfh2_fields: tuple[str, ...]
    source: str                                        # the seed rows / §6 lines it implements
    to_mq: Callable[[_ToMq], None]
    to_jms: Callable[[_ToJms], None]


# --------------------------------------------------------------------------------------------------
# Helpers shared by the rules
# --------------------------------------------------------------------------------------------------
_HEX48 = re.compile(r"ID:[0-9A-Fa-f]{48}", re.ASCII)


def id_to_bytes(text: str) -> bytes | None:
    """The 24 bytes of an ``ID:`` + 48 hex digits identifier (either case), else None (§6.2)."""
    return bytes.fromhex(text[3:]) if _HEX48.fullmatch(text) else None


def bytes_to_id(raw: bytes) -> str:
    """``ID:`` + 48 lower-case hex digits, as IBM MQ classes for JMS write it (§6.2 JMSMessageID)."""
    return "ID:" + raw.hex()


def _padded24(text: str) -> tuple[bytes, bool]:
    """UTF-8 bytes cut or NUL-padded to 24 (§6.2 JMSCorrelationID: padding inferred); (bytes, cut)."""
    raw = text.encode("utf-8", "surrogatepass")
    return raw[:24].ljust(24, b"\x00"), len(raw) > 24


def mqchar_form(value: str, length: int) -> str:
    """What an MQCHAR field written by :func:`_mqchar` reads back as (blank-trimmed, §6.3)."""
    text = value.encode("latin-1", "replace").decode("latin-1")[:length]
    return text.split("\x00", 1)[0].strip(" ")


def _mqchar(ctx: _ToMq, value: str, mqmd_field: str, length: int, name: str) -> str:
    """A value for a single-byte MQCHAR field: '?' for other characters, cut to ``length`` bytes, cut at a
    NUL; a value the MQMD cannot give back as it is (padding blanks are trimmed, §6.3) is reported."""
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


def _folder_values(folder: RfhFolder | None, where: str, report: ConversionReport) -> dict[str, str | None]:
    """Simple elements of a folder by name (the first of duplicates wins, the rest are reported)."""
    out: dict[str, str | None] = {}
    if folder is None:
        return out
    for el in folder.elements:
        if el.is_group:
            report.dropped(f"{where}/{el.name}", "a group has no JMS meaning here")
        elif el.name in out:
            report.dropped(f"{where}/{el.name}", "duplicate element: the first one is used")
        else:
            out[el.name] = el.value
    return out


# --------------------------------------------------------------------------------------------------
# The rules, one per field pair. Each cites its seed rows and §6 lines.
# --------------------------------------------------------------------------------------------------
# JMSMessageID <-> MsgId. Seed JMS->MQMD "JMSMessageID | MsgId", MQMD->JMS "MsgId | JMSMessageID"; §6.2.
def _message_id_to_mq(ctx: _ToMq) -> None:
    mid = ctx.message.headers.message_id
    if mid is None:
        return
    raw = id_to_bytes(mid)
    if raw is None:
        ctx.report.dropped("JMSMessageID", "not 'ID:' + 48 hex digits: MsgId left MQMI_NONE (MQ assigns one)")
    elif raw == C.MQMI_NONE:
        ctx.report.dropped("JMSMessageID", "all zero is MQMI_NONE: MQ assigns a MsgId")
    else:
        ctx.md["msg_id"] = raw
        if mid != bytes_to_id(raw):
            ctx.report.coerced("JMSMessageID", "hex digits read back in lower case")


def _message_id_to_jms(ctx: _ToJms) -> None:
    if ctx.md.msg_id != C.MQMI_NONE:
        ctx.headers["message_id"] = bytes_to_id(ctx.md.msg_id)


# JMSCorrelationID <-> CorrelId + jms/Cid. Seed JMS->MQMD "JMSCorrelationID | CorrelId", JMS->jms folder
# "JMSCorrelationID | Cid", MQMD->JMS "CorrelId | JMSCorrelationID", jms folder->JMS "Cid | JMSCorrelationID";
# §6.2 (the ID: form, other strings padded/cut), §6.3 (Cid wins; null when CorrelId is all zero).
def _correl_bytes(cid: str) -> tuple[bytes, bool]:
    raw = id_to_bytes(cid)
    return (raw, False) if raw is not None else _padded24(cid)


def _correlation_id_to_mq(ctx: _ToMq) -> None:
    cid = ctx.message.headers.correlation_id
    if cid is None:
        return
    if isinstance(cid, bytes):
        ctx.md["correl_id"] = cid[:24].ljust(24, b"\x00")
        if len(cid) > 24:
            ctx.report.truncated("JMSCorrelationID", "MQMD.CorrelId holds 24 bytes")
        ctx.report.coerced("JMSCorrelationID", "the bytes form goes to CorrelId and reads back as the 'ID:' string")
        return
    ctx.jms["Cid"] = cid
    ctx.md["correl_id"], cut = _correl_bytes(cid)
    if cut:
        ctx.report.truncated("MQMD.CorrelId", "first 24 bytes of JMSCorrelationID (jms/Cid keeps it whole)")


def _correlation_id_to_jms(ctx: _ToJms) -> None:
    present, cid = ctx.folder_value(JMS, "Cid")
    correl = ctx.md.correl_id
    if present:
        ctx.headers["correlation_id"] = cid
        if correl != C.MQCI_NONE and (cid is None or _correl_bytes(cid)[0] != correl):
            ctx.report.dropped("MQMD.CorrelId", "differs from jms/Cid, which wins (§6.3)")
    elif correl != C.MQCI_NONE:
        ctx.headers["correlation_id"] = bytes_to_id(correl)


# JMSPriority <-> Priority + jms/Pri. Seed JMS->MQMD "JMSPriority | Priority", JMS->jms folder "JMSPriority |
# Pri", MQMD->JMS "Priority | JMSPriority", jms folder->JMS "Pri | JMSPriority"; §6.2 (Pri only when not 4),
# §6.3 (JMSPriority from MQMD.Priority). See DECISIONS for the order of the two sources.
def _priority_to_mq(ctx: _ToMq) -> None:
    p = ctx.message.headers.priority
    as_q_def = ctx.options.priority_as_q_def and p == 4
    ctx.md["priority"] = C.MQPRI_PRIORITY_AS_Q_DEF if as_q_def else p
    if p != 4:
        ctx.jms["Pri"] = str(p)


def _priority_to_jms(ctx: _ToJms) -> None:
    pri = ctx.folder_int("Pri", 0, 9)
    md_pri = ctx.md.priority
    if 0 <= md_pri <= 9:
        ctx.headers["priority"] = md_pri
        if pri is not None and pri != md_pri:
            ctx.report.dropped("jms/Pri", f"MQMD.Priority {md_pri} wins over jms/Pri {pri} (§6.3)")
    elif pri is not None:
        ctx.headers["priority"] = pri
    elif md_pri > 9:
        ctx.headers["priority"] = 9
        ctx.report.coerced("MQMD.Priority", f"{md_pri} is above the JMS range: 9")
    else:
        ctx.headers["priority"] = 4
        ctx.report.defaulted("JMSPriority", f"MQMD.Priority {md_pri} is not a priority: 4, the JMS default")


# JMSDeliveryMode <-> Persistence + jms/Dlv. Seed JMS->MQMD "JMSDeliveryMode | Persistence", JMS->jms folder
# "JMSDeliveryMode | Dlv", MQMD->JMS "Persistence | JMSDeliveryMode", jms folder->JMS "Dlv | JMSDeliveryMode";
# §6.2 (Dlv holds the JMS constant 1/2, Persistence MQPER_* 0/1), §6.3 (Dlv wins).
PERSISTENCE_FOR: dict[DeliveryMode, int] = {
    DeliveryMode.PERSISTENT: C.MQPER_PERSISTENT,
    DeliveryMode.NON_PERSISTENT: C.MQPER_NOT_PERSISTENT,
}
DELIVERY_MODE_FOR: dict[int, DeliveryMode] = {v: k for k, v in PERSISTENCE_FOR.items()}


def _delivery_mode_to_mq(ctx: _ToMq) -> None:
    mode = ctx.message.headers.delivery_mode
    ctx.md["persistence"] = PERSISTENCE_FOR[mode]
    ctx.jms["Dlv"] = str(int(mode))


def _delivery_mode_to_jms(ctx: _ToJms) -> None:
    dlv = ctx.folder_int("Dlv", 1, 2)
    persistence = ctx.md.persistence
    if dlv is not None:
        ctx.headers["delivery_mode"] = DeliveryMode(dlv)
        if persistence in DELIVERY_MODE_FOR and DELIVERY_MODE_FOR[persistence] != dlv:
            ctx.report.dropped("MQMD.Persistence", f"{persistence} differs from jms/Dlv {dlv}, which wins (§6.3)")
    elif persistence in DELIVERY_MODE_FOR:
        ctx.headers["delivery_mode"] = DELIVERY_MODE_FOR[persistence]
    else:
        ctx.headers["delivery_mode"] = DeliveryMode.PERSISTENT
        ctx.report.defaulted("JMSDeliveryMode", f"MQMD.Persistence {persistence} is unresolved: PERSISTENT, "
                             "the JMS default")


# JMSExpiration <-> Expiry + jms/Exp. Seed JMS->jms folder "JMSExpiration | Exp", MQMD->JMS "Expiry |
# JMSExpiration"; §6.2 (Expiry = TTL/100 in tenths, -1 unlimited, -1 with Exp for a TTL beyond an MQLONG),
# §6.3 (Exp). See DECISIONS.
def _expiration_to_mq(ctx: _ToMq) -> None:
    exp = ctx.message.headers.expiration
    if exp == 0:
        ctx.md["expiry"] = C.MQEI_UNLIMITED
        return
    ctx.jms["Exp"] = str(exp)
    ttl = exp - ctx.now_ms
    if ttl <= 0:
        ctx.md["expiry"] = 1
        ctx.report.coerced("MQMD.Expiry", f"JMSExpiration {exp} is not after now ({ctx.now_ms}): Expiry 1")
        return
    tenths = -(-ttl // 100)
    if tenths > _MQLONG_MAX:
        ctx.md["expiry"] = C.MQEI_UNLIMITED
        ctx.report.coerced("MQMD.Expiry", "time to live beyond an MQLONG of tenths: unlimited (jms/Exp keeps it)")
    else:
        ctx.md["expiry"] = tenths


def _expiration_to_jms(ctx: _ToJms) -> None:
    exp = ctx.folder_int("Exp", _LONG_MIN, _LONG_MAX)
    expiry = ctx.md.expiry
    if exp is not None:
        ctx.headers["expiration"] = exp
    elif expiry > 0:
        ctx.headers["expiration"] = ctx.now_ms + expiry * 100
    elif expiry != C.MQEI_UNLIMITED:
        ctx.report.coerced("MQMD.Expiry", f"{expiry} is not a time to live: JMSExpiration 0 (never)")


# JMSTimestamp <-> PutDate/PutTime + jms/Tms. Seed JMS->MQMD "JMSTimeStamp | PutDate, PutTime", JMS->jms folder
# "JMSTimestamp | Tms", MQMD->JMS "PutDate, PutTime | JMSTimeStamp"; §2 (YYYYMMDD, HHMMSSTH, GMT), §6.3 (Tms
# wins, otherwise PutDate/PutTime at hundredths precision: 20231114/22132012 -> 1700000000120).
_EPOCH = _dt.date(1970, 1, 1)
_DAY_MS = 86_400_000
_DATE_RE = re.compile(r"[0-9]{8}", re.ASCII)


def put_date_time(ms: int) -> tuple[str, str] | None:
    """(PutDate, PutTime) in GMT for epoch milliseconds, hundredths truncated; None outside years 1..9999."""
    days, rem = divmod(ms, _DAY_MS)
    try:
        date = _EPOCH + _dt.timedelta(days=days)
    except OverflowError:
        return None
    secs, milli = divmod(rem, 1000)
    hh, mm, ss = secs // 3600, secs // 60 % 60, secs % 60
    return f"{date.year:04d}{date.month:02d}{date.day:02d}", f"{hh:02d}{mm:02d}{ss:02d}{milli // 10:02d}"


def put_epoch_ms(put_date: str, put_time: str) -> int:
    """Epoch milliseconds of PutDate/PutTime (GMT); SS may be 60 or 61 (leap seconds, §2)."""
    if not _DATE_RE.fullmatch(put_date):
        raise MappingError(f"{put_date!r} is not YYYYMMDD", structure="MQMD", field="PutDate", offset=304)
    try:
        date = _dt.date(int(put_date[:4]), int(put_date[4:6]), int(put_date[6:]))
    except ValueError as exc:
        raise MappingError(f"{put_date!r}: {exc}", structure="MQMD", field="PutDate", offset=304) from None
    m = re.fullmatch(r"([01][0-9]|2[0-3])([0-5][0-9])([0-5][0-9]|6[01])([0-9]{2})", put_time, re.ASCII)
    if m is None:
        raise MappingError(f"{put_time!r} is not HHMMSSTH", structure="MQMD", field="PutTime", offset=312)
    hh, mm, ss, th = (int(g) for g in m.groups())
    return (date - _EPOCH).days * _DAY_MS + ((hh * 60 + mm) * 60 + ss) * 1000 + th * 10


def _timestamp_to_mq(ctx: _ToMq) -> None:
    ts = ctx.message.headers.timestamp
    if ts == 0:
        return
    ctx.jms["Tms"] = str(ts)
    put = put_date_time(ts)
    if put is None:
        ctx.report.dropped("MQMD.PutDate", f"JMSTimestamp {ts} is outside years 1..9999 (jms/Tms keeps it)")
    else:
        ctx.md["put_date"], ctx.md["put_time"] = put


def _timestamp_to_jms(ctx: _ToJms) -> None:
    tms = ctx.folder_int("Tms", _LONG_MIN, _LONG_MAX)
    date, time = ctx.md.put_date.strip(" "), ctx.md.put_time.strip(" ")
    if tms is not None:
        ctx.headers["timestamp"] = tms
        if date and put_date_time(tms) != (date, time):
            ctx.report.dropped("MQMD.PutDate", f"PutDate/PutTime {date}/{time} differ from jms/Tms, which wins "
                               "(§6.3)")
    elif date or time:
        ctx.headers["timestamp"] = put_epoch_ms(date, time)
        if ctx.headers["timestamp"] == 0:
            ctx.report.coerced("MQMD.PutDate", "the epoch itself: JMSTimestamp 0 means 'not set'")


# JMSReplyTo <-> ReplyToQ/ReplyToQMgr + jms/Rto. Seed JMS->jms folder "JMSReplyTo | Rto", jms folder->JMS "Rto |
# JMSReplyTo"; §6.2 (URI queue://QM/Q or topic://..., queue and QM names to the MQMD), §6.3 (Rto wins, else
# queue://ReplyToQMgr/ReplyToQ when ReplyToQ is not blank). MsgType follows it: §6.2 JMS_IBM_MsgType default,
# MQMT_REQUEST when JMSReplyTo is a queue, otherwise MQMT_DATAGRAM.
def implied_msg_type(reply_to_q: str) -> int:
    return C.MQMT_REQUEST if reply_to_q else C.MQMT_DATAGRAM


def _reply_to_to_mq(ctx: _ToMq) -> None:
    dest = ctx.message.headers.reply_to
    if dest is None:
        return
    ctx.jms["Rto"] = dest.uri
    if dest.kind is DestinationKind.TOPIC:
        ctx.report.dropped("MQMD.ReplyToQ", "a topic reply-to has no MQMD form (jms/Rto keeps it)")
        return
    if dest.options:
        ctx.report.dropped("MQMD.ReplyToQ", "destination options travel in jms/Rto only")
    ctx.md["reply_to_q"] = _mqchar(ctx, dest.name, "ReplyToQ", C.MQ_Q_NAME_LENGTH, "MQMD.ReplyToQ")
    ctx.md["reply_to_q_mgr"] = _mqchar(ctx, dest.queue_manager, "ReplyToQMgr", C.MQ_Q_MGR_NAME_LENGTH,
                                       "MQMD.ReplyToQMgr")


@functools.lru_cache(maxsize=1024)   # destinations repeat from message to message; Destination is immutable
def _parse_uri(text: str | None, name: str) -> Destination:
    try:
        return Destination.parse(text or "")
    except MappingError as exc:
        raise MappingError(exc.reason, structure=RFH2_JMS, field=name) from None


def _reply_to_to_jms(ctx: _ToJms) -> None:
    present, rto = ctx.folder_value(JMS, "Rto")
    q, qm = ctx.md.reply_to_q.strip(" "), ctx.md.reply_to_q_mgr.strip(" ")   # blanks only (§2)
    if present:
        dest = _parse_uri(rto, "Rto")
        ctx.headers["reply_to"] = dest
        if q and (dest.kind is DestinationKind.TOPIC or mqchar_form(dest.name, 48) != q
                  or dest.queue_manager and mqchar_form(dest.queue_manager, 48) != qm):
            ctx.report.dropped("MQMD.ReplyToQ", f"{qm}/{q} differs from jms/Rto, which wins (§6.3)")
    elif q:
        if "/" in qm or "?" in qm:   # legal in an MQ name, but queue://QM/Q cannot carry it
            ctx.report.dropped("MQMD.ReplyToQMgr", f"{qm!r} cannot be written in a queue:// URI: queue:///{q}")
            qm = ""
        ctx.headers["reply_to"] = Destination.queue(q, qm)


# JMS_IBM_MsgType, JMS_IBM_Feedback, JMS_IBM_PutApplType <-> MsgType, Feedback, PutApplType (§6.2 rows
# "JMS_IBM_MsgType | MsgType" with its default, "JMS_IBM_PutApplType / ... / Feedback | same-named MQMD fields").
# A property is written on receive only when the MQMD value is not the one JMS -> MQ would write without it.
IBM_MQMD_PROPERTIES: tuple[tuple[str, str], ...] = (
    ("JMS_IBM_MsgType", "msg_type"), ("JMS_IBM_Feedback", "feedback"), ("JMS_IBM_PutApplType", "put_appl_type"))


def _ibm_default(attr: str, reply_to_q: str) -> int:
    if attr == "msg_type":
        return implied_msg_type(reply_to_q.strip(" "))
    return int(getattr(MQMD_DEFAULT, attr))


def _ibm_properties_to_mq(ctx: _ToMq) -> None:
    for prop, attr in IBM_MQMD_PROPERTIES:
        default = _ibm_default(attr, ctx.md.get("reply_to_q", ""))
        value = ctx.prop(prop, JavaType.INT)
        ctx.md[attr] = default if value is None else value
        if value == default:
            ctx.report.dropped(prop, f"{value} is what MQMD.{attr} holds without it: reads back as absent")


def _ibm_properties_to_jms(ctx: _ToJms) -> None:
    for prop, attr in IBM_MQMD_PROPERTIES:
        value = getattr(ctx.md, attr)
        if value != _ibm_default(attr, ctx.md.reply_to_q):
            ctx.props.append((prop, JavaValue(JavaType.INT, value)))


# JMSDestination <-> jms/Dst. Seed JMS->jms folder "JMSDestination | Dst", jms folder->JMS "Dst |
# JMSDestination"; §6.3 (else mqps/Top as topic://<Top>; Dst wins).
def _destination_to_mq(ctx: _ToMq) -> None:
    dest = ctx.message.headers.destination
    if dest is not None:
        ctx.jms["Dst"] = dest.uri


def _destination_to_jms(ctx: _ToJms) -> None:
    present, dst = ctx.folder_value(JMS, "Dst")
    if present:
        ctx.headers["destination"] = _parse_uri(dst, "Dst")
        return
    has_top, top = ctx.folder_value(MQPS, "Top")
    if has_top and top:
        ctx.headers["destination"] = Destination.topic(top)


# JMSRedelivered / JMSXDeliveryCount <-> BackoutCount. Seed JMS->MQMD "JMSXDeliveryCount | BackoutCount - 1",
# MQMD->JMS "BackoutCount = 0 | JMSRedelivered = false", "BackoutCount > 0 | JMSRedelivered = true"; §6.3
# (JMSXDeliveryCount = BackoutCount + 1).
def _delivery_count_to_mq(ctx: _ToMq) -> None:
    count = ctx.prop("JMSXDeliveryCount", JavaType.INT)
    redelivered = ctx.message.headers.redelivered
    if count is None:
        backout = 1 if redelivered else 0
        ctx.report.defaulted("JMSXDeliveryCount", f"absent: BackoutCount {backout} from JMSRedelivered, "
                             f"read back as JMSXDeliveryCount {backout + 1}")
    elif count < 1:
        raise MappingError(f"{count} is not a delivery count (1 or more)", structure="JMS property",
                           field="JMSXDeliveryCount")
    else:
        backout = count - 1
    ctx.md["backout_count"] = backout
    if (backout > 0) != redelivered:
        ctx.report.coerced("JMSRedelivered", f"reads back as {backout > 0} (BackoutCount {backout})")


def _delivery_count_to_jms(ctx: _ToJms) -> None:
    backout = ctx.md.backout_count
    if backout < 0:
        ctx.report.coerced("MQMD.BackoutCount", f"{backout} is negative: 0")
        backout = 0
    ctx.headers["redelivered"] = backout > 0
    ctx.props.append(("JMSXDeliveryCount", JavaValue(JavaType.INT, min(backout + 1, _MQLONG_MAX))))


# JMSXUserID <-> UserIdentifier, JMSXAppID <-> PutApplName. Seed JMS->MQMD "JMSUser | UserIdentifier",
# "JMSQApplid | PutApplName", MQMD->JMS "UserIdentifier | JMSUser", "PutApplName | JMSApplid"; §6.2, §6.3
# (trimmed).
def _mqchar_property_rule(prop: str, attr: str, mqmd_field: str, length: int) -> tuple[
        Callable[[_ToMq], None], Callable[[_ToJms], None]]:
    def to_mq(ctx: _ToMq) -> None:
        value = ctx.prop(prop, JavaType.STRING)
        if value is not None:
            if value.strip(" ") == "":
                ctx.report.dropped(prop, f"blank: MQMD.{mqmd_field} blank reads back as no {prop}")
            ctx.md[attr] = _mqchar(ctx, value, mqmd_field, length, prop)

    def to_jms(ctx: _ToJms) -> None:
        value = getattr(ctx.md, attr).strip(" ")
        if value:
            ctx.props.append((prop, JavaValue(JavaType.STRING, value)))

    return to_mq, to_jms


_user_id_to_mq, _user_id_to_jms = _mqchar_property_rule("JMSXUserID", "user_identifier", "UserIdentifier",
                                                        C.MQ_USER_ID_LENGTH)
_app_id_to_mq, _app_id_to_jms = _mqchar_property_rule("JMSXAppID", "put_appl_name", "PutApplName",
                                                      C.MQ_PUT_APPL_NAME_LENGTH)


# JMSXGroupID/JMSXGroupSeq (+ JMS_IBM_Last_Msg_In_Group) <-> GroupId/MsgSeqNumber/MsgFlags + jms/Gid, jms/Seq.
# Seed MQMD->JMS "GroupId | JMSGroupid", "MsgSeqNumber | JMSGroupseq"; §6.2 (ID: -> binary, else UTF-8 padded
# or cut to 24; MQMF_MSG_IN_GROUP; JMS_IBM_Last_Msg_In_Group -> MQMF_LAST_MSG_IN_GROUP), §6.3 (Gid/Seq win; the
# MQMD fields count only with MSG_IN_GROUP or LAST_MSG_IN_GROUP).
_GROUP_FLAGS = C.MQMF_MSG_IN_GROUP | C.MQMF_LAST_MSG_IN_GROUP
LAST_IN_GROUP = "JMS_IBM_Last_Msg_In_Group"


def _group_to_mq(ctx: _ToMq) -> None:
    gid = ctx.prop("JMSXGroupID", JavaType.STRING)
    seq = ctx.prop("JMSXGroupSeq", JavaType.INT)
    last = ctx.prop(LAST_IN_GROUP, JavaType.BOOLEAN)
    flags = 0
    if gid is not None:
        raw = id_to_bytes(gid)
        if raw is not None and raw != C.MQGI_NONE:
            ctx.md["group_id"] = raw
            if gid != bytes_to_id(raw):
                ctx.report.coerced("JMSXGroupID", "hex digits read back in lower case")
        else:
            ctx.jms["Gid"] = gid
            ctx.md["group_id"], cut = _padded24(gid)
            if cut:
                ctx.report.truncated("MQMD.GroupId", "first 24 bytes of JMSXGroupID (jms/Gid keeps it whole)")
        flags |= C.MQMF_MSG_IN_GROUP
    if seq is not None:
        if seq >= 1:
            ctx.md["msg_seq_number"] = seq
        else:
            ctx.jms["Seq"] = str(seq)
            ctx.report.coerced("MQMD.MsgSeqNumber", f"JMSXGroupSeq {seq} is below 1: 1 (jms/Seq keeps it)")
        flags |= C.MQMF_MSG_IN_GROUP
    elif gid is not None:
        ctx.report.defaulted("JMSXGroupSeq", "absent: MsgSeqNumber 1, read back as JMSXGroupSeq 1")
    if last:
        flags |= C.MQMF_LAST_MSG_IN_GROUP
    elif last is False:
        ctx.report.dropped(LAST_IN_GROUP, "false is the MQ default: reads back as absent")
    if last and gid is None and seq is None:
        ctx.report.defaulted("JMSXGroupSeq", "absent: reads back as 1 (MQMF_LAST_MSG_IN_GROUP)")
    ctx.md["msg_flags"] = flags


def _group_to_jms(ctx: _ToJms) -> None:
    md = ctx.md
    in_group = bool(md.msg_flags & _GROUP_FLAGS)
    has_gid, gid = ctx.folder_value(JMS, "Gid")
    seq = ctx.folder_int("Seq", -(2**31), _MQLONG_MAX)
    if has_gid:
        if gid is not None:
            ctx.props.append(("JMSXGroupID", JavaValue(JavaType.STRING, gid)))
    elif in_group and md.group_id != C.MQGI_NONE:
        ctx.props.append(("JMSXGroupID", JavaValue(JavaType.STRING, bytes_to_id(md.group_id))))
    elif md.group_id != C.MQGI_NONE:
        ctx.report.dropped("MQMD.GroupId", "not in a group (no MQMF_MSG_IN_GROUP): not carried (§6.3)")
    if seq is not None:
        ctx.props.append(("JMSXGroupSeq", JavaValue(JavaType.INT, seq)))
    elif in_group:
        ctx.props.append(("JMSXGroupSeq", JavaValue(JavaType.INT, md.msg_seq_number)))
    elif md.msg_seq_number != 1:
        ctx.report.dropped("MQMD.MsgSeqNumber", "not in a group (no MQMF_MSG_IN_GROUP): not carried (§6.3)")
    if md.msg_flags & C.MQMF_LAST_MSG_IN_GROUP:
        ctx.props.append((LAST_IN_GROUP, JavaValue(JavaType.BOOLEAN, True)))


# JMSType <-> mcd/Type (or mcd Msd/Set/Type/Fmt for an mcd:// URI). §6.2 JMSType row, §6.3 "JMSType comes from
# mcd.Type/Set/Fmt". The body class side of mcd (Msd) is in _body_to_mq / _body_class.
# The type segment may hold '/' ({namespace}/name) but may not end with one: the seed's MRM form with a
# trailing slash ("mcd://MRM/set/type/", mappings.jms.domain) is not canonical here and is kept verbatim.
_MCD_URI = re.compile(r"mcd://([A-Za-z][A-Za-z0-9_]*)(?:/([^/?]*)(?:/((?:[^?]*[^?/])?))?)?(?:\?format=(.*))?",
                      re.DOTALL)


def mcd_uri(domain: str, mset: str | None, mtype: str | None, fmt: str | None) -> str:
    """``mcd://domain[/set[/type]][?format=fmt]`` (the canonical form)."""
    uri = f"mcd://{domain}"
    if mset is not None or mtype is not None:
        uri += "/" + (mset or "")
    if mtype is not None:
        uri += "/" + mtype
    if fmt is not None:
        uri += "?format=" + fmt
    return uri


def parse_mcd_uri(jms_type: str) -> tuple[str, str | None, str | None, str | None] | None:
    """(domain, set, type, format) of a canonical mcd:// JMSType whose domain is not a jms_* one."""
    m = _MCD_URI.fullmatch(jms_type)
    if m is None or m.group(1).lower().startswith("jms_") or m.group(1).lower() in MSD_TO_BODY:
        return None
    parts = m.groups()
    return parts if mcd_uri(*parts) == jms_type else None


def _type_to_mq(ctx: _ToMq) -> None:
    jms_type = ctx.message.headers.type
    if jms_type is None:
        return
    uri = parse_mcd_uri(jms_type)
    if uri is not None and ctx.message.body_type in (BodyType.TEXT, BodyType.BYTES):
        domain, mset, mtype, fmt = uri
        ctx.mcd["Msd"] = domain
        for name, value in (("Set", mset), ("Type", mtype), ("Fmt", fmt)):
            if value is not None:
                ctx.mcd[name] = value
    else:
        ctx.mcd["Type"] = jms_type


def _type_to_jms(ctx: _ToJms) -> None:
    _, msd = ctx.folder_value(MCD, "Msd")
    parts = {name: ctx.folder_value(MCD, name)[1] for name in ("Set", "Type", "Fmt") if name in ctx.mcd}
    if msd and msd.strip(_XML_WS).lower() not in MSD_TO_BODY:
        ctx.headers["type"] = mcd_uri(msd.strip(_XML_WS), parts.get("Set"), parts.get("Type"), parts.get("Fmt"))
        return
    if "Type" in parts:
        ctx.headers["type"] = parts["Type"]
    for name in ("Set", "Fmt"):
        if name in parts:
            ctx.report.dropped(f"mcd/{name}", "only read with a non-JMS Msd (JMSType mcd:// URI)")


RULES: tuple[Rule, ...] = (
    Rule("JMSDestination", (), ("jms/Dst", "mqps/Top"), "seed Dst rows; §6.3",
         _destination_to_mq, _destination_to_jms),
    Rule("JMSDeliveryMode", ("Persistence",), ("jms/Dlv",), "seed Persistence/Dlv rows; §6.2, §6.3",
         _delivery_mode_to_mq, _delivery_mode_to_jms),
    Rule("JMSExpiration", ("Expiry",), ("jms/Exp",), "seed Expiry/Exp rows; §6.2, §6.3",
         _expiration_to_mq, _expiration_to_jms),
    Rule("JMSPriority", ("Priority",), ("jms/Pri",), "seed Priority/Pri rows; §6.2, §6.3",
         _priority_to_mq, _priority_to_jms),
    Rule("JMSTimestamp", ("PutDate", "PutTime"), ("jms/Tms",), "seed PutDate, PutTime/Tms rows; §6.3",
         _timestamp_to_mq, _timestamp_to_jms),
    Rule("JMSMessageID", ("MsgId",), (), "seed MsgId rows; §6.2", _message_id_to_mq, _message_id_to_jms),
    Rule("JMSCorrelationID", ("CorrelId",), ("jms/Cid",), "seed CorrelId/Cid rows; §6.2, §6.3",
         _correlation_id_to_mq, _correlation_id_to_jms),
    Rule("JMSReplyTo", ("ReplyToQ", "ReplyToQMgr"), ("jms/Rto",), "seed Rto rows; §6.2, §6.3",
         _reply_to_to_mq, _reply_to_to_jms),
    Rule("JMS_IBM_MsgType, JMS_IBM_Feedback, JMS_IBM_PutApplType", ("MsgType", "Feedback", "PutApplType"), (),
         "§6.2 JMS_IBM_* rows", _ibm_properties_to_mq, _ibm_properties_to_jms),
    Rule("JMSType", (), ("mcd/Type", "mcd/Set", "mcd/Fmt"), "§6.2 JMSType row, §6.3", _type_to_mq, _type_to_jms),
    Rule("JMSRedelivered, JMSXDeliveryCount", ("BackoutCount",), (), "seed BackoutCount rows; §6.3",
         _delivery_count_to_mq, _delivery_count_to_jms),
    Rule("JMSXUserID", ("UserIdentifier",), (), "seed JMSUser rows; §6.2, §6.3", _user_id_to_mq, _user_id_to_jms),
    Rule("JMSXAppID", ("PutApplName",), (), "seed JMSQApplid/JMSApplid rows; §6.2, §6.3",
         _app_id_to_mq, _app_id_to_jms),
    Rule("JMSXGroupID, JMSXGroupSeq, JMS_IBM_Last_Msg_In_Group", ("GroupId", "MsgSeqNumber", "MsgFlags"),
         ("jms/Gid", "jms/Seq"), "seed GroupId/MsgSeqNumber rows; §6.2, §6.3", _group_to_mq, _group_to_jms),
)
#: (JMS field, MQMD fields, RFH2 fields) written by JMS -> MQ, and read by MQ -> JMS, in rule order.
JMS_TO_MQ: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = tuple(
    (r.jms_field, r.mqmd_fields, tuple(f for f in r.rfh2_fields if f != "mqps/Top")) for r in RULES)
MQ_TO_JMS: tuple[tuple[tuple[str, ...], tuple[str, ...], str], ...] = tuple(
    (r.mqmd_fields, r.rfh2_fields, r.jms_field) for r in RULES)
#: The constant part of the MQMD JMS -> MQ writes (§6.1: an MQMD v2 whose CCSID describes the RFH2, NameValue
#: data in 1208); the MQMD Format (MQHRF2) is set by the chain. Every other field is MQMD_DEFAULT or a rule's.
MQMD_CONSTANTS: dict[str, Any] = {"version": C.MQMD_VERSION_2, "coded_char_set_id": C.CCSID_UTF8}
#: Properties the rules map to MQMD fields (never written to usr).
MAPPED_PROPERTIES = frozenset({"JMSXDeliveryCount", "JMSXUserID", "JMSXAppID", "JMSXGroupID", "JMSXGroupSeq",
                               LAST_IN_GROUP, *(p for p, _a in IBM_MQMD_PROPERTIES)})
#: jms folder element order as IBM writes it: Dst, Tms, Dlv first (R1), then the §6.2 table order.
JMS_FOLDER_ORDER = ("Dst", "Tms", "Dlv", "Exp", "Pri", "Cid", "Rto", "Gid", "Seq")
_MCD_ORDER = ("Msd", "Set", "Type", "Fmt")
#: MQMD fields no rule maps: a non-default value is reported as dropped by MQ -> JMS.
UNMAPPED_MQMD = ("report", "accounting_token", "appl_identity_data", "appl_origin_data", "offset",
                 "original_length")


# --------------------------------------------------------------------------------------------------
# Properties: the usr folder with dt= typing (§5.3, mappings.jms.typed_xml)
# --------------------------------------------------------------------------------------------------
_USR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)


def _usr_problem(name: str) -> str | None:
    if name.startswith("JMS"):
        return "names starting 'JMS' are reserved: the usr folder cannot carry them (§5.3, S10)"
    if not _USR_NAME.fullmatch(name):
        return "not an ASCII XML name: the usr folder cannot carry it"
    return None


def _properties_to_usr(ctx: _ToMq) -> RfhFolder | None:
    elements: list[RfhElement] = []
    for name, value in ctx.message.properties.pairs:
        if name in ctx.used:
            continue
        problem = _usr_problem(name)
        if problem is not None:
            ctx.report.dropped(name, problem)
            continue
        if value.type is JavaType.CHAR:
            ctx.report.coerced(name, "char -> String: dt=char is not an RFH2 property type (§5.3)")
            value = JavaValue(JavaType.STRING, value.value)
        dt, text = encode_value(value, name=name, structure="usr folder property")
        elements.append(RfhElement(name, text, dt))
    return RfhFolder(USR, tuple(elements)) if elements else None


def _usr_to_properties(folder: RfhFolder, ctx: _ToJms) -> None:
    seen: set[str] = {name for name, _ in ctx.props}
    for el in folder.elements:
        where = f"usr/{el.name}"
        if el.is_group:
            ctx.report.dropped(where, "the usr folder allows no groups (§5.3)")
            continue
        # An ASCII usr name that is not a selector keyword is a Java identifier: skip the Unicode check.
        fast_ok = _USR_NAME.fullmatch(el.name) is not None and el.name.upper() not in RESERVED_WORDS
        problem = None if fast_ok else identifier_problem(el.name)
        if problem is not None:
            ctx.report.dropped(where, f"not a JMS property name: {problem}")
            continue
        if el.name in MAPPED_PROPERTIES:
            ctx.report.dropped(where, "this property comes from the MQMD (§6.3), not from usr")
            continue
        if el.name in seen:
            ctx.report.dropped(where, "duplicate property: the first one is used")
            continue
        seen.add(el.name)
        if el.value is None and DT_TO_TYPE.get((el.dt or "string").strip(_XML_WS).lower()) not in NULLABLE_TYPES:
            ctx.report.dropped(where, f"xsi:nil with dt={el.dt}: a JMS property cannot be a null primitive")
            continue
        value = decode_value(el.dt, el.value, name=el.name, nil=el.value is None, structure="usr folder property")
        ctx.props.append((el.name, value))


# --------------------------------------------------------------------------------------------------
# Bodies (§6.4)
# --------------------------------------------------------------------------------------------------
def _encode_text(text: str, ccsid: int, order: str, what: str) -> bytes:
    codec = codec_for(ccsid, order)
    if codec is None:
        raise MappingError(f"CCSID {ccsid} has no known codec", structure="MQRFH2", field="CodedCharSetId")
    try:
        return text.encode(codec)
    except UnicodeEncodeError as exc:
        raise MappingError(f"character {exc.object[exc.start]!r} at index {exc.start} cannot be encoded in CCSID "
                           f"{ccsid}", structure=what) from None


def _body_to_mq(ctx: _ToMq) -> bytes:
    body = ctx.message.body
    ccsid, order = ctx.options.body_ccsid, C.integer_byte_order(ctx.options.encoding)
    if isinstance(body, TextBody):
        if body.text is None:
            ctx.report.coerced("TextMessage body", "null text is written as an empty body: reads back as ''")
        return _encode_text(body.text or "", ccsid, order, "TextMessage body")
    if isinstance(body, BytesBody):
        return body.data
    if isinstance(body, MapBody):
        return _encode_text(encode_map(body), ccsid, order, "MapMessage body")
    if isinstance(body, StreamBody):
        return _encode_text(encode_stream(body), ccsid, order, "StreamMessage body")
    if isinstance(body, ObjectBody):
        if body.class_name is not None:
            ctx.report.dropped("ObjectMessage class name", "not carried on MQ (the serialized bytes name it)")
        if body.data == b"":
            ctx.report.coerced("ObjectMessage body", "empty bytes read back as a null object")
        return body.data or b""
    return b""


def _body_class(msd: str | None, body_format: str, report: ConversionReport) -> BodyType:
    """The JMS message class: mcd Msd, else Format (MQSTR -> Text, anything else -> Bytes), §6.3, S19."""
    if msd is not None:
        found = MSD_TO_BODY.get(msd.strip(_XML_WS).lower())
        if found is not None:
            return found
    if body_format == C.MQFMT_STRING:
        return BodyType.TEXT
    if body_format != C.MQFMT_NONE:
        report.dropped("Format", f"{body_format!r}: the body is passed as a BytesMessage")
    return BodyType.BYTES


def _decode_text(msg: MqMessage, options: MqToJmsOptions, what: str) -> str:
    ccsid = msg.body_ccsid if msg.body_ccsid > 0 else options.default_ccsid
    codec = codec_for(ccsid, C.integer_byte_order(msg.body_encoding))
    if codec is None:
        raise MappingError(f"CCSID {ccsid} has no known codec", structure=what, field="CodedCharSetId")
    try:
        return msg.body.decode(codec)
    except UnicodeDecodeError as exc:
        raise MappingError(f"not valid {codec} at body byte {exc.start}", structure=what,
                           offset=exc.start) from None


def _body_to_jms(msg: MqMessage, body_type: BodyType, options: MqToJmsOptions, report: ConversionReport) -> Body:
    if body_type is BodyType.TEXT:
        return TextBody(_decode_text(msg, options, "TextMessage body"))
    if body_type is BodyType.MAP:
        return decode_map(_decode_text(msg, options, "MapMessage body"))
    if body_type is BodyType.STREAM:
        return decode_stream(_decode_text(msg, options, "StreamMessage body"))
    if body_type is BodyType.OBJECT:
        return ObjectBody(msg.body or None)
    if body_type is BodyType.MESSAGE:
        if msg.body:
            report.dropped("body", f"{len(msg.body)} bytes after a jms_none Msd")
        return NoBody()
    return BytesBody(msg.body)


# --------------------------------------------------------------------------------------------------
# The two directions
# --------------------------------------------------------------------------------------------------
def _check_now(now_ms: object) -> None:
    if isinstance(now_ms, bool) or not isinstance(now_ms, int):
        raise MappingError(f"now_ms must be epoch milliseconds (int), got {now_ms!r}", structure="clock")


def jms_to_mq(message: JmsMessage, *, now_ms: int,
              options: JmsToMqOptions = JmsToMqOptions()) -> tuple[MqMessage, ConversionReport]:
    """The MQ message IBM MQ classes for JMS would put for ``message`` (§6.1 shape): MQMD v2 with Format
    MQHRF2, then an MQRFH2 with the mcd, jms and (when there are properties) usr folders, then the body.

    ``now_ms`` is the put time (epoch ms): the reference for turning JMSExpiration into MQMD.Expiry.
    """
    _check_now(now_ms)
    if not isinstance(message, JmsMessage):
        raise MappingError("expected a JmsMessage", structure="JMS message")
    report = ConversionReport()
    ctx = _ToMq(message, now_ms, options, report)
    msd, body_format = BODY_TABLE[message.body_type]
    ctx.mcd["Msd"] = msd
    for rule in RULES:
        rule.to_mq(ctx)
    usr = _properties_to_usr(ctx)
    body = _body_to_mq(ctx)
    folders = [RfhFolder(MCD, tuple(RfhElement(n, ctx.mcd[n]) for n in _MCD_ORDER if n in ctx.mcd)),
               RfhFolder(JMS, tuple(RfhElement(n, ctx.jms[n]) for n in JMS_FOLDER_ORDER if n in ctx.jms))]
    if usr is not None:
        folders.append(usr)
    if not options.with_rfh2:
        return _without_rfh2(ctx, body, body_format), report
    md = Mqmd(encoding=options.encoding, **MQMD_CONSTANTS, **ctx.md)
    rfh = Rfh2(encoding=options.encoding, coded_char_set_id=options.body_ccsid, format=body_format,
               name_value_ccsid=C.CCSID_UTF8, folders=tuple(folders))
    return build_message(md, (rfh,), body, body_format=body_format), report


_HEADER_NAMES = {"destination": "JMSDestination", "delivery_mode": "JMSDeliveryMode", "expiration": "JMSExpiration",
                 "priority": "JMSPriority", "timestamp": "JMSTimestamp", "message_id": "JMSMessageID",
                 "correlation_id": "JMSCorrelationID", "reply_to": "JMSReplyTo", "type": "JMSType",
                 "redelivered": "JMSRedelivered"}


def _without_rfh2(ctx: _ToMq, body: bytes, body_format: str) -> MqMessage:
    """WMQ_TARGET_CLIENT=MQ (§6.1): the MQMD alone, describing the body. What only the RFH2 could carry is
    found by reading the result back with :func:`mq_to_jms` (the inverse is the one place that knows) and
    reported field by field."""
    md = Mqmd(encoding=ctx.options.encoding, version=C.MQMD_VERSION_2, coded_char_set_id=ctx.options.body_ccsid,
              format=body_format, **ctx.md)
    msg = MqMessage(md, (), body)
    back, _ = mq_to_jms(msg, now_ms=ctx.now_ms)
    original, report, why = ctx.message, ctx.report, "no MQMD field carries it without an RFH2"
    for attr, name in _HEADER_NAMES.items():
        got = getattr(back.headers, attr)
        if getattr(original.headers, attr) != got:
            (report.dropped if got is None else report.coerced)(name, f"{why}: reads back as {got!r}")
    for name, value in original.properties.pairs:
        if back.properties.get(name) != value and name not in ctx.used:
            report.dropped(name, why)
    if original.body != back.body:
        report.coerced(f"{original.body_type.java_class} body", f"reads back as a {back.body_type.java_class}")
    return msg


def mq_to_jms(msg: MqMessage, *, now_ms: int,
              options: MqToJmsOptions = MqToJmsOptions()) -> tuple[JmsMessage, ConversionReport]:
    """The JMS message IBM MQ classes for JMS would deliver for ``msg`` (§6.3): RFH2 values win over the
    MQMD; a message without an RFH2 (MQ-native) is a TextMessage for Format MQSTR, else a BytesMessage.

    ``now_ms`` is the receive time (epoch ms): JMSExpiration from MQMD.Expiry when jms/Exp is absent.
    """
    _check_now(now_ms)
    if not isinstance(msg, MqMessage):
        raise MappingError("expected an MqMessage", structure="MQ message")
    report = ConversionReport()
    rfh2s = [h for h in msg.headers if isinstance(h, Rfh2)]
    for h in msg.headers:
        if isinstance(h, Rfh1):
            report.dropped("MQRFH", "an MQRFH version 1 header has no JMS meaning")
    folders: dict[str, RfhFolder] = {}
    for rfh in rfh2s:
        for f in rfh.folders:
            if f.name in folders:
                report.dropped(f"{f.name} folder", "a second folder of this name: the first one is used")
            else:
                folders[f.name] = f
    ctx = _ToJms(msg.md, now_ms, report, _folder_values(folders.get(JMS), JMS, report),
                 _folder_values(folders.get(MCD), MCD, report), _folder_values(folders.get(MQPS), MQPS, report))
    for rule in RULES:
        rule.to_jms(ctx)
    if USR in folders:
        _usr_to_properties(folders[USR], ctx)
    _, msd = ctx.folder_value(MCD, "Msd")
    body_type = _body_class(msd, msg.body_format, report)
    body = _body_to_jms(msg, body_type, options, report)
    _report_unused(msg, ctx, folders)
    try:
        headers = JmsHeaders(**ctx.headers)
        message = JmsMessage(headers, TypedMap(ctx.props, what="property"), body)
    except MappingError as exc:
        raise MappingError(exc.reason, structure=f"JMS message from MQ: {exc.structure}", field=exc.field) from None
    return message, report


def _report_unused(msg: MqMessage, ctx: _ToJms, folders: dict[str, RfhFolder]) -> None:
    report, md = ctx.report, msg.md
    for attr in UNMAPPED_MQMD:
        value = getattr(md, attr)
        if value != getattr(MQMD_DEFAULT, attr):
            shown = value.hex().upper() if isinstance(value, bytes) else value
            report.dropped(f"MQMD.{attr}", f"{shown!r}: no JMS field")
    other_flags = md.msg_flags & ~_GROUP_FLAGS
    if other_flags:
        report.dropped("MQMD.MsgFlags", f"segmentation bits {other_flags:#x}: no JMS field")
    for folder_name, values in ((JMS, ctx.jms), (MCD, ctx.mcd), (MQPS, ctx.mqps)):
        for name in values:
            if f"{folder_name}/{name}" not in ctx.used:
                report.dropped(f"{folder_name}/{name}", "no JMS field")
    for name in folders:
        if name not in (JMS, MCD, MQPS, USR):
            report.dropped(f"{name} folder", "not a JMS folder")


# --------------------------------------------------------------------------------------------------
# Bytes in, bytes out
# --------------------------------------------------------------------------------------------------
def mq_bytes_to_jms(data: bytes, *, now_ms: int,
                    options: MqToJmsOptions = MqToJmsOptions()) -> tuple[JmsMessage, ConversionReport]:
    """Decode a message file (MQMD + headers + body) and convert it (§6.3).

    The usual messages (an MQMD v2 alone or with one RFH2 of simple mcd/jms/usr folders, nothing to
    report) take mappings.conversions.jms_mq_fast, which gives the same result without the MqMessage model; the rest
    are decoded and mapped here."""
    fast = _fast.mq_bytes_to_jms_fast(data, now_ms=now_ms, options=options)
    if fast is not None:
        return fast
    return mq_to_jms(decode_message(data), now_ms=now_ms, options=options)


def jms_to_mq_bytes(message: JmsMessage, *, now_ms: int,
                    options: JmsToMqOptions = JmsToMqOptions()) -> tuple[bytes, ConversionReport]:
    """Convert (§6.2) and encode: MQMD v2 then the RFH2 and body, integers in ``options.encoding`` order.

    The usual messages take mappings.conversions.jms_mq_fast (the same bytes and findings, written without the
    MqMessage model); the rest, and every error, go through :func:`jms_to_mq` and ``encode_message``."""
    fast = _fast.jms_to_mq_bytes_fast(message, now_ms=now_ms, options=options)
    if fast is not None:
        return fast
    msg, report = jms_to_mq(message, now_ms=now_ms, options=options)
    return encode_message(msg), report


# The fast paths import this module's rules and tables, so they are imported once those exist (as a module, so
# that importing mappings.conversions.jms_mq_fast first works too).
from mappings.conversions import jms_mq_fast as _fast  # noqa: E402

__all__ = [
    "BODY_TABLE",
    "DECISIONS",
    "IBM_MQMD_PROPERTIES",
    "JMS_TO_MQ",
    "MQMD_CONSTANTS",
    "MQ_TO_JMS",
    "RULES",
    "JmsToMqOptions",
    "MqToJmsOptions",
    "bytes_to_id",
    "id_to_bytes",
    "jms_to_mq",
    "jms_to_mq_bytes",
    "mq_bytes_to_jms",
    "mq_to_jms",
    "put_date_time",
    "put_epoch_ms",
]
