"""A whole MQ message (MQMD + chained headers + body) and its on-disk "message file" codec."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from mappings.errors import MappingError
from mappings.mq import constants as C
from mappings.mq.ccsid import codec_for
from mappings.mq.headers import Mqdlh, Mqmde, decode_mqdlh, decode_mqmde, encode_mqdlh, encode_mqmde
from mappings.mq.mqmd import Mqmd, decode_mqmd, detect_byte_order, encode_mqmd
from mappings.mq.rfh2 import Rfh1, Rfh2, RfhFolder, decode_rfh1, decode_rfh2, encode_rfh1, encode_rfh2

Header = Rfh2 | Rfh1 | Mqmde | Mqdlh
#: Formats whose data starts with a header this codec follows (each header's Format names what follows it).
#: IBM MQ docs "MQMD - Message descriptor" (Format) and "MQRFH2 - Rules and formatting header 2".
HEADER_FORMATS: dict[str, type[Header]] = {
    C.MQFMT_RF_HEADER_2: Rfh2, C.MQFMT_RF_HEADER: Rfh1, C.MQFMT_MD_EXTENSION: Mqmde,
    C.MQFMT_DEAD_LETTER_HEADER: Mqdlh,
}
FORMAT_OF: dict[type[Header], str] = {cls: fmt for fmt, cls in HEADER_FORMATS.items()}
#: StrucId each header format starts with
STRUC_IDS: dict[str, bytes] = {C.MQFMT_RF_HEADER_2: b"RFH ", C.MQFMT_RF_HEADER: b"RFH ",
                               C.MQFMT_MD_EXTENSION: b"MDE ", C.MQFMT_DEAD_LETTER_HEADER: b"DLH "}
HEADER_NAMES: dict[type[Header], str] = {Rfh2: "MQRFH2", Rfh1: "MQRFH", Mqmde: "MQMDE", Mqdlh: "MQDLH"}
MAX_HEADERS = 64  # a chain longer than this is treated as corrupt rather than followed forever


@dataclass(frozen=True, slots=True)
class MqMessage:
    """MQMD, the headers chained from MQMD.Format, and the body.

    The chain is explicit: ``md.format`` names the first header (or the body), each header's
    ``format`` names the next. ``body_format``/``body_encoding``/``body_ccsid`` are read from the
    last structure before the body. Use :func:`build_message` to get a consistent chain.
    ``notes`` records what the decoder tolerated (e.g. a v1 MQMD in a 364-byte region); it does not
    take part in equality.
    """

    md: Mqmd = dataclasses.field(default_factory=Mqmd)
    headers: tuple[Header, ...] = ()
    body: bytes = b""
    notes: tuple[str, ...] = dataclasses.field(default=(), compare=False)

    @property
    def _last(self) -> Mqmd | Header:
        return self.headers[-1] if self.headers else self.md

    @property
    def body_format(self) -> str:
        return self._last.format

    @property
    def body_encoding(self) -> int:
        return self._last.encoding

    @property
    def body_ccsid(self) -> int:
        """CCSID of the body; MQCCSI_INHERIT in an RFH2 resolves to the RFH2's own CCSID.

        IBM MQ docs "MQRFH2 - Rules and formatting header 2", CodedCharSetId.
        """
        ccsid = self._last.coded_char_set_id
        for i in range(len(self.headers) - 1, -1, -1):
            if ccsid != C.MQCCSI_INHERIT:
                break
            ccsid = (self.headers[i - 1] if i else self.md).coded_char_set_id
        return ccsid

    def rfh2_folder(self, name: str) -> RfhFolder | None:
        """The first folder called ``name`` in any MQRFH2 of the chain."""
        for h in self.headers:
            if isinstance(h, Rfh2):
                found = h.folder(name)
                if found is not None:
                    return found
        return None


def build_message(md: Mqmd, headers: tuple[Header, ...] = (), body: bytes = b"", *,
                  body_format: str = C.MQFMT_NONE, body_encoding: int | None = None,
                  body_ccsid: int | None = None) -> MqMessage:
    """Return a message whose Format chain is consistent: MQMD -> headers -> body.

    The Format of each structure is set to the next one's format name; the last structure gets
    ``body_format`` and, when given, ``body_encoding``/``body_ccsid``.
    """
    chain: list[Any] = [md, *headers]
    fixed: list[Any] = []
    for i, item in enumerate(chain):
        if i + 1 < len(chain):
            nxt = chain[i + 1]
            item = dataclasses.replace(item, format=FORMAT_OF[type(nxt)])
        else:
            changes: dict[str, Any] = {"format": body_format.ljust(8)}
            if body_encoding is not None:
                changes["encoding"] = body_encoding
            if body_ccsid is not None:
                changes["coded_char_set_id"] = body_ccsid
            item = dataclasses.replace(item, **changes)
        fixed.append(item)
    return MqMessage(fixed[0], tuple(fixed[1:]), bytes(body))


def encode_message(msg: MqMessage) -> bytes:
    """MQMD (integers in the order of MQMD.Encoding) followed by each header (integers in the order of
    the preceding structure's Encoding) and the body. The Format chain must be consistent."""
    if not isinstance(msg.md, Mqmd):
        raise MappingError(f"md is a {type(msg.md).__name__}, not an Mqmd", structure="message", field="md")
    if not isinstance(msg.body, bytes | bytearray | memoryview):
        raise MappingError(f"body is a {type(msg.body).__name__}, not bytes", structure="message", field="body")
    parts = [encode_mqmd(msg.md)]
    prev: Mqmd | Header = msg.md
    for index, header in enumerate(msg.headers):
        expected = FORMAT_OF.get(type(header))
        if expected is None:
            raise MappingError(f"{type(header).__name__} is not a header type", structure="message",
                               field=f"headers[{index}]")
        if prev.format.ljust(8) != expected:
            where = "MQMD" if index == 0 else f"header {index}"
            raise MappingError(f"Format {prev.format!r} does not announce the {type(header).__name__} "
                               f"that follows (expected {expected!r})", structure=where, field="Format")
        order = C.integer_byte_order(prev.encoding)
        if isinstance(header, Rfh2):
            parts.append(encode_rfh2(header, order))
        elif isinstance(header, Rfh1):
            parts.append(encode_rfh1(header, order, _resolved_ccsid(msg, index)))
        elif isinstance(header, Mqmde):
            parts.append(encode_mqmde(header, order))
        else:
            parts.append(encode_mqdlh(header, order))
        prev = header
    if prev.format.ljust(8) in HEADER_FORMATS:
        raise MappingError(f"Format {prev.format!r} announces a header but the body follows",
                           structure="MQMD" if not msg.headers else f"header {len(msg.headers)}",
                           field="Format")
    parts.append(msg.body)
    return b"".join(parts)


def _resolved_ccsid(msg: MqMessage, index: int) -> int:
    """CCSID that applies to header ``index`` (that of the structure before it, INHERIT resolved)."""
    chain: list[Mqmd | Header] = [msg.md, *msg.headers]
    ccsid = chain[index].coded_char_set_id
    i = index
    while ccsid == C.MQCCSI_INHERIT and i > 0:
        i -= 1
        ccsid = chain[i].coded_char_set_id
    return ccsid if ccsid > 0 else C.CCSID_UTF8


def _md_region(data: bytes, md: Mqmd, order: str) -> tuple[Mqmd, int, tuple[str, ...]]:
    """Length of the MQMD region. A Version 1 MQMD saved in a 364-byte region (as in the tnt4j-streams
    sample RFH2.msg, a real saved message) is detected
    when MQMD.Format announces a header that is found at 364 but not at 324."""
    if md.version >= 2:
        return md, C.MQMD_LENGTH_2, ()
    sid = STRUC_IDS.get(md.format)
    if sid is not None and data[324:328] != sid and data[364:368] == sid:
        wide = decode_mqmd(data, 0, version=2)
        return wide, C.MQMD_LENGTH_2, ("MQMD Version is 1 but the region is 364 bytes (v2 tail read)",)
    return md, C.MQMD_LENGTH_1, ()


def _decode(data: bytes, context: Mqmd | None) -> tuple[MqMessage, list[tuple[str, int, int]]]:
    if context is None:
        md = decode_mqmd(data, 0)
        md, pos, notes = _md_region(data, md, detect_byte_order(data, 0))
    else:
        md, pos = context, 0
        notes = (f"the data has no MQMD; it is read as Format {context.format!r}, Encoding "
                 f"{context.encoding}, CCSID {context.coded_char_set_id}",)
    spans = [("MQMD", 0, pos)]
    headers: list[Header] = []
    prev: Mqmd | Header = md
    ccsid = md.coded_char_set_id
    while prev.format in HEADER_FORMATS:
        if len(headers) >= MAX_HEADERS:
            raise MappingError(f"more than {MAX_HEADERS} chained headers", structure="message", offset=pos)
        order = C.integer_byte_order(prev.encoding)
        kind = HEADER_FORMATS[prev.format]
        start = pos
        header: Header
        if kind is Rfh2:
            header, pos = decode_rfh2(data, pos, order)
        elif kind is Rfh1:
            header, pos = decode_rfh1(data, pos, order, ccsid if ccsid > 0 else C.CCSID_UTF8)
        elif kind is Mqmde:
            header, pos = decode_mqmde(data, pos, order)
        else:
            header, pos = decode_mqdlh(data, pos, order)
        if header.coded_char_set_id != C.MQCCSI_INHERIT:
            ccsid = header.coded_char_set_id
        headers.append(header)
        spans.append((HEADER_NAMES[kind], start, pos))
        prev = header
    spans.append(("body", pos, len(data)))
    return MqMessage(md, tuple(headers), data[pos:], notes), spans


def decode_message(data: bytes | bytearray | memoryview, *, context: Mqmd | None = None) -> MqMessage:
    """Read a message file: an MQMD then the message data, following the Format chain through
    MQRFH2, MQRFH, MQMDE and MQDLH headers; any other Format is the body's.

    With ``context``, ``data`` is message data alone (as MQGET returns it, or as some tools save it):
    ``context`` stands for the MQMD whose Format/Encoding/CodedCharSetId describe the data, and
    becomes the message's ``md`` (a note says so).
    """
    return _decode(bytes(data), context)[0]


def header_spans(data: bytes, *, context: Mqmd | None = None) -> list[tuple[str, int, int]]:
    """(name, start, end) of the MQMD (empty with ``context``), each header and the body (for `inspect`)."""
    return _decode(bytes(data), context)[1]


# --------------------------------------------------------------------------------------------------
# JSON-friendly description (fixtures/messages/*.json, `inspect --json`, `convert --from mq` input)
# --------------------------------------------------------------------------------------------------
def message_as_dict(msg: MqMessage) -> dict[str, Any]:
    """A plain-data description of ``msg``: MQMD fields by IBM name, headers, body as hex (+ text)."""
    body: dict[str, Any] = {
        "Format": msg.body_format, "Encoding": msg.body_encoding, "CodedCharSetId": msg.body_ccsid,
        "length": len(msg.body), "hex": msg.body.hex().upper(),
    }
    codec = codec_for(msg.body_ccsid, C.integer_byte_order(msg.body_encoding))
    if codec is not None:
        try:
            body["text"] = msg.body.decode(codec)
        except UnicodeDecodeError:
            pass
    out: dict[str, Any] = {"MQMD": msg.md.as_dict(), "headers": [h.as_dict() for h in msg.headers],
                           "body": body}
    if msg.notes:
        out["notes"] = list(msg.notes)
    return out


def _header_from_dict(data: Any, index: int) -> Header:
    where = f"headers[{index}]"
    if not isinstance(data, dict):
        raise MappingError("expected an object", structure=where)
    sid = data.get("StrucId", "RFH ")
    if sid in ("MDE ", "DLH "):
        return _fixed_header_from_dict(data, where, sid)
    common: dict[str, Any] = {}
    for key, attr in (("Encoding", "encoding"), ("CodedCharSetId", "coded_char_set_id"), ("Flags", "flags")):
        if key in data:
            if not isinstance(data[key], int) or isinstance(data[key], bool):
                raise MappingError(f"expected an integer, got {data[key]!r}", structure=where, field=key)
            common[attr] = data[key]
    if "Format" in data:
        common["format"] = str(data["Format"]).ljust(8)
    version = data.get("Version", 2)
    if version == 1:
        pairs = data.get("NameValueString", [])
        if not isinstance(pairs, list) or not all(isinstance(p, list | tuple) and len(p) == 2 for p in pairs):
            raise MappingError("expected a list of [name, value] pairs", structure=where,
                               field="NameValueString")
        return Rfh1(pairs=tuple((str(n), str(v)) for n, v in pairs), **common)
    if version != 2:
        raise MappingError(f"Version {version!r} is not 1 or 2", structure=where, field="Version")
    if "NameValueCCSID" in data:
        common["name_value_ccsid"] = data["NameValueCCSID"]
    folders = data.get("folders", [])
    if not isinstance(folders, list):
        raise MappingError("expected a list", structure=where, field="folders")
    return Rfh2(folders=tuple(RfhFolder.from_dict(f) for f in folders), **common)


_MDE_FIELDS = {"Encoding": "encoding", "CodedCharSetId": "coded_char_set_id", "Format": "format",
               "Flags": "flags", "GroupId": "group_id", "MsgSeqNumber": "msg_seq_number", "Offset": "offset",
               "MsgFlags": "msg_flags", "OriginalLength": "original_length"}
_DLH_FIELDS = {"Reason": "reason", "DestQName": "dest_q_name", "DestQMgrName": "dest_q_mgr_name",
               "Encoding": "encoding", "CodedCharSetId": "coded_char_set_id", "Format": "format",
               "PutApplType": "put_appl_type", "PutApplName": "put_appl_name", "PutDate": "put_date",
               "PutTime": "put_time"}


def _fixed_header_from_dict(data: dict[str, Any], where: str, sid: str) -> Header:
    names, cls = (_MDE_FIELDS, Mqmde) if sid == "MDE " else (_DLH_FIELDS, Mqdlh)
    defaults = cls()
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key in ("StrucId", "Version"):
            continue
        attr = names.get(key)
        if attr is None:
            raise MappingError(f"unknown field {key!r}", structure=where, field=key)
        default = getattr(defaults, attr)
        if isinstance(default, bytes):
            try:
                value = bytes.fromhex(str(value))
            except ValueError:
                raise MappingError("not hex", structure=where, field=key) from None
        elif isinstance(default, int) and (not isinstance(value, int) or isinstance(value, bool)):
            raise MappingError(f"expected an integer, got {value!r}", structure=where, field=key)
        elif isinstance(default, str) and not isinstance(value, str):
            raise MappingError(f"expected a string, got {value!r}", structure=where, field=key)
        kwargs[attr] = value
    return cls(**kwargs)


def message_from_dict(data: Any) -> MqMessage:
    """Inverse of :func:`message_as_dict`. The body may be given as ``hex``, ``text`` (encoded in the
    body CCSID, UTF-8 when unknown) or omitted (empty). The Format chain is rebuilt from the headers;
    body Format/Encoding/CodedCharSetId apply only where the last structure does not give its own."""
    if not isinstance(data, dict):
        raise MappingError("a message description must be an object", structure="message")
    md_data = data.get("MQMD", {})
    if not isinstance(md_data, dict):
        raise MappingError("expected an object", structure="MQMD")
    md = Mqmd.from_dict(md_data)
    headers = data.get("headers", [])
    if not isinstance(headers, list):
        raise MappingError("expected a list", structure="message", field="headers")
    hdrs = tuple(_header_from_dict(h, i) for i, h in enumerate(headers))
    body = data.get("body", {})
    if not isinstance(body, dict):
        raise MappingError("expected an object", structure="body")
    # The last structure's own fields win; the body's Format/Encoding/CodedCharSetId fill the gaps
    # (the body's CodedCharSetId as written by message_as_dict is the resolved one, INHERIT followed).
    last: Mqmd | Header = hdrs[-1] if hdrs else md
    last_given: dict[str, Any] = headers[-1] if hdrs else md_data

    def pick(key: str, own: Any) -> Any:
        return own if key in last_given else body.get(key, own)

    fmt = str(pick("Format", last.format)).ljust(8)
    enc = pick("Encoding", last.encoding)
    ccsid = pick("CodedCharSetId", last.coded_char_set_id)
    for key, value in (("Encoding", enc), ("CodedCharSetId", ccsid)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise MappingError(f"expected an integer, got {value!r}", structure="body", field=key)
    if "hex" in body:
        try:
            payload = bytes.fromhex(str(body["hex"]))
        except ValueError:
            raise MappingError("not valid hex", structure="body", field="hex") from None
    elif "text" in body:
        codec = codec_for(ccsid, C.integer_byte_order(enc)) or "utf-8"
        try:
            payload = str(body["text"]).encode(codec)
        except UnicodeEncodeError as exc:
            raise MappingError(f"text cannot be encoded in {codec}: {exc.reason}", structure="body",
                               field="text") from None
    else:
        payload = b""
    return build_message(md, hdrs, payload, body_format=fmt, body_encoding=enc, body_ccsid=ccsid)
