"""Debian's mosquitto_pub / mosquitto_sub (MQTT 3.1 and 3.1.1) against a real `mqbridge serve`:
QoS and downgrade, order, retained, wills, persistent sessions, client ids, auth, wildcards, $SYS,
and interoperation with paho at the other protocol level."""
from __future__ import annotations

import subprocess

import pytest

from bridge.mqtt.passwords import make_hash
from tests.support import shared_gateway
from tests.support.gateway import free_port, wait_for
from tests.support.mosquitto import AVAILABLE, VERSIONS, MosquittoSub, mosquitto_pub
from tests.support.mqtt_clients import V31, V311

# one gateway process per module, reset before each test (see tests/support/shared_gateway.py)
module_gateway = shared_gateway.module_gateway
gateway = shared_gateway.gateway

pytestmark = pytest.mark.skipif(not AVAILABLE, reason="mosquitto-clients are not installed")


@pytest.fixture(params=VERSIONS)
def version(request):
    return request.param


@pytest.fixture
def subs():
    """Start MosquittoSub processes; every one still running is stopped at teardown."""
    made: list[MosquittoSub] = []

    def make(*args, **kw) -> MosquittoSub:
        s = MosquittoSub(*args, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.kill()


def pub_ok(*args, **kw) -> None:
    r = mosquitto_pub(*args, **kw)
    assert r.returncode == 0, r.stderr


def test_qos_levels_and_downgrade(gateway, subs, version):
    s1 = subs(gateway.port, "mo/q/#", version=version, qos=1, client_id=f"s1-{version}").wait_subscribed(gateway)
    s2 = subs(gateway.port, "mo/q/#", version=version, qos=2, client_id=f"s2-{version}").wait_subscribed(gateway)
    for q in (0, 1, 2):
        pub_ok(gateway.port, f"mo/q/{q}", f"p{q}", version=version, qos=q)
    got1 = {m.payload: m.qos for m in s1.wait_messages(3)}
    got2 = {m.payload: m.qos for m in s2.wait_messages(3)}
    assert got1 == {"p0": 0, "p1": 1, "p2": 1}
    assert got2 == {"p0": 0, "p1": 1, "p2": 2}


@pytest.mark.parametrize("qos", [0, 1, 2])
def test_order_of_many_messages(gateway, subs, version, qos):
    n = 300
    s = subs(gateway.port, "mo/order", version=version, qos=qos, client_id=f"ord-{version}", count=n)
    s.wait_subscribed(gateway)
    lines = "".join(f"{i}\n" for i in range(n))
    r = subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(gateway.port), "-V", version, "-q", str(qos),
                        "-t", "mo/order", "-l"], input=lines, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    got = s.wait_messages(n, timeout=30)
    assert [int(m.payload) for m in got] == list(range(n))
    assert s.wait_exit() == 0


def test_retained_set_replace_clear(gateway, subs, version):
    pub_ok(gateway.port, "mo/ret/a", "first", version=version, qos=1, retain=True)
    pub_ok(gateway.port, "mo/ret/a", "second", version=version, qos=1, retain=True)
    pub_ok(gateway.port, "mo/ret/b", "bee", version=version, qos=2, retain=True)
    s = subs(gateway.port, "mo/ret/#", version=version, qos=2, client_id=f"ret-{version}")
    got = s.wait_messages(2)
    assert sorted((m.topic, m.payload, m.qos, m.retain) for m in got) == [
        ("mo/ret/a", "second", 1, True), ("mo/ret/b", "bee", 2, True)]
    pub_ok(gateway.port, "mo/ret/a", None, version=version, qos=1, retain=True)   # -n -r clears
    s2 = subs(gateway.port, ["mo/ret/#", "mo/marker"], version=version, qos=2, client_id=f"ret2-{version}")
    s2.wait_subscribed(gateway)
    pub_ok(gateway.port, "mo/marker", "m", version=version, qos=2)
    got = s2.wait_messages(2)
    assert [(m.topic, m.payload, m.retain) for m in got] == [("mo/ret/b", "bee", True), ("mo/marker", "m", False)]


