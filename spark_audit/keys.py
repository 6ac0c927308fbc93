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
# The records of flagged keys: the columns key_problems, duplicates and failure_records read.
RECORD_COLUMNS = ("message_key", "route", "direction", "source_protocol", "target_protocol", "qos", "client_id",
                  "destination", "event_time", "status", "reason", "redelivery_count", "in_window", "counted")
# Failure records (failed, backout, dropped) listed by message key: the first ones by time; the total is
# counted by the window aggregate. Their keys are flagged (fetched) like those of losses and duplicates.
FAILURE_ITEMS = 100
# A failure record's columns: the record's own, and its message's source (the first ingress record of its
# key: the publisher or sending application and the topic or queue the message was taken from).
FAILURE_COLUMNS = ("status", "message_key", "route", "direction", "reason", "source_protocol", "target_protocol",
                   "client_id", "destination")
FAILURE_ORDER = ("event_time", "message_key", "route", "direction", "status")  # "first by time"
# The per-key aggregate: SQL text over the per-record values of _record_values.
KEY_AGGREGATES = ("bit_or(seen) AS seen", "sum(ok_egress) AS egress_ok", "min(in_us) AS first_in",
                  "min(in_window_us) AS first_in_window")


def failure_items(data: AuditData) -> int:
    """How many failure records are listed (fetched, in the summary and the table)."""
    return min(data.config.max_items, FAILURE_ITEMS)


def key_hash_column(data: AuditData) -> Column:
    """(message_key, route) as one long: as written with the row, or hashed here for rows of older files
    (or whenever the audit cannot know that every row in scope has it)."""
    return F.col(KEY_HASH) if data.hashes_stored else stored_key_hash()


def key_check_column(data: AuditData) -> Column:
    """A second, independent hash of (message_key, route): two keys sharing key_hash differ in it."""
    return F.col(KEY_CHECK) if data.hashes_stored else stored_key_check()


