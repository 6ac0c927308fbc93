"""Processes as /proc shows them: alive (not a zombie), children, command name (Linux)."""
from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """Not yet fully ended: a zombie whose other threads are still exiting (after a SIGKILL, the first thread is a
    zombie before the rest are gone, and the process's files, its pipes too, are still open) counts as alive."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                return True
        return len(os.listdir(f"/proc/{pid}/task")) > 1
    except OSError:
        return False


def children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                if entry.isdigit() and int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    return out


def comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""
