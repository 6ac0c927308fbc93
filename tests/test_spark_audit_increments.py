"""The incremental ingest's batch ledger (spark_audit/increments.py): batches numbered and committed in the
checkpoint, a crash's leftovers settled before anything is staged, and the Structured Streaming checkpoint of
an earlier version taken over without losing or doubling a record."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

try:
    from tests.spark_fixtures import FIXTURE_LOGS, findings, spark  # noqa: F401
except ImportError:  # tests/ is not a package: pytest puts this directory on sys.path
    from spark_fixtures import FIXTURE_LOGS, findings, spark  # noqa: F401

from py4j.protocol import Py4JJavaError  # noqa: E402
from pyspark.errors import StreamingQueryException  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from spark_audit.audit import ingest, load, run_audit  # noqa: E402
from spark_audit.carry import Carried  # noqa: E402
from spark_audit.increments import (  # noqa: E402
    BATCH_LEDGER,
    BATCHES_DIR,
    LOCK_FILE,
    STREAM_DIR,
    BatchLedger,
    BatchRecord,
    read_ledger,
    recover,
    write_ledger,
    write_record,
)
from spark_audit.ingest import JSON_OPTIONS, IngestResult, expand_paths, ingest_batch, tag  # noqa: E402
from spark_audit.lines import FILE_COLUMN  # noqa: E402
from spark_audit.options import build_parser  # noqa: E402
from spark_audit.report import build_summary  # noqa: E402
from spark_audit.run import run  # noqa: E402
from spark_audit.schema import KEY_CHECK, KEY_HASH, read_schema  # noqa: E402
from spark_audit.scope import AuditConfig  # noqa: E402
from spark_audit.sources import slice_dir, slices_now, stage_new  # noqa: E402


def _slice(checkpoint: Path, name: str) -> Path:
    path = slice_dir(str(checkpoint)) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"{}\n")
    return path


def _moved(parquet: Path, name: str) -> Path:
    path = parquet / "date=2026-11-29" / "hour=9" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"PAR1")
    return path


def test_recover_undoes_an_uncommitted_batch_and_keeps_a_committed_one_until_the_state_has_it(tmp_path):
    """Batch 3 committed but not audited (its slice still waiting), batch 4 recorded but not committed (its file
    in the log): 3 is handed to the audit and its slice removed; 4's file and record are removed and its slice
    stays, to be read again. Once the state includes 3, its record goes."""
    checkpoint, parquet = tmp_path / "ckpt", tmp_path / "parquet"
    ledger = BatchLedger("abc", committed=3)
    write_ledger(str(checkpoint), ledger)
    s3, s4 = _slice(checkpoint, "00000007-a.jsonl"), _slice(checkpoint, "00000008-a.jsonl")
    f3, f4 = _moved(parquet, "b3-abc-00000.parquet"), _moved(parquet, "b4-abc-00000.parquet")
    write_record(str(checkpoint), BatchRecord(3, IngestResult(rows_read=5, valid=5), (str(f3),), (s3.name,)))
    write_record(str(checkpoint), BatchRecord(4, IngestResult(rows_read=7, valid=7), (str(f4),), (s4.name,)))

    unaudited = recover(str(checkpoint), read_ledger(str(checkpoint), Carried()), Carried(batch_id=2))
    assert [(r.batch_id, r.ingest.rows_read, r.files) for r in unaudited] == [(3, 5, (str(f3),))]
    assert not s3.exists() and s4.exists()   # 3's slice never read again; 4's read again
    assert f3.exists() and not f4.exists()
    assert sorted(p.name for p in (checkpoint / BATCHES_DIR).iterdir()) == ["3.json"]

    assert recover(str(checkpoint), ledger, Carried(batch_id=3)) == []
    assert not (checkpoint / BATCHES_DIR / "3.json").exists() and f3.exists()


def test_a_new_ledger_follows_the_state_s_batch_and_a_lost_one_is_an_error(tmp_path):
    """Without a ledger (a checkpoint of no stream) batch ids continue after the one the audit state names:
    an id used before would make recover treat a new batch as audited. A ledger that cannot be read, or
    records left without their ledger, stop the run with an error naming the file."""
    checkpoint = tmp_path / "ckpt"
    ledger = read_ledger(str(checkpoint), Carried(batch_id=41))
    assert ledger.committed == 41 and len(ledger.id) == 32
    assert read_ledger(str(checkpoint), Carried()) == ledger   # kept, not made again

    (checkpoint / BATCH_LEDGER).write_text("{not json")
    with pytest.raises(RuntimeError, match=f"{BATCH_LEDGER}: unreadable batch ledger"):
        read_ledger(str(checkpoint), Carried())

    (checkpoint / BATCH_LEDGER).unlink()
    write_record(str(checkpoint), BatchRecord(42, IngestResult(), (), ()))
    with pytest.raises(RuntimeError, match=f"{BATCH_LEDGER} is missing, and 1 batch records"):
        read_ledger(str(checkpoint), Carried())


@pytest.mark.spark
def test_a_checkpoint_an_earlier_version_s_stream_left_is_taken_over(spark, tmp_path):
    """The Structured Streaming checkpoint of an earlier version (made by a real stream, with that version's
    micro-batch handler), left by a run that died twice: once after its stream committed micro-batch 0 (the
    slice it read still waiting, no audit state), once after micro-batch 1's files moved into the log
    (recorded, not committed). The first run of this version removes batch 0's slice, audits batch 0 from its
    record, removes batch 1's files and reads its slice again as its own batch 1: every record is in the log
    once, and the findings equal a full audit's."""
    logs, out = tmp_path / "logs", tmp_path / "out"
    logs.mkdir()
    checkpoint, parquet = out / "checkpoint", out / "parquet"

    def handle(batch: Any, batch_id: int) -> None:  # noqa: ANN401 - what an earlier version's handler did
        staging = str(parquet / "_incoming" / f"batch-{batch_id}")
        ingest_batch(batch, staging, str(parquet), f"b{batch_id}-old",
                     lambda counts, targets: write_record(str(checkpoint), BatchRecord(batch_id, counts,
                                                                                       tuple(targets))))
        if batch_id == 1:
            raise RuntimeError("the run dies after the move")

    def run_stream() -> None:
        frame = tag(spark.readStream.schema(read_schema()).options(**JSON_OPTIONS).json(
            str(slice_dir(str(checkpoint))))).withColumn(FILE_COLUMN, F.col("_metadata.file_path"))
        query = (frame.writeStream.foreachBatch(handle).option("checkpointLocation", str(checkpoint / STREAM_DIR))
                 .trigger(availableNow=True).start())
        query.awaitTermination()

    shutil.copy(FIXTURE_LOGS / "gateway-a.jsonl", logs)
    stage_new(str(checkpoint), expand_paths([logs]))
    run_stream()   # batch 0 committed; the run "dies" before removing its slice and before the audit
    assert (checkpoint / STREAM_DIR / "commits" / "0").is_file() and len(slices_now(str(checkpoint))) == 1

    shutil.copy(FIXTURE_LOGS / "gateway-b.jsonl", logs)
    stage_new(str(checkpoint), expand_paths([logs]))
    with pytest.raises((StreamingQueryException, Py4JJavaError)):
        run_stream()   # batch 1's files moved in, then the handler failed: no commit
    uncommitted = json.loads((checkpoint / BATCHES_DIR / "1.json").read_text())["files"]
    assert uncommitted and all(Path(f).is_file() for f in uncommitted)
    assert not (checkpoint / STREAM_DIR / "commits" / "1").exists()
    stream_id = json.loads((checkpoint / STREAM_DIR / "metadata").read_text().splitlines()[0])["id"]

    argv = [str(logs), "--incremental", "--out", str(out), "--grace", "60", "--no-parquet-tables"]
    run(build_parser().parse_args(argv), spark)
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["input"]["rows_read"], summary["input"]["valid"], summary["input"]["bad"]) == (61, 55, 6)
    assert json.loads((checkpoint / BATCH_LEDGER).read_text()) == {"version": 1, "id": stream_id, "committed": 1}
    assert not any(Path(f).exists() for f in uncommitted)
    assert not slices_now(str(checkpoint)) and not list((checkpoint / BATCHES_DIR).glob("*.json"))
    assert not (checkpoint / STREAM_DIR).exists()   # taken over: no longer read

    full_parquet = str(tmp_path / "full")
    assert ingest(spark, expand_paths([logs]), full_parquet).valid == 55
    log = spark.read.parquet(str(parquet)).drop(KEY_HASH, KEY_CHECK)   # the quick read leaves them to the audit
    full_log = spark.read.parquet(full_parquet).select(*log.columns)
    assert log.count() == 55 and log.exceptAll(full_log).count() == 0
    full = run_audit(load(spark, full_parquet, AuditConfig(grace_seconds=60)))
    full.cleanup()
    assert findings(summary) == findings(build_summary(full, None))

    run(build_parser().parse_args(argv), spark)   # and nothing twice
    assert json.loads((out / "summary.json").read_text())["input"]["rows_read"] == 0


