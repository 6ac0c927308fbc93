"""JMS <-> MQ (mappings.conversions.jms_mq):
the mapping tables, golden bytes, each rule both ways, real captures, round trips."""
from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mappings.conversions.jms_mq import (
    BODY_TABLE,
    JMS_TO_MQ,
    MQ_TO_JMS,
    JmsToMqOptions,
    bytes_to_id,
    id_to_bytes,
    jms_to_mq,
    jms_to_mq_bytes,
    mq_bytes_to_jms,
    mq_to_jms,
    put_date_time,
    put_epoch_ms,
)
from mappings.errors import MappingError
from mappings.jms.model import (
    BodyType,
    BytesBody,
    DeliveryMode,
    Destination,
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
    jbyte,
    jbytes,
    jchar,
    jdouble,
    jfloat,
    jint,
    jlong,
    jshort,
    jstring,
)
from mappings.jms.typed_xml import encode_value
from mappings.mq import constants as C
from mappings.mq.message import MqMessage, build_message, decode_message, encode_message
from mappings.mq.mqmd import Mqmd, encode_mqmd
from mappings.mq.rfh2 import Rfh1, Rfh2, RfhElement, RfhFolder
from mappings.report import Change, ConversionReport
from tests import jms_strategies as js
from tests.mq_fixtures import FIXTURE_DIR
from tests.mq_support import REPO_ROOT, real_message

NOW = 1_700_000_000_000            # 2023-11-14 22:13:20 GMT, the "now" of every conversion here
MSG_ID = bytes.fromhex("414d5120514d31202020202020202020") + bytes.fromhex("65a1b2c3000012ab")
SEED = REPO_ROOT.parent / "shared" / "seeds" / "message-broker-end-user-application-support.txt"


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
    rfh = Rfh2(encoding=C.MQENC_NORMAL, coded_char_set_id=ccsid, folders=folders)
    return build_message(md, (rfh,), body, body_format=fmt)


def F(name: str, *elements: tuple) -> RfhFolder:  # noqa: N802 - a short folder builder
    return RfhFolder(name, tuple(RfhElement(*e) for e in elements))


# ==================================================================================================
# The seed's four tables are all implemented (read from the seed itself)
# ==================================================================================================
# Broker names in the seed -> IBM JMS names (mq-wire-facts.md §6.2, S6)
SEED_ALIASES = {"JMSQApplid": "JMSXAppID", "JMSApplid": "JMSXAppID", "JMSUser": "JMSXUserID",
                "JMSGroupid": "JMSXGroupID", "JMSGroupseq": "JMSXGroupSeq", "JMSTimeStamp": "JMSTimestamp",
                "JMSRedelivered = false": "JMSRedelivered", "JMSRedelivered = true": "JMSRedelivered"}


def seed_tables() -> list[list[tuple[str, str]]]:
    if not SEED.is_file():
        pytest.skip(f"seed {SEED} not present")
    text = SEED.read_text()
    section = text[text.index("### JMS message transformation"):text.index("### Example message flow scenario")]
    tables: list[list[tuple[str, str]]] = []
    for block in re.split(r"\n\s*\n", section):
        rows = [ln for ln in block.splitlines() if ln.startswith("|") and not ln.startswith("|--")]
        if rows:
            tables.append([tuple(c.strip() for c in r.strip("|").split("|")) for r in rows[1:]])  # type: ignore[misc]
    return tables


def _jms_names(field: str) -> set[str]:
    return {n.strip() for n in field.split(",")}


def test_every_seed_row_has_a_rule():
    tables = seed_tables()
    assert [len(t) for t in tables] == [8, 7, 1, 11, 5]   # JMS->MQMD, JMS->jms, MQMD->JMS (2 parts), jms->JMS
    jms_to_mqmd, jms_to_folder, expiry, mqmd_to_jms, folder_to_jms = tables
    out = {(j, m) for jf, mf, _r in JMS_TO_MQ for j in _jms_names(jf) for m in mf}
    out_rfh = {(j, r) for jf, _m, rf in JMS_TO_MQ for j in _jms_names(jf) for r in rf}
    inn = {(m, j) for mf, _r, jf in MQ_TO_JMS for j in _jms_names(jf) for m in mf}
    inn_rfh = {(r, j) for _m, rf, jf in MQ_TO_JMS for j in _jms_names(jf) for r in rf}
    for jms_field, mq_field in jms_to_mqmd:
        jms_name = SEED_ALIASES.get(jms_field, jms_field)
        for mq_name in re.split(r",\s*", mq_field.replace(" - 1", "")):
            assert (jms_name, mq_name) in out, (jms_field, mq_field)
    for jms_field, rfh_field in jms_to_folder:
        assert (SEED_ALIASES.get(jms_field, jms_field), f"jms/{rfh_field}") in out_rfh
    for mq_field, jms_field in expiry + mqmd_to_jms:
        field = re.sub(r" [=>]+ 0$", "", mq_field)
        jms_name = SEED_ALIASES.get(jms_field, jms_field)
        for mq_name in re.split(r",\s*", field):
            assert (mq_name, jms_name) in inn, (mq_field, jms_field)
    for rfh_field, jms_field in folder_to_jms:
        assert (f"jms/{rfh_field}", jms_field) in inn_rfh


def test_body_table_is_section_6_1():
    assert {t: (msd, fmt.strip()) for t, (msd, fmt) in BODY_TABLE.items()} == {
        BodyType.MESSAGE: ("jms_none", ""), BodyType.TEXT: ("jms_text", "MQSTR"),
        BodyType.BYTES: ("jms_bytes", ""), BodyType.MAP: ("jms_map", "MQSTR"),
        BodyType.STREAM: ("jms_stream", "MQSTR"), BodyType.OBJECT: ("jms_object", ""),
    }


# ==================================================================================================
# Golden bytes: a full TextMessage and MapMessage as IBM MQ classes for JMS put them (§2, §5, §6.1),
# built here field by field with struct, independently of the codec
# ==================================================================================================
def golden_mqmd(**f: object) -> bytes:
    v = {"MsgType": 8, "Expiry": -1, "Priority": 4, "Persistence": 1, "MsgId": bytes(24), "CorrelId": bytes(24),
         "BackoutCount": 0, "ReplyToQ": "", "ReplyToQMgr": "", "UserIdentifier": "", "PutApplName": "",
         "PutDate": "", "PutTime": "", "GroupId": bytes(24), "MsgSeqNumber": 1, "MsgFlags": 0, **f}

    def ch(s: object, n: int) -> bytes:
        assert isinstance(s, str)
        return s.encode("latin-1").ljust(n, b" ")

    out = b"MD  " + struct.pack(">6i", 2, 0, v["MsgType"], v["Expiry"], 0, 273) + struct.pack(">i", 1208)
    out += b"MQHRF2  " + struct.pack(">2i", v["Priority"], v["Persistence"]) + v["MsgId"] + v["CorrelId"]  # type: ignore[operator]
    out += struct.pack(">i", v["BackoutCount"]) + ch(v["ReplyToQ"], 48) + ch(v["ReplyToQMgr"], 48)
    out += ch(v["UserIdentifier"], 12) + bytes(32) + b" " * 32 + struct.pack(">i", 0) + ch(v["PutApplName"], 28)
    out += ch(v["PutDate"], 8) + ch(v["PutTime"], 8) + b"    "
    out += v["GroupId"] + struct.pack(">4i", v["MsgSeqNumber"], 0, v["MsgFlags"], -1)  # type: ignore[operator]
    assert len(out) == 364
    return out


