"""The SQLite journal: callbacks run only after what preceded them is committed; state reloads."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from bridge.mqtt.store import SCHEMA_VERSION, Store, StoredPublication


def test_after_commit_sees_committed_rows(tmp_path: Path) -> None:
    async def scenario() -> list[int]:
        store = Store(tmp_path / "s.db")
        store.open()
        store.start(asyncio.get_running_loop())
        seen: list[int] = []
        done = asyncio.Event()
        for i in range(200):
            store.write("INSERT INTO retained (topic, payload, qos, origin, updated) VALUES (?, ?, 0, NULL, 0)",
                        (f"t/{i}", b"x"))
            if i % 50 == 49:
                expected = i + 1

                def check(expected: int = expected) -> None:
                    # another connection sees the rows: they are committed, not just written
                    with sqlite3.connect(tmp_path / "s.db") as other:
                        n = other.execute("SELECT COUNT(*) FROM retained").fetchone()[0]
                    assert n >= expected
                    seen.append(n)
                    if len(seen) == 4:
                        done.set()

                store.after_commit(check)
        await asyncio.wait_for(done.wait(), 10)
        store.close()
        return seen

    seen = asyncio.run(scenario())
    assert len(seen) == 4 and seen == sorted(seen)
    assert seen[-1] == 200


def test_group_commit_batches_writes(tmp_path: Path) -> None:
    async def scenario() -> tuple[int, int]:
        store = Store(tmp_path / "s.db")
        store.open()
        store.start(asyncio.get_running_loop())
        done = asyncio.Event()
        for i in range(5000):
            store.write("INSERT INTO retained (topic, payload, qos, origin, updated) VALUES (?, ?, 0, NULL, 0)",
                        (f"t/{i}", b"x"))
        store.after_commit(done.set)
        await asyncio.wait_for(done.wait(), 10)
        store.close()
        return store.commits, store.ops_written

    commits, ops = asyncio.run(scenario())
    assert ops == 5000
    assert commits < 50, f"{commits} commits for 5000 writes queued at once: not grouped"


def test_close_flushes_and_reload_recovers(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    store.open()
    store.write("INSERT INTO sessions (client_id, protocol_level, last_seen, expiry_seconds) "
                "VALUES ('c1', 4, 1.0, 3600)")
    store.write("INSERT INTO subscriptions (client_id, topic_filter, qos) VALUES ('c1', 'a/#', 2)")
    store.write("INSERT INTO messages (id, topic, payload, qos, retain, origin, created, username) "
                "VALUES (7, 'a/b', x'00ff', 2, 0, 'p', 1.0, 'u')")
    store.write("INSERT INTO outbound (client_id, seq, message_id, qos, retain, packet_id, state) "
                "VALUES ('c1', 3, 7, 2, 0, 12, 2)")
    store.write("INSERT INTO inbound_qos2 (client_id, packet_id, topic, payload, retain) "
                "VALUES ('c1', 5, 'x/y', x'01', 1)")
    store.write("INSERT INTO retained (topic, payload, qos, origin, updated) VALUES ('r', x'02', 1, 'p', 1.0)")
    store.close()  # never started: close applies what is queued synchronously

    again = Store(tmp_path / "s.db")
    state = again.open()
    again.close()
    s = state.sessions["c1"]
    assert s.subscriptions == {"a/#": 2}
    assert s.outbound == [(3, 7, 2, 0, 12, 2, None)]
    assert s.inbound_qos2 == {5: StoredPublication("x/y", b"\x01", 2, True, "c1")}
    assert state.messages[7].payload == b"\x00\xff"
    assert state.retained == {"r": StoredPublication("r", b"\x02", 1, True, "p")}
    assert state.next_message_id == 8


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    store.open()
    store.close()
    with sqlite3.connect(tmp_path / "s.db") as conn:
        conn.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    try:
        Store(tmp_path / "s.db").open()
    except RuntimeError as exc:
        assert "newer" in str(exc)
    else:
        raise AssertionError("a newer schema was accepted")


def test_schema_3_store_is_migrated_to_the_current_one_keeping_every_row(tmp_path: Path) -> None:
    """A store of mqbridge before MQTT 5: its rows come back, the MQTT 5 columns and the user name empty."""
    db = tmp_path / "v3.db"
    with sqlite3.connect(db) as conn:
        conn.executescript("""
            CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
            INSERT INTO meta VALUES ('schema_version', '3');
            CREATE TABLE sessions (client_id TEXT PRIMARY KEY, protocol_level INTEGER NOT NULL,
                last_seen REAL NOT NULL, expiry_seconds INTEGER NOT NULL);
            CREATE TABLE subscriptions (client_id TEXT NOT NULL, topic_filter TEXT NOT NULL, qos INTEGER NOT NULL,
                PRIMARY KEY (client_id, topic_filter));
            CREATE TABLE messages (id INTEGER PRIMARY KEY, topic TEXT NOT NULL, payload BLOB NOT NULL,
                qos INTEGER NOT NULL, retain INTEGER NOT NULL, origin TEXT, created REAL NOT NULL, username TEXT,
                key_id INTEGER, redelivery INTEGER NOT NULL DEFAULT 0, packet_id INTEGER);
            CREATE TABLE outbound (client_id TEXT NOT NULL, seq INTEGER NOT NULL, message_id INTEGER NOT NULL,
                qos INTEGER NOT NULL, retain INTEGER NOT NULL, packet_id INTEGER, state INTEGER NOT NULL,
                PRIMARY KEY (client_id, seq));
            CREATE TABLE inbound_qos2 (client_id TEXT NOT NULL, packet_id INTEGER NOT NULL, topic TEXT NOT NULL,
                payload BLOB NOT NULL, retain INTEGER NOT NULL, PRIMARY KEY (client_id, packet_id));
            CREATE TABLE retained (topic TEXT PRIMARY KEY, payload BLOB NOT NULL, qos INTEGER NOT NULL, origin TEXT,
                updated REAL NOT NULL);
            INSERT INTO sessions VALUES ('c1', 4, 5.0, 3600);
            INSERT INTO subscriptions VALUES ('c1', 'a/#', 1);
            INSERT INTO messages VALUES (3, 'a/b', x'01', 1, 0, 'p', 1.0, NULL, NULL, 0, 7);
            INSERT INTO outbound VALUES ('c1', 1, 3, 1, 0, NULL, 0);
            INSERT INTO inbound_qos2 VALUES ('c1', 9, 'x', x'02', 0);
            INSERT INTO retained VALUES ('r', x'03', 1, 'p', 1.0);
        """)
    store = Store(db)
    state = store.open()
    store.close()
    s = state.sessions["c1"]
    assert (s.last_seen, s.expiry_seconds, s.connected, s.username, s.user_via) == (5.0, 3600, False, None, None)
    assert s.subscriptions == {"a/#": 1} and s.subscription_ids == {}
    assert s.outbound == [(1, 3, 1, 0, None, 0, None)]
    assert s.inbound_qos2 == {9: StoredPublication("x", b"\x02", 2, False, "c1")}
    assert (state.messages[3].packet_id, state.messages[3].props, state.messages[3].expires) == (7, None, None)
    assert state.retained == {"r": StoredPublication("r", b"\x03", 1, True, "p")}
    assert state.wills == []
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)


def test_runs_of_one_statement_are_written_as_executemany_would(tmp_path: Path) -> None:
    """The writer puts runs of INSERTs as multi-row statements and runs of DELETEs by key as one statement
    (chunks of 1, 2, 4, ... rows): the tables end as row-by-row statements would leave them, with REPLACE
    taking the last row of a key, deletes per owner, and 1 to 300 rows per run."""
    store = Store(tmp_path / "s.db")
    store.open()
    for n in (1, 2, 3, 64, 65, 300):
        for i in range(n):
            store.save_inbound_qos1(f"c{n}", i % 50, i, 0, b"d%d" % i)   # keys repeat beyond 50: the last wins
        for i in range(n):
            store.insert_outbound((f"c{n}", i, i, 1, 0, None, 0, None))
        for i in range(0, n, 3):
            store.delete_outbound(f"c{n}", i)
        store.delete_inbound_qos1(f"c{n}", 1)
        store.delete_inbound_qos1("other", 0)      # another owner's key: nothing of c<n> goes
    store.close()
    with sqlite3.connect(tmp_path / "s.db") as db:
        for n in (1, 2, 3, 64, 65, 300):
            inbound = dict(db.execute("SELECT packet_id, key_id FROM inbound_qos1 WHERE client_id=?", (f"c{n}",)))
            last = {i % 50: i for i in range(n)}
            last.pop(1, None)
            assert inbound == last
            seqs = [r[0] for r in db.execute("SELECT seq FROM outbound WHERE client_id=? ORDER BY seq", (f"c{n}",))]
            assert seqs == [i for i in range(n) if i % 3]