def _record_values(data: AuditData) -> dict[str, str]:
    """Per record (SQL text), what the per-key aggregate folds (KEY_AGGREGATES): its SEEN_* bits; 1 for an
    ok egress (more than one per key is a duplicate); its time when it is an ok ingress, and when it is
    one in the window (a loss is reported by the window holding the
    key's first ok ingress: a message sent again is one loss, not one per ingress record).

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
    ok_ingress = f"{INGRESS_SQL} AND {OK_SQL}"
    return {"seen": seen, "ok_egress": f"CAST({EGRESS_SQL} AND {OK_SQL} AS INT)",
            "in_us": f"IF({ok_ingress}, unix_micros(event_time), NULL)",
            "in_window_us": f"IF({ok_ingress} AND in_window, unix_micros(event_time), NULL)"}


def _kind() -> str:
    """'lost' (the key's first ok ingress is in the window and older than the grace period, and the key has
    no egress at all) or 'unexpected_egress' (egress in the window, no ingress); null otherwise. SQL text
    over the per-key aggregate (KEY_AGGREGATES)."""
    def has(bit: int) -> str:
        return f"(seen & {bit}) != 0"

    lost = f"{has(SEEN_ELIGIBLE)} AND NOT {has(SEEN_EGRESS)} AND first_in = first_in_window"
    unexpected = f"NOT {has(SEEN_INGRESS)} AND {has(SEEN_EGRESS_COUNTED)}"
    return f"CASE WHEN {lost} THEN 'lost' WHEN {unexpected} THEN 'unexpected_egress' END"


def _problems(chains: DataFrame, keys: tuple[str, ...], extra: tuple[str, ...] = ()) -> DataFrame:
    """The keys of the per-key aggregate with a problem: kind, dup or an extra condition (c0, c1, ...)."""
    columns = (*keys, f"{_kind()} AS kind", "egress_ok > 1 AS dup", *(f"{c} AS c{i}" for i, c in enumerate(extra)))
    return chains.selectExpr(*columns).where(" OR ".join(["kind IS NOT NULL", "dup",
                                                          *(f"c{i}" for i in range(len(extra)))]))


def _first_failures(data: AuditData, keys: dict[str, Column], extra: int = 0) -> DataFrame:
    """The keys of the first failure_items() failure records by time (in FAILURE_ORDER), in _problems'
    layout (kind null, dup and the extra conditions false): their records are fetched to list them.

    A top-N of its own scan (no shuffle): as a second read of the per-key aggregate in the same job,
    Spark did not reuse that aggregate's shuffle, which doubled the per-key job.
    """
    first = data.frame.where(f"counted AND NOT {OK_SQL}").orderBy(*FAILURE_ORDER).limit(failure_items(data))
    return first.select(*(c.alias(name) for name, c in keys.items()), F.lit(None).cast("string").alias("kind"),
                        F.lit(False).alias("dup"), *(F.lit(False).alias(f"c{i}") for i in range(extra)))


def flag_keys(data: AuditData) -> DataFrame:
    """One aggregation per (message_key, route), keeping just the flagged keys (exact string keys).

    kind: see _kind; dup: more than one ok egress (split per client later); the keys of the first
    failure records are flagged too (_first_failures). The result is small. Used when two keys of the log
    share a key_hash (see flag_hashed_keys).
    """
    values = _record_values(data)
    chains = data.frame.selectExpr("message_key", "route", *(f"{sql} AS {name}" for name, sql in values.items()))
    chains = chains.groupBy("message_key", "route").agg(*(F.expr(a) for a in KEY_AGGREGATES))
    failing = _first_failures(data, {"message_key": F.col("message_key"), "route": F.col("route")})
    # One row per key (a key may have a problem and be among the first failures, or fail twice).
    return _problems(chains, ("message_key", "route")).unionByName(failing).groupBy("message_key", "route").agg(
        F.max("kind").alias("kind"), F.max("dup").alias("dup"))


def flag_hashed_keys(data: AuditData) -> list[Row] | None:
    """flag_keys grouped by key_hash (a long) instead of the two strings; None when two keys collide.

    Every key of the frame is aggregated, so a collision shows as two key_check values in one group;
    the caller then falls back to flag_keys. Returns (KEY_HASH, kind, dup) rows of the flagged keys.
    """
    values = _record_values(data)
    chains = data.frame.select(key_hash_column(data).alias(KEY_HASH), key_check_column(data).alias("check"),
                               *(F.expr(f"{sql} AS {name}") for name, sql in values.items()))
    chains = chains.groupBy(KEY_HASH).agg(*(F.expr(a) for a in KEY_AGGREGATES),
                                          F.expr("min(check) AS check_lo"), F.expr("max(check) AS check_hi"))
    problems = _problems(chains, (KEY_HASH,), ("check_lo != check_hi",))
    flagged = problems.unionByName(_first_failures(data, {KEY_HASH: key_hash_column(data)}, 1))
    rows: dict[object, Row] = {}
    for r in flagged.collect():
        if r["c0"]:
            return None
        seen = rows.setdefault(r[KEY_HASH], {KEY_HASH: r[KEY_HASH], "kind": None, "dup": False})
        seen["kind"] = seen["kind"] or r["kind"]
        seen["dup"] = bool(seen["dup"] or r["dup"])
    return list(rows.values())


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


# A loss's details: those of the key's first ok ingress record.
LOSS_DETAILS = ("direction", "source_protocol", "target_protocol", "qos", "client_id", "destination")


def key_problems(data: AuditData, records: DataFrame) -> DataFrame:
    """Losses, one per (message_key, route) with the details of its first ok ingress and how many ok
    ingress records it has (a message sent again is one loss); and unexpected egress records."""
    as_of_us = F.col(AS_OF_COLUMN) if has_as_of_column(data) else F.lit(
        micros(data.as_of) if data.as_of is not None else 0)
    kind = F.col("kind")
    lost = records.where((kind == "lost") & is_ingress() & is_ok()).groupBy("message_key", "route").agg(
        F.min(F.struct("event_time", *LOSS_DETAILS)).alias("first"), F.count(F.lit(1)).alias("ingress_records"),
        F.max(as_of_us).alias("as_of_us"))
    first_us = F.unix_micros("first.event_time")
    lost = lost.select(
        F.lit("lost").alias("kind"), "message_key", "route", *[F.col(f"first.{c}").alias(c) for c in LOSS_DETAILS],
        ts_text("first.event_time").alias("event_time"), ((F.col("as_of_us") - first_us) / 1e6).alias("age_seconds"),
        "ingress_records")
    unexpected = records.where(kind == "unexpected_egress").select(
        "kind", "message_key", "route", *LOSS_DETAILS, ts_text("event_time").alias("event_time"),
        F.lit(None).cast("double").alias("age_seconds"), F.lit(None).cast("long").alias("ingress_records"))
    return lost.unionByName(unexpected)


def duplicate_why(qos: int, copies: int, max_redelivery: int) -> str:
    """Why a duplicate is suspicious (or allowed), in words; duplicate_why_sql is the same in SQL."""
    times = "twice" if copies == 2 else f"{copies} times"
    if qos != 1:
        return f"QoS {qos} delivered {times}"
    announced = (f"{max_redelivery} redelivery" if max_redelivery == 1 else f"{max_redelivery} redeliveries"
                 if max_redelivery else "no redelivery")
    if copies <= max_redelivery + 1:
        return f"QoS 1 delivered {times}, {announced} announced"
    return f"{copies} copies but {'only ' if max_redelivery else ''}{announced} announced"


def duplicate_why_sql() -> str:
    """duplicate_why as SQL text over the columns qos, copies and max_redelivery."""
    times = "IF(copies = 2, 'twice', concat(copies, ' times'))"
    announced = ("CASE WHEN max_redelivery = 1 THEN '1 redelivery' WHEN max_redelivery > 1 "
                 "THEN concat(max_redelivery, ' redeliveries') ELSE 'no redelivery' END")
    return (f"CASE WHEN qos != 1 THEN concat('QoS ', qos, ' delivered ', {times}) "
            f"WHEN copies <= max_redelivery + 1 THEN concat('QoS 1 delivered ', {times}, ', ', {announced}, "
            f"' announced') ELSE concat(copies, ' copies but ', IF(max_redelivery > 0, 'only ', ''), {announced}, "
            f"' announced') END")


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
        F.expr(duplicate_why_sql()).alias("why"),
        "message_key", "route", "client_id", "destination", "qos", "copies", "max_redelivery",
        ts_text("first_egress_time").alias("first_egress_time"),
    )


def failure_records(data: AuditData, records: DataFrame) -> DataFrame:
    """The first failure_items() failure records by time, with their message's source (Spark version)."""
    failed = records.where(f"counted AND NOT {OK_SQL}").orderBy(*FAILURE_ORDER).limit(failure_items(data))
    sources = records.where(is_ingress()).groupBy("message_key", "route").agg(
        F.min(F.struct("event_time", "client_id", "destination")).alias("src"))
    own = is_ingress()
    return failed.join(sources, ["message_key", "route"], "left").select(
        ts_text("event_time").alias("event_time"), *FAILURE_COLUMNS,
        F.when(own, F.col("client_id")).otherwise(F.col("src.client_id")).alias("source_client"),
        F.when(own, F.col("destination")).otherwise(F.col("src.destination")).alias("source_destination"))


