"""Finding the message a STOMP provider cannot deliver, so that one message does not stop a route.

ActiveMQ 5.x closes the STOMP connection when it cannot render the next message for the subscription's
``transformation`` (e.g. an ObjectMessage of a class outside its trusted packages: "Forbidden class ...
not trusted", docs/stomp-facts.md §11), and does so again after every reconnect: the route would reconnect
forever, deliver nothing from that queue, and log nothing. ``PoisonWatch`` is the source's state machine
against that (no I/O; ``JmsSource`` feeds it events and applies the subscription headers it asks for):

- NORMAL: the route's prefetch, with the transformation. A connection that was established and dropped
  with no acknowledgement since it came up is a strike; ``STRIKES`` in a row move to SINGLE.
- SINGLE: prefetch 1, with the transformation, so the provider dispatches the next message only after
  the last one is acknowledged. A drop with nothing outstanding happened while it dispatched the head of
  the queue; ``SINGLE_STRIKES`` in a row move to PROBE. ``CLEAR_AFTER`` acknowledgements move back to NORMAL.
- PROBE: prefetch 1 without the transformation, which ActiveMQ can always render. The first frame is the
  head of the queue: a Text or Bytes body is exact without the transformation and goes on as usual; an
  empty non-Bytes body (what a Map, Object or Stream message gives without it) is the message the provider
  could not deliver and goes to the route's backout destination with the reason. Once that frame is
  acknowledged the source reconnects in SINGLE mode (later frames of the probe connection are left to be
  delivered again).
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from enum import Enum

log = logging.getLogger(__name__)

STRIKES = 3
SINGLE_STRIKES = 2
CLEAR_AFTER = 100


class Mode(Enum):
    NORMAL = "normal"
    SINGLE = "single"
    PROBE = "probe"


POISON_REASON = (
    "the provider closed the STOMP connection each time it tried to deliver this message ({drops} times): it "
    "could not render it for the subscription's transformation (e.g. an ObjectMessage of a class outside "
    "ActiveMQ's trusted packages; the provider's log names the cause). Read without the transformation it "
    "came with an empty body, which a Map, Object or Stream message gives there: its body is lost")


class PoisonWatch:
    """Which subscription mode a STOMP source needs now, from its link's events."""

    def __init__(self, destination: str) -> None:
        self.destination = destination
        self.mode = Mode.NORMAL
        self.strikes = 0
        self.drops = 0           # drops of established connections since the last clean stretch
        self._acked_since_up = 0
        self._outstanding = 0
        self._clean_acks = 0
        self._probe_frame_seen = False

    def established(self) -> None:
        """A connection got its CONNECTED frame (its subscriptions follow)."""
        self._acked_since_up = 0
        self._outstanding = 0
        self._probe_frame_seen = False

    def dropped(self) -> bool:
        """An established connection dropped; True when the mode changed (the next connect uses it)."""
        self.drops += 1
        before = self.mode
        if self.mode is Mode.NORMAL:
            self.strikes = 0 if self._acked_since_up else self.strikes + 1
            if self.strikes >= STRIKES:
                self._enter(Mode.SINGLE)
        elif self.mode is Mode.SINGLE:
            self.strikes = 0 if self._outstanding else self.strikes + 1
            if self.strikes >= SINGLE_STRIKES:
                self._enter(Mode.PROBE)
        return self.mode is not before

    def frame(self, headers: Mapping[str, str], body: bytes) -> str | None | bool:
        """A frame arrived on the current connection: False to leave it (delivered again later), None to
        hand it on as usual, or the reason it goes to the backout destination."""
        self._outstanding += 1
        if self.mode is not Mode.PROBE:
            return None
        if self._probe_frame_seen:
            return False
        self._probe_frame_seen = True
        if "content-length" in headers or body:
            return None          # Text or Bytes: exact without the transformation
        return POISON_REASON.format(drops=self.drops)

    def acked(self, count: int, *, probe: bool = False) -> bool:
        """``count`` frames of the current connection were acknowledged (``probe``: the probe frame among
        them); True when the mode changed: the caller reconnects so that the subscription uses it."""
        self._outstanding = max(0, self._outstanding - count)
        self._acked_since_up += count
        if self.mode is Mode.PROBE:
            if probe:
                self._enter(Mode.SINGLE)
            return probe
        if self.mode is Mode.SINGLE:
            self._clean_acks += count
            if self._clean_acks >= CLEAR_AFTER:
                self._enter(Mode.NORMAL)
                self.drops = 0
                return True
        return False

    def subscription_headers(self, normal: Mapping[str, str]) -> dict[str, str]:
        """The SUBSCRIBE headers for the current mode, from the route's own."""
        if self.mode is Mode.NORMAL:
            return dict(normal)
        headers = {k: v for k, v in normal.items() if self.mode is not Mode.PROBE or k != "transformation"}
        headers["activemq.prefetchSize"] = "1"
        return headers

    def _enter(self, mode: Mode) -> None:
        log.warning("%s: STOMP subscription mode %s -> %s (%d drops of established connections)",
                    self.destination, self.mode.value, mode.value, self.drops)
        self.mode = mode
        self.strikes = 0
        self._clean_acks = 0
