"""Resource limits against one hostile or slow client (issue #13), through the real gateway process.

Before CONNECT a connection may buffer only a CONNECT of at most max_connect_size: anything else, or a
larger announced length, is refused at the fixed header (a flood of connections announcing 10 MB leaves
the gateway's RSS where it was). A session's QoS 1/2 queue is bounded in bytes (max_queued_bytes; beyond,
dropped and counted for clients, pushing back for routes), a client's unreleased QoS 2 publications by
max_inbound_qos2, and `mqbridge status` shows the sessions holding the most queued bytes.
"""

from __future__ import annotations

import selectors
import socket
import time
from pathlib import Path

from bridge.config import BrokerConfig, LimitsConfig
from bridge.mqtt import packets as P
from bridge.mqtt.broker import Broker
from bridge.mqtt.session import Message, OutMsg
from bridge.mqtt.store import Store
from tests.support.gateway import wait_for
from tests.support.mqtt_clients import RawClient

MIB = 1024 * 1024


def vm_kib(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {key} for {pid}")


def closed_by_peer(sock: socket.socket, timeout: float) -> bool:
    """Whether the broker closes ``sock`` within ``timeout`` (EOF or reset), reading what it sends."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            if not sock.recv(65536):
                return True
        except TimeoutError:
            return False
        except OSError:
            return True
    return False


def flood(port: int, first: int, connections: int, announce: int) -> tuple[int, int]:
    """Each connection sends a fixed header announcing ``announce`` bytes, then streams the body until all
    is sent or the broker closes it. Returns (closed by the broker, body bytes sent in all)."""
    header = bytes((first,)) + P.encode_length(announce)
    chunk = b"\0" * 65536
    sel = selectors.DefaultSelector()
    sent: dict[socket.socket, int] = {}
    closed = 0
    for _ in range(connections):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(header)
        s.setblocking(False)
        sent[s] = 0
        sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE)
    deadline = time.monotonic() + 60
    while sel.get_map() and time.monotonic() < deadline:
        for key, events in sel.select(0.5):
            s = key.fileobj
            assert isinstance(s, socket.socket)
            try:
                if events & selectors.EVENT_READ and not s.recv(65536):
                    raise ConnectionResetError
                if events & selectors.EVENT_WRITE:
                    sent[s] += s.send(chunk[:announce - sent[s]])
                    if sent[s] >= announce:   # all sent: does the broker close it now?
                        sel.unregister(s)
                        s.setblocking(True)
                        closed += closed_by_peer(s, 2.0)
            except OSError:
                sel.unregister(s)
                closed += 1
    for s in sent:
        s.close()
    return closed, sum(sent.values())


def test_preconnect_flood_is_refused_at_the_fixed_header_and_rss_stays_bounded(gateway_factory):
    """40 connections announcing a 10 MB CONNECT, and 40 a 10 MB PUBLISH as first packet, streaming the
    bodies: all are closed at the fixed header, and the peak RSS grows by far less than what they sent
    (before: each body was buffered whole, ~800 MB of peak RSS here)."""
    gw = gateway_factory({"broker": {"limits": {"connect_timeout": 60}}})
    assert gw.proc is not None
    pid = gw.proc.pid
    rss0 = vm_kib(pid, "VmRSS")
    closed_c, sent_c = flood(gw.port, 0x10, 40, 10_000_000)
    closed_p, sent_p = flood(gw.port, 0x30, 40, 10_000_000)
    growth_mib = (vm_kib(pid, "VmHWM") - rss0) / 1024
    assert (closed_c, closed_p) == (40, 40)
    assert growth_mib < 16, f"peak RSS grew by {growth_mib:.0f} MiB; the clients sent {(sent_c + sent_p) / MIB:.0f} MiB"
    log = gw.log()
    assert f"before CONNECT, remaining length 10000000 exceeds the limit of {P.MAX_CONNECT_LENGTH}" in log
    assert "PUBLISH before CONNECT (fixed header byte 0x30)" in log
    # the gateway serves on
    ok = RawClient(gw.port)
    assert ok.connect("after-flood").return_code == 0


def test_non_connect_first_byte_is_refused_without_waiting_for_its_body(gateway_factory):
    """A fixed header that is not CONNECT's closes the connection at once: it does not wait for the body
    (nor for connect_timeout, 60 s here)."""
    gw = gateway_factory({"broker": {"limits": {"connect_timeout": 60}}})
    for header in (bytes([0x30]) + P.encode_length(10_000_000),        # PUBLISH, no body sent
                   bytes([0x82]),                                      # SUBSCRIBE, not even its length
                   bytes([0x10]) + P.encode_length(P.MAX_CONNECT_LENGTH + 1)):   # CONNECT, too long
        with socket.create_connection(("127.0.0.1", gw.port), timeout=5) as s:
            s.sendall(header)
            assert closed_by_peer(s, 5.0), f"not closed after {header.hex()}"
    wait_for(lambda: "SUBSCRIBE before CONNECT (fixed header byte 0x82)" in gw.log(), 5, what="log line")


def test_largest_legal_connect_and_large_messages_after_it_are_accepted(gateway_factory):
    """The pre-CONNECT limit lets every legal CONNECT in (a 65,535-byte will message, long user name
    and password); after CONNECT, max_message_size applies (a 2 MB publication)."""
    gw = gateway_factory()
    c = RawClient(gw.port)
    will = P.Will("w/" + "t" * 60_000, b"\xab" * 65_535)
    c.send(P.encode(P.Connect(P.MQTT_311, "big", True, 60, will, "u" * 60_000, b"p" * 60_000)))
    assert c.recv() == P.Connack(0)
    c.subscribe("big/#", 0)
    c.publish("big/x", b"z" * 2_000_000)
    (got,) = c.receive_until(lambda p: True)
    assert got.payload == b"z" * 2_000_000


def test_slow_consumer_queue_stops_at_max_queued_bytes_and_status_shows_it(gateway_factory):
    """A QoS 1 subscriber that does not read: its queue holds at most max_queued_bytes of deliveries, the
    rest is dropped and counted; `mqbridge status` lists it among the top sessions by queued bytes; the
    queued ones are delivered once it reads."""
    limit = 1 * MIB
    gw = gateway_factory({"broker": {"limits": {"max_queued_bytes": limit, "max_inflight": 4}}})
    sub = RawClient(gw.port)
    sub.connect("slow-sub")
    sub.subscribe("slow/t", 1)
    pub = RawClient(gw.port)
    pub.connect("fast-pub")
    n, size = 200, 16 * 1024
    for i in range(1, n + 1):
        pub.publish("slow/t", bytes([i]) * size, qos=1, packet_id=i)
    acks = [pub.recv() for _ in range(n)]
    assert all(isinstance(a, P.PacketIdOnly) and a.type == P.PUBACK for a in acks)

    _, sessions = gw.admin("/sessions")
    (s,) = [s for s in sessions if s["client_id"] == "slow-sub"]
    one = size + len("slow/t")
    assert s["inflight"] == 4
    assert s["queued_bytes"] == s["queued"] * one <= limit < (s["queued"] + 1) * one
    assert s["dropped"] == n - 4 - s["queued"] > 0
    assert "session slow-sub: queue full" in gw.log()

    _, status = gw.admin("/status")
    assert status["top_queued"][0]["client_id"] == "slow-sub"
    assert status["top_queued"][0]["queued_bytes"] == s["queued_bytes"]
    out = gw.cli("status", "--admin", f"http://127.0.0.1:{gw.admin_port}")
    assert out.returncode == 0, out.stderr
    assert "top sessions by queued bytes" in out.stdout and "slow-sub" in out.stdout

    # it reads now: the first 4 + queued ones arrive, in order, and nothing else
    expected = 4 + s["queued"]
    got = sub.receive_until(lambda p: p.payload[0] == expected)
    assert [p.payload[0] for p in got] == list(range(1, expected + 1))


def test_route_session_pushes_back_at_max_queued_bytes_instead_of_dropping(tmp_path: Path) -> None:
    """A route's session treats max_queued_bytes as it does max_queued: queued all the same, pushing back."""
    store = Store(tmp_path / "s.db")
    broker = Broker(BrokerConfig(limits=LimitsConfig(max_queued_bytes=10_000)), store)
    broker.recover(store.open())
    got: list[OutMsg] = []

    class Link:
        def send(self, data: bytes) -> None: ...
        def send_durable(self, data: bytes) -> None: ...
        def send_qos0(self, data: bytes) -> bool:
            return True

    broker.attach_route_session("$route:r", "r/#", Link(), max_inflight=1, max_queued=1000,
                                direct=lambda m, r: None, direct_out=lambda o, d, dur: got.append(o))
    session = broker.sessions["$route:r"]
    for i in range(30):
        broker.publish(Message("r/x", bytes([i]) * 1000, 1))
    assert len(got) == 1 and len(session.queue) == 29 and session.stats.dropped == 0
    assert session.pushing_back and session.queued_bytes == 29 * 1003
    while session.queue:   # the route acknowledges: it stops pushing back below 90 % of the bytes
        session.on_puback(got[-1].packet_id)   # type: ignore[arg-type]
    assert not session.pushing_back and session.queued_bytes == 0 and len(got) == 30
    store.close()


def test_unreleased_qos2_publications_are_bounded_and_kept_for_the_reconnect(gateway_factory):
    """A client that sends QoS 2 PUBLISH and never PUBREL: beyond max_inbound_qos2 the connection is
    closed without a PUBREC for the one too many; a persistent session keeps the ones acknowledged, and
    their PUBREL after reconnecting publishes them."""
    gw = gateway_factory({"broker": {"limits": {"max_inbound_qos2": 10}}})
    watcher = RawClient(gw.port)
    watcher.connect("q2-watch")
    watcher.subscribe("q2/#", 0)
    c = RawClient(gw.port)
    c.connect("q2-hog", clean=False)
    for pid in range(1, 12):
        c.publish("q2/t", b"m%d" % pid, qos=2, packet_id=pid)
    recs = []
    try:
        while True:
            recs.append(c.recv(timeout=5))
    except ConnectionError:
        pass
    assert [(r.type, r.packet_id) for r in recs] == [(P.PUBREC, pid) for pid in range(1, 11)]  # type: ignore[union-attr]
    assert "11 QoS 2" not in gw.log() and "10 QoS 2 publications" in gw.log()
    _, status = gw.admin("/status")
    assert status["inbound_qos2_refused"] == 1

    again = RawClient(gw.port)
    assert again.connect("q2-hog", clean=False).session_present
    for pid in range(1, 11):
        again.ack(P.PUBREL, pid)
    comps = [again.recv() for _ in range(10)]
    assert [(p.type, p.packet_id) for p in comps] == [(P.PUBCOMP, pid) for pid in range(1, 11)]  # type: ignore[union-attr]
    got = watcher.receive_until(lambda p: p.payload == b"m10")
    assert [p.payload for p in got] == [b"m%d" % pid for pid in range(1, 11)]


def test_unreleased_qos2_bytes_are_bounded_by_max_queued_bytes(gateway_factory):
    gw = gateway_factory({"broker": {"limits": {"max_queued_bytes": 100_000}}})
    c = RawClient(gw.port)
    c.connect("q2-bytes")
    for pid in range(1, 11):   # 10,245 bytes each with the topic: the 10th would pass 100,000 bytes
        c.publish("q2/b", b"b" * 10_240, qos=2, packet_id=pid)
    recs = []
    try:
        while True:
            recs.append(c.recv(timeout=5))
    except ConnectionError:
        pass
    assert len(recs) == 9
    assert "max_queued_bytes 100000" in gw.log()


def test_memory_of_a_slow_consumers_queue_is_given_back_when_its_session_ends(gateway_factory):
    """A slow consumer's full queue of 1 KiB messages (~23 MiB of RSS) is freed when its clean session
    ends, and the gateway's RSS comes back near where it was (glibc kept it before: malloc_trim). The queue
    is bounded by max_queued_bytes here, not by the default max_queued of 1,000 messages."""
    gw = gateway_factory({"broker": {"limits": {"max_queued": 100_000}, "sys_interval": 0}})
    assert gw.proc is not None
    pid = gw.proc.pid
    sub = RawClient(gw.port)
    sub.connect("mem-sub")
    sub.subscribe("mem/t", 1)
    pub = RawClient(gw.port)
    pub.connect("mem-pub")
    rss0 = vm_kib(pid, "VmRSS")
    n = 20_000
    for start in range(1, n + 1, 1000):   # a window of 1,000 unacknowledged
        for i in range(start, start + 1000):
            pub.publish("mem/t", b"k" * 1024, qos=1, packet_id=i % 65535 + 1)
        for _ in range(1000):
            pub.recv()
    grown = vm_kib(pid, "VmRSS") - rss0
    assert grown > 12 * 1024, f"the queue should hold ~16 MiB; RSS grew by {grown} KiB"
    sub.sock.close()
    wait_for(lambda: all(s["client_id"] != "mem-sub" for s in gw.admin("/sessions")[1]), 5, what="session gone")
    wait_for(lambda: vm_kib(pid, "VmRSS") - rss0 < 8 * 1024, 5,
             what=f"RSS back within 8 MiB of {rss0} KiB (grew by {grown} KiB)")


def test_a_listener_takes_1000_connections_by_default(gateway_factory):
    """max_connections defaults to 1,000 per listener (it was unlimited): the 1,001st is refused at accept,
    and a slot freed is taken again."""
    gw = gateway_factory()
    socks = [socket.create_connection(("127.0.0.1", gw.port), timeout=5) for _ in range(1000)]
    try:
        def state() -> dict:
            return gw.admin("/status")[1]["listeners"][0]
        wait_for(lambda: state()["connections"] == 1000, 20, what="1,000 connections accepted")
        assert state()["max_connections"] == 1000
        with socket.create_connection(("127.0.0.1", gw.port), timeout=5) as extra:
            assert closed_by_peer(extra, 5.0)
        wait_for(lambda: "max_connections 1000 reached" in gw.log(), 5, what="log line")
        socks.pop().close()
        wait_for(lambda: state()["connections"] == 999, 5, what="a slot freed")
        ok = RawClient(gw.port)
        assert ok.connect("in-the-freed-slot").return_code == 0
    finally:
        for s in socks:
            s.close()
