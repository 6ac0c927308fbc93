"""The gateway's helper processes (bridge/convlog_process, bridge/convlog_sidecar_process): how they are started
and the framing of the pickles they exchange over their stdin and stdout (an 8-byte big-endian length, then the
pickle). Only our own processes are at either end of these pipes."""
from __future__ import annotations

import fcntl
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import IO

PIPE_BYTES = 1 << 20    # a request pipe's size, when the kernel allows it (fewer wake-ups per request)
_F_SETPIPE_SZ = 1031    # fcntl.F_SETPIPE_SZ (Linux; Python 3.11's fcntl module lacks the name)
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[1])   # the directory that holds ``bridge``


def read_exact(stream: IO[bytes], n: int) -> bytes:
    """n bytes; EOFError when the pipe ends first."""
    chunks: list[bytes] = []
    while n:
        chunk = stream.read(n)
        if not chunk:
            raise EOFError("the pipe ended")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_frame(stream: IO[bytes]) -> bytes:
    """One frame's pickle (not loaded); EOFError when the pipe ends, also within the frame."""
    return read_exact(stream, int.from_bytes(read_exact(stream, 8), "big"))


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:   # one write(2) moves it all unless a signal interrupts it
        view = view[os.write(fd, view):]


def frame(obj: object) -> bytes:
    body = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return len(body).to_bytes(8, "big") + body


def spawn(module: str) -> subprocess.Popen[bytes]:
    """``python -m module`` with pipes on stdin and stdout (stdin widened to PIPE_BYTES where allowed), this
    package first on its path. OSError when it cannot be started."""
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": _PACKAGE_ROOT + (os.pathsep + path if path else "")}
    proc = subprocess.Popen([sys.executable, "-m", module], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            bufsize=0, env=env, close_fds=True)
    assert proc.stdin is not None
    try:
        fcntl.fcntl(proc.stdin.fileno(), _F_SETPIPE_SZ, PIPE_BYTES)
    except OSError:   # over /proc/sys/fs/pipe-max-size: the default pipe, more wake-ups
        pass
    return proc
