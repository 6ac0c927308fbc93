"""`dt=` typed XML values and the tolerant XML reading/escaping they need.

Implements the Datatype table of WebSphere Message Broker docs "Preservation of Java type" (with IBM MQ
docs "Mapping property data types to MQRFH2 data types", and ``char`` from IBM MQ docs "The JMS message
body"); the table, with its ranges and our deviations, is written out above ``DT_TO_TYPE``.
"""
from __future__ import annotations

import math
import re
import sys

from lxml import etree

from mappings.errors import MappingError
from mappings.jms.model import INTEGER_RANGES, JavaType, JavaValue, to_float32, trusted_value

XSI_NS = "http://www.w3.org/2001/XMLSchema-instance"
XSI_NIL = f"{{{XSI_NS}}}nil"

# The Datatype table ("Preservation of Java type"), as this module reads and writes it:
#
# =========  ===========  ==========================================================================
# dt         Java type    text form
# =========  ===========  ==========================================================================
# (none),    String       any characters (escaped); an empty element is the empty string;
# string                  ``xsi:nil='true'`` is a null String
# boolean    boolean      ``0`` or ``1`` (1 is true) — nothing else
# bin.hex    byte[]       pairs of hex digits; written upper case, read in either case; nil -> null
# i1         byte         ``[+-]?[0-9]+`` in -128..127
# i2         short        ``[+-]?[0-9]+`` in -32768..32767
# i4         int          ``[+-]?[0-9]+`` in -2147483648..2147483647
# i8, int    long         ``[+-]?[0-9]+`` in -9223372036854775808..9223372036854775807 (the document's
#                         I8 upper bound "92233720368547750807" is a typo); ``int`` reads as long
# r4         float        decimal, optional sign/fraction/exponent; finite magnitude 0 or in
#                         [1.175E-37, 3.40282347E+38] (as printed), compared after rounding to float
# r8         double       as r4; finite magnitude 0 or in [2.225E-307, Double.MAX_VALUE]. The document
#                         prints the upper bound as 1.7976931348623E+308, i.e. Double.MAX_VALUE cut to
#                         14 digits; taking that literally would reject Java's own MAX_VALUE, so the
#                         bound is MAX_VALUE itself (documented deviation). The lower bounds are as
#                         printed.
# char       char         exactly one UTF-16 code unit (Map/Stream bodies only)
# =========  ===========  ==========================================================================
#
# dt names are read case-insensitively (the table writes ``I4``/``R8``, its examples ``i4``/``r8``)
# and written in lower case. Surrounding XML whitespace is ignored for every type except String and char.

#: dt attribute value (lower case) -> Java type: the Datatype table plus ``char``.
DT_TO_TYPE: dict[str, JavaType] = {
    "string": JavaType.STRING,
    "boolean": JavaType.BOOLEAN,
    "bin.hex": JavaType.BYTES,
    "i1": JavaType.BYTE,
    "i2": JavaType.SHORT,
    "i4": JavaType.INT,
    "i8": JavaType.LONG,
    "int": JavaType.LONG,
    "r4": JavaType.FLOAT,
    "r8": JavaType.DOUBLE,
    "char": JavaType.CHAR,
}

#: Java type -> dt written on output; None means "no dt attribute" (String is the default).
TYPE_TO_DT: dict[JavaType, str | None] = {
    JavaType.STRING: None,
    JavaType.BOOLEAN: "boolean",
    JavaType.BYTES: "bin.hex",
    JavaType.BYTE: "i1",
    JavaType.SHORT: "i2",
    JavaType.INT: "i4",
    JavaType.LONG: "i8",
    JavaType.FLOAT: "r4",
    JavaType.DOUBLE: "r8",
    JavaType.CHAR: "char",
}

# The Datatype table's R4 and R8 rows (see the table above for the r8 upper bound).
R4_MAX = to_float32(3.40282347e38)
R4_MIN = to_float32(1.175e-37)
R8_MAX = sys.float_info.max
R8_MIN = 2.225e-307

_INT_RE = re.compile(r"[+-]?[0-9]+", re.ASCII)
_FLOAT_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
_HEX_RE = re.compile(r"(?:[0-9A-Fa-f]{2})*", re.ASCII)
_SPECIALS = {
    "nan": math.nan, "+nan": math.nan, "-nan": math.nan,
    "inf": math.inf, "+inf": math.inf, "-inf": -math.inf,
    "infinity": math.inf, "+infinity": math.inf, "-infinity": -math.inf,
}
_XML_WS = " \t\r\n"


def _fail(reason: str, name: str, dt: str | None, structure: str) -> MappingError:
    return MappingError(reason, structure=f"dt={dt or 'string'} {structure}", field=name)


# ----------------------------------------------------------------------------------------- floats


