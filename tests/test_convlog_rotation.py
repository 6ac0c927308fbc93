"""The conversion log writer rotates by size (and hour) without splitting or losing a record, and a
restarted writer appends to the current file while it is under the size limit."""
from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from bridge.convlog import ConversionLog, log_files
from mappings.convlog_schema import ConversionRecord, Direction, Protocol, Status
from tests.support.gateway import wait_for


def _line(i: int) -> str:
    return ConversionRecord(
        event_time=datetime.fromtimestamp(1_700_000_000 + i, UTC), gateway_id="gw", message_key=f"k{i:05d}", route="r",
        direction=Direction.INGRESS, source_protocol=Protocol.MQTT, target_protocol=Protocol.MQ,
        source_type="publish", qos=1, source_size=i, status=Status.OK,
    ).to_json_line()


def _keys(directory: Path) -> list[str]:
    keys = []
    for f in log_files(directory):
        keys += [json.loads(line)["message_key"] for line in f.read_text(encoding="utf-8").splitlines()]
    return keys


def test_size_rotation_keeps_every_record_whole_and_in_order(tmp_path: Path) -> None:
    log = ConversionLog(tmp_path, max_bytes=4096)
    log.start()
    for i in range(0, 200, 10):
        log.record_lines([_line(j) for j in range(i, i + 10)])   # a route's batch: one queue entry
        wait_for(lambda n=i + 10: log.written == n, 10, what="the batch written")   # one write per batch
    log.close()
    files = log_files(tmp_path)
    assert len(files) > 3
    assert all(f.name.startswith("convlog-") and f.name.endswith(".jsonl") for f in files)
    assert _keys(tmp_path) == [f"k{i:05d}" for i in range(200)]   # json.loads of every line: none split
    assert log.written == 200 and log.dropped == 0
    # a file is started once the current one reached the limit: none is more than one write over it
    batch = max(len(_line(i).encode()) for i in range(200)) * 10
    assert all(f.stat().st_size < 4096 + batch for f in files)


def test_a_restarted_writer_appends_to_the_current_file(tmp_path: Path) -> None:
    first = ConversionLog(tmp_path, max_bytes=1 << 20)
    first.start()
    first.record_line(_line(0))
    first.close()
    second = ConversionLog(tmp_path, max_bytes=1 << 20)
    second.start()
    second.record_line(_line(1))
    second.close()
    files = log_files(tmp_path)
    assert len(files) == 1 or files[-1].name[:20] != files[0].name[:20]   # one file, unless the hour turned
    assert _keys(tmp_path) == ["k00000", "k00001"]


def test_entries_beyond_max_pending_are_counted_dropped_and_the_rest_written_in_order(tmp_path: Path) -> None:
    """The hot path only appends; a writer that is behind by ``max_pending`` entries costs records (counted,
    never memory without bound), and what was queued is written in order, the last entries at close."""
    log = ConversionLog(tmp_path, max_pending=4)
    log.record_lines([_line(0), _line(1)])   # queued before the writer runs
    log.record_line(_line(2))
    log.record_lines([_line(3)])
    log.record_line(_line(4))
    log.record_lines([_line(5), _line(6)])   # the fifth entry: no room
    log.record_line(_line(7))
    assert log.dropped == 3
    log.start()
    wait_for(lambda: log.written == 5, 10, what="the queued entries written")
    log.record_line(_line(8))
    log.close()   # what is queued at close is written
    assert _keys(tmp_path) == [f"k{i:05d}" for i in (0, 1, 2, 3, 4, 8)]
    assert log.written == 6 and log.dropped == 3
