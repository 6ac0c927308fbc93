"""Entry point: `python -m spark_audit LOGS...` (also usable as a spark-submit script)."""
from __future__ import annotations

import sys

from spark_audit.options import build_parser
from spark_audit.run import run


def main(argv: list[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
