"""Small Spark frames made from Python values as local relations (VALUES), not RDD-backed frames.

`spark.createDataFrame(list)` makes an RDD-backed frame: the JVM rebuilds its rows from pickled Python data
whenever a query reads it, and each broadcast of one was a job of 60-250 ms on 2 cores in an incremental
run (bench/README.md). A VALUES list is a LocalRelation: its rows are data inside the plan, so reading or
broadcasting it is a one-task job over rows already in the JVM (4-40 ms measured), and (unlike literals in
expressions) its values are never compiled into generated code, so a frame of run-dependent values does
not make Spark compile new classes every run.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

# Above this many values the VALUES text costs more to parse than the job it saves (measured: 35 ms for
# 1,000 rows of three columns, 180 ms for 5,000, 830 ms for 20,000; the job ~40-100 ms): such frames stay
# RDD-backed.
MAX_VALUES_CELLS = 4000
LONG_MIN = -(2**63)


def sql_literal(value: object, data_type: DataType) -> str:
    """value as Spark SQL literal text of data_type (long, int, boolean, double, string, array, struct; null)."""
    if value is None:
        return "NULL"
    if isinstance(data_type, BooleanType):
        return "true" if value else "false"
    if isinstance(data_type, LongType):
        number = int(value)  # type: ignore[call-overload]
        return f"({LONG_MIN + 1}L - 1L)" if number == LONG_MIN else f"{number}L"
    if isinstance(data_type, IntegerType):
        return str(int(value))  # type: ignore[call-overload]
    if isinstance(data_type, DoubleType):
        number = float(value)  # type: ignore[arg-type]
        return f"{number!r}D" if math.isfinite(number) else f"CAST('{number}' AS DOUBLE)"
    if isinstance(data_type, StringType):
        # With the default spark.sql.parser.escapedStringLiterals=false the parser unescapes backslashes.
        return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(data_type, ArrayType):
        items = ", ".join(_nested(v, data_type.elementType) for v in value)  # type: ignore[attr-defined]
        return f"CAST(array({items}) AS {data_type.simpleString()})"
    if isinstance(data_type, StructType):  # a dict by field name, or a tuple in field order
        fields = data_type.fields
        values = [value.get(f.name) for f in fields] if isinstance(value, dict) else list(value)  # type: ignore[call-overload]
        parts = ", ".join(f"'{f.name}', {_nested(v, f.dataType)}" for f, v in zip(fields, values, strict=True))
        return f"named_struct({parts})"
    raise TypeError(f"no SQL literal for {data_type.simpleString()} values")


def _nested(value: object, data_type: DataType) -> str:
    """A literal inside an array or struct: a null carries its type (the element types must agree)."""
    return f"CAST(NULL AS {data_type.simpleString()})" if value is None else sql_literal(value, data_type)


def typed_column(value: str, field: StructField) -> str:
    """SQL select-list text: value (SQL text) cast to field's type and named after it."""
    return f"CAST({value} AS {field.dataType.simpleString()}) AS `{field.name}`"


def _columns(schema: StructType, source: str) -> str:
    return ", ".join(typed_column(source.format(i=i + 1), f) for i, f in enumerate(schema.fields))


def empty_frame(spark: SparkSession, schema: StructType) -> DataFrame:
    """A frame with schema's columns and no rows (an empty local relation once optimized)."""
    return spark.sql(f"SELECT {_columns(schema, 'NULL')} WHERE false")


def local_frame(spark: SparkSession, rows: Sequence[Sequence[object]], schema: StructType) -> DataFrame:
    """The rows (tuples in schema's field order) as a frame; a local relation up to MAX_VALUES_CELLS values."""
    if not rows:
        return empty_frame(spark, schema)
    if len(rows) * len(schema.fields) > MAX_VALUES_CELLS:
        return spark.createDataFrame(list(rows), schema)
    fields = schema.fields
    values = ", ".join("(" + ", ".join(sql_literal(v, f.dataType) for v, f in zip(row, fields, strict=True)) + ")"
                       for row in rows)
    return spark.sql(f"SELECT {_columns(schema, 'col{i}')} FROM VALUES {values}")
