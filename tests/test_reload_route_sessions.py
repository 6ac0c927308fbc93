# The QoS 1 messages a route's broker session holds (acknowledged to their publishers) while its target is
# down survive the route's rename or removal, on a real `mqbridge serve` with real paho publishers: handed
# to the route that now matches them, kept (and shown) until one does, across restarts and SIGKILL, or
# dropped only on `mqbridge reload --discard ROUTE` with one conversion-log record each (issue #13).
from __future__ import annotations

import json
import signal
import socket
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge.connectors.embedded import QueueStore, default_path
from bridge.convlog import log_files
from mappings.mq.message import decode_message
from tests.support.activemq import BrokerEndpoints
from tests.support.gateway import GatewayProcess, free_port, wait_for
from tests.support.jmstool import JmsTool
from tests.support.mqtt_clients import PahoClient
from tests.support.tcpproxy import TcpProxy

# bound and never listening, for the whole module: connections to it are refused, and no other process
# can take the port, so the route's STOMP target stays down
_DOWN = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
_DOWN.bind(("127.0.0.1", 0))
DOWN_PORT = int(_DOWN.getsockname()[1])
STUCK = {"name": "to-amq", "from": {"mqtt": "amq/#"}, "to": {"connector": "down", "queue": "Q"}}


def write_rules(path: Path, *routes: dict[str, Any], port: int = DOWN_PORT) -> None:
    path.write_text(json.dumps({
        "connectors": {"down": {"type": "jms", "host": "127.0.0.1", "port": port, "reconnect_max_seconds": 1.0}},
        "routes": list(routes)}, indent=1))


def to_queue(name: str, topic_filter: str, queue: str) -> dict[str, Any]:
    return {"name": name, "from": {"mqtt": topic_filter}, "to": {"queue": queue}}


def start(gateway_factory: Callable[..., GatewayProcess], rules: Path, *routes: dict[str, Any]) -> GatewayProcess:
    write_rules(rules, *routes)
    return gateway_factory({"rules": str(rules)})


def publish(clients: Callable[..., PahoClient], gw: GatewayProcess, topics: list[str], qos: int = 1) -> None:
    """Each payload its topic; returns once every PUBACK (PUBCOMP) is in."""
    pub = clients(gw.port, f"pub-{len(topics)}-{qos}")
    pub.connect()
    infos = [pub.publish(t, t.encode(), qos=qos, wait=False) for t in topics]
    wait_for(lambda: all(i.is_published() for i in infos), 30, what=f"{len(topics)} acknowledgements")
    pub.disconnect()


def held_by(gw: GatewayProcess, route: str) -> int:
    """QoS 1/2 deliveries the route's broker session holds (queued and in flight)."""
    for r in gw.admin("/status")[1].get("routes", []):
        if r["route"] == route:
            return int(r.get("queued", 0)) + int(r.get("inflight", 0))
    return -1


def wait_held(gw: GatewayProcess, route: str, n: int) -> None:
    wait_for(lambda: held_by(gw, route) == n, 20, what=f"{n} messages held by route {route}")


def bodies(gw: GatewayProcess, queue: str, n: int, timeout: float = 30) -> list[str]:
    """The bodies on an embedded queue once there are at least ``n``."""
    def landed() -> list[str]:
        store = QueueStore(default_path(gw.data_dir)).open()
        try:
            got = [decode_message(m.data).body.decode() for m in store.browse(queue, limit=10 * n + 10)]
        finally:
            store.close()
        return got if len(got) >= n else []
    return wait_for(landed, timeout, what=f"{n} messages on {queue}")


def depth(gw: GatewayProcess, queue: str) -> int:
    store = QueueStore(default_path(gw.data_dir)).open()
    try:
        return store.depth(queue)
    finally:
        store.close()


def reload(gw: GatewayProcess, *extra: str) -> Any:
    return gw.cli("reload", "--admin", f"http://127.0.0.1:{gw.admin_port}", *extra)


def kept(gw: GatewayProcess) -> dict[str, int]:
    return {k["route"]: k["kept"] for k in gw.admin("/status")[1].get("kept_route_sessions", [])}


def topics(prefix: str, n: int) -> list[str]:
    return [f"{prefix}/{i}" for i in range(n)]


