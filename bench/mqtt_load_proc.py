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


def children(pid: int) -> list[int]:
    """The live processes whose parent is ``pid`` (e.g. the gateway's sidecar process), from /proc."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    return out


def proc_cpu(pid: int | None) -> float | None:
    """utime + stime of a process (all its threads), its live children's (recursively) and its reaped children's,
    seconds: the gateway's sidecar process works for it."""
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            parts = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    own = sum(int(v) for v in parts[11:15]) / _CLK_TCK
    return own + sum(proc_cpu(child) or 0.0 for child in children(pid))


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

