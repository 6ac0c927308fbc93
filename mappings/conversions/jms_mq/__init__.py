"""JMS message <-> IBM MQ message (MQMD + MQRFH2 mcd/jms/usr + body), as IBM MQ classes for JMS map them
(IBM MQ docs "Mapping JMS fields onto IBM MQ fields"; docs/jms-mq.md).

Two APIs, one mapping:
- the model API, :func:`jms_to_mq` / :func:`mq_to_jms` on the MqMessage model (module ``model``), runs the
  field rules (``rules``), the usr folder (``properties``) and the bodies (``bodies``) for every message,
  reporting every change and refusing what cannot be converted;
- the bytes API, :func:`jms_to_mq_bytes` / :func:`mq_bytes_to_jms`, takes the bytes paths (``encode``,
  ``decode``) for the messages JMS applications usually exchange, and the model API for the rest, with
  the same bytes, messages, findings and errors either way (tests/test_jms_mq_fast.py).
Tables, options and value forms both share: ``spec``.
"""
from __future__ import annotations

from mappings.conversions.jms_mq.decode import mq_bytes_to_jms_fast
from mappings.conversions.jms_mq.encode import jms_to_mq_bytes_fast
from mappings.conversions.jms_mq.model import jms_to_mq, mq_to_jms
from mappings.conversions.jms_mq.rules import JMS_TO_MQ, MQ_TO_JMS, RULES
from mappings.conversions.jms_mq.spec import (
    BODY_TABLE,
    DECISIONS,
    IBM_MQMD_PROPERTIES,
    MQMD_CONSTANTS,
    JmsToMqOptions,
    MqToJmsOptions,
    bytes_to_id,
    id_to_bytes,
    put_date_time,
    put_epoch_ms,
)
from mappings.jms.model import JmsMessage
from mappings.mq.message import decode_message, encode_message
from mappings.report import ConversionReport


def mq_bytes_to_jms(data: bytes, *, now_ms: int,
                    options: MqToJmsOptions = MqToJmsOptions()) -> tuple[JmsMessage, ConversionReport]:
    """Decode a message file (MQMD + headers + body) and convert it.

    The usual messages (an MQMD v2 alone or with one RFH2 of simple mcd/jms/usr folders, nothing to
    report) take the bytes path (``decode``); the rest are decoded to the MqMessage model and mapped by
    :func:`mq_to_jms`."""
    fast = mq_bytes_to_jms_fast(data, now_ms=now_ms, options=options)
    if fast is not None:
        return fast
    return mq_to_jms(decode_message(data), now_ms=now_ms, options=options)


def jms_to_mq_bytes(message: JmsMessage, *, now_ms: int,
                    options: JmsToMqOptions = JmsToMqOptions()) -> tuple[bytes, ConversionReport]:
    """Convert and encode: MQMD v2 then the RFH2 and body, integers in ``options.encoding`` order.

    The usual messages take the bytes path (``encode``); the rest, and every error, go through
    :func:`jms_to_mq` and ``encode_message``."""
    fast = jms_to_mq_bytes_fast(message, now_ms=now_ms, options=options)
    if fast is not None:
        return fast
    msg, report = jms_to_mq(message, now_ms=now_ms, options=options)
    return encode_message(msg), report


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
