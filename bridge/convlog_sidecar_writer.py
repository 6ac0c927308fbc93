"""The conversion log's sidecar thread: it queues the closed hour files (with their lines' values, while memory
allows) and hands them one at a time to the sidecar process (bridge/convlog_sidecar_process), which writes
their Parquet sidecars (bridge/convlog_parquet). The thread only waits on that process; pyarrow's GIL round
trips stay out of the process that writes the log (docs/conversion-log.md, "Parquet sidecars")."""
from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from pathlib import Path

from bridge.convlog_columns import FileColumns
from bridge.convlog_parquet import SidecarOutcome, available
from bridge.convlog_sidecar_process import SidecarProcess, SidecarProcessError
from bridge.threadnames import name_this_thread
from mappings.convlog_schema import SIDECAR_SUFFIX

log = logging.getLogger("mqbridge.convlog")

MAX_QUEUED_VALUES = 2  # closed files waiting with their lines' values (memory); beyond, their JSON is parsed


class SidecarWriter:
    """The background thread: sidecars for the files ``submit`` names, one at a time, by the sidecar process.

    On start it first writes those of ``backlog`` (closed files without a current sidecar: a crash or a
    stop came between a rotation and its sidecar). Never the asyncio loop's thread, never the log writer's."""

    _unavailable_logged = False

    def __init__(self, max_pending: int = 1024) -> None:
        self._queue: queue.Queue[tuple[Path, FileColumns | None] | None] = queue.Queue(max_pending)
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._values_lock = threading.Lock()
        self._queued_values = 0   # queued files that carry their values (each up to ~45 MB: bounded)
        self._process = SidecarProcess()
        self.written = 0
        self.from_values = 0   # of ``written``: built from the writer's values of the lines, not their JSON
        self.rejected = 0
        self.on_change: Callable[[], None] = lambda: None   # after each file (the conversion log process's status)

    def start(self, backlog: Callable[[], list[Path]] = list) -> bool:
        """Start the thread; False (logged once at INFO) without pyarrow. The backlog is listed here, before
        the caller's log writer runs: a file it fills and rotates later is submitted (with its values), never
        also found in the backlog."""
        if not available():
            if not SidecarWriter._unavailable_logged:
                SidecarWriter._unavailable_logged = True
                log.info("conversion log: pyarrow not installed (mqbridge[parquet]): no Parquet sidecars written")
            return False
        try:
            first = backlog()
        except OSError as e:
            log.warning("conversion log: closed files not listed for Parquet sidecars: %s", e)
            first = []
        self._process = SidecarProcess()   # (a writer started again after close gets a process again)
        self._thread = threading.Thread(target=self._run, args=(first,),
                                        name="mqbridge-convlog-parquet", daemon=True)
        self._thread.start()
        return True

    @property
    def active(self) -> bool:
        return self._thread is not None

    def submit(self, path: Path, columns: FileColumns | None = None) -> None:
        if self._thread is None:
            return
        if columns is not None:
            with self._values_lock:
                if self._queued_values >= MAX_QUEUED_VALUES:
                    columns = None   # the sidecar writer is behind: this one parses its JSON, memory stays bounded
                else:
                    self._queued_values += 1
        try:
            self._queue.put_nowait((path, columns))
        except queue.Full:  # the next start's backlog scan finds it
            if columns is not None:
                with self._values_lock:
                    self._queued_values -= 1
            log.warning("conversion log: sidecar queue full, %s left for the next start", path.name)

    def close(self, timeout: float = 30.0) -> None:
        """Stop after the file in progress (the files still queued are the next start's backlog)."""
        if self._thread is not None:
            self._stopping.set()
            self._queue.put(None)
            self._thread.join(timeout)
            self._thread = None
        self._process.close(timeout)

    def _run(self, first: list[Path]) -> None:
        name_this_thread()
        try:
            for directory in {p.parent for p in first}:  # temporary files a crash left mid-write
                for tmp in directory.glob(f".*{SIDECAR_SUFFIX}.tmp"):
                    tmp.unlink(missing_ok=True)
        except OSError as e:
            log.warning("conversion log: temporary sidecar files not removed: %s", e)
        for path in first:
            if self._stopping.is_set():
                return
            self._one(path, check=True)
        while True:
            item = self._queue.get()
            if item is None or self._stopping.is_set():
                return
            if item[1] is not None:
                with self._values_lock:
                    self._queued_values -= 1
            self._one(item[0], check=False, columns=item[1])

    def _one(self, path: Path, check: bool, columns: FileColumns | None = None) -> None:
        try:
            outcome = self._build(path, check, columns)
        except SidecarProcessError as e:   # never stops the thread: the next file starts the process again
            log.warning("conversion log: Parquet sidecar of %s not written: %s", path.name, e)
            return
        if outcome.status == "written":
            self.written += 1
            self.from_values += outcome.from_values
        elif outcome.status == "rejected":
            self.rejected += 1
            log.info("conversion log: no Parquet sidecar for %s (the audit parses its JSON): %s", path.name,
                     outcome.detail)
        elif outcome.status == "failed":
            log.warning("conversion log: Parquet sidecar of %s not written: %s", path.name, outcome.detail)
        self.on_change()

    def _build(self, path: Path, check: bool, columns: FileColumns | None) -> SidecarOutcome:
        """One file's job, in the sidecar process."""
        return self._process.run(path, check, columns)
