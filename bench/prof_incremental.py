"""Where an incremental run's time goes: JVM CPU of the stream and the audit, Janino and JIT compilations.

A log of --rows rows is audited once (the first incremental run), then --runs batches of 100k new rows
(bench_audit.py's generator, 10 minutes of traffic each, one after the other) are each audited by one
incremental run in the same JVM. PARTS=1 in the environment: afterwards the last run's audit frame is
timed part by part (a count, the per-key job, the window aggregates, the whole audit), three times each.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_audit as B  # noqa: E402

from spark_audit import aggregates as W  # noqa: E402
from spark_audit import incremental as I  # noqa: E402
from spark_audit import keys as K  # noqa: E402
from spark_audit.findings import AuditResult  # noqa: E402
from spark_audit.scope import AuditConfig, AuditData  # noqa: E402
from spark_audit.session import build_session  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--work", default="/tmp/mqbridge-prof-incremental")
    parser.add_argument("--long-running", action="store_true", help="the --every mode's JVM options (C2)")
    parser.add_argument("--pregenerate", action="store_true",
                        help="generate every batch before the first run (else each just before its run, in the same "
                             "JVM: the generator's own code generation and JIT then fall into the measured runs)")
    args = parser.parse_args()
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    spark = build_session("local[2]", "mqbridge-prof-incremental", full_jit=args.long_running)
    jvm = spark.sparkContext._jvm
    B.JVM_PID.append(int(jvm.java.lang.ProcessHandle.current().pid()))
    compile_time = jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    jit = jvm.java.lang.management.ManagementFactory.getCompilationMXBean()
    logs = work / "logs"
    logs.mkdir()
    B.write_jsonl(B.synthetic(spark, args.rows), str(work / "gen"), files=2)
    for f in (work / "gen").glob("part-*"):
        f.rename(logs / f.name)
    def generate(k: int) -> str:
        new_dir = str(work / f"new-{k}")
        B.write_jsonl(B.synthetic(spark, 100_000, start_us=B.T0_US + B.DAY_US + (6 + k) * 600_000_000,
                                  span_us=600_000_000, first_id=10 * args.rows * (k + 1)), new_dir, files=1)
        return new_dir

    ready = [generate(k) for k in range(args.runs)] if args.pregenerate else []
    config = AuditConfig(grace_seconds=300)
    parquet, ckpt = str(work / "parquet"), str(work / "ckpt")
    t, c = time.perf_counter(), B.jvm_cpu_seconds()
    I.run_incremental(spark, str(logs), parquet, ckpt, config)[1].cleanup()
    print(f"first run: {time.perf_counter() - t:.2f} s wall, {B.jvm_cpu_seconds() - c:.2f} s CPU", flush=True)

    at_audit: dict[str, float] = {}
    captured: dict[str, AuditData] = {}
    audit_new, run_audit = I.audit_new, I.run_audit

    def timed_audit_new(*a: Any, **kw: Any) -> AuditResult:
        at_audit["cpu"] = B.jvm_cpu_seconds()
        return audit_new(*a, **kw)

    def capturing_run_audit(data: AuditData) -> AuditResult:
        captured["data"] = data
        return run_audit(data)

    I.audit_new, I.run_audit = timed_audit_new, capturing_run_audit
    for k in range(args.runs):
        new_dir = ready[k] if ready else generate(k)
        for part in Path(new_dir).glob("part-*.json"):
            part.rename(logs / (f"new-{k}-" + part.name))
        load = os.getloadavg()[0]
        compiled, jit_ms, cpu, wall = compile_time.getCount(), jit.getTotalCompilationTime(), \
            B.jvm_cpu_seconds(), time.perf_counter()
        phases: dict[str, float] = {}
        new, res = I.run_incremental(spark, str(logs), parquet, ckpt, config, phases)
        print(json.dumps({
            "run": k + 1, "wall": round(time.perf_counter() - wall, 2), "cpu": round(B.jvm_cpu_seconds() - cpu, 2),
            "stream_wall": round(phases["read"], 2), "audit_wall": round(phases["audit"], 2),
            "stream_cpu": round(at_audit["cpu"] - cpu, 2), "audit_cpu": round(B.jvm_cpu_seconds() - at_audit["cpu"], 2),
            "janino_compiles": compile_time.getCount() - compiled, "jit_ms": jit.getTotalCompilationTime() - jit_ms,
            "load": round(load, 2), "read": new.rows_read, "in_window": res.data.rows_in_window,
            "counts": res.counts}), flush=True)
        res.cleanup()
    if os.environ.get("PARTS"):
        data = captured["data"]

        def per_key() -> None:
            records = K.flagged_records(data, K.flag_hashed_keys(data))
            K.key_problems(data, records).collect()
            K.duplicates(data, records).collect()
            records.unpersist()

        parts: dict[str, Callable[[], object]] = {
            "count": lambda: data.frame.count(), "per_key": per_key,
            "window_aggregates": lambda: W.window_aggregates(data).collect(),
            "run_audit": lambda: run_audit(data).cleanup()}
        for name, fn in parts.items():
            for _ in range(3):
                c, t = B.jvm_cpu_seconds(), time.perf_counter()
                fn()
                print(f"part {name}: {time.perf_counter() - t:.2f} s wall, {B.jvm_cpu_seconds() - c:.2f} s CPU",
                      flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
