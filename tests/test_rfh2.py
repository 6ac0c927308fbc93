"""MQRFH2 / MQRFH codec: hand-built golden bytes, real captures (pymqi's single_rfh2.dat, tnt4j-streams'
RFH2.msg), tolerance, round trips, errors."""
from __future__ import annotations

import dataclasses
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mappings.errors import MappingError
from mappings.mq import constants as C
from mappings.mq.message import decode_message, encode_message
from mappings.mq.mqmd import Mqmd, encode_mqmd
from mappings.mq.rfh2 import (
    Rfh1,
    Rfh2,
    RfhElement,
    RfhFolder,
    decode_rfh1,
    decode_rfh2,
    encode_folder,
    encode_rfh1,
    encode_rfh2,
    folder_xml,
    parse_folder,
)
from tests.mq_support import folders, real_message, rfh1s, rfh2s

MCD = RfhFolder("mcd", (RfhElement("Msd", "jms_text"),))


def _fixed(order: str, length: int, encoding: int, ccsid: int, fmt: bytes, nvccsid: int = 1208) -> bytes:
    i = lambda v: v.to_bytes(4, "big" if order == ">" else "little", signed=True)  # noqa: E731
    return b"RFH " + i(2) + i(length) + i(encoding) + i(ccsid) + fmt.ljust(8) + i(0) + i(nvccsid)


@pytest.mark.parametrize("order", [">", "<"])
def test_golden_bytes_by_hand(order):
    # IBM MQ docs "MQRFH2 - Rules and formatting header 2": 36-byte fixed part, NameValueLength + data
    # padded with blanks to 4
    folder = b"<mcd><Msd>jms_text</Msd></mcd>"          # 30 bytes -> 32
    usr = b"<usr><n dt='i4'>7</n></usr>"                # 27 bytes -> 28
    nvl = lambda n: n.to_bytes(4, "big" if order == ">" else "little")  # noqa: E731
    golden = (_fixed(order, 36 + 4 + 32 + 4 + 28, 273, 1208, b"MQSTR") + nvl(32) + folder + b"  "
              + nvl(28) + usr + b" ")
    model = Rfh2(encoding=273, coded_char_set_id=1208, format="MQSTR   ",
                 folders=(MCD, RfhFolder("usr", (RfhElement("n", "7", "i4"),))))
    assert encode_rfh2(model, order) == golden
    decoded, end = decode_rfh2(golden, 0, order)
    assert decoded == model and end == len(golden)


def test_ibm_initial_values():
    rfh = Rfh2()
    assert (rfh.encoding, rfh.coded_char_set_id, rfh.format, rfh.flags, rfh.name_value_ccsid) == (
        546, -2, "        ", 0, 1208)
    assert encode_rfh2(rfh, ">") == _fixed(">", 36, 546, -2, b"")


def test_real_pymqi_message():
    data = real_message("pymqi_single_rfh2.dat.hex")
    rfh, end = decode_rfh2(data, 0, ">")
    assert end == 284  # 36 + (4+152) + (4+56) + (4+28): folders of 151, 53, 28 bytes padded
    assert (rfh.encoding, rfh.coded_char_set_id, rfh.format, rfh.name_value_ccsid) == (273, 1208, "MQSTR   ",
                                                                                        1208)
    assert [f.name for f in rfh.folders] == ["psc", "testFolder", "mcd"]
    psc = rfh.folder("psc")
    assert [e.name for e in psc.elements] == ["Command", "Topic", "QMgrName", "QName", "RegOpt"]
    assert psc.value("Command") == "RegSub" and psc.value("Topic") == "$topictree/topiccat/topic"
    assert rfh.folder("testFolder").value("testVar") == "testValue"
    assert rfh.folder("mcd").value("Msd") == "xmlnsc"
    assert data[end:].startswith(b"<testData>")
    assert encode_rfh2(rfh, ">") == data[:end]  # byte-exact re-encode