def golden_rfh2(fmt: bytes, *folders: str) -> bytes:
    data = b""
    for xml in folders:
        raw = xml.encode("utf-8")
        raw += b" " * (-len(raw) % 4)
        data += struct.pack(">i", len(raw)) + raw
    return b"RFH " + struct.pack(">4i", 2, 36 + len(data), 273, 1208) + fmt + struct.pack(">2i", 0, 1208) + data


TEXT_MESSAGE = JmsMessage(
    JmsHeaders(destination=Destination.queue("DEV.QUEUE.1"), delivery_mode=DeliveryMode.PERSISTENT,
               timestamp=1700000000120, message_id=bytes_to_id(MSG_ID), priority=4),
    props(("JMSXDeliveryCount", jint(1)), ("JMSXUserID", jstring("app")), ("JMSXAppID", jstring("demo.jar")),
          ("color", jstring("blue")), ("count", jint(3)), ("gone", jlong(-1)), ("ok", jboolean(True))),
    TextBody("caf\u00e9 & cr\u00e8me"),
)


def test_golden_text_message():
    expected = golden_mqmd(MsgId=MSG_ID, UserIdentifier="app", PutApplName="demo.jar", PutDate="20231114",
                           PutTime="22132012") + golden_rfh2(
        b"MQSTR   ",
        "<mcd><Msd>jms_text</Msd></mcd>",                                                   # 30 -> 32 (R1)
        "<jms><Dst>queue:///DEV.QUEUE.1</Dst><Tms>1700000000120</Tms><Dlv>2</Dlv></jms>",   # R1 order
        "<usr><color>blue</color><count dt='i4'>3</count><gone dt='i8'>-1</gone><ok dt='boolean'>1</ok></usr>",
    ) + "caf\u00e9 & cr\u00e8me".encode()
    data, report = jms_to_mq_bytes(TEXT_MESSAGE, now_ms=NOW)
    assert report.findings == []
    assert data == expected
    assert data[364 + 36:364 + 40] == b"\x00\x00\x00\x20"          # mcd NameValueLength 32, big-endian
    back, report = mq_bytes_to_jms(data, now_ms=NOW)
    assert back == TEXT_MESSAGE and report.findings == []          # even the property order


MAP_MESSAGE = JmsMessage(
    JmsHeaders(destination=Destination.topic("prices/eur"), delivery_mode=DeliveryMode.NON_PERSISTENT,
               expiration=NOW + 60_000, priority=7, timestamp=NOW, correlation_id="order-17",
               reply_to=Destination.queue("REPLY.Q", "QM1"), type="quote"),
    props(("JMSXDeliveryCount", jint(1))),
    MapBody(TypedMap([("price", jdouble(2.24)), ("qty", jint(100)), ("ccy", jstring("EUR")),
                      ("flag", jboolean(False)), ("k y", jchar("x"))])),
)


def test_golden_map_message():
    body = ('<map><elt name="price" dt="r8">2.24</elt><elt name="qty" dt="i4">100</elt><elt name="ccy">EUR</elt>'
            '<elt name="flag" dt="boolean">0</elt><elt name="k y" dt="char">x</elt></map>')
    expected = golden_mqmd(MsgType=1, Expiry=600, Priority=7, Persistence=0, CorrelId=b"order-17".ljust(24, b"\0"),
                           ReplyToQ="REPLY.Q", ReplyToQMgr="QM1", PutDate="20231114", PutTime="22132000") + golden_rfh2(
        b"MQSTR   ",
        "<mcd><Msd>jms_map</Msd><Type>quote</Type></mcd>",
        "<jms><Dst>topic://prices/eur</Dst><Tms>1700000000000</Tms><Dlv>1</Dlv><Exp>1700000060000</Exp>"
        "<Pri>7</Pri><Cid>order-17</Cid><Rto>queue://QM1/REPLY.Q</Rto></jms>",
    ) + body.encode()
    data, report = jms_to_mq_bytes(MAP_MESSAGE, now_ms=NOW)
    assert report.findings == []
    assert data == expected
    back, report = mq_bytes_to_jms(data, now_ms=NOW)
    assert back == MAP_MESSAGE and report.findings == []


def test_little_endian_option_swaps_every_integer_and_keeps_the_message():
    opts = JmsToMqOptions(encoding=C.MQENC_REVERSED)
    data, _ = jms_to_mq_bytes(TEXT_MESSAGE, now_ms=NOW, options=opts)
    assert data[4:8] == b"\x02\x00\x00\x00" and data[364 + 4:364 + 8] == b"\x02\x00\x00\x00"
    assert mq_bytes_to_jms(data, now_ms=NOW)[0] == TEXT_MESSAGE


def test_target_client_mq_writes_no_rfh2_and_reports_what_only_the_rfh2_carried():
    data, report = jms_to_mq_bytes(TEXT_MESSAGE, now_ms=NOW, options=JmsToMqOptions(with_rfh2=False))
    assert data == golden_mqmd(MsgId=MSG_ID, UserIdentifier="app", PutApplName="demo.jar", PutDate="20231114",
                               PutTime="22132012").replace(b"MQHRF2  ", b"MQSTR   ") + "caf\u00e9 & cr\u00e8me".encode()
    assert names(report) == ["JMSDestination", "color", "count", "gone", "ok"]
    back, _ = mq_bytes_to_jms(data, now_ms=NOW)
    assert back.body == TEXT_MESSAGE.body and back.headers.timestamp == TEXT_MESSAGE.headers.timestamp
    mq, report = to_mq(MAP_MESSAGE, options=JmsToMqOptions(with_rfh2=False))
    assert mq.headers == () and mq.md.format == C.MQFMT_STRING and mq.md.expiry == 600
    assert names(report, Change.DROPPED) == ["JMSDestination", "JMSType"]
    assert names(report, Change.COERCED) == ["JMSCorrelationID", "MapMessage body"]   # 'ID:6f72...', Text


