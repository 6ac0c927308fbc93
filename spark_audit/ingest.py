"""Reads JSON Lines logs with the explicit schema, counts bad lines, compacts good rows to Parquet."""
from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePath
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from mappings.convlog_schema import FIELDS
from spark_audit import fs
from spark_audit.checked_read import Written, write_checked
from spark_audit.lines import FILE_COLUMN, LINE_COLUMN, TEXT_COLUMN, numbered_lines
from spark_audit.parquet_log import Checked, SidecarRef, accept, read_ledger, write_ledger
from spark_audit.read_ahead import ReadAhead, read_ahead
from spark_audit.schema import (
    CORRUPT_COLUMN,
    FUTURE_VERSION,
    INVALID_PREFIX,
    KEY_CHECK,
    KEY_HASH,
    MALFORMED,
    PROBLEM_COLUMN,
    key_check,
    key_hash,
    parse_times,
    problem_column,
    read_schema,
)
from spark_audit.sidecars import Sidecars, choose, is_sidecar
from spark_audit.sources import Staged, prepare, prepare_remote

PARTITION_COLUMNS = ("date", "hour")
SAMPLE_LIMIT = 10
SAMPLE_CHARS = 500
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

JSON_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN}


@dataclass(slots=True)
class IngestResult:
    """What one ingest read: counts of good and bad rows (by problem and file), samples, time span."""

    rows_read: int = 0
    valid: int = 0
    problems: dict[str, int] = field(default_factory=dict)
    problems_by_file: dict[str, dict[str, int]] = field(default_factory=dict)
    samples: list[dict[str, Any]] = field(default_factory=list)  # file, line, problem, text, chars
    min_time: datetime | None = None
    max_time: datetime | None = None
    # Files that could not be read to their end (file -> what is wrong; their readable part is audited)
    # and what the audit did about a file (read again from the start, an unfinished last line not read).
    damaged: dict[str, str] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    sidecar_files: int = 0  # files whose rows were read from the gateway's Parquet sidecar, not parsed

    @property
    def bad(self) -> int:
        return sum(self.problems.values())

    def merge(self, other: IngestResult) -> None:
        """Add another batch's counts to this one (incremental mode)."""
        self.rows_read += other.rows_read
        self.valid += other.valid
        for k, v in other.problems.items():
            self.problems[k] = self.problems.get(k, 0) + v
        for f, counts in other.problems_by_file.items():
            mine = self.problems_by_file.setdefault(f, {})
            for k, v in counts.items():
                mine[k] = mine.get(k, 0) + v
        self.samples = (self.samples + other.samples)[:SAMPLE_LIMIT]
        times = [t for t in (self.min_time, other.min_time) if t is not None]
        self.min_time = min(times) if times else None
        times = [t for t in (self.max_time, other.max_time) if t is not None]
        self.max_time = max(times) if times else None
        self.damaged.update(other.damaged)
        self.notes.update(other.notes)
        self.sidecar_files += other.sidecar_files

    def add_staged(self, staged: Staged) -> None:
        """Name the source files instead of staged copies; add the staging's damaged files and notes."""
        renamed: dict[str, dict[str, int]] = {}
        for f, counts in self.problems_by_file.items():
            mine = renamed.setdefault(staged.origin(f), {})
            for k, v in counts.items():
                mine[k] = mine.get(k, 0) + v
        self.problems_by_file = renamed
        self.samples = [{**s, "file": staged.origin(s["file"]), "line": _source_line(staged, s)}
                        for s in self.samples]
        self.damaged.update(staged.damaged)
        self.notes.update(staged.notes)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> IngestResult:
        """The counts as_dict wrote (incremental mode keeps each batch's in its checkpoint)."""
        times = [None if raw[k] is None else datetime.fromisoformat(raw[k]) for k in ("min_time", "max_time")]
        return cls(int(raw["rows_read"]), int(raw["valid"]), {str(k): int(v) for k, v in raw["problems"].items()},
                   {str(f): {str(k): int(v) for k, v in c.items()} for f, c in raw["problems_by_file"].items()},
                   [dict(s) for s in raw["samples"]], times[0], times[1],
                   {str(k): str(v) for k, v in raw.get("damaged", {}).items()},
                   {str(k): str(v) for k, v in raw.get("notes", {}).items()}, int(raw.get("sidecar_files", 0)))

    def as_dict(self) -> dict[str, object]:
        return {
            "rows_read": self.rows_read,
            "valid": self.valid,
            "bad": self.bad,
            "problems": dict(sorted(self.problems.items())),
            "problems_by_file": {
                f: dict(sorted(c.items())) for f, c in sorted(self.problems_by_file.items())
            },
            "samples": self.samples,
            "min_time": self.min_time.isoformat() if self.min_time else None,
            "max_time": self.max_time.isoformat() if self.max_time else None,
            "damaged": dict(sorted(self.damaged.items())),
            "notes": dict(sorted(self.notes.items())),
            "sidecar_files": self.sidecar_files,
        }


