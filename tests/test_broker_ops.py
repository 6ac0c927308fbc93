"""Operations against a real `mqbridge serve`: listener control by `$SYS/SCADA/MQIsdpListener`,
max connections, allow/deny lists, max message size, connect timeout, keepalive, the `mqbridge
status` / `mqbridge admin` commands, monitoring counters and a TLS listener."""
from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess
import time

import pytest

from bridge.mqtt import packets as P
from bridge.mqtt.passwords import make_hash
from tests.support import shared_gateway
from tests.support.gateway import LOOPS, GatewayProcess, free_port, wait_for
from tests.support.mosquitto import AVAILABLE as MOSQUITTO
from tests.support.mosquitto import MosquittoSub, mosquitto_pub
from tests.support.mqtt_clients import LEVEL, PROTOCOL_IDS, PROTOCOLS, RawClient

# one gateway process per module, reset before each test (see tests/support/shared_gateway.py)
module_gateway = shared_gateway.module_gateway
gateway = shared_gateway.gateway


@pytest.fixture(params=PROTOCOLS, ids=PROTOCOL_IDS)
def proto(request):
    return request.param


def listener_state(gateway) -> dict[int, dict]:
    _, status = gateway.admin("/status")
    return {lst["port"]: lst for lst in status["listeners"]}


def can_connect(port: int) -> bool:
    """A full MQTT CONNECT/CONNACK on ``port``; False when refused or closed."""
    try:
        raw = RawClient(port, timeout=3)
    except OSError:
        return False
    try:
        return raw.connect(f"probe-{port}").return_code == 0
    except (OSError, ConnectionError):
        return False
    finally:
        raw.close()


# -- listener control -----------------------------------------------------------------------------

# listener control needs an authenticated user listed for it (a client id is the client's own choice)
OPERATOR = {"users": {"operator": make_hash(b"op-secret").encode()}, "listener_control_users": ["operator"]}


@pytest.fixture
def two_listeners(gateway_factory):
    p1, p2 = free_port(), free_port()
    gw = gateway_factory({"broker": {
        "listeners": [{"host": "127.0.0.1", "port": p1}, {"host": "127.0.0.1", "port": p2}],
        "allow_anonymous": True, **OPERATOR, "sys_interval": 1.0}})
    assert gw.listener_ports == [p1, p2]
    return gw, p1, p2


def test_listener_control_by_port(two_listeners, clients, proto):
    gw, p1, p2 = two_listeners
    op = clients(p1, "operator", protocol=proto, username="operator", password="op-secret").connect()
    stays = RawClient(p2)
    assert stays.connect("on-p2", LEVEL[proto]).return_code == 0
    op.publish(f"$SYS/SCADA/MQIsdpListener/{p2}", b"OFF", qos=1)
    wait_for(lambda: not listener_state(gw)[p2]["running"], 5, what=f"listener {p2} stopped")
    assert listener_state(gw)[p1]["running"]
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", p2), timeout=3).close()
    assert can_connect(p1)
    # connected clients stay connected
    stays.send(P.PINGREQ_BYTES)
    assert stays.recv() == P.Bare(P.PINGRESP)
    op.publish(f"$SYS/SCADA/MQIsdpListener/{p2}", b"ON", qos=1)
    wait_for(lambda: listener_state(gw)[p2]["running"], 5, what=f"listener {p2} started")
    assert can_connect(p2)
    assert "listener control by operator" in gw.log()


def test_listener_control_all(two_listeners, clients, proto):
    gw, p1, p2 = two_listeners
    op = clients(p1, "operator", protocol=proto, username="operator", password="op-secret").connect()
    op.publish("$SYS/SCADA/MQIsdpListener/all", b"OFF", qos=1)
    wait_for(lambda: not any(s["running"] for s in listener_state(gw).values()), 5, what="all stopped")
    assert not can_connect(p1) and not can_connect(p2)
    op.publish("$SYS/SCADA/MQIsdpListener/all", b"ON", qos=1)   # the operator is still connected
    wait_for(lambda: all(s["running"] for s in listener_state(gw).values()), 5, what="all started")
    assert can_connect(p1) and can_connect(p2)


