# A route from MQTT whose target is stuck pushes back instead of dropping what the broker acknowledged
# (issue #4, "Nothing acknowledged is lost"): its broker session's max_queued is a soft limit, and the
# publishers that fill it are held (not read further, not timed out) until the queue drains. The stuck
# target is the session's real ActiveMQ behind a TCP forwarder that is down, then up again.
from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge.connectors.embedded import QueueStore, default_path
from bridge.convlog import log_files
from bridge.mqtt import packets as P
from mappings.conversions.jms_mq import jms_to_mq_bytes
from mappings.jms.model import DeliveryMode, JmsHeaders, JmsMessage, TextBody, TypedMap
from tests.support.activemq import BrokerEndpoints
from tests.support.gateway import GatewayProcess, free_port, wait_for
from tests.support.jmstool import JmsTool
from tests.support.mqtt_clients import PahoClient, RawClient
from tests.support.tcpproxy import TcpProxy

pytestmark = pytest.mark.activemq

N = 800          # publications sent; the route takes 512 in flight + max_queued 20 before it pushes back
LIMIT = 20


@pytest.fixture
def queue() -> str:
    return f"BP.{uuid.uuid4().hex[:12]}"


@pytest.fixture
def proxy(activemq: BrokerEndpoints) -> Iterator[TcpProxy]:
    """ActiveMQ's STOMP port behind a forwarder, down to begin with: the route's target is stuck."""
    p = TcpProxy(free_port(), (activemq.host, activemq.stomp_port))
    try:
        yield p
    finally:
        p.down()


def start(gateway_factory: Callable[..., GatewayProcess], tmp_path: Path, proxy: TcpProxy,
          queue: str) -> GatewayProcess:
    rules = tmp_path / "rules.yaml"
    rules.write_text(json.dumps({
        "connectors": {"amq": {"type": "jms", "host": "127.0.0.1", "port": proxy.port,
                               "reconnect_max_seconds": 1.0}},
        "routes": [{"name": "stuck", "from": {"mqtt": "bp/#"}, "to": {"connector": "amq", "queue": queue},
                    "options": {"max_queued": LIMIT}}]}))
    return gateway_factory({"rules": str(rules)})


def route_status(gw: GatewayProcess) -> dict[str, Any]:
    (route,) = gw.admin("/status")[1]["routes"]
    return dict(route)


def publish_all(raw: RawClient, dup: bool = False, skip: frozenset[int] = frozenset()) -> None:
    """QoS 1 publications bp/<i> with packet id i + 1, written in one go (no client-side window)."""
    raw.send(b"".join(P.encode(P.Publish(f"bp/{i}", str(i).encode(), 1, False, dup, i + 1))
                      for i in range(N) if i + 1 not in skip))


