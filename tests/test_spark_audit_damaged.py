"""Damaged input never stops the audit: a truncated .jsonl.gz among good files is reported (report, summary,
stderr, naming the file), its readable part is audited, and the exit code tells findings (1) from "could
not audit" (2)."""
from __future__ import annotations

import gzip
import json
import shutil
import zlib
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from bridge.cli.main import main
from spark_audit.options import build_parser
from spark_audit.run import run

try:
    from tests.spark_fixtures import FIXTURE_LOGS, generated_log, spark  # noqa: F401
except ImportError:  # tests/ is not a package: pytest puts this directory on sys.path
    from spark_fixtures import FIXTURE_LOGS, generated_log, spark  # noqa: F401

pytestmark = pytest.mark.spark


def truncated_gzip(content: bytes, path: Path) -> bytes:
    """Write content gzipped and cut at 60 % of its compressed bytes; the complete lines a reader gets."""
    packed = gzip.compress(content)
    path.write_bytes(packed[: len(packed) * 6 // 10])
    readable = zlib.decompressobj(31).decompress(path.read_bytes())  # what a truncated stream yields
    return readable[: readable.rfind(b"\n") + 1]


def audit(logs: Path, out: Path) -> tuple[int, dict[str, Any]]:
    code = main(["audit", str(logs), "--out", str(out), "--grace", "60", "--no-parquet-tables"])
    return code, json.loads((out / "summary.json").read_text())


def verdict(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in summary["verdict"].items() if k not in ("exit_code", "damaged_files")}


def test_a_truncated_gzip_among_good_files_is_reported_and_its_readable_part_audited(spark, tmp_path, capsys):
    logs, plain = tmp_path / "logs", tmp_path / "plain"
    logs.mkdir()
    plain.mkdir()
    shutil.copy(FIXTURE_LOGS / "gateway-a.jsonl", logs)  # one loss, two suspicious duplicates
    shutil.copy(FIXTURE_LOGS / "gateway-a.jsonl", plain)
    damaged = logs / "gateway-g.jsonl.gz"
    readable = truncated_gzip(generated_log(2000), damaged)
    assert readable.count(b"\n") > 1000
    (plain / "gateway-g.jsonl").write_bytes(readable)

    code, summary = audit(logs, tmp_path / "out")
    err = capsys.readouterr().err
    assert code == 1  # findings come first: a loss is never hidden behind "could not audit"
    assert "Traceback" not in err and "Exception" not in err
    assert f"damaged input file {damaged}: truncated gzip file" in err
    assert list(summary["input"]["damaged"]) == [str(damaged)]
    assert summary["verdict"]["damaged_files"] == 1
    html = (tmp_path / "out" / "report.html").read_text()
    assert "Damaged input files" in html and str(damaged) in html

    # The readable part was audited: the same findings as an audit of those complete lines as plain text.
    plain_code, plain_summary = audit(plain, tmp_path / "plain-out")
    assert plain_code == 1 and plain_summary["verdict"]["damaged_files"] == 0
    assert verdict(summary) == verdict(plain_summary)
    assert summary["losses"] == plain_summary["losses"] and summary["duplicates"] == plain_summary["duplicates"]
    assert summary["input"]["rows_read"] == plain_summary["input"]["rows_read"]


def test_damaged_input_without_findings_exits_2(spark, tmp_path, capsys):
    logs = tmp_path / "logs"
    logs.mkdir()
    clean = generated_log(500, lost_every=0, duplicated_every=0, malformed_every=0)
    (logs / "a.jsonl").write_bytes(clean)
    damaged = logs / "b.jsonl.gz"
    damaged.write_bytes(b"\x1f\x8b\x08\x00 not really gzip data")
    code, summary = audit(logs, tmp_path / "out")
    assert code == 2 and summary["verdict"]["exit_code"] == 2
    assert summary["verdict"]["losses"] == summary["verdict"]["duplicates_suspicious"] == 0
    assert summary["input"]["rows_read"] == 1000  # the good file was audited
    assert str(damaged) in capsys.readouterr().err
    assert "INCOMPLETE" in (tmp_path / "out" / "report.html").read_text()


def test_incremental_reports_a_truncated_gzip_and_reads_the_rest_once_it_is_complete(spark, tmp_path, capsys):
    logs, out = tmp_path / "logs", tmp_path / "out"
    logs.mkdir()
    content = generated_log(2000, lost_every=0, duplicated_every=0, malformed_every=0)  # a clean log
    packed = logs / "convlog-20260301-10-000.jsonl.gz"
    readable = truncated_gzip(content, packed)
    argv = [str(logs), "--incremental", "--out", str(out), "--grace", "60", "--no-parquet-tables"]

    assert run(build_parser().parse_args(argv), spark) == 2  # nothing found, but not everything audited
    first = json.loads((out / "summary.json").read_text())
    assert list(first["input"]["damaged"]) == [str(packed)]
    assert f"damaged input file {packed}" in capsys.readouterr().err
    assert first["input"]["rows_read"] == readable.count(b"\n")

    packed.write_bytes(gzip.compress(content))  # the writer finished it
    assert run(build_parser().parse_args(argv), spark) == 0
    second = json.loads((out / "summary.json").read_text())
    assert not second["input"]["damaged"]
    assert first["input"]["rows_read"] + second["input"]["rows_read"] == content.count(b"\n") == 4000
    assert spark.read.parquet(str(out / "parquet")).count() == 4000  # each record once


def test_a_one_shot_audit_of_a_live_file_does_not_count_its_half_written_line(spark, tmp_path, capsys):
    logs = tmp_path / "logs"
    logs.mkdir()
    content = generated_log(300, lost_every=0, duplicated_every=0, malformed_every=0)
    cut = content.rfind(b"\n", 0, len(content) // 2) + 1 + 40  # 40 bytes into a line
    live = logs / "convlog-20260301-10-000.jsonl"
    live.write_bytes(content[:cut])
    code, summary = audit(logs, tmp_path / "out")
    assert code == 0 and summary["input"]["bad"] == 0
    assert summary["input"]["rows_read"] == content[:cut].count(b"\n")
    assert summary["input"]["notes"] == {str(live): "unfinished last line (40 bytes) not read"}
    assert "unfinished last line" in capsys.readouterr().err
