"""A/B of the incremental audit loop: one session, a 200k-row log, then N runs of 100k new rows each.

Prints each run's wall time (stream, audit) and the medians of runs 3..N. The code audited is the
spark_audit of --tree (default: this checkout), so two trees (e.g. a `git worktree` of an older commit)
can be run back to back on the same generated logs:

    .venv/bin/python bench/ab_incremental.py --runs 8 --tree /tmp/old [--long-running] [--outputs]

The logs are generated once into --gen (reused by later invocations) by bench_audit.py's generator.
"""
from __future__ import annotations

import argparse
import importlib
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--tree", default=str(HERE.parent), help="checkout whose spark_audit is measured")
    parser.add_argument("--gen", default="/tmp/mqbridge-ab-gen", help="generated logs (made once, then reused)")
    parser.add_argument("--work", default="/tmp/mqbridge-ab-work")
    parser.add_argument("--long-running", action="store_true", help="the --every mode's JVM options (C2)")
    parser.add_argument("--outputs", action="store_true", help="also write summary, HTML and Parquet tables")
    args = parser.parse_args()
    sys.path.insert(0, args.tree)
    incremental = importlib.import_module("spark_audit.incremental")
    audit = importlib.import_module("spark_audit.audit")
    session = importlib.import_module("spark_audit.session")
    report = importlib.import_module("spark_audit.report")
    sys.path.insert(1, str(HERE))  # bench_audit's generator: imported after the tree's spark_audit, it reuses it
    bench = importlib.import_module("bench_audit")
    print("spark_audit from", Path(incremental.__file__).parent, flush=True)

    gen, work = Path(args.gen), Path(args.work)
    spark = session.build_session("local[2]", "mqbridge-ab-incremental", full_jit=args.long_running)
    bench.JVM_PID.append(int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()))
    if len(list(gen.glob(f"new-{args.runs - 1}/part-*.json"))) != 1:
        shutil.rmtree(gen, ignore_errors=True)
        bench.write_jsonl(bench.synthetic(spark, 200_000), str(gen / "base"), files=2)
        for k in range(args.runs):  # 10 minutes of traffic each, one after the other
            start = bench.T0_US + bench.DAY_US + (6 + k) * 600_000_000
            rows = bench.synthetic(spark, 100_000, start_us=start, span_us=600_000_000, first_id=2_000_000 * (k + 1))
            bench.write_jsonl(rows, str(gen / f"new-{k}"), files=1)
    shutil.rmtree(work, ignore_errors=True)
    logs = work / "logs"
    logs.mkdir(parents=True)
    for f in (gen / "base").glob("part-*.json"):
        shutil.copy(f, logs / f.name)
    config = audit.AuditConfig(grace_seconds=300)
    parquet, checkpoint = str(work / "parquet"), str(work / "ckpt")
    incremental.run_incremental(spark, str(logs), parquet, checkpoint, config)[1].cleanup()
    walls, streams, audits = [], [], []
    for k in range(args.runs):
        for part in (gen / f"new-{k}").glob("part-*.json"):
            shutil.copy(part, logs / f"new-{k}-{part.name}")
        cpu, started = bench.jvm_cpu_seconds(), time.perf_counter()
        phases: dict[str, float] = {}
        new, result = incremental.run_incremental(spark, str(logs), parquet, checkpoint, config, phases)
        if args.outputs:
            report.write_outputs(result, report.build_summary(result, new), str(work / "out"))
        walls.append(time.perf_counter() - started)
        streams.append(phases["read"])
        audits.append(phases["audit"])
        print(json.dumps({"run": k + 1, "wall": round(walls[-1], 2), "cpu": round(bench.jvm_cpu_seconds() - cpu, 2),
                          "stream": round(streams[-1], 2), "audit": round(audits[-1], 2), "counts": result.counts}),
              flush=True)
        result.cleanup()
    later = slice(2, None)
    print(json.dumps({"median_wall": round(statistics.median(walls[later]), 2),
                      "median_stream": round(statistics.median(streams[later]), 2),
                      "median_audit": round(statistics.median(audits[later]), 2),
                      "min_wall": round(min(walls[later]), 2), "long_running": args.long_running,
                      "outputs": args.outputs}))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
