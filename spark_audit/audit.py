"""A full audit of the Parquet log: ingest logs (with their files' rollups), load the window, run the jobs.

run_audit flags keys (spark_audit.keys), then runs one window job (spark_audit.aggregates) that also
fetches the flagged keys' records, and builds every finding from the collected rows (spark_audit.findings).
"""
from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from mappings.convlog_schema import Status
from spark_audit import fs, parquet_log, rollup
from spark_audit.aggregates import (
    AGG_FIELDS,
    GROUP_FIELDS,
    MAXIMUM,
    MINIMUM,
    SUMMED,
    build_rollups,
    fetched_records,
    window_aggregates,
)
from spark_audit.findings import (
    CAPPED,
    SORT_KEYS,
    TABLE_SCHEMAS,
    VOLUME_SCHEMA,
    AuditResult,
    collect_finding,
    count_kinds,
    count_losses,
    loss_counts,
    roll_up_days,
    sort_rows,
    window_findings,
    with_trend,
)
from spark_audit.frames import empty_frame
from spark_audit.ingest import IngestResult, ingest_logs
from spark_audit.keys import (
    DUPLICATE_SCHEMA,
    FAILURE_SCHEMA,
    KEY_PROBLEM_SCHEMA,
    duplicate_rows,
    duplicates,
    failure_records,
    failure_rows,
    flag_hashed_keys,
    flagged_frame,
    flagged_records,
    key_problem_rows,
    key_problems,
)
from spark_audit.read_ahead import ReadAhead
from spark_audit.schema import partition_hour, stored_schema
from spark_audit.scope import (
    EPOCH,
    AuditConfig,
    AuditData,
    RolledUp,
    Row,
    audit_frame,
    collect_soon,
    in_window,
    window_filter,
)


def _hour_dirs(parquet_dir: str) -> list[Path]:
    """The log's date=D/hour=H directories (of a remote log: their paths, listed through Hadoop's API)."""
    if fs.is_remote(parquet_dir):
        return [fs.path_part(s.uri) for s in fs.Hadoop().glob(fs.join(parquet_dir, "date=*/hour=*")) if s.is_dir]
    return list(Path(parquet_dir).glob("date=*/hour=*"))


def _newest_partition(parquet_dir: str) -> Column | None:
    """The condition selecting the newest date/hour partition directory (None when there is none)."""
    starts = [t for t in map(partition_hour, _hour_dirs(parquet_dir)) if t is not None]
    if not starts:
        return None
    newest = max(starts)
    return (F.col("date") == F.lit(newest.date())) & (F.col("hour") == F.lit(newest.hour))


def has_partitions(parquet_dir: str) -> bool:
    """True when the Parquet log directory holds at least one date partition."""
    if fs.is_remote(parquet_dir):
        return bool(fs.Hadoop().glob(fs.join(parquet_dir, "date=*")))
    return Path(parquet_dir).is_dir() and any(Path(parquet_dir).glob("date=*"))


def max_event_time(frame: DataFrame) -> datetime | None:
    row = frame.agg(F.unix_micros(F.max("event_time")).alias("hi")).first()
    return None if row is None or row["hi"] is None else EPOCH + timedelta(microseconds=row["hi"])


def ingest(spark: SparkSession, paths: list[str], parquet_dir: str, mode: str = "overwrite",
           rollups: bool = True, compact: bool = True, ahead: ReadAhead | None = None) -> IngestResult:
    """Parse the logs once into the Parquet log (spark_audit.ingest); then, with rollups, the new files'
    rollups (spark_audit.rollup) for the full audits that follow. compact: one file per hour partition;
    ahead: the work without Spark done already (spark_audit.read_ahead)."""
    result = ingest_logs(spark, paths, parquet_dir, mode, compact, ahead)
    if rollups:
        build_rollups(spark, parquet_dir)
    return result


def load(spark: SparkSession, parquet_dir: str, config: AuditConfig, rollups: bool = True,
         newest: datetime | None = None) -> AuditData:
    """Define the pruned Parquet frame (window plus grace) and find "as of" (until, else the newest row).

    Nothing is cached: measured on local[2], Spark's columnar cache of 1M rows costs more than the
    pruned Parquet scans it saves (see bench/README.md). The newest row is looked for in the newest
    partition first (a scan of one hour), the whole window only when that partition has no row in it;
    not at all when the stored rollups know it. rollups: use the files' stored rollups where they apply
    (spark_audit/rollup.py; never for incremental runs, whose frames are built elsewhere). newest: the log's
    newest valid row when the caller knows it (an ingest that wrote the whole log counted it): no scan.
    """
    widened = None
    widen = timedelta(seconds=config.grace_seconds)
    plan = None
    lo = None if config.since is None else config.since - widen
    refs = parquet_log.in_range(parquet_log.checked(parquet_dir), lo,
                                None if config.until is None else config.until + widen)
    sidecars = (parquet_log.sidecar_rows(spark, refs).where(window_filter(config, widen)) if refs else None)
    if has_partitions(parquet_dir):
        widened = spark.read.schema(stored_schema(partitions=True)).parquet(parquet_dir).where(
            window_filter(config, widen)
        )
        source = widened if sidecars is None else widened.unionByName(sidecars)
        if rollups and not config.incremental:
            plan = rollup.plan(parquet_dir, config.since, config.until, widen)
    else:
        source = sidecars if sidecars is not None else empty_frame(spark, stored_schema())
    frame = audit_frame(source, config, in_window(config))
    rolled = None
    if plan is not None:
        def part(files: list[rollup.DataFile], more: DataFrame | None = None) -> DataFrame:
            rows = rollup.read_files(spark, parquet_dir, files).where(window_filter(config, widen))
            return audit_frame(rows if more is None else rows.unionByName(more), config, in_window(config))

        layout = StructType([*GROUP_FIELDS, *AGG_FIELDS])
        merged = rollup.groups(spark, parquet_dir, plan, layout, SUMMED, MINIMUM, MAXIMUM)
        # the sidecars read in place have no rollups: the window job scans them with the files it scans
        rolled = RolledUp(merged, part(plan.covered), part(plan.scanned, sidecars), len(plan.covered),
                          len(plan.scanned) + len(refs))
    as_of = config.until
    if as_of is None and newest is not None and (config.since is None or newest >= config.since - widen):
        as_of = newest
    if as_of is None and plan is not None:
        newest = rollup.newest_time(plan)
        if newest is not None and (config.since is None or newest >= config.since - widen):
            as_of = newest
    if as_of is None and widened is not None:
        newest = _newest_partition(parquet_dir)
        if newest is not None:
            as_of = max_event_time(widened.where(newest))
        if as_of is None:
            as_of = max_event_time(widened)
    side_newest = parquet_log.newest_us(refs)  # the sidecars' newest row, recorded at ingest
    if config.until is None and side_newest is not None:
        side_as_of = EPOCH + timedelta(microseconds=side_newest)
        as_of = side_as_of if as_of is None else max(as_of, side_as_of)
    return AuditData(frame, as_of, config, rollup=rolled,
                     hashes_stored=plan is not None and plan.hashes_stored)


