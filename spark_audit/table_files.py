"""The findings' Parquet tables (OUT/tables/<finding>/) written from their collected rows with pyarrow.

The rows are already in Python (the findings are finished there), so a table is one small Parquet file,
written without a Spark job: the 12 tables of a one-shot audit took about 2 s of Spark write jobs in a
cold JVM (bench/HISTORY.md, session 29). The layout is Spark's: the directory holds a ``part-00000`` file
and an empty ``_SUCCESS`` marker, replaced whole, and ``spark.read.parquet(dir)`` reads back the same
schema (the Spark types map one to one, below). A URI goes through Hadoop's FileSystem API (spark_audit.fs).
"""
from __future__ import annotations

import importlib.util
import io
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructType,
)

from spark_audit import fs

PART_FILE = "part-00000.snappy.parquet"   # what Spark names its (longer) part files: part-N-<uuid>-c000.snappy.parquet
SUCCESS_FILE = "_SUCCESS"


def available() -> bool:
    """pyarrow is installed (an `mqbridge[spark]` install has it; Spark's own image, where the spark-audit
    service runs, does not: there the tables are Spark frames written by Spark, as before)."""
    return importlib.util.find_spec("pyarrow") is not None


def arrow_type(data_type: DataType) -> Any:  # noqa: ANN401 - a pyarrow DataType
    """The Arrow type Spark reads back as data_type (the types the findings' schemas use)."""
    import pyarrow as pa
    if isinstance(data_type, StringType):
        return pa.string()
    if isinstance(data_type, LongType):
        return pa.int64()
    if isinstance(data_type, IntegerType):
        return pa.int32()
    if isinstance(data_type, DoubleType):
        return pa.float64()
    if isinstance(data_type, BooleanType):
        return pa.bool_()
    if isinstance(data_type, ArrayType):
        return pa.list_(pa.field("element", arrow_type(data_type.elementType), data_type.containsNull))
    if isinstance(data_type, StructType):
        return pa.struct([pa.field(f.name, arrow_type(f.dataType), f.nullable) for f in data_type.fields])
    raise TypeError(f"no Parquet mapping for the finding column type {data_type.simpleString()}")


def arrow_schema(schema: StructType) -> Any:  # noqa: ANN401 - a pyarrow Schema
    import pyarrow as pa
    return pa.schema([pa.field(f.name, arrow_type(f.dataType), f.nullable) for f in schema.fields])


def parquet_bytes(rows: Sequence[Mapping[str, object]], schema: StructType) -> bytes:
    """The rows (each with every field of schema, by name) as one Parquet file."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    target = arrow_schema(schema)
    columns = [pa.array([row[f.name] for row in rows], type=t.type) for f, t in zip(schema.fields, target,
                                                                                     strict=True)]
    table = pa.Table.from_arrays(columns, schema=target)
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="snappy")
    return buffer.getvalue()


def write_table(directory: str, rows: Sequence[Mapping[str, object]], schema: StructType) -> None:
    """Replace ``directory`` (a local path or a URI) with the rows as a Parquet table."""
    data = parquet_bytes(rows, schema)
    if fs.is_remote(directory):
        hadoop = fs.Hadoop()
        hadoop.delete(directory)
        hadoop.write(fs.join(directory, PART_FILE), data)
        hadoop.write(fs.join(directory, SUCCESS_FILE), b"")
        return
    target = Path(directory)
    target.parent.mkdir(parents=True, exist_ok=True)
    # built beside it and renamed in: a reader never sees a half-written table
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        (staging / PART_FILE).write_bytes(data)
        (staging / SUCCESS_FILE).write_bytes(b"")
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
