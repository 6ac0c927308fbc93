"""Reads JSON Lines logs with the explicit schema, counts bad lines, compacts good rows to Parquet."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamReader

from mappings.convlog_schema import FIELD_NAMES, SPARK_TIMESTAMP_FORMAT
from spark_audit.schema import CORRUPT_COLUMN, PROBLEM_COLUMN, problem_column, read_schema

FILE_COLUMN = "_file"
PARTITION_COLUMNS = ("date", "hour")
SAMPLE_LIMIT = 10
SAMPLE_CHARS = 200

JSON_OPTIONS = {
    "mode": "PERMISSIVE",
    "columnNameOfCorruptRecord": CORRUPT_COLUMN,
    "timestampFormat": SPARK_TIMESTAMP_FORMAT,
}


@dataclass(slots=True)
class IngestResult:
    """What one ingest read: counts of good and bad rows (by problem and file), samples, time span."""

    rows_read: int = 0
    valid: int = 0
    problems: dict[str, int] = field(default_factory=dict)
    problems_by_file: dict[str, dict[str, int]] = field(default_factory=dict)
    samples: list[dict[str, str]] = field(default_factory=list)
    min_time: datetime | None = None
    max_time: datetime | None = None

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
        }


def expand_paths(paths: Iterable[str | Path]) -> list[str]:
    """Files as given; directories expand to their *.jsonl / *.jsonl.gz / *.log files, sorted."""
    out: list[str] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(str(f) for f in sorted(p.rglob("*")) if f.is_file() and _is_log(f))
        elif p.exists():
            out.append(str(p))
    return out


def _is_log(path: Path) -> bool:
    return path.name.endswith((".jsonl", ".jsonl.gz", ".json", ".log")) and not path.name.startswith(".")


def read_logs(spark: SparkSession, paths: list[str]) -> DataFrame:
    """JSON Lines with the explicit schema (never inferred), each row tagged with its problem and file."""
    reader = spark.read.schema(read_schema()).options(**JSON_OPTIONS)
    return tag(reader.json(paths))


def stream_logs(spark: SparkSession, directory: str) -> DataFrame:
    """The same as read_logs, as a Structured Streaming file source over a directory."""
    reader: DataStreamReader = spark.readStream.schema(read_schema()).options(**JSON_OPTIONS)
    return tag(reader.json(directory))


def tag(raw: DataFrame) -> DataFrame:
    """Add the problem column (null when valid) and the source file name."""
    return raw.withColumn(PROBLEM_COLUMN, problem_column()).withColumn(
        FILE_COLUMN, F.col("_metadata.file_path")
    )


def valid_rows(tagged: DataFrame) -> DataFrame:
    """Only valid rows, with the date/hour partition columns added and the bookkeeping columns gone."""
    return (
        tagged.where(F.col(PROBLEM_COLUMN).isNull())
        .drop(PROBLEM_COLUMN, CORRUPT_COLUMN, FILE_COLUMN)
        .withColumn("date", F.to_date("event_time"))
        .withColumn("hour", F.hour("event_time"))
    )


def summarize(tagged: DataFrame) -> IngestResult:
    """Count rows per file and problem (one job) and keep a few bad-line samples (one small job)."""
    result = IngestResult()
    rows = (
        tagged.groupBy(FILE_COLUMN, PROBLEM_COLUMN)
        .agg(F.count(F.lit(1)).alias("n"), F.min("event_time").alias("lo"), F.max("event_time").alias("hi"))
        .collect()
    )
    for r in rows:
        result.rows_read += r["n"]
        if r[PROBLEM_COLUMN] is None:
            result.valid += r["n"]
            result.min_time = r["lo"] if result.min_time is None else min(result.min_time, r["lo"])
            result.max_time = r["hi"] if result.max_time is None else max(result.max_time, r["hi"])
            continue
        problem, file_name = r[PROBLEM_COLUMN], r[FILE_COLUMN]
        result.problems[problem] = result.problems.get(problem, 0) + r["n"]
        per_file = result.problems_by_file.setdefault(file_name, {})
        per_file[problem] = per_file.get(problem, 0) + r["n"]
    if result.bad:
        text = F.coalesce(F.col(CORRUPT_COLUMN), F.to_json(F.struct(*FIELD_NAMES)))
        for r in (
            tagged.where(F.col(PROBLEM_COLUMN).isNotNull())
            .select(FILE_COLUMN, PROBLEM_COLUMN, F.substring(text, 1, SAMPLE_CHARS).alias("text"))
            .limit(SAMPLE_LIMIT)
            .collect()
        ):
            result.samples.append({"file": r[FILE_COLUMN], "problem": r[PROBLEM_COLUMN], "text": r["text"]})
    return result


def write_parquet(valid: DataFrame, parquet_dir: str, mode: str) -> None:
    """Write valid rows compacted to one file per date/hour partition."""
    (
        valid.repartition(*PARTITION_COLUMNS)
        .write.mode(mode)
        .partitionBy(*PARTITION_COLUMNS)
        .parquet(parquet_dir)
    )


def ingest(spark: SparkSession, paths: list[str], parquet_dir: str, mode: str = "overwrite") -> IngestResult:
    """Parse the logs once (cached), count problems, and compact the valid rows into Parquet."""
    tagged = read_logs(spark, paths).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        result = summarize(tagged)
        if result.valid:
            write_parquet(valid_rows(tagged), parquet_dir, mode)
        return result
    finally:
        tagged.unpersist()