def _source_line(staged: Staged, sample: dict[str, Any]) -> int | None:
    """A sample's line number in its source file (a slice's lines follow its source's earlier lines)."""
    base = staged.line_base(sample["file"])
    return None if base is None or sample.get("line") is None else base + int(sample["line"])


def expand_paths(paths: Iterable[str | Path]) -> list[str]:
    """Files as given; directories expand to their *.jsonl / *.jsonl.gz / *.log files, sorted. A URI
    (hdfs://, s3a://, file://) is listed through Hadoop's FileSystem API (a running SparkSession's). A Parquet
    sidecar (X.jsonl.parquet, spark_audit.sidecars) is never a log file, even when named."""
    out: list[str] = []
    for given in paths:
        if is_sidecar(str(given)):  # a sidecar given by name (e.g. a shell glob): its log is read, never it as JSON
            continue
        if fs.is_remote(str(given)):
            out.extend(_remote_logs(str(given)))
            continue
        p = Path(given)
        if p.is_dir():
            out.extend(str(f) for f in sorted(p.rglob("*")) if f.is_file() and _is_log(f))
        elif p.exists():
            out.append(str(p))
    return out


def _remote_logs(uri: str) -> list[str]:
    """A remote file as given, or the log files under a remote directory (qualified URIs); none when absent."""
    hadoop = fs.Hadoop()
    status = hadoop.stat(uri)
    if status is None:
        return []
    if not status.is_dir:
        return [uri]
    return [f.uri for f in hadoop.files(uri) if _is_log(fs.path_part(f.uri))]


def _is_log(path: PurePath) -> bool:
    return path.name.endswith((".jsonl", ".jsonl.gz", ".json", ".log")) and not path.name.startswith(".")


def read_logs(spark: SparkSession, paths: list[str]) -> DataFrame:
    """JSON Lines with the explicit schema (never inferred), each row tagged with its problem."""
    reader = spark.read.schema(read_schema()).options(**JSON_OPTIONS)
    return tag(reader.json(paths))


def tag(raw: DataFrame) -> DataFrame:
    """Parse the timestamps, add the problem column: null when the row is valid."""
    return parse_times(raw).withColumn(PROBLEM_COLUMN, problem_column())


def valid_rows(tagged: DataFrame) -> DataFrame:
    """Only valid rows in the stored layout (key hashes and the date/hour partition columns added, the
    bookkeeping columns gone)."""
    return (
        tagged.where(F.col(PROBLEM_COLUMN).isNull())
        .drop(PROBLEM_COLUMN, CORRUPT_COLUMN, FILE_COLUMN)
        .withColumn(KEY_HASH, key_hash())
        .withColumn(KEY_CHECK, key_check())
        .withColumn("date", F.to_date("event_time"))
        .withColumn("hour", F.hour("event_time"))
    )


def problem_names() -> list[str]:
    """Every value the problem column can take."""
    return [MALFORMED, FUTURE_VERSION, *[INVALID_PREFIX + f.name for f in FIELDS]]


def metric_columns() -> list[Column]:
    """Row counts per problem and the valid rows' time span (epoch microseconds)."""
    problem = F.col(PROBLEM_COLUMN)
    valid_micros = F.when(problem.isNull(), F.unix_micros("event_time"))
    return [
        F.count(F.lit(1)).alias("rows"),
        F.count_if(problem.isNull()).alias("valid"),
        F.min(valid_micros).alias("lo"),
        F.max(valid_micros).alias("hi"),
        *[F.count_if(problem == F.lit(name)).alias(name) for name in problem_names()],
    ]


