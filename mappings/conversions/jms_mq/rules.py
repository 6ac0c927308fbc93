"""The JMS <-> IBM MQ field rules of the model path: one :class:`Rule` per field pair, both directions side
by side (``to_mq`` fills MQMD keyword arguments and jms/mcd folder elements, ``to_jms`` reads an Mqmd and
the folders), and :data:`RULES`, the table both directions run. Tables and value forms: spec.
"""
from __future__ import annotations

from collections.abc import Callable

from mappings.conversions.jms_mq.context import Rule, ToJms, ToMq, mqchar
from mappings.conversions.jms_mq.provider import (
    body_description_to_jms,
    body_description_to_mq,
    ibm_properties_to_jms,
    ibm_properties_to_mq,
    report_to_jms,
    report_to_mq,
)
from mappings.conversions.jms_mq.spec import (
    DELIVERY_MODE_FOR,
    FORMAT_PROPERTY,
    GROUP_FLAGS,
    ID_HEX48,
    JMS,
    LAST_IN_GROUP,
    LONG_MAX,
    LONG_MIN,
    MCD,
    MQLONG_MAX,
    MQPS,
    MSD_TO_BODY,
    PERSISTENCE_FOR,
    XML_WS,
    bytes_to_id,
    correl_bytes,
    correl_id_alone,
    id_to_bytes,
    mcd_type_elements,
    mcd_uri,
    mqchar_form,
    padded24,
    parse_uri,
    put_date_time,
    put_epoch_ms,
)
from mappings.errors import MappingError
from mappings.jms.model import (
    DeliveryMode,
    Destination,
    DestinationKind,
    JavaType,
    JavaValue,
)
from mappings.mq import constants as C
from mappings.report import Change, Finding

# --------------------------------------------------------------------------------------------------
# The rules, one per field pair. Each cites its WMB rows and IBM lines.
# --------------------------------------------------------------------------------------------------
# JMSMessageID <-> MsgId. WMB JMS->MQMD "JMSMessageID | MsgId", MQMD->JMS "MsgId | JMSMessageID"; IBM out.
MID_NOT_ID = Finding(Change.DROPPED, "JMSMessageID", "not 'ID:' + 48 hex digits: MsgId left MQMI_NONE (MQ assigns "
                     "one)")
MID_ZERO = Finding(Change.DROPPED, "JMSMessageID", "all zero is MQMI_NONE: MQ assigns a MsgId")
MID_UPPER = Finding(Change.COERCED, "JMSMessageID", "hex digits read back in lower case")


def message_id_bytes(mid: str) -> tuple[bytes, Finding | None]:
    """The MsgId of a JMSMessageID, and the finding when it does not read back as it is (also encode's)."""
    if ID_HEX48.fullmatch(mid) is None:
        return C.MQMI_NONE, MID_NOT_ID
    digits = mid[3:]
    raw = bytes.fromhex(digits)
    if raw == C.MQMI_NONE:
        return raw, MID_ZERO
    return raw, None if digits.lower() == digits else MID_UPPER     # bytes_to_id writes lower case


def _message_id_to_mq(ctx: ToMq) -> None:
    mid = ctx.message.headers.message_id
    if mid is not None:
        ctx.md["msg_id"], finding = message_id_bytes(mid)
        if finding is not None:
            ctx.report.findings.append(finding)


def _message_id_to_jms(ctx: ToJms) -> None:
    if ctx.md.msg_id != C.MQMI_NONE:
        ctx.headers["message_id"] = bytes_to_id(ctx.md.msg_id)


# JMSCorrelationID <-> CorrelId + jms/Cid. WMB JMS->MQMD "JMSCorrelationID | CorrelId", JMS->jms folder
# "JMSCorrelationID | Cid", MQMD->JMS "CorrelId | JMSCorrelationID", jms folder->JMS "Cid | JMSCorrelationID";
# IBM out (the ID: form, other strings padded/cut), IBM in (Cid wins; null when CorrelId is all zero).
CID_CUT = Finding(Change.TRUNCATED, "MQMD.CorrelId", "first 24 bytes of JMSCorrelationID (jms/Cid keeps it whole)")


