"""Per-key findings: flag the (message_key, route) keys with a loss, an unexpected egress or duplicates in
one aggregation, fetch the flagged keys' records, and finish losses and duplicates from them (as Spark
frames, or in Python on records fetched with the window aggregate)."""
from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from mappings.convlog_schema import Direction, Status
from spark_audit.frames import local_frame
from spark_audit.schema import KEY_CHECK, KEY_HASH, stored_key_check, stored_key_hash
from spark_audit.scope import (
    AS_OF_COLUMN,
    EGRESS_SQL,
    INGRESS_SQL,
    OK_SQL,
    AuditData,
    Row,
    has_as_of_column,
    in_window,
    is_egress,
    is_ingress,
    is_ok,
    micros,
    timestamp_text,
    ts_text,
)

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


# The per-key findings' tables, as key_problems and duplicates make them.
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
                    "event_time": timestamp_text(t), "age_seconds": (as_of_us - t) / 1e6 if lost else None})
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
                    "first_egress_time": timestamp_text(int(first["t_rec"]))})  # type: ignore[call-overload]
    return out
