"""The JMS <-> IBM MQ mapping's tables, options and value forms, shared by the model path (rules, model)
and the bytes paths (encode, decode): the body table, the field orders, the identifier, date and URI forms.

Sources, cited per rule: IBM MQ docs "Mapping JMS fields onto IBM MQ fields" ("IBM shape": the message
shape, "IBM out": JMS -> MQ, "IBM in": MQ -> JMS with the RFH2-wins precedence, "IBM bodies"), "MQRFH2 - Rules
and formatting header 2" ("MQRFH2 docs": the mcd, jms and usr folders) and "MQMD - Message descriptor" ("MQMD
docs"); WebSphere Message Broker docs "JMS message payload and appropriate parser" with its JMSMQTransform /
MQJMSTransform tables ("WMB JMS->MQMD", "WMB JMS->jms folder", "WMB MQMD->JMS", "WMB jms folder->JMS"). The
broker's names there are the IBM JMS property names: JMSQApplid/JMSApplid = JMSXAppID, JMSUser = JMSXUserID,
JMSGroupid/JMSGroupseq = JMSXGroupID/JMSXGroupSeq. docs/jms-mq.md has the table.
"""
from __future__ import annotations

import datetime as _dt
import functools
import re
from dataclasses import dataclass
from typing import Any

from mappings.errors import MappingError
from mappings.jms.model import INTEGER_RANGES, BodyType, DeliveryMode, Destination, JavaType
from mappings.mq import constants as C
from mappings.mq.mqmd import MQMD_DEFAULT

MCD, JMS, USR, MQPS = "mcd", "jms", "usr", "mqps"
RFH2_JMS = "MQRFH2 jms folder"
LONG_MIN, LONG_MAX = INTEGER_RANGES[JavaType.LONG]
MQLONG_MAX = 2**31 - 1
XML_WS = " \t\r\n"

