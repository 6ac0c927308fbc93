"""Shared helpers for the JMS <-> MQ mapping tests (tests/test_jms_mq*.py): a fixed "now", message
builders, and readers of an MQ message's RFH2 folders and of a conversion report."""
from __future__ import annotations

from mappings.conversions.jms_mq import jms_to_mq, mq_to_jms
from mappings.jms.model import JavaValue, JmsHeaders, JmsMessage, NoBody, TypedMap, jint
from mappings.mq import constants as C
from mappings.mq.message import MqMessage, build_message
from mappings.mq.mqmd import Mqmd
from mappings.mq.rfh2 import Rfh2, RfhElement, RfhFolder
from mappings.report import Change, ConversionReport

NOW = 1_700_000_000_000            # 2023-11-14 22:13:20 GMT, the "now" of every conversion here
MSG_ID = bytes.fromhex("414d5120514d31202020202020202020") + bytes.fromhex("65a1b2c3000012ab")


def to_mq(message: JmsMessage, **kw: object) -> tuple[MqMessage, ConversionReport]:
    return jms_to_mq(message, now_ms=NOW, **kw)  # type: ignore[arg-type]


def to_jms(msg: MqMessage) -> tuple[JmsMessage, ConversionReport]:
    return mq_to_jms(msg, now_ms=NOW)


def props(*pairs: tuple[str, JavaValue]) -> TypedMap:
    return TypedMap(pairs, what="property")


def msg(body=None, properties=(), **headers) -> JmsMessage:  # noqa: ANN001, ANN003
    return JmsMessage(JmsHeaders(**headers), props(("JMSXDeliveryCount", jint(1)), *properties),
                      body if body is not None else NoBody())


def folder(mq: MqMessage, name: str) -> dict[str, tuple[str | None, str | None]]:
    f = mq.rfh2_folder(name)
    return {} if f is None else {e.name: (e.value, e.dt) for e in f.elements}


def names(report: ConversionReport, change: Change | None = None) -> list[str]:
    return [f.name for f in report.findings if change is None or f.change is change]


def same(a: JmsMessage, b: JmsMessage) -> bool:
    """Equal messages; properties compared as a set of names (JMS gives them no order)."""
    return a.headers == b.headers and a.body == b.body and dict(a.properties) == dict(b.properties)


def got(**fields: object) -> Mqmd:
    """An MQMD as MQGET returns it: a real priority and persistence (Mqmd() has the put-time defaults)."""
    return Mqmd(**{"priority": 4, "persistence": C.MQPER_PERSISTENT, **fields})  # type: ignore[arg-type]


def native(md: Mqmd, body: bytes = b"", fmt: str = C.MQFMT_NONE) -> MqMessage:
    return build_message(md, (), body, body_format=fmt)


def with_rfh2(md: Mqmd, folders: tuple[RfhFolder, ...], body: bytes = b"", fmt: str = C.MQFMT_STRING,
              ccsid: int = C.CCSID_UTF8) -> MqMessage:
    rfh = Rfh2(encoding=md.encoding, coded_char_set_id=ccsid, folders=folders)   # the body in the MQMD's encoding
    return build_message(md, (rfh,), body, body_format=fmt)


def F(name: str, *elements: tuple) -> RfhFolder:  # noqa: N802 - a short folder builder
    return RfhFolder(name, tuple(RfhElement(*e) for e in elements))