def test_listener_control_ignored_from_other_clients(two_listeners, clients, proto):
    gw, p1, p2 = two_listeners
    intruder = clients(p1, "intruder", protocol=proto).connect()
    intruder.publish(f"$SYS/SCADA/MQIsdpListener/{p2}", b"OFF", qos=1)
    intruder.publish("$SYS/SCADA/MQIsdpListener/all", b"OFF", qos=1)
    # a client that takes the operator's client id (anonymously) is not the operator
    impostor = clients(p1, "operator", protocol=proto).connect()
    impostor.publish(f"$SYS/SCADA/MQIsdpListener/{p2}", b"OFF", qos=1)
    impostor.client.disconnect()
    wait_for(lambda: gw.log().count("may not control listeners") >= 3, 5, what="refusals logged")
    assert all(s["running"] for s in listener_state(gw).values())
    assert can_connect(p1) and can_connect(p2)
    # a bad payload from the operator changes nothing either
    op = clients(p1, "operator", protocol=proto, username="operator", password="op-secret").connect()
    op.publish(f"$SYS/SCADA/MQIsdpListener/{p2}", b"MAYBE", qos=1)
    wait_for(lambda: "payload must be ON or OFF" in gw.log(), 5, what="bad payload logged")
    assert can_connect(p2)


# -- limits and access ------------------------------------------------------------------------------


def test_max_connections_per_listener(gateway_factory):
    port = free_port()
    gw = gateway_factory({"broker": {"listeners": [{"host": "127.0.0.1", "port": port, "max_connections": 2}]}})
    a, b = RawClient(port), RawClient(port)
    assert a.connect("mc-a").return_code == 0
    assert b.connect("mc-b").return_code == 0
    assert not can_connect(port)
    assert listener_state(gw)[port]["refused"] >= 1
    assert "max_connections 2 reached" in gw.log()
    a.close()
    wait_for(lambda: listener_state(gw)[port]["connections"] == 1, 5, what="a slot freed")
    assert can_connect(port)


def test_allow_and_deny_lists(gateway_factory):
    denied, not_allowed, allowed = free_port(), free_port(), free_port()
    gw = gateway_factory({"broker": {"listeners": [
        {"host": "127.0.0.1", "port": denied, "deny": ["127.0.0.1"]},
        {"host": "127.0.0.1", "port": not_allowed, "allow": ["10.0.0.0/8"]},
        {"host": "127.0.0.1", "port": allowed, "allow": ["127.0.0.0/8"], "deny": ["127.0.0.2/32"]},
    ]}})
    assert not can_connect(denied)
    assert not can_connect(not_allowed)
    assert can_connect(allowed)
    state = listener_state(gw)
    assert state[denied]["refused"] >= 1 and state[not_allowed]["refused"] >= 1
    assert state[allowed]["refused"] == 0
    assert "refused by allow/deny list" in gw.log()


@pytest.fixture(scope="module")
def module_limits_gateway(tmp_path_factory):
    gw = GatewayProcess(tmp_path_factory.mktemp("limits-gw"),
                        {"broker": {"limits": {"max_message_size": 1024, "connect_timeout": 1.0}}}).start()
    yield gw
    gw.stop()


@pytest.fixture
def limits_gateway(module_limits_gateway):
    """max_message_size 1024, connect_timeout 1 s; shared by this module's tests, reset for each."""
    shared_gateway.reset(module_limits_gateway)
    return module_limits_gateway