def test_a_renamed_route_gets_what_the_old_name_held(
    gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient], tmp_path: Path,
) -> None:
    """500 acknowledged QoS 1 (and 100 QoS 2) publications wait in the route's session (its STOMP target
    is down); the route is renamed (and pointed at a queue) by reload: every one arrives at the renamed
    route's target."""
    rules = tmp_path / "rules.yaml"
    gw = start(gateway_factory, rules, STUCK)
    sent, sent2 = topics("amq/a", 500), topics("amq/b", 100)
    publish(clients, gw, sent)
    publish(clients, gw, sent2, qos=2)
    wait_held(gw, "to-amq", 600)
    write_rules(rules, to_queue("amq-to-queue", "amq/#", "RENAMED"))
    r = reload(gw)
    assert r.returncode == 0, r.stderr
    got = bodies(gw, "RENAMED", 600)
    assert sorted(got) == sorted(sent + sent2)   # every acknowledged one, once (the old target took none)
    assert "to-amq: handed 600 to amq-to-queue" in r.stdout
    assert kept(gw) == {}
    assert "route to-amq is gone: its queued messages were handed over: 600 to amq-to-queue" in gw.log()


@pytest.fixture
def proxy(activemq: BrokerEndpoints) -> Iterator[TcpProxy]:
    """ActiveMQ's STOMP port behind a forwarder, down to begin with: the route's target is down."""
    p = TcpProxy(free_port(), (activemq.host, activemq.stomp_port))
    try:
        yield p
    finally:
        p.down()


@pytest.mark.activemq
def test_renamed_while_its_activemq_target_is_down_every_message_arrives_once_it_is_up(
    gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient], tmp_path: Path,
    proxy: TcpProxy, jmstool: JmsTool,
) -> None:
    """The issue's case: a route to an ActiveMQ queue whose STOMP target is down holds 500 acknowledged
    QoS 1 publications and is renamed by reload; once ActiveMQ is reachable all 500 are on the queue."""
    rules = tmp_path / "rules.yaml"
    queue = f"RENAME.{uuid.uuid4().hex[:10]}"
    route = {**STUCK, "to": {"connector": "down", "queue": queue}}
    write_rules(rules, route, port=proxy.port)
    gw = gateway_factory({"rules": str(rules)})
    sent = topics("amq/r", 500)
    publish(clients, gw, sent)
    wait_held(gw, "to-amq", 500)
    write_rules(rules, {**route, "name": "renamed"}, port=proxy.port)
    r = reload(gw)
    assert r.returncode == 0, r.stderr
    wait_held(gw, "renamed", 500)
    proxy.up()
    got = [m["body"] for m in jmstool.receive(f"queue://{queue}", 500, timeout=60)]
    assert sorted(got) == sorted(sent)
    assert "to-amq: handed 500 to renamed" in r.stdout


def test_a_route_renamed_while_the_gateway_was_stopped_hands_over_at_start(
    gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient], tmp_path: Path,
) -> None:
    rules = tmp_path / "rules.yaml"
    gw = start(gateway_factory, rules, STUCK)
    sent = topics("amq/s", 200)
    publish(clients, gw, sent)
    wait_held(gw, "to-amq", 200)
    assert gw.stop() == 0
    write_rules(rules, to_queue("amq-to-queue", "amq/#", "RENAMED"))
    gw.start()
    assert sorted(bodies(gw, "RENAMED", 200)) == sorted(sent)
    assert kept(gw) == {}


