"""A route's deliveries to connected persistent sessions that its source still holds (issue #18).

A route to MQTT (e.g. the embedded queue MQTT.OUT -> topics) used to make every QoS 1 delivery to a persistent
session durable in the broker's store (a message row and a delivery row, deleted again at the PUBACK) before its
source let go of the message. The source already holds a durable copy: the message stays on its queue (under
syncpoint) until the route confirms it. So a QoS 1 delivery to a persistent session whose client is connected is
*held* instead: sent at once, with nothing written, and the route's batch is accepted only once each held
delivery is over:

- acknowledged (PUBACK), or ended otherwise (expired, too large, the session discarded): nothing to keep;
- or made durable in the broker after all (``journal``): its message and delivery rows are written, as they would
  have been, and the hold lets go once they are committed. This happens when the client disconnects with
  the delivery queued or in flight (``Session.detach``), and for everything a batch still holds
  ``HOLD_SECONDS`` after it was published (a slow or stalled client must not stall the route).

A crash while a delivery is held leaves the message at the source, which delivers it again after the restart:
at least once, as QoS 1 allows; nothing acknowledged is lost. QoS 2 deliveries are never held: the packet id of
a QoS 2 PUBLISH must be durable before it leaves, or a restart could send it again under another id.
docs/broker.md "Routes to MQTT: deliveries held by the source".
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from bridge.mqtt.message import OutMsg

if TYPE_CHECKING:
    from bridge.mqtt.messages import StoredMessages
    from bridge.mqtt.session import Session
    from bridge.mqtt.store import Store

HOLD_SECONDS = 1.0   # after this, what a batch still holds is written to the broker's store (``expire``)


class SourceHold:
    """The held deliveries of one route batch, and what to call once none is held any more."""

    __slots__ = ("_messages", "_store", "_outs", "pending", "_settled", "journaled")

    def __init__(self, messages: StoredMessages, store: Store) -> None:
        self._messages = messages
        self._store = store
        self._outs: list[tuple[Session, OutMsg]] = []
        self.pending = 0            # deliveries held, plus journaled ones whose rows are not committed yet
        self._settled: Callable[[], None] | None = None
        self.journaled = 0          # deliveries that had to be written to the broker's store after all

    def take(self, session: Session, out: OutMsg) -> None:
        """``out``, a QoS 1 delivery to ``session`` being made, is held (not journaled)."""
        out.held = self
        self.pending += 1
        self._outs.append((session, out))

    def done(self, out: OutMsg) -> None:
        """The held delivery ended (acknowledged, expired, discarded): nothing of it needs keeping."""
        out.held = None
        self._release()

    def journal(self, session: Session, out: OutMsg) -> None:
        """The held delivery must outlive the hold: its message (if not stored yet) and its delivery row, in the
        state it is in (queued, or sent with its packet id), are written now; the hold lets go of it once that
        is committed."""
        out.held = None
        self.journaled += 1
        msg = out.msg
        if msg.store_id is None:
            self._messages.store(msg)
        journal = session.journal
        assert journal is not None   # only persistent sessions' deliveries are held
        journal.new(out)
        self._store.after_commit(self._release)

    def expire(self) -> None:
        """The batch was published ``HOLD_SECONDS`` ago: what it still holds is journaled."""
        for session, out in self._outs:
            if out.held is self:
                self.journal(session, out)

    def settle(self, callback: Callable[[], None]) -> bool:
        """Once the batch is published: call ``callback`` when nothing of it is held any more. False: nothing
        is held now (``callback`` is not called)."""
        if self.pending == 0:
            return False
        self._settled = callback
        return True

    def _release(self) -> None:
        self.pending -= 1
        if self.pending == 0:
            self._outs = []
            settled, self._settled = self._settled, None
            if settled is not None:
                settled()


__all__ = ["HOLD_SECONDS", "SourceHold"]
