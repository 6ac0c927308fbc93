"""JMS <-> MQ (mappings.conversions.jms_mq): one test group per header rule, both directions (the JMS
headers and JMSX/JMS_IBM properties that the MQMD and the RFH2 jms/mcd folders carry)."""
from __future__ import annotations

import pytest

from mappings.conversions.jms_mq import (
    JmsToMqOptions,
    bytes_to_id,
    id_to_bytes,
    put_date_time,
    put_epoch_ms,
)
from mappings.errors import MappingError
from mappings.jms.domain import Domain, McdType
from mappings.jms.domain import parse_mcd_uri as parse_domain_uri
from mappings.jms.model import (
    BytesBody,
    DeliveryMode,
    Destination,
    JmsHeaders,
    JmsMessage,
    MapBody,
    TextBody,
    jboolean,
    jint,
    jstring,
)
from mappings.mq import constants as C
from mappings.report import Change
from tests.jms_mq_support import MSG_ID, NOW, F, folder, got, msg, names, native, props, to_jms, to_mq, with_rfh2


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
    mq, r = to_mq(msg(correlation_id=hex_id))     # the ID: form goes to CorrelId only (IBM out)
    assert mq.md.correl_id == MSG_ID and "Cid" not in folder(mq, "jms") and r.findings == []
    assert to_jms(mq)[0].headers.correlation_id == hex_id
    for kept in ("ID:" + hex_id[3:].upper(), "ID:" + "0" * 48):   # CorrelId cannot give these back
        mq, r = to_mq(msg(correlation_id=kept))
        assert folder(mq, "jms")["Cid"] == (kept, None) and r.findings == []
        assert to_jms(mq)[0].headers.correlation_id == kept
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
    # one rule with MQ -> MQTT (MQ Telemetry side): an unresolved AS_Q_DEF is not persistent (DEFPSIST(NO))
    assert j.headers.delivery_mode is DeliveryMode.NON_PERSISTENT and names(r, Change.DEFAULTED) == ["JMSDeliveryMode"]
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
    assert to_jms(native(got(expiry=250)))[0].headers.expiration == NOW + 25_000   # WMB: Expiry -> JMSExpiration
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
    assert mq.md.backout_count == 2 and r.findings == []                   # WMB: BackoutCount - 1
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
    # A publication: both in the jms folder only, no MQ group (IBM MQ JMS mapping), and back exactly.
    mq, r = to_mq(msg(destination=Destination.topic("prices/eu"),
                      properties=(("JMSXGroupID", jstring(gid)), ("JMSXGroupSeq", jint(7)),
                                  ("JMS_IBM_Last_Msg_In_Group", jboolean(True)))))
    assert (mq.md.group_id, mq.md.msg_seq_number, mq.md.msg_flags) == (C.MQGI_NONE, 1, 0)
    assert names(r, Change.DROPPED) == ["JMS_IBM_Last_Msg_In_Group"] and len(r.findings) == 1
    assert (folder(mq, "jms")["Gid"][0], folder(mq, "jms")["Seq"][0]) == (gid, "7")
    j, r = to_jms(mq)
    assert (j.properties["JMSXGroupID"], j.properties["JMSXGroupSeq"]) == (jstring(gid), jint(7)) and not r.findings
    mq, _ = to_mq(msg(destination=Destination.queue("ORDERS"), properties=(("JMSXGroupID", jstring(gid)),
                                                                           ("JMSXGroupSeq", jint(2)))))
    assert (mq.md.group_id, mq.md.msg_seq_number) == (MSG_ID, 2) and not {"Gid", "Seq"} & set(folder(mq, "jms"))
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
    # a String of digits converts as getIntProperty would (STOMP carries every property as a String)
    mq, r = to_mq(msg(properties=(("JMS_IBM_Feedback", jstring("7")),)))
    assert mq.md.feedback == 7 and names(r, Change.COERCED) == ["JMS_IBM_Feedback"]
    with pytest.raises(MappingError, match="JMS_IBM_Feedback"):
        to_mq(msg(properties=(("JMS_IBM_Feedback", jstring("7x")),)))


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
    mq, r = to_mq(msg(TextBody("x"), type="mcd://MRM/s/t/"))   # the WMB form with a trailing '/': split too
    assert folder(mq, "mcd") == {"Msd": ("MRM", None), "Set": ("s", None), "Type": ("t", None)}
    assert names(r, Change.COERCED) == ["JMSType"] and to_jms(mq)[0].headers.type == "mcd://MRM/s/t"


def test_mcd_uri_one_rule_both_ways():
    """An MQ message with Msd MRM and Set/Type/Fmt gives the URI, which splits back into the same elements and
    which the domain derivation reads as the same set, type and format; empty parts write no element."""
    mcd = F("mcd", ("Msd", "MRM"), ("Set", "SWIFT2005"), ("Type", "{http://swift}:Document"), ("Fmt", "XML1"))
    j, r = to_jms(with_rfh2(got(), (mcd,), b"<Document/>"))
    uri = "mcd://MRM/SWIFT2005/{http://swift}:Document?format=XML1"
    assert j.headers.type == uri and j.body == TextBody("<Document/>") and r.findings == []
    mq, r = to_mq(j)
    assert folder(mq, "mcd") == {e.name: (e.value, None) for e in mcd.elements} and r.findings == []
    assert parse_domain_uri(uri) == McdType(Domain.MRM, "SWIFT2005", "{http://swift}:Document", "XML1")
    assert parse_domain_uri("mcd://MRM/SWIFT2005/{http://swift}:Document/?format=XML1") == parse_domain_uri(uri)
    for jms_type, elements, back in (
            ("mcd://MRM/set/", {"Msd": "MRM", "Set": "set"}, "mcd://MRM/set"),
            ("mcd://MRM//t", {"Msd": "MRM", "Type": "t"}, "mcd://MRM//t"),
            ("mcd://xmlnsc?format=", {"Msd": "xmlnsc"}, "mcd://xmlnsc")):
        mq, r = to_mq(msg(BytesBody(b"x"), type=jms_type))
        assert {n: v for n, (v, _dt) in folder(mq, "mcd").items()} == elements, jms_type
        assert to_jms(mq)[0].headers.type == back
        assert names(r) == ([] if back == jms_type else ["JMSType"])
