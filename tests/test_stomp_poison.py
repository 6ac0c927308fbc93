"""PoisonWatch (bridge.connectors.stomp_poison): when a STOMP source narrows its subscription down to the
message the provider cannot deliver, and when it does not (a drop with a message outstanding, acknowledgements
in between)."""
from __future__ import annotations

from bridge.connectors.stomp_poison import CLEAR_AFTER, SINGLE_STRIKES, STRIKES, Mode, PoisonWatch

ROUTE = {"transformation": "jms-map-json", "activemq.prefetchSize": "100", "selector": "n > 1"}


def _drops(watch: PoisonWatch, n: int) -> list[bool]:
    out = []
    for _ in range(n):
        watch.established()
        out.append(watch.dropped())
    return out


def test_drops_without_progress_narrow_down_to_the_head_of_the_queue() -> None:
    watch = PoisonWatch("/queue/q")
    assert watch.subscription_headers(ROUTE) == ROUTE
    assert _drops(watch, STRIKES) == [False] * (STRIKES - 1) + [True] and watch.mode is Mode.SINGLE
    assert watch.subscription_headers(ROUTE) == {**ROUTE, "activemq.prefetchSize": "1"}
    assert _drops(watch, SINGLE_STRIKES)[-1] and watch.mode is Mode.PROBE
    assert watch.subscription_headers(ROUTE) == {"activemq.prefetchSize": "1", "selector": "n > 1"}
    watch.established()
    reason = watch.frame({"message-id": "ID:1"}, b"")          # an empty non-Bytes body: the one
    assert isinstance(reason, str) and f"({STRIKES + SINGLE_STRIKES} times)" in reason
    assert watch.frame({"message-id": "ID:2"}, b"x") is False   # left for the next connection
    assert watch.acked(1, probe=True) and watch.mode is Mode.SINGLE


def test_a_text_or_bytes_probe_frame_goes_on_as_usual() -> None:
    for headers, body in (({}, b"text"), ({"content-length": "0"}, b"")):
        watch = PoisonWatch("/queue/q")
        _drops(watch, STRIKES + SINGLE_STRIKES)
        watch.established()
        assert watch.mode is Mode.PROBE and watch.frame(headers, body) is None


def test_progress_between_drops_is_no_strike() -> None:
    watch = PoisonWatch("/queue/q")
    for _ in range(3 * STRIKES):
        watch.established()
        watch.frame({}, b"m")
        watch.acked(1)
        assert not watch.dropped()
    assert watch.mode is Mode.NORMAL
    _drops(watch, STRIKES)
    for _ in range(3 * SINGLE_STRIKES):   # single file: dropped with a message outstanding (a network drop)
        watch.established()
        watch.frame({}, b"m")
        assert not watch.dropped()
    assert watch.mode is Mode.SINGLE


def test_single_file_ends_after_enough_clean_acknowledgements() -> None:
    watch = PoisonWatch("/queue/q")
    _drops(watch, STRIKES)
    watch.established()
    changed = [watch.acked(1) for _ in range(CLEAR_AFTER)]
    assert changed == [False] * (CLEAR_AFTER - 1) + [True] and watch.mode is Mode.NORMAL
    assert watch.subscription_headers(ROUTE) == ROUTE