# The per-key findings' tables, as key_problems, duplicates and failure_records make them.
KEY_PROBLEM_SCHEMA = StructType(
    [StructField(c, StringType()) for c in ("kind", "message_key", "route", "direction", "source_protocol",
                                            "target_protocol")]
    + [StructField("qos", IntegerType()), StructField("client_id", StringType()),
       StructField("destination", StringType()), StructField("event_time", StringType()),
       StructField("age_seconds", DoubleType()), StructField("ingress_records", LongType())])
DUPLICATE_SCHEMA = StructType(
    [StructField(c, StringType()) for c in ("kind", "why", "message_key", "route", "client_id", "destination")]
    + [StructField("qos", IntegerType()), StructField("copies", LongType()),
       StructField("max_redelivery", IntegerType()), StructField("first_egress_time", StringType())])
FAILURE_SCHEMA = StructType([StructField(c, StringType()) for c in (
    "event_time", *FAILURE_COLUMNS, "source_client", "source_destination")])


def _first(rows: list[Row], *columns: str) -> Row:
    """The earliest record (t_rec), ties broken by the given columns (nulls first, as Spark orders them)."""
    return min(rows, key=lambda r: (int(r["t_rec"]), *((r[c] is not None, r[c]) for c in columns)))  # type: ignore[call-overload]