def test_retained_survives_restart(gateway, subs, version):
    pub_ok(gateway.port, "mo/keep", "across restart", version=version, qos=1, retain=True)
    assert gateway.stop() == 0
    gateway.start()
    s = subs(gateway.port, "mo/keep", version=version, qos=1, client_id=f"keep-{version}", count=1)
    (m,) = s.wait_messages(1)
    assert (m.payload, m.retain) == ("across restart", True)


def test_will_on_kill_but_not_on_clean_exit(gateway, subs, version):
    watcher = subs(gateway.port, "mo/will/#", version=version, qos=1, client_id=f"w-{version}")
    watcher.wait_subscribed(gateway)
    polite = subs(gateway.port, "mo/none", version=version, client_id=f"polite-{version}",
                  extra=("--will-topic", "mo/will/polite", "--will-payload", "never", "--will-qos", "1"))
    polite.wait_subscribed(gateway)
    polite.stop()   # SIGTERM: DISCONNECT first
    victim = subs(gateway.port, "mo/none", version=version, client_id=f"victim-{version}",
                  extra=("--will-topic", "mo/will/victim", "--will-payload", "died", "--will-qos", "1",
                         "--will-retain"))
    victim.wait_subscribed(gateway)
    victim.kill()   # SIGKILL: the socket just closes
    (m,) = watcher.wait_messages(1)
    assert (m.topic, m.payload, m.qos) == ("mo/will/victim", "died", 1)
    late = subs(gateway.port, "mo/will/#", version=version, qos=1, client_id=f"late-{version}")
    (r,) = late.wait_messages(1)
    assert (r.topic, r.payload, r.retain) == ("mo/will/victim", "died", True)
    assert [x.payload for x in watcher.messages] == ["died"]


def test_persistent_session_queues_qos1_not_qos0(gateway, subs, version):
    cid = f"persist-{version}"
    s = subs(gateway.port, "mo/p/#", version=version, qos=1, client_id=cid, clean=False)
    s.wait_subscribed(gateway)
    s.stop()
    wait_for(lambda: cid not in {c["client_id"] for c in gateway.admin("/connections")[1]}, 5, what="gone")
    pub_ok(gateway.port, "mo/p/0", "qos0 while away", version=version, qos=0)
    pub_ok(gateway.port, "mo/p/1", "qos1 while away", version=version, qos=1)
    pub_ok(gateway.port, "mo/p/2", "qos2 while away", version=version, qos=2)
    back = subs(gateway.port, "mo/p/#", version=version, qos=1, client_id=cid, clean=False)
    got = back.wait_messages(2)
    back.wait_subscribed(gateway)
    pub_ok(gateway.port, "mo/p/marker", "m", version=version, qos=1)
    got = back.wait_messages(3)
    assert [(m.payload, m.qos) for m in got] == [("qos1 while away", 1), ("qos2 while away", 1), ("m", 1)]


def test_client_id_rules(gateway, version):
    long_id = "L" * 40
    r = mosquitto_pub(gateway.port, "mo/id", "x", version=version, client_id=long_id)
    if version == "mqttv31":
        assert r.returncode != 0 and "identifier rejected" in r.stderr
    else:
        assert r.returncode == 0, r.stderr
        assert f"client {long_id} connected" in gateway.log()
    r = mosquitto_pub(gateway.port, "mo/id", "x", version=version, client_id="x" * 23)
    assert r.returncode == 0, r.stderr


def test_auth(gateway_factory, version):
    gw = gateway_factory({"broker": {"allow_anonymous": False,
                                     "users": {"dev": make_hash(b"s3cret").encode()}}})
    ok = mosquitto_pub(gw.port, "mo/a", "x", version=version, extra=("-u", "dev", "-P", "s3cret"))
    assert ok.returncode == 0, ok.stderr
    bad = mosquitto_pub(gw.port, "mo/a", "x", version=version, extra=("-u", "dev", "-P", "nope"))
    assert bad.returncode != 0 and "bad user name or password" in bad.stderr.lower()
    anon = mosquitto_pub(gw.port, "mo/a", "x", version=version)
    assert anon.returncode != 0 and "not authorised" in anon.stderr.lower().replace("authorized", "authorised")