# ==================================================================================================
# One test group per rule, both directions
# ==================================================================================================
def test_message_id():
    mq, r = to_mq(msg(message_id=bytes_to_id(MSG_ID)))
    assert mq.md.msg_id == MSG_ID and r.findings == []
    assert to_jms(mq)[0].headers.message_id == "ID:414d5120514d3120202020202020202065a1b2c3000012ab"
    mq, r = to_mq(msg(message_id="ID:" + MSG_ID.hex().upper()))
    assert mq.md.msg_id == MSG_ID and names(r, Change.COERCED) == ["JMSMessageID"]
    mq, r = to_mq(msg(message_id="ID:host-1-1234-1:1:1:1:1"))          # an ActiveMQ id
    assert mq.md.msg_id == C.MQMI_NONE and names(r, Change.DROPPED) == ["JMSMessageID"]
    assert to_jms(mq)[0].headers.message_id is None
    assert id_to_bytes("ID:" + "0" * 47) is None and id_to_bytes("id:" + "0" * 48) is None


def test_correlation_id_forms():
    hex_id = bytes_to_id(MSG_ID)
    mq, r = to_mq(msg(correlation_id=hex_id))
    assert mq.md.correl_id == MSG_ID and folder(mq, "jms")["Cid"] == (hex_id, None) and r.findings == []
    mq, r = to_mq(msg(correlation_id="order-17"))
    assert mq.md.correl_id == b"order-17" + bytes(16) and folder(mq, "jms")["Cid"][0] == "order-17"
    long_id = "x" * 30 + "\u00e9"
    mq, r = to_mq(msg(correlation_id=long_id))
    assert mq.md.correl_id == b"x" * 24 and names(r) == ["MQMD.CorrelId"]
    assert to_jms(mq)[0].headers.correlation_id == long_id                   # Cid wins (IBM MQ JMS mapping)
    mq, r = to_mq(msg(correlation_id=b"\x01\x02"))
    assert mq.md.correl_id == b"\x01\x02" + bytes(22) and "Cid" not in folder(mq, "jms")
    assert names(r, Change.COERCED) == ["JMSCorrelationID"]
    assert to_jms(mq)[0].headers.correlation_id == "ID:0102" + "00" * 22


def test_correlation_id_receive_precedence():
    md = got(version=2, correl_id=MSG_ID)
    assert to_jms(native(md))[0].headers.correlation_id == bytes_to_id(MSG_ID)
    assert to_jms(native(got()))[0].headers.correlation_id is None          # all zero -> null
    j, r = to_jms(with_rfh2(md, (F("jms", ("Cid", "other")),)))
    assert j.headers.correlation_id == "other" and names(r) == ["MQMD.CorrelId"]


def test_priority():
    mq, r = to_mq(msg(priority=4))
    assert mq.md.priority == 4 and "Pri" not in folder(mq, "jms")            # Pri only when not 4 (§6.2)
    mq, _ = to_mq(msg(priority=0))
    assert mq.md.priority == 0 and folder(mq, "jms")["Pri"] == ("0", None)
    mq, r = to_mq(msg(priority=4), options=JmsToMqOptions(priority_as_q_def=True))
    assert mq.md.priority == C.MQPRI_PRIORITY_AS_Q_DEF and r.findings == []
    j, r = to_jms(mq)
    assert j.headers.priority == 4 and names(r, Change.DEFAULTED) == ["JMSPriority"]
    j, r = to_jms(with_rfh2(got(priority=8), (F("jms", ("Pri", "5")),)))
    assert j.headers.priority == 8 and names(r) == ["jms/Pri"]               # MQMD wins (IBM MQ JMS mapping)
    j, r = to_jms(with_rfh2(got(priority=-1), (F("jms", ("Pri", "5")),)))
    assert j.headers.priority == 5 and r.findings == []


def test_delivery_mode():
    for mode, persistence in ((DeliveryMode.PERSISTENT, 1), (DeliveryMode.NON_PERSISTENT, 0)):
        mq, _ = to_mq(msg(delivery_mode=mode))
        assert mq.md.persistence == persistence and folder(mq, "jms")["Dlv"] == (str(int(mode)), None)
        assert to_jms(native(got(persistence=persistence)))[0].headers.delivery_mode is mode
    j, r = to_jms(with_rfh2(got(persistence=1), (F("jms", ("Dlv", "1")),)))
    assert j.headers.delivery_mode is DeliveryMode.NON_PERSISTENT and names(r) == ["MQMD.Persistence"]
    j, r = to_jms(native(got(persistence=C.MQPER_PERSISTENCE_AS_Q_DEF)))
    assert j.headers.delivery_mode is DeliveryMode.PERSISTENT and names(r, Change.DEFAULTED) == ["JMSDeliveryMode"]
    with pytest.raises(MappingError, match="MQRFH2 jms folder: Dlv") as exc:
        to_jms(with_rfh2(got(), (F("jms", ("Dlv", "3")),)))
    assert exc.value.field == "Dlv"


def test_expiration():
    mq, r = to_mq(msg(expiration=NOW + 60_000))
    assert mq.md.expiry == 600 and folder(mq, "jms")["Exp"] == (str(NOW + 60_000), None) and r.findings == []
    assert to_mq(msg(expiration=NOW + 60_001))[0].md.expiry == 601       # never earlier than asked
    mq, _ = to_mq(msg())
    assert mq.md.expiry == C.MQEI_UNLIMITED and "Exp" not in folder(mq, "jms")
    mq, r = to_mq(msg(expiration=NOW - 5))
    assert mq.md.expiry == 1 and names(r) == ["MQMD.Expiry"]
    mq, r = to_mq(msg(expiration=NOW + (2**31) * 100))                    # TTL beyond an MQLONG (§6.2)
    assert mq.md.expiry == -1 and folder(mq, "jms")["Exp"][0] == str(NOW + 2**31 * 100) and names(r) == ["MQMD.Expiry"]
    assert to_jms(mq)[0].headers.expiration == NOW + 2**31 * 100          # Exp is the source (IBM MQ JMS mapping)
    assert to_jms(native(got(expiry=250)))[0].headers.expiration == NOW + 25_000   # seed "Expiry -> JMSExpiration"
    assert to_jms(native(got()))[0].headers.expiration == 0
    with pytest.raises(MappingError, match="Exp"):
        to_jms(with_rfh2(got(), (F("jms", ("Exp", "soon")),)))


def test_put_date_time():
    assert put_date_time(1700000000120) == ("20231114", "22132012")      # the IBM MQ docs' example
    assert put_epoch_ms("20231114", "22132012") == 1700000000120
    assert put_date_time(1700000000129) == ("20231114", "22132012")      # hundredths truncated
    assert put_date_time(-1) == ("19691231", "23595999")
    assert put_date_time(-62135596800000) == ("00010101", "00000000")
    assert put_date_time(-62135596800001) is None
    assert put_epoch_ms("20161231", "23596000") == put_epoch_ms("20170101", "00000000")   # leap second 60
    for date, time, fld in (("2023114", "22132012", "PutDate"), ("20230230", "00000000", "PutDate"),
                            ("20231114", "24000000", "PutTime"), ("20231114", "2213201", "PutTime")):
        with pytest.raises(MappingError) as exc:
            put_epoch_ms(date, time)
        assert exc.value.field == fld and exc.value.offset == (304 if fld == "PutDate" else 312)


