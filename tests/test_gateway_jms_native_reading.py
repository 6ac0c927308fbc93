"""How the native JMS connector reads what it receives, through a running gateway and the session's ActiveMQ:
what the provider answers but nobody set is not carried; an ObjectMessage of a class the gateway's JVM does not
trust is carried as its bytes both ways (never deserialized there); a message no JMS type describes goes to the
route's backout queue with its headers and properties, once, and not through ActiveMQ's redeliveries to its
dead-letter queue."""
from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge.connectors.embedded import QueueStore, default_path
from bridge.convlog import log_files
from bridge.routing.router import backout_queue_name
from mappings.conversions.jms_mq import mq_bytes_to_jms
from mappings.jms.model import JavaType, JavaValue, ObjectBody, TextBody
from mappings.jms.serialized import class_name
from mappings.mq import constants as C
from mappings.mq.message import decode_message
from mappings.mq.mqmd import decode_mqmd
from tests.support.activemq import BrokerEndpoints
from tests.support.gateway import GatewayProcess, wait_for
from tests.support.jmstool import COMPILE_JARS, JAVA_DIR, JmsTool, JmsToolError, native_connector_yaml, typed

jpype = pytest.importorskip("jpype", reason="jpype1 not installed (pip install 'mqbridge[jms]')")
pytestmark = pytest.mark.activemq


@pytest.fixture
def gw(gateway_factory: Callable[..., GatewayProcess], activemq: BrokerEndpoints,
       tmp_path: Path) -> tuple[GatewayProcess, str]:
    tag = uuid.uuid4().hex[:8]
    rules = tmp_path / "rules.yaml"
    rules.write_text(native_connector_yaml(activemq.openwire_url) + f"""\
routes:
  - name: in-{tag}
    from: {{connector: amq, queue: poison.in.{tag}}}
    to: {{queue: POISON.IN}}
  - name: out-{tag}
    from: {{queue: POISON.OUT}}
    to: {{connector: amq, queue: poison.out.{tag}}}
""")
    return gateway_factory({"rules": str(rules)}), tag


@pytest.fixture(scope="module")
def producer_session(activemq: BrokerEndpoints) -> Iterator[Any]:
    """A JMS session in this process's JVM: for messages JmsTool's JSON cannot describe."""
    from bridge.connectors.jms_native import jvm

    jvm.start(jvm.expand_jars(str(JAVA_DIR / j) for j in COMPILE_JARS))
    jvm.attach()
    conn = jpype.JClass("org.apache.activemq.ActiveMQConnectionFactory")(activemq.openwire_url).createConnection()
    conn.start()
    yield conn.createSession(False, 1)   # AUTO_ACKNOWLEDGE
    conn.close()


def _records(gw: GatewayProcess, route: str) -> list[dict[str, Any]]:
    return [r for f in log_files(gw.data_dir / "convlog") for line in f.read_text().splitlines() if line
            for r in [json.loads(line)] if r["route"] == route]


def _the_one_on(gateway: GatewayProcess, queue: str) -> bytes:
    """The message on the embedded ``queue``, once there is one."""
    store = QueueStore(default_path(gateway.data_dir)).open()
    try:
        wait_for(lambda: store.depth(queue) == 1, 30, what=f"the message on {queue}")
        (raw,) = [m.data for m in store.browse(queue)]
    finally:
        store.close()
    return raw


def test_a_message_outside_a_group_reaches_mq_without_a_group_or_a_finding(
        gw: tuple[GatewayProcess, str], jmstool: JmsTool) -> None:
    """ActiveMQ answers JMSXGroupSeq 0 for every message outside a group: it was carried as a group sequence,
    and each such message's record had a coerced MQMD.MsgSeqNumber finding."""
    gateway, tag = gw
    jmstool.send(f"queue://poison.in.{tag}", {"type": "Text", "body": "plain", "headers": {
        "correlationId": "ID:" + "ab" * 24}, "properties": {"n": typed("int", 1)}})
    raw = _the_one_on(gateway, "POISON.IN")
    md = decode_mqmd(raw)
    assert (md.group_id, md.msg_seq_number, md.msg_flags) == (C.MQGI_NONE, 1, 0)
    msg, _ = mq_bytes_to_jms(raw, now_ms=0)
    assert "JMSXGroupSeq" not in msg.properties and b"<Seq>" not in raw
    (egress,) = wait_for(lambda: [r for r in _records(gateway, f"in-{tag}") if r["direction"] == "egress"], 20,
                         what="the egress record")
    assert [f["name"] for f in egress["findings"] if f["change"] != "defaulted"] == ["JMSMessageID"], egress


