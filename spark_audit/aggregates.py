"""The window aggregate: one Spark job behind volume, payload sizes, not-ok records, the latency histogram
and conversion findings (collected once, finished in spark_audit.findings); and the per-file rollups
made of it (stored by spark_audit.rollup)."""
from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, IntegerType, LongType, StringType, StructField, StructType

from spark_audit import rollup
from spark_audit.frames import empty_frame, typed_column
from spark_audit.keys import key_hash_column
from spark_audit.rollup import FILE_COLUMN
from spark_audit.schema import KEY_HASH
from spark_audit.scope import EGRESS_SQL, INGRESS_SQL, OK_SQL, AuditConfig, AuditData, Row, audit_frame

VOLUME_DIMS = ("route", "direction", "source_protocol", "target_protocol", "source_type", "target_type",
               "status")
# Payload size histogram: bucket i holds sizes in [EDGES[i], EDGES[i+1]); the last is open-ended.
SIZE_EDGES = (0, 1, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576)
SIZE_LABELS = ("0", "1-63", "64-255", "256-1Ki", "1Ki-4Ki", "4Ki-16Ki", "16Ki-64Ki", "64Ki-256Ki",
               "256Ki-1Mi", ">=1Mi")

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
    per_file: group by file as well (per_file_groups: the frame has the file column).
    """
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
                                       "redelivery_count", "client_id", "destination", "reason")}}
    return joined.select(*[(values[f.name] if f.name in values else F.lit(None)).cast(f.dataType).alias(f.name)
                           for f in [*GROUP_FIELDS, *AGG_FIELDS]])


def _volume(frame: DataFrame, flagged: DataFrame | None, hashed: Column, how: str, tag: int,
            per_file: bool = False) -> DataFrame:
    """window_aggregates' volume / not-ok / fetch aggregation of frame (see there)."""
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


def fetched_records(groups: list[Row]) -> list[Row]:
    """The flagged keys' records from the window aggregate's groups, each repeated n times."""
    out = []
    for g in groups:
        if int(g["tag"]) in (TAG_VOLUME, TAG_FETCH) and g["dup"] is not None:  # type: ignore[call-overload]
            out.extend([g] * int(g["n"]))  # type: ignore[call-overload]
    return out


def per_file_groups(rows: DataFrame) -> DataFrame:
    """The window aggregate of Parquet log rows, grouped by data file too: what a rollup stores."""
    config = AuditConfig()
    frame = audit_frame(rows, config, F.lit(True))
    return window_aggregates(AuditData(frame.withColumn(FILE_COLUMN, rollup.relative_column()), None, config),
                             per_file=True)


def build_rollups(spark: SparkSession, parquet_dir: str, files: list[rollup.DataFile] | None = None) -> int:
    """Store the rollups of the given data files (default: those without a current one); the file count."""
    return rollup.build(spark, parquet_dir, per_file_groups, files)
