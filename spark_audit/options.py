"""The audit's command-line arguments, shared by `python -m spark_audit` and `mqbridge audit`."""
from __future__ import annotations

import argparse
from datetime import UTC, datetime

DEFAULT_GRACE_SECONDS = 300.0
DEFAULT_OUT = "audit-out"


def parse_time(text: str) -> datetime:
    """An ISO 8601 time; without an offset it is taken as UTC."""
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return value


def positive(text: str) -> float:
    value = non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be >= 1")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the audit's arguments to a parser."""
    parser.add_argument("logs", nargs="*", metavar="LOGS",
                        help="conversion log files (JSON Lines) or directories of them, local or URIs (hdfs://, "
                        "s3a://: one-shot only); none with --parquet DIR: audit that Parquet log as it is (nothing "
                        "ingested)")
    parser.add_argument("--since", type=parse_time, help="audit records at or after this time (ISO 8601)")
    parser.add_argument("--until", type=parse_time, help="audit records before this time (ISO 8601)")
    parser.add_argument("--master", default=None,
                        help="Spark master URL (default: spark-submit's --master, else local[2])")
    parser.add_argument("--out", default=DEFAULT_OUT,
                        help=f"directory (or URI) for summary.json, report.html, tables/ (default: {DEFAULT_OUT})")
    parser.add_argument("--grace", type=non_negative, default=DEFAULT_GRACE_SECONDS, metavar="SECONDS",
                        help="an ingress with no egress after this long is a loss (default: 300)")
    parser.add_argument("--parquet", metavar="DIR",
                        help="the compacted Parquet log, a directory or URI (default: OUT/parquet)")
    parser.add_argument("--incremental", action="store_true",
                        help="audit only the complete lines not read before, of new and growing files "
                        "(one LOGS directory; checkpoint in OUT)")
    parser.add_argument("--every", type=positive, metavar="SECONDS",
                        help="keep running: an incremental run (implies --incremental) every SECONDS in one "
                        "Spark session, started with JVM options for a long-lived process")
    parser.add_argument("--max-runs", type=positive_int, metavar="N",
                        help="with --every: stop after N runs (default: run until stopped)")
    parser.add_argument("--top", type=int, default=10, metavar="N", help="top offenders to list (default 10)")
    parser.add_argument("--no-parquet-tables", dest="parquet_tables", action="store_false",
                        help="skip writing one Parquet table per finding")


def build_parser(prog: str = "python -m spark_audit") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Audit mqbridge conversion logs: losses, duplicates, failures, coercions, latency. "
        "Exit 0: clean; 1: a loss or a suspicious duplicate found (also when some input was damaged); "
        "2: could not audit (unusable arguments, a damaged or unreadable input file with no finding in the "
        "rest, or a failed run).",
    )
    add_arguments(parser)
    return parser
