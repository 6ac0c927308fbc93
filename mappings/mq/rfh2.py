"""MQRFH2 (and read-only-ish MQRFH v1): folder model, folder XML, byte-exact codec.

Per IBM MQ docs "MQRFH2 - Rules and formatting header 2" (fixed part, NameValueLength/NameValueData
pairs), "MQRFH2 folder restrictions" and "Mapping property data types to MQRFH2 data types" (folder XML)."""
from __future__ import annotations

import functools
import re
import struct
from dataclasses import dataclass, field
from typing import Any

from lxml import etree

from mappings.errors import MappingError
from mappings.mq import constants as C
from mappings.mq.ccsid import codec_for

STRUCTURE = "MQRFH2"
STRUCTURE_V1 = "MQRFH"
XSI_NS = "http://www.w3.org/2001/XMLSchema-instance"
_FIXED_BY_ORDER = {o: struct.Struct(o + "4s4i8s2i") for o in "<>"}        # 36 bytes, MQRFH2 fixed part
_FIXED_V1_BY_ORDER = {o: struct.Struct(o + "4s4i8si") for o in "<>"}      # 32 bytes, MQRFH fixed part
_LONG = {o: struct.Struct(o + "i") for o in "<>"}


# --------------------------------------------------------------------------------------------------
# Folder model
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class RfhElement:
    """One folder element: a property ``<name dt='..'>value</name>`` or a group (``children``).

    ``value`` None means ``xsi:nil='true'`` (a null property); "" is an empty value.
    ``dt`` is None when the element carries no dt attribute (an untyped string).
    ``attributes`` keeps any other attributes in document order (e.g. ``name`` on a Map ``elt``).
    """

    name: str
    value: str | None = ""
    dt: str | None = None
    children: tuple[RfhElement, ...] = ()
    attributes: tuple[tuple[str, str], ...] = ()

    @property
    def is_group(self) -> bool:
        return bool(self.children)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.children:
            out["children"] = [c.as_dict() for c in self.children]
        else:
            out["value"] = self.value
        if self.dt is not None:
            out["dt"] = self.dt
        if self.attributes:
            out["attributes"] = [list(a) for a in self.attributes]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RfhElement:
        try:
            return cls(
                name=str(data["name"]),
                value=None if data.get("value", "") is None else str(data.get("value", "")),
                dt=None if data.get("dt") is None else str(data["dt"]),
                children=tuple(cls.from_dict(c) for c in data.get("children", ())),
                attributes=tuple((str(k), str(v)) for k, v in data.get("attributes", ())),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise MappingError(f"bad element description {data!r}: {exc}", structure="RFH2 folder") from None


@dataclass(frozen=True, slots=True)
class RfhFolder:
    """One NameValueData folder: its name, its elements in document order, its own attributes.

    ``raw``: set by :func:`decode_rfh2` only, the NameValueData bytes the folder was read from and their
    codec. The encoder writes them again unchanged (``<e/>``, the quotes, blanks and padding as they were)
    when the folder is written in the same codec; it is not an init field, so a folder made or changed
    (``dataclasses.replace``, a new RfhFolder) has none and is written from its elements.
    """

    name: str
    elements: tuple[RfhElement, ...] = ()
    attributes: tuple[tuple[str, str], ...] = ()
    raw: tuple[bytes, str] | None = field(default=None, init=False, compare=False, repr=False)

    def get(self, name: str) -> RfhElement | None:
        """First element called ``name`` (folders keep duplicates; the first one wins for lookups)."""
        for el in self.elements:
            if el.name == name:
                return el
        return None

    def value(self, name: str) -> str | None:
        el = self.get(name)
        return None if el is None or el.is_group else el.value

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "elements": [e.as_dict() for e in self.elements]}
        if self.attributes:
            out["attributes"] = [list(a) for a in self.attributes]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RfhFolder:
        try:
            return cls(
                name=str(data["name"]),
                elements=tuple(RfhElement.from_dict(e) for e in data.get("elements", ())),
                attributes=tuple((str(k), str(v)) for k, v in data.get("attributes", ())),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise MappingError(f"bad folder description: {exc}", structure="RFH2 folder") from None


@dataclass(frozen=True, slots=True)
class Rfh2:
    """An MQRFH2 version 2. Encoding/CodedCharSetId/Format describe what follows it.

    Defaults are IBM's initial values. The header's own integers are written in the byte order
    of the *preceding* structure's Encoding, which the codec receives as an argument.
    """

    encoding: int = C.MQENC_NATIVE
    coded_char_set_id: int = C.MQCCSI_INHERIT
    format: str = C.MQFMT_NONE
    flags: int = C.MQRFH_NO_FLAGS
    name_value_ccsid: int = C.CCSID_UTF8
    folders: tuple[RfhFolder, ...] = ()

    def __post_init__(self) -> None:
        _pad_format(self)

    def folder(self, name: str) -> RfhFolder | None:
        for f in self.folders:
            if f.name == name:
                return f
        return None

    def as_dict(self) -> dict[str, Any]:
        return {
            "StrucId": "RFH ", "Version": 2, "Encoding": self.encoding,
            "CodedCharSetId": self.coded_char_set_id, "Format": self.format, "Flags": self.flags,
            "NameValueCCSID": self.name_value_ccsid, "folders": [f.as_dict() for f in self.folders],
        }


@dataclass(frozen=True, slots=True)
class Rfh1:
    """An MQRFH version 1: fixed part (32 bytes) and a NameValueString of blank-separated name/value
    pairs. ``pairs`` holds them in order; encoding quotes values that need it."""

    encoding: int = C.MQENC_NATIVE
    coded_char_set_id: int = C.MQCCSI_INHERIT
    format: str = C.MQFMT_NONE
    flags: int = C.MQRFH_NO_FLAGS
    pairs: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        _pad_format(self)

    def as_dict(self) -> dict[str, Any]:
        return {
            "StrucId": "RFH ", "Version": 1, "Encoding": self.encoding,
            "CodedCharSetId": self.coded_char_set_id, "Format": self.format, "Flags": self.flags,
            "NameValueString": [list(p) for p in self.pairs],
        }


def _pad_format(header: Rfh2 | Rfh1) -> None:
    # Format is MQCHAR8: keep it blank padded so "MQSTR" and "MQSTR   " compare equal
    if isinstance(header.format, str) and len(header.format) < 8:
        object.__setattr__(header, "format", header.format.ljust(8))


# --------------------------------------------------------------------------------------------------
# Folder XML writing (deterministic, no lxml on the hot path)
# --------------------------------------------------------------------------------------------------
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
_BAD_XML_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")
_TEXT_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;"})
_ATTR_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "'": "&apos;", '"': "&quot;",
                               "\t": "&#9;", "\n": "&#10;", "\r": "&#13;"})


