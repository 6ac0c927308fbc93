"""MQTT 5 <-> JMS through one running gateway and the session's ActiveMQ (STOMP), with the Java JMS client.

- A Java JMS responder answers an MQTT 5 requester: the request carries JMSReplyTo (the Response Topic) and
  JMSCorrelationID (the Correlation Data); the reply, sent to that JMSReplyTo with the JMSCorrelationID, comes
  back on the requester's Response Topic with its Correlation Data, by a route from the reply topic.
- JMS -> MQTT 5: JMSMessageID and JMSTimestamp (ISO 8601) user properties, JMSExpiration -> Message Expiry
  Interval (what remains), a TextMessage -> Payload Format Indicator 1, a BytesMessage -> none.
- MQTT 5 -> JMS: Payload Format Indicator 1 with the ConvertMessageType rule (auto: TextMessage; a control byte
  without the indicator: BytesMessage; `convert_message_type: bytes`: BytesMessage), Message Expiry Interval ->
  JMSExpiration.
Rules: Eclipse Amlen "Conversion between MQTT and JMS" (docs/connectors.md, "MQTT 5 properties").
"""
from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support.activemq import BrokerEndpoints
from tests.support.gateway import GatewayProcess, wait_for
from tests.support.jmstool import JmsTool
from tests.support.mqtt5_client import V5, publish_props
from tests.test_gateway_activemq import egress, records, rules_file

pytestmark = pytest.mark.activemq

TAG = uuid.uuid4().hex[:10]
REPLY_TOPIC = f"r5/{TAG}/rep"      # the requester's Response Topic
REPLY_JMS = f"r5.{TAG}.rep"        # the JMS topic its replies go to: the same in ActiveMQ's dotted naming
ISO_MS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, activemq: BrokerEndpoints) -> Iterator[GatewayProcess]:
    workdir = tmp_path_factory.mktemp("gw-mqtt5-jms")
    rules = rules_file(workdir, activemq, [
        {"name": "req", "from": {"mqtt": f"r5/{TAG}/req"}, "to": {"connector": "amq", "queue": f"r5.req.{TAG}"}},
        # one reply route for every requester: JMS r5.<tag>.<anything> back to MQTT r5/<tag>/<anything>
        {"name": "rep", "from": {"connector": "amq", "topic": f"r5.{TAG}.>"}, "to": {"mqtt": "{topic}"}},
        {"name": "j2m", "from": {"connector": "amq", "queue": f"j2m.{TAG}"}, "to": {"mqtt": f"j2m/{TAG}"}},
        {"name": "m2j", "from": {"mqtt": f"m2j/{TAG}"}, "to": {"connector": "amq", "queue": f"m2j.{TAG}"}},
        {"name": "m2jb", "from": {"mqtt": f"m2jb/{TAG}"}, "to": {"connector": "amq", "queue": f"m2jb.{TAG}"},
         "options": {"convert_message_type": "bytes"}}])
    gateway = GatewayProcess(workdir, {"rules": str(rules)}).start()
    yield gateway
    gateway.stop()


def _now_ms() -> int:
    return int(time.time() * 1000)


def test_a_jms_responder_answers_an_mqtt5_requester_on_its_response_topic(
        gw: GatewayProcess, jmstool: JmsTool) -> None:
    requester = V5(gw.port, f"rq-{TAG}").connect()
    assert requester.subscribe(REPLY_TOPIC, 1) == [1]

    def probe_arrived() -> bool:   # a topic subscription only sees what is sent after it exists
        jmstool.send(f"topic://{REPLY_JMS}", {"type": "Text", "body": "probe"})
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline and not requester.messages:
            time.sleep(0.02)
        return bool(requester.messages)

    wait_for(probe_arrived, 20, interval=0, what="the reply route's topic subscription")
    requester.client.publish(f"r5/{TAG}/req", "price of A-1?", 1, properties=publish_props(
        ResponseTopic=REPLY_TOPIC, CorrelationData=b"corr-8812", ContentType="quote")).wait_for_publish(10)

    # the Java responder: get the request, send the reply to its JMSReplyTo with its JMSCorrelationID
    (req,) = jmstool.receive(f"queue://r5.req.{TAG}", 1, timeout=20)
    assert req["body"] == "price of A-1?"
    assert req["headers"]["replyTo"] == f"topic://{REPLY_JMS}"
    assert req["headers"]["correlationId"] == "corr-8812"
    jmstool.send(req["headers"]["replyTo"], {"type": "Text", "body": "12.50", "headers": {
        "correlationId": req["headers"]["correlationId"], "type": "quote-reply"}})

    (reply,) = wait_for(lambda: [m for m in requester.messages if m.payload == b"12.50"], 20, what="the reply")
    requester.close()
    assert reply.topic == REPLY_TOPIC
    assert reply.properties.CorrelationData == b"corr-8812"
    assert reply.properties.ContentType == "quote-reply"
    assert reply.properties.PayloadFormatIndicator == 1


