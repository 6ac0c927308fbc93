"""Parquet sidecars of closed conversion-log hour files: X.jsonl written once more as X.jsonl.parquet, so that
the audit reads columns instead of parsing JSON (docs/conversion-log.md, "Parquet sidecars").

A child process writes them, one file at a time, with pyarrow (the optional extra ``mqbridge[parquet]``;
without it no sidecar is written): bridge/convlog_sidecar_writer.py and convlog_sidecar_process.py. A file
gets a sidecar only when every line passes the audit's rules; otherwise the audit parses the JSON and reports
the bad lines as it always did.
"""
from __future__ import annotations

import importlib.util
import logging
import os
import re
from pathlib import Path
from typing import Any, Literal, NamedTuple

from bridge.convlog_columns import FileColumns
from mappings.convlog_schema import (
    BOOL,
    FIELDS,
    FINDING_KEYS,
    FINDINGS,
    INT,
    LONG,
    META_SCHEMA_VERSION,
    META_SIDECAR_VERSION,
    META_SOURCE_BYTES,
    META_SOURCE_LINES,
    META_SOURCE_NAME,
    SCHEMA_VERSION,
    SIDECAR_SUFFIX,
    SIDECAR_VERSION,
    STRING,
    TIMESTAMP,
    TIMESTAMP_PATTERN,
    FieldSpec,
    Status,
    sidecar_mismatch,
)
from mappings.report import Change

log = logging.getLogger("mqbridge.convlog")

