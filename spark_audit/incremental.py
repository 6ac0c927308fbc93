"""Incremental audit: a checkpointed file stream (trigger availableNow) audits only new log files.

Each micro-batch is parsed once: one job writes its valid rows to Parquet and counts its problems. The
audit reads exactly the files that job wrote, and matches keys against the tail the previous run carried
over (spark_audit.carry) instead of the Parquet log, which is read only when the tail does not reach back
far enough (a late file older than the tail, or no usable state).

A crash loses or doubles nothing. Before a micro-batch's files move into the log, a record of the batch
(its counts and the files' names, which carry the batch id) is written to the checkpoint's batches/; a
re-run of a batch the stream had not committed (the process died after the move) first removes the files
the earlier attempt moved. A recorded batch the stream committed but no audit state includes yet (the
process died between the two) is audited with the run's new rows. Records are removed once the state
includes their batch.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import reduce
from pathlib import Path
from urllib.parse import unquote, urlparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from spark_audit.audit import (
    AS_OF_COLUMN,
    AUDIT_COLUMNS,
    AuditConfig,
    AuditData,
    AuditResult,
    audit_frame,
    has_partitions,
    micros,
    run_audit,
    time_range,
)
from spark_audit.carry import (
    KEY_COLUMNS,
    Carried,
    TailFile,
    next_tail,
    read_state,
    tail_file_rows,
    write_state,
)
from spark_audit.frames import empty_frame, local_frame
from spark_audit.ingest import IngestResult, checksum_path, ingest_batch, stream_logs
from spark_audit.schema import stored_schema

ONE_MICROSECOND = timedelta(microseconds=1)
FILE_PATH = "_file_path"
STAGING_DIR = "_incoming"  # inside the Parquet log; "_": never read as a partition
STREAM_DIR = "stream"  # in the checkpoint directory: Structured Streaming's own checkpoint
BATCHES_DIR = "batches"  # in the checkpoint directory: a record per micro-batch the state does not include yet
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# Test-only hook: MQB_TEST_CRASH_AT=after-move (a micro-batch's files are in the log, the stream has not
# committed it) or after-commit (the stream committed, the audit has not written its state) makes the run
# die there as a crash would: the JVM is killed and the Python process exits at once. Read once at import;
# unset, it costs one string comparison per micro-batch.
TEST_CRASH_AT = os.environ.get("MQB_TEST_CRASH_AT", "")
TEST_CRASH_EXIT = 70


def _crash_for_tests(point: str) -> None:
    if TEST_CRASH_AT != point:
        return
    from pyspark import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)  # the driver JVM pyspark started
    if proc is not None:
        proc.kill()
        proc.wait()
    os._exit(TEST_CRASH_EXIT)


@dataclass(slots=True)
class NewRows:
    """What this run's micro-batches delivered: their counts and the Parquet files holding their rows."""

    ingest: IngestResult = field(default_factory=IngestResult)
    batch_ids: list[int] = field(default_factory=list)
    files: list[TailFile] = field(default_factory=list)  # with the newest event time of their batch

    def rows(self, spark: SparkSession) -> DataFrame:
        """The new rows, read from exactly the files written (schema given: nothing inferred or listed)."""
        return spark.read.schema(stored_schema()).parquet(*[f.path for f in self.files]).select(*AUDIT_COLUMNS)

    def names(self) -> set[str]:
        return {Path(f.path).name for f in self.files}

    def add(self, record: BatchRecord) -> None:
        self.ingest.merge(record.ingest)
        self.batch_ids.append(record.batch_id)
        if record.ingest.max_time is not None:
            self.files.extend(TailFile(f, record.ingest.max_time) for f in record.files)


@dataclass(frozen=True, slots=True)
class BatchRecord:
    """A micro-batch's counts and the log files holding its rows, kept until the audit state includes it."""

    batch_id: int
    ingest: IngestResult
    files: tuple[str, ...]


def _record_path(checkpoint_dir: str, batch_id: int) -> Path:
    return Path(checkpoint_dir) / BATCHES_DIR / f"{batch_id}.json"


def write_record(checkpoint_dir: str, record: BatchRecord) -> None:
    """Write a batch's record atomically (before its files move into the log)."""
    path = _record_path(checkpoint_dir, record.batch_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps({"batch_id": record.batch_id, "ingest": record.ingest.as_dict(),
                               "files": list(record.files)}) + "\n")
    os.replace(tmp, path)


