"""Routes of the native JMS connector (``type: jms``, ``client: native``) that a plain queue-to-queue flow does
not exercise, through a running gateway and the session's ActiveMQ: a javax.jms requester's TemporaryQueue
answered through the native connector on both sides (an MQTT 3.1.1 responder over the envelope, an MQTT 5 one
by its Response Topic), a route selector evaluated by the provider (what does not match stays on the ActiveMQ
queue), and what happens without JPype."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bridge.convlog import log_files
from mappings.jms.model import JavaType, TextBody
from tests.support.activemq import BrokerEndpoints
from tests.support.embedded_store import jms_messages
from tests.support.gateway import REPO, GatewayProcess, wait_for
from tests.support.jmstool import JmsTool, JmsToolError, native_connector_yaml, typed
from tests.support.mqtt5_client import V5, publish_props
from tests.support.mqtt_clients import PahoClient

pytest.importorskip("jpype", reason="jpype1 not installed (pip install 'mqbridge[jms]')")
pytestmark = pytest.mark.activemq


def _egress(gw: GatewayProcess, route: str, count: int) -> list[dict[str, Any]]:
    def read() -> list[dict[str, Any]]:
        rows = [json.loads(line) for f in log_files(gw.data_dir / "convlog") for line in f.read_text().splitlines()
                if line]
        return [r for r in rows if r["direction"] == "egress" and r["route"] == route]
    return wait_for(lambda: len(r := read()) >= count and r, 20, what=f"{count} egress records of {route}")


def _request_reply_rules(activemq: BrokerEndpoints, tag: str) -> str:
    return native_connector_yaml(activemq.openwire_url) + f"""\
routes:
  - name: req
    from: {{connector: amq, queue: nrr.req.{tag}}}
    to: {{mqtt: "nrr/{tag}/request"}}
    options: {{mqtt_format: envelope}}
  - name: rep
    from: {{mqtt: "nrr/{tag}/reply/#"}}
    to: {{connector: amq, reply_to: true, allow: ["temp-queue://ID:"]}}
    options: {{mqtt_format: envelope, backout_destination: {{connector: amq, queue: nrr.dead.{tag}}}}}
"""


def test_a_queue_requestor_gets_its_reply_on_its_temporary_queue_through_native_routes(
        gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient],
        activemq: BrokerEndpoints, jmstool: JmsTool, tmp_path: Path) -> None:
    """Java requester (JMSReplyTo = a TemporaryQueue of its own connection) -> native source -> MQTT 3.1.1
    responder over the envelope -> its reply envelope names the temporary queue -> native target sends to it
    by name -> the requester receives it with the JMSCorrelationID it expects, typed properties intact."""
    tag = uuid.uuid4().hex[:8]
    rules = tmp_path / "rules.yaml"
    rules.write_text(_request_reply_rules(activemq, tag))
    gw = gateway_factory({"rules": str(rules)})
    responder = clients(gw.port, "pricing").connect()
    responder.subscribe(f"nrr/{tag}/request", 1)
    result: list[dict[str, Any]] = []
    requester = threading.Thread(target=lambda: result.append(jmstool.request(
        f"queue://nrr.req.{tag}", {"type": "Text", "body": "price?", "headers": {"type": "quote"},
                                   "properties": {"qty": typed("int", 3)}}, timeout=30)))
    requester.start()
    (got,) = responder.wait_messages(1, timeout=30)
    request = json.loads(got.payload)
    h = request["headers"]
    assert h["JMSReplyTo"].startswith("queue:///ID:") and h["JMSReplyTo"].endswith("?temporary=true"), h
    assert request["properties"]["qty"] == {"type": "int", "value": 3}      # STOMP: a String
    reply = {"headers": {"JMSCorrelationID": h["JMSMessageID"], "JMSDestination": h["JMSReplyTo"],
                         "JMSType": "quote-reply"},
             "properties": {"ok": {"type": "boolean", "value": True}},
             "body": {"type": "jms_text", "text": "12.50"}}
    responder.publish(f"nrr/{tag}/reply/1", json.dumps(reply).encode(), qos=1)
    requester.join(60)
    (res,) = result
    assert h["JMSReplyTo"] == f"queue:///{res['replyTo'].removeprefix('temp-queue://')}?temporary=true"
    answer = res["reply"]
    assert answer is not None, f"no reply reached the requester's temporary queue: {_egress(gw, 'rep', 1)}"
    assert answer["headers"]["correlationId"] == res["sent"] == h["JMSMessageID"]
    assert answer["body"] == "12.50" and answer["headers"]["type"] == "quote-reply"
    assert answer["headers"]["destination"] == res["replyTo"]
    assert answer["properties"]["ok"] == {"type": "java.lang.Boolean", "value": True}   # STOMP: a String
    (rec,) = _egress(gw, "rep", 1)
    assert rec["status"] == "ok", rec


def _selector_rules(activemq: BrokerEndpoints, tag: str, selector: str) -> str:
    return native_connector_yaml(activemq.openwire_url) + f"""\
