"""The broker's store as read back at start-up: the rows of each table as plain records."""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field

# outbound rows of client ids starting so are a shared subscription group's rows (bridge/mqtt/shared_guard.py)
SHARED_ROWS = "$share/"
ROUTE_SINCE = "route_since "   # meta rows keyed ROUTE_SINCE + JSON [client id, filter]: a route subscription's first id


@dataclass(slots=True)
class StoredPublication:
    """A retained message, or an inbound QoS 2 one waiting for PUBREL."""
    topic: str
    payload: bytes
    qos: int
    retain: bool
    origin: str | None = None
    props: bytes | None = None
    expires: float | None = None


@dataclass(slots=True)
class StoredSession:
    client_id: str
    protocol_level: int
    last_seen: float
    expiry_seconds: int
    connected: bool = False
    username: str | None = None
    user_via: str | None = None   # identity.py; None: stored before it was recorded
    subscriptions: dict[str, int] = field(default_factory=dict)   # filter -> options byte
    subscription_ids: dict[str, int] = field(default_factory=dict)
    outbound: list[tuple[int, int, int, int, int | None, int, list[int] | None]] = field(default_factory=list)
    # (seq, message_id, qos, retain, packet_id, state, sub_ids) in seq order
    inbound_qos2: dict[int, StoredPublication] = field(default_factory=dict)
    inbound_qos1: dict[int, tuple[int, int, bytes]] = field(default_factory=dict)
    # packet id -> (key_id, redelivery, digest)


@dataclass(slots=True)
class StoredMessage:
    id: int
    topic: str
    payload: bytes
    qos: int
    retain: bool
    origin: str | None
    username: str | None = None
    key_id: int | None = None
    redelivery: int = 0
    packet_id: int | None = None
    props: bytes | None = None
    expires: float | None = None
    user_via: str | None = None


@dataclass(slots=True)
class RecoveredState:
    sessions: dict[str, StoredSession]
    messages: dict[int, StoredMessage]
    retained: dict[str, StoredPublication]
    next_message_id: int
    # (route session id, topic filter) -> the first message id stored after it subscribed
    route_since: dict[tuple[str, str], int] = field(default_factory=dict)
    wills: list[StoredWill] = field(default_factory=list)
    # (group key, seq, message id, QoS, state): clean members' shared deliveries left at the last stop
    # (shared_guard.py)
    shared_rows: list[tuple[str, int, int, int, int]] = field(default_factory=list)


@dataclass(slots=True)
class StoredWill:
    client_id: str
    topic: str
    payload: bytes
    qos: int
    retain: bool
    props: bytes | None
    username: str | None
    due: float | None
    user_via: str | None = None


def _blob(value: object) -> bytes | None:
    return None if value is None else bytes(value)  # type: ignore[arg-type]


def load_state(conn: sqlite3.Connection) -> RecoveredState:
    """Everything the broker rebuilds its state from (read once, at start-up)."""
    sessions: dict[str, StoredSession] = {}
    for cid, level, last_seen, expiry, connected, username, via in conn.execute(
            "SELECT client_id, protocol_level, last_seen, expiry_seconds, connected, username, user_via FROM sessions"):
        sessions[cid] = StoredSession(cid, level, last_seen, expiry, bool(connected), username, via)
    for cid, flt, qos, sub_id in conn.execute("SELECT client_id, topic_filter, qos, sub_id FROM subscriptions"):
        if cid in sessions:
            sessions[cid].subscriptions[flt] = qos
            if sub_id:
                sessions[cid].subscription_ids[flt] = sub_id
    shared_rows: list[tuple[str, int, int, int, int]] = []
    for cid, seq, mid, qos, retain, pid, state, sub_ids in conn.execute(
            "SELECT client_id, seq, message_id, qos, retain, packet_id, state, sub_ids FROM outbound "
            "ORDER BY client_id, seq"):
        if cid.startswith(SHARED_ROWS):
            shared_rows.append((cid, seq, mid, qos, state))
        elif cid in sessions:
            ids = [int(i) for i in sub_ids.split(",")] if sub_ids else None
            sessions[cid].outbound.append((seq, mid, qos, retain, pid, state, ids))
    for cid, pid, topic, payload, retain, props, expires in conn.execute(
            "SELECT client_id, packet_id, topic, payload, retain, props, expires FROM inbound_qos2"):
        if cid in sessions:
            sessions[cid].inbound_qos2[pid] = StoredPublication(topic, bytes(payload), 2, bool(retain), cid,
                                                                _blob(props), expires)
    for cid, pid, key_id, redelivery, digest in conn.execute(
            "SELECT client_id, packet_id, key_id, redelivery, digest FROM inbound_qos1"):
        if cid in sessions:
            sessions[cid].inbound_qos1[pid] = (key_id, redelivery, bytes(digest))
    messages: dict[int, StoredMessage] = {}
    for mid, topic, payload, qos, retain, origin, username, key_id, redelivery, pid, props, expires, via in \
            conn.execute("SELECT id, topic, payload, qos, retain, origin, username, key_id, redelivery, packet_id, "
                         "props, expires, user_via FROM messages"):
        messages[mid] = StoredMessage(mid, topic, bytes(payload), qos, bool(retain), origin, username,
                                      key_id, redelivery, pid, _blob(props), expires, via)
    retained = {topic: StoredPublication(topic, bytes(payload), qos, True, origin, _blob(props), expires)
                for topic, payload, qos, origin, props, expires in
                conn.execute("SELECT topic, payload, qos, origin, props, expires FROM retained")}
    row = conn.execute("SELECT MAX(id) FROM messages").fetchone()
    next_id = (row[0] or 0) + 1
    # ids of messages already deleted may still be message keys (conversion log, inbound_qos1): never
    # hand them out again. The broker reserves ids in blocks (meta message_id_reserved).
    reserved = conn.execute("SELECT value FROM meta WHERE key='message_id_reserved'").fetchone()
    if reserved is not None:
        next_id = max(next_id, int(reserved[0]))
    row = conn.execute("SELECT MAX(key_id) FROM inbound_qos1").fetchone()
    next_id = max(next_id, (row[0] or 0) + 1)
    since: dict[tuple[str, str], int] = {}
    for key, value in conn.execute("SELECT key, value FROM meta WHERE substr(key, 1, ?) = ?",
                                   (len(ROUTE_SINCE), ROUTE_SINCE)):
        cid, flt = json.loads(key[len(ROUTE_SINCE):])
        since[(cid, flt)] = int(value)
    wills = [StoredWill(cid, topic, bytes(payload), qos, bool(retain), _blob(props), username, due, via)
             for cid, topic, payload, qos, retain, props, username, due, via in conn.execute(
                 "SELECT client_id, topic, payload, qos, retain, props, username, due, user_via FROM wills")
             if cid in sessions]
    return RecoveredState(sessions, messages, retained, next_id, since, wills, shared_rows)
