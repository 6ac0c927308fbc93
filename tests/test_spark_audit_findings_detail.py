"""Findings a user can act on (issue #14), on a log with planted faults: failure records by message key with
their source, losses counted once per message and per route and destination, duplicates explained in
words, one colour per status in every chart, table cells that fit, control characters made visible."""
from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

try:
    from tests.spark_fixtures import FIXTURE_LOGS, spark  # noqa: F401
except ImportError:  # tests/ is not a package: pytest puts this directory on sys.path
    from spark_fixtures import FIXTURE_LOGS, spark  # noqa: F401

from mappings.convlog_schema import format_timestamp  # noqa: E402
from spark_audit.audit import load, run_audit  # noqa: E402
from spark_audit.charts import STATUS_COLOURS, grouped_bars, stacked_columns  # noqa: E402
from spark_audit.findings import AuditResult  # noqa: E402
from spark_audit.incremental import run_incremental  # noqa: E402
from spark_audit.keys import duplicate_why, duplicate_why_sql  # noqa: E402
from spark_audit.options import build_parser  # noqa: E402
from spark_audit.report import CELL_CHARS, build_summary, render_html  # noqa: E402
from spark_audit.run import run  # noqa: E402
from spark_audit.scope import AuditConfig  # noqa: E402

pytestmark = pytest.mark.spark

T0 = datetime(2026, 3, 1, 10, tzinfo=UTC)
LONG_KEY = "r2-" + "x" * 150
BELL_KEY = "f1\x07bell"
ESC_REASON = "broker said \x1b[31mno\x1b[0m"


class Log:
    """Records built from the fixture log's first ingress/egress pair, with the fields a fault needs."""

    def __init__(self) -> None:
        first = (FIXTURE_LOGS / "gateway-a.jsonl").read_text().splitlines()[:2]
        self.ingress, self.egress = (json.loads(line) for line in first)
        self.lines: list[str] = []

    def add(self, direction: str, key: str, seconds: float, route: str = "alpha", **fields: Any) -> None:
        base = self.ingress if direction == "ingress" else self.egress
        at = format_timestamp(T0 + timedelta(seconds=seconds))
        self.lines.append(json.dumps({**base, "event_time": at, "message_key": key, "route": route, **fields}))

    def pair(self, key: str, seconds: float, **fields: Any) -> None:
        self.add("ingress", key, seconds, **fields)
        self.add("egress", key, seconds + 0.001, **fields)

    def copies(self, key: str, seconds: float, qos: int, redeliveries: list[int]) -> None:
        """An ingress and one egress per redelivery count (to one subscriber): duplicates when more than one."""
        self.add("ingress", key, seconds, qos=qos)
        for i, count in enumerate(redeliveries):
            self.add("egress", key, seconds + 0.001 * (i + 1), qos=qos, client_id="sub-1", redelivery_count=count)

    def write(self, path: Path) -> Path:
        path.write_text("".join(line + "\n" for line in self.lines))
        return path


def planted() -> Log:
    log = Log()
    # Losses: r1 was received three times (the publisher sent it again), never delivered: one loss.
    for s in (0, 1, 2):
        log.add("ingress", "r1", s, client_id="pub-1", destination="in/r1")
    log.add("ingress", LONG_KEY, 10, client_id="pub-2", destination="in/shared")
    log.add("ingress", "r3", 20, route="beta", client_id="pub-3", destination="in/shared")
    log.pair("p1", 30)
    # Duplicates, each to one subscriber.
    log.copies("d0", 40, 0, [0, 0])
    log.copies("d2", 41, 2, [0, 0, 0])
    log.copies("d1a", 42, 1, [0, 1, 0])
    log.copies("d1b", 43, 1, [0, 0])
    log.copies("d1c", 44, 1, [0, 1])
    log.copies("d1d", 45, 1, [0, 1, 2, 2])
    # Failures, in time order: an egress that failed, an ingress that failed, a drop, a backout.
    log.add("ingress", BELL_KEY, 100, client_id="pub-1", destination="in/f1")
    log.add("egress", BELL_KEY, 100.5, status="failed", reason=ESC_REASON, client_id="sub-9", destination="OUT.F1")
    log.add("ingress", "f2", 110, route="beta", status="failed", reason="bad payload", client_id="pub-2",
            destination="in/f2")
    log.add("ingress", "f3", 119, client_id="pub-3", destination="in/f3")
    log.add("egress", "f3", 120, status="dropped", reason="no matching subscriber", client_id=None,
            destination="out/f3")
    log.add("ingress", "f4", 125, client_id="pub-4", destination="in/f4")
    log.add("egress", "f4", 130, status="backout", reason="backout threshold 3 exceeded", client_id=None,
            destination="BACKOUT.Q")
    # s1 was sent at +200 s and again at +260 s, never delivered (the window test below).
    log.add("ingress", "s1", 200, destination="in/s1")
    log.add("ingress", "s1", 260, destination="in/s1")
    log.pair("end", 3600)  # "as of": every record above is older than the grace period
    return log