def _correlation_id_to_mq(ctx: ToMq) -> None:
    cid = ctx.message.headers.correlation_id
    if cid is None:
        return
    if isinstance(cid, bytes):
        ctx.md["correl_id"] = cid[:24].ljust(24, b"\x00")
        if len(cid) > 24:
            ctx.report.truncated("JMSCorrelationID", "MQMD.CorrelId holds 24 bytes")
        ctx.report.coerced("JMSCorrelationID", "the bytes form goes to CorrelId and reads back as the 'ID:' string")
        return
    if not correl_id_alone(cid):
        ctx.jms["Cid"] = cid
    ctx.md["correl_id"], cut = correl_bytes(cid)
    if cut:
        ctx.report.findings.append(CID_CUT)


def _correlation_id_to_jms(ctx: ToJms) -> None:
    present, cid = ctx.folder_value(JMS, "Cid")
    correl = ctx.md.correl_id
    if present:
        ctx.headers["correlation_id"] = cid
        if correl != C.MQCI_NONE and (cid is None or correl_bytes(cid)[0] != correl):
            ctx.report.dropped("MQMD.CorrelId", "differs from jms/Cid, which wins (IBM MQ JMS mapping)")
    elif correl != C.MQCI_NONE:
        ctx.headers["correlation_id"] = bytes_to_id(correl)


# JMSPriority <-> Priority + jms/Pri. WMB JMS->MQMD "JMSPriority | Priority", JMS->jms folder "JMSPriority |
# Pri", MQMD->JMS "Priority | JMSPriority", jms folder->JMS "Pri | JMSPriority"; IBM out (Pri only when not 4),
# IBM in (JMSPriority from MQMD.Priority). See DECISIONS for the order of the two sources.
def _priority_to_mq(ctx: ToMq) -> None:
    p = ctx.message.headers.priority
    as_q_def = ctx.options.priority_as_q_def and p == 4
    ctx.md["priority"] = C.MQPRI_PRIORITY_AS_Q_DEF if as_q_def else p
    if p != 4:
        ctx.jms["Pri"] = str(p)


def _priority_to_jms(ctx: ToJms) -> None:
    pri = ctx.folder_int("Pri", 0, 9)
    md_pri = ctx.md.priority
    if 0 <= md_pri <= 9:
        ctx.headers["priority"] = md_pri
        if pri is not None and pri != md_pri:
            ctx.report.dropped("jms/Pri", f"MQMD.Priority {md_pri} wins over jms/Pri {pri} (IBM MQ JMS mapping)")
    elif pri is not None:
        ctx.headers["priority"] = pri
    elif md_pri > 9:
        ctx.headers["priority"] = 9
        ctx.report.coerced("MQMD.Priority", f"{md_pri} is above the JMS range: 9")
    else:
        ctx.headers["priority"] = 4
        ctx.report.defaulted("JMSPriority", f"MQMD.Priority {md_pri} is not a priority: 4, the JMS default")



def _delivery_mode_to_mq(ctx: ToMq) -> None:
    mode = ctx.message.headers.delivery_mode
    ctx.md["persistence"] = PERSISTENCE_FOR[mode]
    ctx.jms["Dlv"] = str(int(mode))


def _delivery_mode_to_jms(ctx: ToJms) -> None:
    dlv = ctx.folder_int("Dlv", 1, 2)
    persistence = ctx.md.persistence
    if dlv is not None:
        ctx.headers["delivery_mode"] = DeliveryMode(dlv)
        if persistence in DELIVERY_MODE_FOR and DELIVERY_MODE_FOR[persistence] != dlv:
            ctx.report.dropped("MQMD.Persistence",
                               f"{persistence} differs from jms/Dlv {dlv}, which wins (IBM MQ JMS mapping)")
    elif persistence in DELIVERY_MODE_FOR:
        ctx.headers["delivery_mode"] = DELIVERY_MODE_FOR[persistence]
    else:   # the same rule as MQ Telemetry's side (mqtt_mq): C.PERSISTENCE_WHEN_UNRESOLVED
        mode = DELIVERY_MODE_FOR[C.PERSISTENCE_WHEN_UNRESOLVED]
        ctx.headers["delivery_mode"] = mode
        ctx.report.defaulted("JMSDeliveryMode", f"MQMD.Persistence {persistence} is unresolved: {mode.name}, as "
                             "IBM MQ's default queues are DEFPSIST(NO)")


# JMSExpiration <-> Expiry + jms/Exp. WMB JMS->jms folder "JMSExpiration | Exp", MQMD->JMS "Expiry |
# JMSExpiration"; IBM out (Expiry = TTL/100 in tenths, -1 unlimited, -1 with Exp for a TTL beyond an MQLONG),
# IBM in (Exp). See DECISIONS.
def _expiration_to_mq(ctx: ToMq) -> None:
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
    if tenths > MQLONG_MAX:
        ctx.md["expiry"] = C.MQEI_UNLIMITED
        ctx.report.coerced("MQMD.Expiry", "time to live beyond an MQLONG of tenths: unlimited (jms/Exp keeps it)")
    else:
        ctx.md["expiry"] = tenths


