"""MQTT 5 publication properties <-> IBM MQ message fields.

MQ Telemetry's Tables 1-5 predate MQTT 5 and have no place for its properties. The gateway composes the two
mappings it already implements rule by rule: Eclipse Amlen "Conversion between MQTT and JMS" (an MQTT 5
property <-> a JMS header or property) and IBM MQ docs "Mapping JMS fields onto IBM MQ fields" (a JMS header
<-> an MQMD field or an MQRFH2 ``mcd``/``jms``/``usr`` element), so that an IBM MQ classes for JMS application
reads what an MQTT 5 client wrote, and the reverse. Three rules are the gateway's own, because the
composition would break MQTT request/reply through plain MQI applications (docs/mqtt5-mq.md):

- Correlation Data is bytes, as CorrelId is: CorrelId holds its first 24 bytes (NUL-padded) and, when it
  is text, ``jms/Cid`` holds it whole; back, ``jms/Cid`` wins, else CorrelId without its NUL padding. An MQI
  responder that copies CorrelId therefore answers with the requester's Correlation Data.
- Message Expiry Interval <-> MQMD Expiry in tenths of a second (the queue manager counts it down while the
  message waits); no ``jms/Exp``, which would need a clock and would not count down.
- Payload Format Indicator 1 with a UTF-8 payload makes the RFH2's Format MQSTR (a text message; ``mcd/Msd``
  ``jms_text`` when an mcd folder is written); back, an MQSTR body in CCSID 1208 gives indicator 1.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from mappings.conversions.jms_mq import RULES, JmsToMqOptions
from mappings.conversions.jms_mq.context import ToJms, ToMq
from mappings.conversions.jms_mq.properties import properties_to_usr, usr_to_properties
from mappings.conversions.jms_mq.spec import BODY_TABLE, JMS, MCD, MQLONG_MAX, MQPS, USR
from mappings.conversions.mqtt_jms import (
    MESSAGE_ID,
    TIMESTAMP,
    ConvertMessageType,
    format_timestamp,
    mqtt_string,
    mqtt_to_jms,
    response_topic_of,
    user_property_value,
)
from mappings.errors import MappingError
from mappings.jms.model import BodyType, TextBody
from mappings.jms.typed_xml import xml_char_problem
from mappings.mq import constants as C
from mappings.mq.message import MqMessage
from mappings.mq.rfh2 import Rfh2, RfhElement, RfhFolder
from mappings.mqtt.publication import MqttPublication
from mappings.report import ConversionReport

CORREL_ID = "MQMD.CorrelId"
_MCD_ORDER = ("Msd", "Set", "Type", "Fmt")
# IBM MQ JMS mapping rules reused as they are, by the JMS field they map
_TO_MQ = {"JMSMessageID", "JMSTimestamp", "JMSReplyTo", "JMSType"}
_TO_JMS = {"JMSReplyTo", "JMSType"}
_RULES_TO_MQ = tuple(rule.to_mq for rule in RULES if rule.jms_field in _TO_MQ)
_RULES_TO_JMS = tuple(rule.to_jms for rule in RULES if rule.jms_field in _TO_JMS)
# a JMS message on MQ (an RFH2 jms folder): its JMSMessageID and JMSTimestamp, as a JMS -> MQTT 5 route gives them
_RULES_TO_JMS_IDS = tuple(rule.to_jms for rule in RULES if rule.jms_field in ("JMSMessageID", "JMSTimestamp"))
_MAX_EXPIRY = 2**32 - 1   # MQTT 5 Message Expiry Interval: a Four Byte Integer


@dataclass(frozen=True, slots=True)
class MqFields:
    """Where a publication's MQTT 5 properties go in its MQ message."""

    md: dict[str, Any]               # Mqmd fields (correl_id, reply_to_q, reply_to_q_mgr, expiry, msg_id, ...)
    folders: tuple[RfhFolder, ...]   # mcd, jms, usr: those with elements, in that order
    text: bool                       # the body is UTF-8 text: RFH2 Format MQSTR


def has_properties(pub: MqttPublication) -> bool:
    return bool(pub.user_properties or pub.content_type is not None or pub.payload_format_indicator is not None
                or pub.response_topic is not None or pub.correlation_data is not None
                or pub.message_expiry_interval is not None)


