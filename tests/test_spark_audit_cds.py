"""The optional AppCDS archive: named after the JVM, Spark's jars and the options; never needed to run."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spark_audit import cds, session

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


def test_the_one_shot_and_the_every_jvm_share_one_archive(fake_spark):
    """JIT options (C1 only for a one-shot audit, full tiered JIT for --every) do not change which classes
    load: one archive serves both. Any other option does."""
    one_shot, every = session.driver_java_options(), session.driver_java_options(full_jit=True)
    assert one_shot != every and cds.archive_key(one_shot) == cds.archive_key(every)
    assert cds.archive_key(one_shot.replace("UseSerialGC", "UseParallelGC")) != cds.archive_key(one_shot)


def test_a_jvm_without_its_archive_gets_a_note_saying_how_to_make_it(fake_spark, monkeypatch, tmp_path):
    note = cds.missing_note(OPTIONS)
    assert note is not None and "python -m spark_audit.cds" in note and "MQB_SPARK_CDS=off" in note
    path = cds.archive_path(OPTIONS)
    assert path is not None
    path.parent.mkdir(parents=True)
    path.write_bytes(b"archive")
    assert cds.missing_note(OPTIONS) is None              # it has one
    assert cds.missing_note(OPTIONS + " -Xmx1g") is not None  # (another option: another archive)
    monkeypatch.setenv("MQB_SPARK_CDS", "off")
    assert cds.missing_note(OPTIONS + " -Xmx1g") is None  # switched off: no note
    monkeypatch.delenv("MQB_SPARK_CDS")
    monkeypatch.setenv(cds.CREATE_ENV, str(tmp_path / "x.partial"))
    assert cds.missing_note(OPTIONS + " -Xmx1g") is None  # the setup run itself


def test_an_audit_starting_its_jvm_without_an_archive_says_so_first(fake_spark, monkeypatch, capsys, tmp_path):
    """The note goes to stderr before the JVM starts, for a one-shot audit and for --every."""
    from pyspark import SparkContext

    from spark_audit import run as run_module
    from spark_audit.options import build_parser

    class Started(Exception):
        pass

    def no_jvm(*_args, **_kwargs):
        raise Started

    monkeypatch.setattr(run_module, "build_session", no_jvm)
    monkeypatch.setattr(SparkContext, "_active_spark_context", None)   # (another test's session: not ours)
    for extra in ([], ["--every", "60"]):
        args = build_parser().parse_args([str(FIXTURE_LOGS), "--out", str(tmp_path / "out"), *extra])
        with pytest.raises(Started):
            run_module.run(args)
        assert "python -m spark_audit.cds" in capsys.readouterr().err


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
    assert "python -m spark_audit.cds" not in audit.stderr   # it has its archive: no note
    verdict = json.loads((out / "summary.json").read_text())["verdict"]
    assert (verdict["losses"], verdict["duplicates_suspicious"], verdict["bad_input_lines"]) == (1, 2, 6)