def test_timestamp():
    mq, r = to_mq(msg(timestamp=1700000000123))
    assert (mq.md.put_date, mq.md.put_time) == ("20231114", "22132012") and r.findings == []
    assert folder(mq, "jms")["Tms"] == ("1700000000123", None)
    assert to_jms(mq)[0].headers.timestamp == 1700000000123                 # Tms wins, ms kept
    j, r = to_jms(native(got(put_date="20231114", put_time="22132012")))
    assert j.headers.timestamp == 1700000000120 and r.findings == []
    j, r = to_jms(with_rfh2(got(put_date="20231114", put_time="22140000"), (F("jms", ("Tms", "1700000000120")),)))
    assert j.headers.timestamp == 1700000000120 and names(r) == ["MQMD.PutDate"]
    mq, r = to_mq(msg(timestamp=-(2**62)))
    assert mq.md.put_date == "" and names(r) == ["MQMD.PutDate"] and to_jms(mq)[0].headers.timestamp == -(2**62)
    assert to_mq(msg())[0].md.put_date == "" and "Tms" not in folder(to_mq(msg())[0], "jms")
    with pytest.raises(MappingError, match="PutTime"):
        to_jms(native(got(put_date="20231114", put_time="2213")))


def test_reply_to_and_msg_type():
    mq, r = to_mq(msg(reply_to=Destination.queue("REPLY.Q", "QM1")))
    assert (mq.md.reply_to_q, mq.md.reply_to_q_mgr, mq.md.msg_type) == ("REPLY.Q", "QM1", C.MQMT_REQUEST)
    assert folder(mq, "jms")["Rto"] == ("queue://QM1/REPLY.Q", None) and r.findings == []
    mq, r = to_mq(msg(reply_to=Destination.topic("answers")))
    assert mq.md.reply_to_q == "" and mq.md.msg_type == C.MQMT_DATAGRAM and names(r) == ["MQMD.ReplyToQ"]
    assert to_jms(mq)[0].headers.reply_to == Destination.topic("answers")
    mq, r = to_mq(msg(reply_to=Destination.queue("Q" * 50)))
    assert mq.md.reply_to_q == "Q" * 48 and names(r, Change.TRUNCATED) == ["MQMD.ReplyToQ"]
    j, r = to_jms(mq)
    assert j.headers.reply_to == Destination.queue("Q" * 50) and r.findings == []  # Rto wins, MQMD consistent
    j, r = to_jms(to_mq(msg(reply_to=Destination.queue("\u20acQ ", "QM1")))[0])
    assert j.headers.reply_to == Destination.queue("\u20acQ ", "QM1") and r.findings == []
    j, r = to_jms(with_rfh2(got(reply_to_q="OTHER"), (F("jms", ("Rto", "queue:///R")),)))
    assert j.headers.reply_to == Destination.queue("R") and names(r) == ["MQMD.ReplyToQ"]
    j, r = to_jms(native(got(msg_type=C.MQMT_REQUEST, reply_to_q="R", reply_to_q_mgr="QM2")))
    assert j.headers.reply_to == Destination.queue("R", "QM2") and r.findings == []
    j, r = to_jms(native(got(msg_type=C.MQMT_REPLY)))
    assert j.headers.reply_to is None and j.properties["JMS_IBM_MsgType"] == jint(C.MQMT_REPLY) and r.findings == []
    j, r = to_jms(native(got(msg_type=C.MQMT_REQUEST, reply_to_q="R", reply_to_q_mgr="QM/1")))  # legal MQ name
    assert j.headers.reply_to == Destination.queue("R") and names(r) == ["MQMD.ReplyToQMgr"]
    with pytest.raises(MappingError, match="Rto"):
        to_jms(with_rfh2(got(), (F("jms", ("Rto", "REPLY.Q")),)))


def test_destination():
    mq, _ = to_mq(msg(destination=Destination.queue("Q1", "QM1")))
    assert folder(mq, "jms")["Dst"] == ("queue://QM1/Q1", None)
    j, r = to_jms(with_rfh2(got(), (F("mqps", ("Top", "a/b")),), fmt=C.MQFMT_NONE))
    assert j.headers.destination == Destination.topic("a/b") and r.findings == []
    j, r = to_jms(with_rfh2(got(), (F("jms", ("Dst", "topic://x")), F("mqps", ("Top", "a/b")))))
    assert j.headers.destination == Destination.topic("x") and names(r) == ["mqps/Top"]


def test_backout_count_and_delivery_count():
    mq, r = to_mq(JmsMessage(JmsHeaders(redelivered=True), props(("JMSXDeliveryCount", jint(3)))))
    assert mq.md.backout_count == 2 and r.findings == []                   # seed: BackoutCount - 1
    j, _ = to_jms(mq)
    assert j.headers.redelivered is True and j.properties["JMSXDeliveryCount"] == jint(3)
    j, _ = to_jms(native(got()))
    assert j.headers.redelivered is False and j.properties["JMSXDeliveryCount"] == jint(1)
    mq, r = to_mq(JmsMessage(JmsHeaders(redelivered=True)))
    assert mq.md.backout_count == 1 and names(r, Change.DEFAULTED) == ["JMSXDeliveryCount"]
    mq, r = to_mq(JmsMessage(JmsHeaders(), props(("JMSXDeliveryCount", jint(2)))))
    assert names(r, Change.COERCED) == ["JMSRedelivered"]
    with pytest.raises(MappingError, match="JMSXDeliveryCount"):
        to_mq(JmsMessage(JmsHeaders(), props(("JMSXDeliveryCount", jstring("2")))))
    with pytest.raises(MappingError, match="JMSXDeliveryCount"):
        to_mq(JmsMessage(JmsHeaders(), props(("JMSXDeliveryCount", jint(0)))))
    mq, r = to_mq(msg(properties=(("JMSXUserID", jstring(None)),)))
    assert mq.md.user_identifier == "" and names(r) == ["JMSXUserID"]


def test_user_and_application_id():
    mq, r = to_mq(msg(properties=(("JMSXUserID", jstring("mqm")), ("JMSXAppID", jstring("bridge")))))
    assert (mq.md.user_identifier, mq.md.put_appl_name) == ("mqm", "bridge") and r.findings == []
    mq, r = to_mq(msg(properties=(("JMSXUserID", jstring("averyveryverylonguser")),)))
    assert mq.md.user_identifier == "averyveryver" and names(r) == ["JMSXUserID"]
    mq, r = to_mq(msg(properties=(("JMSXUserID", jstring("\u20acuro")),)))
    assert mq.md.user_identifier == "?uro" and names(r, Change.COERCED) == ["JMSXUserID"]
    j, _ = to_jms(native(got(user_identifier="  app", put_appl_name="java")))
    assert j.properties["JMSXUserID"] == jstring("app") and j.properties["JMSXAppID"] == jstring("java")
    assert "JMSXUserID" not in to_jms(native(got()))[0].properties