def read_record(path: Path) -> BatchRecord:
    """A batch record; one that cannot be read is an error naming the file (its rows are not guessed)."""
    try:
        raw = json.loads(path.read_text())
        return BatchRecord(int(raw["batch_id"]), IngestResult.from_dict(raw["ingest"]),
                           tuple(str(f) for f in raw["files"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise RuntimeError(f"{path}: unreadable micro-batch record ({e!r}); its batch's files are listed there") from e


def unaudited_batches(checkpoint_dir: str, carried: Carried) -> list[BatchRecord]:
    """Batches the stream committed that the audit state does not include (the last run died in between).

    A recorded batch without a commit is left out: the stream runs it again. Records of batches the state
    includes (the last run died before removing them) are removed.
    """
    directory = Path(checkpoint_dir) / BATCHES_DIR
    if not directory.is_dir():
        return []
    commits = Path(checkpoint_dir) / STREAM_DIR / "commits"
    records = []
    for path in directory.glob("*.json"):
        if not path.stem.isdigit():
            continue
        batch_id = int(path.stem)
        if carried.batch_id is not None and batch_id <= carried.batch_id:
            path.unlink(missing_ok=True)
        elif (commits / str(batch_id)).is_file():
            records.append(read_record(path))
    return sorted(records, key=lambda r: r.batch_id)


def remove_records(checkpoint_dir: str, batch_ids: list[int]) -> None:
    """Forget the records of batches the audit state now includes."""
    for batch_id in batch_ids:
        _record_path(checkpoint_dir, batch_id).unlink(missing_ok=True)


def _remove_earlier_attempt(checkpoint_dir: str, batch_id: int) -> None:
    """Remove the files an earlier, uncommitted attempt at this batch moved into the log."""
    path = _record_path(checkpoint_dir, batch_id)
    if not path.exists():
        return
    for f in read_record(path).files:
        Path(f).unlink(missing_ok=True)
        checksum_path(Path(f)).unlink(missing_ok=True)


def _stream_id(checkpoint_dir: str) -> str:
    """The stream's id (its checkpoint's metadata): batch ids are unique only within one checkpoint."""
    metadata = Path(checkpoint_dir) / STREAM_DIR / "metadata"
    return str(json.loads(metadata.read_text().splitlines()[0])["id"])


def ingest_new_files(spark: SparkSession, logs_dir: str, parquet_dir: str, checkpoint_dir: str,
                     carried: Carried | None = None) -> NewRows:
    """Parse the files not seen before once: count every problem, append the valid rows to the log.

    The batches a crash left committed but unaudited come first (their records; carried: the state).
    """
    new = NewRows()
    for record in unaudited_batches(checkpoint_dir, carried or Carried()):
        new.add(record)

    def handle(batch: DataFrame, batch_id: int) -> None:
        staging = str(Path(parquet_dir) / STAGING_DIR / f"batch-{batch_id}")

        def before_move(counts: IngestResult, targets: list[str]) -> None:
            _remove_earlier_attempt(checkpoint_dir, batch_id)
            write_record(checkpoint_dir, BatchRecord(batch_id, counts, tuple(targets)))

        name = f"b{batch_id}-{_stream_id(checkpoint_dir)}"
        counts, files = ingest_batch(batch, staging, parquet_dir, name, before_move)
        _crash_for_tests("after-move")
        new.add(BatchRecord(batch_id, counts, tuple(files)))

    query = (
        stream_logs(spark, logs_dir)
        .writeStream.foreachBatch(handle)
        .option("checkpointLocation", str(Path(checkpoint_dir) / STREAM_DIR))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    _crash_for_tests("after-commit")
    return new


def _null_padded(keys: DataFrame) -> DataFrame:
    """Key-column rows with the other audit columns as typed nulls (they are never counted)."""
    types = {f.name: f.dataType for f in stored_schema().fields}
    return keys.select(*[F.col(c) if c in KEY_COLUMNS else F.lit(None).cast(types[c]).alias(c)
                         for c in AUDIT_COLUMNS])


def _log_range(spark: SparkSession, parquet_dir: str, lo: datetime, hi: datetime | None,
               exclude: set[str]) -> DataFrame:
    """The Parquet log's rows in [lo, hi), without the files this run wrote (plus their file's path)."""
    rows = spark.read.schema(stored_schema(partitions=True)).parquet(parquet_dir).where(time_range(lo, hi))
    if exclude:
        rows = rows.where(~F.col("_metadata.file_name").isin(sorted(exclude)))
    return rows.select(*KEY_COLUMNS, F.col("_metadata.file_path").alias(FILE_PATH))


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
    as_of = window.until
    bounds = run_bounds(spark, lo, hi, window, as_of, earlier.complete_from if earlier.tail is not None else None)
    sources = [_bounded(new.rows(spark), bounds, counted=True)]
    if earlier.tail is not None:
        sources.append(_bounded(_null_padded(earlier.tail), bounds, counted=False, tail=True))
    sources += [_bounded(_null_padded(e), bounds, counted=False) for e in earlier.rows]
    result = run_audit(AuditData(_union(sources), as_of, window))

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
    """Ingest only new files, then audit the time window they cover (plus pending grace).

    timings, when given, gets the wall seconds of the stream ("stream") and of the audit ("audit").
    """
    carried = read_state(checkpoint_dir)
    prior_log = has_partitions(parquet_dir)
    started = time.perf_counter()
    new = ingest_new_files(spark, logs_dir, parquet_dir, checkpoint_dir, carried)
    streamed = time.perf_counter()
    result = audit_new(spark, parquet_dir, checkpoint_dir, new, carried, prior_log, config)
    if timings is not None:
        timings["stream"] = streamed - started
        timings["audit"] = time.perf_counter() - streamed
    return new.ingest, result