def test_max_message_size_disconnects_with_logged_reason(limits_gateway, clients, proto):
    gw = limits_gateway
    sub = clients(gw.port, protocol=proto).connect()
    sub.subscribe("big/#", 1)
    big = clients(gw.port, protocol=proto, reconnect=False).connect()
    big.publish("big/x", b"x" * 2000, qos=0)
    assert big.disconnected.wait(5)
    wait_for(lambda: "exceeds the limit of 1024" in gw.log(), 5, what="oversize reason logged")
    small = clients(gw.port, protocol=proto).connect()
    small.publish("big/y", b"y" * 900, qos=1)
    got = sub.wait_messages(1)
    assert [len(m.payload) for m in got] == [900]


def test_oversize_header_closes_before_the_body_arrives(limits_gateway, proto):
    gw = limits_gateway
    raw = RawClient(gw.port)
    assert raw.connect("hdr", LEVEL[proto]).return_code == 0
    raw.send(bytes((0x30,)) + P.encode_length(5_000_000))   # only the fixed header of a 5 MB PUBLISH
    assert raw.closed_by_peer()
    assert "exceeds the limit" in gw.log()


def test_connect_timeout(limits_gateway):
    gw = limits_gateway
    mute = RawClient(gw.port)
    ok = RawClient(gw.port)
    assert ok.connect("in-time").return_code == 0
    assert mute.closed_by_peer(timeout=6)
    wait_for(lambda: "no CONNECT within 1 s" in gw.log(), 5, what="timeout reason logged")
    ok.send(P.PINGREQ_BYTES)
    assert ok.recv() == P.Bare(P.PINGRESP)


# -- status, admin, monitoring ----------------------------------------------------------------------


def test_status_command(gateway, clients, proto):
    c = clients(gateway.port, "status-client", protocol=proto, clean_session=False).connect()
    c.subscribe("st/#", 1)
    c.publish("st/x", b"1", qos=1)
    c.wait_messages(1)
    r = gateway.cli("status", "-c", str(gateway.config_path))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith("gateway mqbridge")
    assert f"mqtt:127.0.0.1:{gateway.port}" in out and "running" in out
    assert "connections " in out and "sessions " in out and "subscriptions " in out
    assert "status-client" in out
    r = gateway.cli("status", "-c", str(gateway.config_path), "--json")
    data = json.loads(r.stdout)
    assert data["status"]["connections"] >= 1
    mine = [x for x in data["connections"] if x["client_id"] == "status-client"]
    assert mine and mine[0]["protocol_level"] == LEVEL[proto]
    assert mine[0]["received"] >= 1 and mine[0]["sent"] >= 1


def test_status_without_a_running_gateway(gateway):
    gateway.stop()
    r = gateway.cli("status", "-c", str(gateway.config_path))
    assert r.returncode == 3
    assert "no gateway answers" in r.stderr


def test_admin_command(gateway, clients, proto):
    cfg = ("-c", str(gateway.config_path))
    c = clients(gateway.port, "adm-1", protocol=proto, clean_session=False, reconnect=False,
                will=("adm/will", b"kicked", 0, False)).connect()
    c.subscribe("adm/#", 1)
    r = gateway.cli("admin", *cfg, "connections")
    assert r.returncode == 0 and "adm-1" in r.stdout and r.stdout.startswith("CLIENT_ID")
    r = gateway.cli("admin", *cfg, "sessions", "--json")
    sess = {s["client_id"]: s for s in json.loads(r.stdout)}
    assert sess["adm-1"]["persistent"] is True and sess["adm-1"]["connected"] is True
    r = gateway.cli("admin", *cfg, "subscriptions")
    assert r.returncode == 0 and "adm/#" in r.stdout
    r = gateway.cli("admin", *cfg, "delete-session", "adm-1")
    assert r.returncode == 1 and "is connected" in r.stderr
    # trace on: packet-level lines for this client appear in the log
    r = gateway.cli("admin", *cfg, "trace", "adm-1", "on")
    assert r.returncode == 0 and json.loads(r.stdout) == {"client_id": "adm-1", "trace": True}
    c.publish("adm/traced", b"t", qos=1)
    wait_for(lambda: "adm-1 <- " in gateway.log() and "adm/traced" in gateway.log(), 5, what="trace lines")
    watcher = clients(gateway.port, protocol=proto).connect()
    watcher.subscribe("adm/will", 0)
    r = gateway.cli("admin", *cfg, "disconnect", "adm-1")
    assert r.returncode == 0, r.stderr
    assert c.disconnected.wait(5)
    assert [m.payload for m in watcher.wait_messages(1)] == [b"kicked"]
    r = gateway.cli("admin", *cfg, "delete-session", "adm-1")
    assert r.returncode == 0, r.stderr
    r = gateway.cli("admin", *cfg, "delete-session", "adm-1")
    assert r.returncode == 1 and "no session" in r.stderr
    r = gateway.cli("admin", *cfg, "disconnect", "nobody")
    assert r.returncode == 1 and "not connected" in r.stderr


