"""The conversion-log record schema: dataclass validation, JSON round trip, fixture lines (no Spark)."""
from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from mappings.convlog_schema import (
    FIELD_NAMES,
    FIELDS,
    SCHEMA_VERSION,
    ConversionRecord,
    Direction,
    Protocol,
    RecordError,
    Status,
)
from mappings.report import Change, ConversionReport, Finding

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


def make(**overrides: object) -> ConversionRecord:
    values: dict[str, object] = dict(
        event_time=datetime(2026, 3, 1, 10, 0, 0, 123456, tzinfo=UTC),
        gateway_id="gw-a",
        message_key="k1",
        route="sensors-to-mq",
        direction=Direction.EGRESS,
        source_protocol=Protocol.MQTT,
        target_protocol=Protocol.MQ,
        source_type="publish",
        target_type="MQSTR",
        qos=1,
        source_size=12,
        target_size=12,
        status=Status.OK,
        findings=(Finding(Change.COERCED, "volume", "i8 -> String"),),
        latency_us=1500,
        client_id="sensor-1",
        destination="SENSORS.Q",
    )
    values.update(overrides)
    return ConversionRecord(**values)  # type: ignore[arg-type]


def test_json_line_round_trip_is_exact() -> None:
    record = make()
    line = record.to_json_line()
    assert line.endswith("\n") and line.count("\n") == 1
    assert ConversionRecord.from_json_line(line) == record


def test_json_line_has_every_field_in_schema_order_with_explicit_nulls() -> None:
    data = json.loads(make(persistent=None, priority=None).to_json_line())
    assert tuple(data) == FIELD_NAMES
    assert data["persistent"] is None and data["priority"] is None
    assert data["schema_version"] == SCHEMA_VERSION
    assert data["event_time"] == "2026-03-01T10:00:00.123456Z"
    assert data["findings"] == [{"change": "coerced", "name": "volume", "detail": "i8 -> String"}]
    assert data["direction"] == "egress" and data["status"] == "ok"


def test_fields_and_dataclass_agree() -> None:
    assert set(FIELD_NAMES) == set(ConversionRecord.__dataclass_fields__)
    assert len(FIELD_NAMES) == len(set(FIELD_NAMES)) == len(FIELDS)
    assert all(f.doc for f in FIELDS)


def test_strings_become_enums_and_other_offsets_become_utc() -> None:
    paris = timezone(timedelta(hours=1))
    record = make(direction="ingress", status="ok", source_protocol="jms",
                  event_time=datetime(2026, 3, 1, 11, 0, tzinfo=paris))
    assert record.direction is Direction.INGRESS
    assert record.source_protocol is Protocol.JMS
    assert record.event_time == datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    assert record.event_time.tzinfo == UTC


def test_findings_from_a_conversion_report() -> None:
    report = ConversionReport()
    report.dropped("retain", "JMS has no retained flag")
    report.truncated("UserIdentifier", "> 12 bytes")
    record = make(findings=report.findings)
    assert record.findings == tuple(report.findings)
    assert json.loads(record.to_json_line())["findings"] == report.as_list()


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"qos": 3}, "qos", "3 is above 2"),
        ({"qos": "1"}, "qos", "must be an integer"),
        ({"qos": True}, "qos", "must be an integer"),
        ({"priority": 10}, "priority", "10 is above 9"),
        ({"source_size": -1}, "source_size", "-1 is below 0"),
        ({"direction": "sideways"}, "direction", "'sideways' is not one of ingress, egress"),
        ({"status": "lost"}, "status", "'lost' is not one of ok, failed, backout, dropped"),
        ({"source_protocol": "amqp"}, "source_protocol", "'amqp' is not one of mqtt, mq, jms"),
        ({"message_key": None}, "message_key", "is required"),
        ({"persistent": "yes"}, "persistent", "must be true or false"),
        ({"event_time": "2026-03-01 10:00:00"}, "event_time", "no UTC offset"),
        ({"event_time": "yesterday"}, "event_time", "not an ISO 8601 UTC timestamp"),
        ({"findings": [{"change": "lost", "name": "x"}]}, "findings[0].change", "'lost' is not one of"),
        ({"findings": [{"change": "dropped", "name": ""}]}, "findings[0].name", "non-empty string"),
        ({"findings": [{"change": "dropped", "name": "x", "why": 1}]}, "findings[0].why", "not a finding"),
        ({"findings": "none"}, "findings", "must be a list"),
        ({"status": "failed", "reason": None}, "reason", "required when status is failed"),
        ({"schema_version": SCHEMA_VERSION + 1}, "schema_version", "newer than"),
        ({"trace_context": "x"}, "trace_context", "is not a field of schema version"),
    ],
)
def test_from_dict_names_the_bad_field(change: dict[str, object], field: str, message: str) -> None:
    data = {**make().to_dict(), **change}
    with pytest.raises(RecordError) as err:
        ConversionRecord.from_dict(data)
    assert err.value.field == field
    assert message in err.value.reason
    assert str(err.value).startswith("conversion log record: " + field)


def test_constructor_validates_too() -> None:
    with pytest.raises(RecordError) as err:
        make(latency_us=-5)
    assert err.value.field == "latency_us"
    with pytest.raises(RecordError) as err:
        make(event_time=datetime(2026, 3, 1))
    assert err.value.field == "event_time"


def test_not_json_and_not_an_object() -> None:
    with pytest.raises(RecordError) as err:
        ConversionRecord.from_json_line("this is not json")
    assert err.value.field == "<line>"
    with pytest.raises(RecordError) as err:
        ConversionRecord.from_json_line("[1, 2]")
    assert err.value.field == "<record>"


def test_replace_keeps_validation() -> None:
    with pytest.raises(RecordError):
        replace(make(), qos=7)


def fixture_lines(name: str) -> list[str]:
    return [line for line in (FIXTURES / name).read_text().splitlines() if line.strip()]


def test_fixture_logs_parse_except_the_deliberately_bad_lines() -> None:
    good, bad = [], []
    for name in ("gateway-a.jsonl", "gateway-b.jsonl"):
        for line in fixture_lines(name):
            try:
                good.append(ConversionRecord.from_json_line(line))
            except RecordError as exc:
                bad.append(exc.field)
    assert len(good) == 55
    # The same six lines spark_audit counts as bad: 3 malformed, 1 future version, 2 invalid.
    assert bad == ["<line>", "<line>", "qos", "schema_version", "direction", "message_key"]


def test_fixture_lines_are_what_the_dataclass_writes() -> None:
    for line in fixture_lines("gateway-a.jsonl"):
        assert ConversionRecord.from_json_line(line).to_json_line() == line + "\n"


def test_a_version_1_line_without_retained_still_reads() -> None:
    """Schema version 2 added ``retained``: a line written by version 1 has no such field and stays valid."""
    data = json.loads(make().to_json_line())
    del data["retained"]
    data["schema_version"] = 1
    record = ConversionRecord.from_dict(data)
    assert record.schema_version == 1 and record.retained is None
    assert ConversionRecord.from_dict({**data, "retained": True}).retained is True
    with pytest.raises(RecordError) as err:
        ConversionRecord.from_dict({**data, "retained": "yes"})
    assert err.value.field == "retained"
