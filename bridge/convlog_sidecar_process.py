"""The process that writes the conversion log's Parquet sidecars (convlog_parquet.sidecar_job), and the
handle on it of its parent, the conversion log process (bridge/convlog_process; "the gateway" below).

Why a process: pyarrow releases the GIL in each of the few hundred calls a sidecar makes, and each time it
takes the GIL back it waits for the switch interval of whatever Python thread holds it (in the gateway, where
the sidecars were first written, the event loop; in the log process, its writer). Measured with a 62 MiB
file (70,000 messages): 0.1 s of work alone, but 2.0 s beside a busy Python thread, which lost 1.3 s of its
own time to it; at 50 ms switches, 22.8 s and 12.8 s. A child process has a GIL of its own
(docs/conversion-log.md, "Parquet sidecars").

Protocol, on the child's stdin and stdout: a request is an 8-byte big-endian length and a pickle of
(path, check, FileColumns or None); the reply the same framing around (SidecarOutcome, [(level, message), ...]),
the log records the job made. The child ends when its stdin ends (the gateway closed it, or exited or died),
after the file in progress; it ignores SIGINT and SIGTERM, which a terminal or a service manager sends to
the whole process group or cgroup: the gateway decides when it stops.
"""
from __future__ import annotations

import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from bridge.child_pipes import frame, read_frame, spawn, write_all
from bridge.convlog_columns import FileColumns
from bridge.convlog_parquet import SidecarOutcome, sidecar_job
from bridge.threadnames import name_this_thread

log = logging.getLogger("mqbridge.convlog")

NICE = 10               # the child's niceness: the gateway's own threads come first


class SidecarProcessError(Exception):
    """The sidecar process could not be started, or ended before it replied."""


class SidecarProcess:
    """The gateway's side: ``run`` sends one file's job and waits for its outcome (the calling thread blocks in
    a pipe read, without the GIL). The child is started at the first job, and again after it died."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._closed = False

    def run(self, path: Path, check: bool, columns: FileColumns | None) -> SidecarOutcome:
        """The job's outcome. A child that ends before it replies is started again and given the job once more
        (jobs can be repeated: a sidecar is written to a temporary file and renamed): it may have died before
        the request came (a kill between files is seen only once its last thread is gone)."""
        request = frame((str(path), check, columns))
        with self._lock:
            for attempt in (1, 2):
                proc = self._started()
                assert proc.stdin is not None and proc.stdout is not None
                try:
                    write_all(proc.stdin.fileno(), request)
                    reply = read_frame(proc.stdout)
                    break
                except (OSError, EOFError) as e:
                    self._discard()
                    if attempt == 2:
                        raise SidecarProcessError(f"the sidecar process ended twice on this file ({e})") from None
        outcome, records = pickle.loads(reply)   # our own child's reply
        for level, message in records:
            log.log(level, "%s", message)
        return outcome

    def close(self, timeout: float = 30.0) -> None:
        """Close its stdin and wait for it to end (it finishes the file in progress first, within ``timeout``;
        then it is killed). A job still running after ``timeout`` is ended by force: it fails, and no new
        process is started after close."""
        self._closed = True
        if not self._lock.acquire(timeout=timeout):
            proc = self._proc   # the job holds the lock: its read ends when the process does
            if proc is not None:
                proc.kill()
            return
        try:
            proc, self._proc = self._proc, None
        finally:
            self._lock.release()
        if proc is None:
            return
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def _started(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self._discard()
        if self._closed:
            raise SidecarProcessError("the sidecar process was closed")
        try:
            proc = spawn("bridge.convlog_sidecar_process")
        except OSError as e:
            raise SidecarProcessError(f"the sidecar process could not be started: {e}") from None
        self._proc = proc
        return proc

    def _discard(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()
        if proc.poll() is None:
            proc.kill()
        proc.wait()


class _Collected(logging.Handler):
    """The child's log records of one job, sent back with its outcome."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[tuple[int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((record.levelno, record.getMessage()))


def child_main() -> int:
    """The child's loop: a job per request until stdin ends."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    name_this_thread("mqbridge-sidecars")
    try:
        os.nice(NICE)
    except OSError:
        pass
    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr   # fd 1 carries replies: a stray print must not corrupt them
    collected = _Collected()
    logger = logging.getLogger("mqbridge")
    logger.addHandler(collected)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    while True:
        try:
            path, check, columns = pickle.loads(read_frame(requests))
        except EOFError:
            return 0
        collected.records.clear()
        outcome: Any = sidecar_job(Path(path), check, columns)
        replies.write(frame((outcome, collected.records)))
        replies.flush()


if __name__ == "__main__":
    sys.exit(child_main())