# --------------------------------------------------------------------------------------------------
# MQTT 5 -> MQ
# --------------------------------------------------------------------------------------------------
def properties_to_mq(pub: MqttPublication, report: ConversionReport, *, reply_to_queue: str | None = None
                     ) -> MqFields:
    """The MQMD fields and RFH2 folders of ``pub``'s MQTT 5 properties (findings into ``report``).
    ``reply_to_queue``: the MQMD ReplyToQ of a Response Topic that is a topic (jms/Rto keeps the topic), where
    an MQI responder puts its reply for a route back to MQTT."""
    text = _declared_text(pub, report)
    # Amlen: user properties (the JMS naming rule; JMSMessageID/JMSTimestamp to headers), Content Type ->
    # JMSType, Response Topic -> JMSReplyTo. Payload, retain, expiry and correlation are not its business here.
    bare = dataclasses.replace(pub, payload=b"", retain=False, correlation_data=None, message_expiry_interval=None,
                               payload_format_indicator=None)
    jms, amlen = mqtt_to_jms(bare, convert=ConvertMessageType.BYTES, info=None, now_ms=None)
    report.extend(amlen)
    if text:
        jms = dataclasses.replace(jms, body=TextBody(""))
    ctx = ToMq(jms, 0, JmsToMqOptions(), report)
    for rule in _RULES_TO_MQ:     # IBM MQ JMS mapping: MsgId, jms/Tms + PutDate, jms/Rto + ReplyToQ, mcd/Type
        rule(ctx)
    if pub.response_topic is not None and "reply_to_q" not in ctx.md:
        # a topic: jms/Rto carries it whole; that MQMD.ReplyToQ names queues only is no loss to an MQTT client
        report.findings[:] = [f for f in report.findings if f.name != "MQMD.ReplyToQ"]
        if reply_to_queue:
            ctx.md["reply_to_q"] = reply_to_queue
    if pub.correlation_data is not None:
        _correlation_to_mq(pub.correlation_data, ctx)
    if pub.message_expiry_interval is not None:
        tenths = pub.message_expiry_interval * 10
        if tenths > MQLONG_MAX:
            report.truncated("MQMD.Expiry", f"{pub.message_expiry_interval} s is beyond an MQLONG of tenths: "
                             f"{MQLONG_MAX} tenths")
            tenths = MQLONG_MAX
        if tenths == 0:
            report.coerced("MQMD.Expiry", "0 s (already expired): 1 tenth, the least MQ accepts")
        ctx.md["expiry"] = max(tenths, 1)
    if "reply_to_q" in ctx.md:
        ctx.md["msg_type"] = C.MQMT_REQUEST   # a reply is expected (IBM MQ JMS mapping: JMSReplyTo set)
    folders = []
    if ctx.mcd:
        mcd = {"Msd": BODY_TABLE[BodyType.TEXT if text else BodyType.BYTES][0]} | ctx.mcd
        folders.append(RfhFolder(MCD, tuple(RfhElement(n, mcd[n]) for n in _MCD_ORDER if n in mcd)))
    if ctx.jms:
        folders.append(RfhFolder(JMS, tuple(RfhElement(n, v) for n, v in ctx.jms.items())))
    usr = properties_to_usr(ctx)
    if usr is not None:
        folders.append(usr)
    return MqFields(ctx.md, tuple(folders), text)


def _declared_text(pub: MqttPublication, report: ConversionReport) -> bool:
    if pub.payload_format_indicator != 1:
        return False
    try:
        bytes(pub.payload).decode("utf-8")
    except UnicodeDecodeError:
        report.coerced("payload format indicator", "1 but the payload is not UTF-8: written as bytes (Format NONE)")
        return False
    return True


def _correlation_to_mq(data: bytes, ctx: ToMq) -> None:
    if not data:
        ctx.report.dropped("correlation data", "empty: CorrelId MQCI_NONE means none")
        return
    ctx.md["correl_id"] = data[:24].ljust(24, b"\x00")
    try:
        text: str | None = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and xml_char_problem(text) is None:
        ctx.jms["Cid"] = text       # whole, for JMS applications and the way back
        if len(data) > 24:
            ctx.report.truncated(CORREL_ID, f"first 24 of {len(data)} bytes (jms/Cid keeps them all)")
        return
    if len(data) > 24:
        ctx.report.truncated(CORREL_ID, f"first 24 of {len(data)} bytes: CorrelId holds 24")
    elif data.endswith(b"\x00"):
        ctx.report.coerced(CORREL_ID, "trailing NUL bytes read back as CorrelId's padding (removed)")


# --------------------------------------------------------------------------------------------------
# MQ -> MQTT 5
# --------------------------------------------------------------------------------------------------
_MD_USED = ("correl_id", "reply_to_q", "reply_to_q_mgr", "expiry")   # and msg_type of a request


