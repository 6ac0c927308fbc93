# Request/reply between a Java JMS requester (JmsTool over OpenWire, real ActiveMQ) and a paho-mqtt 3.1.1
# responder through envelope routes of a real `mqbridge serve`: JMSReplyTo, JMSCorrelationID, JMSType and
# properties cross in the envelope; the reply route sends to the requester's JMSReplyTo; bad envelopes back out.
from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bridge.convlog import log_files
from tests.support.activemq import BrokerEndpoints
from tests.support.gateway import GatewayProcess, wait_for
from tests.support.jmstool import JmsTool, typed
from tests.support.mqtt_clients import PahoClient

pytestmark = pytest.mark.activemq

STRING = "java.lang.String"


class Service:
    """The names of one test's request/reply service."""

    def __init__(self) -> None:
        tag = uuid.uuid4().hex[:10]
        self.requests = f"env.req.{tag}"
        self.replies = f"env.rep.{tag}"             # the allow prefix: env.rep.<tag>.<requester>
        self.fallback = f"env.rep.{tag}.unaddressed"
        self.dead = f"env.dead.{tag}"
        self.topic = f"svc/{tag}"
        self.extra_allow: list[str] = []

    def routes(self) -> list[dict[str, Any]]:
        allow = [f"queue://{self.replies}.", *self.extra_allow]
        return [
            {"name": "req", "from": {"connector": "amq", "queue": self.requests},
             "to": {"mqtt": f"{self.topic}/request"}, "options": {"mqtt_format": "envelope"}},
            {"name": "rep", "from": {"mqtt": f"{self.topic}/reply/#"},
             "to": {"connector": "amq", "reply_to": True, "allow": allow,
                    "queue": self.fallback},
             "options": {"mqtt_format": "envelope", "backout_destination": {"connector": "amq", "queue": self.dead}}},
        ]


def start(gateway_factory: Callable[..., GatewayProcess], tmp_path: Path, activemq: BrokerEndpoints,
          svc: Service) -> GatewayProcess:
    path = tmp_path / "rules.yaml"
    path.write_text(json.dumps({
        "connectors": {"amq": {"type": "jms", "host": activemq.host, "port": activemq.stomp_port,
                               "heartbeat_ms": 2000, "reconnect_max_seconds": 1.0}},
        "routes": svc.routes()}, indent=1))
    return gateway_factory({"rules": str(path)})


def egress(gw: GatewayProcess, route: str, count: int) -> list[dict[str, Any]]:
    def read() -> list[dict[str, Any]]:
        out = []
        for f in log_files(gw.data_dir / "convlog"):
            out.extend(json.loads(line) for line in f.read_text().splitlines() if line)
        return [r for r in out if r["direction"] == "egress" and r["route"] == route]
    return wait_for(lambda: len(r := read()) >= count and r, 15, what=f"{count} egress records of {route}")


def reply_to(request: dict[str, Any], body: dict[str, Any], **properties: Any) -> bytes:
    """What a 3.1.1 responder publishes: correlation id = the request's message id, destination = its reply-to."""
    h = request["headers"]
    return json.dumps({"headers": {"JMSCorrelationID": h["JMSMessageID"], "JMSDestination": h["JMSReplyTo"],
                                   "JMSType": h["JMSType"] + "-reply"},
                       "properties": properties, "body": body}).encode()


