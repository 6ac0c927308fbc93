"""IBM MQ message bytes -> JMS message without the MqMessage model: the bytes path of mq_bytes_to_jms.

One ``struct.unpack`` of the MQMD and of the RFH2 fixed part, and the folders read by regular expressions
when they hold only simple elements (``<name>text</name>``, an optional ``dt`` attribute in the usr folder,
the five predefined entities), which is how IBM MQ classes for JMS and this gateway write them. Each step
names the rule of the model path it reads the same way (rules, properties, bodies). Anything else (a
finding, an unusual folder, any value the model path refuses) raises Fallback inside and gives None: the
caller decodes the message with lxml and runs the model path (tests/test_jms_mq_fast.py holds the two to
the same JMS message, findings and errors).
"""
from __future__ import annotations

import re
from typing import Any

from mappings.conversions.jms_mq.spec import (
    BODY_TABLE,
    DELIVERY_MODE_FOR,
    ENCODING_PROPERTY,
    GROUP_FLAGS,
    INT_RE,
    JMS_FOLDER_ORDER,
    LONG_MAX,
    LONG_MIN,
    MAPPED_PROPERTIES,
    MCD_ORDER,
    MQLONG_MAX,
    MSD_TO_BODY,
    XML_WS,
    MqToJmsOptions,
    body_description,
    body_type_of,
    bytes_to_id,
    correl_bytes,
    folder_int,
    implied_msg_type,
    mcd_uri,
    parse_uri,
    put_epoch_ms,
    report_properties,
)
from mappings.conversions.jms_mq.wire import LONG, MQMD_V2, RFH2_FIXED, Bounded, Fallback, day_put_date
from mappings.errors import MappingError
from mappings.jms.bodies import decode_stream
from mappings.jms.model import (
    INTEGER_RANGES,
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
    TextBody,
    TypedMap,
    trusted_value,
)
from mappings.jms.typed_xml import DT_TO_TYPE, decode_value, parse_float
from mappings.mq import constants as C
from mappings.mq.ccsid import codec_for
from mappings.report import ConversionReport

__all__ = ["mq_bytes_to_jms_fast"]

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
_JMS_ELEMENTS = frozenset(JMS_FOLDER_ORDER)
_MCD_ELEMENTS = frozenset(MCD_ORDER)
_DELIVERY = DELIVERY_MODE_FOR
_MODES = {int(mode): mode for mode in DeliveryMode}
_DLV = {str(int(mode)): mode for mode in DeliveryMode}        # jms/Dlv as IBM writes it
_reply_queues: Bounded = Bounded()     # (ReplyToQ, ReplyToQMgr) -> Destination
_usr_kinds: Bounded = Bounded()        # (usr element name, quoted dt) -> how its text is read (_usr_kind)
_mcd_folders: Bounded = Bounded()      # mcd NameValueData -> its elements (one per body type and JMSType)
_mq_texts: Bounded = Bounded()         # MQCHAR field bytes -> text (queue names, user ids, application names)
_INT = JavaType.INT
_STRING = JavaType.STRING
_BOOLEAN = JavaType.BOOLEAN
_BYTES = JavaType.BYTES
_DOUBLE = JavaType.DOUBLE
_OTHER_DT = "decode_value"
_INTEGER_DT = {dt: jtype for dt, jtype in DT_TO_TYPE.items() if jtype in INTEGER_RANGES}
_INTEGER_RANGE = INTEGER_RANGES
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
    of its content, for a folder this path reads (else Fallback)."""
    try:
        text = raw.decode("utf-8").strip(" \x00\t\r\n")
    except UnicodeDecodeError:
        raise Fallback from None
    m = _OPEN_RE.match(text)
    if m is None or "]]>" in text:
        raise Fallback
    name = m.group(1)
    close = len(text) - len(name) - 3
    if text[close:] != f"</{name}>":
        raise Fallback
    return name, text, m.end(), close


def _simple(text: str, start: int, stop: int, known: frozenset[str]) -> dict[str, str]:
    """model._folder_values of an mcd/jms folder of elements without attributes, each of them read by a rule
    (the model path reports the others) and each once (it reports a duplicate)."""
    if not _SIMPLE_ALL_RE.fullmatch(text, start, stop):
        raise Fallback
    items = _SIMPLE_RE.findall(text, start, stop)
    out = dict(items)
    if len(out) != len(items) or not out.keys() <= known:
        raise Fallback
    if "&" in text:
        return {name: _unescape(value) for name, value in items}
    return out


def _folder_int(text: str | None, low: int, high: int, name: str) -> int | None:
    """rules.ToJms.folder_int: spec.folder_int, None when the element is absent."""
    return None if text is None else folder_int(text, low, high, name)


def _mq_text(raw: bytes) -> str:
    """mqmd._text then blank-trimmed as the rules read MQCHAR fields (IBM in)."""
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
    for typed_xml.decode_value; Fallback for a name properties.usr_to_properties reports."""
    if name.upper() in RESERVED_WORDS or name in MAPPED_PROPERTIES:
        raise Fallback
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
        raise Fallback                     # reported: a duplicate usr property
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
# A wire-form map entry as mappings.jms.bodies.encode_map writes it, or (last group) a character no entry explains.
_MAP_ITEM_RE = re.compile(rf'<elt name="({_ATTR})"( dt="[A-Za-z0-9.]*")?( xsi:nil="true")?>({_TEXT})</elt>|([\s\S])')


