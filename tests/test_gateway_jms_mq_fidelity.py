# The IBM MQ JMS mapping through a running `mqbridge serve` (issue #17, "JMS <-> MQ"): a Java producer's
# JMS_IBM_Report_* / JMS_IBM_Character_Set / JMSCorrelationID reach the MQMD and RFH2 of the message on an
# embedded queue as IBM MQ classes for JMS would put it, and an MQ message's Report/Format/CCSID/Encoding reach a
# Java consumer (over STOMP, so as String properties), through the session's real ActiveMQ and JmsTool.
from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from mappings.conversions.jms_mq import mq_bytes_to_jms
from mappings.mq import constants as C
from mappings.mq.message import build_message, decode_message, encode_message
from mappings.mq.mqmd import Mqmd
from mappings.mq.rfh2 import Rfh2, RfhElement, RfhFolder
from tests.support.activemq import BrokerEndpoints
from tests.support.gateway import GatewayProcess, wait_for
from tests.support.jmstool import JmsTool, typed
from tests.test_gateway_route_options import changes, egress, start, store_of

STRING = "java.lang.String"
activemq = pytest.mark.activemq


@pytest.fixture
def tag() -> str:
    return uuid.uuid4().hex[:10]


@activemq
def test_report_request_charset_and_correlation_id_from_a_java_producer_reach_the_mq_message(
    gateway_factory: Callable[..., GatewayProcess], activemq: BrokerEndpoints, jmstool: JmsTool, tmp_path: Path,
    tag: str,
) -> None:
    """ActiveMQ queue -> embedded queue: a COA request set with setIntProperty is MQMD.Report, the text is written
    in the CCSID JMS_IBM_Character_Set names with the Format and Encoding JMS_IBM_Format and JMS_IBM_Encoding
    name, and an ``ID:`` correlation id goes to CorrelId only (no jms/Cid)."""
    queue = f"j2q.ibm.{tag}"
    gw = start(gateway_factory, tmp_path, [
        {"name": "j2q", "from": {"connector": "amq", "queue": queue}, "to": {"queue": "FROM.JMS"}}], activemq)
    cid = "ID:" + "5a0b" * 12
    jmstool.send(f"queue://{queue}", {
        "type": "Text", "body": "caf\u00e9", "headers": {"correlationId": cid},
        "properties": {"JMS_IBM_Report_COA": typed("int", C.MQRO_COA_WITH_DATA),
                       "JMS_IBM_Report_Pass_Msg_ID": typed("int", C.MQRO_PASS_MSG_ID),
                       "JMS_IBM_Character_Set": typed("String", "ISO-8859-1"), "n": typed("int", 3),
                       "JMS_IBM_Format": typed("String", "MYFMT"),
                       "JMS_IBM_Encoding": typed("int", C.MQENC_REVERSED)}})
    store = store_of(gw)
    try:
        wait_for(lambda: store.depth("FROM.JMS") == 1, 20, what="the JMS message on FROM.JMS")
        raw = store.browse("FROM.JMS")[0].data
    finally:
        store.close()
    msg = decode_message(raw)
    assert msg.md.report == C.MQRO_COA_WITH_DATA | C.MQRO_PASS_MSG_ID
    assert msg.md.correl_id == bytes.fromhex("5a0b" * 12)
    jms_folder = msg.rfh2_folder("jms")
    assert jms_folder is not None and jms_folder.value("Cid") is None and jms_folder.value("Dlv") is not None
    assert (msg.body_ccsid, msg.body_format, msg.body) == (C.CCSID_ISO8859_1, "MYFMT   ", b"caf\xe9")
    assert msg.body_encoding == C.MQENC_REVERSED
    usr = msg.rfh2_folder("usr")
    assert usr is not None and [e.name for e in usr.elements] == ["n"]     # no JMS_IBM_* left in usr
    back, _ = mq_bytes_to_jms(raw, now_ms=0)
    assert back.headers.correlation_id == cid                              # read back from CorrelId
    (rec,) = egress(gw, "j2q", 1)
    assert rec["status"] == "ok"
    assert ("coerced", "JMS_IBM_Report_COA") in changes(rec)               # STOMP delivered it as a String


def _mq_native(report: int) -> bytes:
    md = Mqmd(version=2, report=report, format=C.MQFMT_STRING, coded_char_set_id=C.CCSID_ISO8859_1,
              encoding=C.MQENC_REVERSED, persistence=C.MQPER_PERSISTENT, priority=4,
              correl_id=bytes.fromhex("c0" * 24))
    return encode_message(build_message(md, (), b"d\xe9j\xe0", body_format=C.MQFMT_STRING))


