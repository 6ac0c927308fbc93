"""Rollups built beside the `--every` loop's runs: a thread with a session of its own on the same SparkContext
(its own SQL settings), whose jobs run in a scheduler pool of their own (``POOL``; the `--every` session's FAIR
scheduling, spark_audit/pools.xml, gives the runs' jobs both task slots whenever they have tasks), in small
tasks (``MAX_PARTITION_BYTES``) so that a slot comes free soon. A run's verdict then does not wait for the
rollups a busy spell deferred (bench/HISTORY.md: the catch-up tick 4.8-5.9 s instead of 6.4-7.0 s). Only a
speed-up for later full audits: a failed build is said and tried again later; several writers of one log's
rollups are safe (spark_audit/rollup.py, the manifest's lock).
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from pyspark.sql import SparkSession

from spark_audit.rollup import count_files

POOL = "mqbridge-rollups"   # as named in pools.xml
MAX_PARTITION_BYTES = "4m"  # Spark's default 128m made tasks of seconds: the runs' jobs waited for them


class RollupsBeside:
    """At most one build at a time; ``collect`` says how the last one ended, once."""

    def __init__(self, session: SparkSession, build: Callable[[SparkSession], tuple[int, int]],
                 failure_text: Callable[[BaseException], str]) -> None:
        """build: store the rollups with the session it is given; (files rolled up, files still without).
        failure_text: a failed build's one line (the command's own, spark_audit.run.failure_text)."""
        self._parent = session
        self._failure_text = failure_text
        self._session: SparkSession | None = None   # made at the first build
        self._build = build
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mqb-rollups")
        self._running: Future[tuple[int, int, float]] | None = None

    @property
    def busy(self) -> bool:
        return self._running is not None and not self._running.done()

    def start(self) -> bool:
        """Start a build unless one runs; whether one was started."""
        if self._running is not None:
            if not self._running.done():
                return False
            self.collect()
        self._running = self._pool.submit(self._run)
        return True

    def _run(self) -> tuple[int, int, float]:
        started = time.perf_counter()
        if self._session is None:
            self._session = self._parent.newSession()
            self._session.conf.set("spark.sql.files.maxPartitionBytes", MAX_PARTITION_BYTES)
        self._session.sparkContext.setLocalProperty("spark.scheduler.pool", POOL)
        built, left = self._build(self._session)
        return built, left, time.perf_counter() - started

    def collect(self) -> None:
        """Say how a finished build ended (nothing while it runs, or when there is none)."""
        done = self._running
        if done is None or not done.done():
            return
        self._running = None
        exc = done.exception()
        if exc is not None:
            print(f"audit: rollups not stored: {self._failure_text(exc)}", file=sys.stderr, flush=True)
            return
        built, left, seconds = done.result()
        if built:
            print(f"audit: rollups of {count_files(built)} stored beside the runs ({seconds:.1f} s; {left} still "
                  "without one)", flush=True)

    def wait(self) -> None:
        """Wait for a running build and say how it ended."""
        if self._running is not None:
            self._running.exception()   # (waits)
            self.collect()

    def close(self, wait: bool = True) -> None:
        """Wait for a running build (wait), or leave it to end with the session (the loop was interrupted:
        stopping the session cancels its jobs; a rollup build cut short leaves nothing wrong behind)."""
        if wait:
            self.wait()
        self._pool.shutdown(wait=wait)
