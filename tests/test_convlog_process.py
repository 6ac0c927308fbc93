"""The conversion log process (bridge/convlog_process.py): what the gateway handed to it is written even when the
gateway is killed; a log process that died is replaced; its log records and sidecar counts reach the gateway."""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bridge.convlog import log_files
from bridge.convlog_process import LogProcess
from mappings.convlog_schema import trusted_json_line
from tests.support.gateway import wait_for
from tests.support.procs import alive

ROOT = Path(__file__).resolve().parents[1]


def _line(i: int) -> str:
    return trusted_json_line({"event_time": 1_795_320_000.0 + i, "gateway_id": "gw", "message_key": f"k{i}",
                              "route": "r", "direction": "ingress", "status": "ok"})


def _lines(directory: Path) -> list[str]:
    return [line for p in log_files(directory) for line in p.read_text("utf-8").splitlines(keepends=True)]


def _ten_written(log: LogProcess) -> int:
    """Lines 0-9 logged and written; the log process's pid."""
    for i in range(10):
        log.record_line(_line(i))
    wait_for(lambda: log.written == 10, 30, what="the first lines")
    assert log.pid is not None
    return log.pid


def test_what_the_gateway_handed_over_is_written_after_it_is_killed(tmp_path: Path) -> None:
    """A process logs 200 lines, waits until they are in the log process's pipe and kills itself with SIGKILL.
    The log process writes all of them, closes the file and ends. (With the writer thread in the gateway, as
    before, the lines still queued or in the file's buffer went with the gateway.)"""
    script = textwrap.dedent(f"""
        import os, signal, sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from bridge.convlog_process import LogProcess
        from tests.test_convlog_process import _line
        log = LogProcess({str(tmp_path)!r}, sidecars=False)
        log.start()
        for i in range(200):
            log.record_line(_line(i))
        deadline = time.monotonic() + 30
        while log.sent < 200 and time.monotonic() < deadline:
            time.sleep(0.01)
        print(log.pid, log.sent, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == -signal.SIGKILL, done.stderr
    pid, sent = map(int, done.stdout.split())
    assert sent == 200
    wait_for(lambda: not alive(pid), 30, what="the log process to end after the gateway")
    assert _lines(tmp_path) == [_line(i) for i in range(200)]


def test_a_log_process_that_died_is_replaced(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = LogProcess(tmp_path, sidecars=False)
    log.start()
    try:
        first = _ten_written(log)
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: not alive(first), 30, what="the log process to die")
        with caplog.at_level(logging.ERROR, logger="mqbridge.convlog"):
            for i in range(10, 20):
                log.record_line(_line(i))
            wait_for(lambda: log.written == 20, 30, what="the lines after the death, by a new log process")
        assert log.pid not in (None, first)
        assert "its process ended" in caplog.text and log.dropped == 0
    finally:
        log.close()
    assert log.pid is None
    assert _lines(tmp_path) == [_line(i) for i in range(20)]


def test_what_a_dead_log_process_had_not_written_goes_to_the_next_one(tmp_path: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    """Lines in a log process's pipe when it dies are written by its successor, once each and in order. The
    process is stopped (SIGSTOP) so that they wait in its pipe, then killed; no record comes after. (Before,
    the 200 lines were lost, counted nowhere: `sent` 210, `written` 10, `dropped` 0.)"""
    log = LogProcess(tmp_path, sidecars=False)
    log.start()
    first = None
    try:
        first = _ten_written(log)
        os.kill(first, signal.SIGSTOP)
        with caplog.at_level(logging.ERROR, logger="mqbridge.convlog"):
            for i in range(10, 210):
                log.record_line(_line(i))
            wait_for(lambda: log.sent == 210, 30, what="the lines in the stopped process's pipe")
            assert log.written == 10
            os.kill(first, signal.SIGKILL)
            wait_for(lambda: log.written == 210, 30, what="the pipe's lines, written by a new log process")
        assert log.pid not in (None, first) and log.dropped == 0
        assert "a new one takes over and is sent the 200 records the old one had not written" in caplog.text
        for i in range(210, 220):
            log.record_line(_line(i))
    finally:
        if first is not None and alive(first):
            os.kill(first, signal.SIGKILL)
        log.close()
    assert _lines(tmp_path) == [_line(i) for i in range(220)]
    assert log.written == 220 and log.sent == 220


def test_the_log_processs_records_and_sidecar_counts_reach_the_gateway(tmp_path: Path,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    """A closed file of an earlier hour that is not a conversion log: the log process's sidecar writer rejects it
    at start; the gateway logs the record it made and counts the rejection."""
    pytest.importorskip("pyarrow")
    bad = tmp_path / "convlog-20200101-00-000.jsonl"
    bad.write_text('{"not": "a record"}\n')
    with caplog.at_level(logging.INFO, logger="mqbridge.convlog"):
        log = LogProcess(tmp_path)
        log.start()
        try:
            wait_for(lambda: log.sidecars is not None and log.sidecars.rejected == 1, 30, what="the rejection")
            wait_for(lambda: bad.name in caplog.text, 10, what="the log process's record")
        finally:
            log.close()
    assert log.sidecars is not None and log.sidecars.written == 0


def test_close_ends_the_log_process_promptly_when_idle(tmp_path: Path) -> None:
    log = LogProcess(tmp_path, sidecars=False)
    log.start()
    pid = log.pid
    assert pid is not None
    started = time.monotonic()
    log.close()
    assert time.monotonic() - started < 10 and not alive(pid)


def test_a_queue_far_behind_is_taken_in_bounded_rounds_and_in_order() -> None:
    """drained: at most MAX_DRAINED entries a round, the None that ends the queue seen after the entries before it."""
    from queue import Queue

    from bridge.convlog import MAX_DRAINED, drained

    q: Queue[int | None] = Queue()
    for i in range(2 * MAX_DRAINED + 5):
        q.put(i)
    q.put(None)
    rounds = []
    done = False
    while not done:
        items, done = drained(q)
        rounds.append(items)
    assert [len(r) for r in rounds] == [MAX_DRAINED, MAX_DRAINED, 5]
    assert [i for r in rounds for i in r] == list(range(2 * MAX_DRAINED + 5))
