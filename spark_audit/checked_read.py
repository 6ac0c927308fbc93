"""The quick read of log files that hold nothing but valid records: the gateway's own checked reader
(bridge.convlog_parquet.read_log, the one that writes Parquet sidecars: pyarrow, every line one record keeping
the field rules, or the whole file refused) reads them, and the table is written as the Parquet log's files
directly, instead of Spark parsing the JSON: 100k lines in ~0.4 s instead of 1.0-1.3 s warm (an incremental
batch), 1M in a few seconds instead of half a minute cold (a one-shot ingest). A file it refuses in any way (a
bad line, a blank one, a field Spark would read otherwise) is parsed by Spark as before, which counts each
problem and quotes the bad lines. The rows stored are the same either way, less the key hash columns, which
the audit computes for files without them (docs/audit.md, "Running it", "Parquet sidecars").
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

MAX_BYTES = 128 << 20   # more in one read (a first run over a full directory): parsed by Spark, which streams it
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Written:
    """What write_checked stored: that many valid rows, their event times' span."""

    rows: int
    min_time: datetime
    max_time: datetime


def read_checked(paths: list[str]) -> Any:  # noqa: ANN401 - a pyarrow Table, or None
    """The records of the slices as one table, when every line of every slice is a valid record; else None."""
    if not paths or importlib.util.find_spec("pyarrow") is None:
        return None
    try:
        if sum(os.path.getsize(p) for p in paths) > MAX_BYTES:
            return None
        import pyarrow as pa

        from bridge.convlog_parquet import Rejected, read_log

        tables = []
        for path in paths:
            try:
                tables.append(read_log(Path(path).read_bytes(), threads=True))
            except Rejected:
                return None
    except OSError:
        return None
    return pa.concat_tables(tables)


def write_checked(table: Any, directory: str | Path, name: str) -> Written:  # noqa: ANN401 - a pyarrow Table
    """Write the table into directory's date=D/hour=H directories (as Spark partitions the log, in UTC), one file
    f"{name}.parquet" in each."""
    with HourFiles(directory, name) as files:
        return files.add(table)


class HourFiles:
    """The Parquet log's files of tables added one after another: directory/date=D/hour=H/f"{name}.parquet"
    (as Spark partitions the log, in UTC), each table's rows of an hour appended to that hour's one file (a row
    group each). One file per hour, not one per table and hour: Spark pays for every file it opens, and a cold
    audit of 1M rows took 1 s longer from the 96 files of 4 tables than from 24 (bench/HISTORY.md, session 25).
    Use it as a context manager: the files are complete once it is closed."""

    def __init__(self, directory: str | Path, name: str) -> None:
        self.directory = Path(directory)
        self.name = name
        self._writers: dict[int, Any] = {}   # hour (microseconds since the epoch) -> its pq.ParquetWriter

    def add(self, table: Any) -> Written:  # noqa: ANN401 - a pyarrow Table
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        from bridge.convlog_parquet import dictionary_fields

        times = table.column("event_time")   # timestamp[us, UTC]
        micros = times.cast(pa.int64())
        hours = pc.floor_temporal(times, unit="hour").cast(pa.int64())
        counts = pc.value_counts(hours)
        if len(counts) > 1:   # rows of several hours: sorted by hour (stable), each hour's rows one slice
            order = pc.sort_indices(hours)
            table, counts = table.take(order), pc.value_counts(hours.take(order))
        start = 0
        for hour, n in zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True):
            writer = self._writers.get(hour)
            if writer is None:
                first = EPOCH + timedelta(microseconds=hour)
                part = self.directory / f"date={first.date().isoformat()}" / f"hour={first.hour}"
                part.mkdir(parents=True, exist_ok=True)
                writer = self._writers[hour] = pq.ParquetWriter(part / f"{self.name}.parquet", table.schema,
                                                                use_dictionary=dictionary_fields(table.schema))
            rows = table.slice(start, n)
            start += n
            if not rows.schema.equals(writer.schema):   # the same fields typed alike; a nullability may differ
                rows = rows.cast(writer.schema)
            writer.write_table(rows)
        lo, hi = pc.min_max(micros).values()
        return Written(table.num_rows, EPOCH + timedelta(microseconds=lo.as_py()),
                       EPOCH + timedelta(microseconds=hi.as_py()))

    def close(self) -> None:
        writers, self._writers = list(self._writers.values()), {}
        failed: BaseException | None = None
        for writer in writers:   # every one closed (its file descriptor), the first failure raised
            try:
                writer.close()
            except BaseException as e:  # noqa: BLE001 - re-raised below
                failed = failed or e
        if failed is not None:
            raise failed

    def __enter__(self) -> HourFiles:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is None:
            self.close()
            return
        with contextlib.suppress(Exception):   # the error in flight is the one to report
            self.close()
