"""LOGS, --out and --parquet given as URIs (hdfs://, s3a://, here file://) go through Hadoop's FileSystem API
(spark_audit/fs.py), never local file-system calls: a planted-fault log audited by plain paths and by file://
URIs gives the same findings, while every Python open, listing, stat, mkdir, rename and removal of those
directories is recorded (none may happen)."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from bridge.cli.main import main
from spark_audit import fs, rollup
from spark_audit.audit import load
from spark_audit.ingest import expand_paths
from spark_audit.scope import AuditConfig

try:
    from tests.spark_fixtures import FIXTURE_LOGS, generated_log, spark  # noqa: F401
    from tests.test_spark_audit_damaged import truncated_gzip
except ImportError:  # tests/ is not a package: pytest puts this directory on sys.path
    from spark_fixtures import FIXTURE_LOGS, generated_log, spark  # noqa: F401
    from test_spark_audit_damaged import truncated_gzip

pytestmark = pytest.mark.spark

# Python's audit events of file-system calls that name a path (os.stat has none: wrapped below).
FILE_EVENTS = {"open", "os.listdir", "os.scandir", "os.mkdir", "os.rename", "os.remove", "os.rmdir",
               "os.truncate", "os.chmod", "shutil.rmtree", "shutil.copyfile", "os.utime", "os.link"}
_watch: dict[str, Any] = {"roots": (), "seen": None}


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if _watch["seen"] is None or event not in FILE_EVENTS:
        return
    for arg in args[:2]:
        if isinstance(arg, (str, bytes, os.PathLike)):
            text = os.fsdecode(arg)
            if any(text.startswith(root) for root in _watch["roots"]):
                _watch["seen"].append((event, text))


sys.addaudithook(_hook)  # cannot be removed: inactive while _watch["seen"] is None


@contextmanager
def no_local_access(monkeypatch: pytest.MonkeyPatch, *roots: Path) -> Iterator[list[tuple[str, str]]]:
    """Record every Python-side file-system call on a path under roots (the JVM's own calls are not seen)."""
    seen: list[tuple[str, str]] = []
    real_stat = os.stat

    def stat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if isinstance(path, (str, bytes, os.PathLike)) and any(
                os.fsdecode(path).startswith(str(r)) for r in roots):
            seen.append(("os.stat", os.fsdecode(path)))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    _watch["roots"], _watch["seen"] = tuple(str(r) for r in roots), seen
    try:
        yield seen
    finally:
        _watch["seen"] = None
        monkeypatch.setattr(os, "stat", real_stat)


def planted(logs: Path) -> None:
    """Losses, duplicates, failures, malformed lines, a gzip file and a live file's unfinished last line."""
    logs.mkdir()
    shutil.copy(FIXTURE_LOGS / "gateway-a.jsonl", logs)
    (logs / "sub").mkdir()
    (logs / "sub" / "gateway-g.jsonl.gz").write_bytes(gzip.compress(generated_log(600)))
    live = generated_log(300, lost_every=31, duplicated_every=0, malformed_every=50).replace(
        b"2026-03-01T10", b"2026-03-01T11").replace(b'"message_key":"g', b'"message_key":"h')
    (logs / "live.jsonl").write_bytes(live + live[:40])  # 40 bytes into a line still being written



def summary_of(out: Path) -> dict[str, Any]:
    return json.loads((out / "summary.json").read_text())


def comparable(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary with files named alike: file:/x (Hadoop's name of a local file) as /x."""
    text = json.dumps(summary).replace('"file:/', '"/')
    return json.loads(text)


def test_logs_out_and_parquet_as_file_uris_give_the_plain_paths_findings(spark, tmp_path, monkeypatch, capsys):
    logs = tmp_path / "logs"
    planted(logs)
    plain_out, uri_out, uri_parquet = tmp_path / "plain-out", tmp_path / "uri-out", tmp_path / "uri-parquet"
    assert main(["audit", str(logs), "--out", str(plain_out), "--grace", "60"]) == 1
    plain = summary_of(plain_out)
    assert plain["verdict"]["losses"] >= 15 and plain["input"]["bad"] >= 10 and plain["input"]["notes"]
    capsys.readouterr()

    with no_local_access(monkeypatch, logs, uri_out, uri_parquet) as seen:
        code = main(["audit", logs.as_uri(), "--out", uri_out.as_uri(), "--parquet", uri_parquet.as_uri(),
                     "--grace", "60"])
    assert seen == []
    assert code == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"file:{logs}/live.jsonl: unfinished last line (40 bytes) not read" in err
    remote = summary_of(uri_out)
    assert comparable(remote) == comparable(plain)
    assert remote["input"]["samples"][0]["file"].startswith("file:/")  # named as Hadoop listed it
    assert {p.name for p in (uri_out / "tables").iterdir()} == {p.name for p in (plain_out / "tables").iterdir()}
    assert spark.read.parquet(str(uri_out / "tables" / "losses")).count() == plain["verdict"]["losses"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".mqb-audit-staging")] == []

    # The Parquet log as it is (no LOGS), by URI: the same findings as the plain audit of its logs. The
    # first such audit stores the files' rollups after its verdict, the second reads them.
    assert not (uri_parquet / "_rollup").exists()
    for attempt in ("first", "rolled-up"):
        parquet_out = tmp_path / f"parquet-out-{attempt}"
        with no_local_access(monkeypatch, uri_parquet, parquet_out) as seen:
            code = main(["audit", "--parquet", uri_parquet.as_uri(), "--out", parquet_out.as_uri(), "--grace",
                         "60", "--no-parquet-tables"])
        assert seen == [] and code == 1
        again = summary_of(parquet_out)
        assert again["input"] is None
        for key in ("verdict", "losses", "duplicates", "failures", "failure_records", "records", "volume"):
            expected = plain[key] if key != "verdict" else {**plain[key], "bad_input_lines": 0}
            assert again[key] == expected, (attempt, key)
        entries = rollup.read_manifest(uri_parquet.as_uri())
        assert set(entries) == {rollup.relative(f) for f in rollup.data_files(uri_parquet.as_uri())}
        assert all((uri_parquet / "_rollup" / e.rollup).is_dir() for e in entries.values())
    data = load(spark, uri_parquet.as_uri(), AuditConfig(grace_seconds=60))
    assert data.rollup is not None and data.rollup.files == len(entries)  # the audit reads the rollups


def test_logs_by_uri_with_a_local_out_and_the_other_way_round(spark, tmp_path, capsys):
    logs = tmp_path / "logs"
    planted(logs)
    runs = {"plain": [str(logs), "--out", str(tmp_path / "plain")],
            "uri-logs": [logs.as_uri(), "--out", str(tmp_path / "uri-logs")],
            "uri-out": [str(logs), "--out", (tmp_path / "uri-out").as_uri()]}
    summaries = {}
    for name, argv in runs.items():
        assert main(["audit", *argv, "--grace", "60", "--no-parquet-tables"]) == 1, name
        summaries[name] = comparable(summary_of(tmp_path / name))
    assert summaries["uri-logs"] == summaries["plain"] == summaries["uri-out"]
    assert "Traceback" not in capsys.readouterr().err


def test_a_truncated_gzip_by_file_uri_is_reported_damaged(spark, tmp_path, capsys):
    logs = tmp_path / "logs"
    logs.mkdir()
    damaged = logs / "gateway-g.jsonl.gz"
    readable = truncated_gzip(generated_log(2000, lost_every=0, duplicated_every=0, malformed_every=0), damaged)
    out = tmp_path / "out"
    code = main(["audit", logs.as_uri(), "--out", out.as_uri(), "--grace", "60", "--no-parquet-tables"])
    err = capsys.readouterr().err
    assert code == 2  # nothing found, but not everything audited
    assert "Traceback" not in err and f"damaged input file file:{damaged}: truncated gzip file" in err
    summary = summary_of(out)
    assert list(summary["input"]["damaged"]) == [f"file:{damaged}"]
    assert summary["input"]["rows_read"] == readable.count(b"\n")


def test_incremental_refuses_a_uri(tmp_path, capsys):
    logs = tmp_path / "logs"
    logs.mkdir()
    assert main(["audit", logs.as_uri(), "--incremental", "--out", str(tmp_path / "out")]) == 2
    assert "--incremental and --every need local paths" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_an_unknown_scheme_is_could_not_audit(spark, tmp_path, capsys):
    code = main(["audit", "nosuchfs://somewhere/logs", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "could not audit" in err and "nosuchfs" in err and "Traceback" not in err


def test_is_remote_join_and_parent():
    assert fs.is_remote("hdfs://nn:8020/logs") and fs.is_remote("s3a://bucket/x") and fs.is_remote("file:///tmp")
    assert not fs.is_remote("/var/log/x.jsonl") and not fs.is_remote("logs/a:b.jsonl")
    assert not fs.is_remote("C:/logs") and not fs.is_remote(None)
    assert fs.join("hdfs://nn/out/", "tables", "losses") == "hdfs://nn/out/tables/losses"
    assert fs.parent("s3a://bucket/audit/parquet") == "s3a://bucket/audit"
    assert fs.parent("hdfs:///parquet") == "hdfs:///" and fs.parent("file:/tmp/x") == "file:///tmp"
    assert fs.path_part("hdfs://nn/log/date=2026-03-01/hour=10").name == "hour=10"


def test_hadoop_files_read_write_copy_and_list(spark, tmp_path):
    hadoop = fs.Hadoop()
    base = tmp_path.as_uri()
    data = bytes(range(256)) * 9000  # more than two read chunks
    (tmp_path / "d" / "e").mkdir(parents=True)
    (tmp_path / "d" / "e" / "a.bin").write_bytes(data)
    uri = f"{base}/d/e/a.bin"
    status = hadoop.stat(uri)
    assert status is not None and status.size == len(data) and not status.is_dir and status.name == "a.bin"
    assert hadoop.stat(f"{base}/none") is None
    with hadoop.open(uri) as f:
        assert f.read() == data
        f.seek(-3, os.SEEK_END)
        assert f.read(10) == data[-3:] and f.tell() == len(data)
        f.seek(1000)
        assert f.read(5) == data[1000:1005]
    with pytest.raises(OSError, match="FileNotFound|does not exist"):
        hadoop.open(f"{base}/none")

    hadoop.write(f"{base}/d/w.json", b"one")
    hadoop.write(f"{base}/d/w.json", b"two!")  # replaces it
    assert (tmp_path / "d" / "w.json").read_bytes() == hadoop.read(f"{base}/d/w.json") == b"two!"
    hadoop.copy_range(uri, f"{base}/d/c.bin", 10, 20, newline=True)
    assert (tmp_path / "d" / "c.bin").read_bytes() == data[10:20] + b"\n"
    listed = [s.name for s in hadoop.files(f"{base}/d")]
    assert sorted(listed) == ["a.bin", "c.bin", "w.json"]
    assert [s.name for s in hadoop.glob(f"{base}/d/*/*.bin")] == ["a.bin"]
    hadoop.delete(f"{base}/d")
    assert not (tmp_path / "d").exists()


def test_expand_paths_lists_a_uri_directory_like_a_local_one(spark, tmp_path, monkeypatch):
    logs = tmp_path / "logs"
    planted(logs)
    (logs / ".hidden.jsonl").write_text("{}\n")
    (logs / "notes.txt").write_text("x\n")
    with no_local_access(monkeypatch, logs) as seen:
        local = expand_paths([logs])
    assert ("os.scandir", str(logs)) in seen  # the recorder sees local calls
    with no_local_access(monkeypatch, logs) as seen:
        remote = expand_paths([logs.as_uri()])
    assert seen == []
    assert [p.removeprefix("file:") for p in remote] == local and len(local) == 3
    assert expand_paths([f"{logs.as_uri()}/missing"]) == []