def _expiration_to_jms(ctx: ToJms) -> None:
    exp = ctx.folder_int("Exp", LONG_MIN, LONG_MAX)
    expiry = ctx.md.expiry
    if exp is not None:
        ctx.headers["expiration"] = exp
    elif expiry > 0:
        ctx.headers["expiration"] = ctx.now_ms + expiry * 100
    elif expiry != C.MQEI_UNLIMITED:
        ctx.report.coerced("MQMD.Expiry", f"{expiry} is not a time to live: JMSExpiration 0 (never)")



def _timestamp_to_mq(ctx: ToMq) -> None:
    ts = ctx.message.headers.timestamp
    if ts == 0:
        return
    ctx.jms["Tms"] = str(ts)
    put = put_date_time(ts)
    if put is None:
        ctx.report.dropped("MQMD.PutDate", f"JMSTimestamp {ts} is outside years 1..9999 (jms/Tms keeps it)")
    else:
        ctx.md["put_date"], ctx.md["put_time"] = put


def _timestamp_to_jms(ctx: ToJms) -> None:
    tms = ctx.folder_int("Tms", LONG_MIN, LONG_MAX)
    date, time = ctx.md.put_date.strip(" "), ctx.md.put_time.strip(" ")
    if tms is not None:
        ctx.headers["timestamp"] = tms
        if date and put_date_time(tms) != (date, time):
            ctx.report.dropped("MQMD.PutDate", f"PutDate/PutTime {date}/{time} differ from jms/Tms, which wins "
                               "(IBM MQ JMS mapping)")
    elif date or time:
        ctx.headers["timestamp"] = put_epoch_ms(date, time)
        if ctx.headers["timestamp"] == 0:
            ctx.report.coerced("MQMD.PutDate", "the epoch itself: JMSTimestamp 0 means 'not set'")



def _reply_to_to_mq(ctx: ToMq) -> None:
    dest = ctx.message.headers.reply_to
    if dest is None:
        return
    ctx.jms["Rto"] = dest.uri
    if dest.kind is DestinationKind.TOPIC:
        ctx.report.dropped("MQMD.ReplyToQ", "a topic reply-to has no MQMD form (jms/Rto keeps it)")
        return
    if dest.options:
        ctx.report.dropped("MQMD.ReplyToQ", "destination options travel in jms/Rto only")
    ctx.md["reply_to_q"] = mqchar(ctx, dest.name, "ReplyToQ", C.MQ_Q_NAME_LENGTH, "MQMD.ReplyToQ")
    ctx.md["reply_to_q_mgr"] = mqchar(ctx, dest.queue_manager, "ReplyToQMgr", C.MQ_Q_MGR_NAME_LENGTH,
                                       "MQMD.ReplyToQMgr")



def _reply_to_to_jms(ctx: ToJms) -> None:
    present, rto = ctx.folder_value(JMS, "Rto")
    q, qm = ctx.md.reply_to_q.strip(" "), ctx.md.reply_to_q_mgr.strip(" ")   # blanks only (MQMD docs)
    if present:
        dest = parse_uri(rto, "Rto")
        ctx.headers["reply_to"] = dest
        if q and (dest.kind is DestinationKind.TOPIC or mqchar_form(dest.name, 48) != q
                  or dest.queue_manager and mqchar_form(dest.queue_manager, 48) != qm):
            ctx.report.dropped("MQMD.ReplyToQ", f"{qm}/{q} differs from jms/Rto, which wins (IBM MQ JMS mapping)")
    elif q:
        if "/" in qm or "?" in qm:   # legal in an MQ name, but queue://QM/Q cannot carry it
            ctx.report.dropped("MQMD.ReplyToQMgr", f"{qm!r} cannot be written in a queue:// URI: queue:///{q}")
            qm = ""
        ctx.headers["reply_to"] = Destination.queue(q, qm)



# JMSDestination <-> jms/Dst. WMB JMS->jms folder "JMSDestination | Dst", jms folder->JMS "Dst |
# JMSDestination"; IBM in (else mqps/Top as topic://<Top>; Dst wins).
def _destination_to_mq(ctx: ToMq) -> None:
    dest = ctx.message.headers.destination
    if dest is not None:
        ctx.jms["Dst"] = dest.uri


