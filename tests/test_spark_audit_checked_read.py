"""The quick read (spark_audit/checked_read.py): a log file (one-shot) or an incremental batch of valid
records only is read by the gateway's checked reader and stored without Spark parsing it; the stored rows,
counts and findings are those of Spark's parse; a file or batch with any bad line is Spark's."""
from __future__ import annotations

import gzip
import json
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pq = pytest.importorskip("pyarrow.parquet")

try:
    from tests.spark_fixtures import FIXTURE_LOGS, crash_incremental, findings, generated_log, spark, union  # noqa: F401
except ImportError:  # tests/ is not a package: pytest puts this directory on sys.path
    from spark_fixtures import FIXTURE_LOGS, crash_incremental, findings, generated_log, spark, union  # noqa: F401

from bridge.convlog_parquet import PLAIN_FIELDS  # noqa: E402
from spark_audit import increments  # noqa: E402
from spark_audit import read_ahead as read_ahead_module  # noqa: E402
from spark_audit.audit import ingest, load, run_audit  # noqa: E402
from spark_audit.checked_read import HourFiles  # noqa: E402
from spark_audit.increments import BATCH_LEDGER, BATCHES_DIR, TEST_CRASH_EXIT  # noqa: E402
from spark_audit.ingest import expand_paths  # noqa: E402
from spark_audit.options import build_parser  # noqa: E402
from spark_audit.read_ahead import read_ahead  # noqa: E402
from spark_audit.report import build_summary  # noqa: E402
from spark_audit.run import run  # noqa: E402
from spark_audit.schema import KEY_CHECK, KEY_HASH  # noqa: E402
from spark_audit.scope import AuditConfig  # noqa: E402

pytestmark = pytest.mark.spark


def _other_keys(log: bytes) -> bytes:
    """The same records under other message keys (h<i> instead of g<i>)."""
    return log.replace(b'"message_key":"g', b'"message_key":"h')


def _writers(parquet: Path) -> set[str]:
    """Which library wrote the log's data files (Parquet's created_by: Spark's parquet-mr or pyarrow's C++)."""
    return {("pyarrow" if "parquet-cpp" in pq.ParquetFile(f).metadata.created_by else "spark")
            for f in parquet.glob("date=*/hour=*/*.parquet")}


def _audit(logs: Path, out: Path, spark: Any) -> dict[str, Any]:  # noqa: ANN401
    argv = [str(logs), "--incremental", "--out", str(out), "--grace", "60", "--no-parquet-tables"]
    run(build_parser().parse_args(argv), spark)
    return json.loads((out / "summary.json").read_text())


def _input(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: summary["input"][k] for k in ("rows_read", "valid", "bad", "problems", "problems_by_file",
                                             "min_time", "max_time")}


def _stored(spark: Any, parquet: Path) -> Any:  # noqa: ANN401
    """The log's rows without the key hash columns (the quick read leaves them to the audit)."""
    rows = spark.read.parquet(str(parquet))
    return rows.drop(KEY_HASH, KEY_CHECK)


