"""Map/Stream bodies as JSON: the plain form MQTT receives and a typed form that round-trips Java types.

Eclipse Amlen docs "Conversion between MQTT and JMS", Amlen Table 1, says only that a MapMessage or
StreamMessage "is converted to JSON in a UTF-8 encoding"; docs/json-forms.md defines both forms (plain:
lossy RFC 8259 JSON, NaN/Infinity as strings, byte[] as base64; typed: ``{"type": T, "value": V}``).
Both are returned as ``str`` that always encodes to UTF-8 (a lone surrogate is a ``\\uXXXX`` escape).
"""
from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Callable, Iterable
from typing import Any

from mappings.errors import MappingError
from mappings.jms.model import (
    INTEGER_RANGES,
    JavaType,
    JavaValue,
    MapBody,
    StreamBody,
    TypedMap,
    to_float32,
)
from mappings.jms.typed_xml import format_float

_SURROGATE = re.compile("[\ud800-\udfff]")
_encode_str = json.encoder.encode_basestring  # the C implementation when available
_encode_ascii = json.encoder.encode_basestring_ascii

FLOAT_SPECIALS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _utf8_safe(document: str, rebuild: Callable[[], str]) -> str:
    """A lone surrogate (a legal Java char) cannot be UTF-8 encoded: redo the document ASCII-escaped."""
    if _SURROGATE.search(document) is None:
        return document
    return rebuild()


def _float_text(value: float, jtype: JavaType, encode_str: Callable[[str], str]) -> str:
    if value != value or value in (math.inf, -math.inf):
        return encode_str(format_float(value, jtype))
    return format_float(value, jtype)


def _formatters(encode_str: Callable[[str], str]) -> dict[JavaType, Callable[[Any], str]]:
    def integer(v: int) -> str:
        return str(v)

    return {
        JavaType.STRING: encode_str,
        JavaType.CHAR: encode_str,
        JavaType.BOOLEAN: lambda v: "true" if v else "false",
        JavaType.BYTE: integer,
        JavaType.SHORT: integer,
        JavaType.INT: integer,
        JavaType.LONG: integer,
        JavaType.BYTES: lambda v: '"' + base64.b64encode(v).decode("ascii") + '"',
        JavaType.FLOAT: lambda v: _float_text(v, JavaType.FLOAT, encode_str),
        JavaType.DOUBLE: lambda v: _float_text(v, JavaType.DOUBLE, encode_str),
    }


_UTF8_FORMAT = _formatters(_encode_str)
_ASCII_FORMAT = _formatters(_encode_ascii)


def _scalar(value: JavaValue, fmt: dict[JavaType, Callable[[Any], str]] = _UTF8_FORMAT) -> str:
    """The plain-form JSON text of one value."""
    v = value.value
    return "null" if v is None else fmt[value.type](v)


def _map_entries(body: MapBody | TypedMap) -> TypedMap:
    return body.entries if isinstance(body, MapBody) else body


def _stream_items(body: StreamBody | Iterable[JavaValue]) -> tuple[JavaValue, ...]:
    return body.items if isinstance(body, StreamBody) else tuple(body)


# --------------------------------------------------------------------------------- plain form


def _map_json(entries: TypedMap, typed: bool, fmt: dict[JavaType, Callable[[Any], str]],
              encode_str: Callable[[str], str]) -> str:
    if typed:
        return "{" + ",".join(
            f'{encode_str(k)}:{{"type":"{v.type.value}","value":{_scalar(v, fmt)}}}' for k, v in entries.pairs
        ) + "}"
    return "{" + ",".join(f"{encode_str(k)}:{_scalar(v, fmt)}" for k, v in entries.pairs) + "}"


def _stream_json(items: tuple[JavaValue, ...], typed: bool, fmt: dict[JavaType, Callable[[Any], str]]) -> str:
    if typed:
        return "[" + ",".join(f'{{"type":"{v.type.value}","value":{_scalar(v, fmt)}}}' for v in items) + "]"
    return "[" + ",".join(_scalar(v, fmt) for v in items) + "]"


def map_to_json(body: MapBody | TypedMap) -> str:
    """Plain JSON object, keys in map order."""
    entries = _map_entries(body)
    return _utf8_safe(_map_json(entries, False, _UTF8_FORMAT, _encode_str),
                      lambda: _map_json(entries, False, _ASCII_FORMAT, _encode_ascii))


def stream_to_json(body: StreamBody | Iterable[JavaValue]) -> str:
    """Plain JSON array."""
    items = _stream_items(body)
    return _utf8_safe(_stream_json(items, False, _UTF8_FORMAT),
                      lambda: _stream_json(items, False, _ASCII_FORMAT))


# --------------------------------------------------------------------------------- typed form


def map_to_typed_json(body: MapBody | TypedMap) -> str:
    entries = _map_entries(body)
    return _utf8_safe(_map_json(entries, True, _UTF8_FORMAT, _encode_str),
                      lambda: _map_json(entries, True, _ASCII_FORMAT, _encode_ascii))


def stream_to_typed_json(body: StreamBody | Iterable[JavaValue]) -> str:
    items = _stream_items(body)
    return _utf8_safe(_stream_json(items, True, _UTF8_FORMAT),
                      lambda: _stream_json(items, True, _ASCII_FORMAT))


class JsonObject(list):
    """A parsed JSON object as its ordered (key, value) pairs, so duplicates and order are visible."""


def load_json(document: str | bytes, structure: str) -> object:
    """Parse JSON strictly: objects come back as JsonObject pair lists, NaN tokens are refused."""
    return _load(document, structure)