def test_real_tnt4j_rfh2_little_endian():
    data = real_message("tnt4j_RFH2.msg.hex")
    rfh, end = decode_rfh2(data, 364, "<")
    assert (rfh.encoding, rfh.coded_char_set_id, rfh.format, rfh.name_value_ccsid) == (546, 437, "MQSTR   ",
                                                                                        1208)
    assert [f.name for f in rfh.folders] == ["mcd", "jms", "usr"]
    assert rfh.folder("mcd").value("Msd") == "jms_text"
    assert rfh.folder("jms").elements == ()
    usr = rfh.folder("usr")
    assert usr.value("Root") == "ADP" and usr.value("TestID") == "ACS_Get_IndicativeAssociate_3.0"
    assert end == 364 + 36 + 4 + 32 + 4 + 12 + 4 + 652
    assert encode_rfh2(rfh, "<") == data[364:end]
    with pytest.raises(MappingError, match="other byte order"):
        decode_rfh2(data, 364, ">")


def test_tolerant_folder_parsing():
    text = (b"<usr>\n  <a dt=\"i4\">1</a>\n  <b xsi:nil='true'/>\n  <c>x &amp; y &gt; z &apos;&quot;</c>"
            b"<d><![CDATA[<raw>]]></d><e></e><f xsi:nil='false'>v</f></usr>\x00\x00\x00 ")
    folder = parse_folder(text)
    assert folder.elements == (
        RfhElement("a", "1", "i4"), RfhElement("b", None), RfhElement("c", "x & y > z '\""),
        RfhElement("d", "<raw>"), RfhElement("e", ""),
        RfhElement("f", "v", attributes=(("xsi:nil", "false"),)),
    )


def test_nul_padding_inside_a_header():
    body = b"<mcd><Msd>jms_bytes</Msd></mcd>"  # 31 bytes: pad with a NUL instead of a blank
    data = _fixed(">", 36 + 4 + 32, 273, 1208, b"") + (32).to_bytes(4, "big") + body + b"\x00"
    rfh, _ = decode_rfh2(data, 0, ">")
    assert rfh.folder("mcd").value("Msd") == "jms_bytes"


def test_writing_escapes_and_nil_and_groups():
    folder = RfhFolder("mq_usr", (RfhElement("p", None, "i4"), RfhElement("s", "a<b&c>d\r"),
                                  RfhElement("g", children=(RfhElement("x", "1"),))),
                       attributes=(("content", "properties"),))
    xml = folder_xml(folder)
    assert xml == ("<mq_usr content='properties'><p dt='i4' xsi:nil='true'></p><s>a&lt;b&amp;c&gt;d&#13;</s>"
                   "<g><x>1</x></g></mq_usr>")
    assert parse_folder(xml.encode()) == folder


def test_utf16_folder_with_byte_order_mark():
    xml = "\ufeff<usr><k>v</k></usr>".encode("utf-16-le")
    data = _fixed("<", 36 + 4 + len(xml), 546, -2, b"", 1200) + struct.pack("<i", len(xml)) + xml
    assert decode_rfh2(data, 0, "<")[0].folder("usr").value("k") == "v"


@pytest.mark.parametrize("ccsid", [1200, 13488, 17584])
@pytest.mark.parametrize("order", [">", "<"])
def test_utf16_name_value_data(ccsid, order):
    rfh = Rfh2(name_value_ccsid=ccsid, folders=(RfhFolder("usr", (RfhElement("k", "v\u00e9\u4e2d"),)),))
    raw = encode_rfh2(rfh, order)
    text = "<usr><k>v\u00e9\u4e2d</k></usr>".encode("utf-16-be" if order == ">" else "utf-16-le")
    assert text in raw
    assert decode_rfh2(raw, 0, order)[0] == rfh


@settings(deadline=None)  # shared CI machine: no per-example time limit
@given(folders, st.sampled_from([1208, 1200]), st.sampled_from(["<", ">"]))
def test_folder_padding_is_blank_to_multiple_of_4(folder, ccsid, order):
    data = encode_folder(folder, ccsid, order)
    assert len(data) % 4 == 0
    codec = "utf-8" if ccsid == 1208 else ("utf-16-be" if order == ">" else "utf-16-le")
    xml = folder_xml(folder).encode(codec)
    assert data.startswith(xml) and set(data[len(xml):].decode(codec)) <= {" "}


