"""Samples of bad input quote the line as it was, with its file and line number: in a plain file read in
splits, in a gzip file, and in the part of a growing file an incremental run reads."""
from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

try:
    from tests.spark_fixtures import generated_log, spark  # noqa: F401
except ImportError:  # tests/ is not a package: pytest puts this directory on sys.path
    from spark_fixtures import generated_log, spark  # noqa: F401

from spark_audit.ingest import SAMPLE_CHARS, SAMPLE_LIMIT, ingest_logs  # noqa: E402
from spark_audit.lines import numbered_lines  # noqa: E402
from spark_audit.options import build_parser  # noqa: E402
from spark_audit.run import run  # noqa: E402

pytestmark = pytest.mark.spark


def planted(lines: list[str], every: int) -> tuple[list[str], dict[int, str]]:
    """The lines with a bad one after every `every`-th (a blank line now and then); line number -> bad line."""
    out: list[str] = []
    bad: dict[int, str] = {}
    kinds = ['{"not closed": ', "\x07 not json at all \u00e9", '{"schema_version":2,"event_time":"yesterday"}',
             json.dumps({**json.loads(lines[0]), "qos": 7})]
    for i, line in enumerate(lines):
        out.append(line)
        if i % every == every // 2:
            if i % (3 * every) == every // 2:
                out.append("")  # blank: skipped, but counted as a line
            out.append(kinds[len(bad) % len(kinds)])
            bad[len(out)] = out[-1]
    return out, bad


def expected_samples(path: Path, bad: dict[int, str]) -> list[tuple[str, int, str]]:
    return [(str(path), n, text[:SAMPLE_CHARS]) for n, text in sorted(bad.items())][:SAMPLE_LIMIT]


def got(samples: list[dict[str, Any]]) -> list[tuple[str, int, str]]:
    return [(s["file"], s["line"], s["text"]) for s in samples]


def test_numbered_lines_count_across_splits(spark, tmp_path) -> None:  # noqa: F811
    path = tmp_path / "big.jsonl"
    lines = [f"line {i} " + "x" * (i % 50) for i in range(40_000)]
    path.write_text("\n".join(lines) + "\n")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "200000")  # many splits of one file
    try:
        numbered = numbered_lines(spark, [str(path)])
        assert numbered.rdd.getNumPartitions() > 5
        rows = {r["_line"]: r["value"] for r in numbered.collect()}
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    assert rows == {i + 1: text for i, text in enumerate(lines)}


def test_one_shot_samples_name_file_and_line(spark, tmp_path) -> None:  # noqa: F811
    logs = tmp_path / "logs"
    logs.mkdir()
    lines = generated_log(3000, malformed_every=0).decode().splitlines()
    plain_lines, plain_bad = planted(lines, 1500)
    plain = logs / "a.jsonl"
    plain.write_text("\n".join(plain_lines) + "\n")
    zipped_lines, zipped_bad = planted(lines[:2000], 397)
    zipped = logs / "b.jsonl.gz"
    zipped.write_bytes(gzip.compress(("\n".join(zipped_lines) + "\n").encode()))

    result = ingest_logs(spark, [str(plain), str(zipped)], str(tmp_path / "parquet"))
    want = sorted(expected_samples(plain, plain_bad) + expected_samples(zipped, zipped_bad))
    assert result.bad == len(want) <= SAMPLE_LIMIT  # every bad line is a sample
    assert sorted(got(result.samples)) == want
    assert any(s["text"].startswith("\x07") for s in result.samples)  # quoted as it was, not re-encoded
    lengths = {(str(plain), n): len(t) for n, t in plain_bad.items()}
    lengths.update({(str(zipped), n): len(t) for n, t in zipped_bad.items()})
    assert {(s["file"], s["line"]): s["chars"] for s in result.samples} == lengths
    assert max(lengths.values()) > SAMPLE_CHARS  # a long line is cut, its length said


def test_incremental_samples_count_lines_before_the_part_read(spark, tmp_path) -> None:  # noqa: F811
    logs, out = tmp_path / "logs", tmp_path / "out"
    logs.mkdir()
    lines, bad = planted(generated_log(1500, malformed_every=0).decode().splitlines(), 499)
    live = logs / "convlog.jsonl"
    cut = len(lines) * 2 // 3
    live.write_text("\n".join(lines[:cut]) + "\n")
    argv = [str(logs), "--incremental", "--out", str(out), "--grace", "60", "--no-parquet-tables"]
    run(build_parser().parse_args(argv), spark)
    first = json.loads((out / "summary.json").read_text())["input"]["samples"]
    with live.open("a") as f:  # the writer goes on
        f.write("\n".join(lines[cut:]) + "\n")
    run(build_parser().parse_args(argv), spark)
    second = json.loads((out / "summary.json").read_text())["input"]["samples"]
    assert [s["line"] for s in first] == [n for n in sorted(bad) if n <= cut]
    assert [s["line"] for s in second] == [n for n in sorted(bad) if n > cut]
    assert second, "the second part has bad lines"
    assert all(s["file"] == str(live) and s["text"] == lines[s["line"] - 1][:SAMPLE_CHARS] for s in first + second)
