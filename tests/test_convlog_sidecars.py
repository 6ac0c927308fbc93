"""Parquet sidecars of closed conversion-log files (bridge/convlog_parquet.py): written by the gateway's own
log writer when a file is closed (and at start for closed files without one), only for files whose every line
passes the audit's rules, with the Spark audit's types and the same instants as the audit's parse."""
from __future__ import annotations

import json
import logging
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from bridge import convlog_parquet, convlog_sidecar_writer  # noqa: E402
from bridge.convlog import ConversionLog  # noqa: E402
from bridge.convlog_parquet import Rejected, SidecarOutcome, arrow_schema, sidecar_path, write_sidecar  # noqa: E402
from bridge.convlog_sidecar_writer import SidecarWriter  # noqa: E402
from mappings.convlog_schema import (  # noqa: E402
    FIELDS,
    META_SOURCE_BYTES,
    META_SOURCE_LINES,
    META_SOURCE_NAME,
    ConversionRecord,
)

try:
    from tests.spark_fixtures import FIXTURE_LOGS, generated_log
except ImportError:  # tests/ is not a package: pytest puts this directory on sys.path
    from spark_fixtures import FIXTURE_LOGS, generated_log


def wait_for(condition, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def written_through_the_log(directory: Path, lines: list[str], chunks: int, max_bytes: int) -> list[Path]:
    """Lines written by the gateway's ConversionLog in chunks (each its own write, so that it rotates by size);
    returns once the sidecar thread has written the closed files' sidecars."""
    log = ConversionLog(directory, max_bytes=max_bytes)
    log.start()
    step = -(-len(lines) // chunks)
    for i in range(0, len(lines), step):
        log.record_lines(lines[i:i + step])
        wait_for(lambda n=i + len(lines[i:i + step]): log.written >= n, "the log writer")
    closed = len(list(directory.glob("convlog-*.jsonl"))) - 1  # rotated away from: each gets its sidecar
    assert log.sidecars is not None
    wait_for(lambda: log.sidecars.written == closed, "the sidecars of the closed files")
    log.close()  # the open file gets none
    return sorted(directory.glob("convlog-*.jsonl"))


def test_the_arrow_schema_is_the_spark_audits_field_by_field():
    pytest.importorskip("pyspark")
    from pyspark.sql import types as T

    from spark_audit.schema import record_schema

    def spark_of(t: object) -> object:
        simple = {pa.int32(): T.IntegerType(), pa.int64(): T.LongType(), pa.string(): T.StringType(),
                  pa.bool_(): T.BooleanType(), pa.timestamp("us", tz="UTC"): T.TimestampType()}
        if isinstance(t, pa.ListType):
            return T.ArrayType(spark_of(t.value_type), True)
        if isinstance(t, pa.StructType):
            return T.StructType([T.StructField(f.name, spark_of(f.type), True) for f in t])
        return simple[t]

    arrow, spark = arrow_schema(), record_schema()
    assert [f.name for f in arrow] == [f.name for f in spark.fields] == [f.name for f in FIELDS]
    for a, s in zip(arrow, spark.fields, strict=True):
        assert spark_of(a.type) == s.dataType, a.name


def test_the_writer_writes_a_sidecar_for_each_file_it_closes_with_the_records_values(tmp_path):
    lines = generated_log(600, malformed_every=0).decode().splitlines(keepends=True)
    files = written_through_the_log(tmp_path, lines, chunks=4, max_bytes=len("".join(lines)) // 4)
    assert len(files) >= 3
    *closed, open_file = files
    assert not sidecar_path(open_file).exists()  # this hour's file may still grow
    total = 0
    for f in closed:
        table = pq.read_table(sidecar_path(f))
        meta = {k.decode(): v.decode() for k, v in table.schema.metadata.items()}
        text = f.read_text()
        assert meta[META_SOURCE_NAME] == f.name and int(meta[META_SOURCE_BYTES]) == f.stat().st_size
        assert int(meta[META_SOURCE_LINES]) == text.count("\n") == table.num_rows
        assert table.schema.remove_metadata() == arrow_schema()
        for row, line in zip(table.to_pylist(), text.splitlines(), strict=True):
            record = ConversionRecord.from_json_line(line)
            for spec in FIELDS:
                value = getattr(record, spec.name)
                expected = [f.as_dict() for f in value] if spec.name == "findings" else value
                assert row[spec.name] == expected, spec.name
        total += table.num_rows
    assert total + open_file.read_text().count("\n") == len(lines)


def dictionary_columns(path: Path) -> set[str]:
    """The columns of a Parquet file with a dictionary page in its first row group."""
    group = pq.ParquetFile(path).metadata.row_group(0)
    return {group.column(i).path_in_schema for i in range(group.num_columns)
            if group.column(i).dictionary_page_offset is not None}


def test_fields_of_one_value_a_record_are_written_without_a_dictionary(tmp_path):
    """event_time, message_key and the sizes and latency are near one value a record: a dictionary of them is
    outgrown and decoded again by every reader; the other fields keep theirs."""
    assert convlog_parquet.PLAIN_FIELDS <= {f.name for f in FIELDS}
    path = tmp_path / "convlog-20260301-10.jsonl"
    path.write_bytes(generated_log(600, malformed_every=0))
    with_dictionary = dictionary_columns(write_sidecar(path))
    assert not with_dictionary & convlog_parquet.PLAIN_FIELDS
    assert {"route", "direction", "status", "client_id", "destination"} <= with_dictionary


def one_line(**changes: object) -> str:
    base = json.loads((FIXTURE_LOGS / "gateway-a.jsonl").read_text().splitlines()[1])  # an egress record
    return json.dumps({**base, **changes}) + "\n"


@pytest.mark.parametrize("bad", [
    one_line(colour="red"),                                        # not a field: from_dict refuses it
    one_line(status="lost"),                                       # not a Status
    one_line(status="failed", reason=None),                        # from_dict: a reason is required
    one_line(qos="1"),                                             # a string for an int
    one_line(qos=3000000000),                                      # does not fit an int
    one_line(redelivery_count=-1),                                 # below its minimum
    one_line(schema_version=99),                                   # newer than this schema
    one_line(event_time="2026-11-22T03:00:00.000000"),             # no UTC offset
    one_line(event_time="2026-11-22T24:00:00Z"),                   # no such clock time
    one_line(event_time="2026-02-30T00:00:00Z"),                   # no such day
    one_line(message_key=None),                                    # required
    one_line(findings=[{"change": "dropped", "name": ""}]),        # a finding without a name
    one_line(findings=[{"change": "lost", "name": "x"}]),          # a change outside Change
    one_line(findings=[None]),
    one_line().rstrip("\n") + one_line(),                          # two records on one line
    "\n",                                                          # a blank line
    "not json\n",
    one_line().rstrip("\n"),                                       # the last line unterminated
])
def test_a_file_with_a_line_the_audit_would_report_gets_no_sidecar(tmp_path, bad):
    good = (FIXTURE_LOGS / "gateway-a.jsonl").read_text()
    path = tmp_path / "convlog-20260101-00-000.jsonl"
    path.write_text(good + bad)
    sidecar_path(path).write_bytes(b"stale")  # a sidecar of what the file was before: removed
    with pytest.raises(Rejected):
        write_sidecar(path)
    assert not sidecar_path(path).exists()
    path.write_text(good)
    assert pq.read_table(write_sidecar(path)).num_rows == good.count("\n")  # the same file, fixed, gets one


def test_a_file_that_is_not_utf8_gets_no_sidecar(tmp_path):
    path = tmp_path / "convlog-20260101-00-000.jsonl"
    path.write_bytes(one_line(client_id="cafe").encode().replace(b"cafe", b"caf\xe9"))  # Latin-1, not UTF-8
    with pytest.raises(Rejected, match="UTF-8"):
        write_sidecar(path)


def test_timestamps_become_the_instants_the_audits_parse_gives(tmp_path):
    forms = ["2026-11-22T03:00:00.123456Z", "2026-11-22 03:00:00Z", "2026-11-22T03:00:00+05:30",
             "2026-11-22T03:00:00.1-01:00", "2026-11-22T03:00:00+18:00", "1900-01-01T00:00:00Z",
             "2999-12-31T23:59:59.999999+00:00"]
    path = tmp_path / "convlog-20260101-00-000.jsonl"
    path.write_text("".join(one_line(event_time=t) for t in forms))
    got = pq.read_table(write_sidecar(path)).column("event_time").to_pylist()
    assert got == [ConversionRecord.from_json_line(one_line(event_time=t)).event_time for t in forms]


def test_at_start_closed_files_without_a_current_sidecar_get_one_and_this_hours_file_does_not(tmp_path):
    text = (FIXTURE_LOGS / "gateway-a.jsonl").read_text()
    old = tmp_path / "convlog-20200101-00-000.jsonl"     # an earlier hour, closed by a crash before its sidecar
    grown = tmp_path / "convlog-20200101-01-000.jsonl"   # its sidecar describes a shorter file
    now = tmp_path / f"convlog-{datetime.now(UTC):%Y%m%d-%H}-000.jsonl"  # the current hour's: still open
    for f in (old, grown, now):
        f.write_text(text)
    write_sidecar(grown)
    with open(grown, "a") as f:
        f.write(text)
    (tmp_path / f".{sidecar_path(old).name}.tmp").write_bytes(b"half")  # a crash mid-write left this
    log = ConversionLog(tmp_path)
    log.start()
    try:
        assert log.sidecars is not None
        wait_for(lambda: log.sidecars.written == 2, "the backlog's sidecars")
    finally:
        log.close()
    assert pq.read_metadata(sidecar_path(old)).num_rows == text.count("\n")
    assert pq.read_metadata(sidecar_path(grown)).num_rows == 2 * text.count("\n")
    assert not sidecar_path(now).exists()
    assert not list(tmp_path.glob(".*.tmp"))


def test_without_pyarrow_no_sidecar_is_written_and_that_is_logged_once(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(convlog_sidecar_writer, "available", lambda: False)
    monkeypatch.setattr(SidecarWriter, "_unavailable_logged", False)
    caplog.set_level(logging.INFO, logger="mqbridge.convlog")
    for _ in range(2):
        writer = SidecarWriter()
        assert writer.start() is False
        writer.submit(tmp_path / "x.jsonl")  # ignored
        writer.close()
    assert [r.levelno for r in caplog.records if "pyarrow" in r.getMessage()] == [logging.INFO]


def test_close_does_not_wait_for_the_queued_files_they_are_the_next_starts_backlog(tmp_path, monkeypatch):
    text = (FIXTURE_LOGS / "gateway-a.jsonl").read_text()
    files = [tmp_path / f"convlog-20200101-{h:02d}-000.jsonl" for h in range(6)]
    for f in files:
        f.write_text(text * 200)
    writer = SidecarWriter()
    gate = threading.Event()
    blocker = tmp_path / "held.jsonl"   # its backlog's one file: checking it holds the thread until the gate opens
    build = SidecarWriter._build
    monkeypatch.setattr(SidecarWriter, "_build",
                        lambda self, path, *rest: gate.wait(10) and SidecarOutcome("current") if path == blocker
                        else build(self, path, *rest))
    writer.start(lambda: [blocker])  # the thread is held before the queue: everything below is queued
    for f in files:
        writer.submit(f)
    closer = threading.Thread(target=writer.close)
    closer.start()
    wait_for(writer._stopping.is_set, "close to begin")
    gate.set()
    closer.join(10)
    assert not closer.is_alive() and writer.written == 0  # close did not write the six queued files
    again = SidecarWriter()
    again.start(lambda: convlog_parquet.closed_files(tmp_path, "20200101-23", 1 << 30))
    wait_for(lambda: again.written == len(files), "the backlog")
    again.close()
    assert all(sidecar_path(f).exists() for f in files)


def test_a_gateway_configured_without_sidecars_writes_none(gateway_factory):
    """`convlog.parquet_sidecars: false`: a closed file found at start gets no sidecar, and the log says so."""
    gw = gateway_factory({"convlog": {"parquet_sidecars": False}})
    assert "no Parquet sidecars (convlog.parquet_sidecars: false)" in gw.log()
    assert gw.stop() == 0
    old = gw.data_dir / "convlog" / "convlog-20200101-00-000.jsonl"   # an earlier hour's: closed
    old.write_text((FIXTURE_LOGS / "gateway-a.jsonl").read_text())
    gw.start()
    assert gw.stop() == 0
    assert not sidecar_path(old).exists() and not list(old.parent.glob(".*.tmp"))
