"""Map and Stream XML bodies: WebSphere Message Broker's own examples, the MQ JMS wire form, round-trips, errors."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mappings.errors import MappingError
from mappings.jms.bodies import decode_map, decode_stream, encode_map, encode_stream
from mappings.jms.model import (
    JavaType,
    JavaValue,
    MapBody,
    StreamBody,
    TypedMap,
    jboolean,
    jbytes,
    jchar,
    jdouble,
    jfloat,
    jint,
    jlong,
    jstring,
)
from tests.jms_strategies import java_values, typed_maps

# Verbatim from WebSphere Message Broker docs "JMS Message payload", MapMessage payload example.
WMB_MAP = """<map>
  <Item_8_of_10_Char dt='char'>A</Item_8_of_10_Char>
  <Item_5_of_10_Double dt='r8'>999999.0</Item_5_of_10_Double>
  <Item_10_of_10_String>Last Map Item</Item_10_of_10_String>
  <Item_9_of_10_Boolean dt='boolean'>0</Item_9_of_10_Boolean>
  <Item_2_of_10_Integrer dt='i4'>999</Item_2_of_10_Integrer>
  <Item_3_of_10_Short dt='i2'>9999</Item_3_of_10_Short>
  <Item_7_of_10_Byte dt='i1'>9</Item_7_of_10_Byte>
  <Item_6_of_10_Float dt='r4'>2.24</Item_6_of_10_Float>
  <Item_1_of_10_String>P2P Map Msg Number:1</Item_1_of_10_String>
  <Item_4_of_10_Long dt='i8'>99999</Item_4_of_10_Long>
</map>
"""

# Verbatim from the same page, StreamMessage payload example.
WMB_STREAM = """<stream>
  <elt>P2P Stream Message Number :7</elt>
  <elt dt='i4'>999</elt>
  <elt dt='i2'>9999</elt>
  <elt dt='i8'>99999</elt>
  <elt dt='r8'>999999.0</elt>
  <elt dt='r4'>2.24</elt>
  <elt dt='i1'>9</elt>
  <elt dt='char'>A</elt>
  <elt dt='boolean'>0</elt>
  <elt>Last Stream Item</elt>
