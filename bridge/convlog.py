"""The conversion log writer: one JSON line per conversion step (schema: mappings/convlog_schema.py),
written by a background thread so its callers only enqueue, rotated by size and by hour; each file it
closes is written once more as a Parquet sidecar for the audit by another thread (bridge/convlog_parquet.py).
In the gateway it runs in the conversion log process (bridge/convlog_process.py); RecordLines makes the
router's records there: their values in the gateway, their lines (render_lines) in that process."""
from __future__ import annotations

import logging
import os
import queue
import re
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol, TypeVar

from bridge.child_pipes import write_all
from bridge.connectors.base import Inbound, Outbound
from bridge.convlog_columns import FileColumns, LineColumns
from bridge.convlog_parquet import closed_files
from bridge.convlog_sidecar_writer import SidecarWriter
from bridge.threadnames import name_this_thread
from mappings.convlog_schema import ConversionRecord, Direction, LineTemplate, Status, json_string, json_timestamp
from mappings.mqtt.publication import MqttPublication
from mappings.report import ConversionReport, Finding

log = logging.getLogger("mqbridge.convlog")

# While entries keep coming, the writer sleeps this long after each write instead of waiting on the queue: a
# waiting writer was woken by every route batch's put, and each wake took the GIL from the event loop
# (bench/HISTORY.md, session 26). Idle, it waits on the queue as before (no polling).
GATHER_SECONDS = 0.01
FILE_PREFIX = "convlog-"
FILE_SUFFIX = ".jsonl"


class LogSink(Protocol):
    """What the router logs to: a ConversionLog, or the gateway's LogProcess (bridge/convlog_process)."""

    def record_lines(self, lines: list[str], columns: LineColumns | None = None) -> None: ...

    def record_values(self, columns: LineColumns) -> None: ...


