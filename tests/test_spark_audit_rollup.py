"""Stored rollups (spark_audit/rollup.py) give exactly the findings of a scan, and are never trusted blindly.

The same fixture log is audited with the rollups ingest wrote and with rollups=False (every row scanned),
over windows that cover whole hours, partial hours and the grace period; a rewritten data file, an
unreadable manifest and files of the older layout (no key hashes, INT96 timestamps) must not change a
finding.
"""
from __future__ import annotations

import os
import shutil
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

try:
    from tests.spark_fixtures import FIXTURE_LOGS, spark  # noqa: F401
except ImportError:  # tests/ is not a package: pytest puts this directory on sys.path
    from spark_fixtures import FIXTURE_LOGS, spark  # noqa: F401

from spark_audit import read_ahead as read_ahead_module  # noqa: E402
from spark_audit import rollup  # noqa: E402
from spark_audit.aggregates import build_rollups  # noqa: E402
from spark_audit.audit import ingest, load, run_audit  # noqa: E402
from spark_audit.findings import AuditResult  # noqa: E402
from spark_audit.ingest import expand_paths  # noqa: E402
from spark_audit.schema import KEY_CHECK, KEY_HASH  # noqa: E402
from spark_audit.scope import AuditConfig  # noqa: E402

pytestmark = pytest.mark.spark

WINDOWS: list[dict[str, Any]] = [
    {},
    {"grace_seconds": 0},
    {"since": datetime(2026, 3, 1, 10, 30, tzinfo=UTC), "until": datetime(2026, 3, 1, 11, tzinfo=UTC)},
    {"since": datetime(2026, 3, 1, 11, tzinfo=UTC), "until": datetime(2026, 3, 2, 9, tzinfo=UTC)},
    {"since": datetime(2026, 3, 1, 10, 45, tzinfo=UTC)},
    {"until": datetime(2026, 3, 1, 12, 15, tzinfo=UTC)},
]


@pytest.fixture(scope="module")
def parquet(spark, tmp_path_factory) -> Path:
    """The fixture logs parsed by Spark, every file with its key hashes (not the checked reader's files)."""
    out = tmp_path_factory.mktemp("rollup") / "parquet"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(read_ahead_module, "read_checked", lambda paths: None)
        assert ingest(spark, expand_paths([FIXTURE_LOGS]), str(out)).valid == 55
    return out


def audit(spark, parquet_dir: Path, rollups: bool, **config: Any) -> AuditResult:
    result = run_audit(load(spark, str(parquet_dir), AuditConfig(**{"grace_seconds": 60, **config}), rollups=rollups))
    result.cleanup()
    return result


def same_findings(a: AuditResult, b: AuditResult) -> None:
    assert a.counts == b.counts
    assert a.rows == b.rows
    assert (a.data.rows_loaded, a.data.rows_in_window, a.data.as_of) == (
        b.data.rows_loaded, b.data.rows_in_window, b.data.as_of)


def test_ingest_writes_a_rollup_for_every_file(parquet):
    files = rollup.data_files(str(parquet))
    entries = rollup.read_manifest(str(parquet))
    assert len(files) == 3 and set(entries) == {rollup.relative(f) for f in files}
    assert all(rollup.is_current(f, entries[rollup.relative(f)]) for f in files)
    assert all(e.max_us is not None for e in entries.values())


@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: ",".join(f"{k}={v}" for k, v in w.items()) or "all")
def test_rollups_give_the_findings_of_a_full_scan(spark, parquet, window):
    rolled = audit(spark, parquet, True, **window)
    scanned = audit(spark, parquet, False, **window)
    assert scanned.data.rollup is None
    covered = rolled.data.rollup.files if rolled.data.rollup is not None else 0
    if not window:
        assert covered == len(rollup.data_files(str(parquet)))  # nothing scanned but the per-key job
    if window.get("until") == datetime(2026, 3, 1, 11, tzinfo=UTC):
        assert covered == 0  # 10:30-11:00 is part of an hour: scanned
    same_findings(rolled, scanned)
    assert rolled.rows["volume_hourly"] or not rolled.data.rows_in_window
    # With a plan every file in scope is known to carry its key hashes: the string hashes are skipped.
    assert rolled.data.hashes_stored == (rolled.data.rollup is not None) and not scanned.data.hashes_stored


