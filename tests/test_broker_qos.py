"""QoS 0/1/2 against a real `mqbridge serve`: the flows, the downgrade to min(publication,
subscription), per-subscriber order, packet ids, and QoS 2 exactly once (also with a raw client that
re-sends its PUBLISH with DUP before PUBREL)."""
from __future__ import annotations

import pytest

from bridge.mqtt import packets as P
from tests.support import shared_gateway
from tests.support.gateway import wait_for
from tests.support.mqtt_clients import LEVEL, PROTOCOL_IDS, PROTOCOLS, RawClient

# one gateway process per module, reset before each test (see tests/support/shared_gateway.py)
module_gateway = shared_gateway.module_gateway
gateway = shared_gateway.gateway


@pytest.fixture(params=PROTOCOLS, ids=PROTOCOL_IDS)
def proto(request):
    return request.param


@pytest.mark.parametrize("qos", [0, 1, 2])
def test_publish_and_receive_at_each_qos(gateway, clients, proto, qos):
    sub = clients(gateway.port, protocol=proto).connect()
    assert sub.subscribe("flow/t", 2) == [2]
    pub = clients(gateway.port, protocol=proto).connect()
    info = pub.publish("flow/t", f"q{qos}".encode(), qos=qos)   # waits for PUBACK / PUBCOMP
    if qos:
        assert info.is_published()
    (msg,) = sub.wait_messages(1)
    assert (msg.topic, msg.payload, msg.qos, msg.retain, msg.dup) == ("flow/t", f"q{qos}".encode(), qos,
                                                                        False, False)


def test_qos_downgraded_to_min_of_publication_and_subscription(gateway, clients, proto):
    subs = {}
    for sq in (0, 1, 2):
        c = clients(gateway.port, protocol=proto).connect()
        assert c.subscribe("down/#", sq) == [sq]
        subs[sq] = c
    pub = clients(gateway.port, protocol=proto).connect()
    for pq in (0, 1, 2):
        pub.publish(f"down/{pq}", f"p{pq}".encode(), qos=pq)
    for sq, c in subs.items():
        got = {m.payload: m.qos for m in c.wait_messages(3)}
        assert got == {f"p{pq}".encode(): min(pq, sq) for pq in (0, 1, 2)}, f"subscription QoS {sq}"


@pytest.mark.parametrize("qos", [0, 1, 2])
def test_order_per_subscriber_is_kept(gateway, clients, proto, qos):
    n = 300
    subs = [clients(gateway.port, protocol=proto).connect() for _ in range(2)]
    for s in subs:
        s.subscribe("order/#", qos)
    pub = clients(gateway.port, protocol=proto).connect()
    infos = [pub.publish(f"order/{i % 3}", str(i).encode(), qos=qos, wait=False) for i in range(n)]
    for info in infos:
        if qos:
            info.wait_for_publish(20)
    for s in subs:
        got = s.wait_messages(n, timeout=30)
        assert [int(m.payload) for m in got] == list(range(n))
        assert {m.qos for m in got} == {qos}


def test_order_kept_when_publishers_are_interleaved(gateway, clients, proto):
    """Each publisher's messages stay in its order at every subscriber, whatever the QoS mix."""
    sub = clients(gateway.port, protocol=proto).connect()
    sub.subscribe("mix/#", 2)
    pubs = [clients(gateway.port, protocol=proto).connect() for _ in range(3)]
    infos = []
    for i in range(150):
        for q, p in enumerate(pubs):
            infos.append(p.publish(f"mix/{q}", f"{q}:{i}".encode(), qos=q, wait=False))
    for info in infos:
        if info.mid and info.rc == 0:
            info.wait_for_publish(20)
    got = sub.wait_messages(450, timeout=30)
    for q in range(3):
        seq = [int(m.payload.split(b":")[1]) for m in got if m.topic == f"mix/{q}"]
        assert seq == list(range(150)), f"publisher {q}"


def raw_subscriber(gateway, proto, client_id: str, topic: str, qos: int, clean: bool = True) -> RawClient:
    raw = RawClient(gateway.port)
    assert raw.connect(client_id, LEVEL[proto], clean).return_code == 0
    assert raw.subscribe(topic, qos).return_codes == (qos,)
    return raw