</stream>
"""

WMB_MAP_EXPECTED = TypedMap([
    ("Item_8_of_10_Char", jchar("A")),
    ("Item_5_of_10_Double", jdouble(999999.0)),
    ("Item_10_of_10_String", jstring("Last Map Item")),
    ("Item_9_of_10_Boolean", jboolean(False)),
    ("Item_2_of_10_Integrer", jint(999)),
    ("Item_3_of_10_Short", JavaValue(JavaType.SHORT, 9999)),
    ("Item_7_of_10_Byte", JavaValue(JavaType.BYTE, 9)),
    ("Item_6_of_10_Float", jfloat(2.24)),
    ("Item_1_of_10_String", jstring("P2P Map Msg Number:1")),
    ("Item_4_of_10_Long", jlong(99999)),
])

WMB_STREAM_EXPECTED = (
    jstring("P2P Stream Message Number :7"), jint(999), JavaValue(JavaType.SHORT, 9999), jlong(99999),
    jdouble(999999.0), jfloat(2.24), JavaValue(JavaType.BYTE, 9), jchar("A"), jboolean(False),
    jstring("Last Stream Item"),
)


def test_wmb_map_example_decodes_in_document_order():
    assert decode_map(WMB_MAP) == MapBody(WMB_MAP_EXPECTED)


def test_wmb_stream_example_decodes():
    assert decode_stream(WMB_STREAM) == StreamBody(WMB_STREAM_EXPECTED)


def test_wmb_map_re_encodes_to_the_wire_form_and_back():
    wire = encode_map(decode_map(WMB_MAP))
    assert wire.startswith('<map><elt name="Item_8_of_10_Char" dt="char">A</elt>'
                           '<elt name="Item_5_of_10_Double" dt="r8">999999.0</elt>'
                           '<elt name="Item_10_of_10_String">Last Map Item</elt>')
    assert '<elt name="Item_6_of_10_Float" dt="r4">2.24</elt>' in wire
    assert decode_map(wire).entries == WMB_MAP_EXPECTED


def test_wmb_stream_re_encodes_to_the_same_elements():
    wire = encode_stream(decode_stream(WMB_STREAM))
    expected = "".join(line.strip() for line in WMB_STREAM.splitlines()).replace("'", '"')
    assert wire == expected


def test_mq_wire_forms_from_the_reference():
    # IBM MQ docs "The JMS message body" write double quotes; the Eclipse Amlen MQ bridge single-quoted dt.
    assert decode_map('<map><elt name="k" dt="i4">1</elt></map>').entries == TypedMap([("k", jint(1))])
    assert decode_map("<map><elt name=\"MyBoolean\" dt='boolean'>1</elt></map>").entries == TypedMap(
        [("MyBoolean", jboolean(True))])
    assert decode_stream('<stream><elt dt="i4">1</elt><elt>text</elt></stream>').items == (
        jint(1), jstring("text"))
    assert decode_stream("<stream><elt dt='boolean'>1</elt></stream>").items == (jboolean(True),)
    assert decode_map("<map></map>") == MapBody() and encode_map(MapBody()) == "<map></map>"
    assert decode_stream("<stream></stream>") == StreamBody() and encode_stream(()) == "<stream></stream>"


def test_keys_that_are_not_xml_names_round_trip():
    keys = ["1st", "with space", "a:b", "x<y>&z", 'quote"s', "tab\tnew\nline\rcr", "élt", "elt", "map"]
    body = MapBody(TypedMap([(k, jint(i)) for i, k in enumerate(keys)]))
    assert decode_map(encode_map(body)) == body


def test_an_element_per_key_entry_named_elt_and_mixed_forms():
    body = decode_map("<map><elt>plain</elt><elt name='k' dt='i4'>2</elt><Other>o</Other></map>")
    assert body.entries == TypedMap([("elt", jstring("plain")), ("k", jint(2)), ("Other", jstring("o"))])


def test_nulls_and_empties():
    body = MapBody(TypedMap([("s", jstring(None)), ("b", jbytes(None)), ("e", jstring("")),
                             ("z", jbytes(b""))]))
    wire = encode_map(body)
    assert '<elt name="s" xsi:nil="true"></elt>' in wire
    assert decode_map(wire) == body


@given(typed_maps())
def test_map_round_trip(entries):
    body = MapBody(entries)
    assert decode_map(encode_map(body)) == body


@given(st.lists(java_values(), max_size=10))
def test_stream_round_trip(items):
    body = StreamBody(tuple(items))
    assert decode_stream(encode_stream(body)) == body


@given(st.binary(max_size=200))
def test_decoders_raise_only_mapping_error_on_garbage(data):
    for decode in (decode_map, decode_stream):
        try:
            decode(data)
        except MappingError:
            pass


@given(st.text(alphabet="<>/=\"' mapstreltdi48r:&;x01\n", max_size=60))
def test_decoders_raise_only_mapping_error_on_near_xml(text):
    for decode in (decode_map, decode_stream):
        try:
            decode(text)
        except MappingError:
            pass


@pytest.mark.parametrize(
    ("doc", "reason", "field"),
    [
        ("<stream/>", "expected <map>", None),
        ("<map><a dt='i4'>x</a></map>", "not an integer", "a"),
        ("<map><elt name='k' dt='i1'>300</elt></map>", "outside", "k"),
        ("<map><a>1</a><a>2</a></map>", "duplicate", "a"),
        ("<map><elt name='a'>1</elt><a>2</a></map>", "duplicate", "a"),
        ("<map><elt name=''>1</elt></map>", "empty map name", "''"),
        ("<map><a><b/></a></map>", "cannot contain elements", "a"),
        ("<map>text<a/></map>", "text between", None),
        ("<map><a/>tail</map>", "text between", None),
        ("<map><a dt='x'>1</a></map>", "unknown data type", "a"),
        ("<map><a dt='i4' xsi:nil='true'/></map>", "xsi:nil", "a"),
        ("<map><a>", "malformed", None),
    ],
)
def test_map_errors(doc, reason, field):
    with pytest.raises(MappingError, match=reason) as info:
        decode_map(doc)
    assert info.value.field == field


@pytest.mark.parametrize(
    ("doc", "reason", "field"),
    [
        ("<map/>", "expected <stream>", None),
        ("<stream><elt/><item>1</item></stream>", "expected <elt>", "[1]"),
        ("<stream><elt dt='r4'>1e39</elt></stream>", "too large", "[0]"),
        ("<stream><elt dt='char'></elt></stream>", "one UTF-16", "[0]"),
    ],
)
def test_stream_errors(doc, reason, field):
    with pytest.raises(MappingError, match=reason) as info:
        decode_stream(doc)
    assert info.value.field == field


def test_error_carries_the_line_of_the_bad_entry():
    with pytest.raises(MappingError) as info:
        decode_map("<map>\n<a>1</a>\n<a>2</a>\n</map>")
    assert info.value.offset == 3


def test_encode_errors():
    with pytest.raises(MappingError, match="U\\+0001") as info:
        encode_map(TypedMap([("bad\x01key", jint(1))]))
    assert info.value.structure == "map body"
    with pytest.raises(MappingError, match="U\\+0000") as info:
        encode_stream([jstring("a"), jstring("\x00")])
    assert info.value.field == "[1]"