def test_monitoring_counters(gateway, clients, proto):
    sub = clients(gateway.port, "mon-sub", protocol=proto).connect()
    sub.subscribe("mon/#", 1)
    pub = clients(gateway.port, "mon-pub", protocol=proto).connect()
    for i in range(25):
        pub.publish("mon/t", str(i).encode(), qos=1)
    sub.wait_messages(25)
    conns = {c["client_id"]: c for c in gateway.admin("/connections")[1]}
    assert conns["mon-pub"]["received"] == 25
    assert conns["mon-sub"]["sent"] == 25
    assert conns["mon-pub"]["packets_in"] >= 26 and conns["mon-sub"]["bytes_out"] > 0
    subs = [s for s in gateway.admin("/subscriptions")[1] if s["client_id"] == "mon-sub"]
    assert [{k: v for k, v in s.items() if k != "rate"} for s in subs] == [
        {"topic_filter": "mon/#", "client_id": "mon-sub", "qos": 1, "matched": 25}]
    _, status = gateway.admin("/status")
    assert status["messages"]["received"] >= 25
    # rates are smoothed msgs/s, computed once a second
    wait_for(lambda: {c["client_id"]: c for c in gateway.admin("/connections")[1]}["mon-pub"]["rate_in"] > 0
             or gateway.admin("/status")[1]["rates"]["received_per_s"] > 0, 5, what="a non-zero rate")
    # per subscription too
    wait_for(lambda: [s for s in gateway.admin("/subscriptions")[1] if s["client_id"] == "mon-sub"][0]["rate"] > 0,
             5, what="a non-zero subscription rate")


# -- TLS --------------------------------------------------------------------------------------------


def _self_signed(directory, name: str) -> tuple:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl CLI is not installed (needed to make a self-signed certificate)")
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-keyout", str(key), "-out", str(cert), "-subj", f"/CN={name}",
                        "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        pytest.skip(f"openssl could not make a certificate: {r.stderr.strip()}")
    return cert, key


@pytest.fixture(scope="module")
def tls_cert(tmp_path_factory):
    """A self-signed server certificate for 127.0.0.1, made by the openssl CLI."""
    return _self_signed(tmp_path_factory.mktemp("tls"), "localhost")


@pytest.fixture(scope="module", params=LOOPS)
def module_tls_gateway(request, tmp_path_factory, tls_cert):
    """A gateway with a plain and a TLS listener, once per event loop (TLS differs between them)."""
    cert, key = tls_cert
    plain, secure = free_port(), free_port()
    gw = GatewayProcess(tmp_path_factory.mktemp("tls-gw"), {"broker": {"listeners": [
        {"host": "127.0.0.1", "port": plain},
        {"host": "127.0.0.1", "port": secure, "tls": {"cert": str(cert), "key": str(key)}},
    ]}}, loop=request.param).start()
    yield gw, plain, secure, cert
    gw.stop()


@pytest.fixture
def tls_gateway(module_tls_gateway):
    shared_gateway.reset(module_tls_gateway[0])
    return module_tls_gateway


