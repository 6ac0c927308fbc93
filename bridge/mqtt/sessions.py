"""The session table: open, resume, end, expire and recover sessions (one per client id).

A clean session lives as long as its connection; a persistent one keeps its subscriptions and queues
QoS 1/2 deliveries while the client is away (SwiftMQ docs "MQTT Swiftlet"), until it is cleaned,
deleted by the admin or expires (session_expiry_hours since the client left; a route's never does).
"""
from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Callable

from bridge.config import LimitsConfig
from bridge.mqtt import memory
from bridge.mqtt.acl import Grants
from bridge.mqtt.messages import StoredMessages
from bridge.mqtt.properties import unpack
from bridge.mqtt.session import Message, OutMsg, Session
from bridge.mqtt.shared_guard import SharedGuards
from bridge.mqtt.store import RecoveredState, Store
from bridge.mqtt.subscribe import Subscriptions

log = logging.getLogger("mqbridge.broker")


class SessionTable:
    """Client id -> session."""

    def __init__(self, sessions: dict[str, Session], store: Store, limits: LimitsConfig,
                 clock: Callable[[], float], subscriptions: Subscriptions, messages: StoredMessages) -> None:
        self.sessions = sessions
        self.store = store
        self.limits = limits
        self.clock = clock
        self.subscriptions = subscriptions
        self.messages = messages
        self.on_end: Callable[[str], None] | None = None   # a session ended (a delayed will is due then)
        # a session ends: what it holds from shared subscriptions goes to other members (Publisher.reassign)
        self.on_orphans: Callable[[Session], None] | None = None
        # a client's ACL rules (Authenticator.grants): for sessions restored at start-up
        self.grants: Callable[[str, str | None, str | None], Grants | None] = lambda client_id, user, via: None
        self._next_due = math.inf   # no idle session expires before this time

    def new(self, client_id: str, *, persistent: bool, level: int) -> Session:
        session = Session(client_id, persistent=persistent, protocol_level=level,
                          journal=self.store if persistent else None,
                          max_inflight=self.limits.max_inflight, max_queued=self.limits.max_queued,
                          max_queued_bytes=self.limits.max_queued_bytes, on_release=self.messages.release)
        session.clock = self.clock
        return session

    def open(self, client_id: str, *, clean: bool, level: int, expiry_seconds: int, now: float,
             persistent: bool | None = None, username: str | None = None,
             user_via: str | None = "") -> tuple[Session, bool]:
        """The session a CONNECT (or a route) starts with; True: it existed. ``clean`` discards the one it had
        (3.1.1 Clean Session, MQTT 5 Clean Start); ``persistent`` (default: not clean) keeps it after the
        connection, expiring ``expiry_seconds`` after the client leaves (0: never). An MQTT 5 client that
        resumes a persistent session with Session Expiry 0 has it end with this connection. A persistent
        session's row is written (CONNACK waits for it)."""
        if persistent is None:
            persistent = not clean
        sessions = self.sessions
        existing = sessions.get(client_id)
        if existing is not None and (clean or not existing.persistent):
            self.drop(existing)
            existing = None
        present = existing is not None
        if existing is not None:
            session = existing
            session.ends_with_connection = not persistent
            if persistent:
                session.expiry_seconds = expiry_seconds
        else:
            session = self.new(client_id, persistent=persistent, level=level)
            session.expiry_seconds = expiry_seconds
            sessions[client_id] = session
        session.protocol_level = level
        session.last_seen = now
        session.username = username
        session.user_via = user_via
        if session.persistent:
            stored_expiry = -1 if session.ends_with_connection else session.expiry_seconds
            self.store.save_session(client_id, level, now, stored_expiry, username, user_via)
        return session, present

    @property
    def longest_expiry(self) -> int:
        """The longest a session may wait for its client (limits.session_expiry_hours), in seconds: a 3.1.1
        persistent session's expiry, and the cap on an MQTT 5 client's Session Expiry Interval."""
        return int(self.limits.session_expiry_hours * 3600)

    def set_expiry(self, session: Session, expiry_seconds: int | None) -> None:
        """MQTT 5 DISCONNECT changed the Session Expiry Interval (None: to 0, the session ends now)."""
        if expiry_seconds is None:
            session.ends_with_connection = True
            return
        session.ends_with_connection = False
        session.expiry_seconds = expiry_seconds
        if session.persistent:
            self.store.set_session_expiry(session.client_id, self.clock(), expiry_seconds)

    def apply_acl(self, session: Session, grants: Grants | None) -> None:
        """The session's ACL rules are now ``grants`` (a CONNECT, a reload): its subscriptions are checked
        again, and what was queued for it that it may no longer read is withdrawn."""
        session.acl = grants
        self.subscriptions.apply_acl(session)
        self.withdraw_unreadable(session)

    def withdraw_unreadable(self, session: Session) -> int:
        """Drop the session's queued and in-flight deliveries that its ACL rules (changed by a reload, or by
        another user resuming it) no longer let it read; how many."""
        acl = session.acl
        if acl is None or not (session.queue or session.inflight):
            return 0
        gone = [out for out in session.inflight.values() if not acl.may_read(out.msg.topic)]
        for out in gone:
            del session.inflight[out.packet_id]   # type: ignore[arg-type]
            session.finish(out)
        kept: deque[OutMsg] = deque()
        for out in session.queue:
            if acl.may_read(out.msg.topic):
                kept.append(out)
                continue
            session.queued_bytes -= out.msg.size()
            session.finish(out)
            gone.append(out)
        session.queue = kept
        if gone:
            log.info("session %s (user %s): %d queued or in-flight deliveries withdrawn: its ACL rules do not let "
                     "it read them", session.client_id, session.username, len(gone))
        return len(gone)

    def left(self, session: Session) -> None:
        """Its connection ended: a persistent session waits for the client, a clean one ends."""
        keep = session.persistent and not session.ends_with_connection
        session.detach(keep)
        now = self.clock()
        session.last_seen = now
        if keep:
            self.store.touch_session(session.client_id, now)
            if session.expiry_seconds:
                self._next_due = min(self._next_due, now + session.expiry_seconds)
        else:
            self.drop(session)

    def drop(self, session: Session) -> None:
        """End ``session``: its subscriptions, deliveries and (persistent) store rows."""
        cid = session.client_id
        self.subscriptions.remove_all(session)
        if self.on_orphans is not None:
            self.on_orphans(session)
        memory.freed(session.queued_bytes + session.inbound_bytes)   # given back to the OS (memory.py)
        session.discard_messages()
        if self.sessions.get(cid) is session:
            del self.sessions[cid]
        if session.persistent:
            self.store.delete_session(cid)
        if self.on_end is not None:
            self.on_end(cid)

    def expire(self) -> int:
        """End the persistent sessions idle longer than their expiry (checked when one may be due)."""
        now = self.clock()
        if now < self._next_due:
            return 0
        idle = [s for s in self.sessions.values() if s.persistent and s.link is None and s.expiry_seconds]
        expired = [s for s in idle if now - s.last_seen >= s.expiry_seconds]
        for session in expired:
            log.info("session %s expired after %.0f s idle", session.client_id, now - session.last_seen)
            self.drop(session)
        gone = {id(s) for s in expired}
        self._next_due = min((s.last_seen + s.expiry_seconds for s in idle if id(s) not in gone), default=math.inf)
        return len(expired)

    def recover(self, state: RecoveredState, guards: SharedGuards | None = None) -> int:
        """Rebuild sessions, subscriptions, queues and stored messages from the store after a (re)start;
        returns how many deliveries it put back. ``guards`` take the shared groups' rows (shared_guard.py)."""
        messages = {mid: Message(m.topic, m.payload, m.qos, m.retain, m.origin, store_id=mid, username=m.username,
                                 user_via=m.user_via,
                                 key_id=m.key_id, redelivery=m.redelivery, packet_id=m.packet_id,
                                 props=unpack(m.props), expires=m.expires)
                    for mid, m in state.messages.items()}
        restored = 0
        for cid, stored in state.sessions.items():
            if stored.expiry_seconds < 0:   # MQTT 5 Session Expiry 0: it ended with its connection (a crash)
                self.store.delete_session(cid)
                continue
            session = self.new(cid, persistent=True, level=stored.protocol_level)
            # connected at the crash: its connection ended then, at the latest now (expiry counts from there)
            session.last_seen = stored.last_seen
            if stored.connected:
                session.last_seen = self.clock()
                self.store.touch_session(cid, session.last_seen)
            session.expiry_seconds = stored.expiry_seconds
            session.username = stored.username
            session.user_via = stored.user_via
            session.acl = self.grants(cid, stored.username, stored.user_via)
            for flt, options in stored.subscriptions.items():
                self.subscriptions.restore(session, flt, options, stored.subscription_ids.get(flt))
            for seq, mid, qos, retain, pid, state_, sub_ids in stored.outbound:
                msg = messages.get(mid)
                if msg is None:
                    log.error("store: outbound row %s/%s refers to missing message %s", cid, seq, mid)
                    continue
                out = OutMsg(msg, qos, bool(retain), seq, sub_ids)
                out.packet_id = pid
                out.state = state_
                session.restore_outbound(out)
                restored += 1
            if stored.inbound_qos2 or stored.inbound_qos1:
                inbound = session.take_inbound()
                for pid, p in stored.inbound_qos2.items():
                    # its publisher's user: the session's (the inbound_qos2 row has none)
                    inbound.hold(pid, Message(p.topic, p.payload, 2, p.retain, cid, packet_id=pid,
                                              username=session.username, user_via=session.user_via,
                                              props=unpack(p.props), expires=p.expires))
                inbound.qos1.update(stored.inbound_qos1)
            self.sessions[cid] = session
            if session.expiry_seconds:
                self._next_due = min(self._next_due, session.last_seen + session.expiry_seconds)
        for key, seq, mid, qos, row_state in state.shared_rows:
            msg = messages.get(mid)
            if msg is None:
                log.error("store: outbound row %s/%s refers to missing message %s", key, seq, mid)
            elif guards is not None:
                guards.restore(key, seq, msg, qos, row_state)
        self.messages.recover(state.next_message_id, messages.values())
        return restored
