"""Sidecars built from the writer's own values (bridge/convlog_columns.py, convlog_parquet.columns_table) equal
the sidecar of the same file's JSON (read_log), row for row and type for type; a file with any other line, or
one the writer did not start, is read from its JSON as before."""
from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from bridge.connectors.base import Inbound, Outbound  # noqa: E402
from bridge.convlog import ConversionLog, log_files  # noqa: E402
from bridge.convlog_parquet import read_log, sidecar_path  # noqa: E402
from bridge.routing.router import Router  # noqa: E402
from mappings.convlog_schema import Direction, Status  # noqa: E402
from mappings.mqtt.publication import MqttPublication  # noqa: E402
from mappings.report import Change, ConversionReport, Finding  # noqa: E402
from mappings.rules.model import Route  # noqa: E402
from tests.support.gateway import wait_for  # noqa: E402

text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=10)
ROUTES = [Route.model_validate({"name": n, "from": {"mqtt": "a/#"}, "to": {"queue": "Q.OUT"}}) for n in ("r1", "r-2")]


def _message(rnd: random.Random, keys: list[str], clients: list[str | None], findings: list[Finding]
             ) -> tuple[Inbound, Outbound, str, ConversionReport]:
    key = rnd.choice(keys) + str(rnd.randrange(10**6))
    pub = MqttPublication(f"a/{rnd.randrange(3)}", b"x", qos=rnd.randrange(3), retain=rnd.random() < 0.2)
    item = Inbound(key=key, protocol="mqtt", message=pub, source_type="publish", size=rnd.choice([0, 5, 2**40]),
                   destination=pub.topic, received=time.time() - rnd.random() * 5 + rnd.choice([0, 10.0]),
                   client_id=rnd.choice(clients), redelivery_count=rnd.choice([0, 1, 2**40]), qos=pub.qos,
                   persistent=rnd.choice([None, True, False]), priority=rnd.choice([None, 0, 9]))
    out = Outbound(key, b"", rnd.choice(["Q.OUT", "Q.\u00fc"]), rnd.choice([0, 77, 2**33]))
    report = ConversionReport(rnd.sample(findings, rnd.randrange(len(findings) + 1)))
    return item, out, rnd.choice(["MQSTR", "MQHRF2"]), report


def _logged(directory: Path, seed: int, batches: int, keys: list[str], clients: list[str | None],
            findings: list[Finding], *, other_lines: bool = False, max_bytes: int = 6_000,
            in_step: bool = True) -> ConversionLog:
    """Batches logged through Router.record_ok (as a route does) into a real ConversionLog that rotates by size;
    ``other_lines``: also a backout record now and then (Router.record: lines without values); ``in_step``:
    wait for each closed file's sidecar before the next batch (the sidecar thread never behind)."""
    rnd = random.Random(seed)
    log = ConversionLog(directory, max_bytes=max_bytes)
    log.start()
    router = Router(None, None, log, "gw-\u00e9", None)  # type: ignore[arg-type]
    assert log.keeps_columns
    sent = 0
    for b in range(batches):
        good = [_message(rnd, keys, clients, findings) for _ in range(rnd.randrange(1, 9))]
        route = rnd.choice(ROUTES)
        router.record_ok(route, "mq", good, time.time() + b * 0.001)
        sent += 2 * len(good)
        if other_lines and rnd.random() < 0.1:
            item = good[0][0]
            router.record(route, item, "mq", Direction.EGRESS, Status.BACKOUT, now=time.time(), reason="why")
            sent += 2
        wait_for(lambda n=sent: log.written >= n, 30, what="the log writer")   # one write a batch
        if in_step:
            closed = len(log_files(directory)) - 1
            wait_for(lambda c=closed: log.sidecars.written + log.sidecars.rejected >= c, 30, what="the sidecar writer")
    return log


def _closed_with_sidecars(log: ConversionLog) -> list[Path]:
    files = log_files(log.directory)
    closed = files[:-1]
    assert log.sidecars is not None
    wait_for(lambda: log.sidecars.written + log.sidecars.rejected >= len(closed), 30, what="the sidecars")
    log.close()
    assert log.sidecars.rejected == 0
    return closed


def _same_as_the_json(path: Path) -> None:
    from_sidecar = pq.read_table(sidecar_path(path))
    from_json = read_log(path.read_bytes())
    assert from_sidecar.schema.remove_metadata() == from_json.schema
    assert from_sidecar.num_rows == from_json.num_rows == path.read_bytes().count(b"\n")
    assert from_sidecar.to_pylist() == from_json.to_pylist(), path.name
    meta = from_sidecar.schema.metadata
    assert int(meta[b"mqbridge.source_bytes"]) == path.stat().st_size


@given(seed=st.integers(0, 2**32), keys=st.lists(text, min_size=1, max_size=4),
       clients=st.lists(st.none() | text, min_size=1, max_size=3),
       findings=st.lists(st.builds(Finding, st.sampled_from(list(Change)), text, st.text(max_size=8)), max_size=3))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_sidecar_from_the_values_equals_the_sidecar_of_the_json(tmp_path_factory, seed, keys, clients, findings):
    directory = tmp_path_factory.mktemp("convlog")
    log = _logged(directory, seed, 40, keys, clients, findings)
    closed = _closed_with_sidecars(log)
    assert closed, "the log rotated"
    assert log.sidecars is not None and log.sidecars.from_values == len(closed)   # none parsed its JSON
    for path in closed:
        _same_as_the_json(path)


