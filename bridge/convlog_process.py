"""The conversion log process: a child Python process (``mqbridge-convlog`` in ps) that renders and writes the
conversion log (bridge/convlog.ConversionLog: its files, rotation and Parquet sidecars), and the
gateway's handle on it, LogProcess.

Why a process: rendering the two JSON lines of every routed message, writing them and keeping their values
for the sidecar took about 5 µs of the gateway's GIL a message, a fifth of a route's (bench/HISTORY.md,
session 28). The gateway now sends each batch's values (template ids, times, keys, sizes) over a pipe; the
rendering (convlog.render_lines, one implementation) and everything after it run under the child's own GIL.

Protocol. Gateway -> child (stdin), frames (bridge/child_pipes):
  the first: the ConversionLog's options (a dict);
  then each a list of entries, in log order:
  ("t", id, ingress, egress)   a template pair (LineTemplates), sent once before the first values naming it
  ("v", now, ids, received, keys, sizes, out_sizes, redelivered)   messages of one batch, rendered here
  ("l", lines)                 lines the gateway rendered (records of other statuses: RecordLines.one)
  ("r",)                       forget every template (the gateway's table was full and starts again)
Child -> gateway (stdout), status frames: (written, dropped, sidecars, [(level, logger, message), ...]),
sidecars being (written, from_values, rejected) or None (none written: disabled or no pyarrow); sent after a
change, at most every STATUS_SECONDS, and once more at the end.

The child ends when its stdin ends (the gateway closed it, or exited or died): it writes what it was sent,
closes the file, finishes the sidecar in progress, sends its last status and exits. It ignores SIGINT and
SIGTERM, which a terminal or a service manager sends to the whole group: the gateway decides when it stops.
So a gateway killed with SIGKILL loses only the records it had not sent yet (at most GATHER_SECONDS' worth
plus its queue), not what was in the pipe (docs/conversion-log.md, "The log process").
"""
from __future__ import annotations

import contextlib
import logging
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bridge.child_pipes import frame, read_frame, spawn, write_all
from bridge.convlog import GATHER_SECONDS, ConversionLog, drained
from bridge.convlog_columns import LineColumns
from bridge.threadnames import name_this_thread

log = logging.getLogger("mqbridge.convlog")

MAX_TEMPLATES = 8192     # template pairs a child keeps; beyond, both sides start a new table
STATUS_SECONDS = 0.05    # the child's status, at most this often (changes gather meanwhile)
RESTART_SECONDS = 1.0    # a child that could not be started is tried again after this long
STOP_SECONDS = 75.0      # close(): the child's own close waits up to 30 s for its writer and 30 s for a sidecar


class LogProcessError(Exception):
    """The conversion log process could not be started."""


@dataclass(slots=True)
class ChildStatus:
    """What one child reported last."""

    written: int = 0
    dropped: int = 0
    sidecars: tuple[int, int, int] | None = None
    reported: bool = False   # a status came: the child started
    ended: bool = False      # its status pipe ended: it is exiting (maybe not yet a zombie for poll())


@dataclass(slots=True)
class SidecarCounts:
    """The sidecars written by every child so far (app status: ``convlog.sidecars``)."""

    written: int
    from_values: int
    rejected: int


Item = str | list[str] | LineColumns


