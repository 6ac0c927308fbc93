"""The native JMS connector configured through JNDI (ActiveMQ's own InitialContextFactory, its ``queue.X`` and
``topic.Y`` environment entries) through a running gateway: routes both ways by JNDI name, a durable topic
subscription that keeps what is published while the gateway is stopped, and a bad JNDI name refused by
``mqbridge validate`` and at start, naming the setting."""
from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge.connectors.embedded import QueueStore, default_path
from mappings.jms.model import TextBody
from mappings.mq import constants as C
from mappings.mq.message import build_message, encode_message
from mappings.mq.mqmd import Mqmd
from mappings.mq.rfh2 import Rfh2, RfhElement, RfhFolder
from tests.support.activemq import BrokerEndpoints
from tests.support.embedded_store import jms_messages
from tests.support.gateway import GatewayProcess, wait_for
from tests.support.jmstool import JmsTool, native_connector_yaml, typed
from tests.support.mqtt_clients import PahoClient

pytest.importorskip("jpype", reason="jpype1 not installed (pip install 'mqbridge[jms]')")
pytestmark = pytest.mark.activemq


def _rules(activemq: BrokerEndpoints, tag: str) -> str:
    return native_connector_yaml(
        None, f"client_id: mqbridge-jndi-{tag}", "jndi:",
        "  initial_context_factory: org.apache.activemq.jndi.ActiveMQInitialContextFactory",
        f'  provider_url: "{activemq.openwire_url}"', "  connection_factory: ConnectionFactory", "  environment:",
        f"    queue.orders: jndi.out.{tag}", f"    queue.incoming: jndi.in.{tag}",
        f"    topic.prices: jndi.prices.{tag}", f"    queue.telemetry: jndi.mqtt.{tag}") + f"""\
routes:
  - name: to-amq
    from: {{queue: JNDI.OUT}}
    to: {{connector: amq, queue: orders}}
  - name: from-amq
    from: {{connector: amq, queue: incoming}}
    to: {{queue: JNDI.IN}}
  - name: prices
    from: {{connector: amq, topic: prices, subscription: prices-{tag}}}
    to: {{queue: JNDI.PRICES}}
  - name: from-mqtt
    from: {{mqtt: "jndi/#"}}
    to: {{connector: amq, queue: telemetry}}
"""


@pytest.fixture(scope="module")
def jndi_gw(activemq: BrokerEndpoints, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayProcess,
                                                                                                   str]]:
    tag = uuid.uuid4().hex[:8]
    base = tmp_path_factory.mktemp("jndi")
    rules = base / "rules.yaml"
    rules.write_text(_rules(activemq, tag))
    (base / "gw").mkdir()
    gw = GatewayProcess(base / "gw", {"rules": str(rules)}).start(timeout=60)
    try:
        yield gw, tag
    finally:
        gw.stop()


def _texts(gw: GatewayProcess, queue: str) -> list[tuple[str | None, int | None]]:
    """The (text, property "n") of each message on an embedded queue."""
    out = []
    for msg in jms_messages(gw.data_dir, queue):
        n = msg.properties.get("n")
        out.append((msg.body.text if isinstance(msg.body, TextBody) else None,
                    int(n.value) if n is not None and n.value is not None else None))
    return out


def test_routes_both_ways_by_jndi_name(jndi_gw: tuple[GatewayProcess, str], jmstool: JmsTool) -> None:
    gw, tag = jndi_gw
    usr = RfhFolder("usr", (RfhElement("n", "7", "i4"),))
    data = encode_message(build_message(Mqmd(persistence=C.MQPER_PERSISTENT), (Rfh2(folders=(usr,)),),
                                        b"by name", body_format=C.MQFMT_STRING))
    store = QueueStore(default_path(gw.data_dir)).open()
    try:
        store.put("JNDI.OUT", data)
    finally:
        store.close()
    (got,) = jmstool.receive(f"queue://jndi.out.{tag}", 1, timeout=20)   # JNDI "orders" -> its physical name
    assert got["body"] == "by name" and got["properties"]["n"] == {"type": "java.lang.Integer", "value": 7}
    jmstool.send(f"queue://jndi.in.{tag}", {"type": "Text", "body": "back", "properties": {"n": typed("int", 8)}})
    assert wait_for(lambda: _texts(gw, "JNDI.IN"), 20, what="the message on JNDI.IN") == [("back", 8)]


def test_mqtt_publications_reach_a_jms_consumer_as_jms_messages(
        jndi_gw: tuple[GatewayProcess, str], jmstool: JmsTool, clients: Callable[..., PahoClient]) -> None:
    """MQTT -> JMS builds the JMS model for the native target (the STOMP target's frames are not for it)."""
    gw, tag = jndi_gw
    clients(gw.port, "sensor-1").connect().publish("jndi/room/1", "21.5", qos=1)
    (got,) = jmstool.receive(f"queue://jndi.mqtt.{tag}", 1, timeout=20)
    assert got["type"] == "Text" and got["body"] == "21.5"
    assert got["headers"]["deliveryMode"] == "PERSISTENT"          # QoS 1 (Amlen, MQTT -> JMS)


