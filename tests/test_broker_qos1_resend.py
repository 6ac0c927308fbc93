"""A publisher's QoS 1 re-send keeps its message key (issue #4: duplicates on recovery are logged with the
same message key). MQTT 3.1.1 §4.4: a client with a persistent session re-sends an unacknowledged
PUBLISH after reconnecting, with DUP=1 and the same packet identifier. When its PUBACK was lost (the
connection dropped, or the gateway was SIGKILLed after the commit), the broker recognises the re-send
and routes it again under the first publication's key with redelivery count 1 (an allowed duplicate for
the audit) — also while the first is still pending, because a new use of the packet id with the same
content whose DUP=0 transmission was lost looks the same and must not be swallowed. Anything else (other
payload, DUP=0, a clean session) is a new publication with a new key.

Real gateway processes (default rules: route ``mqtt-to-mq`` from ``mq/#`` to the embedded queue
MQTT.IN, conversion log on), raw-socket MQTT clients, the real SQLite queue store.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from bridge.app import STORE_FILE
from bridge.connectors.embedded import QueueStore, default_path
from bridge.convlog import log_files
from bridge.mqtt import packets as P
from bridge.mqtt.store import SCHEMA_VERSION, Store
from mappings.mq.message import decode_message
from tests.support.gateway import GatewayProcess, wait_for
from tests.support.mqtt_clients import RawClient

ROUTE = "mqtt-to-mq"


def _records(gw: GatewayProcess) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for f in log_files(gw.data_dir / "convlog"):
        out.extend(json.loads(line) for line in f.read_text().splitlines() if line)
    return [r for r in out if r["route"] == ROUTE]


def _bodies(gw: GatewayProcess) -> list[bytes]:
    store = QueueStore(default_path(gw.data_dir)).open()
    try:
        return [decode_message(m.data).body for m in store.browse("MQTT.IN", limit=100_000)]
    finally:
        store.close()


def _moved(gw: GatewayProcess) -> int:
    routes = gw.admin("/status")[1].get("routes", [])
    return sum(int(r["moved"]) for r in routes if r["route"] == ROUTE)


def _messages(gw: GatewayProcess) -> dict[str, int]:
    status: dict[str, int] = gw.admin("/status")[1]["messages"]
    return status


def _connect(gw: GatewayProcess, cid: str, clean: bool = False) -> RawClient:
    raw = RawClient(gw.port)
    raw.connect(cid, clean=clean)
    return raw


def _publish(raw: RawClient, topic: str, payload: bytes, pid: int, dup: bool = False) -> None:
    """A QoS 1 PUBLISH, and its PUBACK (which comes only once the broker has it durable)."""
    raw.publish(topic, payload, qos=1, packet_id=pid, dup=dup)
    ack = raw.recv()
    assert isinstance(ack, P.PacketIdOnly) and ack.type == P.PUBACK and ack.packet_id == pid, ack


def _pair(recs: list[dict[str, Any]], topic: str) -> list[tuple[str, str, int]]:
    """(direction, message key, redelivery count) of the records of the publications to ``topic``."""
    keys = {r["message_key"] for r in recs if r["direction"] == "ingress" and r["destination"] == topic}
    return sorted((r["direction"], r["message_key"], r["redelivery_count"]) for r in recs
                  if r["message_key"] in keys)


def _wait_records(gw: GatewayProcess, n: int) -> list[dict[str, Any]]:
    return wait_for(lambda: len(recs := _records(gw)) >= n and recs, 10, what=f"{n} conversion log records")


def test_resend_after_delivery_is_routed_again_under_the_same_key(gateway: GatewayProcess) -> None:
    gw = gateway
    pub = _connect(gw, "resender")
    _publish(pub, "mq/dup/a", b"once", 7)
    wait_for(lambda: _moved(gw) == 1, 10, what="the route to deliver and confirm the publication")
    pub.close()   # as if the PUBACK had been lost: the client re-sends after reconnecting
    pub = _connect(gw, "resender")
    _publish(pub, "mq/dup/a", b"once", 7, dup=True)
    wait_for(lambda: _moved(gw) == 2, 10, what="the re-send to be routed again")
    assert _bodies(gw) == [b"once", b"once"]
    recs = _wait_records(gw, 4)
    pairs = _pair(recs, "mq/dup/a")
    assert len(pairs) == 4, recs
    assert len({key for _, key, _ in pairs}) == 1, pairs          # one message, delivered twice
    assert [(d, n) for d, _, n in pairs] == [("egress", 0), ("egress", 1), ("ingress", 0), ("ingress", 1)]
    assert _messages(gw)["resends"] == 1
    pub.close()


def test_resend_while_first_still_pending_is_routed_again_not_swallowed(gateway: GatewayProcess) -> None:
    gw = gateway
    # a persistent subscriber that goes away: it keeps the publication pending in its session
    sub = _connect(gw, "holder")
    sub.subscribe("mq/held/#", qos=1)
    sub.close()
    pub = _connect(gw, "resender2")
    _publish(pub, "mq/held/x", b"held", 9)
    wait_for(lambda: _moved(gw) == 1, 10, what="the route to deliver the publication")
    pub.close()
    pub = _connect(gw, "resender2")
    # a re-send, or a new use of id 9 with the same content whose DUP=0 transmission was lost: the broker
    # cannot tell them apart, so it routes it again (at most one copy more), under the first key
    _publish(pub, "mq/held/x", b"held", 9, dup=True)
    _publish(pub, "mq/held/m", b"marker", 10)
    wait_for(lambda: _moved(gw) == 3, 10, what="the re-send and the marker to be routed")
    assert _bodies(gw) == [b"held", b"held", b"marker"]
    assert _messages(gw)["resends"] == 1
    # the subscriber that held the first gets the copy too, then the marker
    sub = _connect(gw, "holder")
    got = sub.receive_until(lambda p: p.payload == b"marker")
    assert [p.payload for p in got] == [b"held", b"held", b"marker"]
    recs = _wait_records(gw, 6)
    held = _pair(recs, "mq/held/x")
    assert len({key for _, key, _ in held}) == 1, held      # one message, delivered twice
    assert [(d, n) for d, _, n in held] == [("egress", 0), ("egress", 1), ("ingress", 0), ("ingress", 1)]
    assert _pair(recs, "mq/held/m")[0][1] != held[0][1]
    sub.close()
    pub.close()


def test_resend_across_sigkill_keeps_its_key(gateway: GatewayProcess) -> None:
    gw = gateway
    sub = _connect(gw, "holder3")
    sub.subscribe("mq/held/#", qos=1)
    sub.close()
    pub = _connect(gw, "crasher")
    _publish(pub, "mq/free/a", b"free", 5)
    _publish(pub, "mq/held/b", b"held", 6)
    wait_for(lambda: _moved(gw) == 2, 10, what="the route to deliver both")
    before = _wait_records(gw, 4)   # flushed to the log before the kill (a SIGKILL loses the last 0.5 s)
    free_key = _pair(before, "mq/free/a")[0][1]
    held_key = _pair(before, "mq/held/b")[0][1]
    pub.close()
    gw.kill()
    gw.start()
    pub = _connect(gw, "crasher")
    _publish(pub, "mq/free/a", b"free", 5, dup=True)    # delivered everywhere before the kill
    _publish(pub, "mq/held/b", b"held", 6, dup=True)    # still pending for holder3
    _publish(pub, "mq/free/m", b"marker", 7)
    wait_for(lambda: _moved(gw) == 3, 10, what="the re-sends and the marker after the restart")
    assert _bodies(gw) == [b"free", b"held", b"free", b"held", b"marker"]
    assert _messages(gw)["resends"] == 2
    recs = _wait_records(gw, 10)
    for topic, key in (("mq/free/a", free_key), ("mq/held/b", held_key)):
        pairs = _pair(recs, topic)
        assert {k for _, k, _ in pairs} == {key}, pairs
        assert [(d, n) for d, _, n in pairs] == [("egress", 0), ("egress", 1), ("ingress", 0), ("ingress", 1)]
    marker_key = _pair(recs, "mq/free/m")[0][1]
    assert marker_key not in (free_key, held_key)   # ids are not handed out again after a restart
    sub = _connect(gw, "holder3")
    got = sub.receive_until(lambda p: p.payload == b"held", timeout=10)
    got += sub.receive_until(lambda p: p.payload == b"held", timeout=10)
    assert [p.payload for p in got] == [b"held", b"held"]
    sub.close()
    pub.close()


def test_other_publications_with_the_same_packet_id_are_new(gateway: GatewayProcess) -> None:
    gw = gateway
    pub = _connect(gw, "reuser")
    _publish(pub, "mq/new/a", b"first", 3)
    wait_for(lambda: _moved(gw) == 1, 10, what="the first publication routed")
    pub.close()
    pub = _connect(gw, "reuser")
    _publish(pub, "mq/new/a", b"second", 3, dup=True)   # DUP=1, other payload: not a re-send
    _publish(pub, "mq/new/a", b"second", 3)             # DUP=0, same id and content: a new use of the id
    pub.close()
    # a clean session cannot re-send after a reconnect: its DUP=1 publication is new
    clean = _connect(gw, "cleanpub", clean=True)
    _publish(clean, "mq/new/a", b"third", 4)
    clean.close()
    clean = _connect(gw, "cleanpub", clean=True)
    _publish(clean, "mq/new/a", b"third", 4, dup=True)
    clean.close()
    wait_for(lambda: _moved(gw) == 5, 10, what="all five publications routed")
    assert _bodies(gw) == [b"first", b"second", b"second", b"third", b"third"]
    recs = _wait_records(gw, 10)
    pairs = _pair(recs, "mq/new/a")
    assert len(pairs) == 10 and len({key for _, key, _ in pairs}) == 5, pairs
    assert {n for _, _, n in pairs} == {0}
    assert _messages(gw)["resends"] == 0


def test_session_end_drops_its_resend_index(gateway: GatewayProcess) -> None:
    gw = gateway
    pub = _connect(gw, "ender")
    _publish(pub, "mq/end/a", b"x", 11)
    pub.close()
    db = gw.data_dir / STORE_FILE
    assert db.exists(), list(gw.data_dir.iterdir())

    def rows() -> int:
        with sqlite3.connect(db) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM inbound_qos1 WHERE client_id='ender'").fetchone()[0])

    wait_for(lambda: rows() == 1, 10, what="the index row")
    # a clean-session connect ends the persistent session: its index goes with it
    _connect(gw, "ender", clean=True).close()
    wait_for(lambda: rows() == 0, 10, what="the index row to be dropped with the session")


def test_version_1_store_is_migrated(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    with sqlite3.connect(db) as conn:   # the messages table of schema 1 (before the user name column)
        conn.executescript(
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
            "INSERT INTO meta VALUES ('schema_version', '1');"
            "CREATE TABLE messages (id INTEGER PRIMARY KEY, topic TEXT NOT NULL, payload BLOB NOT NULL,"
            " qos INTEGER NOT NULL, retain INTEGER NOT NULL, origin TEXT, created REAL NOT NULL);"
            "INSERT INTO messages VALUES (41, 't', x'01', 1, 0, 'c', 1.0);")
    store = Store(db)
    state = store.open()
    store.close()
    assert state.messages[41].key_id is None and state.messages[41].redelivery == 0
    assert state.next_message_id == 42
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
        cols = {r[1] for r in conn.execute("PRAGMA table_info(messages)")}
        assert {"username", "key_id", "redelivery"} <= cols
        assert conn.execute("SELECT COUNT(*) FROM inbound_qos1").fetchone()[0] == 0


def test_message_keys_are_not_reused_after_a_restart(gateway: GatewayProcess) -> None:
    """Every delivery finished, the messages table is empty at the restart: the next publication must not
    get an id (a message key) that a logged message, or a re-send index row, already has."""
    gw = gateway
    pub = _connect(gw, "keys", clean=True)
    _publish(pub, "mq/keys/a", b"before", 1)
    pub.close()
    wait_for(lambda: _moved(gw) == 1, 10, what="the first publication routed")
    before = _pair(_wait_records(gw, 2), "mq/keys/a")[0][1]
    assert gw.stop() == 0
    gw.start()
    pub = _connect(gw, "keys", clean=True)
    _publish(pub, "mq/keys/b", b"after", 1)
    pub.close()
    after = _pair(_wait_records(gw, 4), "mq/keys/b")[0][1]
    assert before.startswith("mqtt:") and after.startswith("mqtt:") and after != before