def test_group():
    gid = bytes_to_id(MSG_ID)
    mq, r = to_mq(msg(properties=(("JMSXGroupID", jstring(gid)), ("JMSXGroupSeq", jint(3)),
                                  ("JMS_IBM_Last_Msg_In_Group", jboolean(True)))))
    assert (mq.md.group_id, mq.md.msg_seq_number, mq.md.msg_flags) == (MSG_ID, 3, 24) and r.findings == []
    assert "Gid" not in folder(mq, "jms")
    j, r = to_jms(mq)
    assert j.properties["JMSXGroupID"] == jstring(gid) and j.properties["JMSXGroupSeq"] == jint(3)
    assert j.properties["JMS_IBM_Last_Msg_In_Group"] == jboolean(True) and r.findings == []
    mq, r = to_mq(msg(properties=(("JMSXGroupID", jstring("orders-of-2023-11-14-batch")), ("JMSXGroupSeq", jint(1)))))
    assert mq.md.group_id == b"orders-of-2023-11-14-bat" and folder(mq, "jms")["Gid"][0] == "orders-of-2023-11-14-batch"
    assert mq.md.msg_flags == C.MQMF_MSG_IN_GROUP and names(r) == ["MQMD.GroupId"]
    assert to_jms(mq)[0].properties["JMSXGroupID"] == jstring("orders-of-2023-11-14-batch")
    j, r = to_jms(native(got(version=2, group_id=MSG_ID, msg_seq_number=5)))     # no group flag (IBM MQ JMS mapping)
    assert "JMSXGroupID" not in j.properties and names(r) == ["MQMD.GroupId", "MQMD.MsgSeqNumber"]
    j, r = to_jms(native(got(version=2, msg_flags=C.MQMF_SEGMENT | C.MQMF_MSG_IN_GROUP, msg_seq_number=2)))
    assert j.properties["JMSXGroupSeq"] == jint(2) and names(r) == ["MQMD.MsgFlags"]


def test_ibm_mqmd_properties():
    mq, r = to_mq(msg(properties=(("JMS_IBM_MsgType", jint(C.MQMT_REPLY)), ("JMS_IBM_Feedback", jint(7)),
                                  ("JMS_IBM_PutApplType", jint(C.MQAT_JAVA)))))
    assert (mq.md.msg_type, mq.md.feedback, mq.md.put_appl_type) == (2, 7, 28) and r.findings == []
    assert "usr" not in [f.name for f in mq.headers[0].folders]
    assert dict(to_jms(mq)[0].properties) == dict(msg(properties=(
        ("JMS_IBM_MsgType", jint(2)), ("JMS_IBM_Feedback", jint(7)), ("JMS_IBM_PutApplType", jint(28)))).properties)
    mq, r = to_mq(msg(reply_to=Destination.queue("R"), properties=(("JMS_IBM_MsgType", jint(C.MQMT_REQUEST)),)))
    assert mq.md.msg_type == C.MQMT_REQUEST and names(r) == ["JMS_IBM_MsgType"]    # the default: not read back
    assert "JMS_IBM_MsgType" not in to_jms(mq)[0].properties
    with pytest.raises(MappingError, match="JMS_IBM_Feedback"):
        to_mq(msg(properties=(("JMS_IBM_Feedback", jstring("7")),)))


def test_jms_type():
    mq, r = to_mq(msg(TextBody("x"), type="quote"))
    assert folder(mq, "mcd") == {"Msd": ("jms_text", None), "Type": ("quote", None)}
    mq, r = to_mq(msg(TextBody("<a/>"), type="mcd://xmlnsc/set1/Order?format=XML1"))
    assert folder(mq, "mcd") == {"Msd": ("xmlnsc", None), "Set": ("set1", None), "Type": ("Order", None),
                                 "Fmt": ("XML1", None)}
    j, _ = to_jms(mq)
    assert j.headers.type == "mcd://xmlnsc/set1/Order?format=XML1" and j.body == TextBody("<a/>")
    mq, _ = to_mq(msg(MapBody(), type="mcd://xml"))         # a Map keeps jms_map: the URI is a plain type
    assert folder(mq, "mcd") == {"Msd": ("jms_map", None), "Type": ("mcd://xml", None)}
    mq, _ = to_mq(msg(TextBody("x"), type="mcd://MRM/s/t/"))  # not canonical: kept verbatim
    assert folder(mq, "mcd")["Type"] == ("mcd://MRM/s/t/", None) and to_jms(mq)[0].headers.type == "mcd://MRM/s/t/"


def test_user_properties_every_type():
    values = (("b", jboolean(False)), ("i1", jbyte(-128)), ("i2", jshort(32767)), ("i4", jint(-5)),
              ("i8", jlong(2**63 - 1)), ("f", jfloat(1.5)), ("d", jdouble(-0.25)), ("s", jstring("a<&>b")),
              ("n", jstring(None)), ("x", jbytes(b"\x00\xff")), ("e", jstring("")))
    mq, r = to_mq(msg(properties=values))
    assert r.findings == []
    assert folder(mq, "usr") == {"b": ("0", "boolean"), "i1": ("-128", "i1"), "i2": ("32767", "i2"),
                                 "i4": ("-5", "i4"), "i8": (str(2**63 - 1), "i8"), "f": ("1.5", "r4"),
                                 "d": ("-0.25", "r8"), "s": ("a<&>b", None), "n": (None, None),
                                 "x": ("00FF", "bin.hex"), "e": ("", None)}
    data = encode_message(mq)
    assert b"<n xsi:nil='true'></n>" in data and b"<s>a&lt;&amp;&gt;b</s>" in data
    assert dict(mq_bytes_to_jms(data, now_ms=NOW)[0].properties) == dict(msg(properties=values).properties)


def test_properties_the_usr_folder_cannot_carry():
    mq, r = to_mq(msg(properties=(("JMS_IBM_Format", jstring("MQSTR")), ("JMSXOther", jint(1)), ("$x", jint(1)),
                                  ("\u00e9t\u00e9", jint(2)), ("c", jchar("z")))))
    assert folder(mq, "usr") == {"c": ("z", None)}
    assert names(r, Change.DROPPED) == ["JMS_IBM_Format", "JMSXOther", "$x", "\u00e9t\u00e9"]
    assert names(r, Change.COERCED) == ["c"]
    j, r = to_jms(with_rfh2(got(), (F("usr", ("a-b", "1"), ("ok", "1", "i4"), ("ok", "2", "i4"),
                                          ("JMSXUserID", "x")),)))
    assert dict(j.properties) == {"JMSXDeliveryCount": jint(1), "ok": jint(1)}
    assert names(r) == ["usr/a-b", "usr/ok", "usr/JMSXUserID"]
    with pytest.raises(MappingError) as exc:
        to_jms(with_rfh2(got(), (F("usr", ("big", "128", "i1")),)))
    assert exc.value.field == "big" and "usr folder property" in str(exc.value)


