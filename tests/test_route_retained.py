"""Retained messages and routes (issue #17, a decision): a route that starts, at boot or through a reload,
does not receive the retained messages already held. Its broker session is persistent and never expires,
so it got each retained publication when it was made (with mqps/Ret=1); replaying them at every start
would put them on the target again at every restart and reload. docs/connectors.md says so."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bridge.connectors.embedded import QueueStore, default_path
from mappings.mq.message import decode_message
from tests.support.gateway import GatewayProcess, wait_for
from tests.support.mqtt_clients import PahoClient


def test_a_route_that_starts_gets_no_retained_replay(gateway_factory: Callable[..., GatewayProcess],
                                                     tmp_path: Path, clients: Callable[..., PahoClient]) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("routes:\n  - {name: other, from: {mqtt: 'other/#'}, to: {queue: QO}}\n")
    gw = gateway_factory({"rules": str(rules)})
    pub = clients(gw.port).connect()
    pub.publish("r/old", b"retained before the route", qos=1, retain=True)
    watcher = clients(gw.port).connect()
    watcher.subscribe("r/#", 1)   # the broker holds it: a new subscriber gets it
    assert watcher.wait_messages(1)[0].payload == b"retained before the route"

    rules.write_text("routes:\n  - {name: keep, from: {mqtt: 'r/#'}, to: {queue: QR}}\n")
    r = gw.cli("reload", "--admin", f"http://127.0.0.1:{gw.admin_port}")
    assert r.returncode == 0, r.stderr
    pub.publish("r/new", b"after the route", qos=1, retain=True)
    store = QueueStore(default_path(gw.data_dir)).open()
    try:
        wait_for(lambda: store.depth("QR") == 1, 10, what="the publication made after the route started")
        (only,) = [decode_message(m.data) for m in store.browse("QR")]
        assert only.body == b"after the route"
        assert only.rfh2_folder("mqps").value("Ret") == "1"   # type: ignore[union-attr]
        gw.stop()
        store.close()
        gw.start()   # a restart replays nothing either
        store = QueueStore(default_path(gw.data_dir)).open()
        clients(gw.port).connect().publish("r/marker", b"m", qos=1)
        wait_for(lambda: store.depth("QR") == 2, 10, what="the marker after the restart")
        assert [decode_message(m.data).body for m in store.browse("QR")] == [b"after the route", b"m"]
    finally:
        store.close()
