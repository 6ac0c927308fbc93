"""Incremental runs carry state to the next run: pending ingress, egress copies, and "as of".

Three log files arrive one run apart (grace 60 s). Batch 1 leaves k1 and k4 pending and holds one copy
each of k3 (QoS 2) and k8 (QoS 1); batch 2 brings k1's egress, a second copy of k3 and a redelivered copy
of k8, an egress with no ingress (k9), and is far enough ahead for k4 to become a loss; batch 3 only
moves time on.
"""
from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

try:
    from tests.spark_fixtures import spark  # noqa: F401
except ImportError:  # tests/ is not a package: pytest puts this directory on sys.path
    from spark_fixtures import spark  # noqa: F401

from mappings.convlog_schema import ConversionRecord  # noqa: E402
from spark_audit.audit import ingest, load, run_audit  # noqa: E402
from spark_audit.carry import STATE_FILE  # noqa: E402
from spark_audit.incremental import run_incremental  # noqa: E402
from spark_audit.ingest import expand_paths  # noqa: E402
from spark_audit.scope import AuditConfig  # noqa: E402

pytestmark = pytest.mark.spark

T = datetime(2026, 4, 1, 10, 0, 0, tzinfo=UTC)
ROUTE = "orders-to-jms"
CONFIG = AuditConfig(grace_seconds=60)


def record(key: str, direction: str, seconds: float, *, qos: int = 1, redelivery: int = 0) -> str:
    egress = direction == "egress"
    return ConversionRecord(
        event_time=T + timedelta(seconds=seconds), gateway_id="gw-c", message_key=key, route=ROUTE,
        direction=direction, source_protocol="mqtt", target_protocol="jms", source_type="publish",
        target_type="TextMessage" if egress else None, qos=qos, source_size=10,
        target_size=10 if egress else None, status="ok", latency_us=1000 if egress else None,
        client_id="pos-1", destination="queue://ORDERS" if egress else "orders/new", redelivery_count=redelivery,
    ).to_json_line()


def pair(key: str, seconds: float, qos: int = 1) -> list[str]:
    return [record(key, "ingress", seconds, qos=qos), record(key, "egress", seconds + 1, qos=qos)]


BATCHES = [
    [record("k1", "ingress", 0), *pair("k2", 0), record("k3", "ingress", 0, qos=2),
     record("k3", "egress", 1, qos=2), record("k4", "ingress", 0), *pair("k8", 5), *pair("k5", 30)],
    [record("k1", "egress", 100), record("k3", "egress", 100, qos=2), record("k8", "egress", 110, redelivery=1),
     record("k9", "egress", 150), *pair("k6", 200)],
    [*pair("k7", 300)],
]
EXPECTED = [
    {"losses": 0, "unexpected_egress": 0, "duplicates_allowed": 0, "duplicates_suspicious": 0},
    {"losses": 1, "unexpected_egress": 1, "duplicates_allowed": 1, "duplicates_suspicious": 1},
    {"losses": 0, "unexpected_egress": 0, "duplicates_allowed": 0, "duplicates_suspicious": 0},
]


class Runs:
    """A logs directory, Parquet log and checkpoint; each step adds one file and runs once."""

    def __init__(self, spark: Any, root: Path) -> None:
        self.spark, self.root = spark, root
        self.logs, self.parquet, self.checkpoint = root / "logs", str(root / "parquet"), str(root / "ckpt")
        self.logs.mkdir(parents=True)

    def run(self, name: str, lines: list[str]) -> dict[str, Any]:
        (self.logs / f"{name}.jsonl").write_text("".join(lines))
        new, result = run_incremental(self.spark, str(self.logs), self.parquet, self.checkpoint, CONFIG)
        result.cleanup()
        counts = {k: result.counts[k] for k in EXPECTED[0]}
        return {"new": new, "counts": counts, "rows": result.rows}

    def state(self) -> dict[str, Any]:
        return json.loads((Path(self.checkpoint) / STATE_FILE).read_text())


