"""The incremental ingest: the new complete lines of every log file are staged as slices (spark_audit.sources),
and each run reads every waiting slice once as one numbered batch, which writes its valid rows into the
Parquet log and counts its problems. The batches are numbered and committed in a ledger of their own
(OUT/checkpoint/batches.json), so a crash loses or doubles nothing: a batch is recorded in batches/N.json
before its files move into the log, committed after, and its record kept until the audit state includes it
(docs/audit.md, `--incremental`).

Until session 27 a Structured Streaming file source (trigger availableNow) read the slices and its checkpoint
did this bookkeeping; starting its query cost 0.3-0.6 s of each `--every` tick (1.8 s in the JVM's first).
A checkpoint that stream left is taken over once (take_over_stream).
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from pyspark import SparkContext
from pyspark.sql import SparkSession

from spark_audit.carry import Carried, TailFile
from spark_audit.checked_read import read_checked
from spark_audit.ingest import IngestResult, checksum_path, expand_paths, ingest_batch, ingest_checked, read_logs
from spark_audit.sources import file_key, remove_slices, slice_dir, slices_now, stage_new, unread_input

STAGING_DIR = "_incoming"  # inside the Parquet log; "_": never read as a partition
BATCH_LEDGER = "batches.json"  # in the checkpoint directory: the ledger's id and the last batch committed
LEDGER_VERSION = 1
BATCHES_DIR = "batches"  # in the checkpoint directory: a record per batch the state does not include yet
STREAM_DIR = "stream"  # in the checkpoint directory: the Structured Streaming checkpoint of earlier versions
LOCK_FILE = ".lock"  # in the checkpoint directory: held by the incremental run using it (its pid inside)

# Test-only hook: MQB_TEST_CRASH_AT=after-move (a batch's files are in the log, the batch is not committed)
# or after-commit (committed, its slices not yet removed, the audit has not written its state) makes the run
# die there as a crash would: the JVM is killed and the Python process exits at once. Read once at import;
# unset, it costs one string comparison per batch.
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


@contextmanager
def checkpoint_lock(checkpoint_dir: str) -> Iterator[None]:
    """Hold the checkpoint for one incremental run (an exclusive flock on OUT/checkpoint/.lock, not waited
    for): two runs at once could stage the same lines twice or commit two batches under one id. A run that
    finds it held fails at once with an error naming the holder's pid; the lock goes with the process."""
    path = Path(checkpoint_dir) / LOCK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip()
            raise RuntimeError(f"{checkpoint_dir} is in use by another incremental audit"
                               f"{f' (pid {holder})' if holder.isdigit() else ''}: one run at a time per --out "
                               "directory") from None
        try:
            lock.truncate(0)
            lock.write(f"{os.getpid()}\n")
            lock.flush()
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@dataclass(frozen=True, slots=True)
class BatchRecord:
    """A batch's counts, the log files holding its rows and the slices it read, kept until the audit state
    includes it. slices is None for a record an earlier version's stream wrote (its slices are in that
    stream's own logs)."""

    batch_id: int
    ingest: IngestResult
    files: tuple[str, ...]
    slices: tuple[str, ...] | None = None


@dataclass(slots=True)
class NewRows:
    """What this run's batches delivered: their counts and the Parquet files holding their rows."""

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
class BatchLedger:
    """The batches' ledger: its id (in the names of the files batches move into the log, so that no two
    checkpoints' files share a name) and the last batch committed (-1: none). Batch N + 1 follows N."""

    id: str
    committed: int = -1


def _ledger_path(checkpoint_dir: str) -> Path:
    return Path(checkpoint_dir) / BATCH_LEDGER


