"""Hypothesis strategies for the JMS <-> MQ mapping tests: JMS messages the MQ form carries exactly,
MQ messages as a JMS application puts them, and the maps that make a message fit one form."""
from __future__ import annotations

from hypothesis import strategies as st

from mappings.conversions.jms_mq import bytes_to_id, id_to_bytes, put_date_time
from mappings.conversions.jms_mq.spec import BODY_TABLE, JAVA_CHARSETS, MSD_TO_BODY, REPORT_PROPERTIES, mcd_uri
from mappings.jms.model import (
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
    jboolean,
    jint,
    jstring,
)
from mappings.jms.typed_xml import encode_value
from mappings.mq import constants as C
from mappings.mq.message import MqMessage
from mappings.mq.rfh2 import RfhElement, RfhFolder
from tests import jms_strategies as js
from tests.jms_mq_support import NOW, F, got, native, with_rfh2


def with_delivery_count(message: JmsMessage) -> JmsMessage:
    """The provider sets JMSXDeliveryCount on every received message; without it the report is never empty."""
    if "JMSXDeliveryCount" in message.properties:
        return message
    count = ("JMSXDeliveryCount", jint(2 if message.headers.redelivered else 1))
    return JmsMessage(message.headers, TypedMap((count, *message.properties.pairs), what="property"), message.body)


_hex_id = st.binary(min_size=24, max_size=24).filter(any).map(bytes_to_id)
_mqchars = st.text(st.characters(min_codepoint=0x21, max_codepoint=0xFF), min_size=1, max_size=12)
_usr_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True).filter(
    lambda n: not n.startswith("JMS") and n.upper() not in {"NULL", "TRUE", "FALSE", "NOT", "AND", "OR", "BETWEEN",
                                                            "LIKE", "IN", "IS", "ESCAPE"})
_usr_values = js.java_values().filter(lambda v: v.type is not JavaType.CHAR)
_short_text = js.xml_text.filter(lambda s: len(s.encode()) <= 24)


# JMS_IBM_Report_*, JMS_IBM_Format, JMS_IBM_Character_Set, JMS_IBM_Encoding (the IBM provider-specific properties)
_report_values = st.sampled_from([0, 1, 2, 4, 64, 128, 256, 512, 768, 1792, 2048, 6144, 14336, 2097152, 6291456,
                                  16777216, 117440512, 134217728, -1])
_formats = st.sampled_from(["MQSTR", "MQADMIN", "", "XML", "MQHRF2", "MQSTR ", "TOOLONGFMT", "\u00e9t\u00e9"])
_charsets = st.sampled_from(["UTF-8", "ISO-8859-1", "iso-8859-1", "IBM037", "UTF-16", "819", "1208", "4242", "Cp1252",
                             "nope", ""])
_encodings = st.sampled_from([273, 546, 785, 0, -1])


def _int_or_string(values: st.SearchStrategy[int]) -> st.SearchStrategy[JavaValue]:
    return st.one_of(values.map(jint), values.map(lambda v: jstring(str(v))), st.just(jstring("x")))


def provider_properties() -> st.SearchStrategy[list[tuple[str, JavaValue]]]:
    """Any mix of the provider-specific properties JMS -> MQ maps to the MQMD/RFH2: valid values, ints as Strings
    (as STOMP delivers them), defaults, and values it refuses."""
    pairs = st.one_of(
        st.tuples(st.sampled_from([p for p, _m, _v in REPORT_PROPERTIES]), _int_or_string(_report_values)),
        st.tuples(st.just("JMS_IBM_Format"), st.builds(jstring, _formats)),
        st.tuples(st.just("JMS_IBM_Character_Set"), st.builds(jstring, _charsets)),
        st.tuples(st.just("JMS_IBM_Encoding"), _int_or_string(_encodings)))
    return st.lists(pairs, max_size=4, unique_by=lambda kv: kv[0])


@st.composite
def with_provider_properties(draw: st.DrawFn, messages: st.SearchStrategy[JmsMessage]) -> JmsMessage:
    message = draw(messages)
    extra = [(n, v) for n, v in draw(provider_properties()) if n not in message.properties]
    return JmsMessage(message.headers, TypedMap((*message.properties.pairs, *extra), what="property"), message.body)


