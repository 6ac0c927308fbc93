"""MapMessage and StreamMessage XML bodies: decode both published forms, encode the MQ JMS wire form.

The two forms: the broker's element-per-key form (WebSphere Message Broker docs "JMS Message payload",
its MapMessage and StreamMessage payload examples) and the IBM MQ classes for JMS wire form (IBM MQ docs
"The JMS message body"). Typed values follow mappings.jms.typed_xml; a null String or byte[] is
``xsi:nil="true"``.
"""
from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from lxml import etree

from mappings.errors import MappingError
from mappings.jms.model import JavaValue, MapBody, StreamBody, TypedMap
from mappings.jms.typed_xml import (
    decode_value,
    element_name,
    escape_attr,
    is_nil,
    only_text,
    parse_xml,
    typed_element,
    xml_char_problem,
)

MAP_STRUCTURE = "map body"
STREAM_STRUCTURE = "stream body"


def _root(document: str | bytes, expected: str, structure: str) -> list:
    root = parse_xml(document, structure=structure)
    if element_name(root) != expected:
        raise MappingError(f"root element is <{element_name(root)}>, expected <{expected}>",
                           structure=structure, offset=root.sourceline)
    text = (root.text or "").strip(" \t\r\n")
    children = [child for child in root if isinstance(child.tag, str)]
    if text or any((child.tail or "").strip(" \t\r\n") for child in children):
        raise MappingError("text between elements", structure=structure, offset=root.sourceline)
    return children


def decode_map(document: str | bytes) -> MapBody:
    """Decode a ``<map>`` body in either form, keeping document order.

    - the element-per-key form: ``<map><Item_1_of_10_String>..</Item_1_of_10_String>
      <Item_5_of_10_Double dt='r8'>..</..></map>``, where the element name is the map key;
    - the wire form: ``<map><elt name="k" dt="i4">1</elt></map>``, with single or double quotes (IBM's
      documentation writes double quotes, the Eclipse Amlen MQ bridge reads IBM's output with single).

    An ``elt`` element with a ``name`` attribute is a wire-form entry; any other element is an
    element-per-key entry keyed by its tag (so a key may even be ``elt``).
    """
    pairs: list[tuple[str, JavaValue]] = []
    seen: set[str] = set()
    for child in _root(document, "map", MAP_STRUCTURE):
        tag = element_name(child)
        key = child.get("name") if tag == "elt" and child.get("name") is not None else tag
        assert key is not None
        if key == "":
            raise MappingError("empty map name", structure=MAP_STRUCTURE, field="''", offset=child.sourceline)
        if key in seen:
            raise MappingError("duplicate map name", structure=MAP_STRUCTURE, field=key,
                               offset=child.sourceline)
        seen.add(key)
        text = only_text(child, structure=MAP_STRUCTURE, name=key)
        value = decode_value(child.get("dt"), text, name=key, nil=is_nil(child), structure="map entry")
        pairs.append((key, value))
    return MapBody(TypedMap(pairs))


def decode_stream(document: str | bytes) -> StreamBody:
    """Decode a ``<stream>`` body: a sequence of ``<elt>`` typed values."""
    items: list[JavaValue] = []
    for index, child in enumerate(_root(document, "stream", STREAM_STRUCTURE)):
        where = f"[{index}]"
        if element_name(child) != "elt":
            raise MappingError(f"<{element_name(child)}> in a stream; expected <elt>",
                               structure=STREAM_STRUCTURE, field=where, offset=child.sourceline)
        text = only_text(child, structure=STREAM_STRUCTURE, name=where)
        items.append(decode_value(child.get("dt"), text, name=where, nil=is_nil(child),
                                  structure="stream item"))
    return StreamBody(tuple(items))


def encode_map(body: MapBody | TypedMap) -> str:
    """The MQ JMS wire form ``<map><elt name="k" dt="i4">1</elt>...</map>`` (document order kept).

    Keys are carried in an attribute, so keys that are not XML names (spaces, leading digits,
    punctuation) round-trip.
    """
    entries = body.entries if isinstance(body, MapBody) else body
    parts = ["<map>"]
    for key, value in entries.pairs:
        problem = xml_char_problem(key)
        if problem:
            raise MappingError(problem, structure=MAP_STRUCTURE, field=repr(key))
        parts.append(typed_element("elt", value, name=key, structure="map entry",
                                   extra_attrs=f' name="{escape_attr(key)}"'))
    parts.append("</map>")
    return "".join(parts)


@lru_cache(maxsize=4096)
def is_xml_name(name: str) -> bool:
    """True when ``name`` can be an element name without a namespace (an XML NCName)."""
    try:
        etree.Element(name)
    except ValueError:
        return False
    return True


def entry_element(key: str, value: JavaValue, *, structure: str) -> str:
    """One element-per-key entry: ``<key dt="..">v</key>``, or ``<elt name="key">`` when it must be."""
    problem = xml_char_problem(key)
    if problem:
        raise MappingError(problem, structure=structure, field=repr(key))
    if is_xml_name(key):
        return typed_element(key, value, name=key, structure=structure)
    return typed_element("elt", value, name=key, structure=structure,
                         extra_attrs=f' name="{escape_attr(key)}"')


def encode_map_elements(body: MapBody | TypedMap) -> str:
    """The element-per-key form ``<map><Key dt="i4">1</Key></map>`` (used for the JMSTransport tree's Body).

    A key that is not an XML name falls back to ``<elt name="..">``; both decode back to the same map.
    """
    entries = body.entries if isinstance(body, MapBody) else body
    return "<map>" + "".join(entry_element(k, v, structure="map entry") for k, v in entries.pairs) + "</map>"


def encode_stream(body: StreamBody | Iterable[JavaValue]) -> str:
    """The MQ JMS wire form ``<stream><elt dt="i4">1</elt><elt>text</elt>...</stream>``."""
    items = body.items if isinstance(body, StreamBody) else tuple(body)
    parts = ["<stream>"]
    for index, value in enumerate(items):
        parts.append(typed_element("elt", value, name=f"[{index}]", structure="stream item"))
    parts.append("</stream>")
    return "".join(parts)
