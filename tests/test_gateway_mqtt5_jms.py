"""MQTT 5 properties through a running gateway and ActiveMQ: request/reply without the envelope.

JMS -> MQTT 5 and MQTT 5 -> JMS apply Eclipse Amlen's "Conversion between MQTT and JMS" at runtime:
JMSReplyTo <-> Response Topic, JMSCorrelationID <-> Correlation Data, JMSType <-> Content Type, JMS
properties <-> user properties.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.activemq import BrokerEndpoints
from tests.support.gateway import GatewayProcess, wait_for
from tests.support.jmstool import JmsTool, typed
from tests.support.mqtt5_client import V5, publish_props
from tests.test_gateway_activemq import egress, start_gateway

pytestmark = pytest.mark.activemq


@pytest.fixture
def tag() -> str:
    return uuid.uuid4().hex[:10]


def test_jms_request_answered_by_an_mqtt5_responder(
    gateway_factory: Callable[..., GatewayProcess], activemq: BrokerEndpoints, jmstool: JmsTool, tmp_path: Path,
    tag: str,
) -> None:
    requests, replies = f"r5.req.{tag}", f"r5.rep.{tag}"
    reply_topic = f"queue:///{replies}"   # JMSReplyTo of a queue: its URI (IBM MQ JMS form) as the Response Topic
    gw = start_gateway(gateway_factory, tmp_path, activemq, [
        {"name": "req", "from": {"connector": "amq", "queue": requests}, "to": {"mqtt": "svc5/request"}},
        {"name": "rep", "from": {"mqtt": reply_topic}, "to": {"connector": "amq", "queue": replies}}])
    service = V5(gw.port, "service5").connect()
    assert service.subscribe("svc5/request", 1) == [1]
    jmstool.send(f"queue://{requests}", {
        "type": "Text", "body": "req-1", "properties": {"region": typed("String", "eu"), "n": typed("int", 7)},
        "headers": {"replyTo": f"queue://{replies}", "correlationId": "c-42", "type": "order"}})
    (req,) = service.wait(1, timeout=20)
    props = req.properties
    assert req.payload == b"req-1"
    assert props.ResponseTopic == reply_topic and props.CorrelationData == b"c-42"
    assert props.ContentType == "order"
    users = dict(props.UserProperty)
    assert users["region"] == "eu" and users["n"] == "7"
    rec = egress(gw, 1, "req")[0]
    assert rec["status"] == "ok"
    names = {f["name"] for f in rec["findings"] if f["change"] == "dropped"}
    assert not names & {"Response Topic", "Correlation Data", "Content Type"}   # they reached the subscriber

    # the responder answers as MQTT 5 request/response says: to the Response Topic, with the Correlation Data
    service.client.publish(props.ResponseTopic, b"rep-1", 1,
                           properties=publish_props(CorrelationData=props.CorrelationData,
                                                    UserProperty=[("status", "done")])).wait_for_publish(10)
    (rep,) = jmstool.receive(f"queue://{replies}", 1, timeout=20)
    assert rep["body"] == "rep-1"
    assert rep["headers"]["correlationId"] == "c-42"
    assert rep["properties"]["status"]["value"] == "done"
    service.close()


def test_mqtt5_request_reaches_jms_with_reply_to_and_correlation(
    gateway_factory: Callable[..., GatewayProcess], activemq: BrokerEndpoints, jmstool: JmsTool, tmp_path: Path,
    tag: str,
) -> None:
    queue = f"r5.in.{tag}"
    gw = start_gateway(gateway_factory, tmp_path, activemq, [
        {"name": "in", "from": {"mqtt": f"req5/{tag}"}, "to": {"connector": "amq", "queue": queue}}])
    requester = V5(gw.port, "requester5").connect()
    requester.client.publish(f"req5/{tag}", "what time is it", 1, properties=publish_props(
        ResponseTopic=f"resp5/{tag}", CorrelationData=b"id-9", ContentType="question",
        UserProperty=[("lang", "en"), ("n", "1")])).wait_for_publish(10)
    (msg,) = jmstool.receive(f"queue://{queue}", 1, timeout=20)
    assert msg["body"] == "what time is it"
    headers = msg["headers"]
    assert headers["replyTo"] == f"topic://resp5.{tag}"   # the provider's dotted naming, as topic targets
    assert headers["correlationId"] == "id-9" and headers["type"] == "question"
    assert msg["properties"]["lang"]["value"] == "en"
    wait_for(lambda: egress(gw, 1, "in")[0]["status"] == "ok", 10, what="the conversion record")
    requester.close()


def test_reserved_jms_property_names_and_a_wildcard_reply_to_do_not_reach_an_mqtt5_subscriber(
    gateway_factory: Callable[..., GatewayProcess], activemq: BrokerEndpoints, jmstool: JmsTool, tmp_path: Path,
    tag: str,
) -> None:
    """JMS -> MQTT 5 through a running gateway: a JMSFoo property is not created (only JMSX names may come from
    JMS), and a JMSReplyTo topic with a wildcard never becomes a Response Topic; both are findings."""
    queue = f"r5.res.{tag}"
    gw = start_gateway(gateway_factory, tmp_path, activemq, [
        {"name": "res", "from": {"connector": "amq", "queue": queue}, "to": {"mqtt": f"res5/{tag}"}}])
    sub = V5(gw.port, "res5").connect()
    assert sub.subscribe(f"res5/{tag}", 1) == [1]
    jmstool.send(f"queue://{queue}", {
        "type": "Text", "body": "r", "properties": {"JMSFoo": typed("String", "x"), "plain": typed("String", "v")},
        "headers": {"replyTo": f"topic://reply/+/{tag}"}})
    (got,) = sub.wait(1, timeout=20)
    users = dict(getattr(got.properties, "UserProperty", []))
    assert users.get("plain") == "v" and "JMSFoo" not in users
    assert not hasattr(got.properties, "ResponseTopic")
    rec = egress(gw, 1, "res")[0]
    dropped = {f["name"] for f in rec["findings"] if f["change"] == "dropped"}
    assert {"JMSFoo", "JMSReplyTo"} <= dropped
    sub.close()