def check_name(name: str, what: str) -> None:
    """Raise unless ``name`` is an XML name without ':' usable as a folder/element/attribute name."""
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise MappingError(f"{name!r} is not an XML name (letters, digits, '_', '-', '.')",
                           structure="RFH2 folder", field=what)


def escape_text(text: str, what: str = "value") -> str:
    """XML-escape element text: & < > mandatory/advised; CR kept as a character reference."""
    bad = _BAD_XML_CHARS.search(text)
    if bad:
        raise MappingError(f"character U+{ord(bad.group()):04X} at position {bad.start()} cannot be "
                           "written in XML", structure="RFH2 folder", field=what)
    return text.translate(_TEXT_ESCAPES)


def _attrs_xml(attrs: tuple[tuple[str, str], ...], what: str) -> str:
    parts = []
    for key, val in attrs:
        if key != "xsi:nil":
            check_name(key, f"{what} attribute")
        parts.append(f" {key}='{_escape_attr(val, what)}'")
    return "".join(parts)


def _escape_attr(val: str, what: str) -> str:
    bad = _BAD_XML_CHARS.search(val)
    if bad:
        raise MappingError(f"character U+{ord(bad.group()):04X} cannot be written in an XML attribute",
                           structure="RFH2 folder", field=what)
    return val.translate(_ATTR_ESCAPES)