DECISIONS: tuple[str, ...] = (
    "JMSPriority: MQMD.Priority wins (IBM in); jms/Pri (WMB jms folder->JMS row) is used when MQMD.Priority is "
    "not a real priority (MQPRI_PRIORITY_AS_Q_DEF etc.), else 4, the JMS default (defaulted).",
    "JMSExpiration: jms/Exp wins (IBM in); without it, MQMD.Expiry > 0 gives now_ms + Expiry*100 (WMB MQMD->JMS "
    "row 'Expiry -> JMSExpiration'; IBM in alone would give 0). JMS->MQ: Expiry = ceil(TTL/100) with TTL = "
    "JMSExpiration - now_ms; an already expired message gets Expiry 1 (coerced); a TTL too large for an MQLONG "
    "gives Expiry -1 with Exp still written (IBM out).",
    "JMSXDeliveryCount: BackoutCount = JMSXDeliveryCount - 1 (WMB JMS->MQMD); without it BackoutCount is 1 "
    "when JMSRedelivered, else 0; on receive JMSXDeliveryCount = BackoutCount + 1 and JMSRedelivered = "
    "BackoutCount > 0 (WMB MQMD->JMS, IBM in).",
    "JMSCorrelationID: CorrelId holds the 24 bytes of an 'ID:'+48 hex value, else the UTF-8 bytes cut or NUL-padded "
    "to 24; jms/Cid is written only when CorrelId cannot give the value back (not 'ID:' + 48 lower-case hex digits, "
    "or all zero), as IBM MQ classes for JMS write it (IBM out). The bytes form goes to CorrelId only and reads back "
    "as the 'ID:' string (coerced).",
    "JMSXGroupID: 'ID:'+48 hex -> GroupId; any other string -> its UTF-8 bytes cut/padded to 24 in GroupId and "
    "the whole string in jms/Gid. JMSXGroupSeq -> MsgSeqNumber (jms/Seq when < 1). Either sets MQMF_MSG_IN_GROUP;"
    " JMS_IBM_Last_Msg_In_Group true sets MQMF_LAST_MSG_IN_GROUP. For a topic JMSDestination (publish/subscribe, "
    "no MQ group) both go to jms/Gid and jms/Seq only, as IBM MQ classes for JMS write them, and "
    "JMS_IBM_Last_Msg_In_Group is dropped (no MsgFlags).",
    "JMSType: an 'mcd://domain[/[set][/[type][/]]][?format=fmt]' on a Text or Bytes message fills mcd "
    "Msd/Set/Type/Fmt (IBM out), empty parts writing no element; any other JMSType (or one whose JMS_IBM_Format "
    "would change the class) goes verbatim to mcd/Type. A received non-jms_* Msd gives the canonical URI (no "
    "trailing '/') back and the message class from Format.",
    "Text bodies: a null text is written as an empty body and reads back as '' (coerced). Object bodies: a null "
    "object is an empty body; the class name is not carried (dropped).",
    "Properties: usr holds names that are Java identifiers and XML names (ASCII letters, digits, '_') not "
    "starting 'JMS' (MQRFH2 docs); char values go as String (coerced: dt=char is not an RFH2 property type).",
    "JMS_IBM_MsgType/Feedback/PutApplType <-> MsgType/Feedback/PutApplType (IBM out); on receive the property is set "
    "only when the MQMD value differs from what JMS -> MQ writes without it (MsgType: REQUEST with a reply-to queue, "
    "else DATAGRAM; Feedback 0; PutApplType 0); a String of decimal digits is read as the int (JMS property value "
    "conversion, coerced). JMS_IBM_Report_* <-> Report: each holds its MQRO_* value, 0 reads back as absent, "
    "another value is an error. JMS_IBM_Format/Character_Set/Encoding <-> the body's Format/CCSID/Encoding (RFH2, "
    "or MQMD alone), set on receive only when not what JMS -> MQ writes without them; the charset is a Java name, "
    "or the CCSID digits where Java has none. AccountingToken, ApplIdentityData, ApplOriginData, Offset, "
    "OriginalLength and the segmentation flags have no JMS field (dropped when not default).",
    "MQMD character fields (UserIdentifier, PutApplName, ReplyToQ, ReplyToQMgr) are single-byte: other "
    "characters become '?' (coerced), longer values are cut (truncated).",
)


# --------------------------------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class JmsToMqOptions:
    """How the JMS side writes: IBM shape JMS uses Encoding 273 and CCSID 1208."""

    encoding: int = C.MQENC_NORMAL            # MQMD.Encoding and RFH2.Encoding (the body's numbers)
    body_ccsid: int = C.CCSID_UTF8            # RFH2.CodedCharSetId: Text/Map/Stream bodies are encoded in it
    priority_as_q_def: bool = False           # JMSPriority 4 (the JMS default) -> MQPRI_PRIORITY_AS_Q_DEF
    with_rfh2: bool = True                    # False: WMQ_TARGET_CLIENT=MQ, the MQMD alone (IBM shape)


@dataclass(frozen=True, slots=True)
class MqToJmsOptions:
    default_ccsid: int = C.CCSID_UTF8         # body text CCSID when the message says MQCCSI_Q_MGR (0)
    # a usr folder value its dt= cannot hold (<n dt='i1'>300</n>, <b dt='boolean'>2</b>): False refuses the
    # message (a MappingError, the gateway backs it out), True drops that property with a `dropped` finding
    drop_bad_properties: bool = False


# --------------------------------------------------------------------------------------------------
# Body table (MQRFH2 docs Msd values, IBM shape Format per JMS type)
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


def body_type_of(msd: str | None, body_format: str) -> BodyType | None:
    """The JMS message class: mcd Msd, else Format (MQSTR -> Text, blank -> Bytes), IBM in; None for
    another Format (a BytesMessage whose Format JMS_IBM_Format carries)."""
    if msd is not None:
        found = MSD_TO_BODY.get(msd.strip(XML_WS).lower())
        if found is not None:
            return found
    if body_format == C.MQFMT_STRING:
        return BodyType.TEXT
    return BodyType.BYTES if body_format == C.MQFMT_NONE else None

