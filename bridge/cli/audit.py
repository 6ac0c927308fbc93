"""`mqbridge audit`: runs the Spark audit of conversion logs (spark_audit is imported only when run)."""
from __future__ import annotations

import argparse
import sys

from spark_audit.options import add_arguments

EXIT_NO_SPARK = 3


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "audit",
        help="audit conversion logs with PySpark (loss, duplicates, failures, coercions, latency)",
        description="Audit conversion logs. Exit 0: clean; 1: a loss or a suspicious duplicate found (also "
        "when some input was damaged); 2: could not audit (unusable arguments, a damaged or unreadable input "
        "file with no finding in the rest, or a failed run); 3: PySpark is not installed.",
    )
    add_arguments(parser)
    parser.set_defaults(func=run_audit)


def run_audit(args: argparse.Namespace) -> int:
    try:
        import pyspark  # noqa: F401
    except ModuleNotFoundError:
        print("mqbridge audit needs PySpark: pip install 'mqbridge[spark]' (and Java 17+)", file=sys.stderr)
        return EXIT_NO_SPARK
    from spark_audit.run import run

    return run(args)