def test_wildcards_and_sys(gateway, subs, version):
    plus = subs(gateway.port, "mo/+/temp", version=version, client_id=f"plus-{version}").wait_subscribed(gateway)
    hash_ = subs(gateway.port, "#", version=version, client_id=f"hash-{version}").wait_subscribed(gateway)
    for t in ("mo/room1/temp", "mo/room1/hum", "mo/a/b/temp"):
        pub_ok(gateway.port, t, t, version=version, qos=1)
    pub_ok(gateway.port, "mo/zz/temp", "marker", version=version, qos=1)
    assert [m.topic for m in plus.wait_messages(2)] == ["mo/room1/temp", "mo/zz/temp"]
    got = hash_.wait_messages(4)
    assert [m.topic for m in got] == ["mo/room1/temp", "mo/room1/hum", "mo/a/b/temp", "mo/zz/temp"]
    assert not any(m.topic.startswith("$") for m in got)
    # once the first $SYS update has gone out (0.5 s after start), a subscription gets it retained
    wait_for(lambda: gateway.admin("/status")[1]["retained"] > 0, 5, what="the first $SYS update")
    sys = subs(gateway.port, "$SYS/broker/version", version=version, client_id=f"sys-{version}", count=1)
    (v,) = sys.wait_messages(1)
    assert v.payload.startswith("mqbridge") and v.retain


@pytest.mark.parametrize("paho_proto", [V31, V311], ids=["paho31", "paho311"])
def test_interop_with_paho(gateway, subs, clients, version, paho_proto):
    s = subs(gateway.port, "mo/x/#", version=version, qos=2, client_id=f"ix-{version}").wait_subscribed(gateway)
    p = clients(gateway.port, protocol=paho_proto).connect()
    p.subscribe("mo/y/#", 2)
    p.publish("mo/x/1", b"paho to mosquitto", qos=2)
    pub_ok(gateway.port, "mo/y/1", "mosquitto to paho", version=version, qos=2)
    (m,) = s.wait_messages(1)
    assert (m.payload, m.qos) == ("paho to mosquitto", 2)
    (n,) = p.wait_messages(1)
    assert (n.payload, n.qos) == (b"mosquitto to paho", 2)


def test_empty_client_id_311_is_assigned(gateway, version):
    r = subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(gateway.port), "-V", version, "-t", "mo/e",
                        "-m", "x", "-q", "1"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    # mosquitto_pub sends an empty id at 3.1.1 (the broker assigns one) and makes one up at 3.1
    if version == "mqttv311":
        assert "client auto-" in gateway.log()


def test_listener_control_with_mosquitto_pub(gateway_factory, version):
    p1, p2 = free_port(), free_port()
    gw = gateway_factory({"broker": {"listeners": [{"host": "127.0.0.1", "port": p1},
                                                   {"host": "127.0.0.1", "port": p2}],
                                     "allow_anonymous": True, "users": {"scada-op": make_hash(b"s3cret").encode()},
                                     "listener_control_users": ["scada-op"]}})

    def running() -> dict[int, bool]:
        return {lst["port"]: lst["running"] for lst in gw.admin("/status")[1]["listeners"]}

    r = mosquitto_pub(p1, f"$SYS/SCADA/MQIsdpListener/{p2}", "OFF", version=version, client_id="someone")
    assert r.returncode == 0
    wait_for(lambda: "may not control listeners" in gw.log(), 5, what="refusal logged")
    assert running() == {p1: True, p2: True}
    pub_ok(p1, f"$SYS/SCADA/MQIsdpListener/{p2}", "OFF", version=version, client_id="scada-op", qos=1,
           extra=("-u", "scada-op", "-P", "s3cret"))
    wait_for(lambda: running() == {p1: True, p2: False}, 5, what=f"{p2} stopped")
    r = mosquitto_pub(p2, "mo/x", "x", version=version)
    assert r.returncode != 0
    pub_ok(p1, f"$SYS/SCADA/MQIsdpListener/{p2}", "ON", version=version, client_id="scada-op", qos=1,
           extra=("-u", "scada-op", "-P", "s3cret"))
    wait_for(lambda: running() == {p1: True, p2: True}, 5, what=f"{p2} started")
    pub_ok(p2, "mo/x", "x", version=version)
