"""Fast paths of :func:`mappings.conversions.jms_mq.jms_to_mq_bytes` and
:func:`mappings.conversions.jms_mq.mq_bytes_to_jms`.

Same specification as mappings.conversions.jms_mq (the seed's JMSMQTransform / MQJMSTransform tables and
mq-wire-facts.md §6; each step below names the rule function of mappings.conversions.jms_mq it mirrors, which cites
its seed rows). The general path builds an MqMessage model (Mqmd, Rfh2, RfhFolder, RfhElement) and then
encodes it, or decodes the bytes into that model with lxml and then maps it; for the messages a JMS
application and IBM MQ classes for JMS normally exchange, these functions go straight between the JMS
model and the bytes:

- JMS -> MQ: one ``struct.pack`` of the whole MQMD v2, folder XML written as text, with what repeats from
  message to message cached: the mcd folder per (body type, JMSType), the escaped ``Dst`` per
  destination, the ``Rto`` element and the ReplyToQ/ReplyToQMgr fields per reply-to destination, the
  UserIdentifier/PutApplName fields per value, the usr element tags per (name, type);
- MQ -> JMS: one ``struct.unpack`` of the MQMD and of the RFH2 fixed part, and the folders read by two
  regular expressions when they hold only simple elements (``<name>text</name>``, an optional ``dt``
  attribute in the usr folder, the five predefined entities), which is how IBM MQ classes for JMS and
  this gateway write them.

Anything else goes to the general path: each function returns None when the message is not one it
handles exactly (a finding it does not produce, an unusual folder, any value the general path rejects),
and the caller then runs the general path, which gives the result or the precise MappingError. The
outputs are identical to the general path's (bytes, JMS message, findings in order): tested with
hypothesis in tests/test_jms_mq_fast.py.
"""
from __future__ import annotations

import re
import struct
from typing import Any

from mappings.conversions.jms_mq import (
    _GROUP_FLAGS,
    BODY_TABLE,
    IBM_MQMD_PROPERTIES,
    MAPPED_PROPERTIES,
    MSD_TO_BODY,
    JmsToMqOptions,
    MqToJmsOptions,
    _parse_uri,
    mcd_uri,
    parse_mcd_uri,
    put_date_time,
    put_epoch_ms,
)
from mappings.errors import MappingError
from mappings.jms.bodies import decode_stream, encode_stream
from mappings.jms.model import (
    RESERVED_WORDS,
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
    trusted_value,
)
from mappings.jms.typed_xml import (
    TYPE_TO_DT,
    decode_value,
    escape_attr,
    float_range_problem,
    format_float,
    parse_float,
)
from mappings.mq import constants as C
from mappings.mq.ccsid import codec_for
from mappings.report import Change, ConversionReport, Finding

__all__ = ["jms_to_mq_bytes_fast", "mq_bytes_to_jms_fast"]


class _Fallback(Exception):
    """Not a message the fast path handles exactly: the caller runs the general path."""


_MAX_CACHE = 4096
_LONG_MAX = 2**63 - 1
_LONG_MIN = -(2**63)
_MQLONG_MAX = 2**31 - 1
_XML_WS = " \t\r\n"
# rfh2.escape_text refuses these (and typed_xml.xml_char_problem the same set): the general path raises.
_BAD_XML_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")
_TEXT_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;"})
_HEX48 = re.compile(r"ID:[0-9a-f]{48}", re.ASCII)     # lower case only: upper case is reported (coerced)
_ANY_HEX48 = re.compile(r"ID:[0-9A-Fa-f]{48}", re.ASCII)  # jms_mq.id_to_bytes
_MQMD_V2 = {o: struct.Struct(o + "4s7i8s2i24s24si48s48s12s32s32si28s8s8s4s24s4i") for o in "<>"}
_RFH2_FIXED = {o: struct.Struct(o + "4s4i8s2i") for o in "<>"}
_LONG = {o: struct.Struct(o + "i") for o in "<>"}
assert _MQMD_V2[">"].size == C.MQMD_LENGTH_2 and _RFH2_FIXED[">"].size == C.MQRFH_STRUC_LENGTH_FIXED_2


def _escape(text: str) -> str:
    """rfh2.escape_text, except that a character XML cannot carry means 'the general path decides'."""
    if _BAD_XML_CHARS.search(text):
        raise _Fallback
    return text.translate(_TEXT_ESCAPES)


def _pad4(data: bytes) -> bytes:
    """NameValueData is padded with blanks to a multiple of 4 (rfh2.encode_folder, §5.2)."""
    return data + b"   "[: -len(data) % 4]


def _mqchar_field(value: str, length: int) -> bytes:
    """The MQCHAR bytes of a value jms_mq._mqchar writes without a finding; otherwise _Fallback."""
    try:
        raw = value.encode("latin-1")
    except UnicodeEncodeError:
        raise _Fallback from None
    if len(raw) > length or b"\x00" in raw or value != value.strip(" "):
        raise _Fallback
    return raw.ljust(length, b" ")


class _Bounded(dict):  # type: ignore[type-arg]
    """A dict cache emptied when it reaches its size bound (the keys repeat in steady traffic)."""

    def put(self, key: Any, value: Any) -> Any:
        if len(self) >= _MAX_CACHE:
            self.clear()
        self[key] = value
        return value


# ==================================================================================================
# JMS -> MQ bytes
# ==================================================================================================
class _Writer:
    """What one JmsToMqOptions fixes: byte order, MQMD constants, body codec."""

    __slots__ = ("order", "encoding", "body_ccsid", "codec", "as_q_def", "md_pack", "rfh_pack", "long_pack")

    def __init__(self, options: JmsToMqOptions) -> None:
        for value in (options.encoding, options.body_ccsid):
            if type(value) is not int or not -(2**31) <= value <= _MQLONG_MAX:
                raise _Fallback            # the general path names the field
        self.order = C.integer_byte_order(options.encoding)
        self.encoding = options.encoding
        self.body_ccsid = options.body_ccsid
        self.codec = codec_for(options.body_ccsid, self.order)
        self.as_q_def = options.priority_as_q_def
        self.md_pack = _MQMD_V2[self.order].pack
        self.rfh_pack = _RFH2_FIXED[self.order].pack
        self.long_pack = _LONG[self.order].pack


