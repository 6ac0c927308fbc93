"""Where the one-shot `mqbridge audit LOGS` command's time goes: its steps in one process (session start with
the read-ahead beside it (spark_audit.read_ahead; in older trees the sidecar check), ingest, load, audit,
outputs), wall seconds and the JVM's CPU seconds (from /proc/<pid>/stat) per step. Runs on any tree
(PYTHONPATH=<tree>); a tree without spark_audit.parquet_log checks sidecars inside its ingest.

  PYTHONPATH=<tree> .venv/bin/python bench/audit_command_phases.py /tmp/bn1/logs-sidecars /tmp/phases-out
"""
from __future__ import annotations

import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def main() -> int:
    started = time.perf_counter()
    from spark_audit.audit import ingest, load, run_audit
    from spark_audit.ingest import expand_paths
    from spark_audit.report import build_summary, write_outputs
    from spark_audit.scope import AuditConfig
    from spark_audit.session import build_session

    try:
        from spark_audit.read_ahead import read_ahead
    except ImportError:  # a tree before the read-ahead
        read_ahead = None
    try:
        from spark_audit.parquet_log import precheck
    except ImportError:  # a tree before the sidecars were read in place
        precheck = None
    logs, out = sys.argv[1], sys.argv[2]
    shutil.rmtree(out, ignore_errors=True)
    paths = expand_paths([logs])
    tick = os.sysconf("SC_CLK_TCK")
    marks: list[tuple[str, float, float]] = []
    begin = time.perf_counter()
    parquet = os.path.join(out, "parquet")
    if read_ahead is not None:
        checked = ThreadPoolExecutor(1).submit(read_ahead, paths, parquet)
    else:
        checked = ThreadPoolExecutor(1).submit(precheck, paths) if precheck is not None else None
    spark = build_session(None)

    def mark(name: str) -> None:
        fields = open(f"/proc/{spark.sparkContext._gateway.proc.pid}/stat").read().rsplit(")", 1)[1].split()
        marks.append((name, time.perf_counter(), (int(fields[11]) + int(fields[12])) / tick))

    mark("session")
    extra: dict[str, Any] = {}
    if checked is not None:
        extra = {"ahead" if read_ahead is not None else "checked": checked.result()}
    ingested = ingest(spark, paths, parquet, rollups=False, compact=False, **extra)
    mark("ingest")
    try:
        data = load(spark, parquet, AuditConfig(), newest=ingested.max_time)
    except TypeError:  # a tree whose load finds the newest row itself
        data = load(spark, parquet, AuditConfig())
    mark("load")
    result = run_audit(data)
    mark("audit")
    summary = build_summary(result, ingested)
    write_outputs(result, summary, out, parquet=False)
    mark("outputs")
    parts, last_t, last_cpu = [], begin, 0.0
    for name, t, cpu in marks:
        parts.append(f"{name} {t - last_t:.2f} s ({cpu - last_cpu:.1f} s JVM CPU)")
        last_t, last_cpu = t, cpu
    print("; ".join(parts), f"| whole {marks[-1][1] - started:.2f} s, load {os.getloadavg()[0]:.2f}, "
          f"losses {summary['verdict']['losses']}, sidecars {ingested.sidecar_files}", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