# Above this many flagged keys the records are fetched by Spark (a broadcast join, findings as Spark
# frames) instead of with the window aggregate into Python.
MAX_FETCHED_KEYS = 20_000


def run_audit(data: AuditData) -> AuditResult:
    """Flag keys, then one window job that also fetches the flagged keys' records; build every finding.

    The per-key job (spark_audit.keys) aggregates per 64-bit hash of (message_key, route) and collects the
    few flagged keys; the window job (spark_audit.aggregates) fetches their records with the same scan (a
    broadcast join marks them), and losses and duplicates are finished in Python from those records.
    Two keys sharing a hash, or more than MAX_FETCHED_KEYS flagged keys: the per-key findings come from a
    Spark job of their own (exact keys, broadcast join), concurrently with the window job.
    """
    result = AuditResult(data)
    limit = data.config.max_items
    spark = data.frame.sparkSession
    if data.rollup is not None:  # the stored rollups' merge, beside the per-key job
        data.rollup.collected = collect_soon(data.rollup.groups)
    hashed = flag_hashed_keys(data)
    collected: dict[str, tuple[list[Row], int]] = {}
    kinds: dict[str, dict[str, int]] = {}
    if hashed is not None and len(hashed) <= MAX_FETCHED_KEYS:
        flagged = flagged_frame(spark, hashed)
        groups = [r.asDict() for r in window_aggregates(data, flagged).collect()]
        records = fetched_records(groups)
        for name, found, schema in (("key_problems", key_problem_rows(data, records), KEY_PROBLEM_SCHEMA),
                                    ("duplicates", duplicate_rows(data, records), DUPLICATE_SCHEMA),
                                    ("failure_records", failure_rows(data, records), FAILURE_SCHEMA)):
            result.tables.put_rows(name, found, schema)
            collected[name] = (sort_rows(found, SORT_KEYS[name])[:limit], len(found))
            if name == "key_problems":
                result.loss_counts = count_losses(found)
            if name != "failure_records":
                kinds[name] = dict(Counter(str(r["kind"]) for r in found))
    else:
        def per_key() -> dict[str, tuple[list[Row], int]]:
            records = flagged_records(data, hashed)
            result.cached.append(records)
            result.tables.put("key_problems", key_problems(data, records))
            result.tables.put("duplicates", duplicates(data, records))
            result.tables.put("failure_records", failure_records(data, records))
            return {name: collect_finding(name, result.tables[name], limit) for name in CAPPED}

        def per_window() -> list[Row]:
            return [r.asDict() for r in window_aggregates(data).collect()]

        with ThreadPoolExecutor(max_workers=2) as pool:
            keyed, windowed = pool.submit(per_key), pool.submit(per_window)
            collected, groups = keyed.result(), windowed.result()
    if data.rollup is not None:  # the stored rollups' groups, merged beside the jobs above
        groups = groups + data.rollup.rows()
    rows, data.rows_loaded, data.rows_in_window = window_findings(groups, data.config.top_n)
    result.rows = {name: found for name, (found, _total) in collected.items()}
    hourly = rows.pop("volume_hourly")
    result.rows["volume_hourly"] = with_trend(hourly, "hour")
    result.rows["volume_daily"] = with_trend(roll_up_days(hourly), "day")
    result.rows.update(rows)
    for name in ("volume_hourly", "volume_daily"):
        result.tables.put_rows(name, result.rows[name], VOLUME_SCHEMA)
    for name, schema in TABLE_SCHEMAS.items():
        result.tables.put_rows(name, result.rows[name], schema)
    problems, dups = (kinds[name] if name in kinds else count_kinds(result, name, collected[name])
                      for name in ("key_problems", "duplicates"))
    if not result.loss_counts:
        result.loss_counts = loss_counts(result, collected["key_problems"])
    result.counts["losses"] = problems.get("lost", 0)
    result.counts["unexpected_egress"] = problems.get("unexpected_egress", 0)
    result.counts["duplicates_allowed"] = dups.get("allowed", 0)
    result.counts["duplicates_suspicious"] = dups.get("suspicious", 0)
    for status in Status:
        if status is not Status.OK:
            result.counts[status.value] = sum(
                int(str(r["records"])) for r in result.rows["failures"] if r["status"] == status.value
            )
    return result
