"""Audit outputs: JSON summary (stable keys), one Parquet table per finding, self-contained HTML."""
from __future__ import annotations

import json
import os
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from mappings.convlog_schema import SCHEMA_VERSION
from spark_audit import fs, table_files
from spark_audit.charts import STATUS_COLOURS, escape, grouped_bars, marked, stacked_columns
from spark_audit.findings import AuditResult
from spark_audit.ingest import IngestResult
from spark_audit.scope import Row

REPORT_VERSION = 1
EXIT_OK = 0
EXIT_GATE = 1  # loss or suspicious duplicates found
EXIT_NOT_AUDITED = 2  # part of the input could not be audited (damaged files), and no finding above
HTML_ROWS = 50
CELL_CHARS = 60  # a longer cell value is shortened in the HTML, whole in its tooltip (title)
# The failure records' columns in the HTML (the protocols are the route's: in summary.json and Parquet).
FAILURE_HTML_COLUMNS = ["event_time", "status", "message_key", "route", "direction", "reason", "client_id",
                        "destination", "source_client", "source_destination"]


def _iso(value: object) -> str | None:
    return value.isoformat() if value is not None else None  # type: ignore[attr-defined]


def finding_tables(result: AuditResult) -> dict[str, DataFrame | tuple[list[Row], StructType]]:
    """The Parquet tables, one per finding (losses and unexpected egress split out of key_problems): each as
    its collected rows and schema where the audit has them so (the usual case) and pyarrow can write them,
    else as a Spark frame."""
    as_rows = result.tables.rows if table_files.available() else lambda _name: None
    tables: dict[str, DataFrame | tuple[list[Row], StructType]] = {
        name: as_rows(name) or result.tables[name] for name in result.tables if name != "key_problems"}
    problems = as_rows("key_problems")
    for name, kind, dropped in (("losses", "lost", ("kind",)),
                                ("unexpected_egress", "unexpected_egress", ("kind", "age_seconds", "ingress_records"))):
        if problems is None:
            tables[name] = result.tables["key_problems"].where(F.col("kind") == kind).drop(*dropped)
        else:
            found, schema = problems
            tables[name] = ([r for r in found if r["kind"] == kind],
                            StructType([f for f in schema.fields if f.name not in dropped]))
    return dict(sorted(tables.items()))


def build_summary(result: AuditResult, ingest: IngestResult | None) -> dict[str, Any]:
    """The machine-readable summary; keys are stable across runs and versions of this report."""
    rows = result.rows
    config = result.data.config
    by_direction: dict[str, int] = defaultdict(int)
    by_status: dict[str, int] = defaultdict(int)
    for r in rows["volume_hourly"]:
        by_direction[str(r["direction"])] += int(r["records"])
        by_status[str(r["status"])] += int(r["records"])
    problems = rows["key_problems"]
    counts = result.counts
    bad_input = ingest.bad if ingest else 0
    damaged = len(ingest.damaged) if ingest else 0
    exit_code = EXIT_GATE if result.gate_failed else EXIT_NOT_AUDITED if damaged else EXIT_OK
    return {
        "report_version": REPORT_VERSION,
        "log_schema_version": SCHEMA_VERSION,
        "window": {
            "since": _iso(config.since),
            "until": _iso(config.until),
            "as_of": _iso(result.data.as_of),
            "grace_seconds": config.grace_seconds,
        },
        "input": ingest.as_dict() if ingest else None,
        "records": {
            "loaded": result.data.rows_loaded,
            "in_window": result.data.rows_in_window,
            "by_direction": dict(sorted(by_direction.items())),
            "by_status": dict(sorted(by_status.items())),
        },
        "verdict": {
            "exit_code": exit_code,
            "gate_failed": result.gate_failed,
            "losses": counts["losses"],
            "unexpected_egress": counts["unexpected_egress"],
            "duplicates_allowed": counts["duplicates_allowed"],
            "duplicates_suspicious": counts["duplicates_suspicious"],
            "failed": counts["failed"],
            "backout": counts["backout"],
            "dropped": counts["dropped"],
            "bad_input_lines": bad_input,
            "damaged_files": damaged,
        },
        "losses": [_without(p, "kind") for p in problems if p["kind"] == "lost"],
        "unexpected_egress": [_without(p, "kind", "age_seconds", "ingress_records") for p in problems
                              if p["kind"] == "unexpected_egress"],
        "loss_counts": result.loss_counts,
        "duplicates": rows["duplicates"],
        "failures": rows["failures"],
        "failure_records": rows["failure_records"],
        "top_clients": rows["top_clients"],
        "top_destinations": rows["top_destinations"],
        "conversion_changes": rows["conversion_changes"],
        "latency": rows["latency"],
        "payload_sizes": rows["payload_sizes"],
        "volume": {"hour": rows["volume_hourly"], "day": rows["volume_daily"]},
    }