def observed_metrics(tagged: DataFrame, observation: Observation) -> DataFrame:
    """Attach the metric columns to the frame: gathered while the rows are written, no extra pass."""
    return tagged.observe(observation, *metric_columns())


def collect_metrics(tagged: DataFrame, observation: Observation) -> dict[str, Any]:
    """The observed metrics; a counting pass when Spark dropped them (no valid row: the write was empty)."""
    try:
        return dict(observation.get)
    except Py4JJavaError:
        row = tagged.agg(*metric_columns()).first()
        return row.asDict() if row is not None else {}


def _from_micros(value: int | None) -> datetime | None:
    return None if value is None else EPOCH + timedelta(microseconds=value)


def result_from_metrics(metrics: dict[str, Any]) -> IngestResult:
    result = IngestResult(rows_read=int(metrics.get("rows") or 0), valid=int(metrics.get("valid") or 0))
    result.problems = {name: int(metrics[name] or 0) for name in problem_names() if metrics.get(name)}
    result.min_time, result.max_time = _from_micros(metrics.get("lo")), _from_micros(metrics.get("hi"))
    return result


def describe_problems(tagged: DataFrame, result: IngestResult) -> None:
    """Bad rows per file (a second pass, run only when there are bad rows), and samples: the first bad
    lines of those files as they were, with file and line number (a pass over those files only)."""
    bad = tagged.where(F.col(PROBLEM_COLUMN).isNotNull())
    if FILE_COLUMN not in bad.columns:
        bad = bad.withColumn(FILE_COLUMN, F.col("_metadata.file_path"))
    for r in bad.groupBy(FILE_COLUMN, PROBLEM_COLUMN).count().collect():
        per_file = result.problems_by_file.setdefault(r[FILE_COLUMN], {})
        per_file[r[PROBLEM_COLUMN]] = per_file.get(r[PROBLEM_COLUMN], 0) + int(r["count"])
    # (a sidecar's rows never come here: one with a bad row is not used, its JSON is parsed)
    result.samples = bad_samples(tagged.sparkSession, sorted(f for f in result.problems_by_file if not is_sidecar(f)))


def parse_lines(lines: DataFrame) -> DataFrame:
    """Log lines (a value column, others kept) parsed as read_logs parses a file, blank lines left out."""
    record = F.from_json(TEXT_COLUMN, read_schema(), JSON_OPTIONS)
    kept = list(lines.columns)
    return tag(lines.select(record.alias("_record"), *kept).where(F.col("_record").isNotNull())
               .select("_record.*", *kept))


def bad_samples(spark: SparkSession, files: list[str]) -> list[dict[str, Any]]:
    """The first SAMPLE_LIMIT bad lines of the files: file, line number, problem, the line as it was (its
    first SAMPLE_CHARS characters) and its length."""
    if not files:
        return []
    rows = (parse_lines(numbered_lines(spark, files)).where(F.col(PROBLEM_COLUMN).isNotNull())
            .orderBy(FILE_COLUMN, LINE_COLUMN).limit(SAMPLE_LIMIT)
            .select(FILE_COLUMN, LINE_COLUMN, PROBLEM_COLUMN, F.substring(TEXT_COLUMN, 1, SAMPLE_CHARS).alias("t"),
                    F.char_length(TEXT_COLUMN).alias("n")).collect())
    return [{"file": r[FILE_COLUMN], "line": int(r[LINE_COLUMN]), "problem": r[PROBLEM_COLUMN], "text": r["t"],
             "chars": int(r["n"])} for r in rows]


def write_parquet(valid: DataFrame, parquet_dir: str, mode: str, compact: bool = True) -> None:
    """Write valid rows partitioned by date/hour; compact: one file per partition (costs a shuffle)."""
    if compact:
        valid = valid.repartition(*PARTITION_COLUMNS)
    valid.write.mode(mode).partitionBy(*PARTITION_COLUMNS).parquet(parquet_dir)


def ingest_frame(tagged: DataFrame, parquet_dir: str, mode: str, compact: bool = True) -> IngestResult:
    """Write the valid rows of a tagged frame to Parquet, counting every problem in the same pass."""
    observation = Observation("ingest")
    write_parquet(valid_rows(observed_metrics(tagged, observation)), parquet_dir, mode, compact)
    result = result_from_metrics(collect_metrics(tagged, observation))
    if result.bad:
        describe_problems(tagged, result)
    return result


