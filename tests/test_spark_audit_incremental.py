"""Incremental audit: each run reads only the complete lines not read before, as one committed batch."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

try:
    from tests.spark_fixtures import FIXTURE_LOGS, crash_incremental, findings, generated_log, spark, union  # noqa: F401
except ImportError:  # tests/ is not a package: pytest puts this directory on sys.path
    from spark_fixtures import FIXTURE_LOGS, crash_incremental, findings, generated_log, spark, union  # noqa: F401

from spark_audit import rollup  # noqa: E402
from spark_audit import run as run_module  # noqa: E402
from spark_audit.aggregates import build_rollups  # noqa: E402
from spark_audit.audit import ingest, load, run_audit  # noqa: E402
from spark_audit.incremental import ADAPTIVE, run_incremental, without_adaptive_plans  # noqa: E402
from spark_audit.increments import BATCH_LEDGER, BATCHES_DIR, TEST_CRASH_EXIT  # noqa: E402
from spark_audit.ingest import expand_paths  # noqa: E402
from spark_audit.options import build_parser  # noqa: E402
from spark_audit.report import build_summary  # noqa: E402
from spark_audit.run import follow, run  # noqa: E402
from spark_audit.scope import AuditConfig  # noqa: E402
from spark_audit.sources import remove_slices, slices_now, stage_new  # noqa: E402
from tests.support.gateway import wait_for  # noqa: E402

pytestmark = pytest.mark.spark


def committed(checkpoint: Path) -> int:
    """The last batch the checkpoint's batch ledger committed."""
    return int(json.loads((checkpoint / BATCH_LEDGER).read_text())["committed"])


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


def test_every_starts_no_run_when_nothing_is_new(spark, tmp_path, capsys):
    """A tick with no unread line runs no Spark job once a report exists: the report (and the batch
    ledger) stay as they were, and the loop says so once; new lines are read by the next tick."""
    logs, out = tmp_path / "logs", tmp_path / "out"
    logs.mkdir()
    shutil.copy(FIXTURE_LOGS / "gateway-a.jsonl", logs)
    args = build_parser().parse_args([str(logs), "--every", "300", "--max-runs", "4", "--out", str(out),
                                      "--grace", "60", "--no-parquet-tables"])
    seen: list[tuple[int, int]] = []

    def next_tick(_seconds: float) -> None:
        ledger = json.loads((out / "checkpoint" / BATCH_LEDGER).read_text())
        seen.append(((out / "summary.json").stat().st_mtime_ns, ledger["committed"]))
        if len(seen) == 3:
            shutil.copy(FIXTURE_LOGS / "gateway-b.jsonl", logs)

    assert follow(spark, args, str(out / "parquet"), args.every, sleep=next_tick) == 0  # gateway-b: clean
    assert seen[0] == seen[1] == seen[2]  # ticks 2 and 3: nothing written, no batch
    printed = capsys.readouterr().out
    assert [line.split(":")[0] for line in printed.splitlines() if "no new lines" in line] == \
        ["audit run 2", "audit run 3"]  # every idle tick says so at --every 300 (a fast loop: the first)
    assert "audit run 4 exit 0" in printed
    assert json.loads((out / "summary.json").read_text())["input"]["rows_read"] == 15  # gateway-b, once


