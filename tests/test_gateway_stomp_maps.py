"""MapMessages through the STOMP connector of a running gateway, against an ActiveMQ in its default
configuration (SERIALIZABLE_PACKAGES not widened): a byte[] value arrives as its base64 String (reported)
instead of turning the message into a TextMessage with ``transformation-error`` while the log said ``ok``,
and a null value is kept both ways instead of being dropped (docs/stomp-facts.md §11)."""
from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge.convlog import log_files
from tests.support.activemq import ActiveMQ, BrokerEndpoints
from tests.support.gateway import GatewayProcess, wait_for
from tests.support.jmstool import JmsTool
from tests.support.mqtt_clients import PahoClient

pytestmark = pytest.mark.activemq


@pytest.fixture(scope="module")
def default_activemq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerEndpoints]:
    broker = ActiveMQ(tmp_path_factory.mktemp("amq-default"), serializable_packages=None)
    try:
        yield broker.start()
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def default_jmstool(default_activemq: BrokerEndpoints, jmstool_classes: Path) -> Iterator[JmsTool]:
    tool = JmsTool(jmstool_classes, default_activemq.openwire_url)
    yield tool
    tool.close()


def _records(gw: GatewayProcess, route: str) -> list[dict[str, Any]]:
    recs = [json.loads(line) for f in log_files(gw.data_dir / "convlog") for line in f.read_text().splitlines() if line]
    return [r for r in recs if r["route"] == route and r["direction"] == "egress"]


def test_map_byte_arrays_and_nulls_reach_a_default_activemq_and_come_back(
        gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient],
        default_activemq: BrokerEndpoints, default_jmstool: JmsTool, tmp_path: Path) -> None:
    queue = f"maps.{uuid.uuid4().hex[:10]}"
    rules = tmp_path / "rules.yaml"
    rules.write_text(json.dumps({
        "connectors": {"amq": {"type": "jms", "host": default_activemq.host, "port": default_activemq.stomp_port}},
        "routes": [
            {"name": "m2j", "from": {"mqtt": "maps/out"}, "to": {"connector": "amq", "queue": queue},
             "options": {"mqtt_format": "envelope"}},
            {"name": "j2m", "from": {"connector": "amq", "queue": f"{queue}.in"}, "to": {"mqtt": "maps/in"},
             "options": {"mqtt_format": "envelope"}},
        ]}))
    gw = gateway_factory({"rules": str(rules)})
    envelope = {"body": {"type": "jms_map", "map": {"raw": {"type": "byte[]", "value": "AAE="},
                                                    "note": {"type": "String", "value": None},
                                                    "n": {"type": "int", "value": 7}}}}
    clients(gw.port).connect().publish("maps/out", json.dumps(envelope).encode(), qos=1)
    got = default_jmstool.receive(f"queue://{queue}", 1, timeout=20)[0]
    assert got["class"].endswith("ActiveMQMapMessage"), got           # not a TextMessage of XML
    assert "transformation-error" not in got["properties"]
    assert got["body"] == {"raw": {"type": "java.lang.String", "value": "AAE="},
                           "note": {"type": None, "value": None}, "n": {"type": "java.lang.Integer", "value": 7}}
    rec = wait_for(lambda: _records(gw, "m2j"), 15, what="the m2j egress record")[0]
    found = {(f["change"], f["name"]) for f in rec["findings"]}
    assert ("coerced", "map:raw") in found and ("dropped", "map:note") not in found

    sub = clients(gw.port).connect()
    sub.subscribe("maps/in", 1)
    default_jmstool.send(f"queue://{queue}.in", {"type": "Map", "body": {
        "note": {"type": "java.lang.String", "value": None}, "n": {"type": "java.lang.Integer", "value": 7}}})
    back = json.loads(sub.wait_messages(1)[0].payload)
    assert back["body"]["type"] == "jms_map"
    assert back["body"]["map"] == {"note": {"type": "String", "value": None}, "n": {"type": "int", "value": 7}}
    rec = wait_for(lambda: _records(gw, "j2m"), 15, what="the j2m egress record")[0]
    assert ("dropped", "map:note") not in {(f["change"], f["name"]) for f in rec["findings"]}


