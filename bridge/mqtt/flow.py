"""Flow control for the gateway's route sessions: push back on publishers instead of dropping.

A route's session (``$route:<name>``) treats max_queued as a soft limit: a QoS 1/2 publication that
reaches it while it is full is queued all the same, and the publisher is held (its connection is read
but not processed, or a route into the broker waits) until the queue is down to the low-water mark.
Ordinary client sessions keep the drop-and-count behaviour. No asyncio here: a waiting route registers
a plain callback (``when_relieved``).
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable

from bridge.mqtt.connection import NOT_HELD, ClientConnection
from bridge.mqtt.overflow import Overflow
from bridge.mqtt.session import Session

log = logging.getLogger("mqbridge.broker")


class FlowControl:
    """Which publishers the pushing-back route sessions hold, and who waits for them to let go."""

    def __init__(self, sessions: dict[str, Session]) -> None:
        self._sessions = sessions
        # route session id -> the connections it holds, since when it pushes back
        self.holds: dict[str, set[ClientConnection]] = {}
        self._pushing_since: dict[str, float] = {}
        # the pushing-back sessions the publication being handled reached (filled by Publisher.deliver)
        self.pressing: list[Session] = []
        self._relief_waiters: dict[str, list[Callable[[], None]]] = {}   # routes into the broker

    def enable(self, session: Session) -> None:
        """Make ``session`` (a route's) push back instead of dropping (see the module docstring)."""
        session.overflow = Overflow(lambda pushing: self._on_flow(session, pushing))

    def disable(self, session: Session) -> None:
        """``session`` no longer belongs to a running route: it lets go of the publishers it holds."""
        if session.pushing_back:
            self._on_flow(session, False)
        session.overflow = None

    def _on_flow(self, session: Session, pushing: bool) -> None:
        cid = session.client_id
        if pushing:
            self._pushing_since[cid] = time.monotonic()
            log.warning("%s: %d queued (%d bytes), its limit (max_queued %d, max_queued_bytes %d): pushing back, "
                        "publishers that reach it are held until it is down to 90 %% of both", cid, len(session.queue),
                        session.queued_bytes, session.max_queued, session.max_queued_bytes)
            return
        for callback in self._relief_waiters.pop(cid, []):
            callback()
        held = self.holds.pop(cid, set())
        since = self._pushing_since.pop(cid, time.monotonic())
        log.info("%s: %d queued: no longer pushing back after %.1f s; %d held publisher(s) resumed", cid,
                 len(session.queue), time.monotonic() - since, len(held))
        for conn in held:
            conn.unhold(cid)

    def take_pressing(self) -> list[Session]:
        """The pushing-back route sessions the publications made since the last call reached (for a
        publisher that is not a connection: a route into the broker)."""
        pressing = list(dict.fromkeys(self.pressing))
        self.pressing.clear()
        return pressing

    def when_relieved(self, session: Session, callback: Callable[[], None]) -> bool:
        """Call ``callback`` once ``session`` no longer pushes back. False (and no call): it does not push
        back now, or is gone."""
        if not session.pushing_back or self._sessions.get(session.client_id) is not session:
            return False
        self._relief_waiters.setdefault(session.client_id, []).append(callback)
        return True

    def held_publishers(self, session_id: str) -> int:
        """How many publishers the route session holds: connections, and routes into the broker waiting."""
        return len(self.holds.get(session_id, ())) + len(self._relief_waiters.get(session_id, ()))

    def hold(self, conn: ClientConnection) -> None:
        """The packet just handled from ``conn`` reached route sessions that push back: hold ``conn``."""
        pressing = self.pressing
        sessions = self._sessions
        for session in pressing:
            cid = session.client_id
            if session.pushing_back and cid not in conn.held_by and sessions.get(cid) is session:
                if conn.held_by is NOT_HELD:
                    conn.held_by = set()
                conn.held_by.add(cid)   # type: ignore[union-attr]
                self.holds.setdefault(cid, set()).add(conn)
        pressing.clear()

    def forget(self, conn: ClientConnection) -> None:
        """``conn`` ended: it is no longer a publisher any route session holds."""
        for cid in conn.held_by:
            held = self.holds.get(cid)
            if held is not None:
                held.discard(conn)
        conn.held_by = NOT_HELD