_writers: dict[JmsToMqOptions, _Writer] = {}
_mcd_cache: _Bounded = _Bounded()        # (body type, JMSType) -> mcd folder bytes (padded)
_dst_cache: _Bounded = _Bounded()        # Destination -> "<Dst>..</Dst>"
_rto_cache: _Bounded = _Bounded()        # Destination -> ("<Rto>..</Rto>", ReplyToQ bytes, ReplyToQMgr bytes)
_mqchar_cache: _Bounded = _Bounded()     # (value, length) -> MQCHAR bytes
_usr_tags: _Bounded = _Bounded()         # (name, type) -> ("<name dt='..'>", "</name>") or a dropped detail

_PER_BYTE = {
    # DeliveryMode -> (MQMD Persistence, jms/Dlv element): jms_mq._delivery_mode_to_mq
    DeliveryMode.PERSISTENT: (C.MQPER_PERSISTENT, "<Dlv>2</Dlv>"),
    DeliveryMode.NON_PERSISTENT: (C.MQPER_NOT_PERSISTENT, "<Dlv>1</Dlv>"),
}
# The findings of jms_mq._message_id_to_mq and _correlation_id_to_mq, word for word.
_MID_NOT_ID = Finding(Change.DROPPED, "JMSMessageID", "not 'ID:' + 48 hex digits: MsgId left MQMI_NONE (MQ assigns "
                      "one)")
_MID_ZERO = Finding(Change.DROPPED, "JMSMessageID", "all zero is MQMI_NONE: MQ assigns a MsgId")
_MID_UPPER = Finding(Change.COERCED, "JMSMessageID", "hex digits read back in lower case")
_CID_CUT = Finding(Change.TRUNCATED, "MQMD.CorrelId", "first 24 bytes of JMSCorrelationID (jms/Cid keeps it whole)")
_ZERO_HEX48 = "0" * 48
#: jms_mq.IBM_MQMD_PROPERTIES, in rule order
_IBM_FIELDS = dict(IBM_MQMD_PROPERTIES)
_BLANK48 = b" " * 48
_BLANK12 = b" " * 12
_BLANK28 = b" " * 28
_BLANK8 = b" " * 8
_USR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
_USR_DT = {JavaType.BOOLEAN: "boolean", JavaType.BYTES: "bin.hex", JavaType.BYTE: "i1", JavaType.SHORT: "i2",
           JavaType.INT: "i4", JavaType.LONG: "i8", JavaType.FLOAT: "r4", JavaType.DOUBLE: "r8"}
_INTEGER_TYPES = frozenset({JavaType.BYTE, JavaType.SHORT, JavaType.INT, JavaType.LONG})
_day_cache: _Bounded = _Bounded()        # epoch day -> PutDate text


def _mcd_folder(body_type: BodyType, jms_type: str | None) -> bytes:
    """jms_mq: Msd from BODY_TABLE, then _type_to_mq (an mcd:// JMSType on a Text/Bytes message fills
    Msd/Set/Type/Fmt, any other goes to mcd/Type); elements in _MCD_ORDER."""
    key = (body_type, jms_type)
    found = _mcd_cache.get(key)
    if found is not None:
        return found
    mcd = {"Msd": BODY_TABLE[body_type][0]}
    if jms_type is not None:
        uri = parse_mcd_uri(jms_type)
        if uri is not None and body_type in (BodyType.TEXT, BodyType.BYTES):
            mcd["Msd"] = uri[0]
            for name, value in zip(("Set", "Type", "Fmt"), uri[1:], strict=True):
                if value is not None:
                    mcd[name] = value
        else:
            mcd["Type"] = jms_type
    inner = "".join(f"<{n}>{_escape(mcd[n])}</{n}>" for n in ("Msd", "Set", "Type", "Fmt") if n in mcd)
    return _mcd_cache.put(key, _pad4(f"<mcd>{inner}</mcd>".encode()))


def _dst(dest: Destination) -> str:
    found = _dst_cache.get(dest)
    if found is None:
        found = _dst_cache.put(dest, f"<Dst>{_escape(dest.uri)}</Dst>")
    return found


def _rto(dest: Destination) -> tuple[str, bytes, bytes]:
    """jms_mq._reply_to_to_mq for a queue without options whose names fit the MQMD as they are."""
    found = _rto_cache.get(dest)
    if found is None:
        if dest.kind is not DestinationKind.QUEUE or dest.options:
            raise _Fallback                 # reported: a topic or options have no MQMD form
        found = _rto_cache.put(dest, (f"<Rto>{_escape(dest.uri)}</Rto>",
                                      _mqchar_field(dest.name, C.MQ_Q_NAME_LENGTH),
                                      _mqchar_field(dest.queue_manager, C.MQ_Q_MGR_NAME_LENGTH)))
    return found


def _mqchar(value: object, length: int) -> bytes:
    """jms_mq._mqchar_property_rule's to_mq (JMSXUserID, JMSXAppID) for a value without findings."""
    key = (value, length)
    found = _mqchar_cache.get(key)
    if found is None:
        if value.__class__ is not str or value.strip(" ") == "":
            raise _Fallback                 # null, another type (an error) or blank (reported)
        found = _mqchar_cache.put(key, _mqchar_field(value, length))
    return found


def _usr_tag(name: str, jtype: JavaType) -> tuple[str, str] | str:
    """Open and close tags of a usr element (rfh2.element_xml), or why the name is dropped (jms_mq._usr_problem)."""
    key = (name, jtype)
    found = _usr_tags.get(key)
    if found is None:
        if name.startswith("JMS"):
            found = "names starting 'JMS' are reserved: the usr folder cannot carry them (§5.3, S10)"
        elif not _USR_NAME.fullmatch(name):
            found = "not an ASCII XML name: the usr folder cannot carry it"
        else:
            dt = _USR_DT.get(jtype)
            found = (f"<{name}>" if dt is None else f"<{name} dt='{dt}'>", f"</{name}>")
        _usr_tags.put(key, found)
    return found


def _put_date(day: int) -> str:
    found = _day_cache.get(day)
    if found is None:
        put = put_date_time(day * 86_400_000)
        if put is None:
            raise _Fallback                 # outside years 1..9999: reported
        found = _day_cache.put(day, put[0])
    return found


