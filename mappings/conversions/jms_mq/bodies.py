"""JMS bodies <-> MQ message bodies (model path): the six body classes, the text bodies in the RFH2's
CCSID, the class of a received body from mcd Msd or the Format (IBM MQ docs "Mapping JMS fields onto IBM MQ
fields")."""
from __future__ import annotations

from mappings.conversions.jms_mq.context import ToMq
from mappings.conversions.jms_mq.spec import MqToJmsOptions, body_type_of
from mappings.errors import MappingError
from mappings.jms.bodies import decode_map, decode_stream, encode_map, encode_stream
from mappings.jms.model import (
    Body,
    BodyType,
    BytesBody,
    MapBody,
    NoBody,
    ObjectBody,
    StreamBody,
    TextBody,
)
from mappings.mq import constants as C
from mappings.mq.ccsid import codec_for
from mappings.mq.message import MqMessage
from mappings.report import ConversionReport


# --------------------------------------------------------------------------------------------------
# Bodies (IBM bodies)
# --------------------------------------------------------------------------------------------------
def _encode_text(text: str, ccsid: int, order: str, what: str) -> bytes:
    codec = codec_for(ccsid, order)
    if codec is None:
        raise MappingError(f"CCSID {ccsid} has no known codec", structure="MQRFH2", field="CodedCharSetId")
    try:
        return text.encode(codec)
    except UnicodeEncodeError as exc:
        raise MappingError(f"character {exc.object[exc.start]!r} at index {exc.start} cannot be encoded in CCSID "
                           f"{ccsid}", structure=what) from None


def body_to_mq(ctx: ToMq) -> bytes:
    body = ctx.message.body
    ccsid, order = ctx.body_ccsid, C.integer_byte_order(ctx.body_encoding)
    if isinstance(body, TextBody):
        if body.text is None:
            ctx.report.coerced("TextMessage body", "null text is written as an empty body: reads back as ''")
        return _encode_text(body.text or "", ccsid, order, "TextMessage body")
    if isinstance(body, BytesBody):
        return body.data
    if isinstance(body, MapBody):
        return _encode_text(encode_map(body), ccsid, order, "MapMessage body")
    if isinstance(body, StreamBody):
        return _encode_text(encode_stream(body), ccsid, order, "StreamMessage body")
    if isinstance(body, ObjectBody):
        if body.class_name is not None:
            ctx.report.dropped("ObjectMessage class name", "not carried on MQ (the serialized bytes name it)")
        if body.data == b"":
            ctx.report.coerced("ObjectMessage body", "empty bytes read back as a null object")
        return body.data or b""
    return b""


def body_class(msd: str | None, body_format: str) -> BodyType:
    """body_type_of; another Format is a BytesMessage (JMS_IBM_Format carries the Format)."""
    return body_type_of(msd, body_format) or BodyType.BYTES


def _decode_text(msg: MqMessage, options: MqToJmsOptions, what: str) -> str:
    ccsid = msg.body_ccsid if msg.body_ccsid > 0 else options.default_ccsid
    codec = codec_for(ccsid, C.integer_byte_order(msg.body_encoding))
    if codec is None:
        raise MappingError(f"CCSID {ccsid} has no known codec", structure=what, field="CodedCharSetId")
    try:
        return msg.body.decode(codec)
    except UnicodeDecodeError as exc:
        raise MappingError(f"not valid {codec} at body byte {exc.start}", structure=what,
                           offset=exc.start) from None


def body_to_jms(msg: MqMessage, body_type: BodyType, options: MqToJmsOptions, report: ConversionReport) -> Body:
    if body_type is BodyType.TEXT:
        return TextBody(_decode_text(msg, options, "TextMessage body"))
    if body_type is BodyType.MAP:
        return decode_map(_decode_text(msg, options, "MapMessage body"))
    if body_type is BodyType.STREAM:
        return decode_stream(_decode_text(msg, options, "StreamMessage body"))
    if body_type is BodyType.OBJECT:
        return ObjectBody(msg.body or None)
    if body_type is BodyType.MESSAGE:
        if msg.body:
            report.dropped("body", f"{len(msg.body)} bytes after a jms_none Msd")
        return NoBody()
    return BytesBody(msg.body)