def test_valid_new_lines_are_read_by_the_checked_reader_with_spark_s_results(spark, tmp_path, monkeypatch):
    """Two ticks (a new file across an hour boundary, then the same file grown and a second file): each batch
    is stored by pyarrow, and counts, findings and stored rows equal those of the same ticks parsed by Spark."""
    content = generated_log(4000, malformed_every=0)   # 10:00 to 11:06: two hour partitions
    cut = content.index(b"\n", len(content) * 2 // 3) + 1
    second = _other_keys(generated_log(300, malformed_every=0))

    def ticks(root: Path) -> list[dict[str, Any]]:
        logs = root / "logs"
        logs.mkdir(parents=True)
        (logs / "convlog-a.jsonl").write_bytes(content[:cut])
        got = [_audit(logs, root / "out", spark)]
        with (logs / "convlog-a.jsonl").open("ab") as f:
            f.write(content[cut:])
        (logs / "convlog-b.jsonl").write_bytes(second)
        got.append(_audit(logs, root / "out", spark))
        return got

    quick = ticks(tmp_path / "quick")
    assert _writers(tmp_path / "quick" / "out" / "parquet") == {"pyarrow"}
    monkeypatch.setattr(increments, "read_checked", lambda paths: None)   # every batch parsed by Spark
    parsed = ticks(tmp_path / "parsed")
    assert _writers(tmp_path / "parsed" / "out" / "parquet") == {"spark"}

    for q, p in zip(quick, parsed, strict=True):
        assert _input(q) == _input(p)
        assert findings(q) == findings(p)
        assert q["verdict"] == p["verdict"]
    assert quick[0]["input"]["rows_read"] > 0 and quick[1]["input"]["rows_read"] > 0
    assert findings(quick[0])["losses"] and findings(quick[1])["duplicates"]   # findings to miss
    a = _stored(spark, tmp_path / "quick" / "out" / "parquet")
    b = _stored(spark, tmp_path / "parsed" / "out" / "parquet")
    assert a.count() == b.count() == content.count(b"\n") + second.count(b"\n")
    assert a.exceptAll(b.select(*a.columns)).count() == 0 and b.select(*a.columns).exceptAll(a).count() == 0


def test_a_batch_with_a_bad_line_is_parsed_by_spark_which_quotes_it(spark, tmp_path):
    """One malformed line refuses the whole batch to the checked reader: Spark parses it, counts the bad line
    and quotes it with its file and line number; the valid rows are stored once."""
    logs = tmp_path / "logs"
    logs.mkdir()
    content = generated_log(200, malformed_every=0)
    lines = content.splitlines(keepends=True)
    (logs / "convlog-a.jsonl").write_bytes(b"".join([*lines[:50], b"{not json\n", *lines[50:]]))
    summary = _audit(logs, tmp_path / "out", spark)
    assert _writers(tmp_path / "out" / "parquet") == {"spark"}
    assert summary["input"]["problems"] == {"malformed": 1}
    assert [(s["line"], s["text"]) for s in summary["input"]["samples"]] == [(51, "{not json")]
    assert _stored(spark, tmp_path / "out" / "parquet").count() == len(lines)


def test_a_one_shot_audit_reads_valid_files_quickly_and_parses_the_others(spark, tmp_path, monkeypatch):
    """A one-shot audit of three files: the two of valid records only are stored by pyarrow, the one with a bad
    line by Spark (which quotes it); the summary and the stored rows equal those of Spark parsing all three."""
    logs = tmp_path / "logs"
    logs.mkdir()
    valid = generated_log(1500, malformed_every=0)
    (logs / "convlog-a.jsonl").write_bytes(valid)
    (logs / "convlog-b.jsonl").write_bytes(_other_keys(generated_log(700, malformed_every=0)))
    shutil.copy(FIXTURE_LOGS / "gateway-b.jsonl", logs)   # bad lines of several kinds
    more = generated_log(400, malformed_every=0).replace(b'"message_key":"g', b'"message_key":"k')
    (logs / "convlog-c.jsonl.gz").write_bytes(gzip.compress(more))   # staged (inflated), then read
    (logs / "convlog-d.jsonl").write_bytes(more.replace(b'"message_key":"k', b'"message_key":"m')
                                           + b'{"unfinished')   # its complete lines staged, then read

    def audit(out: Path) -> dict[str, Any]:
        run(build_parser().parse_args([str(logs), "--out", str(out), "--grace", "60", "--no-parquet-tables"]), spark)
        return json.loads((out / "summary.json").read_text())

    quick = audit(tmp_path / "quick")
    assert _writers(tmp_path / "quick" / "parquet") == {"pyarrow", "spark"}
    assert quick["input"]["notes"]   # the unfinished last line, not read
    monkeypatch.setattr(read_ahead_module, "read_checked", lambda paths: None)
    parsed = audit(tmp_path / "parsed")
    assert _writers(tmp_path / "parsed" / "parquet") == {"spark"}

    assert quick["input"] == parsed["input"]
    assert quick["input"]["bad"] > 0 and quick["input"]["samples"]
    assert findings(quick) == findings(parsed) and quick["verdict"] == parsed["verdict"]
    a, b = _stored(spark, tmp_path / "quick" / "parquet"), _stored(spark, tmp_path / "parsed" / "parquet")
    assert a.count() == b.count() == quick["input"]["valid"]
    assert a.exceptAll(b.select(*a.columns)).count() == 0
    # the read-ahead's staging and written files are gone: moved into the log, or removed
    assert [p.name for p in (tmp_path / "quick").iterdir() if p.name.startswith(".mqb-audit")] == []


def test_the_read_ahead_writes_one_file_per_hour_for_all_its_files(tmp_path):
    """Two files of valid records over the same two hours are written as two Parquet files, one per hour, each
    holding its hour's rows of both (Spark pays per file it opens); a file with a bad line is left to Spark."""
    logs = tmp_path / "logs"
    logs.mkdir()
    a, b = generated_log(5000, malformed_every=0), _other_keys(generated_log(5000, malformed_every=0))
    (logs / "convlog-a.jsonl").write_bytes(a)
    (logs / "convlog-b.jsonl").write_bytes(b)
    (logs / "convlog-c.jsonl").write_bytes(generated_log(100))   # a line that is not JSON
    ahead = read_ahead(expand_paths([logs]), str(tmp_path / "out" / "parquet"))
    assert ahead is not None and ahead.written_dir is not None
    try:
        assert [Path(p).name for p in ahead.parse] == ["convlog-c.jsonl"]
        files = sorted(ahead.written_dir.glob("date=*/hour=*/*.parquet"))
        assert [f"{f.parent.parent.name}/{f.parent.name}" for f in files] == ["date=2026-03-01/hour=10",
                                                                             "date=2026-03-01/hour=11"]
        assert [w.rows for w in ahead.written] == [a.count(b"\n"), b.count(b"\n")]
        tables = [pq.read_table(f, partitioning=None) for f in files]
        assert sum(t.num_rows for t in tables) == a.count(b"\n") + b.count(b"\n")
        for f, table in zip(files, tables, strict=True):
            hour = int(f.parent.name.split("=")[1])
            assert {t.hour for t in table.column("event_time").to_pylist()} == {hour}
            assert {k[0] for k in table.column("message_key").to_pylist()} == {"g", "h"}   # both files' rows
            group = pq.ParquetFile(f).metadata.row_group(0)   # fields of one value a record: no dictionary
            plain = {group.column(i).path_in_schema for i in range(group.num_columns)
                     if group.column(i).dictionary_page_offset is None}
            assert PLAIN_FIELDS <= plain and "route" not in plain
    finally:
        ahead.close()
    assert [p.name for p in (tmp_path / "out").iterdir()] == []


def test_a_read_ahead_that_fails_leaves_nothing_beside_the_log(tmp_path, monkeypatch):
    """A failure while the checked reader's files are written (a full disk): the error is raised and the
    staging and the written files are removed."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "convlog-a.jsonl.gz").write_bytes(gzip.compress(generated_log(50, malformed_every=0)))
    (logs / "convlog-b.jsonl").write_bytes(generated_log(50, malformed_every=0))
    parquet = tmp_path / "out" / "parquet"
    written = []
    add = HourFiles.add

    def full_disk(files: HourFiles, table: Any) -> Any:  # noqa: ANN401
        if written:
            raise OSError(28, "No space left on device")
        written.append(add(files, table))
        return written[-1]

    monkeypatch.setattr(HourFiles, "add", full_disk)
    with pytest.raises(OSError, match="No space"):
        read_ahead(expand_paths([logs]), str(parquet))
    assert written and list((tmp_path / "out").iterdir()) == []


def test_the_newest_row_counted_by_the_ingest_gives_load_s_as_of(spark, tmp_path):
    """load given the ingest's newest valid row finds the "as of" that scanning the log finds, in every window
    (one ending before the rows; one starting after them, where neither finds a row)."""
    parquet = tmp_path / "parquet"
    ingested = ingest(spark, expand_paths([FIXTURE_LOGS]), str(parquet), rollups=False)
    assert ingested.max_time is not None
    for config in (AuditConfig(), AuditConfig(grace_seconds=0),
                   AuditConfig(since=ingested.min_time + timedelta(minutes=30)),
                   AuditConfig(until=ingested.max_time - timedelta(minutes=30)),
                   AuditConfig(since=ingested.max_time + timedelta(hours=1))):
        known = load(spark, str(parquet), config, rollups=False, newest=ingested.max_time).as_of
        assert known == load(spark, str(parquet), config, rollups=False).as_of, config


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_crash_in_a_quick_batch_loses_and_doubles_nothing(spark, tmp_path):
    """A real `python -m spark_audit --incremental` dies right after a quick batch's files moved into the log,
    then again after the batch, read again with a new file staged beside it, was committed; the next run
    audits it once, and the log and the runs' findings equal a full audit's."""
    logs, out = tmp_path / "logs", tmp_path / "out"
    logs.mkdir()
    argv = [str(logs), "--incremental", "--out", str(out), "--grace", "60", "--no-parquet-tables"]
    checkpoint, parquet = out / "checkpoint", out / "parquet"

    def crash(point: str) -> None:
        crash_incremental(argv, point, TEST_CRASH_EXIT)

    shutil.copy(FIXTURE_LOGS / "gateway-a.jsonl", logs)
    first = _audit(logs, out, spark)
    assert first["input"]["rows_read"] == 46 and _writers(parquet) == {"pyarrow"}

    g, h = generated_log(500, malformed_every=0), _other_keys(generated_log(300, malformed_every=0))
    (logs / "convlog-g.jsonl").write_bytes(g)
    crash("after-move")
    moved = json.loads((checkpoint / BATCHES_DIR / "1.json").read_text())["files"]
    assert moved and all(Path(f).is_file() for f in moved)
    assert all("parquet-cpp" in pq.ParquetFile(f).metadata.created_by for f in moved)   # the quick read's
    assert json.loads((checkpoint / BATCH_LEDGER).read_text())["committed"] == 0

    (logs / "convlog-h.jsonl").write_bytes(h)
    crash("after-commit")   # batch 1 again (its files replaced) with h's lines, committed, not audited
    assert json.loads((checkpoint / BATCH_LEDGER).read_text())["committed"] == 1
    assert _writers(parquet) == {"pyarrow"}
    assert _stored(spark, parquet).count() == 46 + g.count(b"\n") + h.count(b"\n")   # each row once

    second = _audit(logs, out, spark)
    assert second["input"]["rows_read"] == g.count(b"\n") + h.count(b"\n")
    _audit(logs, out, spark)
    assert json.loads((out / "summary.json").read_text())["input"]["rows_read"] == 0

    full_parquet = str(tmp_path / "full")
    assert ingest(spark, expand_paths([logs]), full_parquet).valid == 46 + second["input"]["rows_read"]
    log, full_log = _stored(spark, parquet), _stored(spark, Path(full_parquet))
    assert log.count() == full_log.count()
    assert log.exceptAll(full_log.select(*log.columns)).count() == 0
    full = run_audit(load(spark, full_parquet, AuditConfig(grace_seconds=60)))
    full.cleanup()
    assert union(findings(first), findings(second)) == findings(build_summary(full, None))