def read_ledger(checkpoint_dir: str, carried: Carried) -> BatchLedger:
    """The ledger; where there is none, a new one that takes over an earlier version's stream or, without
    one, follows the batch the audit state names (carried), so that no batch id is used twice. One that
    cannot be read is an error naming it: guessing which batches were committed could lose or double one."""
    path = _ledger_path(checkpoint_dir)
    if not path.exists():
        ledger = take_over_stream(checkpoint_dir, carried)
        write_ledger(checkpoint_dir, ledger)
        return ledger
    try:
        raw = json.loads(path.read_text())
        if raw.get("version") != LEDGER_VERSION:
            raise ValueError(f"version {raw.get('version')!r}, this audit reads {LEDGER_VERSION}")
        return BatchLedger(str(raw["id"]), int(raw["committed"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise RuntimeError(f"{path}: unreadable batch ledger ({e!r}); it says which batches are in the "
                           "Parquet log") from e


def write_ledger(checkpoint_dir: str, ledger: BatchLedger) -> None:
    """Swap in the ledger atomically: committing batch N is this write with committed = N."""
    path = _ledger_path(checkpoint_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps({"version": LEDGER_VERSION, "id": ledger.id, "committed": ledger.committed}) + "\n")
    os.replace(tmp, path)


def _record_path(checkpoint_dir: str, batch_id: int) -> Path:
    return Path(checkpoint_dir) / BATCHES_DIR / f"{batch_id}.json"


def write_record(checkpoint_dir: str, record: BatchRecord) -> None:
    """Write a batch's record atomically (before its files move into the log)."""
    path = _record_path(checkpoint_dir, record.batch_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    raw: dict[str, object] = {"batch_id": record.batch_id, "ingest": record.ingest.as_dict(),
                              "files": list(record.files)}
    if record.slices is not None:
        raw["slices"] = list(record.slices)
    tmp.write_text(json.dumps(raw) + "\n")
    os.replace(tmp, path)


def read_record(path: Path) -> BatchRecord:
    """A batch record; one that cannot be read is an error naming the file (its rows are not guessed)."""
    try:
        raw = json.loads(path.read_text())
        slices = raw.get("slices")
        return BatchRecord(int(raw["batch_id"]), IngestResult.from_dict(raw["ingest"]),
                           tuple(str(f) for f in raw["files"]),
                           None if slices is None else tuple(str(s) for s in slices))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise RuntimeError(f"{path}: unreadable batch record ({e!r}); its batch's files are listed there") from e


def _records(checkpoint_dir: str) -> list[Path]:
    directory = Path(checkpoint_dir) / BATCHES_DIR
    if not directory.is_dir():
        return []
    return sorted((p for p in directory.glob("*.json") if p.stem.isdigit()), key=lambda p: int(p.stem))


def _undo(record: BatchRecord) -> None:
    """Remove the files an uncommitted attempt at a batch moved into the log (its slices are read again)."""
    for f in record.files:
        Path(f).unlink(missing_ok=True)
        checksum_path(Path(f)).unlink(missing_ok=True)


def recover(checkpoint_dir: str, ledger: BatchLedger, carried: Carried) -> list[BatchRecord]:
    """Settle what the last run left, before anything is staged; the committed batches the audit state does
    not include (that run died in between), to be audited with this run's.

    - a record of a batch not committed: that attempt died before its commit; the files it moved into the
      log are removed with the record, and its slices (still waiting) are read again by this run;
    - a committed batch's slices still waiting (the run died before removing them) are removed: never read
      twice;
    - a record of a batch the state includes (the run died before removing it) is removed.
    """
    unaudited = []
    for path in _records(checkpoint_dir):
        record = read_record(path)
        if record.batch_id > ledger.committed:
            _undo(record)
            path.unlink(missing_ok=True)
            continue
        if record.slices:
            remove_slices([slice_dir(checkpoint_dir) / name for name in record.slices])
        if carried.batch_id is not None and record.batch_id <= carried.batch_id:
            path.unlink(missing_ok=True)
        else:
            unaudited.append(record)
    return unaudited


def take_over_stream(checkpoint_dir: str, carried: Carried) -> BatchLedger:
    """The ledger that continues the Structured Streaming checkpoint an earlier version left, if any.

    Its last committed micro-batch is the ledger's last batch, so the audit state's batch id still says
    whether the tail is complete, and its id is the ledger's; the slices its committed micro-batches read (a
    run died before removing them) are removed. A recorded micro-batch it never committed is then an
    uncommitted batch of the ledger, which ``recover`` undoes (its slices are read again). Every step can be
    done again: a crash here only repeats it. The stream's directory is removed once the sources' ledger is
    written too (spark_audit.sources reads its file list for checkpoints older still, which have none).
    Records of this ledger's own format without the ledger are an error: which of them were committed is
    not known.
    """
    stream = Path(checkpoint_dir) / STREAM_DIR
    if not (stream / "metadata").is_file():
        records = _records(checkpoint_dir)
        if records:
            raise RuntimeError(f"{_ledger_path(checkpoint_dir)} is missing, and {len(records)} batch records in "
                               f"{Path(checkpoint_dir) / BATCHES_DIR} need it to say which were committed")
        return BatchLedger(uuid.uuid4().hex, -1 if carried.batch_id is None else carried.batch_id)
    commits = stream / "commits"
    committed = max((int(f.name) for f in commits.iterdir() if f.name.isdigit()), default=-1) \
        if commits.is_dir() else -1
    for name in _stream_sources(stream, committed):
        local = Path(file_key(name))
        if local.parent == Path(os.path.abspath(slice_dir(checkpoint_dir))):
            local.unlink(missing_ok=True)
    try:
        stream_id = str(json.loads((stream / "metadata").read_text().splitlines()[0])["id"])
    except (OSError, ValueError, IndexError, KeyError, TypeError):
        stream_id = uuid.uuid4().hex
    return BatchLedger(stream_id, max(committed, -1 if carried.batch_id is None else carried.batch_id))


def _stream_sources(stream: Path, committed: int) -> set[str]:
    """The files the stream's committed micro-batches read, from its file source's log (sources/0/N and
    N.compact: a version line, then a JSON object per file with its path and batchId)."""
    directory = stream / "sources" / "0"
    if not directory.is_dir():
        return set()
    paths: set[str] = set()
    for f in directory.iterdir():
        if f.name.startswith("."):
            continue
        lines = f.read_text(errors="replace").splitlines()
        if not lines or lines[0] != "v1":
            raise RuntimeError(f"{f}: a Structured Streaming file source log of a format this audit does not "
                               "know; it says which slices were read")
        for line in lines[1:]:
            try:
                entry = json.loads(line)
                if int(entry["batchId"]) <= committed:
                    paths.add(str(entry["path"]))
            except (ValueError, KeyError, TypeError) as e:
                raise RuntimeError(f"{f}: unreadable entry in the stream's file source log ({e!r})") from e
    return paths


def anything_new(checkpoint_dir: str, logs_dir: str) -> bool:
    """Whether an incremental run would read anything: lines not read before, slices staged and not yet
    read, or recorded batches the audit state does not include (a run died in between)."""
    return bool(_records(checkpoint_dir)) or bool(slices_now(checkpoint_dir)) or \
        unread_input(checkpoint_dir, expand_paths([logs_dir]))


def remove_records(checkpoint_dir: str, batch_ids: list[int]) -> None:
    """Forget the records of batches the audit state now includes."""
    for batch_id in batch_ids:
        _record_path(checkpoint_dir, batch_id).unlink(missing_ok=True)


def ingest_new_files(spark: SparkSession, logs_dir: str, parquet_dir: str, checkpoint_dir: str,
                     carried: Carried | None = None) -> NewRows:
    """Parse the lines not read before once: count every problem, append the valid rows to the log.

    The batches a crash left committed but unaudited come first (their records; carried: the state).
    Every slice waiting is read as one batch: by the gateway's checked reader (spark_audit.checked_read) when
    they hold valid records only, up to its size limit; else parsed by Spark.
    """
    carried = carried or Carried()
    ledger = read_ledger(checkpoint_dir, carried)
    new = NewRows()
    for record in recover(checkpoint_dir, ledger, carried):
        new.add(record)
    staged = stage_new(checkpoint_dir, expand_paths([logs_dir]))
    # an earlier version's stream, taken over (read_ledger): with both ledgers written nothing reads it again
    shutil.rmtree(Path(checkpoint_dir) / STREAM_DIR, ignore_errors=True)
    waiting = sorted(slices_now(checkpoint_dir))
    if waiting:
        batch_id = ledger.committed + 1
        staging = str(Path(parquet_dir) / STAGING_DIR / f"batch-{batch_id}")
        names = tuple(p.name for p in waiting)

        def before_move(counts: IngestResult, targets: list[str]) -> None:
            counts.add_staged(replace(staged, damaged={}, notes={}))  # name source files, not slices
            write_record(checkpoint_dir, BatchRecord(batch_id, counts, tuple(targets), names))

        name = f"b{batch_id}-{ledger.id}"
        paths = [str(p) for p in waiting]
        table = read_checked(paths)
        if table is not None:
            counts, files = ingest_checked(table, staging, parquet_dir, name, before_move)
        else:
            counts, files = ingest_batch(read_logs(spark, paths), staging, parquet_dir, name, before_move)
        _crash_for_tests("after-move")
        write_ledger(checkpoint_dir, replace(ledger, committed=batch_id))
        _crash_for_tests("after-commit")
        remove_slices(waiting)  # read and committed: never read again
        new.add(BatchRecord(batch_id, counts, tuple(files), names))
    new.ingest.damaged.update(staged.damaged)
    new.ingest.notes.update(staged.notes)
    return new