def test_rollups_of_files_without_key_hashes_give_the_findings_of_a_full_scan(spark, tmp_path):
    """gateway-a, all valid, read by the checked reader (no key hash columns) beside gateway-b parsed by Spark:
    a plan over them does not claim stored hashes, and its findings are a full scan's."""
    log = tmp_path / "parquet"
    assert ingest(spark, expand_paths([FIXTURE_LOGS]), str(log)).valid == 55
    assert not all(e.hashed for e in rollup.read_manifest(str(log)).values())
    rolled, scanned = audit(spark, log, True), audit(spark, log, False)
    assert rolled.data.rollup is not None and not rolled.data.hashes_stored
    same_findings(rolled, scanned)


def test_a_rewritten_file_is_scanned_not_trusted(spark, parquet, tmp_path):
    log = tmp_path / "parquet"
    shutil.copytree(parquet, log)
    before = audit(spark, log, True)
    # Rewrite the busiest hour without one of its ok egress records: its rollup no longer describes it.
    biggest = max(rollup.data_files(str(log)), key=lambda f: spark.read.parquet(str(f)).count())
    rows = spark.read.parquet(str(biggest))
    dropped = rows.where("direction = 'egress' AND status = 'ok'").first()
    assert dropped is not None
    staging = tmp_path / "staging"
    rows.where(f"NOT (message_key = '{dropped['message_key']}' AND direction = 'egress')") \
        .coalesce(1).write.parquet(str(staging))
    [part] = staging.glob("*.parquet")
    biggest.with_name(f".{biggest.name}.crc").unlink(missing_ok=True)
    shutil.move(part, biggest)
    rolled, scanned = audit(spark, log, True), audit(spark, log, False)
    assert rolled.data.rollup is not None and rolled.data.rollup.files == len(rollup.data_files(str(log))) - 1
    same_findings(rolled, scanned)
    assert rolled.data.rows_loaded == before.data.rows_loaded - 1
    assert rolled.rows["volume_hourly"] != before.rows["volume_hourly"]
    assert build_rollups(spark, str(log)) == 1  # only the rewritten file lacks a current rollup
    again = audit(spark, log, True)
    assert again.data.rollup is not None and again.data.rollup.files == len(rollup.data_files(str(log)))
    same_findings(again, scanned)


def test_an_unusable_manifest_is_ignored_with_a_note(spark, parquet, tmp_path, capsys):
    log = tmp_path / "parquet"
    shutil.copytree(parquet, log)
    rollup.manifest_path(str(log)).write_text("{not json")
    rolled = audit(spark, log, True)
    assert rolled.data.rollup is None
    assert "ignoring the rollup manifest" in capsys.readouterr().err
    same_findings(rolled, audit(spark, parquet, False))


def test_files_of_the_older_layout_are_audited_alike(spark, parquet, tmp_path):
    """Files written before the key hash columns (and with INT96 timestamps), alone or mixed with new ones."""
    old = tmp_path / "old"
    spark.conf.set("spark.sql.parquet.outputTimestampType", "INT96")
    try:
        (spark.read.parquet(str(parquet)).drop(KEY_HASH, KEY_CHECK).repartition("date", "hour")
         .write.partitionBy("date", "hour").parquet(str(old)))
    finally:
        spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    assert KEY_HASH not in spark.read.parquet(str(old)).columns
    reference = audit(spark, parquet, False)
    same_findings(audit(spark, old, True), reference)
    mixed = tmp_path / "mixed"
    shutil.copytree(parquet, mixed)
    first_hour = sorted(p for p in mixed.glob("date=*/hour=*"))[0]
    shutil.rmtree(first_hour)
    shutil.copytree(old / first_hour.parent.name / first_hour.name, first_hour)
    same_findings(audit(spark, mixed, True), reference)
    assert build_rollups(spark, str(mixed)) == len(list(first_hour.glob("*.parquet")))
    rebuilt = audit(spark, mixed, True)
    assert rebuilt.data.rollup is not None and not rebuilt.data.hashes_stored  # the old files hash no keys
    same_findings(rebuilt, reference)


