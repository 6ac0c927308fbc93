"""Map/Stream -> JSON: the plain form is always valid JSON in map order; the typed form round-trips."""
from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mappings.errors import MappingError
from mappings.jms.bodies import decode_map, decode_stream
from mappings.jms.json_forms import (
    map_from_typed_json,
    map_to_json,
    map_to_typed_json,
    stream_from_typed_json,
    stream_to_json,
    stream_to_typed_json,
)
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
from tests.test_jms_bodies import WMB_MAP, WMB_STREAM


def strict_loads(text: str):
    """RFC 8259 JSON only: NaN/Infinity tokens are refused, duplicate keys are visible."""

    def refuse(token):
        raise AssertionError(f"non-JSON token {token}")

    return json.loads(text, parse_constant=refuse, object_pairs_hook=list)


def test_wmb_map_as_plain_json_keeps_document_order():
    text = map_to_json(decode_map(WMB_MAP))
    assert text == (
        '{"Item_8_of_10_Char":"A","Item_5_of_10_Double":999999.0,"Item_10_of_10_String":"Last Map Item",'
        '"Item_9_of_10_Boolean":false,"Item_2_of_10_Integrer":999,"Item_3_of_10_Short":9999,'
        '"Item_7_of_10_Byte":9,"Item_6_of_10_Float":2.24,"Item_1_of_10_String":"P2P Map Msg Number:1",'
        '"Item_4_of_10_Long":99999}'
    )
    assert [k for k, _ in strict_loads(text)][:3] == ["Item_8_of_10_Char", "Item_5_of_10_Double",
                                                     "Item_10_of_10_String"]


def test_wmb_stream_as_plain_json():
    assert stream_to_json(decode_stream(WMB_STREAM)) == (
        '["P2P Stream Message Number :7",999,9999,99999,999999.0,2.24,9,"A",false,"Last Stream Item"]'
    )


def test_plain_forms_of_the_awkward_values():
    items = [jdouble(math.nan), jdouble(math.inf), jfloat(-math.inf), jbytes(b"\x00\xff"), jbytes(None),
             jstring(None), jchar("\x00"), jchar("\ud800"), jlong(2**63 - 1), jdouble(-0.0), jstring("é\"\\")]
    text = stream_to_json(items)
    assert strict_loads(text) == ["NaN", "Infinity", "-Infinity", "AP8=", None, None, "\x00", "\ud800",
                                  2**63 - 1, -0.0, 'é"\\']
    text.encode("utf-8")  # a lone surrogate is escaped, so the text is valid UTF-8
    assert "\\ud800" in text


@given(typed_maps(xml_safe=False))
def test_plain_map_json_is_always_valid_utf8_json_in_order(entries):
    text = map_to_json(entries)
    text.encode("utf-8")
    assert [k for k, _ in strict_loads(text)] == list(entries)


@given(st.lists(java_values(xml_safe=False), max_size=10))
def test_plain_stream_json_is_always_valid(items):
    text = stream_to_json(items)
    text.encode("utf-8")
    assert len(strict_loads(text)) == len(items)


def test_typed_form_shape():
    assert stream_to_typed_json([jint(1), jfloat(2.24), jstring(None)]) == (
        '[{"type":"int","value":1},{"type":"float","value":2.24},{"type":"String","value":null}]'
    )
    assert map_to_typed_json(TypedMap([("b", jbytes(b"hi"))])) == '{"b":{"type":"byte[]","value":"aGk="}}'


@given(typed_maps(xml_safe=False))
def test_typed_map_round_trip(entries):
    text = map_to_typed_json(entries)
    strict_loads(text)
    assert map_from_typed_json(text.encode("utf-8")) == MapBody(entries)


@given(st.lists(java_values(xml_safe=False), max_size=10))
def test_typed_stream_round_trip(items):
    assert stream_from_typed_json(stream_to_typed_json(items)) == StreamBody(tuple(items))


def test_typed_json_reads_numbers_into_the_declared_type():
    body = stream_from_typed_json('[{"type":"double","value":1},{"type":"float","value":0.1},'
                                  '{"type":"byte","value":-1}]')
    assert body.items == (jdouble(1.0), jfloat(0.1), JavaValue(JavaType.BYTE, -1))


@pytest.mark.parametrize(
    ("doc", "reason", "field"),
    [
        ('{"k":1}', "expected an object", "k"),
        ('{"k":{"type":"int"}}', "exactly", "k"),
        ('{"k":{"type":"int","value":1,"x":2}}', "exactly", "k"),
        ('{"k":{"type":"int","value":1,"type":"long"}}', "exactly", "k"),
        ('{"k":{"type":"integer","value":1}}', "unknown Java type", "k"),
        ('{"k":{"type":5,"value":1}}', "unknown Java type", "k"),
        ('{"k":{"type":"int","value":null}}', "cannot be null", "k"),
        ('{"k":{"type":"int","value":true}}', "must be an integer", "k"),
        ('{"k":{"type":"int","value":1.5}}', "must be an integer", "k"),
        ('{"k":{"type":"byte","value":128}}', "outside", "k"),
        ('{"k":{"type":"boolean","value":1}}', "true or false", "k"),
        ('{"k":{"type":"float","value":1e39}}', "too large", "k"),
        ('{"k":{"type":"double","value":1e400}}', "too large", "k"),
        ('{"k":{"type":"double","value":"inf"}}', "must be a number", "k"),
        ('{"k":{"type":"char","value":"ab"}}', "one UTF-16", "k"),
        ('{"k":{"type":"String","value":5}}', "string or null", "k"),
        ('{"k":{"type":"byte[]","value":"not base64!"}}', "base64", "k"),
        ('{"k":{"type":"byte[]","value":"é"}}', "base64", "k"),
        ('{"k":{"type":"byte[]","value":[1]}}', "base64 string", "k"),
        ('{"k":{"type":"int","value":1},"k":{"type":"int","value":2}}', "duplicate", "k"),
        ('{"":{"type":"int","value":1}}', "empty map name", "''"),
        ("[]", "expected a JSON object", None),
        ('{"k":', "malformed JSON at line 1", None),
        ('{"k":NaN}', "malformed JSON", None),
        (b"\xff", "UTF-8", None),
        ("[" * 100000 + "]" * 100000, "malformed JSON", None),
    ],
)
def test_typed_map_errors(doc, reason, field):
    with pytest.raises(MappingError, match=reason) as info:
        map_from_typed_json(doc)
    assert info.value.field == field


def test_typed_stream_errors():
    with pytest.raises(MappingError, match="expected a JSON array"):
        stream_from_typed_json("{}")
    with pytest.raises(MappingError) as info:
        stream_from_typed_json('[{"type":"int","value":1},{"type":"long","value":"1"}]')
    assert info.value.field == "[1]"


@given(st.text(max_size=80))
def test_typed_readers_raise_only_mapping_error(text):
    for reader in (map_from_typed_json, stream_from_typed_json):
        try:
            reader(text)
        except MappingError:
            pass


def test_boolean_values_are_not_confused_with_integers():
    assert map_from_typed_json('{"a":{"type":"boolean","value":true}}').entries["a"] == jboolean(True)