def _usr_element(name: str, value: JavaValue, findings: list[Finding]) -> str | None:
    """jms_mq._properties_to_usr for one property not consumed by a rule (typed_xml.encode_value)."""
    jtype = value.type
    tag = _usr_tag(name, JavaType.STRING if jtype is JavaType.CHAR else jtype)
    if tag.__class__ is str:
        findings.append(Finding(Change.DROPPED, name, tag))  # type: ignore[arg-type]
        return None
    if jtype is JavaType.CHAR:
        findings.append(Finding(Change.COERCED, name, "char -> String: dt=char is not an RFH2 property type (§5.3)"))
        jtype = JavaType.STRING
    open_, close = tag
    v = value.value
    if jtype is JavaType.STRING:
        if v is None:
            return f"{open_[:-1]} xsi:nil='true'>{close}"
        text = _escape(v)  # type: ignore[arg-type]
    elif jtype in _INTEGER_TYPES:
        text = str(v)
    elif jtype is JavaType.BOOLEAN:
        text = "1" if v else "0"
    elif jtype is JavaType.BYTES:
        if v is None:
            return f"{open_[:-1]} xsi:nil='true'>{close}"
        text = v.hex().upper()  # type: ignore[union-attr]
    else:
        if float_range_problem(v, jtype):  # type: ignore[arg-type]
            raise _Fallback                 # the general path raises "cannot be written"
        text = format_float(v, jtype)  # type: ignore[arg-type]
    return f"{open_}{text}{close}"


_map_keys: _Bounded = _Bounded()         # MapMessage key -> its ' name="..."' attribute
_MAP_TEXT_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;"})   # typed_xml.escape_text


def _map_xml(entries: TypedMap) -> str:
    """jms_bodies.encode_map: ``<map><elt name="k" dt="i4">1</elt>...</map>`` (typed_xml.typed_element)."""
    parts = ["<map>"]
    append = parts.append
    for key, value in entries.pairs:
        attrs = _map_keys.get(key)
        if attrs is None:
            if _BAD_XML_CHARS.search(key):
                raise _Fallback             # an error
            attrs = _map_keys.put(key, f' name="{escape_attr(key)}"')
        jtype = value.type
        v = value.value
        dt = TYPE_TO_DT[jtype]
        if dt is not None:
            attrs = f'{attrs} dt="{dt}"'
        if v is None:
            append(f'<elt{attrs} xsi:nil="true"></elt>')
            continue
        if jtype is JavaType.STRING or jtype is JavaType.CHAR:
            if _BAD_XML_CHARS.search(v):  # type: ignore[arg-type]
                raise _Fallback             # an error
            text = v.translate(_MAP_TEXT_ESCAPES)  # type: ignore[union-attr]
        elif jtype in _INTEGER_TYPES:
            text = str(v)
        elif jtype is JavaType.BOOLEAN:
            text = "1" if v else "0"
        elif jtype is JavaType.BYTES:
            text = v.hex().upper()  # type: ignore[union-attr]
        else:
            if float_range_problem(v, jtype):  # type: ignore[arg-type]
                raise _Fallback             # an error
            text = format_float(v, jtype)  # type: ignore[arg-type]
        append(f"<elt{attrs}>{text}</elt>")
    append("</map>")
    return "".join(parts)


def _body_bytes(message: JmsMessage, writer: _Writer) -> bytes:
    """jms_mq._body_to_mq for the bodies it converts without a finding."""
    body = message.body
    cls = body.__class__
    if cls is TextBody:
        text = body.text  # type: ignore[union-attr]
        if text is None:
            raise _Fallback                 # reported: null text
    elif cls is BytesBody:
        return body.data  # type: ignore[union-attr]
    elif cls is NoBody:
        return b""
    elif cls is MapBody:
        text = _map_xml(body.entries)  # type: ignore[union-attr]
    elif cls is StreamBody:
        text = encode_stream(body)  # type: ignore[arg-type]
    elif cls is ObjectBody:
        if body.class_name is not None or body.data == b"":  # type: ignore[union-attr]
            raise _Fallback                 # reported
        return body.data or b""  # type: ignore[union-attr]
    else:
        raise _Fallback
    if writer.codec is None:
        raise _Fallback
    try:
        return text.encode(writer.codec)
    except UnicodeEncodeError:
        raise _Fallback from None