def _destination_to_jms(ctx: ToJms) -> None:
    present, dst = ctx.folder_value(JMS, "Dst")
    if present:
        ctx.headers["destination"] = parse_uri(dst, "Dst")
        return
    has_top, top = ctx.folder_value(MQPS, "Top")
    if has_top and top:
        ctx.headers["destination"] = Destination.topic(top)


# JMSRedelivered / JMSXDeliveryCount <-> BackoutCount. WMB JMS->MQMD "JMSXDeliveryCount | BackoutCount - 1",
# MQMD->JMS "BackoutCount = 0 | JMSRedelivered = false", "BackoutCount > 0 | JMSRedelivered = true"; IBM in
# (JMSXDeliveryCount = BackoutCount + 1).
def backout_count(count: int | None, redelivered: bool, findings: list[Finding]) -> int:
    """BackoutCount for JMSXDeliveryCount (None: absent) and JMSRedelivered, with its findings (also encode's)."""
    if count is None:
        backout = 1 if redelivered else 0
        findings.append(Finding(Change.DEFAULTED, "JMSXDeliveryCount", f"absent: BackoutCount {backout} from "
                                f"JMSRedelivered, read back as JMSXDeliveryCount {backout + 1}"))
    elif count < 1:
        raise MappingError(f"{count} is not a delivery count (1 or more)", structure="JMS property",
                           field="JMSXDeliveryCount")
    else:
        backout = count - 1
    if (backout > 0) != redelivered:
        findings.append(Finding(Change.COERCED, "JMSRedelivered", f"reads back as {backout > 0} (BackoutCount "
                                f"{backout})"))
    return backout


def _delivery_count_to_mq(ctx: ToMq) -> None:
    count = ctx.prop("JMSXDeliveryCount", JavaType.INT)
    ctx.md["backout_count"] = backout_count(count, ctx.message.headers.redelivered, ctx.report.findings)


def _delivery_count_to_jms(ctx: ToJms) -> None:
    backout = ctx.md.backout_count
    if backout < 0:
        ctx.report.coerced("MQMD.BackoutCount", f"{backout} is negative: 0")
        backout = 0
    ctx.headers["redelivered"] = backout > 0
    ctx.props.append(("JMSXDeliveryCount", JavaValue(JavaType.INT, min(backout + 1, MQLONG_MAX))))


# JMSXUserID <-> UserIdentifier, JMSXAppID <-> PutApplName. WMB JMS->MQMD "JMSUser | UserIdentifier",
# "JMSQApplid | PutApplName", MQMD->JMS "UserIdentifier | JMSUser", "PutApplName | JMSApplid"; IBM out, IBM in
# (trimmed).
def _mqchar_property_rule(prop: str, attr: str, mqmd_field: str, length: int) -> tuple[
        Callable[[ToMq], None], Callable[[ToJms], None]]:
    def to_mq(ctx: ToMq) -> None:
        value = ctx.prop(prop, JavaType.STRING)
        if value is not None:
            if value.strip(" ") == "":
                ctx.report.dropped(prop, f"blank: MQMD.{mqmd_field} blank reads back as no {prop}")
            ctx.md[attr] = mqchar(ctx, value, mqmd_field, length, prop)

    def to_jms(ctx: ToJms) -> None:
        value = getattr(ctx.md, attr).strip(" ")
        if value:
            ctx.props.append((prop, JavaValue(JavaType.STRING, value)))

    return to_mq, to_jms


_user_id_to_mq, _user_id_to_jms = _mqchar_property_rule("JMSXUserID", "user_identifier", "UserIdentifier",
                                                        C.MQ_USER_ID_LENGTH)
_app_id_to_mq, _app_id_to_jms = _mqchar_property_rule("JMSXAppID", "put_appl_name", "PutApplName",
                                                      C.MQ_PUT_APPL_NAME_LENGTH)



