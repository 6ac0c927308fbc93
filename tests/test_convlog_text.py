"""The log's writer and what it cannot encode as it is: a lone surrogate in a string (a JMS String may hold one)
is written as its JSON escape, and a failure of a batch is counted and logged without stopping the writer.
Before, either stopped the writer thread: every record after it was lost, counted nowhere."""
from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from bridge.convlog import ConversionLog, log_files
from bridge.convlog_process import LogProcess
from mappings.convlog_schema import trusted_json_line
from tests.support.gateway import wait_for

ODD = "k\ud800-\udc00\ud83d\ude00"   # a lone high surrogate, a lone low one, and a pair (U+1F600 as two halves)


def _record(key: str) -> str:
    return trusted_json_line({"event_time": 1_795_320_000.0, "gateway_id": "gw", "message_key": key,
                              "route": "r", "direction": "ingress", "status": "ok"})


def _keys(directory: Path) -> list[str]:
    return [json.loads(line)["message_key"] for p in log_files(directory)
            for line in p.read_bytes().decode("utf-8").splitlines()]   # strict: the files are UTF-8


def test_a_lone_surrogate_is_written_as_its_json_escape(tmp_path: Path) -> None:
    log = ConversionLog(tmp_path, sidecars=False)
    log.start()
    log.record_line(_record(ODD))
    log.record_line(_record("after"))
    log.close()
    assert (log.written, log.dropped) == (2, 0)
    assert _keys(tmp_path) == ["k\ud800-\udc00\U0001f600", "after"]   # the pair is one character to a reader


def test_the_same_through_the_log_process(tmp_path: Path) -> None:
    log = LogProcess(tmp_path, sidecars=False)
    log.start()
    try:
        log.record_line(_record(ODD))
        log.record_line(_record("after"))
        wait_for(lambda: log.written == 2, 30, what="both lines")
    finally:
        log.close()
    assert _keys(tmp_path) == ["k\ud800-\udc00\U0001f600", "after"]


def test_a_batch_that_fails_is_counted_and_the_writer_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    log = ConversionLog(tmp_path, sidecars=False)
    real = log._write
    calls = []

    def failing_once(lines: list[str], columns: object = None) -> None:
        calls.append(len(lines))
        if len(calls) == 1:
            raise RuntimeError("a bug")
        real(lines, columns)   # type: ignore[arg-type]

    monkeypatch.setattr(log, "_write", failing_once)
    with caplog.at_level(logging.ERROR, logger="mqbridge.convlog"):
        log.start()
        log.record_line(_record("lost"))
        wait_for(lambda: log.dropped == 1, 30, what="the failed batch counted")
        log.record_line(_record("after"))
        log.close()
    assert (log.written, log.dropped) == (1, 1)
    assert "1 records not written" in caplog.text and "RuntimeError: a bug" in caplog.text
    assert _keys(tmp_path) == ["after"]
