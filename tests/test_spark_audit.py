"""spark_audit end to end on the fixture logs: exact losses, duplicates, failures, coercions, latency."""
from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

try:
    from tests.spark_fixtures import FIXTURE_LOGS, spark  # noqa: F401
except ImportError:  # tests/ is not a package: pytest puts this directory on sys.path
    from spark_fixtures import FIXTURE_LOGS, spark  # noqa: F401

from spark_audit.aggregates import round_latency  # noqa: E402
from spark_audit.audit import load, run_audit  # noqa: E402
from spark_audit.findings import PERCENTILES, AuditResult, percentile  # noqa: E402
from spark_audit.options import build_parser  # noqa: E402
from spark_audit.run import run  # noqa: E402
from spark_audit.scope import AuditConfig  # noqa: E402

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def cli_run(spark, tmp_path_factory) -> tuple[int, Path]:
    """The full pipeline once, as `python -m spark_audit fixtures/logs --grace 60` would run it."""
    out = tmp_path_factory.mktemp("audit")
    args = build_parser().parse_args([str(FIXTURE_LOGS), "--out", str(out), "--grace", "60"])
    return run(args, spark), out


@pytest.fixture(scope="module")
def summary(cli_run) -> dict[str, Any]:
    return json.loads((cli_run[1] / "summary.json").read_text())


def audit(spark, parquet: Path, **config: Any) -> AuditResult:
    result = run_audit(load(spark, str(parquet), AuditConfig(**config)))
    result.cleanup()
    return result


def test_exit_code_gates_on_loss_and_suspicious_duplicates(cli_run, summary):
    assert cli_run[0] == 1
    assert summary["verdict"] == {
        "exit_code": 1,
        "gate_failed": True,
        "losses": 1,
        "unexpected_egress": 1,
        "duplicates_allowed": 1,
        "duplicates_suspicious": 2,
        "failed": 2,
        "backout": 2,
        "dropped": 1,
        "bad_input_lines": 6,
        "damaged_files": 0,
    }


def test_bad_input_is_counted_by_problem_and_file(summary):
    inp = summary["input"]
    assert (inp["rows_read"], inp["valid"], inp["bad"]) == (61, 55, 6)
    expected = {"future_version": 1, "invalid:direction": 1, "invalid:message_key": 1, "malformed": 3}
    assert inp["problems"] == expected
    [(file_name, per_file)] = inp["problems_by_file"].items()
    assert file_name.endswith("gateway-b.jsonl") and per_file == expected
    assert {s["text"] for s in inp["samples"] if s["problem"] == "malformed"} >= {"this is not json"}
    assert inp["min_time"] == "2026-03-01T10:00:00+00:00"
    assert inp["max_time"] == "2026-03-02T09:01:00+00:00"


def test_records_by_direction_and_status(summary):
    assert summary["records"] == {
        "loaded": 55,
        "in_window": 55,
        "by_direction": {"egress": 29, "ingress": 26},
        "by_status": {"backout": 2, "dropped": 1, "failed": 2, "ok": 50},
    }
    assert summary["window"]["as_of"] == "2026-03-02T09:01:00+00:00"


def test_the_one_loss_is_listed_with_route_and_age(summary):
    assert summary["losses"] == [{
        "message_key": "s7", "route": "sensors-to-mq", "direction": "ingress", "source_protocol": "mqtt",
        "target_protocol": "mq", "qos": 1, "client_id": "sensor-2", "destination": "sensors/temp",
        "event_time": "2026-03-01T10:35:00.000000Z", "age_seconds": 80760.0, "ingress_records": 1,
    }]


def test_egress_without_ingress_is_unexpected(summary):
    assert [(u["message_key"], u["route"], u["client_id"]) for u in summary["unexpected_egress"]] == [
        ("m9", "mq-to-mqtt", "dash-2")
    ]


def test_duplicates_split_allowed_and_suspicious(summary):
    got = [(d["kind"], d["message_key"], d["client_id"], d["qos"], d["copies"], d["max_redelivery"])
           for d in summary["duplicates"]]
    assert got == [  # suspicious first: a summary capped at max_items keeps them before the allowed ones
        ("suspicious", "o7", "pos-7", 1, 3, 1),      # QoS 1, three copies but one redelivery
        ("suspicious", "s8", "sensor-3", 2, 2, 0),   # QoS 2 delivered twice
        ("allowed", "s3", "sensor-1", 1, 2, 1),      # QoS 1, one announced redelivery
    ]
    # m1 went to two subscribers once each: a fan-out, not a duplicate.
    assert "m1" not in {d["message_key"] for d in summary["duplicates"]}


