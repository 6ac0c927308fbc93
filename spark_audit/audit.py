"""The audit: every finding is a small aggregate of the pruned Parquet log, no UDFs; jobs run in parallel."""
from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from mappings.convlog_schema import Direction, Status, format_timestamp, parse_timestamp
from spark_audit.schema import record_schema

AUDIT_COLUMNS = (
    "event_time", "message_key", "route", "direction", "source_protocol", "target_protocol",
    "source_type", "target_type", "qos", "source_size", "target_size", "status", "reason",
    "findings", "latency_us", "client_id", "destination", "redelivery_count",
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
TS_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'"


def is_ingress() -> Column:
    return F.col("direction") == F.lit(Direction.INGRESS.value)


def is_egress() -> Column:
    return F.col("direction") == F.lit(Direction.EGRESS.value)


def is_ok() -> Column:
    return F.col("status") == F.lit(Status.OK.value)


@dataclass(frozen=True, slots=True)
class AuditConfig:
    """What to audit: time window [since, until), grace before an ingress counts as lost, top-N size."""

    since: datetime | None = None
    until: datetime | None = None
    grace_seconds: float = 300.0
    top_n: int = 10
    max_items: int = MAX_ITEMS
    cache: bool = False  # cache the raw frame once instead of pruned Parquet scans per finding


@dataclass(slots=True)
class AuditData:
    """The pruned frame (window widened by the grace period for matching), its counts and "as of"."""

    frame: DataFrame
    rows_loaded: int
    rows_in_window: int
    as_of: datetime | None
    config: AuditConfig


@dataclass(slots=True)
class AuditResult:
    """Every finding as a DataFrame (for Parquet), its collected rows (capped), and headline counts."""

    data: AuditData
    tables: dict[str, DataFrame] = field(default_factory=dict)
    rows: dict[str, list[dict[str, object]]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    cached: list[DataFrame] = field(default_factory=list)

    @property
    def gate_failed(self) -> bool:
        """True when the run should fail a pipeline: any loss or suspicious duplicate."""
        return bool(self.counts.get("losses") or self.counts.get("duplicates_suspicious"))

    def cleanup(self) -> None:
        for df in [*self.tables.values(), *self.cached]:
            df.unpersist()
        self.data.frame.unpersist()


def micros(value: datetime) -> int:
    """Microseconds since the epoch for an aware datetime."""
    delta = value.astimezone(UTC) - datetime(1970, 1, 1, tzinfo=UTC)
    return delta // timedelta(microseconds=1)


def ts_lit(value: datetime) -> Column:
    return F.timestamp_micros(F.lit(micros(value)))


def ts_text(col: Column | str) -> Column:
    """A timestamp rendered as the log's UTC string (so collected values do not depend on local TZ)."""
    return F.date_format(col, TS_FORMAT)


def _window_filter(config: AuditConfig, widen: timedelta) -> Column:
    """Rows inside [since - widen, until + widen), with partition pruning on date and hour."""
    cond = F.lit(True)
    date, hour = F.col("date"), F.col("hour")
    if config.since is not None:
        lo = (config.since - widen).astimezone(UTC)
        lo_date = F.lit(lo.date())
        partitions = (date > lo_date) | ((date == lo_date) & (hour >= F.lit(lo.hour)))
        cond = cond & partitions & (F.col("event_time") >= ts_lit(lo))
    if config.until is not None:
        hi = (config.until + widen).astimezone(UTC)
        hi_date = F.lit(hi.date())
        partitions = (date < hi_date) | ((date == hi_date) & (hour <= F.lit(hi.hour)))
        cond = cond & partitions & (F.col("event_time") < ts_lit(hi))
    return cond


def in_window(config: AuditConfig, col: Column | str = "event_time") -> Column:
    """True for timestamps inside [since, until)."""
    c = F.col(col) if isinstance(col, str) else col
    cond = F.lit(True)
    if config.since is not None:
        cond = cond & (c >= ts_lit(config.since))
    if config.until is not None:
        cond = cond & (c < ts_lit(config.until))
    return cond


def load(spark: SparkSession, parquet_dir: str, config: AuditConfig) -> AuditData:
    """Define the pruned Parquet frame (window plus grace), count it and find "as of"; cache on request.

    Not caching is the default: measured on local[2], building the columnar cache of 1M rows costs
    more than the pruned Parquet scans it saves (see bench/README.md).
    """
    if Path(parquet_dir).exists() and any(Path(parquet_dir).glob("date=*")):
        source = spark.read.parquet(parquet_dir)
        source = source.where(_window_filter(config, timedelta(seconds=config.grace_seconds)))
    else:
        source = spark.createDataFrame([], record_schema())
    frame = source.select(*AUDIT_COLUMNS, in_window(config).alias("in_window"))
    if config.cache:
        frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
    stats = frame.agg(
        F.count(F.lit(1)).alias("n"),
        F.coalesce(F.sum(F.col("in_window").cast("long")), F.lit(0)).alias("w"),
        F.unix_micros(F.max("event_time")).alias("hi"),
    ).first()
    assert stats is not None
    as_of = config.until
    if as_of is None and stats["hi"] is not None:
        as_of = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=stats["hi"])
    return AuditData(frame, int(stats["n"]), int(stats["w"]), as_of, config)


VOLUME_SCHEMA = StructType(
    [StructField("window", StringType()), StructField("window_start", StringType())]
    + [StructField(d, StringType()) for d in VOLUME_DIMS]
    + [StructField(c, LongType()) for c in ("records", "source_bytes", "previous_records", "change")]
)


def volume(data: AuditData) -> DataFrame:
    """Records and bytes per hour for each route/direction/protocol/type/status (days are rolled up)."""
    return (
        data.frame.where("in_window")
        .groupBy(F.date_trunc("hour", "event_time").alias("window_start"), *VOLUME_DIMS)
        .agg(F.count(F.lit(1)).alias("records"), F.sum("source_size").alias("source_bytes"))
        .withColumn("window_start", ts_text("window_start"))
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


def flag_keys(data: AuditData) -> DataFrame:
    """One aggregation per (message_key, route), integer sums only, keeping just the keys with a problem.

    kind: 'lost' (an ok ingress in the window, older than the grace period, and no egress at all) or
    'unexpected_egress' (egress in the window, no ingress); dup: more than one ok egress (split per
    client later). The result is small.
    """
    config = data.config
    cutoff_us = (micros(data.as_of) if data.as_of is not None else 0) - int(config.grace_seconds * 1_000_000)
    window = F.col("in_window")
    eligible = is_ingress() & is_ok() & window & (F.unix_micros("event_time") < F.lit(cutoff_us))

    def count(cond: Column) -> Column:
        return F.sum(cond.cast("int"))

    chains = data.frame.groupBy("message_key", "route").agg(
        count(is_ingress()).alias("ingress_n"),
        count(eligible).alias("eligible_n"),
        count(is_egress()).alias("egress_n"),
        count(is_egress() & window).alias("egress_in_window"),
        count(is_egress() & is_ok()).alias("egress_ok"),
    )
    lost = (F.col("eligible_n") > 0) & (F.col("egress_n") == 0)
    unexpected = (F.col("ingress_n") == 0) & (F.col("egress_in_window") > 0)
    kind = F.when(lost, F.lit("lost")).when(unexpected, F.lit("unexpected_egress"))
    return chains.select(
        "message_key", "route", kind.alias("kind"), (F.col("egress_ok") > 1).alias("dup")
    ).where(F.col("kind").isNotNull() | F.col("dup"))


def flagged_records(data: AuditData, flagged: DataFrame) -> DataFrame:
    """The records of the flagged keys (few), fetched in one pass with a broadcast join and cached."""
    return data.frame.join(F.broadcast(flagged), ["message_key", "route"]).persist()


def key_problems(data: AuditData, records: DataFrame) -> DataFrame:
    """Lost ingress and unexpected egress records, with their details."""
    as_of_us = micros(data.as_of) if data.as_of is not None else 0
    kind = F.col("kind")
    wanted = (kind == "lost") & is_ingress() & is_ok() | (kind == "unexpected_egress")
    return records.where(kind.isNotNull() & wanted).select(
        "kind", "message_key", "route", "direction", "source_protocol", "target_protocol", "qos",
        "client_id", "destination", ts_text("event_time").alias("event_time"),
        F.when(kind == "lost", (F.lit(as_of_us) - F.unix_micros("event_time")) / 1e6).alias("age_seconds"),
    )


def duplicates(data: AuditData, records: DataFrame) -> DataFrame:
    """More than one ok egress per key/route/client: allowed for QoS 1 redeliveries, else suspicious."""
    per_client = (
        records.where(F.col("dup") & is_egress() & is_ok())
        .groupBy("message_key", "route", "client_id")
        .agg(
            F.count(F.lit(1)).alias("copies"),
            F.max("redelivery_count").alias("max_redelivery"),
            F.max("qos").alias("qos"),
            F.min("destination").alias("destination"),
            F.min("event_time").alias("first_egress_time"),
        )
    )
    copies = F.col("copies")
    allowed = (F.col("qos") == 1) & (copies <= F.col("max_redelivery") + 1)
    return per_client.where((copies > 1) & in_window(data.config, "first_egress_time")).select(
        F.when(allowed, F.lit("allowed")).otherwise(F.lit("suspicious")).alias("kind"),
        "message_key", "route", "client_id", "destination", "qos", "copies", "max_redelivery",
        ts_text("first_egress_time").alias("first_egress_time"),
    )


def not_ok_records(data: AuditData) -> DataFrame:
    """Records in the window whose status is not ok (few): one pass, cached for the three findings on them."""
    return (
        data.frame.where(F.col("in_window") & ~is_ok())
        .select("status", "route", "reason", "client_id", "destination", "event_time")
        .persist()
    )


def failures(not_ok: DataFrame) -> DataFrame:
    """Failed, backed-out and dropped records by status, route and reason."""
    return (
        not_ok.groupBy("status", "route", F.coalesce("reason", F.lit("(no reason)")).alias("reason"))
        .agg(
            F.count(F.lit(1)).alias("records"),
            ts_text(F.min("event_time")).alias("first_seen"),
            ts_text(F.max("event_time")).alias("last_seen"),
        )
    )


def top_offenders(not_ok: DataFrame, column: str, top_n: int) -> DataFrame:
    """The top-N clients or destinations by records that were not ok, split by status."""
    statuses = [s.value for s in Status if s is not Status.OK]
    return (
        not_ok.where(F.col(column).isNotNull())
        .groupBy(column)
        .agg(
            F.count(F.lit(1)).alias("problems"),
            *[F.sum((F.col("status") == s).cast("long")).alias(s) for s in statuses],
        )
        .orderBy(F.desc("problems"), column)
        .limit(top_n)
    )


def conversion_changes(data: AuditData) -> DataFrame:
    """What conversion dropped, coerced, truncated, defaulted or renamed, per route and property name."""
    return (
        data.frame.where(F.col("in_window") & (F.size("findings") > 0))
        .select("route", F.explode("findings").alias("f"))
        .groupBy("route", F.col("f.change").alias("change"), F.col("f.name").alias("name"),
                 F.col("f.detail").alias("detail"))
        .agg(F.count(F.lit(1)).alias("occurrences"))
    )


def route_stats(data: AuditData) -> tuple[DataFrame, DataFrame, DataFrame]:
    """One pass per route and direction: latency p50/p95/p99/max of ok egress, payload size histogram.

    Returns (latency per route, sizes per route and direction, the cached aggregate both come from).
    """
    size = F.when(is_ingress(), F.col("source_size")).otherwise(F.col("target_size"))
    bucket = F.lit(len(SIZE_EDGES) - 1)
    for i in range(len(SIZE_EDGES) - 2, -1, -1):
        bucket = F.when(size < F.lit(SIZE_EDGES[i + 1]), F.lit(i)).otherwise(bucket)
    latency = F.when(is_egress() & is_ok(), F.col("latency_us"))
    stats = (
        data.frame.where("in_window")
        .select("route", "direction", size.alias("size"), bucket.alias("bucket"), latency.alias("lat"))
        .groupBy("route", "direction")
        .agg(
            F.count("size").alias("messages"),
            F.min("size").alias("min_bytes"),
            F.max("size").alias("max_bytes"),
            F.avg("size").alias("mean_bytes"),
            F.sum("size").alias("total_bytes"),
            *[F.count_if(F.col("bucket") == i).alias(f"b{i}") for i in range(len(SIZE_EDGES))],
            F.count("lat").alias("samples"),
            F.percentile_approx("lat", list(PERCENTILES), PERCENTILE_ACCURACY).alias("p"),
            F.max("lat").alias("max_us"),
            F.avg("lat").alias("mean_us"),
        )
        .persist()
    )
    latency_table = stats.where(F.col("samples") > 0).select(
        "route", "samples", F.col("p")[0].alias("p50_us"), F.col("p")[1].alias("p95_us"),
        F.col("p")[2].alias("p99_us"), "max_us", "mean_us",
    )
    sizes = stats.where(F.col("messages") > 0).select(
        "route", "direction", "messages", "min_bytes", "max_bytes", "mean_bytes", "total_bytes",
        F.array(*[
            F.struct(F.lit(label).alias("bucket"), F.col(f"b{i}").alias("messages"))
            for i, label in enumerate(SIZE_LABELS)
        ]).alias("histogram"),
    )
    return latency_table, sizes, stats


# How each finding's rows are ordered in the summary ("-" = descending); Spark does not sort them.
SORT_KEYS: dict[str, tuple[str, ...]] = {
    "volume_hourly": ("window_start", *VOLUME_DIMS),
    "volume_daily": ("window_start", *VOLUME_DIMS),
    "key_problems": ("kind", "route", "event_time", "message_key"),
    "duplicates": ("kind", "route", "message_key", "client_id"),
    "failures": ("-records", "status", "route", "reason"),
    "top_clients": ("-problems", "client_id"),
    "top_destinations": ("-problems", "destination"),
    "conversion_changes": ("-occurrences", "route", "change", "name", "detail"),
    "latency": ("route",),
    "payload_sizes": ("route", "direction"),
}
CAPPED = ("key_problems", "duplicates")  # can be as long as the log: capped at max_items in the summary


def sort_rows(rows: list[Row], keys: tuple[str, ...]) -> list[Row]:
    """Order collected rows by the given columns (nulls last; '-' prefix sorts a number descending)."""

    def key(row: Row) -> tuple[tuple[bool, object], ...]:
        out = []
        for k in keys:
            value = row[k.lstrip("-")]
            if k.startswith("-") and isinstance(value, int | float):
                value = -value
            out.append((value is None, "" if value is None else value))
        return tuple(out)

    return sorted(rows, key=key)


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


def run_audit(data: AuditData, parallel: int = 4) -> AuditResult:
    """Build every finding from the cached frame and collect the (small) results, jobs in parallel."""
    result = AuditResult(data)
    records = flagged_records(data, flag_keys(data))
    result.cached.append(records)
    latency, sizes, stats = route_stats(data)
    not_ok = not_ok_records(data)
    result.cached.extend([not_ok, stats])
    result.tables = {
        "volume_hourly": volume(data),
        "key_problems": key_problems(data, records),
        "duplicates": duplicates(data, records),
        "failures": failures(not_ok),
        "top_clients": top_offenders(not_ok, "client_id", data.config.top_n),
        "top_destinations": top_offenders(not_ok, "destination", data.config.top_n),
        "conversion_changes": conversion_changes(data),
        "latency": latency,
        "payload_sizes": sizes,
    }
    limit = data.config.max_items
    tables = result.tables

    def collect_group(names: tuple[str, ...]) -> dict[str, tuple[list[Row], int]]:
        return {name: _collect(name, tables[name], limit) for name in names}

    # Findings built on one cached intermediate run one after the other in one thread (the first fills
    # the cache); the groups run in parallel.
    sequential = [CAPPED, ("failures", "top_clients", "top_destinations"), ("latency", "payload_sizes")]
    groups = [*sequential, *[(name,) for name in tables if all(name not in g for g in sequential)]]
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        collected = {k: v for f in [pool.submit(collect_group, g) for g in groups] for k, v in f.result().items()}
    result.rows = {name: rows for name, (rows, _total) in collected.items()}
    hourly = result.rows["volume_hourly"]
    result.rows["volume_hourly"] = with_trend(hourly, "hour")
    result.rows["volume_daily"] = with_trend(roll_up_days(hourly), "day")
    spark = data.frame.sparkSession
    for name in ("volume_hourly", "volume_daily"):
        result.tables[name] = spark.createDataFrame(result.rows[name], VOLUME_SCHEMA)
    problems = _count_kinds(result, "key_problems", collected["key_problems"])
    dups = _count_kinds(result, "duplicates", collected["duplicates"])
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
