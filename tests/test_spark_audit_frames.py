"""Small frames from Python values (spark_audit/frames.py): the same rows as createDataFrame, as local relations."""
from __future__ import annotations

import math

import pytest

pytest.importorskip("pyspark")

try:
    from tests.spark_fixtures import spark  # noqa: F401
except ImportError:  # tests/ is not a package: pytest puts this directory on sys.path
    from spark_fixtures import spark  # noqa: F401

from pyspark.sql.types import (  # noqa: E402
    ArrayType,
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from spark_audit import frames  # noqa: E402

pytestmark = pytest.mark.spark

BUCKET = StructType([StructField("bucket", StringType()), StructField("messages", LongType())])
SCHEMA = StructType([
    StructField("k", LongType(), False), StructField("i", IntegerType()), StructField("s", StringType()),
    StructField("b", BooleanType()), StructField("d", DoubleType()), StructField("h", ArrayType(BUCKET)),
])
ROWS = [
    (-(2**63), -(2**31), "it's a \\ back'slash", True, 0.1, [{"bucket": "0", "messages": 3}, {"bucket": None,
                                                                                                "messages": None}]),
    (2**63 - 1, 2**31 - 1, "ünïcødé ✓ \n tab\t", False, -1e-300, []),
    (0, None, None, None, None, None),
    (7, 0, "", True, 1e300, [{"bucket": ">=1Mi", "messages": 2**40}]),
]


def plan_leaf(df) -> str:
    plan = df._jdf.queryExecution().optimizedPlan()
    while plan.children().size() > 0:
        plan = plan.children().apply(0)
    return str(plan.getClass().getSimpleName())


def as_python(df) -> list[tuple]:
    return [tuple(r.asDict(recursive=True).values()) for r in df.collect()]


def test_values_become_a_local_relation_with_the_rows_create_dataframe_gives(spark):
    local = frames.local_frame(spark, ROWS, SCHEMA)
    assert plan_leaf(local) == "LocalRelation"
    assert [(f.name, f.dataType) for f in local.schema.fields] == [(f.name, f.dataType) for f in SCHEMA.fields]
    assert as_python(local) == as_python(spark.createDataFrame(ROWS, SCHEMA))


def test_non_finite_doubles_and_struct_tuples(spark):
    schema = StructType([StructField("d", DoubleType()), StructField("p", BUCKET)])
    rows = [(math.inf, ("a", 1)), (-math.inf, None), (math.nan, ("b", None))]
    got = frames.local_frame(spark, rows, schema).collect()
    assert got[0]["d"] == math.inf and got[1]["d"] == -math.inf and math.isnan(got[2]["d"])
    assert got[0]["p"]["bucket"] == "a" and got[1]["p"] is None and got[2]["p"]["messages"] is None


def test_empty_and_large_frames(spark, monkeypatch):
    empty = frames.empty_frame(spark, SCHEMA)
    assert plan_leaf(empty) == "LocalRelation" and empty.count() == 0 and empty.schema == frames.empty_frame(
        spark, SCHEMA).schema
    assert [f.dataType for f in empty.schema.fields] == [f.dataType for f in SCHEMA.fields]
    monkeypatch.setattr(frames, "MAX_VALUES_CELLS", len(SCHEMA.fields) * 2)  # above it: RDD-backed, same rows
    large = frames.local_frame(spark, ROWS, SCHEMA)
    assert plan_leaf(large) != "LocalRelation"
    assert as_python(large) == as_python(frames.local_frame(spark, ROWS[:2], SCHEMA)) + as_python(
        frames.local_frame(spark, ROWS[2:], SCHEMA))


def test_unknown_types_are_refused():
    with pytest.raises(TypeError, match="no SQL literal for date"):
        from pyspark.sql.types import DateType

        frames.sql_literal("2026-01-01", DateType())
