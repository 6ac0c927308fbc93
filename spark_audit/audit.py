"""The audit: one cached scan of the Parquet log; every finding is a small DataFrame built from it."""
from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from mappings.convlog_schema import Direction, Status
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
MAX_ITEMS = 1000  # list findings (losses, duplicates) kept in the JSON summary; Parquet has them all

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


@dataclass(slots=True)
class AuditData:
    """The cached frame (window widened by the grace period for matching) and its bounds."""

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

    @property
    def gate_failed(self) -> bool:
        """True when the run should fail a pipeline: any loss or suspicious duplicate."""
        return bool(self.counts.get("losses") or self.counts.get("duplicates_suspicious"))

    def cleanup(self) -> None:
        for df in self.tables.values():
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
    """Rows inside [since - widen, until + widen), with partition pruning on the date column."""
    cond = F.lit(True)
    if config.since is not None:
        lo = config.since - widen
        lo_date = F.lit(lo.astimezone(UTC).date())
        cond = cond & (F.col("date") >= lo_date) & (F.col("event_time") >= ts_lit(lo))
    if config.until is not None:
        hi = config.until + widen
        hi_date = F.lit(hi.astimezone(UTC).date())
        cond = cond & (F.col("date") <= hi_date) & (F.col("event_time") < ts_lit(hi))
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
    """Read the Parquet log once (pruned to the window plus grace), cache it and count it."""
    if Path(parquet_dir).exists() and any(Path(parquet_dir).glob("date=*")):
        source = spark.read.parquet(parquet_dir)
        source = source.where(_window_filter(config, timedelta(seconds=config.grace_seconds)))
    else:
        source = spark.createDataFrame([], record_schema())
    frame = source.select(*AUDIT_COLUMNS, in_window(config).alias("in_window"))
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


def _trend(df: DataFrame, unit: str) -> DataFrame:
    """Add previous window's records (0 when that window had none) and the change against it."""
    w = Window.partitionBy(*VOLUME_DIMS).orderBy("window_start")
    step = F.expr(f"INTERVAL 1 {unit.upper()}")
    prev = F.when(F.lag("window_start").over(w) == F.col("window_start") - step, F.lag("records").over(w))
    return (
        df.withColumn("previous_records", F.coalesce(prev, F.lit(0)).cast("long"))
        .withColumn("change", F.col("records") - F.col("previous_records"))
        .withColumn("window", F.lit(unit))
        .withColumn("window_start", ts_text("window_start"))
        .select("window", "window_start", *VOLUME_DIMS, "records", "source_bytes", "previous_records",
                "change")
    )


def volume(data: AuditData) -> tuple[DataFrame, DataFrame]:
    """Records and bytes per hour and per day for each route/direction/protocol/type/status, with trend."""
    hourly = (
        data.frame.where("in_window")
        .groupBy(F.date_trunc("hour", "event_time").alias("window_start"), *VOLUME_DIMS)
        .agg(F.count(F.lit(1)).alias("records"), F.sum("source_size").alias("source_bytes"))
        .persist()
    )
    daily = hourly.groupBy(F.date_trunc("day", "window_start").alias("window_start"), *VOLUME_DIMS).agg(
        F.sum("records").alias("records"), F.sum("source_bytes").alias("source_bytes")
    )
    return _trend(hourly, "hour"), _trend(daily, "day")


def key_chains(data: AuditData) -> DataFrame:
    """Per (message_key, route, egress client): ingress and egress counts, times, redeliveries, QoS."""
    f = data.frame
    egress_client = F.when(is_egress(), F.coalesce(F.col("client_id"), F.lit("")))
    return (
        f.groupBy("message_key", "route", egress_client.alias("egress_client"))
        .agg(
            F.sum((is_ingress() & is_ok()).cast("int")).alias("ingress_ok"),
            F.sum(is_ingress().cast("int")).alias("ingress_n"),
            F.sum(is_egress().cast("int")).alias("egress_n"),
            F.sum((is_egress() & is_ok()).cast("int")).alias("egress_ok"),
            F.min(F.when(is_ingress(), F.col("event_time"))).alias("ingress_time"),
            F.min(F.when(is_egress(), F.col("event_time"))).alias("first_egress_time"),
            F.max(F.when(is_egress() & is_ok(), F.col("redelivery_count"))).alias("max_redelivery"),
            F.max("qos").alias("qos"),
            F.min(F.when(is_ingress(), F.col("client_id"))).alias("ingress_client"),
            F.min("destination").alias("destination"),
            F.min("source_protocol").alias("source_protocol"),
            F.min("target_protocol").alias("target_protocol"),
        )
        .persist()
    )


