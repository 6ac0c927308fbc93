"""JMS <-> MQ (mappings.conversions.jms_mq): user properties in the usr folder, the bodies of every
message type and CCSID, MQ-native messages, what MQ has and JMS cannot hold, and bad input."""
from __future__ import annotations

import pytest

from mappings.conversions.jms_mq import (
    JmsToMqOptions,
    jms_to_mq,
    mq_bytes_to_jms,
)
from mappings.errors import MappingError
from mappings.jms.model import (
    BytesBody,
    Destination,
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
from mappings.mq import constants as C
from mappings.mq.message import build_message, encode_message
from mappings.mq.rfh2 import Rfh1, Rfh2
from mappings.report import Change
from tests.jms_mq_support import NOW, F, folder, got, msg, names, native, to_jms, to_mq, with_rfh2


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
    mq, r = to_mq(msg(properties=(("JMS_IBM_Other", jstring("MQSTR")), ("JMSXOther", jint(1)), ("$x", jint(1)),
                                  ("\u00e9t\u00e9", jint(2)), ("c", jchar("z")))))
    assert folder(mq, "usr") == {"c": ("z", None)}
    assert names(r, Change.DROPPED) == ["JMS_IBM_Other", "JMSXOther", "$x", "\u00e9t\u00e9"]
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
    j, r = to_jms(native(got(), b"x", "MQADMIN "))    # JMS_IBM_Format carries the Format (IBM in)
    assert j.body == BytesBody(b"x") and r.findings == [] and j.properties["JMS_IBM_Format"] == jstring("MQADMIN")
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
    assert sorted(names(r)) == sorted(["MQRFH", "mcd/Fmt", "MQMD.appl_identity_data", "jms/Uci",
                                       "mqps/Ret", "mqtt folder"])
    assert j.properties["JMS_IBM_Feedback"] == jint(5) and j.properties["JMS_IBM_PutApplType"] == jint(28)
    assert j.properties["JMS_IBM_Report_COA"] == jint(C.MQRO_COA)
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