def test_tls_listener_with_paho(tls_gateway, clients, proto):
    gw, plain, secure, cert = tls_gateway
    tls_client = clients(secure, protocol=proto, tls_ca=str(cert)).connect()
    assert tls_client.rc == 0
    tls_client.subscribe("tls/#", 2)
    plain_client = clients(plain, protocol=proto).connect()
    plain_client.publish("tls/x", b"over TLS", qos=2)
    (m,) = tls_client.wait_messages(1)
    assert (m.payload, m.qos) == (b"over TLS", 2)
    state = listener_state(gw)
    assert state[secure]["tls"] is True and state[plain]["tls"] is False
    conns = {c["client_id"]: c for c in gw.admin("/connections")[1]}
    assert conns[tls_client.client_id]["listener"] == f"mqtts:127.0.0.1:{secure}"


def test_tls_listener_refuses_plain_mqtt_and_untrusted_clients(tls_gateway):
    gw, plain, secure, cert = tls_gateway
    raw = RawClient(secure)
    raw.send(P.encode(P.Connect(P.MQTT_311, "plaintext")))
    with pytest.raises((ConnectionError, OSError)):
        raw.recv()
    # a client that does not trust the self-signed certificate fails the handshake
    ctx = ssl.create_default_context()
    with pytest.raises(ssl.SSLError), socket.create_connection(("127.0.0.1", secure), timeout=5) as s, \
            ctx.wrap_socket(s, server_hostname="127.0.0.1"):
        pass
    assert can_connect(plain)


@pytest.mark.skipif(not MOSQUITTO, reason="mosquitto-clients are not installed")
@pytest.mark.parametrize("version", ["mqttv31", "mqttv311"])
def test_tls_listener_with_mosquitto_clients(tls_gateway, version):
    gw, plain, secure, cert = tls_gateway
    sub = MosquittoSub(secure, "tlsm/#", version=version, qos=1, client_id=f"tls-sub-{version}", count=1,
                       extra=("--cafile", str(cert)))
    try:
        sub.wait_subscribed(gw)
        r = mosquitto_pub(secure, "tlsm/x", "mosquitto over TLS", version=version, qos=1,
                          extra=("--cafile", str(cert)))
        assert r.returncode == 0, r.stderr
        (m,) = sub.wait_messages(1)
        assert (m.topic, m.payload, m.qos) == ("tlsm/x", "mosquitto over TLS", 1)
        assert sub.wait_exit() == 0
    finally:
        sub.stop()



@pytest.mark.parametrize("gateway_loop", LOOPS)
def test_tls_listener_requiring_client_certificates(gateway_factory, tls_cert, tmp_path):
    server_cert, server_key = tls_cert
    client_cert, client_key = _self_signed(tmp_path, "device-1")
    port = free_port()
    gateway_factory({"broker": {"listeners": [{"host": "127.0.0.1", "port": port, "tls": {
        "cert": str(server_cert), "key": str(server_key), "ca": str(client_cert), "require_client_cert": True}}]}})

    def mqtt_over_tls(certfile=None, keyfile=None) -> P.Connack:
        ctx = ssl.create_default_context(cafile=str(server_cert))
        if certfile is not None:
            ctx.load_cert_chain(str(certfile), str(keyfile))
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s, \
                ctx.wrap_socket(s, server_hostname="127.0.0.1") as tls:
            tls.sendall(P.encode(P.Connect(P.MQTT_311, "tls-device")))
            data = tls.recv(4)   # TLS 1.3: a missing client certificate shows up here
            if not data:
                raise ConnectionError("closed by broker")
            (packet,) = P.PacketReader().feed(data)
            return packet

    assert mqtt_over_tls(client_cert, client_key) == P.Connack(0, False)
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        mqtt_over_tls()
    other_cert, other_key = _self_signed(tmp_path, "stranger")
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        mqtt_over_tls(other_cert, other_key)