def _load(document: str | bytes, structure: str) -> object:
    def reject_constant(token: str) -> object:
        raise ValueError(f"{token} is not JSON")

    try:
        if isinstance(document, bytes):
            document = document.decode("utf-8")
        return json.loads(document, object_pairs_hook=JsonObject, parse_constant=reject_constant)
    except UnicodeDecodeError as exc:
        raise MappingError(f"not valid UTF-8 ({exc.reason})", structure=structure, offset=exc.start) from None
    except json.JSONDecodeError as exc:
        raise MappingError(f"malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
                           structure=structure, offset=exc.lineno) from None
    except (ValueError, RecursionError) as exc:
        raise MappingError(f"malformed JSON: {exc}", structure=structure) from None


_TYPES_BY_NAME = {t.value: t for t in JavaType}


def value_to_typed(value: JavaValue) -> dict[str, object]:
    """The typed form of one value as plain Python data (``json.dumps`` gives the typed JSON text)."""
    v = value.value
    jtype = value.type
    if v is None:
        data: object = None
    elif jtype is JavaType.BYTES:
        data = base64.b64encode(v).decode("ascii")  # type: ignore[arg-type]
    elif jtype in (JavaType.FLOAT, JavaType.DOUBLE):
        text = format_float(v, jtype)  # type: ignore[arg-type]
        data = text if text in FLOAT_SPECIALS else float(text)
    else:
        data = v
    return {"type": jtype.value, "value": data}


def value_from_typed(node: object, *, name: str, structure: str) -> JavaValue:
    """Read one typed-form value (a parsed JSON/YAML object); errors name ``structure`` and ``name``."""

    def fail(reason: str) -> MappingError:
        return MappingError(reason, structure=structure, field=name)

    if isinstance(node, JsonObject):
        fields = dict(node)
        duplicated = len(fields) != len(node)
    elif isinstance(node, dict):
        fields, duplicated = node, False
    else:
        raise fail('expected an object {"type": ..., "value": ...}')
    if duplicated or set(fields) != {"type", "value"}:
        raise fail('expected exactly the members "type" and "value"')
    jtype = _TYPES_BY_NAME.get(fields["type"]) if isinstance(fields["type"], str) else None
    if jtype is None:
        raise fail(f"unknown Java type {fields['type']!r}")
    raw = fields["value"]
    if raw is None:
        if jtype in (JavaType.STRING, JavaType.BYTES):
            return JavaValue(jtype, None)
        raise fail(f"{jtype.value} cannot be null")
    if jtype is JavaType.BOOLEAN:
        if not isinstance(raw, bool):
            raise fail("boolean value must be true or false")
        return JavaValue(jtype, raw)
    if jtype in INTEGER_RANGES:
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise fail(f"{jtype.value} value must be an integer")
        low, high = INTEGER_RANGES[jtype]
        if not low <= raw <= high:
            raise fail(f"{raw} is outside {low}..{high}")
        return JavaValue(jtype, raw)
    if jtype in (JavaType.FLOAT, JavaType.DOUBLE):
        if isinstance(raw, str) and raw in FLOAT_SPECIALS:
            number = FLOAT_SPECIALS[raw]
        elif isinstance(raw, int | float) and not isinstance(raw, bool):
            try:
                number = float(raw)
            except OverflowError:
                raise fail(f"{raw} is too large for {jtype.value}") from None
            if math.isinf(number):
                raise fail(f"{raw} is too large for {jtype.value}")
            if jtype is JavaType.FLOAT:
                number = to_float32(number)
                if math.isinf(number):
                    raise fail(f"{raw} is too large for float")
        else:
            raise fail(f'{jtype.value} value must be a number or "NaN", "Infinity", "-Infinity"')
        return JavaValue(jtype, number)
    if jtype is JavaType.CHAR:
        if not isinstance(raw, str) or len(raw) != 1 or ord(raw) > 0xFFFF:
            raise fail("char value must be a string of one UTF-16 code unit")
        return JavaValue(jtype, raw)
    if jtype is JavaType.STRING:
        if not isinstance(raw, str):
            raise fail("String value must be a string or null")
        return JavaValue(jtype, raw)
    if not isinstance(raw, str):
        raise fail("byte[] value must be a base64 string or null")
    try:
        return JavaValue(jtype, base64.b64decode(raw.encode("ascii"), validate=True))
    except (binascii.Error, UnicodeEncodeError):
        raise fail("byte[] value is not valid base64") from None


def map_from_typed_json(document: str | bytes) -> MapBody:
    """Read the typed form of a map back into the same Java types and order."""
    structure = "typed JSON map"
    tree = _load(document, structure)
    if not isinstance(tree, JsonObject):
        raise MappingError("expected a JSON object", structure=structure)
    pairs: list[tuple[str, JavaValue]] = []
    seen: set[str] = set()
    for key, node in tree:
        if key in seen:
            raise MappingError("duplicate map name", structure=structure, field=key)
        if key == "":
            raise MappingError("empty map name", structure=structure, field="''")
        seen.add(key)
        pairs.append((key, value_from_typed(node, name=key, structure=structure)))
    return MapBody(TypedMap(pairs))


def stream_from_typed_json(document: str | bytes) -> StreamBody:
    """Read the typed form of a stream back into the same Java types."""
    structure = "typed JSON stream"
    tree = _load(document, structure)
    if not isinstance(tree, list) or isinstance(tree, JsonObject):
        raise MappingError("expected a JSON array", structure=structure)
    return StreamBody(tuple(
        value_from_typed(node, name=f"[{i}]", structure=structure) for i, node in enumerate(tree)
    ))