def test_a_fast_loop_says_nothing_new_once_per_quiet_spell(tmp_path, monkeypatch, capsys):
    """Ticks under a minute apart: the first idle tick of a quiet spell says so, the next ones are silent;
    new lines end the spell. The runs are stood in for (what the idle check reads is real: the ledger)."""
    logs, out = tmp_path / "logs", tmp_path / "out"
    logs.mkdir()
    log = logs / "convlog-20260301-10-000.jsonl"
    log.write_text('{"n":1}\n')
    checkpoint = str(out / "checkpoint")
    ran: list[int] = []

    def a_run(_session, _args, _parquet, timings=None, rollups=True) -> int:
        staged = stage_new(checkpoint, expand_paths([logs]))  # what the stream does with the lines
        remove_slices(slices_now(checkpoint))
        (out / "summary.json").write_text(json.dumps({"read": len(staged.origins)}))
        ran.append(len(ran) + 1)
        return 0

    monkeypatch.setattr(run_module, "incremental_once", a_run)
    ticks: list[int] = []

    def next_tick(_seconds: float) -> None:
        ticks.append(len(ticks) + 1)
        if len(ticks) == 3:
            with log.open("a") as f:
                f.write('{"n":2}\n')

    args = build_parser().parse_args([str(logs), "--every", "0.5", "--max-runs", "5", "--out", str(out)])
    assert follow(None, args, str(out / "parquet"), args.every, sleep=next_tick) == 0  # type: ignore[arg-type]
    assert len(ran) == 2  # ticks 1 and 4
    said = [line.split(":")[0] for line in capsys.readouterr().out.splitlines() if "no new lines" in line]
    assert said == ["audit run 2", "audit run 5"]

    # a ledger that cannot be read: the idle check cannot tell, so each tick runs, and the run says what is
    # wrong (as before the idle check existed); the loop goes on
    (out / "checkpoint" / "sources.json").write_text("{not json")
    ran.clear()
    monkeypatch.setattr(run_module, "incremental_once",
                        lambda *_a, **_k: run_module.guarded(lambda: stage_new(checkpoint, [str(log)]) and 0))
    args = build_parser().parse_args([str(logs), "--every", "0.5", "--max-runs", "3", "--out", str(out)])
    assert follow(None, args, str(out / "parquet"), args.every, sleep=lambda _s: None) == 2  # type: ignore[arg-type]
    err = capsys.readouterr().err
    assert err.count("could not audit") == 3 and "unreadable ledger" in err


@pytest.mark.parametrize(("warm_runs", "beside_files"), [(0, 100), (1, 100), (0, 1)])
def test_every_defers_rollups_while_the_next_tick_is_near(spark, tmp_path, monkeypatch, warm_runs, beside_files,
                                                          capsys):
    """With the next tick less than ROLLUP_IDLE_SECONDS away, a run's rollups are built beside the next runs
    once the JVM's first ROLLUP_WARM_RUNS runs with new lines are done, the oldest ROLLUP_BESIDE_FILES files a
    build (spark_audit/beside.py; the last run builds what is left): the verdict of the next run does not
    wait for them."""
    monkeypatch.setattr(run_module, "ROLLUP_BESIDE_FILES", beside_files)
    monkeypatch.setattr(run_module, "ROLLUP_WARM_RUNS", warm_runs)
    beside = warm_runs == 0
    logs, out = tmp_path / "logs", tmp_path / "out"
    logs.mkdir()
    shutil.copy(FIXTURE_LOGS / "gateway-b.jsonl", logs)   # two hours: two data files
    args = build_parser().parse_args([str(logs), "--every", "0.5", "--max-runs", "2", "--out", str(out),
                                      "--grace", "60", "--no-parquet-tables"])
    parquet = str(out / "parquet")
    rolled: list[tuple[int, int]] = []

    def next_tick(_seconds: float) -> None:   # after the first run: its files, and the rollups stored
        files = len(rollup.data_files(parquet))
        if beside:   # being built beside: stored within a bound, while the loop goes on
            wait_for(lambda: len(rollup.read_manifest(parquet)) == min(files, beside_files), 120,
                     what="the rollups beside")
        rolled.append((files, len(rollup.read_manifest(parquet))))
        shutil.copy(FIXTURE_LOGS / "gateway-a.jsonl", logs)

    follow(spark, args, parquet, args.every, sleep=next_tick)
    [(files, stored)] = rolled
    assert files == 2 and stored == (min(files, beside_files) if beside else 0)
    assert ("stored beside the runs" in capsys.readouterr().out) == beside
    assert rollup.pending_rollups(parquet) == []  # the last run stored every file's rollup