def format_float(value: float, jtype: JavaType) -> str:
    """Shortest round-trippable text for a Java float/double; NaN/Infinity/-Infinity for the rest.

    Float formatting (r4/r8): the shortest decimal that reads back to the same float/double (Python ``repr``
    digits, e.g. ``2.24``, ``999999.0``, ``1e-05``), which Java's ``Float.parseFloat``/``Double.parseDouble``
    also read. The non-finite values are written the Java way, ``NaN``, ``Infinity``, ``-Infinity``; on input
    ``INF``, ``+INF``, ``-INF``, ``+Infinity`` and any letter case are accepted too. The magnitude bounds
    apply to finite values only.
    """
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if jtype is JavaType.FLOAT:
        for digits in range(1, 10):
            text = f"{value:.{digits}g}"
            if to_float32(float(text)) == value:
                # repr() of the short decimal gives the same digits in Python's canonical layout.
                return repr(float(text))
    return repr(value)


def float_range_problem(value: float, jtype: JavaType) -> str | None:
    """Why a finite float/double is outside the Datatype table's dt=r4/r8 magnitude range, or None."""
    if math.isnan(value) or math.isinf(value) or value == 0.0:
        return None
    low, high = (R4_MIN, R4_MAX) if jtype is JavaType.FLOAT else (R8_MIN, R8_MAX)
    magnitude = abs(value)
    if magnitude > high:
        return f"magnitude {format_float(value, jtype)} is above {format_float(high, jtype)}"
    if magnitude < low:
        return f"magnitude {format_float(value, jtype)} is below {format_float(low, jtype)}"
    return None


def parse_float(text: str, jtype: JavaType) -> float:
    """Parse r4/r8 text into the Java type's value; raises ValueError with the reason."""
    special = _SPECIALS.get(text.lower())
    if special is not None:
        return special
    if not _FLOAT_RE.fullmatch(text):
        raise ValueError(f"{text!r} is not a decimal number")
    wide = float(text)
    value = to_float32(wide) if jtype is JavaType.FLOAT else wide
    if math.isinf(value):
        raise ValueError(f"{text} is too large for {'r4' if jtype is JavaType.FLOAT else 'r8'}")
    if wide != 0.0 and value == 0.0:
        raise ValueError(f"{text} is too small for {'r4' if jtype is JavaType.FLOAT else 'r8'}")
    problem = float_range_problem(value, jtype)
    if problem:
        raise ValueError(problem)
    return value


# ------------------------------------------------------------------------------------ decode/encode


def decode_value(
    dt: str | None,
    text: str | None,
    *,
    name: str,
    nil: bool = False,
    structure: str = "property",
) -> JavaValue:
    """Turn an element's dt attribute and text into a JavaValue.

    ``name`` is the property / map key / stream index used in errors; ``nil`` is ``xsi:nil='true'``.
    """
    key = "string" if dt is None else dt.strip().lower()
    jtype = DT_TO_TYPE.get(key)
    if jtype is None:
        raise _fail(f"unknown data type dt={dt!r}", name, dt, structure)
    if nil:
        if jtype is JavaType.BYTES:
            return trusted_value(JavaType.BYTES, None)
        if jtype is JavaType.STRING:
            return trusted_value(JavaType.STRING, None)
        raise _fail("xsi:nil is only allowed for String and bin.hex values", name, dt, structure)
    raw = text or ""
    if jtype is JavaType.STRING:
        return trusted_value(JavaType.STRING, raw)
    if jtype is JavaType.CHAR:
        if len(raw) != 1 or ord(raw) > 0xFFFF:
            raise _fail(f"{raw!r} is not exactly one UTF-16 character", name, dt, structure)
        return trusted_value(JavaType.CHAR, raw)
    value = raw.strip(_XML_WS)
    if jtype is JavaType.BOOLEAN:
        if value not in ("0", "1"):
            raise _fail(f"{value!r} is not 0 or 1", name, dt, structure)
        return trusted_value(JavaType.BOOLEAN, value == "1")
    if jtype is JavaType.BYTES:
        if not _HEX_RE.fullmatch(value):
            raise _fail(f"{_clip(value)!r} is not pairs of hex digits", name, dt, structure)
        return trusted_value(JavaType.BYTES, bytes.fromhex(value))
    if jtype in INTEGER_RANGES:
        if not _INT_RE.fullmatch(value):
            raise _fail(f"{_clip(value)!r} is not an integer (digits with optional sign)", name, dt,
                        structure)
        number = int(value)
        low, high = INTEGER_RANGES[jtype]
        if not low <= number <= high:
            raise _fail(f"{number} is outside {low}..{high}", name, dt, structure)
        return trusted_value(jtype, number)
    try:
        return trusted_value(jtype, parse_float(value, jtype))
    except ValueError as exc:
        raise _fail(str(exc), name, dt, structure) from None


def encode_value(
    value: JavaValue, *, name: str, structure: str = "property"
) -> tuple[str | None, str | None]:
    """(dt attribute or None, text or None for ``xsi:nil``) for a JavaValue. Text is NOT yet escaped."""
    jtype = value.type
    dt = TYPE_TO_DT[jtype]
    v = value.value
    if v is None:
        return dt, None
    if jtype is JavaType.STRING or jtype is JavaType.CHAR:
        assert isinstance(v, str)
        problem = xml_char_problem(v)
        if problem:
            raise _fail(problem, name, dt, structure)
        return dt, v
    if jtype is JavaType.BOOLEAN:
        return dt, "1" if v else "0"
    if jtype is JavaType.BYTES:
        assert isinstance(v, bytes)
        return dt, v.hex().upper()
    if jtype in INTEGER_RANGES:
        return dt, str(v)
    assert isinstance(v, float)
    problem = float_range_problem(v, jtype)
    if problem:
        raise _fail(f"cannot be written: {problem}", name, dt, structure)
    return dt, format_float(v, jtype)


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


