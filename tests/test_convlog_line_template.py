"""The conversion log's cached line templates (LineTemplate, Router.record_ok) write exactly the text of the
trusted path (trusted_json_line, Router.record), which a test in test_convlog_fast_path.py ties to the
validated record."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.connectors.base import Inbound, Outbound
from bridge.convlog import ConversionLog, log_files, render_lines
from bridge.convlog import RecordLines as OkLines
from bridge.convlog_columns import LineColumns
from bridge.convlog_process import LogProcess
from bridge.routing.router import Router
from mappings.convlog_schema import (
    ConversionRecord,
    Direction,
    LineTemplate,
    Protocol,
    RecordError,
    Status,
    epoch_timestamp,
    json_timestamp,
    trusted_json_line,
)
from mappings.mqtt.publication import MqttPublication
from mappings.report import Change, ConversionReport, Finding
from mappings.rules.model import Route

text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)
findings = st.lists(st.builds(Finding, st.sampled_from(list(Change)), text, st.text(max_size=12)),
                    max_size=3).map(tuple)
INGRESS = ("event_time", "message_key", "source_size", "redelivery_count")
EGRESS = ("event_time", "message_key", "source_size", "target_size", "latency_us", "redelivery_count")


@given(
    variable=st.sampled_from([INGRESS, EGRESS, ("event_time",), ("message_key", "findings", "client_id")]),
    t=st.integers(0, 4_000_000_000_000_000).map(lambda us: us / 1_000_000),
    qos=st.integers(0, 2), size=st.integers(0, 2**40), opt_int=st.none() | st.integers(0, 9),
    persistent=st.none() | st.booleans(), key=text, client=st.none() | text, dest=st.none() | text,
    fnd=findings, status=st.sampled_from(list(Status)), direction=st.sampled_from(list(Direction)),
    src=st.sampled_from(list(Protocol)), redelivered=st.integers(0, 2**31 - 1),
)
@settings(max_examples=300)
def test_template_line_equals_trusted_line(variable: tuple[str, ...], t: float, qos: int, size: int,
                                           opt_int: int | None, persistent: bool | None, key: str,
                                           client: str | None, dest: str | None, fnd: tuple[Finding, ...],
                                           status: Status, direction: Direction, src: Protocol,
                                           redelivered: int) -> None:
    values: dict[str, Any] = dict(
        event_time=t, gateway_id="gw", message_key=key, route="r\u00e9", direction=direction.value,
        source_protocol=src.value, target_protocol="jms", source_type="publish", target_type="TextMessage",
        qos=qos, persistent=persistent, priority=opt_int, source_size=size, target_size=size // 2,
        status=status.value, reason=None if status is Status.OK else "why", findings=fnd,
        latency_us=size, client_id=client, destination=dest, redelivery_count=redelivered)
    template = LineTemplate({k: v for k, v in values.items() if k not in variable}, variable)
    line = template.render(*(values[k] for k in variable))
    assert line == trusted_json_line(values)
    assert ConversionRecord.from_json_line(line).to_json_line() == line


@given(st.lists(st.integers(0, 4_000_000_000_000_000).map(lambda us: us / 1_000_000)
                | st.floats(0, 4e9, allow_nan=False), min_size=1, max_size=5))
def test_json_timestamp_is_the_quoted_epoch_timestamp(times: list[float]) -> None:
    """Also across its one-second cache: the same second twice, then another, then back."""
    for t in [*times, *times, times[0] + 1, times[0]]:
        assert json_timestamp(t) == f'"{epoch_timestamp(t)}"'


def test_render_needs_one_value_per_variable_field() -> None:
    template = LineTemplate({"gateway_id": "gw"}, ("event_time", "message_key"))
    with pytest.raises(ValueError):
        template.render_encoded('"t"')


def test_template_names_a_bad_field() -> None:
    with pytest.raises(RecordError) as err:
        LineTemplate({"gateway": "gw"}, ("event_time",))
    assert err.value.field == "gateway"
    with pytest.raises(RecordError) as err:
        LineTemplate({}, ("message_key", "event_time"))
    assert "schema order" in err.value.reason


def _inbound(n: int, client: str | None, topic: str, redelivered: int) -> Inbound:
    pub = MqttPublication(topic=topic, payload=b"x" * n, qos=1)
    return Inbound(key=f"mqtt:{n}", protocol="mqtt", message=pub, source_type="publish", size=n,
                   destination=topic, received=1_795_320_000.0 + n / 7, client_id=client,
                   redelivery_count=redelivered, qos=1, handle=n)


def _read(directory: Path) -> list[str]:
    return [line for path in log_files(directory) for line in path.read_text("utf-8").splitlines(keepends=True)]


@pytest.mark.parametrize("cache_size", [OkLines.MAX_CACHED, 1])
@pytest.mark.parametrize("fast_log", [ConversionLog, LogProcess])
def test_record_ok_writes_what_record_writes(tmp_path: Path, cache_size: int, fast_log: type[ConversionLog],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch logged by record_ok (templates, one queue entry) gives the lines record() gives, message
    by message, including messages that reuse the templates of another (same Finding objects, or equal
    ones), also when the template cache is cleared as it fills; rendered here (ConversionLog) or from the values
    and pickled templates the gateway sends to the conversion log process (LogProcess)."""
    monkeypatch.setattr(OkLines, "MAX_CACHED", cache_size)
    route = Route.model_validate({"name": "r1", "from": {"mqtt": "a/#"}, "to": {"connector": "amq", "topic": "t"}})
    loss = (Finding(Change.DROPPED, "JMSTimestamp", "set by the broker"), Finding(Change.COERCED, "q", "int"))
    good = []
    for n, (client, topic, fnd, redelivered) in enumerate([
            ("c1", "a/b", loss, 0), ("c1", "a/b", loss, 0), (None, "a/\u00fc\"", (), 3),
            ("c\n%s2", "a/b%d", loss[:1], 0), ("c1", "a/b", loss, 2**40),
            ("c1", "a/b", tuple(Finding(f.change, f.name, f.detail) for f in loss), 0), (None, "a/\u00fc\"", (), 0)]):
        item = _inbound(n + 10, client, topic, redelivered)
        out = Outbound(item.key, b"", "topic:t", n * 3)
        good.append((item, out, "TextMessage" if n % 2 else "BytesMessage", ConversionReport(list(fnd))))
    logs = {"fast": fast_log(tmp_path / "fast"), "model": ConversionLog(tmp_path / "model")}
    for log in logs.values():
        log.start()
    now = 1_795_320_100.25
    Router(None, None, logs["fast"], "gw", None).record_ok(route, "jms", good, now)  # type: ignore[arg-type]
    model = Router(None, None, logs["model"], "gw", None)  # type: ignore[arg-type]
    for item, out, target_type, report in good:
        model.record(route, item, "jms", Direction.EGRESS, Status.OK, target_type=target_type,
                     target_size=out.size, report=report, now=now, destination=out.destination)
    for log in logs.values():
        log.close()
    fast, expected = _read(tmp_path / "fast"), _read(tmp_path / "model")
    assert len(expected) == 2 * len(good)
    assert fast == expected
    assert ConversionRecord.from_json_line(fast[2 * 4 + 1]).redelivery_count == 2**31 - 1   # 2**40 capped


