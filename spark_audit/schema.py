"""Spark types and row-validity rules derived from the pure log schema (mappings.convlog_schema)."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DateType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from mappings.convlog_schema import (
    BOOL,
    FIELDS,
    FINDING_KEYS,
    FINDINGS,
    INT,
    LONG,
    SCHEMA_VERSION,
    STRING,
    TIMESTAMP,
    TIMESTAMP_PATTERN,
    FieldSpec,
)
from mappings.report import Change

CORRUPT_COLUMN = "_corrupt_record"
PROBLEM_COLUMN = "_problem"
MALFORMED = "malformed"
FUTURE_VERSION = "future_version"
INVALID_PREFIX = "invalid:"

FINDING_TYPE = StructType([StructField(k, StringType(), True) for k in FINDING_KEYS])

SPARK_TYPES: dict[str, DataType] = {
    INT: IntegerType(),
    LONG: LongType(),
    STRING: StringType(),
    BOOL: BooleanType(),
    TIMESTAMP: TimestampType(),
    FINDINGS: ArrayType(FINDING_TYPE, True),
}


def record_schema() -> StructType:
    """The record as a Spark StructType, fields in schema order (all nullable; validity is checked)."""
    return StructType([StructField(f.name, SPARK_TYPES[f.kind], True) for f in FIELDS])


def read_schema() -> StructType:
    """The JSON reader's schema: the record plus the column that keeps unparseable lines.

    Timestamps are read as text and parsed by parse_times: the JSON reader's own timestampFormat parsing
    cost more than half of the ingest's CPU (bench/README.md), and it knew one form where the log's grammar
    (mappings.convlog_schema.TIMESTAMP_PATTERN) allows several.
    """
    fields = [StructField(f.name, StringType(), True) if f.dataType == TimestampType() else f
              for f in record_schema().fields]
    return StructType([*fields, StructField(CORRUPT_COLUMN, StringType(), True)])


def parse_times(raw: DataFrame) -> DataFrame:
    """The timestamp columns read as text, parsed: null when the text is not of the log's grammar or names
    no instant (2026-02-30), so that the field's rule finds the row invalid."""
    pattern = f"^(?:{TIMESTAMP_PATTERN})\\z"
    for spec in FIELDS:
        if spec.kind == TIMESTAMP:
            text = F.col(spec.name)
            raw = raw.withColumn(spec.name, F.when(text.rlike(pattern), text.try_cast(TimestampType())))
    return raw


def _findings_invalid(findings: Column) -> Column:
    """True when a finding is null, has a change outside Change, or has no name.

    Array functions with generated code (no lambda: a higher-order function is interpreted row by row):
    an element's change missing from the allowed list (null included) survives array_except; a null
    name sorts first.
    """
    allowed = F.array(*[F.lit(c.value) for c in Change])
    bad_change = F.size(F.array_except(findings.getField("change"), allowed)) > 0
    first_name = F.try_element_at(F.sort_array(findings.getField("name")), F.lit(1))
    return bad_change | ((F.size(findings) > 0) & first_name.isNull())


def _field_invalid(spec: FieldSpec) -> Column | None:
    """A condition true when the column breaks its spec's rule (required, enum, range)."""
    col = F.col(spec.name)
    checks: list[Column] = []
    if spec.required:
        checks.append(col.isNull())
    if spec.enum is not None:
        checks.append(col.isNotNull() & ~col.isin([m.value for m in spec.enum]))
    if spec.min_value is not None:
        checks.append(col < F.lit(spec.min_value))
    if spec.max_value is not None:
        checks.append(col > F.lit(spec.max_value))
    if spec.kind == FINDINGS:
        checks.append(_findings_invalid(col))
    if not checks:
        return None
    cond = checks[0]
    for c in checks[1:]:
        cond = cond | c
    return F.coalesce(cond, F.lit(False))


def problem_column() -> Column:
    """Null for a valid row, else 'future_version', 'malformed' or 'invalid:<first bad field>'."""
    version = F.col("schema_version")
    expr = F.when(version > F.lit(SCHEMA_VERSION), F.lit(FUTURE_VERSION)).when(
        F.col(CORRUPT_COLUMN).isNotNull(), F.lit(MALFORMED)
    )
    for spec in FIELDS:
        cond = _field_invalid(spec)
        if cond is not None:
            expr = expr.when(cond, F.lit(INVALID_PREFIX + spec.name))
    return expr.otherwise(F.lit(None).cast(StringType()))


# The Parquet log's layout: the record plus two columns computed once when a row is written, so that the
# audit's per-key job and its fetch of flagged keys hash no strings (measured: the per-key job 2.0-2.1 s
# CPU instead of 2.6-3.6 s on 1M rows; bench/README.md). Files written before these columns existed
# read them as null, and the audit then hashes the strings itself (stored_key_hash / stored_key_check).
KEY_HASH, KEY_CHECK = "_key_hash", "_key_check"
PARTITION_FIELDS = (StructField("date", DateType(), True), StructField("hour", IntegerType(), True))


def partition_hour(hour_dir: Path) -> datetime | None:
    """The first instant of a date=D/hour=H partition directory (None when its names do not parse)."""
    try:
        day = datetime.strptime(hour_dir.parent.name.split("=", 1)[1], "%Y-%m-%d")
        return day.replace(tzinfo=UTC) + timedelta(hours=int(hour_dir.name.split("=", 1)[1]))
    except (IndexError, ValueError):
        return None


def key_hash() -> Column:
    """(message_key, route) as one long: the per-key aggregation hashes and shuffles a long, not two strings."""
    return F.xxhash64("message_key", "route")


def key_check() -> Column:
    """A second, independent hash of (message_key, route): two keys sharing key_hash differ in it."""
    return F.hash("route", "message_key")


def stored_key_hash() -> Column:
    """key_hash as written in the row (computed here for a row of an older file, where it is null)."""
    return F.coalesce(F.col(KEY_HASH), key_hash())


def stored_key_check() -> Column:
    return F.coalesce(F.col(KEY_CHECK), key_check())


def stored_schema(partitions: bool = False) -> StructType:
    """A Parquet log file's columns (record + key hashes); with partitions: date and hour as well."""
    fields = [*record_schema().fields, StructField(KEY_HASH, LongType(), True),
              StructField(KEY_CHECK, IntegerType(), True)]
    return StructType([*fields, *(PARTITION_FIELDS if partitions else ())])