def test_jms_headers_reach_an_mqtt5_subscriber(gw: GatewayProcess, jmstool: JmsTool) -> None:
    sub = V5(gw.port, f"j2m-{TAG}").connect()
    assert sub.subscribe(f"j2m/{TAG}", 1) == [1]
    before = _now_ms()
    text_id, bytes_id = jmstool.send(
        f"queue://j2m.{TAG}",
        {"type": "Text", "body": "hello", "headers": {"expiration": 90_000,    # time to live, ms
                                                      "replyTo": f"topic://back.{TAG}.x%2Ey"}},
        {"type": "Bytes", "body": {"type": "byte[]", "hex": "00ff10"}, "headers": {"replyTo": f"queue://q.{TAG}"}})
    after = _now_ms()
    text, raw = sub.wait(2, timeout=20)
    sub.close()
    assert text.payload == b"hello" and raw.payload == b"\x00\xff\x10"
    users = dict(text.properties.UserProperty)
    assert users["JMSMessageID"] == text_id
    stamp = users["JMSTimestamp"]
    assert ISO_MS.fullmatch(stamp), stamp                                # ISO 8601, UTC, milliseconds
    stamp_ms = int(datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%f%z").timestamp() * 1000)
    assert before - 1000 <= stamp_ms <= after + 1000                     # the producer's send time
    assert 85 <= text.properties.MessageExpiryInterval <= 90             # JMSExpiration: what remains
    assert text.properties.PayloadFormatIndicator == 1                   # a TextMessage
    assert text.properties.ResponseTopic == f"back/{TAG}/x.y"            # a topic: dotted naming undone
    assert raw.properties.ResponseTopic == f"queue:///q.{TAG}"          # a queue: its URI (IBM MQ JMS form)
    assert dict(raw.properties.UserProperty)["JMSMessageID"] == bytes_id
    assert not hasattr(raw.properties, "PayloadFormatIndicator")         # a BytesMessage: none
    assert not hasattr(raw.properties, "MessageExpiryInterval")          # JMSExpiration 0: never
    rec = egress(gw, 1, "j2m")[0]
    assert not {f["name"] for f in rec["findings"] if f["change"] == "dropped"} & {
        "JMSMessageID", "JMSTimestamp", "JMSExpiration"}


def _sent(client: V5, topic: str, payload: bytes, **props: Any) -> None:
    client.client.publish(topic, payload, 1, properties=publish_props(**props) if props else None
                          ).wait_for_publish(10)


def test_payload_format_and_expiry_reach_the_jms_consumer(gw: GatewayProcess, jmstool: JmsTool) -> None:
    pub = V5(gw.port, f"m2j-{TAG}").connect()
    body = "prix\x01€".encode()                      # UTF-8 with a control byte: text only when declared so
    start = _now_ms()
    _sent(pub, f"m2j/{TAG}", body, PayloadFormatIndicator=1, MessageExpiryInterval=120)
    _sent(pub, f"m2j/{TAG}", body)
    _sent(pub, f"m2jb/{TAG}", b"plain text", PayloadFormatIndicator=1)
    declared, undeclared = jmstool.receive(f"queue://m2j.{TAG}", 2, timeout=20)
    (forced,) = jmstool.receive(f"queue://m2jb.{TAG}", 1, timeout=20)
    end = _now_ms()
    pub.close()
    assert declared["type"] == "Text" and declared["body"] == "prix\x01€"       # indicator 1: TextMessage
    expiration = declared["headers"]["expiration"]
    assert start + 119_000 <= expiration <= end + 120_000                    # Message Expiry Interval 120 s
    assert undeclared["type"] == "Bytes" and bytes.fromhex(undeclared["body"]["hex"]) == body   # auto rule
    assert undeclared["headers"]["expiration"] == 0                          # no interval: never expires
    assert forced["type"] == "Bytes" and bytes.fromhex(forced["body"]["hex"]) == b"plain text"  # bytes rule


def test_jmsmessageid_and_jmstimestamp_user_properties_are_findings_not_jms_properties(
        gw: GatewayProcess, jmstool: JmsTool) -> None:
    """Amlen's rule maps the user properties JMSMessageID and JMSTimestamp onto those headers, but a JMS
    provider sets both itself at send: the consumer gets the provider's values, no property of those names
    (JMS-prefixed names are not created), and the conversion log names each as dropped, with why."""
    pub = V5(gw.port, f"m2jid-{TAG}").connect()
    start = _now_ms()
    _sent(pub, f"m2j/{TAG}", b"with ids", UserProperty=[
        ("JMSMessageID", "ID:from-mqtt-1"), ("JMSTimestamp", "2001-02-03T04:05:06.000Z"), ("plant", "north")])
    (got,) = jmstool.receive(f"queue://m2j.{TAG}", 1, timeout=20)
    end = _now_ms()
    pub.close()
    body = got["body"]   # a TextMessage or a BytesMessage by the ConvertMessageType rule: either way these bytes
    assert (body if isinstance(body, str) else bytes.fromhex(body["hex"]).decode()) == "with ids"
    assert got["headers"]["messageId"] != "ID:from-mqtt-1" and got["headers"]["messageId"].startswith("ID:")
    assert start - 1000 <= got["headers"]["timestamp"] <= end + 1000      # the provider's send time
    assert got["properties"]["plant"]["value"] == "north"
    assert not {"JMSMessageID", "JMSTimestamp"} & set(got["properties"])
    (rec,) = wait_for(lambda: [r for r in records(gw) if r["direction"] == "egress" and r["route"] == "m2j"
                               and any(f["name"] == "JMSMessageID" for f in r["findings"])], 15,
                      what="the egress record with the JMSMessageID finding")
    dropped = {f["name"]: f["detail"] for f in rec["findings"] if f["change"] == "dropped"}
    assert dropped["JMSMessageID"] and dropped["JMSTimestamp"], dropped   # each with its reason


def test_a_queue_requestor_is_answered_by_an_mqtt5_responder_without_the_envelope(
        tmp_path: Path, activemq: BrokerEndpoints, jmstool: JmsTool) -> None:
    """A Java requester (javax.jms.QueueRequestor: JMSReplyTo a TemporaryQueue of its connection) -> route ->
    an MQTT 5 responder, which gets the Response Topic queue:///ID:..?temporary=true and the Correlation
    Data, and publishes its answer there; a payload-form reply_to route sends it to that temporary queue."""
    tag = uuid.uuid4().hex[:8]
    rules = rules_file(tmp_path, activemq, [
        {"name": "ask", "from": {"connector": "amq", "queue": f"rq.{tag}"}, "to": {"mqtt": f"svc/{tag}/ask"}},
        {"name": "ans", "from": {"mqtt": "queue:///+"},
         "to": {"connector": "amq", "reply_to": True, "allow": ["temp-queue://ID:"]}}])
    gw = GatewayProcess(tmp_path, {"rules": str(rules)}).start()
    try:
        responder = V5(gw.port, f"resp-{tag}").connect()
        assert responder.subscribe(f"svc/{tag}/ask", 1) == [1]
        result: list[dict[str, Any]] = []
        requester = threading.Thread(target=lambda: result.append(jmstool.request(
            f"queue://rq.{tag}", {"type": "Text", "body": "price?", "headers": {"type": "quote"}}, timeout=30)))
        requester.start()
        (ask,) = responder.wait(1, timeout=20)
        response_topic = ask.properties.ResponseTopic
        assert response_topic.startswith("queue:///ID:") and response_topic.endswith("?temporary=true")
        request_id = dict(ask.properties.UserProperty)["JMSMessageID"]   # correlate as JMS does: by its id
        responder.client.publish(response_topic, "12.50", 1, properties=publish_props(
            CorrelationData=request_id.encode(), ContentType="quote-reply")).wait_for_publish(10)
        requester.join(60)
        (res,) = result
        assert response_topic == f"queue:///{res['replyTo'].removeprefix('temp-queue://')}?temporary=true"
        reply = res["reply"]
        assert reply is not None, "the reply did not reach the requester's temporary queue"
        assert reply["body"] == "12.50" and reply["headers"]["type"] == "quote-reply"
        assert reply["headers"]["correlationId"] == request_id == res["sent"]
        responder.close()
    finally:
        gw.stop()
