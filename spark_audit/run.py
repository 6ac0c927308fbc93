"""Runs one audit from parsed arguments: ingest, audit, write outputs, print a verdict, exit code."""
from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

from pyspark import SparkContext
from pyspark.sql import SparkSession

from spark_audit import fs
from spark_audit.aggregates import build_rollups
from spark_audit.audit import has_partitions, ingest, load, run_audit
from spark_audit.beside import RollupsBeside
from spark_audit.cds import missing_note
from spark_audit.charts import visible
from spark_audit.findings import AuditResult
from spark_audit.incremental import run_incremental
from spark_audit.increments import anything_new, checkpoint_lock
from spark_audit.ingest import IngestResult, expand_paths
from spark_audit.parquet_log import has_rows
from spark_audit.read_ahead import ReadAhead, read_ahead
from spark_audit.report import build_summary, write_outputs
from spark_audit.rollup import count_files, pending_rollups
from spark_audit.scope import AuditConfig
from spark_audit.session import build_session, driver_java_options, resolve_master, stop_accumulator_server

EXIT_USAGE = 2  # "could not audit": unusable arguments, damaged input (report.EXIT_NOT_AUDITED), a failed run


def config_from(args: argparse.Namespace) -> AuditConfig:
    return AuditConfig(since=args.since, until=args.until, grace_seconds=args.grace, top_n=args.top)


def verdict_text(summary: dict[str, Any], out_dir: str) -> str:
    """A short human-readable verdict for the terminal."""
    v, inp = summary["verdict"], summary["input"] or {}
    damaged = v["damaged_files"]
    verdict = "FAIL" if v["gate_failed"] else f"INCOMPLETE ({damaged} damaged input files)" if damaged else "PASS"
    lines = [
        f"audited {summary['records']['in_window']} records (as of {summary['window']['as_of']}); "
        f"bad input lines: {v['bad_input_lines']} {inp.get('problems', {}) or ''}".rstrip(),
        f"losses: {v['losses']}  unexpected egress: {v['unexpected_egress']}  "
        f"duplicates: {v['duplicates_suspicious']} suspicious, {v['duplicates_allowed']} allowed",
        f"failed: {v['failed']}  backout: {v['backout']}  dropped: {v['dropped']}",
        *loss_count_lines(summary),
        f"{verdict} — report: {fs.join(out_dir, 'report.html')}",
    ]
    return "\n".join(lines)


def loss_count_lines(summary: dict[str, Any], most: int = 5) -> list[str]:
    """Losses per route and per destination, the `most` largest of each (none without a loss)."""
    lines = []
    for name in ("route", "destination"):
        rows = summary["loss_counts"].get(f"by_{name}", [])
        if rows:
            shown = ", ".join(f"{'(none)' if r[name] is None else visible(str(r[name]))} {r['losses']}"
                              for r in rows[:most])
            more = f" (and {len(rows) - most} more)" if len(rows) > most else ""
            lines.append(f"losses by {name}: {shown}{more}")
    return lines