def test_text_and_map_requests_from_java_get_their_replies_through_an_mqtt_311_responder(
    gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient], activemq: BrokerEndpoints,
    jmstool: JmsTool, tmp_path: Path,
) -> None:
    svc = Service()
    gw = start(gateway_factory, tmp_path, activemq, svc)
    responder = clients(gw.port, "pricing").connect()          # paho, MQTT 3.1.1
    responder.subscribe(f"{svc.topic}/request", 1)
    inbox = f"{svc.replies}.java1"
    text_id, map_id = jmstool.send(
        f"queue://{svc.requests}",
        {"type": "Text", "body": "price A-1?",
         "headers": {"replyTo": f"queue://{inbox}", "type": "quote", "priority": 7},
         "properties": {"region": typed("String", "eu"), "qty": typed("int", 3)}},
        {"type": "Map", "body": {"sku": typed("String", "A-1"), "qty": typed("int", 3), "max": typed("double", 9.5)},
         "headers": {"replyTo": f"queue://{inbox}", "type": "order", "correlationId": "basket-9"}},
    )
    text_req, map_req = (json.loads(m.payload) for m in responder.wait_messages(2, timeout=20))

    # the request envelopes: every JMS header an MQTT 3.1.1 client could not see before
    h = text_req["headers"]
    assert h["JMSMessageID"] == text_id and h["JMSReplyTo"] == f"queue:///{inbox}"
    assert h["JMSType"] == "quote" and h["JMSPriority"] == 7 and h["JMSDeliveryMode"] == 2
    assert h["JMSDestination"] == f"queue:///{svc.requests}"
    assert text_req["body"] == {"type": "jms_text", "text": "price A-1?"}
    # STOMP carries properties as Strings (README "JMS over STOMP"): the envelope says so exactly
    assert text_req["properties"]["qty"] == {"type": "String", "value": "3"}
    assert text_req["properties"]["region"] == {"type": "String", "value": "eu"}
    assert map_req["headers"]["JMSCorrelationID"] == "basket-9" and map_req["headers"]["JMSMessageID"] == map_id
    assert map_req["body"] == {"type": "jms_map", "map": {"sku": {"type": "String", "value": "A-1"},
                                                          "qty": {"type": "int", "value": 3},
                                                          "max": {"type": "double", "value": 9.5}}}
    for rec in egress(gw, "req", 2):        # nothing of the request headers is reported lost any more
        assert rec["status"] == "ok"
        lost = {f["name"] for f in rec["findings"] if f["change"] == "dropped"}
        assert not lost & {"JMSReplyTo", "JMSCorrelationID", "JMSType", "JMSPriority", "JMSMessageID"}, rec

    responder.publish(f"{svc.topic}/reply/1", reply_to(text_req, {"type": "jms_text", "text": "12.50"},
                                                       currency="EUR", ok=True), qos=1)
    responder.publish(f"{svc.topic}/reply/2", reply_to(map_req, {"type": "jms_map", "map": {
        "accepted": {"type": "boolean", "value": True}, "total": {"type": "long", "value": 2850}}}), qos=1)

    # the Java requester waits for each reply by JMSCorrelationID on its JMSReplyTo queue
    (text_rep,) = jmstool.receive(f"queue://{inbox}", 1, timeout=20, selector=f"JMSCorrelationID = '{text_id}'")
    assert text_rep["type"] == "Text" and text_rep["body"] == "12.50"
    assert text_rep["headers"]["correlationId"] == text_id and text_rep["headers"]["type"] == "quote-reply"
    assert text_rep["headers"]["destination"] == f"queue://{inbox}"
    assert text_rep["headers"]["deliveryMode"] == "PERSISTENT"          # QoS 1, no JMSDeliveryMode given
    props = text_rep["properties"]
    assert props["currency"] == {"type": STRING, "value": "EUR"}
    assert props["ok"] == {"type": STRING, "value": "true"}              # STOMP: a String on the Java side
    assert props["JMS_SWIFTMQ_CID"] == {"type": STRING, "value": "pricing"}
    (map_rep,) = jmstool.receive(f"queue://{inbox}", 1, timeout=20, selector=f"JMSCorrelationID = '{map_id}'")
    assert map_rep["type"] == "Map" and map_rep["headers"]["type"] == "order-reply"
    assert map_rep["body"] == {"accepted": {"type": "java.lang.Boolean", "value": True},
                               "total": {"type": "java.lang.Long", "value": 2850}}
    reps = egress(gw, "rep", 2)
    assert {r["destination"] for r in reps} == {f"queue:{inbox}"}
    for rec in reps:   # what STOMP changed is logged: the boolean property went as a String
        assert rec["status"] == "ok" and rec["target_protocol"] == "jms"
    assert any(("coerced", "ok") in {(f["change"], f["name"]) for f in r["findings"]} for r in reps)


