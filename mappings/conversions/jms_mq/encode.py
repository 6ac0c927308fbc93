"""JMS message -> IBM MQ message bytes without the MqMessage model: the bytes path of jms_to_mq_bytes.

One ``struct.pack`` of the whole MQMD v2, folder XML written as text, and what repeats from message to
message cached: the mcd folder per (body type, JMSType), the escaped ``Dst`` per destination, the ``Rto``
element and the ReplyToQ/ReplyToQMgr fields per reply-to destination, the UserIdentifier/PutApplName fields
per value, the usr element tags per (name, type). Each step names the rule of the model path it writes
the same bytes and findings as (rules, properties, bodies). A message with any other finding, or an
error, raises Fallback inside and gives None: the model path then runs (tests/test_jms_mq_fast.py holds
the two to the same bytes, findings and errors).
"""
from __future__ import annotations

import re
from typing import Any

from mappings.conversions.jms_mq.properties import CHAR_AS_STRING
from mappings.conversions.jms_mq.provider import ibm_default_finding
from mappings.conversions.jms_mq.rules import (
    CID_CUT,
    backout_count,
    message_id_bytes,
)
from mappings.conversions.jms_mq.spec import (
    BODY_TABLE,
    IBM_MQMD_PROPERTIES,
    MAPPED_PROPERTIES,
    MCD_ORDER,
    MQLONG_MAX,
    PERSISTENCE_FOR,
    JmsToMqOptions,
    correl_bytes,
    correl_id_alone,
    mcd_type_elements,
    usr_problem,
)
from mappings.conversions.jms_mq.wire import LONG, MQMD_V2, RFH2_FIXED, Bounded, Fallback, day_put_date
from mappings.errors import MappingError
from mappings.jms.bodies import encode_stream
from mappings.jms.model import (
    BodyType,
    BytesBody,
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
from mappings.jms.typed_xml import TYPE_TO_DT, escape_attr, float_range_problem, format_float
from mappings.mq import constants as C
from mappings.mq.ccsid import codec_for
from mappings.report import Change, ConversionReport, Finding

__all__ = ["jms_to_mq_bytes_fast"]

# rfh2.escape_text refuses these (and typed_xml.xml_char_problem the same set): the model path raises.
_BAD_XML_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")
_TEXT_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;"})


def _escape(text: str) -> str:
    """rfh2.escape_text, except that a character XML cannot carry means 'the model path decides'."""
    if _BAD_XML_CHARS.search(text):
        raise Fallback
    return text.translate(_TEXT_ESCAPES)


def _pad4(data: bytes) -> bytes:
    """NameValueData is padded with blanks to a multiple of 4 (rfh2.encode_folder)."""
    return data + b"   "[: -len(data) % 4]


def _mqchar_field(value: str, length: int) -> bytes:
    """The MQCHAR bytes of a value context.mqchar writes without a finding; otherwise Fallback."""
    try:
        raw = value.encode("latin-1")
    except UnicodeEncodeError:
        raise Fallback from None
    if len(raw) > length or b"\x00" in raw or value != value.strip(" "):
        raise Fallback
    return raw.ljust(length, b" ")


class _Writer:
    """What one JmsToMqOptions fixes: byte order, MQMD constants, body codec."""

    __slots__ = ("order", "encoding", "body_ccsid", "codec", "as_q_def", "md_pack", "rfh_pack", "long_pack")

    def __init__(self, options: JmsToMqOptions) -> None:
        for value in (options.encoding, options.body_ccsid):
            if type(value) is not int or not -(2**31) <= value <= MQLONG_MAX:
                raise Fallback            # the model path names the field
        self.order = C.integer_byte_order(options.encoding)
        self.encoding = options.encoding
        self.body_ccsid = options.body_ccsid
        self.codec = codec_for(options.body_ccsid, self.order)
        self.as_q_def = options.priority_as_q_def
        self.md_pack = MQMD_V2[self.order].pack
        self.rfh_pack = RFH2_FIXED[self.order].pack
        self.long_pack = LONG[self.order].pack


_writers: dict[JmsToMqOptions, _Writer] = {}
_mcd_cache: Bounded = Bounded()        # (body type, JMSType) -> mcd folder bytes (padded)
_dst_cache: Bounded = Bounded()        # Destination -> "<Dst>..</Dst>"
_rto_cache: Bounded = Bounded()        # Destination -> ("<Rto>..</Rto>", ReplyToQ bytes, ReplyToQMgr bytes)
_mqchar_cache: Bounded = Bounded()     # (value, length) -> MQCHAR bytes
_usr_tags: Bounded = Bounded()         # (name, type) -> ("<name dt='..'>", "</name>") or a dropped detail

#: DeliveryMode -> (MQMD Persistence, jms/Dlv element): rules._delivery_mode_to_mq
_PER_BYTE = {mode: (persistence, f"<Dlv>{int(mode)}</Dlv>") for mode, persistence in PERSISTENCE_FOR.items()}
#: spec.IBM_MQMD_PROPERTIES, in rule order
_IBM_FIELDS = dict(IBM_MQMD_PROPERTIES)
_BLANK48 = b" " * 48
_BLANK12 = b" " * 12
_BLANK28 = b" " * 28
_BLANK8 = b" " * 8
#: dt of a usr element per type (String has none; char is sent as String)
_USR_DT = {jtype: dt for jtype, dt in TYPE_TO_DT.items() if dt is not None and jtype is not JavaType.CHAR}
_INTEGER_TYPES = frozenset({JavaType.BYTE, JavaType.SHORT, JavaType.INT, JavaType.LONG})


def _mcd_folder(body_type: BodyType, jms_type: str | None) -> bytes:
    """model.jms_to_mq's mcd folder: Msd from BODY_TABLE, then rules._type_to_mq; elements in MCD_ORDER."""
    key = (body_type, jms_type)
    found = _mcd_cache.get(key)
    if found is not None:
        return found
    mcd = {"Msd": BODY_TABLE[body_type][0]}
    if jms_type is not None:
        elements, back = mcd_type_elements(jms_type, body_type)
        if back is not None:
            raise Fallback                 # reported (coerced)
        mcd.update(elements)
    inner = "".join(f"<{n}>{_escape(mcd[n])}</{n}>" for n in MCD_ORDER if n in mcd)
    return _mcd_cache.put(key, _pad4(f"<mcd>{inner}</mcd>".encode()))


def _dst(dest: Destination) -> str:
    found = _dst_cache.get(dest)
    if found is None:
        found = _dst_cache.put(dest, f"<Dst>{_escape(dest.uri)}</Dst>")
    return found


def _rto(dest: Destination) -> tuple[str, bytes, bytes]:
    """rules._reply_to_to_mq for a queue without options whose names fit the MQMD as they are."""
    found = _rto_cache.get(dest)
    if found is None:
        if dest.kind is not DestinationKind.QUEUE or dest.options:
            raise Fallback                 # reported: a topic or options have no MQMD form
        found = _rto_cache.put(dest, (f"<Rto>{_escape(dest.uri)}</Rto>",
                                      _mqchar_field(dest.name, C.MQ_Q_NAME_LENGTH),
                                      _mqchar_field(dest.queue_manager, C.MQ_Q_MGR_NAME_LENGTH)))
    return found


def _mqchar(value: object, length: int) -> bytes:
    """rules._mqchar_property_rule's to_mq (JMSXUserID, JMSXAppID) for a value without findings."""
    key = (value, length)
    found = _mqchar_cache.get(key)
    if found is None:
        if value.__class__ is not str or value.strip(" ") == "":
            raise Fallback                 # null, another type (an error) or blank (reported)
        found = _mqchar_cache.put(key, _mqchar_field(value, length))
    return found


def _usr_tag(name: str, jtype: JavaType) -> tuple[str, str] | str:
    """Open and close tags of a usr element (rfh2.element_xml), or why the name is dropped (spec.usr_problem)."""
    key = (name, jtype)
    found = _usr_tags.get(key)
    if found is None:
        found = usr_problem(name)
        if found is None:
            dt = _USR_DT.get(jtype)
            found = (f"<{name}>" if dt is None else f"<{name} dt='{dt}'>", f"</{name}>")
        _usr_tags.put(key, found)
    return found


def _usr_element(name: str, value: JavaValue, findings: list[Finding]) -> str | None:
    """properties.properties_to_usr for one property not consumed by a rule (typed_xml.encode_value)."""
    jtype = value.type
    tag = _usr_tag(name, JavaType.STRING if jtype is JavaType.CHAR else jtype)
    if tag.__class__ is str:
        findings.append(Finding(Change.DROPPED, name, tag))  # type: ignore[arg-type]
        return None
    if jtype is JavaType.CHAR:
        findings.append(Finding(Change.COERCED, name, CHAR_AS_STRING))
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
            raise Fallback                 # the model path raises "cannot be written"
        text = format_float(v, jtype)  # type: ignore[arg-type]
    return f"{open_}{text}{close}"


_map_keys: Bounded = Bounded()         # MapMessage key -> its ' name="..."' attribute
_MAP_TEXT_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;"})   # typed_xml.escape_text


def _map_xml(entries: TypedMap) -> str:
    """mappings.jms.bodies.encode_map: ``<map><elt name="k" dt="i4">1</elt>...</map>`` (typed_xml.typed_element)."""
    parts = ["<map>"]
    append = parts.append
    for key, value in entries.pairs:
        attrs = _map_keys.get(key)
        if attrs is None:
            if _BAD_XML_CHARS.search(key):
                raise Fallback             # an error
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
                raise Fallback             # an error
            text = v.translate(_MAP_TEXT_ESCAPES)  # type: ignore[union-attr]
        elif jtype in _INTEGER_TYPES:
            text = str(v)
        elif jtype is JavaType.BOOLEAN:
            text = "1" if v else "0"
        elif jtype is JavaType.BYTES:
            text = v.hex().upper()  # type: ignore[union-attr]
        else:
            if float_range_problem(v, jtype):  # type: ignore[arg-type]
                raise Fallback             # an error
            text = format_float(v, jtype)  # type: ignore[arg-type]
        append(f"<elt{attrs}>{text}</elt>")
    append("</map>")
    return "".join(parts)


def _body_bytes(message: JmsMessage, writer: _Writer) -> bytes:
    """bodies.body_to_mq for the bodies it converts without a finding."""
    body = message.body
    cls = body.__class__
    if cls is TextBody:
        text = body.text  # type: ignore[union-attr]
        if text is None:
            raise Fallback                 # reported: null text
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
            raise Fallback                 # reported
        return body.data or b""  # type: ignore[union-attr]
    else:
        raise Fallback
    if writer.codec is None:
        raise Fallback
    try:
        return text.encode(writer.codec)
    except UnicodeEncodeError:
        raise Fallback from None


def _to_mq(message: JmsMessage, now_ms: int, writer: _Writer) -> tuple[bytes, ConversionReport]:
    headers = message.headers
    if headers.__class__ is not JmsHeaders:
        raise Fallback
    findings: list[Finding] = []
    jms: list[str] = []
    # JMSDestination -> jms/Dst (rules._destination_to_mq)
    dest = headers.destination
    if dest is not None:
        jms.append(_dst(dest))
    # JMSTimestamp -> jms/Tms, PutDate/PutTime (rules._timestamp_to_mq); Tms goes before Dlv (JMS_FOLDER_ORDER)
    ts = headers.timestamp
    if ts:
        jms.append(f"<Tms>{ts}</Tms>")
        day, rem = divmod(ts, 86_400_000)
        put_date = day_put_date(day).encode()
        secs, milli = divmod(rem, 1000)
        put_time = b"%02d%02d%02d%02d" % (secs // 3600, secs // 60 % 60, secs % 60, milli // 10)
    else:
        put_date = put_time = _BLANK8
    # JMSDeliveryMode -> Persistence, jms/Dlv (rules._delivery_mode_to_mq)
    persistence, dlv = _PER_BYTE[headers.delivery_mode]
    jms.append(dlv)
    # JMSExpiration -> Expiry, jms/Exp (rules._expiration_to_mq)
    exp = headers.expiration
    if exp == 0:
        expiry = C.MQEI_UNLIMITED
    else:
        jms.append(f"<Exp>{exp}</Exp>")
        ttl = exp - now_ms
        expiry = -(-ttl // 100)
        if ttl <= 0 or expiry > MQLONG_MAX:
            raise Fallback                 # reported (coerced)
    # JMSPriority -> Priority, jms/Pri (rules._priority_to_mq)
    p = headers.priority
    priority = C.MQPRI_PRIORITY_AS_Q_DEF if writer.as_q_def and p == 4 else p
    if p != 4:
        jms.append(f"<Pri>{p}</Pri>")
    # JMSMessageID -> MsgId (rules._message_id_to_mq)
    mid = headers.message_id
    msg_id = C.MQMI_NONE
    if mid is not None:
        msg_id, finding = message_id_bytes(mid)
        if finding is not None:
            findings.append(finding)
    # JMSCorrelationID -> CorrelId, jms/Cid (rules._correlation_id_to_mq)
    cid = headers.correlation_id
    if cid is None:
        correl_id = C.MQCI_NONE
    elif cid.__class__ is str:
        if not correl_id_alone(cid):  # type: ignore[arg-type]
            jms.append(f"<Cid>{_escape(cid)}</Cid>")  # type: ignore[arg-type]
        correl_id, cut = correl_bytes(cid)  # type: ignore[arg-type]
        if cut:
            findings.append(CID_CUT)
    else:
        raise Fallback                     # the bytes form is reported
    # JMSReplyTo -> jms/Rto, ReplyToQ/ReplyToQMgr (rules._reply_to_to_mq); MsgType follows it (_ibm_properties_to_mq)
    reply_to = headers.reply_to
    if reply_to is None:
        reply_q = reply_qm = _BLANK48
        msg_type = C.MQMT_DATAGRAM
    else:
        rto, reply_q, reply_qm = _rto(reply_to)
        jms.append(rto)
        msg_type = C.MQMT_REQUEST
    # Properties: JMSXDeliveryCount, JMSXUserID, JMSXAppID (rules), the rest to usr (properties.properties_to_usr)
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
                    raise Fallback         # reported, or an error
            elif name == "JMSXUserID":
                if value.type is not JavaType.STRING:
                    raise Fallback
                user_id = _mqchar(value.value, C.MQ_USER_ID_LENGTH)
            elif name == "JMSXAppID":
                if value.type is not JavaType.STRING:
                    raise Fallback
                appl_name = _mqchar(value.value, C.MQ_PUT_APPL_NAME_LENGTH)
            elif name in _IBM_FIELDS:
                if value.type is not JavaType.INT:
                    raise Fallback         # an error (a null int cannot be: JavaValue refuses it)
                ibm[name] = value.value
            else:
                raise Fallback             # the group properties: the model path
            continue
        element = _usr_element(name, value, usr_findings)
        if element is not None:
            usr.append(element)
    # JMS_IBM_MsgType/Feedback/PutApplType -> MsgType/Feedback/PutApplType (rules._ibm_properties_to_mq, rule order)
    feedback = C.MQFB_NONE
    put_appl_type = C.MQAT_NO_CONTEXT
    if ibm:
        defaults = {"JMS_IBM_MsgType": msg_type, "JMS_IBM_Feedback": feedback, "JMS_IBM_PutApplType": put_appl_type}
        for prop, attr in _IBM_FIELDS.items():
            value = ibm.get(prop)
            if value is None:
                continue
            if value == defaults[prop]:
                findings.append(ibm_default_finding(prop, attr, value))
            if prop == "JMS_IBM_MsgType":
                msg_type = value
            elif prop == "JMS_IBM_Feedback":
                feedback = value
            else:
                put_appl_type = value
    # JMSRedelivered / JMSXDeliveryCount -> BackoutCount (rules._delivery_count_to_mq)
    backout = backout_count(count, headers.redelivered, findings)
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
    needs the model path (a finding other than JMSXDeliveryCount defaulted, JMSRedelivered coerced and
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
    except (Fallback, MappingError):
        return None