def _without(row: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in keys}


def write_outputs(
    result: AuditResult, summary: dict[str, Any], out_dir: str, parquet: bool = True, parallel: int = 4
) -> None:
    """Write (optionally) tables/<finding>/ Parquet, report.html and summary.json into out_dir (a local
    directory, or a URI: written through Hadoop's FileSystem API). summary.json comes last, each file whole
    (a local one renamed into place): once a run's summary is there, so is the rest of its outputs."""
    if parquet:   # tables of rows without Spark (spark_audit.table_files); frames by Spark jobs, side by side
        tables = finding_tables(result)
        with ThreadPoolExecutor(max_workers=parallel) as pool:
            jobs = [pool.submit(table.coalesce(1).write.mode("overwrite").parquet, fs.join(out_dir, "tables", name))
                    for name, table in tables.items() if isinstance(table, DataFrame)]
            for name, table in tables.items():
                if not isinstance(table, DataFrame):
                    table_files.write_table(fs.join(out_dir, "tables", name), *table)
            for done in jobs:
                done.result()
    texts = {"report.html": render_html(summary), "summary.json": json.dumps(summary, indent=2) + "\n"}
    if fs.is_remote(out_dir):
        hadoop = fs.Hadoop()
        hadoop.mkdirs(out_dir)
        for name, text in texts.items():
            hadoop.write(fs.join(out_dir, name), text.encode())
    else:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        for name, text in texts.items():
            staged = out / f".{name}.tmp"
            staged.write_text(text)
            os.replace(staged, out / name)


def _table(rows: list[dict[str, Any]], columns: list[str] | None = None, total: int | None = None) -> str:
    """rows as an HTML table (the first HTML_ROWS); total: how many there are in all, when more than rows."""
    if not rows:
        return "<p class=none>None.</p>"
    columns = columns or list(rows[0])
    head = "".join(f"<th>{escape(c).replace('_', '_<wbr>')}</th>" for c in columns)  # may break after _
    body = "".join("<tr>" + "".join(_td(r.get(c)) for c in columns) + "</tr>" for r in rows[:HTML_ROWS])
    shown, total = min(len(rows), HTML_ROWS), max(total or 0, len(rows))
    more = f"<p class=more>{shown} of {total} shown.</p>" if total > shown else ""
    return f"<table><tr>{head}</tr>{body}</table>{more}"


def _td(value: object) -> str:
    """A table cell: invisible characters as marked escapes; a long value shortened, whole as its tooltip."""
    text = _cell(value)
    if len(text) <= CELL_CHARS:
        return f"<td>{marked(text)}</td>"
    return f'<td title="{escape(text)}">{marked(text[:CELL_CHARS - 1])}\u2026</td>'


def _cell(value: object) -> str:
    if value is None:
        return "\u2014"
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, list):  # the payload histogram
        return ", ".join(f"{b['bucket']}: {b['messages']}" for b in value if b["messages"])
    return str(value)


def _volume_chart(summary: dict[str, Any]) -> str:
    hourly = summary["volume"]["hour"]
    windows = sorted({r["window_start"] for r in hourly})
    statuses = sorted({r["status"] for r in hourly}, key=lambda s: (s != "ok", s))
    series = {s: [0.0] * len(windows) for s in statuses}
    index = {w: i for i, w in enumerate(windows)}
    for r in hourly:
        series[r["status"]][index[r["window_start"]]] += r["records"]
    labels = [w[5:13].replace("T", " ") + "h" for w in windows]
    return stacked_columns(labels, series, "Records per hour by status", colours=STATUS_COLOURS)


def _latency_chart(summary: dict[str, Any]) -> str:
    lat = summary["latency"]
    routes = [r["route"] for r in lat]
    series = {p: [float(r[f"{p}_us"]) / 1000 for r in lat] for p in ("p50", "p95", "p99")}
    series["max"] = [float(r["max_us"]) / 1000 for r in lat]
    return grouped_bars(routes, series, "Latency per route (ms, log scale)", unit=" ms", log=True)


def _failure_chart(summary: dict[str, Any]) -> str:
    per_reason: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for r in summary["failures"]:
        per_reason[r["reason"]][r["status"]] += r["records"]
    reasons = sorted(per_reason, key=lambda k: -sum(per_reason[k].values()))[:15]
    statuses = sorted({s for v in per_reason.values() for s in v})
    series = {s: [per_reason[r].get(s, 0.0) for r in reasons] for s in statuses}
    return grouped_bars(reasons, series, "Failures by reason", colours=STATUS_COLOURS)


