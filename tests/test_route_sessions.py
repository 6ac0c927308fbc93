"""Retired route sessions in process, on a real SQLite store (the gateway-level behaviour is in
tests/test_reload_route_sessions.py): which subscriptions a retired session's deliveries go to, what the
store holds afterwards, a QoS 2 delivery the route already had, and a subscription's since across a
restart."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from bridge.config import BrokerConfig
from bridge.mqtt.broker import Broker
from bridge.mqtt.session import Message, OutMsg
from bridge.mqtt.store import Store
from tests.support.links import CollectingLink as _Link


def _attach(broker: Broker, name: str, topic_filter: str) -> list[str]:
    got: list[str] = []

    def delivery(out: OutMsg, dup: bool, durable: bool) -> None:
        got.append(out.msg.payload.decode())

    broker.attach_route_session(f"$route:{name}", topic_filter, _Link(), max_inflight=4, max_queued=100,
                                direct=lambda msg, retain: None, direct_out=delivery)
    return got


def _open(path: Path) -> tuple[Store, Broker]:
    store = Store(path)
    broker = Broker(BrokerConfig(), store)
    broker.recover(store.open())
    return store, broker


def _rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as db:
        return list(db.execute(sql))


def test_retired_deliveries_go_to_subscriptions_made_after_them(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store, broker = _open(db)
    _attach(broker, "old", "a/#")
    had = _attach(broker, "had", "a/x/#")
    for i in range(6):
        broker.publish(Message(f"a/{'x' if i % 2 else 'y'}/{i}", str(i).encode(), 1))
    assert had == ["1", "3", "5"]     # all it matched
    later = _attach(broker, "later", "a/#")
    assert later == []                # subscribed after the publications
    broker.sessions["$route:old"].detach()   # its route stopped
    assert broker.retire_route_sessions(["$route:old", "$route:none"]) == ["$route:old"]
    assert broker.sessions["$route:old"].subscriptions == {}
    assert later == ["0", "1", "2", "3"] and had == ["1", "3", "5"]   # 4: later's window; "had" had its copies
    (settled,) = broker.settle_route_sessions()
    assert (settled.client_id, settled.handed, settled.kept, settled.deleted) == ("$route:old",
                                                                                  {"$route:later": 6}, 0, True)
    assert "$route:old" not in broker.sessions
    store.close()
    assert _rows(db, "SELECT client_id, COUNT(*) FROM outbound GROUP BY client_id ORDER BY 1") == [
        ("$route:had", 3), ("$route:later", 6)]
    assert _rows(db, "SELECT COUNT(*) FROM sessions WHERE client_id='$route:old'") == [(0,)]
    since = _rows(db, "SELECT key FROM meta WHERE key LIKE 'route_since %' ORDER BY key")
    assert since == [('route_since ["$route:had", "a/x/#"]',), ('route_since ["$route:later", "a/#"]',)]


def test_what_no_route_takes_is_kept_and_a_later_route_takes_it_after_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store, broker = _open(db)
    _attach(broker, "old", "k/#")
    for i in range(3):
        broker.publish(Message(f"k/{i}", str(i).encode(), 2))
    old = broker.sessions["$route:old"]
    first = next(iter(old.inflight))
    old.on_pubrec(first)     # the route had "0" (PUBREC); its PUBCOMP never came
    old.detach()
    broker.retire_route_sessions(["$route:old"])
    (settled,) = broker.settle_route_sessions()
    assert (settled.kept, settled.deleted) == (2, False)
    store.close()

    store, broker = _open(db)   # restarted: the kept session is recovered; a new route matches it
    broker.retire_route_sessions(["$route:old"])
    got = _attach(broker, "new", "k/#")
    assert got == ["1", "2"]    # not "0": the old route had it
    (settled,) = broker.settle_route_sessions()
    assert (settled.handed, settled.kept, settled.deleted) == ({"$route:new": 2}, 0, True)
    store.close()
    assert _rows(db, "SELECT COUNT(*) FROM messages") == [(2,)]   # only what "new" holds


def test_a_subscription_keeps_its_since_across_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store, broker = _open(db)
    _attach(broker, "r", "s/#")
    since = broker.routes.since[("$route:r", "s/#")]
    broker.publish(Message("s/1", b"1", 1))
    store.close()
    store, broker = _open(db)
    assert broker.routes.since == {("$route:r", "s/#"): since}
    _attach(broker, "r", "t/#")   # another filter: the old one's since goes with it
    assert ("$route:r", "s/#") not in broker.routes.since
    new = broker.routes.since[("$route:r", "t/#")]
    assert new > since
    store.close()
    assert _rows(db, "SELECT key, value FROM meta WHERE key LIKE 'route_since %'") == [
        ('route_since ["$route:r", "t/#"]', str(new))]


def test_a_route_of_the_same_name_takes_its_kept_session_back(tmp_path: Path) -> None:
    store, broker = _open(tmp_path / "s.db")
    _attach(broker, "r", "k/#")
    broker.sessions["$route:r"].max_inflight = 0   # nothing in flight: all three stay queued
    for i in range(3):
        broker.publish(Message(f"k/{i}", str(i).encode(), 1))
    broker.sessions["$route:r"].detach()
    broker.retire_route_sessions(["$route:r"])
    (settled,) = broker.settle_route_sessions()
    assert settled.kept == 3 and broker.sessions["$route:r"].subscriptions == {}
    got = _attach(broker, "r", "k/#")   # disabled, then enabled again
    assert got == ["0", "1", "2"]
    assert broker.routes.retired == {} and broker.settle_route_sessions() == []
    store.close()
