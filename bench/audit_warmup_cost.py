"""What a cold one-shot audit pays before any row: in one fresh process, the session, then ingest + load +
audit of a tiny log (the first LINES lines of the first log file, with a sidecar written the gateway's way),
the same tiny audit again, then the audit of the whole log directory. The tiny audit's first time minus its
second is the JVM's and Spark's warming; the whole log's audit after it shows what the rows cost.

  .venv/bin/python bench/audit_warmup_cost.py /tmp/bn1/logs-sidecars [--lines 400]
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", type=Path, help="a log directory (JSON Lines files, with sidecars or not)")
    ap.add_argument("--lines", type=int, default=400)
    a = ap.parse_args()
    from bridge.convlog_parquet import write_sidecar
    from spark_audit.audit import ingest, load, run_audit
    from spark_audit.ingest import expand_paths
    from spark_audit.scope import AuditConfig
    from spark_audit.session import build_session

    work = Path(tempfile.mkdtemp(prefix="mqb-warmup-"))
    tiny = work / "tiny"
    tiny.mkdir()
    first = sorted(p for p in a.logs.iterdir() if p.suffix in (".json", ".jsonl"))[0]
    with open(first, "rb") as f:
        lines = [line for _, line in zip(range(a.lines), f, strict=False)]
    (tiny / "tiny.jsonl").write_bytes(b"".join(lines))
    write_sidecar(tiny / "tiny.jsonl")
    t0 = time.perf_counter()
    spark = build_session()
    print(f"session {time.perf_counter() - t0:.2f} s", flush=True)

    def audit(logs: Path, name: str) -> float:
        started = time.perf_counter()
        paths = expand_paths([str(logs)])
        parquet = str(work / name / "parquet")
        ingest(spark, paths, parquet)
        result = run_audit(load(spark, parquet, AuditConfig()))
        took = time.perf_counter() - started
        print(f"{name}: {took:.2f} s (losses {result.counts['losses']})", flush=True)
        return took

    try:
        audit(tiny, "tiny-1")
        audit(tiny, "tiny-2")
        audit(a.logs, "whole")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