def keys(rows: dict[str, Any], table: str, kind: str) -> list[str]:
    return sorted(str(r["message_key"]) for r in rows[table] if r["kind"] == kind)


def test_state_carries_pending_ingress_and_egress_copies_across_runs(spark, tmp_path):
    runs = Runs(spark, tmp_path)
    first = runs.run("b1", BATCHES[0])
    assert first["counts"] == EXPECTED[0]  # k1 and k4 are 30 s old: inside the grace period
    files = runs.state()["tail_files"]
    assert files and all(Path(f["path"]).is_file() for f in files)

    second = runs.run("b2", BATCHES[1])
    assert second["counts"] == EXPECTED[1]
    # k1's egress came a batch later: not a loss; k4 is reported now, with its age at this run's "as of".
    assert keys(second["rows"], "key_problems", "lost") == ["k4"]
    (lost,) = [r for r in second["rows"]["key_problems"] if r["kind"] == "lost"]
    assert lost["age_seconds"] == pytest.approx(201.0, abs=0.01)
    assert keys(second["rows"], "key_problems", "unexpected_egress") == ["k9"]
    # The copies of k3 and k8 are one run apart; each duplicate is one row with both copies counted.
    dups = {r["message_key"]: (r["kind"], r["copies"]) for r in second["rows"]["duplicates"]}
    assert dups == {"k3": ("suspicious", 2), "k8": ("allowed", 2)}

    third = runs.run("b3", BATCHES[2])
    assert third["counts"] == EXPECTED[2]  # k4's loss and the duplicates are not reported again
    assert sum(int(r["records"]) for r in third["rows"]["volume_hourly"]) == 2


def test_the_tail_files_not_the_parquet_log_match_the_keys(spark, tmp_path):
    """A broken file in the log's newest partition is never read: the run reads only the listed files."""
    runs = Runs(spark, tmp_path)
    runs.run("b1", BATCHES[0])
    listed = [Path(f["path"]) for f in runs.state()["tail_files"]]
    (listed[0].parent / "part-99999-broken.parquet").write_bytes(b"not parquet at all")
    assert runs.run("b2", BATCHES[1])["counts"] == EXPECTED[1]
    # Batch 2 reaches 120 s past batch 1's newest row (two grace periods): batch 1's files are dropped.
    runs.run("b3", BATCHES[2])
    kept = [Path(f["path"]) for f in runs.state()["tail_files"]]
    assert kept and not set(kept) & set(listed)


def test_without_a_usable_tail_the_parquet_log_gives_the_same_findings(spark, tmp_path):
    runs = Runs(spark, tmp_path)
    runs.run("b1", BATCHES[0])
    state = Path(runs.checkpoint) / STATE_FILE  # a state as the version before tails wrote it
    state.write_text(json.dumps({"as_of": runs.state()["as_of"]}))
    # This run reads the log (batch 1's rows) and finds the log files the next run needs: batch 1's
    # file still holds rows inside two grace periods of this run's "as of" (k10 at 40 s).
    assert runs.run("b1b", pair("k10", 40))["counts"] == EXPECTED[0]
    listed = [Path(f["path"]) for f in runs.state()["tail_files"]]
    assert len(listed) >= 2 and all(f.is_file() for f in listed)
    # The next run reads those files, not the log: a broken file in the partition it would read is
    # never opened.
    (listed[0].parent / "part-99999-broken.parquet").write_bytes(b"not parquet at all")
    second = runs.run("b2", BATCHES[1])
    assert second["counts"] == EXPECTED[1]
    assert {r["message_key"]: r["copies"] for r in second["rows"]["duplicates"]} == {"k3": 2, "k8": 2}
    assert runs.run("b3", BATCHES[2])["counts"] == EXPECTED[2]