@pytest.fixture(scope="module")
def audited(spark, tmp_path_factory) -> tuple[int, Path, str]:
    """The command on the planted log: exit code, output directory and the text it printed."""
    out = tmp_path_factory.mktemp("detail")
    log = planted().write(out / "planted.jsonl")
    args = build_parser().parse_args([str(log), "--out", str(out / "out"), "--grace", "60"])
    import contextlib
    import io

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = run(args, spark)
    return code, out / "out", printed.getvalue()


@pytest.fixture(scope="module")
def summary(audited) -> dict[str, Any]:
    return json.loads((audited[1] / "summary.json").read_text())


@pytest.fixture(scope="module")
def html(audited) -> str:
    return (audited[1] / "report.html").read_text()


def audit(spark, out: Path, **config: Any) -> AuditResult:
    result = run_audit(load(spark, str(out / "parquet"), AuditConfig(grace_seconds=60, **config)))
    result.cleanup()
    return result


def test_a_message_received_again_and_never_delivered_is_one_loss(summary):
    losses = {loss["message_key"]: loss for loss in summary["losses"]}
    assert set(losses) == {"r1", LONG_KEY, "r3", "s1"}
    assert summary["verdict"]["losses"] == 4
    r1 = losses["r1"]
    assert (r1["ingress_records"], r1["event_time"], r1["age_seconds"]) == (3, format_timestamp(T0), 3600.001)
    assert (losses["s1"]["ingress_records"], losses["r3"]["ingress_records"]) == (2, 1)


def test_a_loss_belongs_to_the_window_of_its_first_ingress(spark, audited):
    """s1 was received at +200 s and again at +260 s: a window from +230 s does not report it again (the
    window before it does, once its first ingress is older than the grace period)."""
    def lost(**config: Any) -> dict[str, object]:
        return {r["message_key"]: r["ingress_records"] for r in audit(spark, audited[1], **config).rows[
            "key_problems"] if r["kind"] == "lost"}

    assert "s1" not in lost(since=T0 + timedelta(seconds=230))
    assert lost(until=T0 + timedelta(seconds=280))["s1"] == 2


def test_a_message_received_again_after_its_loss_was_reported_is_not_reported_again(spark, tmp_path):
    """--every: x is reported lost by the run that first sees it older than the grace period; its copy
    received later (in the next run's new rows) is the same loss, matched against the carried tail."""
    logs = tmp_path / "logs"
    logs.mkdir()
    config = AuditConfig(grace_seconds=60)
    first = Log()
    first.add("ingress", "x", 30)
    first.pair("a", 120)
    first.write(logs / "a.jsonl")
    lost = []
    for log in (None, "b.jsonl"):
        if log:
            again = Log()
            again.add("ingress", "x", 130)
            again.pair("b", 300)
            again.write(logs / log)
        _new, result = run_incremental(spark, str(logs), str(tmp_path / "parquet"), str(tmp_path / "ckpt"), config)
        result.cleanup()
        lost.append([(r["message_key"], r["ingress_records"]) for r in result.rows["key_problems"]
                     if r["kind"] == "lost"])
    assert lost == [[("x", 1)], []]


def test_loss_counts_per_route_and_destination_in_summary_report_and_text(summary, html, audited):
    assert summary["loss_counts"] == {
        "by_route": [{"route": "alpha", "losses": 3}, {"route": "beta", "losses": 1}],
        "by_destination": [{"destination": "in/shared", "losses": 2}, {"destination": "in/r1", "losses": 1},
                           {"destination": "in/s1", "losses": 1}],
    }
    top = html[:html.index("<h2>Volume")]  # above every other section
    assert "<h2>Losses by route</h2>" in top and "<h2>Losses by destination</h2>" in top
    assert "<td>alpha</td><td>3</td>" in top and "<td>in/shared</td><td>2</td>" in top
    assert "losses by route: alpha 3, beta 1" in audited[2]
    assert "losses by destination: in/shared 2, in/r1 1, in/s1 1" in audited[2]


def test_duplicates_say_why_in_words(summary):
    why = {d["message_key"]: (d["kind"], d["why"]) for d in summary["duplicates"]}
    assert why == {
        "d0": ("suspicious", "QoS 0 delivered twice"),
        "d2": ("suspicious", "QoS 2 delivered 3 times"),
        "d1a": ("suspicious", "3 copies but only 1 redelivery announced"),
        "d1b": ("suspicious", "2 copies but no redelivery announced"),
        "d1d": ("suspicious", "4 copies but only 2 redeliveries announced"),
        "d1c": ("allowed", "QoS 1 delivered twice, 1 redelivery announced"),
    }


def test_the_words_are_the_same_in_spark_sql(spark):
    cases = [(q, c, r) for q in (0, 1, 2) for c in (2, 3, 5) for r in (0, 1, 2, 4)]
    rows = spark.createDataFrame(cases, "qos INT, copies LONG, max_redelivery INT").selectExpr(
        "qos", "copies", "max_redelivery", f"{duplicate_why_sql()} AS why").collect()
    assert {(r["qos"], r["copies"], r["max_redelivery"]): r["why"] for r in rows} == {
        c: duplicate_why(*c) for c in cases}


