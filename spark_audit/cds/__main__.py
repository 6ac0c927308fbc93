"""`python -m spark_audit.cds`: make the AppCDS archive (spark_audit.cds) once, at setup.

A small audit of a generated log runs in a JVM started with -XX:ArchiveClassesAtExit, which writes the
classes it loaded (Spark's, Hadoop's, Parquet's, ...) to the archive as it exits; later sessions map it
instead of reading those classes from the jars.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pyspark import SparkContext
from pyspark.sql import SparkSession

from mappings.convlog_schema import ConversionRecord
from mappings.report import Change, Finding
from spark_audit.cds import ARCHIVE_PREFIX, CREATE_ENV, archive_path
from spark_audit.options import build_parser
from spark_audit.run import run
from spark_audit.session import driver_java_options


def stop_jvm(timeout: float = 300.0) -> None:
    """Stop the session and let the driver JVM exit normally (it writes the archive as it exits)."""
    session = SparkSession.getActiveSession()
    if session is not None:
        session.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    gateway.shutdown()
    SparkContext._gateway = None
    SparkContext._jvm = None
    if proc is not None:
        proc.stdin.close()  # the gateway JVM exits on EOF of its stdin
        proc.wait(timeout)


def create(workload: Callable[[], None], java_options: str, force: bool = False) -> Path | None:
    """Run workload in a JVM that archives its classes at exit; install the archive when it is complete."""
    target = archive_path(java_options)
    if target is None:
        print("cds: no java or no Spark jars found; nothing to do", file=sys.stderr)
        return None
    if target.is_file() and not force:
        print(f"cds: archive up to date: {target}")
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.partial")
    os.environ[CREATE_ENV] = str(partial)
    try:
        workload()
        stop_jvm()
    finally:
        del os.environ[CREATE_ENV]
    if not partial.is_file() or partial.stat().st_size == 0:
        print("cds: the JVM wrote no archive", file=sys.stderr)
        return None
    os.replace(partial, target)
    for old in target.parent.glob(ARCHIVE_PREFIX + "*.jsa"):
        if old != target:
            old.unlink(missing_ok=True)
    print(f"cds: archive written: {target} ({target.stat().st_size // (1 << 20)} MiB)")
    return target


def write_training_log(path: Path, pairs: int = 200) -> None:
    """A small log that walks every code path of an audit: clean pairs, a loss, a duplicate, a failure,
    a coerced property, a bad line."""
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    lines = []
    for i in range(pairs):
        t, key = t0 + timedelta(seconds=30 * i), f"cds-{i}"
        common = {"gateway_id": "cds", "message_key": key, "route": f"route-{i % 3}", "source_protocol": "mqtt",
                  "target_protocol": "jms", "source_type": "publish", "qos": 1 + (i % 2), "source_size": 100 + i,
                  "client_id": f"client-{i % 5}", "destination": "orders/new"}
        lines.append(ConversionRecord(event_time=t, direction="ingress", status="ok", **common))
        if i % 50 == 7:
            continue  # a loss
        status = "failed" if i % 40 == 3 else "ok"
        findings = (Finding(Change.COERCED, "prop", "i8 -> String"),) if i % 20 == 0 else ()
        for copy in range(2 if i % 60 == 5 else 1):
            lines.append(ConversionRecord(
                event_time=t + timedelta(milliseconds=5 + copy), direction="egress", status=status,
                reason=None if status == "ok" else "refused", target_type="TextMessage",
                target_size=100 + i, latency_us=5000 + 17 * i, findings=findings, redelivery_count=copy,
                **common))
    path.write_text("".join(r.to_json_line() for r in lines) + "not json\n")


def training_run(incremental: bool = True) -> None:
    """Ingest, full audit with every output, and (``incremental``) two incremental runs, on a small
    generated log."""
    with tempfile.TemporaryDirectory(prefix="mqbridge-cds-") as tmp:
        logs = Path(tmp) / "logs"
        logs.mkdir()
        write_training_log(logs / "a.jsonl")
        parser = build_parser()
        run(parser.parse_args([str(logs), "--out", str(Path(tmp) / "full")]))
        for _ in range(2 if incremental else 0):
            run(parser.parse_args([str(logs), "--incremental", "--out", str(Path(tmp) / "inc")]))
            write_training_log(logs / "b.jsonl", pairs=20)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spark_audit.cds", description=__doc__)
    parser.add_argument("--force", action="store_true", help="create the archive even if it is up to date")
    parser.add_argument("--print-path", action="store_true", help="print where the archive is and exit")
    parser.add_argument("--one-shot-only", action="store_true",
                        help="train on a one-shot audit only (a shorter setup; --incremental runs then load "
                             "the classes the archive lacks from the jars)")
    args = parser.parse_args(argv)
    options = driver_java_options()
    if args.print_path:
        print(archive_path(options) or "")
        return 0
    workload = (lambda: training_run(incremental=False)) if args.one_shot_only else training_run
    return 0 if create(workload, options, force=args.force) else 1


if __name__ == "__main__":
    sys.exit(main())