def run(args: argparse.Namespace, spark: SparkSession | None = None) -> int:
    """Run the audit; a session passed in (or already active) is reused and left running."""
    every = getattr(args, "every", None)
    remote = any(fs.is_remote(p) for p in [*args.logs, args.out, args.parquet])
    paths = [] if remote else expand_paths(args.logs)  # a remote listing needs the session (below)
    if args.since and args.until and args.since >= args.until:
        print("audit: --since must be before --until", file=sys.stderr)
        return EXIT_USAGE
    if remote and (args.incremental or every is not None):
        print("audit: --incremental and --every need local paths (LOGS, --out, --parquet); a URI "
              "(hdfs://, s3a://, file://) is audited one-shot (docs/audit.md, \"On a cluster\")", file=sys.stderr)
        return EXIT_USAGE
    if (args.incremental or every is not None) and (len(args.logs) != 1 or not Path(args.logs[0]).is_dir()):
        print("audit: --incremental and --every take exactly one LOGS directory", file=sys.stderr)
        return EXIT_USAGE
    if not args.logs and not args.parquet:
        print("audit: give LOGS, or --parquet DIR to audit a Parquet log as it is", file=sys.stderr)
        return EXIT_USAGE
    out_dir = args.out
    default_parquet = fs.join(out_dir, "parquet") if fs.is_remote(out_dir) else str(Path(out_dir) / "parquet")
    parquet_dir = args.parquet or default_parquet
    if not remote:
        found = checked(args, paths, parquet_dir, every)
        if found is not None:
            return found
    # Stop the session at the end only if this run started it (not when a caller or test owns one). A
    # SparkContext of this process, not the thread's active session: getActiveSession is per JVM thread,
    # and a caller's session seen from another thread would be stopped under it.
    own_session = spark is None and SparkContext._active_spark_context is None
    # A one-shot audit of local logs checks, stages and reads what it can without Spark while the JVM starts.
    ahead = (None if remote or not paths or args.incremental or every is not None
             else in_thread(lambda: read_ahead(paths, parquet_dir)))
    if own_session and resolve_master(args.master) is not None:   # (under spark-submit: its JVM, not ours)
        note = missing_note(driver_java_options(full_jit=every is not None))
        if note is not None:
            print(note, file=sys.stderr, flush=True)
    session = spark or build_session(args.master, full_jit=every is not None, pools=every is not None)
    if own_session:
        stop_accumulator_server(session)
    try:
        if remote:  # listed through Hadoop's FileSystem API, which needs the session
            try:
                paths = expand_paths(args.logs)
                found = checked(args, paths, parquet_dir, every)
            except Exception as e:  # noqa: BLE001 - e.g. no connector for the scheme: "could not audit"
                print(f"audit: could not audit: {failure_text(e)}", file=sys.stderr, flush=True)
                return EXIT_USAGE
            if found is not None:
                return found
        if every is not None:
            return follow(session, args, parquet_dir, every)
        if args.incremental:
            return guarded(lambda: incremental_once(session, args, parquet_dir))
        return guarded(lambda: full_audit(session, args, paths, parquet_dir,
                                          ahead.result() if ahead is not None else None))
    finally:
        if ahead is not None and ahead.exception() is None and ahead.result() is not None:
            ahead.result().close()   # (the ingest closed it, unless the session failed to start)
        if own_session:
            session.stop()


def checked(args: argparse.Namespace, paths: list[str], parquet_dir: str, every: float | None) -> int | None:
    """EXIT_USAGE with a message when there is nothing to audit; None when there is."""
    if args.logs and not paths and every is None:  # a long-running audit waits for the first files
        print(f"audit: no log files found in {' '.join(args.logs)}", file=sys.stderr)
        return EXIT_USAGE
    if not args.logs and not has_rows(parquet_dir, has_partitions(parquet_dir)):
        print(f"audit: no Parquet log (date=*/hour=* partitions or sidecars read in place) in {parquet_dir}",
              file=sys.stderr)
        return EXIT_USAGE
    return None


def in_thread(work: Callable[[], ReadAhead | None]) -> Future[ReadAhead | None]:
    """Run work in a thread of its own (its result: the Future's)."""
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        return pool.submit(work)
    finally:
        pool.shutdown(wait=False)


def full_audit(session: SparkSession, args: argparse.Namespace, paths: list[str], parquet_dir: str,
               ahead: ReadAhead | None = None) -> int:
    """Ingest the logs (if any) and audit the Parquet log.

    An ingest here writes no rollups and does not compact its files (a shuffle): the one audit that follows
    does not need either, and the whole command measured no slower without them (bench/HISTORY.md). An
    audit of a Parquet log as it is (no LOGS) stores the rollups of the files that have none after its
    verdict, for the audits after it. ahead: the ingest's work done without Spark (spark_audit.read_ahead).
    """
    if args.logs:
        ingested = ingest(session, paths, parquet_dir, rollups=False, compact=False, ahead=ahead)
        # the log is what this ingest wrote (or the sidecars it listed): its newest row is known
        data = load(session, parquet_dir, config_from(args), newest=ingested.max_time)
        return report(run_audit(data), ingested, args)
    code = report(run_audit(load(session, parquet_dir, config_from(args))), None, args)
    build_rollups(session, parquet_dir)
    return code


def failure_text(e: BaseException) -> str:
    """One line naming the failure; for a JVM error, the Java exception itself (py4j's own first line
    only says which proxy call failed, e.g. "An error occurred while calling o123.start")."""
    java = getattr(e, "java_exception", None)
    if java is not None:
        try:
            return str(java.toString()).strip().splitlines()[0]
        except Exception:  # noqa: BLE001 - the JVM may be gone; fall back to py4j's text
            pass
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0]}" if text else type(e).__name__