def element_xml(el: RfhElement, path: str = "") -> str:
    """``<name dt='x'>value</name>``; null as ``xsi:nil='true'``; groups recurse."""
    where = f"{path}/{el.name}" if path else el.name
    check_name(el.name, where)
    attrs = el.attributes
    if el.dt is not None:
        attrs = (("dt", el.dt),) + attrs
    if el.value is None and not el.children:
        attrs = attrs + (("xsi:nil", "true"),)
    head = f"<{el.name}{_attrs_xml(attrs, where)}>"
    if el.children:
        inner = "".join(element_xml(c, where) for c in el.children)
    else:
        inner = "" if el.value is None else escape_text(el.value, where)
    return f"{head}{inner}</{el.name}>"


def folder_xml(folder: RfhFolder) -> str:
    """The folder as one XML element, exactly as written into NameValueData (before padding)."""
    check_name(folder.name, folder.name)
    inner = "".join(element_xml(e, folder.name) for e in folder.elements)
    return f"<{folder.name}{_attrs_xml(folder.attributes, folder.name)}>{inner}</{folder.name}>"


def encode_folder(folder: RfhFolder, ccsid: int = C.CCSID_UTF8, byte_order: str = ">") -> bytes:
    """NameValueData bytes: the bytes a decoded folder was read from when they are in the same codec (the
    folder was not changed: ``RfhFolder.raw``), else the folder XML in ``ccsid`` padded with blanks to a
    multiple of 4."""
    raw = folder.raw
    if raw is not None and raw[1] == codec_for(ccsid, byte_order) and ccsid in C.RFH2_NAME_VALUE_CCSIDS:
        return raw[0]
    return _written_folder(folder, ccsid, byte_order)


@functools.lru_cache(maxsize=4096)
def _written_folder(folder: RfhFolder, ccsid: int, byte_order: str) -> bytes:
    """The folder XML in ``ccsid``, blank padded (cached: ``raw`` takes no part in a folder's equality)."""
    codec = codec_for(ccsid, byte_order)
    if ccsid not in C.RFH2_NAME_VALUE_CCSIDS or codec is None:
        raise MappingError(f"{ccsid} is not 1208, 1200, 13488 or 17584", structure=STRUCTURE,
                           field="NameValueCCSID")
    data = folder_xml(folder).encode(codec)
    pad = -len(data) % 4
    if pad:
        blank = " ".encode(codec)
        data += blank * (pad // len(blank))
    return data


# --------------------------------------------------------------------------------------------------
# Folder XML reading (lxml, tolerant: NUL/blank padding, either quote style, undeclared xsi prefix)
# --------------------------------------------------------------------------------------------------
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, remove_comments=True, remove_pis=True,
                          load_dtd=False, huge_tree=False)
_WRAP_OPEN = f'<w xmlns:xsi="{XSI_NS}">'.encode()
_WRAP_CLOSE = b"</w>"
_XSI_PREFIX = "{" + XSI_NS + "}"


def _attr_name(key: str) -> str:
    return "xsi:" + key[len(_XSI_PREFIX):] if key.startswith(_XSI_PREFIX) else key


def _element_from_xml(node: Any) -> RfhElement:
    dt: str | None = None
    nil = False
    attrs: list[tuple[str, str]] = []
    for key, val in node.attrib.items():
        name = _attr_name(key)
        if name == "dt":
            dt = val
        elif name == "xsi:nil":
            nil = val.strip().lower() in ("true", "1")
            if not nil:
                attrs.append((name, val))
        else:
            attrs.append((name, val))
    children = tuple(_element_from_xml(c) for c in node if isinstance(c.tag, str))
    if children:
        return RfhElement(node.tag, "", dt, children, tuple(attrs))
    return RfhElement(node.tag, None if nil else (node.text or ""), dt, (), tuple(attrs))


