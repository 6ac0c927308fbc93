# Per-route options and route kinds end to end, on a real `mqbridge serve`: MQ <-> JMS routes through
# the embedded store and the session's real ActiveMQ (checked with the Java JmsTool over OpenWire),
# property_map, persistence/priority overrides, json_style, JMS topic templates, a route to one MQTT
# client, and a reload while messages flow.
from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bridge.connectors.base import Inbound
from bridge.connectors.embedded import QueueStore, default_path
from bridge.convlog import log_files
from bridge.routing.convert import RouteConverter
from mappings.conversions.jms_mq import jms_to_mq_bytes, mq_bytes_to_jms
from mappings.jms.model import (
    DeliveryMode,
    JmsHeaders,
    JmsMessage,
    MapBody,
    StreamBody,
    TextBody,
    TypedMap,
    jchar,
    jdouble,
    jint,
    jlong,
    jstring,
)
from mappings.mq import constants as C
from mappings.mq.message import decode_message
from mappings.rules.model import Route
from tests.support.activemq import BrokerEndpoints
from tests.support.gateway import GatewayProcess, free_port, wait_for
from tests.support.jmstool import JmsTool, typed
from tests.support.mqtt_clients import PahoClient

STRING = "java.lang.String"
activemq = pytest.mark.activemq


@pytest.fixture
def tag() -> str:
    return uuid.uuid4().hex[:10]


def start(gateway_factory: Callable[..., GatewayProcess], tmp_path: Path, routes: list[dict[str, Any]],
          amq: BrokerEndpoints | None = None) -> GatewayProcess:
    rules: dict[str, Any] = {"routes": routes}
    if amq is not None:
        rules["connectors"] = {"amq": {"type": "jms", "host": amq.host, "port": amq.stomp_port,
                                       "heartbeat_ms": 2000, "reconnect_max_seconds": 1.0}}
    path = tmp_path / "rules.yaml"
    path.write_text(json.dumps(rules, indent=1))
    return gateway_factory({"rules": str(path)})


def store_of(gw: GatewayProcess) -> QueueStore:
    return QueueStore(default_path(gw.data_dir)).open()


def egress(gw: GatewayProcess, route: str, count: int) -> list[dict[str, Any]]:
    def found() -> list[dict[str, Any]]:
        recs = []
        for f in log_files(gw.data_dir / "convlog"):
            recs += [r for line in f.read_text().splitlines() if line
                     and (r := json.loads(line))["direction"] == "egress" and r["route"] == route]
        return recs if len(recs) >= count else []

    return wait_for(found, 15, what=f"{count} egress records of {route}")


def changes(record: dict[str, Any]) -> set[tuple[str, str]]:
    return {(f["change"], f["name"]) for f in record["findings"]}


# ------------------------------------------------------------------------------ MQ <-> JMS


@activemq
def test_mq_message_reaches_a_jms_consumer_with_renamed_properties_and_overrides(
    gateway_factory: Callable[..., GatewayProcess], activemq: BrokerEndpoints, jmstool: JmsTool, tmp_path: Path,
    tag: str,
) -> None:
    """Embedded queue -> ActiveMQ queue: WMB's MQJMSTransform (RFH2 jms/usr -> JMS headers and
    properties), the route's property_map and its persistence/priority overrides."""
    queue = f"q2j.{tag}"
    gw = start(gateway_factory, tmp_path, [
        {"name": "q2j", "from": {"queue": "TO.JMS"}, "to": {"connector": "amq", "queue": queue},
         "options": {"property_map": {"colour": "color"}, "priority": 7, "persistence": "not_persistent"}}],
        activemq)
    source = JmsMessage(JmsHeaders(correlation_id="corr-1", type="order", priority=2,
                                   delivery_mode=DeliveryMode.PERSISTENT),
                        TypedMap([("colour", jstring("blue")), ("n", jint(5))], what="property"),
                        TextBody("héllo from MQ"))
    data, _ = jms_to_mq_bytes(source, now_ms=1_700_000_000_000)
    assert decode_message(data).md.persistence == C.MQPER_PERSISTENT and decode_message(data).md.priority == 2
    store = store_of(gw)
    try:
        store.put("TO.JMS", data)
        (got,) = jmstool.receive(f"queue://{queue}", 1, timeout=20)
        wait_for(lambda: store.depth("TO.JMS") == 0, 10, what="the MQ message to be confirmed (removed)")
    finally:
        store.close()
    assert got["class"].endswith("ActiveMQTextMessage") and got["body"] == "héllo from MQ"
    h = got["headers"]
    assert (h["correlationId"], h["type"], h["priority"], h["deliveryMode"]) == ("corr-1", "order", 7,
                                                                                   "NON_PERSISTENT")
    assert got["properties"]["color"] == {"type": STRING, "value": "blue"}
    assert "colour" not in got["properties"]
    assert got["properties"]["n"] == {"type": STRING, "value": "5"}   # STOMP: every property a String
    (rec,) = egress(gw, "q2j", 1)
    assert rec["status"] == "ok" and rec["source_protocol"] == "mq" and rec["target_protocol"] == "jms"
    assert {("renamed", "colour"), ("coerced", "n")} <= changes(rec)   # the log says what changed