def _to_mq(message: JmsMessage, now_ms: int, writer: _Writer) -> tuple[bytes, ConversionReport]:
    headers = message.headers
    if headers.__class__ is not JmsHeaders:
        raise _Fallback
    findings: list[Finding] = []
    jms: list[str] = []
    # JMSDestination -> jms/Dst (_destination_to_mq)
    dest = headers.destination
    if dest is not None:
        jms.append(_dst(dest))
    # JMSTimestamp -> jms/Tms, PutDate/PutTime (_timestamp_to_mq); Tms goes before Dlv (JMS_FOLDER_ORDER)
    ts = headers.timestamp
    if ts:
        jms.append(f"<Tms>{ts}</Tms>")
        day, rem = divmod(ts, 86_400_000)
        put_date = _put_date(day).encode()
        secs, milli = divmod(rem, 1000)
        put_time = b"%02d%02d%02d%02d" % (secs // 3600, secs // 60 % 60, secs % 60, milli // 10)
    else:
        put_date = put_time = _BLANK8
    # JMSDeliveryMode -> Persistence, jms/Dlv (_delivery_mode_to_mq)
    persistence, dlv = _PER_BYTE[headers.delivery_mode]
    jms.append(dlv)
    # JMSExpiration -> Expiry, jms/Exp (_expiration_to_mq)
    exp = headers.expiration
    if exp == 0:
        expiry = C.MQEI_UNLIMITED
    else:
        jms.append(f"<Exp>{exp}</Exp>")
        ttl = exp - now_ms
        expiry = -(-ttl // 100)
        if ttl <= 0 or expiry > _MQLONG_MAX:
            raise _Fallback                 # reported (coerced)
    # JMSPriority -> Priority, jms/Pri (_priority_to_mq)
    p = headers.priority
    priority = C.MQPRI_PRIORITY_AS_Q_DEF if writer.as_q_def and p == 4 else p
    if p != 4:
        jms.append(f"<Pri>{p}</Pri>")
    # JMSMessageID -> MsgId (_message_id_to_mq)
    mid = headers.message_id
    msg_id = C.MQMI_NONE
    if mid is not None:
        if _ANY_HEX48.fullmatch(mid) is None:
            findings.append(_MID_NOT_ID)
        elif mid[3:] == _ZERO_HEX48:
            findings.append(_MID_ZERO)
        else:
            msg_id = bytes.fromhex(mid[3:])
            if _HEX48.fullmatch(mid) is None:
                findings.append(_MID_UPPER)
    # JMSCorrelationID -> CorrelId, jms/Cid (_correlation_id_to_mq)
    cid = headers.correlation_id
    if cid is None:
        correl_id = C.MQCI_NONE
    elif cid.__class__ is str:
        jms.append(f"<Cid>{_escape(cid)}</Cid>")  # type: ignore[arg-type]
        if _ANY_HEX48.fullmatch(cid):  # type: ignore[arg-type]
            correl_id = bytes.fromhex(cid[3:])  # type: ignore[index]
        else:
            correl_id = cid.encode("utf-8")  # type: ignore[union-attr]
            if len(correl_id) > 24:
                findings.append(_CID_CUT)
                correl_id = correl_id[:24]
            else:
                correl_id = correl_id.ljust(24, b"\x00")
    else:
        raise _Fallback                     # the bytes form is reported
    # JMSReplyTo -> jms/Rto, ReplyToQ/ReplyToQMgr (_reply_to_to_mq); MsgType follows it (_ibm_properties_to_mq)
    reply_to = headers.reply_to
    if reply_to is None:
        reply_q = reply_qm = _BLANK48
        msg_type = C.MQMT_DATAGRAM
    else:
        rto, reply_q, reply_qm = _rto(reply_to)
        jms.append(rto)
        msg_type = C.MQMT_REQUEST
    # Properties: JMSXDeliveryCount, JMSXUserID, JMSXAppID (rules), the rest to usr (_properties_to_usr)
    count: Any = None
    user_id = _BLANK12
    appl_name = _BLANK28
    usr: list[str] = []
    usr_findings: list[Finding] = []
    ibm: dict[str, Any] = {}
    for name, value in message.properties.pairs:
        if name in MAPPED_PROPERTIES:
            if name == "JMSXDeliveryCount":
                count = value.value
                if value.type is not JavaType.INT or count is None or count < 1:
                    raise _Fallback         # reported, or an error
            elif name == "JMSXUserID":
                if value.type is not JavaType.STRING:
                    raise _Fallback
                user_id = _mqchar(value.value, C.MQ_USER_ID_LENGTH)
            elif name == "JMSXAppID":
                if value.type is not JavaType.STRING:
                    raise _Fallback
                appl_name = _mqchar(value.value, C.MQ_PUT_APPL_NAME_LENGTH)
            elif name in _IBM_FIELDS:
                if value.type is not JavaType.INT:
                    raise _Fallback         # an error (a null int cannot be: JavaValue refuses it)
                ibm[name] = value.value
            else:
                raise _Fallback             # the group properties: the general path
            continue
        element = _usr_element(name, value, usr_findings)
        if element is not None:
            usr.append(element)
    # JMS_IBM_MsgType/Feedback/PutApplType -> MsgType/Feedback/PutApplType (_ibm_properties_to_mq, rule order)
    feedback = C.MQFB_NONE
    put_appl_type = C.MQAT_NO_CONTEXT
    if ibm:
        defaults = {"JMS_IBM_MsgType": msg_type, "JMS_IBM_Feedback": feedback, "JMS_IBM_PutApplType": put_appl_type}
        for prop, attr in _IBM_FIELDS.items():
            value = ibm.get(prop)
            if value is None:
                continue
            if value == defaults[prop]:
                findings.append(Finding(Change.DROPPED, prop, f"{value} is what MQMD.{attr} holds without it: "
                                        "reads back as absent"))
            if prop == "JMS_IBM_MsgType":
                msg_type = value
            elif prop == "JMS_IBM_Feedback":
                feedback = value
            else:
                put_appl_type = value
    # JMSRedelivered / JMSXDeliveryCount -> BackoutCount (_delivery_count_to_mq)
    redelivered = headers.redelivered
    if count is None:
        backout = 1 if redelivered else 0
        findings.append(Finding(Change.DEFAULTED, "JMSXDeliveryCount", f"absent: BackoutCount {backout} from "
                                f"JMSRedelivered, read back as JMSXDeliveryCount {backout + 1}"))
    else:
        backout = count - 1
    if (backout > 0) != redelivered:
        findings.append(Finding(Change.COERCED, "JMSRedelivered", f"reads back as {backout > 0} (BackoutCount "
                                f"{backout})"))
    findings += usr_findings
    body_type = message.body.body_type
    body_format = BODY_TABLE[body_type][1]
    body = _body_bytes(message, writer)
    mcd = _mcd_folder(body_type, headers.type)
    jms_data = _pad4(("<jms>" + "".join(jms) + "</jms>").encode())
    long_ = writer.long_pack
    parts = [b"", b"", long_(len(mcd)), mcd, long_(len(jms_data)), jms_data]
    length = 44 + len(mcd) + len(jms_data)
    if usr:
        usr_data = _pad4(("<usr>" + "".join(usr) + "</usr>").encode())
        parts += (long_(len(usr_data)), usr_data)
        length += 4 + len(usr_data)
    parts.append(body)
    parts[0] = writer.md_pack(
        b"MD  ", C.MQMD_VERSION_2, C.MQRO_NONE, msg_type, expiry, feedback, writer.encoding, C.CCSID_UTF8,
        b"MQHRF2  ", priority, persistence, msg_id, correl_id, backout, reply_q, reply_qm, user_id, C.MQACT_NONE,
        b" " * 32, put_appl_type, appl_name, put_date, put_time, b"    ", C.MQGI_NONE, 1, 0, C.MQMF_NONE,
        C.MQOL_UNDEFINED)
    parts[1] = writer.rfh_pack(b"RFH ", C.MQRFH_VERSION_2, length, writer.encoding, writer.body_ccsid,
                               body_format.encode(), C.MQRFH_NO_FLAGS, C.CCSID_UTF8)
    report = ConversionReport(findings) if findings else ConversionReport()
    return b"".join(parts), report


def jms_to_mq_bytes_fast(message: JmsMessage, *, now_ms: int,
                         options: JmsToMqOptions) -> tuple[bytes, ConversionReport] | None:
    """The bytes and report of ``encode_message(jms_to_mq(...))`` with the RFH2, or None when ``message``
    needs the general path (a finding other than JMSXDeliveryCount defaulted, JMSRedelivered coerced and
    usr names dropped or char values coerced; group or JMS_IBM_* properties; any error)."""
    if message.__class__ is not JmsMessage or now_ms.__class__ is not int or not options.with_rfh2:
        return None
    try:
        writer = _writers.get(options)
        if writer is None:
            if len(_writers) >= 64:
                _writers.clear()
            writer = _writers[options] = _Writer(options)
        return _to_mq(message, now_ms, writer)
    except (_Fallback, MappingError):
        return None


# ==================================================================================================
# MQ bytes -> JMS
# ==================================================================================================
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
# Element text: characters XML 1.0 allows in a document, without '<' (markup) and '\r' (the parser turns it into
# '\n'), and '&' only in the five predefined entities and "&#13;" (how rfh2/typed_xml escape a CR); anything
# else (and "]]>") is left to lxml.
_CHAR = "[^<&\r\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]"
_TEXT = rf"{_CHAR}*(?:&(?:amp|lt|gt|quot|apos|#13);{_CHAR}*)*"
_DT = r"(?: dt=('[A-Za-z0-9.]*'|\"[A-Za-z0-9.]*\"))?"       # group: the quoted value, "" without dt
_NIL = r"( xsi:nil='true'| xsi:nil=\"true\")?"                 # group: the attribute, "" without it
_OPEN_RE = re.compile(rf"<({_NAME})>")
_SIMPLE_RE = re.compile(rf"<({_NAME})>({_TEXT})</\1>")               # an element without attributes
_SIMPLE_ALL_RE = re.compile(rf"(?:<({_NAME})>{_TEXT}</\1>)*")
# An element, or (last group) any character where none starts: markup this path does not read.
_ITEM_RE = re.compile(rf"<({_NAME}){_DT}{_NIL}>({_TEXT})</\1>|([\s\S])")
_MD_HEADER_FORMATS = frozenset({C.MQFMT_RF_HEADER, C.MQFMT_MD_EXTENSION, C.MQFMT_DEAD_LETTER_HEADER})
_HEADER_FORMATS = _MD_HEADER_FORMATS | {C.MQFMT_RF_HEADER_2}
_JMS_ELEMENTS = frozenset({"Dst", "Tms", "Dlv", "Exp", "Pri", "Cid", "Rto", "Gid", "Seq"})
_MCD_ELEMENTS = frozenset({"Msd", "Set", "Type", "Fmt"})
_INT_RE = re.compile(r"[+-]?[0-9]+", re.ASCII)
_DELIVERY = {C.MQPER_NOT_PERSISTENT: DeliveryMode.NON_PERSISTENT, C.MQPER_PERSISTENT: DeliveryMode.PERSISTENT}
_MODES = {int(mode): mode for mode in DeliveryMode}
_DLV = {str(int(mode)): mode for mode in DeliveryMode}        # jms/Dlv as IBM writes it
_reply_queues: _Bounded = _Bounded()     # (ReplyToQ, ReplyToQMgr) -> Destination
_usr_kinds: _Bounded = _Bounded()        # (usr element name, quoted dt) -> how its text is read (_usr_kind)
_mcd_folders: _Bounded = _Bounded()      # mcd NameValueData -> its elements (one per body type and JMSType)
_mq_texts: _Bounded = _Bounded()         # MQCHAR field bytes -> text (queue names, user ids, application names)
_INT = JavaType.INT
_STRING = JavaType.STRING
_BOOLEAN = JavaType.BOOLEAN
_BYTES = JavaType.BYTES
_DOUBLE = JavaType.DOUBLE
_OTHER_DT = "decode_value"
_INTEGER_DT = {"i1": JavaType.BYTE, "i2": JavaType.SHORT, "i4": JavaType.INT, "i8": JavaType.LONG,
               "int": JavaType.LONG}
_INTEGER_RANGE = {JavaType.BYTE: (-(2**7), 2**7 - 1), JavaType.SHORT: (-(2**15), 2**15 - 1),
                  JavaType.INT: (-(2**31), 2**31 - 1), JavaType.LONG: (_LONG_MIN, _LONG_MAX)}
_BOOLEANS = {"1": trusted_value(JavaType.BOOLEAN, True), "0": trusted_value(JavaType.BOOLEAN, False)}
_BLANK32 = b" " * 32
_BLANK4 = b" " * 4


def _unescape(text: str) -> str:
    if "&" not in text:
        return text
    return (text.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&apos;", "'")
            .replace("&#13;", "\r").replace("&amp;", "&"))


def _folder(raw: bytes) -> tuple[str, str, int, int]:
    """rfh2.parse_folder's reading of the folder element itself: its name, and the text with the span
    of its content, for a folder this path reads (else _Fallback)."""
    try:
        text = raw.decode("utf-8").strip(" \x00\t\r\n")
    except UnicodeDecodeError:
        raise _Fallback from None
    m = _OPEN_RE.match(text)
    if m is None or "]]>" in text:
        raise _Fallback
    name = m.group(1)
    close = len(text) - len(name) - 3
    if text[close:] != f"</{name}>":
        raise _Fallback
    return name, text, m.end(), close


def _simple(text: str, start: int, stop: int, known: frozenset[str]) -> dict[str, str]:
    """jms_mq._folder_values of an mcd/jms folder of elements without attributes, each of them read by a rule
    (the general path reports the others) and each once (it reports a duplicate)."""
    if not _SIMPLE_ALL_RE.fullmatch(text, start, stop):
        raise _Fallback
    items = _SIMPLE_RE.findall(text, start, stop)
    out = dict(items)
    if len(out) != len(items) or not out.keys() <= known:
        raise _Fallback
    if "&" in text:
        return {name: _unescape(value) for name, value in items}
    return out


def _folder_int(text: str | None, low: int, high: int) -> int | None:
    """jms_mq._ToJms.folder_int."""
    if text is None:
        return None
    if not (text.isdigit() and text.isascii()):      # else the general form: blanks, a sign
        text = text.strip(_XML_WS)
        if not _INT_RE.fullmatch(text):
            raise _Fallback                 # an error
    value = int(text)
    if not low <= value <= high:
        raise _Fallback                     # an error
    return value


def _mq_text(raw: bytes) -> str:
    """mqmd._text then blank-trimmed as the rules read MQCHAR fields (§6.3)."""
    cut = raw.find(b"\x00")
    if cut >= 0:
        raw = raw[:cut]
    return raw.decode("latin-1").strip(" ")


def _mq_name(raw: bytes) -> str:
    """_mq_text of a field whose values repeat (names, user ids, dates)."""
    found = _mq_texts.get(raw)
    if found is None:
        found = _mq_texts.put(raw, _mq_text(raw))
    return found


def _usr_kind(name: str, dt: str) -> Any:
    """How a usr element (name, quoted dt) is read: _STRING, (integer type, low, high), _BOOLEAN, or None
    for typed_xml.decode_value; _Fallback for a name jms_mq._usr_to_properties reports."""
    if name.upper() in RESERVED_WORDS or name in MAPPED_PROPERTIES:
        raise _Fallback
    if not dt:
        kind: Any = _STRING
    elif dt[1:-1] in _INTEGER_DT:
        jtype = _INTEGER_DT[dt[1:-1]]
        kind = (jtype, *_INTEGER_RANGE[jtype])
    else:
        kind = _BOOLEAN if dt[1:-1] == "boolean" else _OTHER_DT
    return _usr_kinds.put((name, dt), kind)


_new = object.__new__
_set = object.__setattr__
# _message sets every field of these frozen dataclasses itself: a new field must be added there.
assert set(JmsHeaders.__slots__) == {"destination", "delivery_mode", "expiration", "priority", "timestamp",
                                     "message_id", "correlation_id", "reply_to", "type", "redelivered"}
assert set(JmsMessage.__slots__) == {"headers", "properties", "body"}
assert set(TypedMap.__slots__) == {"pairs", "_index"}


def _message(headers: dict[str, Any], props: list[tuple[str, JavaValue]], body: Any) -> JmsMessage:
    """JmsMessage(JmsHeaders(**headers), TypedMap(props), body) for values already checked as the
    constructors check them (header types and ranges, property names and uniqueness)."""
    get = headers.get
    h = _new(JmsHeaders)
    _set(h, "destination", get("destination"))
    _set(h, "delivery_mode", headers["delivery_mode"])
    _set(h, "expiration", get("expiration", 0))
    _set(h, "priority", headers["priority"])
    _set(h, "timestamp", get("timestamp", 0))
    _set(h, "message_id", get("message_id"))
    _set(h, "correlation_id", get("correlation_id"))
    _set(h, "reply_to", get("reply_to"))
    _set(h, "type", get("type"))
    _set(h, "redelivered", headers["redelivered"])
    index = dict(props)
    if len(index) != len(props):
        raise _Fallback                     # reported: a duplicate usr property
    typed = _new(TypedMap)
    _set(typed, "pairs", tuple(props))
    _set(typed, "_index", index)
    message = _new(JmsMessage)
    _set(message, "headers", h)
    _set(message, "properties", typed)
    _set(message, "body", body)
    return message


_ATTR_CHAR = "[^<&\"\t\n\r\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]"
_ATTR = rf"{_ATTR_CHAR}*(?:&(?:amp|lt|gt|quot|apos|#9|#10|#13);{_ATTR_CHAR}*)*"   # typed_xml.escape_attr
# A wire-form map entry as jms_bodies.encode_map writes it, or (last group) a character no entry explains.
_MAP_ITEM_RE = re.compile(rf'<elt name="({_ATTR})"( dt="[A-Za-z0-9.]*")?( xsi:nil="true")?>({_TEXT})</elt>|([\s\S])')


def _map_body(text: str) -> MapBody:
    """jms_bodies.decode_map for the wire form without whitespace between entries; _Fallback otherwise."""
    if not (text.startswith("<map>") and text.endswith("</map>")) or "]]>" in text:
        raise _Fallback
    pairs: list[tuple[str, JavaValue]] = []
    for key, dt, nil, value, junk in _MAP_ITEM_RE.findall(text, 5, len(text) - 6):
        if junk:
            raise _Fallback
        if "&" in key:
            key = _unescape(key.replace("&#9;", "\t").replace("&#10;", "\n"))
        jtype = _INTEGER_DT.get(dt[5:-1]) if dt and not nil else None
        if jtype is not None and value.isdigit() and value.isascii() and len(value) < 19:
            number = int(value)             # typed_xml.decode_value, its common case
            low, high = _INTEGER_RANGE[jtype]
            if not low <= number <= high:
                raise _Fallback             # an error
            made = _new(JavaValue)
            _set(made, "type", jtype)
            _set(made, "value", number)
        elif not dt and not nil:
            made = _new(JavaValue)
            _set(made, "type", _STRING)
            _set(made, "value", _unescape(value) if "&" in value else value)
        elif dt == ' dt="r8"' and not nil:
            try:
                number = parse_float(value.strip(_XML_WS), _DOUBLE)
            except ValueError:
                raise _Fallback from None   # an error
            made = _new(JavaValue)
            _set(made, "type", _DOUBLE)
            _set(made, "value", number)
        else:
            made = decode_value(dt[5:-1] if dt else None, _unescape(value), name=key, nil=bool(nil),
                                structure="map entry")
        pairs.append((key, made))
    index = dict(pairs)
    if len(index) != len(pairs) or "" in index:
        raise _Fallback                     # an error: a duplicate or empty map name
    typed = _new(TypedMap)
    _set(typed, "pairs", tuple(pairs))
    _set(typed, "_index", index)
    body = _new(MapBody)
    _set(body, "entries", typed)
    return body


def _to_jms(data: bytes, now_ms: int, options: MqToJmsOptions) -> tuple[JmsMessage, ConversionReport]:
    if len(data) < C.MQMD_LENGTH_2 or data[:4] != b"MD  ":
        raise _Fallback
    version = data[4:8]
    if version == b"\x00\x00\x00\x02":
        order = ">"
    elif version == b"\x02\x00\x00\x00":
        order = "<"
    else:
        raise _Fallback                     # version 1 (maybe in a 364-byte region) or not an MQMD
    (_sid, _v, report_opts, msg_type, expiry, feedback, encoding, md_ccsid, md_format, md_pri, persistence, msg_id,
     correl_id, backout, reply_q, reply_qm, user_id, accounting, appl_identity, put_appl_type, put_appl_name,
     put_date, put_time, appl_origin, group_id, seq_number, offset, msg_flags,
     original_length) = _MQMD_V2[order].unpack_from(data)
    # MQMD fields without a JMS field must hold their defaults (jms_mq._report_unused reports the rest)
    if (report_opts or accounting != C.MQACT_NONE or offset or original_length != C.MQOL_UNDEFINED
            or msg_flags & ~_GROUP_FLAGS or appl_identity != _BLANK32 and _mq_text(appl_identity)
            or appl_origin != _BLANK4 and _mq_text(appl_origin)):
        raise _Fallback
    fmt = md_format.split(b"\x00", 1)[0].decode("latin-1").rstrip(" ").ljust(8)
    jms: dict[str, str] = {}
    mcd: dict[str, str] = {}
    usr: list[tuple[str, str, str, str, str]] = []
    pos = C.MQMD_LENGTH_2
    if fmt == C.MQFMT_RF_HEADER_2:
        rorder = C.integer_byte_order(encoding)
        if len(data) - pos < 36:
            raise _Fallback
        (sid, rversion, length, body_encoding, body_ccsid, rfmt, _flags,
         nv_ccsid) = _RFH2_FIXED[rorder].unpack_from(data, pos)
        end = pos + length
        if (sid != b"RFH " or rversion != 2 or length < 36 or length % 4 or end > len(data)
                or nv_ccsid != C.CCSID_UTF8):
            raise _Fallback
        body_format = rfmt.decode("latin-1").replace("\x00", " ")
        if body_format in _HEADER_FORMATS:
            raise _Fallback                 # another header follows
        if body_ccsid == C.MQCCSI_INHERIT:
            body_ccsid = md_ccsid
        pos += 36
        seen: set[str] = set()
        long_ = _LONG[rorder].unpack_from
        while pos < end:
            if end - pos < 4:
                raise _Fallback
            nv_len = long_(data, pos)[0]
            if nv_len < 0 or nv_len > end - pos - 4:
                raise _Fallback
            raw = data[pos + 4: pos + 4 + nv_len]
            pos += 4 + nv_len
            found = _mcd_folders.get(raw)
            if found is not None:
                name = "mcd"
            else:
                name, text, start, stop = _folder(raw)
            if name in seen:
                raise _Fallback             # reported: a second folder of that name
            seen.add(name)
            if name == "jms":
                jms = _simple(text, start, stop, _JMS_ELEMENTS)
            elif name == "mcd":
                mcd = found if found is not None else _mcd_folders.put(raw, _simple(text, start, stop,
                                                                                    _MCD_ELEMENTS))
            elif name == "usr":
                usr = _ITEM_RE.findall(text, start, stop)
            else:
                raise _Fallback             # mqps and other folders: the general path
    elif fmt in _MD_HEADER_FORMATS:
        raise _Fallback
    else:
        body_format, body_encoding, body_ccsid = fmt, encoding, md_ccsid
    body = data[pos:]
    get = jms.get
    headers: dict[str, Any] = {}
    # JMSDestination (_destination_to_jms; mqps/Top is not handled here)
    dst = get("Dst")
    if dst is not None:
        headers["destination"] = _parse_uri(dst, "Dst")
    # JMSDeliveryMode (_delivery_mode_to_jms)
    dlv = get("Dlv")
    if dlv is not None:
        mode = _DLV.get(dlv) or _MODES[_folder_int(dlv, 1, 2)]
        if persistence in _DELIVERY and _DELIVERY[persistence] is not mode:
            raise _Fallback                 # reported
        headers["delivery_mode"] = mode
    elif persistence in _DELIVERY:
        headers["delivery_mode"] = _DELIVERY[persistence]
    else:
        raise _Fallback                     # reported (defaulted)
    # JMSExpiration (_expiration_to_jms)
    exp = get("Exp")
    if exp is not None:
        headers["expiration"] = (int(exp) if exp.isdigit() and exp.isascii() and len(exp) < 19
                                 else _folder_int(exp, _LONG_MIN, _LONG_MAX))
    elif expiry > 0:
        exp = headers["expiration"] = now_ms + expiry * 100
        if not _LONG_MIN <= exp <= _LONG_MAX:
            raise _Fallback                 # an error
    elif expiry != C.MQEI_UNLIMITED:
        raise _Fallback                     # reported (coerced)
    # JMSPriority (_priority_to_jms)
    pri = get("Pri")
    if pri is not None:
        pri = _folder_int(pri, 0, 9)
    if 0 <= md_pri <= 9 and (pri is None or pri == md_pri):
        headers["priority"] = md_pri
    else:
        raise _Fallback                     # reported, or jms/Pri stands in for an unresolved MQMD.Priority
    # JMSTimestamp (_timestamp_to_jms)
    tms = get("Tms")
    date, time = _mq_name(put_date), _mq_text(put_time)
    if tms is not None:
        tms = headers["timestamp"] = (int(tms) if tms.isdigit() and tms.isascii() and len(tms) < 19
                                      else _folder_int(tms, _LONG_MIN, _LONG_MAX))
        if date:
            day, rem = divmod(tms, 86_400_000)
            secs, milli = divmod(rem, 1000)
            hh, mm, ss = secs // 3600, secs // 60 % 60, secs % 60
            if _put_date(day) != date or time != f"{hh:02d}{mm:02d}{ss:02d}{milli // 10:02d}":
                raise _Fallback             # reported: they differ from jms/Tms (put_date_time)
    elif date or time:
        ts = headers["timestamp"] = put_epoch_ms(date, time)
        if ts == 0:
            raise _Fallback                 # reported
    # JMSMessageID (_message_id_to_jms)
    if msg_id != C.MQMI_NONE:
        headers["message_id"] = "ID:" + msg_id.hex()
    # JMSCorrelationID (_correlation_id_to_jms)
    cid = get("Cid")
    if cid is not None:
        headers["correlation_id"] = cid
        if correl_id != C.MQCI_NONE:
            raw = bytes.fromhex(cid[3:]) if _ANY_HEX48.fullmatch(cid) else None
            if raw is None:
                raw = cid.encode("utf-8", "surrogatepass")[:24].ljust(24, b"\x00")
            if raw != correl_id:
                raise _Fallback             # reported
    elif correl_id != C.MQCI_NONE:
        headers["correlation_id"] = "ID:" + correl_id.hex()
    # JMSReplyTo (_reply_to_to_jms)
    rto = get("Rto")
    q, qm = _mq_name(reply_q), _mq_name(reply_qm)
    if rto is not None:
        dest = headers["reply_to"] = _parse_uri(rto, "Rto")
        if q and (dest.kind is DestinationKind.TOPIC or dest.name != q or dest.queue_manager != qm):
            raise _Fallback                 # reported (or an MQCHAR form the general path compares)
    elif q:
        key = (q, qm)
        dest = _reply_queues.get(key)
        if dest is None:
            if "/" in qm or "?" in qm:
                raise _Fallback             # reported
            dest = _reply_queues.put(key, Destination.queue(q, qm))
        headers["reply_to"] = dest
    props: list[tuple[str, JavaValue]] = []
    # JMS_IBM_MsgType/Feedback/PutApplType (_ibm_properties_to_jms): only values JMS -> MQ would not write
    if msg_type != (C.MQMT_REQUEST if q else C.MQMT_DATAGRAM):
        props.append(("JMS_IBM_MsgType", JavaValue(_INT, msg_type)))
    if feedback != C.MQFB_NONE:
        props.append(("JMS_IBM_Feedback", JavaValue(_INT, feedback)))
    if put_appl_type != C.MQAT_NO_CONTEXT:
        props.append(("JMS_IBM_PutApplType", JavaValue(_INT, put_appl_type)))
    # JMSType (_type_to_jms)
    msd = mcd.get("Msd")
    if msd and msd.strip(_XML_WS).lower() not in MSD_TO_BODY:
        headers["type"] = mcd_uri(msd.strip(_XML_WS), mcd.get("Set"), mcd.get("Type"), mcd.get("Fmt"))
    else:
        if "Set" in mcd or "Fmt" in mcd:
            raise _Fallback                 # reported
        if "Type" in mcd:
            headers["type"] = mcd["Type"]
    # JMSRedelivered / JMSXDeliveryCount (_delivery_count_to_jms)
    if backout < 0:
        raise _Fallback                     # reported
    headers["redelivered"] = backout > 0
    props.append(("JMSXDeliveryCount", trusted_value(_INT, min(backout + 1, _MQLONG_MAX))))
    # JMSXUserID, JMSXAppID (_mqchar_property_rule)
    for prop, raw_field in (("JMSXUserID", user_id), ("JMSXAppID", put_appl_name)):
        value = _mq_name(raw_field)
        if value:
            props.append((prop, trusted_value(_STRING, value)))
    # JMSXGroupID / JMSXGroupSeq / JMS_IBM_Last_Msg_In_Group (_group_to_jms)
    in_group = msg_flags & _GROUP_FLAGS
    gid = get("Gid")
    seq = _folder_int(get("Seq"), -(2**31), _MQLONG_MAX)
    if gid is not None:
        props.append(("JMSXGroupID", trusted_value(_STRING, gid)))
    elif in_group and group_id != C.MQGI_NONE:
        props.append(("JMSXGroupID", trusted_value(_STRING, "ID:" + group_id.hex())))
    elif group_id != C.MQGI_NONE:
        raise _Fallback                     # reported
    if seq is not None:
        props.append(("JMSXGroupSeq", trusted_value(_INT, seq)))
    elif in_group:
        props.append(("JMSXGroupSeq", JavaValue(_INT, seq_number)))
    elif seq_number != 1:
        raise _Fallback                     # reported
    if msg_flags & C.MQMF_LAST_MSG_IN_GROUP:
        props.append(("JMS_IBM_Last_Msg_In_Group", trusted_value(JavaType.BOOLEAN, True)))
    # usr folder (_usr_to_properties)
    for name, dt, nil, value, junk in usr:
        if junk:
            raise _Fallback
        kind = _usr_kinds.get((name, dt))
        if kind is None:
            kind = _usr_kind(name, dt)
        if nil:                             # a null String or byte[]; a null primitive is reported
            if value or not (kind is _STRING or dt[1:-1] in ("string", "bin.hex")):
                raise _Fallback
            props.append((name, trusted_value(_BYTES if dt[1:-1] == "bin.hex" else _STRING, None)))
            continue
        if kind is _STRING:
            made = _new(JavaValue)
            _set(made, "type", _STRING)
            _set(made, "value", _unescape(value) if "&" in value else value)
        elif kind.__class__ is tuple:       # an integer type and its range
            text = value if value.isdigit() and value.isascii() else value.strip(_XML_WS)
            if not _INT_RE.fullmatch(text):
                raise _Fallback             # an error
            number = int(text)
            if not kind[1] <= number <= kind[2]:
                raise _Fallback             # an error
            made = _new(JavaValue)
            _set(made, "type", kind[0])
            _set(made, "value", number)
        else:
            made = _BOOLEANS.get(value.strip(_XML_WS)) if kind is _BOOLEAN else None
            if made is None:
                made = decode_value(dt[1:-1], _unescape(value), name=name, structure="usr folder property")
        props.append((name, made))
    # body class and body (_body_class, _body_to_jms)
    body_type = MSD_TO_BODY.get(msd.strip(_XML_WS).lower()) if msd is not None else None
    if body_type is None:
        if body_format == C.MQFMT_STRING:
            body_type = BodyType.TEXT
        elif body_format == C.MQFMT_NONE:
            body_type = BodyType.BYTES
        else:
            raise _Fallback                 # reported
    jbody: Any
    if body_type is BodyType.BYTES:
        jbody = BytesBody(body)
    elif body_type is BodyType.OBJECT:
        jbody = ObjectBody(body or None)
    elif body_type is BodyType.MESSAGE:
        if body:
            raise _Fallback                 # reported
        jbody = NoBody()
    else:
        codec = codec_for(body_ccsid if body_ccsid > 0 else options.default_ccsid,
                          C.integer_byte_order(body_encoding))
        if codec is None:
            raise _Fallback
        try:
            text = body.decode(codec)
        except UnicodeDecodeError:
            raise _Fallback from None
        if body_type is BodyType.TEXT:
            jbody = TextBody(text)
        elif body_type is BodyType.MAP:
            jbody = _map_body(text)
        else:
            jbody = decode_stream(text)
    return _message(headers, props, jbody), ConversionReport()


def mq_bytes_to_jms_fast(data: bytes | bytearray | memoryview, *, now_ms: int,
                         options: MqToJmsOptions) -> tuple[JmsMessage, ConversionReport] | None:
    """The JMS message of ``mq_to_jms(decode_message(data), ...)`` when that conversion has no finding and
    the message is an MQMD v2 alone or followed by one MQRFH2 with simple mcd/jms/usr folders; else None."""
    if now_ms.__class__ is not int:
        return None
    try:
        return _to_jms(data if data.__class__ is bytes else bytes(data), now_ms, options)  # type: ignore[arg-type]
    except (_Fallback, MappingError):
        return None
