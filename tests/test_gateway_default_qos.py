"""MQ Telemetry Table 4 through a running gateway: a message a route sends to one MQTT client without a
subscription (``to: {mqtt: ..., client_id: X}``) takes at most the QoS of X's own subscription to
``DEFAULT.QoS`` (its granted QoS), ahead of the route's ``default_qos``, which stays the default when X has
no such subscription; the conversion log's egress record says the QoS delivered. Rules: docs/connectors.md.
"""
from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bridge.convlog import log_files
from tests.support.gateway import GatewayProcess, wait_for
from tests.support.mqtt_clients import PahoClient

RULES = """\
routes:
  - name: to-dev1
    from: {queue: TO.DEV1}
    to: {mqtt: "direct/{topic}", client_id: dev-1}
  - name: to-dev0
    from: {queue: TO.DEV0}
    to: {mqtt: "direct/{topic}", client_id: dev-0}
    options: {default_qos: 0}
  - name: to-devw
    from: {queue: TO.DEVW}
    to: {mqtt: "direct/{topic}", client_id: dev-w}
"""


def _egress(gw: GatewayProcess, route: str, count: int) -> list[dict[str, Any]]:
    def found() -> list[dict[str, Any]]:
        recs = [r for f in log_files(gw.data_dir / "convlog") for line in f.read_text().splitlines() if line
                and (r := json.loads(line))["direction"] == "egress" and r["route"] == route]
        return recs if len(recs) >= count else []
    return wait_for(found, 15, what=f"{count} egress records of {route}")


def _put(gw: GatewayProcess, queue: str, payload: str) -> None:
    """A persistent MQ message (MQ Telemetry Table 4: QoS 2 before any limit) with an mqps/Top."""
    done = gw.cli("queue", "--data-dir", str(gw.data_dir), "put", queue, "--payload", payload, "--topic",
                  f"cmd/{payload}", "--persistent")
    assert done.returncode == 0, done.stderr


def _unsubscribe(client: PahoClient, topic: str) -> None:
    acked = threading.Event()
    client.client.on_unsubscribe = lambda *args: acked.set()
    client.client.unsubscribe(topic)
    assert acked.wait(10), f"no UNSUBACK for {topic}"


def test_a_clients_default_qos_subscription_sets_the_qos_of_what_it_is_sent_without_one(
        gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient], tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    gw = gateway_factory({"rules": str(rules)})

    # below the route's default (2): the client's own DEFAULT.QoS subscription at 1 lowers it
    dev1 = clients(gw.port, "dev-1", clean_session=False).connect()
    assert dev1.subscribe("DEFAULT.QoS", 1) == [1]
    _put(gw, "TO.DEV1", "one")
    (m,) = dev1.wait_messages(1, timeout=20)
    assert (m.topic, m.payload, m.qos) == ("direct/cmd/one", b"one", 1)

    # above the route's default_qos 0: the client's subscription at 2 takes precedence
    dev0 = clients(gw.port, "dev-0", clean_session=False).connect()
    assert dev0.subscribe("DEFAULT.QoS", 2) == [2]
    _put(gw, "TO.DEV0", "two")
    (m,) = dev0.wait_messages(1, timeout=20)
    assert (m.topic, m.payload, m.qos) == ("direct/cmd/two", b"two", 2)

    # without the subscription the route's default_qos is the limit again
    _unsubscribe(dev0, "DEFAULT.QoS")
    _put(gw, "TO.DEV0", "three")
    m = dev0.wait_messages(2, timeout=20)[1]
    assert (m.payload, m.qos) == (b"three", 0)

    # only the filter DEFAULT.QoS itself counts: not a wildcard that matches it, not a shared subscription
    devw = clients(gw.port, "dev-w", clean_session=False).connect()
    assert devw.subscribe("+", 0) == [0] and devw.subscribe("$share/g/DEFAULT.QoS", 0) == [0]
    _put(gw, "TO.DEVW", "wild")
    (m,) = devw.wait_messages(1, timeout=20)
    assert (m.payload, m.qos) == (b"wild", 2)

    # the log records the QoS each message was delivered at (the MQ side's persistence gave 2)
    assert [r["qos"] for r in _egress(gw, "to-dev1", 1)] == [1]
    assert [r["qos"] for r in _egress(gw, "to-dev0", 2)] == [2, 0]
    ingress = [r for f in log_files(gw.data_dir / "convlog") for line in f.read_text().splitlines() if line
               and (r := json.loads(line))["direction"] == "ingress"]
    assert {r["qos"] for r in ingress} == {1}   # the MQ source: persistent

    # DEFAULT.QoS is an ordinary subscription otherwise: a publication on that topic reaches its subscribers as
    # MQTT says (at most the granted QoS), and the messages sent to one client reach no other subscriber
    watcher = clients(gw.port, "watcher").connect()
    assert watcher.subscribe("#", 2) == [2]
    clients(gw.port, "pub").connect().publish("DEFAULT.QoS", b"plain", qos=2)
    (seen,) = watcher.wait_messages(1)
    m = dev1.wait_messages(2)[1]
    assert (m.topic, m.payload, m.qos) == ("DEFAULT.QoS", b"plain", 1)
    assert (seen.topic, seen.payload) == ("DEFAULT.QoS", b"plain")
    _put(gw, "TO.DEV1", "four")
    assert dev1.wait_messages(3, timeout=20)[2].payload == b"four"
    assert len(watcher.messages) == 1   # "#" saw the publication, not the message sent to dev-1
    # its wildcard and its shared subscription both match the topic: a copy each, as for any topic
    assert [m.payload for m in devw.wait_messages(3)] == [b"wild", b"plain", b"plain"]
