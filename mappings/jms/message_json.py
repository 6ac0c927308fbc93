"""A whole JMS message as JSON (or the same data parsed from YAML): the form tools and the CLI read/write.

Layout and rules: docs/json-forms.md, "JMS message JSON" (``headers``, ``properties`` in the typed form,
``body`` by Message_MetaData payload type). Reading is lenient only where it is unambiguous (omitted
members take the JMS defaults; bare JSON strings, booleans and integers as property values); every error
names the member path (``properties.n``, ``body.map.k``). Writing uses the full typed form, so
write-then-read gives the same message.
"""
from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from typing import Any

from mappings.errors import MappingError
from mappings.jms.json_forms import JsonObject, load_json, value_from_typed, value_to_typed
from mappings.jms.model import (
    INTEGER_RANGES,
    Body,
    BytesBody,
    DeliveryMode,
    Destination,
    DestinationKind,
    JavaType,
    JavaValue,
    JmsHeaders,
    JmsMessage,
    MapBody,
    NoBody,
    ObjectBody,
    StreamBody,
    TextBody,
    TypedMap,
)

STRUCTURE = "JMS message JSON"
_SURROGATE = re.compile("[\ud800-\udfff]")
_HEADER_FIELDS = {
    "JMSDestination": "destination", "JMSDeliveryMode": "delivery_mode", "JMSExpiration": "expiration",
    "JMSPriority": "priority", "JMSTimestamp": "timestamp", "JMSMessageID": "message_id",
    "JMSCorrelationID": "correlation_id", "JMSReplyTo": "reply_to", "JMSType": "type",
    "JMSRedelivered": "redelivered",
}


def _fail(reason: str, path: str) -> MappingError:
    return MappingError(reason, structure=STRUCTURE, field=path)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# ------------------------------------------------------------------------------------- writing


def message_to_dict(message: JmsMessage) -> dict[str, Any]:
    """The message as plain JSON-ready data (full typed form)."""
    h = message.headers
    headers: dict[str, Any] = {}
    if h.destination is not None:
        headers["JMSDestination"] = h.destination.uri
    headers["JMSDeliveryMode"] = int(h.delivery_mode)
    headers["JMSExpiration"] = h.expiration
    headers["JMSPriority"] = h.priority
    headers["JMSTimestamp"] = h.timestamp
    if h.message_id is not None:
        headers["JMSMessageID"] = h.message_id
    if isinstance(h.correlation_id, bytes):
        headers["JMSCorrelationID"] = {"base64": _b64(h.correlation_id)}
    elif h.correlation_id is not None:
        headers["JMSCorrelationID"] = h.correlation_id
    if h.reply_to is not None:
        headers["JMSReplyTo"] = h.reply_to.uri
    if h.type is not None:
        headers["JMSType"] = h.type
    headers["JMSRedelivered"] = h.redelivered
    body = message.body
    out_body: dict[str, Any] = {"type": body.body_type.payload_value}
    if isinstance(body, TextBody):
        out_body["text"] = body.text
    elif isinstance(body, BytesBody):
        out_body["base64"] = _b64(body.data)
    elif isinstance(body, MapBody):
        out_body["map"] = {k: value_to_typed(v) for k, v in body.entries.pairs}
    elif isinstance(body, StreamBody):
        out_body["stream"] = [value_to_typed(v) for v in body.items]
    elif isinstance(body, ObjectBody):
        out_body["base64"] = None if body.data is None else _b64(body.data)
        if body.class_name is not None:
            out_body["class"] = body.class_name
    return {
        "headers": headers,
        "properties": {k: value_to_typed(v) for k, v in message.properties.pairs},
        "body": out_body,
    }


def message_to_json(message: JmsMessage, *, indent: int | None = None) -> str:
    """JSON text of ``message_to_dict``; valid UTF-8 even for a lone surrogate (then \\u-escaped)."""
    data = message_to_dict(message)
    text = json.dumps(data, indent=indent, ensure_ascii=False, allow_nan=False)
    if _SURROGATE.search(text):
        text = json.dumps(data, indent=indent, ensure_ascii=True, allow_nan=False)
    return text