def test_failures_by_reason(summary):
    got = [(f["status"], f["route"], f["reason"], f["records"]) for f in summary["failures"]]
    assert got == [
        ("backout", "mq-to-mqtt", "backout threshold 3 exceeded", 2),
        ("dropped", "mq-to-mqtt", "no matching subscriber", 1),
        ("failed", "orders-to-jms", "STOMP ERROR: destination not allowed", 1),
        ("failed", "orders-to-jms", "payload is not valid UTF-8 for TextMessage", 1),
    ]
    # And each record by message key, the first by time, with where the message came from.
    got = [(f["message_key"], f["status"], f["direction"], f["source_client"], f["source_destination"])
           for f in summary["failure_records"]]
    assert [g[:3] for g in got] == [("m2", "backout", "egress"), ("m3", "backout", "egress"),
                                    ("o5", "failed", "egress"), ("o6", "failed", "ingress"),
                                    ("m4", "dropped", "egress")]
    assert got[3][3:] == ("pos-8", "orders/new")  # an ingress record is its own source


def test_top_offending_clients_and_destinations(summary):
    assert summary["top_clients"] == [
        {"client_id": "pos-8", "problems": 2, "failed": 2, "backout": 0, "dropped": 0}
    ]
    assert [(d["destination"], d["problems"]) for d in summary["top_destinations"]] == [
        ("ALERTS.BACKOUT", 2), ("alerts/all", 1), ("orders/new", 1), ("queue://ORDERS", 1)
    ]


def test_coercions_and_losses_per_route_and_name(summary):
    got = [(c["route"], c["change"], c["name"], c["detail"], c["occurrences"])
           for c in summary["conversion_changes"]]
    assert got == [
        ("jms-to-mqtt", "coerced", "volume", "i8 -> JSON number", 2),
        ("orders-to-jms", "defaulted", "JMSPriority", "4 (MQTT has no priority)", 2),
        ("orders-to-jms", "dropped", "retain", "JMS has no retained flag", 2),
        ("jms-to-mqtt", "dropped", "JMSXGroupSeq", "no MQTT equivalent", 1),
    ]


def test_histogram_percentiles_are_percentile_approx_within_half_a_percent(spark):
    """The latency percentiles come from a histogram of values rounded to 3 significant digits: at the
    same rank as Spark's percentile_approx (exact at this accuracy), within 0.5 % of its value."""
    n = 20_000
    values = spark.range(n).selectExpr("CAST(pow(10, rand(7) * 7) AS BIGINT) AS latency_us")  # 1 us .. 10 s
    histogram = sorted((int(r["lat"]), int(r["count"])) for r in values.selectExpr(
        f"{round_latency('latency_us')} AS lat").groupBy("lat").count().collect())
    assert len(histogram) < n / 4  # the rounding does merge values
    exact = values.selectExpr(
        f"percentile_approx(latency_us, array{tuple(PERCENTILES)}, 1000000) AS p").first()["p"]
    for p, want in zip(PERCENTILES, exact, strict=True):
        got = percentile(histogram, n, p)
        assert abs(got - want) <= 0.005 * want, (p, got, want)


def test_latency_percentiles_per_route(summary):
    got = {r["route"]: (r["samples"], r["p50_us"], r["p95_us"], r["p99_us"], r["max_us"])
           for r in summary["latency"]}
    assert got == {
        "jms-to-mqtt": (5, 2400, 2800, 2800, 2800),
        "mq-to-mqtt": (3, 700, 60_000_000, 60_000_000, 60_000_000),
        "orders-to-jms": (7, 1100, 50_000, 50_000, 50_000),
        "sensors-to-mq": (9, 3000, 2_000_000, 2_000_000, 2_000_000),
    }


def test_payload_size_histogram(summary):
    [row] = [r for r in summary["payload_sizes"]
             if (r["route"], r["direction"]) == ("sensors-to-mq", "ingress")]
    assert (row["messages"], row["min_bytes"], row["max_bytes"], row["total_bytes"]) == (8, 0, 70000, 72544)
    assert {b["bucket"]: b["messages"] for b in row["histogram"] if b["messages"]} == {
        "0": 1, "1-63": 2, "64-255": 2, "256-1Ki": 1, "1Ki-4Ki": 1, "64Ki-256Ki": 1
    }


