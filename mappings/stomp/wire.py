"""STOMP 1.2 frame text that is the same for every frame of its kind (pure)."""
from __future__ import annotations

from collections.abc import Mapping

# STOMP 1.2 "Value Encoding": in every frame but CONNECT/CONNECTED, a backslash, LF, CR and colon in a
# header name or value are written as backslash + one of "\\", "n", "r", "c".
_ESCAPES = str.maketrans({"\\": "\\\\", "\n": "\\n", "\r": "\\r", ":": "\\c"})


def encode_send_head(destination: str, headers: Mapping[str, str]) -> bytes:
    """A SEND frame's command and headers (``destination`` first, then ``headers`` in order), each line
    ended by LF, without the blank line: the link adds content-length, transaction or receipt, the blank
    line, the body and the NUL. Computed once per header set by callers that send many alike."""
    lines = [f"SEND\ndestination:{destination.translate(_ESCAPES)}\n"]
    for name, value in headers.items():
        lines.append(f"{name.translate(_ESCAPES)}:{value.translate(_ESCAPES)}\n")
    return "".join(lines).encode("utf-8")
