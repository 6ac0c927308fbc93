"""Incremental audit: the rows the incremental ingest (spark_audit.increments) delivered are audited against the
tail the previous run carried over (spark_audit.carry) instead of the Parquet log, which is read only when
the tail does not reach back far enough (a late file older than the tail, or no usable state).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import reduce
from typing import TypeVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from spark_audit import parquet_log
from spark_audit.audit import has_partitions, run_audit
from spark_audit.carry import KEY_COLUMNS, Carried, TailFile, next_tail, read_state, tail_file_rows, write_state
from spark_audit.findings import AuditResult
from spark_audit.frames import empty_frame, local_frame
from spark_audit.fs import local_path
from spark_audit.increments import NewRows, ingest_new_files, remove_records
from spark_audit.ingest import IngestResult
from spark_audit.parquet_log import has_rows
from spark_audit.schema import stored_schema
from spark_audit.scope import AS_OF_COLUMN, AUDIT_COLUMNS, AuditConfig, AuditData, audit_frame, micros, time_range

ONE_MICROSECOND = timedelta(microseconds=1)
FILE_PATH = "_file_path"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def new_rows(spark: SparkSession, new: NewRows) -> DataFrame:
    """The new rows, read from exactly the files written (schema given: nothing inferred or listed)."""
    return spark.read.schema(stored_schema()).parquet(*[f.path for f in new.files]).select(*AUDIT_COLUMNS)


def _null_padded(keys: DataFrame) -> DataFrame:
    """Key-column rows with the other audit columns as typed nulls (they are never counted)."""
    types = {f.name: f.dataType for f in stored_schema().fields}
    return keys.select(*[F.col(c) if c in KEY_COLUMNS else F.lit(None).cast(types[c]).alias(c)
                         for c in AUDIT_COLUMNS])


def _log_range(spark: SparkSession, parquet_dir: str, lo: datetime, hi: datetime | None,
               exclude: set[str]) -> DataFrame:
    """The Parquet log's rows in [lo, hi), without the files this run wrote (plus their file's path)."""
    rows = (spark.read.schema(stored_schema(partitions=True)).parquet(parquet_dir) if has_partitions(parquet_dir)
            else empty_frame(spark, stored_schema(partitions=True))).where(time_range(lo, hi))
    if exclude:
        rows = rows.where(~F.col("_metadata.file_name").isin(sorted(exclude)))
    rows = rows.select(*KEY_COLUMNS, F.col("_metadata.file_path").alias(FILE_PATH))
    refs = parquet_log.in_range(parquet_log.checked(parquet_dir), lo, hi)
    if not refs:
        return rows
    # sidecars a one-shot ingest read in place (spark_audit/parquet_log.py); as tail files later, their rows
    # are read without key hashes, which an incremental audit computes (keys.py: hashes_stored is False)
    side = parquet_log.sidecar_rows(spark, refs).where(time_range(lo, hi))
    return rows.unionByName(side.select(*KEY_COLUMNS, F.col("_metadata.file_path").alias(FILE_PATH)))


@dataclass(slots=True)
class Earlier:
    """Rows ingested before this run that keys match against; where the next run's tail comes from."""

    rows: list[DataFrame]  # key columns
    complete_from: datetime | None  # the carried files hold every row from here on (None: all of them)
    log: DataFrame | None = None  # rows read from the log when there was no usable tail (with FILE_PATH)
    tail: DataFrame | None = None  # the carried files' rows (key columns), to be cut at tail_start


def earlier_rows(spark: SparkSession, parquet_dir: str, carried: Carried, new: NewRows, prior_log: bool,
                 lo: datetime) -> Earlier:
    """The carried tail, plus the Parquet log from lo where the tail does not reach back that far."""
    if carried.continues(new.batch_ids[0]) and carried.tail_start is not None:
        rows = []
        if lo < carried.tail_start:  # a late file: older rows come from the log (they stay out of the tail)
            rows.append(_log_range(spark, parquet_dir, lo, carried.tail_start, new.names()).drop(FILE_PATH))
        return Earlier(rows, carried.tail_start, tail=tail_file_rows(spark, carried))
    if prior_log:  # no usable tail: the log itself, as the audit read it before there was a tail
        log = _log_range(spark, parquet_dir, lo, None, new.names())
        return Earlier([log.drop(FILE_PATH)], lo, log)
    return Earlier([], None)


# The run's bounds as a one-row frame joined to every row (epoch microseconds). As literals they would
# be compiled into the generated code, which then differs every run: each run compiled ~16 classes anew
# (Janino) and ran them interpreted until the JIT caught up. As columns, the code is the same every run.
LO, HI, SINCE, UNTIL, TAIL_START = "_lo_us", "_hi_us", "_since_us", "_until_us", "_tail_start_us"


def run_bounds(spark: SparkSession, lo: datetime, hi: datetime, window: AuditConfig, as_of: datetime,
               tail_start: datetime | None) -> DataFrame:
    """One row: the matching range [lo, hi), the window [since, until), "as of" and the tail's start."""
    assert window.since is not None and window.until is not None
    names = (LO, HI, SINCE, UNTIL, AS_OF_COLUMN, TAIL_START)
    values = (lo, hi, window.since, window.until, as_of, tail_start if tail_start is not None else lo)
    schema = StructType([StructField(n, LongType(), False) for n in names])
    return local_frame(spark, [tuple(micros(v) for v in values)], schema)


