"""A local one-shot ingest's work that needs no JVM, done in a thread while the session starts
(spark_audit.run): the Parquet sidecars checked (parquet_log.precheck), the other files staged
(sources.prepare: gzip inflated, an unfinished last line left out) and each staged file of valid records read
by the checked reader and written as the Parquet log's files in a directory beside the log (one file per hour
for all of them: checked_read.HourFiles). Only the files the checked reader refuses are left for Spark to
parse; spark_audit.ingest does that and moves the written files in. On 2 cores the JVM's start keeps about
one busy, so the other reads meanwhile (bench/HISTORY.md).
"""
from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spark_audit import fs
from spark_audit.checked_read import HourFiles, Written, read_checked
from spark_audit.parquet_log import Checked, precheck
from spark_audit.sources import Staged, prepare


@dataclass(slots=True)
class ReadAhead:
    """What read_ahead did: the sidecars' check, the staging (origins, damaged files, notes), the files left
    for Spark to parse, and the checked reader's files (date=D/hour=H under ``written_dir``) with their counts.
    close() removes the staging and the written files that were not moved into the log."""

    sidecars: Checked
    staging: Path
    staged: Staged = field(default_factory=Staged)
    parse: list[str] = field(default_factory=list)
    written_dir: Path | None = None
    written: list[Written] = field(default_factory=list)

    def close(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)
        if self.written_dir is not None:
            shutil.rmtree(self.written_dir, ignore_errors=True)


def read_ahead(paths: list[str], parquet_dir: str) -> ReadAhead | None:
    """Check, stage and read what can be read without Spark; None when a path is a URI or the sidecars could
    not be checked here (no pyarrow): spark_audit.ingest then does it all with the session."""
    if fs.is_remote(parquet_dir) or any(map(fs.is_remote, paths)):
        return None
    sidecars = precheck(paths)
    if sidecars is None:
        return None
    beside = Path(parquet_dir).parent   # staging beside the log, never in it
    beside.mkdir(parents=True, exist_ok=True)
    ahead = ReadAhead(sidecars, Path(tempfile.mkdtemp(prefix=".mqb-audit-staging-", dir=beside)))
    try:
        used = sidecars[0].used
        ahead.staged = prepare([p for p in paths if p not in used], ahead.staging)
        with contextlib.ExitStack() as files:
            hours: HourFiles | None = None
            pool = files.enter_context(ThreadPoolExecutor(1, thread_name_prefix="mqb-read-ahead"))
            reads: deque[Future[Any]] = deque(pool.submit(read_checked, [p]) for p in ahead.staged.paths[:1])
            for i, path in enumerate(ahead.staged.paths):
                if i + 1 < len(ahead.staged.paths):   # the next file parsed while this one is written
                    reads.append(pool.submit(read_checked, [ahead.staged.paths[i + 1]]))
                table = reads.popleft().result()
                if table is None:
                    ahead.parse.append(path)
                    continue
                if hours is None:
                    ahead.written_dir = Path(tempfile.mkdtemp(prefix=".mqb-audit-checked-", dir=beside))
                    hours = files.enter_context(HourFiles(ahead.written_dir, "checked"))
                ahead.written.append(hours.add(table))
                del table   # freed before the next is waited for: two tables in memory at most (this, the next)
    except BaseException:
        ahead.close()
        raise
    return ahead
