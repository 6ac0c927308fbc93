"""Routes from an MQTT filter to the embedded queue store that take QoS 1/2 publications directly (issue #18,
bridge/routing/direct.py): the publisher's acknowledgement means the message is on its queue, a poison message
goes to the backout queue in the same commit, a failing queue store hands what it took to the route's broker
session (nothing acknowledged is lost), and the ordered output that holds acknowledgements for several commits."""
from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from bridge.connectors.embedded import QueueStore, default_path
from bridge.mqtt import packets as P
from bridge.mqtt.connection import ClientConnection
from mappings.mq.message import decode_message
from tests.support.gateway import GatewayProcess, wait_for
from tests.support.mqtt_clients import RawClient


def _route(gw: GatewayProcess, name: str) -> dict[str, object]:
    return next(r for r in gw.admin("/status")[1]["routes"] if r["route"] == name)


def test_each_puback_means_the_message_is_on_its_queue(gateway: GatewayProcess) -> None:
    """The default route mq/# -> MQTT.IN: after every PUBACK (QoS 1) and PUBCOMP (QoS 2) the queue holds at least
    as many messages as were acknowledged. Through the route's broker session the PUBACK left at the broker's
    commit, before the route had put the message."""
    store = QueueStore(default_path(gateway.data_dir)).open()
    client = RawClient(gateway.port)
    client.connect("direct-1", clean=False)
    acked = 0
    for window in range(10):
        for i in range(1, 21):
            client.publish(f"mq/d/{window}", b"m%d" % i, qos=1, packet_id=i)
        for _ in range(20):
            packet = client.recv()
            assert isinstance(packet, P.PacketIdOnly) and packet.type == P.PUBACK, packet
            acked += 1
            assert store.depth("MQTT.IN") >= acked
    client.publish("mq/d/two", b"q2", qos=2, packet_id=77)
    assert client.recv() == P.PacketIdOnly(P.PUBREC, 77)
    client.ack(P.PUBREL, 77)
    assert client.recv() == P.PacketIdOnly(P.PUBCOMP, 77)
    assert store.depth("MQTT.IN") == acked + 1
    route = _route(gateway, "mqtt-to-mq")
    assert route["direct"]["commits"] >= 1 and route["direct"]["pending"] == 0  # type: ignore[index]
    assert route["queued"] == 0 and route["inflight"] == 0   # nothing went through its broker session
    wait_for(lambda: _route(gateway, "mqtt-to-mq")["moved"] == acked + 1, 10, what="every message counted as moved")
    client.close()
    store.close()


