"""The audit's Parquet log: its own date/hour partitions plus the gateway's Parquet sidecars it reads in place.

A one-shot ingest of LOGS writes only the rows it parsed from JSON; a file whose sidecar it used (checked:
footer, then every row against the field rules) is not copied. The log's ledger (`PARQUET/_sidecars.json`,
hidden from Spark by its leading "_") lists those sidecars: the log file each stands for, its size and mtime
when it was read, its row count and event-time span. Every reader of the whole log (a full audit, an
incremental run that reads the log) reads the partitions and the listed sidecars: each row once.

A listed sidecar that is gone or whose size or mtime changed since the ingest stops the read with
StaleSidecar naming it: its rows were not copied, so a changed copy would audit other rows than the ones
ingested, and a missing one would drop them silently (docs/audit.md, "Parquet sidecars").
"""
from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mappings.convlog_schema import SIDECAR_SUFFIX, sidecar_mismatch
from spark_audit import fs
from spark_audit.lines import FILE_COLUMN
from spark_audit.schema import (
    KEY_CHECK,
    KEY_HASH,
    PROBLEM_COLUMN,
    key_check,
    key_hash,
    record_schema,
    stored_schema,
)
from spark_audit.sidecars import LOG_SUFFIXES, Sidecars, read_sidecars
from spark_audit.sources import file_key

LEDGER = "_sidecars.json"
LEDGER_VERSION = 1
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class StaleSidecar(RuntimeError):
    """A sidecar the Parquet log stands on is gone or changed: its rows cannot be audited from it."""


@dataclass(frozen=True, slots=True)
class SidecarRef:
    """A sidecar read in place: the log file it stands for, where it is, what it looked like when ingested."""

    log: str
    uri: str  # as Spark reads it (a qualified URI)
    size: int
    mtime_ms: int
    rows: int
    min_us: int | None
    max_us: int | None


Checked = tuple[Sidecars, list[SidecarRef]]  # sidecars to read in place and notes on the others, checked


def _ledger_uri(parquet_dir: str) -> str:
    return fs.join(parquet_dir, LEDGER) if fs.is_remote(parquet_dir) else str(Path(parquet_dir) / LEDGER)


def stat(uri: str) -> tuple[int, int] | None:
    """A sidecar's size and mtime in milliseconds (None when it is gone); file: URIs by local calls."""
    if uri.startswith("file:"):
        try:
            st = os.stat(file_key(uri))
        except FileNotFoundError:
            return None
        return st.st_size, st.st_mtime_ns // 1_000_000
    status = fs.Hadoop().stat(uri)
    return None if status is None else (status.size, status.mtime_ms)


def write_ledger(parquet_dir: str, refs: Iterable[SidecarRef]) -> None:
    """Replace the ledger (atomically); none left behind when there are no sidecars."""
    refs = sorted(refs, key=lambda r: r.uri)
    uri = _ledger_uri(parquet_dir)
    if not refs:
        remove_ledger(parquet_dir)
        return
    text = json.dumps({"version": LEDGER_VERSION, "sidecars": [asdict(r) for r in refs]}, indent=1) + "\n"
    if fs.is_remote(parquet_dir):
        fs.Hadoop().write(uri, text.encode())
        return
    Path(parquet_dir).mkdir(parents=True, exist_ok=True)
    tmp = Path(parquet_dir) / f".{LEDGER}.tmp"
    tmp.write_text(text)
    os.replace(tmp, uri)


def remove_ledger(parquet_dir: str) -> None:
    uri = _ledger_uri(parquet_dir)
    if fs.is_remote(parquet_dir):
        fs.Hadoop().delete(uri, recursive=False)
    else:
        Path(uri).unlink(missing_ok=True)