# Beyond TIMESTAMP_PATTERN (which allows any two digits): a clock time Spark's cast and Python's fromisoformat
# both take. pyarrow's cast rejects 24:00 and :60 as well; this keeps the rule explicit.
_CLOCK = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ](?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"
BLOCK_BYTES = 16 << 20  # pyarrow's JSON block: larger than any line (a line may not straddle two blocks)


class Rejected(Exception):
    """A file gets no sidecar: a line breaks the audit's rules (or the file is not plain JSON Lines)."""


def sidecar_path(path: Path) -> Path:
    return path.with_name(path.name + SIDECAR_SUFFIX)


def available() -> bool:
    """pyarrow is installed (found, not imported: the import waits for the first sidecar, in its thread)."""
    return importlib.util.find_spec("pyarrow") is not None


def _arrow_type(kind: str, *, text_times: bool = False) -> Any:  # noqa: ANN401 - a pyarrow DataType
    import pyarrow as pa

    finding = pa.struct([pa.field(k, pa.string()) for k in FINDING_KEYS])
    types = {INT: pa.int32(), LONG: pa.int64(), STRING: pa.string(), BOOL: pa.bool_(),
             TIMESTAMP: pa.string() if text_times else pa.timestamp("us", tz="UTC"), FINDINGS: pa.list_(finding)}
    return types[kind]


def arrow_schema(*, text_times: bool = False) -> Any:  # noqa: ANN401 - a pyarrow Schema
    """The record (mappings.convlog_schema.FIELDS) as an Arrow schema, the Spark audit's types
    (spark_audit/schema.py; a test holds them together). text_times: timestamps as strings (the JSON read)."""
    import pyarrow as pa

    return pa.schema([pa.field(f.name, _arrow_type(f.kind, text_times=text_times)) for f in FIELDS])


# Fields whose values are (nearly) one per record: a dictionary page per row group would only be outgrown and then
# decoded again by every reader (Spark decodes one per row group and column), so they are written plain. The cold
# audit of 1M rows: 0.15 s and 0.3 s of JVM CPU less; the write 0.03 s less per 250k rows (bench/HISTORY.md,
# session 25).
PLAIN_FIELDS = frozenset({"event_time", "message_key", "source_size", "target_size", "latency_us"})


def dictionary_fields(schema: Any) -> list[str]:  # noqa: ANN401 - a pyarrow Schema
    """The columns of the log's Parquet files written with a dictionary (use_dictionary): all but PLAIN_FIELDS."""
    return [name for name in schema.names if name not in PLAIN_FIELDS]


def _first(mask: Any) -> int | None:  # noqa: ANN401 - a pyarrow BooleanArray
    import pyarrow.compute as pc

    if not pc.any(mask).as_py():
        return None
    return int(pc.index(mask, True).as_py())


def _or(a: Any, b: Any) -> Any:  # noqa: ANN401
    import pyarrow.compute as pc

    return pc.or_kleene(a, b)


def _findings_first_bad(col: Any) -> int | None:  # noqa: ANN401 - list<struct>
    """The first row with a null finding, a change outside Change or a name that is null or empty."""
    import pyarrow as pa
    import pyarrow.compute as pc

    items = pc.list_flatten(col)
    if len(items) == 0:
        return None
    change, name = pc.struct_field(items, "change"), pc.struct_field(items, "name")
    bad = pc.fill_null(pc.or_kleene(pc.invert(pc.is_in(change, value_set=pa.array([c.value for c in Change]))),
                                    pc.equal(pc.utf8_length(name), 0)), True)
    bad = pc.or_(bad, pc.is_null(items))
    rows = pc.filter(pc.list_parent_indices(col), bad)
    return None if len(rows) == 0 else int(pc.min(rows).as_py())


def _field_invalid(spec: FieldSpec, col: Any) -> Any:  # noqa: ANN401 - True where the column breaks its rule
    """The audit's column rules (spark_audit/schema.py, _field_invalid) for one field, as Arrow compute
    (the findings' rule: _findings_first_bad). A timestamp already typed has no text to check."""
    import pyarrow as pa
    import pyarrow.compute as pc

    bad = pc.is_null(col) if spec.required else pa.array([False] * len(col))
    if spec.enum is not None:
        allowed = pa.array([m.value for m in spec.enum])
        bad = _or(bad, pc.and_kleene(pc.is_valid(col), pc.invert(pc.is_in(col, value_set=allowed))))
    if spec.min_value is not None:
        bad = _or(bad, pc.less(col, spec.min_value))
    if spec.max_value is not None:
        bad = _or(bad, pc.greater(col, spec.max_value))
    if spec.kind == TIMESTAMP and pa.types.is_string(col.type):  # text (the JSON's); a sidecar's are instants
        grammar = pc.match_substring_regex(col, f"^(?:{TIMESTAMP_PATTERN})$")
        bad = _or(bad, pc.invert(pc.and_kleene(grammar, pc.match_substring_regex(col, _CLOCK))))
    return pc.fill_null(bad, False)


def validated(table: Any) -> Any:  # noqa: ANN401 - pyarrow Table in, pyarrow Table out
    """The table with its timestamps as instants, or Rejected naming the first bad row and field: the rules of
    the audit's columns, plus from_dict's (schema_version not newer, a reason when the status is not ok).
    Timestamps may be text (the JSON's) or instants already (a sidecar's, checked again by the audit)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = table.combine_chunks()
    _check_rules(table)
    columns = []
    for spec in FIELDS:
        col = table.column(spec.name)
        if spec.kind == TIMESTAMP:
            try:
                col = pc.cast(col, pa.timestamp("us", tz="UTC"))
            except (pa.ArrowInvalid, ValueError) as e:
                raise Rejected(f"{spec.name}: {e}") from None
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=arrow_schema())


def _check_rules(table: Any) -> None:  # noqa: ANN401 - a pyarrow Table
    """Rejected naming the first row and rule a record of ``table`` breaks (validated's rules)."""
    import pyarrow.compute as pc

    checks = [(f"invalid:{spec.name}", _field_invalid(spec, table.column(spec.name))) for spec in FIELDS]
    newer = pc.fill_null(pc.greater(table.column("schema_version"), SCHEMA_VERSION), False)
    reason = table.column("reason")
    no_reason = pc.fill_null(pc.and_kleene(pc.not_equal(table.column("status"), Status.OK.value),
                                           pc.or_kleene(pc.is_null(reason), pc.equal(pc.utf8_length(reason), 0))),
                             False)
    for what, mask in [("future_version", newer), *checks, ("reason required", no_reason)]:
        row = _first(mask)
        if row is not None:
            raise Rejected(f"line {row + 1}: {what}")
    for spec in FIELDS:
        row = _findings_first_bad(table.column(spec.name)) if spec.kind == FINDINGS else None
        if row is not None:
            raise Rejected(f"line {row + 1}: invalid:{spec.name}")


def _numbers(values: Any, kind: Any) -> Any:  # noqa: ANN401 - an array.array in, a pyarrow Array out
    """An array.array of 8-byte numbers as an Arrow array of ``kind`` (float64, int64) over the same memory."""
    import pyarrow as pa

    return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(values)])


