"""MQMDE and MQDLH: hand-built golden bytes, chaining, round trips and error paths."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mappings.conversions.mqtt_mq import MqToMqttOptions, mq_to_mqtt
from mappings.errors import MappingError
from mappings.mq import constants as C
from mappings.mq.headers import Mqdlh, Mqmde, decode_mqdlh, decode_mqmde, encode_mqdlh, encode_mqmde
from mappings.mq.message import (
    build_message,
    decode_message,
    encode_message,
    header_spans,
    message_as_dict,
    message_from_dict,
)
from mappings.mq.mqmd import Mqmd
from mappings.mq.rfh2 import Rfh2, RfhElement, RfhFolder
from tests.mq_support import mqdlhs, mqmdes, mqmds, rfh2s


@pytest.mark.parametrize("order", [">", "<"])
def test_mqmde_golden(order):
    i = lambda v: struct.pack(order + "i", v)  # noqa: E731
    golden = (b"MDE " + i(2) + i(72) + i(273) + i(1208) + b"MQSTR   " + i(0) + b"G" * 24 + i(3) + i(0) + i(8)
              + i(-1))
    model = Mqmde(encoding=273, coded_char_set_id=1208, format="MQSTR", group_id=b"G" * 24, msg_seq_number=3,
                  msg_flags=C.MQMF_MSG_IN_GROUP)
    assert len(golden) == 72
    assert encode_mqmde(model, order) == golden
    assert decode_mqmde(golden, 0, order) == (model, 72)


@pytest.mark.parametrize("order", [">", "<"])
def test_mqdlh_golden(order):
    i = lambda v: struct.pack(order + "i", v)  # noqa: E731
    golden = (b"DLH " + i(1) + i(2053) + b"TARGET.Q".ljust(48) + b"QM2".ljust(48) + i(546) + i(1208)
              + b"MQHRF2  " + i(6) + b"runmqdlq".ljust(28) + b"20240229" + b"12000000")
    model = Mqdlh(reason=2053, dest_q_name="TARGET.Q", dest_q_mgr_name="QM2", encoding=546,
                  coded_char_set_id=1208, format="MQHRF2  ", put_appl_type=6, put_appl_name="runmqdlq",
                  put_date="20240229", put_time="12000000")
    assert len(golden) == 172
    assert encode_mqdlh(model, order) == golden
    assert decode_mqdlh(golden, 0, order) == (model, 172)


def test_dead_letter_message_chain():
    dlh = Mqdlh(reason=2053, dest_q_name="TARGET.Q", encoding=273, coded_char_set_id=1208)
    mqps = RfhFolder("mqps", (RfhElement("Top", "t/1"),))
    msg = build_message(Mqmd(encoding=546, persistence=1, msg_id=bytes(22) + b"\x00\x09"),
                        (dlh, Rfh2(folders=(mqps,))), b"data")
    assert msg.md.format == "MQDEAD  " and msg.headers[0].format == "MQHRF2  "
    data = encode_message(msg)
    assert data[324:328] == b"DLH " and data[328:332] == b"\x01\x00\x00\x00"     # MQMD Encoding 546: LE
    assert data[496 + 4 : 496 + 8] == b"\x00\x00\x00\x02"                         # DLH Encoding 273: BE RFH2
    assert decode_message(data) == msg
    assert [n for n, _s, _e in header_spans(data)] == ["MQMD", "MQDLH", "MQRFH2", "body"]
    assert message_from_dict(message_as_dict(msg)) == msg
    pub, report = mq_to_mqtt(msg, subscriber_qos=2, options=MqToMqttOptions())
    assert pub.topic == "t/1" and pub.packet_id == 9
    assert "MQDLH header 1" in [f.name for f in report.findings]


def test_mqmde_after_v1_mqmd():
    msg = build_message(Mqmd(version=1), (Mqmde(group_id=b"\x01" * 24, msg_seq_number=2),), b"x",
                        body_format="MQSTR")
    data = encode_message(msg)
    assert msg.md.format == "MQHMDE  " and len(data) == 324 + 72 + 1
    assert decode_message(data).headers[0].msg_seq_number == 2


@settings(max_examples=80, deadline=None)
@given(mqmds(), st.lists(mqmdes | mqdlhs | rfh2s, max_size=3), st.binary(max_size=20))
def test_round_trip_with_fixed_headers(md, headers, body):
    msg = build_message(md, tuple(headers), body)
    assert decode_message(encode_message(msg)) == msg
    assert message_from_dict(message_as_dict(msg)) == msg


@pytest.mark.parametrize(("patch_at", "value", "field"), [(0, b"MDX ", "StrucId"), (4, b"\x00\x00\x00\x01", "Version"),
                                                         (8, b"\x00\x00\x00\x48", "StrucLength")])
def test_mqmde_errors(patch_at, value, field):
    raw = bytearray(encode_mqmde(Mqmde(), ">"))
    raw[patch_at : patch_at + 4] = value
    if field == "StrucLength":
        raw[8:12] = b"\x00\x00\x00\x40"
    with pytest.raises(MappingError) as err:
        decode_mqmde(bytes(raw), 0, ">")
    assert err.value.field == field and err.value.structure == "MQMDE"


def test_mqdlh_errors():
    raw = encode_mqdlh(Mqdlh(), "<")
    for cut in range(len(raw)):
        with pytest.raises(MappingError):
            decode_mqdlh(raw[:cut], 0, "<")
    for cut in range(72):
        with pytest.raises(MappingError):
            decode_mqmde(encode_mqmde(Mqmde(), "<")[:cut], 0, "<")
    with pytest.raises(MappingError, match="StrucId"):
        decode_mqdlh(b"XXXX" + raw[4:], 0, "<")
    with pytest.raises(MappingError, match="Version"):
        decode_mqdlh(raw[:4] + b"\x02\x00\x00\x00" + raw[8:], 0, "<")


@pytest.mark.parametrize(
    "header",
    [Mqdlh(dest_q_name="x" * 49), Mqdlh(put_appl_name="\u20ac"), Mqdlh(reason=2**31), Mqmde(group_id=b"x"),
     Mqmde(flags="0"), Mqdlh(put_date=None)],
)
def test_encode_errors(header):
    with pytest.raises(MappingError):
        encode_message(build_message(Mqmd(), (header,), b""))


@pytest.mark.parametrize(
    "desc",
    [{"StrucId": "DLH ", "Bogus": 1}, {"StrucId": "MDE ", "GroupId": "zz"}, {"StrucId": "DLH ", "Reason": "x"},
     {"StrucId": "DLH ", "DestQName": 5}],
)
def test_description_errors(desc):
    with pytest.raises(MappingError):
        message_from_dict({"headers": [desc]})