def properties_from_mq(msg: MqMessage, report: ConversionReport) -> tuple[dict[str, Any], set[str]]:
    """The MqttPublication keyword arguments of ``msg``'s MQ fields, and what was read: MQMD attribute names
    and ``folder/element`` names, which the caller does not report as discarded."""
    rfh = next((h for h in msg.headers if isinstance(h, Rfh2)), None)
    folders = {f.name: f for f in rfh.folders} if rfh is not None else {}
    md = msg.md
    if (not folders.keys() & {JMS, MCD, USR} and md.correl_id == C.MQCI_NONE and not md.reply_to_q.strip(" ")
            and md.expiry == C.MQEI_UNLIMITED and msg.body_format.strip() != C.MQFMT_STRING.strip()):
        return {}, set()        # the common case: a message MQ Telemetry wrote from MQTT 3.1.1
    ctx = ToJms(md, 0, report, jms=_values(folders.get(JMS)), mcd=_values(folders.get(MCD)),
                mqps=_values(folders.get(MQPS)))
    for rule in _RULES_TO_JMS:   # IBM MQ JMS mapping: JMSReplyTo from jms/Rto or ReplyToQ, JMSType from mcd
        rule(ctx)
    if USR in folders:
        usr_to_properties(folders[USR], ctx)
        ctx.used.update(f"{USR}/{el.name}" for el in folders[USR].elements)
    out: dict[str, Any] = {}
    reply = ctx.headers.get("reply_to")
    if reply is not None:
        out["response_topic"] = response_topic_of(reply, report)
    if ctx.headers.get("type") is not None:
        out["content_type"] = mqtt_string(ctx.headers["type"], "JMSType", report)
    users = [(name, user_property_value(name, value, report)) for name, value in ctx.props]
    if JMS in folders:   # a JMS message: JMSMessageID and JMSTimestamp go first (Amlen, JMS -> MQTT)
        users[:0] = _jms_ids(ctx, report)
    out["user_properties"] = tuple((n, v) for n, v in users if v is not None)
    present, cid = ctx.folder_value(JMS, "Cid")
    if present and cid is not None:
        out["correlation_data"] = cid.encode("utf-8", "surrogatepass")
    elif md.correl_id != C.MQCI_NONE:
        out["correlation_data"] = md.correl_id.rstrip(b"\x00")
    if md.expiry > 0:
        out["message_expiry_interval"] = min(-(-md.expiry // 10), _MAX_EXPIRY)
    ctx.folder_value(JMS, "Exp")   # the MQMD's Expiry, counted down by MQ, is read instead
    if _utf8_text(msg):
        out["payload_format_indicator"] = 1
    if MCD in folders:
        ctx.used.add(f"{MCD}/Msd")   # the body class, which the payload format indicator gives
    used = ctx.used | set(_MD_USED)
    if md.msg_type == C.MQMT_REQUEST and "response_topic" in out:
        used.add("msg_type")   # a request: the Response Topic says a reply is expected
    return {k: v for k, v in out.items() if v is not None and v != ()}, used


def _jms_ids(ctx: ToJms, report: ConversionReport) -> list[tuple[str, str | None]]:
    """JMSMessageID (``ID:`` + MsgId in hex) and JMSTimestamp (jms/Tms, else PutDate/PutTime; ISO 8601) of a
    JMS message on MQ, by the IBM MQ JMS mapping, as the user properties of a JMS -> MQTT 5 route. An MQTT 5
    publication's own JMSMessageID/JMSTimestamp user properties were written there (properties_to_mq), so
    they come back."""
    for rule in _RULES_TO_JMS_IDS:
        rule(ctx)
    out: list[tuple[str, str | None]] = []
    mid = ctx.headers.get("message_id")
    if mid is not None:
        out.append((MESSAGE_ID, mqtt_string(mid, MESSAGE_ID, report)))
        ctx.used.add("msg_id")
    stamp = ctx.headers.get("timestamp")
    if stamp:
        try:
            out.append((TIMESTAMP, format_timestamp(stamp)))
            ctx.used.update(("put_date", "put_time"))
        except MappingError as exc:
            report.dropped(TIMESTAMP, exc.reason)
    return out


def _values(folder: RfhFolder | None) -> dict[str, str | None]:
    return {} if folder is None else {el.name: el.value for el in folder.elements if not el.is_group}


def _utf8_text(msg: MqMessage) -> bool:
    if msg.body_format.strip() != C.MQFMT_STRING.strip() or msg.body_ccsid != C.CCSID_UTF8:
        return False
    try:
        msg.body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


__all__ = ["MqFields", "has_properties", "properties_from_mq", "properties_to_mq"]
