"""ActiveMQ's XStream XML forms of JMS Map and Object bodies (``transformation: jms-map-xml`` /
``jms-object-xml``), written and read here: the XML is regular and uses XML 1.1 character references
(``&#x1;``) that XML 1.0 parsers refuse. Rules cite the observed ActiveMQ 5.17 behaviour in
docs/stomp-facts.md (§ numbers)."""
from __future__ import annotations

import base64
import binascii
import json
import re

from mappings.errors import MappingError
from mappings.jms.json_forms import map_to_json
from mappings.jms.model import INTEGER_RANGES, JavaType, JavaValue, MapBody, ObjectBody, TypedMap, to_float32
from mappings.jms.typed_xml import format_float
from mappings.report import ConversionReport

_XML_UNSAFE = re.compile("[\x00-\x1f&<>\ud800-\udfff\ufffe\uffff]")
_XSTREAM_TAGS = {JavaType.STRING: "string", JavaType.BOOLEAN: "boolean", JavaType.BYTES: "byte-array"}


def _xml_escape(text: str) -> str:
    """Element text as XStream writes it: & < > escaped, control characters (and CR, which an XML
    parser would normalise) as character references, which XStream's reader accepts (XML 1.1 style)."""
    def one(m: re.Match[str]) -> str:
        c = m.group()
        return {"&": "&amp;", "<": "&lt;", ">": "&gt;"}.get(c) or f"&#x{ord(c):x};"

    return _XML_UNSAFE.sub(one, text)


def _xstream_xml_value(value: JavaValue) -> str:
    """One typed value as its XStream XML element (§4 XML sample: ``<short>3</short>``)."""
    v = value.value
    t = value.type
    tag = _XSTREAM_TAGS.get(t, t.value)
    if t is JavaType.BYTES:
        text = base64.b64encode(v).decode("ascii")  # type: ignore[arg-type]
    elif t in (JavaType.FLOAT, JavaType.DOUBLE):
        text = format_float(v, t)  # type: ignore[arg-type]
    elif t is JavaType.BOOLEAN:
        text = "true" if v else "false"
    elif t is JavaType.CHAR and v == "\x00":
        text = ""   # XStream's own form for char 0
    else:
        text = _xml_escape(str(v))
    return f"<{tag}>{text}</{tag}>"


NON_BMP = re.compile("[\U00010000-\U0010FFFF]")


def map_body_to_xstream_xml(body: MapBody, report: ConversionReport, *, byte_arrays: bool = False) -> str:
    """MapMessage -> XStream ``<map><entry><string>k</string><int>1</int></entry>...</map>`` for
    ``transformation: jms-map-xml`` (§1, §4). Not the JSON form: Jettison fails on some maps (a key
    ``null``) and ActiveMQ then silently makes a TextMessage of the JSON text (found by
    test_map_bodies_keep_every_java_type_through_the_broker). A null value is ``<null/>`` (§11). A byte[]
    is its base64 String unless ``byte_arrays``: ActiveMQ's XStream refuses ``<byte-array>`` unless
    SERIALIZABLE_PACKAGES allows it, and then makes a TextMessage with ``transformation-error`` (§11)."""
    parts = ["<map>"]
    for key, value in body.entries.pairs:
        if value.value is None:
            parts.append(f"<entry><string>{_xml_escape(key)}</string><null/></entry>")
            continue
        if value.type is JavaType.BYTES and not byte_arrays:
            report.coerced(f"map:{key}", "byte[] sent as its base64 String (connector option map_byte_arrays: "
                                         "native sends it as byte[] where the broker's XStream allows it)")
            value = JavaValue(JavaType.STRING, base64.b64encode(value.value).decode("ascii"))  # type: ignore[arg-type]
        if NON_BMP.search(key) or (value.type is JavaType.STRING and NON_BMP.search(value.value)):  # type: ignore[arg-type]
            report.coerced(f"map:{key}", "a character above U+FFFF becomes U+FFFD U+FFFD in ActiveMQ's "
                                         "map transformation (both directions)")
        parts.append(f"<entry><string>{_xml_escape(key)}</string>{_xstream_xml_value(value)}</entry>")
    parts.append("</map>")
    return "".join(parts)


# XStream XML (§4): <map><entry><string>k</string><int>1</int></entry>...</map>. The XML is regular
# and uses XML 1.1 character references (&#x1;) that XML 1.0 parsers refuse, so it is read here.
_ENTRY = re.compile(r"<entry>\s*(<([\w.-]+)\s*/>|<([\w.-]+)>(.*?)</\3>)\s*(<([\w.-]+)\s*/>|<([\w.-]+)>(.*?)</\7>)"
                    r"\s*</entry>", re.S)
