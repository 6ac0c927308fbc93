"""Finding the message a STOMP provider cannot deliver, so that one message does not stop a route.

ActiveMQ 5.x closes the STOMP connection when it cannot render the next message for the subscription's
``transformation`` (e.g. an ObjectMessage of a class outside its trusted packages: "Forbidden class ...
not trusted", docs/stomp-facts.md §11), and does so again after every reconnect: the route would reconnect
forever, deliver nothing from that queue, and log nothing. ``PoisonWatch`` is the source's state machine
against that (no I/O; ``JmsSource`` feeds it events and applies the subscription headers it asks for). A
*quick drop* is the drop of an established connection within ``QUICK`` seconds of its CONNECTED frame or of
the last acknowledgement: the provider dispatches at once, so that is when it fails.

- NORMAL: the route's prefetch, with the transformation. A quick drop with nothing acknowledged on that
  connection is a strike; ``STRIKES`` in a row move to SINGLE.
- SINGLE: prefetch 1, with the transformation, so the provider dispatches the next message only after the
  last one is acknowledged. A quick drop with nothing outstanding happened while it dispatched the head of
  the queue; ``SINGLE_STRIKES`` in a row move to PROBE. ``CLEAR_AFTER`` acknowledgements move back to NORMAL.
- PROBE: prefetch 1 without the transformation, which ActiveMQ can always render. The first frame is the
  head of the queue: a Text or Bytes body is exact that way and goes on as usual. An empty non-Bytes body is
  what a Map, Object or Stream message gives there, so the frame is only a *suspect*: it is left, and the
  source goes back to SINGLE. If the suspect then arrives with the transformation it was not the one; if the
  next connection drops quickly with nothing outstanding instead, it is confirmed, and on the next PROBE
  that message goes to the route's backout destination with the reason. Later frames of a probe connection
  are left to be delivered again. A Map that only met bad luck with the network is never backed out.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from enum import Enum

log = logging.getLogger(__name__)

STRIKES = 3
SINGLE_STRIKES = 2
CLEAR_AFTER = 100
QUICK = 2.0


class Mode(Enum):
    NORMAL = "normal"
    SINGLE = "single"
    PROBE = "probe"


class Action(Enum):
    PASS = "pass"        # hand the frame on as usual
    LEAVE = "leave"      # do not hand it on: the provider delivers it again
    RECHECK = "recheck"  # do not hand it on, and reconnect: the subscription mode changed
    POISON = "poison"    # hand it on as a message to back out (``PoisonWatch.reason``)


POISON_REASON = (
    "the provider closed the STOMP connection each time it tried to deliver this message ({drops} drops): it "
    "could not render it for the subscription's transformation (e.g. an ObjectMessage of a class outside "
    "ActiveMQ's trusted packages; the provider's log names the cause). Read without the transformation it "
    "came with an empty body, which a Map, Object or Stream message gives there: its body is lost")


class PoisonWatch:
    """Which subscription mode a STOMP source needs now, from its link's events."""

    def __init__(self, destination: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.destination = destination
        self.clock = clock
        self.mode = Mode.NORMAL
        self.strikes = 0
        self.drops = 0           # quick drops since the last clean stretch
        self.reason = ""
        self.suspect: str | None = None     # message id read empty on a probe, not yet confirmed
        self.confirmed: str | None = None   # a suspect whose delivery with the transformation failed again
        self._acked_since_up = 0
        self._outstanding = 0
        self._clean_acks = 0
        self._probe_frame_seen = False
        self._last_event = clock()
        self._ignore_drop = False

    def expect_drop(self) -> None:
        """The source drops the connection itself (to subscribe in the new mode): that drop is no strike."""
        self._ignore_drop = True

    def established(self) -> None:
        """A connection got its CONNECTED frame (its subscriptions follow)."""
        self._acked_since_up = 0
        self._outstanding = 0
        self._probe_frame_seen = False
        self._last_event = self.clock()

    def dropped(self) -> bool:
        """An established connection dropped; True when the mode changed (the next connect uses it)."""
        if self._ignore_drop:
            self._ignore_drop = False
            return False
        if self.clock() - self._last_event > QUICK:
            return False         # not while the provider dispatched: a network drop or a restart
        self.drops += 1
        before = self.mode
        if self.mode is Mode.NORMAL:
            self.strikes = 0 if self._acked_since_up else self.strikes + 1
            if self.strikes >= STRIKES:
                self._enter(Mode.SINGLE)
        elif self.mode is Mode.SINGLE:
            self.strikes = 0 if self._outstanding else self.strikes + 1
            if self.suspect is not None and self.strikes:
                self.confirmed, self.suspect = self.suspect, None
                self._enter(Mode.PROBE)
            elif self.strikes >= SINGLE_STRIKES:
                self._enter(Mode.PROBE)
        return self.mode is not before

    def frame(self, headers: Mapping[str, str], body: bytes) -> Action:
        """A frame arrived on the current connection: what the source does with it."""
        self._outstanding += 1
        message_id = headers.get("message-id")
        if self.mode is not Mode.PROBE:
            if self.suspect is not None and message_id == self.suspect:
                self.suspect = None   # delivered with the transformation: it was not the one
            return Action.PASS
        if self._probe_frame_seen:
            return Action.LEAVE
        self._probe_frame_seen = True
        if "content-length" in headers or body:
            return Action.PASS   # Text or Bytes: exact without the transformation
        if message_id is not None and message_id == self.confirmed:
            self.reason = POISON_REASON.format(drops=self.drops)
            return Action.POISON
        self.suspect = message_id
        self._enter(Mode.SINGLE)
        return Action.RECHECK

    def acked(self, count: int, *, probe: bool = False) -> bool:
        """``count`` frames of the current connection were acknowledged (``probe``: the probe frame among
        them); True when the mode changed: the caller reconnects so that the subscription uses it."""
        self._outstanding = max(0, self._outstanding - count)
        self._acked_since_up += count
        self._last_event = self.clock()
        if self.mode is Mode.PROBE:
            if probe:
                self.confirmed = None
                self._enter(Mode.SINGLE)
            return probe
        if self.mode is Mode.SINGLE:
            self._clean_acks += count
            if self._clean_acks >= CLEAR_AFTER and self.suspect is None:
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
        log.warning("%s: STOMP subscription mode %s -> %s (%d quick drops of established connections)",
                    self.destination, self.mode.value, mode.value, self.drops)
        self.mode = mode
        self.strikes = 0
        self._clean_acks = 0
