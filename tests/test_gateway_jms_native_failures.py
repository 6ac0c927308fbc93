"""The native JMS connector when something fails under load. Its provider goes away: a private ActiveMQ
(persistent) is stopped and started again under a flow of MQTT QoS 1 publications routed to a JMS queue;
every publication the gateway acknowledged reaches the queue (duplicates allowed, counted), and `mqbridge
status` shows the links down during the outage and up again after it, with a reconnect counted; a JMS
source reconnects too. The gateway is SIGKILLed under load both ways (the session's ActiveMQ): nothing the
provider accepted or the gateway acknowledged is lost."""
from __future__ import annotations

import base64
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bridge.connectors.embedded import QueueStore, default_path
from mappings.conversions.jms_mq import mq_bytes_to_jms
from mappings.jms.model import TextBody
from tests.support.activemq import ActiveMQ, BrokerEndpoints
from tests.support.gateway import GatewayProcess, wait_for
from tests.support.jmstool import JmsTool, JmsToolError, native_connector_yaml
from tests.support.mqtt_clients import PahoClient

pytest.importorskip("jpype", reason="jpype1 not installed (pip install 'mqbridge[jms]')")
pytestmark = pytest.mark.activemq

PACE_SECONDS = 0.005
JMS_MESSAGES = 2000   # between publications: a steady flow, not a flood of the route's session


def _rules(url: str) -> str:
    return native_connector_yaml(url, "reconnect_max_seconds: 2") + """\
routes:
  - name: flow
    from: {mqtt: "flow/#"}
    to: {connector: amq, queue: flow.q}
  - name: back
    from: {connector: amq, queue: back.q}
    to: {queue: BACK}
"""


def _links(gw: GatewayProcess) -> dict[str, dict[str, Any]]:
    code, status = gw.admin("/status")
    assert code == 200
    rows = {r["route"]: r for r in status["routes"]}
    return {"flow": rows["flow"]["target_link"], "back": rows["back"]["source_link"]}


def _payload(msg: dict[str, Any]) -> str:
    body = msg["body"]
    if isinstance(body, str):
        return body
    return (bytes.fromhex(body["hex"]) if "hex" in body else base64.b64decode(body["base64"])).decode()


class Publisher(threading.Thread):
    """QoS 1 publications to ``prefix``/0..3 with payload m-n, one at a time; ``acked``: those the gateway
    acknowledged."""

    def __init__(self, client: PahoClient, prefix: str = "flow") -> None:
        super().__init__(daemon=True)
        self.client = client
        self.prefix = prefix
        self.acked: list[str] = []
        self.halt = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        n = 0
        try:
            while not self.halt.is_set():
                payload = f"m-{n}"
                info = self.client.publish(f"{self.prefix}/{n % 4}", payload, qos=1, wait=False)
                deadline = time.monotonic() + 30
                while not info.is_published():   # the PUBACK, until halted (the gateway may be gone)
                    if self.halt.is_set():
                        return
                    assert time.monotonic() < deadline, f"no PUBACK for {payload} in 30 s"
                    info.wait_for_publish(0.1)
                self.acked.append(payload)
                n += 1
                self.halt.wait(PACE_SECONDS)
        except BaseException as exc:   # noqa: BLE001 - reported by the test
            self.error = exc


BACK_COUNT = 1000


