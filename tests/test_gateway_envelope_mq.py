"""Request/reply between an MQ application (the embedded queue store) and an MQTT 3.1.1 responder through
envelope routes of a real `mqbridge serve`: MQ request (ReplyToQ, MsgId, RFH2 usr properties) -> MQTT
envelope -> reply envelope -> the ReplyToQ with CorrelId = the request's MsgId; bad envelopes -> backout."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bridge.connectors.embedded import QueueStore, default_path
from bridge.convlog import log_files
from bridge.routing.router import backout_queue_name
from mappings.conversions.jms_mq import bytes_to_id
from mappings.mq import constants as C
from mappings.mq.message import MqMessage, build_message, decode_message, encode_message
from mappings.mq.mqmd import Mqmd
from mappings.mq.rfh2 import Rfh2, RfhElement, RfhFolder
from tests.support.gateway import GatewayProcess, wait_for
from tests.support.mqtt_clients import PahoClient

RULES = """\
routes:
  - name: mq-req
    from: {queue: SVC.REQ}
    to: {mqtt: svc/request}
    options: {mqtt_format: envelope}
  - name: mq-rep
    from: {mqtt: "svc/reply/#"}
    to: {reply_to: true, allow: ["queue://SVC.REPLY."]}
    options: {mqtt_format: envelope}