@pytest.mark.parametrize("quiet_for", [0.0, 3600.0])
def test_quiet_ticks_build_the_deferred_rollups_a_slice_at_a_time(spark, tmp_path, monkeypatch, capsys, quiet_for):
    """Once nothing new has come for ROLLUP_IDLE_SECONDS, rollups a busy tick deferred are built by the ticks that
    find nothing new, ROLLUP_IDLE_SLICE files each, each slice said; lines arriving after that are audited at
    the next tick. Before that pause, quiet ticks build none (a batch arriving would wait for them)."""
    monkeypatch.setattr(run_module, "ROLLUP_IDLE_SLICE", 1)
    monkeypatch.setattr(run_module, "ROLLUP_IDLE_SECONDS", quiet_for)
    monkeypatch.setattr(run_module, "ROLLUP_WARM_RUNS", 100)   # none built beside the runs: only quiet ticks build
    logs, out = tmp_path / "logs", tmp_path / "out"
    logs.mkdir()
    shutil.copy(FIXTURE_LOGS / "gateway-b.jsonl", logs)   # two hours: two data files
    parquet = str(out / "parquet")
    args = build_parser().parse_args([str(logs), "--every", "0.5", "--max-runs", "20", "--out", str(out),
                                      "--grace", "60", "--no-parquet-tables"])
    pending: list[int] = []
    rows_read: list[int] = []

    def next_tick(_seconds: float) -> None:
        pending.append(len(rollup.pending_rollups(parquet)))
        rows_read.append(json.loads((out / "summary.json").read_text())["input"]["rows_read"])
        if pending[-1] == 0 and not (logs / "gateway-a.jsonl").exists():   # all built: new lines arrive
            shutil.copy(FIXTURE_LOGS / "gateway-a.jsonl", logs)

    follow(spark, args, parquet, args.every, sleep=next_tick)
    first = pending[0]
    assert first == 2
    if quiet_for:   # never quiet for long enough: nothing built until the last tick, which stores them all
        assert set(pending) == {first} and "rollups of 2 files stored while idle" in capsys.readouterr().out
        assert rollup.pending_rollups(parquet) == []
        return
    assert pending[:first + 1] == list(range(first, -1, -1))   # one file a quiet tick, none on the busy one
    lines = len((FIXTURE_LOGS / "gateway-a.jsonl").read_bytes().splitlines())
    assert rows_read[first + 1] == lines   # the tick after they arrived read gateway-a's lines
    assert pending[-1] == 0 and capsys.readouterr().out.count("rollups of 1 file stored while idle") > first


def test_every_rolls_up_the_files_it_writes_for_later_full_audits(spark, tmp_path):
    """After each run's verdict the new files' rollups are stored: a full audit of the Parquet log the
    --every loop keeps (--parquet DIR, no LOGS) reads them and finds what a scan of every row and a fresh
    ingest of the same logs find."""
    logs, out = tmp_path / "logs", tmp_path / "out"
    logs.mkdir()
    args = build_parser().parse_args([str(logs), "--every", "300", "--max-runs", "2", "--out", str(out),
                                      "--grace", "60", "--no-parquet-tables"])
    shutil.copy(FIXTURE_LOGS / "gateway-a.jsonl", logs)
    manifests: list[set[str]] = []

    def next_tick(_seconds: float) -> None:  # the first run's files are rolled up before the wait
        manifests.append(set(rollup.read_manifest(str(out / "parquet"))))
        shutil.copy(FIXTURE_LOGS / "gateway-b.jsonl", logs)

    assert follow(spark, args, str(out / "parquet"), args.every, sleep=next_tick) == 0  # gateway-b: clean
    parquet = str(out / "parquet")
    files = {rollup.relative(f) for f in rollup.data_files(parquet)}
    first = {f for f in files if f.split("/")[-1].startswith("b0-")}
    assert first and manifests == [first]
    assert set(rollup.read_manifest(parquet)) == files and len(files) > len(first)
    assert build_rollups(spark, parquet) == 0  # nothing left without a rollup
    config = AuditConfig(grace_seconds=60)
    rolled = load(spark, parquet, config)
    assert rolled.rollup is not None and rolled.rollup.files == len(files)
    assert ingest(spark, expand_paths([logs]), str(tmp_path / "fresh")).valid == 55
    with_rollups, scanned = run_audit(rolled), run_audit(load(spark, parquet, config, rollups=False))
    fresh = run_audit(load(spark, str(tmp_path / "fresh"), config))
    for result in (with_rollups, scanned, fresh):
        result.cleanup()
    assert with_rollups.counts == scanned.counts == fresh.counts
    assert with_rollups.rows == scanned.rows == fresh.rows
    assert with_rollups.counts == {"losses": 1, "unexpected_egress": 1, "duplicates_allowed": 1,
                                   "duplicates_suspicious": 2, "failed": 2, "backout": 2, "dropped": 1}