def test_packet_ids_nonzero_and_unique_in_flight(gateway_factory, clients, proto):
    gw = gateway_factory({"broker": {"limits": {"max_inflight": 8}}})
    raw = raw_subscriber(gw, proto, "pid-check", "pid/#", 1)
    pub = clients(gw.port, protocol=proto).connect()
    for i in range(20):
        pub.publish("pid/q1", str(i).encode(), qos=1)
    first = [raw.recv() for _ in range(8)]
    assert all(isinstance(p, P.Publish) and p.qos == 1 for p in first)
    pids = [p.packet_id for p in first]
    assert 0 not in pids and None not in pids
    assert len(set(pids)) == 8
    # the window is full: the other 12 wait in the session's queue
    def window() -> tuple[int, int]:
        s = [x for x in gw.admin("/sessions")[1] if x["client_id"] == "pid-check"][0]
        return s["inflight"], s["queued"]

    wait_for(lambda: window() == (8, 12), 5, what="8 in flight, 12 queued")
    assert not raw.pending
    # ack one: exactly one more arrives, with an id not among those still in flight
    raw.ack(P.PUBACK, pids[0])
    nxt = raw.recv()
    assert isinstance(nxt, P.Publish) and nxt.payload == b"8"
    assert nxt.packet_id not in pids[1:] and nxt.packet_id != 0
    inflight = set(pids[1:]) | {nxt.packet_id}
    seen = [p.payload for p in first] + [nxt.payload]
    while len(seen) < 20:
        raw.ack(P.PUBACK, inflight.pop())
        p = raw.recv()
        assert isinstance(p, P.Publish) and p.packet_id and p.packet_id not in inflight
        inflight.add(p.packet_id)
        seen.append(p.payload)
    assert seen == [str(i).encode() for i in range(20)]


@pytest.mark.slow
def test_packet_ids_wrap_around_without_zero(gateway_factory, proto):
    """More than 65,535 QoS 1 deliveries to one client: ids wrap from 65535 to 1, never 0."""
    gateway = gateway_factory({"broker": {"limits": {"max_queued": 100_000}}})
    n = 65_600
    raw = raw_subscriber(gateway, proto, "wrap-sub", "wrap/t", 1)
    pub = RawClient(gateway.port)
    assert pub.connect("wrap-pub", LEVEL[proto]).return_code == 0
    batch = 2000
    last = 0
    wrapped = False
    received = 0
    sent = 0
    while received < n:
        if sent < n and sent - received < batch:
            chunk = b"".join(P.encode(P.Publish("wrap/t", b"x", 1, False, False, (sent + k) % 65535 + 1))
                             for k in range(batch))
            pub.send(chunk)
            sent += batch
        p = raw.recv(timeout=20)
        if isinstance(p, P.Publish):
            assert p.packet_id != 0
            if p.packet_id < last:
                wrapped = True
            last = p.packet_id
            raw.ack(P.PUBACK, p.packet_id)
            received += 1
        while pub.pending or _readable(pub):
            pub.recv(timeout=0.01)   # drain PUBACKs
    assert wrapped


def _readable(raw: RawClient) -> bool:
    import select
    r, _, _ = select.select([raw.sock], [], [], 0)
    return bool(r)


# -- QoS 2 exactly once ---------------------------------------------------------------------------


def test_qos2_delivered_exactly_once(gateway, clients, proto):
    sub = clients(gateway.port, protocol=proto).connect()
    sub.subscribe("once/#", 2)
    pub = clients(gateway.port, protocol=proto).connect()
    for i in range(50):
        pub.publish("once/t", str(i).encode(), qos=2)
    pub.publish("once/marker", b"end", qos=2)
    got = sub.wait_messages(51)
    assert [m.payload for m in got] == [str(i).encode() for i in range(50)] + [b"end"]


def is_marker(p: P.Publish) -> bool:
    return p.topic.endswith("/marker")