def read_ledger(parquet_dir: str) -> list[SidecarRef]:
    """The sidecars the log stands on (none without a ledger); an unreadable ledger stops the read: guessing
    would drop rows."""
    uri = _ledger_uri(parquet_dir)
    try:
        if fs.is_remote(parquet_dir):
            if fs.Hadoop().stat(uri) is None:
                return []
            text = fs.Hadoop().read(uri).decode()
        elif not Path(uri).exists():
            return []
        else:
            text = Path(uri).read_text()
        raw = json.loads(text)
        if raw.get("version") != LEDGER_VERSION:
            raise ValueError(f"ledger version {raw.get('version')!r}, this audit reads {LEDGER_VERSION}")
        return [SidecarRef(str(s["log"]), str(s["uri"]), int(s["size"]), int(s["mtime_ms"]), int(s["rows"]),
                           None if s["min_us"] is None else int(s["min_us"]),
                           None if s["max_us"] is None else int(s["max_us"])) for s in raw["sidecars"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise StaleSidecar(f"{uri}: unreadable list of the sidecars this Parquet log stands on ({e}); "
                           "audit the logs again (mqbridge audit LOGS --parquet DIR)") from e


def checked(parquet_dir: str) -> list[SidecarRef]:
    """The ledger's sidecars, each still there as it was ingested (else StaleSidecar naming every one that is not)."""
    refs = read_ledger(parquet_dir)
    problems = []
    for ref in refs:
        now = stat(ref.uri)
        if now is None:
            problems.append(f"{ref.uri} (for {ref.log}, {ref.rows} rows) is gone")
        elif now != (ref.size, ref.mtime_ms):
            problems.append(f"{ref.uri} (for {ref.log}, {ref.rows} rows) changed since it was ingested "
                            f"({ref.size} bytes then, {now[0]} now)")
    if problems:
        raise StaleSidecar(f"the Parquet log {parquet_dir} reads Parquet sidecars of the gateway in place, and "
                           f"{len(problems)} of them cannot be read as ingested: " + "; ".join(problems)
                           + ". Their rows are not audited from a changed or missing copy: audit the logs again "
                           "(mqbridge audit LOGS --parquet DIR), which parses a file whose sidecar is gone")
    return refs


def has_rows(parquet_dir: str, has_partitions: bool) -> bool:
    """True when the log has partitions or stands on sidecars."""
    try:
        return has_partitions or bool(read_ledger(parquet_dir))
    except StaleSidecar:
        return True  # the read says what is wrong


def in_range(refs: list[SidecarRef], lo: datetime | None, hi: datetime | None) -> list[SidecarRef]:
    """The sidecars with a row in [lo, hi) by their recorded event-time span (either bound open)."""
    def micros(t: datetime) -> int:
        return (t - EPOCH) // timedelta(microseconds=1)

    return [r for r in refs if r.max_us is not None and r.min_us is not None
            and (lo is None or r.max_us >= micros(lo)) and (hi is None or r.min_us < micros(hi))]


def newest_us(refs: list[SidecarRef]) -> int | None:
    times = [r.max_us for r in refs if r.max_us is not None]
    return max(times) if times else None


def sidecar_rows(spark: SparkSession, refs: list[SidecarRef], partitions: bool = True) -> DataFrame:
    """The sidecars' rows in the log's stored layout (key hashes, and date/hour when asked, computed as the
    ingest writes them); pages verified against their checksums."""
    rows = (spark.read.schema(record_schema()).option("parquet.page.verify-checksum.enabled", "true")
            .parquet(*[r.uri for r in refs]))
    rows = rows.withColumn(KEY_HASH, key_hash()).withColumn(KEY_CHECK, key_check())
    if partitions:
        rows = rows.withColumn("date", F.to_date("event_time")).withColumn("hour", F.hour("event_time"))
    return rows.select(*stored_schema(partitions).fieldNames())


def accept(spark: SparkSession, found: Sidecars) -> tuple[Sidecars, list[SidecarRef]]:
    """Check every row of the sidecars whose footers matched (one job: rows, rule breakers and the valid
    rows' time span per file). A sidecar with a row that breaks a field rule is ignored with a note (its
    JSON is parsed, its bad lines quoted from there); the others are read in place. Each sidecar's size and
    mtime are taken before its rows are read: a sidecar replaced meanwhile no longer matches its entry."""
    stats = {uri: stat(uri) for uri in found.used.values()}
    rows = read_sidecars(spark, sorted(found.used.values()))
    problem = F.col(PROBLEM_COLUMN)
    valid_us = F.when(problem.isNull(), F.unix_micros("event_time"))
    per_file = {file_key(r[FILE_COLUMN]): r for r in rows.groupBy(FILE_COLUMN).agg(
        F.count(F.lit(1)).alias("rows"), F.count_if(problem.isNotNull()).alias("bad"),
        F.min(valid_us).alias("lo"), F.max(valid_us).alias("hi")).collect()}
    kept = Sidecars(notes=dict(found.notes))
    refs = []
    for log, uri in sorted(found.used.items()):
        r, now = per_file.get(file_key(uri)), stats[uri]
        if r is None or now is None:
            kept.notes[log] = "Parquet sidecar ignored (no rows read from it); its JSON was read"
        elif r["bad"]:
            kept.notes[log] = (f"Parquet sidecar ignored ({r['bad']} of its {r['rows']} rows break a field rule); "
                               "its JSON was read")
        else:
            kept.used[log] = uri
            refs.append(SidecarRef(log, uri, now[0], now[1], int(r["rows"]), r["lo"], r["hi"]))
    return kept, refs


def precheck(paths: list[str]) -> Checked | None:
    """The sidecars of local plain log files, checked without Spark (pyarrow; run while the session starts):
    the footer as sidecars.choose checks it, then every row against the gateway's own check
    (bridge.convlog_parquet.validated: the audit's field rules plus from_dict's, so never laxer than the
    audit's), every page against its checksum. None when a path is a URI or pyarrow is missing: accept()
    then checks them with Spark."""
    if any(fs.is_remote(p) for p in paths) or importlib.util.find_spec("pyarrow") is None:
        return None
    try:
        return _precheck(paths)
    except Exception:  # noqa: BLE001 - whatever went wrong here, accept() checks the sidecars with Spark
        return None


def _precheck(paths: list[str]) -> tuple[Sidecars, list[SidecarRef]]:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from bridge.convlog_parquet import Rejected, validated

    found, refs = Sidecars(), []
    for path in paths:
        side = path + SIDECAR_SUFFIX
        if not path.endswith(LOG_SUFFIXES) or not os.path.isfile(side):
            continue
        try:
            before, size = os.stat(side), os.stat(path).st_size
            meta = pq.read_metadata(side)
        except (OSError, pa.ArrowException) as e:
            found.notes[path] = f"Parquet sidecar ignored (unreadable: {e}); its JSON was read"
            continue
        pairs = {k.decode(): v.decode() for k, v in (meta.metadata or {}).items()}
        problem = sidecar_mismatch(pairs, meta.num_rows, Path(path).name, size)
        if problem is not None:
            found.notes[path] = f"Parquet sidecar ignored ({problem}); its JSON was read"
            continue
        try:
            table = validated(pq.read_table(side, page_checksum_verification=True))
        except Rejected as e:
            found.notes[path] = f"Parquet sidecar ignored (a row breaks a field rule: {e}); its JSON was read"
            continue
        except (OSError, pa.ArrowException) as e:
            text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            found.notes[path] = f"Parquet sidecar could not be read ({text[:300]}); its JSON was read"
            continue
        span = pc.min_max(pc.cast(table.column("event_time"), pa.int64())).as_py()
        uri = "file:" + os.path.abspath(side)
        found.used[path] = uri
        refs.append(SidecarRef(path, uri, before.st_size, before.st_mtime_ns // 1_000_000, table.num_rows,
                               span["min"], span["max"]))
    return found, refs