@settings(deadline=None)  # shared CI machine: no per-example time limit
@given(rfh2s, st.sampled_from(["<", ">"]))
def test_rfh2_round_trip(rfh, order):
    raw = encode_rfh2(rfh, order)
    decoded, end = decode_rfh2(raw + b"BODY", 0, order)
    assert decoded == rfh and end == len(raw)
    assert struct.unpack_from(order + "i", raw, 8)[0] == len(raw) and len(raw) % 4 == 0


@settings(deadline=None)  # shared CI machine: no per-example time limit
@given(rfh1s, st.sampled_from(["<", ">"]))
def test_rfh1_round_trip(rfh, order):
    raw = encode_rfh1(rfh, order)
    decoded, end = decode_rfh1(raw, 0, order, 1208)
    assert decoded == rfh and end == len(raw) and len(raw) % 4 == 0


def test_rfh1_name_value_string_by_hand():
    nvs = b'OPT_A valueA OPT_B "two words" OPT_C "say ""hi"""\x00\x00'
    nvs += b" " * (-len(nvs) % 4)
    data = b"RFH " + struct.pack(">iii", 1, 32 + len(nvs), 273) + struct.pack(">i", 1208) + b"MQSTR   " + \
        struct.pack(">i", 0) + nvs
    rfh, end = decode_rfh1(data, 0, ">", 819)
    assert rfh.pairs == (("OPT_A", "valueA"), ("OPT_B", "two words"), ("OPT_C", 'say "hi"'))
    assert rfh.format == "MQSTR   " and end == len(data)


def _valid() -> bytes:
    return encode_rfh2(Rfh2(folders=(MCD, RfhFolder("usr", (RfhElement("a", "1", "i4"),)))), ">")


def test_truncation_at_every_offset():
    raw = _valid()
    for cut in range(len(raw)):
        with pytest.raises(MappingError) as err:
            decode_rfh2(raw[:cut], 0, ">")
        assert err.value.structure == "MQRFH2" and err.value.offset == 0


def test_struc_length_not_multiple_of_4_message():
    raw = bytearray(b"\x00" * 364 + _valid())
    raw[364 + 8 : 364 + 12] = (42).to_bytes(4, "big")
    with pytest.raises(MappingError) as err:
        decode_rfh2(bytes(raw), 364, ">")
    assert str(err.value) == "MQRFH2 at offset 364: StrucLength: 42 is not a multiple of 4"
    assert (err.value.structure, err.value.field, err.value.offset) == ("MQRFH2", "StrucLength", 364)


def _patched(offset: int, value: bytes) -> bytes:
    raw = bytearray(_valid())
    raw[offset : offset + len(value)] = value
    return bytes(raw)


@pytest.mark.parametrize(
    ("data", "field", "text"),
    [
        (_patched(0, b"RFX "), "StrucId", "is not 'RFH '"),
        (_patched(4, (3).to_bytes(4, "big")), "Version", "3 is not 2"),
        (_patched(8, (32).to_bytes(4, "big")), "StrucLength", "less than the fixed part"),
        (_patched(8, (4000).to_bytes(4, "big")), "StrucLength", "runs past the end"),
        (_patched(32, (850).to_bytes(4, "big")), "NameValueCCSID", "850 is not"),
        (_patched(36, (1000).to_bytes(4, "big")), "NameValueLength", "does not fit"),
        (_patched(36, (-4).to_bytes(4, "big", signed=True)), "NameValueLength", "does not fit"),
        (_patched(40, b"<mcd><Msd>jms_text</Msd></mcx>"), "NameValueData", "line 1, column"),
        (_patched(40, b"<mcd></mcd><x></x>            "), "NameValueData", "exactly one folder"),
        (_patched(40, b"\xff\xfe"), None, "not valid utf-8"),
        (_patched(40, b" " * 32), None, "holds no folder"),
    ],
)
def test_decode_errors(data, field, text):
    with pytest.raises(MappingError, match=text) as err:
        decode_rfh2(data, 0, ">")
    if field is not None:
        assert err.value.field == field