# --------------------------------------------------------------------------------------------------
# Value forms shared by the rules and the bytes paths
# --------------------------------------------------------------------------------------------------
ID_HEX48 = re.compile(r"ID:[0-9A-Fa-f]{48}", re.ASCII)


def id_to_bytes(text: str) -> bytes | None:
    """The 24 bytes of an ``ID:`` + 48 hex digits identifier (either case), else None (IBM out)."""
    return bytes.fromhex(text[3:]) if ID_HEX48.fullmatch(text) else None


def bytes_to_id(raw: bytes) -> str:
    """``ID:`` + 48 lower-case hex digits, as IBM MQ classes for JMS write it (IBM out JMSMessageID)."""
    return "ID:" + raw.hex()


def padded24(text: str) -> tuple[bytes, bool]:
    """UTF-8 bytes cut or NUL-padded to 24 (IBM out JMSCorrelationID: padding inferred); (bytes, cut)."""
    raw = text.encode("utf-8", "surrogatepass")
    return raw[:24].ljust(24, b"\x00"), len(raw) > 24


def mqchar_form(value: str, length: int) -> str:
    """What an MQCHAR field written by :func:`_mqchar` reads back as (blank-trimmed, IBM in)."""
    text = value.encode("latin-1", "replace").decode("latin-1")[:length]
    return text.split("\x00", 1)[0].strip(" ")

def correl_id_alone(cid: str) -> bool:
    """True when MQMD.CorrelId alone gives the JMSCorrelationID back (``ID:`` + 48 lower-case hex digits, not all
    zero): IBM MQ classes for JMS then write no jms/Cid (IBM out JMSCorrelationID row)."""
    return (len(cid) == 51 and ID_HEX48.fullmatch(cid) is not None and cid[3:] == cid[3:].lower()
            and cid != "ID:000000000000000000000000000000000000000000000000")


def correl_bytes(cid: str) -> tuple[bytes, bool]:
    """CorrelId for a JMSCorrelationID string: the ``ID:`` form's 24 bytes, else :func:`padded24`; (bytes, cut)."""
    if ID_HEX48.fullmatch(cid):
        return bytes.fromhex(cid[3:]), False
    raw = cid.encode("utf-8", "surrogatepass")          # padded24, written out: this runs for every message
    return raw[:24].ljust(24, b"\x00"), len(raw) > 24


# JMSDeliveryMode <-> Persistence + jms/Dlv. WMB JMS->MQMD "JMSDeliveryMode | Persistence", JMS->jms folder
# "JMSDeliveryMode | Dlv", MQMD->JMS "Persistence | JMSDeliveryMode", jms folder->JMS "Dlv | JMSDeliveryMode";
# IBM out (Dlv holds the JMS constant 1/2, Persistence MQPER_* 0/1), IBM in (Dlv wins).
PERSISTENCE_FOR: dict[DeliveryMode, int] = {
    DeliveryMode.PERSISTENT: C.MQPER_PERSISTENT,
    DeliveryMode.NON_PERSISTENT: C.MQPER_NOT_PERSISTENT,
}
DELIVERY_MODE_FOR: dict[int, DeliveryMode] = {v: k for k, v in PERSISTENCE_FOR.items()}


# JMSTimestamp <-> PutDate/PutTime + jms/Tms. WMB JMS->MQMD "JMSTimeStamp | PutDate, PutTime", JMS->jms folder
# "JMSTimestamp | Tms", MQMD->JMS "PutDate, PutTime | JMSTimeStamp"; MQMD docs (YYYYMMDD, HHMMSSTH, GMT), IBM in (Tms
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
    """Epoch milliseconds of PutDate/PutTime (GMT); SS may be 60 or 61 (leap seconds, MQMD docs)."""
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


