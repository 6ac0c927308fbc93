"""PoisonWatch (bridge.connectors.stomp_poison): when a STOMP source narrows its subscription down to the
message the provider cannot deliver, and when it does not (slow drops, a drop with a message outstanding,
acknowledgements in between, a suspect that arrives with the transformation)."""
from __future__ import annotations

from bridge.connectors.stomp_poison import CLEAR_AFTER, QUICK, SINGLE_STRIKES, STRIKES, Action, Mode, PoisonWatch

ROUTE = {"transformation": "jms-map-json", "activemq.prefetchSize": "100", "selector": "n > 1"}
EMPTY = ({"message-id": "ID:poison"}, b"")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _drops(watch: PoisonWatch, n: int) -> list[bool]:
    out = []
    for _ in range(n):
        watch.established()
        out.append(watch.dropped())
    return out


def _to_probe(watch: PoisonWatch) -> None:
    assert _drops(watch, STRIKES)[-1] and watch.mode is Mode.SINGLE
    assert _drops(watch, SINGLE_STRIKES)[-1] and watch.mode is Mode.PROBE


def test_quick_drops_narrow_down_to_the_head_and_a_confirmed_suspect_is_backed_out() -> None:
    watch = PoisonWatch("/queue/q")
    assert watch.subscription_headers(ROUTE) == ROUTE
    assert _drops(watch, STRIKES) == [False] * (STRIKES - 1) + [True] and watch.mode is Mode.SINGLE
    assert watch.subscription_headers(ROUTE) == {**ROUTE, "activemq.prefetchSize": "1"}
    assert _drops(watch, SINGLE_STRIKES)[-1] and watch.mode is Mode.PROBE
    assert watch.subscription_headers(ROUTE) == {"activemq.prefetchSize": "1", "selector": "n > 1"}
    watch.established()
    assert watch.frame(*EMPTY) is Action.RECHECK                  # a suspect: checked with the transformation
    assert watch.mode is Mode.SINGLE and watch.suspect == "ID:poison"
    watch.expect_drop()
    assert not watch.dropped()                                    # the source's own reconnect
    assert _drops(watch, 1) == [True] and watch.mode is Mode.PROBE   # it failed again: confirmed
    watch.established()
    assert watch.frame(*EMPTY) is Action.POISON and "closed the STOMP connection" in watch.reason
    assert watch.frame({"message-id": "ID:next"}, b"x") is Action.LEAVE   # left for the next connection
    assert watch.acked(1, probe=True) and watch.mode is Mode.SINGLE and watch.confirmed is None


def test_a_suspect_delivered_with_the_transformation_is_not_backed_out() -> None:
    watch = PoisonWatch("/queue/q")
    _to_probe(watch)
    watch.established()
    assert watch.frame({"message-id": "ID:map"}, b"") is Action.RECHECK
    watch.established()
    assert watch.frame({"message-id": "ID:map", "transformation": "jms-map-json"}, b"{}") is Action.PASS
    assert watch.suspect is None and watch.confirmed is None


def test_a_text_or_bytes_probe_frame_goes_on_as_usual() -> None:
    for headers, body in (({}, b"text"), ({"content-length": "0"}, b"")):
        watch = PoisonWatch("/queue/q")
        _to_probe(watch)
        watch.established()
        assert watch.frame(headers, body) is Action.PASS


def test_slow_drops_and_progress_between_drops_are_no_strike() -> None:
    clock = Clock()
    watch = PoisonWatch("/queue/q", clock)
    for _ in range(3 * STRIKES):            # an idle link that drops (network, provider restarts)
        watch.established()
        clock.now += QUICK + 1
        assert not watch.dropped()
    for _ in range(3 * STRIKES):            # each connection delivered something
        watch.established()
        watch.frame({}, b"m")
        watch.acked(1)
        assert not watch.dropped()
    assert watch.mode is Mode.NORMAL and watch.drops == STRIKES * 3
    _drops(watch, STRIKES)
    for _ in range(3 * SINGLE_STRIKES):     # single file: dropped with a message outstanding
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
