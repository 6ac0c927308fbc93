"""JMS <-> MQ: the IBM provider-specific properties JMS_IBM_Report_*, JMS_IBM_Format, JMS_IBM_Character_Set and
JMS_IBM_Encoding (IBM MQ docs "Mapping JMS provider-specific fields"), on both paths; and the group fields of a
point-to-point message going to the MQMD only."""
from __future__ import annotations

import pytest

from mappings.conversions.jms_mq import JmsToMqOptions, jms_to_mq_bytes, mq_bytes_to_jms
from mappings.conversions.jms_mq.decode import mq_bytes_to_jms_fast
from mappings.conversions.jms_mq.spec import MqToJmsOptions
from mappings.errors import MappingError
from mappings.jms.model import BytesBody, MapBody, TextBody, TypedMap, jint, jstring
from mappings.mq import constants as C
from mappings.mq.message import decode_message, encode_message
from mappings.report import Change
from tests.jms_mq_support import NOW, F, folder, got, msg, names, native, to_jms, to_mq, with_rfh2


def test_report_properties_make_the_mqmd_report_and_come_back():
    mq, r = to_mq(msg(properties=(("JMS_IBM_Report_COA", jint(C.MQRO_COA_WITH_FULL_DATA)),
                                  ("JMS_IBM_Report_COD", jint(C.MQRO_COD)),
                                  ("JMS_IBM_Report_Exception", jint(C.MQRO_EXCEPTION_WITH_DATA)),
                                  ("JMS_IBM_Report_Pass_Msg_ID", jint(C.MQRO_PASS_MSG_ID)),
                                  ("JMS_IBM_Report_Discard_Msg", jint(C.MQRO_DISCARD_MSG)))))
    assert mq.md.report == (C.MQRO_COA_WITH_FULL_DATA | C.MQRO_COD | C.MQRO_EXCEPTION_WITH_DATA | C.MQRO_PASS_MSG_ID
                            | C.MQRO_DISCARD_MSG) and r.findings == []
    assert "usr" not in [f.name for f in mq.headers[0].folders]
    j, r = to_jms(mq)
    assert {n: v for n, v in j.properties.items() if n.startswith("JMS_IBM_Report")} == {
        "JMS_IBM_Report_Exception": jint(C.MQRO_EXCEPTION_WITH_DATA), "JMS_IBM_Report_COA": jint(1792),
        "JMS_IBM_Report_COD": jint(2048), "JMS_IBM_Report_Pass_Msg_ID": jint(128),
        "JMS_IBM_Report_Discard_Msg": jint(C.MQRO_DISCARD_MSG)}
    assert r.findings == []


def test_report_property_as_a_string_of_digits_and_bad_values():
    mq, r = to_mq(msg(properties=(("JMS_IBM_Report_COA", jstring("256")), ("JMS_IBM_Report_PAN", jint(0)))))
    assert mq.md.report == C.MQRO_COA
    assert names(r, Change.COERCED) == ["JMS_IBM_Report_COA"] and names(r, Change.DROPPED) == ["JMS_IBM_Report_PAN"]
    with pytest.raises(MappingError, match="MQRO_COA") as exc:
        to_mq(msg(properties=(("JMS_IBM_Report_COA", jint(C.MQRO_COD)),)))
    assert exc.value.field == "JMS_IBM_Report_COA"
    with pytest.raises(MappingError) as exc:
        to_mq(msg(properties=(("JMS_IBM_Report_NAN", jstring("two")),)))
    assert exc.value.field == "JMS_IBM_Report_NAN"


def test_report_options_without_a_property_are_reported():
    j, r = to_jms(native(got(report=C.MQRO_COA | C.MQRO_ACTIVITY | C.MQRO_PASS_DISCARD_AND_EXPIRY | 4096)))
    assert j.properties["JMS_IBM_Report_COA"] == jint(C.MQRO_COA)
    assert names(r) == ["MQMD.Report"] and "0x5004" in r.findings[0].detail   # 4096 alone is no COD value