# JMSReplyTo <-> ReplyToQ/ReplyToQMgr + jms/Rto. WMB JMS->jms folder "JMSReplyTo | Rto", jms folder->JMS "Rto |
# JMSReplyTo"; IBM out (URI queue://QM/Q or topic://..., queue and QM names to the MQMD), IBM in (Rto wins, else
# queue://ReplyToQMgr/ReplyToQ when ReplyToQ is not blank). MsgType follows it: IBM out JMS_IBM_MsgType default,
# MQMT_REQUEST when JMSReplyTo is a queue, otherwise MQMT_DATAGRAM.
def implied_msg_type(reply_to_q: str) -> int:
    return C.MQMT_REQUEST if reply_to_q else C.MQMT_DATAGRAM


@functools.lru_cache(maxsize=1024)   # destinations repeat from message to message; Destination is immutable
def parse_uri(text: str | None, name: str) -> Destination:
    try:
        return Destination.parse(text or "")
    except MappingError as exc:
        raise MappingError(exc.reason, structure=RFH2_JMS, field=name) from None


# JMS_IBM_MsgType, JMS_IBM_Feedback, JMS_IBM_PutApplType <-> MsgType, Feedback, PutApplType (IBM out rows
# "JMS_IBM_MsgType | MsgType" with its default, "JMS_IBM_PutApplType / ... / Feedback | same-named MQMD fields").
# A property is written on receive only when the MQMD value is not the one JMS -> MQ would write without it.
IBM_MQMD_PROPERTIES: tuple[tuple[str, str], ...] = (
    ("JMS_IBM_MsgType", "msg_type"), ("JMS_IBM_Feedback", "feedback"), ("JMS_IBM_PutApplType", "put_appl_type"))


def ibm_default(attr: str, reply_to_q: str) -> int:
    if attr == "msg_type":
        return implied_msg_type(reply_to_q.strip(" "))
    return int(getattr(MQMD_DEFAULT, attr))


# JMS_IBM_Report_* <-> MQMD.Report. IBM MQ docs "Mapping JMS provider-specific fields": each property holds the
# MQRO_* value of its report type (MQRO_COA, MQRO_COA_WITH_DATA or MQRO_COA_WITH_FULL_DATA, ...), and the one
# Report field is the sum of them. (property, the Report bits it owns, the values it may hold besides 0).
REPORT_PROPERTIES: tuple[tuple[str, int, frozenset[int]], ...] = (
    ("JMS_IBM_Report_Exception", C.MQRO_EXCEPTION_WITH_FULL_DATA,
     frozenset({C.MQRO_EXCEPTION, C.MQRO_EXCEPTION_WITH_DATA, C.MQRO_EXCEPTION_WITH_FULL_DATA})),
    ("JMS_IBM_Report_Expiration", C.MQRO_EXPIRATION_WITH_FULL_DATA,
     frozenset({C.MQRO_EXPIRATION, C.MQRO_EXPIRATION_WITH_DATA, C.MQRO_EXPIRATION_WITH_FULL_DATA})),
    ("JMS_IBM_Report_COA", C.MQRO_COA_WITH_FULL_DATA,
     frozenset({C.MQRO_COA, C.MQRO_COA_WITH_DATA, C.MQRO_COA_WITH_FULL_DATA})),
    ("JMS_IBM_Report_COD", C.MQRO_COD_WITH_FULL_DATA,
     frozenset({C.MQRO_COD, C.MQRO_COD_WITH_DATA, C.MQRO_COD_WITH_FULL_DATA})),
    ("JMS_IBM_Report_PAN", C.MQRO_PAN, frozenset({C.MQRO_PAN})),
    ("JMS_IBM_Report_NAN", C.MQRO_NAN, frozenset({C.MQRO_NAN})),
    ("JMS_IBM_Report_Pass_Msg_ID", C.MQRO_PASS_MSG_ID, frozenset({C.MQRO_PASS_MSG_ID})),
    ("JMS_IBM_Report_Pass_Correl_ID", C.MQRO_PASS_CORREL_ID, frozenset({C.MQRO_PASS_CORREL_ID})),
    ("JMS_IBM_Report_Discard_Msg", C.MQRO_DISCARD_MSG, frozenset({C.MQRO_DISCARD_MSG})),
)
REPORT_BITS = functools.reduce(lambda a, b: a | b, (mask for _p, mask, _v in REPORT_PROPERTIES))


