"""The audit: three Spark jobs over the pruned Parquet log (no UDFs, no cache of the raw rows).

1. "as of" (only without --until): max event time, read from the newest date/hour partition only;
2. per message key: one aggregation per 64-bit hash of (message_key, route) (a long, not two strings;
   a second hash detects two keys sharing one, and then the exact string keys are used) flags lost /
   unexpected / duplicated keys and collects those few keys;
3. everything else (volume, failures, top offenders, conversions, latency, payload sizes) from one
   aggregation over tagged group keys, collected once and finished in Python. The same scan fetches the
   flagged keys' records (a broadcast join on the hash marks them; their columns join the group key),
   and losses and duplicates are finished in Python from them.
Above MAX_FETCHED_KEYS flagged keys, or when two keys share a hash, the flagged keys' records are fetched
by a Spark job of their own (broadcast join), concurrently with job 3, and losses and duplicates stay
Spark frames (collected capped at max_items).
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from mappings.convlog_schema import Direction, Status, format_timestamp, parse_timestamp
from spark_audit.frames import empty_frame, local_frame, typed_column
from spark_audit.schema import (
    KEY_CHECK,
    KEY_HASH,
    partition_hour,
    stored_key_check,
    stored_key_hash,
    stored_schema,
)

AUDIT_COLUMNS = (
    "event_time", "message_key", "route", "direction", "source_protocol", "target_protocol",
    "source_type", "target_type", "qos", "source_size", "target_size", "status", "reason",
    "findings", "latency_us", "client_id", "destination", "redelivery_count", KEY_HASH, KEY_CHECK,
)
VOLUME_DIMS = ("route", "direction", "source_protocol", "target_protocol", "source_type", "target_type",
               "status")
# Payload size histogram: bucket i holds sizes in [EDGES[i], EDGES[i+1]); the last is open-ended.
SIZE_EDGES = (0, 1, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576)
SIZE_LABELS = ("0", "1-63", "64-255", "256-1Ki", "1Ki-4Ki", "4Ki-16Ki", "16Ki-64Ki", "64Ki-256Ki",
               "256Ki-1Mi", ">=1Mi")
PERCENTILES = (0.5, 0.95, 0.99)
PERCENTILE_ACCURACY = 1000  # rank error <= 0.1%; exact below 1000 samples per route
MAX_ITEMS = 1000  # list findings (losses, duplicates) kept in the JSON summary; Parquet has them all

Row = dict[str, object]
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
TS_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'"


# The record conditions every job uses, as SQL text (built into larger expressions) and as Columns.
INGRESS_SQL = f"direction = '{Direction.INGRESS.value}'"
EGRESS_SQL = f"direction = '{Direction.EGRESS.value}'"
OK_SQL = f"status = '{Status.OK.value}'"


def is_ingress() -> Column:
    return F.expr(INGRESS_SQL)


def is_egress() -> Column:
    return F.expr(EGRESS_SQL)


def is_ok() -> Column:
    return F.expr(OK_SQL)


@dataclass(frozen=True, slots=True)
class AuditConfig:
    """What to audit: time window [since, until), grace before an ingress counts as lost, top-N size."""

    since: datetime | None = None
    until: datetime | None = None
    grace_seconds: float = 300.0
    top_n: int = 10
    max_items: int = MAX_ITEMS
    # Incremental runs: only the new rows are counted (the frame's "counted" column); the carried rows
    # (the reopened grace period, counted by the previous run) only serve to match keys.
    incremental: bool = False


@dataclass(slots=True)
class AuditData:
    """The pruned frame (window widened by the grace period for matching), "as of", and its counts.

    The counts are filled in by run_audit (from the window aggregate: no extra pass).
    """

    frame: DataFrame
    as_of: datetime | None
    config: AuditConfig
    rows_loaded: int = 0
    rows_in_window: int = 0
    # Files whose window groups come from their stored rollups (spark_audit/rollup.py): None, or the
    # rollups' merged groups, the audit frame over those files (to fetch flagged keys' records from) and
    # the audit frame over every other file (the window job scans only these). frame has every file.
    rollup: RolledUp | None = None
    # Every row in scope has its key hashes written (the manifest says so): read them, hash no strings.
    hashes_stored: bool = False


@dataclass(slots=True)
class RolledUp:
    """The part of an audit answered by stored rollups (see AuditData.rollup)."""

    groups: DataFrame
    covered: DataFrame
    scanned: DataFrame
    files: int
    scanned_files: int
    # The merged groups, collected by a job of their own that run_audit starts first: it needs nothing
    # from the per-key job, so the two run side by side. (Started in load() instead, while the other
    # frames are built, it made the cold audit slower: 12.0-12.8 s against 10.9-11.5 s, A/B alternated.)
    collected: Future[list[Row]] | None = None

    def rows(self) -> list[Row]:
        if self.collected is None:
            self.collected = collect_soon(self.groups)
        return self.collected.result()


def collect_soon(frame: DataFrame) -> Future[list[Row]]:
    """Collect frame's rows (as dicts) in a thread of its own."""
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        return pool.submit(lambda: [r.asDict() for r in frame.collect()])
    finally:
        pool.shutdown(wait=False)


# Optional column of the audit frame: "as of" in epoch microseconds (the same in every row). Incremental
# runs give it (and in_window) as columns: a run-dependent literal is compiled into generated code, so
# every run would compile its classes anew (Janino, then the JIT). Without it, data.as_of is a literal.
AS_OF_COLUMN = "_as_of_us"


def has_as_of_column(data: AuditData) -> bool:
    return AS_OF_COLUMN in data.frame.columns