def test_a_removed_rollup_directory_makes_its_files_scanned(spark, parquet, tmp_path):
    """Another writer removed a rollup directory after the manifest was written: its files are scanned."""
    log = tmp_path / "parquet"
    shutil.copytree(parquet, log)
    entries = rollup.read_manifest(str(log))
    gone = next(iter(entries.values())).rollup
    shutil.rmtree(log / rollup.ROLLUP_DIR / gone)
    rolled = audit(spark, log, True)
    expected = sum(1 for e in entries.values() if e.rollup != gone)
    assert (rolled.data.rollup.files if rolled.data.rollup is not None else 0) == expected
    same_findings(rolled, audit(spark, parquet, False))


def entry(rollup_name: str) -> rollup.Entry:
    return rollup.Entry(size=1, mtime_ns=1, rollup=rollup_name, max_us=None, hashed=True)


def fake_log(root: Path, names: list[str]) -> str:
    for name in names:
        f = root / name
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"x")
    return str(root)


def test_concurrent_writers_merge_their_entries_and_keep_each_others_builds(tmp_path):
    """Two writers of one log (an --every audit and a rollup build): the manifest is merged under a lock,
    and a rollup directory in flight (written, not yet in the manifest) is not removed."""
    a, b = "date=2026-03-01/hour=10/a.parquet", "date=2026-03-01/hour=11/b.parquet"
    log = fake_log(tmp_path, [a, b, "date=2026-03-01/hour=12/gone.parquet"])
    rollups = tmp_path / rollup.ROLLUP_DIR
    for name in ("r-old", "r-a", "r-b", "r-inflight", "r-dead"):
        (rollups / name).mkdir(parents=True)
    old = time.time() - rollup.ORPHAN_AGE.total_seconds() - 60
    os.utime(rollups / "r-dead", (old, old))
    rollup.update_manifest(log, {a: entry("r-old"), "date=2026-03-01/hour=12/gone.parquet": entry("r-old")})
    (tmp_path / "date=2026-03-01/hour=12/gone.parquet").unlink()
    rollup.update_manifest(log, {b: entry("r-b")})  # writer B, after A had read the manifest
    rollup.update_manifest(log, {a: entry("r-a")})  # writer A: B's entry stays, A's file moves to r-a
    assert {n: e.rollup for n, e in rollup.read_manifest(log).items()} == {a: "r-a", b: "r-b"}
    left = {d.name for d in rollups.iterdir() if d.is_dir()}
    assert left == {"r-a", "r-b", "r-inflight"}  # r-old superseded, r-dead a dead build's; r-inflight kept


def test_the_manifest_lock_makes_a_second_writer_wait(tmp_path):
    a = "date=2026-03-01/hour=10/a.parquet"
    log = fake_log(tmp_path, [a])
    (tmp_path / rollup.ROLLUP_DIR / "r-a").mkdir(parents=True)
    done = threading.Event()
    with rollup.manifest_lock(log):
        writer = threading.Thread(target=lambda: (rollup.update_manifest(log, {a: entry("r-a")}), done.set()))
        writer.start()
        assert not done.wait(0.3)  # blocked while the lock is held
        assert rollup.read_manifest(log) == {}
    assert done.wait(10)
    writer.join(10)
    assert set(rollup.read_manifest(log)) == {a}
