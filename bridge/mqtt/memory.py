"""Giving freed memory back to the operating system.

glibc's malloc keeps the memory of freed small blocks (a dropped session's queued payloads) in its
heap for reuse, so the process's RSS stays at its peak after a slow consumer's queue is gone.
``malloc_trim(0)`` releases what is free; the broker calls it after dropping a session that held a lot.
Elsewhere (no glibc, e.g. musl or macOS) ``trim`` does nothing.
"""
from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable

TRIM_AFTER_BYTES = 4 * 1024 * 1024   # worth a trim: a session that held at least this much is gone


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


def trim() -> bool:
    """Return free heap memory to the operating system; False where that is not available."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True
