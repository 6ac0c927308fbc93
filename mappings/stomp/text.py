"""Text in STOMP frames as ActiveMQ 5.x writes and reads it: Java's modified UTF-8 (pure functions).

ActiveMQ builds a TextMessage from a frame body with its modified-UTF-8 reader and writes a TextMessage's
text to a frame the same way (docs/stomp-facts.md §10): a character above U+FFFF is its two UTF-16
surrogates, three bytes each (not one 4-byte sequence, which the reader refuses with
UTFDataFormatException), and U+0000 is the two bytes C0 80 (so a text holding NUL needs no
content-length). Every other character is the same as in standard UTF-8.
"""
from __future__ import annotations

import re

_NEEDS_MODIFIED = re.compile("[\x00\U00010000-\U0010FFFF]")
_SUPPLEMENTARY = re.compile("[\U00010000-\U0010FFFF]")
_LEAD_4 = re.compile(rb"[\xf0-\xf7]")                       # a 4-byte UTF-8 sequence starts here
_SURROGATE_BYTES = re.compile(rb"\xed[\xa0-\xbf][\x80-\xbf]")
_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def _as_surrogates(match: re.Match[str]) -> str:
    code = ord(match.group()) - 0x10000
    return chr(0xD800 | code >> 10) + chr(0xDC00 | code & 0x3FF)


def _joined(match: re.Match[str]) -> str:
    high, low = match.group()
    return chr(0x10000 + ((ord(high) - 0xD800) << 10) + (ord(low) - 0xDC00))


def encode_modified_utf8(text: str) -> bytes:
    """``text`` in modified UTF-8. Raises UnicodeEncodeError for an unpaired surrogate, as UTF-8 does."""
    if not _NEEDS_MODIFIED.search(text):
        return text.encode("utf-8")
    if _LONE.search(text):
        text.encode("utf-8")   # raises: an unpaired surrogate has no encoding
    return (_SUPPLEMENTARY.sub(_as_surrogates, text).encode("utf-8", "surrogatepass")
            .replace(b"\x00", b"\xc0\x80"))


def encode_modified_utf8_bytes(data: bytes) -> bytes:
    """Valid UTF-8 ``data`` in modified UTF-8 (unchanged, and not copied, when it needs nothing)."""
    if b"\x00" not in data and not _LEAD_4.search(data):
        return data
    return encode_modified_utf8(data.decode("utf-8"))


def decode_modified_utf8(data: bytes, errors: str = "strict") -> str:
    """A frame body from ActiveMQ as text. Standard UTF-8 is read too (a 4-byte sequence is one
    character), so a body from any writer decodes. ``errors``: "strict" raises UnicodeDecodeError at the
    offset of the first byte that is neither; "replace" puts U+FFFD there."""
    if b"\xc0\x80" in data:
        data = data.replace(b"\xc0\x80", b"\x00")   # never valid UTF-8, so never ambiguous
    if not _SURROGATE_BYTES.search(data):
        return data.decode("utf-8", errors)
    try:
        text = data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        if errors == "strict":
            raise
        return data.decode("utf-8", errors)
    text = _PAIR.sub(_joined, text)
    if _LONE.search(text):
        if errors == "strict":
            start = _lone_offset(data)
            raise UnicodeDecodeError("modified-utf-8", data, start, start + 3, "an unpaired surrogate")
        text = _LONE.sub("\ufffd", text)
    return text


_LONE = re.compile("[\ud800-\udfff]")


def _lone_offset(data: bytes) -> int:
    """The byte offset of the first surrogate that is not half of a pair."""
    pos = 0
    while (m := _SURROGATE_BYTES.search(data, pos)) is not None:
        start = m.start()
        if data[start + 1] < 0xB0 and _SURROGATE_BYTES.match(data, start + 3) and data[start + 4] >= 0xB0:
            pos = start + 6   # a high surrogate and its low one
            continue
        return start
    return 0