class LogProcess:
    """The gateway's conversion log: ``record_*`` only queue (never block the caller); a thread sends what is
    queued to the child, which writes it. Same options as ConversionLog, which runs in the child.

    ``written`` and ``dropped`` are the child's counts (as last reported) plus the records dropped here: the
    queue was full (``max_pending`` entries), or no child could take them."""

    def __init__(self, directory: Path, *, max_bytes: int = 64 * 1024 * 1024, max_pending: int = 1_000_000,
                 sidecars: bool = True) -> None:
        self.directory = Path(directory)
        self._options = {"directory": str(directory), "max_bytes": max_bytes, "max_pending": max_pending,
                         "sidecars": sidecars}
        self._queue: queue.Queue[Item | None] = queue.Queue(max_pending)
        self._thread: threading.Thread | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._children: list[ChildStatus] = []
        self._ids: dict[int, int] = {}               # id(template pair) -> its id in the current child
        self._pairs: list[tuple[Any, ...]] = []      # those pairs, kept alive (their id()s stay theirs)
        self._dropped_here = 0
        self.sent = 0   # lines handed to a child (in its pipe or further)
        # What the current child was sent and has not written yet, oldest first: (its line count once it has
        # written this item, item). A child that dies leaves these to the next one (_ended), sent again first.
        self._unacked: deque[tuple[int, Item]] = deque()
        self._handed = 0              # lines sent to the current child
        self._redo: list[Item] = []   # a dead child's unwritten items, for the next child
        self._next_start = 0.0
        self._closing = False

    # -- the callers' side (the event loop) --------------------------------------------------------------------

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            self._started()
        except LogProcessError as e:   # logged; tried again with the first records
            log.error("conversion log: %s", e)
        self._thread = threading.Thread(target=self._run, name="mqbridge-convlog", daemon=True)
        self._thread.start()

    def record_line(self, line: str) -> None:
        """Queue one JSON line (from ConversionRecord.to_json_line or convlog_schema.trusted_json_line)."""
        self._put(line, 1)

    def record_lines(self, lines: list[str], columns: LineColumns | None = None) -> None:
        """Queue lines rendered here (``columns`` is ignored: the child keeps values only of what it renders)."""
        self._put(lines, len(lines))

    def record_values(self, columns: LineColumns) -> None:
        """Queue a batch's values (RecordLines.values): the child renders and writes their lines."""
        self._put(columns, 2 * len(columns.pairs))

    def _put(self, item: Item, lines: int) -> None:
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self._lost(lines, "the conversion log is behind")

    @property
    def written(self) -> int:
        return sum(c.written for c in self._children)

    @property
    def dropped(self) -> int:
        return self._dropped_here + sum(c.dropped for c in self._children)

    @property
    def sidecars(self) -> SidecarCounts | None:
        counts = [c.sidecars for c in self._children if c.sidecars is not None]
        if not counts:
            return None
        return SidecarCounts(*(sum(c[i] for c in counts) for i in range(3)))

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def close(self) -> None:
        """Send what is queued, then end the child: it writes everything, closes the file and finishes the
        sidecar in progress (bounded: STOP_SECONDS, then it is killed)."""
        self._closing = True
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(STOP_SECONDS + 5)
            self._thread = None
        else:
            self._stop_child()

    # -- the sending thread -------------------------------------------------------------------------------------

    def _run(self) -> None:
        name_this_thread()
        done = False
        while not done:
            items, done = drained(self._queue)
            if items:
                self._send(items)
            if not done:   # busy: let entries gather (a put wakes no one while this sleeps)
                time.sleep(GATHER_SECONDS)
        if self._redo or (self._unacked and not self._alive()):
            self._send([])   # a child died as the gateway closed: a last one writes what it had not
        self._stop_child()

    def _send(self, items: list[Item]) -> None:
        """One frame to the child. A child that ended is replaced, and the new one is sent first what the old one
        had not written, then this frame (a frame it did not take whole was never written: the child reads whole
        frames only)."""
        new = _count_lines(items)
        for _attempt in (1, 2):
            try:
                proc = self._started()
            except LogProcessError as e:
                self._lost(new + _count_lines(self._redo), str(e))
                self._redo = []
                return
            assert proc.stdin is not None
            batch = self._redo + items if self._redo else items
            data = frame(self._entries(batch))
            try:
                write_all(proc.stdin.fileno(), data)
            except OSError:
                self._ended()
                continue
            self._redo = []
            self._handed_over(batch)
            self.sent += new
            return
        self._lost(new + _count_lines(self._redo), "the conversion log process ended twice")
        self._redo = []

    def _handed_over(self, items: list[Item]) -> None:
        """Keep what the child was sent until it has written it (its status: written + dropped, in order)."""
        unacked = self._unacked
        for item in items:
            self._handed += _item_lines(item)
            unacked.append((self._handed, item))
        done = self._done()
        while unacked and unacked[0][0] <= done:
            unacked.popleft()

    def _done(self) -> int:
        """The lines the current child has written or dropped (it counts whole entries, in the order sent)."""
        status = self._children[-1] if self._children else None
        return 0 if status is None else status.written + status.dropped

    def _entries(self, items: list[Item]) -> list[tuple[Any, ...]]:
        ids, pairs = self._ids, self._pairs
        out: list[tuple[Any, ...]] = []
        for item in items:
            if isinstance(item, LineColumns):
                numbers = list(map(ids.get, map(id, item.pairs)))
                if None in numbers:   # a template pair the child has not seen
                    for i, p in enumerate(item.pairs):
                        n = ids.get(id(p))
                        if n is None:
                            n = ids[id(p)] = len(pairs)
                            pairs.append(p)
                            out.append(("t", n, p[0], p[1]))
                        numbers[i] = n
                out.append(("v", item.now, numbers, item.received, item.keys, item.sizes, item.out_sizes,
                            item.redelivered))
            elif isinstance(item, str):
                out.append(("l", [item]))
            else:
                out.append(("l", item))
        if len(pairs) > MAX_TEMPLATES:
            out.append(("r",))
            ids.clear()
            pairs.clear()
        return out

    def _lost(self, count: int, why: str) -> None:
        before = self._dropped_here
        self._dropped_here += count
        if before == 0 or before // 100_000 != self._dropped_here // 100_000:
            log.error("conversion log: %s: %d records dropped", why, self._dropped_here)

    # -- the child -----------------------------------------------------------------------------------------------

    def _started(self) -> subprocess.Popen[bytes]:
        proc = self._proc
        if proc is not None and self._alive():
            return proc
        if proc is not None:
            self._ended()
        if self._closing and self._thread is None:
            raise LogProcessError("the conversion log was closed")
        now = time.monotonic()
        if now < self._next_start:   # the last one could not start, or ended at once: not again yet
            raise LogProcessError("its process did not start or ended at once; tried again shortly")
        try:
            proc = spawn("bridge.convlog_process")
        except OSError as e:
            self._next_start = now + RESTART_SECONDS
            raise LogProcessError(f"its process could not be started: {e}") from None
        assert proc.stdin is not None
        try:
            write_all(proc.stdin.fileno(), frame(self._options))
        except OSError as e:   # it ended at once: not left behind
            proc.kill()
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()
            self._next_start = now + RESTART_SECONDS
            raise LogProcessError(f"its process ended as it started: {e}") from None
        status = ChildStatus()
        self._children.append(status)
        self._ids.clear()
        self._pairs.clear()
        self._proc = proc
        self._reader = threading.Thread(target=self._read_status, args=(proc, status), name="mqbridge-convlog-status",
                                        daemon=True)
        self._reader.start()
        return proc

    def _alive(self) -> bool:
        """The current child runs: neither its status pipe ended (it is exiting, and poll() may not say so yet:
        a write to its stdin may even succeed) nor poll() says it ended."""
        proc = self._proc
        return proc is not None and not self._children[-1].ended and proc.poll() is None

    def _read_status(self, proc: subprocess.Popen[bytes], status: ChildStatus) -> None:
        assert proc.stdout is not None
        name_this_thread()
        try:
            while True:
                written, dropped, sidecars, records = pickle.loads(read_frame(proc.stdout))   # our child's
                status.written, status.dropped, status.sidecars = written, dropped, sidecars
                status.reported = True
                for level, name, message in records:
                    logging.getLogger(name).log(level, "%s", message)
        except (EOFError, OSError, ValueError, pickle.UnpicklingError):
            pass
        status.ended = True   # (_alive: seen in 2 of 8 tries, the wake-up below sent to the dying child)
        if not self._closing:   # it died: wake the sending thread, which gives its unwritten records to a new one
            with contextlib.suppress(queue.Full):
                self._queue.put_nowait([])

    def _ended(self) -> None:
        """The current child ended: what it was sent and had not written goes to the next one (its last status
        is read to the end first). A child killed between a write and the status after it (microseconds) has
        those lines written twice."""
        code = self._discard()
        if self._children and not self._children[-1].reported:   # it ended before it started working
            self._next_start = time.monotonic() + RESTART_SECONDS
        done, again, partly = self._done(), [], 0
        for end, item in self._unacked:
            if end <= done:
                continue
            if end - _item_lines(item) < done:   # part of an entry written: cannot be (whole entries are counted)
                partly += end - done
            else:
                again.append(item)
        self._unacked.clear()
        self._handed = 0
        self._redo = again + self._redo
        log.error("conversion log: its process ended (exit status %s); a new one takes over and is sent the %d "
                  "records the old one had not written", code, _count_lines(self._redo))
        if partly:
            self._lost(partly, "its process ended in the middle of an entry")

    def _discard(self) -> int | None:
        """Close the pipes of a child that ended (or end it) and wait for it: its exit status."""
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        if proc.stdin is not None:
            proc.stdin.close()
        if proc.poll() is None:
            proc.kill()
        code = proc.wait()
        if self._reader is not None:
            self._reader.join(5)
        if proc.stdout is not None:
            proc.stdout.close()
        return code

    def _stop_child(self) -> None:
        proc = self._proc
        if proc is None:
            return
        assert proc.stdin is not None
        try:
            proc.stdin.close()   # the child writes what it has and ends
        except OSError:
            pass
        try:
            proc.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            log.error("conversion log: its process did not end within %.0f s: killed", STOP_SECONDS)
            proc.kill()
        self._discard()