def test_a_message_the_provider_cannot_deliver_goes_to_backout_and_the_rest_flow(
        gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient],
        default_activemq: BrokerEndpoints, default_jmstool: JmsTool, tmp_path: Path) -> None:
    """An ObjectMessage of a class outside ActiveMQ's trusted packages makes the broker close the STOMP
    connection each time it tries to deliver it (before: the route reconnected forever and delivered nothing
    after it). The source narrows down to that message, reads it without the transformation, and the route
    sends it to its backout destination with the reason; the messages around it arrive (bridge.connectors.
    stomp_poison)."""
    queue = f"poison.{uuid.uuid4().hex[:10]}"
    rules = tmp_path / "rules.yaml"
    rules.write_text(json.dumps({
        "connectors": {"amq": {"type": "jms", "host": default_activemq.host, "port": default_activemq.stomp_port}},
        "routes": [{"name": "j2m", "from": {"connector": "amq", "queue": queue}, "to": {"mqtt": "poison/in"},
                    "options": {"mqtt_format": "envelope"}}]}))
    gw = gateway_factory({"rules": str(rules)})
    sub = clients(gw.port).connect()
    sub.subscribe("poison/in", 1)
    default_jmstool.send(f"queue://{queue}", {"type": "Text", "body": "before"},
                         {"type": "Object", "body": {"class": "java.math.BigDecimal", "value": "1.50"}},
                         {"type": "Map", "body": {"n": {"type": "java.lang.Integer", "value": 7}}},
                         {"type": "Text", "body": "after"})

    def bodies() -> list[dict[str, Any]]:
        return [json.loads(m.payload)["body"] for m in sub.messages]

    wait_for(lambda: {"type": "jms_map", "map": {"n": {"type": "int", "value": 7}}} in bodies()
             and any(b.get("text") == "after" for b in bodies()), 60, what="the messages after the poison one")
    assert any(b.get("text") == "before" for b in bodies())
    backed = wait_for(lambda: [r for r in _records(gw, "j2m") if r["status"] == "backout"], 15,
                      what="the backout record")
    assert len(backed) == 1 and "closed the STOMP connection" in backed[0]["reason"], backed
    assert not any(b.get("type") == "jms_object" for b in bodies())

    def link_state() -> str:
        code, status = gw.admin("/status")
        assert code == 200
        (row,) = [r for r in status["routes"] if r["route"] == "j2m"]
        return str(row["source_link"]["state"])

    # the record can be in the log (written within ~10 ms) while the link still reconnects after the narrowing
    wait_for(lambda: link_state() == "up", 30, what="the source link up again")



def test_a_message_the_provider_sends_with_transformation_error_is_a_finding(
        gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient],
        default_activemq: BrokerEndpoints, tmp_path: Path) -> None:
    """``map_byte_arrays: native`` against a broker that does not allow byte[] (the user's setting is wrong):
    ActiveMQ stores a TextMessage of the XML with ``transformation-error``. A route reading it over STOMP
    records that the body is not the message that was sent (a ``coerced body`` finding, not a plain ``ok``)."""
    queue = f"terr.{uuid.uuid4().hex[:10]}"
    rules = tmp_path / "rules.yaml"
    rules.write_text(json.dumps({
        "connectors": {"amq": {"type": "jms", "host": default_activemq.host, "port": default_activemq.stomp_port,
                               "map_byte_arrays": "native"}},
        "routes": [
            {"name": "m2j", "from": {"mqtt": "terr/out"}, "to": {"connector": "amq", "queue": queue},
             "options": {"mqtt_format": "envelope"}},
            {"name": "j2m", "from": {"connector": "amq", "queue": queue}, "to": {"mqtt": "terr/in"}}]}))
    gw = gateway_factory({"rules": str(rules)})
    sub = clients(gw.port).connect()
    sub.subscribe("terr/in", 1)
    envelope = {"body": {"type": "jms_map", "map": {"raw": {"type": "byte[]", "value": "AAE="}}}}
    clients(gw.port).connect().publish("terr/out", json.dumps(envelope).encode(), qos=1)
    assert b"byte-array" in sub.wait_messages(1, timeout=20)[0].payload    # the broker's XML, as text
    rec = wait_for(lambda: _records(gw, "j2m"), 15, what="the j2m egress record")[0]
    found = {(f["change"], f["name"]): f["detail"] for f in rec["findings"]}
    assert "could not transform" in found[("coerced", "body")] and "[B" in found[("coerced", "body")]