@activemq
def test_jms_map_message_reaches_the_embedded_queue_as_mq_bytes_with_overrides(
    gateway_factory: Callable[..., GatewayProcess], activemq: BrokerEndpoints, jmstool: JmsTool, tmp_path: Path,
    tag: str,
) -> None:
    """ActiveMQ queue -> embedded queue: WMB's JMSMQTransform (MQMD + RFH2 mcd/jms/usr + the
    map's XML body), property_map, and persistence/priority overrides on the MQMD and the jms folder."""
    queue = f"j2q.{tag}"
    gw = start(gateway_factory, tmp_path, [
        {"name": "j2q", "from": {"connector": "amq", "queue": queue}, "to": {"queue": "FROM.JMS"},
         "options": {"property_map": {"region": "area"}, "priority": 1, "persistence": "persistent"}}],
        activemq)
    jmstool.send(f"queue://{queue}", {
        "type": "Map", "headers": {"deliveryMode": "NON_PERSISTENT", "priority": 8, "correlationId": "c-9"},
        "properties": {"region": typed("String", "eu")},
        "body": {"i": typed("int", 1), "l": typed("long", 2**40), "d": typed("double", 0.5),
                 "c": typed("char", "z"), "s": typed("String", "5")}})
    store = store_of(gw)
    try:
        wait_for(lambda: store.depth("FROM.JMS") == 1, 20, what="the JMS message on FROM.JMS")
        raw = store.browse("FROM.JMS")[0].data
    finally:
        store.close()
    msg = decode_message(raw)
    assert msg.md.persistence == C.MQPER_PERSISTENT and msg.md.priority == 1   # the route's overrides
    assert msg.rfh2_folder("mcd").value("Msd") == "jms_map"   # type: ignore[union-attr]
    jms, _ = mq_bytes_to_jms(raw, now_ms=0)
    assert isinstance(jms.body, MapBody)
    assert dict(jms.body.entries.items()) == {"i": jint(1), "l": jlong(2**40), "d": jdouble(0.5),
                                              "c": jchar("z"), "s": jstring("5")}   # every Java type kept
    assert jms.headers.correlation_id == "c-9"
    # a JMS reader of the MQ message sees the route's overrides too (jms/Dlv wins over MQMD.Persistence)
    assert (jms.headers.delivery_mode, jms.headers.priority) == (DeliveryMode.PERSISTENT, 1)
    assert jms.properties.get("area") == jstring("eu") and "region" not in jms.properties
    (rec,) = egress(gw, "j2q", 1)
    assert rec["status"] == "ok" and rec["source_type"] == "MapMessage" and rec["target_protocol"] == "mq"
    assert ("renamed", "region") in changes(rec)


# ------------------------------------------------------------------------------ json_style


@activemq
@pytest.mark.parametrize("style", ["plain", "typed"])
def test_json_style_of_a_map_message_for_mqtt(
    style: str, gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient],
    activemq: BrokerEndpoints, jmstool: JmsTool, tmp_path: Path, tag: str,
) -> None:
    queue = f"js.{tag}"
    gw = start(gateway_factory, tmp_path, [
        {"name": "js", "from": {"connector": "amq", "queue": queue}, "to": {"mqtt": "js/out"},
         "options": {"json_style": style}}], activemq)
    sub = clients(gw.port).connect()
    sub.subscribe("js/out", 1)
    jmstool.send(f"queue://{queue}", {"type": "Map", "body": {
        "i": typed("int", 1), "l": typed("long", 7), "s": typed("String", "5"), "f": typed("float", 2.5)}})
    (m,) = sub.wait_messages(1, timeout=20)
    body = json.loads(m.payload)
    if style == "plain":   # amlen Table 1, docs/json-forms.md plain form
        assert body == {"i": 1, "l": 7, "s": "5", "f": 2.5}
    else:                  # the typed form: reads back to the same Java types
        assert body == {"i": {"type": "int", "value": 1}, "l": {"type": "long", "value": 7},
                        "s": {"type": "String", "value": "5"}, "f": {"type": "float", "value": 2.5}}


