"""Builds the SparkSession: local[2] by default, loopback-only, UI off, quick JVM start."""
from __future__ import annotations

import os
import threading
from pathlib import Path

from pyspark.sql import SparkSession

from spark_audit.cds import cds_options

DEFAULT_MASTER = "local[2]"
POOLS_FILE = Path(__file__).with_name("pools.xml")
# Serial GC and C1-only JIT cut driver start-up time by ~15% for short audit jobs. C1-only sizes the code
# cache at 48 MB, which one ingest plus a few audits fill; the JIT then stops and everything after runs
# interpreted (measured: incremental runs 2x slower), hence the larger code cache.
DRIVER_JAVA_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
# Full tiered JIT (C2) for a long-lived session (--every), which runs the same code run after run: warm, C2
# parses JSON about 4x faster (1M rows: 7-8 s CPU against 29-44 s with C1 only; whole incremental runs of
# 100k rows 8.5-10.3 s CPU against 11.5-12.4 s). A one-shot audit stays on C1: even ingesting 1M rows, C2's
# compilation ate its gain (whole command 102-121 s against 111-116 s, interleaved, load 4-5).
FULL_JIT_JAVA_OPTIONS = "-XX:+UseSerialGC -XX:ReservedCodeCacheSize=240m"


def driver_java_options(full_jit: bool = False) -> str:
    """The driver JVM's options (MQB_SPARK_DRIVER_JAVA_OPTIONS overrides), without the CDS archive's."""
    default = FULL_JIT_JAVA_OPTIONS if full_jit else DRIVER_JAVA_OPTIONS
    return os.environ.get("MQB_SPARK_DRIVER_JAVA_OPTIONS", default)


def session_conf(master: str = DEFAULT_MASTER, full_jit: bool = False, pools: bool = False) -> dict[str, str]:
    """The Spark settings the audit runs with; loopback binding only for local masters. pools: FAIR scheduling
    with the pools of pools.xml (the `--every` session)."""
    java_options = driver_java_options(full_jit)
    conf = {
        "spark.ui.enabled": "false",
        "spark.driver.memory": os.environ.get("MQB_SPARK_DRIVER_MEMORY", "2g"),
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.sources.partitionOverwriteMode": "static",
        # Override for long jobs on big logs, where C2-compiled code pays back its warm-up.
        "spark.driver.extraJavaOptions": f"{java_options} {cds_options(java_options)}".strip(),
        # Compiled generated code is cached by its source text. At the default 100 entries (split into
        # segments that evict separately) one ingest and audit evicted each other's classes, so a
        # long-lived session compiled the same code again run after run.
        "spark.sql.codegen.cache.maxEntries": "1000",
        # Timestamps as INT64 microseconds, not the legacy INT96: a scan of the event times costs about half
        # (0.3 vs 0.5-0.7 s CPU per 1M rows measured; both read back as the same TimestampType).
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        # PySpark 4 records the Python call site of every DataFrame/Column call for error messages: about
        # five extra py4j round trips each, 7,000 of an incremental run's 11,000 (docs/conversion-log.md).
        "spark.python.sql.dataFrameDebugging.enabled": "false",
    }
    if pools:   # the --every session: rollups built beside the runs in a pool of their own (spark_audit/beside.py)
        conf["spark.scheduler.mode"] = "FAIR"
        conf["spark.scheduler.allocation.file"] = str(POOLS_FILE)
    if master.startswith("local"):
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    return conf


def resolve_master(master: str | None) -> str | None:
    """The master asked for; else None under spark-submit (its --master applies); else local[2]."""
    if master:
        return master
    return None if "PYSPARK_GATEWAY_PORT" in os.environ else DEFAULT_MASTER


def build_session(master: str | None = DEFAULT_MASTER, app_name: str = "mqbridge-audit",
                  full_jit: bool = False, pools: bool = False) -> SparkSession:
    """Create (or reuse) the SparkSession for an audit run (master None: see resolve_master).

    full_jit: the JVM options of a session that runs much of the same code (see FULL_JIT_JAVA_OPTIONS); pools:
    FAIR scheduling (see session_conf).
    """
    resolved = resolve_master(master)
    builder = SparkSession.builder.appName(app_name)
    if resolved is not None:
        builder = builder.master(resolved)
        if resolved.startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # before the JVM starts: no hostname lookup
    for key, value in session_conf(resolved or "", full_jit, pools).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def stop_accumulator_server(spark: SparkSession) -> None:
    """Stop PySpark's accumulator server now, in a thread: SparkSession.stop() at the end of a command otherwise
    waits for it, up to its 0.5 s poll (0.09-0.48 s measured). The audit runs no Python code on the executors
    (no UDF, no RDD), so nothing ever reports to it. For a session this process started and will stop."""
    server = getattr(spark.sparkContext, "_accumulatorServer", None)
    if server is not None:
        threading.Thread(target=server.shutdown, name="accumulator-server-stop", daemon=True).start()