def report_properties(report: int) -> tuple[list[tuple[str, int]], int]:
    """The JMS_IBM_Report_* properties of an MQMD.Report value, and the bits none of them carries (MQRO_ACTIVITY,
    MQRO_PASS_DISCARD_AND_EXPIRY, undefined bits, or a combination that is not one of a property's values)."""
    found: list[tuple[str, int]] = []
    rest = report & ~REPORT_BITS
    for prop, mask, values in REPORT_PROPERTIES:
        value = report & mask
        if value in values:
            found.append((prop, value))
        else:
            rest |= value
    return found, rest


# JMS_IBM_Format, JMS_IBM_Character_Set, JMS_IBM_Encoding <-> the Format, CodedCharSetId and Encoding that describe
# the body (the RFH2's, or the MQMD's without an RFH2). IBM MQ docs "Mapping JMS provider-specific fields"
# (JMS_IBM_Format -> Format, JMS_IBM_Encoding and JMS_IBM_Character_Set override the destination's encoding and
# CCSID) and "Mapping IBM MQ fields onto JMS fields (incoming messages)" note 3: JMS_IBM_Character_Set is a String,
# the Java character set of the numeric CCSID. Java names for the CCSIDs mappings.mq.ccsid knows, where the
# name gives the CCSID back; any other CCSID is written as its decimal digits, which JMS -> MQ also reads.
FORMAT_PROPERTY, CHARSET_PROPERTY, ENCODING_PROPERTY = "JMS_IBM_Format", "JMS_IBM_Character_Set", "JMS_IBM_Encoding"
JAVA_CHARSETS: dict[int, str] = {
    C.CCSID_UTF8: "UTF-8", C.CCSID_ISO8859_1: "ISO-8859-1", C.CCSID_PC437: "IBM437", 850: "IBM850",
    1252: "windows-1252", 923: "ISO-8859-15", C.CCSID_EBCDIC_US: "IBM037", C.CCSID_EBCDIC_INTL: "IBM500",
    367: "US-ASCII", C.CCSID_UTF16: "UTF-16",
}
#: Java charset names and aliases (lower case) -> CCSID
_CHARSET_CCSIDS: dict[str, int] = {name.lower(): ccsid for ccsid, name in JAVA_CHARSETS.items()} | {
    "utf8": C.CCSID_UTF8, "iso8859_1": C.CCSID_ISO8859_1, "latin1": C.CCSID_ISO8859_1, "cp437": C.CCSID_PC437,
    "cp850": 850, "cp1252": 1252, "iso8859_15": 923, "cp037": C.CCSID_EBCDIC_US, "cp500": C.CCSID_EBCDIC_INTL,
    "ascii": 367}
_CCSID_DIGITS = re.compile(r"-?[0-9]{1,10}", re.ASCII)


def charset_name(ccsid: int) -> str:
    """JMS_IBM_Character_Set for a CCSID: its Java charset name, else the CCSID in decimal."""
    return JAVA_CHARSETS.get(ccsid) or str(ccsid)


