"""An independent harness for the `--every` mode: a running `mqbridge audit DIR --every S` process, batches
of new rows arriving as new files, and the time from a batch's arrival to the audit's summary counting it.

Every batch is written beside the directory before the audit starts, and renamed into it in turn (it arrives
whole, and making it takes no CPU from the audit); the harness then polls
OUT/summary.json until an incremental run reports reading exactly that batch (input.rows_read) and records
the delay, which includes the wait for the next tick (up to S seconds). Losses are planted (1 in 1,000) and
each run's verdict must count the batch's. The first batch (the JVM's first run) is reported apart.

The audit runs as a user runs it (`python -m bridge audit`, its findings' Parquet tables written; a run's
summary.json is written after its other outputs). Before session 29 it ran `python -m spark_audit ...
--no-parquet-tables`.

  .venv/bin/python bench/bench_audit_every.py --rows 100000 --batches 6 --every 0.5
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from mappings.convlog_schema import format_timestamp  # noqa: E402

FIXTURE = ROOT / "fixtures" / "logs" / "gateway-a.jsonl"


def batch(rows: int, start: datetime, first_key: int) -> tuple[bytes, int]:
    """About `rows` records (ingress and egress per message) and the number of planted losses."""
    ingress, egress = (json.loads(line) for line in FIXTURE.read_text().splitlines()[:2])
    out: list[str] = []
    lost = 0
    for i in range(rows // 2):
        at, key = start + timedelta(milliseconds=10 * i), f"e{first_key + i}"
        out.append(json.dumps({**ingress, "event_time": format_timestamp(at), "message_key": key},
                              separators=(",", ":")))
        if i % 1000 == 500:
            lost += 1
            continue
        out.append(json.dumps({**egress, "event_time": format_timestamp(at + timedelta(milliseconds=2)),
                               "message_key": key}, separators=(",", ":")))
    return "".join(line + "\n" for line in out).encode(), lost


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--every", type=float, default=0.5)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--no-parquet-tables", action="store_true",
                        help="pass it on (the figures before session 29 were taken so: without the tables)")
    parser.add_argument("--output")
    parser.add_argument("--audit-log", help="the audit process's output (each run's phase times) to this file")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mqb-every-"))
    logs, out, spool = work / "logs", work / "out", work / "spool"
    for d in (logs, spool):
        d.mkdir()
    # every batch made before the audit starts: making one (JSON in Python, ~3 s of CPU) while the audit
    # runs took a core from it on this 2-core machine
    start = datetime(2026, 3, 1, tzinfo=UTC)
    spooled: list[tuple[Path, int]] = []
    for k in range(args.batches):
        data, _ = batch(args.rows, start + timedelta(hours=k), k * args.rows)
        staged = spool / f"convlog-{k:03d}.jsonl"
        staged.write_bytes(data)
        spooled.append((staged, data.count(b"\n")))
    proc = subprocess.Popen([sys.executable, "-m", "bridge", "audit", str(logs), "--every", str(args.every), "--out",
                             str(out), "--grace", "1", *(["--no-parquet-tables"] if args.no_parquet_tables else [])],
                            cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=open(args.audit_log, "w") if args.audit_log else subprocess.DEVNULL,  # noqa: SIM115
                            stderr=subprocess.STDOUT if args.audit_log else subprocess.DEVNULL)
    summary = out / "summary.json"
    results: list[dict[str, float]] = []
    try:
        for k in range(args.batches):
            staged, lines = spooled[k]
            before = summary.stat().st_mtime_ns if summary.exists() else 0
            load = os.getloadavg()[0]
            arrived = time.perf_counter()
            os.replace(staged, logs / staged.name)
            while True:
                if proc.poll() is not None:
                    raise SystemExit(f"the audit process ended ({proc.returncode})")
                if time.perf_counter() - arrived > args.timeout:
                    raise SystemExit(f"batch {k}: not audited within {args.timeout} s")
                if summary.exists() and summary.stat().st_mtime_ns != before:
                    try:
                        s = json.loads(summary.read_text())
                    except ValueError:
                        continue  # being replaced
                    before = summary.stat().st_mtime_ns
                    if s["input"]["rows_read"] == lines:
                        break
                time.sleep(0.02)
            delay = time.perf_counter() - arrived
            # the batch's losses are past the grace once the next batch (an hour later) is in
            results.append({"batch": k, "lines": lines, "seconds": round(delay, 2), "load1": round(load, 2),
                            "losses_total": s["verdict"]["losses"]})
            print(f"batch {k}: {lines} lines audited {delay:.2f} s after arrival (load {load:.2f}); "
                  f"losses so far {s['verdict']['losses']}", flush=True)
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(work, ignore_errors=True)
    later = sorted(r["seconds"] for r in results[1:])
    print(json.dumps({"rows": args.rows, "every": args.every, "first": results[0]["seconds"], "later": later}))
    if args.output:
        Path(args.output).write_text(json.dumps({"rows": args.rows, "every": args.every, "batches": results},
                                                indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