def test_a_durable_subscription_keeps_what_is_published_while_the_gateway_is_stopped(
        jndi_gw: tuple[GatewayProcess, str], jmstool: JmsTool) -> None:
    gw, tag = jndi_gw
    topic = f"topic://jndi.prices.{tag}"

    def probe_arrived() -> bool:   # the subscription exists once a probe published to the topic arrives
        jmstool.send(topic, {"type": "Text", "body": "probe"})
        return any(text == "probe" for text, _ in _texts(gw, "JNDI.PRICES"))

    wait_for(probe_arrived, 30, interval=0.5, what="the durable subscription to take a probe")
    assert gw.stop() == 0
    jmstool.send(topic, *({"type": "Text", "body": "while away", "properties": {"n": typed("int", i)}}
                          for i in range(3)))
    gw.start(timeout=60)
    wait_for(lambda: len([t for t, _ in _texts(gw, "JNDI.PRICES") if t == "while away"]) >= 3, 30,
             what="the three messages published while the gateway was stopped")
    away = [n for text, n in _texts(gw, "JNDI.PRICES") if text == "while away"]
    assert sorted(away) == [0, 1, 2]
    code, status = gw.admin("/status")
    (row,) = [r for r in status["routes"] if r["route"] == "prices"]
    assert code == 200 and row["source_link"]["state"] == "up"


def _validate(rules: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bridge", "validate", str(rules)], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize(("change", "named"), [
    (("connection_factory: ConnectionFactory", "connection_factory: NoSuchFactory"),
     "connectors.amq.jndi.connection_factory: JNDI name 'NoSuchFactory' not found"),
    (("queue: incoming}", "queue: nosuchqueue}"), "route from-amq: from.queue: JNDI name 'nosuchqueue' not found"),
    (("org.apache.activemq.jndi.ActiveMQInitialContextFactory", "org.example.NoContextFactory"),
     "connectors.amq.jndi.initial_context_factory 'org.example.NoContextFactory'"),
])
def test_a_bad_jndi_name_fails_validate_and_start_naming_the_setting(
        activemq: BrokerEndpoints, tmp_path: Path, change: tuple[str, str], named: str) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(_rules(activemq, "v").replace(*change))
    checked = _validate(rules)
    assert checked.returncode == 1 and named in checked.stderr, checked.stderr
    if "NoSuchFactory" in named:   # the good file passes; the start refuses the bad one the same way (once)
        good = tmp_path / "good.yaml"
        good.write_text(_rules(activemq, "v"))
        passed = _validate(good)
        assert passed.returncode == 0 and "OK" in passed.stdout, passed.stderr
        (tmp_path / "gw").mkdir()
        with pytest.raises(AssertionError, match="mqbridge exited with 1") as exc:
            GatewayProcess(tmp_path / "gw", {"rules": str(rules)}).start(timeout=60)
        assert named in str(exc.value)


@pytest.mark.parametrize(("change", "named"), [
    (("    client_id:", "    connection_factory: org.apache.activemq.ActiveMQConnectionFactory\n    client_id:"),
     "one of connection_factory (its javax.jms.ConnectionFactory class) or jndi"),
    (("    client_id: mqbridge-jndi-x\n", ""), "a durable subscription needs connectors.amq.client_id"),
    (("topic: prices, subscription", "queue: incoming, subscription"), "a durable subscription is on a topic"),
    (("    client_id:", "    jvm_options: [Xmx64m]\n    client_id:"), "'Xmx64m' is not a JVM option"),
    (("    client_id:", "    jvm_options: [-XX:+NoSuchOption]\n    client_id:"),
     "cannot start a JVM (Unable to start JVM): check connectors.amq.jvm_options ['-XX:+NoSuchOption']"),
])
def test_connector_settings_that_cannot_work_are_refused_by_validate(tmp_path: Path, change: tuple[str, str],
                                                                    named: str) -> None:
    rules = tmp_path / "rules.yaml"
    text = _rules(BrokerEndpoints("127.0.0.1", 1, 2, 3), "x")
    assert change[0] in text
    rules.write_text(text.replace(*change))
    checked = _validate(rules)
    assert checked.returncode == 1 and named in checked.stderr, checked.stderr


MANAGEMENT_JAR = '"/usr/share/java/geronimo-j2ee-management-1.1-spec.jar"'   # ActiveMQ's factory needs its Stats