def read_acks(raw: RawClient, acked: set[int], done: Callable[[], bool], timeout: float, what: str) -> None:
    """Collect PUBACK packet ids until ``done()``; other packets (PINGRESP) are ignored."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what} (have {len(acked)} PUBACKs)")
        try:
            packet = raw.recv(timeout=0.2)
        except TimeoutError:
            continue
        if isinstance(packet, P.PacketIdOnly) and packet.type == P.PUBACK:
            acked.add(packet.packet_id)


def wait_held(gw: GatewayProcess, raw: RawClient, acked: set[int], before: int = 0) -> dict[str, Any]:
    """Wait (reading PUBACKs meanwhile) until the route reports backpressure with one publisher held and
    the publisher has the PUBACK of every publication the route's session took (``before``: what it held
    already)."""
    state: dict[str, Any] = {}

    def held() -> bool:
        state.update(route_status(gw))
        return (bool(state.get("backpressure")) and state.get("held_publishers") == 1
                and len(acked) + before == state["queued"] + state["inflight"])

    read_acks(raw, acked, held, 30, "the route to hold the publisher")
    return state


def no_more_acks(raw: RawClient, acked: set[int], gw: GatewayProcess, seconds: float) -> None:
    """While the gateway's clock advances by ``seconds`` (more than 1.5 x the publisher's keepalive),
    the held publisher gets no PUBACK; read what arrives meanwhile."""
    before = len(acked)
    t0 = gw.admin("/status")[1]["uptime_seconds"]
    read_acks(raw, acked, lambda: gw.admin("/status")[1]["uptime_seconds"] >= t0 + seconds, seconds + 30,
              f"{seconds} s of gateway uptime")
    assert len(acked) == before, "a held publisher got PUBACKs"


def dropped_records(gw: GatewayProcess) -> list[dict[str, Any]]:
    return [r for f in log_files(gw.data_dir / "convlog") for line in f.read_text().splitlines()
            if line and (r := json.loads(line))["status"] == "dropped"]


def ok_egress(gw: GatewayProcess) -> list[dict[str, Any]]:
    return [r for f in log_files(gw.data_dir / "convlog") for line in f.read_text().splitlines()
            if line and (r := json.loads(line))["status"] == "ok" and r["direction"] == "egress"]


def bodies(jmstool: JmsTool, queue: str, count: int) -> list[int]:
    return sorted(int(m["body"]) for m in jmstool.receive(f"queue://{queue}", count, timeout=60))


def test_a_stuck_route_holds_its_publisher_and_loses_nothing(
    gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient], tmp_path: Path,
    proxy: TcpProxy, jmstool: JmsTool, queue: str,
) -> None:
    """With max_queued 20, a QoS 1 publisher sending well beyond it stops getting PUBACKs and is held:
    nothing is dropped, other clients are served, it is not timed out; once the target is back every
    publication arrives once and the publisher gets every PUBACK."""
    gw = start(gateway_factory, tmp_path, proxy, queue)
    raw = RawClient(gw.port)
    raw.connect("bp-pub", clean=False, keepalive=1)   # sends no PINGREQ: only the hold keeps it connected
    publish_all(raw)
    acked: set[int] = set()
    state = wait_held(gw, raw, acked)
    assert state["queued"] > LIMIT - 1 and state["max_queued"] == LIMIT
    shown = gw.cli("status", "--admin", f"http://127.0.0.1:{gw.admin_port}")
    assert shown.returncode == 0, shown.stderr
    assert f"queued {state['queued']}/{LIMIT}  BACKPRESSURE: 1 publisher(s) held" in shown.stdout

    # other clients on other topics are served while it is held
    other = clients(gw.port, "other").connect()
    other.subscribe("side/#", 1)
    other.publish("side/x", b"round trip", qos=1)
    (m,) = other.wait_messages(1)
    assert (m.topic, m.payload) == ("side/x", b"round trip")

    # held well past 1.5 x its keepalive of 1 s: no PUBACK, and not disconnected (its PINGREQ is answered)
    no_more_acks(raw, acked, gw, 4)
    assert 0 < len(acked) < N
    raw.send(P.encode(P.Bare(P.PINGREQ)))
    assert wait_pingresp(raw, acked) and 0 < len(acked) < N   # still connected and served, still held
    assert "keepalive expired" not in gw.log()
    assert "pushing back" in gw.log()
    assert dropped_records(gw) == [] and route_status(gw)["dropped"] == 0

    # the target comes back: every publication arrives once, and the publisher gets every PUBACK
    proxy.up()
    read_acks(raw, acked, lambda: len(acked) == N, 90, "every PUBACK")
    assert acked == set(range(1, N + 1))
    assert bodies(jmstool, queue, N) == list(range(N))   # each exactly once
    recs = wait_for(lambda: r if len(r := ok_egress(gw)) >= N else None, 20, what="N egress records")
    keys = [r["message_key"] for r in recs]
    assert len(keys) == len(set(keys)) == N
    state = wait_for(lambda: s if not (s := route_status(gw))["backpressure"] else None, 10,
                     what="backpressure to end")
    assert state["held_publishers"] == 0
    assert "no longer pushing back" in gw.log()
    assert dropped_records(gw) == []


def wait_pingresp(raw: RawClient, acked: set[int], timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            packet = raw.recv(timeout=0.5)
        except TimeoutError:
            continue
        if isinstance(packet, P.Bare) and packet.type == P.PINGRESP:
            return True
        if isinstance(packet, P.PacketIdOnly) and packet.type == P.PUBACK:
            acked.add(packet.packet_id)
    return False


def test_held_publisher_across_sigkill_loses_nothing_acknowledged(
    gateway_factory: Callable[..., GatewayProcess], tmp_path: Path, proxy: TcpProxy, jmstool: JmsTool,
    queue: str,
) -> None:
    """SIGKILL while the publisher is held: after the restart, what was acknowledged is still there, the
    publisher re-sends what was not (DUP, same packet ids, as a client does) and is held again; once the
    target is back every publication arrives and every acknowledged one exactly once."""
    gw = start(gateway_factory, tmp_path, proxy, queue)
    raw = RawClient(gw.port)
    raw.connect("bp-pub", clean=False, keepalive=0)
    publish_all(raw)
    acked: set[int] = set()
    wait_held(gw, raw, acked)
    assert 0 < len(acked) < N
    gw.kill()
    raw.sock.close()
    gw.start()
    raw = RawClient(gw.port)
    assert raw.connect("bp-pub", clean=False, keepalive=0).session_present
    publish_all(raw, dup=True, skip=frozenset(acked))   # re-send every unacknowledged one
    again: set[int] = set()
    wait_held(gw, raw, again, before=len(acked))
    proxy.up()
    read_acks(raw, again, lambda: again | acked == set(range(1, N + 1)), 90, "the rest of the PUBACKs")
    got = sorted(int(m["body"]) for m in jmstool.receive(f"queue://{queue}", N, timeout=60))
    assert set(got) == set(range(N))
    once = [i for i in got if i + 1 in acked]
    assert once == sorted(i - 1 for i in acked)   # acknowledged before the kill: exactly once
    assert dropped_records(gw) == []


def test_a_route_into_the_broker_waits_for_a_stuck_route_from_mqtt(
    gateway_factory: Callable[..., GatewayProcess], tmp_path: Path, proxy: TcpProxy, jmstool: JmsTool,
    queue: str,
) -> None:
    """An embedded MQ queue -> MQTT route publishes into the stuck route's topics: it is held like a
    publisher's connection (its source stays unconfirmed on the queue) instead of filling the stuck
    route's session without bound; once the target is back every message arrives."""
    m = 1500   # more than the stuck route's 512 in flight + 20 queued + the feeding route's 4 batches of 128
    rules = tmp_path / "rules.yaml"
    rules.write_text(json.dumps({
        "connectors": {"amq": {"type": "jms", "host": "127.0.0.1", "port": proxy.port,
                               "reconnect_max_seconds": 1.0}},
        "routes": [{"name": "stuck", "from": {"mqtt": "bp/#"}, "to": {"connector": "amq", "queue": queue},
                    "options": {"max_queued": LIMIT}},
                   {"name": "feed", "from": {"queue": "IN.Q"}, "to": {"mqtt": "bp/feed"}}]}))
    gw = gateway_factory({"rules": str(rules)})
    store = QueueStore(default_path(gw.data_dir)).open()
    try:
        store.put_many([("IN.Q", jms_to_mq_bytes(JmsMessage(JmsHeaders(delivery_mode=DeliveryMode.PERSISTENT),
                                                            TypedMap([], what="property"), TextBody(str(i))),
                                                 now_ms=1_700_000_000_000)[0]) for i in range(m)])

        def stuck() -> dict[str, Any]:
            return next(r for r in gw.admin("/status")[1]["routes"] if r["route"] == "stuck")

        wait_for(lambda: stuck()["backpressure"], 30, what="the stuck route to push back")
        t0 = gw.admin("/status")[1]["uptime_seconds"]
        wait_for(lambda: gw.admin("/status")[1]["uptime_seconds"] >= t0 + 3, 30, what="3 s of gateway uptime")
        state = stuck()
        assert state["backpressure"] and state["queued"] <= LIMIT + 4 * 128 + 1
        assert state["held_publishers"] >= 1   # the feeding route, waiting
        assert store.depth("IN.Q") > 0   # the feeding route did not confirm what it could not hand on
        proxy.up()
        got = sorted(int(x["body"]) for x in jmstool.receive(f"queue://{queue}", m, timeout=90))
        assert got == list(range(m))
        wait_for(lambda: store.depth("IN.Q") == 0, 30, what="the feeding route to confirm everything")
    finally:
        store.close()
    assert dropped_records(gw) == []