def charset_ccsid(text: str) -> int:
    """The CCSID of a JMS_IBM_Character_Set value: a Java charset name (case-insensitive) or decimal digits."""
    if _CCSID_DIGITS.fullmatch(text) and -(2**31) <= int(text) <= MQLONG_MAX:
        return int(text)
    found = _CHARSET_CCSIDS.get(text.lower())
    if found is None:
        raise MappingError(f"{text!r} is neither a Java character set with a known CCSID "
                           f"({', '.join(sorted(set(JAVA_CHARSETS.values())))}) nor a CCSID number",
                           structure="JMS property", field=CHARSET_PROPERTY)
    return found


def body_description(body_type: BodyType, body_format: str, ccsid: int, encoding: int,
                     encoding_default: int) -> list[tuple[str, Any]]:
    """JMS_IBM_Format/Character_Set/Encoding (name, value) of a received body, each only when it is not what
    JMS -> MQ writes without it: the body table's Format for the message class, CCSID 1208, and the encoding of
    the structure before the RFH2 (``encoding_default``; MQENC_NORMAL, 273, for an MQMD alone)."""
    out: list[tuple[str, Any]] = []
    if body_format != BODY_TABLE[body_type][1]:
        out.append((FORMAT_PROPERTY, body_format.rstrip(" ")))
    if ccsid != C.CCSID_UTF8:
        out.append((CHARSET_PROPERTY, charset_name(ccsid)))
    if encoding != encoding_default:
        out.append((ENCODING_PROPERTY, encoding))
    return out


# JMSXGroupID/JMSXGroupSeq (+ JMS_IBM_Last_Msg_In_Group) <-> GroupId/MsgSeqNumber/MsgFlags + jms/Gid, jms/Seq.
# WMB MQMD->JMS "GroupId | JMSGroupid", "MsgSeqNumber | JMSGroupseq"; IBM out (ID: -> binary, else UTF-8 padded
# or cut to 24; MQMF_MSG_IN_GROUP; JMS_IBM_Last_Msg_In_Group -> MQMF_LAST_MSG_IN_GROUP), IBM in (Gid/Seq win; the
# MQMD fields count only with MSG_IN_GROUP or LAST_MSG_IN_GROUP).
GROUP_FLAGS = C.MQMF_MSG_IN_GROUP | C.MQMF_LAST_MSG_IN_GROUP
LAST_IN_GROUP = "JMS_IBM_Last_Msg_In_Group"


# JMSType <-> mcd/Type (or mcd Msd/Set/Type/Fmt for an mcd:// URI). IBM out JMSType row, IBM in "JMSType comes from
# mcd.Type/Set/Fmt". The body class side of mcd (Msd) is in _body_to_mq / _body_class.
# One URI rule for both directions: ``mcd://domain[/[set][/[type][/]]][?format=fmt]``. The type segment may hold '/'
# ({namespace}/name); the WMB docs' MRM form ends the type with '/' ("mcd://MRM/set/type/?format=fmt",
# mappings.jms.domain reads both). An empty segment is no element (no empty <Set/> or <Type/>). MQ -> JMS writes
# the canonical form (mcd_uri: no trailing '/'), which JMS -> MQ splits back into the same elements.
_MCD_URI = re.compile(r"mcd://([A-Za-z][A-Za-z0-9_]*)(?:/([^/?]*)(?:/([^?]*?)/?)?)?(?:\?format=(.*))?", re.DOTALL)


def mcd_uri(domain: str, mset: str | None, mtype: str | None, fmt: str | None) -> str:
    """``mcd://domain[/set[/type]][?format=fmt]`` (the canonical form; empty parts are left out)."""
    uri = f"mcd://{domain}"
    if mset or mtype:
        uri += "/" + (mset or "")
    if mtype:
        uri += "/" + mtype
    if fmt:
        uri += "?format=" + fmt
    return uri


def parse_mcd_uri(jms_type: str) -> tuple[str, str | None, str | None, str | None] | None:
    """(domain, set, type, format) of an mcd:// JMSType whose domain is not a jms_* one, empty parts None."""
    m = _MCD_URI.fullmatch(jms_type)
    if m is None or m.group(1).lower().startswith("jms_") or m.group(1).lower() in MSD_TO_BODY:
        return None
    domain, mset, mtype, fmt = m.groups()
    return domain, mset or None, mtype or None, fmt or None


