"""Giving freed memory back to the operating system.

glibc's malloc keeps the memory of freed blocks (a dropped session's queued payloads, the buffers of
connections refused before CONNECT) in its heap for reuse, so the process's RSS would stay at its peak.
The broker notes what it frees in bulk (``freed``) and the server's periodic sweep calls ``trim_if_due``,
which runs ``malloc_trim(0)`` once at least TRIM_AFTER_BYTES were noted: one call per burst, not one
per connection. Without glibc (musl, macOS) nothing is trimmed.
"""
from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable

TRIM_AFTER_BYTES = 4 * 1024 * 1024


def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        func = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    func.argtypes = [ctypes.c_size_t]
    func.restype = ctypes.c_int
    return func  # type: ignore[no-any-return]


_TRIM = _malloc_trim()
_freed = 0


def freed(nbytes: int) -> None:
    """About ``nbytes`` of buffers or messages were just released."""
    global _freed
    _freed += nbytes


def trim_if_due() -> bool:
    """Trim when enough was freed since the last trim; True when it trimmed."""
    global _freed
    if _freed < TRIM_AFTER_BYTES or _TRIM is None:
        return False
    _freed = 0
    _TRIM(0)
    return True