def test_report_takes_the_bytes_path_both_ways():
    source = msg(TextBody("x"), properties=(("JMS_IBM_Report_COA", jint(C.MQRO_COA)),))
    data, report = jms_to_mq_bytes(source, now_ms=NOW)
    assert decode_message(data).md.report == C.MQRO_COA and report.findings == []
    fast = mq_bytes_to_jms_fast(data, now_ms=NOW, options=MqToJmsOptions())
    assert fast is not None and fast[0] == source and fast[1].findings == []


def test_format_property():
    mq, r = to_mq(msg(BytesBody(b"\x00\x01"), properties=(("JMS_IBM_Format", jstring("MQADMIN")),)))
    assert mq.body_format == "MQADMIN " and folder(mq, "mcd")["Msd"] == ("jms_bytes", None) and r.findings == []
    j, r = to_jms(mq)
    assert j.properties["JMS_IBM_Format"] == jstring("MQADMIN") and j.body == BytesBody(b"\x00\x01")
    mq, r = to_mq(msg(TextBody("x"), properties=(("JMS_IBM_Format", jstring("MQSTR")),)))
    assert mq.body_format == C.MQFMT_STRING and names(r, Change.DROPPED) == ["JMS_IBM_Format"]   # the default
    with pytest.raises(MappingError, match="header") as exc:
        to_mq(msg(BytesBody(b"x"), properties=(("JMS_IBM_Format", jstring("MQHRF2")),)))
    assert exc.value.field == "JMS_IBM_Format"
    j, r = to_jms(with_rfh2(got(), (F("mcd", ("Msd", "jms_text")),), b"x", fmt="XML"))   # Msd wins: Text
    assert j.body == TextBody("x") and j.properties["JMS_IBM_Format"] == jstring("XML") and r.findings == []


def test_character_set_property_writes_the_text_in_that_ccsid():
    source = msg(TextBody("caf\u00e9"), properties=(("JMS_IBM_Character_Set", jstring("ISO-8859-1")),))
    mq, r = to_mq(source)
    assert mq.body_ccsid == C.CCSID_ISO8859_1 and mq.body == b"caf\xe9" and r.findings == []
    j, r = to_jms(mq)
    assert j.body == TextBody("caf\u00e9") and j.properties["JMS_IBM_Character_Set"] == jstring("ISO-8859-1")
    mq, r = to_mq(msg(TextBody("a"), properties=(("JMS_IBM_Character_Set", jstring("37")),)))
    assert mq.body_ccsid == 37 and mq.body == "a".encode("cp037")
    assert names(r, Change.COERCED) == ["JMS_IBM_Character_Set"] and "'IBM037'" in r.findings[0].detail
    mq, r = to_mq(msg(BytesBody(b"x"), properties=(("JMS_IBM_Character_Set", jstring("4242")),)))
    assert mq.body_ccsid == 4242 and r.findings == []
    assert to_jms(mq)[0].properties["JMS_IBM_Character_Set"] == jstring("4242")   # no Java name: the digits
    mq, r = to_mq(msg(properties=(("JMS_IBM_Character_Set", jstring("utf8")),)))
    assert mq.body_ccsid == C.CCSID_UTF8 and names(r, Change.DROPPED) == ["JMS_IBM_Character_Set"]
    with pytest.raises(MappingError, match="windows-1252") as exc:
        to_mq(msg(properties=(("JMS_IBM_Character_Set", jstring("KOI8-R")),)))
    assert exc.value.field == "JMS_IBM_Character_Set"
    j, r = to_jms(native(got(coded_char_set_id=C.CCSID_ISO8859_1), b"caf\xe9", C.MQFMT_STRING))   # MQ-native
    assert j.body == TextBody("caf\u00e9") and j.properties["JMS_IBM_Character_Set"] == jstring("ISO-8859-1")


