"""Whole MQ messages: chain following, a real saved message (tnt4j-streams' RFH2.msg), fixtures, JSON
descriptions, fuzzing."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mappings.errors import MappingError
from mappings.mq import constants as C
from mappings.mq.message import (
    MAX_HEADERS,
    MqMessage,
    build_message,
    decode_message,
    encode_message,
    header_spans,
    message_as_dict,
    message_from_dict,
)
from mappings.mq.mqmd import Mqmd, encode_mqmd
from mappings.mq.rfh2 import Rfh1, Rfh2, RfhElement, RfhFolder, encode_rfh2
from tests.mq_fixtures import FIXTURE_DIR, expected_files
from tests.mq_support import mqmds, real_message, rfh1s, rfh2s


def test_real_tnt4j_message_file():
    data = real_message("tnt4j_RFH2.msg.hex")
    msg = decode_message(data)
    assert len(data) == 2369
    assert msg.md.version == 1 and msg.notes  # v1 MQMD in a 364-byte region
    assert len(msg.headers) == 1 and isinstance(msg.headers[0], Rfh2)
    assert [f.name for f in msg.headers[0].folders] == ["mcd", "jms", "usr"]
    assert (msg.body_format, msg.body_encoding, msg.body_ccsid) == ("MQSTR   ", 546, 437)
    assert len(msg.body) == 2369 - 1108
    assert msg.body.startswith(b"<GetIndicativeAssociate")
    assert header_spans(data) == [("MQMD", 0, 364), ("MQRFH2", 364, 1108), ("body", 1108, 2369)]
    again = encode_message(msg)
    # we write a 324-byte v1 MQMD with blank (not NUL) padded PutDate/PutTime; the rest is byte-exact
    assert again[324:] == data[364:]
    assert again[:304] == data[:304] and again[320:324] == data[320:324]
    assert again[304:320] == b" " * 16


def test_real_pymqi_rfh2_behind_our_mqmd():
    rfh2_and_body = real_message("pymqi_single_rfh2.dat.hex")
    md = Mqmd(version=2, encoding=273, coded_char_set_id=1208, format="MQHRF2  ")
    data = encode_mqmd(md) + rfh2_and_body
    msg = decode_message(data)
    assert msg.headers[0].folder("psc").value("QMgrName") == "DebugQM"
    assert msg.body == b"<testData><testVar>testValue</testVar></testData>"
    assert encode_message(msg) == data


def test_build_message_sets_the_chain():
    msg = build_message(Mqmd(), (Rfh1(), Rfh2()), b"x", body_format="MQSTR", body_encoding=273,
                        body_ccsid=819)
    assert msg.md.format == "MQHRF   " and msg.headers[0].format == "MQHRF2  "
    assert (msg.body_format, msg.body_encoding, msg.body_ccsid) == ("MQSTR   ", 273, 819)
    assert decode_message(encode_message(msg)) == msg


def test_header_integers_follow_the_preceding_encoding():
    msg = build_message(Mqmd(encoding=546), (Rfh2(encoding=273), Rfh2(encoding=546)), b"")
    data = encode_message(msg)
    assert data[4:8] == b"\x01\x00\x00\x00"        # MQMD itself LE (its Encoding 546)
    assert data[324 + 4 : 324 + 8] == b"\x02\x00\x00\x00"   # first RFH2 LE (MQMD.Encoding 546)
    assert data[360 + 4 : 360 + 8] == b"\x00\x00\x00\x02"   # second RFH2 BE (first RFH2.Encoding 273)
    assert decode_message(data) == msg


def test_inherit_ccsid_resolves_backwards():
    msg = build_message(Mqmd(coded_char_set_id=850), (Rfh2(coded_char_set_id=-2),), b"")
    assert msg.body_ccsid == 850


@settings(max_examples=60, deadline=None)
@given(mqmds(), st.lists(rfh2s | rfh1s, max_size=3), st.binary(max_size=40),
       st.sampled_from(["        ", "MQSTR   ", "ABC     "]))
def test_message_round_trip(md, headers, body, fmt):
    msg = build_message(md, tuple(headers), body, body_format=fmt)
    data = encode_message(msg)
    assert decode_message(data) == msg
    assert message_from_dict(json.loads(json.dumps(message_as_dict(msg)))) == msg


@pytest.mark.parametrize("msg", [MqMessage(Mqmd(), (), "text"), MqMessage("md", (), b""),
                                 MqMessage(Mqmd(format="MQHRF2"), ("RFH",), b"")])
def test_encode_rejects_wrong_types(msg):
    with pytest.raises(MappingError):
        encode_message(msg)


def test_encode_rejects_a_broken_chain():
    with pytest.raises(MappingError, match="does not announce"):
        encode_message(MqMessage(Mqmd(format="MQSTR   "), (Rfh2(),), b""))
    with pytest.raises(MappingError, match="announces a header"):
        encode_message(MqMessage(Mqmd(format="MQHRF2  "), (), b"abc"))


def test_truncation_at_every_offset():
    rfh = Rfh2(folders=(RfhFolder("usr", (RfhElement("a", "1"),)),))
    msg = build_message(Mqmd(version=2), (rfh,), b"body")
    data = encode_message(msg)
    body_start = len(data) - 4
    for cut in range(len(data) + 1):
        if cut < body_start:
            with pytest.raises(MappingError):
                decode_message(data[:cut])
        else:
            assert decode_message(data[:cut]).body == b"body"[: cut - body_start]


def test_too_many_headers():
    one = Rfh2(format="MQHRF2  ")
    data = encode_mqmd(Mqmd(format="MQHRF2  ")) + encode_rfh2(one, "<") * (MAX_HEADERS + 1)
    with pytest.raises(MappingError, match="chained headers"):
        decode_message(data)


@settings(deadline=None)  # shared CI machine: no per-example time limit
@given(st.binary(max_size=200))
def test_fuzz_after_valid_mqmd_raises_only_mapping_error(tail):
    for fmt in ("MQHRF2  ", "MQHRF   "):
        data = encode_mqmd(Mqmd(format=fmt)) + b"RFH " + tail
        try:
            decode_message(data)
        except MappingError:
            pass


@pytest.mark.parametrize("name", sorted({n.rsplit(".", 1)[0] for n in expected_files()}))
def test_checked_in_fixtures_match_the_encoder(name):
    expected = expected_files()
    bin_path, json_path = FIXTURE_DIR / f"{name}.bin", FIXTURE_DIR / f"{name}.json"
    assert bin_path.read_bytes() == expected[f"{name}.bin"], "run `python -m tests.mq_fixtures`"
    assert json_path.read_bytes() == expected[f"{name}.json"]
    desc = json.loads(json_path.read_text())
    desc.pop("description")
    msg = decode_message(bin_path.read_bytes())
    assert message_as_dict(msg) == desc
    assert encode_message(message_from_dict(desc)) == bin_path.read_bytes()


def test_body_text_form_in_descriptions():
    desc = {"MQMD": {"CodedCharSetId": 1208}, "body": {"Format": "MQSTR", "text": "h\u00e9"}}
    msg = message_from_dict(desc)
    assert msg.body == "h\u00e9".encode() and msg.md.format == "MQSTR   "


@pytest.mark.parametrize(
    "desc",
    [
        [], {"MQMD": []}, {"MQMD": {"Bogus": 1}}, {"headers": {}}, {"headers": [3]},
        {"headers": [{"Version": 7}]}, {"headers": [{"Encoding": "x"}]}, {"headers": [{"folders": 3}]},
        {"headers": [{"Version": 1, "NameValueString": [[1]]}]}, {"body": []}, {"body": {"hex": "zz"}},
        {"body": {"Encoding": "x"}}, {"MQMD": {"CodedCharSetId": 819}, "body": {"text": "\u20ac"}},
        {"headers": [{"folders": [{"elements": []}]}]},
    ],
)
def test_description_errors(desc):
    with pytest.raises(MappingError):
        message_from_dict(desc)


def test_plain_string_body_has_text():
    msg = MqMessage(Mqmd(format=C.MQFMT_STRING, coded_char_set_id=819), (), b"caf\xe9")
    assert message_as_dict(msg)["body"]["text"] == "caf\u00e9"


_FIXTURE_BYTES = {n: b for n, b in expected_files().items() if n.endswith(".bin")}


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(_FIXTURE_BYTES)),
       st.lists(st.tuples(st.integers(0, 640), st.integers(0, 255)), min_size=1, max_size=6),
       st.integers(0, 700))
def test_mutated_fixtures_raise_only_mapping_error(name, flips, cut):
    data = bytearray(_FIXTURE_BYTES[name])
    for pos, value in flips:
        if pos < len(data):
            data[pos] = value
    try:
        msg = decode_message(bytes(data[:cut]))
    except MappingError:
        return
    assert isinstance(msg, MqMessage)


def test_decode_message_data_with_a_context_mqmd():
    rfh = Rfh2(folders=(RfhFolder("usr", (RfhElement("a", "1"),)),))
    data = encode_rfh2(rfh, ">") + b"tail"
    context = Mqmd(format="MQHRF2", encoding=273)
    msg = decode_message(data, context=context)
    assert msg.md == context and msg.headers == (rfh,) and msg.body == b"tail" and msg.notes
    assert header_spans(data, context=context) == [("MQMD", 0, 0), ("MQRFH2", 0, len(data) - 4),
                                                   ("body", len(data) - 4, len(data))]
    with pytest.raises(MappingError, match="other byte order"):
        decode_message(data, context=Mqmd(format="MQHRF2", encoding=546))


def test_real_tnt4j_truncated_at_every_offset():
    data = real_message("tnt4j_RFH2.msg.hex")
    for cut in range(1108):
        with pytest.raises(MappingError):
            decode_message(data[:cut])
    assert len(decode_message(data[:1108]).body) == 0
