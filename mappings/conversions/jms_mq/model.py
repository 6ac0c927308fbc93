"""JMS message <-> IBM MQ message on the MqMessage model (MQMD + MQRFH2 mcd/jms/usr + body): runs the rules,
the usr folder and the bodies for every message, with a finding for each change and a MappingError for
what cannot be converted. The bytes API (the package's jms_to_mq_bytes / mq_bytes_to_jms) comes here for
the messages the bytes paths decline.
"""
from __future__ import annotations

from mappings.conversions.jms_mq.bodies import body_class, body_to_jms, body_to_mq
from mappings.conversions.jms_mq.context import ToJms, ToMq
from mappings.conversions.jms_mq.properties import properties_to_usr, usr_to_properties
from mappings.conversions.jms_mq.rules import RULES
from mappings.conversions.jms_mq.spec import (
    BODY_TABLE,
    GROUP_FLAGS,
    JMS,
    JMS_FOLDER_ORDER,
    MCD,
    MCD_ORDER,
    MQMD_CONSTANTS,
    MQPS,
    UNMAPPED_MQMD,
    USR,
    JmsToMqOptions,
    MqToJmsOptions,
)
from mappings.errors import MappingError
from mappings.jms.model import (
    JmsHeaders,
    JmsMessage,
    TypedMap,
)
from mappings.mq import constants as C
from mappings.mq.message import MqMessage, build_message
from mappings.mq.mqmd import MQMD_DEFAULT, Mqmd
from mappings.mq.rfh2 import Rfh1, Rfh2, RfhElement, RfhFolder
from mappings.report import ConversionReport


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
# The two directions
# --------------------------------------------------------------------------------------------------
def _check_now(now_ms: object) -> None:
    if isinstance(now_ms, bool) or not isinstance(now_ms, int):
        raise MappingError(f"now_ms must be epoch milliseconds (int), got {now_ms!r}", structure="clock")


def jms_to_mq(message: JmsMessage, *, now_ms: int,
              options: JmsToMqOptions = JmsToMqOptions()) -> tuple[MqMessage, ConversionReport]:
    """The MQ message IBM MQ classes for JMS would put for ``message`` (IBM shape): MQMD v2 with Format
    MQHRF2, then an MQRFH2 with the mcd, jms and (when there are properties) usr folders, then the body.

    ``now_ms`` is the put time (epoch ms): the reference for turning JMSExpiration into MQMD.Expiry.
    """
    _check_now(now_ms)
    if not isinstance(message, JmsMessage):
        raise MappingError("expected a JmsMessage", structure="JMS message")
    report = ConversionReport()
    ctx = ToMq(message, now_ms, options, report)
    msd, body_format = BODY_TABLE[message.body_type]
    ctx.mcd["Msd"] = msd
    for rule in RULES:
        rule.to_mq(ctx)
    body_format = ctx.body.get("format", body_format)
    usr = properties_to_usr(ctx)
    body = body_to_mq(ctx)
    folders = [RfhFolder(MCD, tuple(RfhElement(n, ctx.mcd[n]) for n in MCD_ORDER if n in ctx.mcd)),
               RfhFolder(JMS, tuple(RfhElement(n, ctx.jms[n]) for n in JMS_FOLDER_ORDER if n in ctx.jms))]
    if usr is not None:
        folders.append(usr)
    if not options.with_rfh2:
        return _without_rfh2(ctx, body, body_format), report
    md = Mqmd(encoding=options.encoding, **MQMD_CONSTANTS, **ctx.md)
    rfh = Rfh2(encoding=ctx.body_encoding, coded_char_set_id=ctx.body_ccsid, format=body_format,
               name_value_ccsid=C.CCSID_UTF8, folders=tuple(folders))
    return build_message(md, (rfh,), body, body_format=body_format), report


_HEADER_NAMES = {"destination": "JMSDestination", "delivery_mode": "JMSDeliveryMode", "expiration": "JMSExpiration",
                 "priority": "JMSPriority", "timestamp": "JMSTimestamp", "message_id": "JMSMessageID",
                 "correlation_id": "JMSCorrelationID", "reply_to": "JMSReplyTo", "type": "JMSType",
                 "redelivered": "JMSRedelivered"}


def _without_rfh2(ctx: ToMq, body: bytes, body_format: str) -> MqMessage:
    """WMQ_TARGET_CLIENT=MQ (IBM shape): the MQMD alone, describing the body. What only the RFH2 could carry is
    found by reading the result back with :func:`mq_to_jms` (the inverse is the one place that knows) and
    reported field by field."""
    md = Mqmd(encoding=ctx.body_encoding, version=C.MQMD_VERSION_2, coded_char_set_id=ctx.body_ccsid,
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
    """The JMS message IBM MQ classes for JMS would deliver for ``msg`` (IBM in): RFH2 values win over the
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
    ccsid = msg.body_ccsid
    ctx = ToJms(msg.md, now_ms, report, _folder_values(folders.get(JMS), JMS, report),
                _folder_values(folders.get(MCD), MCD, report), _folder_values(folders.get(MQPS), MQPS, report),
                body_format=msg.body_format, body_ccsid=ccsid if ccsid > 0 else options.default_ccsid,
                body_encoding=msg.body_encoding, drop_bad_properties=options.drop_bad_properties,
                encoding_default=(msg.headers[-2] if len(msg.headers) > 1 else msg.md).encoding if msg.headers
                else C.MQENC_NORMAL)
    for rule in RULES:
        rule.to_jms(ctx)
    if USR in folders:
        usr_to_properties(folders[USR], ctx)
    _, msd = ctx.folder_value(MCD, "Msd")
    body_type = body_class(msd, msg.body_format)
    body = body_to_jms(msg, body_type, options, report)
    _report_unused(msg, ctx, folders)
    try:
        headers = JmsHeaders(**ctx.headers)
        message = JmsMessage(headers, TypedMap(ctx.props, what="property"), body)
    except MappingError as exc:
        raise MappingError(exc.reason, structure=f"JMS message from MQ: {exc.structure}", field=exc.field) from None
    return message, report


def _report_unused(msg: MqMessage, ctx: ToJms, folders: dict[str, RfhFolder]) -> None:
    report, md = ctx.report, msg.md
    for attr in UNMAPPED_MQMD:
        value = getattr(md, attr)
        if value != getattr(MQMD_DEFAULT, attr):
            shown = value.hex().upper() if isinstance(value, bytes) else value
            report.dropped(f"MQMD.{attr}", f"{shown!r}: no JMS field")
    other_flags = md.msg_flags & ~GROUP_FLAGS
    if other_flags:
        report.dropped("MQMD.MsgFlags", f"segmentation bits {other_flags:#x}: no JMS field")
    for folder_name, values in ((JMS, ctx.jms), (MCD, ctx.mcd), (MQPS, ctx.mqps)):
        for name in values:
            if f"{folder_name}/{name}" not in ctx.used:
                report.dropped(f"{folder_name}/{name}", "no JMS field")
    for name in folders:
        if name not in (JMS, MCD, MQPS, USR):
            report.dropped(f"{name} folder", "not a JMS folder")