def test_an_object_message_of_a_class_the_gateway_does_not_trust_is_carried_as_its_bytes_both_ways(
        gw: tuple[GatewayProcess, str], jmstool: JmsTool) -> None:
    """java.math.BigDecimal is outside ActiveMQ's default trusted packages, so the gateway's client could not
    deserialize it (before: the source failed on it again and again, until ActiveMQ dead-lettered it)."""
    gateway, tag = gw
    jmstool.send(f"queue://poison.in.{tag}", {"type": "Object", "body": {"class": "java.math.BigDecimal",
                                                                       "value": "12.50"}})
    store = QueueStore(default_path(gateway.data_dir)).open()
    try:
        wait_for(lambda: store.depth("POISON.IN") == 1, 30, what="the ObjectMessage on POISON.IN")
        (raw,) = [m.data for m in store.browse("POISON.IN")]
        msg, _ = mq_bytes_to_jms(raw, now_ms=0)
        assert isinstance(msg.body, ObjectBody) and msg.body.data is not None
        assert class_name(msg.body.data) == "java.math.BigDecimal"
        store.put("POISON.OUT", raw)   # and back to a Java consumer, which deserializes it
    finally:
        store.close()
    (got,) = jmstool.receive(f"queue://poison.out.{tag}", 1, timeout=30)
    assert got["type"] == "Object" and got["body"] == {"class": "java.math.BigDecimal", "value": "12.50"}
    (ingress,) = [r for r in _records(gateway, f"in-{tag}") if r["direction"] == "ingress"]
    (egress,) = wait_for(lambda: [r for r in _records(gateway, f"out-{tag}") if r["direction"] == "egress"], 20,
                         what="the egress record")
    assert ingress["status"] == "ok" and egress["status"] == "ok"
    assert not [f for f in egress["findings"] if f["name"] == "body"]


def test_a_message_no_jms_type_describes_goes_to_the_backout_queue_once_with_its_headers_and_properties(
        gw: tuple[GatewayProcess, str], jmstool: JmsTool, producer_session: Any) -> None:
    """ActiveMQ lets a property hold a java.util.Map (outside JMS 1.1 §3.5.4): the connector cannot read it.
    The message goes to BACKOUT.<route> at its first delivery, with what could be read; the next one is
    carried as usual."""
    gateway, tag = gw
    cid = f"poison-{tag}"
    queue = producer_session.createQueue(f"poison.in.{tag}")
    producer = producer_session.createProducer(queue)
    bad = producer_session.createTextMessage("body text")
    nested = jpype.java.util.HashMap()
    nested.put("a", jpype.java.lang.Integer(1))
    bad.setObjectProperty("nested", nested)
    bad.setIntProperty("n", 7)
    bad.setJMSCorrelationID(cid)
    producer.send(bad)
    producer.send(producer_session.createTextMessage("next"))
    producer.close()
    route = f"in-{tag}"
    store = QueueStore(default_path(gateway.data_dir)).open()
    try:
        wait_for(lambda: store.depth(backout_queue_name(route)) == 1 and store.depth("POISON.IN") == 1, 30,
                 what="the bad message on the backout queue and the next on POISON.IN")
        (raw,) = [m.data for m in store.browse(backout_queue_name(route))]
        (good,) = [m.data for m in store.browse("POISON.IN")]
    finally:
        store.close()
    backed_out = decode_message(raw)
    why = dict((e.name, e.value) for e in backed_out.rfh2_folder("mqbridge").elements)
    assert "cannot be read" in why["Reason"] and "java.util.HashMap" in why["Reason"]
    assert why["Redelivered"] == "0"   # its first delivery: not rolled back first
    jms, _ = mq_bytes_to_jms(raw, now_ms=0)
    assert jms.headers.correlation_id == cid   # headers and properties kept (IBM MQ classes for JMS' form)
    assert jms.properties["n"] == JavaValue(JavaType.INT, 7)
    assert jms.body == TextBody("body text")
    assert mq_bytes_to_jms(good, now_ms=0)[0].body == TextBody("next")
    records = wait_for(lambda: [r for r in _records(gateway, route) if r["direction"] == "egress"] or None, 20,
                       what="the backout record")
    (record,) = [r for r in records if r["status"] == "backout"]
    assert "cannot be read" in record["reason"]
    assert [(f["change"], f["name"]) for f in record["findings"]] == [("dropped", "nested")]
    with pytest.raises(JmsToolError):   # not redelivered until ActiveMQ dead-letters it
        jmstool.receive("queue://ActiveMQ.DLQ", 1, timeout=2, selector=f"JMSCorrelationID = '{cid}'")