def ingest_batch(
    tagged: DataFrame, staging_dir: str, parquet_dir: str, name: str,
    before_move: Callable[[IngestResult, list[str]], None] | None = None,
) -> tuple[IngestResult, list[str]]:
    """Write an incremental batch's valid rows into the Parquet log, counting problems in the same pass.

    The rows are written to a staging directory of their own first and the files then moved into the
    log's date/hour partitions (move_staged), so the caller knows exactly which files hold the new rows.
    """
    shutil.rmtree(staging_dir, ignore_errors=True)  # what a failed attempt at this batch left
    result = ingest_frame(tagged, staging_dir, "overwrite", compact=False)
    return result, move_staged(staging_dir, parquet_dir, name, result, before_move)


def ingest_checked(
    table: Any, staging_dir: str, parquet_dir: str, name: str,  # noqa: ANN401 - a pyarrow Table
    before_move: Callable[[IngestResult, list[str]], None] | None = None,
) -> tuple[IngestResult, list[str]]:
    """ingest_batch for a batch the checked reader read (spark_audit.checked_read): every row valid."""
    shutil.rmtree(staging_dir, ignore_errors=True)  # what a failed attempt at this batch left
    result = _written(write_checked(table, staging_dir, "part-00000"))
    return result, move_staged(staging_dir, parquet_dir, name, result, before_move)


def _written(written: Written) -> IngestResult:
    return IngestResult(rows_read=written.rows, valid=written.rows, min_time=written.min_time,
                        max_time=written.max_time)


def move_staged(staging_dir: str, parquet_dir: str, name: str, result: IngestResult,
                before_move: Callable[[IngestResult, list[str]], None] | None = None) -> list[str]:
    """Move a batch's staged date=D/hour=H files into the log's partitions; the moved files' paths.

    No listing of the log is needed to know them. The staging directory's name starts with "_": Spark never
    reads it as a partition. The moved files are named f"{name}-{i:05d}.parquet" (i counts the batch's files):
    a name that identifies the batch makes the files of an earlier attempt at it findable and replaceable.
    before_move, when given, gets the counts and the target paths before the first file moves.
    """
    moves: list[tuple[Path, Path]] = []
    for part in sorted(Path(staging_dir).glob("date=*/hour=*")):
        target = Path(parquet_dir) / part.parent.name / part.name
        for f in sorted(f for f in part.iterdir() if f.name.endswith(".parquet")):
            moves.append((f, target / f"{name}-{len(moves):05d}.parquet"))
    if before_move is not None:
        before_move(result, [str(t) for _, t in moves])
    for source, target in moves:
        target.parent.mkdir(parents=True, exist_ok=True)
        crc = source.with_name(f".{source.name}.crc")
        if crc.exists():  # the checksum Hadoop's local file system checks, under the file's new name
            os.replace(crc, checksum_path(target))
        os.replace(source, target)
    shutil.rmtree(staging_dir, ignore_errors=True)
    return [str(t) for _, t in moves]


def checksum_path(path: Path) -> Path:
    """Where Hadoop's local file system keeps a file's checksum (a stale one fails the file's read)."""
    return path.with_name(f".{path.name}.crc")


def ingest_logs(spark: SparkSession, paths: list[str], parquet_dir: str, mode: str = "overwrite",
                compact: bool = True, ahead: ReadAhead | None = None) -> IngestResult:
    """Parse the logs once: valid rows compacted into Parquet, bad rows counted by problem and file.

    Only complete lines are read; gzip files are decompressed first and a damaged one is reported with
    its readable part ingested (spark_audit.sources). spark_audit.audit.ingest also stores the new files'
    rollups. Local logs are checked, staged and read by the checked reader first (spark_audit.read_ahead;
    ahead: that done already, while the session started) and Spark parses what it refused.
    """
    remote_in, remote_out = any(map(fs.is_remote, paths)), fs.is_remote(parquet_dir)
    if ahead is None and not remote_in and not remote_out:
        ahead = read_ahead(paths, parquet_dir)
    if ahead is not None:
        try:
            return _ingest_ahead(spark, ahead, parquet_dir, mode, compact)
        finally:
            ahead.close()
    if not remote_out:
        Path(parquet_dir).parent.mkdir(parents=True, exist_ok=True)
    # Staging beside the log, never in it (a local log beside a remote Parquet log: a local temporary one).
    local = None if remote_in and remote_out else Path(
        tempfile.mkdtemp(prefix=".mqb-audit-staging-", dir=None if remote_out else Path(parquet_dir).parent))
    try:
        if not remote_in:
            return _ingest_files(spark, paths, lambda ps: prepare(ps, local or Path()), parquet_dir, mode, compact)
        hadoop = fs.Hadoop()
        uris = [p if fs.is_remote(p) else hadoop.qualify(fs.join("file://", os.path.abspath(p))) for p in paths]
        staging = hadoop.qualify(fs.join("file://", str(local)) if local is not None else fs.join(
            fs.parent(parquet_dir), f".mqb-audit-staging-{uuid.uuid4().hex}"))
        try:
            return _ingest_files(spark, uris, lambda ps: prepare_remote(ps, staging), parquet_dir, mode, compact)
        finally:
            hadoop.delete(staging)
    finally:
        if local is not None:
            shutil.rmtree(local, ignore_errors=True)


