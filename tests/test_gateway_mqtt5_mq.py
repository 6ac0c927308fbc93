"""MQTT 5 properties through a running gateway to MQ-format messages on the embedded queue store, and back.

An MQTT 5 requester (paho-mqtt, MQTTv5) sends a request with Response Topic, Correlation Data, Content Type,
Payload Format Indicator, Message Expiry and user properties; a responder written as an MQI application
would be (get, reply to MQMD ReplyToQ with the request's CorrelId, a usr property set) answers on the embedded
store; the reply reaches the requester with its Correlation Data. Rules: docs/mqtt5-mq.md.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from bridge.connectors.embedded import QueueStore, default_path
from bridge.convlog import log_files
from mappings.mq import constants as C
from mappings.mq.message import MqMessage, build_message, decode_message, encode_message
from mappings.mq.mqmd import Mqmd
from mappings.mq.rfh2 import Rfh2, RfhElement, RfhFolder
from tests.support.gateway import GatewayProcess, wait_for
from tests.support.mqtt5_client import V5, publish_props
from tests.support.mqtt_clients import PahoClient

RULES = """\
routes:
  - name: svc-req
    from: {mqtt: "svc/req"}
    to: {queue: SVC.REQ}
    options: {reply_to_queue: SVC.REP}
  - name: svc-rep
    from: {queue: SVC.REP}
    to: {mqtt: "svc/replies"}
  - name: svc-rep-q
    from: {queue: SVC.REP2}
    to: {mqtt: "svc/replies2"}
"""


def _records(gw: GatewayProcess) -> list[dict[str, object]]:
    out = []
    for f in log_files(gw.data_dir / "convlog"):
        out.extend(json.loads(line) for line in f.read_text().splitlines() if line)
    return out


def _folders(msg: MqMessage) -> dict[str, dict[str, str | None]]:
    rfh = next(h for h in msg.headers if isinstance(h, Rfh2))
    return {f.name: {el.name: el.value for el in f.elements} for f in rfh.folders}


def _take(store: QueueStore, queue: str) -> MqMessage:
    got = wait_for(lambda: store.get(queue), 15, what=f"a message on {queue}")
    return decode_message(got.data)


def _reply(request: MqMessage, body: bytes, usr: tuple[RfhElement, ...] = (), expiry: int = C.MQEI_UNLIMITED
           ) -> bytes:
    """An MQI responder's reply: the request's CorrelId passed on, text in UTF-8, optional usr properties."""
    md = Mqmd(coded_char_set_id=C.CCSID_UTF8, correl_id=request.md.correl_id, expiry=expiry, msg_type=C.MQMT_REPLY)
    headers = (Rfh2(folders=(RfhFolder("usr", usr),)),) if usr else ()
    return encode_message(build_message(md, headers, body, body_format=C.MQFMT_STRING))


def test_mqtt5_request_answered_by_an_mqi_responder_on_the_embedded_store(
        gateway_factory: Callable[..., GatewayProcess], tmp_path: Path,
        clients: Callable[..., PahoClient]) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    gw = gateway_factory({"rules": str(rules)})
    requester = V5(gw.port, "req5").connect()
    assert requester.subscribe("svc/replies", 1) == [1]
    old = clients(gw.port, "old311").connect()          # a 3.1.1 subscriber of the same replies
    assert old.subscribe("svc/replies", 1) == [1]
    requester.client.publish("svc/req", b'{"q": "stock"}', 1, properties=publish_props(
        ResponseTopic="svc/replies", CorrelationData=b"req-17", ContentType="application/json",
        PayloadFormatIndicator=1, MessageExpiryInterval=600,
        UserProperty=[("order", "42"), ("region", "eu")])).wait_for_publish(10)

    store = QueueStore(default_path(gw.data_dir)).open()
    try:
        request = _take(store, "SVC.REQ")
        md = request.md
        assert md.reply_to_q.strip() == "SVC.REP"                 # the route's reply_to_queue for a topic
        assert md.msg_type == C.MQMT_REQUEST                       # a reply is expected
        assert md.correl_id == b"req-17".ljust(24, b"\x00")
        assert 5900 <= md.expiry <= 6000                           # tenths of a second, counted from the publish
        folders = _folders(request)
        assert folders["usr"] == {"order": "42", "region": "eu"}
        assert folders["jms"] == {"Rto": "topic://svc/replies", "Cid": "req-17"}
        assert folders["mcd"] == {"Msd": "jms_text", "Type": "application/json"}
        assert request.body_format == C.MQFMT_STRING and request.body == b'{"q": "stock"}'
        assert folders["mqtt"]["clientId"] == "req5" and folders["mqps"]["Top"] == "svc/req"

        # the responder: reply to ReplyToQ, CorrelId passed on, one usr property, expiry 30 s
        store.put(md.reply_to_q.strip(), _reply(request, b"in stock", (RfhElement("status", "200", dt="i4"),),
                                                 expiry=300))
        (reply,) = requester.wait(1, timeout=20)
    finally:
        store.close()
    props = reply.properties
    assert reply.topic == "svc/replies" and reply.payload == b"in stock"
    assert props.CorrelationData == b"req-17"
    assert props.UserProperty == [("status", "200")]
    assert props.PayloadFormatIndicator == 1
    assert 1 <= props.MessageExpiryInterval <= 30
    (plain,) = old.wait_messages(1, timeout=10)
    assert plain.payload == b"in stock"

    recs = wait_for(lambda: len(r := _records(gw)) >= 4 and r, 15, what="4 conversion log records")
    egress = {r["route"]: r for r in recs if r["direction"] == "egress"}
    request_dropped = [f for f in egress["svc-req"]["findings"] if f["change"] == "dropped"]
    assert request_dropped == []                                   # every MQTT 5 property reached the MQ message
    reply_findings = egress["svc-rep"]["findings"]
    assert not [f for f in reply_findings if f["name"] in ("MQMD.CorrelId", "MQMD.Expiry", "usr/status")]
    # the 3.1.1 subscriber received the payload only: recorded
    lost = {f["name"] for f in reply_findings if f["change"] == "dropped"}
    assert {"Correlation Data", "Message Expiry Interval", "user property status"} <= lost


def test_a_queue_response_topic_becomes_reply_to_q_and_a_reply_there_comes_back(
        gateway_factory: Callable[..., GatewayProcess], tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    gw = gateway_factory({"rules": str(rules)})
    requester = V5(gw.port, "req5q").connect()
    assert requester.subscribe("svc/replies2", 1) == [1]
    correlation = bytes(range(200, 224))                           # 24 bytes, not text: CorrelId alone
    requester.client.publish("svc/req", b"\x00\x01", 1, properties=publish_props(
        ResponseTopic="queue:///SVC.REP2", CorrelationData=correlation)).wait_for_publish(10)
    store = QueueStore(default_path(gw.data_dir)).open()
    try:
        request = _take(store, "SVC.REQ")
        assert request.md.reply_to_q.strip() == "SVC.REP2" and request.md.correl_id == correlation
        assert _folders(request)["jms"] == {"Rto": "queue:///SVC.REP2"}
        assert request.body_format == C.MQFMT_NONE                 # no payload format indicator: bytes
        store.put("SVC.REP2", _reply(request, b"ok"))
        (reply,) = requester.wait(1, timeout=20)
    finally:
        store.close()
    assert reply.payload == b"ok" and reply.properties.CorrelationData == correlation
    assert reply.properties.PayloadFormatIndicator == 1           # MQSTR in CCSID 1208
