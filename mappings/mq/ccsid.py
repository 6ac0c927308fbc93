"""Coded character set ids (CCSIDs) -> Python codecs, for MQ text fields, folders and bodies."""
from __future__ import annotations

from mappings.mq import constants as C

# The CCSIDs the bridge meets in practice (IBM MQ's common code pages: 1208 UTF-8, 819, 437, 1200
# UTF-16, 37/500 EBCDIC, ...). UTF-16 byte order is not part of the CCSID: callers pass the
# integer byte order of the structure that carries the text.
_SINGLE_OR_MULTI_BYTE: dict[int, str] = {
    C.CCSID_UTF8: "utf-8",
    C.CCSID_ISO8859_1: "latin-1",
    C.CCSID_PC437: "cp437",
    850: "cp850",
    1252: "cp1252",
    1051: "hp_roman8",
    923: "iso8859_15",
    C.CCSID_EBCDIC_US: "cp037",
    C.CCSID_EBCDIC_INTL: "cp500",
    367: "ascii",
}
_UTF16 = frozenset({C.CCSID_UTF16, C.CCSID_UCS2, C.CCSID_UTF16_V2})


def is_utf16(ccsid: int) -> bool:
    return ccsid in _UTF16


def codec_for(ccsid: int, byte_order: str = ">") -> str | None:
    """Python codec name for ``ccsid`` (UTF-16 variants use ``byte_order``), or None if unknown."""
    if ccsid in _UTF16:
        return "utf-16-be" if byte_order == ">" else "utf-16-le"
    return _SINGLE_OR_MULTI_BYTE.get(ccsid)