CSS = """
body{font-family:sans-serif;margin:24px;color:#1a202c;max-width:1100px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #e2e8f0}
.cards{display:flex;flex-wrap:wrap;gap:10px}.card{border:1px solid #e2e8f0;border-radius:6px;padding:8px 12px}
.card b{display:block;font-size:20px}.bad b{color:#c53030}.good b{color:#2f855a}
table{border-collapse:collapse;font-size:12px;margin:6px 0;max-width:100%}
td,th{border:1px solid #e2e8f0;padding:3px 6px;vertical-align:top;overflow-wrap:anywhere;max-width:24em}
th{background:#f7fafc;text-align:left;overflow-wrap:normal}.none{color:#718096}
td[title]{text-decoration:underline dotted #a0aec0}.esc{background:#fefcbf;color:#975a16;font-family:monospace}
.side{display:flex;flex-wrap:wrap;gap:24px;align-items:flex-start}
"""


def _loss_counts(summary: dict[str, Any]) -> str:
    """Losses per route and per destination, side by side (nothing when there is no loss)."""
    counts = summary["loss_counts"]
    if not summary["verdict"]["losses"]:
        return ""
    return ("<div class=side>" + "".join(
        f"<div><h2>Losses by {name}</h2>{_table(counts[f'by_{name}'])}</div>" for name in ("route", "destination"))
        + "</div>")


def render_html(summary: dict[str, Any]) -> str:
    """A self-contained page (inline CSS and SVG, no scripts or external files)."""
    v = summary["verdict"]
    cards = []
    for key in ("losses", "duplicates_suspicious", "unexpected_egress", "duplicates_allowed", "failed",
                "backout", "dropped", "bad_input_lines", "damaged_files"):
        cls = "bad" if v[key] and key not in ("duplicates_allowed",) else "good"
        cards.append(f'<div class="card {cls}"><b>{v[key]}</b>{escape(key.replace("_", " "))}</div>')
    w = summary["window"]
    verdict = ("FAIL: loss or suspicious duplicates" if v["gate_failed"]
               else "INCOMPLETE: damaged input files" if v.get("damaged_files") else "PASS")
    inp = summary["input"] or {}
    damaged = [("Damaged input files (the readable part was audited)",
                _table([{"file": f, "problem": p} for f, p in inp["damaged"].items()]))] if inp.get("damaged") else []
    failures_total = sum(v[k] for k in ("failed", "backout", "dropped"))
    shown_failures = len(summary["failure_records"])
    sections = [
        *damaged,
        ("Volume", _volume_chart(summary) if summary["volume"]["hour"] else "<p class=none>No records.</p>"),
        ("Losses (ingress with no egress after the grace period)", _table(summary["losses"], total=v["losses"])),
        ("Unexpected egress (no ingress)", _table(summary["unexpected_egress"], total=v["unexpected_egress"])),
        ("Suspicious duplicates (QoS 0 or 2, or more copies than announced redeliveries)",
         _table([d for d in summary["duplicates"] if d["kind"] == "suspicious"], total=v["duplicates_suspicious"])),
        ("Allowed duplicates (QoS 1 redeliveries)",
         _table([d for d in summary["duplicates"] if d["kind"] == "allowed"], total=v["duplicates_allowed"])),
        ("Failures and backouts by reason",
         (_failure_chart(summary) if summary["failures"] else "") + _table(summary["failures"])),
        ("Failed, backed out and dropped records by message " + (
            f"(the first {shown_failures} of {failures_total} by time)" if shown_failures < failures_total
            else "(by time)"),
         _table(summary["failure_records"], FAILURE_HTML_COLUMNS, total=failures_total)),
        ("Top offending clients", _table(summary["top_clients"])),
        ("Top offending destinations", _table(summary["top_destinations"])),
        ("Conversion losses and coercions", _table(summary["conversion_changes"])),
        ("Latency per route",
         (_latency_chart(summary) if summary["latency"] else "") + _table(summary["latency"])),
        ("Payload sizes", _table(summary["payload_sizes"])),
        ("Volume per day with trend", _table(summary["volume"]["day"])),
        ("Bad input lines", _table([{"problem": k, "lines": n} for k, n in inp.get("problems", {}).items()])
         + _table(inp.get("samples", []))),
        ("Notes on input files", _table([{"file": f, "note": n} for f, n in inp.get("notes", {}).items()])),
    ]
    body = "".join(f"<h2>{escape(title)}</h2>{content}" for title, content in sections)
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>mqbridge audit</title>"
        f"<style>{CSS}</style></head><body><h1>mqbridge conversion audit — {escape(verdict)}</h1>"
        f"<p>Window {escape(str(w['since'] or 'start'))} to {escape(str(w['until'] or 'end'))}, as of "
        f"{escape(str(w['as_of']))}, grace {w['grace_seconds']:g} s; "
        f"{summary['records']['in_window']} records audited.</p>"
        f"<div class=cards>{''.join(cards)}</div>{_loss_counts(summary)}{body}</body></html>\n"
    )
