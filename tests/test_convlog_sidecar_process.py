"""The sidecar process (bridge/convlog_sidecar_process.py): it writes the sidecar the gateway's thread would have,
sends its log records back, survives a terminal's Ctrl-C, is started again after it died (the file it was on is
reported, the next one written), and ends by itself when the gateway dies."""
from __future__ import annotations

import logging
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from bridge.convlog_columns import FileColumns  # noqa: E402
from bridge.convlog_parquet import SidecarOutcome, read_log, sidecar_path  # noqa: E402
from bridge.convlog_sidecar_process import SidecarProcess, SidecarProcessError  # noqa: E402
from bridge.convlog_sidecar_writer import SidecarWriter  # noqa: E402
from tests.support.gateway import wait_for  # noqa: E402
from tests.support.procs import alive  # noqa: E402

try:
    from tests.spark_fixtures import FIXTURE_LOGS
except ImportError:  # tests/ is not a package: pytest puts this directory on sys.path
    from spark_fixtures import FIXTURE_LOGS

ROOT = Path(__file__).resolve().parents[1]


def has_open(pid: int, path: Path) -> bool:
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") == str(path) for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


def a_log_file(directory: Path, hour: int = 0) -> Path:
    path = directory / f"convlog-20200101-{hour:02d}-000.jsonl"
    path.write_text((FIXTURE_LOGS / "gateway-a.jsonl").read_text())
    return path


@pytest.fixture
def process():
    proc = SidecarProcess()
    yield proc
    proc.close()


def test_its_sidecar_equals_the_files_json_and_a_current_one_is_left_as_it_is(tmp_path, process):
    path = a_log_file(tmp_path)
    assert process.run(path, False, None) == SidecarOutcome("written", False)
    assert pq.read_table(sidecar_path(path)).to_pylist() == read_log(path.read_bytes()).to_pylist()
    before = sidecar_path(path).stat().st_mtime_ns
    assert process.run(path, True, None) == SidecarOutcome("current")
    assert sidecar_path(path).stat().st_mtime_ns == before
    assert process.pid is not None and alive(process.pid)


def test_a_rejected_file_and_the_childs_log_records_reach_the_gateway(tmp_path, process, caplog):
    caplog.set_level(logging.INFO, logger="mqbridge.convlog")
    bad = tmp_path / "convlog-20200101-01-000.jsonl"
    bad.write_text('{"not": "a record"}\n')
    outcome = process.run(bad, False, None)
    assert outcome.status == "rejected" and outcome.detail
    path = a_log_file(tmp_path)
    empty = FileColumns()
    empty.size = path.stat().st_size   # the file's size, but no lines: the child logs that it reads the JSON
    assert process.run(path, False, empty) == SidecarOutcome("written", False)
    said = [r for r in caplog.records if "values not usable" in r.getMessage()]
    assert [r.levelno for r in said] == [logging.INFO] and path.name in said[0].getMessage()


def test_its_columns_travel_as_the_fields_the_sidecar_reads(tmp_path):
    """A FileColumns pickles without its templates' encoders (lambdas) and comes back with their fields."""
    from bridge.connectors.base import Inbound, Outbound
    from bridge.convlog import RecordLines
    from mappings.mqtt.publication import MqttPublication
    from mappings.report import ConversionReport

    pub = MqttPublication("a/b", b"x", qos=1)
    item = Inbound(key="k1", protocol="mqtt", message=pub, source_type="publish", size=1, destination="a/b",
                   received=time.time(), client_id="c", qos=1)
    cols = RecordLines("gw").values("r1", "mq", [(item, Outbound("k1", b"", "Q", 3), "MQSTR", ConversionReport())],
                                    time.time())
    kept = FileColumns()
    assert kept.add(cols)
    back = pickle.loads(pickle.dumps(kept))
    (pair,) = kept.templates
    (sent,) = back.templates
    assert [(t.variable, t.values) for t in sent] == [(t.variable, t.values) for t in pair[:2]]
    assert back.keys == ["k1"] and list(back.pair) == [0] and list(back.received) == list(kept.received)