def _group_to_mq(ctx: ToMq) -> None:
    gid = ctx.prop("JMSXGroupID", JavaType.STRING)
    seq = ctx.prop("JMSXGroupSeq", JavaType.INT)
    last = ctx.prop(LAST_IN_GROUP, JavaType.BOOLEAN)
    dest = ctx.message.headers.destination
    if dest is not None and dest.kind is DestinationKind.TOPIC:
        # A publication is no MQ group: IBM MQ classes for JMS write both in the jms folder only, and no
        # MsgFlags (the jms folder has no element for the last-in-group flag)
        if gid is not None:
            ctx.jms["Gid"] = gid
        if seq is not None:
            ctx.jms["Seq"] = str(seq)
        if last is not None:
            ctx.report.dropped(LAST_IN_GROUP, "a publication is no MQ group: no MsgFlags (IBM MQ JMS mapping)")
        ctx.md["msg_flags"] = 0
        return
    flags = _mqmd_group(ctx, gid, seq)
    if last:
        flags |= C.MQMF_LAST_MSG_IN_GROUP
    elif last is False:
        ctx.report.dropped(LAST_IN_GROUP, "false is the MQ default: reads back as absent")
    if last and gid is None and seq is None:
        ctx.report.defaulted("JMSXGroupSeq", "absent: reads back as 1 (MQMF_LAST_MSG_IN_GROUP)")
    ctx.md["msg_flags"] = flags


def _mqmd_group(ctx: ToMq, gid: str | None, seq: int | None) -> int:
    """Point to point: GroupId and MsgSeqNumber, as IBM MQ classes for JMS write them; jms/Gid and jms/Seq only
    for a value the MQMD cannot give back (IBM writes none and loses it)."""
    flags = 0
    if gid is not None:
        raw = id_to_bytes(gid)
        if raw is not None and raw != C.MQGI_NONE:
            ctx.md["group_id"] = raw
            if gid != bytes_to_id(raw):
                ctx.report.coerced("JMSXGroupID", "hex digits read back in lower case")
        else:
            ctx.jms["Gid"] = gid
            ctx.md["group_id"], cut = padded24(gid)
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
    return flags


def _group_to_jms(ctx: ToJms) -> None:
    md = ctx.md
    in_group = bool(md.msg_flags & GROUP_FLAGS)
    has_gid, gid = ctx.folder_value(JMS, "Gid")
    seq = ctx.folder_int("Seq", -(2**31), MQLONG_MAX)
    if has_gid:
        if gid is not None:
            ctx.props.append(("JMSXGroupID", JavaValue(JavaType.STRING, gid)))
    elif in_group and md.group_id != C.MQGI_NONE:
        ctx.props.append(("JMSXGroupID", JavaValue(JavaType.STRING, bytes_to_id(md.group_id))))
    elif md.group_id != C.MQGI_NONE:
        ctx.report.dropped("MQMD.GroupId", "not in a group (no MQMF_MSG_IN_GROUP): not carried (IBM MQ JMS mapping)")
    if seq is not None:
        ctx.props.append(("JMSXGroupSeq", JavaValue(JavaType.INT, seq)))
    elif in_group:
        ctx.props.append(("JMSXGroupSeq", JavaValue(JavaType.INT, md.msg_seq_number)))
    elif md.msg_seq_number != 1:
        ctx.report.dropped("MQMD.MsgSeqNumber",
                           "not in a group (no MQMF_MSG_IN_GROUP): not carried (IBM MQ JMS mapping)")
    if md.msg_flags & C.MQMF_LAST_MSG_IN_GROUP:
        ctx.props.append((LAST_IN_GROUP, JavaValue(JavaType.BOOLEAN, True)))


# JMSType <-> mcd/Type (or mcd Msd/Set/Type/Fmt for an mcd:// URI, spec.parse_mcd_uri). IBM out JMSType row, IBM in
# "JMSType comes from mcd.Type/Set/Fmt". The body class side of mcd (Msd) is in bodies.
def _type_to_mq(ctx: ToMq) -> None:
    jms_type = ctx.message.headers.type
    if jms_type is not None:
        fmt = ctx.message.properties.get(FORMAT_PROPERTY)       # checked and written by provider.body_description
        body_format = fmt.value[:8].ljust(8) if fmt is not None and isinstance(fmt.value, str) else None
        elements, back = mcd_type_elements(jms_type, ctx.message.body_type, body_format)
        ctx.mcd.update(elements)
        if back is not None:
            ctx.report.coerced("JMSType", f"written as mcd elements: reads back as {back!r}")