class _Lines:
    """A stand-in ConversionLog that keeps what it is given."""

    keeps_columns = False

    def __init__(self) -> None:
        self.lines: list[str] = []

    def record_lines(self, lines: list[str], columns: object = None) -> None:
        self.lines.extend(lines)

    def record_values(self, columns: LineColumns) -> None:
        self.lines.extend(render_lines(columns))


@given(client=st.none() | text, dest=st.none() | text, fnd=findings, redelivered=st.integers(0, 2**40),
       status=st.sampled_from(list(Status)), target_type=st.none() | text, target_size=st.none() | st.integers(0, 99),
       reason=st.none() | text, persistent=st.none() | st.booleans(), priority=st.none() | st.integers(0, 9))
@settings(max_examples=200)
def test_record_writes_the_trusted_lines(client: str | None, dest: str | None, fnd: tuple[Finding, ...],
                                         redelivered: int, status: Status, target_type: str | None,
                                         target_size: int | None, reason: str | None, persistent: bool | None,
                                         priority: int | None) -> None:
    """Router.record (a backout, a drop, ...) writes the ingress and egress records as trusted_json_line
    writes these values, and nothing of a record_ok batch before it leaks into them."""
    route = Route.model_validate({"name": "r1", "from": {"mqtt": "a/#"}, "to": {"connector": "amq", "topic": "t"}})
    item = _inbound(5, client, "a/b", redelivered)
    item.persistent, item.priority = persistent, priority
    sink = _Lines()
    router = Router(None, None, sink, "gw", None)  # type: ignore[arg-type]
    now = 1_795_320_100.25
    router.record_ok(route, "jms", [(item, Outbound(item.key, b"", "topic:t", 1), "TextMessage",
                                     ConversionReport([Finding(Change.DROPPED, "x", "y")]))], now)
    del sink.lines[:]
    router.record(route, item, "mq", Direction.EGRESS, Status(status), now=now, target_type=target_type,
                  target_size=target_size, report=ConversionReport(list(fnd)), reason=reason, destination=dest)
    common = {"gateway_id": "gw", "message_key": item.key, "route": "r1", "source_protocol": "mqtt",
              "target_protocol": "mq", "source_type": "publish", "qos": 1, "source_size": 5,
              "persistent": persistent, "priority": priority, "redelivery_count": min(redelivered, 2**31 - 1),
              "retained": False}   # the MQTT source publication's RETAIN flag
    assert sink.lines == [
        trusted_json_line({**common, "event_time": item.received, "direction": "ingress", "status": "ok",
                           "client_id": client, "destination": "a/b"}),
        trusted_json_line({**common, "event_time": now, "direction": "egress", "status": status.value,
                           "reason": reason, "target_type": target_type, "target_size": target_size,
                           "findings": fnd, "latency_us": max(0, int((now - item.received) * 1_000_000)),
                           "destination": dest})]
