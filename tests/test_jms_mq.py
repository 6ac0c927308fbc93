"""JMS <-> MQ (mappings.conversions.jms_mq): the mapping tables of WebSphere Message Broker docs "JMS message
transformation" and of IBM MQ docs "Mapping JMS fields onto IBM MQ fields", golden bytes, the `mqbridge convert`
command and the docs' rule table. The rules one by one are in test_jms_mq_headers.py and test_jms_mq_bodies.py,
real messages in test_jms_mq_real.py, round trips in test_jms_mq_round_trip.py."""
from __future__ import annotations

import json
import re
import struct

import pytest

from bridge.cli.main import main
from mappings.conversions.jms_mq import (
    BODY_TABLE,
    JMS_TO_MQ,
    MQ_TO_JMS,
    RULES,
    JmsToMqOptions,
    bytes_to_id,
    jms_to_mq_bytes,
    mq_bytes_to_jms,
)
from mappings.jms.message_json import message_to_dict
from mappings.jms.model import (
    BodyType,
    DeliveryMode,
    Destination,
    JmsHeaders,
    JmsMessage,
    MapBody,
    TextBody,
    TypedMap,
    jboolean,
    jchar,
    jdouble,
    jint,
    jlong,
    jstring,
)
from mappings.mq import constants as C
from mappings.report import Change
from tests.jms_mq_support import MSG_ID, NOW, names, props, to_mq
from tests.mq_support import REPO_ROOT

SEED = REPO_ROOT.parent / "shared" / "seeds" / "message-broker-end-user-application-support.txt"


# ==================================================================================================
# The four tables of WMB docs "JMS message transformation" are all implemented (read from the document when present)
# ==================================================================================================
# WMB's names -> IBM MQ classes for JMS names
SEED_ALIASES = {"JMSQApplid": "JMSXAppID", "JMSApplid": "JMSXAppID", "JMSUser": "JMSXUserID",
                "JMSGroupid": "JMSXGroupID", "JMSGroupseq": "JMSXGroupSeq", "JMSTimeStamp": "JMSTimestamp",
                "JMSRedelivered = false": "JMSRedelivered", "JMSRedelivered = true": "JMSRedelivered"}


def seed_tables() -> list[list[tuple[str, str]]]:
    if not SEED.is_file():
        pytest.skip(f"the specification text {SEED} is not present (not part of the repository)")
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
# `mqbridge convert --from jms --to mq` / `--from mq --to jms` (bridge.cli.mapping_jms_mq)
# ==================================================================================================
def test_cli_convert_both_ways(capsys, tmp_path):
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


def test_docs_name_every_rule():
    doc = (REPO_ROOT / "docs" / "jms-mq.md").read_text()

    for rule in RULES:
        assert f"| {rule.jms_field} |" in doc, rule.jms_field