def test_mqtt_311_requester_gets_the_reply_of_a_java_jms_service(
    gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient], activemq: BrokerEndpoints,
    jmstool: JmsTool, tmp_path: Path,
) -> None:
    """The other way round: the MQTT client names its JMSReplyTo (a topic of its own); a wildcard topic route
    brings every such reply back to MQTT."""
    tag = uuid.uuid4().hex[:10]
    service, replies = f"svc.req.{tag}", f"svc.rep.{tag}"
    path = tmp_path / "rules.yaml"
    path.write_text(json.dumps({
        "connectors": {"amq": {"type": "jms", "host": activemq.host, "port": activemq.stomp_port}},
        "routes": [
            {"name": "mreq", "from": {"mqtt": f"app/{tag}/request"}, "to": {"connector": "amq", "queue": service},
             "options": {"mqtt_format": "envelope"}},
            {"name": "mrep", "from": {"connector": "amq", "topic": f"{replies}.>"}, "to": {"mqtt": "{topic}"},
             "options": {"mqtt_format": "envelope"}}]}))
    gw = gateway_factory({"rules": str(path)})
    requester = clients(gw.port, "client7").connect()
    requester.subscribe(f"svc/rep/{tag}/#", 1)

    def probe_arrived() -> bool:   # a topic subscription only sees what is sent after it exists
        jmstool.send(f"topic://{replies}.probe", {"type": "Text", "body": "probe"})
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline and not requester.messages:
            time.sleep(0.02)
        return bool(requester.messages)

    wait_for(probe_arrived, 20, interval=0, what="the gateway's reply topic subscription")
    requester.publish(f"app/{tag}/request", json.dumps({
        "headers": {"JMSReplyTo": f"topic://{replies}.client7", "JMSCorrelationID": "r-1", "JMSType": "quote"},
        "properties": {"qty": {"type": "int", "value": 3}},
        "body": {"type": "jms_text", "text": "price A-1?"}}).encode(), qos=1)

    (req,) = jmstool.receive(f"queue://{service}", 1, timeout=20)     # the Java service
    assert req["type"] == "Text" and req["body"] == "price A-1?"
    assert req["headers"]["replyTo"] == f"topic://{replies}.client7"
    assert req["headers"]["correlationId"] == "r-1" and req["headers"]["type"] == "quote"
    assert req["headers"]["deliveryMode"] == "PERSISTENT"
    assert req["properties"]["qty"] == {"type": STRING, "value": "3"}      # STOMP: every property a String
    assert req["properties"]["JMS_SWIFTMQ_CID"] == {"type": STRING, "value": "client7"}
    jmstool.send(req["headers"]["replyTo"], {"type": "Map", "body": {"price": typed("double", 12.5)},
                                             "headers": {"correlationId": req["headers"]["correlationId"],
                                                         "type": "quote-reply"}})
    got = wait_for(lambda: [m for m in requester.messages if m.topic.endswith("/client7")], 20, what="the reply")
    assert len(got) == 1 and got[0].topic == f"svc/rep/{tag}/client7"
    rep = json.loads(got[0].payload)
    assert rep["headers"]["JMSCorrelationID"] == "r-1" and rep["headers"]["JMSType"] == "quote-reply"
    assert rep["headers"]["JMSDestination"] == f"topic://{replies}.client7"
    assert rep["body"] == {"type": "jms_map", "map": {"price": {"type": "double", "value": 12.5}}}


def test_every_jms_body_type_reaches_mqtt_as_an_envelope(
    gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient], activemq: BrokerEndpoints,
    jmstool: JmsTool, tmp_path: Path,
) -> None:
    svc = Service()
    gw = start(gateway_factory, tmp_path, activemq, svc)
    sub = clients(gw.port).connect()
    sub.subscribe(f"{svc.topic}/request", 1)
    jmstool.send(
        f"queue://{svc.requests}",
        {"type": "Bytes", "body": {"hex": "00ff10"}, "headers": {"deliveryMode": "NON_PERSISTENT"}},
        {"type": "Object", "body": {"class": "java.util.HashMap", "value": {"k": typed("int", 1)}}},
        {"type": "Stream", "body": [typed("int", 1)]},
        {"type": "Message"},
    )
    got = sub.wait_messages(4, timeout=20)
    # ActiveMQ may deliver the NON_PERSISTENT message before or after the persistent ones: by body type
    data, obj, stream, empty = sorted(got, key=lambda m: ["jms_bytes", "jms_object", "jms_text"].index(
        json.loads(m.payload)["body"]["type"]))
    assert data.qos == 0                                                   # NON_PERSISTENT -> QoS 0
    assert json.loads(data.payload)["body"] == {"type": "jms_bytes", "base64": "AP8Q"}
    obj_body = json.loads(obj.payload)["body"]
    assert obj_body["type"] == "jms_object" and obj_body["class"] == "java.util.HashMap"
    assert json.loads(base64.b64decode(obj_body["base64"])) == {"k": 1}     # the object as JSON (README)
    # over STOMP a StreamMessage or plain Message arrives as an empty TextMessage: the envelope says what came
    assert json.loads(stream.payload)["body"] == {"type": "jms_text", "text": ""}
    assert json.loads(empty.payload)["body"] == {"type": "jms_text", "text": ""}
    recs = egress(gw, "req", 4)
    assert all(r["status"] == "ok" for r in recs)
    empties = [r for r in recs if r["source_type"] == "TextMessage"]
    assert len(empties) == 2 and all(("dropped", "body") in {(f["change"], f["name"]) for f in r["findings"]}
                                     for r in empties)                      # the source's loss is still logged


