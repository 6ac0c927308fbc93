"""CONNECT against a real `mqbridge serve`: protocol levels, CONNACK return codes, client id rules, auth.

paho-mqtt at 3.1 and 3.1.1 for what a library can send; a raw socket for what it cannot (a bad
protocol name or level, an empty 3.1 id, an empty 3.1.1 id without clean session).
"""
from __future__ import annotations

import struct

import pytest

from bridge.mqtt import packets as P
from bridge.mqtt.passwords import make_hash
from tests.support import shared_gateway
from tests.support.gateway import GatewayProcess, wait_for
from tests.support.mqtt_clients import LEVEL, PROTOCOL_IDS, PROTOCOLS, V31, V311, RawClient

# one gateway process per module, reset before each test (see tests/support/shared_gateway.py)
module_gateway = shared_gateway.module_gateway
gateway = shared_gateway.gateway


def raw_connect_bytes(name: str, level: int, client_id: str = "raw", flags: int = 0x02,
                      keepalive: int = 60) -> bytes:
    def s(text: str) -> bytes:
        raw = text.encode("utf-8")
        return struct.pack(">H", len(raw)) + raw

    body = s(name) + bytes((level, flags)) + struct.pack(">H", keepalive) + s(client_id)
    return bytes((0x10,)) + P.encode_length(len(body)) + body


def connected_ids(gateway) -> dict[str, dict]:
    _, conns = gateway.admin("/connections")
    return {c["client_id"]: c for c in conns}


@pytest.mark.parametrize("proto", PROTOCOLS, ids=PROTOCOL_IDS)
def test_paho_connects_at_its_protocol_level(gateway, clients, proto):
    c = clients(gateway.port, protocol=proto).connect()
    assert c.rc == 0
    assert c.session_present is False
    conn = connected_ids(gateway)[c.client_id]
    assert conn["protocol_level"] == LEVEL[proto]
    assert conn["clean_session"] is True


def test_both_levels_share_one_listener(gateway, clients):
    a = clients(gateway.port, protocol=V31).connect()
    b = clients(gateway.port, protocol=V311).connect()
    a.subscribe("x/y", 1)
    b.publish("x/y", b"across levels", qos=1)
    (msg,) = a.wait_messages(1)
    assert (msg.topic, msg.payload, msg.qos) == ("x/y", b"across levels", 1)
    levels = {cid: c["protocol_level"] for cid, c in connected_ids(gateway).items()}
    assert levels == {a.client_id: 3, b.client_id: 4}


@pytest.mark.parametrize("name,level", [
    ("MQTT", 3), ("MQIsdp", 4), ("MQTT", 0), ("MQTT", 6), ("MQIsdp", 5), ("MQIsdp", 2), ("MQXX", 4), ("mqtt", 4),
])
def test_bad_protocol_name_or_level_gets_connack_1_then_close(gateway, name, level):
    raw = RawClient(gateway.port)
    raw.send(raw_connect_bytes(name, level))
    packet = raw.recv()
    assert packet == P.Connack(1, False)
    assert raw.closed_by_peer()
    raw.close()
    # the broker keeps serving everyone else
    ok = RawClient(gateway.port)
    assert ok.connect("after-bad").return_code == 0
    ok.close()


def test_client_id_31_one_to_23_characters(gateway, clients):
    for cid in ("a", "x" * 23):
        c = clients(gateway.port, cid, protocol=V31).connect()
        assert c.rc == 0, cid
        c.disconnect()


def test_client_id_31_of_24_characters_gets_rc_2(gateway, clients):
    c = clients(gateway.port, "y" * 24, protocol=V31, reconnect=False).connect()
    assert c.rc == 2
    assert c.disconnected.wait(5)
    assert "y" * 24 not in connected_ids(gateway)
    raw = RawClient(gateway.port)
    raw.send(raw_connect_bytes("MQIsdp", 3, "z" * 24))
    assert raw.recv() == P.Connack(2, False)
    assert raw.closed_by_peer()


def test_client_id_31_empty_gets_rc_2(gateway):
    raw = RawClient(gateway.port)
    raw.send(raw_connect_bytes("MQIsdp", 3, ""))
    assert raw.recv() == P.Connack(2, False)
    assert raw.closed_by_peer()


def test_client_id_311_long_ids_are_accepted(gateway, clients):
    cid = "long-" + "i" * 200
    c = clients(gateway.port, cid, protocol=V311).connect()
    assert c.rc == 0
    c.subscribe("long/id", 1)
    c.publish("long/id", b"me", qos=1)
    assert c.wait_messages(1)[0].payload == b"me"
    assert cid in connected_ids(gateway)


