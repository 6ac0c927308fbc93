"""Per-file rollups of the window aggregate (spark_audit.aggregates), so that a full audit does not
re-aggregate rows it has seen: stored under `_rollup/` beside the Parquet log, with `_rollup/manifest.json`
mapping each data file (its size, mtime and newest event time) to its rollup. An audit reads the rollups
of the files wholly inside its window that still match the manifest and scans every other file; a
missing or outdated manifest only costs speed (docs/conversion-log.md, "Rollups"). A Parquet log named by
a URI (hdfs://, s3a://, file://) is handled through Hadoop's FileSystem API (spark_audit.fs), without the
manifest lock (a local flock): one writer at a time there (docs/audit.md, "On a cluster").
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from spark_audit import fs
from spark_audit.frames import empty_frame
from spark_audit.schema import KEY_HASH, partition_hour, stored_schema

ROLLUP_DIR = "_rollup"
MANIFEST = "manifest.json"
LOCK_FILE = ".manifest.lock"
ORPHAN_AGE = timedelta(hours=1)  # an unreferenced rollup directory older than this is a dead build's
# The stored groups' layout: bump it when window_aggregates' groups change (older rollups are ignored).
ROLLUP_VERSION = 1
FILE_COLUMN = "_file"
HOUR = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class Entry:
    """One data file's rollup: where it is, what the file looked like then, its newest event time."""

    size: int
    mtime_ns: int
    rollup: str
    max_us: int | None
    hashed: bool  # every row of the file has its key hashes written (spark_audit/schema.py KEY_HASH)


@dataclass(frozen=True, slots=True)
class RemoteStat:
    st_size: int
    st_mtime_ns: int


@dataclass(frozen=True, slots=True)
class RemoteFile:
    """A data file of a log named by a URI, as listed (what this module uses of a Path: names, stat, str)."""

    uri: str
    size: int
    mtime_ns: int

    @property
    def name(self) -> str:
        return fs.path_part(self.uri).name

    @property
    def parent(self) -> PurePosixPath:
        return fs.path_part(self.uri).parent

    def stat(self) -> RemoteStat:
        return RemoteStat(self.size, self.mtime_ns)

    def __str__(self) -> str:
        return self.uri


DataFile = Path | RemoteFile


def count_files(n: int) -> str:
    """"1 file", "3 files": a count of data files as the messages say it."""
    return f"{n} file{'' if n == 1 else 's'}"


def data_files(parquet_dir: str) -> list[DataFile]:
    """The log's data files (date=*/hour=*/*.parquet), sorted."""
    if fs.is_remote(parquet_dir):
        listed = fs.Hadoop().glob(fs.join(parquet_dir, "date=*/hour=*/*.parquet"))
        return [RemoteFile(s.uri, s.size, s.mtime_ms * 1_000_000) for s in listed if not s.is_dir]
    return sorted(Path(parquet_dir).glob("date=*/hour=*/*.parquet"))


def _under(parquet_dir: str, *parts: str) -> str:
    """A path inside the log (a URI inside a log named by one)."""
    return fs.join(parquet_dir, *parts) if fs.is_remote(parquet_dir) else str(Path(parquet_dir, *parts))


def relative(path: DataFile) -> str:
    """A data file's name relative to the log: date=D/hour=H/name."""
    return f"{path.parent.parent.name}/{path.parent.name}/{path.name}"


def relative_column() -> Column:
    """relative() of the file a row was read from, as Spark sees it."""
    return F.regexp_extract(F.col("_metadata.file_path"), r"(date=[^/]*/hour=[^/]*/[^/]*)$", 1)


def partition_start(path: DataFile) -> datetime | None:
    """The first instant of a data file's hour partition (None when the directory names do not parse)."""
    return partition_hour(Path(path.parent))


def manifest_path(parquet_dir: str) -> Path:
    return Path(parquet_dir) / ROLLUP_DIR / MANIFEST


def _manifest_text(parquet_dir: str) -> str | None:
    """The manifest's text; None when there is none."""
    if fs.is_remote(parquet_dir):
        hadoop, uri = fs.Hadoop(), _under(parquet_dir, ROLLUP_DIR, MANIFEST)
        return hadoop.read(uri).decode() if hadoop.stat(uri) is not None else None
    path = manifest_path(parquet_dir)
    return path.read_text() if path.exists() else None