def test_a_parquet_log_is_audited_as_it_is_without_logs(spark, tmp_path, capsys):
    logs = tmp_path / "logs"
    shutil.copytree(FIXTURE_LOGS, logs)
    ingested = tmp_path / "ingested"
    assert run(build_parser().parse_args([str(logs), "--out", str(ingested), "--grace", "60"]), spark) == 1
    shutil.rmtree(logs)  # nothing is read from the JSON Lines logs any more
    again = tmp_path / "again"
    assert run(build_parser().parse_args(["--parquet", str(ingested / "parquet"), "--out", str(again),
                                          "--grace", "60"]), spark) == 1
    before, after = (json.loads((d / "summary.json").read_text()) for d in (ingested, again))
    assert after["input"] is None and before["input"]["rows_read"] == 61
    assert after["verdict"] == {**before["verdict"], "bad_input_lines": 0}
    for key in ("window", "records", "losses", "unexpected_egress", "duplicates", "failures", "latency",
                "payload_sizes", "conversion_changes", "volume"):
        assert after[key] == before[key], key
    assert (again / "report.html").is_file() and (again / "tables" / "losses").is_dir()
    capsys.readouterr()
    assert run(build_parser().parse_args(["--out", str(again)]), spark) == 2
    assert "give LOGS, or --parquet DIR" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert run(build_parser().parse_args(["--parquet", str(tmp_path / "empty")]), spark) == 2
    assert "no Parquet log" in capsys.readouterr().err


def test_every_and_incremental_take_one_directory(spark, tmp_path, capsys):
    args = build_parser().parse_args([str(FIXTURE_LOGS / "gateway-a.jsonl"), "--every", "60"])
    assert run(args, spark) == 2
    assert "exactly one LOGS directory" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_crash_after_the_move_or_after_the_commit_loses_and_doubles_nothing(spark, tmp_path):
    """A real `python -m spark_audit --incremental` dies (JVM killed, os._exit) right after a batch's files
    moved into the log, then again right after the batch was committed (its slices still waiting); the next
    run audits that batch once: the log holds each record once and the runs' findings add up to a full
    audit."""
    logs, out = tmp_path / "logs", tmp_path / "out"
    logs.mkdir()
    argv = [str(logs), "--incremental", "--out", str(out), "--grace", "60", "--no-parquet-tables"]
    checkpoint, parquet = out / "checkpoint", str(out / "parquet")

    def summary() -> dict[str, Any]:
        return json.loads((out / "summary.json").read_text())

    def crash(point: str) -> None:
        crash_incremental(argv, point, TEST_CRASH_EXIT)

    shutil.copy(FIXTURE_LOGS / "gateway-a.jsonl", logs)
    run(build_parser().parse_args(argv), spark)
    first = summary()
    assert first["input"]["rows_read"] == 46

    shutil.copy(FIXTURE_LOGS / "gateway-b.jsonl", logs)
    crash("after-move")
    record = json.loads((checkpoint / BATCHES_DIR / "1.json").read_text())
    moved = record["files"]
    assert moved and all(Path(f).is_file() for f in moved)  # batch 1's rows are in the log ...
    assert committed(checkpoint) == 0  # ... and batch 1 is not committed
    assert json.loads((checkpoint / "audit_state.json").read_text())["batch_id"] == 0

    crash("after-commit")  # batch 1 read again (its earlier files removed), committed; no audit
    assert committed(checkpoint) == 1
    assert slices_now(str(checkpoint))  # the slices it read are still there
    assert json.loads((checkpoint / "audit_state.json").read_text())["batch_id"] == 0
    assert spark.read.parquet(parquet).count() == 55  # 46 + 9 valid rows: batch 1's are there once

    run(build_parser().parse_args(argv), spark)  # nothing new to read: batch 1 is audited now, its slices gone
    assert not slices_now(str(checkpoint))
    second = summary()
    assert (second["input"]["rows_read"], second["input"]["valid"], second["input"]["bad"]) == (15, 9, 6)
    assert second["input"]["problems"] == {"future_version": 1, "invalid:direction": 1, "invalid:message_key": 1,
                                           "malformed": 3}  # the counts the crashed run made, from its record
    assert json.loads((checkpoint / "audit_state.json").read_text())["batch_id"] == 1
    assert not list((checkpoint / BATCHES_DIR).glob("*.json"))

    run(build_parser().parse_args(argv), spark)  # and only once
    assert summary()["input"]["rows_read"] == 0 and summary()["records"]["in_window"] == 0

    # The Parquet log holds exactly the records of a one-shot ingest of the same files, each once.
    full_parquet = str(tmp_path / "full")
    assert ingest(spark, expand_paths([logs]), full_parquet).valid == 55
    log = spark.read.parquet(parquet)
    full_log = spark.read.parquet(full_parquet).select(*log.columns)
    assert log.count() == 55
    assert log.exceptAll(full_log).count() == 0 and full_log.exceptAll(log).count() == 0

    full = run_audit(load(spark, full_parquet, AuditConfig(grace_seconds=60)))
    full.cleanup()
    assert union(findings(first), findings(second)) == findings(build_summary(full, None))


