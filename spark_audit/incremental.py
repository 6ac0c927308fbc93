"""Incremental audit: a checkpointed file stream (trigger availableNow) audits only new log files.

Each micro-batch is parsed once: one job writes its valid rows to Parquet and counts its problems. The
audit reads exactly the files that job wrote, and matches keys against the tail the previous run carried
over (spark_audit.carry) instead of the Parquet log, which is read only when the tail does not reach back
far enough (a late file older than the tail, or no usable state).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import reduce
from pathlib import Path
from urllib.parse import unquote, urlparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_audit.audit import (
    AUDIT_COLUMNS,
    AuditConfig,
    AuditData,
    AuditResult,
    audit_frame,
    has_partitions,
    in_window,
    run_audit,
    time_range,
)
from spark_audit.carry import KEY_COLUMNS, Carried, TailFile, next_tail, read_state, read_tail, write_state
from spark_audit.ingest import IngestResult, ingest_batch, stream_logs
from spark_audit.schema import record_schema

ONE_MICROSECOND = timedelta(microseconds=1)
FILE_PATH = "_file_path"
STAGING_DIR = "_incoming"  # inside the Parquet log; "_": never read as a partition
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(slots=True)
class NewRows:
    """What this run's micro-batches delivered: their counts and the Parquet files holding their rows."""

    ingest: IngestResult = field(default_factory=IngestResult)
    batch_ids: list[int] = field(default_factory=list)
    files: list[TailFile] = field(default_factory=list)  # with the newest event time of their batch

    def rows(self, spark: SparkSession) -> DataFrame:
        """The new rows, read from exactly the files written (schema given: nothing inferred or listed)."""
        return spark.read.schema(record_schema()).parquet(*[f.path for f in self.files]).select(*AUDIT_COLUMNS)

    def names(self) -> set[str]:
        return {Path(f.path).name for f in self.files}