def key_problem_rows(data: AuditData, records: list[Row]) -> list[Row]:
    """key_problems (the Spark version) on the fetched records: losses per key, unexpected egress."""
    as_of_us = micros(data.as_of) if data.as_of is not None else 0
    lost: dict[tuple[object, object], list[Row]] = {}
    out = []
    for r in records:
        kind = r["kind"]
        if kind == "lost" and r["direction"] == Direction.INGRESS.value and r["status"] == Status.OK.value:
            lost.setdefault((r["message_key"], r["route"]), []).append(r)
        elif kind == "unexpected_egress":
            out.append({"kind": kind, "message_key": r["message_key"], "route": r["route"],
                        **{c: r[c] for c in LOSS_DETAILS}, "event_time": timestamp_text(int(r["t_rec"])),  # type: ignore[call-overload]
                        "age_seconds": None, "ingress_records": None})
    for (key, route), ingress in lost.items():
        first = _first(ingress, *LOSS_DETAILS)
        t = int(first["t_rec"])  # type: ignore[call-overload]
        out.append({"kind": "lost", "message_key": key, "route": route, **{c: first[c] for c in LOSS_DETAILS},
                    "event_time": timestamp_text(t), "age_seconds": (as_of_us - t) / 1e6,
                    "ingress_records": len(ingress)})
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
        out.append({"kind": "allowed" if allowed else "suspicious",
                    "why": duplicate_why(qos, len(copies), max_redelivery), "message_key": key, "route": route,
                    "client_id": client, "destination": min(destinations) if destinations else None, "qos": qos,
                    "copies": len(copies), "max_redelivery": max_redelivery,
                    "first_egress_time": timestamp_text(int(first["t_rec"]))})  # type: ignore[call-overload]
    return out


def failure_rows(data: AuditData, records: list[Row]) -> list[Row]:
    """failure_records (the Spark version) on the fetched records."""
    sources: dict[tuple[object, object], list[Row]] = {}
    failed = []
    for r in records:
        if r["direction"] == Direction.INGRESS.value:
            sources.setdefault((r["message_key"], r["route"]), []).append(r)
        if r["counted"] and r["status"] != Status.OK.value:
            failed.append(r)
    failed.sort(key=lambda r: (int(r["t_rec"]), *(r[c] for c in FAILURE_ORDER[1:])))  # type: ignore[call-overload]
    out = []
    for r in failed[:failure_items(data)]:
        own = r["direction"] == Direction.INGRESS.value
        ingress = sources.get((r["message_key"], r["route"]))
        source = r if own else _first(ingress, "client_id", "destination") if ingress else None
        out.append({"event_time": timestamp_text(int(r["t_rec"])), **{c: r[c] for c in FAILURE_COLUMNS},  # type: ignore[call-overload]
                    "source_client": source["client_id"] if source else None,
                    "source_destination": source["destination"] if source else None})
    return out
