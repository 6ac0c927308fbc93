"""The session table: open, resume, end, expire and recover sessions (one per client id).

A clean session lives as long as its connection; a persistent one keeps its subscriptions and queues
QoS 1/2 deliveries while the client is away (SwiftMQ docs "MQTT Swiftlet"), until it is cleaned,
deleted by the admin or expires (session_expiry_hours since the client left; a route's never does).
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from bridge.config import LimitsConfig
from bridge.mqtt import memory
from bridge.mqtt.messages import StoredMessages
from bridge.mqtt.session import Message, OutMsg, Session
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

    def new(self, client_id: str, *, persistent: bool, level: int) -> Session:
        return Session(client_id, persistent=persistent, protocol_level=level,
                       journal=self.store if persistent else None,
                       max_inflight=self.limits.max_inflight, max_queued=self.limits.max_queued,
                       max_queued_bytes=self.limits.max_queued_bytes, on_release=self.messages.release)

    def open(self, client_id: str, *, clean: bool, level: int, expiry_seconds: int,
             now: float) -> tuple[Session, bool]:
        """The session a CONNECT (or a route) starts with: a clean one, or the persistent one it had (then
        True), or a new persistent one expiring ``expiry_seconds`` after the client leaves. A persistent
        session's row is written (CONNACK waits for it)."""
        sessions = self.sessions
        existing = sessions.get(client_id)
        present = False
        if clean:
            if existing is not None:
                self.drop(existing)
            session = self.new(client_id, persistent=False, level=level)
            sessions[client_id] = session
        elif existing is not None and existing.persistent:
            session = existing
            present = True
        else:
            if existing is not None:
                self.drop(existing)
            session = self.new(client_id, persistent=True, level=level)
            session.expiry_seconds = expiry_seconds
            sessions[client_id] = session
        session.protocol_level = level
        session.last_seen = now
        if session.persistent:
            self.store.save_session(client_id, level, now, session.expiry_seconds)
        return session, present

    def left(self, session: Session) -> None:
        """Its connection ended: a persistent session waits for the client, a clean one ends."""
        session.detach()
        now = self.clock()
        session.last_seen = now
        if session.persistent:
            self.store.touch_session(session.client_id, now)
        else:
            self.drop(session)

    def drop(self, session: Session) -> None:
        """End ``session``: its subscriptions, deliveries and (persistent) store rows."""
        cid = session.client_id
        self.subscriptions.remove_all(session)
        memory.freed(session.queued_bytes + session.inbound_bytes)   # given back to the OS (memory.py)
        session.discard_messages()
        if self.sessions.get(cid) is session:
            del self.sessions[cid]
        if session.persistent:
            self.store.delete_session(cid)

    def expire(self) -> int:
        now = self.clock()
        expired = [s for s in self.sessions.values()
                   if s.persistent and s.link is None and s.expiry_seconds
                   and now - s.last_seen > s.expiry_seconds]
        for session in expired:
            log.info("session %s expired after %.0f s idle", session.client_id, now - session.last_seen)
            self.drop(session)
        return len(expired)

    def recover(self, state: RecoveredState) -> int:
        """Rebuild sessions, subscriptions, queues and stored messages from the store after a (re)start;
        returns how many deliveries it put back."""
        messages = {mid: Message(m.topic, m.payload, m.qos, m.retain, m.origin, store_id=mid, username=m.username,
                                 key_id=m.key_id, redelivery=m.redelivery, packet_id=m.packet_id)
                    for mid, m in state.messages.items()}
        trie = self.subscriptions.trie
        restored = 0
        for cid, stored in state.sessions.items():
            session = self.new(cid, persistent=True, level=stored.protocol_level)
            session.last_seen = stored.last_seen
            session.expiry_seconds = stored.expiry_seconds
            for flt, qos in stored.subscriptions.items():
                session.subscriptions[flt] = qos
                trie.add(flt, cid, qos)
            for seq, mid, qos, retain, pid, state_ in stored.outbound:
                msg = messages.get(mid)
                if msg is None:
                    log.error("store: outbound row %s/%s refers to missing message %s", cid, seq, mid)
                    continue
                out = OutMsg(msg, qos, bool(retain), seq)
                out.packet_id = pid
                out.state = state_
                session.restore_outbound(out)
                restored += 1
            for pid, (topic, payload, retain) in stored.inbound_qos2.items():
                session.hold_inbound(pid, Message(topic, payload, 2, retain, cid, packet_id=pid))
            session.inbound_qos1.update(stored.inbound_qos1)
            self.sessions[cid] = session
        self.messages.recover(state.next_message_id, messages.values())
        return restored