class Tables(Mapping[str, DataFrame]):
    """The findings as Spark frames (the Parquet tables), each made from its collected rows when first used.

    A frame made from rows is a local relation (spark_audit/frames.py); an audit whose tables are not
    written (--no-parquet-tables, the benchmarks) makes none (12 createDataFrame calls cost ~0.13 s a run).
    """

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        self._frames: dict[str, DataFrame] = {}
        self._rows: dict[str, tuple[list[Row], StructType]] = {}

    def put_rows(self, name: str, rows: list[Row], schema: StructType) -> None:
        self._rows[name] = (rows, schema)
        self._frames.pop(name, None)

    def put(self, name: str, frame: DataFrame) -> None:
        self._frames[name] = frame
        self._rows.pop(name, None)

    def __getitem__(self, name: str) -> DataFrame:
        if name not in self._frames:
            rows, schema = self._rows.pop(name)
            self._frames[name] = local_frame(self._spark, [tuple(r[f.name] for f in schema.fields) for r in rows],
                                             schema)
        return self._frames[name]

    def __iter__(self) -> Iterator[str]:
        return iter([*self._frames, *self._rows])

    def __len__(self) -> int:
        return len(self._frames) + len(self._rows)

    def made(self) -> list[DataFrame]:
        """The frames made so far."""
        return list(self._frames.values())