def test_volume_trend_against_previous_window(summary):
    def pick(rows, window_start, direction):
        [r] = [r for r in rows if r["route"] == "jms-to-mqtt" and r["window_start"] == window_start
               and r["direction"] == direction]
        return r["records"], r["previous_records"], r["change"]

    hour = summary["volume"]["hour"]
    assert pick(hour, "2026-03-01T10:00:00.000000Z", "ingress") == (3, 0, 3)
    assert pick(hour, "2026-03-01T11:00:00.000000Z", "ingress") == (2, 3, -1)
    [day2] = [r for r in summary["volume"]["day"] if r["window_start"] == "2026-03-02T00:00:00.000000Z"
              and r["route"] == "mq-to-mqtt" and r["direction"] == "ingress"]
    assert (day2["records"], day2["previous_records"], day2["change"]) == (1, 4, -3)
    assert sum(r["records"] for r in hour) == sum(r["records"] for r in summary["volume"]["day"]) == 55


def test_parquet_tables_per_finding(spark, cli_run):
    tables = cli_run[1] / "tables"
    assert sorted(p.name for p in tables.iterdir()) == [
        "conversion_changes", "duplicates", "failure_records", "failures", "latency", "losses", "payload_sizes",
        "top_clients", "top_destinations", "unexpected_egress", "volume_daily", "volume_hourly",
    ]
    losses = spark.read.parquet(str(tables / "losses")).collect()
    assert [(r["message_key"], r["age_seconds"]) for r in losses] == [("s7", 80760.0)]
    assert spark.read.parquet(str(tables / "duplicates")).count() == 3
    assert (cli_run[1] / "parquet").is_dir()


def test_every_parquet_table_holds_the_rows_of_its_summary_finding(spark, cli_run, summary):
    """The tables are made from the collected rows (local relations): same rows, columns and values."""
    tables = cli_run[1] / "tables"
    found = {**{k: v for k, v in summary.items() if isinstance(v, list)},
             "volume_hourly": summary["volume"]["hour"], "volume_daily": summary["volume"]["day"]}
    assert set(found) == {p.name for p in tables.iterdir()}
    for name, rows in found.items():
        stored = [r.asDict(recursive=True) for r in spark.read.parquet(str(tables / name)).collect()]
        assert rows, name  # the fixture log has something in every finding
        key = json.dumps
        assert sorted(map(key, stored)) == sorted(map(key, rows)), name


def test_html_report_is_self_contained_with_charts(cli_run):
    html = (cli_run[1] / "report.html").read_text()
    assert html.startswith("<!doctype html>")
    assert html.count("<svg") == 3  # volume over time, failures by reason, latency per route
    assert "Records per hour by status" in html and "Latency per route" in html
    assert "Failures by reason" in html and "s7" in html
    suspicious, allowed = html.index("<h2>Suspicious duplicates"), html.index("<h2>Allowed duplicates")
    assert suspicious < html.index("o7") < html.index("s8") < allowed < html.index("s3", allowed)
    assert "<script" not in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")


def test_zero_grace_turns_the_pending_ingress_into_a_loss(spark, cli_run):
    result = audit(spark, cli_run[1] / "parquet", grace_seconds=0)
    assert result.counts["losses"] == 2
    lost = {r["message_key"]: r["age_seconds"] for r in result.rows["key_problems"] if r["kind"] == "lost"}
    assert lost == {"s7": 80760.0, "p1": 30.0}


def test_since_until_window(spark, cli_run):
    result = audit(spark, cli_run[1] / "parquet", grace_seconds=60,
                   since=datetime(2026, 3, 1, 10, 30, tzinfo=UTC), until=datetime(2026, 3, 1, 11, tzinfo=UTC))
    assert result.data.rows_in_window == 10
    assert result.counts == {"losses": 1, "unexpected_egress": 0, "duplicates_allowed": 0,
                             "duplicates_suspicious": 1, "failed": 0, "backout": 0, "dropped": 0}
    assert [d["message_key"] for d in result.rows["duplicates"]] == ["s8"]


