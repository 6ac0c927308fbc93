"""What an incremental run hands to the next: its "as of" and the tail of the log that keys match against.

The tail is every ingested row at or after tail_start (as of minus two grace periods: the next run
reopens its window one grace period before "as of" and matches keys one more grace period back). Rows are
not copied: the state lists the Parquet files that hold them (the files recent micro-batches wrote, each
with its newest event time), so the next run reads exactly those files, with the schema given, and never
lists or scans the whole log. A listed file that is gone (the log was rewritten) makes the tail unusable;
the run then reads the log itself. The state file is replaced atomically (os.replace).
"""
from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from spark_audit.options import parse_time
from spark_audit.schema import KEY_CHECK, KEY_HASH, stored_schema

STATE_FILE = "audit_state.json"
STATE_VERSION = 2
# What matching a key needs: losses (ingress details and age) and duplicates (per-client egress copies).
KEY_COLUMNS = ("event_time", "message_key", "route", "direction", "source_protocol", "target_protocol",
               "qos", "status", "client_id", "destination", "redelivery_count", KEY_HASH, KEY_CHECK)
BAD_STATE = (ValueError, KeyError, TypeError, AttributeError, argparse.ArgumentTypeError)


@dataclass(frozen=True, slots=True)
class TailFile:
    """A Parquet file of the log and the newest event time in it."""

    path: str
    max_time: datetime


@dataclass(frozen=True, slots=True)
class Carried:
    """The last run's state; files is None when there is no usable tail (the Parquet log is read instead)."""

    as_of: datetime | None = None
    batch_id: int | None = None  # the last batch (spark_audit.increments) the state includes
    tail_start: datetime | None = None
    files: tuple[TailFile, ...] | None = None

    def continues(self, first_batch_id: int) -> bool:
        """True when the tail is complete up to this run: no micro-batch went unaudited in between."""
        return self.files is not None and self.batch_id is not None and first_batch_id == self.batch_id + 1


def read_state(checkpoint_dir: str) -> Carried:
    """The state in the checkpoint directory; a missing or unreadable part only costs a Parquet read."""
    path = Path(checkpoint_dir) / STATE_FILE
    if not path.exists():
        return Carried()
    try:
        raw = json.loads(path.read_text())
        as_of = parse_time(raw["as_of"])
    except BAD_STATE:
        return Carried()  # an unreadable state only widens nothing: the new files are still audited
    try:
        if raw.get("version") != STATE_VERSION:
            raise ValueError("a state without a tail")
        files = tuple(TailFile(str(f["path"]), parse_time(f["max_time"])) for f in raw["tail_files"])
        carried = Carried(as_of, int(raw["batch_id"]), parse_time(raw["tail_start"]), files)
    except BAD_STATE:
        return Carried(as_of)
    if not all(Path(f.path).is_file() for f in files):
        return Carried(as_of)
    return carried


def tail_file_rows(spark: SparkSession, carried: Carried) -> DataFrame | None:
    """Every row of the tail's files (key columns; schema given: nothing inferred or listed).

    The files may hold rows older than tail_start too: the caller keeps event_time >= tail_start, so a
    read of the log before tail_start never meets them twice. None when the tail is empty.
    """
    if not carried.files or carried.tail_start is None:
        return None
    return spark.read.schema(stored_schema()).parquet(*[f.path for f in carried.files]).select(*KEY_COLUMNS)


def next_tail(carried: Carried, tail_start: datetime, new: list[TailFile]) -> tuple[TailFile, ...]:
    """The files the next tail needs: every carried or new file with a row at or after tail_start."""
    kept = [f for f in (carried.files or ()) if f.max_time >= tail_start]
    return tuple(kept + [f for f in new if f.max_time >= tail_start])


def write_state(checkpoint_dir: str, carried: Carried) -> None:
    """Swap in the new state atomically."""
    directory = Path(checkpoint_dir)
    directory.mkdir(parents=True, exist_ok=True)
    state: dict[str, object] = {
        "version": STATE_VERSION,
        "as_of": carried.as_of.isoformat() if carried.as_of else None,
        "batch_id": carried.batch_id,
        "tail_start": carried.tail_start.isoformat() if carried.tail_start else None,
        "tail_files": [{"path": f.path, "max_time": f.max_time.isoformat()} for f in carried.files or ()],
    }
    tmp = directory / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(state, indent=1) + "\n")
    os.replace(tmp, directory / STATE_FILE)