def test_a_provider_restart_under_load_loses_nothing_acknowledged_and_status_shows_it(
        own_activemq: ActiveMQ, jmstool_classes: Path, gateway_factory: Callable[..., GatewayProcess],
        clients: Callable[..., PahoClient], tmp_path: Path) -> None:
    assert own_activemq.endpoints is not None
    url = own_activemq.endpoints.openwire_url
    rules = tmp_path / "rules.yaml"
    rules.write_text(_rules(url))
    gw = gateway_factory({"rules": str(rules)})
    wait_for(lambda: _links(gw)["back"]["state"] == "up", 30, what="the JMS source to connect")
    publisher = Publisher(clients(gw.port).connect())
    publisher.start()
    try:
        wait_for(lambda: _links(gw)["flow"]["state"] == "up" and len(publisher.acked) >= 50, 30,
                 what="the flow to reach the provider")
        producer = JmsTool(jmstool_classes, url)   # the source busy up to the stop (persistent messages)
        try:
            producer.send("queue://back.q", *({"type": "Text", "body": f"back-{i}"} for i in range(BACK_COUNT)))
        finally:
            producer.close()
        own_activemq.stop()
        back_before = _depth(gw, "BACK")
        down = wait_for(lambda: (lambda links: links if all(v["state"] == "down" for v in links.values())
                                 else None)(_links(gw)), 30, what="status to show both links down")
        assert down["flow"]["error"] and down["back"]["error"]
        shown = gw.cli("status", "--admin", f"http://127.0.0.1:{gw.admin_port}").stdout
        assert "target link DOWN" in shown and "source link DOWN" in shown, shown
        during = len(publisher.acked)
        wait_for(lambda: len(publisher.acked) >= during + 50, 30, what="publications acknowledged during the outage")
        own_activemq.restart()
        wait_for(lambda: all(v["state"] == "up" and v["reconnects"] >= 1 for v in _links(gw).values()), 60,
                 what="status to show both links up again")
        after = len(publisher.acked)
        wait_for(lambda: len(publisher.acked) >= after + 50, 30, what="publications after the restart")
    finally:
        publisher.halt.set()
        publisher.join(30)
    assert publisher.error is None, publisher.error
    shown = gw.cli("status", "--admin", f"http://127.0.0.1:{gw.admin_port}").stdout
    assert "target link UP" in shown and "1 reconnect(s)" in shown, shown
    acked = publisher.acked

    def route_drained() -> bool:
        code, status = gw.admin("/status")
        (row,) = [r for r in status["routes"] if r["route"] == "flow"]
        return row["queued"] == 0 and row["moved"] >= len(acked)

    wait_for(route_drained, 60, what="the route to move every acknowledged publication")
    tool = JmsTool(jmstool_classes, url)
    try:
        got = [_payload(m) for m in tool.receive("queue://flow.q", len(acked), timeout=30)]
        while True:   # duplicates beyond that count, one at a time until none comes within a second
            try:
                got += [_payload(m) for m in tool.receive("queue://flow.q", 1, timeout=1)]
            except JmsToolError:
                break
        tool.send("queue://back.q", {"type": "Text", "body": "after the restart"})
    finally:
        tool.close()
    missing = set(acked) - set(got)
    assert not missing, f"{len(missing)} acknowledged publications lost, e.g. {sorted(missing)[:5]}"
    duplicates = len(got) - len(set(got))
    print(f"{len(acked)} acknowledged ({during} when status showed the outage), {duplicates} duplicate(s); "
          f"{back_before} of {BACK_COUNT} JMS messages on BACK when the provider stopped")
    assert duplicates <= len(acked) // 2   # at least once: a batch whose commit answer was lost, not a replay
    wanted = {f"back-{i}" for i in range(BACK_COUNT)} | {"after the restart"}
    wait_for(lambda: wanted <= set(_embedded_texts(gw, "BACK")), 60,
             what="every message of the JMS source, from before the stop and after the restart, on BACK")


def _kill_rules(url: str, tag: str) -> str:
    return native_connector_yaml(url) + f"""\
routes:
  - name: in
    from: {{connector: amq, queue: kill.in.{tag}}}
    to: {{queue: KILL.IN}}
  - name: out
    from: {{mqtt: "kill/#"}}
    to: {{connector: amq, queue: kill.out.{tag}}}
"""


def _depth(gw: GatewayProcess, queue: str) -> int:
    store = QueueStore(default_path(gw.data_dir)).open()
    try:
        return store.depth(queue)
    finally:
        store.close()


def _embedded_texts(gw: GatewayProcess, queue: str) -> list[str]:
    store = QueueStore(default_path(gw.data_dir)).open()
    out: list[str] = []
    try:
        seq = 0
        while page := store.browse(queue, limit=1000, after_seq=seq):
            seq = page[-1].seq
            for m in page:
                body = mq_bytes_to_jms(m.data, now_ms=0)[0].body
                out.append(body.text if isinstance(body, TextBody) and body.text is not None else "")
    finally:
        store.close()
    return out