def test_bodies_each_type():
    cases = [
        (NoBody(), "jms_none", C.MQFMT_NONE, b""),
        (TextBody("h\u00e9"), "jms_text", C.MQFMT_STRING, "h\u00e9".encode()),
        (BytesBody(b"\x00\x01"), "jms_bytes", C.MQFMT_NONE, b"\x00\x01"),
        (MapBody(TypedMap([("a", jint(1))])), "jms_map", C.MQFMT_STRING, b'<map><elt name="a" dt="i4">1</elt></map>'),
        (StreamBody((jint(1), jstring("t"))), "jms_stream", C.MQFMT_STRING,
         b'<stream><elt dt="i4">1</elt><elt>t</elt></stream>'),
        (ObjectBody(b"\xac\xed\x00\x05t\x00\x01x"), "jms_object", C.MQFMT_NONE, b"\xac\xed\x00\x05t\x00\x01x"),
    ]
    for body, msd, fmt, raw in cases:
        mq, r = to_mq(msg(body))
        assert folder(mq, "mcd")["Msd"] == (msd, None) and mq.body_format == fmt and mq.body == raw, body
        assert mq.md.format == C.MQFMT_RF_HEADER_2 and r.findings == []
        assert to_jms(mq)[0].body == body


def test_body_losses_are_reported():
    mq, r = to_mq(msg(TextBody(None)))
    assert mq.body == b"" and names(r) == ["TextMessage body"] and to_jms(mq)[0].body == TextBody("")
    mq, r = to_mq(msg(ObjectBody(b"\xac\xed", "com.example.Order")))
    assert names(r) == ["ObjectMessage class name"] and to_jms(mq)[0].body == ObjectBody(b"\xac\xed")
    assert to_jms(to_mq(msg(ObjectBody(None)))[0])[0].body == ObjectBody(None)
    with pytest.raises(MappingError, match="CCSID 819"):
        to_mq(msg(TextBody("\u20ac")), options=JmsToMqOptions(body_ccsid=C.CCSID_ISO8859_1))


def test_text_in_other_ccsids():
    for ccsid, enc in ((C.CCSID_ISO8859_1, C.MQENC_NORMAL), (C.CCSID_UTF16, C.MQENC_REVERSED),
                       (C.CCSID_EBCDIC_US, C.MQENC_NORMAL)):
        mq, _ = to_mq(msg(TextBody("caf\u00e9")), options=JmsToMqOptions(encoding=enc, body_ccsid=ccsid))
        assert mq.body_ccsid == ccsid
        assert mq_bytes_to_jms(encode_message(mq), now_ms=NOW)[0].body == TextBody("caf\u00e9")
    assert to_mq(msg(TextBody("caf\u00e9")), options=JmsToMqOptions(
        encoding=C.MQENC_REVERSED, body_ccsid=C.CCSID_UTF16))[0].body == "caf\u00e9".encode("utf-16-le")


def test_mq_native_messages():
    j, r = to_jms(native(got(coded_char_set_id=C.CCSID_ISO8859_1), b"caf\xe9", C.MQFMT_STRING))
    assert j.body == TextBody("caf\u00e9") and j.headers.type is None
    j, r = to_jms(native(got(coded_char_set_id=0), "\u00e9".encode(), C.MQFMT_STRING))   # Q_MGR -> UTF-8
    assert j.body == TextBody("\u00e9")
    j, r = to_jms(native(got(), b"\x01\x02"))
    assert j.body == BytesBody(b"\x01\x02") and r.findings == []
    j, r = to_jms(native(got(), b"x", "MQADMIN "))
    assert j.body == BytesBody(b"x") and names(r) == ["Format"]
    with pytest.raises(MappingError, match="TextMessage body") as exc:
        to_jms(native(got(coded_char_set_id=C.CCSID_UTF8), b"ok\xff", C.MQFMT_STRING))
    assert exc.value.offset == 2
    with pytest.raises(MappingError, match="CCSID 4242"):
        to_jms(native(got(coded_char_set_id=4242), b"x", C.MQFMT_STRING))


def test_unmapped_mq_parts_are_reported():
    md = got(version=2, report=C.MQRO_COA, feedback=5, put_appl_type=C.MQAT_JAVA, appl_identity_data="id")
    rfh = Rfh2(folders=(F("mcd", ("Msd", "jms_bytes"), ("Fmt", "x")), F("jms", ("Uci", "41")),
                        F("mqtt", ("qos", "1")), F("mqps", ("Top", "a"), ("Ret", "1"))))
    mq = build_message(md, (Rfh1(pairs=(("a", "b"),)), rfh), b"z")
    j, r = to_jms(mq)
    assert j.body == BytesBody(b"z") and j.headers.destination == Destination.topic("a")
    assert sorted(names(r)) == sorted(["MQRFH", "mcd/Fmt", "MQMD.report", "MQMD.appl_identity_data", "jms/Uci",
                                       "mqps/Ret", "mqtt folder"])
    assert j.properties["JMS_IBM_Feedback"] == jint(5) and j.properties["JMS_IBM_PutApplType"] == jint(28)
    assert all(f.change is Change.DROPPED for f in r.findings)


def test_bad_input_names_the_field():
    with pytest.raises(MappingError, match="now_ms"):
        jms_to_mq(msg(), now_ms=1.5)  # type: ignore[arg-type]
    with pytest.raises(MappingError) as exc:
        to_jms(with_rfh2(got(), (F("jms", ("Tms", "12x")),)))
    assert (exc.value.structure, exc.value.field) == ("MQRFH2 jms folder", "Tms")
    with pytest.raises(MappingError, match="map body"):
        to_jms(with_rfh2(got(), (F("mcd", ("Msd", "jms_map")),), b"<map><elt name='a' dt='i4'>x</elt>"))
    with pytest.raises(MappingError, match="JMSXGroupSeq"):
        to_mq(msg(properties=(("JMSXGroupSeq", jlong(1)),)))
    with pytest.raises(MappingError, match="usr folder property"):
        to_mq(msg(properties=(("bad", jstring("\x01")),)))


# ==================================================================================================
# Real messages: the checked-in fixture and the captures in ../shared/reference/real-mq-messages
# ==================================================================================================
def test_fixture_jms_text_big_endian():
    j, r = mq_bytes_to_jms((FIXTURE_DIR / "jms_text_big_endian.bin").read_bytes(), now_ms=NOW)
    assert j.body == TextBody("caf\u00e9 & cr\u00e8me")
    h = j.headers
    assert (h.destination, h.delivery_mode, h.timestamp, h.priority) == (
        Destination.queue("DEV.QUEUE.1"), DeliveryMode.PERSISTENT, 1700000000120, 4)
    assert h.message_id == "ID:414d5120514d3120202020202020202065a1b2c3000012ab"
    assert dict(j.properties) == {"JMSXDeliveryCount": jint(1), "JMSXUserID": jstring("app"),
                                  "JMSXAppID": jstring("demo.jar"), "color": jstring("blue"), "count": jint(3),
                                  "JMS_IBM_PutApplType": jint(C.MQAT_JAVA)}
    assert names(r) == ["usr/gone"]     # a null long is no JMS property


