"""MQMD codec: hand-built golden bytes, a real saved message (tnt4j-streams' RFH2.msg), round trips and
every error path."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mappings.errors import MappingError
from mappings.mq import constants as C
from mappings.mq.mqmd import FIELD_TABLE, MQMD_DEFAULT, Mqmd, decode_mqmd, encode_mqmd, validate
from tests.mq_support import mqmds, real_message

# IBM MQ docs "MQMD - Message descriptor", typed in by hand: (IBM name, offset, length)
REFERENCE_LAYOUT = [
    ("StrucId", 0, 4), ("Version", 4, 4), ("Report", 8, 4), ("MsgType", 12, 4), ("Expiry", 16, 4),
    ("Feedback", 20, 4), ("Encoding", 24, 4), ("CodedCharSetId", 28, 4), ("Format", 32, 8),
    ("Priority", 40, 4), ("Persistence", 44, 4), ("MsgId", 48, 24), ("CorrelId", 72, 24),
    ("BackoutCount", 96, 4), ("ReplyToQ", 100, 48), ("ReplyToQMgr", 148, 48), ("UserIdentifier", 196, 12),
    ("AccountingToken", 208, 32), ("ApplIdentityData", 240, 32), ("PutApplType", 272, 4),
    ("PutApplName", 276, 28), ("PutDate", 304, 8), ("PutTime", 312, 8), ("ApplOriginData", 320, 4),
    ("GroupId", 324, 24), ("MsgSeqNumber", 348, 4), ("Offset", 352, 4), ("MsgFlags", 356, 4),
    ("OriginalLength", 360, 4),
]


def test_layout_matches_reference_table():
    assert [(name, off, length) for off, name, _k, length in FIELD_TABLE.values()] == REFERENCE_LAYOUT


def _golden(order: str, version: int) -> bytes:
    """Build an MQMD byte by byte from the reference offsets (independent of the codec's structs)."""
    buf = bytearray(364 if version == 2 else 324)
    put = {name: (off, length) for name, off, length in REFERENCE_LAYOUT}

    def long_(name: str, value: int) -> None:
        off, _ = put[name]
        buf[off : off + 4] = value.to_bytes(4, "big" if order == ">" else "little", signed=True)

    def chars(name: str, value: bytes) -> None:
        off, length = put[name]
        buf[off : off + length] = value.ljust(length, b" ")

    def raw(name: str, value: bytes) -> None:
        off, length = put[name]
        buf[off : off + length] = value.ljust(length, b"\x00")

    chars("StrucId", b"MD")
    long_("Version", version)
    long_("Report", C.MQRO_COA | C.MQRO_PASS_MSG_ID)
    long_("MsgType", C.MQMT_REQUEST)
    long_("Expiry", 600)
    long_("Feedback", 0)
    long_("Encoding", 273 if order == ">" else 546)
    long_("CodedCharSetId", 1208)
    chars("Format", b"MQSTR")
    long_("Priority", 4)
    long_("Persistence", 1)
    raw("MsgId", b"AMQ QM1         \x01\x02\x03\x04\x05\x06\x07\x08")
    raw("CorrelId", b"")
    long_("BackoutCount", 3)
    chars("ReplyToQ", b"REPLY.Q")
    chars("ReplyToQMgr", b"QM1")
    chars("UserIdentifier", b"mqm")
    raw("AccountingToken", b"\x16\x01")
    chars("ApplIdentityData", b"")
    long_("PutApplType", C.MQAT_JAVA)
    chars("PutApplName", b"demo.jar")
    chars("PutDate", b"20231114")
    chars("PutTime", b"22132012")
    chars("ApplOriginData", b"")
    if version == 2:
        raw("GroupId", b"G1")
        long_("MsgSeqNumber", 2)
        long_("Offset", 0)
        long_("MsgFlags", C.MQMF_MSG_IN_GROUP)
        long_("OriginalLength", -1)
    return bytes(buf)


def _golden_model(order: str, version: int) -> Mqmd:
    extra = dict(group_id=b"G1".ljust(24, b"\x00"), msg_seq_number=2, msg_flags=8) if version == 2 else {}
    return Mqmd(version=version, report=C.MQRO_COA | C.MQRO_PASS_MSG_ID, msg_type=1, expiry=600,
                encoding=273 if order == ">" else 546, coded_char_set_id=1208, format="MQSTR   ", priority=4,
                persistence=1, msg_id=b"AMQ QM1         \x01\x02\x03\x04\x05\x06\x07\x08", backout_count=3,
                reply_to_q="REPLY.Q", reply_to_q_mgr="QM1", user_identifier="mqm",
                accounting_token=b"\x16\x01".ljust(32, b"\x00"), put_appl_type=28, put_appl_name="demo.jar",
                put_date="20231114", put_time="22132012", **extra)


@pytest.mark.parametrize("order", [">", "<"])
@pytest.mark.parametrize("version", [1, 2])
def test_golden_bytes_both_orders(order, version):
    golden = _golden(order, version)
    model = _golden_model(order, version)
    assert encode_mqmd(model) == golden
    assert decode_mqmd(golden) == model
    assert len(golden) == (364 if version == 2 else 324)


def test_encoding_decides_integer_order_and_explicit_order_overrides():
    md = Mqmd(encoding=273)
    assert encode_mqmd(md)[4:8] == b"\x00\x00\x00\x01"
    assert encode_mqmd(Mqmd(encoding=546))[4:8] == b"\x01\x00\x00\x00"
    swapped = encode_mqmd(md, "<")
    assert swapped[4:8] == b"\x01\x00\x00\x00"
    assert decode_mqmd(swapped) == md  # order found from Version, not Encoding


def test_default_is_ibm_mqmd_default():
    raw = encode_mqmd(MQMD_DEFAULT)
    assert len(raw) == 324
    assert raw[:4] == b"MD  "
    le = lambda off: struct.unpack_from("<i", raw, off)[0]  # noqa: E731
    assert (le(4), le(12), le(16), le(24), le(28), le(40), le(44)) == (1, 8, -1, 546, 0, -1, 2)
    assert raw[32:40] == b"        "
    assert raw[48:96] == bytes(48)
    assert raw[100:208] == b" " * 108   # ReplyToQ, ReplyToQMgr, UserIdentifier blank padded
    assert raw[208:240] == bytes(32)    # AccountingToken is MQBYTE: NULs


def test_nul_padded_text_is_trimmed():
    raw = bytearray(encode_mqmd(Mqmd(put_date="20240101")))
    raw[304:312] = b"   \x00\x00\x00\x00\x00"
    raw[196:208] = b"app\x00garbage!"
    md = decode_mqmd(bytes(raw))
    assert md.put_date == "" and md.user_identifier == "app"


def test_real_tnt4j_mqmd():
    data = real_message("tnt4j_RFH2.msg.hex")
    md = decode_mqmd(data)
    assert md.version == 1
    assert (md.report, md.msg_type, md.expiry, md.feedback) == (0, 8, -1, 0)
    assert (md.encoding, md.coded_char_set_id, md.format) == (546, 437, "MQHRF2  ")
    assert (md.priority, md.persistence) == (4, 0)
    assert md.msg_id[:16] == b"AMQ DIINFOBQ1   "
    assert md.correl_id == bytes(24)
    assert md.reply_to_q == md.user_identifier == md.put_appl_name == ""
    assert md.put_date == "" and md.put_time == ""
    wide = decode_mqmd(data, version=2)
    assert (wide.msg_seq_number, wide.offset, wide.msg_flags, wide.original_length) == (1, 0, 0, -1)


@settings(deadline=None)  # shared CI machine: no per-example time limit
@given(mqmds())
def test_round_trip(md):
    raw = encode_mqmd(md)
    assert len(raw) == md.length
    assert decode_mqmd(raw) == md


@settings(deadline=None)  # shared CI machine: no per-example time limit
@given(mqmds(), st.sampled_from(["<", ">"]))
def test_round_trip_either_order_and_canonical_bytes(md, order):
    raw = encode_mqmd(md, order)
    assert encode_mqmd(decode_mqmd(raw), order) == raw


@settings(deadline=None)  # shared CI machine: no per-example time limit
@given(mqmds())
def test_dict_round_trip(md):
    assert Mqmd.from_dict(md.as_dict()) == md


@pytest.mark.parametrize("version", [1, 2])
def test_truncation_at_every_offset(version):
    raw = encode_mqmd(Mqmd(version=version, encoding=273))
    for cut in range(len(raw)):
        with pytest.raises(MappingError) as err:
            decode_mqmd(raw[:cut])
        assert err.value.structure == "MQMD"
        assert err.value.field is not None


def test_truncation_names_the_cut_field():
    raw = encode_mqmd(Mqmd(version=2))
    with pytest.raises(MappingError, match="MsgId") as err:
        decode_mqmd(raw[:60])
    assert err.value.field == "MsgId" and err.value.offset == 0
    with pytest.raises(MappingError) as err:
        decode_mqmd(raw[:350])
    assert err.value.field == "MsgSeqNumber"


def test_decoding_at_an_offset_reports_that_offset():
    raw = b"\xff" * 10 + encode_mqmd(Mqmd())
    assert decode_mqmd(raw, 10) == Mqmd()
    with pytest.raises(MappingError) as err:
        decode_mqmd(raw[:100], 10)
    assert err.value.offset == 10


@pytest.mark.parametrize(
    ("patch", "field"),
    [((0, b"MX  "), "StrucId"), ((4, b"\x00\x00\x00\x03"), "Version"), ((4, b"\x07\x00\x00\x07"), "Version")],
)
def test_bad_header_fields(patch, field):
    raw = bytearray(encode_mqmd(Mqmd()))
    off, value = patch
    raw[off : off + len(value)] = value
    with pytest.raises(MappingError) as err:
        decode_mqmd(bytes(raw))
    assert err.value.field == field


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        (dict(user_identifier="x" * 13), "UserIdentifier"),
        (dict(reply_to_q="\u20ac"), "ReplyToQ"),
        (dict(msg_id=b"short"), "MsgId"),
        (dict(expiry=2**31), "Expiry"),
        (dict(priority="4"), "Priority"),
        (dict(persistence=True), "Persistence"),
        (dict(put_appl_name=None), "PutApplName"),
        (dict(format="TOOLONGFMT"), "Format"),
        (dict(version=3), "Version"),
        (dict(version=True), "Version"),
        (dict(encoding="546"), "Encoding"),
        (dict(version=1, msg_flags=8), "Version"),
    ],
)
def test_validation_errors(kwargs, field):
    with pytest.raises(MappingError) as err:
        encode_mqmd(Mqmd(**kwargs))
    assert err.value.field == field
    with pytest.raises(MappingError):
        validate(Mqmd(**kwargs))


@pytest.mark.parametrize(
    "data", [{"Nope": 1}, {"Priority": "x"}, {"MsgId": 5}, {"MsgId": "zz"}, {"ReplyToQ": 3}, {"Expiry": True}]
)
def test_from_dict_errors(data):
    with pytest.raises(MappingError):
        Mqmd.from_dict(data)


@settings(deadline=None)  # shared CI machine: no per-example time limit
@given(st.binary(max_size=400))
def test_arbitrary_bytes_raise_only_mapping_error(data):
    try:
        decode_mqmd(data)
    except MappingError:
        pass


_anything = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=60) | st.binary(max_size=60)


@settings(deadline=None)
@given(st.sampled_from(sorted(a for a in FIELD_TABLE if a != "struc_id")), _anything)
def test_any_wrong_field_value_raises_only_mapping_error(attr, value):
    md = Mqmd(version=2, **{attr: value}) if attr != "version" else Mqmd(version=value)
    try:
        raw = encode_mqmd(md)
    except MappingError:
        return
    assert decode_mqmd(raw).version in (1, 2)
