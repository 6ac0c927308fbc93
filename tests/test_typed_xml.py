"""dt= typed XML values: the Datatype table of WebSphere Message Broker docs "Preservation of
Java type", ranges, floats, XML reading."""
from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mappings.errors import MappingError
from mappings.jms.model import JavaType, JavaValue, jbytes, jchar, jdouble, jfloat, jint, jstring, to_float32
from mappings.jms.typed_xml import (
    R4_MAX,
    decode_value,
    encode_value,
    escape_attr,
    escape_text,
    format_float,
    parse_xml,
    typed_element,
)
from tests.jms_strategies import java_values

I8_MAX = 9223372036854775807
I8_MIN = -9223372036854775808


# ------------------------------------------------------------- the Datatype table, row by row


@pytest.mark.parametrize(
    ("dt", "text", "expected"),
    [
        (None, "any text", JavaValue(JavaType.STRING, "any text")),
        ("String", "", JavaValue(JavaType.STRING, "")),
        ("boolean", "1", JavaValue(JavaType.BOOLEAN, True)),
        ("Boolean", "0", JavaValue(JavaType.BOOLEAN, False)),
        ("bin.hex", "00FFa0", JavaValue(JavaType.BYTES, b"\x00\xff\xa0")),
        ("bin.hex", "", JavaValue(JavaType.BYTES, b"")),
        ("I1", "-128", JavaValue(JavaType.BYTE, -128)),
        ("i1", "+127", JavaValue(JavaType.BYTE, 127)),
        ("I2", "-32768", JavaValue(JavaType.SHORT, -32768)),
        ("i2", "32767", JavaValue(JavaType.SHORT, 32767)),
        ("I4", "-2147483648", JavaValue(JavaType.INT, -(2**31))),
        ("i4", "2147483647", JavaValue(JavaType.INT, 2**31 - 1)),
        ("I8", str(I8_MIN), JavaValue(JavaType.LONG, I8_MIN)),
        ("i8", str(I8_MAX), JavaValue(JavaType.LONG, I8_MAX)),
        ("int", str(I8_MAX), JavaValue(JavaType.LONG, I8_MAX)),
        ("int", "-5", JavaValue(JavaType.LONG, -5)),
        ("R4", "2.24", JavaValue(JavaType.FLOAT, to_float32(2.24))),
        ("r4", "3.40282347E+38", JavaValue(JavaType.FLOAT, R4_MAX)),
        ("r4", "1.175E-37", JavaValue(JavaType.FLOAT, to_float32(1.175e-37))),
        ("R8", "999999.0", JavaValue(JavaType.DOUBLE, 999999.0)),
        ("r8", "-1.7976931348623157E308", JavaValue(JavaType.DOUBLE, -1.7976931348623157e308)),
        ("r8", "2.225E-307", JavaValue(JavaType.DOUBLE, 2.225e-307)),
        ("r8", ".5e1", JavaValue(JavaType.DOUBLE, 5.0)),
        ("r8", "7.", JavaValue(JavaType.DOUBLE, 7.0)),
        ("r8", "0", JavaValue(JavaType.DOUBLE, 0.0)),
        ("r8", "-0.0", JavaValue(JavaType.DOUBLE, -0.0)),
        ("char", "A", JavaValue(JavaType.CHAR, "A")),
        ("char", " ", JavaValue(JavaType.CHAR, " ")),
        ("i4", "  42\n", JavaValue(JavaType.INT, 42)),
    ],
)
def test_decode_table(dt, text, expected):
    assert decode_value(dt, text, name="p") == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("NaN", math.nan), ("nan", math.nan), ("Infinity", math.inf), ("-Infinity", -math.inf),
     ("INF", math.inf), ("+INF", math.inf), ("-INF", -math.inf)],
)
@pytest.mark.parametrize("dt", ["r4", "r8"])
def test_non_finite_forms_are_read(dt, text, expected):
    v = decode_value(dt, text, name="p").value
    assert (math.isnan(v) and math.isnan(expected)) or v == expected


@pytest.mark.parametrize(
    ("dt", "text", "reason"),
    [
        ("boolean", "true", "not 0 or 1"),
        ("boolean", "2", "not 0 or 1"),
        ("boolean", "", "not 0 or 1"),
        ("bin.hex", "ABC", "hex"),
        ("bin.hex", "GG", "hex"),
        ("i1", "128", "outside -128..127"),
        ("i1", "-129", "outside"),
        ("i2", "32768", "outside"),
        ("i4", "2147483648", "outside"),
        ("i8", "9223372036854775808", "outside"),
        ("int", "-9223372036854775809", "outside"),
        # the document's typo "92233720368547750807" is NOT accepted as the I8 upper bound
        ("i8", "92233720368547750807", "outside"),
        ("i4", "1.0", "not an integer"),
        ("i4", "1e3", "not an integer"),
        ("i4", "1_000", "not an integer"),
        ("i4", "\u0661", "not an integer"),  # Arabic-Indic digit: int() would accept it
        ("i4", "", "not an integer"),
        ("i4", "--1", "not an integer"),
        ("r4", "3.5e38", "too large"),
        ("r4", "1e-38", "below"),
        ("r4", "1e-50", "too small"),
        ("r8", "1e309", "too large"),
        ("r8", "1e-308", "below"),
        ("r8", "1,5", "not a decimal"),
        ("r8", "0x10", "not a decimal"),
        ("r8", "1_0.0", "not a decimal"),
        ("r8", "", "not a decimal"),
        ("char", "", "one UTF-16"),
        ("char", "AB", "one UTF-16"),
        ("char", "\U0001F600", "one UTF-16"),
        ("i16", "1", "unknown data type"),
    ],
)
def test_decode_errors_name_the_property(dt, text, reason):
    with pytest.raises(MappingError, match=reason) as info:
        decode_value(dt, text, name="Prop1")
    assert info.value.field == "Prop1"
    assert info.value.structure.startswith(f"dt={dt}")