def key_problems(data: AuditData, chains: DataFrame) -> DataFrame:
    """Losses (ingress ok, no egress after grace) and unexpected egress (egress, no ingress) per key/route."""
    config = data.config
    grace_us = int(config.grace_seconds * 1_000_000)
    as_of_us = micros(data.as_of) if data.as_of is not None else 0
    per_key = chains.groupBy("message_key", "route").agg(
        F.sum("ingress_ok").alias("ingress_ok"),
        F.sum("ingress_n").alias("ingress_n"),
        F.sum("egress_n").alias("egress_n"),
        F.min("ingress_time").alias("ingress_time"),
        F.min("first_egress_time").alias("first_egress_time"),
        F.max("qos").alias("qos"),
        F.coalesce(F.min("ingress_client"), F.min(F.nullif("egress_client", F.lit("")))).alias("client_id"),
        F.min(F.when(F.col("egress_client").isNull(), F.col("destination"))).alias("ingress_destination"),
        F.min(F.when(F.col("egress_client").isNotNull(), F.col("destination"))).alias("egress_destination"),
        F.min("source_protocol").alias("source_protocol"),
        F.min("target_protocol").alias("target_protocol"),
    )
    lost = (
        (F.col("ingress_ok") > 0)
        & (F.col("egress_n") == 0)
        & (F.unix_micros("ingress_time") < F.lit(as_of_us - grace_us))
        & in_window(config, "ingress_time")
    )
    unexpected = (F.col("ingress_n") == 0) & (F.col("egress_n") > 0) & in_window(config, "first_egress_time")
    return (
        per_key.where(lost | unexpected)
        .select(
            F.when(lost, F.lit("lost")).otherwise(F.lit("unexpected_egress")).alias("kind"),
            "message_key", "route", "source_protocol", "target_protocol", "qos", "client_id",
            F.coalesce("ingress_destination", "egress_destination").alias("destination"),
            ts_text("ingress_time").alias("ingress_time"),
            ts_text("first_egress_time").alias("first_egress_time"),
            F.when(lost, (F.lit(as_of_us) - F.unix_micros("ingress_time")) / 1e6).alias("age_seconds"),
            F.col("egress_n").alias("egress_records"),
        )
        .persist()
    )


def duplicates(data: AuditData, chains: DataFrame) -> DataFrame:
    """More than one ok egress per key/route/client: allowed for QoS 1 redeliveries, else suspicious."""
    copies = F.col("egress_ok")
    allowed = (F.col("qos") == 1) & (copies <= F.coalesce(F.col("max_redelivery"), F.lit(0)) + 1)
    return (
        chains.where((copies > 1) & in_window(data.config, "first_egress_time"))
        .select(
            F.when(allowed, F.lit("allowed")).otherwise(F.lit("suspicious")).alias("kind"),
            "message_key", "route", F.col("egress_client").alias("client_id"), "destination", "qos",
            copies.alias("copies"), F.coalesce("max_redelivery", F.lit(0)).alias("max_redelivery"),
            ts_text("first_egress_time").alias("first_egress_time"),
        )
        .persist()
    )


def failures(data: AuditData) -> DataFrame:
    """Failed, backed-out and dropped records by status, route and reason."""
    return (
        data.frame.where(F.col("in_window") & ~is_ok())
        .groupBy("status", "route", F.coalesce("reason", F.lit("(no reason)")).alias("reason"))
        .agg(
            F.count(F.lit(1)).alias("records"),
            ts_text(F.min("event_time")).alias("first_seen"),
            ts_text(F.max("event_time")).alias("last_seen"),
        )
    )


def top_offenders(data: AuditData, column: str) -> DataFrame:
    """The top-N clients or destinations by records that were not ok, split by status."""
    statuses = [s.value for s in Status if s is not Status.OK]
    return (
        data.frame.where(F.col("in_window") & ~is_ok() & F.col(column).isNotNull())
        .groupBy(column)
        .agg(
            F.count(F.lit(1)).alias("problems"),
            *[F.sum((F.col("status") == s).cast("long")).alias(s) for s in statuses],
        )
        .orderBy(F.desc("problems"), column)
        .limit(data.config.top_n)
    )