def test_a_late_file_older_than_the_tail_reads_the_log_without_its_own_rows(spark, tmp_path):
    runs = Runs(spark, tmp_path)
    for i, lines in enumerate(BATCHES):
        runs.run(f"b{i + 1}", lines)
    assert datetime.fromisoformat(runs.state()["tail_start"]) > T + timedelta(seconds=100)
    # A second copy of k1 (egress at 100 s, from batch 2) from another gateway's late file at 50 s:
    # matched against the log (older than the tail); its own row is read once, so two copies, not three.
    late = runs.run("late", [record("k1", "egress", 50)])
    assert late["new"].valid == 1
    assert late["counts"] == {"losses": 0, "unexpected_egress": 0, "duplicates_allowed": 0,
                              "duplicates_suspicious": 1}
    assert [(r["message_key"], r["copies"]) for r in late["rows"]["duplicates"]] == [("k1", 2)]


def test_a_run_of_only_bad_lines_keeps_the_state_moving(spark, tmp_path):
    runs = Runs(spark, tmp_path)
    runs.run("b1", BATCHES[0])
    tail = runs.state()["tail_files"]
    bad = runs.run("bad", ["not json\n"])
    assert (bad["new"].bad, bad["new"].valid) == (1, 0)
    assert runs.state()["tail_files"] == tail and runs.state()["batch_id"] == 1
    assert runs.run("b2", BATCHES[1])["counts"] == EXPECTED[1]


def test_incremental_findings_add_up_to_a_full_audit_of_the_same_files(spark, tmp_path):
    runs = Runs(spark, tmp_path / "incremental")
    found: set[tuple[str, str, str]] = set()
    copies: dict[str, int] = {}
    for i, lines in enumerate(BATCHES):
        rows = runs.run(f"b{i + 1}", lines)["rows"]
        found |= {("key_problems", r["kind"], r["message_key"]) for r in rows["key_problems"]}
        found |= {("duplicates", r["kind"], r["message_key"]) for r in rows["duplicates"]}
        copies.update({r["message_key"]: r["copies"] for r in rows["duplicates"]})
    full_parquet = str(tmp_path / "full")
    assert ingest(spark, expand_paths([runs.logs]), full_parquet).valid == sum(len(b) for b in BATCHES)
    full = run_audit(load(spark, full_parquet, CONFIG))
    full.cleanup()
    expected = {("key_problems", r["kind"], r["message_key"]) for r in full.rows["key_problems"]}
    expected |= {("duplicates", r["kind"], r["message_key"]) for r in full.rows["duplicates"]}
    assert found == expected == {("key_problems", "lost", "k4"), ("key_problems", "unexpected_egress", "k9"),
                                 ("duplicates", "suspicious", "k3"), ("duplicates", "allowed", "k8")}
    assert copies == {r["message_key"]: r["copies"] for r in full.rows["duplicates"]}


def compilations(spark: Any) -> int:
    """Classes Spark has compiled from generated code in this JVM so far (Janino; cached by source)."""
    return int(spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics
               .METRIC_COMPILATION_TIME().getCount())


def test_later_runs_reuse_the_generated_code(spark, tmp_path):
    """Run-dependent bounds are columns, not literals: a run like the one before compiles nothing new."""
    runs = Runs(spark, tmp_path)
    compiled = []
    for i in range(4):
        t = 200 * i
        lines = [*pair(f"a{i}", t), *pair(f"b{i}", t + 10), record(f"c{i}", "ingress", t + 20),
                 record(f"a{i}", "egress", t + 30)]
        before = compilations(spark)
        assert runs.run(f"b{i}", lines)["counts"]["losses"] == (1 if i else 0)
        compiled.append(compilations(spark) - before)
    assert compiled[3] == 0, compiled
    # the counter counts (checked here, not on the first run: earlier tests may have compiled its code already)
    before = compilations(spark)
    spark.range(5).selectExpr(f"id * {datetime.now(UTC).microsecond + 7919} + 1 AS x").groupBy().sum("x").collect()
    assert compilations(spark) > before