def event_micros(seconds: Any) -> Any:  # noqa: ANN401 - float64 Array in, int64 Array out
    """``epoch_micros`` of each unix time (tests/test_convlog_columns.py holds the two equal, ties included)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    whole = pc.floor(seconds)
    micros = pc.round(pc.multiply(pc.subtract(seconds, whole), 1_000_000.0), ndigits=0, round_mode="half_to_even")
    return pc.add(pc.multiply(pc.cast(whole, pa.int64()), 1_000_000), pc.cast(micros, pa.int64()))


def columns_table(cols: FileColumns) -> Any:  # noqa: ANN401 - a pyarrow Table
    """``read_log`` of the file whose lines ``cols`` holds, built from the values instead of the JSON (the
    two are equal: tests/test_convlog_columns.py): each line's template gives its fixed fields (taken per
    row from one row per template), the message its variable ones; the same rules are checked."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = cols.messages
    if not n:
        raise Rejected("no lines")
    pairs = cols.templates
    ingress_vars, egress_vars = set(pairs[0][0].variable), set(pairs[0][1].variable)
    if any(p[0].variable != pairs[0][0].variable or p[1].variable != pairs[0][1].variable for p in pairs):
        raise Rejected("templates with different variable fields")   # not render_lines' pairs: the JSON is read
    base = pa.Table.from_pylist([t.values for p in pairs for t in p[:2]], schema=arrow_schema(text_times=True))
    ingress_rows = pc.multiply(_numbers(cols.pair, pa.int64()), 2)   # the template of each message's line
    egress_rows = pc.add(ingress_rows, 1)
    order = [0] * (2 * n)   # both sides one after the other -> ingress, egress of each message in turn
    order[0::2] = range(n)
    order[1::2] = range(n, 2 * n)
    interleave = pa.array(order, pa.int64())
    line_rows = pa.concat_arrays([ingress_rows, egress_rows]).take(interleave)   # each line's template row
    received, now = _numbers(cols.received, pa.float64()), _numbers(cols.now, pa.float64())
    latency = pc.max_element_wise(pc.cast(pc.multiply(pc.subtract(now, received), 1_000_000.0), pa.int64(),
                                          safe=False), 0)   # int(): toward zero, as the line's text
    schema = arrow_schema()
    try:
        per_message: dict[str, Any] = {
            "event_time": (event_micros(received), event_micros(now)),
            "message_key": (pa.array(cols.keys, pa.string()),) * 2,
            "source_size": (_numbers(cols.sizes, pa.int64()).cast(schema.field("source_size").type),) * 2,
            "target_size": (_numbers(cols.out_sizes, pa.int64()).cast(schema.field("target_size").type),) * 2,
            "latency_us": (None, pc.cast(latency, schema.field("latency_us").type)),
            "redelivery_count": (_numbers(cols.redelivered, pa.int64()).cast(schema.field("redelivery_count").type),)
            * 2}
    except (pa.ArrowInvalid, OverflowError, TypeError) as e:
        raise Rejected(str(e)) from None
    columns = []
    for spec, field in zip(FIELDS, schema, strict=True):
        name = spec.name
        if name not in ingress_vars and name not in egress_vars:   # fixed on both lines: one take
            col = base.column(name).combine_chunks().take(line_rows)
        else:
            sides = []
            for variable, rows, i in ((ingress_vars, ingress_rows, 0), (egress_vars, egress_rows, 1)):
                if name in variable:
                    if name not in per_message or per_message[name][i] is None:
                        raise Rejected(f"{name}: a variable field without its values")
                    sides.append(per_message[name][i])
                else:
                    sides.append(base.column(name).combine_chunks().take(rows))
            col = pa.concat_arrays([s if s.type == sides[0].type else s.cast(sides[0].type) for s in sides])
            col = col.take(interleave)
        if spec.kind == TIMESTAMP and col.type != pa.int64():   # text would skip the grammar: the JSON decides
            raise Rejected(f"{name}: not among the lines' values")
        if col.type != field.type:   # e.g. event_time: int64 microseconds -> timestamp[us, UTC]
            col = col.cast(field.type)
        columns.append(col)
    table = pa.Table.from_arrays(columns, schema=schema)
    _check_rules(table)
    return table


