"""The class of a Java-serialized object, read from its stream header without deserializing it.

An ObjectMessage's body is a Java serialization stream ("Java Object Serialization Specification", chapter 6,
"Object Serialization Stream Protocol"): the magic 0xACED, version 5, then one content element. Its class
is named in the element's class descriptor, so a gateway that carries the bytes as they are (never running
a foreign class's readObject) can still name it.
"""
from __future__ import annotations

MAGIC = b"\xac\xed\x00\x05"
TC_NULL, TC_CLASSDESC, TC_OBJECT, TC_STRING, TC_ARRAY = 0x70, 0x72, 0x73, 0x74, 0x75
TC_LONGSTRING, TC_PROXYCLASSDESC, TC_ENUM = 0x7C, 0x7D, 0x7E


def class_name(data: bytes) -> str | None:
    """The class of the object ``data`` serializes; None when the stream does not name one plainly (a null,
    a proxy, a back reference, or not a serialization stream at all)."""
    if len(data) < 5 or not data.startswith(MAGIC):
        return None
    tag = data[4]
    if tag in (TC_STRING, TC_LONGSTRING):
        return "java.lang.String"
    if tag not in (TC_OBJECT, TC_ARRAY, TC_ENUM) or len(data) < 8 or data[5] != TC_CLASSDESC:
        return None
    size = int.from_bytes(data[6:8], "big")
    raw = data[8:8 + size]
    if len(raw) != size or not size:
        return None
    return raw.decode("utf-8", "replace")   # modified UTF-8: the same bytes for every name a class can have


__all__ = ["class_name"]