def test_unpadded_folder_is_read_but_stray_bytes_are_not():
    body = b"<mcd><Msd>jms_bytes</Msd></mcd>"  # 31 bytes, NameValueLength 31 (should be a multiple of 4)
    data = _fixed(">", 36 + 4 + 32, 273, 1208, b"") + (31).to_bytes(4, "big") + body + b" "
    with pytest.raises(MappingError, match="1 stray bytes"):
        decode_rfh2(data, 0, ">")
    usr = b"<usr><a>1</a><bc>2</bc></usr>"  # 29 bytes, also unpadded: 36 + 35 + 33 = 104
    data = _fixed(">", 104, 273, 1208, b"") + (31).to_bytes(4, "big") + body + (29).to_bytes(4, "big") + usr
    rfh, end = decode_rfh2(data, 0, ">")
    assert end == 104 and [f.name for f in rfh.folders] == ["mcd", "usr"]


@pytest.mark.parametrize(
    "folder",
    [
        RfhFolder("bad name"),
        RfhFolder("usr", (RfhElement("1st", "x"),)),
        RfhFolder("usr", (RfhElement("a:b", "x"),)),
        RfhFolder("usr", (RfhElement("a", "bell\x07"),)),
        RfhFolder("usr", (RfhElement("a", "x", attributes=(("b", "\x01"),)),)),
        RfhFolder("usr", (RfhElement("a", "\ud800"),)),
    ],
)
def test_encode_errors(folder):
    with pytest.raises(MappingError):
        encode_rfh2(Rfh2(folders=(folder,)), "<")


@pytest.mark.parametrize(
    "rfh",
    [Rfh2(encoding="x"), Rfh2(flags=2**32), Rfh2(folders=("usr",)), Rfh2(folders=(RfhFolder("usr", [1]),)),
     Rfh2(folders=(RfhFolder("usr", (RfhElement("a", 5),)),)), Rfh2(format="TOO LONG FORMAT")],
)
def test_encode_rejects_wrong_types(rfh):
    with pytest.raises(MappingError):
        encode_rfh2(rfh, "<")


def test_encode_rfh1_rejects_wrong_types():
    for rfh, order in ((Rfh1(pairs=(("a",),)), "<"), (Rfh1(coded_char_set_id=None), "<"), (Rfh1(), "?")):
        with pytest.raises(MappingError):
            encode_rfh1(rfh, order)


def test_bad_name_value_ccsid_on_encode():
    with pytest.raises(MappingError, match="NameValueCCSID"):
        encode_rfh2(Rfh2(name_value_ccsid=819, folders=(MCD,)), ">")


@pytest.mark.parametrize(
    "nvs",
    [b'A "unterminated   ', b"A B C   "],
)
def test_rfh1_errors(nvs):
    data = b"RFH " + struct.pack(">iii", 1, 32 + len(nvs), 273) + struct.pack(">i", 1208) + b" " * 8 + \
        struct.pack(">i", 0) + nvs
    with pytest.raises(MappingError) as err:
        decode_rfh1(data, 0, ">", 1208)
    assert err.value.structure == "MQRFH"


def test_rfh1_encode_rejects_empty_name():
    with pytest.raises(MappingError):
        encode_rfh1(Rfh1(pairs=(("", "x"),)), ">")


@settings(deadline=None)  # shared CI machine: no per-example time limit
@given(st.binary(min_size=0, max_size=120), st.sampled_from(["<", ">"]))
def test_fuzzed_bytes_after_valid_fixed_part_raise_only_mapping_error(tail, order):
    head = bytearray(encode_rfh2(Rfh2(), order))
    head[8:12] = (36 + len(tail) - len(tail) % 4).to_bytes(4, "big" if order == ">" else "little")
    try:
        decode_rfh2(bytes(head) + tail, 0, order)
    except MappingError:
        pass


