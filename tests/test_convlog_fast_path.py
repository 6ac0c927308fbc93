"""The writer's trusted fast path emits exactly what the validated record would, for any valid values."""
from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from mappings.convlog_schema import ConversionRecord, Direction, Protocol, Status, epoch_timestamp, trusted_json_line
from mappings.report import Change, Finding

text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20)
findings = st.lists(st.builds(Finding, st.sampled_from(list(Change)), text, st.text(max_size=20)), max_size=3)


@given(
    t=st.integers(0, 4_000_000_000_000_000).map(lambda us: us / 1_000_000),
    direction=st.sampled_from(list(Direction)), status=st.sampled_from(list(Status)),
    src=st.sampled_from(list(Protocol)), dst=st.sampled_from(list(Protocol)),
    qos=st.integers(0, 2), size=st.integers(0, 2**40), opt_int=st.none() | st.integers(0, 9),
    persistent=st.none() | st.booleans(), key=text, reason=text, fnd=findings,
    latency=st.none() | st.integers(0, 2**40), dest=st.none() | text,
)
@settings(max_examples=300)
def test_trusted_line_equals_validated_line(t: float, direction: Direction, status: Status, src: Protocol,
                                            dst: Protocol, qos: int, size: int, opt_int: int | None,
                                            persistent: bool | None, key: str, reason: str,
                                            fnd: list[Finding], latency: int | None, dest: str | None) -> None:
    values = dict(gateway_id="gw", message_key=key, route="r1", source_protocol=src.value,
                  target_protocol=dst.value, source_type="publish", qos=qos, source_size=size,
                  persistent=persistent, priority=opt_int, redelivery_count=0, direction=direction.value,
                  status=status.value, reason=None if status is Status.OK else reason, target_type="MQHRF2",
                  target_size=size, findings=tuple(fnd), latency_us=latency, client_id=None, destination=dest)
    fast = trusted_json_line({**values, "event_time": t})
    validated = ConversionRecord.from_json_line(fast)   # what every reader does
    assert validated.to_json_line() == fast
    assert validated.event_time == datetime.fromtimestamp(round(t, 6), UTC) or \
        abs(validated.event_time.timestamp() - t) < 1e-6


def test_epoch_timestamp_format() -> None:
    assert epoch_timestamp(0.0) == "1970-01-01T00:00:00.000000Z"
    t = 1_795_320_669.5
    assert epoch_timestamp(t) == datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert epoch_timestamp(1.9999999) == "1970-01-01T00:00:02.000000Z"
