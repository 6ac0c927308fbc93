"""The audit accepts exactly the timestamps ConversionRecord.from_dict accepts, as the same instants."""
from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta, timezone

import pytest

pytest.importorskip("pyspark")

try:
    from tests.spark_fixtures import FIXTURE_LOGS, spark  # noqa: F401
except ImportError:  # tests/ is not a package: pytest puts this directory on sys.path
    from spark_fixtures import FIXTURE_LOGS, spark  # noqa: F401

from pyspark.sql.types import StringType, StructField, StructType  # noqa: E402

from bridge.cli.main import main  # noqa: E402
from mappings.convlog_schema import ConversionRecord, parse_timestamp  # noqa: E402
from spark_audit.schema import parse_times  # noqa: E402

pytestmark = pytest.mark.spark

CURATED = [
    "2026-03-01T16:15:43.123456Z",  # what the gateway writes
    "2026-03-01T16:15:43Z", "2026-03-01T16:15:43+00:00", "2026-03-01T16:15:43.1-05:30",
    "2026-03-01 16:15:43+02:00", "2026-03-01T16:15:43.660800+18:00", "2026-03-01T16:15:43-18:00",
    "2026-03-01T16:15:43+18:01", "2026-03-01T16:15:43+19:00", "2026-03-01T16:15:43.1234567Z",
    "2026-03-01T16:15:43", "2026-03-01T16:15Z", "2026-03-01", "2026-02-29T00:00:00Z", "2028-02-29T00:00:00Z",
    "2026-02-30T00:00:00Z", "2026-13-01T00:00:00Z", "2026-03-01T24:00:00Z", "2026-03-01T23:59:60Z",
    "2026-03-01T16:15:43Z\n", " 2026-03-01T16:15:43Z", "2026-03-01t16:15:43Z", "2026-03-01T16:15:43z",
    "2026-03-01T16:15:43+0000", "2026-03-01T16:15:43+00", "20260301T161543Z", "1900-01-01T00:00:00+01:00",
    "1899-12-31T23:59:59Z", "2999-12-31T23:59:59-01:00", "0000-01-01T00:00:00Z", "", "null", "٢٠٢٦-03-01T16:15:43Z",
]


def mutated(rng: random.Random) -> str:
    """A timestamp built from fields near their limits, then sometimes damaged by one character."""
    y = rng.choice([1899, 1900, 1970, 2026, 2999, 3000, rng.randint(1000, 9999)])
    def near(lo: int, hi: int) -> int:  # mostly in range, sometimes one past either end
        return rng.randint(lo, hi) if rng.random() < 0.85 else rng.choice([lo - 1, hi + 1])
    mo, d, h, mi, s = near(1, 12), near(1, 31), near(0, 23), near(0, 59), near(0, 59)
    frac = rng.choice(["", "." + "1234567"[: rng.randint(0, 7)]])
    offset = f"{rng.choice('+-')}{rng.randint(0, 19):02d}:{rng.randint(0, 60):02d}"
    zone = rng.choice(["Z", "Z", "+00:00", "z", "", offset, "+0100", "+01", "+05:30"])
    sep = rng.choice("T T t")
    text = f"{y:04d}-{mo:02d}-{d:02d}{sep}{h:02d}:{mi:02d}:{s:02d}{frac}{zone}"
    if rng.random() < 0.2:
        i = rng.randrange(len(text))
        text = text[:i] + rng.choice("0:-.TZ ") + text[i + 1:]
    return text


def python_reading(text: str) -> datetime | None:
    try:
        return parse_timestamp(text)
    except ValueError:
        return None


def test_the_audit_reads_the_timestamps_from_dict_reads(spark) -> None:  # noqa: F811
    rng = random.Random(20261126)
    texts = list(dict.fromkeys(CURATED + [mutated(rng) for _ in range(8000)]))
    frame = spark.createDataFrame([(t,) for t in texts], StructType([StructField("event_time", StringType())]))
    read = {r["text"]: r["event_time"] for r in
            parse_times(frame.withColumn("text", frame["event_time"])).collect()}
    expected = {t: python_reading(t) for t in texts}
    accepted = sum(v is not None for v in expected.values())
    assert accepted > 300 and len(texts) - accepted > 300  # both kinds well represented
    disagree = {t: (expected[t], read[t]) for t in texts
                if (None if read[t] is None else read[t].replace(tzinfo=UTC)) != expected[t]}
    assert disagree == {}


def other_form(text: str, n: int) -> str:
    """The same instant in another form of the grammar (offset, no fraction, a space)."""
    t = parse_timestamp(text)
    forms = [t.isoformat(), t.astimezone(timezone(timedelta(hours=2))).isoformat(sep=" "),
             t.astimezone(timezone(timedelta(hours=-5, minutes=-30))).isoformat(timespec="milliseconds"),
             t.replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ") if t.microsecond == 0 else text]
    return forms[n % len(forms)]


def test_a_log_in_other_timestamp_forms_audits_the_same(spark, tmp_path) -> None:  # noqa: F811
    src = (FIXTURE_LOGS / "gateway-a.jsonl").read_text().splitlines()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "log.jsonl").write_text("\n".join(src) + "\n")
    rewritten = []
    for n, line in enumerate(src):
        record = json.loads(line)
        record["event_time"] = other_form(record["event_time"], n)
        ConversionRecord.from_dict(record)  # the library reads it
        rewritten.append(json.dumps(record))
    assert sum("+00:00" in r for r in rewritten) > 5 and sum("-05:30" in r for r in rewritten) > 5
    (tmp_path / "b" / "log.jsonl").write_text("\n".join(rewritten) + "\n")
    summaries = []
    for d in ("a", "b"):
        code = main(["audit", str(tmp_path / d), "--out", str(tmp_path / f"out-{d}"), "--grace", "60",
                     "--no-parquet-tables"])
        summary = json.loads((tmp_path / f"out-{d}" / "summary.json").read_text())
        assert code == 1 and summary["input"]["bad"] == 0
        summaries.append(summary)
    assert summaries[0]["verdict"] == summaries[1]["verdict"]
    assert summaries[0]["losses"] == summaries[1]["losses"]
    assert summaries[0]["records"] == summaries[1]["records"]
