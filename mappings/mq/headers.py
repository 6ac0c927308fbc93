"""The fixed-layout MQ headers that can sit in a Format chain: MQMDE (72 B) and MQDLH (172 B).

Layouts from IBM Docs: "MQMDE - Message descriptor extension" (q097780, C declaration q097940;
MQMDE_LENGTH_2 = 72) and "MQDLH - Dead letter header" (q096110, fields q096115; MQDLH_VERSION_1).
As for the MQRFH2 (IBM MQ docs "MQRFH2 - Rules and formatting header 2"), their own integers use the
Encoding of the preceding structure; Encoding/CodedCharSetId/Format inside them describe what follows.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from mappings.errors import MappingError
from mappings.mq import constants as C

MQMDE_STRUC_ID = b"MDE "
MQMDE_VERSION_2 = 2
MQMDE_LENGTH_2 = 72
MQDLH_STRUC_ID = b"DLH "
MQDLH_VERSION_1 = 1
MQDLH_LENGTH_1 = 172
MQRC_NONE = 0

_MDE = {o: struct.Struct(o + "4s4i8si24s4i") for o in "<>"}
_DLH = {o: struct.Struct(o + "4s2i48s48s2i8si28s8s8s") for o in "<>"}
assert _MDE["<"].size == MQMDE_LENGTH_2 and _DLH["<"].size == MQDLH_LENGTH_1


def _pad(value: str, length: int, structure: str, field: str) -> bytes:
    if not isinstance(value, str):
        raise MappingError(f"expected text, got {type(value).__name__}", structure=structure, field=field)
    try:
        raw = value.encode("latin-1")
    except UnicodeEncodeError:
        raise MappingError(f"{value!r} has a character outside one byte", structure=structure,
                           field=field) from None
    if len(raw) > length:
        raise MappingError(f"{value!r} is longer than {length} bytes", structure=structure, field=field)
    return raw.ljust(length, b" ")


def _text(raw: bytes) -> str:
    cut = raw.find(b"\x00")
    return (raw[:cut] if cut >= 0 else raw).decode("latin-1").rstrip(" ")


def _check_longs(structure: str, **values: Any) -> None:
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or not -(2**31) <= value < 2**31:
            raise MappingError(f"{value!r} is not a 32-bit MQLONG", structure=structure, field=name)


@dataclass(frozen=True, slots=True)
class Mqmde:
    """MQMD extension: the version-2 MQMD fields for a version-1 MQMD. Defaults: initial values."""

    encoding: int = C.MQENC_NATIVE
    coded_char_set_id: int = C.MQCCSI_UNDEFINED
    format: str = C.MQFMT_NONE
    flags: int = 0
    group_id: bytes = C.MQGI_NONE
    msg_seq_number: int = 1
    offset: int = 0
    msg_flags: int = C.MQMF_NONE
    original_length: int = C.MQOL_UNDEFINED

    def __post_init__(self) -> None:
        if isinstance(self.format, str) and len(self.format) < 8:
            object.__setattr__(self, "format", self.format.ljust(8))

    def as_dict(self) -> dict[str, Any]:
        return {"StrucId": "MDE ", "Version": 2, "Encoding": self.encoding,
                "CodedCharSetId": self.coded_char_set_id, "Format": self.format, "Flags": self.flags,
                "GroupId": self.group_id.hex().upper(), "MsgSeqNumber": self.msg_seq_number,
                "Offset": self.offset, "MsgFlags": self.msg_flags, "OriginalLength": self.original_length}


@dataclass(frozen=True, slots=True)
class Mqdlh:
    """Dead-letter header. Defaults: IBM initial values (MQRC_NONE, blank names, MQFMT_NONE)."""

    reason: int = MQRC_NONE
    dest_q_name: str = ""
    dest_q_mgr_name: str = ""
    encoding: int = 0
    coded_char_set_id: int = C.MQCCSI_UNDEFINED
    format: str = C.MQFMT_NONE
    put_appl_type: int = 0
    put_appl_name: str = ""
    put_date: str = ""
    put_time: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.format, str) and len(self.format) < 8:
            object.__setattr__(self, "format", self.format.ljust(8))

    def as_dict(self) -> dict[str, Any]:
        return {"StrucId": "DLH ", "Version": 1, "Reason": self.reason, "DestQName": self.dest_q_name,
                "DestQMgrName": self.dest_q_mgr_name, "Encoding": self.encoding,
                "CodedCharSetId": self.coded_char_set_id, "Format": self.format,
                "PutApplType": self.put_appl_type, "PutApplName": self.put_appl_name,
                "PutDate": self.put_date, "PutTime": self.put_time}


def encode_mqmde(h: Mqmde, byte_order: str) -> bytes:
    _check_longs("MQMDE", Encoding=h.encoding, CodedCharSetId=h.coded_char_set_id, Flags=h.flags,
                 MsgSeqNumber=h.msg_seq_number, Offset=h.offset, MsgFlags=h.msg_flags,
                 OriginalLength=h.original_length)
    if not isinstance(h.group_id, bytes) or len(h.group_id) != 24:
        raise MappingError("must be exactly 24 bytes", structure="MQMDE", field="GroupId")
    return _MDE[byte_order].pack(MQMDE_STRUC_ID, MQMDE_VERSION_2, MQMDE_LENGTH_2, h.encoding,
                                 h.coded_char_set_id, _pad(h.format, 8, "MQMDE", "Format"), h.flags,
                                 h.group_id, h.msg_seq_number, h.offset, h.msg_flags, h.original_length)


def decode_mqmde(data: bytes | memoryview, offset: int, byte_order: str) -> tuple[Mqmde, int]:
    avail = len(data) - offset
    if avail < MQMDE_LENGTH_2:
        raise MappingError(f"truncated: needs {MQMDE_LENGTH_2} bytes, only {avail} available",
                           structure="MQMDE", offset=offset)
    (sid, version, length, enc, ccsid, fmt, flags, gid, seq, off, mflags,
     orig) = _MDE[byte_order].unpack_from(data, offset)
    if sid != MQMDE_STRUC_ID:
        raise MappingError(f"{sid!r} is not 'MDE '", structure="MQMDE", field="StrucId", offset=offset)
    if version != MQMDE_VERSION_2:
        raise MappingError(f"{version} is not 2", structure="MQMDE", field="Version", offset=offset)
    if length != MQMDE_LENGTH_2:
        raise MappingError(f"{length} is not {MQMDE_LENGTH_2}", structure="MQMDE", field="StrucLength",
                           offset=offset)
    header = Mqmde(enc, ccsid, fmt.decode("latin-1"), flags, gid, seq, off, mflags, orig)
    return header, offset + MQMDE_LENGTH_2


def encode_mqdlh(h: Mqdlh, byte_order: str) -> bytes:
    _check_longs("MQDLH", Reason=h.reason, Encoding=h.encoding, CodedCharSetId=h.coded_char_set_id,
                 PutApplType=h.put_appl_type)
    return _DLH[byte_order].pack(
        MQDLH_STRUC_ID, MQDLH_VERSION_1, h.reason, _pad(h.dest_q_name, 48, "MQDLH", "DestQName"),
        _pad(h.dest_q_mgr_name, 48, "MQDLH", "DestQMgrName"), h.encoding, h.coded_char_set_id,
        _pad(h.format, 8, "MQDLH", "Format"), h.put_appl_type, _pad(h.put_appl_name, 28, "MQDLH", "PutApplName"),
        _pad(h.put_date, 8, "MQDLH", "PutDate"), _pad(h.put_time, 8, "MQDLH", "PutTime"),
    )


def decode_mqdlh(data: bytes | memoryview, offset: int, byte_order: str) -> tuple[Mqdlh, int]:
    avail = len(data) - offset
    if avail < MQDLH_LENGTH_1:
        raise MappingError(f"truncated: needs {MQDLH_LENGTH_1} bytes, only {avail} available",
                           structure="MQDLH", offset=offset)
    (sid, version, reason, dq, dqm, enc, ccsid, fmt, pat, pan, pdate,
     ptime) = _DLH[byte_order].unpack_from(data, offset)
    if sid != MQDLH_STRUC_ID:
        raise MappingError(f"{sid!r} is not 'DLH '", structure="MQDLH", field="StrucId", offset=offset)
    if version != MQDLH_VERSION_1:
        raise MappingError(f"{version} is not 1", structure="MQDLH", field="Version", offset=offset)
    header = Mqdlh(reason, _text(dq), _text(dqm), enc, ccsid, fmt.decode("latin-1"), pat, _text(pan),
                   _text(pdate), _text(ptime))
    return header, offset + MQDLH_LENGTH_1