@activemq
def test_report_format_ccsid_and_encoding_of_an_mq_message_reach_a_java_consumer(
    gateway_factory: Callable[..., GatewayProcess], activemq: BrokerEndpoints, jmstool: JmsTool, tmp_path: Path,
    tag: str,
) -> None:
    """Embedded queue -> ActiveMQ queue: MQMD.Report gives JMS_IBM_Report_*, the body's CCSID and Encoding give
    JMS_IBM_Character_Set and JMS_IBM_Encoding, an RFH2 Format JMS_IBM_Format; STOMP turns the ints into Strings."""
    queue = f"q2j.ibm.{tag}"
    gw = start(gateway_factory, tmp_path, [
        {"name": "q2j", "from": {"queue": "TO.JMS"}, "to": {"connector": "amq", "queue": queue}}], activemq)
    rfh_md = Mqmd(version=2, report=C.MQRO_EXCEPTION_WITH_FULL_DATA | C.MQRO_DISCARD_MSG, encoding=C.MQENC_NORMAL,
                  coded_char_set_id=C.CCSID_UTF8, persistence=C.MQPER_PERSISTENT, priority=4)
    rfh = Rfh2(encoding=C.MQENC_NORMAL, coded_char_set_id=C.CCSID_UTF8, folders=(
        RfhFolder("mcd", (RfhElement("Msd", "jms_bytes"),)), RfhFolder("jms", (RfhElement("Dlv", "2"),))))
    with_rfh2 = encode_message(build_message(rfh_md, (rfh,), b"\x00\x01", body_format="MQADMIN "))
    store = store_of(gw)
    try:
        store.put("TO.JMS", _mq_native(C.MQRO_COA | C.MQRO_PAN))
        store.put("TO.JMS", with_rfh2)
        first, second = jmstool.receive(f"queue://{queue}", 2, timeout=20)
        wait_for(lambda: store.depth("TO.JMS") == 0, 10, what="the MQ messages to be confirmed (removed)")
    finally:
        store.close()
    assert first["body"] == "d\u00e9j\u00e0"                              # read in CCSID 819
    p = first["properties"]
    assert p["JMS_IBM_Report_COA"] == {"type": STRING, "value": str(C.MQRO_COA)}
    assert p["JMS_IBM_Report_PAN"] == {"type": STRING, "value": "1"}
    assert p["JMS_IBM_Character_Set"] == {"type": STRING, "value": "ISO-8859-1"}
    assert p["JMS_IBM_Encoding"] == {"type": STRING, "value": str(C.MQENC_REVERSED)}
    assert first["headers"]["correlationId"] == "ID:" + "c0" * 24
    p = second["properties"]
    assert p["JMS_IBM_Format"] == {"type": STRING, "value": "MQADMIN"}
    assert p["JMS_IBM_Report_Exception"] == {"type": STRING, "value": str(C.MQRO_EXCEPTION_WITH_FULL_DATA)}
    assert p["JMS_IBM_Report_Discard_Msg"] == {"type": STRING, "value": str(C.MQRO_DISCARD_MSG)}
    assert "JMS_IBM_Character_Set" not in p and "JMS_IBM_Encoding" not in p   # 1208 and the MQMD's: defaults
    recs = egress(gw, "q2j", 2)
    assert all(r["status"] == "ok" for r in recs)
    assert all(("dropped", "MQMD.report") not in changes(r) for r in recs)   # no longer lost


