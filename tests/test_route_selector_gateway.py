"""Route selectors end to end on non-JMS sources: a real `mqbridge serve` process, paho clients, the
embedded queue store (SQLite) shared with the test, the conversion log and the admin channel."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bridge.connectors.embedded import QueueStore, default_path
from bridge.convlog import log_files
from mappings.mq.message import decode_message
from mappings.selector.views import mq_view
from tests.mq_support import usr_message
from tests.support.gateway import REPO, GatewayProcess, wait_for
from tests.support.mqtt_clients import PahoClient


def _records(gw: GatewayProcess) -> list[dict[str, object]]:
    out = []
    for f in log_files(gw.data_dir / "convlog"):
        out.extend(json.loads(line) for line in f.read_text().splitlines() if line)
    return out


def _route(gw: GatewayProcess, name: str) -> dict[str, object]:
    code, status = gw.admin("/status")
    assert code == 200
    return next(r for r in status["routes"] if r["route"] == name)


def _n(data: bytes) -> int:
    return int(mq_view(data, time.time())["n"])


MQTT_IN_RULES = """\
routes:
  - name: sel-in
    from: {mqtt: "sel/#"}
    to: {queue: SEL.IN}
    options:
      selector: "JMSDeliveryMode = 'PERSISTENT' AND JMS_SWIFTMQ_CID LIKE 'plant-%'"
"""


def test_mqtt_source_selector_lands_only_matching_and_acknowledges_the_rest(
        gateway_factory: Callable[..., GatewayProcess], tmp_path: Path, clients: Callable[..., PahoClient]) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(MQTT_IN_RULES)
    gw = gateway_factory({"rules": str(rules)})
    plant = clients(gw.port, "plant-1").connect()
    office = clients(gw.port, "office-1").connect()
    plant.publish("sel/a", b"a", qos=1)       # matches
    plant.publish("sel/b", b"b", qos=0)       # NON_PERSISTENT: filtered
    office.publish("sel/c", b"c", qos=1)      # another client: filtered
    plant.publish("sel/d", b"d", qos=2)       # matches
    office.publish("sel/e", b"e", qos=2)      # filtered
    wait_for(lambda: _route(gw, "sel-in")["filtered"] == 3, 15, what="three publications filtered")
    plant.publish("sel/z", b"z", qos=1)       # a last matching one: everything before it is through
    store = QueueStore(default_path(gw.data_dir)).open()
    try:
        wait_for(lambda: store.depth("SEL.IN") == 3, 15, what="three messages on SEL.IN")
        assert [decode_message(m.data).body for m in store.browse("SEL.IN")] == [b"a", b"d", b"z"]
    finally:
        store.close()
    # moved counts once the batch is confirmed, just after the store has it
    status = wait_for(lambda: (s := _route(gw, "sel-in"))["moved"] == 3 and s, 10, what="moved 3")
    assert status["filtered"] == 3 and status["backout"] == 0
    browse = gw.cli("queue", "--data-dir", str(gw.data_dir), "browse", "SEL.IN")
    assert browse.returncode == 0 and browse.stdout.count("sel/") == 3 and "sel/b" not in browse.stdout
    shown = gw.cli("status", "--admin", f"http://127.0.0.1:{gw.admin_port}")
    assert shown.returncode == 0, shown.stderr
    assert any("sel-in" in line and "filtered 3" in line for line in shown.stdout.splitlines()), shown.stdout
    # the conversion log has only the route's messages: an ingress and an egress record for each of 3
    recs = wait_for(lambda: len(_records(gw)) >= 6 and _records(gw), 15, what="six log records")
    assert sorted(str(r["direction"]) for r in recs) == ["egress"] * 3 + ["ingress"] * 3
    assert {r["destination"] for r in recs if r["direction"] == "ingress"} == {"sel/a", "sel/d", "sel/z"}
    # filtered publications were acknowledged: after a restart the route's session replays none of them.
    # The first clients end first: paho would reconnect "plant-1" after the restart and take the new one over
    plant.disconnect()
    office.disconnect()
    gw.stop()
    gw.start()
    plant = clients(gw.port, "plant-1").connect()
    plant.publish("sel/after", b"after", qos=1)
    store = QueueStore(default_path(gw.data_dir)).open()
    try:
        wait_for(lambda: store.depth("SEL.IN") == 4, 15, what="the publication after the restart")
    finally:
        store.close()
    status = wait_for(lambda: (s := _route(gw, "sel-in"))["moved"] == 1 and s, 10, what="moved 1")
    assert status["filtered"] == 0


QUEUE_OUT_RULES = """\
routes:
  - name: sel-out
    from: {queue: SEL.OUT}
    to: {mqtt: "{topic}"}
    options:
      selector: "region = 'eu' AND n > 1"
"""


def test_queue_source_selector_leaves_non_matching_messages_in_order(
        gateway_factory: Callable[..., GatewayProcess], tmp_path: Path, clients: Callable[..., PahoClient]) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(QUEUE_OUT_RULES)
    gw = gateway_factory({"rules": str(rules)})
    sub = clients(gw.port, "watcher").connect()
    sub.subscribe("out/#", 1)
    regions = ["eu", "us", "eu", "us", "eu", "eu", "us"]
    store = QueueStore(default_path(gw.data_dir)).open()
    try:
        store.put_many([("SEL.OUT", usr_message(i, r)) for i, r in enumerate(regions)])
        got = sub.wait_messages(3, 15)
        assert [m.topic for m in got] == ["out/2", "out/4", "out/5"]
        store.put("SEL.OUT", usr_message(9, "eu"))   # a last matching one: the route went past the rest
        got = sub.wait_messages(4, 15)
        assert [m.payload for m in got] == [b"m2", b"m4", b"m5", b"m9"]
        # the source is confirmed (the message deleted) just after the broker accepted the publication
        wait_for(lambda: store.depth("SEL.OUT") == 4, 10, what="the delivered messages to leave SEL.OUT")
        left = store.browse("SEL.OUT")
        assert [_n(m.data) for m in left] == [0, 1, 3, 6]            # untouched, in their order
        assert all(m.backout_count == 0 for m in left)
    finally:
        store.close()
    status = wait_for(lambda: (s := _route(gw, "sel-out"))["moved"] == 4 and s, 10, what="moved 4")
    assert status["filtered"] == 0   # queue messages are left on the queue, not filtered
    browse = gw.cli("queue", "--data-dir", str(gw.data_dir), "browse", "SEL.OUT")
    assert browse.returncode == 0 and browse.stdout.count("out/") == 4, browse.stdout


def test_validate_refuses_an_invalid_selector_with_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("routes:\n  - name: r1\n    from: {queue: Q1}\n    to: {mqtt: 'x/y'}\n"
                   "    options:\n      selector: \"region = 'eu' AND\"\n")
    r = subprocess.run([sys.executable, "-m", "bridge", "validate", str(bad)], cwd=REPO, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1
    assert f"{bad}:6: routes.0.options.selector: selector does not parse" in r.stderr, r.stderr
