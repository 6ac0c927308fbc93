"""Route sessions whose route is gone: retired, and their queued messages handed to the routes that match.

A route's broker session (``$route:<name>``) holds QoS 1/2 publications the broker has acknowledged to
their publishers. When its route is removed, renamed, disabled or no longer reads from MQTT (a reload,
or a rules file changed while the gateway was stopped), the router *retires* the session: unsubscribed,
so it collects nothing more, and letting go of the publishers it held. Each delivery it holds goes to
every other route session whose subscription matches the topic and was made after the message was
stored, so that it did not have the message already. A subscription's *since* (the first message id
stored after it was made; message ids only grow) is kept in the store beside it; a subscription without
one (made by an older mqbridge) is taken to have had every message. Deliveries are handed when a session
is retired (to the subscriptions there are) and when a route session subscribes (from every retired
session), but only to a route whose ``acl_user`` may read the topic under the ACL; ``settle`` then takes
the handed ones out of the retired sessions and deletes those left empty. What no route takes stays in
its retired session until a route that matches it starts, a route of the same name takes the session
back, or the router discards it on the user's word.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from bridge.mqtt.flow import FlowControl
from bridge.mqtt.messages import StoredMessages
from bridge.mqtt.session import OutMsg, Session
from bridge.mqtt.sessions import SessionTable
from bridge.mqtt.store import RELEASED, Store
from bridge.mqtt.subscribe import Subscriptions
from bridge.mqtt.topics import topic_matches


@dataclass(slots=True)
class Settled:
    """What became of one retired route session's deliveries."""
    client_id: str
    handed: dict[str, int]   # route session id -> how many deliveries it was given
    kept: int                # deliveries left in the retired session (no route matches them)
    deleted: bool            # it was left empty and is deleted


class RouteSessions:
    """Subscriptions of route sessions with their since, and the retired route sessions."""

    def __init__(self, prefix: str, sessions: dict[str, Session], store: Store, subscriptions: Subscriptions,
                 messages: StoredMessages, table: SessionTable, flow: FlowControl) -> None:
        self.prefix = prefix
        self.sessions = sessions
        self.store = store
        self.subscriptions = subscriptions
        self.messages = messages
        self.table = table
        self.flow = flow
        self.since: dict[tuple[str, str], int] = {}
        self.retired: dict[str, Session] = {}
        # retired session id -> delivery -> the route sessions it was handed to (until ``settle``)
        self._handed: dict[str, dict[OutMsg, list[str]]] = {}

    def recover(self, since: dict[tuple[str, str], int]) -> None:
        for (cid, flt), first in since.items():
            session = self.sessions.get(cid)
            if session is not None and flt in session.subscriptions:
                self.since[(cid, flt)] = first
            else:   # the subscription's removal was committed and this row's was not
                self.store.delete_route_since(cid, flt)

    # -- subscriptions ------------------------------------------------------------------------------

    def subscribe(self, session: Session, topic_filter: str) -> None:
        """A route session subscribes to ``topic_filter`` (QoS 2): its since is written before the
        subscription (a crash never leaves the subscription without it), then it is given what retired
        sessions hold for it."""
        first = self.messages.next_id
        cid = session.client_id
        self.since[(cid, topic_filter)] = first
        self.store.save_route_since(cid, topic_filter, first)
        self.subscriptions.add(session, topic_filter, 2)
        for retired in list(self.retired.values()):
            self._hand(retired, [(session, topic_filter, first)])

    def unsubscribe(self, session: Session, topic_filter: str) -> None:
        self.subscriptions.remove(session, topic_filter)
        if self.since.pop((session.client_id, topic_filter), None) is not None:
            self.store.delete_route_since(session.client_id, topic_filter)

    # -- retiring -----------------------------------------------------------------------------------

    def retire(self, client_ids: Iterable[str]) -> list[str]:
        """Retire these route sessions (those that exist and are not retired yet), then hand what they
        hold to the other route sessions' subscriptions. Returns the ones retired now."""
        now: list[Session] = []
        for cid in client_ids:
            session = self.sessions.get(cid)
            if session is None or cid in self.retired:
                continue
            for flt in list(session.subscriptions):
                self.unsubscribe(session, flt)
            self.flow.disable(session)
            session.direct = None
            session.direct_out = None
            session.detach()
            self.retired[cid] = session
            now.append(session)
        targets = [(s, flt, first) for s in self.sessions.values()
                   if s.client_id.startswith(self.prefix) and s.client_id not in self.retired
                   for flt in s.subscriptions if (first := self.since.get((s.client_id, flt))) is not None]
        for session in now:
            self._hand(session, targets)
        return [s.client_id for s in now]

    def revive(self, client_id: str) -> None:
        """A route of the same name takes its retired session back: what was handed elsewhere goes."""
        session = self.retired.pop(client_id, None)
        if session is not None:
            _withdraw(session, {out for out, given in self._handed.pop(client_id, {}).items() if given})

    def _hand(self, retired: Session, targets: list[tuple[Session, str, int]]) -> None:
        handed = self._handed.setdefault(retired.client_id, {})
        for out in retired.deliveries():
            if out.state == RELEASED:
                continue   # the route had it (PUBREC): only its PUBCOMP was missing; settle finishes it
            msg = out.msg
            mid = msg.store_id
            if mid is None:
                continue
            for session, flt, first in targets:
                if mid >= first or not topic_matches(flt, msg.topic):
                    continue   # stored after the subscription was made: it had its own copy
                if session.acl is not None and not session.acl.may_read(msg.topic):
                    continue   # its route's acl_user may not read it: kept for a route that may
                given = handed.setdefault(out, [])
                if session.client_id in given:
                    continue
                self.flow.enable(session)   # a route session queues beyond max_queued (and pushes back)
                session.deliver(msg, out.qos, out.retain)
                given.append(session.client_id)

    def settle(self) -> list[Settled]:
        """Take the handed deliveries (and QoS 2 ones the route had, PUBREC) out of the retired sessions;
        delete those left empty."""
        report: list[Settled] = []
        for cid, session in list(self.retired.items()):
            handed = self._handed.pop(cid, {})
            done = {out for out, given in handed.items() if given}
            done.update(out for out in session.deliveries() if out.state == RELEASED)
            _withdraw(session, done)
            counts: dict[str, int] = {}
            for given in handed.values():
                for dest in given:
                    counts[dest] = counts.get(dest, 0) + 1
            left = len(session.inflight) + len(session.queue)
            if not left:
                self.drop(cid)
            report.append(Settled(cid, counts, left, not left))
        return report

    def drop(self, client_id: str) -> None:
        """Delete a retired session with whatever it still holds."""
        session = self.retired.pop(client_id, None)
        self._handed.pop(client_id, None)
        if session is not None:
            self.table.drop(session)


def _withdraw(session: Session, outs: set[OutMsg]) -> None:
    """Take these deliveries out of ``session`` (a removed route's, handed to other routes or discarded):
    their rows are deleted and each message released once no other delivery refers to it."""
    for pid, out in list(session.inflight.items()):
        if out in outs:
            del session.inflight[pid]
            session.finish(out)
    if any(out in outs for out in session.queue):
        kept: deque[OutMsg] = deque()
        for out in session.queue:
            if out in outs:
                session.queued_bytes -= out.msg.size()
                session.finish(out)
            else:
                kept.append(out)
        session.queue = kept
        session.check_relief()