# -- an RFH2 read and written again: folders the gateway did not change keep their bytes ------------------

# NameValueData as other writers put it (not as folder_xml writes it): an empty element as <e/>, a blank
# inside a tag, a line break, single and double quotes, an entity, NUL padding
_ODD_FOLDERS = (b"<usr><e/><a  dt='i4' >5</a>\n <s>it&apos;s</s><q dt=\"string\">x</q></usr>\x00",
                b"<mcd><Msd>jms_text</Msd></mcd>  ",
                b'<other attr="1"><x/></other>')


def _odd_rfh2(order: str, ccsid: int = 1208, codec: str = "utf-8") -> bytes:
    parts = b""
    for xml in _ODD_FOLDERS:
        data = xml.decode().encode(codec)
        data += b" " * (-len(data) % 4) if codec == "utf-8" else b""
        parts += len(data).to_bytes(4, "big" if order == ">" else "little") + data
    return _fixed(order, 36 + len(parts), 273, 1208, b"MQSTR", ccsid) + parts


@pytest.mark.parametrize("order", [">", "<"])
def test_an_unchanged_folder_is_written_as_it_was_read(order):
    golden = _odd_rfh2(order)
    rfh, end = decode_rfh2(golden, 0, order)
    assert end == len(golden) and rfh.folder("usr").value("e") == ""
    assert encode_rfh2(rfh, order) == golden          # <e/>, blanks, quotes and padding kept, lengths unchanged
    # a changed header keeps the bytes of the folders it did not change; the changed folder is written anew
    usr = rfh.folders[0]
    changed = dataclasses.replace(rfh, flags=0, folders=(
        dataclasses.replace(usr, elements=(*usr.elements, RfhElement("n", "1"))), *rfh.folders[1:]))
    out = encode_rfh2(changed, order)
    assert out.endswith(golden[36 + 4 + len(_ODD_FOLDERS[0]) + 3:])   # folders 2 and 3 byte for byte
    assert b"<usr><e></e><a dt='i4'>5</a>" in out
    assert decode_rfh2(out, 0, order)[0] == changed


def test_a_folder_made_equal_to_a_read_one_is_written_by_the_rules():
    rfh, _ = decode_rfh2(_odd_rfh2(">"), 0, ">")
    read = rfh.folders[0]
    made = RfhFolder(read.name, read.elements, read.attributes)
    assert made == read and made.raw is None and read.raw is not None
    assert encode_folder(made) == encode_folder(made, 1208, ">") != encode_folder(read)
    assert encode_folder(made).startswith(b"<usr><e></e><a dt='i4'>5</a><s>it's</s>")


@pytest.mark.parametrize("ccsid", [1200, 13488])
def test_read_bytes_are_kept_only_in_the_codec_they_were_read_in(ccsid):
    golden = _odd_rfh2(">", ccsid, "utf-16-be")
    rfh, _ = decode_rfh2(golden, 0, ">")
    assert encode_rfh2(rfh, ">") == golden
    again = dataclasses.replace(rfh, name_value_ccsid=1208)   # written in UTF-8 instead: from the elements
    out = encode_rfh2(again, ">")
    assert b"<usr><e></e>" in out and decode_rfh2(out, 0, ">")[0] == again


def test_a_message_read_and_written_again_is_unchanged_with_a_new_mqmd():
    md = Mqmd(format=C.MQFMT_RF_HEADER_2, encoding=273, coded_char_set_id=1208, persistence=1)
    golden = encode_mqmd(md) + _odd_rfh2(">") + b"body"
    msg = decode_message(golden)
    assert encode_message(msg) == golden
    # a route's override of the MQMD (persistence, priority) leaves the headers' bytes as they were
    moved = dataclasses.replace(msg, md=dataclasses.replace(msg.md, persistence=0, priority=7))
    out = encode_message(moved)
    assert out[len(encode_mqmd(moved.md)):] == golden[len(encode_mqmd(md)):]
