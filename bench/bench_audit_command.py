"""The whole `mqbridge audit LOGS` command on a JSON Lines log, beside DuckDB on the same files.

The command as a user runs it (`python -m bridge audit LOGS --out OUT`: the mqbridge entry point, its findings'
Parquet tables written); before session 29 this ran `python -m spark_audit ... --no-parquet-tables`, which left
out the tables and the mqbridge command's own start (about 2.5 s of the command then).

Each round runs, one after the other (interleaved, order rotated): the audit command of this tree (and of
other trees given with --code NAME=DIR), each a fresh process with a fresh JVM, and DuckDB reading the same
files and running the loss query (an ok ingress with no egress for its key and route). Wall time of the
whole process, the load average before each run, and the verdict line each printed.

With --sidecars DIR, DIR gets the log files (hard links) and the Parquet sidecar of each, written by the
gateway's own sidecar code (bridge/convlog_parquet.write_sidecar, timed: CPU seconds per 1M records), and
two more runners join the rounds: the audit command on DIR ("mqbridge+sidecars"), DuckDB on the sidecars.

  .venv/bin/python bench/bench_audit.py --rows 1000000 --repeat 1 --skip-incremental --work /tmp/bn1
  .venv/bin/python bench/bench_audit_command.py /tmp/bn1/logs --rounds 3 [--code base=/path/to/tree]
      [--sidecars /tmp/bn1/logs-sidecars]

DuckDB: `pip install duckdb` (not a dependency of mqbridge).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DUCKDB_LOSSES = """
WITH r AS (SELECT message_key, route, direction, status FROM read_json({files}, format='newline_delimited',
           columns={{message_key: 'VARCHAR', route: 'VARCHAR', direction: 'VARCHAR', status: 'VARCHAR'}}))
SELECT count(*) FROM (SELECT message_key, route FROM r GROUP BY message_key, route
  HAVING bool_or(direction = 'ingress' AND status = 'ok') AND NOT bool_or(direction = 'egress'))
"""
DUCKDB_SCRIPT = """
import duckdb, sys, json
files = json.loads(sys.argv[1])
print("losses:", duckdb.sql({query!r}.format(files=repr(files))).fetchall()[0][0])
"""


def log_files(logs: str) -> list[str]:
    return sorted(str(p) for p in Path(logs).rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl")
                  and not p.name.startswith((".", "_")))


def write_sidecars(files: list[str], directory: Path) -> dict[str, float]:
    """The files hard-linked into directory, each with its sidecar; CPU and wall seconds of the writes."""
    sys.path.insert(0, str(ROOT))
    import pyarrow.parquet as pq

    from bridge.convlog_parquet import write_sidecar

    directory.mkdir(parents=True, exist_ok=True)
    cpu = wall = 0.0
    rows = 0
    for f in files:
        target = directory / Path(f).name
        if not target.exists():
            os.link(f, target)
        before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        side = write_sidecar(target)
        after = resource.getrusage(resource.RUSAGE_SELF)
        wall += time.perf_counter() - start
        cpu += after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        rows += pq.read_metadata(side).num_rows
    result = {"rows": rows, "cpu_s": round(cpu, 2), "wall_s": round(wall, 2),
              "cpu_s_per_1m": round(cpu * 1_000_000 / max(rows, 1), 2)}
    print(f"sidecars: {rows} rows, {cpu:.2f} s CPU ({result['cpu_s_per_1m']} s per 1M records), "
          f"{wall:.2f} s wall", flush=True)
    return result


DUCKDB_PARQUET_LOSSES = """
WITH r AS (SELECT message_key, route, direction, status FROM read_parquet({files}))
SELECT count(*) FROM (SELECT message_key, route FROM r GROUP BY message_key, route
  HAVING bool_or(direction = 'ingress' AND status = 'ok') AND NOT bool_or(direction = 'egress'))
"""


def timed(argv: list[str], env: dict[str, str], cwd: Path | None = None) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False, cwd=cwd)
    wall = time.perf_counter() - start
    lines = [line for line in done.stdout.splitlines() if line.startswith("losses:")]
    if done.returncode not in (0, 1) or not lines:
        raise SystemExit(f"{argv[:3]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return wall, lines[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("logs")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--code", action="append", default=[], help="NAME=DIR: another tree's audit beside")
    parser.add_argument("--sidecars", metavar="DIR", help="also audit LOGS with the gateway's Parquet sidecars")
    parser.add_argument("--no-parquet-tables", action="store_true",
                        help="pass it on (the figures before session 29 were taken so: without the tables)")
    parser.add_argument("--output")
    args = parser.parse_args()
    trees = {"mqbridge": ROOT, **{n: Path(d) for n, d in (c.split("=", 1) for c in args.code)}}
    files = log_files(args.logs)
    size = sum(os.path.getsize(f) for f in files)
    rows = sum(1 for f in files for _ in open(f, "rb"))
    print(f"{len(files)} files, {size / 2**20:.0f} MiB, {rows} lines", flush=True)
    runners = list(trees) + ["duckdb"]
    sidecar_cost = None
    if args.sidecars:
        sidecar_cost = write_sidecars(files, Path(args.sidecars))
        runners += ["mqbridge+sidecars", "duckdb-parquet"]
        side_files = sorted(str(Path(args.sidecars) / (Path(f).name + ".parquet")) for f in files)
    results: dict[str, list[dict[str, object]]] = {name: [] for name in runners}
    for r in range(args.rounds):
        order = runners[r % len(runners):] + runners[:r % len(runners)]
        for name in order:
            load = os.getloadavg()[0]
            if name.startswith("duckdb"):
                query, given = (DUCKDB_LOSSES, files) if name == "duckdb" else (DUCKDB_PARQUET_LOSSES, side_files)
                argv = [sys.executable, "-c", DUCKDB_SCRIPT.format(query=query), json.dumps(given)]
                wall, verdict = timed(argv, dict(os.environ))
            else:
                out = tempfile.mkdtemp(prefix="mqb-audit-cmd-")
                logs = args.sidecars if name == "mqbridge+sidecars" else args.logs
                tree = Path(trees.get(name, ROOT))
                env = {**os.environ, "PYTHONPATH": str(tree)}
                # run in the tree: `python -m` puts the working directory first on sys.path, before
                # PYTHONPATH (run from this repository, every tree's runs ran this tree's code before)
                argv = [sys.executable, "-m", "bridge", "audit", os.path.abspath(logs), "--out", out,
                        *(["--no-parquet-tables"] if args.no_parquet_tables else [])]
                try:
                    wall, verdict = timed(argv, env, cwd=tree)
                finally:
                    shutil.rmtree(out, ignore_errors=True)
            results[name].append({"wall_s": round(wall, 2), "load1": round(load, 2), "verdict": verdict})
            print(f"round {r + 1} {name}: {wall:.2f} s (load {load:.2f}) {verdict}", flush=True)
    summary = {name: sorted(x["wall_s"] for x in res) for name, res in results.items()}
    print(json.dumps({"files": len(files), "bytes": size, "lines": rows, "wall_s": summary,
                      "sidecars": sidecar_cost}))
    if args.output:
        Path(args.output).write_text(json.dumps({"files": len(files), "bytes": size, "lines": rows,
                                                 "sidecars": sidecar_cost, "runs": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