def test_a_removed_route_keeps_its_messages_until_a_route_matches_them(
    gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient], tmp_path: Path,
) -> None:
    """Removed with no route matching its messages: the session is kept (reload output, log, status,
    `mqbridge status`), survives a restart, and a route added later that matches gets them all."""
    rules = tmp_path / "rules.yaml"
    other = to_queue("other", "other/#", "OTHER")
    gw = start(gateway_factory, rules, STUCK, other)
    sent = topics("amq/k", 300)
    publish(clients, gw, sent)
    wait_held(gw, "to-amq", 300)
    write_rules(rules, other)
    r = reload(gw)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "reloaded: stopped to-amq, to-amq: kept 300 queued (no route matches)"
    assert kept(gw) == {"to-amq": 300}
    assert "its broker session keeps 300 queued message(s) no route matches (topics amq/k/0, amq/k/1" in gw.log()
    status = gw.cli("status", "--admin", f"http://127.0.0.1:{gw.admin_port}")
    assert "kept   to-amq" in status.stdout and "300 queued message(s) no route matches" in status.stdout
    code, body = gw.admin("/sessions/$route:to-amq", "DELETE")   # would drop them unlogged: refused
    assert code == 409 and "reload --discard to-amq" in body["error"]
    assert gw.stop() == 0
    gw.start()
    assert kept(gw) == {"to-amq": 300}   # a restart keeps it too
    assert depth(gw, "LATER") == 0
    write_rules(rules, other, to_queue("later", "amq/k/#", "LATER"))
    r = reload(gw)
    assert r.returncode == 0, r.stderr
    assert "to-amq: handed 300 to later" in r.stdout
    assert sorted(bodies(gw, "LATER", 300)) == sorted(sent)
    assert kept(gw) == {}


def test_a_kept_message_goes_only_to_a_route_whose_acl_user_may_read_it(
    gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient], tmp_path: Path,
) -> None:
    """Under an ACL file, what a removed route held is handed to a new route only where the new route's
    acl_user may read the topic; the rest stays kept (acknowledged, so never dropped unasked)."""
    rules, acl = tmp_path / "rules.yaml", tmp_path / "acl"
    acl.write_text("topic readwrite amq/#\n\nuser reader\ntopic read amq/k/open/#\n", encoding="utf-8")
    write_rules(rules, STUCK)
    gw = gateway_factory({"rules": str(rules), "broker": {"acl_file": str(acl), "allow_anonymous": True}})
    opened, secret = topics("amq/k/open", 100), topics("amq/k/secret", 100)
    publish(clients, gw, opened + secret)
    wait_held(gw, "to-amq", 200)
    later = {**to_queue("later", "amq/k/#", "LATER"), "options": {"acl_user": "reader"}}
    write_rules(rules, later)
    r = reload(gw)
    assert r.returncode == 0, r.stderr
    assert sorted(bodies(gw, "LATER", 100)) == sorted(opened)
    assert kept(gw) == {"to-amq": 100}
    assert depth(gw, "LATER") == 100


def test_only_routes_that_did_not_have_a_message_get_it(
    gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient], tmp_path: Path,
) -> None:
    """A route that was subscribed when a message was published had its own copy: it is not given the
    removed route's too. One added after the publication is, also when the removal happens at a restart."""
    rules = tmp_path / "rules.yaml"
    had = to_queue("had", "amq/x/#", "HAD")
    gw = start(gateway_factory, rules, STUCK, had)
    xs, ys = topics("amq/x", 20), topics("amq/y", 30)
    publish(clients, gw, xs + ys)
    wait_held(gw, "to-amq", 50)
    assert sorted(bodies(gw, "HAD", 20)) == sorted(xs)
    added = to_queue("added", "amq/y/#", "ADDED")
    write_rules(rules, STUCK, had, added)
    r = reload(gw)
    assert r.returncode == 0 and r.stdout.strip() == "reloaded: started added", r.stdout + r.stderr
    assert gw.stop() == 0
    write_rules(rules, had, added)   # to-amq removed while the gateway is stopped
    gw.start()
    assert sorted(bodies(gw, "ADDED", 30)) == sorted(ys)
    assert kept(gw) == {"to-amq": 20}   # the x ones: "had" had them; nothing else matches
    assert "route to-amq is gone: its queued messages were handed over: 30 to added" in gw.log()
    assert depth(gw, "HAD") == 20