def test_qos2_resent_publish_with_dup_before_pubrel_is_delivered_once(gateway, proto):
    # a raw subscriber shows the wire order (paho hands QoS 2 messages over only at PUBREL)
    sub = raw_subscriber(gateway, proto, "dup-sub", "dup/#", 2)
    raw = RawClient(gateway.port)
    assert raw.connect("dup-pub", LEVEL[proto]).return_code == 0
    raw.publish("dup/t", b"only once", qos=2, packet_id=7)
    assert raw.recv() == P.PacketIdOnly(P.PUBREC, 7)
    raw.publish("dup/t", b"only once", qos=2, packet_id=7, dup=True)
    assert raw.recv() == P.PacketIdOnly(P.PUBREC, 7)
    raw.publish("dup/t", b"only once", qos=2, packet_id=7, dup=True)
    assert raw.recv() == P.PacketIdOnly(P.PUBREC, 7)
    # stored until PUBREL: a marker overtakes it
    raw.publish("dup/marker", b"before pubrel", qos=0)
    assert [p.payload for p in sub.receive_until(is_marker)] == [b"before pubrel"]
    raw.ack(P.PUBREL, 7)
    assert raw.recv() == P.PacketIdOnly(P.PUBCOMP, 7)
    # a PUBREL re-sent after PUBCOMP is answered and publishes nothing
    raw.ack(P.PUBREL, 7)
    assert raw.recv() == P.PacketIdOnly(P.PUBCOMP, 7)
    raw.publish("dup/marker", b"after", qos=0)
    got = sub.receive_until(is_marker)
    assert [(p.payload, p.qos) for p in got] == [(b"only once", 2), (b"after", 0)]
    # the id is free again: a new message under id 7 is a new publication
    raw.publish("dup/t", b"second", qos=2, packet_id=7)
    assert raw.recv() == P.PacketIdOnly(P.PUBREC, 7)
    raw.ack(P.PUBREL, 7)
    assert raw.recv() == P.PacketIdOnly(P.PUBCOMP, 7)
    raw.publish("dup/marker", b"end", qos=0)
    assert [p.payload for p in sub.receive_until(is_marker)] == [b"second", b"end"]


def test_qos2_resent_after_reconnect_of_persistent_publisher_is_delivered_once(gateway, proto):
    sub = raw_subscriber(gateway, proto, "redo-sub", "redo/#", 2)
    raw = RawClient(gateway.port)
    assert raw.connect("redo-pub", LEVEL[proto], clean=False).return_code == 0
    raw.publish("redo/t", b"once across reconnect", qos=2, packet_id=300)
    assert raw.recv() == P.PacketIdOnly(P.PUBREC, 300)
    raw.close()   # lost before PUBREL
    raw = RawClient(gateway.port)
    assert raw.connect("redo-pub", LEVEL[proto], clean=False).return_code == 0
    raw.publish("redo/t", b"once across reconnect", qos=2, packet_id=300, dup=True)
    assert raw.recv() == P.PacketIdOnly(P.PUBREC, 300)
    raw.ack(P.PUBREL, 300)
    assert raw.recv() == P.PacketIdOnly(P.PUBCOMP, 300)
    raw.publish("redo/marker", b"m", qos=0)
    got = sub.receive_until(is_marker)
    assert [p.payload for p in got] == [b"once across reconnect", b"m"]


def test_qos2_pubrel_after_reconnect_without_resend_publishes_once(gateway, proto):
    """A client that got PUBREC, lost the connection and reconnects sends only PUBREL."""
    sub = raw_subscriber(gateway, proto, "rel-sub", "rel/#", 2)
    raw = RawClient(gateway.port)
    assert raw.connect("rel-pub", LEVEL[proto], clean=False).return_code == 0
    raw.publish("rel/t", b"released later", qos=2, packet_id=9)
    assert raw.recv() == P.PacketIdOnly(P.PUBREC, 9)
    raw.close()
    raw = RawClient(gateway.port)
    assert raw.connect("rel-pub", LEVEL[proto], clean=False).return_code == 0
    raw.ack(P.PUBREL, 9)
    assert raw.recv() == P.PacketIdOnly(P.PUBCOMP, 9)
    raw.publish("rel/marker", b"m", qos=0)
    assert [p.payload for p in sub.receive_until(is_marker)] == [b"released later", b"m"]