def read_manifest(parquet_dir: str) -> dict[str, Entry]:
    """The manifest's entries; empty (and a note on stderr when it exists) when it cannot be used."""
    path = _under(parquet_dir, ROLLUP_DIR, MANIFEST)
    try:
        text = _manifest_text(parquet_dir)
        if text is None:
            return {}
        raw = json.loads(text)
        if raw.get("version") != ROLLUP_VERSION:
            return {}
        return {str(name): Entry(int(e["size"]), int(e["mtime_ns"]), str(e["rollup"]),
                                 None if e["max_us"] is None else int(e["max_us"]), bool(e["hashed"]))
                for name, e in raw["files"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        print(f"audit: ignoring the rollup manifest {path} ({exc}); the log's files are scanned", file=sys.stderr)
        return {}


@contextmanager
def manifest_lock(parquet_dir: str) -> Iterator[None]:
    """Hold the log's manifest lock (an exclusive flock on _rollup/.manifest.lock): one writer at a time.
    A log named by a URI has none (HDFS and S3 have no flock): its writers must take turns."""
    if fs.is_remote(parquet_dir):
        yield
        return
    path = Path(parquet_dir) / ROLLUP_DIR / LOCK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def update_manifest(parquet_dir: str, new: dict[str, Entry]) -> None:
    """Add entries to the manifest as it is now (another process may have written it since it was read):
    read, merge and replace it under manifest_lock; entries of data files that are gone are dropped."""
    with manifest_lock(parquet_dir):
        current = read_manifest(parquet_dir)
        if fs.is_remote(parquet_dir):
            present = {relative(f) for f in data_files(parquet_dir)}
            entries = {n: e for n, e in current.items() if n in present}
        else:
            entries = {n: e for n, e in current.items() if (Path(parquet_dir) / n).exists()}
        write_manifest(parquet_dir, {**entries, **new}, {e.rollup for e in current.values()})


def write_manifest(parquet_dir: str, entries: dict[str, Entry], previous: set[str]) -> None:
    """Replace the manifest atomically (call it holding manifest_lock).

    Rollup directories no entry refers to any more are removed: those the previous manifest referred to
    (previous: their names), and unknown ones older than ORPHAN_AGE (what a build that died left). A newer
    unknown one may be another process's build whose entries are not in yet: it is kept.
    """
    raw = {"version": ROLLUP_VERSION, "files": {
        name: {"size": e.size, "mtime_ns": e.mtime_ns, "rollup": e.rollup, "max_us": e.max_us, "hashed": e.hashed}
        for name, e in sorted(entries.items())}}
    used = {e.rollup for e in entries.values()}
    orphaned_before = time.time() - ORPHAN_AGE.total_seconds()
    if fs.is_remote(parquet_dir):
        hadoop = fs.Hadoop()
        hadoop.write(_under(parquet_dir, ROLLUP_DIR, MANIFEST), json.dumps(raw, indent=1).encode())
        for status in hadoop.glob(_under(parquet_dir, ROLLUP_DIR, "r-*")):
            if status.is_dir and status.name not in used and (
                    status.name in previous or status.mtime_ms / 1000 < orphaned_before):
                hadoop.delete(status.uri)
        return
    path = manifest_path(parquet_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{MANIFEST}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps(raw, indent=1))
    os.replace(tmp, path)
    for d in path.parent.iterdir():
        if not d.is_dir() or not d.name.startswith("r-") or d.name in used:
            continue
        try:
            if d.name in previous or d.stat().st_mtime < orphaned_before:
                shutil.rmtree(d, ignore_errors=True)
        except OSError:
            continue


def is_current(path: DataFile, entry: Entry | None) -> bool:
    """True when the file still has the size and mtime its rollup was made from."""
    if entry is None:
        return False
    try:
        st = path.stat()
    except OSError:
        return False
    return st.st_size == entry.size and st.st_mtime_ns == entry.mtime_ns


def read_files(spark: SparkSession, parquet_dir: str, files: list[DataFile]) -> DataFrame:
    """Rows of the given data files with the date/hour columns (schema given: nothing inferred)."""
    if not files:
        return empty_frame(spark, stored_schema(partitions=True))
    return (spark.read.schema(stored_schema(partitions=True)).option("basePath", parquet_dir)
            .parquet(*[str(f) for f in files]))


def pending_rollups(parquet_dir: str) -> list[DataFile]:
    """The log's data files without a current rollup."""
    if not fs.is_remote(parquet_dir) and not Path(parquet_dir).is_dir():
        return []
    known = read_manifest(parquet_dir)
    return [f for f in data_files(parquet_dir) if not is_current(f, known.get(relative(f)))]


def build(spark: SparkSession, parquet_dir: str, per_file_groups: Callable[[DataFrame], DataFrame],
          files: list[DataFile] | None = None) -> int:
    """Aggregate and store the rollups of the given data files (default: those without a current one).

    One Spark job writes the groups of all the files (per_file_groups of their rows: the window aggregate
    grouped by file too); a second one reads three numeric columns of the files for each file's newest
    event time and whether every row has its key hashes. Returns the number of files rolled up.
    """
    if files is None:
        files = pending_rollups(parquet_dir)
    if not files:
        return 0
    stats = {relative(f): f.stat() for f in files}  # before the read: a later change shows as a mismatch
    rows = read_files(spark, parquet_dir, files)
    groups = per_file_groups(rows)
    name = f"r-{uuid.uuid4().hex}"
    out = _under(parquet_dir, ROLLUP_DIR, name)
    groups.write.mode("overwrite").parquet(out)
    facts = {str(r["f"]): r for r in rows.groupBy(relative_column().alias("f")).agg(
        F.max(F.unix_micros("event_time")).alias("hi"), F.count(F.lit(1)).alias("n"),
        F.count(KEY_HASH).alias("hashed")).collect()}
    new = {}
    for rel, st in stats.items():
        fact = facts.get(rel)
        new[rel] = Entry(st.st_size, st.st_mtime_ns, name, None if fact is None else fact["hi"],
                         fact is None or fact["n"] == fact["hashed"])
    update_manifest(parquet_dir, new)
    return len(stats)


@dataclass(slots=True)
class Plan:
    """Which files of an audit's scope come from their rollups (covered) and which are scanned."""

    covered: list[DataFile]
    scanned: list[DataFile]
    entries: dict[str, Entry]
    # Every file in the plan has a current entry saying its rows carry key hashes.
    hashes_stored: bool


def fully_inside(start: datetime, since: datetime | None, until: datetime | None) -> bool:
    """True when the hour starting at start lies inside [since, until)."""
    return (since is None or start >= since) and (until is None or start + HOUR <= until)


def plan(parquet_dir: str, since: datetime | None, until: datetime | None, widen: timedelta) -> Plan | None:
    """Split the files of [since - widen, until + widen) into covered and scanned; None if none is covered."""
    entries = read_manifest(parquet_dir)
    if not entries:
        return None
    lo = None if since is None else since - widen
    hi = None if until is None else until + widen
    covered, scanned = [], []
    hashed = True
    present: dict[str, bool] = {}

    def stored(name: str) -> bool:  # a rollup directory another writer removed since the manifest was read
        if name not in present:
            if fs.is_remote(parquet_dir):
                status = fs.Hadoop().stat(_under(parquet_dir, ROLLUP_DIR, name))
                present[name] = status is not None and status.is_dir
            else:
                present[name] = (Path(parquet_dir) / ROLLUP_DIR / name).is_dir()
        return present[name]

    for f in data_files(parquet_dir):
        start = partition_start(f)
        if start is not None and ((lo is not None and start + HOUR <= lo) or (hi is not None and start >= hi)):
            continue  # outside the widened window: the audit's filter would drop every row
        entry = entries.get(relative(f))
        current = is_current(f, entry) and entry is not None and stored(entry.rollup)
        hashed = hashed and current and entry is not None and entry.hashed
        if start is not None and current and fully_inside(start, since, until):
            covered.append(f)
        else:
            scanned.append(f)
    return Plan(covered, scanned, entries, hashed) if covered else None


def newest_time(p: Plan) -> datetime | None:
    """The newest event time of the newest partition in the plan, when every file of it is covered."""
    files = p.covered + p.scanned
    starts = [partition_start(f) for f in files]
    newest = max((s for s in starts if s is not None), default=None)
    if newest is None or any(s is None for s in starts):
        return None
    last = [f for f, s in zip(files, starts, strict=True) if s == newest]
    if any(f not in p.covered for f in last):
        return None
    values = [p.entries[relative(f)].max_us for f in last]
    if any(v is None for v in values):
        return None
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=max(v for v in values if v is not None))


def groups(spark: SparkSession, parquet_dir: str, p: Plan, layout: StructType,
           sums: tuple[str, ...], mins: tuple[str, ...], maxes: tuple[str, ...]) -> DataFrame:
    """The covered files' stored groups merged across files (layout: the window aggregate's columns)."""
    schema = StructType([StructField(FILE_COLUMN, StringType()), *layout.fields])
    by_dir: dict[str, list[str]] = {}
    for f in p.covered:
        rel = relative(f)
        by_dir.setdefault(p.entries[rel].rollup, []).append(rel)
    stored = None
    for name, rels in sorted(by_dir.items()):
        part = spark.read.schema(schema).parquet(_under(parquet_dir, ROLLUP_DIR, name))
        part = part.where(F.col(FILE_COLUMN).isin(rels))
        stored = part if stored is None else stored.unionByName(part)
    assert stored is not None
    return stored.groupBy(*[f.name for f in layout.fields if f.name not in (*sums, *mins, *maxes)]).agg(
        *[F.sum(c).alias(c) for c in sums], *[F.min(c).alias(c) for c in mins],
        *[F.max(c).alias(c) for c in maxes])