def _map_body(text: str) -> MapBody:
    """mappings.jms.bodies.decode_map for the wire form without whitespace between entries; Fallback otherwise."""
    if not (text.startswith("<map>") and text.endswith("</map>")) or "]]>" in text:
        raise Fallback
    pairs: list[tuple[str, JavaValue]] = []
    for key, dt, nil, value, junk in _MAP_ITEM_RE.findall(text, 5, len(text) - 6):
        if junk:
            raise Fallback
        if "&" in key:
            key = _unescape(key.replace("&#9;", "\t").replace("&#10;", "\n"))
        jtype = _INTEGER_DT.get(dt[5:-1]) if dt and not nil else None
        if jtype is not None and value.isdigit() and value.isascii() and len(value) < 19:
            number = int(value)             # typed_xml.decode_value, its common case
            low, high = _INTEGER_RANGE[jtype]
            if not low <= number <= high:
                raise Fallback             # an error
            made = _new(JavaValue)
            _set(made, "type", jtype)
            _set(made, "value", number)
        elif not dt and not nil:
            made = _new(JavaValue)
            _set(made, "type", _STRING)
            _set(made, "value", _unescape(value) if "&" in value else value)
        elif dt == ' dt="r8"' and not nil:
            try:
                number = parse_float(value.strip(XML_WS), _DOUBLE)
            except ValueError:
                raise Fallback from None   # an error
            made = _new(JavaValue)
            _set(made, "type", _DOUBLE)
            _set(made, "value", number)
        else:
            made = decode_value(dt[5:-1] if dt else None, _unescape(value), name=key, nil=bool(nil),
                                structure="map entry")
        pairs.append((key, made))
    index = dict(pairs)
    if len(index) != len(pairs) or "" in index:
        raise Fallback                     # an error: a duplicate or empty map name
    typed = _new(TypedMap)
    _set(typed, "pairs", tuple(pairs))
    _set(typed, "_index", index)
    body = _new(MapBody)
    _set(body, "entries", typed)
    return body


