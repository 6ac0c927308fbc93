"""The gateway's Parquet sidecars (X.jsonl.parquet beside a closed hour file X.jsonl, bridge/convlog_parquet.py)
read in place of their JSON: which sidecars still describe their file, and their rows in the ingest's layout.

A sidecar is used only when its key-value metadata names its file, matches the file's current byte size and
this audit's sidecar and schema versions, and its row count is the line count it records; any other one (or
one whose footer cannot be read) is ignored with a note and the JSON is parsed (docs/audit.md, "Parquet
sidecars"). Its footer is read through Hadoop's Parquet reader in the session's JVM (any file system).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from py4j.protocol import Py4JError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from mappings.convlog_schema import SIDECAR_SUFFIX, sidecar_mismatch
from spark_audit import fs
from spark_audit.lines import FILE_COLUMN
from spark_audit.schema import CORRUPT_COLUMN, PROBLEM_COLUMN, problem_column, record_schema

LOG_SUFFIXES = (".jsonl", ".json", ".log")  # plain log files a sidecar may stand beside (gzip: never)


def is_sidecar(path: str | PurePath) -> bool:
    """True for a sidecar's name (X.jsonl.parquet): never read as a log itself."""
    name = PurePath(str(path)).name
    return name.endswith(SIDECAR_SUFFIX) and name[: -len(SIDECAR_SUFFIX)].endswith(LOG_SUFFIXES)


@dataclass(slots=True)
class Sidecars:
    """The sidecars an ingest reads (source file -> sidecar URI) and notes on those it ignored."""

    used: dict[str, str] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)


def _uri(hadoop: fs.Hadoop, path: str) -> str:
    return path if fs.is_remote(path) else hadoop.qualify(fs.join("file://", os.path.abspath(path)))


def footer(hadoop: fs.Hadoop, uri: str) -> tuple[dict[str, str], int]:
    """A Parquet file's key-value metadata and row count (OSError when its footer cannot be read)."""
    jvm: Any = hadoop.jvm
    try:
        source = jvm.org.apache.parquet.hadoop.util.HadoopInputFile.fromPath(jvm.org.apache.hadoop.fs.Path(uri),
                                                                           hadoop._conf)
        reader = jvm.org.apache.parquet.hadoop.ParquetFileReader.open(source)
        try:
            meta = reader.getFooter().getFileMetaData().getKeyValueMetaData()
            return {str(k): str(v) for k, v in dict(meta).items()}, int(reader.getRecordCount())
        finally:
            reader.close()
    except Py4JError as e:
        raise fs._error(e) from None


def choose(paths: list[str]) -> Sidecars:
    """The sidecars that still describe their plain log file (local paths or URIs)."""
    found = Sidecars()
    hadoop: fs.Hadoop | None = None
    for path in paths:
        if path.endswith(".gz"):
            continue
        side = path + SIDECAR_SUFFIX
        remote = fs.is_remote(path)
        if not remote and not os.path.isfile(side):
            continue
        hadoop = hadoop or fs.Hadoop()
        try:
            if remote:
                status = hadoop.stat(side)
                source = hadoop.stat(path)
                if status is None or source is None:
                    continue
                size = source.size
            else:
                size = os.stat(path).st_size
            uri = _uri(hadoop, side)
            meta, rows = footer(hadoop, uri)
        except OSError as e:
            found.notes[path] = f"Parquet sidecar ignored (unreadable: {e}); its JSON was read"
            continue
        problem = sidecar_mismatch(meta, rows, PurePath(fs.path_part(path) if remote else path).name, size)
        if problem is not None:
            found.notes[path] = f"Parquet sidecar ignored ({problem}); its JSON was read"
        else:
            found.used[path] = uri
    return found


def read_sidecars(spark: SparkSession, uris: list[str]) -> DataFrame:
    """The sidecars' rows as read_logs tags a file's rows (timestamps are instants already), with the file
    column; a row breaking a rule is counted as the JSON's would be (a sidecar is not trusted)."""
    # the gateway writes page checksums: a damaged page fails the read (the ingest then parses the JSON)
    rows = spark.read.schema(record_schema()).option("parquet.page.verify-checksum.enabled", "true").parquet(*uris)
    return (rows.withColumn(CORRUPT_COLUMN, F.lit(None).cast(StringType()))
            .withColumn(PROBLEM_COLUMN, problem_column())
            .withColumn(FILE_COLUMN, F.col("_metadata.file_path")))