def test_a_file_with_other_lines_or_appended_to_is_read_from_its_json(tmp_path):
    findings = [Finding(Change.DROPPED, "MQMD.Expiry", "not carried")]
    log = _logged(tmp_path, 7, 120, ["k\u00e9y\n\"", "plain"], [None, "c1"], findings, other_lines=True)
    closed = _closed_with_sidecars(log)
    assert log.sidecars is not None
    with_backout = [p for p in closed if b'"backout"' in p.read_bytes()]
    assert with_backout and len(with_backout) < len(closed)
    assert log.sidecars.from_values == len(closed) - len(with_backout)
    for path in closed:
        _same_as_the_json(path)


def test_a_file_the_writer_appended_to_is_read_from_its_json(tmp_path):
    """A restart within the hour appends to the hour's last file: not all its lines are this process's."""
    first = _logged(tmp_path, 3, 3, ["k"], [None], [], max_bytes=10**9)
    first.close()
    (path,) = log_files(tmp_path)
    before = path.stat().st_size
    log = _logged(tmp_path, 8, 2, ["again"], [None], [], max_bytes=before + 1)   # appends, fills it, rotates
    assert path.stat().st_size > before
    assert len(log_files(tmp_path)) == 2
    assert log.sidecars is not None
    wait_for(lambda: log.sidecars.written >= 1, 30, what="its sidecar")
    log.close()
    assert log.sidecars.from_values == 0
    _same_as_the_json(path)


def test_a_file_changed_after_its_values_were_kept_is_read_from_its_json(tmp_path):
    log = _logged(tmp_path, 3, 5, ["k"], [None], [], max_bytes=10**9)
    path = log_files(tmp_path)[-1]
    columns = log._columns
    log.close()
    assert columns is not None and columns.size == path.stat().st_size
    from bridge.convlog_parquet import _write_sidecar

    with open(path, "ab") as f:   # a line the writer did not write (another process, an editor)
        f.write(path.read_bytes().splitlines(keepends=True)[0])
    _, from_values = _write_sidecar(path, columns)
    assert not from_values
    _same_as_the_json(path)


def test_the_columns_instants_are_the_lines_instants_ties_included():
    """event_micros (Arrow, the sidecar from values) rounds as epoch_micros (the line's text) does: at random
    times, and at times whose microsecond fraction is an exact tie (k/2**20 s: 15625k/16384 µs)."""
    from array import array

    from bridge.convlog_parquet import event_micros
    from mappings.convlog_schema import epoch_micros, epoch_timestamp

    rnd = random.Random(5)
    times = [rnd.uniform(0, 4e9) for _ in range(20_000)] + [rnd.uniform(1.7e9, 1.8e9) for _ in range(20_000)]
    tie_fractions = [k / 2**20 for k in range(2**20) if (k * 15625) % 16384 == 8192]   # 64 of them
    ties = [1_795_000_000 + w + f for w in range(50) for f in tie_fractions]
    times += ties + [1_795_000_000.9999996, 1_795_000_000.9999995, 0.0, 1e-7]
    got = event_micros(pa.Array.from_buffers(pa.float64(), len(times), [None, pa.py_buffer(array("d", times))]))
    assert got.to_pylist() == [epoch_micros(t) for t in times]
    assert len(ties) == 3200 and all(((t - int(t)) * 1e6) % 1 == 0.5 for t in ties[:50])
    for t in times[::997]:   # and epoch_micros is the instant the text names
        text = epoch_timestamp(t)
        whole = int(time.mktime(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S"))) - time.timezone
        assert epoch_micros(t) == whole * 1_000_000 + int(text[20:26])


def test_values_wait_for_the_sidecar_writer_for_two_files_at_most(tmp_path, monkeypatch):
    """Memory stays bounded when the sidecar thread is behind: beyond MAX_QUEUED_VALUES closed files with their
    values, a closed file is queued without them (its JSON is parsed); every sidecar still equals its JSON."""
    import threading as th

    from bridge import convlog_sidecar_writer
    from bridge.convlog_sidecar_writer import SidecarWriter

    gate = th.Event()
    real = SidecarWriter._build

    def held(self, path, check, columns):   # the sidecar thread held on its first file until 5 rotations
        gate.wait(30)
        return real(self, path, check, columns)

    monkeypatch.setattr(SidecarWriter, "_build", held)
    log = _logged(tmp_path, 11, 60, ["k"], [None, "c"], [], max_bytes=3_000, in_step=False)
    assert log.sidecars is not None
    closed = log_files(tmp_path)[:-1]
    assert len(closed) >= 5
    assert log.sidecars._queued_values == convlog_sidecar_writer.MAX_QUEUED_VALUES
    gate.set()
    closed = _closed_with_sidecars(log)
    assert log.sidecars._queued_values == 0
    # the first file (taken before the gate) and the two queued with values; the rest from their JSON
    assert log.sidecars.from_values == 1 + convlog_sidecar_writer.MAX_QUEUED_VALUES
    for path in closed:
        _same_as_the_json(path)
