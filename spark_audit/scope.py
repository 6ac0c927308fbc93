"""What an audit reads: its configuration, the audit frame (pruned log rows plus in_window and counted),
the record conditions and time helpers every query shares."""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from mappings.convlog_schema import Direction, Status, format_timestamp
from spark_audit.schema import KEY_CHECK, KEY_HASH

AUDIT_COLUMNS = (
    "event_time", "message_key", "route", "direction", "source_protocol", "target_protocol",
    "source_type", "target_type", "qos", "source_size", "target_size", "status", "reason",
    "findings", "latency_us", "client_id", "destination", "redelivery_count", KEY_HASH, KEY_CHECK,
)
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


def window_filter(config: AuditConfig, widen: timedelta) -> Column:
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


def audit_frame(source: DataFrame, config: AuditConfig, counted: Column) -> DataFrame:
    """The audit's columns plus in_window and counted (the rows whose volume and findings are counted)."""
    return source.select(*AUDIT_COLUMNS, in_window(config).alias("in_window"), counted.alias("counted"))


def timestamp_text(us: int) -> str:
    """Epoch microseconds as the log's UTC timestamp text."""
    return format_timestamp(EPOCH + timedelta(microseconds=us))