def _bounded(rows: DataFrame, bounds: DataFrame, counted: bool, tail: bool = False) -> DataFrame:
    """Audit-frame rows in [lo, hi) (and from tail_start on for the tail) with in_window, counted, "as of"."""
    t = F.unix_micros("event_time")
    joined = rows.crossJoin(F.broadcast(bounds))
    keep = (t >= F.col(LO)) & (t < F.col(HI))
    if tail:
        keep = keep & (t >= F.col(TAIL_START))
    window = (t >= F.col(SINCE)) & (t < F.col(UNTIL))
    return joined.where(keep).select(*AUDIT_COLUMNS, window.alias("in_window"),
                                     (window if counted else F.lit(False)).alias("counted"), AS_OF_COLUMN)


def _tail_files(carried: Carried, earlier: Earlier, new: NewRows, tail_start: datetime) -> tuple[TailFile, ...]:
    """The next tail: carried and new files with rows from tail_start on; after a log read, its files."""
    if earlier.log is None:
        return next_tail(carried, tail_start, new.files)
    newest = earlier.log.groupBy(FILE_PATH).agg(F.unix_micros(F.max("event_time")).alias("hi")).collect()
    from_log = [TailFile(local_path(str(r[FILE_PATH])), EPOCH + timedelta(microseconds=int(r["hi"])))
                for r in newest]
    return next_tail(Carried(), tail_start, [*from_log, *new.files])


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


ADAPTIVE = "spark.sql.adaptive.enabled"
T = TypeVar("T")


def without_adaptive_plans(spark: SparkSession, work: Callable[[], T]) -> T:
    """work() with adaptive query execution off. An incremental audit's inputs are small and its plans are the
    same run after run; AQE made each shuffle stage a job of its own (13 jobs a run instead of 9), and a
    tick's audit took 1.5-2.7 s with it off against 1.9-4.0 s on (bench/HISTORY.md, session 23)."""
    before = spark.conf.get(ADAPTIVE)
    spark.conf.set(ADAPTIVE, "false")
    try:
        return work()
    finally:
        spark.conf.set(ADAPTIVE, before)


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
    as_of = window.until
    bounds = run_bounds(spark, lo, hi, window, as_of, earlier.complete_from if earlier.tail is not None else None)
    sources = [_bounded(new_rows(spark, new), bounds, counted=True)]
    if earlier.tail is not None:
        sources.append(_bounded(_null_padded(earlier.tail), bounds, counted=False, tail=True))
    sources += [_bounded(_null_padded(e), bounds, counted=False) for e in earlier.rows]
    result = without_adaptive_plans(spark, lambda: run_audit(AuditData(_union(sources), as_of, window)))

    tail_start = as_of - 2 * grace
    if earlier.complete_from is not None:
        tail_start = max(tail_start, earlier.complete_from)
    files = _tail_files(carried, earlier, new, tail_start)
    write_state(checkpoint_dir, Carried(as_of, new.batch_ids[-1], tail_start, files))
    remove_records(checkpoint_dir, new.batch_ids)
    return result


def _audit_nothing_new(spark: SparkSession, checkpoint_dir: str, new: NewRows, carried: Carried,
                       config: AuditConfig) -> AuditResult:
    """No valid new row: an empty window at the last "as of"; the state moves past bad-only batches."""
    anchor = carried.as_of or EPOCH
    window = replace(config, since=anchor, until=anchor, incremental=True)
    empty = empty_frame(spark, stored_schema())
    result = run_audit(AuditData(audit_frame(empty, window, F.lit(False)), anchor, window))
    if new.batch_ids and carried.continues(new.batch_ids[0]):
        write_state(checkpoint_dir, replace(carried, batch_id=new.batch_ids[-1]))
    remove_records(checkpoint_dir, new.batch_ids)  # without a state to move on, they were reported now
    return result


def run_incremental(
    spark: SparkSession, logs_dir: str, parquet_dir: str, checkpoint_dir: str, config: AuditConfig,
    timings: dict[str, float] | None = None,
) -> tuple[IngestResult, AuditResult]:
    """Ingest only the complete lines not read before (new files, the new end of growing ones), then audit
    the time window they cover (plus pending grace).

    timings, when given, gets the wall seconds of the read ("read": staging and ingesting the new lines) and
    of the audit ("audit").
    """
    carried = read_state(checkpoint_dir)
    prior_log = has_rows(parquet_dir, has_partitions(parquet_dir))
    started = time.perf_counter()
    new = ingest_new_files(spark, logs_dir, parquet_dir, checkpoint_dir, carried)
    read = time.perf_counter()
    result = audit_new(spark, parquet_dir, checkpoint_dir, new, carried, prior_log, config)
    if timings is not None:
        timings["read"] = read - started
        timings["audit"] = time.perf_counter() - read
    return new.ingest, result