def test_a_threshold_above_activemqs_redelivery_limit_still_gets_every_delivery(
        producer_session: Any, activemq: BrokerEndpoints, jmstool: JmsTool) -> None:
    """A source whose batch is rolled back again and again (its target down): ActiveMQ's client would
    dead-letter the message after 6 redeliveries (its maximumRedeliveries); with the route's threshold of 8
    the source hands it over until the count reaches 8, where the route backs it out (router.classify)."""
    import asyncio

    from bridge.connectors.jms_native.connector import NativeJmsSource
    from mappings.rules.model import JmsConnector

    tag = uuid.uuid4().hex[:8]
    fast = "?jms.redeliveryPolicy.initialRedeliveryDelay=0&jms.redeliveryPolicy.redeliveryDelay=0"
    conn = JmsConnector(type="jms", client="native", jars=tuple(str(JAVA_DIR / j) for j in COMPILE_JARS),
                        connection_factory="org.apache.activemq.ActiveMQConnectionFactory",
                        factory_properties={"brokerURL": activemq.openwire_url + fast})
    source = NativeJmsSource(conn, "stuck", f"stuck.{tag}", backout_threshold=8)
    jmstool.send(f"queue://stuck.{tag}", {"type": "Text", "body": "x", "headers": {"correlationId": tag}})

    async def deliveries() -> list[int]:
        counts: list[int] = []
        await source.start()
        try:
            while len(counts) < 9:
                items = await asyncio.wait_for(source.receive(10), 15)
                assert [i.message.headers.correlation_id for i in items] == [tag]
                counts.append(items[0].redelivery_count)
                assert items[0].message.headers.redelivered is (len(counts) > 1)   # JMSRedelivered, as read
                await (source.backout(items) if len(counts) < 9 else source.confirm(items))
        finally:
            await source.close()
        return counts

    assert asyncio.run(deliveries()) == list(range(9))   # 0 (the first delivery) to 8
    with pytest.raises(JmsToolError):
        jmstool.receive("queue://ActiveMQ.DLQ", 1, timeout=2, selector=f"JMSCorrelationID = '{tag}'")


def test_the_providers_jms_timestamp_reaches_mq_in_jms_tms(gw: tuple[GatewayProcess, str],
                                                           producer_session: Any) -> None:
    """JMSTimestamp, which the provider sets at send, travels in the MQ message's jms/Tms to the millisecond (IBM
    MQ docs "Mapping JMS fields onto IBM MQ fields"); PutDate/PutTime are the store's put time, as a queue
    manager sets them at MQPUT."""
    gateway, tag = gw
    producer = producer_session.createProducer(producer_session.createQueue(f"poison.in.{tag}"))
    sent = producer_session.createTextMessage("stamped")
    producer.send(sent)
    producer.close()
    stamp = int(sent.getJMSTimestamp())
    assert stamp > 0
    raw = _the_one_on(gateway, "POISON.IN")
    assert f"<Tms>{stamp}</Tms>".encode() in raw
    assert mq_bytes_to_jms(raw, now_ms=0)[0].headers.timestamp == stamp