def test_admin_with_odd_client_ids_and_admin_url(gateway, clients):
    odd = "dev/42 ünï"
    c = clients(gateway.port, odd, clean_session=False).connect()
    c.disconnect()
    wait_for(lambda: not gateway.admin("/connections")[1], 5, what="offline")
    url = f"http://127.0.0.1:{gateway.admin_port}"
    r = gateway.cli("admin", "--admin", url, "sessions")
    assert r.returncode == 0 and odd in r.stdout
    r = gateway.cli("admin", "--admin", url, "delete-session", odd)
    assert r.returncode == 0, r.stderr
    assert gateway.admin("/sessions")[1] == []


def test_listener_configured_off_is_started_by_listener_control(gateway_factory, clients, proto):
    p1, p2 = free_port(), free_port()
    gw = gateway_factory({"broker": {
        "listeners": [{"host": "127.0.0.1", "port": p1}, {"host": "127.0.0.1", "port": p2, "start": False}],
        "allow_anonymous": True, **OPERATOR}})
    assert listener_state(gw)[p2]["running"] is False
    assert not can_connect(p2)
    r = gw.cli("status", "-c", str(gw.config_path))
    assert f"mqtt:127.0.0.1:{p2}" in r.stdout and "stopped" in r.stdout
    op = clients(p1, "operator", protocol=proto, username="operator", password="op-secret").connect()
    op.publish(f"$SYS/SCADA/MQIsdpListener/{p2}", b"ON", qos=1)
    wait_for(lambda: listener_state(gw)[p2]["running"], 5, what=f"listener {p2} started")
    assert can_connect(p2)


def test_json_logs_and_configured_packet_trace(gateway_factory, clients, proto):
    gw = gateway_factory({"logging": {"level": "INFO", "json": True, "trace_clients": ["traced"]}})
    c = clients(gw.port, "traced", protocol=proto).connect()
    c.subscribe("tr/#", 1)
    c.publish("tr/x", b"traced payload", qos=1)
    c.wait_messages(1)
    quiet = clients(gw.port, "untraced", protocol=proto).connect()
    quiet.publish("tr/y", b"not traced", qos=1)
    c.wait_messages(2)

    def records() -> list[dict]:
        out = []
        for line in gw.log().splitlines():
            if line.startswith("{"):
                out.append(json.loads(line))
        return out

    wait_for(lambda: any("traced <- " in json.dumps(r) for r in records()), 5, what="JSON trace records")
    text = "\n".join(json.dumps(r) for r in records())
    assert "tr/x" in text
    assert "untraced <- " not in text
    # every line the gateway wrote is one JSON object
    bad = [line for line in gw.log().splitlines() if line.strip() and not line.startswith("{")]
    assert bad == []


def test_keepalive_grace_is_one_and_a_half_periods_and_zero_disables(gateway, clients, proto):
    """WMB docs "Keep Alive timer": disconnected when nothing is received within 1.5 x the Keep Alive
    period, not sooner."""
    level = LEVEL[proto]
    raw = RawClient(gateway.port)
    assert raw.connect("ka-grace", level, keepalive=2).return_code == 0
    t0 = time.monotonic()
    forever = RawClient(gateway.port)
    assert forever.connect("ka-0", level, keepalive=0).return_code == 0
    pinging = clients(gateway.port, protocol=proto, keepalive=1, reconnect=False).connect()
    assert raw.closed_by_peer(timeout=8)
    elapsed = time.monotonic() - t0
    assert 3.0 <= elapsed <= 6.0, f"closed after {elapsed:.2f} s (keepalive 2 s: expected 3 s + sweep)"
    assert "keepalive expired" in gateway.log()
    # keepalive 0 disables the check: silent just as long, still connected
    forever.send(P.PINGREQ_BYTES)
    assert forever.recv() == P.Bare(P.PINGRESP)
    assert not pinging.disconnected.is_set()         # paho pings every second: kept
    ids = {c["client_id"] for c in gateway.admin("/connections")[1]}
    assert {"ka-0", pinging.client_id} <= ids and "ka-grace" not in ids