def _to_jms(data: bytes, now_ms: int, options: MqToJmsOptions) -> tuple[JmsMessage, ConversionReport]:
    if len(data) < C.MQMD_LENGTH_2 or data[:4] != b"MD  ":
        raise Fallback
    version = data[4:8]
    if version == b"\x00\x00\x00\x02":
        order = ">"
    elif version == b"\x02\x00\x00\x00":
        order = "<"
    else:
        raise Fallback                     # version 1 (maybe in a 364-byte region) or not an MQMD
    (_sid, _v, report_opts, msg_type, expiry, feedback, encoding, md_ccsid, md_format, md_pri, persistence, msg_id,
     correl_id, backout, reply_q, reply_qm, user_id, accounting, appl_identity, put_appl_type, put_appl_name,
     put_date, put_time, appl_origin, group_id, seq_number, offset, msg_flags,
     original_length) = MQMD_V2[order].unpack_from(data)
    # MQMD fields without a JMS field must hold their defaults (model._report_unused reports the rest)
    if (accounting != C.MQACT_NONE or offset or original_length != C.MQOL_UNDEFINED
            or msg_flags & ~GROUP_FLAGS or appl_identity != _BLANK32 and _mq_text(appl_identity)
            or appl_origin != _BLANK4 and _mq_text(appl_origin)):
        raise Fallback
    fmt = md_format.split(b"\x00", 1)[0].decode("latin-1").rstrip(" ").ljust(8)
    jms: dict[str, str] = {}
    mcd: dict[str, str] = {}
    usr: list[tuple[str, str, str, str, str]] = []
    pos = C.MQMD_LENGTH_2
    if fmt == C.MQFMT_RF_HEADER_2:
        rorder = C.integer_byte_order(encoding)
        if len(data) - pos < 36:
            raise Fallback
        (sid, rversion, length, body_encoding, body_ccsid, rfmt, _flags,
         nv_ccsid) = RFH2_FIXED[rorder].unpack_from(data, pos)
        end = pos + length
        if (sid != b"RFH " or rversion != 2 or length < 36 or length % 4 or end > len(data)
                or nv_ccsid != C.CCSID_UTF8):
            raise Fallback
        body_format = rfmt.decode("latin-1").replace("\x00", " ")
        if body_format in _HEADER_FORMATS:
            raise Fallback                 # another header follows
        if body_ccsid == C.MQCCSI_INHERIT:
            body_ccsid = md_ccsid
        pos += 36
        seen: set[str] = set()
        long_ = LONG[rorder].unpack_from
        while pos < end:
            if end - pos < 4:
                raise Fallback
            nv_len = long_(data, pos)[0]
            if nv_len < 0 or nv_len > end - pos - 4:
                raise Fallback
            raw = data[pos + 4: pos + 4 + nv_len]
            pos += 4 + nv_len
            found = _mcd_folders.get(raw)
            if found is not None:
                name = "mcd"
            else:
                name, text, start, stop = _folder(raw)
            if name in seen:
                raise Fallback             # reported: a second folder of that name
            seen.add(name)
            if name == "jms":
                jms = _simple(text, start, stop, _JMS_ELEMENTS)
            elif name == "mcd":
                mcd = found if found is not None else _mcd_folders.put(raw, _simple(text, start, stop,
                                                                                    _MCD_ELEMENTS))
            elif name == "usr":
                usr = _ITEM_RE.findall(text, start, stop)
            else:
                raise Fallback             # mqps and other folders: the model path
    elif fmt in _MD_HEADER_FORMATS:
        raise Fallback
    else:
        body_format, body_encoding, body_ccsid = fmt, encoding, md_ccsid
    body = data[pos:]
    get = jms.get
    headers: dict[str, Any] = {}
    # JMSDestination (rules._destination_to_jms; mqps/Top is not handled here)
    dst = get("Dst")
    if dst is not None:
        headers["destination"] = parse_uri(dst, "Dst")
    # JMSDeliveryMode (rules._delivery_mode_to_jms)
    dlv = get("Dlv")
    if dlv is not None:
        mode = _DLV.get(dlv) or _MODES[folder_int(dlv, 1, 2, "Dlv")]
        if persistence in _DELIVERY and _DELIVERY[persistence] is not mode:
            raise Fallback                 # reported
        headers["delivery_mode"] = mode
    elif persistence in _DELIVERY:
        headers["delivery_mode"] = _DELIVERY[persistence]
    else:
        raise Fallback                     # reported (defaulted)
    # JMSExpiration (rules._expiration_to_jms)
    exp = get("Exp")
    if exp is not None:
        headers["expiration"] = (int(exp) if exp.isdigit() and exp.isascii() and len(exp) < 19
                                 else folder_int(exp, LONG_MIN, LONG_MAX, "Exp"))
    elif expiry > 0:
        exp = headers["expiration"] = now_ms + expiry * 100
        if not LONG_MIN <= exp <= LONG_MAX:
            raise Fallback                 # an error
    elif expiry != C.MQEI_UNLIMITED:
        raise Fallback                     # reported (coerced)
    # JMSPriority (rules._priority_to_jms)
    pri = get("Pri")
    if pri is not None:
        pri = folder_int(pri, 0, 9, "Pri")
    if 0 <= md_pri <= 9 and (pri is None or pri == md_pri):
        headers["priority"] = md_pri
    else:
        raise Fallback                     # reported, or jms/Pri stands in for an unresolved MQMD.Priority
    # JMSTimestamp (rules._timestamp_to_jms)
    tms = get("Tms")
    date, time = _mq_name(put_date), _mq_text(put_time)
    if tms is not None:
        tms = headers["timestamp"] = (int(tms) if tms.isdigit() and tms.isascii() and len(tms) < 19
                                      else folder_int(tms, LONG_MIN, LONG_MAX, "Tms"))
        if date:
            day, rem = divmod(tms, 86_400_000)
            secs, milli = divmod(rem, 1000)
            hh, mm, ss = secs // 3600, secs // 60 % 60, secs % 60
            if day_put_date(day) != date or time != f"{hh:02d}{mm:02d}{ss:02d}{milli // 10:02d}":
                raise Fallback             # reported: they differ from jms/Tms (put_date_time)
    elif date or time:
        ts = headers["timestamp"] = put_epoch_ms(date, time)
        if ts == 0:
            raise Fallback                 # reported
    # JMSMessageID (rules._message_id_to_jms)
    if msg_id != C.MQMI_NONE:
        headers["message_id"] = bytes_to_id(msg_id)
    # JMSCorrelationID (rules._correlation_id_to_jms)
    cid = get("Cid")
    if cid is not None:
        headers["correlation_id"] = cid
        if correl_id != C.MQCI_NONE:
            if correl_bytes(cid)[0] != correl_id:
                raise Fallback             # reported
    elif correl_id != C.MQCI_NONE:
        headers["correlation_id"] = bytes_to_id(correl_id)
    # JMSReplyTo (rules._reply_to_to_jms)
    rto = get("Rto")
    q, qm = _mq_name(reply_q), _mq_name(reply_qm)
    if rto is not None:
        dest = headers["reply_to"] = parse_uri(rto, "Rto")
        if q and (dest.kind is DestinationKind.TOPIC or dest.name != q or dest.queue_manager != qm):
            raise Fallback                 # reported (or an MQCHAR form the model path compares)
    elif q:
        key = (q, qm)
        dest = _reply_queues.get(key)
        if dest is None:
            if "/" in qm or "?" in qm:
                raise Fallback             # reported
            dest = _reply_queues.put(key, Destination.queue(q, qm))
        headers["reply_to"] = dest
    props: list[tuple[str, JavaValue]] = []
    # JMS_IBM_MsgType/Feedback/PutApplType (rules._ibm_properties_to_jms): only values JMS -> MQ would not write
    if msg_type != implied_msg_type(q):
        props.append(("JMS_IBM_MsgType", JavaValue(_INT, msg_type)))
    if feedback != C.MQFB_NONE:
        props.append(("JMS_IBM_Feedback", JavaValue(_INT, feedback)))
    if put_appl_type != C.MQAT_NO_CONTEXT:
        props.append(("JMS_IBM_PutApplType", JavaValue(_INT, put_appl_type)))
    # JMSType (rules._type_to_jms)
    msd = mcd.get("Msd")
    if msd and msd.strip(XML_WS).lower() not in MSD_TO_BODY:
        headers["type"] = mcd_uri(msd.strip(XML_WS), mcd.get("Set"), mcd.get("Type"), mcd.get("Fmt"))
    else:
        if "Set" in mcd or "Fmt" in mcd:
            raise Fallback                 # reported
        if "Type" in mcd:
            headers["type"] = mcd["Type"]
    # JMSRedelivered / JMSXDeliveryCount (rules._delivery_count_to_jms)
    if backout < 0:
        raise Fallback                     # reported
    headers["redelivered"] = backout > 0
    props.append(("JMSXDeliveryCount", trusted_value(_INT, min(backout + 1, MQLONG_MAX))))
    # JMSXUserID, JMSXAppID (rules._mqchar_property_rule)
    for prop, raw_field in (("JMSXUserID", user_id), ("JMSXAppID", put_appl_name)):
        value = _mq_name(raw_field)
        if value:
            props.append((prop, trusted_value(_STRING, value)))
    # JMSXGroupID / JMSXGroupSeq / JMS_IBM_Last_Msg_In_Group (rules._group_to_jms)
    in_group = msg_flags & GROUP_FLAGS
    gid = get("Gid")
    seq = _folder_int(get("Seq"), -(2**31), MQLONG_MAX, "Seq")
    if gid is not None:
        props.append(("JMSXGroupID", trusted_value(_STRING, gid)))
    elif in_group and group_id != C.MQGI_NONE:
        props.append(("JMSXGroupID", trusted_value(_STRING, bytes_to_id(group_id))))
    elif group_id != C.MQGI_NONE:
        raise Fallback                     # reported
    if seq is not None:
        props.append(("JMSXGroupSeq", trusted_value(_INT, seq)))
    elif in_group:
        props.append(("JMSXGroupSeq", JavaValue(_INT, seq_number)))
    elif seq_number != 1:
        raise Fallback                     # reported
    if msg_flags & C.MQMF_LAST_MSG_IN_GROUP:
        props.append(("JMS_IBM_Last_Msg_In_Group", trusted_value(JavaType.BOOLEAN, True)))
    # JMS_IBM_Report_* (provider.report_to_jms)
    if report_opts:
        found, rest = report_properties(report_opts)
        if rest:
            raise Fallback                 # reported
        props += [(prop, trusted_value(_INT, value)) for prop, value in found]
    # JMS_IBM_Format/Character_Set/Encoding (provider.body_description_to_jms)
    body_type = body_type_of(msd, body_format) or BodyType.BYTES
    text_ccsid = body_ccsid if body_ccsid > 0 else options.default_ccsid
    encoding_default = encoding if fmt == C.MQFMT_RF_HEADER_2 else C.MQENC_NORMAL
    if body_format != BODY_TABLE[body_type][1] or text_ccsid != C.CCSID_UTF8 or body_encoding != encoding_default:
        for name, value in body_description(body_type, body_format, text_ccsid, body_encoding, encoding_default):
            props.append((name, trusted_value(_INT if name == ENCODING_PROPERTY else _STRING, value)))
    # usr folder (properties.usr_to_properties)
    for name, dt, nil, value, junk in usr:
        if junk:
            raise Fallback
        kind = _usr_kinds.get((name, dt))
        if kind is None:
            kind = _usr_kind(name, dt)
        if nil:                             # a null String or byte[]; a null primitive is reported
            if value or not (kind is _STRING or dt[1:-1] in ("string", "bin.hex")):
                raise Fallback
            props.append((name, trusted_value(_BYTES if dt[1:-1] == "bin.hex" else _STRING, None)))
            continue
        if kind is _STRING:
            made = _new(JavaValue)
            _set(made, "type", _STRING)
            _set(made, "value", _unescape(value) if "&" in value else value)
        elif kind.__class__ is tuple:       # an integer type and its range
            text = value if value.isdigit() and value.isascii() else value.strip(XML_WS)
            if not INT_RE.fullmatch(text):
                raise Fallback             # an error
            number = int(text)
            if not kind[1] <= number <= kind[2]:
                raise Fallback             # an error
            made = _new(JavaValue)
            _set(made, "type", kind[0])
            _set(made, "value", number)
        else:
            made = _BOOLEANS.get(value.strip(XML_WS)) if kind is _BOOLEAN else None
            if made is None:
                made = decode_value(dt[1:-1], _unescape(value), name=name, structure="usr folder property")
        props.append((name, made))
    # body class and body (bodies.body_class, bodies.body_to_jms)
    jbody: Any
    if body_type is BodyType.BYTES:
        jbody = BytesBody(body)
    elif body_type is BodyType.OBJECT:
        jbody = ObjectBody(body or None)
    elif body_type is BodyType.MESSAGE:
        if body:
            raise Fallback                 # reported
        jbody = NoBody()
    else:
        codec = codec_for(text_ccsid, C.integer_byte_order(body_encoding))
        if codec is None:
            raise Fallback
        try:
            text = body.decode(codec)
        except UnicodeDecodeError:
            raise Fallback from None
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
    except (Fallback, MappingError):
        return None