@activemq
def test_mcd_jms_type_uri_one_rule_through_the_gateway(
    gateway_factory: Callable[..., GatewayProcess], activemq: BrokerEndpoints, jmstool: JmsTool, tmp_path: Path,
    tag: str,
) -> None:
    """An MQ message with Msd MRM and Set/Type/Fmt reaches a Java consumer with JMSType
    mcd://MRM/Set/Type?format=Fmt; a Java producer's JMSType in that form, or in the WMB form with a '/' after
    the type, reaches MQ split into Msd/Set/Type/Fmt, and an empty part writes no element."""
    out_q, in_q = f"q2j.mcd.{tag}", f"j2q.mcd.{tag}"
    gw = start(gateway_factory, tmp_path, [
        {"name": "q2j", "from": {"queue": "TO.JMS"}, "to": {"connector": "amq", "queue": out_q}},
        {"name": "j2q", "from": {"connector": "amq", "queue": in_q}, "to": {"queue": "FROM.JMS"}}], activemq)
    md = Mqmd(version=2, encoding=C.MQENC_NORMAL, coded_char_set_id=C.CCSID_UTF8, persistence=C.MQPER_PERSISTENT,
              priority=4)
    rfh = Rfh2(encoding=C.MQENC_NORMAL, coded_char_set_id=C.CCSID_UTF8, folders=(RfhFolder("mcd", (
        RfhElement("Msd", "MRM"), RfhElement("Set", "SWIFT2005"), RfhElement("Type", "Document"),
        RfhElement("Fmt", "XML1"))),))
    uri = "mcd://MRM/SWIFT2005/Document?format=XML1"
    store = store_of(gw)
    try:
        store.put("TO.JMS", encode_message(build_message(md, (rfh,), b"<Document/>", body_format=C.MQFMT_STRING)))
        (got,) = jmstool.receive(f"queue://{out_q}", 1, timeout=20)
        assert got["headers"]["type"] == uri and got["body"] == "<Document/>"
        for jms_type in (uri, "mcd://MRM/SWIFT2005/Document/?format=XML1", "mcd://MRM/SWIFT2005/"):
            jmstool.send(f"queue://{in_q}", {"type": "Text", "body": "<Document/>", "headers": {"type": jms_type}})
        wait_for(lambda: store.depth("FROM.JMS") == 3, 20, what="three JMS messages on FROM.JMS")
        raws = [m.data for m in store.browse("FROM.JMS")]
    finally:
        store.close()
    mcds = []
    for raw in raws:
        folder = decode_message(raw).rfh2_folder("mcd")
        assert folder is not None
        mcds.append({e.name: e.value for e in folder.elements})
    split = {"Msd": "MRM", "Set": "SWIFT2005", "Type": "Document", "Fmt": "XML1"}
    assert mcds == [split, split, {"Msd": "MRM", "Set": "SWIFT2005"}]        # no empty <Type>
    assert [mq_bytes_to_jms(raw, now_ms=0)[0].headers.type for raw in raws] == [uri, uri, "mcd://MRM/SWIFT2005"]
    recs = egress(gw, "j2q", 3)
    assert sorted(("coerced", "JMSType") in changes(r) for r in recs) == [False, True, True]


@activemq
def test_an_out_of_range_dt_value_backs_out_by_default_and_is_dropped_with_the_route_option(
    gateway_factory: Callable[..., GatewayProcess], activemq: BrokerEndpoints, jmstool: JmsTool, tmp_path: Path,
    tag: str,
) -> None:
    """<n dt='i1'>300</n> in the usr folder: the default route backs the message out; a route with
    ``bad_property: drop`` delivers it without ``n``, with a ``dropped`` finding in the conversion log."""
    kept_q, dropped_q = f"q2j.strict.{tag}", f"q2j.drop.{tag}"
    gw = start(gateway_factory, tmp_path, [
        {"name": "strict", "from": {"queue": "STRICT"}, "to": {"connector": "amq", "queue": kept_q}},
        {"name": "lenient", "from": {"queue": "LENIENT"}, "to": {"connector": "amq", "queue": dropped_q},
         "options": {"bad_property": "drop"}}], activemq)
    md = Mqmd(version=2, encoding=C.MQENC_NORMAL, coded_char_set_id=C.CCSID_UTF8, persistence=C.MQPER_PERSISTENT,
              priority=4)
    rfh = Rfh2(encoding=C.MQENC_NORMAL, coded_char_set_id=C.CCSID_UTF8, folders=(
        RfhFolder("mcd", (RfhElement("Msd", "jms_text"),)),
        RfhFolder("usr", (RfhElement("n", "300", "i1"), RfhElement("color", "blue")))))
    data = encode_message(build_message(md, (rfh,), b"hello", body_format=C.MQFMT_STRING))
    store = store_of(gw)
    try:
        store.put("STRICT", data)
        store.put("LENIENT", data)
        (got,) = jmstool.receive(f"queue://{dropped_q}", 1, timeout=20)
        wait_for(lambda: store.depth("BACKOUT.strict") == 1, 20, what="the strict route's message in its backout queue")
        wait_for(lambda: store.depth("STRICT") == 0 and store.depth("LENIENT") == 0, 10,
                 what="both MQ messages to be confirmed (removed)")
    finally:
        store.close()
    assert got["body"] == "hello" and "n" not in got["properties"]
    assert got["properties"]["color"] == {"type": STRING, "value": "blue"}
    (rec,) = egress(gw, "lenient", 1)
    assert rec["status"] == "ok" and ("dropped", "usr/n") in changes(rec)