def test_a_child_killed_mid_file_is_reported_and_the_next_file_gets_its_sidecar(tmp_path, process):
    fifo = tmp_path / "convlog-20200101-02-000.jsonl"
    os.mkfifo(fifo)   # the child reads it until its writer closes it: killed there, mid-file
    failed: list[BaseException] = []

    def stuck() -> None:
        try:
            process.run(fifo, False, None)
        except SidecarProcessError as e:
            failed.append(e)

    assert process.run(a_log_file(tmp_path, 3), False, None).status == "written"
    first = process.pid
    assert first is not None
    worker = threading.Thread(target=stuck)
    worker.start()
    writer_end: list[int] = []

    def opened() -> bool:   # succeeds once the child has the FIFO open for reading
        try:
            writer_end.append(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            return True
        except OSError:
            return False

    wait_for(opened, 20, what="the child reading the FIFO")
    try:
        os.kill(first, signal.SIGKILL)
        second: list[int] = []

        def reading_again() -> bool:   # the job given once more, to a new child, which has the FIFO open too
            pid = process.pid
            if pid in (None, first) or not has_open(pid, fifo):
                return False
            second.append(pid)
            return True

        wait_for(reading_again, 20, what="the job given to a new child")
        os.kill(second[0], signal.SIGKILL)
        worker.join(10)
    finally:
        for fd in writer_end:
            os.close(fd)
    assert not worker.is_alive() and failed and "ended twice" in str(failed[0])
    path = a_log_file(tmp_path, 4)
    assert process.run(path, False, None).status == "written"
    assert process.pid not in (None, first)
    assert sidecar_path(path).exists() and not sidecar_path(fifo).exists()


def test_close_ends_a_stuck_job_within_its_timeout_and_starts_no_process_after(tmp_path):
    process = SidecarProcess()
    fifo = tmp_path / "convlog-20200101-08-000.jsonl"
    os.mkfifo(fifo)   # opened for writing, never written: the job reads it until the process is killed
    failed: list[BaseException] = []
    writer_end: list[int] = []

    def opened() -> bool:
        try:
            writer_end.append(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            return True
        except OSError:
            return False


    def stuck() -> None:
        try:
            process.run(fifo, False, None)
        except SidecarProcessError as e:
            failed.append(e)

    worker = threading.Thread(target=stuck)
    worker.start()
    wait_for(opened, 20, what="the job on the FIFO")
    pid = process.pid
    started = time.monotonic()
    try:
        process.close(timeout=0.5)
        worker.join(10)
    finally:
        os.close(writer_end[0])
    assert time.monotonic() - started < 5 and not worker.is_alive()
    assert failed and "closed" in str(failed[0])   # killed, and not given to a new process
    wait_for(lambda: not alive(pid), 20, what="the killed process")
    assert process.pid is None


def test_ctrl_c_to_the_process_group_does_not_stop_it(tmp_path, process):
    path = a_log_file(tmp_path)
    assert process.run(path, False, None).status == "written"
    pid = process.pid
    assert pid is not None
    os.kill(pid, signal.SIGINT)
    os.kill(pid, signal.SIGTERM)
    assert process.run(a_log_file(tmp_path, 5), False, None).status == "written"
    assert process.pid == pid


def test_it_ends_when_the_gateway_dies(tmp_path):
    """SIGKILL of the process that started it: its stdin ends, and so does it."""
    path = a_log_file(tmp_path)
    script = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from bridge.convlog_sidecar_process import SidecarProcess
        p = SidecarProcess()
        assert p.run(Path({str(path)!r}), False, None).status == "written"
        print(p.pid, flush=True)
        time.sleep(60)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert alive(child)
        parent.kill()
        parent.wait(10)
        wait_for(lambda: not alive(child), 10, what="the sidecar process to end")
    finally:
        parent.kill()


def test_the_writers_thread_goes_on_after_the_process_died(tmp_path, caplog):
    """A death between files: the next file starts a new process; no warning, nothing lost."""
    caplog.set_level(logging.WARNING, logger="mqbridge.convlog")
    writer = SidecarWriter()
    assert writer.start()
    try:
        first = a_log_file(tmp_path, 6)
        writer.submit(first)
        wait_for(lambda: writer.written == 1, 20, what="the first sidecar")
        pid = writer._process.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not alive(pid), 20, what="the kill")
        second = a_log_file(tmp_path, 7)
        writer.submit(second)
        wait_for(lambda: writer.written == 2, 20, what="the second sidecar")
    finally:
        writer.close()
    assert sidecar_path(first).exists() and sidecar_path(second).exists()
    assert not caplog.records
