"""Session-scoped local SparkSession for the spark_audit tests (import the `spark` fixture)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from mappings.convlog_schema import format_timestamp

FIXTURE_LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One real local[2] session per test run: UI off, 2 shuffle partitions, loopback only."""
    pytest.importorskip("pyspark")
    from spark_audit.session import build_session

    session = build_session("local[2]", "mqbridge-audit-tests")
    yield session
    session.stop()


def generated_log(messages: int, lost_every: int = 97, duplicated_every: int = 89, malformed_every: int = 113) -> bytes:
    """A time-ordered log of `messages` QoS 1 messages (ingress, then egress 1 ms later), one a second, built
    from gateway-a's first pair: every lost_every-th has no egress (a loss), every duplicated_every-th two
    egress copies without redelivery (a suspicious duplicate), and after every malformed_every-th a line
    that is not JSON (0: none of that kind)."""
    first = (FIXTURE_LOGS / "gateway-a.jsonl").read_text().splitlines()[:2]
    ingress, egress = (json.loads(line) for line in first)
    start = datetime(2026, 3, 1, 10, tzinfo=UTC)
    lines: list[str] = []
    for i in range(messages):
        at, key = start + timedelta(seconds=i), f"g{i}"
        lines.append(json.dumps({**ingress, "event_time": format_timestamp(at), "message_key": key},
                                separators=(",", ":")))
        copies = 0 if lost_every and i % lost_every == lost_every // 2 else 1
        copies += 1 if copies and duplicated_every and i % duplicated_every == duplicated_every // 3 else 0
        for c in range(copies):
            sent = at + timedelta(milliseconds=1 + c)
            lines.append(json.dumps({**egress, "event_time": format_timestamp(sent), "message_key": key},
                                    separators=(",", ":")))
        if malformed_every and i % malformed_every == malformed_every // 4:
            lines.append("this is not json")
    return "".join(line + "\n" for line in lines).encode()


def findings(summary: dict[str, Any]) -> dict[str, Any]:
    """What an audit found, in a form that adds up over incremental runs."""
    failures: dict[tuple[str, str, str], int] = {}
    for r in summary["failures"]:
        key = (r["status"], r["route"], r["reason"])
        failures[key] = failures.get(key, 0) + int(r["records"])
    return {
        "losses": {r["message_key"] for r in summary["losses"]},
        "unexpected_egress": {r["message_key"] for r in summary["unexpected_egress"]},
        "duplicates": {(r["kind"], r["message_key"], r["copies"]) for r in summary["duplicates"]},
        "failures": failures,
        "records": sum(int(r["records"]) for r in summary["volume"]["hour"]),
        "dropped": summary["verdict"]["dropped"],
    }


def union(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    failures = dict(a["failures"])
    for key, n in b["failures"].items():
        failures[key] = failures.get(key, 0) + n
    return {"losses": a["losses"] | b["losses"], "unexpected_egress": a["unexpected_egress"] | b["unexpected_egress"],
            "duplicates": a["duplicates"] | b["duplicates"], "failures": failures,
            "records": a["records"] + b["records"], "dropped": a["dropped"] + b["dropped"]}


def crash_incremental(argv: list[str], point: str, exit_code: int) -> None:
    """`python -m spark_audit ARGV` made to die at a crash point (spark_audit/increments.py MQB_TEST_CRASH_AT)."""
    env = {**os.environ, "MQB_TEST_CRASH_AT": point}
    done = subprocess.run([sys.executable, "-m", "spark_audit", *argv], env=env, capture_output=True, text=True,
                          timeout=600, cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == exit_code, done.stderr[-3000:]