def test_qos2_outbound_flow_to_a_raw_subscriber(gateway, clients, proto):
    raw = raw_subscriber(gateway, proto, "out2", "out2/#", 2)
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("out2/t", b"two-phase", qos=2)
    p = raw.recv()
    assert isinstance(p, P.Publish) and (p.qos, p.dup, p.payload) == (2, False, b"two-phase")
    raw.ack(P.PUBREC, p.packet_id)
    assert raw.recv() == P.PacketIdOnly(P.PUBREL, p.packet_id)
    raw.ack(P.PUBCOMP, p.packet_id)
    # finished: the session has nothing in flight
    wait_for(lambda: [s for s in gateway.admin("/sessions")[1]
                      if s["client_id"] == "out2" and s["inflight"] == 0], 5, what="in-flight cleared")


def test_qos1_outbound_unacked_is_not_resent_on_the_same_connection(gateway, clients, proto):
    """Retries happen on reconnect (with DUP), not as duplicates on a healthy connection."""
    raw = raw_subscriber(gateway, proto, "noretry", "nr/#", 1)
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("nr/t", b"one", qos=1)
    first = raw.recv()
    assert isinstance(first, P.Publish) and first.payload == b"one"
    pub.publish("nr/marker", b"m", qos=0)
    marker = raw.recv()
    assert isinstance(marker, P.Publish) and marker.topic == "nr/marker"


@pytest.mark.parametrize("qos", [0, 1, 2])
def test_empty_and_large_payloads(gateway, clients, proto, qos):
    sub = clients(gateway.port, protocol=proto).connect()
    sub.subscribe("size/#", qos)
    pub = clients(gateway.port, protocol=proto).connect()
    big = bytes(range(256)) * 4096   # 1 MiB, every byte value
    pub.publish("size/empty", b"", qos=qos)
    pub.publish("size/big", big, qos=qos)
    got = sub.wait_messages(2, timeout=20)
    assert [(m.topic, m.payload) for m in got] == [("size/empty", b""), ("size/big", big)]


def test_large_queued_message_survives_restart(gateway, clients, proto):
    c = clients(gateway.port, "bigq", protocol=proto, clean_session=False).connect()
    c.subscribe("bigq/#", 2)
    c.disconnect()
    wait_for(lambda: not gateway.admin("/connections")[1], 5, what="offline")
    big = bytes(range(256)) * 8192   # 2 MiB
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("bigq/t", big, qos=2)
    pub.disconnect()
    gateway.stop()
    gateway.start()
    c2 = clients(gateway.port, "bigq", protocol=proto, clean_session=False).connect()
    (m,) = c2.wait_messages(1, timeout=20)
    assert m.payload == big and m.qos == 2


@pytest.mark.slow
@pytest.mark.parametrize("synchronous", ["FULL", "NORMAL"])
def test_qos2_outbound_exactly_once_across_sigkill(gateway_factory, clients, synchronous):
    """A persistent QoS 2 subscriber drains a backlog while the broker is SIGKILLed: after the
    restart every message arrives, none twice. (The publisher is done before the kill, so only the
    broker -> subscriber flow is under test.)"""
    n = 3000
    gw = gateway_factory({"broker": {"limits": {"max_queued": 100_000},   # more queued than the client default
                                     "durability": {"synchronous": synchronous}, "sys_interval": 0}})
    sub = clients(gw.port, "x2-sub", clean_session=False).connect()
    sub.subscribe("x2/#", 2)
    sub.disconnect()
    pub = clients(gw.port, "x2-pub").connect()
    infos = [pub.publish("x2/t", str(i).encode(), qos=2, wait=False) for i in range(n)]
    for info in infos:
        info.wait_for_publish(60)
    pub.disconnect()
    sub = clients(gw.port, "x2-sub", clean_session=False).connect()
    sub.client.reconnect_delay_set(min_delay=0.05, max_delay=0.3)
    sub.wait_messages(n // 3, timeout=60)
    gw.kill()
    gw.start()
    got = sub.wait_messages(n, timeout=90)
    payloads = [int(m.payload) for m in got]
    dupes = sorted(p for p in set(payloads) if payloads.count(p) > 1)
    assert not dupes, f"delivered twice: {dupes[:10]}"
    assert sorted(payloads) == list(range(n))