def guarded(audit: Callable[[], int]) -> int:
    """Run an audit; one that fails (a Spark or file-system error) says so on stderr and exits 2, never 1,
    which means "loss found"."""
    try:
        return audit()
    except Exception as e:  # noqa: BLE001 - any failure is "could not audit", with its message
        print(f"audit: could not audit: {failure_text(e)}", file=sys.stderr, flush=True)
        return EXIT_USAGE


def input_problems(ingested: IngestResult | None) -> None:
    """Damaged files and what was done about a file, on stderr (the report has them too)."""
    if ingested is None:
        return
    for path, problem in sorted(ingested.damaged.items()):
        print(f"audit: damaged input file {path}: {problem}", file=sys.stderr, flush=True)
    for path, note in sorted(ingested.notes.items()):
        print(f"audit: {path}: {note}", file=sys.stderr, flush=True)


def report(result: AuditResult, ingested: IngestResult | None, args: argparse.Namespace) -> int:
    """Write the outputs, print the verdict; the exit code."""
    input_problems(ingested)
    summary = build_summary(result, ingested)
    write_outputs(result, summary, args.out, parquet=args.parquet_tables)
    result.cleanup()
    print(verdict_text(summary, args.out), flush=True)
    return int(summary["verdict"]["exit_code"])


def incremental_once(session: SparkSession, args: argparse.Namespace, parquet_dir: str,
                     timings: dict[str, float] | None = None, rollups: bool = True) -> int:
    """One incremental run; after its verdict is out, the rollups of the files it wrote (unless ``rollups``
    is False: a later run builds them), so that a full audit of the Parquet log (--parquet DIR) reads them
    instead of their rows (spark_audit/rollup.py). ``timings`` gets each phase's wall seconds."""
    checkpoint = str(Path(args.out) / "checkpoint")
    phases: dict[str, float] = {}
    with checkpoint_lock(checkpoint):  # the outputs too: they are this run's
        ingested, result = run_incremental(session, args.logs[0], parquet_dir, checkpoint, config_from(args), phases)
        started = time.perf_counter()
        code = report(result, ingested, args)
    if timings is not None:
        timings.update(read=phases.get("read", 0.0), audit=phases.get("audit", 0.0),
                       outputs=time.perf_counter() - started)
    if rollups:
        roll_up(session, parquet_dir, timings)
    return code


def roll_up(session: SparkSession, parquet_dir: str, timings: dict[str, float] | None = None,
            most: int | None = None) -> tuple[int, int]:
    """The rollups of the log's files that have none (spark_audit/rollup.py), of the oldest ``most`` of them
    when given: how many files got one, and how many are still without."""
    started = time.perf_counter()
    built = left = 0
    if has_partitions(parquet_dir):
        pending = pending_rollups(parquet_dir)
        chosen = pending if most is None else sorted(pending, key=lambda f: f.stat().st_mtime_ns)[:most]
        built = build_rollups(session, parquet_dir, chosen) if chosen else 0
        left = len(pending) - len(chosen)
    if timings is not None:
        timings["rollups"] = time.perf_counter() - started
    return built, left


# --every: the rollups of a run's files are built at once when the next run is at least this far off (idle
# time); sooner, they are built beside the next runs (spark_audit/beside.py), so that a busy loop (new lines
# at every tick) does not make each run wait for the last one's rollups (docs/audit.md): after the JVM's first
# ROLLUP_WARM_RUNS runs with new lines (its slowest, C2 compiling: a build beside the second made it 0.7 s
# slower), a build of the oldest ROLLUP_BESIDE_FILES files whenever one lacks a rollup. A file at a time
# spreads the cost over the ticks: built 8 at a time, the tick that met the build took 4.5-5.0 s where the
# others took 2.1-2.9 s; now the first build adds ~0.6 s to its tick and the later ones little
# (bench/HISTORY.md, session 25). What a steady feed leaves waits for quiet ticks or the last run.
ROLLUP_IDLE_SECONDS = 5.0
ROLLUP_BESIDE_FILES = 1
ROLLUP_WARM_RUNS = 2
# Once nothing new has come for ROLLUP_IDLE_SECONDS, each tick that finds nothing new builds rollups a busy
# spell deferred, this many files at a time (the oldest first): lines arriving meanwhile wait for one slice at
# most. Sooner, a pause between batches would make the next batch wait (measured: ~1 s a tick).
ROLLUP_IDLE_SLICE = 2
IDLE_SAID_EVERY = 60.0   # --every at least this: every tick with nothing new says so (a sign of life)