FAILURES = [  # event_time, status, key, route, direction, reason, client, destination, source client/destination
    ("10:01:40.500000", "failed", BELL_KEY, "alpha", "egress", ESC_REASON, "sub-9", "OUT.F1", "pub-1", "in/f1"),
    ("10:01:50.000000", "failed", "f2", "beta", "ingress", "bad payload", "pub-2", "in/f2", "pub-2", "in/f2"),
    ("10:02:00.000000", "dropped", "f3", "alpha", "egress", "no matching subscriber", None, "out/f3", "pub-3",
     "in/f3"),
    ("10:02:10.000000", "backout", "f4", "alpha", "egress", "backout threshold 3 exceeded", None, "BACKOUT.Q",
     "pub-4", "in/f4"),
]


def failure_tuples(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(r["event_time"][11:-1], r["status"], r["message_key"], r["route"], r["direction"], r["reason"],
             r["client_id"], r["destination"], r["source_client"], r["source_destination"]) for r in rows]


def test_failures_are_listed_by_message_key_with_route_reason_and_source(spark, summary, audited):
    assert failure_tuples(summary["failure_records"]) == FAILURES
    table = spark.read.parquet(str(audited[1] / "tables" / "failure_records")).collect()
    assert sorted(failure_tuples([r.asDict() for r in table]), key=str) == sorted(FAILURES, key=str)


@pytest.mark.parametrize("fetched_by_spark", [False, True])
def test_the_failure_list_is_capped_at_the_first_by_time_with_the_total_stated(spark, audited, monkeypatch,
                                                                                 fetched_by_spark):
    import spark_audit.audit as audit_module

    if fetched_by_spark:  # the records of flagged keys fetched by a Spark job of their own
        monkeypatch.setattr(audit_module, "MAX_FETCHED_KEYS", 0)
    result = run_audit(load(spark, str(audited[1] / "parquet"), AuditConfig(grace_seconds=60, max_items=3)))
    summary = build_summary(result, None)
    result.cleanup()
    assert failure_tuples(summary["failure_records"]) == FAILURES[:3]
    assert summary["loss_counts"]["by_route"] == [{"route": "alpha", "losses": 3}, {"route": "beta", "losses": 1}]
    page = render_html(summary)
    assert "Failed, backed out and dropped records by message (the first 3 of 4 by time)" in page
    assert "<p class=more>3 of 4 shown.</p>" in page


def test_the_html_shows_control_characters_as_visible_escapes(html):
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f]", html)  # tab and newline may be markup whitespace
    assert "f1<span class=esc>\\x07</span>bell" in html  # the key in the failure table
    assert "broker said <span class=esc>\\x1b</span>[31mno<span class=esc>\\x1b</span>[0m" in html
    assert "broker said \\x1b[31mno\\x1b[0m" in html  # the reason as a chart label (SVG text)


def test_a_long_key_is_shortened_in_its_cell_and_whole_in_the_tooltip(html):
    shown = LONG_KEY[:CELL_CHARS - 1] + "\u2026"
    assert f'<td title="{LONG_KEY}">{shown}</td>' in html
    assert "overflow-wrap:anywhere" in html  # what is not shortened wraps inside its column


def fills(svg: str) -> dict[str, set[str]]:
    """Each status's colours in a chart: from the tooltips of its bars and its legend."""
    out: dict[str, set[str]] = {}
    for fill, status in re.findall(r'fill="(#[0-9a-f]{6})"><title>[^<]* (\w+): [0-9.]+</title>', svg):
        out.setdefault(status, set()).add(fill)
    for fill, name in re.findall(r'fill="(#[0-9a-f]{6})"/><text [^>]*>(\w+)</text>', svg):
        out.setdefault(name, set()).add(fill)
    return out


def test_each_status_has_the_same_colour_in_every_chart(html):
    volume, failures = (svg for svg in re.findall(r"<svg.*?</svg>", html, re.S) if "by status" in svg or
                        "Failures by reason" in svg)
    assert set(fills(volume)) == {"ok", "failed", "backout", "dropped"}
    assert set(fills(failures)) == {"failed", "backout", "dropped"}
    for chart in (volume, failures):
        assert fills(chart) == {s: {STATUS_COLOURS[s]} for s in fills(chart)}


def test_status_colours_do_not_depend_on_which_statuses_a_chart_has():
    one = grouped_bars(["r"], {"dropped": [1]}, "t", colours=STATUS_COLOURS)
    other = stacked_columns(["h"], {"ok": [3], "failed": [1], "dropped": [2]}, "t", colours=STATUS_COLOURS)
    assert fills(one)["dropped"] == fills(other)["dropped"] == {STATUS_COLOURS["dropped"]}
    latency = grouped_bars(["r"], {"p50": [1], "p95": [2], "p99": [3], "max": [4]}, "t")
    assert not {c for cs in fills(latency).values() for c in cs} & set(STATUS_COLOURS.values())
