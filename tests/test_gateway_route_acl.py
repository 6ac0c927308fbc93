"""Routes under the broker's ACL file, and MQMD UserIdentifier from the authenticated user, through a running
`mqbridge serve` with the embedded queue store, a password file written by Debian's mosquitto_passwd and
paho clients.

A route acts as its ``options.acl_user``: an MQ message whose mqps/Top that user may not publish to goes to
the route's backout queue with the reason (as a ``$`` topic does); a route from an MQTT filter receives only
what its user may read, and one whose user may read nothing of its filter refuses validate and start,
naming the route and filter. An MQTT publication routed to MQ carries the user name the broker checked as
MQMD UserIdentifier (cut to its 12 bytes, a ``truncated`` finding in the conversion log), the client id
when the client has none."""
from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bridge.connectors.embedded import QueueStore, default_path
from bridge.convlog import log_files
from bridge.routing.router import backout_queue_name
from mappings.mq import constants as C
from mappings.mq.message import build_message, decode_message, encode_message
from mappings.mq.mqmd import Mqmd
from mappings.mq.rfh2 import Rfh2, RfhElement, RfhFolder
from tests.support.gateway import GatewayProcess, wait_for
from tests.support.mqtt_clients import PahoClient

pytestmark = pytest.mark.skipif(shutil.which("mosquitto_passwd") is None,
                                reason="mosquitto_passwd (Debian's mosquitto package) not installed")

LONG_USER = "plant-operator-7"   # 16 characters: UserIdentifier holds 12
PASSWORDS = {"alice": "wonder land", LONG_USER: "op7", "watcher": "w"}

ACL = f"""\
topic write plant/anon/#

user alice
topic readwrite plant/alice/#

user {LONG_USER}
topic write plant/ops/#

user watcher
topic read #

user route-in
topic write plant/#
topic deny plant/secret/#

user route-out
topic read plant/#
topic deny plant/alice/private/#
"""

RULES = """\
routes:
  - name: in
    from: {queue: MQTT.OUT}
    to: {mqtt: "{topic}"}
    options: {acl_user: route-in}
  - name: out
    from: {mqtt: "plant/#"}
    to: {queue: MQTT.IN}
    options: {acl_user: route-out}
  - name: in-anon
    from: {queue: ANON.OUT}
    to: {mqtt: "{topic}"}
"""


@pytest.fixture
def gw(gateway_factory: Callable[..., GatewayProcess], tmp_path: Path) -> GatewayProcess:
    passwd = tmp_path / "passwd"
    for i, (user, password) in enumerate(PASSWORDS.items()):
        subprocess.run(["mosquitto_passwd", *(["-c"] if i == 0 else []), "-b", str(passwd), user, password],
                       check=True, capture_output=True, timeout=30)
    (tmp_path / "acl").write_text(ACL, encoding="utf-8")
    (tmp_path / "rules.yaml").write_text(RULES, encoding="utf-8")
    return gateway_factory({"rules": str(tmp_path / "rules.yaml"), "broker": {
        "password_file": str(passwd), "acl_file": str(tmp_path / "acl"), "allow_anonymous": True}})


def mq_message(topic: str, body: bytes) -> bytes:
    rfh = Rfh2(folders=(RfhFolder("mqps", (RfhElement("Top", topic),)),))
    return encode_message(build_message(Mqmd(persistence=C.MQPER_PERSISTENT), (rfh,), body))


def client(clients: Callable[..., PahoClient], gw: GatewayProcess, user: str | None, client_id: str) -> PahoClient:
    c = clients(gw.port, client_id, username=user, password=PASSWORDS.get(user or ""), reconnect=False).connect()
    assert c.rc == 0, (user, c.rc)
    return c


def egress(gw: GatewayProcess, route: str) -> list[dict[str, Any]]:
    out = []
    for f in log_files(gw.data_dir / "convlog"):
        out.extend(r for line in f.read_text().splitlines() if line
                   and (r := json.loads(line))["direction"] == "egress" and r["route"] == route)
    return out


