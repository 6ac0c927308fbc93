"""The incremental ingest: the new complete lines of every log file are staged as slices (spark_audit.sources),
and a checkpointed file stream (trigger availableNow) over the slices parses each once; one job per
micro-batch writes its valid rows into the Parquet log and counts its problems.
A crash loses or doubles nothing: each micro-batch is recorded in the checkpoint's batches/ before its
files move into the log, until the audit state includes it (docs/conversion-log.md, `--incremental`).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from pyspark import SparkContext
from pyspark.sql import DataFrame, SparkSession

from spark_audit.carry import Carried, TailFile
from spark_audit.checked_read import read_checked
from spark_audit.ingest import (
    IngestResult,
    checksum_path,
    expand_paths,
    ingest_batch,
    ingest_checked,
    stream_logs,
)
from spark_audit.sources import file_key, remove_slices, slice_dir, slices_now, stage_new, unread_input

STAGING_DIR = "_incoming"  # inside the Parquet log; "_": never read as a partition
STREAM_DIR = "stream"  # in the checkpoint directory: Structured Streaming's own checkpoint
BATCHES_DIR = "batches"  # in the checkpoint directory: a record per micro-batch the state does not include yet

# Test-only hook: MQB_TEST_CRASH_AT=after-move (a micro-batch's files are in the log, the stream has not
# committed it) or after-commit (the stream committed, the audit has not written its state) makes the run
# die there as a crash would: the JVM is killed and the Python process exits at once. Read once at import;
# unset, it costs one string comparison per micro-batch.
TEST_CRASH_AT = os.environ.get("MQB_TEST_CRASH_AT", "")
TEST_CRASH_EXIT = 70


def _crash_for_tests(point: str) -> None:
    if TEST_CRASH_AT != point:
        return
    proc = getattr(SparkContext._gateway, "proc", None)  # the driver JVM pyspark started
    if proc is not None:
        # SIGKILL, then exit at once: waiting for the JVM to be reaped gave the main thread (in a py4j call
        # to the dying JVM) time to fail and exit with its own code first.
        proc.kill()
    os._exit(TEST_CRASH_EXIT)


@dataclass(slots=True)
class NewRows:
    """What this run's micro-batches delivered: their counts and the Parquet files holding their rows."""

    ingest: IngestResult = field(default_factory=IngestResult)
    batch_ids: list[int] = field(default_factory=list)
    files: list[TailFile] = field(default_factory=list)  # with the newest event time of their batch

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


def anything_new(checkpoint_dir: str, logs_dir: str) -> bool:
    """Whether an incremental run would read anything: lines not read before, slices staged and not yet
    read, or committed batches the audit state does not include (a run died in between)."""
    records = Path(checkpoint_dir) / BATCHES_DIR
    if records.is_dir() and any(f.suffix == ".json" and f.stem.isdigit() for f in records.iterdir()):
        return True
    return bool(slices_now(checkpoint_dir)) or unread_input(checkpoint_dir, expand_paths([logs_dir]))


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


def planned_slices(checkpoint_dir: str, batch_id: int) -> set[str] | None:
    """The slices micro-batch batch_id reads, from the stream's own logs (as read_before_ledger reads them):
    offsets/N names the file source's log entry ({"logOffset": N}, and N-1 the batch before), and that entry,
    sources/0/N (or N.compact, into which every tenth entry folds the earlier ones), lists a JSON object per
    file with its batchId. None when the logs do not say it plainly: Spark then reads the batch, which knows.
    """
    stream = Path(checkpoint_dir) / STREAM_DIR

    def log_offset(n: int) -> object:
        try:
            return json.loads((stream / "offsets" / str(n)).read_text().splitlines()[-1]).get("logOffset")
        except (OSError, ValueError, IndexError, AttributeError):
            return None

    if log_offset(batch_id) != batch_id or (batch_id > 0 and log_offset(batch_id - 1) != batch_id - 1):
        return None
    for name in (str(batch_id), f"{batch_id}.compact"):
        try:
            lines = (stream / "sources" / "0" / name).read_text().splitlines()
        except OSError:
            continue
        try:
            entries = [json.loads(line) for line in lines[1:]] if lines and lines[0] == "v1" else []
            paths = {file_key(str(e["path"])) for e in entries if e.get("batchId") == batch_id}
        except (ValueError, KeyError, TypeError, AttributeError):
            return None
        return paths or None
    return None


def _stream_id(checkpoint_dir: str) -> str:
    """The stream's id (its checkpoint's metadata): batch ids are unique only within one checkpoint."""
    metadata = Path(checkpoint_dir) / STREAM_DIR / "metadata"
    return str(json.loads(metadata.read_text().splitlines()[0])["id"])


def ingest_new_files(spark: SparkSession, logs_dir: str, parquet_dir: str, checkpoint_dir: str,
                     carried: Carried | None = None) -> NewRows:
    """Parse the lines not read before once: count every problem, append the valid rows to the log.

    The batches a crash left committed but unaudited come first (their records; carried: the state).
    """
    new = NewRows()
    for record in unaudited_batches(checkpoint_dir, carried or Carried()):
        new.add(record)
    staged = stage_new(checkpoint_dir, expand_paths([logs_dir]))
    waiting = slices_now(checkpoint_dir)
    waiting_keys = {file_key(str(p)) for p in waiting}

    def handle(batch: DataFrame, batch_id: int) -> None:
        staging = str(Path(parquet_dir) / STAGING_DIR / f"batch-{batch_id}")

        def before_move(counts: IngestResult, targets: list[str]) -> None:
            counts.add_staged(replace(staged, damaged={}, notes={}))  # name source files, not slices
            _remove_earlier_attempt(checkpoint_dir, batch_id)
            write_record(checkpoint_dir, BatchRecord(batch_id, counts, tuple(targets)))

        name = f"b{batch_id}-{_stream_id(checkpoint_dir)}"
        # The usual batch (every slice staged before the stream started) of valid records only: read by the
        # gateway's checked reader (spark_audit.checked_read); any other, or any doubt: parsed by Spark.
        planned = planned_slices(checkpoint_dir, batch_id)
        table = read_checked(sorted(planned)) if planned is not None and planned == waiting_keys else None
        if table is not None:
            counts, files = ingest_checked(table, staging, parquet_dir, name, before_move)
        else:
            counts, files = ingest_batch(batch, staging, parquet_dir, name, before_move)
        _crash_for_tests("after-move")
        new.add(BatchRecord(batch_id, counts, tuple(files)))

    query = (
        stream_logs(spark, str(slice_dir(checkpoint_dir)))
        .writeStream.foreachBatch(handle)
        .option("checkpointLocation", str(Path(checkpoint_dir) / STREAM_DIR))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    _crash_for_tests("after-commit")
    remove_slices(waiting)  # read and committed: the stream never reads them again
    new.ingest.damaged.update(staged.damaged)
    new.ingest.notes.update(staged.notes)
    return new
