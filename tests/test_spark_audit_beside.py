"""Rollups built beside the `--every` runs (spark_audit/beside.py): in a thread with a session of its own, in
their scheduler pool, one build at a time, each said once; the `--every` session's FAIR pools."""
from __future__ import annotations

import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

try:
    from tests.spark_fixtures import spark  # noqa: F401
except ImportError:  # tests/ is not a package: pytest puts this directory on sys.path
    from spark_fixtures import spark  # noqa: F401

from spark_audit.beside import MAX_PARTITION_BYTES, POOL, RollupsBeside  # noqa: E402
from spark_audit.run import failure_text  # noqa: E402
from spark_audit.session import POOLS_FILE, session_conf  # noqa: E402

pytestmark = pytest.mark.spark


def test_a_build_beside_runs_in_its_pool_and_session_one_at_a_time(spark, capsys):
    seen: dict[str, object] = {}
    release = threading.Event()

    def build(own):
        seen["pool"] = own.sparkContext.getLocalProperty("spark.scheduler.pool")
        seen["bytes"] = own.conf.get("spark.sql.files.maxPartitionBytes")
        seen["thread"] = threading.current_thread() is not threading.main_thread()
        assert release.wait(60)
        return 3, 1

    beside = RollupsBeside(spark, build, failure_text)
    try:
        assert beside.start() and beside.busy
        assert not beside.start()   # one build at a time
        beside.collect()
        assert capsys.readouterr().out == ""   # nothing said while it runs
        release.set()
        beside.wait()
        assert not beside.busy
        assert "rollups of 3 files stored beside the runs" in capsys.readouterr().out
        assert seen == {"pool": POOL, "bytes": MAX_PARTITION_BYTES, "thread": True}
        # the caller's session and thread keep their own settings
        assert spark.conf.get("spark.sql.files.maxPartitionBytes") != MAX_PARTITION_BYTES
        assert spark.sparkContext.getLocalProperty("spark.scheduler.pool") != POOL
    finally:
        beside.close()


def test_a_failed_build_beside_is_said_and_another_may_start(spark, capsys):
    def failing(_own):
        raise OSError("No space left on device")

    beside = RollupsBeside(spark, failing, failure_text)
    try:
        assert beside.start()
        beside.wait()
        assert "rollups not stored: OSError: No space left on device" in capsys.readouterr().err
        assert beside.start()
    finally:
        beside.close()


def test_the_every_session_schedules_fairly_with_the_rollups_pool_last():
    conf = session_conf(pools=True)
    assert conf["spark.scheduler.mode"] == "FAIR" and conf["spark.scheduler.allocation.file"] == str(POOLS_FILE)
    pools = {p.get("name"): p for p in ET.parse(POOLS_FILE).getroot().iter("pool")}
    assert set(pools) == {"default", POOL}
    default, rollups = pools["default"], pools[POOL]
    assert int(default.findtext("minShare")) >= 2 and int(rollups.findtext("minShare")) == 0
    assert int(default.findtext("weight")) > 100 * int(rollups.findtext("weight"))
    assert "spark.scheduler.mode" not in session_conf()   # a one-shot audit: Spark's default FIFO


@pytest.mark.slow
def test_spark_reads_the_pools_of_the_every_session(tmp_path):
    """A fresh JVM started as `--every` starts it (FAIR, pools.xml) has both pools as the file defines them,
    and a job run in the rollups' pool completes."""
    script = """
from spark_audit.beside import POOL
from spark_audit.session import build_session
spark = build_session("local[2]", "mqbridge-pools-test", full_jit=True, pools=True)
sc = spark.sparkContext
jsc = sc._jsc.sc()
assert jsc.getSchedulingMode().toString() == "FAIR"
for name in ("default", POOL):
    pool = jsc.getPoolForName(name).get()
    print(name, pool.weight(), pool.minShare())
sc.setLocalProperty("spark.scheduler.pool", POOL)
print("rows", spark.range(1000).count())
spark.stop()
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr[-3000:]
    pools = {p.get("name"): p for p in ET.parse(POOLS_FILE).getroot().iter("pool")}
    expected = [f"{name} {pools[name].findtext('weight')} {pools[name].findtext('minShare')}"
                for name in ("default", POOL)]
    assert done.stdout.split("\n")[:3] == [*expected, "rows 1000"]


def test_an_interrupted_loop_does_not_wait_for_the_build(spark):
    """close(wait=False): the loop was interrupted; the build is left to end with the session."""
    release = threading.Event()
    beside = RollupsBeside(spark, lambda _own: (release.wait(60), (0, 0))[1], failure_text)
    beside.start()
    beside.close(wait=False)
    assert beside.busy   # returned at once, the build still running
    release.set()