def read_log(data: bytes, *, threads: bool = False) -> Any:  # noqa: ANN401 - a pyarrow Table
    """A whole hour file's records, checked: every line one JSON object of the record's fields (no other key,
    no blank line, the last line terminated), typed as the schema says, and passing ``validated``. ``threads``:
    parse blocks on pyarrow's thread pool (the audit's read of new lines; the gateway's sidecar thread uses one)."""
    import pyarrow as pa
    import pyarrow.json as pj

    if not data.isascii():   # ASCII is UTF-8 (a test of ~20 ms per 100 MB, where decoding costs ~60 ms)
        try:
            data.decode("utf-8")  # pyarrow's JSON reader takes invalid UTF-8 into strings as it is
        except UnicodeDecodeError as e:
            raise Rejected(f"not UTF-8 at byte {e.start}") from None
    lines = data.count(b"\n")
    if not data.endswith(b"\n"):
        raise Rejected("the last line is not terminated")
    if not data.startswith(b"{") or data.count(b"\n{") != lines - 1:  # every line starts an object
        raise Rejected("a line does not start with '{' (a blank line, or not a record)")
    try:
        table = pj.read_json(pa.py_buffer(data), read_options=pj.ReadOptions(use_threads=threads,
                                                                              block_size=BLOCK_BYTES),
                             parse_options=pj.ParseOptions(explicit_schema=arrow_schema(text_times=True),
                                                           unexpected_field_behavior="error"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise Rejected(str(e).splitlines()[0]) from None
    if table.num_rows != lines:  # two objects on one line: the audit reads one line as one record
        raise Rejected(f"{table.num_rows} records in {lines} lines")
    return validated(table)


def write_sidecar(path: Path, columns: FileColumns | None = None) -> Path:
    """Write path's sidecar atomically (a hidden temporary file, fsync, rename, fsync of the directory);
    Rejected when the file does not qualify (then no sidecar exists: a stale one is removed). With
    ``columns`` (the writer's values of every line of the file) and the file still of their size, the table
    is built from them (columns_table); otherwise, or if that fails, the JSON is read (read_log)."""
    return _write_sidecar(path, columns)[0]


def _write_sidecar(path: Path, columns: FileColumns | None) -> tuple[Path, bool]:
    """write_sidecar, and whether the table came from ``columns``."""
    import pyarrow.parquet as pq

    target = sidecar_path(path)
    table = None
    size = -1
    from_values = False
    if columns is not None:
        try:
            size = path.stat().st_size
            if size == columns.size:
                table = columns_table(columns)
                from_values = True
        except Exception as e:  # noqa: BLE001 - the JSON decides: it rejects or it is written from the JSON
            log.info("conversion log: sidecar of %s read from its JSON (values not usable: %s)", path.name, e)
            table, from_values = None, False
    if table is None:
        with open(path, "rb") as f:
            data = f.read()
        size = len(data)
        try:
            table = read_log(data)
        except Rejected:
            target.unlink(missing_ok=True)
            raise
    meta = {META_SIDECAR_VERSION: str(SIDECAR_VERSION), META_SCHEMA_VERSION: str(SCHEMA_VERSION),
            META_SOURCE_NAME: path.name, META_SOURCE_BYTES: str(size), META_SOURCE_LINES: str(table.num_rows)}
    table = table.replace_schema_metadata(meta)
    tmp = target.with_name(f".{target.name}.tmp")
    try:
        with open(tmp, "wb") as out:
            pq.write_table(table, out, write_page_checksum=True,   # the audit verifies pages (CRC)
                           use_dictionary=dictionary_fields(table.schema))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return target, from_values


def sidecar_current(path: Path) -> bool:
    """True when path has a sidecar that describes it as it is now (the audit's rule: sidecar_mismatch)."""
    import pyarrow.parquet as pq

    try:
        footer = pq.read_metadata(sidecar_path(path))
        size = path.stat().st_size
    except Exception:  # noqa: BLE001 - no sidecar, or a damaged one: written again
        return False
    meta = {k.decode("utf-8", "replace"): v.decode("utf-8", "replace") for k, v in (footer.metadata or {}).items()}
    return sidecar_mismatch(meta, footer.num_rows, path.name, size) is None


_HOUR = re.compile(r"^convlog-([0-9]{8}-[0-9]{2})-[0-9]+\.jsonl$")


def closed_files(directory: Path, hour: str, max_bytes: int) -> list[Path]:
    """Hour files the writer will not append to again: of an earlier hour than ``hour`` (YYYYMMDD-HH), or
    full (max_bytes; the writer opens the next one)."""
    out = []
    for p in sorted(directory.glob("convlog-*.jsonl")):
        m = _HOUR.match(p.name)
        try:
            if m is not None and (m.group(1) < hour or p.stat().st_size >= max_bytes):
                out.append(p)
        except OSError:
            continue
    return out


class SidecarOutcome(NamedTuple):
    """What became of one file's sidecar (``sidecar_job``): ``status`` written, current (a backlog file's
    sidecar already describes it), rejected (a line breaks the audit's rules: ``detail`` says which) or failed
    (an error: ``detail``); ``from_values``: written from the writer's values, not the JSON."""

    status: Literal["written", "current", "rejected", "failed"]
    from_values: bool = False
    detail: str = ""


def sidecar_job(path: Path, check: bool, columns: FileColumns | None) -> SidecarOutcome:
    """One file's sidecar, as the sidecar process writes it (bridge/convlog_sidecar_process): with ``check`` (a
    file found at start) only when it has no current one. Never raises: the outcome says what happened."""
    try:
        if check and sidecar_current(path):
            return SidecarOutcome("current")
        _, from_values = _write_sidecar(path, columns)
        return SidecarOutcome("written", from_values)
    except Rejected as e:
        return SidecarOutcome("rejected", detail=str(e))
    except Exception as e:  # noqa: BLE001 - a sidecar is an optimisation: said, and the audit parses the JSON
        return SidecarOutcome("failed", detail=f"{type(e).__name__}: {e}")