def test_real_capture_tnt4j_rfh2():
    data = real_message("tnt4j_RFH2.msg.hex")
    j, r = mq_bytes_to_jms(data, now_ms=NOW)
    assert isinstance(j.body, TextBody) and j.body.text.startswith("<GetIndicativeAssociate")   # CCSID 437
    h = j.headers
    assert h.message_id == "ID:414d51204449494e464f425131202020a10b474f902c3b21"
    assert (h.priority, h.delivery_mode, h.expiration, h.timestamp, h.correlation_id, h.destination) == (
        4, DeliveryMode.NON_PERSISTENT, 0, 0, None, None)
    assert j.properties["Root"] == jstring("ADP") and len(j.properties) == 19       # 18 usr + delivery count
    assert j.properties["RoutingOverrideQueue"] == jstring("ADP.ES.INFO.BB.PAYX")
    assert r.findings == []
    mq, r2 = to_mq(j)                          # back to MQ: every mapped field and the usr folder survive
    assert r2.findings == []
    assert folder(mq, "usr") == folder(decode_message(data), "usr")
    assert (mq.md.msg_id, mq.md.priority, mq.md.persistence) == (decode_message(data).md.msg_id, 4, 0)


def test_real_capture_pymqi_rfh2_with_an_mqmd_in_front():
    rfh_and_body = real_message("pymqi_single_rfh2.dat.hex")
    md = encode_mqmd(got(version=2, encoding=C.MQENC_NORMAL, coded_char_set_id=C.CCSID_UTF8,
                          format=C.MQFMT_RF_HEADER_2, persistence=1, priority=0))
    j, r = mq_bytes_to_jms(md + rfh_and_body, now_ms=NOW)
    assert j.body == TextBody("<testData><testVar>testValue</testVar></testData>")
    assert j.headers.type == "mcd://xmlnsc"                     # a non-JMS Msd gives the URI (IBM MQ JMS mapping)
    assert (j.headers.priority, j.headers.delivery_mode) == (0, DeliveryMode.PERSISTENT)
    assert sorted(names(r)) == ["psc folder", "testFolder folder"]
    mq, _ = to_mq(j)
    assert folder(mq, "mcd") == {"Msd": ("xmlnsc", None)} and mq.body_format == C.MQFMT_STRING


# ==================================================================================================
# Round trips (hypothesis)
# ==================================================================================================
def _exact_or_reported(message: JmsMessage, via_bytes: bool) -> tuple[JmsMessage, ConversionReport]:
    try:
        if via_bytes:
            data, report = jms_to_mq_bytes(message, now_ms=NOW)
            return mq_bytes_to_jms(data, now_ms=NOW)[0], report
        mq, report = to_mq(message)
    except MappingError:
        assume(False)
        raise
    return to_jms(mq)[0], report


def with_delivery_count(message: JmsMessage) -> JmsMessage:
    """The provider sets JMSXDeliveryCount on every received message; without it the report is never empty."""
    if "JMSXDeliveryCount" in message.properties:
        return message
    count = ("JMSXDeliveryCount", jint(2 if message.headers.redelivered else 1))
    return JmsMessage(message.headers, TypedMap((count, *message.properties.pairs), what="property"), message.body)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(js.messages.map(with_delivery_count))
def test_any_message_comes_back_equal_unless_reported(message):
    # About one example in eight has an empty report (measured): those must come back equal; the rest
    # exercise the report itself.
    back, report = _exact_or_reported(message, via_bytes=False)
    if not report:
        assert same(back, message)


_hex_id = st.binary(min_size=24, max_size=24).filter(any).map(bytes_to_id)
_mqchars = st.text(st.characters(min_codepoint=0x21, max_codepoint=0xFF), min_size=1, max_size=12)
_usr_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True).filter(
    lambda n: not n.startswith("JMS") and n.upper() not in {"NULL", "TRUE", "FALSE", "NOT", "AND", "OR", "BETWEEN",
                                                            "LIKE", "IN", "IS", "ESCAPE"})
_usr_values = js.java_values().filter(lambda v: v.type is not JavaType.CHAR)
_short_text = js.xml_text.filter(lambda s: len(s.encode()) <= 24)


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
        type=draw(st.none() | js.xml_text.filter(lambda t: not t.lower().startswith("mcd://"))),
        redelivered=count > 1,
    )
    pairs = [("JMSXDeliveryCount", jint(count))]
    for name in ("JMSXUserID", "JMSXAppID"):
        if draw(st.booleans()):
            pairs.append((name, jstring(draw(_mqchars))))
    if draw(st.booleans()):
        pairs += [("JMSXGroupID", jstring(draw(_hex_id | _short_text))),
                  ("JMSXGroupSeq", jint(draw(st.integers(1, 99))))]
        if draw(st.booleans()):
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
    return JmsMessage(headers, TypedMap(pairs, what="property"), body)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(representable(), st.booleans())
def test_representable_messages_round_trip_exactly(message, via_bytes):
    data, report = jms_to_mq_bytes(message, now_ms=NOW)
    assert report.findings == []
    back = mq_bytes_to_jms(data, now_ms=NOW)[0] if via_bytes else to_jms(to_mq(message)[0])[0]
    assert same(back, message)


# MQ -> JMS -> MQ keeps every mapped field
MAPPED_MQMD = ("feedback", "put_appl_type",
               "priority", "persistence", "msg_id", "correl_id", "backout_count", "reply_to_q", "reply_to_q_mgr",
               "msg_type", "user_identifier", "put_appl_name", "put_date", "put_time", "group_id", "msg_seq_number",
               "msg_flags", "expiry")
_latin = st.text(st.characters(min_codepoint=0x21, max_codepoint=0xFF), max_size=12)


@st.composite
def mq_messages(draw: st.DrawFn) -> MqMessage:
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
        coded_char_set_id=C.CCSID_UTF8, encoding=draw(st.sampled_from([273, 546])))
    usr = draw(st.lists(st.tuples(_usr_names, _usr_values), max_size=4, unique_by=lambda kv: kv[0]))
    body_text = draw(st.text(st.characters(blacklist_categories=("Cs",)), max_size=20))
    if not usr and draw(st.booleans()):
        return native(md, body_text.encode(), C.MQFMT_STRING)
    elements = tuple(RfhElement(n, *reversed(encode_value(v, name=n))) for n, v in usr)
    return with_rfh2(md, (F("mcd", ("Msd", "jms_text")), RfhFolder("usr", elements)), body_text.encode())


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(mq_messages())
def test_mq_to_jms_to_mq_keeps_every_mapped_field(original):
    j, r1 = to_jms(decode_message(encode_message(original)))
    back, r2 = to_mq(j)
    for attr in MAPPED_MQMD:
        assert getattr(back.md, attr) == getattr(original.md, attr), attr
    assert folder(back, "usr") == folder(original, "usr")
    assert back.body == original.body and back.body_format == C.MQFMT_STRING
    assert r1.findings == [] and r2.findings == []