@pytest.mark.spark
def test_a_run_on_a_checkpoint_in_use_fails_at_once_and_touches_nothing(spark, tmp_path, capsys):
    """While another process holds OUT/checkpoint (as a running incremental audit does), a run exits 2 at once
    naming the holder's pid, and stages nothing; once the holder is gone (its lock goes with it), the next run
    reads everything."""
    logs, out = tmp_path / "logs", tmp_path / "out"
    logs.mkdir()
    checkpoint = out / "checkpoint"
    shutil.copy(FIXTURE_LOGS / "gateway-a.jsonl", logs)
    root = Path(__file__).resolve().parents[1]
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from spark_audit.increments import checkpoint_lock\n"
         "with checkpoint_lock(sys.argv[1]):\n    print('held', flush=True)\n    sys.stdin.read()", str(checkpoint)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        argv = [str(logs), "--incremental", "--out", str(out), "--grace", "60", "--no-parquet-tables"]
        assert run(build_parser().parse_args(argv), spark) == 2
        assert f"in use by another incremental audit (pid {holder.pid})" in capsys.readouterr().err
        assert sorted(p.name for p in checkpoint.iterdir()) == [LOCK_FILE] and not (out / "summary.json").exists()
    finally:
        holder.kill()   # as a crash would: the kernel drops the lock
        holder.wait(timeout=30)
    assert run(build_parser().parse_args(argv), spark) == 1   # gateway-a holds a loss
    assert json.loads((out / "summary.json").read_text())["input"]["rows_read"] == 46
