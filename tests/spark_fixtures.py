"""Session-scoped local SparkSession for the spark_audit tests (import the `spark` fixture)."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

FIXTURE_LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One real local[2] session per test run: UI off, 2 shuffle partitions, loopback only."""
    pytest.importorskip("pyspark")
    from spark_audit.session import build_session

    session = build_session("local[2]", "mqbridge-audit-tests")
    yield session
    session.stop()