def _ingest_files(spark: SparkSession, paths: list[str], prep: Callable[[list[str]], Staged], parquet_dir: str,
                  mode: str, compact: bool) -> IngestResult:
    """Read each file from its Parquet sidecar in place where one still describes it and its every row keeps
    the field rules (spark_audit.sidecars, spark_audit.parquet_log), else parse its JSON into the Parquet log.
    The sidecars used are listed in the log's ledger, not copied. When their check fails (a page Spark cannot
    read), every file is parsed: a sidecar is never needed, so a damaged one costs time, not the audit."""
    found, refs = choose(paths), []
    if found.used:
        try:
            found, refs = accept(spark, found)
        except Exception as e:  # noqa: BLE001 - any failure: the JSON alone decides (and fails again if it is the cause)
            text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            found = Sidecars(notes={**found.notes, **{p: f"Parquet sidecar could not be read ({text[:300]}); "
                                                        "its JSON was read" for p in found.used}})
    kept = read_ledger(parquet_dir) if mode == "append" else []
    staged = prep([p for p in paths if p not in found.used])
    result = _parsed(spark, staged.paths, parquet_dir, mode, compact)
    result.add_staged(staged)
    return _with_sidecars(result, parquet_dir, kept, (found, refs))


def _ingest_ahead(spark: SparkSession, ahead: ReadAhead, parquet_dir: str, mode: str, compact: bool) -> IngestResult:
    """_ingest_files after read_ahead: Spark parses the files the checked reader refused into the log (replacing
    it, with mode "overwrite"), then the checked reader's files move in."""
    kept = read_ledger(parquet_dir) if mode == "append" else []
    result = _parsed(spark, ahead.parse, parquet_dir, mode, compact)
    checked = IngestResult()
    for written in ahead.written:
        checked.merge(_written(written))
    if ahead.written_dir is not None and checked.rows_read:
        move_staged(str(ahead.written_dir), parquet_dir, f"checked-{uuid.uuid4().hex[:12]}", checked)
    result.merge(checked)
    result.add_staged(ahead.staged)
    return _with_sidecars(result, parquet_dir, kept, ahead.sidecars)


def _parsed(spark: SparkSession, paths: list[str], parquet_dir: str, mode: str, compact: bool) -> IngestResult:
    """Spark parses paths into the log; nothing to parse: the log of an earlier ingest is not audited in
    place of this one (mode "overwrite" empties it)."""
    if paths:
        return ingest_frame(read_logs(spark, paths), parquet_dir, mode, compact)
    if mode == "overwrite":
        if fs.is_remote(parquet_dir):
            fs.Hadoop().delete(parquet_dir)
        else:
            shutil.rmtree(parquet_dir, ignore_errors=True)
    return IngestResult()


def _with_sidecars(result: IngestResult, parquet_dir: str, kept: list[SidecarRef], sidecars: Checked) -> IngestResult:
    """The ledger written (the kept entries and the sidecars read in place), their rows counted, the notes."""
    found, refs = sidecars
    write_ledger(parquet_dir, [*kept, *refs])
    for ref in refs:
        result.merge(IngestResult(rows_read=ref.rows, valid=ref.rows, min_time=_from_micros(ref.min_us),
                                  max_time=_from_micros(ref.max_us)))
    result.notes.update(found.notes)
    result.sidecar_files = len(refs)
    return result
