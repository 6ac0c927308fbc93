"""Process plumbing shared by the load generator's child processes (event loop, file descriptor limit)
and the broker's metrics read from /proc (CPU seconds, RSS)."""
from __future__ import annotations

import asyncio
import os
import resource
from typing import Any


def loop_runner(coro: Any) -> Any:
    """Run ``coro`` to completion on uvloop when it is installed (optional), else on asyncio's loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def raise_nofile() -> int:
    """Raise RLIMIT_NOFILE to the hard limit; returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        return hard
    except (ValueError, OSError):
        return soft


# ------------------------------------------------------------------------------------------------
# Broker process metrics (/proc)
# ------------------------------------------------------------------------------------------------

_CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int | None) -> float | None:
    """utime + stime of a process (all its threads), seconds."""
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            parts = f.read().rsplit(")", 1)[1].split()
        return (int(parts[11]) + int(parts[12])) / _CLK_TCK
    except OSError:
        return None


def thread_cpu(pid: int | None) -> dict[str, float]:
    """CPU seconds per thread name of a process (threads of one name summed; a trailing number dropped, so
    a JVM's "C2 CompilerThread0" and "...1" count together)."""
    out: dict[str, float] = {}
    if not pid:
        return out
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip().rstrip("0123456789_") or "?"
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                parts = f.read().rsplit(")", 1)[1].split()
        except OSError:   # the thread ended
            continue
        out[name] = out.get(name, 0.0) + (int(parts[11]) + int(parts[12])) / _CLK_TCK
    return out


def proc_mem(pid: int | None) -> dict[str, int]:
    """VmRSS and VmHWM (peak RSS) in KiB."""
    out: dict[str, int] = {}
    if not pid:
        return out
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    out[line.split(":")[0]] = int(line.split()[1])
    except OSError:
        pass
    return out