def test_reply_without_destination_goes_to_fallback_and_bad_ones_to_backout(
    gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient], activemq: BrokerEndpoints,
    jmstool: JmsTool, tmp_path: Path,
) -> None:
    svc = Service()
    gw = start(gateway_factory, tmp_path, activemq, svc)
    responder = clients(gw.port, "pricing").connect()
    bad = [
        (b"12.50 EUR", "malformed JSON at line 1"),
        (b"12.50", "MQTT envelope: (document): expected an object"),
        (json.dumps({"headers": {"JMSDestination": f"queue:///{svc.requests}"}}).encode(),
         f"headers.JMSDestination: 'queue:///{svc.requests}' is not an allowed reply destination"),
        (json.dumps({"headers": {"JMSDestination": "topic://prices"}}).encode(),
         "headers.JMSDestination: 'topic://prices' is not an allowed reply destination"),
        (json.dumps({"body": {"type": "jms_map", "map": {"n": {"type": "byte", "value": 300}}}}).encode(),
         "body.map.n"),
    ]
    for payload, _ in bad:
        responder.publish(f"{svc.topic}/reply/x", payload, qos=1)
    unaddressed = {"headers": {"JMSCorrelationID": "c-1"}, "body": {"type": "jms_text", "text": "who asked?"}}
    responder.publish(f"{svc.topic}/reply/x", json.dumps(unaddressed).encode(), qos=1)

    (fell,) = jmstool.receive(f"queue://{svc.fallback}", 1, timeout=20)
    assert fell["body"] == "who asked?" and fell["headers"]["correlationId"] == "c-1"
    dead = jmstool.receive(f"queue://{svc.dead}", len(bad), timeout=20)
    for (payload, reason), msg in zip(bad, dead, strict=True):       # in order, nothing lost
        assert reason in msg["properties"]["mqbridgeReason"]["value"], msg["properties"]
        assert msg["properties"]["mqbridgeRoute"]["value"] == "rep"
        assert bytes.fromhex(msg["body"]["hex"]) == payload
    recs = egress(gw, "rep", len(bad) + 1)
    assert sorted(r["status"] for r in recs) == ["backout"] * len(bad) + ["ok"]
    (ok,) = [r for r in recs if r["status"] == "ok"]
    assert ("defaulted", "JMSDestination") in {(f["change"], f["name"]) for f in ok["findings"]}


def _temporary_queue_request(gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient],
                             activemq: BrokerEndpoints, jmstool: JmsTool, tmp_path: Path, svc: Service
                             ) -> tuple[GatewayProcess, PahoClient, threading.Thread, list[dict[str, Any]], Any]:
    """A gateway, an MQTT responder, and a Java QueueRequestor's request (JMSReplyTo a TemporaryQueue) as
    the responder received it; ``result`` gets the requester's outcome once ``requester`` ends."""
    gw = start(gateway_factory, tmp_path, activemq, svc)
    responder = clients(gw.port, "pricing").connect()
    responder.subscribe(f"{svc.topic}/request", 1)
    result: list[dict[str, Any]] = []
    requester = threading.Thread(target=lambda: result.append(jmstool.request(
        f"queue://{svc.requests}", {"type": "Text", "body": "price?", "headers": {"type": "quote"}}, timeout=30)))
    requester.start()
    (got,) = responder.wait_messages(1, timeout=20)
    return gw, responder, requester, result, json.loads(got.payload)


