"""The native JMS connector (``type: jms``, ``client: native``) through a running gateway and a real ActiveMQ:
MQ-format messages on the embedded store <-> ActiveMQ queues through ActiveMQ's own JMS client in the
gateway's JVM, read and written by a plain Java JMS client (tests/java/JmsTool.java). What STOMP loses
(typed properties, StreamMessage bodies, byte[] map entries) arrives exactly."""
from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bridge.connectors.embedded import QueueStore, default_path
from mappings.conversions.jms_mq import mq_bytes_to_jms
from mappings.jms.model import JavaType, JavaValue, MapBody, StreamBody
from mappings.mq import constants as C
from mappings.mq.message import build_message, encode_message
from mappings.mq.mqmd import Mqmd, decode_mqmd
from mappings.mq.rfh2 import Rfh2, RfhElement, RfhFolder
from tests.support.activemq import BrokerEndpoints
from tests.support.gateway import GatewayProcess, convlog_records, wait_for
from tests.support.jmstool import JmsTool, native_connector_yaml, typed

pytest.importorskip("jpype", reason="jpype1 not installed (pip install 'mqbridge[jms]')")
pytestmark = pytest.mark.activemq


def _rules(activemq: BrokerEndpoints, tag: str) -> str:
    return native_connector_yaml(activemq.openwire_url) + f"""\
routes:
  - name: to-amq
    from: {{queue: NATIVE.OUT}}
    to: {{connector: amq, queue: native.out.{tag}}}
  - name: from-amq
    from: {{connector: amq, queue: native.in.{tag}}}
    to: {{queue: NATIVE.IN}}
  - name: from-amq-topic
    from: {{connector: amq, topic: native.pub.{tag}}}
    to: {{queue: NATIVE.PUB}}
"""


@pytest.fixture
def native_gw(gateway_factory: Callable[..., GatewayProcess], activemq: BrokerEndpoints,
              tmp_path: Path) -> tuple[GatewayProcess, str]:
    tag = uuid.uuid4().hex[:8]
    rules = tmp_path / "rules.yaml"
    rules.write_text(_rules(activemq, tag))
    return gateway_factory({"rules": str(rules)}), tag


def test_mq_to_a_java_consumer_keeps_every_property_type(native_gw: tuple[GatewayProcess, str],
                                                         jmstool: JmsTool) -> None:
    gw, tag = native_gw
    usr = RfhFolder("usr", (RfhElement("n", "7", "i4"), RfhElement("big", "9000000000", "i8"),
                            RfhElement("ok", "1", "boolean"), RfhElement("x", "0.5", "r8"),
                            RfhElement("s", "caf\u00e9")))
    mcd = RfhFolder("mcd", (RfhElement("Msd", "jms_text"),))
    jms = RfhFolder("jms", (RfhElement("Cid", "corr-1"),))
    md = Mqmd(persistence=C.MQPER_PERSISTENT, priority=6)
    data = encode_message(build_message(md, (Rfh2(folders=(mcd, jms, usr)),), "h\u00e9llo".encode(),
                                        body_format=C.MQFMT_STRING))
    store = QueueStore(default_path(gw.data_dir)).open()
    try:
        store.put("NATIVE.OUT", data)
        wait_for(lambda: store.depth("NATIVE.OUT") == 0, 20, what="the route to take the message")
    finally:
        store.close()
    (got,) = jmstool.receive(f"queue://native.out.{tag}", 1, timeout=20)
    assert got["type"] == "Text" and got["body"] == "h\u00e9llo"
    props = got["properties"]
    assert props["n"] == {"type": "java.lang.Integer", "value": 7}            # STOMP: a String
    assert props["big"] == {"type": "java.lang.Long", "value": 9000000000}
    assert props["ok"] == {"type": "java.lang.Boolean", "value": True}
    assert props["x"] == {"type": "java.lang.Double", "value": 0.5}
    assert props["s"] == {"type": "java.lang.String", "value": "caf\u00e9"}
    assert got["headers"]["correlationId"] == "corr-1" and got["headers"]["priority"] == 6
    assert got["headers"]["deliveryMode"] == "PERSISTENT"


def test_a_character_the_provider_loses_is_a_finding_in_the_conversion_log(
        native_gw: tuple[GatewayProcess, str], jmstool: JmsTool) -> None:
    """ActiveMQ 5.17's OpenWire reads a character above U+FFFF in a String property back as U+FFFD: the
    connector's probe at connect knows it, and the egress record says so (no silent loss)."""
    gw, tag = native_gw
    usr = RfhFolder("usr", (RfhElement("face", "a\U0001f600b"), RfhElement("plain", "caf\u00e9")))
    data = encode_message(build_message(Mqmd(), (Rfh2(folders=(usr,)),), b"x", body_format=C.MQFMT_STRING))
    store = QueueStore(default_path(gw.data_dir)).open()
    try:
        store.put("NATIVE.OUT", data)
    finally:
        store.close()
    (got,) = jmstool.receive(f"queue://native.out.{tag}", 1, timeout=20)
    assert got["properties"]["plain"]["value"] == "caf\u00e9"
    assert got["properties"]["face"]["value"] != "a\U0001f600b"   # what the provider did
    (record,) = wait_for(lambda: [r for r in records(gw) if r["route"] == "to-amq" and r["direction"] == "egress"],
                         20, what="the egress record")
    found = {f["name"]: f for f in record["findings"]}
    assert found["face"]["change"] == "coerced" and "U+FFFF" in found["face"]["detail"]
    assert "plain" not in found and record["status"] == "ok" and record["redelivery_count"] == 0


