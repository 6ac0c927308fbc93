"""Retained publications against a real `mqbridge serve`: set, replace, clear, RETAIN on new
subscriptions only, min(retained, granted) QoS, and survival across restarts (SIGTERM and SIGKILL)."""

from __future__ import annotations

import pytest

from tests.support import shared_gateway
from tests.support.mqtt_clients import PROTOCOL_IDS, PROTOCOLS

# one gateway process per module, reset before each test (see tests/support/shared_gateway.py)
module_gateway = shared_gateway.module_gateway
gateway = shared_gateway.gateway


@pytest.fixture(params=PROTOCOLS, ids=PROTOCOL_IDS)
def proto(request):
    return request.param


def sync(pub) -> None:
    """The broker has handled everything ``pub`` sent before: a QoS 1 round trip on its connection."""
    pub.publish("sync/none", b"", qos=1)


def fresh_subscription(gateway, clients, proto, topic_filter: str, qos: int = 2, marker: str = "ret/marker"):
    """Subscribe a new client to ``topic_filter`` and ``marker``; publish a marker and return what came
    before it. The retained messages are sent right after SUBACK, so all of them precede the marker."""
    c = clients(gateway.port, protocol=proto).connect()
    c.subscribe(topic_filter, qos)
    c.subscribe(marker, 2)   # QoS 2 like the retained ones: paho hands QoS 2 over at PUBREL, in order
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish(marker, b"M", qos=2)
    got = c.wait_messages(1)
    while got[-1].topic != marker:
        got = c.wait_messages(len(got) + 1)
    return [m for m in got if m.topic != marker], c


def test_retained_goes_to_new_subscriptions_with_retain_flag(gateway, clients, proto):
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("ret/a", b"kept", qos=1, retain=True)
    got, _ = fresh_subscription(gateway, clients, proto, "ret/a", qos=1)
    assert [(m.topic, m.payload, m.retain, m.qos) for m in got] == [("ret/a", b"kept", True, 1)]


def test_live_subscribers_get_retained_publications_without_retain_flag(gateway, clients, proto):
    live = clients(gateway.port, protocol=proto).connect()
    live.subscribe("ret/live", 1)
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("ret/live", b"now", qos=1, retain=True)
    (m,) = live.wait_messages(1)
    assert (m.payload, m.retain) == (b"now", False)


def test_retained_is_replaced_by_the_last_one(gateway, clients, proto):
    pub = clients(gateway.port, protocol=proto).connect()
    for i in range(5):
        pub.publish("ret/r", f"v{i}".encode(), qos=1, retain=True)
    got, _ = fresh_subscription(gateway, clients, proto, "ret/r")
    assert [m.payload for m in got] == [b"v4"]
    # a non-retained publication does not replace it
    pub.publish("ret/r", b"not retained", qos=1)
    got, _ = fresh_subscription(gateway, clients, proto, "ret/r")
    assert [m.payload for m in got] == [b"v4"]


def test_empty_retained_payload_clears(gateway, clients, proto):
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("ret/c", b"soon gone", qos=1, retain=True)
    pub.publish("ret/keep", b"stays", qos=1, retain=True)
    pub.publish("ret/c", b"", qos=1, retain=True)
    got, _ = fresh_subscription(gateway, clients, proto, "ret/#")
    assert [(m.topic, m.payload) for m in got] == [("ret/keep", b"stays")]


def test_wildcard_subscription_gets_every_matching_retained(gateway, clients, proto):
    pub = clients(gateway.port, protocol=proto).connect()
    topics = ["ret/w/1", "ret/w/2", "ret/w/x/3", "ret/other"]
    for t in topics:
        pub.publish(t, t.encode(), qos=0, retain=True)
    sync(pub)
    got, _ = fresh_subscription(gateway, clients, proto, "ret/w/#")
    assert sorted(m.topic for m in got) == ["ret/w/1", "ret/w/2", "ret/w/x/3"]
    assert all(m.retain for m in got)
    got, _ = fresh_subscription(gateway, clients, proto, "ret/+/1", marker="ret/marker2")
    assert [m.topic for m in got] == ["ret/w/1"]


@pytest.mark.parametrize(
    "retained_qos,granted,expected",
    [
        (2, 1, 1),
        (2, 0, 0),
        (1, 2, 1),
        (0, 2, 0),
        (2, 2, 2),
        (1, 1, 1),
    ],
)
def test_retained_qos_is_min_of_retained_and_granted(gateway, clients, proto, retained_qos, granted, expected):
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("ret/q", b"qos", qos=retained_qos, retain=True)
    sync(pub)
    got, _ = fresh_subscription(gateway, clients, proto, "ret/q", qos=granted)
    assert [(m.payload, m.qos, m.retain) for m in got] == [(b"qos", expected, True)]


def test_resubscribe_sends_retained_again(gateway, clients, proto):
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("ret/again", b"r", qos=1, retain=True)
    c = clients(gateway.port, protocol=proto).connect()
    c.subscribe("ret/again", 1)
    c.wait_messages(1)
    c.subscribe("ret/again", 1)
    got = c.wait_messages(2)
    assert [(m.payload, m.retain) for m in got] == [(b"r", True), (b"r", True)]


def test_retained_survives_restart(gateway, clients, proto):
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("ret/s/1", b"one", qos=1, retain=True)
    pub.publish("ret/s/2", b"two", qos=2, retain=True)
    pub.publish("ret/s/3", b"three", qos=0, retain=True)
    pub.publish("ret/s/gone", b"x", qos=1, retain=True)
    pub.publish("ret/s/gone", b"", qos=1, retain=True)
    pub.disconnect()
    assert gateway.stop() == 0
    gateway.start()
    got, _ = fresh_subscription(gateway, clients, proto, "ret/s/#")
    assert sorted((m.topic, m.payload, m.qos) for m in got) == [
        ("ret/s/1", b"one", 1),
        ("ret/s/2", b"two", 2),
        ("ret/s/3", b"three", 0),
    ]
    assert all(m.retain for m in got)


def test_acknowledged_retained_survives_sigkill(gateway, clients, proto):
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("ret/k/1", b"acked-1", qos=1, retain=True)  # returns after PUBACK
    pub.publish("ret/k/2", b"acked-2", qos=2, retain=True)  # returns after PUBCOMP
    pub.drop()
    gateway.kill()
    gateway.start()
    got, _ = fresh_subscription(gateway, clients, proto, "ret/k/#")
    assert sorted(m.payload for m in got) == [b"acked-1", b"acked-2"]


def test_sys_topics_are_not_in_the_retained_store(gateway, clients, proto):
    """$SYS/broker values are rebuilt at start, never persisted as client retained messages."""
    c = clients(gateway.port, protocol=proto).connect()
    c.subscribe("$SYS/broker/version", 0)
    (m,) = c.wait_messages(1)
    assert m.payload.startswith(b"mqbridge")
    gateway.stop()
    gateway.start()
    got, _ = fresh_subscription(gateway, clients, proto, "ret/none/#")
    assert got == []