def test_a_held_publisher_that_keeps_sending_is_no_longer_read_and_loses_nothing(
    gateway_factory: Callable[..., GatewayProcess], tmp_path: Path, proxy: TcpProxy, jmstool: JmsTool,
    queue: str,
) -> None:
    """A held publisher that sends 2 MiB more: the broker reads up to 1 MiB of it (then stops reading the
    socket), and once the target is back it reads and processes all of it: every PUBACK, every message."""
    more = 2000
    gw = start(gateway_factory, tmp_path, proxy, queue)
    raw = RawClient(gw.port)
    raw.connect("bp-pub", clean=False, keepalive=0)
    publish_all(raw)
    acked: set[int] = set()
    wait_held(gw, raw, acked)
    data = b"".join(P.encode(P.Publish(f"bp/{i}", str(i).encode().ljust(1024), 1, False, False, i + 1))
                    for i in range(N, N + more))

    def bytes_in() -> int:
        (conn,) = [c for c in gw.admin("/connections")[1] if c["client_id"] == "bp-pub"]
        return int(conn["bytes_in"])

    start_in = bytes_in()
    raw.sock.settimeout(None)
    sender = threading.Thread(target=raw.sock.sendall, args=(data,), daemon=True)
    sender.start()   # may block in sendall once the broker stops reading: the kernel buffers fill
    t0 = gw.admin("/status")[1]["uptime_seconds"]
    wait_for(lambda: gw.admin("/status")[1]["uptime_seconds"] >= t0 + 2, 30, what="2 s of gateway uptime")
    read = bytes_in() - start_in
    assert 1024 * 1024 <= read < len(data)   # read up to the 1 MiB it may hold, and then not all of it
    assert route_status(gw)["backpressure"]
    proxy.up()
    sender.join(60)
    assert not sender.is_alive()
    read_acks(raw, acked, lambda: len(acked) == N + more, 120, "every PUBACK")
    got = sorted(int(m["body"]) for m in jmstool.receive(f"queue://{queue}", N + more, timeout=120))
    assert got == list(range(N + more))
    assert dropped_records(gw) == []