def test_discard_drops_what_a_removed_route_keeps_with_one_record_each(
    gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient], tmp_path: Path,
) -> None:
    rules = tmp_path / "rules.yaml"
    other = to_queue("other", "other/#", "OTHER")
    gw = start(gateway_factory, rules, STUCK, other)
    sent = topics("amq/d", 50)
    publish(clients, gw, sent)
    wait_held(gw, "to-amq", 50)
    r = reload(gw, "--discard", "other")   # a route in the rules: refused, nothing changes
    assert r.returncode == 1 and "--discard other: route other reads from MQTT" in r.stderr
    assert held_by(gw, "to-amq") == 50
    write_rules(rules, other)
    r = reload(gw, "--discard", "to-amq")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "reloaded: stopped to-amq, to-amq: discarded 50"
    assert kept(gw) == {}

    def records() -> list[dict[str, Any]]:
        recs = [json.loads(line) for f in log_files(gw.data_dir / "convlog") for line in f.read_text().splitlines()
                if line]
        egress = [r for r in recs if r["direction"] == "egress"]
        return egress if len(egress) >= 50 else []

    egress = wait_for(records, 15, what="50 egress records")
    assert len(egress) == 50 and len({r["message_key"] for r in egress}) == 50
    assert all(r["status"] == "dropped" and r["route"] == "to-amq" and r["qos"] == 1 for r in egress)
    assert all(r["reason"].startswith("discarded by `mqbridge reload --discard to-amq`") for r in egress)
    assert sorted(r["source_size"] for r in egress) == sorted(len(t) for t in sent)
    assert gw.stop() == 0
    with sqlite3.connect(gw.data_dir / "broker.sqlite3") as db:   # gone from the store, not just hidden
        assert db.execute("SELECT COUNT(*) FROM outbound WHERE client_id='$route:to-amq'").fetchone() == (0,)
        assert db.execute("SELECT COUNT(*) FROM sessions WHERE client_id='$route:to-amq'").fetchone() == (0,)
        assert db.execute("SELECT COUNT(*) FROM messages").fetchone() == (0,)


def test_sigkill_right_after_a_rename_loses_nothing_acknowledged(
    gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient], tmp_path: Path,
) -> None:
    """kill -9 just after the reload answered (the hand-over's store writes may not be committed yet), and
    again while a SIGHUP reload may be running: after each restart every acknowledged publication is
    still held, and they all arrive once a route with a working target takes them."""
    rules = tmp_path / "rules.yaml"
    gw = start(gateway_factory, rules, STUCK)
    sent = topics("amq/k9", 400)
    publish(clients, gw, sent)
    wait_held(gw, "to-amq", 400)
    write_rules(rules, {**STUCK, "name": "first"})   # renamed, its target still down
    r = reload(gw)
    assert r.returncode == 0, r.stderr
    gw.kill()
    gw.start()
    wait_held(gw, "first", 400)
    assert "to-amq: handed 400 to first" in r.stdout
    assert kept(gw) == {}
    write_rules(rules, to_queue("second", "amq/#", "SECOND"))
    assert gw.proc is not None
    gw.proc.send_signal(signal.SIGHUP)
    gw.kill()
    gw.start()
    assert sorted(bodies(gw, "SECOND", 400, timeout=60)) == sorted(sent)
    assert kept(gw) == {}


def test_removing_a_route_that_holds_its_publisher_lets_the_publisher_go(
    gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient], tmp_path: Path,
) -> None:
    """A stuck route past its max_queued holds its publisher (broker.md "Route backpressure"). Removed, it
    lets the publisher go and keeps what it had acknowledged; what the publisher sends afterwards has no
    route (as for any topic nobody subscribes to)."""
    rules = tmp_path / "rules.yaml"
    gw = start(gateway_factory, rules, {**STUCK, "options": {"max_queued": 10}})
    pub = clients(gw.port, "held-pub")
    pub.connect()
    n = 600   # past the route's in-flight window (256) and its max_queued
    infos = [pub.publish(f"amq/h/{i}", b"h", qos=1, wait=False) for i in range(n)]

    def held() -> int:
        (route,) = gw.admin("/status")[1]["routes"]
        acked = sum(i.is_published() for i in infos)
        if route["held_publishers"] == 1 and acked == route["queued"] + route["inflight"]:
            return acked
        return 0

    acked = wait_for(held, 20, what="the publisher held, every PUBACK it got in")
    assert acked < n
    write_rules(rules)
    r = reload(gw)
    assert r.returncode == 0, r.stderr
    wait_for(lambda: all(i.is_published() for i in infos), 20, what="the rest of the PUBACKs")
    assert kept(gw) == {"to-amq": acked}
    assert r.stdout.strip() == f"reloaded: stopped to-amq, to-amq: kept {acked} queued (no route matches)"