"""


@pytest.fixture
def gw(gateway_factory: Callable[..., GatewayProcess], tmp_path: Path) -> GatewayProcess:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    return gateway_factory({"rules": str(rules)})


def store(gw: GatewayProcess) -> QueueStore:
    return QueueStore(default_path(gw.data_dir)).open()


def records(gw: GatewayProcess, route: str) -> list[dict[str, Any]]:
    out = []
    for f in log_files(gw.data_dir / "convlog"):
        out.extend(json.loads(line) for line in f.read_text().splitlines() if line)
    return [r for r in out if r["route"] == route and r["direction"] == "egress"]


def mq_request(reply_q: str, body: bytes) -> bytes:
    """What an MQ requester puts: MsgType REQUEST, ReplyToQ/ReplyToQMgr, RFH2 usr properties, MQSTR text."""
    usr = RfhFolder("usr", (RfhElement("region", "eu"), RfhElement("n", "5", dt="i4"),
                            RfhElement("urgent", "1", dt="boolean")))
    md = Mqmd(msg_type=C.MQMT_REQUEST, reply_to_q=reply_q, reply_to_q_mgr="QMA",
              persistence=C.MQPER_PERSISTENT, coded_char_set_id=1208)
    return encode_message(build_message(md, (Rfh2(folders=(usr,)),), body, body_format=C.MQFMT_STRING,
                                        body_ccsid=1208))


def test_mq_request_reaches_mqtt_as_envelope_and_the_reply_reaches_reply_to_q(
    gw: GatewayProcess, clients: Callable[..., PahoClient]
) -> None:
    responder = clients(gw.port, "responder").connect()
    responder.subscribe("svc/request", 1)
    q = store(gw)
    msg_id = q.put("SVC.REQ", mq_request("SVC.REPLY.A", b"price A-1?"))
    (got,) = responder.wait_messages(1, timeout=15)
    req = json.loads(got.payload)
    h = req["headers"]
    assert h["JMSMessageID"] == bytes_to_id(msg_id)               # MsgId -> JMSMessageID
    assert h["JMSReplyTo"] == "queue://QMA/SVC.REPLY.A"           # ReplyToQ/ReplyToQMgr -> JMSReplyTo
    assert h["JMSDestination"] == "queue:///SVC.REQ"
    assert h["JMSDeliveryMode"] == 2 and got.qos == 1             # PERSISTENT; QoS 2 capped by the subscription
    assert req["properties"]["n"] == {"type": "int", "value": 5}
    assert req["properties"]["urgent"] == {"type": "boolean", "value": True}
    assert req["properties"]["region"] == {"type": "String", "value": "eu"}
    assert req["body"] == {"type": "jms_text", "text": "price A-1?"}
    (rec,) = wait_for(lambda: records(gw, "mq-req"), 10, what="the request's egress record")
    assert rec["status"] == "ok"
    assert not [f for f in rec["findings"] if f["name"] in ("JMSReplyTo", "JMSCorrelationID", "JMSMessageID")]

    reply = {"headers": {"JMSCorrelationID": h["JMSMessageID"], "JMSDestination": h["JMSReplyTo"],
                         "JMSType": "price-reply"},
             "properties": {"price": {"type": "double", "value": 12.5}, "currency": "EUR",
                            "JMS_IBM_MsgType": {"type": "int", "value": C.MQMT_REPLY}},
             "body": {"type": "jms_text", "text": "12.50 EUR"}}
    responder.publish("svc/reply/1", json.dumps(reply).encode(), qos=1)
    wait_for(lambda: q.depth("SVC.REPLY.A") == 1, 15, what="the reply on SVC.REPLY.A")
    out: MqMessage = decode_message(q.browse("SVC.REPLY.A")[0].data)
    q.close()
    assert out.md.correl_id == msg_id                              # JMSCorrelationID "ID:..." -> CorrelId
    assert out.md.msg_type == C.MQMT_REPLY                         # JMS_IBM_MsgType -> MsgType (§6.2)
    assert out.md.persistence == C.MQPER_PERSISTENT                # QoS 1 -> PERSISTENT
    assert out.md.user_identifier.strip() == "responder"           # Table 1: UserIdentifier from client id
    assert out.body == b"12.50 EUR"
    usr = out.rfh2_folder("usr")
    assert usr is not None
    assert (usr.value("currency"), usr.get("price").dt) == ("EUR", "r8")  # type: ignore[union-attr]
    mcd = out.rfh2_folder("mcd")
    assert mcd is not None and mcd.value("Type") == "price-reply"
    (rep,) = wait_for(lambda: records(gw, "mq-rep"), 10, what="the reply's egress record")
    assert rep["status"] == "ok" and rep["destination"] == "SVC.REPLY.A"
    dropped = {f["name"] for f in rep["findings"] if f["change"] == "dropped"}
    assert dropped == {"JMSDestination"}        # only the queue manager QMA: puts go to this queue store


def test_bad_reply_envelopes_go_to_backout_with_the_field_and_do_not_block(
    gw: GatewayProcess, clients: Callable[..., PahoClient]
) -> None:
    responder = clients(gw.port, "responder").connect()
    bad = [
        (b"OK 12.50", "malformed JSON at line 1"),
        (json.dumps({"headers": {"JMSDestination": "queue:///SVC.REQ"}}).encode(),
         "headers.JMSDestination: 'queue:///SVC.REQ' is not an allowed reply destination"),
        (json.dumps({"headers": {"JMSCorrelationID": "x"}}).encode(),
         "headers.JMSDestination: the envelope names no reply destination"),
        (json.dumps({"headers": {"JMSDestination": "queue:///SVC.REPLY.B"}, "properties": {"n": 1.5}}).encode(),
         "properties.n"),
    ]
    for payload, _ in bad:
        responder.publish("svc/reply/bad", payload, qos=1)
    good = {"headers": {"JMSDestination": "queue:///SVC.REPLY.B"}, "body": {"type": "jms_text", "text": "after"}}
    responder.publish("svc/reply/good", json.dumps(good).encode(), qos=1)
    q = store(gw)
    wait_for(lambda: q.depth("SVC.REPLY.B") == 1, 15, what="the good reply after the bad ones")
    backout = backout_queue_name("mq-rep")
    wait_for(lambda: q.depth(backout) == len(bad), 15, what="every bad envelope on the backout queue")
    backed = [decode_message(m.data) for m in q.browse(backout)]
    q.close()
    for (payload, reason), msg in zip(bad, backed, strict=True):
        folder = msg.rfh2_folder("mqbridge")
        assert folder is not None and folder.value("Route") == "mq-rep"
        assert reason in (folder.value("Reason") or ""), folder.value("Reason")
        assert msg.body == payload                               # nothing lost: the publication's payload
    logged = wait_for(lambda: len(r := [x for x in records(gw, "mq-rep") if x["status"] == "backout"]) == len(bad)
                      and r, 10, what="a backout record per bad envelope")
    for _, reason in bad:
        assert any(reason in rec["reason"] for rec in logged), (reason, logged)