def records(gw: GatewayProcess) -> list[dict[str, Any]]:
    return convlog_records(gw.data_dir / "convlog")


def test_a_java_producers_stream_and_map_reach_mq_exactly(native_gw: tuple[GatewayProcess, str],
                                                         jmstool: JmsTool) -> None:
    gw, tag = native_gw
    jmstool.send(
        f"queue://native.in.{tag}",
        {"type": "Stream", "body": [typed("short", 3), typed("String", "two"), typed("byte[]", b"\x00\xff"),
                                    typed("char", "c"), typed("double", 1.25)],
         "properties": {"n": typed("int", 42), "f": typed("float", 0.5)}},
        {"type": "Map", "body": {"raw": typed("byte[]", b"\x01\x02"), "l": typed("long", -5)}},
    )
    store = QueueStore(default_path(gw.data_dir)).open()
    try:
        wait_for(lambda: store.depth("NATIVE.IN") == 2, 20, what="two messages on NATIVE.IN")
        raws = [m.data for m in store.browse("NATIVE.IN")]
    finally:
        store.close()
    stream, _ = mq_bytes_to_jms(raws[0], now_ms=0)
    assert stream.body == StreamBody((JavaValue(JavaType.SHORT, 3), JavaValue(JavaType.STRING, "two"),
                                      JavaValue(JavaType.BYTES, b"\x00\xff"), JavaValue(JavaType.CHAR, "c"),
                                      JavaValue(JavaType.DOUBLE, 1.25)))      # STOMP: an empty body
    assert stream.properties["n"] == JavaValue(JavaType.INT, 42)
    assert stream.properties["f"] == JavaValue(JavaType.FLOAT, 0.5)
    mapped, _ = mq_bytes_to_jms(raws[1], now_ms=0)
    assert isinstance(mapped.body, MapBody)
    assert dict(mapped.body.entries.pairs) == {"raw": JavaValue(JavaType.BYTES, b"\x01\x02"),
                                               "l": JavaValue(JavaType.LONG, -5)}


def test_a_message_group_reaches_mq_as_ibm_mq_classes_for_jms_write_it(native_gw: tuple[GatewayProcess, str],
                                                                       jmstool: JmsTool) -> None:
    """JMSXGroupID/JMSXGroupSeq from a queue become the MQMD group (GroupId, MsgSeqNumber, MsgFlags) with no
    jms/Gid or jms/Seq; from a topic (a publication is no MQ group) they travel in jms/Gid and jms/Seq only."""
    gw, tag = native_gw
    gid = "ID:" + "0a1b2c3d" * 6
    group = {"JMSXGroupID": typed("String", gid), "JMSXGroupSeq": typed("int", 2),
             "JMS_IBM_Last_Msg_In_Group": typed("boolean", True)}
    jmstool.send(f"queue://native.in.{tag}", {"type": "Text", "body": "p2p", "properties": group})
    topic = f"topic://native.pub.{tag}"

    def published() -> list[bytes]:
        jmstool.send(topic, {"type": "Text", "body": "pub", "properties": group})
        return [m.data for m in store.browse("NATIVE.PUB")]

    store = QueueStore(default_path(gw.data_dir)).open()
    try:
        wait_for(lambda: store.depth("NATIVE.IN") == 1, 20, what="the queue message on NATIVE.IN")
        (p2p,) = [m.data for m in store.browse("NATIVE.IN")]
        pub = wait_for(published, 30, interval=0.5, what="a publication on NATIVE.PUB (the topic consumer exists)")[0]
    finally:
        store.close()
    queued, _ = mq_bytes_to_jms(p2p, now_ms=0)
    md = decode_mqmd(p2p)
    assert (md.group_id.hex(), md.msg_seq_number) == ("0a1b2c3d" * 6, 2)
    assert md.msg_flags == C.MQMF_MSG_IN_GROUP | C.MQMF_LAST_MSG_IN_GROUP
    assert b"<Gid>" not in p2p and b"<Seq>" not in p2p
    published_msg, _ = mq_bytes_to_jms(pub, now_ms=0)
    md = decode_mqmd(pub)
    assert (md.group_id, md.msg_flags) == (C.MQGI_NONE, 0)
    assert b"<Gid>" + gid.encode() + b"</Gid>" in pub and b"<Seq>2</Seq>" in pub
    for got in (queued, published_msg):
        assert got.properties["JMSXGroupID"] == JavaValue(JavaType.STRING, gid)
        assert got.properties["JMSXGroupSeq"] == JavaValue(JavaType.INT, 2)


@pytest.mark.parametrize(("change", "named"), [
    (("jars: [", 'jars: ["/nonexistent/provider-*.jar", '), "connectors.amq.jars"),
    (("org.apache.activemq.ActiveMQConnectionFactory", "org.example.NoSuchFactory"),
     "connectors.amq.connection_factory"),
])
def test_a_missing_jar_or_factory_class_stops_the_start_naming_the_setting(
        activemq: BrokerEndpoints, tmp_path: Path, change: tuple[str, str], named: str) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(_rules(activemq, "x").replace(*change))
    gw = GatewayProcess(tmp_path / "gw", {"rules": str(rules)})
    (tmp_path / "gw").mkdir()
    with pytest.raises(AssertionError, match="mqbridge exited with 1") as exc:
        gw.start(timeout=60)
    assert named in str(exc.value)