def test_queue_requestor_gets_its_reply_on_a_temporary_queue_when_allowed(
    gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient], activemq: BrokerEndpoints,
    jmstool: JmsTool, tmp_path: Path,
) -> None:
    """JMSReplyTo = a TemporaryQueue of the requester's connection, as javax.jms.QueueRequestor does."""
    svc = Service()
    svc.extra_allow = ["temp-queue://ID:"]      # ActiveMQ temporary queues are named after connection ids
    gw, responder, requester, result, request = _temporary_queue_request(gateway_factory, clients, activemq,
                                                                         jmstool, tmp_path, svc)
    assert request["headers"]["JMSReplyTo"].endswith("?temporary=true")
    responder.publish(f"{svc.topic}/reply/1", reply_to(request, {"type": "jms_text", "text": "12.50"}), qos=1)
    requester.join(60)
    (res,) = result
    assert request["headers"]["JMSReplyTo"] == f"queue:///{res['replyTo'].removeprefix('temp-queue://')}" \
        "?temporary=true"
    reply = res["reply"]
    assert reply is not None, "the reply did not reach the requester's temporary queue"
    assert reply["headers"]["correlationId"] == res["sent"] and reply["body"] == "12.50"
    assert reply["headers"]["type"] == "quote-reply"
    assert reply["headers"]["destination"] == res["replyTo"]
    (rec,) = egress(gw, "rep", 1)
    assert rec["status"] == "ok" and rec["destination"].startswith("/remote-temp-queue/ID:")


def test_a_temporary_reply_queue_needs_its_own_allow_prefix(
    gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient], activemq: BrokerEndpoints,
    jmstool: JmsTool, tmp_path: Path,
) -> None:
    svc = Service()
    svc.extra_allow = ["queue://ID:"]           # a plain queue of that name is not the temporary queue
    gw = start(gateway_factory, tmp_path, activemq, svc)
    responder = clients(gw.port, "pricing").connect()
    responder.subscribe(f"{svc.topic}/request", 1)
    result: list[dict[str, Any]] = []
    requester = threading.Thread(target=lambda: result.append(jmstool.request(
        f"queue://{svc.requests}", {"type": "Text", "body": "price?", "headers": {"type": "quote"}}, timeout=5)))
    requester.start()
    (got,) = responder.wait_messages(1, timeout=20)
    responder.publish(f"{svc.topic}/reply/1", reply_to(json.loads(got.payload), {"type": "jms_text", "text": "x"}),
                      qos=1)
    requester.join(60)
    assert result and result[0]["reply"] is None
    (dead,) = jmstool.receive(f"queue://{svc.dead}", 1, timeout=20)
    assert "is not an allowed reply destination" in dead["properties"]["mqbridgeReason"]["value"]


def test_a_responder_may_name_the_reply_queue_as_activemq_writes_it(
    gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient], activemq: BrokerEndpoints,
    jmstool: JmsTool, tmp_path: Path,
) -> None:
    """A responder that copies the Java requester's JMSReplyTo as ActiveMQ prints it (``temp-queue://ID:...``
    from Destination.toString(), or ``queue://name``) is answered like one that writes ``queue:///name``."""
    svc = Service()
    svc.extra_allow = ["temp-queue://ID:"]
    gw, responder, requester, result, request = _temporary_queue_request(gateway_factory, clients, activemq,
                                                                         jmstool, tmp_path, svc)
    temp = request["headers"]["JMSReplyTo"].removeprefix("queue:///").removesuffix("?temporary=true")
    request["headers"]["JMSReplyTo"] = f"temp-queue://{temp}"            # ActiveMQ's own form
    responder.publish(f"{svc.topic}/reply/1", reply_to(request, {"type": "jms_text", "text": "12.50"}), qos=1)
    requester.join(60)
    (res,) = result
    assert res["reply"] is not None and res["reply"]["body"] == "12.50" and res["replyTo"] == f"temp-queue://{temp}"

    plain = f"{svc.replies}.plain"
    request["headers"]["JMSReplyTo"] = f"queue://{plain}"                # ActiveMQ's form of a plain queue
    responder.publish(f"{svc.topic}/reply/2", reply_to(request, {"type": "jms_text", "text": "13.00"}), qos=1)
    (reply,) = jmstool.receive(f"queue://{plain}", 1, timeout=20)
    assert reply["body"] == "13.00"
    assert all(r["status"] == "ok" for r in egress(gw, "rep", 2))
