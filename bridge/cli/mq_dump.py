"""Readable dumps of MQ message bytes for `mqbridge inspect` (amqsbcg-like, with byte offsets)."""
from __future__ import annotations

import struct
from typing import Any

from mappings.mq import constants as C
from mappings.mq.message import MqMessage, decode_message, header_spans, message_as_dict
from mappings.mq.mqmd import FIELD_TABLE, Mqmd
from mappings.mq.rfh2 import Rfh1, Rfh2, RfhElement


def hex_lines(data: bytes, base: int = 0, indent: str = "  ") -> list[str]:
    """amqsbcg-style rows: offset, 16 bytes in groups of 4, printable ASCII."""
    rows = []
    for start in range(0, len(data), 16):
        chunk = data[start : start + 16]
        groups = " ".join(chunk[i : i + 4].hex().upper() for i in range(0, len(chunk), 4))
        text = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in chunk)
        rows.append(f"{indent}{base + start:08X}:  {groups:<35}  '{text:<16}'")
    return rows


def _order_name(order: str) -> str:
    return "big-endian" if order == ">" else "little-endian"


def _value(value: object, kind: str) -> str:
    if isinstance(value, bytes):
        return f"X'{value.hex().upper()}'"
    if kind == "char":
        return f"'{value}'"
    return str(value)


def _mqmd_lines(md: Mqmd, region: int) -> list[str]:
    lines = [f"MQMD at offset 0: version {md.version}, {region} bytes, integers "
             f"{_order_name(C.integer_byte_order(md.encoding))}"]
    for attr, (off, name, kind, _length) in FIELD_TABLE.items():
        if off >= region:
            break
        value = "MD  " if attr == "struc_id" else getattr(md, attr)
        lines.append(f"  {off:04X} {off:4d}  {name:<17}: {_value(value, kind)}")
    return lines


def _element_lines(el: RfhElement, depth: int) -> list[str]:
    pad = "      " + "  " * depth
    attrs = "".join(f" {k}='{v}'" for k, v in el.attributes)
    dt = f" (dt={el.dt})" if el.dt is not None else ""
    if el.children:
        out = [f"{pad}{el.name}{dt}{attrs}:"]
        for child in el.children:
            out.extend(_element_lines(child, depth + 1))
        return out
    shown = "<null> (xsi:nil)" if el.value is None else repr(el.value)
    return [f"{pad}{el.name}{dt}{attrs} = {shown}"]


def _folder_offsets(data: bytes, start: int, order: str) -> list[tuple[int, int]]:
    """(offset of NameValueLength, NameValueLength) for each folder of the RFH2 at ``start``."""
    length = struct.unpack_from(order + "i", data, start + 8)[0]
    pos, end, out = start + 36, start + length, []
    while pos + 4 <= end:
        nvl = struct.unpack_from(order + "i", data, pos)[0]
        out.append((pos, nvl))
        pos += 4 + nvl
    return out


def render(data: bytes, context: Mqmd | None = None) -> str:
    """The whole dump: MQMD fields, each header with its folders, the body as hex and text.
    ``context``: ``data`` has no MQMD; this one describes it (see decode_message)."""
    msg = decode_message(data, context=context)
    spans = header_spans(data, context=context)
    lines = _mqmd_lines(msg.md, spans[0][2]) if context is None else []
    lines += [f"  note: {n}" if context is None else f"note: {n}" for n in msg.notes]
    prev: Any = msg.md
    for header, (name, start, end) in zip(msg.headers, spans[1:-1], strict=True):
        order = C.integer_byte_order(prev.encoding)
        lines.append("")
        lines.append(f"{name} at offset {start}: {end - start} bytes, integers {_order_name(order)}")
        if isinstance(header, Rfh2 | Rfh1):
            lines.append(f"  Encoding {header.encoding}  CodedCharSetId {header.coded_char_set_id}  "
                         f"Format '{header.format}'  Flags {header.flags}"
                         + (f"  NameValueCCSID {header.name_value_ccsid}" if isinstance(header, Rfh2) else ""))
        else:
            for key, value in header.as_dict().items():
                if key not in ("StrucId", "Version"):
                    lines.append(f"    {key:<15}: {value!r}")
        if isinstance(header, Rfh2):
            for folder, (off, nvl) in zip(header.folders, _folder_offsets(data, start, order), strict=True):
                attrs = "".join(f" {k}='{v}'" for k, v in folder.attributes)
                lines.append(f"  folder <{folder.name}>{attrs} at offset {off}, NameValueLength {nvl}")
                for el in folder.elements:
                    lines.extend(_element_lines(el, 0))
        elif isinstance(header, Rfh1):
            for key, value in header.pairs:
                lines.append(f"    {key} = {value!r}")
        prev = header
    body_start = spans[-1][1]
    lines.append("")
    lines.append(f"body at offset {body_start}: {len(msg.body)} bytes, Format '{msg.body_format}', "
                 f"Encoding {msg.body_encoding}, CCSID {msg.body_ccsid}")
    lines += hex_lines(msg.body, body_start)
    return "\n".join(lines) + "\n"


def as_json(data: bytes, context: Mqmd | None = None) -> dict[str, Any]:
    """`inspect --json`: the message description plus the byte spans of each part."""
    msg: MqMessage = decode_message(data, context=context)
    out = message_as_dict(msg)
    spans = header_spans(data, context=context)
    out["spans"] = [{"part": n, "offset": s, "length": e - s} for n, s, e in spans if e > s or n == "body"]
    return out