def _item_lines(item: Item) -> int:
    return 1 if isinstance(item, str) else 2 * len(item.pairs) if isinstance(item, LineColumns) else len(item)


def _count_lines(items: list[Item]) -> int:
    return sum(map(_item_lines, items))


# -- the child -------------------------------------------------------------------------------------------------


class _Status:
    """The child's status thread: the ConversionLog's counts and the log records made, sent to the gateway
    after a change (at most every STATUS_SECONDS)."""

    def __init__(self, convlog: ConversionLog, out: int) -> None:   # out: the status pipe's fd
        self.convlog = convlog
        self.out = out
        self.changed = threading.Event()
        self.records: list[tuple[int, str, str]] = []
        self.lock = threading.Lock()
        self.write_lock = threading.Lock()
        self.stopping = False
        self.sidecars_on = False   # the ConversionLog's sidecar writer started (pyarrow is there)
        self.thread = threading.Thread(target=self._run, name="mqbridge-convlog-status", daemon=True)

    def _run(self) -> None:
        name_this_thread()
        while not self.stopping:
            self.changed.wait()
            time.sleep(STATUS_SECONDS)
            self.changed.clear()
            self.send()

    def send(self) -> None:
        """One status frame. Also the writer thread's ack after each batch (ConversionLog.on_written): the counts
        are read under the frame lock, so that the gateway never sees them go back."""
        with self.write_lock:   # one frame at a time, from the writer, this thread, or stop()
            with self.lock:   # taken by the log handler too (never the write lock: no cycle)
                records, self.records = self.records, []
            c, s = self.convlog, self.convlog.sidecars
            sidecars = (s.written, s.from_values, s.rejected) if s is not None and self.sidecars_on else None
            try:
                write_all(self.out, frame((c.written, c.dropped, sidecars, records)))
            except OSError:   # the gateway is gone: the log is still written
                pass

    def stop(self) -> None:
        self.stopping = True
        self.changed.set()
        self.thread.join(5)
        self.send()


