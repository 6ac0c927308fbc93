"""A route's broker session through the public session API (Broker.attach_route_session), in process:
it is the persistent, never-expiring session a CONNECT and a QoS 2 SUBSCRIBE would leave, its filter
replaces the ones it had, and it is stored like any session (a restart recovers it)."""

from __future__ import annotations

from pathlib import Path

from bridge.config import BrokerConfig
from bridge.mqtt.broker import Broker
from bridge.mqtt.session import Message, OutMsg
from bridge.mqtt.store import Store
from tests.support.links import CollectingLink as _Link


def _attach(broker: Broker, topic_filter: str, got: list[tuple[str, int, bool]]) -> None:
    def qos0(msg: Message, retain: bool) -> None:
        got.append((msg.topic, 0, False))

    def delivery(out: OutMsg, dup: bool, durable: bool) -> None:
        got.append((out.msg.topic, out.qos, dup))

    broker.attach_route_session("$route:r", topic_filter, _Link(), max_inflight=8, max_queued=100,
                                direct=qos0, direct_out=delivery)


def test_route_session_subscribes_replaces_its_filter_and_is_recovered(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    broker = Broker(BrokerConfig(), store)
    broker.recover(store.open())
    got: list[tuple[str, int, bool]] = []
    _attach(broker, "a/#", got)
    session = broker.sessions["$route:r"]
    assert session.persistent and session.expiry_seconds == 0 and session.subscriptions == {"a/#": 2}
    assert session.overflow is not None and session.overflow.on_flow is not None   # pushes back, not drops
    assert session.max_inflight == 8 and session.max_queued == 100
    assert "$route:r" not in broker.connections
    broker.publish(Message("a/x", b"1", 1))
    broker.publish(Message("b/x", b"2", 1))
    broker.publish(Message("a/y", b"3", 0))
    assert got == [("a/x", 1, False), ("a/y", 0, False)]

    _attach(broker, "b/#", got)   # the route now reads another filter: the old one is unsubscribed
    assert session is broker.sessions["$route:r"]
    assert session.subscriptions == {"b/#": 2}
    assert dict(broker.trie.match("a/x")) == {} and dict(broker.trie.match("b/x")) == {"$route:r": 2}
    # the QoS 1 delivery not acknowledged is in flight: re-sent (DUP) when the route attaches again
    assert got[-1] == ("a/x", 1, True)
    store.close()

    store = Store(tmp_path / "s.db")
    state = store.open()
    stored = state.sessions["$route:r"]
    assert (stored.expiry_seconds, stored.subscriptions) == (0, {"b/#": 2})
    assert [row[2] for row in stored.outbound] == [1]   # the QoS 1 delivery, by message id 1
    store.close()
