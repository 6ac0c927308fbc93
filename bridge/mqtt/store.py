"""Durable broker state in SQLite (WAL): sessions, subscriptions, queued and in-flight QoS 1/2
messages, inbound QoS 2 ids and retained messages — written behind by one thread in group commits.

The broker's in-memory state is authoritative while it runs; the store is a journal of it that is
read back only at start-up. Every statement on the broker's tables is written in this module: a change
is one named operation (``save_subscription``, ``delete_session``, ...) that queues a small SQL write;
the writer thread applies whatever has accumulated in one transaction and commits, then runs the
callbacks registered with ``after_commit`` on the event loop. A QoS 1/2 acknowledgement is such a callback, so
it leaves only once the message is committed, and many messages share one commit.
"""
from __future__ import annotations

import json
import logging
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from bridge.mqtt.store_state import (
    ROUTE_SINCE,
    RecoveredState,
    StoredMessage,
    StoredPublication,
    StoredSession,
    StoredWill,
    load_state,
)
from bridge.threadnames import name_this_thread

__all__ = ["QUEUED", "RELEASED", "SENT", "SCHEMA_VERSION", "RecoveredState", "Store", "StoredMessage",
           "StoredPublication", "StoredSession", "StoredWill"]

log = logging.getLogger("mqbridge.store")

