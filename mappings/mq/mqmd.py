"""The MQ message descriptor (MQMD v1 324 B / v2 364 B): model and byte-exact codec.

Implements the MQMD field table of IBM MQ docs "MQMD - Message descriptor" (fields, lengths, initial
values); the layout is ``_V1_LAYOUT`` / ``_V2_LAYOUT`` below."""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from mappings.errors import MappingError
from mappings.mq import constants as C

STRUCTURE = "MQMD"

# Field layout, in wire order (the MQMD field table; offsets cross-checked in tests/test_mqmd.py).
# kind: "long" MQLONG, "char" MQCHARn (blank padded, text), "byte" MQBYTEn (binary, NUL padded).
_V1_LAYOUT: tuple[tuple[str, str, str, int], ...] = (
    # (attribute, IBM field name, kind, length)
    ("struc_id", "StrucId", "char", 4),
    ("version", "Version", "long", 4),
    ("report", "Report", "long", 4),
    ("msg_type", "MsgType", "long", 4),
    ("expiry", "Expiry", "long", 4),
    ("feedback", "Feedback", "long", 4),
    ("encoding", "Encoding", "long", 4),
    ("coded_char_set_id", "CodedCharSetId", "long", 4),
    ("format", "Format", "char", 8),
    ("priority", "Priority", "long", 4),
    ("persistence", "Persistence", "long", 4),
    ("msg_id", "MsgId", "byte", 24),
    ("correl_id", "CorrelId", "byte", 24),
    ("backout_count", "BackoutCount", "long", 4),
    ("reply_to_q", "ReplyToQ", "char", 48),
    ("reply_to_q_mgr", "ReplyToQMgr", "char", 48),
    ("user_identifier", "UserIdentifier", "char", 12),
    ("accounting_token", "AccountingToken", "byte", 32),
    ("appl_identity_data", "ApplIdentityData", "char", 32),
    ("put_appl_type", "PutApplType", "long", 4),
    ("put_appl_name", "PutApplName", "char", 28),
    ("put_date", "PutDate", "char", 8),
    ("put_time", "PutTime", "char", 8),
    ("appl_origin_data", "ApplOriginData", "char", 4),
)
_V2_LAYOUT: tuple[tuple[str, str, str, int], ...] = (
    ("group_id", "GroupId", "byte", 24),
    ("msg_seq_number", "MsgSeqNumber", "long", 4),
    ("offset", "Offset", "long", 4),
    ("msg_flags", "MsgFlags", "long", 4),
    ("original_length", "OriginalLength", "long", 4),
)


def _struct_format(layout: tuple[tuple[str, str, str, int], ...]) -> str:
    return "".join("i" if kind == "long" else f"{length}s" for _, _, kind, length in layout)


_V1_FMT = _struct_format(_V1_LAYOUT)
_V2_FMT = _struct_format(_V2_LAYOUT)
# Precompiled codecs for both integer byte orders: {order: (v1, v2 tail, whole v2)}
_STRUCTS: dict[str, tuple[struct.Struct, struct.Struct, struct.Struct]] = {
    order: (
        struct.Struct(order + _V1_FMT),
        struct.Struct(order + _V2_FMT),
        struct.Struct(order + _V1_FMT + _V2_FMT),
    )
    for order in ("<", ">")
}
assert _STRUCTS["<"][0].size == C.MQMD_LENGTH_1 and _STRUCTS["<"][2].size == C.MQMD_LENGTH_2


def _offsets() -> dict[str, tuple[int, str, str, int]]:
    table: dict[str, tuple[int, str, str, int]] = {}
    pos = 0
    for attr, name, kind, length in _V1_LAYOUT + _V2_LAYOUT:
        table[attr] = (pos, name, kind, length)
        pos += length
    return table


#: attribute -> (offset, IBM field name, kind, length); used for errors, `inspect` and tests.
FIELD_TABLE: dict[str, tuple[int, str, str, int]] = _offsets()
_V1_ATTRS = tuple(a for a, *_ in _V1_LAYOUT)
_V2_ATTRS = tuple(a for a, *_ in _V2_LAYOUT)


