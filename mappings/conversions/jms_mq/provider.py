"""The rules of the IBM provider-specific properties (model path): JMS_IBM_MsgType/Feedback/PutApplType <->
MsgType/Feedback/PutApplType, JMS_IBM_Report_* <-> Report, and JMS_IBM_Format/Character_Set/Encoding <-> the body's
Format/CodedCharSetId/Encoding. IBM MQ docs "Mapping JMS provider-specific fields"; tables and value forms: spec."""
from __future__ import annotations

from mappings.conversions.jms_mq.context import ToJms, ToMq, mqchar
from mappings.conversions.jms_mq.spec import (
    BODY_TABLE,
    CHARSET_PROPERTY,
    ENCODING_PROPERTY,
    FORMAT_PROPERTY,
    IBM_MQMD_PROPERTIES,
    REPORT_PROPERTIES,
    body_description,
    body_type_of,
    charset_ccsid,
    charset_name,
    ibm_default,
    report_properties,
)
from mappings.errors import MappingError
from mappings.jms.model import (
    BodyType,
    JavaType,
    JavaValue,
)
from mappings.mq import constants as C
from mappings.mq.message import HEADER_FORMATS
from mappings.report import Change, Finding


def ibm_default_finding(prop: str, attr: str, value: int) -> Finding:
    """A JMS_IBM_* property holding the value MQMD.attr has without it (also encode's)."""
    return Finding(Change.DROPPED, prop, f"{value} is what MQMD.{attr} holds without it: reads back as absent")


def ibm_properties_to_mq(ctx: ToMq) -> None:
    for prop, attr in IBM_MQMD_PROPERTIES:
        default = ibm_default(attr, ctx.md.get("reply_to_q", ""))
        value = ctx.int_prop(prop)
        ctx.md[attr] = default if value is None else value
        if value == default:
            ctx.report.findings.append(ibm_default_finding(prop, attr, value))


def ibm_properties_to_jms(ctx: ToJms) -> None:
    for prop, attr in IBM_MQMD_PROPERTIES:
        value = getattr(ctx.md, attr)
        if value != ibm_default(attr, ctx.md.reply_to_q):
            ctx.props.append((prop, JavaValue(JavaType.INT, value)))



# JMS_IBM_Report_* <-> MQMD.Report (spec.REPORT_PROPERTIES). IBM MQ docs "Mapping JMS provider-specific fields".
_REPORT_NAMES = {value: name for name, value in vars(C).items() if name.startswith("MQRO_") and value}


def body_default_finding(prop: str, value: object, what: str) -> Finding:
    """A JMS_IBM_* property holding what the MQ message says without it: it does not read back."""
    return Finding(Change.DROPPED, prop, f"{value!r} is {what} without it: reads back as absent")


def report_to_mq(ctx: ToMq) -> None:
    report = 0
    for prop, _mask, values in REPORT_PROPERTIES:
        value = ctx.int_prop(prop)
        if value is None:
            continue
        if value == 0:
            ctx.report.findings.append(body_default_finding(prop, 0, "what MQMD.Report holds"))
        elif value in values:
            report |= value
        else:
            allowed = " or ".join(f"{_REPORT_NAMES[v]} ({v})" for v in sorted(values))
            raise MappingError(f"{value} is not {allowed}", structure="JMS property", field=prop)
    ctx.md["report"] = report


def report_to_jms(ctx: ToJms) -> None:
    found, rest = report_properties(ctx.md.report)
    for prop, value in found:
        ctx.props.append((prop, JavaValue(JavaType.INT, value)))
    if rest:
        ctx.report.dropped("MQMD.Report", f"options {rest:#x}: no JMS_IBM_Report_* property carries them")


# JMS_IBM_Format, JMS_IBM_Character_Set, JMS_IBM_Encoding <-> the Format, CodedCharSetId and Encoding of the body
# (RFH2 fields, or MQMD fields without an RFH2). IBM MQ docs "Mapping JMS provider-specific fields", "Mapping IBM MQ
# fields onto JMS fields (incoming messages)" note 3; spec.body_description for what is written on receive.
def body_description_to_mq(ctx: ToMq) -> None:
    fmt = ctx.prop(FORMAT_PROPERTY, JavaType.STRING)
    if fmt is not None:
        text = mqchar(ctx, fmt, "Format", 8, FORMAT_PROPERTY).ljust(8)
        if text in HEADER_FORMATS:
            raise MappingError(f"{fmt!r} names an MQ header: the body would be read as one", structure="JMS property",
                               field=FORMAT_PROPERTY)
        ctx.body["format"] = text
        if text == BODY_TABLE[ctx.message.body_type][1]:
            ctx.report.findings.append(body_default_finding(FORMAT_PROPERTY, fmt, "the Format of this message class"))
    charset = ctx.prop(CHARSET_PROPERTY, JavaType.STRING)
    if charset is not None:
        ccsid = ctx.body["ccsid"] = charset_ccsid(charset)
        if ccsid == C.CCSID_UTF8:
            ctx.report.findings.append(body_default_finding(CHARSET_PROPERTY, charset, "the body's CCSID (1208)"))
        elif charset_name(ccsid) != charset:
            ctx.report.coerced(CHARSET_PROPERTY, f"CCSID {ccsid}: reads back as {charset_name(ccsid)!r}")
    encoding = ctx.int_prop(ENCODING_PROPERTY)
    if encoding is not None:
        ctx.body["encoding"] = encoding
        if encoding == (ctx.options.encoding if ctx.options.with_rfh2 else C.MQENC_NORMAL):
            ctx.report.findings.append(body_default_finding(ENCODING_PROPERTY, encoding, "the body's Encoding"))


def body_description_to_jms(ctx: ToJms) -> None:
    body_type = body_type_of(ctx.mcd.get("Msd"), ctx.body_format) or BodyType.BYTES
    for name, value in body_description(body_type, ctx.body_format, ctx.body_ccsid, ctx.body_encoding,
                                        ctx.encoding_default):
        ctx.props.append((name, JavaValue(JavaType.INT if name == ENCODING_PROPERTY else JavaType.STRING, value)))


