"""The findings' Parquet tables written with pyarrow (spark_audit.table_files): Spark reads back the schema
and values it was given; a table is replaced whole; a run's summary.json is written after its tables."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

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

from spark_audit import table_files  # noqa: E402
from spark_audit.options import build_parser  # noqa: E402
from spark_audit.run import run  # noqa: E402
from spark_audit.table_files import PART_FILE, SUCCESS_FILE, write_table  # noqa: E402

try:
    from tests.spark_fixtures import FIXTURE_LOGS, spark  # noqa: F401
except ImportError:  # tests/ is not a package: pytest puts this directory on sys.path
    from spark_fixtures import FIXTURE_LOGS, spark  # noqa: F401

SCHEMA = StructType([
    StructField("name", StringType()), StructField("count", LongType()), StructField("qos", IntegerType()),
    StructField("mean", DoubleType()), StructField("flag", BooleanType()),
    StructField("histogram", ArrayType(StructType([StructField("bucket", StringType()),
                                                   StructField("messages", LongType())]))),
    StructField("key", LongType(), False),
])


def test_spark_reads_back_the_schema_and_values(spark, tmp_path):
    rows = [
        {"name": "a\u00e9\U0001f600", "count": 2**40, "qos": 1, "mean": 1.5, "flag": True,
         "histogram": [{"bucket": "0-64", "messages": 3}, {"bucket": "64-1K", "messages": 0}], "key": -1},
        {"name": None, "count": None, "qos": None, "mean": None, "flag": None, "histogram": None, "key": 7},
        {"name": "", "count": 0, "qos": 2, "mean": -0.25, "flag": False, "histogram": [], "key": 0},
    ]
    write_table(str(tmp_path / "t"), rows, SCHEMA)
    frame = spark.read.parquet(str(tmp_path / "t"))
    assert frame.schema.simpleString() == StructType(
        [StructField(f.name, f.dataType) for f in SCHEMA.fields]).simpleString()
    assert [r.asDict(recursive=True) for r in frame.orderBy("key").collect()] == sorted(
        rows, key=lambda r: r["key"])


def test_a_table_is_replaced_whole(tmp_path):
    target = tmp_path / "tables" / "losses"
    target.mkdir(parents=True)
    (target / "part-00000-old-c000.snappy.parquet").write_bytes(b"old")
    write_table(str(target), [], SCHEMA)
    assert sorted(p.name for p in target.iterdir()) == sorted([PART_FILE, SUCCESS_FILE])
    assert sorted(p.name for p in target.parent.iterdir()) == ["losses"]   # no staging left beside it


def test_a_runs_summary_comes_after_its_tables(spark, tmp_path, monkeypatch):
    out = tmp_path / "out"
    seen: list[tuple[str, bool, bool]] = []
    real = table_files.write_table

    def watched(directory: str, rows, schema) -> None:
        seen.append((Path(directory).name, (out / "summary.json").exists(), (out / "report.html").exists()))
        real(directory, rows, schema)

    monkeypatch.setattr(table_files, "write_table", watched)
    code = run(build_parser().parse_args([str(FIXTURE_LOGS), "--out", str(out), "--grace", "60"]), spark)
    assert code == 1   # the fixture log has losses
    assert len(seen) == 12 and not any(summary or html for _, summary, html in seen)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["verdict"]["losses"] == spark.read.parquet(str(out / "tables" / "losses")).count()
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []


def test_without_pyarrow_spark_writes_the_same_tables(spark, tmp_path, monkeypatch):
    """Spark's image (the spark-audit service) has no pyarrow: the tables are then Spark frames written by
    Spark, with the same rows and columns."""
    def tables(out: Path) -> dict[str, list[str]]:
        return {p.name: sorted(json.dumps(r.asDict(recursive=True)) for r in spark.read.parquet(str(p)).collect())
                for p in sorted((out / "tables").iterdir())}

    args = [str(FIXTURE_LOGS), "--grace", "60", "--out"]
    assert run(build_parser().parse_args([*args, str(tmp_path / "arrow")]), spark) == 1
    monkeypatch.setattr(table_files, "available", lambda: False)
    monkeypatch.setattr(table_files, "write_table", lambda *_: pytest.fail("pyarrow used"))
    assert run(build_parser().parse_args([*args, str(tmp_path / "spark")]), spark) == 1
    assert not (tmp_path / "spark" / "tables" / "losses" / PART_FILE).exists()   # Spark's own part files
    written = tables(tmp_path / "arrow")
    assert len(written) == 12 and written == tables(tmp_path / "spark")