@dataclass(slots=True)
class AuditResult:
    """Every finding as a DataFrame (for Parquet), its collected rows (capped), and headline counts."""

    data: AuditData
    tables: Tables = field(init=False)
    rows: dict[str, list[dict[str, object]]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    cached: list[DataFrame] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tables = Tables(self.data.frame.sparkSession)

    @property
    def gate_failed(self) -> bool:
        """True when the run should fail a pipeline: any loss or suspicious duplicate."""
        return bool(self.counts.get("losses") or self.counts.get("duplicates_suspicious"))

    def cleanup(self) -> None:
        for df in [*self.tables.made(), *self.cached]:
            df.unpersist()


def micros(value: datetime) -> int:
    """Microseconds since the epoch for an aware datetime."""
    delta = value.astimezone(UTC) - datetime(1970, 1, 1, tzinfo=UTC)
    return delta // timedelta(microseconds=1)


def ts_lit(value: datetime) -> Column:
    return F.timestamp_micros(F.lit(micros(value)))


def ts_text(col: Column | str) -> Column:
    """A timestamp rendered as the log's UTC string (so collected values do not depend on local TZ)."""
    return F.date_format(col, TS_FORMAT)


def time_range(lo: datetime | None, hi: datetime | None, partitioned: bool = True) -> Column:
    """Rows with lo <= event_time < hi (either bound may be open); partition pruning on date and hour."""
    cond = F.lit(True)
    date, hour = F.col("date"), F.col("hour")
    if lo is not None:
        lo = lo.astimezone(UTC)
        lo_date = F.lit(lo.date())
        if partitioned:
            cond = cond & ((date > lo_date) | ((date == lo_date) & (hour >= F.lit(lo.hour))))
        cond = cond & (F.col("event_time") >= ts_lit(lo))
    if hi is not None:
        hi = hi.astimezone(UTC)
        hi_date = F.lit(hi.date())
        if partitioned:
            cond = cond & ((date < hi_date) | ((date == hi_date) & (hour <= F.lit(hi.hour))))
        cond = cond & (F.col("event_time") < ts_lit(hi))
    return cond


def _window_filter(config: AuditConfig, widen: timedelta) -> Column:
    """Rows inside [since - widen, until + widen), with partition pruning on date and hour."""
    return time_range(None if config.since is None else config.since - widen,
                      None if config.until is None else config.until + widen)


def in_window(config: AuditConfig, col: Column | str = "event_time") -> Column:
    """True for timestamps inside [since, until)."""
    c = F.col(col) if isinstance(col, str) else col
    cond = F.lit(True)
    if config.since is not None:
        cond = cond & (c >= ts_lit(config.since))
    if config.until is not None:
        cond = cond & (c < ts_lit(config.until))
    return cond


def _newest_partition(parquet_dir: str) -> Column | None:
    """The condition selecting the newest date/hour partition directory (None when there is none)."""
    starts = [t for t in map(partition_hour, Path(parquet_dir).glob("date=*/hour=*")) if t is not None]
    if not starts:
        return None
    newest = max(starts)
    return (F.col("date") == F.lit(newest.date())) & (F.col("hour") == F.lit(newest.hour))


def has_partitions(parquet_dir: str) -> bool:
    """True when the Parquet log directory holds at least one date partition."""
    return Path(parquet_dir).is_dir() and any(Path(parquet_dir).glob("date=*"))


def max_event_time(frame: DataFrame) -> datetime | None:
    row = frame.agg(F.unix_micros(F.max("event_time")).alias("hi")).first()
    return None if row is None or row["hi"] is None else EPOCH + timedelta(microseconds=row["hi"])


def audit_frame(source: DataFrame, config: AuditConfig, counted: Column) -> DataFrame:
    """The audit's columns plus in_window and counted (the rows whose volume and findings are counted)."""
    return source.select(*AUDIT_COLUMNS, in_window(config).alias("in_window"), counted.alias("counted"))


def load(spark: SparkSession, parquet_dir: str, config: AuditConfig, rollups: bool = True) -> AuditData:
    """Define the pruned Parquet frame (window plus grace) and find "as of" (until, else the newest row).

    Nothing is cached: measured on local[2], Spark's columnar cache of 1M rows costs more than the
    pruned Parquet scans it saves (see bench/README.md). The newest row is looked for in the newest
    partition first (a scan of one hour), the whole window only when that partition has no row in it;
    not at all when the stored rollups know it. rollups: use the files' stored rollups where they apply
    (spark_audit/rollup.py; never for incremental runs, whose frames are built elsewhere).
    """
    from spark_audit import rollup

    widened = None
    widen = timedelta(seconds=config.grace_seconds)
    plan = None
    if has_partitions(parquet_dir):
        widened = spark.read.schema(stored_schema(partitions=True)).parquet(parquet_dir).where(
            _window_filter(config, widen)
        )
        source = widened
        if rollups and not config.incremental:
            plan = rollup.plan(parquet_dir, config.since, config.until, widen)
    else:
        source = empty_frame(spark, stored_schema())
    frame = audit_frame(source, config, in_window(config))
    rolled = None
    if plan is not None:
        def part(files: list[Path]) -> DataFrame:
            return audit_frame(rollup.read_files(spark, parquet_dir, files).where(_window_filter(config, widen)),
                               config, in_window(config))

        layout = StructType([*GROUP_FIELDS, *AGG_FIELDS])
        merged = rollup.groups(spark, parquet_dir, plan, layout, SUMMED, MINIMUM, MAXIMUM)
        rolled = RolledUp(merged, part(plan.covered), part(plan.scanned), len(plan.covered), len(plan.scanned))
    as_of = config.until
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
    return AuditData(frame, as_of, config, rollup=rolled,
                     hashes_stored=plan is not None and plan.hashes_stored)


VOLUME_SCHEMA = StructType(
    [StructField("window", StringType()), StructField("window_start", StringType())]
    + [StructField(d, StringType()) for d in VOLUME_DIMS]
    + [StructField(c, LongType()) for c in ("records", "source_bytes", "previous_records", "change")]
)


def roll_up_days(hourly: list[Row]) -> list[Row]:
    """Sum hourly volume rows into days."""
    days: dict[tuple[object, ...], Row] = {}
    for r in hourly:
        key = (str(r["window_start"])[:10] + "T00:00:00.000000Z", *(r[d] for d in VOLUME_DIMS))
        day = days.setdefault(key, {"window_start": key[0], **{d: r[d] for d in VOLUME_DIMS},
                                    "records": 0, "source_bytes": 0})
        day["records"] = int(str(day["records"])) + int(str(r["records"]))
        day["source_bytes"] = int(str(day["source_bytes"])) + int(str(r["source_bytes"] or 0))
    return list(days.values())


def with_trend(rows: list[Row], unit: str) -> list[Row]:
    """Add the previous window's records (0 when it had none) and the change against it."""
    step = timedelta(hours=1) if unit == "hour" else timedelta(days=1)
    index = {(r["window_start"], *(r[d] for d in VOLUME_DIMS)): int(str(r["records"])) for r in rows}
    out = []
    for r in rows:
        previous = format_timestamp(parse_timestamp(str(r["window_start"])) - step)
        prev = index.get((previous, *(r[d] for d in VOLUME_DIMS)), 0)
        records = int(str(r["records"]))
        out.append({"window": unit, "window_start": r["window_start"], **{d: r[d] for d in VOLUME_DIMS},
                    "records": records, "source_bytes": int(str(r["source_bytes"] or 0)),
                    "previous_records": prev, "change": records - prev})
    return sort_rows(out, SORT_KEYS["volume_hourly"])

# Per-key flags, OR-ed over a key's records (bit_or: one integer buffer instead of four counts).
SEEN_INGRESS, SEEN_ELIGIBLE, SEEN_EGRESS, SEEN_EGRESS_COUNTED = 1, 2, 4, 8
# The records of flagged keys: the columns key_problems and duplicates read (not all of the frame's).
RECORD_COLUMNS = ("message_key", "route", "direction", "source_protocol", "target_protocol", "qos", "client_id",
                  "destination", "event_time", "status", "redelivery_count", "in_window", "counted")


def key_hash_column(data: AuditData) -> Column:
    """(message_key, route) as one long: as written with the row, or hashed here for rows of older files
    (or whenever the audit cannot know that every row in scope has it)."""
    return F.col(KEY_HASH) if data.hashes_stored else stored_key_hash()


def key_check_column(data: AuditData) -> Column:
    """A second, independent hash of (message_key, route): two keys sharing key_hash differ in it."""
    return F.col(KEY_CHECK) if data.hashes_stored else stored_key_check()


def _flag_conditions(data: AuditData) -> tuple[str, str]:
    """Per record (SQL text): its SEEN_* bits; and 1 for an ok egress (more than one per key is a duplicate).

    Expressions are built as SQL text, one JVM call each: built from Column objects they took hundreds of
    py4j round trips per audit (bench/README.md).
    """
    config = data.config
    grace_us = int(config.grace_seconds * 1_000_000)
    if has_as_of_column(data):
        cutoff = f"{AS_OF_COLUMN} - {grace_us}"
    else:
        cutoff = str((micros(data.as_of) if data.as_of is not None else 0) - grace_us)
    eligible = f"{OK_SQL} AND in_window AND unix_micros(event_time) < {cutoff}"
    seen = (f"CASE WHEN {INGRESS_SQL} THEN IF({eligible}, {SEEN_INGRESS | SEEN_ELIGIBLE}, {SEEN_INGRESS}) "
            f"WHEN {EGRESS_SQL} THEN IF(counted, {SEEN_EGRESS | SEEN_EGRESS_COUNTED}, {SEEN_EGRESS}) ELSE 0 END")
    return seen, f"CAST({EGRESS_SQL} AND {OK_SQL} AS INT)"


def _kind(seen: str) -> str:
    """'lost' (an ok ingress in the window, older than the grace period, and no egress at all) or
    'unexpected_egress' (egress in the window, no ingress); null otherwise. SQL text over the seen bits."""
    def has(bit: int) -> str:
        return f"(({seen}) & {bit}) != 0"

    lost = f"{has(SEEN_ELIGIBLE)} AND NOT {has(SEEN_EGRESS)}"
    unexpected = f"NOT {has(SEEN_INGRESS)} AND {has(SEEN_EGRESS_COUNTED)}"
    return f"CASE WHEN {lost} THEN 'lost' WHEN {unexpected} THEN 'unexpected_egress' END"


def flag_keys(data: AuditData) -> DataFrame:
    """One aggregation per (message_key, route), keeping just the keys with a problem (exact string keys).

    kind: see _kind; dup: more than one ok egress (split per client later). The result is small. Used
    when two keys of the log share a key_hash (see flag_hashed_keys).
    """
    seen, ok_egress = _flag_conditions(data)
    chains = data.frame.groupBy("message_key", "route").agg(
        F.expr(f"bit_or({seen}) AS seen"), F.expr(f"sum({ok_egress}) AS egress_ok"))
    return chains.selectExpr(
        "message_key", "route", f"{_kind('seen')} AS kind", "egress_ok > 1 AS dup"
    ).where("kind IS NOT NULL OR dup")


def flag_hashed_keys(data: AuditData) -> list[Row] | None:
    """flag_keys grouped by key_hash (a long) instead of the two strings; None when two keys collide.

    Every key of the frame is aggregated, so a collision shows as two key_check values in one group;
    the caller then falls back to flag_keys. Returns (KEY_HASH, kind, dup) rows of the flagged keys.
    """
    seen, ok_egress = _flag_conditions(data)
    chains = data.frame.select(key_hash_column(data).alias(KEY_HASH), key_check_column(data).alias("check"),
                               F.expr(f"{seen} AS seen"), F.expr(f"{ok_egress} AS ok_egress"))
    chains = chains.groupBy(KEY_HASH).agg(F.expr("bit_or(seen) AS seen"), F.expr("sum(ok_egress) AS egress_ok"),
                                          F.expr("min(check) AS check_lo"), F.expr("max(check) AS check_hi"))
    flagged = chains.selectExpr(
        KEY_HASH, f"{_kind('seen')} AS kind", "egress_ok > 1 AS dup", "check_lo != check_hi AS collided",
    ).where("kind IS NOT NULL OR dup OR collided")
    rows = [r.asDict() for r in flagged.collect()]
    if any(r["collided"] for r in rows):
        return None
    return [{KEY_HASH: r[KEY_HASH], "kind": r["kind"], "dup": r["dup"]} for r in rows]


FLAGGED_SCHEMA = StructType([StructField(KEY_HASH, LongType(), False), StructField("kind", StringType()),
                             StructField("dup", BooleanType())])


def flagged_frame(spark: SparkSession, hashed: list[Row]) -> DataFrame:
    """flag_hashed_keys' rows as a frame to broadcast (a local relation: spark_audit/frames.py)."""
    return local_frame(spark, [(r[KEY_HASH], r["kind"], r["dup"]) for r in hashed], FLAGGED_SCHEMA)


def flagged_records(data: AuditData, hashed: list[Row] | None) -> DataFrame:
    """The records of the flagged keys (few), fetched in one pass with a broadcast join and cached.

    hashed: flag_hashed_keys' rows; None (two keys share a hash): the keys are flagged by their strings.
    """
    frame = data.frame.select(*RECORD_COLUMNS, KEY_HASH, *([AS_OF_COLUMN] if has_as_of_column(data) else []))
    if hashed is None:
        records = frame.join(F.broadcast(flag_keys(data)), ["message_key", "route"])
    else:
        flagged = flagged_frame(frame.sparkSession, hashed)
        records = frame.withColumn(KEY_HASH, key_hash_column(data)).join(F.broadcast(flagged), KEY_HASH).drop(KEY_HASH)
    return records.persist()


def key_problems(data: AuditData, records: DataFrame) -> DataFrame:
    """Lost ingress and unexpected egress records, with their details."""
    as_of_us = F.col(AS_OF_COLUMN) if has_as_of_column(data) else F.lit(
        micros(data.as_of) if data.as_of is not None else 0)
    kind = F.col("kind")
    wanted = (kind == "lost") & is_ingress() & is_ok() | (kind == "unexpected_egress")
    return records.where(kind.isNotNull() & wanted).select(
        "kind", "message_key", "route", "direction", "source_protocol", "target_protocol", "qos",
        "client_id", "destination", ts_text("event_time").alias("event_time"),
        F.when(kind == "lost", (as_of_us - F.unix_micros("event_time")) / 1e6).alias("age_seconds"),
    )


def duplicates(data: AuditData, records: DataFrame) -> DataFrame:
    """More than one ok egress per key/route/client: allowed for QoS 1 redeliveries, else suspicious."""
    column_bounds = has_as_of_column(data)
    # With run-dependent bounds kept out of generated code: the first copy's in_window flag.
    first_in_window = [F.min_by("in_window", "event_time").alias("first_in_window")] if column_bounds else []
    per_client = (
        records.where(F.col("dup") & is_egress() & is_ok())
        .groupBy("message_key", "route", "client_id")
        .agg(
            F.count(F.lit(1)).alias("copies"),
            F.max("redelivery_count").alias("max_redelivery"),
            F.max("qos").alias("qos"),
            F.min("destination").alias("destination"),
            F.min("event_time").alias("first_egress_time"),
            F.max(F.col("counted").cast("int")).alias("new_copies"),
            *first_in_window,
        )
    )
    copies = F.col("copies")
    allowed = (F.col("qos") == 1) & (copies <= F.col("max_redelivery") + 1)
    first_shown = F.col("first_in_window") if column_bounds else in_window(data.config, "first_egress_time")
    shown = (copies > 1) & first_shown
    if data.config.incremental:  # reported by an earlier run unless a copy is new
        shown = shown & (F.col("new_copies") > 0)
    return per_client.where(shown).select(
        F.when(allowed, F.lit("allowed")).otherwise(F.lit("suspicious")).alias("kind"),
        "message_key", "route", "client_id", "destination", "qos", "copies", "max_redelivery",
        ts_text("first_egress_time").alias("first_egress_time"),
    )


# The window aggregate: three small aggregations (volume, sizes and not-ok records; latency histogram;
# conversion findings), each reading only its columns, unioned into one job whose result is collected
# once and finished in Python (the same numbers separate Spark jobs gave, without their overhead).
TAG_VOLUME, TAG_LATENCY, TAG_FINDING = 0, 1, 2
TAG_FETCH = 3  # the records of flagged keys in rolled-up files (counted by the rollups, not again)
GROUP_STRINGS = (*VOLUME_DIMS, "reason", "client_id", "destination", "change", "name", "detail")
GROUP_STRINGS = (*GROUP_STRINGS, "message_key", "kind")
GROUP_FIELDS = [StructField("tag", IntegerType()), StructField("hour_us", LongType()),
                StructField("in_window", BooleanType()), StructField("counted", BooleanType()),
                StructField("bucket", IntegerType()), StructField("lat", LongType()),
                StructField("dup", BooleanType()), StructField("qos", IntegerType()),
                StructField("redelivery_count", IntegerType()), StructField("t_rec", LongType()),
                *[StructField(name, StringType()) for name in GROUP_STRINGS]]
# How stored rollups of several files merge into one group (spark_audit/rollup.py).
SUMMED = ("n", "source_bytes", "sized", "size_sum", "lat_sum")
MINIMUM = ("size_min", "t_min")
MAXIMUM = ("size_max", "lat_max", "t_max")
AGG_FIELDS = [StructField(name, LongType()) for name in (
    "n", "source_bytes", "sized", "size_sum", "size_min", "size_max", "lat_sum", "lat_max", "t_min", "t_max")]
LATENCY_DIGITS = 3  # latency histogram keeps 3 significant digits (values below 1000 us are exact)


def round_latency(lat: str) -> str:
    """SQL text: latency rounded half up to LATENCY_DIGITS significant digits (exact below 10**LATENCY_DIGITS).

    Integer arithmetic only (one comparison per decade; no log10/pow in doubles per row).
    """
    cases = [f"WHEN {lat} < {10**LATENCY_DIGITS} THEN {lat}"]
    for exponent in range(LATENCY_DIGITS, 18):  # lat in [10**exponent, 10**(exponent + 1))
        step = 10 ** (exponent - LATENCY_DIGITS + 1)
        cases.append(f"WHEN {lat} < {10 ** (exponent + 1)} "
                     f"THEN {lat} - {lat} % {step} + IF({lat} % {step} >= {step // 2}, {step}, 0)")
    return f"CASE {' '.join(cases)} ELSE {lat} END"  # 10**18 us and more (31,000 years): as is


def size_bucket(size: str) -> str:
    """SQL text: the SIZE_EDGES bucket of a size (null for a null size)."""
    cases = " ".join(f"WHEN {size} < {SIZE_EDGES[i + 1]} THEN {i}" for i in range(len(SIZE_EDGES) - 1))
    return f"CASE WHEN {size} IS NULL THEN NULL {cases} ELSE {len(SIZE_EDGES) - 1} END"


def _aggregate(frame: DataFrame, tag: int, keys: dict[str, str], aggs: dict[str, str],
               per_file: bool = False) -> DataFrame:
    """Group frame by keys, aggregate, and pad to the common GROUP_FIELDS + AGG_FIELDS layout.

    keys and aggs map output names to SQL text (one JVM call each). per_file: the file column
    (rollup.FILE_COLUMN) joins the keys and the output (rollups are per file).
    """
    from spark_audit.rollup import FILE_COLUMN

    if per_file:
        keys = {FILE_COLUMN: FILE_COLUMN, **keys}
    grouped = frame.groupBy(*[F.expr(f"{sql} AS {name}") for name, sql in keys.items()]).agg(
        *[F.expr(f"{sql} AS {name}") for name, sql in aggs.items()])
    out = [FILE_COLUMN] if per_file else []
    for f in [*GROUP_FIELDS, *AGG_FIELDS]:
        value = str(tag) if f.name == "tag" else f.name if f.name in keys or f.name in aggs else "NULL"
        out.append(typed_column(value, f))
    return grouped.selectExpr(*out)


NOT_OK_KEYS = ("reason", "client_id", "destination")


def window_aggregates(data: AuditData, flagged: DataFrame | None = None, per_file: bool = False) -> DataFrame:
    """The one job behind volume, sizes, latency, failures, top offenders and conversions.

    Volume and the not-ok records share one aggregation (one scan): a counted record that is not ok also
    keeps its reason, client and destination in the group key (null for every other record, so they add
    groups only for the few not-ok records) and its time in t_min/t_max. With flagged (KEY_HASH, kind,
    dup rows from flag_hashed_keys) the same scan also fetches the records of those keys: a broadcast
    join on KEY_HASH marks them, and their columns join the group key (null for every other record), so
    each comes back as a group of its own (n identical records in one group of n).
    With stored rollups (data.rollup) only the other files are scanned, and the flagged keys' records in
    the rolled-up files are fetched by the same job, one row per record (TAG_FETCH: not counted again).
    per_file: group by file as well (rollup.build: the frame has the file column).
    """
    from spark_audit.rollup import FILE_COLUMN

    hashed = key_hash_column(data)
    parts = []
    if data.rollup is None or data.rollup.scanned_files:
        frame = data.rollup.scanned if data.rollup is not None else data.frame
        parts = [
            _volume(frame, flagged, hashed, "left", TAG_VOLUME, per_file),
            _aggregate(
                frame.where(f"counted AND {EGRESS_SQL} AND {OK_SQL} AND latency_us IS NOT NULL"), TAG_LATENCY,
                {"route": "route", "lat": round_latency("latency_us")},
                {"n": "count(1)", "lat_sum": "sum(latency_us)", "lat_max": "max(latency_us)"}, per_file,
            ),
            _aggregate(
                frame.where("counted AND size(findings) > 0").selectExpr(
                    "route", "explode(findings) AS f", *([FILE_COLUMN] if per_file else [])), TAG_FINDING,
                {"route": "route", "change": "f.change", "name": "f.name", "detail": "f.detail"},
                {"n": "count(1)"}, per_file,
            ),
        ]
    if data.rollup is not None and flagged is not None:
        parts.append(_fetch_rows(data.rollup.covered, flagged, hashed))
    if not parts:  # every file rolled up and nothing flagged: an empty result in the same layout
        empty = empty_frame(data.frame.sparkSession, StructType([*GROUP_FIELDS, *AGG_FIELDS]))
        parts.append(empty)
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out


def _fetch_rows(frame: DataFrame, flagged: DataFrame, hashed: Column) -> DataFrame:
    """The records of flagged keys in frame, one row each (n = 1, TAG_FETCH), in the window aggregate's layout."""
    joined = frame.withColumn(KEY_HASH, hashed).join(F.broadcast(flagged), KEY_HASH)
    values = {"tag": F.lit(TAG_FETCH), "t_rec": F.unix_micros("event_time"), "n": F.lit(1),
              **{c: F.col(c) for c in (*VOLUME_DIMS, "in_window", "counted", "kind", "dup", "message_key", "qos",
                                       "redelivery_count", "client_id", "destination")}}
    return joined.select(*[(values[f.name] if f.name in values else F.lit(None)).cast(f.dataType).alias(f.name)
                           for f in [*GROUP_FIELDS, *AGG_FIELDS]])


def _volume(frame: DataFrame, flagged: DataFrame | None, hashed: Column, how: str, tag: int,
            per_file: bool = False) -> DataFrame:
    """window_aggregates' volume / not-ok / fetch aggregation of frame (see there)."""
    from spark_audit.rollup import FILE_COLUMN

    size = f"CASE WHEN {INGRESS_SQL} THEN source_size ELSE target_size END"
    not_ok = f"(counted AND NOT {OK_SQL})"
    fetch: list[str] = []
    source = frame
    shown = not_ok
    if flagged is not None:
        source = frame.withColumn(KEY_HASH, hashed).join(F.broadcast(flagged), KEY_HASH, how)
        fetched = "dup IS NOT NULL"  # a flagged key (its dup is true or false)
        shown = f"({not_ok} OR {fetched})"
        fetch = ["kind", "dup",
                 *[f"IF({fetched}, {c}, NULL) AS {c}" for c in ("message_key", "qos", "redelivery_count")],
                 f"IF({fetched}, unix_micros(event_time), NULL) AS t_rec"]
    keys = [*NOT_OK_KEYS, *(("message_key", "kind", "dup", "qos", "redelivery_count", "t_rec") if fetch else ())]
    return _aggregate(
        source.selectExpr(*VOLUME_DIMS, "in_window", "counted", "source_size", f"{size} AS size",
                          "floor(unix_micros(event_time) / 3600000000) * 3600000000 AS hour_us",
                          f"IF({not_ok}, reason, NULL) AS reason",
                          *[f"IF({shown}, {c}, NULL) AS {c}" for c in ("client_id", "destination")],
                          f"IF({not_ok}, unix_micros(event_time), NULL) AS t_us", *fetch,
                          *([FILE_COLUMN] if per_file else [])),
        tag,
        {"hour_us": "hour_us", "in_window": "in_window", "counted": "counted", "bucket": size_bucket("size"),
         **{d: d for d in (*VOLUME_DIMS, *keys)}},
        {"n": "count(1)", "source_bytes": "sum(source_size)", "sized": "count(size)", "size_sum": "sum(size)",
         "size_min": "min(size)", "size_max": "max(size)", "t_min": "min(t_us)", "t_max": "max(t_us)"},
        per_file,
    )


def _ts(us: int) -> str:
    return format_timestamp(EPOCH + timedelta(microseconds=us))


def _volume_rows(groups: list[Row]) -> tuple[list[Row], int, int]:
    """Hourly volume of the counted rows; and the rows loaded and in the window."""
    hourly: dict[tuple[object, ...], Row] = {}
    loaded = in_window = 0
    for g in groups:
        n = int(g["n"])  # type: ignore[call-overload]
        loaded += n
        in_window += n if g["in_window"] else 0
        if not g["counted"]:
            continue
        key = (g["hour_us"], *(g[d] for d in VOLUME_DIMS))
        row = hourly.setdefault(key, {"window_start": _ts(int(g["hour_us"])),  # type: ignore[call-overload]
                                      **{d: g[d] for d in VOLUME_DIMS}, "records": 0, "source_bytes": None})
        row["records"] = int(row["records"]) + n  # type: ignore[call-overload]
        if g["source_bytes"] is not None:
            row["source_bytes"] = int(row["source_bytes"] or 0) + int(g["source_bytes"])  # type: ignore[call-overload]
    return list(hourly.values()), loaded, in_window


def _size_rows(groups: list[Row]) -> list[Row]:
    """Payload size statistics and histogram per route and direction (counted rows with a size)."""
    out: dict[tuple[object, object], dict[str, Any]] = {}
    for g in groups:
        if not g["counted"] or g["bucket"] is None:
            continue
        r = out.setdefault((g["route"], g["direction"]), {
            "route": g["route"], "direction": g["direction"], "messages": 0, "min_bytes": None,
            "max_bytes": None, "total_bytes": 0, "buckets": [0] * len(SIZE_EDGES)})
        r["messages"] += g["sized"]
        r["total_bytes"] += g["size_sum"]
        r["min_bytes"] = g["size_min"] if r["min_bytes"] is None else min(r["min_bytes"], g["size_min"])
        r["max_bytes"] = g["size_max"] if r["max_bytes"] is None else max(r["max_bytes"], g["size_max"])
        r["buckets"][g["bucket"]] += g["sized"]
    rows = []
    for r in out.values():
        buckets = r.pop("buckets")
        rows.append({**r, "mean_bytes": r["total_bytes"] / r["messages"], "histogram": [
            {"bucket": label, "messages": buckets[i]} for i, label in enumerate(SIZE_LABELS)]})
        rows[-1] = {k: rows[-1][k] for k in SIZE_FIELDS}
    return rows


def percentile(histogram: list[tuple[int, int]], total: int, p: float) -> int:
    """The value at rank ceil(p * n) of a sorted (value, count) histogram (percentile_approx's rule)."""
    if p <= 1 / PERCENTILE_ACCURACY:
        return histogram[0][0]
    if p >= 1 - 1 / PERCENTILE_ACCURACY:
        return histogram[-1][0]
    rank, seen = math.ceil(p * total), 0
    for value, count in histogram:
        seen += count
        if seen >= rank:
            return value
    return histogram[-1][0]


def _latency_rows(groups: list[Row]) -> list[Row]:
    """p50/p95/p99 (from the rounded histogram), exact max and mean of ok egress latency per route."""
    per_route: dict[str, list[Row]] = {}
    for g in groups:
        per_route.setdefault(str(g["route"]), []).append(g)
    rows = []
    for route, gs in per_route.items():
        histogram = sorted((int(g["lat"]), int(g["n"])) for g in gs)  # type: ignore[call-overload]
        n = sum(c for _, c in histogram)
        p50, p95, p99 = (percentile(histogram, n, p) for p in PERCENTILES)
        rows.append({"route": route, "samples": n, "p50_us": p50, "p95_us": p95, "p99_us": p99,
                     "max_us": max(int(g["lat_max"]) for g in gs),  # type: ignore[call-overload]
                     "mean_us": sum(int(g["lat_sum"]) for g in gs) / n})  # type: ignore[call-overload]
    return rows


def _failure_rows(groups: list[Row]) -> list[Row]:
    """Not-ok records by status, route and reason, with first and last time seen."""
    out: dict[tuple[object, ...], Row] = {}
    for g in groups:
        key = (g["status"], g["route"], g["reason"] if g["reason"] is not None else "(no reason)")
        r = out.setdefault(key, {"status": key[0], "route": key[1], "reason": key[2], "records": 0,
                                 "t_min": g["t_min"], "t_max": g["t_max"]})
        r["records"] = int(r["records"]) + int(g["n"])  # type: ignore[call-overload]
        r["t_min"] = min(r["t_min"], g["t_min"])  # type: ignore[type-var]
        r["t_max"] = max(r["t_max"], g["t_max"])  # type: ignore[type-var]
    return [{"status": r["status"], "route": r["route"], "reason": r["reason"], "records": r["records"],
             "first_seen": _ts(int(r.pop("t_min"))), "last_seen": _ts(int(r.pop("t_max")))}  # type: ignore[call-overload]
            for r in out.values()]


def _top_rows(groups: list[Row], column: str, top_n: int) -> list[Row]:
    """The top-N clients or destinations by records that were not ok, split by status."""
    statuses = [s.value for s in Status if s is not Status.OK]
    out: dict[object, Row] = {}
    for g in groups:
        if g[column] is None:
            continue
        r = out.setdefault(g[column], {column: g[column], "problems": 0, **{s: 0 for s in statuses}})
        r["problems"] = int(r["problems"]) + int(g["n"])  # type: ignore[call-overload]
        r[str(g["status"])] = int(r[str(g["status"])]) + int(g["n"])  # type: ignore[call-overload]
    return sort_rows(list(out.values()), SORT_KEYS["top_clients" if column == "client_id" else
                                                   "top_destinations"])[:top_n]


def _change_rows(groups: list[Row]) -> list[Row]:
    """Occurrences per route, change, name and detail (a stored rollup and a scan may both have one)."""
    out: dict[tuple[object, ...], Row] = {}
    for g in groups:
        key = (g["route"], g["change"], g["name"], g["detail"])
        r = out.setdefault(key, {"route": key[0], "change": key[1], "name": key[2], "detail": key[3],
                                 "occurrences": 0})
        r["occurrences"] = int(str(r["occurrences"])) + int(str(g["n"]))
    return list(out.values())


def window_findings(groups: list[Row], top_n: int) -> tuple[dict[str, list[Row]], int, int]:
    """Split the collected window aggregate into the findings' rows; and rows loaded / in window."""
    by_tag: dict[int, list[Row]] = {t: [] for t in (TAG_VOLUME, TAG_LATENCY, TAG_FINDING, TAG_FETCH)}
    for g in groups:
        by_tag[int(g["tag"])].append(g)  # type: ignore[call-overload]
    hourly, loaded, in_window = _volume_rows(by_tag[TAG_VOLUME])
    not_ok = [g for g in by_tag[TAG_VOLUME] if g["counted"] and g["status"] != Status.OK.value]
    rows = {
        "volume_hourly": hourly,
        "failures": _failure_rows(not_ok),
        "top_clients": _top_rows(not_ok, "client_id", top_n),
        "top_destinations": _top_rows(not_ok, "destination", top_n),
        "conversion_changes": _change_rows(by_tag[TAG_FINDING]),
        "latency": _latency_rows(by_tag[TAG_LATENCY]),
        "payload_sizes": _size_rows(by_tag[TAG_VOLUME]),
    }
    return {name: sort_rows(r, SORT_KEYS[name]) for name, r in rows.items()}, loaded, in_window


_STATUS_COLUMNS = [StructField(s.value, LongType()) for s in Status if s is not Status.OK]
SIZE_FIELDS = ("route", "direction", "messages", "min_bytes", "max_bytes", "mean_bytes", "total_bytes",
               "histogram")
TABLE_SCHEMAS: dict[str, StructType] = {
    "failures": StructType([StructField(c, StringType()) for c in ("status", "route", "reason")]
                           + [StructField("records", LongType()), StructField("first_seen", StringType()),
                              StructField("last_seen", StringType())]),
    "top_clients": StructType([StructField("client_id", StringType()), StructField("problems", LongType()),
                               *_STATUS_COLUMNS]),
    "top_destinations": StructType([StructField("destination", StringType()),
                                    StructField("problems", LongType()), *_STATUS_COLUMNS]),
    "conversion_changes": StructType([StructField(c, StringType()) for c in ("route", "change", "name",
                                                                           "detail")]
                                     + [StructField("occurrences", LongType())]),
    "latency": StructType([StructField("route", StringType())]
                          + [StructField(c, LongType()) for c in ("samples", "p50_us", "p95_us", "p99_us",
                                                                  "max_us")]
                          + [StructField("mean_us", DoubleType())]),
    "payload_sizes": StructType(
        [StructField("route", StringType()), StructField("direction", StringType())]
        + [StructField(c, LongType()) for c in ("messages", "min_bytes", "max_bytes")]
        + [StructField("mean_bytes", DoubleType()), StructField("total_bytes", LongType()),
           StructField("histogram", ArrayType(StructType([StructField("bucket", StringType()),
                                                          StructField("messages", LongType())])))]),
}

# How each finding's rows are ordered in the summary ("-" = descending); Spark does not sort them.
SORT_KEYS: dict[str, tuple[str, ...]] = {
    "volume_hourly": ("window_start", *VOLUME_DIMS),
    "volume_daily": ("window_start", *VOLUME_DIMS),
    "key_problems": ("kind", "route", "event_time", "message_key"),
    "duplicates": ("-kind", "route", "message_key", "client_id"),  # suspicious before allowed
    "failures": ("-records", "status", "route", "reason"),
    "top_clients": ("-problems", "client_id"),
    "top_destinations": ("-problems", "destination"),
    "conversion_changes": ("-occurrences", "route", "change", "name", "detail"),
    "latency": ("route",),
    "payload_sizes": ("route", "direction"),
}
CAPPED = ("key_problems", "duplicates")  # can be as long as the log: capped at max_items in the summary


def sort_rows(rows: list[Row], keys: tuple[str, ...]) -> list[Row]:
    """Order collected rows by the given columns ('-' prefix: descending), nulls last in each."""
    out = list(rows)
    for k in reversed(keys):  # stable sorts, least significant key first
        name = k.lstrip("-")
        present = [r for r in out if r[name] is not None]
        present.sort(key=lambda r: r[name], reverse=k.startswith("-"))  # type: ignore[arg-type, return-value]
        out = present + [r for r in out if r[name] is None]
    return out


def _collect(name: str, df: DataFrame, limit: int) -> tuple[list[Row], int]:
    """Collect one finding (sorted); capped tables fetch at most limit rows and count the rest."""
    keys = SORT_KEYS[name]
    if name not in CAPPED:
        rows = [r.asDict(recursive=True) for r in df.collect()]
        return sort_rows(rows, keys), len(rows)
    rows = [r.asDict(recursive=True) for r in df.limit(limit + 1).collect()]
    if len(rows) <= limit:
        return sort_rows(rows, keys), len(rows)
    order = [F.desc(k[1:]) if k.startswith("-") else F.asc_nulls_last(k) for k in keys]
    top = [r.asDict(recursive=True) for r in df.orderBy(*order).limit(limit).collect()]
    return top, df.count()


def _count_kinds(result: AuditResult, name: str, collected: tuple[list[Row], int]) -> dict[str, int]:
    """Rows per kind: from the collected rows, or a Spark count when the summary was capped."""
    rows, total = collected
    if total > len(rows):
        return {r["kind"]: int(r["count"]) for r in result.tables[name].groupBy("kind").count().collect()}
    return dict(Counter(str(r["kind"]) for r in rows))


# Above this many flagged keys the records are fetched by Spark (a broadcast join, findings as Spark
# frames) instead of with the window aggregate into Python.
MAX_FETCHED_KEYS = 20_000
KEY_PROBLEM_SCHEMA = StructType(
    [StructField(c, StringType()) for c in ("kind", "message_key", "route", "direction", "source_protocol",
                                            "target_protocol")]
    + [StructField("qos", IntegerType()), StructField("client_id", StringType()),
       StructField("destination", StringType()), StructField("event_time", StringType()),
       StructField("age_seconds", DoubleType())])
DUPLICATE_SCHEMA = StructType(
    [StructField(c, StringType()) for c in ("kind", "message_key", "route", "client_id", "destination")]
    + [StructField("qos", IntegerType()), StructField("copies", LongType()),
       StructField("max_redelivery", IntegerType()), StructField("first_egress_time", StringType())])


def fetched_records(groups: list[Row]) -> list[Row]:
    """The flagged keys' records from the window aggregate's groups, each repeated n times."""
    out = []
    for g in groups:
        if int(g["tag"]) in (TAG_VOLUME, TAG_FETCH) and g["dup"] is not None:  # type: ignore[call-overload]
            out.extend([g] * int(g["n"]))  # type: ignore[call-overload]
    return out


def key_problem_rows(data: AuditData, records: list[Row]) -> list[Row]:
    """key_problems (the Spark version) on the fetched records: lost ok ingress, unexpected egress."""
    as_of_us = micros(data.as_of) if data.as_of is not None else 0
    out = []
    for r in records:
        kind = r["kind"]
        lost = kind == "lost" and r["direction"] == Direction.INGRESS.value and r["status"] == Status.OK.value
        if not lost and kind != "unexpected_egress":
            continue
        t = int(r["t_rec"])  # type: ignore[call-overload]
        out.append({"kind": kind, **{c: r[c] for c in ("message_key", "route", "direction", "source_protocol",
                                                        "target_protocol", "qos", "client_id", "destination")},
                    "event_time": _ts(t), "age_seconds": (as_of_us - t) / 1e6 if lost else None})
    return out


def duplicate_rows(data: AuditData, records: list[Row]) -> list[Row]:
    """duplicates (the Spark version) on the fetched records: ok egress copies per key, route and client."""
    per_client: dict[tuple[object, ...], list[Row]] = {}
    for r in records:
        if r["dup"] and r["direction"] == Direction.EGRESS.value and r["status"] == Status.OK.value:
            per_client.setdefault((r["message_key"], r["route"], r["client_id"]), []).append(r)
    out = []
    for (key, route, client), copies in per_client.items():
        first = min(copies, key=lambda r: int(r["t_rec"]))  # type: ignore[call-overload]
        shown = len(copies) > 1 and bool(first["in_window"])
        if data.config.incremental:  # reported by an earlier run unless a copy is new
            shown = shown and any(r["counted"] for r in copies)
        if not shown:
            continue
        max_redelivery = max(int(r["redelivery_count"]) for r in copies)  # type: ignore[call-overload]
        qos = max(int(r["qos"]) for r in copies)  # type: ignore[call-overload]
        destinations = [str(r["destination"]) for r in copies if r["destination"] is not None]
        allowed = qos == 1 and len(copies) <= max_redelivery + 1
        out.append({"kind": "allowed" if allowed else "suspicious", "message_key": key, "route": route,
                    "client_id": client, "destination": min(destinations) if destinations else None, "qos": qos,
                    "copies": len(copies), "max_redelivery": max_redelivery,
                    "first_egress_time": _ts(int(first["t_rec"]))})  # type: ignore[call-overload]
    return out


def run_audit(data: AuditData) -> AuditResult:
    """Flag keys, then one window job that also fetches the flagged keys' records; build every finding.

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
                                    ("duplicates", duplicate_rows(data, records), DUPLICATE_SCHEMA)):
            result.tables.put_rows(name, found, schema)
            collected[name] = (sort_rows(found, SORT_KEYS[name])[:limit], len(found))
            kinds[name] = dict(Counter(str(r["kind"]) for r in found))
    else:
        def per_key() -> dict[str, tuple[list[Row], int]]:
            records = flagged_records(data, hashed)
            result.cached.append(records)
            result.tables.put("key_problems", key_problems(data, records))
            result.tables.put("duplicates", duplicates(data, records))
            return {name: _collect(name, result.tables[name], limit) for name in CAPPED}

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
    problems, dups = (kinds[name] if name in kinds else _count_kinds(result, name, collected[name])
                      for name in ("key_problems", "duplicates"))
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