def _exact_provider_properties(draw: st.DrawFn, body: object) -> list[tuple[str, JavaValue]]:
    """Provider properties the MQ form gives back exactly for ``body``: a Report value per report type, a Format
    other than the body table's, a charset other than UTF-8 (not for text bodies), an encoding other than 273."""
    pairs: list[tuple[str, JavaValue]] = []
    for prop, _mask, values in REPORT_PROPERTIES:
        if draw(st.integers(0, 4)) == 0:
            pairs.append((prop, jint(draw(st.sampled_from(sorted(values))))))
    body_type = body.body_type  # type: ignore[attr-defined]
    if draw(st.booleans()):
        fmt = draw(st.sampled_from(["MQSTR", "MQADMIN", "", "XML"]))
        if fmt.ljust(8) != BODY_TABLE[body_type][1]:
            pairs.append(("JMS_IBM_Format", jstring(fmt)))
    if draw(st.booleans()) and isinstance(body, BytesBody | ObjectBody | NoBody):
        pairs.append(("JMS_IBM_Character_Set", jstring(draw(st.sampled_from(
            [n for n in JAVA_CHARSETS.values() if n != "UTF-8"] + ["4242"])))))
    if draw(st.booleans()):
        pairs.append(("JMS_IBM_Encoding", jint(draw(st.sampled_from([546, 785])))))
    return pairs


# mcd:// JMSTypes: canonical ones (what MQ -> JMS writes for a non-JMS Msd) and other spellings JMS -> MQ splits
_mcd_domains = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,6}", fullmatch=True).filter(
    lambda d: not d.lower().startswith("jms_") and d.lower() not in MSD_TO_BODY)
_mcd_part = st.none() | st.text(alphabet=js.xml_chars.filter(lambda c: c not in "/?"), min_size=1, max_size=8)
_mcd_type_part = st.none() | st.text(alphabet=js.xml_chars.filter(lambda c: c != "?"), min_size=1, max_size=8).filter(
    lambda t: not t.endswith("/"))
canonical_mcd_types = st.builds(mcd_uri, _mcd_domains, _mcd_part, _mcd_type_part,
                                st.none() | js.xml_text.filter(bool))
mcd_types = canonical_mcd_types | st.sampled_from(["mcd://MRM/s/t/", "mcd://MRM/s/t/?format=f", "mcd://MRM/set/",
                                                   "mcd://MRM//t", "mcd://xmlnsc/", "mcd://x?format=", "mcd://",
                                                   "mcd://jms_text", "mcd://MRM/s/t?fmt=x", "mcd://1x"])


@st.composite
def with_mcd_type(draw: st.DrawFn, messages: st.SearchStrategy[JmsMessage]) -> JmsMessage:
    message = draw(messages)
    h = message.headers
    headers = JmsHeaders(h.destination, h.delivery_mode, h.expiration, h.priority, h.timestamp, h.message_id,
                         h.correlation_id, h.reply_to, draw(mcd_types), h.redelivered)
    return JmsMessage(headers, message.properties, message.body)


@st.composite
def representable(draw: st.DrawFn) -> JmsMessage:
    """Messages whose every field the MQ form carries exactly (the report must be empty)."""
    count = draw(st.integers(1, 2**31 - 1))
    queue = st.builds(Destination.queue, _mqchars.filter(lambda s: "?" not in s and "%" not in s),
                      st.just("") | _mqchars.filter(lambda s: "/" not in s and "?" not in s))
    headers = JmsHeaders(
        destination=draw(st.none() | js.destinations),
        delivery_mode=draw(st.sampled_from(list(DeliveryMode))),
        expiration=draw(st.just(0) | st.integers(NOW + 1, NOW + 10**9)),
        priority=draw(st.integers(0, 9)),
        timestamp=draw(st.integers(-62135596800000, 253402300799999)),
        message_id=draw(st.none() | _hex_id),
        correlation_id=draw(st.none() | _hex_id | _short_text),
        reply_to=draw(st.none() | queue),
        type=draw(st.none() | js.xml_text.filter(lambda t: not t.lower().startswith("mcd://")) | canonical_mcd_types),
        redelivered=count > 1,
    )
    pairs = [("JMSXDeliveryCount", jint(count))]
    for name in ("JMSXUserID", "JMSXAppID"):
        if draw(st.booleans()):
            pairs.append((name, jstring(draw(_mqchars))))
    if draw(st.booleans()):
        pairs += [("JMSXGroupID", jstring(draw(_hex_id | _short_text))),
                  ("JMSXGroupSeq", jint(draw(st.integers(1, 99))))]
        publication = headers.destination is not None and headers.destination.kind is DestinationKind.TOPIC
        if not publication and draw(st.booleans()):   # a publication is no MQ group: no MsgFlags to carry it
            pairs.append(("JMS_IBM_Last_Msg_In_Group", jboolean(True)))
    for name, values in (("JMS_IBM_MsgType", st.sampled_from([2, 4, 65536])),
                         ("JMS_IBM_Feedback", st.integers(1, 2**31 - 1)),
                         ("JMS_IBM_PutApplType", st.sampled_from([6, 28]))):
        if draw(st.booleans()):
            pairs.append((name, jint(draw(values))))
    pairs += draw(st.lists(st.tuples(_usr_names, _usr_values), max_size=5, unique_by=lambda kv: kv[0]))
    body = draw(st.one_of(
        st.just(NoBody()), st.builds(TextBody, st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)),
        st.builds(BytesBody, st.binary(max_size=40)), st.builds(MapBody, js.typed_maps()),
        st.builds(StreamBody, st.lists(js.java_values(), max_size=6).map(tuple)),
        st.builds(ObjectBody, st.none() | st.binary(min_size=1, max_size=40))))
    pairs += _exact_provider_properties(draw, body)
    return JmsMessage(headers, TypedMap(pairs, what="property"), body)