def test_encoding_property():
    source = msg(TextBody("\u00e9"), properties=(("JMS_IBM_Character_Set", jstring("UTF-16")),
                                                  ("JMS_IBM_Encoding", jint(C.MQENC_REVERSED))))
    mq, r = to_mq(source)
    assert (mq.md.encoding, mq.body_encoding, mq.body) == (C.MQENC_NORMAL, 546, "\u00e9".encode("utf-16-le"))
    assert r.findings == []
    j, _ = to_jms(mq)
    assert j.body == TextBody("\u00e9") and j.properties["JMS_IBM_Encoding"] == jint(546)
    mq, r = to_mq(msg(properties=(("JMS_IBM_Encoding", jstring("273")),)))
    assert names(r) == ["JMS_IBM_Encoding", "JMS_IBM_Encoding"]          # a String, and the default
    j, r = to_jms(native(got(encoding=C.MQENC_REVERSED), b"\x01\x00"))   # an MQ-native x86 message
    assert j.properties["JMS_IBM_Encoding"] == jint(546) and r.findings == []


def test_without_rfh2_the_body_fields_go_to_the_mqmd():
    source = msg(BytesBody(b"\x01"), properties=(("JMS_IBM_Format", jstring("MQADMIN")),
                                                  ("JMS_IBM_Character_Set", jstring("IBM500")),
                                                  ("JMS_IBM_Encoding", jint(785))))
    mq, r = to_mq(source, options=JmsToMqOptions(with_rfh2=False))
    assert (mq.md.format, mq.md.coded_char_set_id, mq.md.encoding) == ("MQADMIN ", 500, 785) and r.findings == []
    j, _ = to_jms(mq)
    assert {n: v for n, v in j.properties.items() if n.startswith("JMS_IBM")} == {
        "JMS_IBM_Format": jstring("MQADMIN"), "JMS_IBM_Character_Set": jstring("IBM500"), "JMS_IBM_Encoding": jint(785)}


def test_body_fields_take_the_bytes_path_on_receive():
    source = msg(MapBody(TypedMap([("a", jint(1))])), properties=(("JMS_IBM_Character_Set", jstring("IBM437")),
                                                                     ("JMS_IBM_Encoding", jint(546))))
    data, report = jms_to_mq_bytes(source, now_ms=NOW)
    assert report.findings == []
    fast = mq_bytes_to_jms_fast(data, now_ms=NOW, options=MqToJmsOptions())
    assert fast is not None and fast[0] == source
    assert mq_bytes_to_jms(encode_message(to_mq(source)[0]), now_ms=NOW)[0] == source


def test_point_to_point_group_fields_go_to_the_mqmd_only():
    gid = "ID:" + "ab" * 24
    mq, r = to_mq(msg(properties=(("JMSXGroupID", jstring(gid)), ("JMSXGroupSeq", jint(3)))))
    assert (mq.md.group_id, mq.md.msg_seq_number, mq.md.msg_flags) == (bytes.fromhex("ab" * 24), 3,
                                                                       C.MQMF_MSG_IN_GROUP)
    assert "Gid" not in folder(mq, "jms") and "Seq" not in folder(mq, "jms") and r.findings == []
    j, _ = to_jms(mq)
    assert (j.properties["JMSXGroupID"], j.properties["JMSXGroupSeq"]) == (jstring(gid), jint(3))


def test_mcd_type_stays_whole_when_the_format_would_change_the_class():
    source = msg(BytesBody(b"x"), type="mcd://MRM/s/t", properties=(("JMS_IBM_Format", jstring("MQSTR")),))
    mq, r = to_mq(source)
    assert folder(mq, "mcd") == {"Msd": ("jms_bytes", None), "Type": ("mcd://MRM/s/t", None)} and r.findings == []
    j, _ = to_jms(mq)
    assert j.body == BytesBody(b"x") and j.headers.type == "mcd://MRM/s/t"


def test_a_bad_usr_value_refuses_the_message_or_is_dropped_by_option():
    md = got()
    bad = with_rfh2(md, (F("usr", ("n", "300", "i1"), ("ok", "1", "boolean"), ("b", "2", "boolean")),), b"x")
    with pytest.raises(MappingError) as exc:
        to_jms(bad)
    assert exc.value.field == "n"
    j, r = mq_bytes_to_jms(encode_message(bad), now_ms=NOW, options=MqToJmsOptions(drop_bad_properties=True))
    assert "n" not in j.properties and "b" not in j.properties and j.properties["ok"].value is True
    assert names(r, Change.DROPPED) == ["usr/n", "usr/b"] and "option drop_bad_properties" in r.findings[0].detail