@dataclass(frozen=True, slots=True)
class Mqmd:
    """Every MQMD v1 and v2 field. Defaults are IBM's MQMD_DEFAULT (the initial values).

    Text (MQCHAR) fields hold the value without its blank/NUL padding; byte fields hold exactly
    their MQBYTEn length. ``encoding`` is the MQMD.Encoding field (describes the data that
    follows); the MQMD's own integers are written in the byte order of that value (what a putter
    does with a native MQMD).
    """

    version: int = C.MQMD_VERSION_1
    report: int = C.MQRO_NONE
    msg_type: int = C.MQMT_DATAGRAM
    expiry: int = C.MQEI_UNLIMITED
    feedback: int = C.MQFB_NONE
    encoding: int = C.MQENC_NATIVE
    coded_char_set_id: int = C.MQCCSI_Q_MGR
    format: str = C.MQFMT_NONE
    priority: int = C.MQPRI_PRIORITY_AS_Q_DEF
    persistence: int = C.MQPER_PERSISTENCE_AS_Q_DEF
    msg_id: bytes = C.MQMI_NONE
    correl_id: bytes = C.MQCI_NONE
    backout_count: int = 0
    reply_to_q: str = ""
    reply_to_q_mgr: str = ""
    user_identifier: str = ""
    accounting_token: bytes = C.MQACT_NONE
    appl_identity_data: str = ""
    put_appl_type: int = C.MQAT_NO_CONTEXT
    put_appl_name: str = ""
    put_date: str = ""
    put_time: str = ""
    appl_origin_data: str = ""
    # version 2 only
    group_id: bytes = C.MQGI_NONE
    msg_seq_number: int = 1
    offset: int = 0
    msg_flags: int = C.MQMF_NONE
    original_length: int = C.MQOL_UNDEFINED

    def __post_init__(self) -> None:
        # Format is MQCHAR8: keep it blank padded so "MQSTR" and "MQSTR   " compare equal
        if isinstance(self.format, str) and len(self.format) < 8:
            object.__setattr__(self, "format", self.format.ljust(8))

    @property
    def length(self) -> int:
        return C.MQMD_LENGTH_2 if self.version >= C.MQMD_VERSION_2 else C.MQMD_LENGTH_1

    @property
    def byte_order(self) -> str:
        """struct prefix of the MQMD's own integers, from MQMD.Encoding."""
        return C.integer_byte_order(self.encoding)

    def has_v2_values(self) -> bool:
        """True when a version-2 field differs from its default (cannot be written as v1)."""
        return any(getattr(self, a) != _DEFAULT_V2[a] for a in _V2_ATTRS)

    def as_dict(self) -> dict[str, Any]:
        """Field values keyed by IBM field name; bytes as upper-case hex (for JSON and `inspect`)."""
        out: dict[str, Any] = {}
        for attr in _V1_ATTRS[1:] + (_V2_ATTRS if self.version >= 2 else ()):
            value = getattr(self, attr)
            out[FIELD_TABLE[attr][1]] = value.hex().upper() if isinstance(value, bytes) else value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Mqmd:
        """Inverse of :meth:`as_dict`; unknown keys and wrong types raise MappingError."""
        by_name = {FIELD_TABLE[a][1]: a for a in _V1_ATTRS[1:] + _V2_ATTRS}
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            attr = by_name.get(key)
            if attr is None:
                raise MappingError(f"unknown MQMD field {key!r}", structure=STRUCTURE, field=key)
            kind, length = FIELD_TABLE[attr][2], FIELD_TABLE[attr][3]
            if kind == "byte":
                if not isinstance(value, str):
                    raise MappingError("expected a hex string", structure=STRUCTURE, field=key)
                try:
                    raw = bytes.fromhex(value)
                except ValueError:
                    raise MappingError(f"not hex: {value!r}", structure=STRUCTURE, field=key) from None
                kwargs[attr] = raw.ljust(length, b"\x00")
            elif kind == "long":
                if not isinstance(value, int) or isinstance(value, bool):
                    raise MappingError(f"expected an integer, got {value!r}", structure=STRUCTURE, field=key)
                kwargs[attr] = value
            else:
                if not isinstance(value, str):
                    raise MappingError(f"expected a string, got {value!r}", structure=STRUCTURE, field=key)
                kwargs[attr] = value.ljust(8) if attr == "format" else value
        md = cls(**kwargs)
        validate(md)
        return md