_XSTREAM_TYPES = {
    "string": JavaType.STRING, "int": JavaType.INT, "long": JavaType.LONG, "short": JavaType.SHORT,
    "byte": JavaType.BYTE, "boolean": JavaType.BOOLEAN, "float": JavaType.FLOAT, "double": JavaType.DOUBLE,
    "char": JavaType.CHAR, "byte-array": JavaType.BYTES,
}
_XSTREAM_CLASSES = {"map": "java.util.HashMap", "string": "java.lang.String"}


_XML_ESCAPE = re.compile(r"&(#x[0-9A-Fa-f]+|#[0-9]+|lt|gt|amp|quot|apos);")
SURROGATES = re.compile("[\ud800-\udfff]")
_XML_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}


def _xml_text(text: str) -> str:
    """Element text, unescaped in one pass; XStream writes control characters as XML 1.1 character
    references (``&#x1;``), which XML 1.0 parsers refuse and html.unescape drops."""
    def one(m: re.Match[str]) -> str:
        ref = m.group(1)
        if ref[0] != "#":
            return _XML_NAMED[ref]
        code = int(ref[2:], 16) if ref[1] == "x" else int(ref[1:])
        return chr(code) if code <= 0x10FFFF else "\ufffd"

    out = _XML_ESCAPE.sub(one, text)
    if SURROGATES.search(out):   # XStream writes a non-BMP character as two UTF-16 references: pair them
        out = out.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return out


def _xstream_value(tag: str, text: str | None, where: str) -> JavaValue:
    """One XStream XML value element -> JavaValue; MappingError for what this reader does not know."""
    if tag == "null":
        return JavaValue(JavaType.STRING, None)   # MapMessage.getObject gives null: its type is not sent
    if text is None and tag not in ("string", "char"):
        raise MappingError("an empty element", structure="XStream map", field=where)
    jtype = _XSTREAM_TYPES.get(tag)
    if jtype is None:
        raise MappingError(f"element <{tag}> is not a JMS map value type", structure="XStream map", field=where)
    raw = _xml_text(text or "")
    try:
        if jtype is JavaType.STRING:
            return JavaValue(jtype, raw)
        if jtype is JavaType.CHAR:
            return JavaValue(jtype, raw if raw else "\x00")   # XStream writes char 0 as <char></char>
        if jtype is JavaType.BOOLEAN:
            return JavaValue(jtype, raw == "true")
        if jtype in INTEGER_RANGES:
            return JavaValue(jtype, int(raw))
        if jtype in (JavaType.FLOAT, JavaType.DOUBLE):
            number = float(raw)
            return JavaValue(jtype, to_float32(number) if jtype is JavaType.FLOAT else number)
        return JavaValue(jtype, base64.b64decode(raw.encode("ascii"), validate=True))
    except (ValueError, binascii.Error) as exc:
        raise MappingError(f"<{tag}>{raw!r}: {exc}", structure="XStream map", field=where) from None


def xstream_map_entries(xml: str, report: ConversionReport, what: str = "map") -> TypedMap:
    """The entries of an XStream ``<map>`` (a MapMessage body or a HashMap object), typed."""
    pairs: list[tuple[str, JavaValue]] = []
    seen: set[str] = set()
    for m in _ENTRY.finditer(xml):
        key_tag, key_text = (m.group(2), None) if m.group(2) else (m.group(3), m.group(4))
        value_tag, value_text = (m.group(6), None) if m.group(6) else (m.group(7), m.group(8))
        key = _xml_text(key_text or "")
        if key_tag != "string":
            report.coerced(f"{what}:{key}", f"<{key_tag}> key read as a String")
        if not key or key in seen:
            report.dropped(f"{what}:{key}", "empty or duplicate key")
            continue
        try:
            value = _xstream_value(value_tag, value_text, key)
        except MappingError as exc:
            report.dropped(f"{what}:{key}", exc.reason)
            continue
        seen.add(key)
        pairs.append((key, value))
    return TypedMap(pairs)


def object_body(xml: str, report: ConversionReport) -> ObjectBody:
    """A ``jms-object-xml`` body: HashMap -> JSON object, String -> JSON string, else the XML as is."""
    root = re.match(r"\s*<([\w.$-]+)", xml)
    tag = root.group(1) if root else ""
    class_name = _XSTREAM_CLASSES.get(tag, tag or None)
    if tag == "map":
        data = map_to_json(xstream_map_entries(xml, report, "object")).encode("utf-8")
        how = "the HashMap as a JSON object"
    elif tag == "string":
        inner = re.fullmatch(r"\s*<string>(.*)</string>\s*", xml, re.S)
        data = json.dumps(_xml_text(inner.group(1)) if inner else "", ensure_ascii=False).encode("utf-8")
        how = "the String as a JSON string"
    else:
        data = xml.encode("utf-8")
        how = "the broker's XStream XML"
    report.coerced("body", f"ObjectMessage ({class_name}) arrives over STOMP without Java serialization: "
                           f"body is {how}")
    return ObjectBody(data, class_name)