class ConversionLog:
    """Append-only JSON Lines log. ``record()`` never blocks the caller on I/O.

    Files are ``<dir>/convlog-YYYYMMDD-HH-<seq>.jsonl``; a new file starts when the hour changes or
    the current one passes ``max_bytes``. Each batch of lines goes to the file in one write, unbuffered: what
    ``written`` counts survives a SIGKILL of this process (it is in the kernel's page cache).
    A file closed for good (the hour changed, or it is full) gets its Parquet sidecar (``sidecars``; needs
    pyarrow), as do closed files without one found at start (docs/conversion-log.md, "Parquet sidecars").
    """

    def __init__(self, directory: Path, *, max_bytes: int = 64 * 1024 * 1024,
                 max_pending: int = 1_000_000, sidecars: bool = True, block: bool = False) -> None:
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        # block: a full queue makes record_* wait instead of dropping (the log process: its pipe and the
        # gateway's queue then hold the rest, and what it counts stays in order, see on_written)
        self._block = block
        self._queue: queue.Queue[str | list[str] | tuple[list[str], LineColumns] | None] = queue.Queue(max_pending)
        self._thread: threading.Thread | None = None
        self.written = 0
        self.dropped = 0
        self._file: object = None
        self._path: Path | None = None
        self._hour = ""
        self._size = 0
        self._columns: FileColumns | None = None   # the file's line values, while all its lines are render_lines'
        self.sidecars = SidecarWriter() if sidecars else None
        self.on_change: Callable[[], None] = _nothing   # after each write and sidecar (the log process's status)
        # in the writer thread after each batch it wrote (or failed to): ``written`` + ``dropped`` then count the
        # entries taken so far, in order (with ``block``); the log process reports them at once (its acks)
        self.on_written: Callable[[], None] = lambda: self.on_change()
        if self.sidecars is not None:
            self.sidecars.on_change = lambda: self.on_change()

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.sidecars is not None:  # the backlog: files of earlier hours (or full) a stop or crash left without
            hour = datetime.now(UTC).strftime("%Y%m%d-%H")
            self.sidecars.start(lambda: closed_files(self.directory, hour, self.max_bytes))   # listed before _run
        self._thread = threading.Thread(target=self._run, name="mqbridge-convlog", daemon=True)
        self._thread.start()   # after the sidecar writer: its first file keeps its values (keeps_columns)

    @property
    def keeps_columns(self) -> bool:
        """Sidecars are being written: record_lines' callers pass their lines' values (LineColumns)."""
        return self.sidecars is not None and self.sidecars.active

    def record(self, rec: ConversionRecord) -> None:
        self.record_line(rec.to_json_line())

    def record_line(self, line: str) -> None:
        """Queue one JSON line (from ConversionRecord.to_json_line or convlog_schema.trusted_json_line)."""
        try:
            self._queue.put(line, self._block)
        except queue.Full:
            self._lost(1)

    def record_values(self, columns: LineColumns) -> None:
        """Queue the lines of RecordLines.values' ``columns`` (rendered here), with the values for the sidecar."""
        self.record_lines(render_lines(columns), columns if self.keeps_columns else None)

    def record_lines(self, lines: list[str], columns: LineColumns | None = None) -> None:
        """Queue several lines as one entry of the queue (the router logs a batch's records together;
        ``max_pending`` counts entries); ``columns``: their values, when render_lines wrote them."""
        try:
            self._queue.put(lines if columns is None else (lines, columns), self._block)
        except queue.Full:
            self._lost(len(lines))

    def _lost(self, count: int) -> None:
        before = self.dropped
        self.dropped += count
        self.on_change()
        if before == 0 or before // 100_000 != self.dropped // 100_000:
            log.error("conversion log is %d entries behind: %d records dropped", self._queue.qsize(), self.dropped)

    def close(self) -> None:
        """Write what is queued and close the file; the sidecar in progress is finished (bounded wait), the
        current file gets none (this hour's next start may append to it)."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(30)
            self._thread = None
        if self.sidecars is not None:
            self.sidecars.close()

    # -- writer thread --------------------------------------------------------------------------

    def _open(self, hour: str) -> None:
        closed = self._path if self._file is not None else None  # rotated: never appended to again
        columns, self._columns = self._columns, None
        self._close_file()
        if closed is not None and self.sidecars is not None:
            self.sidecars.submit(closed, columns)
        seq = 0
        while True:
            path = self.directory / f"{FILE_PREFIX}{hour}-{seq:03d}{FILE_SUFFIX}"
            if not path.exists() or path.stat().st_size < self.max_bytes:
                break
            seq += 1
        self._file = open(path, "ab", buffering=0)  # noqa: SIM115 - long-lived, closed in _close_file; _write's bytes
        self._path = path
        self._hour = hour
        self._size = path.stat().st_size
        # a file this process starts: its sidecar can come from the lines' values (not one it appends to)
        self._columns = FileColumns() if self._size == 0 and self.keeps_columns else None

    def _close_file(self) -> None:
        f = self._file
        if f is not None:
            os.fsync(f.fileno())  # type: ignore[attr-defined]
            f.close()  # type: ignore[attr-defined]
            self._file = None

    def _run(self) -> None:
        name_this_thread()
        done = False
        while not done:
            items, done = drained(self._queue)
            batch: list[str] = []
            columns: list[LineColumns] | None = []   # None: a line of the batch has no values (not render_lines')
            for item in items:
                if isinstance(item, tuple):
                    batch.extend(item[0])
                    if columns is not None:
                        columns.append(item[1])
                elif isinstance(item, list):
                    batch.extend(item)
                    columns = None
                elif item:
                    batch.append(item)
                    columns = None
            if batch:
                try:
                    self._write(batch, columns)
                except OSError as exc:
                    self._columns = None   # the file no longer holds exactly the lines of its values
                    self.dropped += len(batch)
                    log.error("conversion log write failed (%d records lost): %s", len(batch), exc)
                except Exception:   # a bug: counted and logged; the writer goes on with the next batch
                    self._columns = None
                    self.dropped += len(batch)
                    log.exception("conversion log: %d records not written", len(batch))
                self.on_written()
            if batch and not done:   # busy: let entries gather (a put wakes no one while this sleeps)
                time.sleep(GATHER_SECONDS)
        self._close_file()

    def _write(self, lines: list[str], columns: list[LineColumns] | None = None) -> None:
        hour = datetime.now(UTC).strftime("%Y%m%d-%H")
        if self._file is None or hour != self._hour or self._size >= self.max_bytes:
            self._open(hour)
        text = "".join(lines)
        try:
            data = text.encode("utf-8")   # encoded once: the file is binary, the size is its length
        except UnicodeEncodeError:   # a lone surrogate in a string (a JMS String may hold one): JSON's escape
            data = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")
        if self._columns is not None and columns is None:
            self._columns = None
        write_all(self._file.fileno(), data)  # type: ignore[attr-defined]  # (unbuffered: the file's own fd)
        self._size += len(data)
        self.written += len(lines)
        file_columns = self._columns
        if file_columns is not None and columns is not None:
            if all(file_columns.add(c) for c in columns):
                file_columns.size += len(data)
            else:
                self._columns = None


def _nothing() -> None:
    pass


# The lines are JSON with ensure_ascii off, so a surrogate can only be a character of a string; written as the
# \uXXXX escape it is the same string to a JSON reader, and the file stays UTF-8 (before, it stopped the writer).
_SURROGATE = re.compile("[\ud800-\udfff]")


T = TypeVar("T")


# Entries taken from a queue at once, at most: a writer far behind (up to max_pending entries queued) handles
# them in rounds of this many, so one write, or one pickle on the gateway's GIL, stays small.
MAX_DRAINED = 1024


def drained(entries: queue.Queue[T | None]) -> tuple[list[T], bool]:
    """The entries there are (at most MAX_DRAINED), waiting for the first (idle, nothing wakes the caller but an
    entry); True once the None that ends the queue was taken."""
    item = entries.get()
    items: list[T] = []
    while item is not None:
        items.append(item)
        if len(items) >= MAX_DRAINED:
            return items, False
        try:
            item = entries.get_nowait()
        except queue.Empty:
            return items, False
    return items, True


def log_files(directory: Path) -> list[Path]:
    return sorted(Path(directory).glob(f"{FILE_PREFIX}*{FILE_SUFFIX}"))


class RecordLines:
    """The one writer of the router's records: per message an ingress line and an egress line, rendered
    from LineTemplates (mappings.convlog_schema) with the text of ``trusted_json_line`` for the same
    values (tests/test_convlog_fast_path.py, tests/test_convlog_line_template.py).

    ``values``: the messages a route's target accepted, as templates cached per route, client, source
    and target destination, types and findings, and per message the values that vary (event times, key,
    sizes, redelivery count), which render_lines encodes into the templates' slots. Findings are matched by
    identity first (the MQTT -> STOMP fast path reuses the same Finding objects for every message of a
    topic; an entry keeps them alive, so their ids cannot be reused while it exists), then by value.
    ``one``: a single message of any status (backout, dropped, ...), from templates not cached."""

    MAX_CACHED = 4096

    def __init__(self, gateway_id: str) -> None:
        self.gateway_id = gateway_id
        self._by_id: dict[tuple[object, ...], tuple[LineTemplate, LineTemplate, tuple[Finding, ...]]] = {}
        self._by_value: dict[tuple[object, ...], tuple[LineTemplate, LineTemplate, tuple[Finding, ...]]] = {}

    def values(self, route: str, target_proto: str, good: Sequence[tuple[Inbound, Outbound, str, ConversionReport]],
               now: float) -> LineColumns:
        """The messages a route's target accepted as their lines' values: per message its template pair (cached
        per route, client, source and target destination, types and findings) and the values that vary. The
        lines are rendered from them by render_lines, in the conversion log process (bridge/convlog_process)."""
        by_id = self._by_id
        if len(by_id) > self.MAX_CACHED:
            by_id.clear()
        pairs = []
        append = pairs.append
        for item, out, target_type, report in good:
            findings = report.findings
            parts = (route, target_proto, item.protocol, item.source_type, item.qos, *mqtt_side(item, out),
                     item.persistent, item.priority, item.client_id, item.destination, target_type, out.destination)
            cached = (*parts, *map(id, findings)) if findings else parts
            entry = by_id.get(cached)
            if entry is None:
                entry = by_id[cached] = self._entry(parts, tuple(findings))
            append(entry)
        return LineColumns(now, pairs, [g[0].received for g in good], [g[0].key for g in good],
                           [g[0].size for g in good], [g[1].size for g in good],
                           [min(g[0].redelivery_count, _INT_MAX) for g in good])

    def one(self, route: str, target_proto: str, item: Inbound, direction: Direction, status: Status, now: float, *,
            target_type: str | None = None, target_size: int | None = None, findings: Sequence[Finding] = (),
            reason: str | None = None, destination: str | None = None) -> list[str]:
        """The ingress and egress lines of one message whose egress record has ``direction`` and ``status``."""
        parts = (route, target_proto, item.protocol, item.source_type, item.qos, *mqtt_side(item, None),
                 item.persistent, item.priority, item.client_id, item.destination, target_type, destination)
        ingress, egress = self._templates(parts, tuple(findings), direction, status, reason)
        key, size = json_string(item.key), str(item.size)
        redelivered = str(min(item.redelivery_count, _INT_MAX))
        target = "null" if target_size is None else str(target_size)
        return [ingress.render_encoded(json_timestamp(item.received), key, size, redelivered),
                egress.render_encoded(json_timestamp(now), key, size, target,
                                      str(max(0, int((now - item.received) * 1_000_000))), redelivered)]

    def _entry(self, parts: tuple[object, ...], findings: tuple[Finding, ...]
               ) -> tuple[LineTemplate, LineTemplate, tuple[Finding, ...]]:
        by_value = self._by_value
        entry = by_value.get((*parts, findings))
        if entry is not None:
            return entry
        ingress, egress = self._templates(parts, findings, Direction.EGRESS, Status.OK, None)
        if len(by_value) >= self.MAX_CACHED:
            by_value.clear()
        entry = by_value[(*parts, findings)] = (ingress, egress, findings)
        return entry

    def _templates(self, parts: tuple[object, ...], findings: tuple[Finding, ...], direction: Direction,
                   status: Status, reason: str | None) -> tuple[LineTemplate, LineTemplate]:
        route, tproto, sproto, stype, qos, egress_qos, retained, persistent, priority, client, source, target_type, \
            dest = parts
        fixed = {"gateway_id": self.gateway_id, "route": route, "source_protocol": sproto, "target_protocol": tproto,
                 "source_type": stype, "persistent": persistent, "retained": retained, "priority": priority}
        ingress = LineTemplate({**fixed, "direction": Direction.INGRESS.value, "status": Status.OK.value, "qos": qos,
                                "client_id": client, "destination": source}, _INGRESS_VARIABLE)
        egress = LineTemplate({**fixed, "direction": direction.value, "status": status.value, "reason": reason,
                               "qos": egress_qos, "target_type": target_type, "findings": findings,
                               "destination": dest}, _EGRESS_VARIABLE)
        return ingress, egress


def render_lines(columns: LineColumns) -> list[str]:
    """The ingress and egress line of each message of ``columns`` (RecordLines.values): its templates' texts with
    the message's variable values (LineTemplate.render_encoded of both lines, inlined: two calls a message were
    ~10 % of the rendering). The text equals trusted_json_line's for the same values (tests)."""
    lines: list[str] = []
    append = lines.append
    now = columns.now
    now_text = json_timestamp(now)
    last_received, received_text = None, ""   # a source's batch often shares one receive time
    for entry, received, key, size, out_size, count in zip(columns.pairs, columns.received, columns.keys,
                                                            columns.sizes, columns.out_sizes, columns.redelivered,
                                                            strict=True):
        key_text, size_text, redelivered = json_string(key), str(size), str(count)
        if received != last_received:
            last_received, received_text = received, json_timestamp(received)
        line = entry[0].slots.copy()
        line[1::2] = received_text, key_text, size_text, redelivered
        append("".join(line))
        latency = int((now - received) * 1_000_000)
        line = entry[1].slots.copy()
        line[1::2] = now_text, key_text, size_text, str(out_size), str(latency) if latency > 0 else "0", redelivered
        append("".join(line))
    return lines


def mqtt_side(item: Inbound, out: Outbound | None) -> tuple[int, bool | None]:
    """The egress record's ``qos`` and the records' ``retained`` (docs/conversion-log.md): to MQTT, the QoS the
    route published at (to one client: what MqttTarget delivered at, ``extra["qos"]``) and that publication's
    RETAIN flag; from MQTT, the source's QoS and the publication's RETAIN flag; else the source's QoS and null."""
    pub = out.message if out is not None else None
    if isinstance(pub, MqttPublication):
        delivered = out.extra.get("qos") if out is not None else None
        return (delivered if isinstance(delivered, int) else pub.qos), pub.retain
    src = item.message
    return item.qos, (src.retain if isinstance(src, MqttPublication) else None)


_INT_MAX = 2**31 - 1   # the log's redelivery_count is an int: a larger count is written as this
_INGRESS_VARIABLE = ("event_time", "message_key", "source_size", "redelivery_count")
_EGRESS_VARIABLE = ("event_time", "message_key", "source_size", "target_size", "latency_us", "redelivery_count")
