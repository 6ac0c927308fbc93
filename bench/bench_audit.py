"""Benchmark of spark_audit: synthetic logs, ingest (JSONL -> Parquet), full and incremental audit."""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from mappings.convlog_schema import FIELD_NAMES, SCHEMA_VERSION  # noqa: E402
from spark_audit.audit import AuditConfig, load, run_audit  # noqa: E402
from spark_audit.incremental import run_incremental  # noqa: E402
from spark_audit.ingest import expand_paths  # noqa: E402
from spark_audit.report import build_summary, write_outputs  # noqa: E402
from spark_audit.session import build_session  # noqa: E402

try:
    from spark_audit.audit import ingest
except ImportError:  # an older tree (ab_incremental.py --tree), whose ingest.ingest stored the rollups
    from spark_audit.ingest import ingest  # type: ignore[attr-defined, no-redef]

T0_US = 1_772_359_200_000_000  # 2026-03-01T10:00:00Z
DAY_US = 86_400_000_000
ROUTES = 20
PROTOCOLS = ("mqtt", "mq", "jms")
TYPES = ("publish", "MQSTR", "TextMessage")


def messages(spark: SparkSession, n_msgs: int, start_us: int, span_us: int, first_id: int = 0) -> DataFrame:
    """One row per synthetic message with everything its ingress/egress records derive from."""
    i = F.col("id")
    r = (i % ROUTES).cast("int")
    src = (r % 3).cast("int")
    tgt = ((r + 1) % 3).cast("int")
    return spark.range(first_id, first_id + n_msgs).select(
        i,
        F.concat(F.lit("k"), i.cast("string")).alias("message_key"),
        F.concat(F.lit("route-"), r.cast("string")).alias("route"),
        F.element_at(F.array(*map(F.lit, PROTOCOLS)), src + 1).alias("source_protocol"),
        F.element_at(F.array(*map(F.lit, PROTOCOLS)), tgt + 1).alias("target_protocol"),
        F.element_at(F.array(*map(F.lit, TYPES)), src + 1).alias("source_type"),
        F.element_at(F.array(*map(F.lit, TYPES)), tgt + 1).alias("target_type"),
        F.when(i % 50 == 0, 2).otherwise(1).cast("int").alias("qos"),
        (F.lit(start_us) + (i - first_id) * F.lit(span_us // max(n_msgs, 1))).alias("t_us"),
        ((i * 7919) % 60000 + 5).alias("size"),
        ((i * 104729) % 40000 + 300).alias("latency"),
        F.concat(F.lit("client-"), (i % 1000).cast("string")).alias("client_id"),
        F.concat(F.lit("dest/"), (i % 200).cast("string")).alias("destination"),
    )


def record(m: DataFrame, direction: str, *, status: F.Column, reason: F.Column, findings: F.Column,
           latency: F.Column, redelivery: F.Column, dt_us: F.Column) -> DataFrame:
    egress = direction == "egress"
    return m.select(
        F.lit(SCHEMA_VERSION).alias("schema_version"),
        F.timestamp_micros(F.col("t_us") + dt_us).alias("event_time"),
        F.lit("gw-bench").alias("gateway_id"),
        "message_key", "route", F.lit(direction).alias("direction"), "source_protocol", "target_protocol",
        "source_type", (F.col("target_type") if egress else F.lit(None).cast("string")).alias("target_type"),
        "qos", F.lit(None).cast("boolean").alias("persistent"), F.lit(None).cast("boolean").alias("retained"),
        F.lit(None).cast("int").alias("priority"),
        F.col("size").alias("source_size"),
        (F.col("size") if egress else F.lit(None).cast("long")).alias("target_size"),
        status.alias("status"), reason.alias("reason"), findings.alias("findings"),
        latency.cast("long").alias("latency_us"), "client_id", "destination",
        redelivery.cast("int").alias("redelivery_count"),
    ).select(*FIELD_NAMES)


def synthetic(spark: SparkSession, n_rows: int, start_us: int = T0_US, span_us: int = DAY_US,
              first_id: int = 0) -> DataFrame:
    """About n_rows records: ingress + egress per message, with known rates of trouble.

    Per message id: 1/1000 lost (no egress), 1/100 ingress failed, 1/500 egress backout,
    1/1000 allowed redelivery, 1/5000 suspicious duplicate, 1/20 with a coerced property.
    """
    m = messages(spark, n_rows // 2, start_us, span_us, first_id)
    i = F.col("id")
    none = F.lit(None).cast("string")
    empty = F.array().cast("array<struct<change:string,name:string,detail:string>>")
    ingress_failed = i % 100 == 1
    ing = record(m, "ingress", status=F.when(ingress_failed, "failed").otherwise("ok"),
                 reason=F.when(ingress_failed, "payload is not valid UTF-8").otherwise(none),
                 findings=empty, latency=F.lit(None), redelivery=F.lit(0), dt_us=F.lit(0))
    eg_m = m.where(~ingress_failed & (i % 1000 != 7))
    backout = i % 500 == 3
    findings = F.when(
        i % 20 == 0,
        F.array(F.struct(F.lit("coerced").alias("change"),
                         F.concat(F.lit("prop"), (i % 5).cast("string")).alias("name"),
                         F.lit("i8 -> String").alias("detail"))),
    ).otherwise(empty)
    eg = record(eg_m, "egress", status=F.when(backout, "backout").otherwise("ok"),
                reason=F.when(backout, "backout threshold 3 exceeded").otherwise(none), findings=findings,
                latency=F.when(~backout, F.col("latency")), redelivery=F.lit(0), dt_us=F.col("latency"))
    dup_m = eg_m.where((i % 1000 == 5) | (i % 5000 == 9))
    dup = record(dup_m, "egress", status=F.lit("ok"), reason=none, findings=empty,
                 latency=F.col("latency") + 1_000_000, redelivery=F.when(i % 1000 == 5, 1).otherwise(0),
                 dt_us=F.col("latency") + 1_000_000)
    return ing.unionByName(eg).unionByName(dup)


def write_jsonl(df: DataFrame, directory: str, files: int = 4) -> int:
    (df.repartition(files).write.mode("overwrite").option("ignoreNullFields", "false")
     .option("timestampFormat", "yyyy-MM-dd'T'HH:mm:ss.SSSSSSX").json(directory))  # as the gateway writes
    return sum(1 for _ in Path(directory).glob("part-*"))


JVM_PID: list[int] = []


def jvm_cpu_seconds() -> float:
    """User + system CPU time of the driver JVM so far (local mode: all Spark work runs there)."""
    if not JVM_PID:
        return 0.0
    fields = Path(f"/proc/{JVM_PID[0]}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(label: str, results: dict[str, float], fn, *args, **kwargs):
    """Run fn; record wall seconds and the JVM's CPU seconds (robust when other work shares the CPUs)."""
    t, c = time.perf_counter(), jvm_cpu_seconds()
    out = fn(*args, **kwargs)
    results[label] = round(time.perf_counter() - t, 2)
    results[label + "_jvm_cpu"] = round(jvm_cpu_seconds() - c, 2)
    print(f"{label}: {results[label]:.2f} s wall, {results[label + '_jvm_cpu']:.2f} s JVM CPU", flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--incremental-rows", type=int, default=100_000)
    parser.add_argument("--work", default="/tmp/mqbridge-bench-audit")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--repeat", type=int, default=2, help="full audits to time (first is cold)")
    parser.add_argument("--skip-incremental", action="store_true")
    parser.add_argument("--incremental-repeat", type=int, default=2,
                        help="batches of new rows to time (each a new file after the previous one)")
    parser.add_argument("--audit-only", action="store_true",
                        help="a fresh session that only runs the full audits, on the Parquet log an earlier "
                        "run left in --work (the cold first audit, nothing else run in the JVM before)")
    parser.add_argument("--long-running", action="store_true",
                        help="the session's JVM options of the long-running mode (--every: full tiered JIT)")
    args = parser.parse_args()
    work = Path(args.work)
    logs, parquet, out = work / "logs", str(work / "parquet"), str(work / "out")
    if args.audit_only and not Path(parquet).is_dir():
        parser.error(f"--audit-only needs the Parquet log of an earlier run in {parquet}")
    if not args.audit_only:
        shutil.rmtree(work, ignore_errors=True)
    results: dict[str, float] = {}

    t = time.perf_counter()
    spark = build_session(args.master, "mqbridge-bench-audit", full_jit=args.long_running)
    results["session_start"] = round(time.perf_counter() - t, 2)
    JVM_PID.append(int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()))
    print(f"session_start: {results['session_start']:.2f} s", flush=True)
    if args.audit_only:
        for n in range(args.repeat):
            timed(f"full_audit_{n + 1}", results, lambda: run_audit(
                load(spark, parquet, AuditConfig(grace_seconds=300))).cleanup())
        print(json.dumps({"audit_only": True, "master": args.master, "results": results}))
        spark.stop()
        return 0
    timed("generate_jsonl", results, write_jsonl, synthetic(spark, args.rows), str(logs))
    ingested = timed("ingest_jsonl_to_parquet", results, ingest, spark, expand_paths([logs]), parquet)
    print(f"rows read {ingested.rows_read}, valid {ingested.valid}, bad {ingested.bad}")
    summary = {}
    for n in range(args.repeat):
        def full_audit():
            data = load(spark, parquet, AuditConfig(grace_seconds=300))
            return run_audit(data)
        result = timed(f"full_audit_{n + 1}", results, full_audit)
        summary = build_summary(result, ingested)
        timed(f"write_outputs_{n + 1}", results, write_outputs, result, summary, out)
        result.cleanup()
    if summary:
        print(json.dumps(summary["verdict"]))

    if args.skip_incremental:
        print(json.dumps({"rows": args.rows, "results": results}))
        return 0
    # Incremental: a checkpointed stream over a directory that already holds the big log, then new rows.
    inc_logs, inc_parquet, ckpt = work / "inc-logs", str(work / "inc-parquet"), str(work / "ckpt")
    shutil.copytree(logs, inc_logs)
    config = AuditConfig(grace_seconds=300)
    first, res = timed("incremental_first_run_all", results, run_incremental, spark, str(inc_logs),
                       inc_parquet, ckpt, config)
    res.cleanup()
    for k in range(args.incremental_repeat):  # each batch follows the previous one in time
        new_dir = str(work / f"new-{k}")
        write_jsonl(synthetic(spark, args.incremental_rows, start_us=T0_US + DAY_US + (6 + k) * 600_000_000,
                              span_us=600_000_000, first_id=10 * args.rows * (k + 1)), new_dir, files=1)
        for part in Path(new_dir).glob("part-*.json"):
            part.rename(inc_logs / (f"new-{k}-" + part.name))
        label = f"incremental_new_rows_{k + 1}"
        phases: dict[str, float] = {}
        new, res = timed(label, results, run_incremental, spark, str(inc_logs), inc_parquet, ckpt, config,
                         phases)
        for phase, seconds in phases.items():
            results[f"{label}_{phase}"] = round(seconds, 2)
        print(f"{label}: stream {phases['stream']:.2f} s + audit {phases['audit']:.2f} s wall; read "
              f"{new.rows_read} rows, audited {res.data.rows_in_window} in window, {res.counts}", flush=True)
        res.cleanup()
    print(json.dumps({"rows": args.rows, "master": args.master, "cpus": os.cpu_count(),
                      "long_running": args.long_running,
                      "python": platform.python_version(), "results": results}))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