# ------------------------------------------------------------------------------------- XML helpers

# XML 1.0 Char production: #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]
_NOT_XML_CHAR = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_char_problem(text: str) -> str | None:
    match = _NOT_XML_CHAR.search(text)
    if match is None:
        return None
    return f"character U+{ord(match.group()):04X} at index {match.start()} cannot be written in XML"


_TEXT_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;"})
_ATTR_ESCAPES = str.maketrans(
    {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\r": "&#13;", "\n": "&#10;", "\t": "&#9;"}
)


def escape_text(text: str) -> str:
    """Escape element content so that a parser reads back exactly ``text`` (CR kept as &#13;)."""
    return text.translate(_TEXT_ESCAPES)


def escape_attr(text: str) -> str:
    """Escape a double-quoted attribute value so that attribute normalisation cannot change it."""
    return text.translate(_ATTR_ESCAPES)


def typed_element(tag: str, value: JavaValue, *, name: str, structure: str = "property",
                  extra_attrs: str = "") -> str:
    """``<tag dt="..">text</tag>`` (or ``xsi:nil="true"``); ``extra_attrs`` is pre-escaped text."""
    dt, text = encode_value(value, name=name, structure=structure)
    attrs = extra_attrs
    if dt is not None:
        attrs += f' dt="{dt}"'
    if text is None:
        return f'<{tag}{attrs} xsi:nil="true"></{tag}>'
    return f"<{tag}{attrs}>{escape_text(text)}</{tag}>"


_DECL_RE = re.compile(r"\A\ufeff?\s*<\?xml\b[^>]*\?>")
_WRAP_OPEN = f'<mqbridge-wrapper xmlns:xsi="{XSI_NS}">'
_PARSER = etree.XMLParser(
    resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False, remove_comments=True,
    remove_pis=True,
)


def parse_xml(document: str | bytes, *, structure: str) -> etree._Element:
    """Parse one XML element (a folder, a map/stream body, a JMSTransport tree).

    Tolerant as MQ needs (IBM MQ writes the ``xsi`` prefix of ``xsi:nil`` undeclared): that prefix may
    be used undeclared, an XML
    declaration and a BOM are skipped. Bytes must be UTF-8. Syntax errors become MappingError with
    the line and column (``offset`` is the line).
    """
    if isinstance(document, bytes):
        try:
            document = document.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MappingError(f"not valid UTF-8 ({exc.reason})", structure=structure,
                               offset=exc.start) from None
    if not isinstance(document, str):
        raise MappingError("expected XML text", structure=structure)
    decl = _DECL_RE.match(document)
    skipped_lines = 0
    if decl:
        skipped_lines = decl.group().count("\n")
        document = document[decl.end():]
        skipped_prefix = len(decl.group().rsplit("\n", 1)[-1])
    else:
        document = document.removeprefix("\ufeff")
        skipped_prefix = 0
    try:
        wrapper = etree.fromstring(_WRAP_OPEN + document + "</mqbridge-wrapper>", _PARSER)
    except etree.XMLSyntaxError as exc:
        line, column = exc.position if exc.position else (1, 0)
        if line == 1:
            column = column - len(_WRAP_OPEN) + skipped_prefix
        line += skipped_lines
        message = str(exc.msg or exc).split(", line ")[0].replace("mqbridge-wrapper", "end of document")
        raise MappingError(f"malformed XML at line {line}, column {max(column, 0)}: {message}",
                           structure=structure, offset=line) from None
    if (wrapper.text or "").strip(_XML_WS):
        raise MappingError("text outside the root element", structure=structure)
    roots = [child for child in wrapper if isinstance(child.tag, str)]
    if len(roots) != 1:
        raise MappingError(f"expected one root element, found {len(roots)}", structure=structure)
    root = roots[0]
    if (root.tail or "").strip(_XML_WS):
        raise MappingError("text after the root element", structure=structure)
    return root


def is_nil(element: etree._Element) -> bool:
    return element.get(XSI_NIL) in ("true", "1")


def element_name(element: etree._Element) -> str:
    """The local name of an element (namespaces are not used in these documents)."""
    tag = element.tag
    return tag.rpartition("}")[2] if tag[0] == "{" else tag


def only_text(element: etree._Element, *, structure: str, name: str) -> str | None:
    """An element's text, refusing child elements (typed values are simple elements)."""
    if not len(element):
        return element.text
    for child in element:
        if isinstance(child.tag, str):
            raise MappingError("a typed value cannot contain elements", structure=structure, field=name,
                               offset=child.sourceline)
    return element.text