# ------------------------------------------------------------------------------------- reading


def _members(node: object, path: str) -> list[tuple[str, object]]:
    """An object's members in order, from json (pair lists) or YAML (dicts); duplicates refused."""
    if isinstance(node, dict):
        return list(node.items())
    if isinstance(node, JsonObject):
        seen: set[str] = set()
        for key, _ in node:
            if key in seen:
                raise _fail(f"duplicate member {key!r}", f"{path}.{key}" if path else key)
            seen.add(key)
        return list(node)
    raise _fail("expected an object", path or "(document)")


def _string(node: object, path: str, *, nullable: bool = False) -> str | None:
    if node is None and nullable:
        return None
    if not isinstance(node, str):
        raise _fail("expected a string" + (" or null" if nullable else ""), path)
    return node


def _integer(node: object, path: str) -> int:
    if isinstance(node, bool) or not isinstance(node, int):
        raise _fail("expected an integer", path)
    return node


def _bytes(node: object, path: str) -> bytes:
    text = _string(node, path)
    assert text is not None
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise _fail("not valid base64", path) from None


#: a JMS temporary destination is marked with this URI option (``queue:///ID:...?temporary=true``)
TEMPORARY = ("temporary", "true")
_ACTIVEMQ_TEMPORARY = {"temp-queue": DestinationKind.QUEUE, "temp-topic": DestinationKind.TOPIC}


def destination_from_text(text: str) -> Destination:
    """A destination as the JSON forms write it (``queue:///Q``, ``queue://QM/Q``, ``topic://T``), or as
    ActiveMQ's ``Destination.toString()`` does, which a responder may copy from a Java requester:
    ``queue://Q`` (no queue manager), ``temp-queue://ID:...``, ``temp-topic://ID:...``."""
    scheme, sep, rest = text.partition("://")
    kind = _ACTIVEMQ_TEMPORARY.get(scheme.lower()) if sep else None
    if kind is not None:
        base = Destination.parse(f"{kind.value}://{'/' if kind is DestinationKind.QUEUE else ''}{rest}")
        return Destination(kind, base.name, "", (*base.options, TEMPORARY))
    if sep and scheme.lower() == "queue" and rest and "/" not in rest.partition("?")[0]:
        return Destination.parse(f"queue:///{rest}")
    return Destination.parse(text)


def _destination(node: object, path: str) -> Destination:
    text = _string(node, path)
    assert text is not None
    try:
        return destination_from_text(text)
    except MappingError as exc:
        raise _fail(exc.reason, path) from None


def _headers(node: object, defaults: Mapping[str, object]) -> JmsHeaders:
    values: dict[str, object] = dict(defaults)
    for key, raw in _members(node, "headers"):
        path = f"headers.{key}"
        if key not in _HEADER_FIELDS:
            raise _fail(f"unknown header (expected one of {', '.join(_HEADER_FIELDS)})", path)
        if key in ("JMSDestination", "JMSReplyTo"):
            values[_HEADER_FIELDS[key]] = None if raw is None else _destination(raw, path)
        elif key == "JMSDeliveryMode":
            if isinstance(raw, str) and raw.upper() in DeliveryMode.__members__:
                values["delivery_mode"] = DeliveryMode[raw.upper()]
            elif _integer(raw, path) in (1, 2):
                values["delivery_mode"] = DeliveryMode(raw)
            else:
                raise _fail("expected 1, 2, NON_PERSISTENT or PERSISTENT", path)
        elif key in ("JMSExpiration", "JMSPriority", "JMSTimestamp"):
            values[_HEADER_FIELDS[key]] = _integer(raw, path)
        elif key in ("JMSMessageID", "JMSType"):
            values[_HEADER_FIELDS[key]] = _string(raw, path, nullable=True)
        elif key == "JMSCorrelationID":
            if isinstance(raw, dict | JsonObject):
                members = _members(raw, path)
                if [k for k, _ in members] != ["base64"]:
                    raise _fail('expected a string or {"base64": ...}', path)
                values["correlation_id"] = _bytes(members[0][1], f"{path}.base64")
            else:
                values["correlation_id"] = _string(raw, path, nullable=True)
        else:
            if not isinstance(raw, bool):
                raise _fail("expected true or false", path)
            values["redelivered"] = raw
    try:
        return JmsHeaders(**values)  # type: ignore[arg-type]
    except MappingError as exc:
        raise _fail(exc.reason, f"headers.{exc.field}") from None


