"""Operations with MQTT 5 clients, through a running gateway: `$SYS` statistics per protocol level, an
administrator's disconnect (DISCONNECT 0x98) and listener control by `$SYS/SCADA/MQIsdpListener` (the
3.1/3.1.1 side of each: tests/test_broker_ops.py)."""
from __future__ import annotations

import socket
import urllib.parse
from collections.abc import Iterator
from typing import Any

import paho.mqtt.client as mqtt
import pytest

from bridge.mqtt import packets as P
from bridge.mqtt import properties as PR
from bridge.mqtt.passwords import make_hash
from tests.support import shared_gateway
from tests.support.gateway import GatewayProcess, free_port, wait_for
from tests.support.mqtt5_client import V5, raw5, read_until_closed, stay_down
from tests.support.mqtt_clients import V311, RawClient

OPERATOR = {"users": {"operator": make_hash(b"op-secret").encode()}, "listener_control_users": ["operator"]}


@pytest.fixture(scope="module")
def ops_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayProcess, int, int]]:
    p1, p2 = free_port(), free_port()
    gw = GatewayProcess(tmp_path_factory.mktemp("ops5"), {"broker": {
        "listeners": [{"host": "127.0.0.1", "port": p1}, {"host": "127.0.0.1", "port": p2}],
        "allow_anonymous": True, **OPERATOR, "sys_interval": 0.2}}).start()
    assert gw.listener_ports == [p1, p2]
    yield gw, p1, p2
    gw.stop()


@pytest.fixture
def ops(ops_gateway: tuple[GatewayProcess, int, int]) -> tuple[GatewayProcess, int, int]:
    shared_gateway.reset(ops_gateway[0])
    return ops_gateway


def _latest(client: V5, prefix: str) -> dict[str, str]:
    """The newest value of each ``$SYS/broker/<prefix>...`` topic the client received."""
    with client.lock:
        return {m.topic.removeprefix("$SYS/broker/"): m.payload.decode() for m in client.messages
                if m.topic.startswith("$SYS/broker/" + prefix)}


def test_sys_counts_connected_clients_per_protocol_level(ops):
    gw, port, _ = ops
    watcher = V5(port, "sys-watch5").connect()
    assert watcher.subscribe("$SYS/broker/clients/connected/#", 0) == [0]
    v311 = RawClient(port)
    assert v311.connect("sys-311", P.MQTT_311).return_code == 0
    v31 = RawClient(port)
    assert v31.connect("sys-31", P.MQTT_31).return_code == 0
    expected = {"clients/connected": "3", "clients/connected/mqtt31": "1", "clients/connected/mqtt311": "1",
                "clients/connected/mqtt5": "1"}
    wait_for(lambda: _latest(watcher, "clients/connected") == expected, 10,
             what=f"$SYS per level {expected} (have {_latest(watcher, 'clients/connected')})")
    v311.send(P.DISCONNECT_BYTES)
    v311.close()
    expected = {**expected, "clients/connected": "2", "clients/connected/mqtt311": "0"}
    wait_for(lambda: _latest(watcher, "clients/connected") == expected, 10,
             what=f"$SYS after the 3.1.1 client left (have {_latest(watcher, 'clients/connected')})")
    # a 3.1.1 subscriber reads the same values, the level 5 count included
    reader = RawClient(port)
    assert reader.connect("sys-reader", P.MQTT_311).return_code == 0
    assert reader.subscribe("$SYS/broker/clients/connected/mqtt5", 0).return_codes == (0,)
    (value,) = reader.receive_until(lambda p: True)
    assert (value.topic, value.payload) == ("$SYS/broker/clients/connected/mqtt5", b"1")
    for raw in (v31, reader):
        raw.close()
    watcher.close()


def test_an_administrator_s_disconnect_is_disconnect_0x98_for_a_level_5_client(ops):
    gw, port, _ = ops
    raw, connack = raw5(port, "kicked5")
    assert isinstance(connack, P.Connack) and connack.return_code == 0
    v311 = RawClient(port)
    assert v311.connect("kicked311", P.MQTT_311).return_code == 0
    paho = stay_down(V5(port, "kicked-paho")).connect()
    for client_id in ("kicked5", "kicked311", "kicked-paho"):
        status, body = gw.admin("/connections/" + urllib.parse.quote(client_id, safe=""), "DELETE")
        assert (status, body) == (200, {"disconnected": client_id})
    packets: list[Any] = read_until_closed(raw)
    assert packets == [P.Disconnect(P.Reason.ADMINISTRATIVE_ACTION,
                                    {PR.REASON_STRING: "disconnected by administrator"})]
    assert read_until_closed(v311) == []   # 3.1.1 has no server DISCONNECT: the connection just closes
    wait_for(lambda: paho.disconnect_reason is not None, 10, what="paho's on_disconnect")
    assert int(getattr(paho.disconnect_reason, "value", paho.disconnect_reason)) == 0x98
    assert gw.admin("/connections")[1] == []
    paho.client.loop_stop()


def _running(gw: GatewayProcess) -> dict[int, bool]:
    return {lst["port"]: lst["running"] for lst in gw.admin("/status")[1]["listeners"]}


def test_listener_control_by_a_level_5_client(ops):
    gw, p1, p2 = ops
    intruder = V5(p1, "intruder5").connect()   # anonymous: not the operator
    intruder.client.publish(f"$SYS/SCADA/MQIsdpListener/{p2}", b"OFF", 1).wait_for_publish(10)
    wait_for(lambda: "may not control listeners" in gw.log(), 5, what="the refusal logged")
    assert _running(gw) == {p1: True, p2: True}
    op = V5(p1, "operator5")
    op.client.username_pw_set("operator", "op-secret")
    op.connect()
    op.client.publish(f"$SYS/SCADA/MQIsdpListener/{p2}", b"OFF", 1).wait_for_publish(10)
    wait_for(lambda: _running(gw) == {p1: True, p2: False}, 5, what=f"listener {p2} stopped")
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", p2), timeout=3).close()
    op.client.publish(f"$SYS/SCADA/MQIsdpListener/{p2}", b"ON", 1).wait_for_publish(10)
    wait_for(lambda: _running(gw) == {p1: True, p2: True}, 5, what=f"listener {p2} started")
    back = V5(p2, "on-p2").connect()   # a level 5 client connects to it again
    assert back.connack is not None and int(getattr(back.connack[1], "value", back.connack[1])) == 0
    assert "listener control by operator5" in gw.log()
    for client in (intruder, op, back):
        client.close()


def test_a_3_1_1_client_sees_the_level_5_count_change(ops):
    """The count per level follows level 5 clients connecting and leaving (read by a 3.1.1 paho client)."""
    _, port, _ = ops
    seen: list[bytes] = []
    sub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="sys-311-paho", protocol=V311)
    sub.on_message = lambda c, u, m: seen.append(m.payload)
    sub.connect("127.0.0.1", port)
    sub.loop_start()
    try:
        sub.subscribe("$SYS/broker/clients/connected/mqtt5", 0)
        wait_for(lambda: seen and seen[-1] == b"0", 10, what="mqtt5 0")
        five = V5(port, "five").connect()
        wait_for(lambda: seen[-1] == b"1", 10, what="mqtt5 1")
        five.close()
        wait_for(lambda: seen[-1] == b"0", 10, what="mqtt5 0 again")
    finally:
        sub.disconnect()
        sub.loop_stop()