routes:
  - name: picked
    from: {{connector: amq, queue: nsel.{tag}}}
    to: {{queue: PICKED}}
    options: {{selector: "{selector}"}}
"""


def _picked(gw: GatewayProcess) -> list[tuple[str | None, int | None]]:
    out = []
    for msg in jms_messages(gw.data_dir, "PICKED"):
        n = msg.properties.get("n")
        assert n is None or n.type is JavaType.INT   # the property reached MQ typed
        out.append((msg.body.text if isinstance(msg.body, TextBody) else None, None if n is None else int(n.value)))
    return out


def test_a_selector_on_a_native_source_is_the_providers_and_what_does_not_match_stays_on_the_queue(
        gateway_factory: Callable[..., GatewayProcess], activemq: BrokerEndpoints, jmstool: JmsTool,
        tmp_path: Path) -> None:
    """``options.selector`` on a native JMS source is its consumer's message selector: ActiveMQ hands the route
    only what matches (a numeric comparison works: the property is an int, not STOMP's String), the route
    filters nothing itself, and the other messages stay on the queue for other consumers."""
    tag = uuid.uuid4().hex[:8]
    rules = tmp_path / "rules.yaml"
    rules.write_text(_selector_rules(activemq, tag, "region = 'eu' AND n > 2 AND JMSPriority >= 4"))
    gw = gateway_factory({"rules": str(rules)})
    messages = [("eu-5", "eu", 5, 4), ("us-7", "us", 7, 4), ("eu-1", "eu", 1, 4), ("eu-9", "eu", 9, 4),
                ("eu-6-low", "eu", 6, 1), ("none", None, 8, 4)]
    jmstool.send(f"queue://nsel.{tag}", *(
        {"type": "Text", "body": body, "headers": {"priority": priority},
         "properties": {"n": typed("int", n), **({"region": typed("String", region)} if region else {})}}
        for body, region, n, priority in messages))
    assert wait_for(lambda: len(p := _picked(gw)) >= 2 and p, 30, what="the matching messages on PICKED") == \
        [("eu-5", 5), ("eu-9", 9)]
    code, status = gw.admin("/status")
    (row,) = [r for r in status["routes"] if r["route"] == "picked"]
    assert code == 200 and row["moved"] == 2 and row["filtered"] == 0   # nothing reached the route to filter
    # the others stay on the queue, in order, while the route's consumer is still there: never delivered to it
    rest = jmstool.receive(f"queue://nsel.{tag}", 4, timeout=20)
    assert [m["body"] for m in rest] == ["us-7", "eu-1", "eu-6-low", "none"]
    assert not any(m["headers"]["redelivered"] for m in rest), rest
    with pytest.raises(JmsToolError):
        jmstool.receive(f"queue://nsel.{tag}", 1, timeout=1)
    assert _picked(gw) == [("eu-5", 5), ("eu-9", 9)]


# `mqbridge ARGS` in a process where `import jpype` fails as it does without jpype1 installed
WITHOUT_JPYPE = """\
import sys
sys.modules["jpype"] = None   # an ImportError on import, as when the package is absent
from bridge.cli.main import main
raise SystemExit(main(sys.argv[1:]))
"""
NEEDS_JPYPE = "connectors.amq: the native JMS connector needs JPype: pip install 'mqbridge[jms]'"


def _without_jpype(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", WITHOUT_JPYPE, *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env=dict(os.environ, PYTHONPATH=str(REPO)))


def test_without_jpype_validate_and_the_start_refuse_a_native_connector_saying_what_to_install(
        tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(_selector_rules(BrokerEndpoints("127.0.0.1", 1, 2, 3), "nojpype", "n > 2"))
    checked = _without_jpype("validate", str(rules), cwd=tmp_path)
    assert checked.returncode == 1, checked
    assert f"{rules}: {NEEDS_JPYPE}" in checked.stderr and "Traceback" not in checked.stderr, checked.stderr
    (tmp_path / "gw").mkdir()
    gw = GatewayProcess(tmp_path / "gw", {"rules": str(rules)})
    gw.write_config()
    served = _without_jpype("serve", "-c", str(gw.config_path), cwd=tmp_path / "gw")
    assert served.returncode == 1 and NEEDS_JPYPE in served.stdout + served.stderr, served


# the same where JPype finds no JVM: its search for libjvm fails as on a machine without a Java runtime
WITHOUT_JVM = """\
import sys
import jpype
import jpype._core

def no_jvm(*args, **kwargs):
    raise jpype.JVMNotFoundException("No JVM shared library file (libjvm.so) found. Try setting up the "
                                     "JAVA_HOME environment variable properly.")

jpype._core.getDefaultJVMPath = jpype.getDefaultJVMPath = no_jvm
from bridge.cli.main import main
raise SystemExit(main(sys.argv[1:]))
"""


def test_without_a_java_runtime_validate_refuses_a_native_connector_saying_what_to_install(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(_selector_rules(BrokerEndpoints("127.0.0.1", 1, 2, 3), "nojvm", "n > 2"))
    checked = subprocess.run([sys.executable, "-c", WITHOUT_JVM, "validate", str(rules)], capture_output=True,
                             text=True, timeout=120, cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert checked.returncode == 1, checked
    assert "connectors.amq: cannot start a JVM" in checked.stderr, checked.stderr
    assert "install a Java runtime" in checked.stderr and "Traceback" not in checked.stderr, checked.stderr


def test_without_a_native_connector_nothing_imports_jpype(tmp_path: Path) -> None:
    """The gateway's modules and validate's whole path (a STOMP jms connector included) leave JPype alone: it is
    imported only once a native connector is configured."""
    rules = tmp_path / "rules.yaml"
    rules.write_text("""\
connectors:
  amq: {type: jms, host: 127.0.0.1, port: 1}
routes:
  - name: to-amq
    from: {mqtt: "a/#"}
    to: {connector: amq, queue: a.q}
  - name: from-amq
    from: {connector: amq, queue: b.q}
    to: {queue: B}
    options: {selector: "n > 2"}
""")
    probe = f"""\
import sys
import bridge.app, bridge.connectors.jms, bridge.connectors.registry
from bridge.cli.main import main
assert main(["validate", {str(rules)!r}]) == 0
assert "jpype" not in sys.modules, "jpype imported"
print("jpype not imported")
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert done.returncode == 0 and "jpype not imported" in done.stdout, done
    assert "to-amq: mqtt a/# -> amq a.q" in done.stdout


def test_an_mqtt5_responder_answers_a_queue_requestor_through_native_routes_without_an_envelope(
        gateway_factory: Callable[..., GatewayProcess], activemq: BrokerEndpoints, jmstool: JmsTool,
        tmp_path: Path) -> None:
    """The payload form: the request's JMSReplyTo (a TemporaryQueue) is the MQTT 5 Response Topic
    ``queue:///ID:..?temporary=true``; the responder publishes there with Correlation Data = the request's
    JMSMessageID (a user property), and one route brings every such reply to its requester's temporary queue."""
    tag = uuid.uuid4().hex[:8]
    rules = tmp_path / "rules.yaml"
    rules.write_text(native_connector_yaml(activemq.openwire_url) + f"""\
routes:
  - name: req
    from: {{connector: amq, queue: n5.req.{tag}}}
    to: {{mqtt: "n5/{tag}/request"}}
  - name: ans
    from: {{mqtt: "queue:///+"}}
    to: {{connector: amq, reply_to: true, allow: ["temp-queue://ID:"]}}
""")
    gw = gateway_factory({"rules": str(rules)})
    service = V5(gw.port, "service5").connect()
    try:
        assert service.subscribe(f"n5/{tag}/request", 1) == [1]
        result: list[dict[str, Any]] = []
        requester = threading.Thread(target=lambda: result.append(jmstool.request(
            f"queue://n5.req.{tag}", {"type": "Text", "body": "price?"}, timeout=30)))
        requester.start()
        (req,) = service.wait(1, timeout=30)
        props = req.properties
        assert props.ResponseTopic.startswith("queue:///ID:") and props.ResponseTopic.endswith("?temporary=true")
        message_id = dict(props.UserProperty)["JMSMessageID"]
        service.client.publish(props.ResponseTopic, b"12.50", 1, properties=publish_props(
            CorrelationData=message_id.encode())).wait_for_publish(10)
        requester.join(60)
    finally:
        service.close()
    (res,) = result
    assert props.ResponseTopic == f"queue:///{res['replyTo'].removeprefix('temp-queue://')}?temporary=true"
    assert res["reply"] is not None, f"no reply reached the temporary queue: {_egress(gw, 'ans', 1)}"
    assert res["reply"]["body"] == "12.50" and res["reply"]["headers"]["correlationId"] == res["sent"] == message_id