def conversion_changes(data: AuditData) -> DataFrame:
    """What conversion dropped, coerced, truncated, defaulted or renamed, per route and property name."""
    return (
        data.frame.where(F.col("in_window") & (F.size("findings") > 0))
        .select("route", F.explode("findings").alias("f"))
        .groupBy("route", F.col("f.change").alias("change"), F.col("f.name").alias("name"))
        .agg(F.count(F.lit(1)).alias("occurrences"), F.min("f.detail").alias("example_detail"))
    )


def route_stats(data: AuditData) -> tuple[DataFrame, DataFrame]:
    """Latency p50/p95/p99/max of ok egress per route, and payload size statistics per route/direction."""
    w = data.frame.where("in_window")
    lat = F.when(is_egress() & is_ok(), F.col("latency_us"))
    pct = F.percentile_approx(lat, list(PERCENTILES))
    latency = (
        w.groupBy("route")
        .agg(F.count(lat).alias("samples"), pct.alias("p"), F.max(lat).alias("max_us"),
             F.avg(lat).alias("mean_us"))
        .where(F.col("samples") > 0)
        .select("route", "samples", F.col("p")[0].alias("p50_us"), F.col("p")[1].alias("p95_us"),
                F.col("p")[2].alias("p99_us"), "max_us", "mean_us")
    )
    size = F.when(is_ingress(), F.col("source_size")).otherwise(F.col("target_size"))
    bucket = F.lit(len(SIZE_EDGES) - 1)
    for i in range(len(SIZE_EDGES) - 2, -1, -1):
        bucket = F.when(size < F.lit(SIZE_EDGES[i + 1]), F.lit(i)).otherwise(bucket)
    sizes = (
        w.where(size.isNotNull())
        .groupBy("route", "direction")
        .agg(
            F.count(F.lit(1)).alias("messages"),
            F.min(size).alias("min_bytes"),
            F.percentile_approx(size, [0.5, 0.95]).alias("p"),
            F.max(size).alias("max_bytes"),
            F.sum(size).alias("total_bytes"),
            *[F.sum((bucket == i).cast("long")).alias(f"b{i}") for i in range(len(SIZE_EDGES))],
        )
        .select(
            "route", "direction", "messages", "min_bytes", F.col("p")[0].alias("p50_bytes"),
            F.col("p")[1].alias("p95_bytes"), "max_bytes", "total_bytes",
            F.array(*[
                F.struct(F.lit(label).alias("bucket"), F.col(f"b{i}").alias("messages"))
                for i, label in enumerate(SIZE_LABELS)
            ]).alias("histogram"),
        )
    )
    return latency, sizes


# How each finding's rows are ordered in the summary ("-" = descending); Spark does not sort them.
SORT_KEYS: dict[str, tuple[str, ...]] = {
    "volume_hourly": ("window_start", *VOLUME_DIMS),
    "volume_daily": ("window_start", *VOLUME_DIMS),
    "key_problems": ("kind", "route", "ingress_time", "first_egress_time", "message_key"),
    "duplicates": ("kind", "route", "message_key", "client_id"),
    "failures": ("-records", "status", "route", "reason"),
    "top_clients": ("-problems", "client_id"),
    "top_destinations": ("-problems", "destination"),
    "conversion_changes": ("-occurrences", "route", "change", "name"),
    "latency": ("route",),
    "payload_sizes": ("route", "direction"),
}
CAPPED = ("key_problems", "duplicates")  # can be as long as the log: capped at max_items in the summary

Row = dict[str, object]


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
    chains = key_chains(data)
    hourly, daily = volume(data)
    latency, sizes = route_stats(data)
    result.tables = {
        "volume_hourly": hourly,
        "volume_daily": daily,
        "key_problems": key_problems(data, chains),
        "duplicates": duplicates(data, chains),
        "failures": failures(data),
        "top_clients": top_offenders(data, "client_id"),
        "top_destinations": top_offenders(data, "destination"),
        "conversion_changes": conversion_changes(data),
        "latency": latency,
        "payload_sizes": sizes,
    }
    limit = data.config.max_items
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        futures = {name: pool.submit(_collect, name, df, limit) for name, df in result.tables.items()}
        collected = {name: f.result() for name, f in futures.items()}
    result.rows = {name: rows for name, (rows, _total) in collected.items()}
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
