"""The optional AppCDS archive: named after the JVM, Spark's jars and the options; never needed to run."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spark_audit import cds

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_LOGS = ROOT / "fixtures" / "logs"
OPTIONS = "-XX:+UseSerialGC"


@pytest.fixture
def fake_spark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A SPARK_HOME with two jars, and an archive directory of the test's own."""
    jars = tmp_path / "spark" / "jars"
    jars.mkdir(parents=True)
    (jars / "a.jar").write_bytes(b"a")
    (jars / "b.jar").write_bytes(b"bb")
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "spark"))
    monkeypatch.setenv("MQB_SPARK_CDS_DIR", str(tmp_path / "cds"))
    monkeypatch.delenv("MQB_SPARK_CDS", raising=False)
    monkeypatch.delenv(cds.CREATE_ENV, raising=False)
    if cds.java_executable() is None:
        pytest.skip("no java on this machine")
    return jars


def test_the_archive_name_changes_with_the_jars_and_the_options(fake_spark):
    first = cds.archive_key(OPTIONS)
    assert first is not None and first == cds.archive_key(OPTIONS)
    assert cds.archive_key(OPTIONS + " -Xmx1g") != first
    (fake_spark / "b.jar").write_bytes(b"bbb")  # an upgraded jar
    second = cds.archive_key(OPTIONS)
    assert second != first
    (fake_spark / "c.jar").write_bytes(b"c")  # an added jar
    assert cds.archive_key(OPTIONS) not in (first, second)


def test_options_use_an_existing_archive_only(fake_spark, monkeypatch):
    assert cds.cds_options(OPTIONS) == ""
    path = cds.archive_path(OPTIONS)
    assert path is not None
    path.parent.mkdir(parents=True)
    path.write_bytes(b"archive")
    assert f"-XX:SharedArchiveFile={path}" in cds.cds_options(OPTIONS)
    assert "-Xshare:auto" in cds.cds_options(OPTIONS)  # an archive the JVM cannot map is ignored
    monkeypatch.setenv("MQB_SPARK_CDS", "off")
    assert cds.cds_options(OPTIONS) == ""


def test_the_setup_run_archives_at_exit(fake_spark, monkeypatch, tmp_path):
    monkeypatch.setenv(cds.CREATE_ENV, str(tmp_path / "x.partial"))
    assert cds.cds_options(OPTIONS).startswith(f"-XX:ArchiveClassesAtExit={tmp_path / 'x.partial'}")


@pytest.mark.spark
@pytest.mark.slow
def test_an_archive_is_created_once_and_the_audit_runs_with_it(tmp_path):
    """Real JVMs: the setup run writes the archive; an audit started with it gives the same verdict."""
    env = {**os.environ, "MQB_SPARK_CDS_DIR": str(tmp_path / "cds")}
    env.pop("MQB_SPARK_CDS", None)
    made = subprocess.run([sys.executable, "-m", "spark_audit.cds", "--one-shot-only"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=280)   # (the full training: 2 runs more)
    assert made.returncode == 0, made.stderr[-2000:]
    (archive,) = (tmp_path / "cds").glob("spark-*.jsa")
    assert archive.stat().st_size > 1 << 20
    assert str(archive) in made.stdout
    again = subprocess.run([sys.executable, "-m", "spark_audit.cds"], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=120)
    assert "up to date" in again.stdout  # no JVM started the second time
    out = tmp_path / "out"
    audit = subprocess.run([sys.executable, "-m", "spark_audit", str(FIXTURE_LOGS), "--out", str(out),
                            "--grace", "60"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=280)
    assert audit.returncode == 1, audit.stderr[-2000:]
    verdict = json.loads((out / "summary.json").read_text())["verdict"]
    assert (verdict["losses"], verdict["duplicates_suspicious"], verdict["bad_input_lines"]) == (1, 2, 6)
