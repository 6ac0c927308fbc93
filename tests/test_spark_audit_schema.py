"""The bridge side and the Spark side agree on the log schema: a dataclass record read back by Spark."""
from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

pytest.importorskip("pyspark")

try:
    from tests.spark_fixtures import spark  # noqa: F401
except ImportError:  # tests/ is not a package: pytest puts this directory on sys.path
    from spark_fixtures import spark  # noqa: F401

from pyspark.sql import types as T  # noqa: E402

from mappings.convlog_schema import FIELD_NAMES, FIELDS, ConversionRecord  # noqa: E402
from mappings.report import Change, Finding  # noqa: E402
from spark_audit.ingest import read_logs  # noqa: E402
from spark_audit.schema import CORRUPT_COLUMN, PROBLEM_COLUMN, read_schema, record_schema  # noqa: E402

pytestmark = pytest.mark.spark

EXPECTED_TYPES = {
    "int": T.IntegerType(), "long": T.LongType(), "string": T.StringType(), "bool": T.BooleanType(),
    "timestamp": T.TimestampType(),
}


def test_spark_schema_is_derived_field_by_field():
    schema = record_schema()
    assert tuple(schema.fieldNames()) == FIELD_NAMES
    for spec in FIELDS:
        if spec.kind == "findings":
            assert schema[spec.name].dataType.simpleString() == (
                "array<struct<change:string,name:string,detail:string>>")
        else:
            assert schema[spec.name].dataType == EXPECTED_TYPES[spec.kind]
    assert read_schema().fieldNames()[-1] == CORRUPT_COLUMN


def records() -> list[ConversionRecord]:
    t = datetime(2026, 3, 1, 23, 59, 59, 999999, tzinfo=UTC)
    full = ConversionRecord(
        event_time=t, gateway_id="gw-ü", message_key="k-1", route="r", direction="egress",
        source_protocol="jms", target_protocol="mq", source_type="MapMessage", target_type="MQSTR",
        qos=2, persistent=True, retained=True, priority=9, source_size=2**40, target_size=0, status="backout",
        reason="backout threshold 3 exceeded", latency_us=2**33, client_id="c", destination="Q",
        redelivery_count=4,
        findings=(Finding(Change.COERCED, "volume", "i8 -> String"), Finding(Change.RENAMED, "a.b", "")),
    )
    sparse = ConversionRecord(
        event_time=t, gateway_id="gw", message_key="k-2", route="r", direction="ingress",
        source_protocol="mqtt", target_protocol="jms", source_type="publish", qos=0, source_size=0,
        status="ok",
    )
    return [full, sparse]


def test_dataclass_records_round_trip_through_spark(spark, tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text("".join(r.to_json_line() for r in records()))
    rows = read_logs(spark, [str(log)]).collect()
    assert [r[PROBLEM_COLUMN] for r in rows] == [None, None]
    for row, record in zip(rows, records(), strict=True):
        got = {name: row[name] for name in FIELD_NAMES}
        want = record.to_dict()
        # Spark hands timestamps back as local naive datetimes: compare the instant.
        assert got.pop("event_time").astimezone(UTC) == record.event_time
        want.pop("event_time")
        got["findings"] = [f.asDict() for f in got["findings"]]
        assert got == want


@pytest.mark.parametrize(("findings", "problem"), [
    ([], None),
    ([{"change": "coerced", "name": "p", "detail": "i8 -> String"}, {"change": "dropped", "name": "q"}], None),
    ([{"change": "coerced", "name": "p"}, {"change": "squashed", "name": "q"}], "invalid:findings"),
    ([{"name": "p"}], "invalid:findings"),  # no change
    ([{"change": "coerced", "name": "p"}, {"change": "dropped"}], "invalid:findings"),  # no name
    ([{"change": "coerced", "name": "p"}, None], "invalid:findings"),  # a null finding
])
def test_each_finding_needs_a_known_change_and_a_name(spark, tmp_path, findings, problem):
    line = records()[0].to_dict()
    line["event_time"] = "2026-03-01T10:00:00.000000Z"
    line["findings"] = findings
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps(line) + "\n")
    (row,) = read_logs(spark, [str(log)]).collect()
    assert row[PROBLEM_COLUMN] == problem


def test_a_version_1_record_without_retained_is_still_valid(spark, tmp_path):
    """Logs written before schema version 2 (no ``retained`` field) are read as they are: retained null."""
    line = records()[1].to_dict()
    line.update(schema_version=1, event_time="2026-03-01T10:00:00.000000Z")
    del line["retained"]
    log = tmp_path / "old.jsonl"
    log.write_text(json.dumps(line) + "\n")
    (row,) = read_logs(spark, [str(log)]).collect()
    assert row[PROBLEM_COLUMN] is None and row["retained"] is None and row["schema_version"] == 1