def _type_to_jms(ctx: ToJms) -> None:
    _, msd = ctx.folder_value(MCD, "Msd")
    parts = {name: ctx.folder_value(MCD, name)[1] for name in ("Set", "Type", "Fmt") if name in ctx.mcd}
    if msd and msd.strip(XML_WS).lower() not in MSD_TO_BODY:
        ctx.headers["type"] = mcd_uri(msd.strip(XML_WS), parts.get("Set"), parts.get("Type"), parts.get("Fmt"))
        return
    if "Type" in parts:
        ctx.headers["type"] = parts["Type"]
    for name in ("Set", "Fmt"):
        if name in parts:
            ctx.report.dropped(f"mcd/{name}", "only read with a non-JMS Msd (JMSType mcd:// URI)")


RULES: tuple[Rule, ...] = (
    Rule("JMSDestination", (), ("jms/Dst", "mqps/Top"), "WMB Dst rows; IBM in",
         _destination_to_mq, _destination_to_jms),
    Rule("JMSDeliveryMode", ("Persistence",), ("jms/Dlv",), "WMB Persistence/Dlv rows; IBM out, IBM in",
         _delivery_mode_to_mq, _delivery_mode_to_jms),
    Rule("JMSExpiration", ("Expiry",), ("jms/Exp",), "WMB Expiry/Exp rows; IBM out, IBM in",
         _expiration_to_mq, _expiration_to_jms),
    Rule("JMSPriority", ("Priority",), ("jms/Pri",), "WMB Priority/Pri rows; IBM out, IBM in",
         _priority_to_mq, _priority_to_jms),
    Rule("JMSTimestamp", ("PutDate", "PutTime"), ("jms/Tms",), "WMB PutDate, PutTime/Tms rows; IBM in",
         _timestamp_to_mq, _timestamp_to_jms),
    Rule("JMSMessageID", ("MsgId",), (), "WMB MsgId rows; IBM out", _message_id_to_mq, _message_id_to_jms),
    Rule("JMSCorrelationID", ("CorrelId",), ("jms/Cid",), "WMB CorrelId/Cid rows; IBM out, IBM in",
         _correlation_id_to_mq, _correlation_id_to_jms),
    Rule("JMSReplyTo", ("ReplyToQ", "ReplyToQMgr"), ("jms/Rto",), "WMB Rto rows; IBM out, IBM in",
         _reply_to_to_mq, _reply_to_to_jms),
    Rule("JMS_IBM_MsgType, JMS_IBM_Feedback, JMS_IBM_PutApplType", ("MsgType", "Feedback", "PutApplType"), (),
         "IBM out JMS_IBM_* rows", ibm_properties_to_mq, ibm_properties_to_jms),
    Rule("JMSType", (), ("mcd/Type", "mcd/Set", "mcd/Fmt"), "IBM out JMSType row, IBM in", _type_to_mq, _type_to_jms),
    Rule("JMSRedelivered, JMSXDeliveryCount", ("BackoutCount",), (), "WMB BackoutCount rows; IBM in",
         _delivery_count_to_mq, _delivery_count_to_jms),
    Rule("JMSXUserID", ("UserIdentifier",), (), "WMB JMSUser rows; IBM out, IBM in", _user_id_to_mq, _user_id_to_jms),
    Rule("JMSXAppID", ("PutApplName",), (), "WMB JMSQApplid/JMSApplid rows; IBM out, IBM in",
         _app_id_to_mq, _app_id_to_jms),
    Rule("JMSXGroupID, JMSXGroupSeq, JMS_IBM_Last_Msg_In_Group", ("GroupId", "MsgSeqNumber", "MsgFlags"),
         ("jms/Gid", "jms/Seq"), "WMB GroupId/MsgSeqNumber rows; IBM out, IBM in", _group_to_mq, _group_to_jms),
    Rule("JMS_IBM_Report_*", ("Report",), (), "IBM MQ docs 'Mapping JMS provider-specific fields'",
         report_to_mq, report_to_jms),
    Rule("JMS_IBM_Format, JMS_IBM_Character_Set, JMS_IBM_Encoding", ("Format", "CodedCharSetId", "Encoding"), (),
         "IBM MQ docs 'Mapping JMS provider-specific fields'; IBM in note 3", body_description_to_mq,
         body_description_to_jms),
)
#: (JMS field, MQMD fields, RFH2 fields) written by JMS -> MQ, and read by MQ -> JMS, in rule order.
JMS_TO_MQ: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = tuple(
    (r.jms_field, r.mqmd_fields, tuple(f for f in r.rfh2_fields if f != "mqps/Top")) for r in RULES)
MQ_TO_JMS: tuple[tuple[tuple[str, ...], tuple[str, ...], str], ...] = tuple(
    (r.mqmd_fields, r.rfh2_fields, r.jms_field) for r in RULES)
