"""The conversion log of routes with an MQTT side, through a running gateway (docs/conversion-log.md):
``retained`` is the RETAIN flag of the publication a route took from MQTT (MQTT -> MQ writes it as mqps/Ret)
or made for MQTT (from mqps/Ret), and the egress record to MQTT has the QoS the route published at (not
the source's, and not a subscriber's lower grant)."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bridge.connectors.embedded import QueueStore, default_path
from bridge.convlog import log_files
from mappings.mq import constants as C
from mappings.mq.message import build_message, decode_message, encode_message
from mappings.mq.mqmd import Mqmd
from mappings.mq.rfh2 import Rfh2, RfhElement, RfhFolder
from tests.support.gateway import GatewayProcess, wait_for
from tests.support.mqtt_clients import PahoClient
from tests.support.procs import children, comm

RULES = """\
routes:
  - name: up
    from: {mqtt: "plant/#"}
    to: {queue: PLANT}
  - name: down
    from: {queue: ALERTS}
    to: {mqtt: "alerts/{topic}"}
"""


def _records(gw: GatewayProcess, count: int) -> list[dict[str, Any]]:
    def found() -> list[dict[str, Any]]:
        recs = [json.loads(line) for f in log_files(gw.data_dir / "convlog") for line in f.read_text().splitlines()
                if line]
        return recs if len(recs) >= count else []
    return wait_for(found, 15, what=f"{count} conversion log records")


def _mq(persistent: bool, top: str, ret: bool) -> bytes:
    mqps = RfhFolder("mqps", (RfhElement("Top", top), *((RfhElement("Ret", "1"),) if ret else ())))
    md = Mqmd(persistence=C.MQPER_PERSISTENT if persistent else C.MQPER_NOT_PERSISTENT,
              coded_char_set_id=C.CCSID_UTF8)
    return encode_message(build_message(md, (Rfh2(folders=(mqps,)),), top.encode(), body_format=C.MQFMT_STRING))


def test_retained_flag_and_published_qos_are_recorded(
        gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient], tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    gw = gateway_factory({"rules": str(rules)})
    sub = clients(gw.port, "dash").connect()
    assert sub.subscribe("alerts/#", 1) == [1]       # granted 1: lower than what the route publishes
    pub = clients(gw.port, "sensor").connect()
    pub.publish("plant/a", b"kept", qos=1, retain=True)
    pub.publish("plant/b", b"passing", qos=1)
    store = QueueStore(default_path(gw.data_dir)).open()
    try:
        got = [decode_message(wait_for(lambda: store.get("PLANT"), 15, what="a message on PLANT").data)
               for _ in range(2)]
        rets = {m.body: (m.rfh2_folder("mqps").value("Ret") if m.rfh2_folder("mqps") else None) for m in got}
        assert rets == {b"kept": "1", b"passing": None}
        store.put("ALERTS", _mq(True, "hot", ret=True))       # Table 4: persistent -> QoS 2, RETAIN from Ret
        store.put("ALERTS", _mq(False, "cold", ret=False))    # not persistent -> QoS 0
    finally:
        store.close()
    m = sub.wait_messages(2, timeout=20)
    assert [(x.topic, x.qos) for x in m] == [("alerts/hot", 1), ("alerts/cold", 0)]

    recs = _records(gw, 8)

    def pair(route: str, source: str) -> list[tuple[str, int, bool | None]]:
        """(direction, qos, retained) of the ingress record from ``source`` and its egress record."""
        key = next(r["message_key"] for r in recs if r["route"] == route and r["direction"] == "ingress"
                   and r["destination"] == source)
        return [(r["direction"], r["qos"], r["retained"]) for r in recs if r["message_key"] == key]

    assert pair("up", "plant/a") == [("ingress", 1, True), ("egress", 1, True)]
    assert pair("up", "plant/b") == [("ingress", 1, False), ("egress", 1, False)]
    # from MQ: ingress the MQ message's (persistent: 1); egress the QoS the route published at (2), which the
    # subscriber granted 1 received as 1 (MQTT's min), and the RETAIN flag it was published with
    down: dict[str, list[tuple[str, int, bool | None]]] = {}
    for r in recs:
        if r["route"] == "down":
            down.setdefault(r["message_key"], []).append((r["direction"], r["qos"], r["retained"]))
    assert sorted(down.values()) == [[("ingress", 0, False), ("egress", 0, False)],
                                     [("ingress", 1, True), ("egress", 2, True)]]
    assert all(r["schema_version"] == 2 for r in recs)


def test_closed_log_files_get_sidecars_from_the_routes_own_values(
        gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient]) -> None:
    """A running gateway rotates its 1 MB log files under a route's load; each closed file's Parquet sidecar
    is built from the values the route logged (status counts them) and equals the sidecar of its JSON."""
    pq = pytest.importorskip("pyarrow.parquet")
    from bridge.convlog_parquet import read_log, sidecar_path

    gw = gateway_factory({"convlog": {"max_file_mb": 1}})   # the embedded defaults: route mq/# -> MQTT.IN
    pub = clients(gw.port, "meter").connect()
    infos = [pub.publish(f"mq/m{i % 7}", b"r" * 100, qos=1, wait=False) for i in range(5000)]
    for info in infos:
        info.wait_for_publish(30)
    closed = wait_for(lambda: log_files(gw.data_dir / "convlog")[:-1] if len(
        log_files(gw.data_dir / "convlog")) >= 4 else None, 30, what="three closed log files")
    status = wait_for(lambda: (s := gw.admin("/status")[1]["convlog"])["sidecars"]["written"] >= len(closed)
                      and s, 30, what="the closed files' sidecars")
    assert status["sidecars"]["from_values"] == status["sidecars"]["written"]
    assert status["sidecars"]["rejected"] == 0 and status["dropped"] == 0
    for path in closed:
        from_values = pq.read_table(sidecar_path(path))
        assert from_values.to_pylist() == read_log(path.read_bytes()).to_pylist()
        assert from_values.num_rows == path.read_bytes().count(b"\n")
    # written by the gateway's conversion log process and its sidecar process, not threads sharing the event
    # loop's GIL
    assert gw.proc is not None
    (writer,) = [pid for pid in children(gw.proc.pid) if comm(pid) == "mqb-convlog"]
    assert "mqb-sidecars" in [comm(pid) for pid in children(writer)]
    assert status["pid"] == writer and status["sent"] >= status["written"] > 0