def test_sigkill_of_the_gateway_under_load_both_ways_loses_nothing_acknowledged(
        activemq: BrokerEndpoints, jmstool: JmsTool, gateway_factory: Callable[..., GatewayProcess],
        clients: Callable[..., PahoClient], tmp_path: Path) -> None:
    """JMS queue -> embedded queue and MQTT QoS 1 -> JMS queue at once, the gateway SIGKILLed mid-flow and
    started again: every message the provider accepted, and every publication the gateway acknowledged,
    arrives; duplicates (at least once) are counted."""
    tag = uuid.uuid4().hex[:8]
    rules = tmp_path / "rules.yaml"
    rules.write_text(_kill_rules(activemq.openwire_url, tag))
    # queued before the gateway starts, so that its source is busy (a batch received and not yet stored) for
    # as much of the time as can be: the kill is the likelier to find a batch in flight
    sent = [f"j-{n}" for n in range(JMS_MESSAGES)]
    for start in range(0, JMS_MESSAGES, 500):
        jmstool.send(f"queue://kill.in.{tag}", *({"type": "Text", "body": b} for b in sent[start:start + 500]))
    gw = gateway_factory({"rules": str(rules)})
    publisher = Publisher(clients(gw.port, reconnect=False).connect(), "kill")
    publisher.start()
    try:
        wait_for(lambda: len(publisher.acked) >= 30 and _depth(gw, "KILL.IN") >= 200, 60,
                 what="both flows under way")
        # killed on the MQTT flow's clock, not right after the JMS route stored a batch (which a kill upon
        # a depth reached would be): the JMS source may be anywhere in its batch
        mark = len(publisher.acked)
        wait_for(lambda: len(publisher.acked) >= mark + 10, 30, interval=0.001, what="ten more publications")
        gw.kill()
    finally:
        publisher.halt.set()
        publisher.join(30)
    acked = publisher.acked
    stored_at_kill = _depth(gw, "KILL.IN")
    assert stored_at_kill < len(sent), "the JMS flow was not under way at the kill"
    gw.start(timeout=60)
    wait_for(lambda: _depth(gw, "KILL.IN") >= len(sent) and set(_embedded_texts(gw, "KILL.IN")) >= set(sent), 60,
             interval=0.2, what=f"every one of {len(sent)} JMS messages on KILL.IN")
    got_in = _embedded_texts(gw, "KILL.IN")
    tool = JmsTool(jmstool.classes, activemq.openwire_url)
    try:
        got_out = [_payload(m) for m in tool.receive(f"queue://kill.out.{tag}", len(acked), timeout=60)]
        while True:   # duplicates beyond that count, one at a time until none comes within a second
            try:
                got_out += [_payload(m) for m in tool.receive(f"queue://kill.out.{tag}", 1, timeout=1)]
            except JmsToolError:
                break
    finally:
        tool.close()
    missing = set(acked) - set(got_out)
    assert not missing, f"{len(missing)} acknowledged publications lost, e.g. {sorted(missing)[:5]}"
    dup_in, dup_out = len(got_in) - len(set(got_in)), len(got_out) - len(set(got_out))
    print(f"JMS -> embedded: {len(sent)} sent ({stored_at_kill} stored at the kill), {dup_in} duplicate(s); "
          f"MQTT -> JMS: {len(acked)} acknowledged, {dup_out} duplicate(s)")
    assert dup_in <= 128   # at most the source's one open batch (the router's BATCH) comes again
    assert dup_out <= len(acked)


def test_an_idle_targets_link_shows_the_provider_gone_without_traffic(
        own_activemq: ActiveMQ, gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient],
        tmp_path: Path) -> None:
    """Nothing is sent after the provider stops, so only the connection's ExceptionListener can tell: the
    route's status shows the target link down with the provider's reason."""
    assert own_activemq.endpoints is not None
    rules = tmp_path / "rules.yaml"
    rules.write_text(_rules(own_activemq.endpoints.openwire_url))
    gw = gateway_factory({"rules": str(rules)})
    client = clients(gw.port).connect()
    client.publish("flow/one", b"connects the target", qos=1).wait_for_publish(10)

    def moved() -> bool:   # committed at the provider: the target is idle from here on
        code, status = gw.admin("/status")
        (row,) = [r for r in status["routes"] if r["route"] == "flow"]
        return row["moved"] >= 1 and row["queued"] == 0

    wait_for(moved, 30, what="the route to move the message")
    assert _links(gw)["flow"]["state"] == "up"
    own_activemq.stop()
    link = wait_for(lambda: (lambda lk: lk if lk["state"] == "down" else None)(_links(gw)["flow"]), 30,
                    what="the idle target's link down")
    assert str(link["error"]).startswith("provider connection lost"), link
