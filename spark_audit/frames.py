"""Small Spark frames made from Python values as local relations, so that reading one runs no Spark job.

`spark.createDataFrame(list)` makes an RDD-backed frame: every query that reads it runs a job to scan the
RDD, and a broadcast of it is a job of its own (60-180 ms each on 2 cores, measured in an incremental run:
bench/README.md). A VALUES list is a LocalRelation instead: its rows are data inside the plan, broadcast
without a job, and (unlike literals in expressions) never compiled into generated code, so a frame of
run-dependent values does not make Spark compile new classes every run.
"""
from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import BooleanType, DataType, IntegerType, LongType, StringType, StructType

# Above this many rows the VALUES text costs more to parse than the job it saves (measured: 35 ms for
# 1,000 rows of three columns, 180 ms for 5,000, 830 ms for 20,000): such frames stay RDD-backed.
MAX_VALUES_ROWS = 2000
LONG_MIN = -(2**63)


def sql_literal(value: object, data_type: DataType) -> str:
    """value as Spark SQL literal text of data_type (long, int, boolean, string, or null)."""
    if value is None:
        return "NULL"
    if isinstance(data_type, BooleanType):
        return "true" if value else "false"
    if isinstance(data_type, LongType):
        number = int(value)  # type: ignore[call-overload]
        return f"({LONG_MIN + 1}L - 1L)" if number == LONG_MIN else f"{number}L"
    if isinstance(data_type, IntegerType):
        return str(int(value))  # type: ignore[call-overload]
    if isinstance(data_type, StringType):
        # With the default spark.sql.parser.escapedStringLiterals=false the parser unescapes backslashes.
        return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"
    raise TypeError(f"no SQL literal for {data_type.simpleString()} values")


def _columns(schema: StructType, source: str) -> str:
    return ", ".join(f"CAST({source.format(i=i + 1)} AS {f.dataType.simpleString()}) AS `{f.name}`"
                     for i, f in enumerate(schema.fields))


def empty_frame(spark: SparkSession, schema: StructType) -> DataFrame:
    """A frame with schema's columns and no rows (an empty local relation once optimized)."""
    return spark.sql(f"SELECT {_columns(schema, 'NULL')} WHERE false")


def local_frame(spark: SparkSession, rows: Sequence[Sequence[object]], schema: StructType) -> DataFrame:
    """The rows (tuples in schema's field order) as a frame; a local relation up to MAX_VALUES_ROWS rows."""
    if not rows:
        return empty_frame(spark, schema)
    if len(rows) > MAX_VALUES_ROWS:
        return spark.createDataFrame(list(rows), schema)
    fields = schema.fields
    values = ", ".join("(" + ", ".join(sql_literal(v, f.dataType) for v, f in zip(row, fields, strict=True)) + ")"
                       for row in rows)
    return spark.sql(f"SELECT {_columns(schema, 'col{i}')} FROM VALUES {values}")