def parse_folder(text: bytes, *, where: str = STRUCTURE, offset: int | None = None) -> RfhFolder:
    """Parse one folder's UTF-8 XML (padding already removed). Errors name line and column."""
    stripped = text.strip(b" \x00\t\r\n")
    if not stripped:
        raise MappingError("NameValueData holds no folder (only blanks)", structure=where, offset=offset)
    try:
        root = etree.fromstring(_WRAP_OPEN + stripped + _WRAP_CLOSE, _PARSER)
    except etree.XMLSyntaxError as exc:
        line, col = exc.position if exc.position else (0, 0)
        if line == 1:
            col = max(col - len(_WRAP_OPEN), 0)
        msg = str(exc.msg).split(", line ")[0]
        raise MappingError(f"folder XML is not well formed at line {line}, column {col}: {msg}",
                           structure=where, field="NameValueData", offset=offset) from None
    nodes = [n for n in root if isinstance(n.tag, str)]
    if len(nodes) != 1 or (root.text or "").strip() or (nodes[0].tail or "").strip():
        raise MappingError(f"NameValueData must hold exactly one folder element, found {len(nodes)}",
                           structure=where, field="NameValueData", offset=offset)
    top = nodes[0]
    if not isinstance(top.tag, str) or top.tag.startswith("{"):
        raise MappingError(f"folder name {top.tag!r} is namespaced", structure=where, offset=offset)
    attrs = tuple((_attr_name(k), v) for k, v in top.attrib.items())
    elements = tuple(_element_from_xml(c) for c in top if isinstance(c.tag, str))
    for el in _walk(elements):
        if el.name.startswith("{"):
            raise MappingError(f"element {el.name!r} uses a namespace", structure=where, offset=offset)
    return RfhFolder(top.tag, elements, attrs)


def _walk(elements: tuple[RfhElement, ...]) -> list[RfhElement]:
    out: list[RfhElement] = []
    for el in elements:
        out.append(el)
        out.extend(_walk(el.children))
    return out


# --------------------------------------------------------------------------------------------------
# MQRFH2 codec
# --------------------------------------------------------------------------------------------------
def _fmt8(fmt: str, where: str) -> bytes:
    try:
        raw = fmt.encode("ascii")
    except UnicodeEncodeError:
        raise MappingError(f"{fmt!r} is not ASCII", structure=where, field="Format") from None
    if len(raw) > 8:
        raise MappingError(f"{fmt!r} is longer than 8 characters", structure=where, field="Format")
    return raw.ljust(8, b" ")


def _check_fields(header: Rfh2 | Rfh1, byte_order: str, structure: str) -> None:
    """Raise MappingError for what struct.pack would reject: byte order, MQLONG fields, folders."""
    if byte_order not in _LONG:
        raise MappingError(f"byte order {byte_order!r} is not '<' or '>'", structure=structure)
    longs = {"Encoding": header.encoding, "CodedCharSetId": header.coded_char_set_id, "Flags": header.flags}
    if isinstance(header, Rfh2):
        longs["NameValueCCSID"] = header.name_value_ccsid
    for name, value in longs.items():
        if not isinstance(value, int) or isinstance(value, bool) or not -(2**31) <= value < 2**31:
            raise MappingError(f"{value!r} is not a 32-bit MQLONG", structure=structure, field=name)
    if isinstance(header, Rfh2):
        for folder in header.folders:
            _check_folder_types(folder)
    else:
        for pair in header.pairs:
            if not (isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(x, str) for x in pair)):
                raise MappingError(f"{pair!r} is not a (name, value) pair of strings", structure=structure,
                                   field="NameValueString")


def _check_folder_types(folder: object) -> None:
    if not isinstance(folder, RfhFolder) or not isinstance(folder.elements, tuple):
        raise MappingError(f"{folder!r} is not an RfhFolder with a tuple of elements", structure=STRUCTURE)
    todo = list(folder.elements)
    while todo:
        el = todo.pop()
        if (not isinstance(el, RfhElement) or not isinstance(el.children, tuple)
                or not isinstance(el.attributes, tuple) or not (el.value is None or isinstance(el.value, str))
                or not (el.dt is None or isinstance(el.dt, str))):
            raise MappingError(f"{el!r} is not an RfhElement of strings and tuples",
                               structure=f"RFH2 folder {folder.name}")
        todo.extend(el.children)