def test_a_growing_file_is_audited_exactly_once_while_every_runs(spark, tmp_path):
    """The gateway appends to the current hour's file between two runs, also half a line at a time: each
    record is audited exactly once (the runs' findings add up to a full audit of the final file) and a
    line still being written is never counted malformed."""
    logs, out = tmp_path / "logs", tmp_path / "out"
    logs.mkdir()
    content = generated_log(3000)
    cuts = [len(content) * 3 // 10, len(content) * 3 // 10 + 17, len(content) * 6 // 10 + 5,
            len(content) * 85 // 100]  # the second and third cut in the middle of a line
    assert content[cuts[1] - 1:cuts[1]] != b"\n" and content[cuts[2] - 1:cuts[2]] != b"\n"
    pieces = [content[a:b] for a, b in zip([0, *cuts], [*cuts, len(content)], strict=True)]
    live = logs / "convlog-20260301-10-000.jsonl"
    live.write_bytes(pieces[0])
    args = build_parser().parse_args([str(logs), "--every", "300", "--max-runs", str(len(pieces) + 1),
                                      "--out", str(out), "--grace", "60", "--no-parquet-tables"])
    summaries: list[dict[str, Any]] = []

    def next_tick(_seconds: float) -> None:  # the gateway writes on between two runs
        summaries.append(json.loads((out / "summary.json").read_text()))
        if len(summaries) < len(pieces):
            with live.open("ab") as f:
                f.write(pieces[len(summaries)])

    follow(spark, args, str(out / "parquet"), args.every, sleep=next_tick)
    # the last tick found nothing new: no run, the last report stands (and nothing was read twice)
    assert len(summaries) == len(pieces)
    assert json.loads((out / "summary.json").read_text()) == summaries[-1]

    full_parquet = str(tmp_path / "full")
    full_input = ingest(spark, [str(live)], full_parquet)
    full = run_audit(load(spark, full_parquet, AuditConfig(grace_seconds=60)))
    full.cleanup()
    expected = findings(build_summary(full, full_input))
    assert expected["losses"] and expected["duplicates"]  # the log has findings to miss
    got = findings(summaries[0])
    for s in summaries[1:]:
        got = union(got, findings(s))
    assert got == expected
    malformed = [int(s["input"]["problems"].get("malformed", 0)) for s in summaries]
    assert sum(malformed) == full_input.problems["malformed"] == content.count(b"this is not json\n")
    assert sum(int(s["input"]["rows_read"]) for s in summaries) == full_input.rows_read
    assert spark.read.parquet(str(out / "parquet")).count() == full_input.valid
    assert all(s["verdict"]["damaged_files"] == 0 and not s["input"]["notes"] for s in summaries)


def test_an_incremental_audit_plans_without_aqe_and_gives_the_setting_back(spark):
    """The audit of an incremental run sees adaptive query execution off; the session's own setting is back
    afterwards, also when the audit fails."""
    before = spark.conf.get(ADAPTIVE)
    assert before == "true"
    assert without_adaptive_plans(spark, lambda: spark.conf.get(ADAPTIVE)) == "false"
    assert spark.conf.get(ADAPTIVE) == before

    def fails() -> None:
        raise RuntimeError("the audit failed")

    with pytest.raises(RuntimeError, match="the audit failed"):
        without_adaptive_plans(spark, fails)
    assert spark.conf.get(ADAPTIVE) == before