def _class_rules(activemq: BrokerEndpoints) -> str:
    """The same connector by its connection factory class, with one route from it."""
    return native_connector_yaml(activemq.openwire_url) + """\
routes:
  - name: from-amq
    from: {connector: amq, queue: jars.in}
    to: {queue: JARS.IN}
"""


@pytest.mark.parametrize("style", ["class", "jndi"])
@pytest.mark.parametrize(("change", "named"), [
    (("jars: [", 'jars: ["/nonexistent/provider-*.jar", '), "connectors.amq.jars: '/nonexistent/provider-*.jar' "
                                                           "matches no file"),
    ((", " + MANAGEMENT_JAR, ""), "cannot load: it needs class javax.management.j2ee.statistics.Stats, which none "
                                  "of the jars holds (a dependency jar left out?)"),
])
def test_a_jar_that_is_missing_fails_validate_naming_the_jars_setting(
        tmp_path: Path, style: str, change: tuple[str, str], named: str) -> None:
    """A glob that matches nothing, and a dependency jar left out so that the factory class (or JNDI's initial
    context factory) cannot load: `validate` exits 1 with one line naming connectors.amq.jars (not a
    traceback, not the connector's name twice)."""
    broker = BrokerEndpoints("127.0.0.1", 1, 2, 3)   # no provider is needed to find either
    text = _class_rules(broker) if style == "class" else _rules(broker, "j")
    assert change[0] in text
    rules = tmp_path / "rules.yaml"
    rules.write_text(text.replace(*change, 1))
    checked = _validate(rules)
    problems = [line for line in checked.stderr.splitlines() if line.startswith(str(rules))]
    assert checked.returncode == 1 and len(problems) == 1, checked.stderr
    assert f"{rules}: connectors.amq.jars: " in problems[0] and named in problems[0], checked.stderr
    assert "Traceback" not in checked.stderr and "connectors.amq: connectors.amq" not in checked.stderr


def test_a_dependency_jar_the_client_needs_only_once_connected_is_named_by_the_link_status(
        activemq: BrokerEndpoints, gateway_factory: Callable[..., GatewayProcess], tmp_path: Path) -> None:
    """ActiveMQ's client loads hawtbuf only once it talks to the broker: `validate` cannot see it missing (it
    does not connect), and the route's link says which setting to fix instead of a bare NoClassDefFoundError."""
    rules = tmp_path / "rules.yaml"
    text = _class_rules(activemq)
    hawtbuf = ', "/usr/share/java/hawtbuf.jar"'
    assert hawtbuf in text
    rules.write_text(text.replace(hawtbuf, ""))
    gw = gateway_factory({"rules": str(rules)})

    def link() -> dict[str, Any] | None:
        code, status = gw.admin("/status")
        (row,) = [r for r in status["routes"] if r["route"] == "from-amq"]
        return row["source_link"] if code == 200 and row["source_link"]["state"] == "down" else None

    # ActiveMQ's client may first fail a send with "Cannot send, channel has already failed" (its transport thread
    # died of the missing class, the send does not carry that cause); the link tries again (1, 2, 4 ... s) and
    # its status settles on the cause
    named = "connectors.amq.jars: no jar holds class org.fusesource.hawtbuf.UTF8Buffer"
    wait_for(lambda: (down := link()) is not None and named in str(down["error"]), 60,
             what="the source link down, naming the jar's class")


@pytest.mark.parametrize(("change", "named"), [
    (("{brokerURL:", "{noSuchProperty: 1, brokerURL:"),
     "connectors.amq.factory_properties: org.apache.activemq.ActiveMQConnectionFactory has no property "
     "'noSuchProperty'"),
    (("{brokerURL:", '{useAsyncSend: "yes", brokerURL:'),
     "connectors.amq.factory_properties.useAsyncSend: 'yes' refused by org.apache.activemq.ActiveMQConnectionFactory"),
])
def test_a_factory_property_the_factory_refuses_fails_validate_and_start_naming_it(
        tmp_path: Path, change: tuple[str, str], named: str) -> None:
    """The connection factory is made and given its properties at validate and at start (it connects only when
    asked, so no provider is needed): a bad one is refused there, not retried for ever by the route's link."""
    text = _class_rules(BrokerEndpoints("127.0.0.1", 1, 2, 3))
    assert change[0] in text
    rules = tmp_path / "rules.yaml"
    rules.write_text(text.replace(*change))
    checked = _validate(rules)
    assert checked.returncode == 1 and f"{rules}: {named}" in checked.stderr, checked.stderr
    (tmp_path / "gw").mkdir()
    with pytest.raises(AssertionError, match="mqbridge exited with 1") as exc:
        GatewayProcess(tmp_path / "gw", {"rules": str(rules)}).start(timeout=60)
    assert named in str(exc.value)