def test_client_id_311_empty_with_clean_session_is_assigned(gateway, clients):
    c = clients(gateway.port, "", protocol=V311, clean_session=True).connect()
    assert c.rc == 0
    ids = list(connected_ids(gateway))
    assert len(ids) == 1 and ids[0], ids
    # the assigned id is a working client: it can subscribe and receive
    c.subscribe("assigned/+", 2)
    c.publish("assigned/x", b"hello", qos=2)
    assert c.wait_messages(1)[0].payload == b"hello"
    # two clients with empty ids get different ids
    d = clients(gateway.port, "", protocol=V311).connect()
    assert d.rc == 0
    assert len(connected_ids(gateway)) == 2


def test_client_id_311_empty_without_clean_session_gets_rc_2(gateway):
    raw = RawClient(gateway.port)
    raw.send(raw_connect_bytes("MQTT", 4, "", flags=0x00))
    assert raw.recv() == P.Connack(2, False)
    assert raw.closed_by_peer()
    _, sessions = gateway.admin("/sessions")
    assert sessions == []


# -- authentication ------------------------------------------------------------------------------

USERS = {"alice": make_hash(b"wonderland").encode(), "bob": make_hash(b"builder").encode()}


@pytest.fixture(scope="module")
def module_auth_gateway(tmp_path_factory):
    # the tests of this module send many wrong passwords from 127.0.0.1 on purpose: the failed-login
    # throttle (tests/test_broker_auth.py) would lock that address out after 5
    gw = GatewayProcess(tmp_path_factory.mktemp("auth-gw"),
                        {"broker": {"users": USERS, "allow_anonymous": False,
                                    "limits": {"login_failures": 1000}}}).start()
    yield gw
    gw.stop()


@pytest.fixture
def auth_gateway(module_auth_gateway):
    shared_gateway.reset(module_auth_gateway, username="alice", password=b"wonderland")
    return module_auth_gateway


@pytest.mark.parametrize("proto", PROTOCOLS, ids=PROTOCOL_IDS)
@pytest.mark.parametrize("username,password,rc", [
    ("alice", "wonderland", 0),
    ("bob", "builder", 0),
    ("alice", "wrong", 4),
    ("bob", USERS["bob"], 4),              # the hash is not the password
    ("mallory", "wonderland", 4),
    (None, None, 5),                       # anonymous, not allowed
])
def test_auth_with_broker_users(auth_gateway, clients, proto, username, password, rc):
    c = clients(auth_gateway.port, protocol=proto, username=username, password=password,
                reconnect=False).connect()
    assert c.rc == rc
    if rc == 0:
        conn = connected_ids(auth_gateway)[c.client_id]
        assert conn["username"] == username
    else:
        assert c.disconnected.wait(5)
        assert c.client_id not in connected_ids(auth_gateway)
        assert "not authorized" in auth_gateway.log()


def test_anonymous_refused_beside_users_by_default(gateway_factory, clients):
    """As mosquitto 2: once users are configured, no client gets in without a user name by default."""
    gw = gateway_factory({"broker": {"users": USERS}})
    anon = clients(gw.port, reconnect=False).connect()
    assert anon.rc == 5
    bad = clients(gw.port, username="alice", password="nope", reconnect=False).connect()
    assert bad.rc == 4
    good = clients(gw.port, username="alice", password="wonderland", reconnect=False).connect()
    assert good.rc == 0


def test_refused_connect_does_not_disturb_the_session_of_that_id(gateway, clients):
    """A CONNACK 2 for a bad id must not have created or touched any session."""
    good = clients(gateway.port, "keeper", protocol=V311, clean_session=False).connect()
    good.subscribe("keep/#", 1)
    bad = RawClient(gateway.port)
    bad.send(raw_connect_bytes("MQIsdp", 3, "k" * 30))
    assert bad.recv() == P.Connack(2, False)
    good.publish("keep/1", b"still here", qos=1)
    assert good.wait_messages(1)[0].payload == b"still here"
    wait_for(lambda: "keeper" in connected_ids(gateway), 5, what="keeper still connected")


@pytest.mark.parametrize("proto", PROTOCOLS, ids=PROTOCOL_IDS)
def test_refused_connect_does_not_take_over_a_connected_client(auth_gateway, clients, proto):
    alice = clients(auth_gateway.port, "alice-dev", protocol=proto, username="alice", password="wonderland",
                    will=("auth/will", b"alice lost", 0, False), reconnect=False).connect()
    assert alice.rc == 0
    alice.subscribe("auth/#", 1)
    impostor = clients(auth_gateway.port, "alice-dev", protocol=proto, username="alice", password="guess",
                       reconnect=False).connect()
    assert impostor.rc == 4
    other = clients(auth_gateway.port, protocol=proto, username="bob", password="builder").connect()
    other.publish("auth/still", b"there", qos=1)
    assert [m.payload for m in alice.wait_messages(1)] == [b"there"]   # no will, still subscribed
    assert not alice.disconnected.is_set()
