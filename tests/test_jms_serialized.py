"""The class named by a Java serialization stream's header (mappings/jms/serialized.py), byte layouts from the
"Java Object Serialization Specification", chapter 6 ("Object Serialization Stream Protocol")."""
from __future__ import annotations

import pytest

from mappings.jms.serialized import class_name

HEAD = bytes.fromhex("aced0005")


def _desc(name: str) -> bytes:   # TC_CLASSDESC className (serialVersionUID, flags ... follow)
    raw = name.encode()
    return b"\x72" + len(raw).to_bytes(2, "big") + raw + bytes(8) + b"\x02"


@pytest.mark.parametrize(("data", "expected"), [
    (HEAD + b"\x73" + _desc("java.math.BigDecimal"), "java.math.BigDecimal"),     # TC_OBJECT
    (HEAD + b"\x75" + _desc("[Ljava.lang.String;"), "[Ljava.lang.String;"),      # TC_ARRAY
    (HEAD + b"\x7e" + _desc("java.util.concurrent.TimeUnit"), "java.util.concurrent.TimeUnit"),   # TC_ENUM
    (HEAD + b"\x74\x00\x03abc", "java.lang.String"),                               # TC_STRING
    (HEAD + b"\x7c" + bytes(8), "java.lang.String"),                               # TC_LONGSTRING
    (HEAD + b"\x70", None),                                                        # TC_NULL
    (HEAD + b"\x73\x7d\x00\x00\x00\x01", None),                                    # a proxy class
    (HEAD + b"\x73\x72\x00\x10java.m", None),                                      # cut in the name
    (HEAD + b"\x73\x72\x00\x00", None),                                            # an empty name
    (b"\xac\xed\x00\x04\x74\x00\x01a", None),                                      # another version
    (b"plain text", None), (b"", None),
])
def test_class_name_from_the_stream_header(data: bytes, expected: str | None) -> None:
    assert class_name(data) == expected
