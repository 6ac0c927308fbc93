"""Entry point: `python -m spark_audit LOGS...` (also usable as a spark-submit script)."""
from __future__ import annotations

import sys

from spark_audit.options import build_parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)   # --help and argument errors work without pyspark
    from spark_audit.run import run

    return run(args)


if __name__ == "__main__":
    sys.exit(main())
