"""Incremental audit: a checkpointed availableNow file stream audits only log files not seen before."""
from __future__ import annotations

import json
import shutil

import pytest

pytest.importorskip("pyspark")

try:
    from tests.spark_fixtures import FIXTURE_LOGS, spark  # noqa: F401
except ImportError:  # tests/ is not a package: pytest puts this directory on sys.path
    from spark_fixtures import FIXTURE_LOGS, spark  # noqa: F401

from spark_audit.audit import AuditConfig  # noqa: E402
from spark_audit.incremental import run_incremental  # noqa: E402
from spark_audit.options import build_parser  # noqa: E402
from spark_audit.run import follow, run  # noqa: E402

pytestmark = pytest.mark.spark


def test_each_run_ingests_only_new_files(spark, tmp_path):
    logs, parquet, checkpoint = tmp_path / "logs", str(tmp_path / "parquet"), str(tmp_path / "ckpt")
    logs.mkdir()
    config = AuditConfig(grace_seconds=60)

    shutil.copy(FIXTURE_LOGS / "gateway-a.jsonl", logs)
    new, result = run_incremental(spark, str(logs), parquet, checkpoint, config)
    result.cleanup()
    assert (new.rows_read, new.valid, new.bad) == (46, 46, 0)
    assert result.data.rows_in_window == 46
    assert sum(int(r["records"]) for r in result.rows["volume_hourly"]) == 46
    assert result.counts == {"losses": 1, "unexpected_egress": 1, "duplicates_allowed": 1,
                             "duplicates_suspicious": 2, "failed": 2, "backout": 2, "dropped": 0}

    shutil.copy(FIXTURE_LOGS / "gateway-b.jsonl", logs)
    new, result = run_incremental(spark, str(logs), parquet, checkpoint, config)
    result.cleanup()
    assert (new.rows_read, new.valid, new.bad) == (15, 9, 6)
    assert new.problems == {"future_version": 1, "invalid:direction": 1, "invalid:message_key": 1,
                            "malformed": 3}
    # The window reopens one grace period before the last run's "as of" (j3 at 10:52) and runs to the
    # newest row; p1 is still pending, m4 was dropped, nothing from gateway-a is reported again.
    assert result.data.rows_in_window == 11
    # The two reopened rows were counted by the first run: volume counts only gateway-b's 9 rows.
    assert sum(int(r["records"]) for r in result.rows["volume_hourly"]) == 9
    assert sum(int(r["messages"]) for r in result.rows["payload_sizes"]) == 8  # dropped m4 has no size
    assert result.counts == {"losses": 0, "unexpected_egress": 0, "duplicates_allowed": 0,
                             "duplicates_suspicious": 0, "failed": 0, "backout": 0, "dropped": 1}

    new, result = run_incremental(spark, str(logs), parquet, checkpoint, config)
    result.cleanup()
    assert (new.rows_read, new.valid) == (0, 0)
    assert result.data.rows_in_window == 0
    assert spark.read.parquet(parquet).count() == 55

    # A file whose rows are older than the last run's "as of" (another gateway's late file) is counted
    # by its own rows, not by time: both records of the late pair, nothing from before.
    lines = (FIXTURE_LOGS / "gateway-a.jsonl").read_text().splitlines(keepends=True)
    late = "".join(line.replace('"message_key":"o1"', '"message_key":"late1"')
                   .replace("2026-03-01T10:01:00", "2026-03-02T09:00:40")
                   for line in lines if '"message_key":"o1"' in line)
    (logs / "gateway-c.jsonl").write_text(late)
    new, result = run_incremental(spark, str(logs), parquet, checkpoint, config)
    result.cleanup()
    assert (new.rows_read, new.valid) == (2, 2)
    assert sum(int(r["records"]) for r in result.rows["volume_hourly"]) == 2
    assert result.counts["losses"] == result.counts["unexpected_egress"] == 0


def test_every_audits_each_tick_in_one_session(spark, tmp_path):
    logs, out = tmp_path / "logs", tmp_path / "out"
    logs.mkdir()
    args = build_parser().parse_args([str(logs), "--every", "300", "--max-runs", "3", "--out", str(out),
                                      "--grace", "60", "--no-parquet-tables"])
    files = iter(["gateway-a.jsonl", "gateway-b.jsonl"])
    waits: list[float] = []

    def next_tick(seconds: float) -> None:  # between two runs the gateway writes its next file
        waits.append(seconds)
        shutil.copy(FIXTURE_LOGS / next(files), logs)
        assert json.loads((out / "summary.json").read_text())["input"]["rows_read"] == [0, 46][len(waits) - 1]

    # An empty directory is no error for a long-running audit: the first run finds nothing yet.
    assert follow(spark, args, str(out / "parquet"), args.every, sleep=next_tick) == 0
    assert len(waits) == 2 and all(0 < w <= 300 for w in waits)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["input"]["rows_read"] == 15  # the third run read gateway-b only
    assert summary["verdict"]["dropped"] == 1 and summary["verdict"]["losses"] == 0


def test_every_and_incremental_take_one_directory(spark, tmp_path, capsys):
    args = build_parser().parse_args([str(FIXTURE_LOGS / "gateway-a.jsonl"), "--every", "60"])
    assert run(args, spark) == 2
    assert "exactly one LOGS directory" in capsys.readouterr().err