SCHEMA_VERSION = 6
# 2: messages.key_id/redelivery and table inbound_qos1 (a publisher's QoS 1 re-send keeps its message key)
# 3: messages.packet_id (the publisher's MQTT message id, for RFH2 mqtt/msgid)
# 4: MQTT 5: subscriptions.options/sub_id, outbound.sub_ids, props/expires of messages, inbound_qos2, retained;
#    sessions.connected; table wills
# 5: sessions.username (ACL rules for a session whose client is away)
# 6: user_via of sessions, wills and messages: how the user name was established (bridge/mqtt/identity.py)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    client_id TEXT PRIMARY KEY,
    protocol_level INTEGER NOT NULL,
    last_seen REAL NOT NULL,          -- unix time of the last disconnect (or connect)
    expiry_seconds INTEGER NOT NULL,  -- -1: an MQTT 5 session that ends with its connection
    connected INTEGER NOT NULL DEFAULT 0,  -- 1 from CONNECT until the client left (a crash: it left then)
    username TEXT,                    -- of the last CONNECT: whose ACL rules apply while the client is away
    user_via TEXT                     -- how that name was established: password, certificate, '' (claimed)
);
CREATE TABLE IF NOT EXISTS wills (
    -- MQTT 5 wills with a Will Delay Interval, of persistent sessions: kept while the client is connected
    -- (published after a crash) and while the delay runs after it left
    client_id TEXT PRIMARY KEY,
    topic TEXT NOT NULL,
    payload BLOB NOT NULL,
    qos INTEGER NOT NULL,
    retain INTEGER NOT NULL,
    props BLOB,                       -- the Will Properties (Will Delay Interval included), encoded
    username TEXT,
    due REAL,                         -- when it is published; NULL while the client is connected
    user_via TEXT
);
CREATE TABLE IF NOT EXISTS subscriptions (
    client_id TEXT NOT NULL,
    topic_filter TEXT NOT NULL,
    qos INTEGER NOT NULL,             -- the subscription options byte: QoS, and MQTT 5 No Local, Retain As
                                      -- Published, Retain Handling (bits 2-5)
    sub_id INTEGER,                   -- MQTT 5 Subscription Identifier
    PRIMARY KEY (client_id, topic_filter)
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY,
    topic TEXT NOT NULL,
    payload BLOB NOT NULL,
    qos INTEGER NOT NULL,
    retain INTEGER NOT NULL,
    origin TEXT,
    created REAL NOT NULL,
    username TEXT,
    key_id INTEGER,                   -- a publisher's re-send stored again: the first publication's id
    redelivery INTEGER NOT NULL DEFAULT 0,  -- how many times the publisher re-sent it (DUP) before this row
    packet_id INTEGER,                -- the publisher's MQTT message id (QoS 1/2)
    props BLOB,                       -- MQTT 5 properties forwarded to subscribers (encoded, with length)
    expires REAL,                     -- MQTT 5 Message Expiry: unix time
    user_via TEXT                     -- how its username was established (MQMD UserIdentifier trusts a checked one)
);
CREATE TABLE IF NOT EXISTS outbound (
    client_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    message_id INTEGER NOT NULL,
    qos INTEGER NOT NULL,             -- delivery QoS: min(publication, subscription)
    retain INTEGER NOT NULL,
    packet_id INTEGER,                -- set once sent
    state INTEGER NOT NULL,           -- 0 queued, 1 PUBLISH sent, 2 PUBREC received (PUBREL sent)
    sub_ids TEXT,                     -- MQTT 5 Subscription Identifiers it is delivered for ("1,7")
    PRIMARY KEY (client_id, seq)
);
CREATE TABLE IF NOT EXISTS inbound_qos2 (
    client_id TEXT NOT NULL,
    packet_id INTEGER NOT NULL,
    topic TEXT NOT NULL,
    payload BLOB NOT NULL,
    retain INTEGER NOT NULL,
    props BLOB,
    expires REAL,
    PRIMARY KEY (client_id, packet_id)
);
CREATE TABLE IF NOT EXISTS inbound_qos1 (
    -- the last QoS 1 publication a persistent session published (and the broker stored) per packet id:
    -- a DUP=1 PUBLISH with that id and the same digest is the client's re-send of it (MQTT 3.1.1 §4.4)
    client_id TEXT NOT NULL,
    packet_id INTEGER NOT NULL,
    key_id INTEGER NOT NULL,          -- its message key: mqtt:<key_id>
    redelivery INTEGER NOT NULL,
    digest BLOB NOT NULL,             -- BLAKE2b-128 of topic, QoS, retain and payload
    PRIMARY KEY (client_id, packet_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS retained (
    topic TEXT PRIMARY KEY,
    payload BLOB NOT NULL,
    qos INTEGER NOT NULL,
    origin TEXT,
    updated REAL NOT NULL,
    props BLOB,
    expires REAL
);
"""

# outbound states
QUEUED = 0
SENT = 1
RELEASED = 2  # PUBREC received, PUBREL sent


# The statements of the named operations (module constants: the writer batches runs of one statement
# object through executemany)
_SAVE_SESSION = ("INSERT OR REPLACE INTO sessions (client_id, protocol_level, last_seen, expiry_seconds, connected, "
                 "username, user_via) VALUES (?, ?, ?, ?, 1, ?, ?)")
_SET_SESSION_EXPIRY = "UPDATE sessions SET last_seen=?, expiry_seconds=? WHERE client_id=?"
_TOUCH_SESSION = "UPDATE sessions SET last_seen=?, connected=0 WHERE client_id=?"
_DELETE_SESSION = tuple(f"DELETE FROM {table} WHERE client_id=?"
                        for table in ("sessions", "subscriptions", "outbound", "inbound_qos2", "inbound_qos1", "wills"))
_SAVE_WILL = ("INSERT OR REPLACE INTO wills (client_id, topic, payload, qos, retain, props, username, due, user_via) "
              "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
_WILL_DUE = "UPDATE wills SET due=? WHERE client_id=?"
_DELETE_WILL = "DELETE FROM wills WHERE client_id=?"
_SAVE_SUBSCRIPTION = "INSERT OR REPLACE INTO subscriptions (client_id, topic_filter, qos, sub_id) VALUES (?, ?, ?, ?)"
_DELETE_SUBSCRIPTION = "DELETE FROM subscriptions WHERE client_id=? AND topic_filter=?"
_RESERVE_MESSAGE_IDS = "INSERT OR REPLACE INTO meta VALUES ('message_id_reserved', ?)"
_INSERT_MESSAGE = ("INSERT INTO messages (id, topic, payload, qos, retain, origin, created, username, key_id, "
                   "redelivery, packet_id, props, expires, user_via) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
_DELETE_MESSAGE = "DELETE FROM messages WHERE id=?"
_INSERT_OUTBOUND = ("INSERT INTO outbound (client_id, seq, message_id, qos, retain, packet_id, state, sub_ids) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
_OUTBOUND_SENT = "UPDATE outbound SET packet_id=?, state=1 WHERE client_id=? AND seq=?"
_OUTBOUND_RELEASED = "UPDATE outbound SET state=2 WHERE client_id=? AND seq=?"
_DELETE_OUTBOUND = "DELETE FROM outbound WHERE client_id=? AND seq=?"
_SAVE_INBOUND_QOS2 = ("INSERT OR REPLACE INTO inbound_qos2 (client_id, packet_id, topic, payload, retain, props, "
                      "expires) VALUES (?, ?, ?, ?, ?, ?, ?)")
_DELETE_INBOUND_QOS2 = "DELETE FROM inbound_qos2 WHERE client_id=? AND packet_id=?"
_SAVE_INBOUND_QOS1 = "INSERT OR REPLACE INTO inbound_qos1 VALUES (?, ?, ?, ?, ?)"
_DELETE_INBOUND_QOS1 = "DELETE FROM inbound_qos1 WHERE client_id=? AND packet_id=?"
_SAVE_ROUTE_SINCE = "INSERT OR REPLACE INTO meta VALUES (?, ?)"
_DELETE_ROUTE_SINCE = "DELETE FROM meta WHERE key=?"
_SAVE_RETAINED = ("INSERT OR REPLACE INTO retained (topic, payload, qos, origin, updated, props, expires) "
                  "VALUES (?, ?, ?, ?, ?, ?, ?)")
_DELETE_RETAINED = "DELETE FROM retained WHERE topic=?"

_PENDING = -1   # the generation of a write still in the loop's turn (not handed to the writer)
# A queued write: [sql, params, generation]. ``sql`` None means cancelled. Mutable so that a write
# still waiting for the writer thread can be cancelled or amended (see Store.cancel / Store.amend).
Op = list[object]


class CallbackLoop(Protocol):
    """Where after-commit callbacks run (an asyncio event loop; no asyncio needed here)."""

    def call_soon_threadsafe(self, callback: Callable[..., object], *args: object) -> object: ...
    def call_soon(self, callback: Callable[..., object], *args: object) -> object: ...
    def is_closed(self) -> bool: ...


class StoreWriter:
    """SQLite journal with group commit on a writer thread: queued writes, cancel/amend, after-commit
    callbacks, and the start-up read."""

    def __init__(self, path: Path | str, *, synchronous: str = "FULL",
                 loop: CallbackLoop | None = None) -> None:
        self.path = Path(path)
        self.synchronous = synchronous.upper()
        if self.synchronous not in ("FULL", "NORMAL", "OFF", "EXTRA"):
            raise ValueError(f"synchronous must be FULL, NORMAL, EXTRA or OFF, not {synchronous!r}")
        self._loop = loop
        self._lock = threading.Condition()
        self._ops: list[Op] = []
        self._gen = 0            # bumped each time the writer takes the queued ops
        self.cancelled = 0
        self._callbacks: list[Callable[[], None]] = []
        self._pending: list[Callable[[], None]] = []   # after_commit on the loop's thread, this turn
        self._pending_ops: list[Op] = []   # writes on the loop's thread, this turn (generation _PENDING)
        self._handing_over = False         # _hand_over is scheduled for the end of this turn
        self._loop_thread: int | None = None
        self._closing = False
        self._thread: threading.Thread | None = None
        self._conn: sqlite3.Connection | None = None
        self.commits = 0
        self.ops_written = 0
        self.last_commit_seconds = 0.0
        self.failed: BaseException | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    def open(self) -> RecoveredState:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self.synchronous}")
        conn.executescript(_SCHEMA)
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None:
            conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        elif int(row[0]) > SCHEMA_VERSION:
            conn.close()
            raise RuntimeError(f"store {self.path} has schema {row[0]}, newer than this mqbridge "
                               f"({SCHEMA_VERSION})")
        elif int(row[0]) < SCHEMA_VERSION:
            _migrate(conn, int(row[0]))
        self._conn = conn
        state = load_state(conn)
        return state

    def start(self, loop: CallbackLoop) -> None:
        self._loop = loop
        self._loop_thread = threading.get_ident()
        self._thread = threading.Thread(target=self._run, name="mqbridge-store", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Flush everything queued, commit, stop the writer thread and close the database."""
        self._hand_over()
        with self._lock:
            self._closing = True
            self._lock.notify()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        else:
            self._flush_sync()
        if self._conn is not None:
            try:
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error:
                pass
            self._conn.close()
            self._conn = None

    # -- writing --------------------------------------------------------------------------------

    def write(self, sql: str, params: tuple[object, ...] = ()) -> Op:
        """Queue one statement; returns a handle for ``cancel``/``amend``. On the loop's thread the writes of one
        loop turn reach the writer together at its end, with the turn's after-commit callbacks (``_hand_over``):
        a writer woken at the first write of a turn could take it as soon as the loop gave up the GIL, before the
        turn could cancel it (a delivery acknowledged in the same turn), and it took one lock and one wake-up per
        write (bench/HISTORY.md session 19: QoS 1 on the compact transport under uvloop 1.31x)."""
        if self._loop_thread == threading.get_ident():
            op: Op = [sql, params, _PENDING]
            self._pending_ops.append(op)
            if not self._handing_over:
                self._handing_over = True
                self._loop.call_soon(self._hand_over)  # type: ignore[union-attr]
            return op
        with self._lock:
            op = [sql, params, self._gen]
            self._ops.append(op)
            self._lock.notify()
            return op

    def cancel(self, op: Op | None) -> bool:
        """Withdraw a write the writer has not taken yet (an insert whose row is already obsolete,
        e.g. a delivery acknowledged within the same commit window). False: it is (being) written."""
        if op is None:
            return False
        with self._lock:
            if (op[2] == self._gen or op[2] == _PENDING) and op[0] is not None:
                op[0] = None
                self.cancelled += 1
                return True
            return False

    def amend(self, op: Op | None, params: tuple[object, ...]) -> bool:
        """Replace the parameters of a write not taken yet (instead of queueing an UPDATE)."""
        if op is None:
            return False
        with self._lock:
            if (op[2] == self._gen or op[2] == _PENDING) and op[0] is not None:
                op[1] = params
                return True
            return False

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` on the event loop once every write queued so far is committed. On the loop's thread
        the callbacks of one loop turn are handed to the writer together at the end of the turn (one lock
        and one wake-up instead of one per acknowledgement): every write they wait for was queued by then."""
        if self._loop_thread == threading.get_ident():
            self._pending.append(callback)
            if not self._handing_over:
                self._handing_over = True
                self._loop.call_soon(self._hand_over)  # type: ignore[union-attr]
            return
        with self._lock:
            self._callbacks.append(callback)
            self._lock.notify()

    def _hand_over(self) -> None:
        self._handing_over = False
        pending, ops = self._pending, self._pending_ops
        if pending or ops:
            self._pending, self._pending_ops = [], []
            with self._lock:
                if ops:
                    gen = self._gen
                    for op in ops:
                        op[2] = gen
                    self._ops.extend(ops)
                self._callbacks.extend(pending)
                self._lock.notify()

    def _run(self) -> None:
        name_this_thread()
        while True:
            with self._lock:
                while not self._ops and not self._callbacks and not self._closing:
                    self._lock.wait()
                ops, self._ops = self._ops, []
                self._gen += 1
                callbacks, self._callbacks = self._callbacks, []
                closing = self._closing
            if ops:
                try:
                    self._apply(ops)
                except BaseException as exc:  # the store is broken: stop acknowledging
                    log.critical("store commit failed, no further acknowledgements: %s", exc)
                    self.failed = exc
                    return
            if callbacks and self._loop is not None and not self._loop.is_closed():
                try:
                    self._loop.call_soon_threadsafe(_run_all, callbacks)
                except RuntimeError:
                    pass
            if closing:
                with self._lock:
                    if not self._ops:
                        return

    def _apply(self, ops: list[Op]) -> None:
        conn = self._conn
        assert conn is not None
        t0 = time.perf_counter()
        written = 0
        conn.execute("BEGIN")
        try:
            for sql, rows in table_runs(ops):   # each run in as few statements as possible (_run_many)
                _run_many(conn, sql, rows)
                written += len(rows)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        self.commits += 1
        self.ops_written += written
        self.last_commit_seconds = time.perf_counter() - t0

    def _flush_sync(self) -> None:
        with self._lock:
            ops, self._ops = self._ops, []
            self._gen += 1
            callbacks, self._callbacks = self._callbacks, []
        if ops and self._conn is not None:
            self._apply(ops)
        for cb in callbacks:
            cb()

class Store(StoreWriter):
    """The broker's store: one named operation per change to the broker's tables (every statement the
    broker writes is one of these; ``write`` stays for tests and tools)."""

    def save_session(self, client_id: str, level: int, last_seen: float, expiry_seconds: int,
                     username: str | None = None, user_via: str | None = None) -> Op:
        return self.write(_SAVE_SESSION, (client_id, level, last_seen, expiry_seconds, username, user_via))

    def set_session_expiry(self, client_id: str, last_seen: float, expiry_seconds: int) -> Op:
        return self.write(_SET_SESSION_EXPIRY, (last_seen, expiry_seconds, client_id))

    def touch_session(self, client_id: str, last_seen: float) -> Op:
        return self.write(_TOUCH_SESSION, (last_seen, client_id))

    def delete_session(self, client_id: str) -> None:
        """The session row and everything it owns (subscriptions, deliveries, inbound QoS 1/2 state)."""
        for sql in _DELETE_SESSION:
            self.write(sql, (client_id,))

    def save_will(self, will: StoredWill) -> Op:
        return self.write(_SAVE_WILL, (will.client_id, will.topic, will.payload, will.qos, int(will.retain),
                                       will.props, will.username, will.due, will.user_via))

    def set_will_due(self, client_id: str, due: float) -> Op:
        return self.write(_WILL_DUE, (due, client_id))

    def delete_will(self, client_id: str) -> Op:
        return self.write(_DELETE_WILL, (client_id,))

    def save_subscription(self, client_id: str, topic_filter: str, options: int, sub_id: int | None = None) -> Op:
        return self.write(_SAVE_SUBSCRIPTION, (client_id, topic_filter, options, sub_id))

    def delete_subscription(self, client_id: str, topic_filter: str) -> Op:
        return self.write(_DELETE_SUBSCRIPTION, (client_id, topic_filter))

    def reserve_message_ids(self, below: int) -> Op:
        """Message ids below ``below`` may be in use: never hand them out again after a restart."""
        return self.write(_RESERVE_MESSAGE_IDS, (str(below),))

    def insert_message(self, mid: int, topic: str, payload: bytes, qos: int, retain: bool, origin: str | None,
                       created: float, username: str | None, key_id: int | None, redelivery: int,
                       packet_id: int | None = None, props: bytes | None = None, expires: float | None = None,
                       user_via: str | None = None) -> Op:
        params = (mid, topic, payload, qos, int(retain), origin, created, username, key_id, redelivery, packet_id,
                  props, expires, user_via)
        return self.write(_INSERT_MESSAGE, params)

    def delete_message(self, mid: int | None) -> Op:
        return self.write(_DELETE_MESSAGE, (mid,))

    def insert_outbound(self, row: tuple[object, ...]) -> Op:
        """``row``: (client_id, seq, message_id, qos, retain, packet_id, state, sub_ids), as ``amend`` takes it."""
        return self.write(_INSERT_OUTBOUND, row)

    def mark_outbound_sent(self, client_id: str, seq: int, packet_id: int) -> Op:
        return self.write(_OUTBOUND_SENT, (packet_id, client_id, seq))

    def mark_outbound_released(self, client_id: str, seq: int) -> Op:
        return self.write(_OUTBOUND_RELEASED, (client_id, seq))

    def delete_outbound(self, client_id: str, seq: int) -> Op:
        return self.write(_DELETE_OUTBOUND, (client_id, seq))

    def save_inbound_qos2(self, client_id: str, packet_id: int, topic: str, payload: bytes, retain: bool,
                          props: bytes | None = None, expires: float | None = None) -> Op:
        return self.write(_SAVE_INBOUND_QOS2, (client_id, packet_id, topic, payload, int(retain), props, expires))

    def delete_inbound_qos2(self, client_id: str, packet_id: int) -> Op:
        return self.write(_DELETE_INBOUND_QOS2, (client_id, packet_id))

    def save_inbound_qos1(self, client_id: str, packet_id: int, key_id: int, redelivery: int, digest: bytes) -> Op:
        return self.write(_SAVE_INBOUND_QOS1, (client_id, packet_id, key_id, redelivery, digest))

    def delete_inbound_qos1(self, client_id: str, packet_id: int) -> Op:
        return self.write(_DELETE_INBOUND_QOS1, (client_id, packet_id))

    def save_route_since(self, client_id: str, topic_filter: str, first_id: int) -> Op:
        """A route session subscribed to ``topic_filter``: messages from id ``first_id`` on reached it."""
        return self.write(_SAVE_ROUTE_SINCE, (_since_key(client_id, topic_filter), str(first_id)))

    def delete_route_since(self, client_id: str, topic_filter: str) -> Op:
        return self.write(_DELETE_ROUTE_SINCE, (_since_key(client_id, topic_filter),))

    def save_retained(self, topic: str, payload: bytes, qos: int, origin: str | None, updated: float,
                      props: bytes | None = None, expires: float | None = None) -> Op:
        return self.write(_SAVE_RETAINED, (topic, payload, qos, origin, updated, props, expires))

    def delete_retained(self, topic: str) -> Op:
        return self.write(_DELETE_RETAINED, (topic,))


def _since_key(client_id: str, topic_filter: str) -> str:
    return ROUTE_SINCE + json.dumps([client_id, topic_filter])


# columns added to existing tables since schema 1: (table, column, declaration)
_ADDED_COLUMNS = (
    ("messages", "username", "TEXT"), ("messages", "key_id", "INTEGER"),
    ("messages", "redelivery", "INTEGER NOT NULL DEFAULT 0"), ("messages", "packet_id", "INTEGER"),
    ("messages", "props", "BLOB"), ("messages", "expires", "REAL"), ("subscriptions", "sub_id", "INTEGER"),
    ("outbound", "sub_ids", "TEXT"), ("inbound_qos2", "props", "BLOB"), ("inbound_qos2", "expires", "REAL"),
    ("retained", "props", "BLOB"), ("retained", "expires", "REAL"),
    ("sessions", "connected", "INTEGER NOT NULL DEFAULT 0"), ("sessions", "username", "TEXT"),
    ("sessions", "user_via", "TEXT"), ("wills", "user_via", "TEXT"), ("messages", "user_via", "TEXT"),
)


def _migrate(conn: sqlite3.Connection, version: int) -> None:
    """Bring a store written by an older mqbridge to SCHEMA_VERSION (new tables exist already: the
    schema script creates what is missing; columns added to existing tables are added here)."""
    conn.execute("BEGIN")
    try:
        for table, column, declaration in _ADDED_COLUMNS:
            if column not in {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
        conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    log.info("store: schema %d migrated to %d", version, SCHEMA_VERSION)


_TABLE_OF = re.compile(r"^(?:INSERT (?:OR REPLACE )?INTO|UPDATE|DELETE FROM) (\w+) ")
_TABLES: dict[str, str] = {}


def table_runs(ops: Sequence[Op]) -> list[tuple[str, list[Sequence[object]]]]:
    """A group commit's writes as runs of one statement, table by table, each table's writes in the order they
    were queued (cancelled ones left out). Every statement here touches one table, and the schema has no
    triggers or foreign keys, so writes to different tables commute within the transaction; only one table's
    own order matters. Grouped, a QoS 1 message's alternating message and delivery rows become two multi-row
    INSERTs per batch instead of one statement per row (bench/HISTORY.md, durable paths, session 19)."""
    by_table: dict[str, list[tuple[str, list[Sequence[object]]]]] = {}
    tables = _TABLES
    for sql, params, _ in ops:
        if sql is None:
            continue
        table = tables.get(sql)   # type: ignore[call-overload]
        if table is None:
            match = _TABLE_OF.match(sql)   # type: ignore[arg-type]
            if match is None:
                raise ValueError(f"not a one-table write: {sql!r}")
            table = tables[sql] = match.group(1)   # type: ignore[index]
        runs = by_table.get(table)
        if runs is None:
            by_table[table] = [(sql, [params])]   # type: ignore[list-item]
        else:
            last_sql, rows = runs[-1]
            if last_sql is sql or last_sql == sql:
                rows.append(params)   # type: ignore[arg-type]
            else:
                runs.append((sql, [params]))   # type: ignore[arg-type]
    return [run for runs in by_table.values() for run in runs]


_ROWS_PER_STATEMENT = 64
_INSERT_FORM = re.compile(r"^(INSERT (?:OR REPLACE )?INTO .*VALUES )(\((?:\?, )*\?\))$", re.S)
_DELETE_FORM = re.compile(r"^(DELETE FROM \w+ WHERE )(?:(client_id)=\? AND )?(\w+)=\?$")
_MANY: dict[str, Callable[[sqlite3.Connection, list[Sequence[object]]], None] | None] = {}


def _run_many(conn: sqlite3.Connection, sql: str, rows: list[Sequence[object]]) -> None:
    """Run one statement for many rows in as few SQLite statements as possible: an INSERT as multi-row VALUES
    (chunks of 1, 2, 4, ... 64 rows: a few cached statements), a DELETE by key as ``IN (json_each(?))``.
    executemany would give up and take back the GIL for every row; on this writer thread each take waits for
    the busy event loop's switch interval (bridge/connectors/embedded.py put_many has the figures)."""
    if len(rows) == 1:
        conn.execute(sql, rows[0])
        return
    many = _MANY.get(sql, _run_many)
    if many is _run_many:
        many = _MANY[sql] = _many_form(sql)
    if many is None:
        conn.executemany(sql, rows)
    else:
        many(conn, rows)  # type: ignore[operator]


def _many_form(sql: str) -> Callable[[sqlite3.Connection, list[Sequence[object]]], None] | None:
    m = _INSERT_FORM.match(sql)
    if m is not None:
        head, values = m.groups()

        def insert(conn: sqlite3.Connection, rows: list[Sequence[object]]) -> None:
            i = 0
            while i < len(rows):
                n = min(_ROWS_PER_STATEMENT, 1 << (len(rows) - i).bit_length() - 1)
                conn.execute(head + ",".join((values,) * n), [v for row in rows[i:i + n] for v in row])
                i += n
        return insert
    m = _DELETE_FORM.match(sql)
    if m is not None:
        head, owner, key = m.groups()
        if owner is None:
            single = f"{head}{key} IN (SELECT value FROM json_each(?))"

            def delete_keys(conn: sqlite3.Connection, rows: list[Sequence[object]]) -> None:
                conn.execute(single, (json.dumps([r[0] for r in rows]),))
            return delete_keys
        owned = f"{head}client_id=? AND {key} IN (SELECT value FROM json_each(?))"

        def delete(conn: sqlite3.Connection, rows: list[Sequence[object]]) -> None:
            keys: dict[object, list[object]] = {}
            for client_id, value in rows:
                keys.setdefault(client_id, []).append(value)
            for client_id, values in keys.items():
                conn.execute(owned, (client_id, json.dumps(values)))
        return delete
    return None


def _run_all(callbacks: list[Callable[[], None]]) -> None:
    for cb in callbacks:
        try:
            cb()
        except Exception:  # one failing callback must not starve the others
            log.exception("after-commit callback failed")