_latin = st.text(st.characters(min_codepoint=0x21, max_codepoint=0xFF), max_size=12)


@st.composite
def mq_messages(draw: st.DrawFn) -> MqMessage:
    """MQ messages as MQGET returns them: MQSTR text alone, or behind an RFH2 with mcd jms_text and usr."""
    reply_q = draw(st.just("") | _latin.filter(lambda s: "?" not in s and "%" not in s))
    flags = draw(st.sampled_from([0, 8, 24]))
    ts = draw(st.integers(10, 253402300799990)) // 10 * 10
    date, time = put_date_time(ts) or ("", "")
    md = got(
        version=2, priority=draw(st.integers(0, 9)), persistence=draw(st.sampled_from([0, 1])),
        msg_id=draw(st.binary(min_size=24, max_size=24)), correl_id=draw(st.binary(min_size=24, max_size=24)),
        backout_count=draw(st.integers(0, 2**31 - 2)), reply_to_q=reply_q,
        reply_to_q_mgr=draw(_latin.filter(lambda s: "/" not in s and "?" not in s)) if reply_q else "",
        msg_type=draw(st.sampled_from([1, 2, 4, 8, 65536])), feedback=draw(st.integers(0, 2**31 - 1)),
        put_appl_type=draw(st.sampled_from([0, 6, 11, 28, -1])),
        user_identifier=draw(_latin), put_appl_name=draw(_latin), put_date=date, put_time=time,
        group_id=draw(st.binary(min_size=24, max_size=24).filter(any)) if flags else bytes(24),
        msg_seq_number=draw(st.integers(1, 2**31 - 1)) if flags else 1, msg_flags=flags,
        expiry=draw(st.just(-1) | st.integers(1, 2**31 - 1)),
        report=sum(draw(st.sampled_from([0, *values])) for _p, _m, values in REPORT_PROPERTIES),
        coded_char_set_id=C.CCSID_UTF8, encoding=draw(st.sampled_from([273, 546])))
    usr = draw(st.lists(st.tuples(_usr_names, _usr_values), max_size=4, unique_by=lambda kv: kv[0]))
    body_text = draw(st.text(st.characters(blacklist_categories=("Cs",)), max_size=20))
    if not usr and draw(st.booleans()):
        return native(md, body_text.encode(), C.MQFMT_STRING)
    elements = tuple(RfhElement(n, *reversed(encode_value(v, name=n))) for n, v in usr)
    return with_rfh2(md, (F("mcd", ("Msd", "jms_text")), RfhFolder("usr", elements)), body_text.encode())


def mqmd_only(message: JmsMessage) -> JmsMessage:
    """Strip what only the RFH2 carries, so that the MQMD alone holds the message exactly."""
    h = message.headers
    keep = [(n, v) for n, v in message.properties.pairs if n.startswith("JMS") and n != "JMS_IBM_Format"
            and not (n == "JMSXGroupID" and id_to_bytes(v.value or "") is None)]
    if "JMSXGroupSeq" in dict(keep) and "JMSXGroupID" not in dict(keep):
        keep = [(n, v) for n, v in keep if n not in ("JMSXGroupSeq", "JMS_IBM_Last_Msg_In_Group")]
    body = message.body if isinstance(message.body, TextBody | BytesBody) else BytesBody(b"")
    cid = h.correlation_id if isinstance(h.correlation_id, str) and id_to_bytes(h.correlation_id) else None
    headers = JmsHeaders(delivery_mode=h.delivery_mode, priority=h.priority, message_id=h.message_id,
                         timestamp=h.timestamp // 10 * 10 or 10, correlation_id=cid, reply_to=h.reply_to,
                         expiration=0 if not h.expiration else NOW + (h.expiration - NOW) // 100 * 100 + 100,
                         redelivered=h.redelivered)
    return JmsMessage(headers, TypedMap(keep, what="property"), body)