_DEFAULT_V2 = {a: getattr(Mqmd(), a) for a in _V2_ATTRS}
MQMD_DEFAULT = Mqmd()

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1


def validate(md: Mqmd) -> None:
    """Raise MappingError if ``md`` cannot be written: lengths, integer ranges, version."""
    if md.version not in (C.MQMD_VERSION_1, C.MQMD_VERSION_2) or isinstance(md.version, bool):
        raise MappingError(f"{md.version} is not 1 or 2", structure=STRUCTURE, field="Version", offset=4)
    for attr, (off, name, kind, length) in FIELD_TABLE.items():
        if attr == "struc_id":
            continue
        value = getattr(md, attr)
        if kind == "long":
            if not isinstance(value, int) or isinstance(value, bool) or not _INT_MIN <= value <= _INT_MAX:
                raise MappingError(f"{value!r} is not a 32-bit MQLONG", structure=STRUCTURE, field=name,
                                   offset=off)
        elif kind == "byte":
            if not isinstance(value, bytes) or len(value) != length:
                raise MappingError(f"must be exactly {length} bytes", structure=STRUCTURE, field=name,
                                   offset=off)
        else:
            _encode_char(value, name, off, length)
    if md.version == C.MQMD_VERSION_1 and md.has_v2_values():
        raise MappingError("version 1 cannot carry GroupId/MsgSeqNumber/Offset/MsgFlags/OriginalLength "
                           "values; use version 2", structure=STRUCTURE, field="Version", offset=4)


def _encode_char(value: object, name: str, off: int, length: int) -> bytes:
    if not isinstance(value, str):
        raise MappingError(f"expected text, got {type(value).__name__}", structure=STRUCTURE, field=name,
                           offset=off)
    try:
        raw = value.encode("latin-1")  # single-byte names; the inverse of _text()
    except UnicodeEncodeError as exc:
        raise MappingError(f"{value!r} has a character outside one byte at position {exc.start}",
                           structure=STRUCTURE, field=name, offset=off) from None
    if len(raw) > length:
        raise MappingError(f"{value!r} is longer than {length} bytes", structure=STRUCTURE, field=name,
                           offset=off)
    return raw.ljust(length, b" ")


# Per version: (attribute, kind code, length) after StrucId; kind code 0 long, 1 char, 2 byte.
_KIND_CODE = {"long": 0, "char": 1, "byte": 2}
_PLAN = {
    v: tuple((a, _KIND_CODE[FIELD_TABLE[a][2]], FIELD_TABLE[a][3])
             for a in _V1_ATTRS[1:] + (_V2_ATTRS if v == 2 else ()))
    for v in (1, 2)
}


def encode_mqmd(md: Mqmd, byte_order: str | None = None) -> bytes:
    """Write ``md`` (324 or 364 bytes). Integers in ``byte_order`` ('<'/'>'), default from md.encoding.

    MQCHAR fields are blank padded, MQBYTE fields written as they are.
    Any invalid field raises MappingError naming it (found by :func:`validate`).
    """
    if not isinstance(md.encoding, int) or isinstance(md.version, bool):
        validate(md)
    order = byte_order or md.byte_order
    if order not in _STRUCTS:
        raise MappingError(f"byte order {order!r} is not '<' or '>'", structure=STRUCTURE)
    version = md.version
    if version == 1 and md.has_v2_values() or version not in (1, 2):
        validate(md)
    values: list[object] = [b"MD  "]
    append = values.append
    try:
        for attr, kind, length in _PLAN[version]:
            value = getattr(md, attr)
            if kind == 1:
                value = value.encode("latin-1").ljust(length, b" ")
            if kind and len(value) != length or not kind and (not isinstance(value, int)
                                                              or value.__class__ is bool):
                raise TypeError(attr)
            append(value)
        return _STRUCTS[order][2 if version == 2 else 0].pack(*values)
    except (TypeError, AttributeError, UnicodeEncodeError, struct.error) as exc:
        validate(md)  # raises the MappingError that names the field
        raise MappingError(f"cannot be encoded: {exc}", structure=STRUCTURE) from None


