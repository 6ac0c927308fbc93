"""A route to MQTT whose source holds each QoS 1 delivery to a connected persistent session until its PUBACK
(issue #18, bridge/mqtt/source_hold.py): nothing is written to the broker's store for it, the message stays on
its queue while the delivery is in flight, and whatever ends the hold early (the client leaves, the hold's
time runs out, a SIGKILL) keeps the message: journaled in the broker, or still at the source."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bridge.connectors.embedded import QueueStore, default_path
from bridge.mqtt import packets as P
from bridge.mqtt.message import Message, OutMsg
from bridge.mqtt.session import Session
from bridge.mqtt.source_hold import SourceHold
from bridge.mqtt.store import QUEUED, SENT
from tests.mq_support import topic_message
from tests.support.gateway import GatewayProcess, wait_for
from tests.support.mqtt_clients import RawClient


def _store_ops(gw: GatewayProcess) -> int:
    return int(gw.admin("/status")[1]["store"]["ops"])


def _held(gw: GatewayProcess, route: str = "mq-to-mqtt") -> dict[str, int]:
    row = next(r for r in gw.admin("/status")[1]["routes"] if r["route"] == route)
    return row["held"]   # type: ignore[no-any-return]


def _subscriber(gw: GatewayProcess, client_id: str) -> RawClient:
    client = RawClient(gw.port)
    client.connect(client_id, clean=False)
    client.subscribe("held/#", 1)
    return client


def _put_and_receive(gw: GatewayProcess, client_id: str, queue: str, tag: bytes, n: int
                     ) -> tuple[RawClient, QueueStore, int, list[P.Publish]]:
    """A persistent subscriber to held/#, the gateway's queue store, the broker store's writes so far, and the
    PUBLISHes (not acknowledged) of ``n`` messages put on ``queue`` in one transaction."""
    client = _subscriber(gw, client_id)
    store = QueueStore(default_path(gw.data_dir)).open()
    ops = _store_ops(gw)
    store.put_many([(queue, topic_message(f"held/{i}", tag + b"%d" % i)) for i in range(n)])
    return client, store, ops, _publishes(client, n)


def _publishes(client: RawClient, n: int) -> list[P.Publish]:
    got: list[P.Publish] = []
    while len(got) < n:
        packet = client.recv(timeout=10)
        if isinstance(packet, P.Publish):
            got.append(packet)
    return got


def _resent_and_acknowledged(gw: GatewayProcess, client_id: str, first: list[P.Publish]) -> RawClient:
    """The client connects again to its session: it gets ``first`` again from the broker's journal, DUP set, with
    the same packet ids, in order; they are acknowledged."""
    again = RawClient(gw.port)
    assert again.connect(client_id, clean=False).session_present
    resent = _publishes(again, len(first))
    assert [(p.payload, p.packet_id, p.dup) for p in resent] == [(p.payload, p.packet_id, True) for p in first]
    for p in resent:
        again.ack(P.PUBACK, p.packet_id)   # type: ignore[arg-type]
    return again


def test_a_held_delivery_writes_nothing_to_the_broker_and_keeps_its_message_until_the_puback(
        gateway: GatewayProcess) -> None:
    client, store, ops, got = _put_and_receive(gateway, "held-1", "MQTT.OUT", b"m", 5)
    assert [p.payload for p in got] == [b"m%d" % i for i in range(5)] and {p.qos for p in got} == {1}
    assert store.depth("MQTT.OUT") == 5   # in flight: the queue keeps them
    assert _held(gateway) == {"now": 5, "journaled": 0}
    for p in got:
        client.ack(P.PUBACK, p.packet_id)   # type: ignore[arg-type]
    wait_for(lambda: store.depth("MQTT.OUT") == 0, 10, what="MQTT.OUT emptied once every PUBACK came")
    assert _store_ops(gateway) == ops   # no message or delivery row, written or deleted
    assert _held(gateway) == {"now": 0, "journaled": 0}
    client.close()
    store.close()


def test_a_delivery_held_too_long_is_journaled_and_sent_again_after_a_reconnect(gateway: GatewayProcess) -> None:
    """No PUBACK: after the hold's time the deliveries are written to the broker's store (a message and a
    delivery row each) and the route confirms them; the client reconnecting gets them again with DUP set."""
    client, store, ops, first = _put_and_receive(gateway, "held-2", "MQTT.OUT", b"s", 3)
    wait_for(lambda: store.depth("MQTT.OUT") == 0, 10, what="the held deliveries journaled and confirmed")
    assert _store_ops(gateway) >= ops + 6
    assert _held(gateway) == {"now": 0, "journaled": 3}
    client.close()
    again = _resent_and_acknowledged(gateway, "held-2", first)
    again.close()
    store.close()


def test_a_takeover_journals_the_old_connections_held_deliveries_for_the_new_one(gateway: GatewayProcess) -> None:
    """The same client id connects again while its first connection still holds unacknowledged deliveries: the
    new connection gets them (DUP set, same packet ids), and once it acknowledges them the queue is empty."""
    old, store, _, first = _put_and_receive(gateway, "held-6", "MQTT.OUT", b"o", 4)
    new = _resent_and_acknowledged(gateway, "held-6", first)
    wait_for(lambda: store.depth("MQTT.OUT") == 0, 10, what="MQTT.OUT emptied")
    assert old.closed_by_peer()
    new.close()
    store.close()


def test_the_route_option_direct_false_journals_every_delivery(
        gateway_factory: Callable[..., GatewayProcess], tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("routes:\n  - {name: out, from: {connector: embedded, queue: Q.OUT}, to: {mqtt: '{topic}'},"
                     " options: {direct: false}}\n")
    gw = gateway_factory({"rules": str(rules)})
    client, store, ops, got = _put_and_receive(gw, "held-3", "Q.OUT", b"j", 4)
    wait_for(lambda: store.depth("Q.OUT") == 0, 10, what="confirmed at the broker's commit, before any PUBACK")
    for p in got:
        client.ack(P.PUBACK, p.packet_id)   # type: ignore[arg-type]
    wait_for(lambda: _store_ops(gw) >= ops + 8, 10, what="a message and a delivery row per message")
    client.close()
    store.close()


def test_sigkill_while_deliveries_are_held_loses_none_of_them(gateway: GatewayProcess) -> None:
    client = _subscriber(gateway, "held-4")
    store = QueueStore(default_path(gateway.data_dir)).open()
    bodies = [b"k%d" % i for i in range(20)]
    store.put_many([("MQTT.OUT", topic_message("held/k", b)) for b in bodies])
    assert [p.payload for p in _publishes(client, 20)] == bodies   # none acknowledged
    gateway.kill()
    client.close()
    gateway.start()
    again = RawClient(gateway.port)
    again.connect("held-4", clean=False)
    got = again.receive_until(lambda p: p.payload == bodies[-1], timeout=20)
    assert [p.payload for p in got] == bodies   # from the queue (still held) or the broker's journal
    wait_for(lambda: store.depth("MQTT.OUT") == 0, 10, what="MQTT.OUT emptied")
    again.close()
    store.close()


def test_a_clean_stop_journals_held_deliveries_and_confirms_them_at_the_source(gateway: GatewayProcess) -> None:
    """SIGTERM while deliveries are held: the connections close first, so the held deliveries are journaled,
    and the routes then confirm them at the source: nothing is left on the queue to come twice, nothing backed
    out, and the client gets them again from its session after the restart."""
    client = _subscriber(gateway, "held-5")
    store = QueueStore(default_path(gateway.data_dir)).open()
    bodies = [b"t%d" % i for i in range(10)]
    store.put_many([("MQTT.OUT", topic_message("held/t", b)) for b in bodies])
    first = _publishes(client, 10)
    assert gateway.stop() == 0
    assert store.depth("MQTT.OUT") == 0
    client.close()
    gateway.start()
    again = _resent_and_acknowledged(gateway, "held-5", first)
    again.close()
    store.close()


# -- the bookkeeping, without a gateway ------------------------------------------------------------------------


class _Store:
    """The broker store calls a hold and a persistent session make, recorded; commits run when told."""

    def __init__(self) -> None:
        self.rows: list[tuple[object, ...]] = []
        self.commits: list[Callable[[], None]] = []

    def insert_message(self, mid: int, *values: object) -> list[object]:
        self.rows.append(("message", mid))
        return ["insert", (), 0]

    def reserve_message_ids(self, upto: int) -> list[object]:
        return ["reserve", (), 0]

    def insert_outbound(self, row: tuple[object, ...]) -> list[object]:
        self.rows.append(("outbound", *row))
        return ["insert", row, 0]

    def mark_outbound_sent(self, client_id: str, seq: int, packet_id: int) -> list[object]:
        self.rows.append(("sent", client_id, seq, packet_id))
        return ["update", (), 0]

    def delete_outbound(self, client_id: str, seq: int) -> list[object]:
        self.rows.append(("delete", client_id, seq))
        return ["delete", (), 0]

    def cancel(self, op: list[object] | None) -> bool:
        return False

    def amend(self, op: list[object] | None, params: tuple[object, ...]) -> bool:
        return False

    def after_commit(self, callback: Callable[[], None]) -> None:
        self.commits.append(callback)

    def commit(self) -> None:
        done, self.commits = self.commits, []
        for cb in done:
            cb()


class _Link:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send(self, data: bytes) -> None:
        self.sent.append(data)

    send_durable = send

    def send_qos0(self, data: bytes) -> bool:
        self.sent.append(data)
        return True


def _held_session(store: _Store) -> tuple[Session, SourceHold, list[str]]:
    from bridge.mqtt.messages import StoredMessages

    session = Session("c", persistent=True, protocol_level=4, journal=store,  # type: ignore[arg-type]
                      max_inflight=2, max_queued=10, on_release=lambda m: None)
    session.link = _Link()
    hold = SourceHold(StoredMessages(store, lambda: 0.0), store)  # type: ignore[arg-type]
    settled: list[str] = []
    return session, hold, settled


def _deliver(session: Session, hold: SourceHold, n: int) -> list[OutMsg]:
    outs: list[OutMsg] = []
    for i in range(n):
        session.deliver(Message(f"t/{i}", b"x", 2), 1, hold=lambda out: (hold.take(session, out), outs.append(out)))
    return outs


def test_held_deliveries_settle_at_their_acknowledgements_without_a_row() -> None:
    store = _Store()
    session, hold, settled = _held_session(store)
    _deliver(session, hold, 3)   # two in flight (max_inflight 2), one queued
    assert hold.settle(lambda: settled.append("settled"))
    assert store.rows == [] and len(session.inflight) == 2 and len(session.queue) == 1
    for pid in list(session.inflight):
        session.on_puback(pid)
    assert settled == []   # the third is in flight now
    session.on_puback(next(iter(session.inflight)))
    assert settled == ["settled"] and store.rows == [] and hold.journaled == 0


def test_a_detach_journals_held_deliveries_in_their_state_and_settles_at_the_commit() -> None:
    store = _Store()
    session, hold, settled = _held_session(store)
    outs = _deliver(session, hold, 3)
    hold.settle(lambda: settled.append("settled"))
    session.on_puback(outs[0].packet_id)   # type: ignore[arg-type]   # the third is sent now
    session.detach()
    states = [(r[2], r[7], r[6]) for r in store.rows if r[0] == "outbound"]   # (seq, state, packet id)
    assert states == [(2, SENT, outs[1].packet_id), (3, SENT, outs[2].packet_id)]
    assert [r for r in store.rows if r[0] == "message"] and hold.journaled == 2
    assert settled == []   # not before their rows are committed
    store.commit()
    assert settled == ["settled"]
    assert all(out.held is None for out in outs)


def test_expiry_journals_what_is_still_held_queued_ones_as_queued() -> None:
    store = _Store()
    session, hold, settled = _held_session(store)
    outs = _deliver(session, hold, 3)
    hold.settle(lambda: settled.append("settled"))
    hold.expire()
    assert [(r[2], r[7]) for r in store.rows if r[0] == "outbound"] == [(1, SENT), (2, SENT), (3, QUEUED)]
    store.commit()
    assert settled == ["settled"]
    session.on_puback(outs[0].packet_id)   # type: ignore[arg-type]   # now a journaled delivery: its row goes
    assert ("delete", "c", 1) in store.rows
    sent_rows = [r for r in store.rows if r[0] == "sent"]
    assert sent_rows == [("sent", "c", 3, outs[2].packet_id)]   # the queued one, sent after the PUBACK


def test_a_discarded_session_lets_go_of_what_it_held() -> None:
    store = _Store()
    session, hold, settled = _held_session(store)
    _deliver(session, hold, 3)
    hold.settle(lambda: settled.append("settled"))
    session.detach(keep=False)
    assert store.rows == []   # a session that ends with its connection journals nothing
    session.discard_messages()
    assert settled == ["settled"] and store.rows == []
