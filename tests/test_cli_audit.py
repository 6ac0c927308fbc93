"""`mqbridge audit`: the same arguments as `python -m spark_audit`, and a clear message without PySpark."""
from __future__ import annotations

import builtins
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from bridge.cli.audit import EXIT_NO_SPARK
from bridge.cli.main import build_parser, main

try:
    from tests.spark_fixtures import FIXTURE_LOGS, spark  # noqa: F401
except ImportError:  # tests/ is not a package: pytest puts this directory on sys.path
    from spark_fixtures import FIXTURE_LOGS, spark  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]


def test_audit_command_parses_the_shared_arguments():
    args = build_parser().parse_args(["audit", "logs/", "more.jsonl", "--since", "2026-03-01T10:00:00Z",
                                      "--master", "spark://h:7077", "--out", "o", "--grace", "30"])
    assert args.logs == ["logs/", "more.jsonl"]
    assert (args.master, args.out, args.grace) == ("spark://h:7077", "o", 30.0)
    assert build_parser().parse_args(["audit", "logs/"]).master is None  # spark-submit decides, else local[2]
    assert args.since.isoformat() == "2026-03-01T10:00:00+00:00"


def test_missing_pyspark_is_a_clear_message(monkeypatch, capsys):
    real_import = builtins.__import__

    def no_pyspark(name, *args, **kwargs):
        if name == "pyspark" or name.startswith("pyspark."):
            raise ModuleNotFoundError("No module named 'pyspark'", name="pyspark")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyspark)
    assert main(["audit", "fixtures/logs"]) == EXIT_NO_SPARK
    assert "pip install 'mqbridge[spark]'" in capsys.readouterr().err


@pytest.mark.spark
def test_mqbridge_audit_runs_and_gates(spark, tmp_path):
    code = main(["audit", str(FIXTURE_LOGS), "--out", str(tmp_path), "--grace", "60", "--no-parquet-tables"])
    assert code == 1
    assert json.loads((tmp_path / "summary.json").read_text())["verdict"]["losses"] == 1


@pytest.mark.spark
def test_an_audit_run_from_another_thread_leaves_the_callers_session_running(spark, tmp_path):
    """Seen in a full test run: an audit that took the session the caller owns for its own (the thread's
    active session is per thread) stopped it at the end, and every later audit failed."""
    codes: list[int] = []
    worker = threading.Thread(target=lambda: codes.append(main(
        ["audit", str(FIXTURE_LOGS), "--out", str(tmp_path), "--grace", "60", "--no-parquet-tables"])))
    worker.start()
    worker.join(300)
    assert codes == [1]
    assert spark.range(3).count() == 3   # still running


@pytest.mark.spark
def test_the_command_in_a_process_of_its_own(tmp_path):
    """`mqbridge audit` as a user runs it: its own JVM, started and stopped by it (its accumulator server
    stopped at the start: the audit runs no Python code on executors, which would report to it), the
    tables written, the verdict in the exit code."""
    done = subprocess.run([sys.executable, "-m", "bridge", "audit", str(FIXTURE_LOGS), "--out", str(tmp_path),
                           "--grace", "60"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "Exception" not in done.stderr
    assert json.loads((tmp_path / "summary.json").read_text())["verdict"]["losses"] == 1
    assert (tmp_path / "tables" / "losses" / "_SUCCESS").is_file() and "FAIL" in done.stdout