def encode_rfh2(rfh: Rfh2, byte_order: str) -> bytes:
    """Write ``rfh``; its integers (and UTF-16 NameValueData) in ``byte_order`` of the preceding
    structure's Encoding. StrucLength = 36 + sum(4 + NameValueLength)."""
    _check_fields(rfh, byte_order, STRUCTURE)
    long_ = _LONG[byte_order]
    parts: list[bytes] = []
    total = C.MQRFH_STRUC_LENGTH_FIXED_2
    for folder in rfh.folders:
        data = encode_folder(folder, rfh.name_value_ccsid, byte_order)
        parts.append(long_.pack(len(data)))
        parts.append(data)
        total += 4 + len(data)
    head = _FIXED_BY_ORDER[byte_order].pack(
        b"RFH ", C.MQRFH_VERSION_2, total, rfh.encoding, rfh.coded_char_set_id,
        _fmt8(rfh.format, STRUCTURE), rfh.flags, rfh.name_value_ccsid,
    )
    return head + b"".join(parts)


def _fail(reason: str, offset: int, fld: str | None = None, structure: str = STRUCTURE) -> MappingError:
    return MappingError(reason, structure=structure, field=fld, offset=offset)


def _check_fixed(data: bytes | memoryview, offset: int, byte_order: str, fixed_len: int, version: int,
                 structure: str) -> tuple[int, tuple[Any, ...]]:
    avail = len(data) - offset
    if avail < fixed_len:
        raise _fail(f"truncated: the fixed part needs {fixed_len} bytes, only {avail} available", offset,
                    structure=structure)
    st = (_FIXED_BY_ORDER if fixed_len == 36 else _FIXED_V1_BY_ORDER)[byte_order]
    values = st.unpack_from(data, offset)
    if values[0] != b"RFH ":
        raise _fail(f"{values[0]!r} is not 'RFH '", offset, "StrucId", structure)
    if values[1] != version:
        other = "<" if byte_order == ">" else ">"
        swapped = _LONG[other].unpack_from(data, offset + 4)[0]
        hint = (f" (it reads {version} in the other byte order: the preceding Encoding does not match)"
                if swapped == version else "")
        raise _fail(f"{values[1]} is not {version}{hint}", offset, "Version", structure)
    length = values[2]
    if length < fixed_len:
        raise _fail(f"{length} is less than the fixed part ({fixed_len})", offset, "StrucLength",
                    structure)
    if length % 4:
        raise _fail(f"{length} is not a multiple of 4", offset, "StrucLength", structure)
    if length > avail:
        raise _fail(f"{length} runs past the end of the data ({avail} bytes left)", offset,
                    "StrucLength", structure)
    return length, values


def decode_rfh2(data: bytes | memoryview, offset: int, byte_order: str) -> tuple[Rfh2, int]:
    """Read an MQRFH2 at ``offset`` with integers in ``byte_order`` (from the preceding Encoding).
    Returns the header and the offset just after it."""
    length, values = _check_fixed(data, offset, byte_order, C.MQRFH_STRUC_LENGTH_FIXED_2, 2, STRUCTURE)
    _sid, _ver, _len, encoding, ccsid, fmt, flags, nv_ccsid = values
    codec = codec_for(nv_ccsid, byte_order)
    if nv_ccsid not in C.RFH2_NAME_VALUE_CCSIDS or codec is None:
        raise _fail(f"{nv_ccsid} is not 1208, 1200, 13488 or 17584", offset, "NameValueCCSID")
    end = offset + length
    pos = offset + C.MQRFH_STRUC_LENGTH_FIXED_2
    folders: list[RfhFolder] = []
    long_ = _LONG[byte_order]
    while pos < end:
        index = len(folders) + 1
        if end - pos < 4:
            raise _fail(f"{end - pos} stray bytes at byte {pos} where folder {index}'s NameValueLength "
                        "should be", offset, "NameValueLength")
        nv_len = long_.unpack_from(data, pos)[0]
        if nv_len < 0 or nv_len > end - pos - 4:
            raise _fail(f"folder {index}: {nv_len} at byte {pos} does not fit in StrucLength "
                        f"{length} ({end - pos - 4} bytes left)", offset, "NameValueLength")
        raw = bytes(data[pos + 4 : pos + 4 + nv_len])
        try:
            text = raw.decode(codec)
        except UnicodeDecodeError as exc:
            raise _fail(f"folder {index} is not valid {codec} at byte {pos + 4 + exc.start}", offset,
                        "NameValueData") from None
        xml = text.lstrip("\ufeff").encode("utf-8", "surrogatepass")  # tolerate a UTF-16 byte-order mark
        folder = parse_folder(xml, where=f"{STRUCTURE} folder {index}", offset=pos + 4)
        object.__setattr__(folder, "raw", (raw, codec))   # written again as read while unchanged
        folders.append(folder)
        pos += 4 + nv_len
    fmt_text = fmt.decode("latin-1").replace("\x00", " ")
    return Rfh2(encoding, ccsid, fmt_text, flags, nv_ccsid, tuple(folders)), end