def test_nil_values():
    assert decode_value(None, None, name="p", nil=True) == jstring(None)
    assert decode_value("bin.hex", "", name="p", nil=True) == jbytes(None)
    with pytest.raises(MappingError, match="xsi:nil"):
        decode_value("i4", None, name="p", nil=True)
    assert decode_value(None, None, name="p") == jstring("")  # <P></P> is the empty string


# ------------------------------------------------------------- encoding and float text


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (jstring("a<b&c"), (None, "a<b&c")),
        (jstring(None), (None, None)),
        (JavaValue(JavaType.BOOLEAN, True), ("boolean", "1")),
        (jbytes(b"\xab\x01"), ("bin.hex", "AB01")),
        (JavaValue(JavaType.BYTE, -5), ("i1", "-5")),
        (JavaValue(JavaType.SHORT, 5), ("i2", "5")),
        (jint(999), ("i4", "999")),
        (JavaValue(JavaType.LONG, 99999), ("i8", "99999")),
        (jfloat(2.24), ("r4", "2.24")),
        (jdouble(999999.0), ("r8", "999999.0")),
        (jdouble(math.nan), ("r8", "NaN")),
        (jfloat(math.inf), ("r4", "Infinity")),
        (jdouble(-math.inf), ("r8", "-Infinity")),
        (jchar("A"), ("char", "A")),
    ],
)
def test_encode(value, expected):
    assert encode_value(value, name="p") == expected


def test_float_formatting_is_shortest_round_trip():
    assert format_float(to_float32(0.1), JavaType.FLOAT) == "0.1"
    assert format_float(0.1, JavaType.DOUBLE) == "0.1"
    assert format_float(R4_MAX, JavaType.FLOAT) == "3.4028235e+38"
    assert format_float(1e16, JavaType.DOUBLE) == "1e+16"
    assert format_float(to_float32(16777217.0), JavaType.FLOAT) == "16777216.0"


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (jfloat(1e-38), "below"),
        (jdouble(1e-308), "below"),
        (jstring("a\x00b"), "U\\+0000"),
        (jchar("\ud800"), "U\\+D800"),
        (jchar("\uffff"), "U\\+FFFF"),
    ],
)
def test_encode_errors_name_the_property(value, reason):
    with pytest.raises(MappingError, match=reason) as info:
        encode_value(value, name="Prop2")
    assert info.value.field == "Prop2"


@given(java_values())
def test_value_round_trip(value):
    dt, text = encode_value(value, name="p")
    assert decode_value(dt, text, name="p", nil=text is None) == value


@given(java_values())
def test_element_round_trip_through_a_real_parser(value):
    xml = typed_element("P", value, name="P")
    element = parse_xml(xml, structure="test")
    from mappings.jms.typed_xml import is_nil
    assert decode_value(element.get("dt"), element.text, name="P", nil=is_nil(element)) == value


@given(st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_r4_text_reads_back_to_the_same_float(f):
    text = format_float(f, JavaType.FLOAT)
    assert to_float32(float(text)) == f


# ------------------------------------------------------------- escaping and XML reading


def test_escaping_survives_a_parser():
    tricky = 'a&b<c>d"e\r\nf\tg'
    element = parse_xml(f'<x a="{escape_attr(tricky)}">{escape_text(tricky)}</x>', structure="t")
    assert element.get("a") == tricky
    assert element.text == tricky


def test_parse_xml_is_tolerant_of_undeclared_xsi_quotes_declaration_and_bom():
    root = parse_xml("\ufeff<?xml version='1.0' encoding='UTF-8'?>\n<usr><P xsi:nil='true'/></usr>",
                     structure="usr folder")
    assert root.tag == "usr" and len(root) == 1


@pytest.mark.parametrize(
    ("doc", "line", "column"),
    # libxml2's column is 1-based and points just past the offending end tag
    [("<a><b></a>", 1, 11), ("<a>\n<b>\n</a>", 3, 5), ("<?xml version='1.0'?>\n<a>\n</b>", 3, 5)],
)
def test_parse_errors_point_at_line_and_column(doc, line, column):
    with pytest.raises(MappingError, match=f"line {line}, column {column}") as info:
        parse_xml(doc, structure="usr folder")
    assert info.value.offset == line and info.value.structure == "usr folder"


@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        ("", "one root"),
        ("<a/><b/>", "one root"),
        ("x<a/>", "outside"),
        ("<a/>x", "after"),
        ('<!DOCTYPE a [<!ENTITY e "x">]><a>&e;</a>', "malformed"),
        (b"<a>\xff</a>", "UTF-8"),
        (5, "expected XML"),
    ],
)
def test_parse_rejects(doc, reason):
    with pytest.raises(MappingError, match=reason):
        parse_xml(doc, structure="t")