def mcd_type_elements(jms_type: str, body_type: BodyType, body_format: str | None = None
                      ) -> tuple[dict[str, str], str | None]:
    """The mcd elements a JMSType writes: an mcd:// URI on a Text or Bytes message fills Msd/Set/Type/Fmt (IBM out,
    replacing the body table's Msd), any other JMSType goes verbatim to Type; and the JMSType they read back as
    when that is not ``jms_type`` (a trailing '/', an empty part), else None. The URI stays whole in Type when the
    body's Format (``body_format``, JMS_IBM_Format) is not the body table's: the class would not read back."""
    uri = parse_mcd_uri(jms_type)
    default_format = BODY_TABLE[body_type][1]
    if (uri is None or body_type not in (BodyType.TEXT, BodyType.BYTES)
            or body_format is not None and body_format != default_format):
        return {"Type": jms_type}, None
    back = mcd_uri(*uri)
    elements = {name: value for name, value in zip(MCD_ORDER, uri, strict=True) if value is not None}
    return elements, None if back == jms_type else back


INT_RE = re.compile(r"[+-]?[0-9]+", re.ASCII)


def folder_int(text: str | None, low: int, high: int, name: str) -> int:
    """An integer element of the jms folder (IBM writes them without dt, MQRFH2 docs), blanks allowed around it."""
    value = text if text and text.isdigit() and text.isascii() else (text or "").strip(XML_WS)
    if INT_RE.fullmatch(value) and low <= int(value) <= high:
        return int(value)
    raise MappingError(f"{text!r} is not an integer in {low}..{high}", structure=RFH2_JMS, field=name)


#: The constant part of the MQMD JMS -> MQ writes (IBM shape: an MQMD v2 whose CCSID describes the RFH2, NameValue
#: data in 1208); the MQMD Format (MQHRF2) is set by the chain. Every other field is MQMD_DEFAULT or a rule's.
MQMD_CONSTANTS: dict[str, Any] = {"version": C.MQMD_VERSION_2, "coded_char_set_id": C.CCSID_UTF8}
#: Properties the rules map to MQMD fields (never written to usr).
MAPPED_PROPERTIES = frozenset({"JMSXDeliveryCount", "JMSXUserID", "JMSXAppID", "JMSXGroupID", "JMSXGroupSeq",
                               LAST_IN_GROUP, *(p for p, _a in IBM_MQMD_PROPERTIES),
                               *(p for p, _m, _v in REPORT_PROPERTIES), FORMAT_PROPERTY, CHARSET_PROPERTY,
                               ENCODING_PROPERTY})
#: jms folder element order as IBM writes it: Dst, Tms, Dlv first, then the IBM out table order.
JMS_FOLDER_ORDER = ("Dst", "Tms", "Dlv", "Exp", "Pri", "Cid", "Rto", "Gid", "Seq")
MCD_ORDER = ("Msd", "Set", "Type", "Fmt")
#: MQMD fields no rule maps: a non-default value is reported as dropped by MQ -> JMS.
UNMAPPED_MQMD = ("accounting_token", "appl_identity_data", "appl_origin_data", "offset",
                 "original_length")


# --------------------------------------------------------------------------------------------------
# Properties: the usr folder with dt= typing (MQRFH2 docs, mappings.jms.typed_xml)
# --------------------------------------------------------------------------------------------------
USR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)


def usr_problem(name: str) -> str | None:
    if name.startswith("JMS"):
        return ("names starting 'JMS' are reserved: the usr folder cannot carry them "
                "(IBM MQ: MQRFH2 folder restrictions)")
    if not USR_NAME.fullmatch(name):
        return "not an ASCII XML name: the usr folder cannot carry it"
    return None