def test_a_recognised_resend_past_the_threshold_goes_to_the_backout_queue(
        gateway_factory: Callable[..., GatewayProcess], tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("routes:\n  - {name: once, from: {mqtt: 'o/#'}, to: {queue: QO},"
                     " options: {backout_threshold: 1}}\n")
    gw = gateway_factory({"rules": str(rules)})
    store = QueueStore(default_path(gw.data_dir)).open()
    client = RawClient(gw.port)
    client.connect("resender", clean=False)
    client.publish("o/x", b"same", qos=1, packet_id=5)
    assert client.recv() == P.PacketIdOnly(P.PUBACK, 5)
    assert store.depth("QO") == 1
    client.publish("o/x", b"same", qos=1, packet_id=5, dup=True)   # its PUBACK was "lost": the same key, redelivered
    assert client.recv() == P.PacketIdOnly(P.PUBACK, 5)
    assert store.depth("BACKOUT.once") == 1   # committed with the acknowledgement, as a converted message is
    assert _route(gw, "once")["backout"] == 1
    client.close()
    store.close()


def test_a_failing_queue_store_hands_its_messages_to_the_route_session(gateway: GatewayProcess) -> None:
    """The queue store is locked by another process (SQLite gives up after its 5 s busy timeout): the messages
    the route took go to its broker session, their PUBACKs leave after the broker's commit, and once the
    store is writable again the route puts every one of them, once."""
    path = default_path(gateway.data_dir)
    lock = sqlite3.connect(path, isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")
    client = RawClient(gateway.port, timeout=20)
    client.connect("during-lock", clean=False)
    for i in range(1, 31):
        client.publish("mq/locked", b"n%d" % i, qos=1, packet_id=i)
    acks = [client.recv(timeout=20) for _ in range(30)]
    assert acks == [P.PacketIdOnly(P.PUBACK, i) for i in range(1, 31)]   # in order, though from two commits
    assert "embedded queue store: database is locked" in gateway.log()
    lock.execute("ROLLBACK")
    lock.close()
    store = QueueStore(path).open()
    wait_for(lambda: store.depth("MQTT.IN") >= 30, 20, what="the 30 messages on MQTT.IN")
    bodies = sorted(decode_message(m.data).body for m in store.browse("MQTT.IN", 100))
    assert bodies == sorted(b"n%d" % i for i in range(1, 31))   # each once
    client.close()
    store.close()


class _Port:
    def __init__(self) -> None:
        self.out: list[bytes] = []
        self.aborted = False

    def queue_write(self, data: bytes) -> None:
        self.out.append(data)

    def abort(self) -> None:
        self.aborted = True

    def final(self, data: bytes) -> None:
        self.out.append(data)

    def buffered(self) -> int:
        return 0

    def queue_qos0(self, data: bytes, limit: int) -> bool:
        self.out.append(data)
        return True

    def unhold(self) -> None:
        return None


class _Commit:
    def __init__(self) -> None:
        self.waiting: list[Callable[[], None]] = []

    def gate(self, callback: Callable[[], None]) -> None:
        self.waiting.append(callback)

    def done(self) -> None:
        waiting, self.waiting = self.waiting, []
        for callback in waiting:
            callback()


def test_acknowledgements_leave_in_order_whatever_commit_ends_first() -> None:
    broker_commit, queue_commit = _Commit(), _Commit()
    port = _Port()
    conn = ClientConnection(peer="p", listener="l", max_packet_size=1 << 20, now=0.0, port=port,
                            after_commit=broker_commit.gate, qos0_buffer_limit=1 << 20)
    conn.send_gated(b"A", [queue_commit.gate, broker_commit.gate])   # a sink's message and a stored delivery
    conn.send_durable(b"B")
    conn.send(b"C")
    conn.send_gated(b"D", [queue_commit.gate])
    broker_commit.done()
    assert port.out == []            # A still waits for the queue's commit, and everything after it
    queue_commit.done()
    assert port.out == [b"A", b"B", b"C", b"D"]
    conn.send_gated(b"E", [queue_commit.gate])
    conn.abort_after_commit("limit")
    assert not port.aborted          # E leaves first
    queue_commit.done()
    assert port.out[-1] == b"E" and port.aborted


def test_sigkill_under_load_loses_no_acknowledged_message(gateway: GatewayProcess) -> None:
    """A clean-session publisher (no re-sends) keeps 64 QoS 1 publications in flight; the gateway is killed
    (SIGKILL) in the middle. Every publication that got its PUBACK is on the queue after the restart."""
    client = RawClient(gateway.port, timeout=10)
    client.connect("killed-mid-stream", clean=True)
    acked: set[int] = set()
    sent = 0
    try:
        while len(acked) < 3000:
            while sent - len(acked) < 64:
                sent += 1
                client.publish("mq/kill", b"k%d" % sent, qos=1, packet_id=(sent - 1) % 65535 + 1)
            packet = client.recv()
            assert isinstance(packet, P.PacketIdOnly) and packet.type == P.PUBACK
            acked.add(len(acked) + 1)   # in order: PUBACK n answers the n-th publication
            if len(acked) == 1500:
                gateway.kill()
    except (ConnectionError, OSError):
        pass
    client.close()
    assert 1500 <= len(acked) < sent
    gateway.start()
    store = QueueStore(default_path(gateway.data_dir)).open()
    bodies = {decode_message(m.data).body for m in store.browse("MQTT.IN", limit=100_000)}
    store.close()
    missing = sorted(i for i in acked if b"k%d" % i not in bodies)
    assert not missing, f"{len(missing)} acknowledged messages lost, first {missing[:5]}"
