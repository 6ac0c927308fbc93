"""The findings: the window aggregate's collected groups finished in Python (volume and trend, failures,
top offenders, conversion changes, latency percentiles, payload sizes), their table schemas and order,
and AuditResult, which holds every finding as rows and as Spark frames (the Parquet tables)."""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DoubleType, LongType, StringType, StructField, StructType

from mappings.convlog_schema import Status, format_timestamp, parse_timestamp
from spark_audit.aggregates import (
    SIZE_EDGES,
    SIZE_LABELS,
    TAG_FETCH,
    TAG_FINDING,
    TAG_LATENCY,
    TAG_VOLUME,
    VOLUME_DIMS,
)
from spark_audit.frames import local_frame
from spark_audit.scope import AuditData, Row, timestamp_text

PERCENTILES = (0.5, 0.95, 0.99)
PERCENTILE_ACCURACY = 1000  # rank error <= 0.1%; exact below 1000 samples per route


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

    def rows(self, name: str) -> tuple[list[Row], StructType] | None:
        """The table's rows and schema, while it is rows (None once it is a frame, or made as one)."""
        return self._rows.get(name)

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
    # Losses per route and per destination ({"by_route": [...], "by_destination": [...]}; see count_losses).
    loss_counts: dict[str, list[Row]] = field(default_factory=dict)
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
        row = hourly.setdefault(key, {"window_start": timestamp_text(int(g["hour_us"])),  # type: ignore[call-overload]
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
             "first_seen": timestamp_text(int(r.pop("t_min"))), "last_seen": timestamp_text(int(r.pop("t_max")))}  # type: ignore[call-overload]
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
    "failure_records": ("event_time", "message_key", "route", "direction", "status"),  # the first by time
    "failures": ("-records", "status", "route", "reason"),
    "top_clients": ("-problems", "client_id"),
    "top_destinations": ("-problems", "destination"),
    "conversion_changes": ("-occurrences", "route", "change", "name", "detail"),
    "latency": ("route",),
    "payload_sizes": ("route", "direction"),
}
# Can be as long as the log: capped at max_items in the summary (failure records: at keys.FAILURE_ITEMS).
CAPPED = ("key_problems", "duplicates", "failure_records")


def sort_rows(rows: list[Row], keys: tuple[str, ...]) -> list[Row]:
    """Order collected rows by the given columns ('-' prefix: descending), nulls last in each."""
    out = list(rows)
    for k in reversed(keys):  # stable sorts, least significant key first
        name = k.lstrip("-")
        present = [r for r in out if r[name] is not None]
        present.sort(key=lambda r: r[name], reverse=k.startswith("-"))  # type: ignore[arg-type, return-value]
        out = present + [r for r in out if r[name] is None]
    return out


def collect_finding(name: str, df: DataFrame, limit: int) -> tuple[list[Row], int]:
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


def count_kinds(result: AuditResult, name: str, collected: tuple[list[Row], int]) -> dict[str, int]:
    """Rows per kind: from the collected rows, or a Spark count when the summary was capped."""
    rows, total = collected
    if total > len(rows):
        return {r["kind"]: int(r["count"]) for r in result.tables[name].groupBy("kind").count().collect()}
    return dict(Counter(str(r["kind"]) for r in rows))


def count_losses(rows: list[Row]) -> dict[str, list[Row]]:
    """Losses per route and per destination (the topic or queue the lost message was taken from), most
    first, from every key_problems row."""
    lost = [r for r in rows if r["kind"] == "lost"]
    return _loss_count_rows(Counter((r["route"], r["destination"]) for r in lost))


def loss_counts(result: AuditResult, collected: tuple[list[Row], int]) -> dict[str, list[Row]]:
    """count_losses: from the collected rows, or one Spark aggregation when the summary was capped."""
    rows, total = collected
    if total <= len(rows):
        return count_losses(rows)
    groups = result.tables["key_problems"].where("kind = 'lost'").groupBy("route", "destination").count().collect()
    return _loss_count_rows(Counter({(r["route"], r["destination"]): int(r["count"]) for r in groups}))


def _loss_count_rows(per_pair: Counter[tuple[object, object]]) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = {}
    for name, index in (("route", 0), ("destination", 1)):
        counts: Counter[object] = Counter()
        for pair, n in per_pair.items():
            counts[pair[index]] += n
        out[f"by_{name}"] = sort_rows([{name: k, "losses": n} for k, n in counts.items()], ("-losses", name))
    return out