def _converter(options: dict[str, Any]) -> RouteConverter:
    route = Route.model_validate({"name": "r", "from": {"connector": "amq", "queue": "q"},
                                  "to": {"mqtt": "out"}, "options": options})
    return RouteConverter(route, "jms", "mqtt")


def test_json_style_typed_stream_and_persistence_override_to_mqtt() -> None:
    """Stream bodies cannot arrive over STOMP (README), so the stream form is checked on the route's
    converter; persistence overrides the QoS rule (PERSISTENT -> 2, NON_PERSISTENT -> 0)."""
    jms = JmsMessage(JmsHeaders(delivery_mode=DeliveryMode.PERSISTENT),
                     body=StreamBody((jint(1), jstring("x"), jdouble(0.5))))
    item = Inbound("k", "jms", jms, "StreamMessage", 0, "q", time.time())
    out, _, _ = _converter({"json_style": "typed", "persistence": "not_persistent"}).convert(item)
    assert json.loads(out.message.payload) == [   # type: ignore[attr-defined]
        {"type": "int", "value": 1}, {"type": "String", "value": "x"}, {"type": "double", "value": 0.5}]
    assert out.message.qos == 0   # type: ignore[attr-defined]
    out, _, _ = _converter({}).convert(item)
    assert json.loads(out.message.payload) == [1, "x", 0.5] and out.message.qos == 2   # type: ignore[attr-defined]


# ------------------------------------------------------------------------------ MQTT -> JMS topic names


@activemq
def test_mqtt_topic_levels_become_an_activemq_topic_name_with_overrides(
    gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient],
    activemq: BrokerEndpoints, jmstool: JmsTool, tmp_path: Path, tag: str,
) -> None:
    """MQTT ``plant/7/temp`` -> ActiveMQ ``t<tag>.7.temp`` by a template in ActiveMQ's dotted naming;
    a QoS 0 publication is made PERSISTENT with priority 8 by the route."""
    root = f"t{tag}"
    gw = start(gateway_factory, tmp_path, [
        {"name": "m2t", "from": {"mqtt": "plant/#"}, "to": {"connector": "amq", "topic": root + ".{2}.{3}"},
         "options": {"persistence": "persistent", "priority": 8}}], activemq)
    receiver = jmstool.start_receiver(f"topic://{root}.7.temp", 1, timeout=20)
    pub = clients(gw.port, "dev-7").connect()
    pub.publish("plant/7/temp", b"21.5", qos=0)
    (m,) = receiver.result()
    assert m["body"] == "21.5" and m["headers"]["destination"] == f"topic://{root}.7.temp"
    assert (m["headers"]["deliveryMode"], m["headers"]["priority"]) == ("PERSISTENT", 8)


# ------------------------------------------------------------------------------ to one MQTT client


def test_route_to_one_client_reaches_only_it_and_waits_for_its_session(
    gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient], tmp_path: Path,
) -> None:
    """``to: {mqtt: topic, client_id: X}`` (MQ Telemetry Table 4, a message sent to one client): only X gets it,
    with no subscription; while X has no session the messages stay on the source queue."""
    gw = start(gateway_factory, tmp_path, [
        {"name": "one", "from": {"queue": "TO.DEV1"}, "to": {"mqtt": "direct/{topic}", "client_id": "dev-1"}}])
    other = clients(gw.port, "other").connect()
    other.subscribe("#", 1)
    put = gw.cli("queue", "--data-dir", str(gw.data_dir), "put", "TO.DEV1", "--payload", "early", "--topic",
                 "cmd/a", "--persistent")
    assert put.returncode == 0, put.stderr
    store = store_of(gw)
    try:
        wait_for(lambda: "has no session" in json.dumps(gw.admin("/status")[1]), 10,
                 what="the route to report the missing session")
        assert store.depth("TO.DEV1") == 1   # kept at the source, not confirmed
        dev = clients(gw.port, "dev-1", clean_session=False).connect()   # no subscription at all
        (m,) = dev.wait_messages(1, timeout=20)
        assert (m.topic, m.payload, m.qos) == ("direct/cmd/a", b"early", 2)   # Table 4: PERSISTENT -> QoS 2
        wait_for(lambda: store.depth("TO.DEV1") == 0, 10, what="the source to be confirmed")
        put = gw.cli("queue", "--data-dir", str(gw.data_dir), "put", "TO.DEV1", "--payload", "late", "--topic",
                     "cmd/b")
        assert put.returncode == 0, put.stderr
        wait_for(lambda: len(dev.messages) == 2, 10, what="the second message at dev-1")
    finally:
        store.close()
    assert dev.messages[1].payload == b"late"
    assert other.messages == []   # a subscriber to '#' sees none of them