class _Forward(logging.Handler):
    """The child's log records, for the gateway's log (with the status)."""

    def __init__(self, status: _Status) -> None:
        super().__init__(logging.DEBUG)
        self.status = status

    def emit(self, record: logging.LogRecord) -> None:
        with self.status.lock:
            self.status.records.append((record.levelno, record.name, record.getMessage()))
        self.status.changed.set()


def child_main() -> int:
    """The child: the options, then frames of entries until stdin ends."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    name_this_thread("mqbridge-convlog")
    requests = sys.stdin.buffer
    # the status goes out on a copy of fd 1; fd 1 itself becomes stderr, so that a stray print, also one by a
    # native library, cannot corrupt it
    replies = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        options = pickle.loads(read_frame(requests))   # our own parent's
    except EOFError:
        return 0
    convlog = ConversionLog(Path(options["directory"]), max_bytes=options["max_bytes"],
                            max_pending=options["max_pending"], sidecars=options["sidecars"], block=True)
    status = _Status(convlog, replies)
    logger = logging.getLogger("mqbridge")
    logger.addHandler(_Forward(status))
    logger.setLevel(logging.INFO)
    logger.propagate = False
    convlog.on_change = status.changed.set
    convlog.on_written = status.send   # the ack of each write, at once
    convlog.start()
    status.sidecars_on = convlog.sidecars is not None and convlog.sidecars.active
    status.send()   # started: the gateway counts on this one from here on
    status.thread.start()
    templates: dict[int, tuple[Any, ...]] = {}
    try:
        while True:
            for entry in pickle.loads(read_frame(requests)):
                kind = entry[0]
                if kind == "v":
                    convlog.record_values(LineColumns(entry[1], [templates[n] for n in entry[2]], *entry[3:]))
                elif kind == "l":
                    convlog.record_lines(entry[1])
                elif kind == "t":
                    templates[entry[1]] = (entry[2], entry[3], ())
                elif kind == "r":
                    templates.clear()
    except EOFError:
        pass
    convlog.close()
    status.stop()
    return 0


if __name__ == "__main__":
    sys.exit(child_main())