def detect_byte_order(data: bytes | memoryview, offset: int = 0) -> str:
    """Byte order of an MQMD's own integers, found from its Version field (1 or 2)."""
    need = offset + 8
    if len(data) < need:
        raise _truncated(data, offset, 4)
    raw = bytes(data[offset + 4 : offset + 8])
    for order in (">", "<"):
        if struct.unpack(order + "i", raw)[0] in (C.MQMD_VERSION_1, C.MQMD_VERSION_2):
            return order
    raise MappingError(f"bytes {raw.hex()} are neither 1 nor 2 in either byte order",
                       structure=STRUCTURE, field="Version", offset=offset)


def _truncated(data: bytes | memoryview, offset: int, need_until: int) -> MappingError:
    """Error for an MQMD that ends before relative byte ``need_until``: names the field cut short."""
    avail = len(data) - offset
    for off, name, _kind, length in FIELD_TABLE.values():
        if off + length > avail:
            return MappingError(f"truncated: field at byte {offset + off} needs {length} bytes, "
                                f"only {max(avail - off, 0)} available", structure=STRUCTURE, field=name,
                                offset=offset)
    return MappingError(f"truncated: needs {need_until} bytes, {avail} available", structure=STRUCTURE,
                        offset=offset)


def _text(raw: bytes) -> str:
    # Strip trailing blanks and NULs: other languages write blanks, C a NUL-terminated string (IBM MQ docs
    # "MQMD - Message descriptor", PutDate and PutTime).
    # Single-byte names: latin-1 never fails, so any byte value decodes.
    cut = raw.find(b"\x00")
    if cut >= 0:
        raw = raw[:cut]
    return raw.decode("latin-1").rstrip(" ")


def decode_mqmd(data: bytes | memoryview, offset: int = 0, *, version: int | None = None) -> Mqmd:
    """Read an MQMD at ``offset``. The version (and so 324 or 364 bytes) comes from its Version field
    unless ``version`` overrides it (used for a v1 MQMD saved in a 364-byte region)."""
    if len(data) - offset < 4:
        raise _truncated(data, offset, 4)
    struc_id = bytes(data[offset : offset + 4])
    if struc_id != b"MD  ":
        raise MappingError(f"{struc_id!r} is not 'MD  '", structure=STRUCTURE, field="StrucId",
                           offset=offset)
    order = detect_byte_order(data, offset)
    st_v1, _st_tail, st_v2 = _STRUCTS[order]
    declared = struct.unpack_from(order + "i", data, offset + 4)[0]
    want = version if version is not None else declared
    st = st_v2 if want >= 2 else st_v1
    if len(data) - offset < st.size:
        raise _truncated(data, offset, st.size)
    values = st.unpack_from(data, offset)
    kwargs: dict[str, Any] = {"version": declared}
    for (attr, kind, _length), value in zip(_PLAN[2 if want >= 2 else 1], values[1:], strict=True):
        kwargs[attr] = _text(value) if kind == 1 else value
    kwargs["version"] = declared
    kwargs["format"] = kwargs["format"].ljust(8)  # Format keeps its 8 characters for comparisons
    return Mqmd(**kwargs)


def field_names() -> tuple[str, ...]:
    """IBM names of all MQMD fields in wire order."""
    return tuple(info[1] for info in FIELD_TABLE.values())


__all__ = [
    "FIELD_TABLE",
    "MQMD_DEFAULT",
    "Mqmd",
    "decode_mqmd",
    "detect_byte_order",
    "encode_mqmd",
    "field_names",
    "validate",
]