def _property(raw: object, path: str) -> JavaValue:
    if isinstance(raw, str):
        return JavaValue(JavaType.STRING, raw)
    if isinstance(raw, bool):
        return JavaValue(JavaType.BOOLEAN, raw)
    if isinstance(raw, int):
        for jtype in (JavaType.INT, JavaType.LONG):
            low, high = INTEGER_RANGES[jtype]
            if low <= raw <= high:
                return JavaValue(jtype, raw)
        raise _fail(f"{raw} does not fit a Java long", path)
    return value_from_typed(raw, name=path, structure=STRUCTURE)


def _body(node: object) -> Body:
    members = dict(_members(node, "body"))
    kind = members.pop("type", None)
    allowed = {
        "jms_none": set(), "jms_text": {"text"}, "jms_bytes": {"base64"}, "jms_map": {"map"},
        "jms_stream": {"stream"}, "jms_object": {"base64", "class"},
    }
    if kind not in allowed:
        raise _fail(f"expected one of {', '.join(allowed)}", "body.type")
    extra = set(members) - allowed[kind]  # type: ignore[index]
    if extra:
        raise _fail(f"not a member of a {kind} body", f"body.{sorted(extra)[0]}")
    if kind == "jms_none":
        return NoBody()
    if kind == "jms_text":
        return TextBody(_string(members.get("text"), "body.text", nullable=True))
    if kind == "jms_bytes":
        return BytesBody(_bytes(members.get("base64", ""), "body.base64"))
    if kind == "jms_object":
        raw = members.get("base64")
        data = None if raw is None else _bytes(raw, "body.base64")
        return ObjectBody(data, _string(members.get("class"), "body.class", nullable=True) or None)
    if kind == "jms_map":
        pairs = []
        for key, raw in _members(members.get("map", {}), "body.map"):
            if key == "":
                raise _fail("empty map name", "body.map.''")
            pairs.append((key, value_from_typed(raw, name=f"body.map.{key}", structure=STRUCTURE)))
        return MapBody(TypedMap(pairs))
    items = members.get("stream", [])
    if not isinstance(items, list) or isinstance(items, JsonObject):
        raise _fail("expected an array", "body.stream")
    return StreamBody(tuple(
        value_from_typed(raw, name=f"body.stream[{i}]", structure=STRUCTURE) for i, raw in enumerate(items)
    ))


def message_from_dict(data: object, *, header_defaults: Mapping[str, object] | None = None) -> JmsMessage:
    """Read the message form from parsed JSON/YAML data. ``header_defaults`` (JmsHeaders field names,
    e.g. ``{"timestamp": now}``) replace the JMS defaults of the headers the document leaves out."""
    members = dict(_members(data, ""))
    unknown = set(members) - {"headers", "properties", "body"}
    if unknown:
        raise _fail("unknown member (expected headers, properties, body)", sorted(unknown)[0])
    defaults = header_defaults or {}
    headers = _headers(members["headers"], defaults) if "headers" in members else JmsHeaders(**defaults)  # type: ignore[arg-type]
    pairs = [(name, _property(raw, f"properties.{name}"))
             for name, raw in _members(members.get("properties", {}), "properties")]
    body = _body(members["body"]) if "body" in members else NoBody()
    try:
        return JmsMessage(headers, TypedMap(pairs, what="property"), body)
    except MappingError as exc:
        raise _fail(exc.reason, f"properties.{exc.field}") from None


def message_from_json(document: str | bytes) -> JmsMessage:
    """Read the message form from JSON text (strict JSON: no NaN tokens, no duplicate members)."""
    return message_from_dict(load_json(document, STRUCTURE))
