"""Give a Python thread its name in the operating system too, so that `top -H`, `ps -L` and
/proc/PID/task/TID/comm tell the gateway's threads apart (the event loop, the store writers, the log and
sidecar writers, the I/O executors) and their CPU can be read per thread from outside (bench/bench_durable.py).
Python 3.11 sets no OS name for its threads. Linux only (prctl PR_SET_NAME, 15 bytes); elsewhere a no-op."""
from __future__ import annotations

import ctypes
import ctypes.util
import sys
import threading

_PR_SET_NAME = 15
_libc: ctypes.CDLL | None = None


def os_name(name: str) -> str:
    """The 15 bytes the kernel keeps: ``mqbridge-`` shortened to ``mqb-``."""
    return name.replace("mqbridge-", "mqb-").encode("utf-8")[:15].decode("utf-8", "ignore")


def name_this_thread(name: str | None = None) -> None:
    """Name the calling thread in the OS (default: its Python name). Also a ThreadPoolExecutor initializer."""
    global _libc
    if not sys.platform.startswith("linux"):
        return
    try:
        if _libc is None:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        _libc.prctl(_PR_SET_NAME, ctypes.c_char_p(os_name(name or threading.current_thread().name).encode()), 0, 0, 0)
    except (OSError, AttributeError):   # no libc or no prctl: the names are a convenience
        pass