def test_a_routes_publications_are_checked_under_its_acl_user(gw, clients):
    watcher = client(clients, gw, "watcher", "watcher")
    assert watcher.subscribe("plant/#", 1) == [1]
    store = QueueStore(default_path(gw.data_dir)).open()
    try:
        for topic in ("plant/secret/valve", "other/x", "plant/ok"):
            store.put("MQTT.OUT", mq_message(topic, topic.encode()))
        backout = backout_queue_name("in")
        wait_for(lambda: store.depth(backout) == 2, 15, what="two refused messages on the backout queue")
        backed = [decode_message(m.data) for m in store.browse(backout)]
        got = watcher.wait_messages(1)
        assert [m.topic for m in got] == ["plant/ok"]   # put after the refused ones: they would have come first
        # a route without an acl_user publishes under the anonymous rules (its topics come from the message)
        for topic in ("plant/ok", "plant/anon/x"):
            store.put("ANON.OUT", mq_message(topic, topic.encode()))
        wait_for(lambda: store.depth(backout_queue_name("in-anon")) == 1, 15, what="in-anon's refused message")
        anon_backed = decode_message(store.browse(backout_queue_name("in-anon"))[0].data)
    finally:
        store.close()
    assert [m.topic for m in watcher.wait_messages(2)] == ["plant/ok", "plant/anon/x"]
    reason = anon_backed.rfh2_folder("mqbridge")
    assert reason is not None and "does not let an anonymous client (no acl_user) publish to 'plant/ok'" in (
        reason.value("Reason") or "")
    for msg, topic in zip(backed, ("plant/secret/valve", "other/x"), strict=True):
        reason = msg.rfh2_folder("mqbridge")
        assert reason is not None and reason.value("Route") == "in"
        assert f"does not let acl_user 'route-in' publish to '{topic}'" in (reason.value("Reason") or "")
        assert msg.body == topic.encode()
    logged = wait_for(lambda: len(r := [x for x in egress(gw, "in") if x["status"] == "backout"]) == 2 and r, 10,
                      what="a backout record per refused message")
    assert all("does not let acl_user 'route-in' publish" in r["reason"] for r in logged), logged


def test_a_routes_subscription_delivers_what_its_acl_user_may_read_with_the_checked_user(gw, clients):
    alice = client(clients, gw, "alice", "alice-dev")
    operator = client(clients, gw, LONG_USER, "op-7")
    anonymous = client(clients, gw, None, "anon-dev")
    alice.publish("plant/alice/private/diary", b"not for the route", qos=1)
    alice.publish("plant/alice/temp", b"21.5", qos=1)
    operator.publish("plant/ops/shift", b"night", qos=1)
    anonymous.publish("plant/anon/hello", b"hi", qos=1)
    store = QueueStore(default_path(gw.data_dir)).open()
    try:
        wait_for(lambda: store.depth("MQTT.IN") >= 3, 15, what="three publications on MQTT.IN")
        got = [decode_message(m.data) for m in store.browse("MQTT.IN")]
    finally:
        store.close()
    by_body = {m.body: m.md.user_identifier.rstrip() for m in got}
    assert by_body == {b"21.5": "alice", b"night": LONG_USER[:12], b"hi": "anon-dev"}
    records = wait_for(lambda: len(r := egress(gw, "out")) == 3 and r, 10, what="three egress records")
    truncated = [(f["name"], f["detail"]) for r in records for f in r["findings"] if f["change"] == "truncated"]
    assert truncated == [("MQMD.UserIdentifier", f"{LONG_USER!r} cut to 12 bytes")]


def test_a_route_whose_acl_user_may_read_none_of_its_filter_is_refused(gw, tmp_path):
    bad = tmp_path / "bad-rules.yaml"
    bad.write_text(RULES.replace('from: {mqtt: "plant/#"}', 'from: {mqtt: "office/#"}')
                   + '  - name: plain\n    from: {mqtt: "plant/#"}\n    to: {queue: PLAIN.IN}\n', encoding="utf-8")
    cfg = json.loads(json.dumps(gw.config))
    cfg["rules"] = str(bad)
    path = tmp_path / "bad.yaml"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    v = gw.cli("validate", "-c", str(path))
    assert v.returncode == 1
    assert "route out: the ACL" in v.stderr and "acl_user 'route-out'" in v.stderr and "'office/#'" in v.stderr
    assert "route plain" not in v.stderr     # without an acl_user a route reads its filter unrestricted
    # the running gateway refuses the same rules on reload (its rules file rewritten) and keeps its routes
    Path(gw.config["rules"]).write_text(bad.read_text(encoding="utf-8"), encoding="utf-8")
    r = gw.cli("reload", "--admin", f"http://127.0.0.1:{gw.admin_port}")
    assert r.returncode != 0 and "route out: the ACL" in r.stdout + r.stderr
    _, status = gw.admin("/status")
    assert {r["route"] for r in status["routes"]} == {"in", "out", "in-anon"}   # not "plain"
    assert "reload refused" in gw.log()