def test_repo_has_no_copy_of_the_real_captures():
    assert not list(Path(REPO_ROOT / "fixtures").rglob("*tnt4j*"))
    assert not list(Path(REPO_ROOT / "tests").rglob("*.hex"))


# ==================================================================================================
# `mqbridge convert --from jms --to mq` / `--from mq --to jms` (bridge.cli.mapping_jms_mq)
# ==================================================================================================
def test_cli_convert_both_ways(capsys, tmp_path):
    import json

    from bridge.cli.main import main
    from mappings.jms.message_json import message_to_dict

    src = tmp_path / "m.json"
    src.write_text(json.dumps(message_to_dict(MAP_MESSAGE)))
    out = tmp_path / "m.bin"
    assert main(["convert", "--from", "jms", "--to", "mq", "--now-ms", str(NOW), str(src), "--out", str(out)]) == 0
    assert "nothing lost or coerced" in capsys.readouterr().out
    assert out.read_bytes() == jms_to_mq_bytes(MAP_MESSAGE, now_ms=NOW)[0]
    assert main(["convert", "--from", "mq", "--to", "jms", "--json", "--now-ms", str(NOW), str(out)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["result"] == message_to_dict(MAP_MESSAGE) and doc["report"] == []
    src.write_text('{"headers": {"JMSPriority": 12}}')
    assert main(["convert", "--from", "jms", "--to", "mq", str(src)]) == 1
    assert "JMSPriority" in capsys.readouterr().err
    src.write_text("[1, 2]")
    assert main(["convert", "--from", "jms", "--to", "mq", str(src)]) == 2


# ==================================================================================================
# Robustness: any MQ message gives a JMS message or a MappingError, nothing else
# ==================================================================================================
from tests.mq_support import mqmds, rfh2s  # noqa: E402

_fuzz_names = st.sampled_from(["Dst", "Tms", "Dlv", "Exp", "Pri", "Cid", "Rto", "Gid", "Seq", "Msd", "Type", "Set",
                              "Fmt", "Top", "x", "ok", "JMSXUserID"])
_fuzz_values = st.none() | st.sampled_from(["", "1", "2", "-1", "4", "99999999999999999999", "queue:///Q",
                                           "topic://t", "ID:" + "ab" * 24, "jms_map", "jms_text", "jms_stream",
                                           "jms_object", "jms_none", "xmlnsc", "queue://a/b/c", "x y"])
_jms_folders = st.builds(
    RfhFolder, st.sampled_from(["jms", "mcd", "usr", "mqps"]),
    st.lists(st.builds(RfhElement, _fuzz_names, _fuzz_values, st.none() | st.sampled_from(["i4", "i8", "boolean",
                                                                                     "bin.hex", "r8", "i1", "qq"])),
             max_size=5).map(tuple))


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(mqmds(version=2), st.lists(_jms_folders, max_size=4), rfh2s, st.binary(max_size=30),
       st.sampled_from([C.MQFMT_STRING, C.MQFMT_NONE, "MQADMIN "]), st.booleans(), st.booleans())
def test_any_mq_message_converts_or_raises_mapping_error(md, jms_folders, extra, body, fmt, with_rfh2_header,
                                                         real_put_time):
    if real_put_time:   # otherwise most examples stop at a garbage PutDate (a MappingError, as they should)
        md = Mqmd(**{**{a: getattr(md, a) for a in Mqmd.__slots__}, "put_date": "20231114", "put_time": "22132012"})
    headers = (Rfh2(coded_char_set_id=C.CCSID_UTF8, folders=tuple(jms_folders)), extra) if with_rfh2_header else ()
    mq = build_message(md, headers, body, body_format=fmt)
    try:
        j, report = to_jms(mq)
    except MappingError:
        return
    assert isinstance(j, JmsMessage) and isinstance(report, ConversionReport)
    try:
        to_mq(j)                                  # and back: a JMS message from MQ converts again
    except MappingError as exc:                   # only values XML cannot carry may fail on the way back
        assert "cannot be written" in str(exc) or "XML" in str(exc) or "not representable" in str(exc), exc


def test_docs_name_every_rule():
    doc = (REPO_ROOT / "docs" / "jms-mq.md").read_text()
    from mappings.conversions.jms_mq import RULES

    for rule in RULES:
        assert f"| {rule.jms_field} |" in doc, rule.jms_field


def test_mqtt_origin_message_is_a_bytes_message_on_its_topic():
    """mq-wire-facts §7: an MQTT publication in MQ is a jms-bytes message; mqps/Top gives topic://<Top>."""
    from mappings.conversions.mqtt_mq import mqtt_to_mq
    from mappings.mqtt.publication import MqttPublication

    pub = MqttPublication(topic="sensors/hall/temp", payload=b'{"t":21.5}', qos=1, packet_id=7, client_id="thermo-1",
                          retain=True)
    mq, _ = mqtt_to_mq(pub)
    j, r = mq_bytes_to_jms(encode_message(mq), now_ms=NOW)
    assert j.body == BytesBody(b'{"t":21.5}')
    assert j.headers.destination == Destination.topic("sensors/hall/temp")
    assert j.headers.delivery_mode is DeliveryMode.PERSISTENT               # QoS 1 -> MQPER_PERSISTENT
    assert "mqtt folder" in names(r) and "mqps/Ret" in names(r)


# ==================================================================================================
# WMQ_TARGET_CLIENT=MQ (no RFH2)
# ==================================================================================================
def mqmd_only(message: JmsMessage) -> JmsMessage:
    """Strip what only the RFH2 carries, so that the MQMD alone holds the message exactly."""
    h = message.headers
    keep = [(n, v) for n, v in message.properties.pairs if n.startswith("JMS")
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


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(js.messages.map(with_delivery_count) | representable().map(mqmd_only))
def test_target_client_mq_report_is_complete(message):
    try:
        mq, report = to_mq(message, options=JmsToMqOptions(with_rfh2=False))
    except MappingError:
        return
    assert mq.headers == ()
    if not report:
        assert same(to_jms(mq)[0], message)


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(representable().map(mqmd_only))
def test_target_client_mq_carries_mqmd_only_messages_exactly(message):
    mq, report = to_mq(message, options=JmsToMqOptions(with_rfh2=False))
    assert report.findings == [] and same(to_jms(mq)[0], message)