def ingest_new_files(spark: SparkSession, logs_dir: str, parquet_dir: str, checkpoint_dir: str) -> NewRows:
    """Parse the files not seen before once: count every problem, append the valid rows to the log."""
    new = NewRows()

    def handle(batch: DataFrame, batch_id: int) -> None:
        staging = str(Path(parquet_dir) / STAGING_DIR / f"batch-{batch_id}")
        counts, files = ingest_batch(batch, staging, parquet_dir)
        new.ingest.merge(counts)
        new.batch_ids.append(batch_id)
        if counts.max_time is not None:
            new.files.extend(TailFile(f, counts.max_time) for f in files)

    query = (
        stream_logs(spark, logs_dir)
        .writeStream.foreachBatch(handle)
        .option("checkpointLocation", str(Path(checkpoint_dir) / "stream"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return new


def _null_padded(keys: DataFrame) -> DataFrame:
    """Key-column rows with the other audit columns as typed nulls (they are never counted)."""
    types = {f.name: f.dataType for f in record_schema().fields}
    return keys.select(*[F.col(c) if c in KEY_COLUMNS else F.lit(None).cast(types[c]).alias(c)
                         for c in AUDIT_COLUMNS])


def _log_range(spark: SparkSession, parquet_dir: str, lo: datetime, hi: datetime | None,
               exclude: set[str]) -> DataFrame:
    """The Parquet log's rows in [lo, hi), without the files this run wrote (plus their file's path)."""
    rows = spark.read.parquet(parquet_dir).where(time_range(lo, hi))
    if exclude:
        rows = rows.where(~F.col("_metadata.file_name").isin(sorted(exclude)))
    return rows.select(*KEY_COLUMNS, F.col("_metadata.file_path").alias(FILE_PATH))


@dataclass(slots=True)
class Earlier:
    """Rows ingested before this run that keys match against; where the next run's tail comes from."""

    rows: list[DataFrame]  # key columns
    complete_from: datetime | None  # the carried files hold every row from here on (None: all of them)
    log: DataFrame | None = None  # rows read from the log when there was no usable tail (with FILE_PATH)


def earlier_rows(spark: SparkSession, parquet_dir: str, carried: Carried, new: NewRows, prior_log: bool,
                 lo: datetime) -> Earlier:
    """The carried tail, plus the Parquet log from lo where the tail does not reach back that far."""
    if carried.continues(new.batch_ids[0]) and carried.tail_start is not None:
        tail = read_tail(spark, carried)
        rows = [] if tail is None else [tail]
        if lo < carried.tail_start:  # a late file: older rows come from the log (they stay out of the tail)
            rows.append(_log_range(spark, parquet_dir, lo, carried.tail_start, new.names()).drop(FILE_PATH))
        return Earlier(rows, carried.tail_start)
    if prior_log:  # no usable tail: the log itself, as the audit read it before there was a tail
        log = _log_range(spark, parquet_dir, lo, None, new.names())
        return Earlier([log.drop(FILE_PATH)], lo, log)
    return Earlier([], None)


def _tail_files(carried: Carried, earlier: Earlier, new: NewRows, tail_start: datetime) -> tuple[TailFile, ...]:
    """The next tail: carried and new files with rows from tail_start on; after a log read, its files."""
    if earlier.log is None:
        return next_tail(carried, tail_start, new.files)
    newest = earlier.log.groupBy(FILE_PATH).agg(F.unix_micros(F.max("event_time")).alias("hi")).collect()
    from_log = [TailFile(local_path(str(r[FILE_PATH])), EPOCH + timedelta(microseconds=int(r["hi"])))
                for r in newest]
    return next_tail(Carried(), tail_start, [*from_log, *new.files])


def local_path(uri: str) -> str:
    """A local file path from the file: URI Spark reports in _metadata.file_path (others unchanged)."""
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


def _union(frames: list[DataFrame]) -> DataFrame:
    return reduce(DataFrame.unionByName, frames)


def new_window(config: AuditConfig, new: IngestResult, last_as_of: datetime | None) -> AuditConfig:
    """The window the new rows cover, reopened by the grace period so pending ingress gets re-checked.

    Only the new rows are counted (volume, failures, conversions, latency, sizes, unexpected egress,
    duplicates with a new copy); the reopened part was counted by the last run and only serves to match
    keys. A loss is reported when its ingress becomes older than the grace period.
    """
    assert new.min_time is not None and new.max_time is not None
    grace = timedelta(seconds=config.grace_seconds)
    since = new.min_time if last_as_of is None else min(new.min_time, last_as_of - grace)
    until = new.max_time + ONE_MICROSECOND
    if config.since is not None:
        since = max(since, config.since)
    if config.until is not None:
        until = min(until, config.until)
    return replace(config, since=since, until=until, incremental=True)


def audit_new(spark: SparkSession, parquet_dir: str, checkpoint_dir: str, new: NewRows, carried: Carried,
              prior_log: bool, config: AuditConfig) -> AuditResult:
    """Audit the new rows' window against the carried tail; record the next run's tail and state."""
    if not new.files or new.ingest.min_time is None:
        return _audit_nothing_new(spark, checkpoint_dir, new, carried, config)
    window = new_window(config, new.ingest, carried.as_of)
    assert window.since is not None and window.until is not None
    grace = timedelta(seconds=window.grace_seconds)
    lo, hi = window.since - grace, window.until + grace
    earlier = earlier_rows(spark, parquet_dir, carried, new, prior_log, lo)
    in_range = time_range(lo, hi, partitioned=False)
    sources = [audit_frame(new.rows(spark).where(in_range), window, in_window(window))]
    sources += [audit_frame(_null_padded(e.where(in_range)), window, F.lit(False)) for e in earlier.rows]
    as_of = window.until
    result = run_audit(AuditData(_union(sources), as_of, window))

    tail_start = as_of - 2 * grace
    if earlier.complete_from is not None:
        tail_start = max(tail_start, earlier.complete_from)
    files = _tail_files(carried, earlier, new, tail_start)
    write_state(checkpoint_dir, Carried(as_of, new.batch_ids[-1], tail_start, files))
    return result


def _audit_nothing_new(spark: SparkSession, checkpoint_dir: str, new: NewRows, carried: Carried,
                       config: AuditConfig) -> AuditResult:
    """No valid new row: an empty window at the last "as of"; the state moves past bad-only batches."""
    anchor = carried.as_of or EPOCH
    window = replace(config, since=anchor, until=anchor, incremental=True)
    empty = spark.createDataFrame([], record_schema())
    result = run_audit(AuditData(audit_frame(empty, window, F.lit(False)), anchor, window))
    if new.batch_ids and carried.continues(new.batch_ids[0]):
        write_state(checkpoint_dir, replace(carried, batch_id=new.batch_ids[-1]))
    return result


def run_incremental(
    spark: SparkSession, logs_dir: str, parquet_dir: str, checkpoint_dir: str, config: AuditConfig,
    timings: dict[str, float] | None = None,
) -> tuple[IngestResult, AuditResult]:
    """Ingest only new files, then audit the time window they cover (plus pending grace).

    timings, when given, gets the wall seconds of the stream ("stream") and of the audit ("audit").
    """
    carried = read_state(checkpoint_dir)
    prior_log = has_partitions(parquet_dir)
    started = time.perf_counter()
    new = ingest_new_files(spark, logs_dir, parquet_dir, checkpoint_dir)
    streamed = time.perf_counter()
    result = audit_new(spark, parquet_dir, checkpoint_dir, new, carried, prior_log, config)
    if timings is not None:
        timings["stream"] = streamed - started
        timings["audit"] = time.perf_counter() - streamed
    return new.ingest, result