# ------------------------------------------------------------------------------ reload under load


def test_reload_while_messages_flow_loses_none(
    gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient], tmp_path: Path,
) -> None:
    """A route changed by reload is stopped and started again while a publisher keeps sending QoS 1:
    every publication lands on the queue, some under the old options and some under the new."""
    rules = tmp_path / "rules.yaml"

    def write(priority: int) -> None:
        rules.write_text("routes:\n  - {name: flow, from: {mqtt: 'flow/#'}, to: {queue: FLOW},"
                         f" options: {{priority: {priority}}}}}\n")

    write(1)
    gw = gateway_factory({"rules": str(rules)})
    pub = clients(gw.port, "flow-pub", clean_session=False).connect()
    infos: list[Any] = []
    stop = threading.Event()

    def publish() -> None:   # until told to stop, in steps of 20 acknowledged publications
        i = 0
        while not stop.is_set():
            infos.extend(pub.publish(f"flow/{i + k}", str(i + k).encode(), qos=1, wait=False) for k in range(20))
            infos[-1].wait_for_publish(10)
            i += 20

    store = store_of(gw)
    sender = threading.Thread(target=publish, daemon=True)
    try:
        sender.start()
        reloads = []
        for priority in (6, 1, 6, 1, 6):
            before = store.depth("FLOW")
            wait_for(lambda b=before: store.depth("FLOW") > b, 20, what="messages flowing before the reload")
            write(priority)
            r = gw.cli("reload", "--admin", f"http://127.0.0.1:{gw.admin_port}")
            assert r.returncode == 0, r.stderr
            reloads.append(r.stdout.strip())
        before = store.depth("FLOW")
        wait_for(lambda: store.depth("FLOW") > before, 20, what="messages flowing after the last reload")
        stop.set()
        sender.join(30)
        assert not sender.is_alive()
        n = len(infos)
        wait_for(lambda: all(i.is_published() for i in infos), 20, what="every PUBACK")
        want = {str(i).encode() for i in range(n)}

        def landed() -> list[Any]:
            msgs = [decode_message(m.data) for m in store.browse("FLOW", limit=10 * n)]
            return msgs if {m.body for m in msgs} >= want else []

        msgs = wait_for(landed, 30, what=f"all {n} publications on FLOW")   # none lost
    finally:
        stop.set()
        store.close()
    assert reloads == ["reloaded: started flow"] * 5   # each reload restarted the route
    assert {m.body for m in msgs} == want   # and nothing else (a redelivery may repeat one)
    assert {m.md.priority for m in msgs} == {1, 6}   # messages went through both versions of the route


# ------------------------------------------------------------------------------ what a route drops


def test_qos0_publications_a_stuck_route_drops_are_in_the_conversion_log(
    gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient], tmp_path: Path,
) -> None:
    """A route whose target is unreachable keeps what it took; it takes QoS 0 up to its backlog of 10,000
    and drops what goes beyond (QoS 0 promises nothing), each drop an egress record with status
    ``dropped`` and the reason, so the audit sees it. QoS 1/2 are never dropped: their publishers are
    held instead (tests/test_gateway_backpressure.py)."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(json.dumps({
        "connectors": {"down": {"type": "jms", "host": "127.0.0.1", "port": free_port(),
                                "reconnect_max_seconds": 1.0}},
        "routes": [{"name": "stuck", "from": {"mqtt": "drop/#"}, "to": {"connector": "down", "queue": "Q"}}]}))
    gw = gateway_factory({"rules": str(rules)})
    pub = clients(gw.port, "dropper").connect()
    for i in range(11_000):
        pub.publish(f"drop/q0/{i}", b"y", qos=0)
    pub.publish("drop/sync", b"z", qos=1)      # after every QoS 0 one on the same connection

    def dropped() -> list[dict[str, Any]]:
        recs = []
        for f in log_files(gw.data_dir / "convlog"):
            recs += [r for line in f.read_text().splitlines()
                     if line and (r := json.loads(line))["status"] == "dropped"]
        (route,) = gw.admin("/status")[1]["routes"]
        return recs if recs and len(recs) == route["dropped"] else []

    recs = wait_for(dropped, 20, what="the dropped records to match the route's dropped count")
    assert recs and all(r["qos"] == 0 for r in recs)
    assert all(r["destination"] is None and r["route"] == "stuck" and r["direction"] == "egress" for r in recs)
    assert all("QoS 0 publication dropped: the route has 10000 waiting" == r["reason"] for r in recs)
    assert all(r["message_key"].startswith("mqtt:") and r["client_id"] is None for r in recs)