# --------------------------------------------------------------------------------------------------
# MQRFH version 1 (NameValueString)
# --------------------------------------------------------------------------------------------------
def _split_name_values(text: str, offset: int) -> tuple[tuple[str, str], ...]:
    tokens: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == " ":
            i += 1
            continue
        if ch == '"':
            j, buf = i + 1, []
            while True:
                if j >= n:
                    raise _fail(f"unterminated quoted string starting at character {i}", offset,
                                "NameValueString", STRUCTURE_V1)
                if text[j] == '"':
                    if j + 1 < n and text[j + 1] == '"':
                        buf.append('"')
                        j += 2
                        continue
                    break
                buf.append(text[j])
                j += 1
            tokens.append("".join(buf))
            i = j + 1
        else:
            j = text.find(" ", i)
            j = n if j < 0 else j
            tokens.append(text[i:j])
            i = j
    if len(tokens) % 2:
        raise _fail(f"name {tokens[-1]!r} has no value", offset, "NameValueString", STRUCTURE_V1)
    return tuple(zip(tokens[0::2], tokens[1::2], strict=True))


def decode_rfh1(data: bytes | memoryview, offset: int, byte_order: str, ccsid: int) -> tuple[Rfh1, int]:
    """Read an MQRFH version 1; NameValueString is in ``ccsid`` (the preceding structure's)."""
    length, values = _check_fixed(data, offset, byte_order, C.MQRFH_STRUC_LENGTH_FIXED, 1, STRUCTURE_V1)
    _sid, _ver, _len, encoding, h_ccsid, fmt, flags = values
    raw = bytes(data[offset + C.MQRFH_STRUC_LENGTH_FIXED : offset + length])
    cut = raw.find(b"\x00")
    raw = raw[:cut] if cut >= 0 else raw
    codec = codec_for(ccsid, byte_order) or "latin-1"
    try:
        text = raw.decode(codec)
    except UnicodeDecodeError as exc:
        raise _fail(f"NameValueString is not valid {codec} at byte {offset + 32 + exc.start}", offset,
                    "NameValueString", STRUCTURE_V1) from None
    pairs = _split_name_values(text, offset)
    fmt_text = fmt.decode("latin-1").replace("\x00", " ")
    return Rfh1(encoding, h_ccsid, fmt_text, flags, pairs), offset + length


def _quote_v1(token: str) -> str:
    if token and " " not in token and '"' not in token:
        return token
    return '"' + token.replace('"', '""') + '"'


def encode_rfh1(rfh: Rfh1, byte_order: str, ccsid: int = C.CCSID_UTF8) -> bytes:
    """Write an MQRFH v1; NameValueString in ``ccsid``, blank padded to a multiple of 4."""
    _check_fields(rfh, byte_order, STRUCTURE_V1)
    codec = codec_for(ccsid, byte_order) or "latin-1"
    for name, _value in rfh.pairs:
        if not name:
            raise MappingError("empty name", structure=STRUCTURE_V1, field="NameValueString")
    text = " ".join(f"{_quote_v1(n)} {_quote_v1(v)}" for n, v in rfh.pairs)
    try:
        nvs = text.encode(codec)
    except UnicodeEncodeError as exc:
        raise MappingError(f"character {exc.object[exc.start]!r} not in {codec}", structure=STRUCTURE_V1,
                           field="NameValueString") from None
    blank = " ".encode(codec)
    while len(nvs) % 4:
        nvs += blank
    total = C.MQRFH_STRUC_LENGTH_FIXED + len(nvs)
    head = _FIXED_V1_BY_ORDER[byte_order].pack(b"RFH ", C.MQRFH_VERSION_1, total, rfh.encoding,
                                               rfh.coded_char_set_id, _fmt8(rfh.format, STRUCTURE_V1),
                                               rfh.flags)
    return head + nvs