def test_clean_log_passes(spark, tmp_path):
    clean = tmp_path / "clean.jsonl"
    lines = (FIXTURE_LOGS / "gateway-a.jsonl").read_text().splitlines(keepends=True)
    clean.write_text("".join(line for line in lines if '"message_key":"o1"' in line))
    args = build_parser().parse_args([str(clean), "--out", str(tmp_path / "out"), "--no-parquet-tables"])
    assert run(args, spark) == 0
    verdict = json.loads((tmp_path / "out" / "summary.json").read_text())["verdict"]
    assert not verdict["gate_failed"] and verdict["losses"] == 0


def test_unusable_arguments_exit_2(spark, tmp_path):
    parser = build_parser()
    assert run(parser.parse_args([str(tmp_path / "nothing-here")]), spark) == 2
    args = parser.parse_args([str(FIXTURE_LOGS), "--since", "2026-03-02", "--until", "2026-03-01"])
    assert run(args, spark) == 2
    with pytest.raises(SystemExit):
        parser.parse_args([str(FIXTURE_LOGS), "--grace", "-1"])
    assert isinstance(parser.parse_args([str(FIXTURE_LOGS), "--since", "2026-03-01T10:00:00Z"]).since,
                      datetime)
    assert isinstance(args, argparse.Namespace)


def test_a_log_of_only_bad_lines_is_reported_not_a_crash(spark, tmp_path):
    log = tmp_path / "bad.jsonl"
    log.write_text('garbage\n{"schema_version":9,"event_time":"2026-03-01T10:00:00.000000Z"}\n\n')
    args = build_parser().parse_args([str(log), "--out", str(tmp_path / "out"), "--no-parquet-tables"])
    assert run(args, spark) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["input"]["problems"] == {"future_version": 1, "malformed": 1}
    assert (summary["input"]["valid"], summary["records"]["in_window"]) == (0, 0)


def test_keys_sharing_a_hash_fall_back_to_exact_keys(spark, cli_run, monkeypatch):
    """Per-key flags group by a 64-bit hash of (message_key, route); a collision must not merge two keys.

    A deliberately weak hash (the route alone: every key of a route collides) must be detected and give
    the findings of the exact string keys.
    """
    from pyspark.sql import functions as F

    import spark_audit.keys as keys_module

    exact = audit(spark, cli_run[1] / "parquet", grace_seconds=60)
    data = load(spark, str(cli_run[1] / "parquet"), AuditConfig(grace_seconds=60))
    assert keys_module.flag_hashed_keys(data) is not None  # the real hash: no collision in the fixtures
    monkeypatch.setattr(keys_module, "key_hash_column", lambda data: F.xxhash64("route"))
    assert keys_module.flag_hashed_keys(data) is None
    weak = audit(spark, cli_run[1] / "parquet", grace_seconds=60)
    assert weak.counts == exact.counts
    assert weak.rows["key_problems"] == exact.rows["key_problems"]
    assert weak.rows["duplicates"] == exact.rows["duplicates"]
    assert weak.rows["failure_records"] == exact.rows["failure_records"]
    assert weak.loss_counts == exact.loss_counts
    assert exact.counts["losses"] == 1 and exact.counts["duplicates_suspicious"] == 2


def test_many_flagged_keys_are_fetched_by_spark_with_the_same_findings(spark, cli_run, monkeypatch):
    """Up to MAX_FETCHED_KEYS flagged keys come back with the window aggregate and are finished in Python;
    beyond that a Spark job of their own fetches them. Both give the same rows, counts and table types."""
    import spark_audit.audit as audit_module

    fetched = audit(spark, cli_run[1] / "parquet", grace_seconds=60)
    monkeypatch.setattr(audit_module, "MAX_FETCHED_KEYS", 0)
    joined = audit(spark, cli_run[1] / "parquet", grace_seconds=60, max_items=1)
    assert joined.counts == fetched.counts
    assert joined.rows["key_problems"] == fetched.rows["key_problems"][:1]
    assert joined.rows["duplicates"] == fetched.rows["duplicates"][:1]
    assert joined.rows["failure_records"] == fetched.rows["failure_records"][:1]
    assert joined.loss_counts == fetched.loss_counts
    for name in ("key_problems", "duplicates"):
        types = [(f.name, f.dataType) for f in fetched.tables[name].schema.fields]
        assert [(f.name, f.dataType) for f in joined.tables[name].schema.fields] == types
        assert sorted(map(tuple, joined.tables[name].collect())) == sorted(map(tuple, fetched.tables[name].collect()))
    assert len(fetched.rows["duplicates"]) == 3 and fetched.counts["losses"] == 1
