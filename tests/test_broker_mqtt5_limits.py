"""The broker's resource limits hold for MQTT 5 clients as they do for 3.1.1 ones (issue #15), through a running
gateway with raw level 5 clients: max_queued_bytes counts a publication's forwarded properties (a level 5
publisher's user properties can dwarf its payload), max_queued, qos0_buffer_bytes, a listener's
max_connections and connect_timeout. The 3.1.1 tests are in test_broker_limits.py and test_broker_ops.py."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from bridge.mqtt import packets as P
from bridge.mqtt import properties as PR
from bridge.mqtt.properties import encode_property_items
from tests.support.gateway import GatewayProcess, free_port, wait_for
from tests.support.mqtt5_client import raw5
from tests.support.mqtt_clients import RawClient
from tests.support.shared_gateway import reset, started
from tests.test_broker_limits import closed_by_peer

QUEUED_BYTES = 256 * 1024
MAX_QUEUED = 40
QOS0_BUFFER = 64 * 1024
MAX_CONNECTIONS = 3
LIMITS = {"max_queued_bytes": QUEUED_BYTES, "max_queued": MAX_QUEUED, "max_inflight": 4,
          "qos0_buffer_bytes": QOS0_BUFFER, "connect_timeout": 1.0}


@pytest.fixture(scope="module")
def limits_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    yield from started(tmp_path_factory, "limits5", {"broker": {
        "listeners": [{"host": "127.0.0.1", "port": free_port(), "max_connections": MAX_CONNECTIONS}],
        "limits": LIMITS, "sys_interval": 0}})


@pytest.fixture
def gw(limits_gateway: GatewayProcess) -> GatewayProcess:
    reset(limits_gateway)
    return limits_gateway


def subscribe5(raw: RawClient, *filters: tuple[str, int]) -> None:
    raw.send(P.encode(P.Subscribe(1, filters), P.MQTT_5))
    suback = raw.recv()
    assert isinstance(suback, P.Suback) and list(suback.return_codes) == [q for _, q in filters], suback


def publish5(raw: RawClient, topic: str, payload: bytes, qos: int, pid: int | None, props: dict[int, Any]) -> None:
    raw.send(P.encode(P.Publish(topic, payload, qos, packet_id=pid, properties=props), P.MQTT_5))


def session(gw: GatewayProcess, client_id: str) -> dict[str, Any]:
    (found,) = [s for s in gw.admin("/sessions")[1] if s["client_id"] == client_id]
    return found


def publish_acked(pub: RawClient, topic: str, payloads: list[bytes], props: dict[int, Any]) -> None:
    """QoS 1, every PUBACK awaited (each with reason 0: the broker took them all)."""
    for i, payload in enumerate(payloads, start=1):
        publish5(pub, topic, payload, 1, i, props)
    acks = [pub.recv() for _ in payloads]
    assert [(a.type, a.packet_id, a.reason_code) for a in acks] == [   # type: ignore[union-attr]
        (P.PUBACK, i, 0) for i in range(1, len(payloads) + 1)]


def test_max_queued_bytes_counts_the_user_properties_of_a_level_5_publication(gw):
    """200 publications of 100 payload bytes and an 8,000-character user property to a QoS 1 subscriber that does
    not read: its queue holds at most max_queued_bytes counting the property bytes, 32 of them (before: only
    payload and topic were counted, and max_queued stopped it at 40, 324 KB against a 256 KiB limit); the rest
    is dropped and counted; once it reads, what was kept arrives in order with its property."""
    sub, connack = raw5(gw.port, "slow5")
    assert isinstance(connack, P.Connack) and connack.return_code == 0
    subscribe5(sub, ("slow5/t", 1))
    pub, _ = raw5(gw.port, "fast5")
    big = [("k", "v" * 8000)]
    n = 200
    publish_acked(pub, "slow5/t", [bytes([i]) * 100 for i in range(1, n + 1)], {PR.USER_PROPERTY: big})

    s = session(gw, "slow5")
    one = 100 + len("slow5/t") + len(encode_property_items({PR.USER_PROPERTY: big}))
    assert s["inflight"] == 4
    assert s["queued_bytes"] == s["queued"] * one <= QUEUED_BYTES < (s["queued"] + 1) * one
    assert s["dropped"] == n - 4 - s["queued"] > 0
    assert "session slow5: queue full" in gw.log()

    expected = 4 + s["queued"]
    got = sub.receive_until(lambda p: p.payload[0] == expected)
    assert [p.payload[0] for p in got] == list(range(1, expected + 1))
    assert all((p.properties or {}).get(PR.USER_PROPERTY) == big for p in got)


def test_max_queued_stops_a_level_5_subscribers_queue(gw):
    """Small publications: max_queued (40 deliveries behind 4 in flight) is reached before the bytes."""
    sub, _ = raw5(gw.port, "count5")
    subscribe5(sub, ("count5/t", 1))
    pub, _ = raw5(gw.port, "count5-pub")
    n = 100
    publish_acked(pub, "count5/t", [b"%03d" % i for i in range(1, n + 1)], {PR.CONTENT_TYPE: "text/plain"})

    s = session(gw, "count5")
    assert (s["inflight"], s["queued"], s["dropped"]) == (4, MAX_QUEUED, n - 4 - MAX_QUEUED)
    got = sub.receive_until(lambda p: p.payload == b"%03d" % (4 + MAX_QUEUED))
    assert [p.payload for p in got] == [b"%03d" % i for i in range(1, 4 + MAX_QUEUED + 1)]
    assert {(p.properties or {}).get(PR.CONTENT_TYPE) for p in got} == {"text/plain"}


def test_qos0_to_a_level_5_subscriber_that_does_not_read_is_dropped_past_qos0_buffer_bytes(gw):
    """A level 5 QoS 0 subscriber that stops reading: past qos0_buffer_bytes of unsent output its QoS 0
    deliveries are dropped and counted, its publisher is not held (every PUBACK arrives) and others are served;
    its QoS 1 subscription still gets the marker after everything kept, and what it gets is in order."""
    sub, _ = raw5(gw.port, "q0slow5")
    sub.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    subscribe5(sub, ("q0slow5/data", 0), ("q0slow5/mark", 1))
    pub, _ = raw5(gw.port, "q0pub5")
    n, size = 400, 32 * 1024
    props = {PR.USER_PROPERTY: [("n", "x")]}
    publish_acked(pub, "q0slow5/data", [i.to_bytes(2, "big") * (size // 2) for i in range(1, n + 1)], props)
    wait_for(lambda: session(gw, "q0slow5")["dropped"] > 0, 10, what="QoS 0 deliveries dropped")

    other, connack = raw5(gw.port, "q0other5")   # the gateway serves everyone else meanwhile
    assert isinstance(connack, P.Connack) and connack.return_code == 0
    other.send(P.encode(P.Disconnect(), P.MQTT_5))

    publish5(pub, "q0slow5/mark", b"end", 1, 1, {})
    assert pub.recv() == P.PacketIdOnly(P.PUBACK, 1)
    got = sub.receive_until(lambda p: p.topic == "q0slow5/mark", timeout=30)
    data = [int.from_bytes(p.payload[:2], "big") for p in got if p.topic == "q0slow5/data"]
    dropped = session(gw, "q0slow5")["dropped"]
    assert len(data) == n - dropped and data == sorted(data) and len(set(data)) == len(data)
    assert all(p.payload == p.payload[:2] * (size // 2) and p.properties == props for p in got[:-1])


def test_a_listeners_max_connections_holds_for_level_5_clients(gw):
    """max_connections 3 on the listener: a fourth connection is closed at accept, before its CONNECT; a freed
    place takes a level 5 client, which is served."""
    socks = [socket.create_connection(("127.0.0.1", gw.port), timeout=5) for _ in range(MAX_CONNECTIONS)]
    try:
        wait_for(lambda: gw.admin("/status")[1]["listeners"][0]["connections"] == MAX_CONNECTIONS, 10,
                 what="3 connections accepted")
        with socket.create_connection(("127.0.0.1", gw.port), timeout=5) as extra:
            extra.sendall(P.encode(P.Connect(P.MQTT_5, "one-too-many", True, 60, None)))
            assert closed_by_peer(extra, 5.0)
        wait_for(lambda: f"max_connections {MAX_CONNECTIONS} reached" in gw.log(), 5, what="log line")
        socks.pop().close()
        wait_for(lambda: gw.admin("/status")[1]["listeners"][0]["connections"] == MAX_CONNECTIONS - 1, 5,
                 what="a place freed")
        raw, connack = raw5(gw.port, "in-the-freed-place")
        assert isinstance(connack, P.Connack) and connack.return_code == 0
        subscribe5(raw, ("freed/#", 0))
        raw.send(P.encode(P.Disconnect(), P.MQTT_5))
    finally:
        for s in socks:
            s.close()


def test_connect_timeout_closes_a_level_5_connect_left_unfinished(gw):
    """A level 5 CONNECT cut short is closed after connect_timeout (1 s here), and its place is free again."""
    connect = P.encode(P.Connect(P.MQTT_5, "half5", True, 60, None, properties={PR.SESSION_EXPIRY_INTERVAL: 60}))
    with socket.create_connection(("127.0.0.1", gw.port), timeout=5) as s:
        s.sendall(connect[:len(connect) // 2])
        assert closed_by_peer(s, 5.0)
    wait_for(lambda: "no CONNECT within 1 s" in gw.log(), 5, what="the timeout named in the log")
    wait_for(lambda: gw.admin("/status")[1]["listeners"][0]["connections"] == 0, 5, what="its place freed")
    assert all(x["client_id"] != "half5" for x in gw.admin("/sessions")[1])
