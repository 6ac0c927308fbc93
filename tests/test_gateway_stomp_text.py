"""Text through the STOMP connector, both ways, with characters above U+FFFF and NUL: a Java consumer's
getText() and an MQTT subscriber get exactly what was sent, and the conversion log reports no loss.

ActiveMQ reads and writes STOMP text bodies in Java's modified UTF-8 (docs/stomp-facts.md §10). Before,
an emoji from MQTT made the Java consumer's getText() fail (UTFDataFormatException) while the log said
``ok``, and an emoji from Java reached MQTT as six U+FFFD."""
from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bridge.convlog import log_files
from tests.support.activemq import BrokerEndpoints
from tests.support.gateway import GatewayProcess, wait_for
from tests.support.jmstool import JmsTool
from tests.support.mqtt_clients import PahoClient

pytestmark = pytest.mark.activemq

TEXTS = ["smile \U0001F600 and \U0001D11E", "caf\u00e9 \u4e2d", "nul\x00inside \U0001F4A9"]


def _gateway(gateway_factory: Callable[..., GatewayProcess], tmp_path: Path, activemq: BrokerEndpoints,
             queue: str) -> GatewayProcess:
    rules = tmp_path / "rules.yaml"
    rules.write_text(json.dumps({
        "connectors": {"amq": {"type": "jms", "host": activemq.host, "port": activemq.stomp_port}},
        "routes": [
            {"name": "m2j", "from": {"mqtt": "txt/out/#"}, "to": {"connector": "amq", "queue": queue},
             "options": {"convert_message_type": "text"}},
            {"name": "j2m", "from": {"connector": "amq", "queue": f"{queue}.in"}, "to": {"mqtt": "txt/in"}},
        ]}))
    return gateway_factory({"rules": str(rules)})


def _egress(gw: GatewayProcess, route: str, count: int) -> list[dict[str, Any]]:
    def read() -> list[dict[str, Any]]:
        recs = [json.loads(line) for f in log_files(gw.data_dir / "convlog") for line in f.read_text().splitlines()
                if line]
        return [r for r in recs if r["route"] == route and r["direction"] == "egress"]
    return wait_for(lambda: len(r := read()) >= count and r, 15, what=f"{count} egress records of {route}")


def test_text_above_the_bmp_and_with_nul_crosses_stomp_both_ways(
        gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient],
        activemq: BrokerEndpoints, jmstool: JmsTool, tmp_path: Path) -> None:
    queue = f"txt.{uuid.uuid4().hex[:10]}"
    gw = _gateway(gateway_factory, tmp_path, activemq, queue)
    wait_for(lambda: " up: connected" in gw.log(), 20, what="the STOMP link up")

    pub = clients(gw.port).connect()
    for i, text in enumerate(TEXTS):
        pub.publish(f"txt/out/{i}", text.encode(), qos=1)
    got = jmstool.receive(f"queue://{queue}", len(TEXTS), timeout=20)
    assert [m["body"] for m in got] == TEXTS
    assert all(m["class"].endswith("TextMessage") and "amq-msg-type" not in m["properties"] for m in got)
    for rec in _egress(gw, "m2j", len(TEXTS)):
        assert rec["status"] == "ok"
        assert not [f for f in rec["findings"] if f["name"] in ("body", "payload")], rec["findings"]

    sub = clients(gw.port).connect()
    sub.subscribe("txt/in", 1)
    jmstool.send(f"queue://{queue}.in", *({"type": "Text", "body": t} for t in TEXTS))
    assert [m.payload for m in sub.wait_messages(len(TEXTS))] == [t.encode() for t in TEXTS]
    for rec in _egress(gw, "j2m", len(TEXTS)):
        assert not [f for f in rec["findings"] if f["name"] == "body"], rec["findings"]