def _anything_new(checkpoint: str, logs_dir: str) -> bool:
    """``anything_new``, True when it cannot tell (an unreadable ledger, say): the run then says what is wrong."""
    try:
        return anything_new(checkpoint, logs_dir)
    except Exception:  # noqa: BLE001 - the run reports it (guarded) and the loop goes on
        return True


def _roll_up_idle(session: SparkSession, parquet_dir: str, runs: int, most: int | None) -> bool:
    """A quiet tick's slice of the deferred rollups (``most`` files; None: all), said with its time; whether some
    are still to build."""
    timings: dict[str, float] = {}
    try:
        built, left = roll_up(session, parquet_dir, timings, most=most)
    except Exception as e:  # noqa: BLE001 - only a speed-up: said, and tried again at the next quiet tick
        print(f"audit: rollups not stored: {failure_text(e)}", file=sys.stderr, flush=True)
        return True
    if built:
        print(f"audit run {runs}: rollups of {count_files(built)} stored while idle ({timings['rollups']:.1f} s; "
              f"{left} still without one)", flush=True)
    return left > 0


def follow(session: SparkSession, args: argparse.Namespace, parquet_dir: str, every: float,
           sleep: Callable[[float], None] = time.sleep) -> int:
    """An incremental run every `every` seconds in this one session (a run that takes longer is followed
    at once); after --max-runs ticks, the last run's exit code (else until stopped).

    A tick that finds nothing new (no line unread, nothing staged or committed unaudited) starts no Spark
    job once a report exists: that report stands, and the tick says so (with ticks under a minute apart,
    only the first of a quiet spell)."""
    max_runs = getattr(args, "max_runs", None)
    checkpoint = str(Path(args.out) / "checkpoint")
    runs = 0
    code = 0
    idle_said = False
    deferred = False   # a busy run left rollups to build (quiet ticks build them)
    last_busy = 0.0    # when the last run with new lines ended
    audited = 0        # runs that read new lines
    beside = RollupsBeside(session, lambda own: roll_up(own, parquet_dir, most=ROLLUP_BESIDE_FILES),
                           failure_text)
    finished = False
    try:
        while True:
            started = time.monotonic()
            beside.collect()
            if runs and (Path(args.out) / "summary.json").exists() and not _anything_new(checkpoint, args.logs[0]):
                runs += 1
                if not idle_said or every >= IDLE_SAID_EVERY:   # a fast loop says it once per quiet spell
                    print(f"audit run {runs}: no new lines; the last report stands", flush=True)
                    idle_said = True
                last = max_runs is not None and runs >= max_runs   # (the last run leaves none to build)
                if last:
                    beside.wait()
                if deferred and not beside.busy and (last or time.monotonic() - last_busy >= ROLLUP_IDLE_SECONDS):
                    deferred = _roll_up_idle(session, parquet_dir, runs, None if last else ROLLUP_IDLE_SLICE)
            else:
                timings: dict[str, float] = {}
                code = guarded(partial(incremental_once, session, args, parquet_dir, timings, rollups=False))
                runs += 1   # (a failed run is reported; the next may succeed)
                audited += 1
                idle_said = False
                last = max_runs is not None and runs >= max_runs
                deferred = True
                if last or started + every - time.monotonic() >= ROLLUP_IDLE_SECONDS:
                    beside.wait()
                    try:   # only a speed-up for later full audits: a failure is said, and tried again later
                        roll_up(session, parquet_dir, timings)
                        deferred = False
                    except Exception as e:  # noqa: BLE001
                        print(f"audit: rollups not stored: {failure_text(e)}", file=sys.stderr, flush=True)
                elif not beside.busy and audited > ROLLUP_WARM_RUNS and pending_rollups(parquet_dir):
                    beside.start()   # the next runs go on meanwhile
                last_busy = time.monotonic()
                wait = max(0.0, started + every - time.monotonic())
                spent = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in timings.items())
                print(f"audit run {runs} exit {code}{f' ({spent})' if spent else ''}; next run in {wait:.0f} s",
                      flush=True)
            if max_runs is not None and runs >= max_runs:
                finished = True
                return code
            sleep(max(0.0, started + every - time.monotonic()))
    finally:
        beside.close(wait=finished)
