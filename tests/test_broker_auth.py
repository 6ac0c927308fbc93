"""Authentication against a running `mqbridge serve`: password files made by Debian's mosquitto_passwd and
by `mqbridge passwd` (and the same file accepted by Debian's mosquitto), anonymous clients per listener,
refused configurations, `mqbridge reload` re-reading the file, and the failed-login throttle measured
with real connections from several 127.0.0.x source addresses."""
from __future__ import annotations

import getpass
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from bridge.mqtt import packets as P
from tests.support.gateway import LOOPS, REPO, GatewayProcess, free_port, wait_for
from tests.support.mosquitto import mosquitto_pub
from tests.support.mqtt_clients import PROTOCOL_IDS, PROTOCOLS

pytestmark = pytest.mark.skipif(shutil.which("mosquitto_passwd") is None or shutil.which("mosquitto_pub") is None,
                                reason="mosquitto_passwd / mosquitto-clients not installed")


def make_passwd(path: Path, *users: tuple[str, str]) -> Path:
    """A password file written by Debian's mosquitto_passwd."""
    for i, (user, password) in enumerate(users):
        args = ["mosquitto_passwd", *(["-c"] if i == 0 else []), "-b", str(path), user, password]
        subprocess.run(args, check=True, capture_output=True, timeout=30)
    return path


def mqbridge(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bridge", *args], capture_output=True, text=True, timeout=60,
                          cwd=REPO)


def login(port: int, user: str | None, password: str | None, *, source: str = "127.0.0.1",
          client_id: str = "", level: int = P.MQTT_311) -> int:
    """One CONNECT over a fresh connection from ``source``; the CONNACK return code."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.bind((source, 0))
        sock.connect(("127.0.0.1", port))
        sock.sendall(P.encode(P.Connect(level, client_id or f"g-{uuid.uuid4().hex[:8]}", True, 60, None, user,
                                        None if password is None else password.encode())))
        reader = P.PacketReader()
        reader.level = level
        while True:
            data = sock.recv(4096)
            assert data, "closed without CONNACK"
            packets = reader.feed(data)
            if packets:
                assert isinstance(packets[0], P.Connack), packets
                return packets[0].return_code


@pytest.fixture
def passwd_file(tmp_path: Path) -> Path:
    return make_passwd(tmp_path / "passwd", ("alice", "wonder land"), ("bob", "builder"))


# -- the password file ------------------------------------------------------------------------------------


@pytest.mark.parametrize("proto", PROTOCOLS, ids=PROTOCOL_IDS)
def test_password_file_of_mosquitto_passwd(gateway_factory, clients, passwd_file, proto):
    gw = gateway_factory({"broker": {"password_file": str(passwd_file)}})
    ok = clients(gw.port, protocol=proto, username="alice", password="wonder land", reconnect=False).connect()
    assert ok.rc == 0
    _, conns = gw.admin("/connections")
    assert [c["username"] for c in conns if c["client_id"] == ok.client_id] == ["alice"]
    for user, password, rc in (("alice", "wonder lan", 4), ("bob", "wonder land", 4), ("mallory", "builder", 4),
                               ("alice", None, 4), (None, None, 5)):
        c = clients(gw.port, protocol=proto, username=user, password=password, reconnect=False).connect()
        assert c.rc == rc, (user, password)
    assert clients(gw.port, protocol=proto, username="bob", password="builder", reconnect=False).connect().rc == 0


def test_mosquitto_pub_with_a_password_file(gateway_factory, passwd_file):
    gw = gateway_factory({"broker": {"password_file": str(passwd_file)}})
    ok = mosquitto_pub(gw.port, "auth/x", "1", qos=1, extra=("-u", "bob", "-P", "builder"))
    assert ok.returncode == 0, ok.stderr
    bad = mosquitto_pub(gw.port, "auth/x", "1", extra=("-u", "bob", "-P", "builde"))
    assert bad.returncode != 0 and "bad user name or password" in bad.stderr.lower()
    anon = mosquitto_pub(gw.port, "auth/x", "1")
    assert anon.returncode != 0 and "not authori" in anon.stderr.lower()
    wait_for(lambda: "failed login: client" in gw.log() and "user 'bob' from 127.0.0.1:" in gw.log(), 5,
             what="the failed login logged with client, user and address")


def test_mosquitto_accepts_a_file_written_by_mqbridge_passwd(tmp_path, gateway_factory):
    """The strongest check of the format: Debian's mosquitto broker itself reads our file."""
    path = tmp_path / "ours"
    assert mqbridge("passwd", "-c", "-b", str(path), "dave", "pa:ss wörd").returncode == 0
    assert mqbridge("passwd", "-b", str(path), "erin", "second").returncode == 0
    port = free_port()
    conf = tmp_path / "mosquitto.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous false\npassword_file {path}\n"
                    f"user {getpass.getuser()}\n")
    proc = subprocess.Popen(["mosquitto", "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def up() -> bool:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0
        wait_for(up, 10, what="mosquitto listening")
        for user, password in (("dave", "pa:ss wörd"), ("erin", "second")):
            ok = mosquitto_pub(port, "t", "m", extra=("-u", user, "-P", password))
            assert ok.returncode == 0, ok.stderr
        bad = mosquitto_pub(port, "t", "m", extra=("-u", "dave", "-P", "pa:ss word"))
        assert bad.returncode != 0
    finally:
        proc.terminate()
        proc.wait(10)
    gw = gateway_factory({"broker": {"password_file": str(path)}})
    assert login(gw.port, "dave", "pa:ss wörd") == 0
    assert login(gw.port, "erin", "second") == 0


# -- who may connect without a user name ------------------------------------------------------------------


def test_anonymous_per_listener(gateway_factory, passwd_file):
    p_open, p_closed = free_port(), free_port()
    gw = gateway_factory({"broker": {"password_file": str(passwd_file), "listeners": [
        {"name": "open", "host": "127.0.0.1", "port": p_open, "allow_anonymous": True},
        {"name": "closed", "host": "127.0.0.1", "port": p_closed}]}})
    assert login(p_open, None, None) == 0
    assert login(p_closed, None, None) == 5
    assert login(p_open, "alice", "wrong") == 4          # a user name given is still checked
    assert login(p_closed, "alice", "wonder land") == 0
    assert "anonymous clients are not allowed there" in gw.log()


def test_allow_anonymous_false_without_users_refuses_everyone(gateway_factory):
    gw = gateway_factory({"broker": {"allow_anonymous": False}})
    assert login(gw.port, None, None) == 5
    assert login(gw.port, "anyone", "anything") == 5
    assert "accepts no client" in gw.log()


def test_refused_configurations_do_not_start(tmp_path, passwd_file):
    cfg = tmp_path / "plain.yaml"
    cfg.write_text("broker:\n  users:\n    alice: wonderland\n")
    r = mqbridge("serve", "-c", str(cfg))
    assert r.returncode == 2
    assert f"{cfg}:3: broker.users.alice:" in r.stderr and "plain-text passwords are refused" in r.stderr
    assert "mqbridge passwd" in r.stderr
    v = mqbridge("validate", "-c", str(cfg))
    assert v.returncode == 1 and "plain-text passwords are refused" in v.stderr

    plain_file = tmp_path / "plain.passwd"
    plain_file.write_text(passwd_file.read_text() + "carol:letmein\n")
    cfg.write_text(yaml.safe_dump({"data_dir": str(tmp_path / "var"), "admin": {"enabled": False},
                                   "broker": {"password_file": str(plain_file),
                                              "listeners": [{"port": free_port()}]}}))
    r = mqbridge("serve", "-c", str(cfg))
    assert r.returncode == 1
    assert f"{plain_file}:3: user 'carol': plain-text passwords are refused" in r.stderr
    assert "mqbridge passwd -U" in r.stderr
    v = mqbridge("validate", "-c", str(cfg))
    assert v.returncode == 1 and f"{plain_file}:3: user 'carol'" in v.stderr
    plain_file.write_text(passwd_file.read_text())
    v = mqbridge("validate", "-c", str(cfg))
    assert v.returncode == 0, v.stderr
    assert "OK, 2 users" in v.stdout and "anonymous clients refused" in v.stdout


def test_reload_rereads_the_password_file(gateway_factory, clients, passwd_file):
    gw = gateway_factory({"broker": {"password_file": str(passwd_file)}})
    alice = clients(gw.port, username="alice", password="wonder land", reconnect=False).connect()
    assert alice.rc == 0
    assert mqbridge("passwd", "-b", str(passwd_file), "carol", "c4rol").returncode == 0
    assert mqbridge("passwd", "-D", str(passwd_file), "alice").returncode == 0
    assert login(gw.port, "carol", "c4rol") == 4            # not before the reload
    r = gw.cli("reload", "--admin", f"http://127.0.0.1:{gw.admin_port}")
    assert r.returncode == 0, r.stderr
    assert "users: added carol; removed alice" in r.stdout
    assert login(gw.port, "carol", "c4rol") == 0
    assert login(gw.port, "alice", "wonder land") == 4
    assert not alice.disconnected.is_set()                  # a connected client stays connected

    passwd_file.write_text(passwd_file.read_text() + "mallory:plain\n")
    r = gw.cli("reload", "--admin", f"http://127.0.0.1:{gw.admin_port}")
    assert r.returncode == 1
    assert f"{passwd_file}:3: user 'mallory': plain-text passwords are refused" in r.stderr
    assert login(gw.port, "carol", "c4rol") == 0            # the users before the refused reload
    assert login(gw.port, "mallory", "plain") == 4


# -- the throttle -------------------------------------------------------------------------------------------


def test_guesses_from_one_address_fall_to_a_bound(gateway_factory, passwd_file):
    """Today's main checked every guess: ~3,600 per second from one address. With the defaults (5 free
    failures, then a lockout of 1 s doubling), a guess is checked at most 8 times in 3 s however fast they
    come; the right password is refused unchecked from the locked address, and works from another."""
    gw = gateway_factory({"broker": {"password_file": str(passwd_file)}})
    codes: list[int] = []
    start = time.monotonic()
    while time.monotonic() - start < 3.0:
        codes.append(login(gw.port, "alice", f"guess{len(codes)}", client_id=f"guess-{len(codes)}"))
    elapsed = time.monotonic() - start
    checked = codes.count(4)
    print(f"\n{len(codes)} guesses in {elapsed:.2f} s from one address: {checked} checked "
          f"({checked / elapsed:.1f}/s), {codes.count(5)} refused unchecked")
    assert set(codes) <= {4, 5}
    assert len(codes) >= 30, "too few attempts to show a bound"
    assert 5 <= checked <= 8
    assert codes[:5] == [4] * 5 and codes[5] == 4 and codes[6] == 5
    # the loop may end as a lockout ends (7 checks: 1 + 2 s of lockout in 3 s): one more guess is checked once
    # the address is free again, and starts a lockout (4 s) in which the right password is refused unchecked
    deadline = time.monotonic() + 10.0
    while login(gw.port, "alice", "one more guess") == 5:
        assert time.monotonic() < deadline, "the address stayed locked past its lockout"
    assert login(gw.port, "alice", "wonder land") == 5
    assert login(gw.port, "alice", "wonder land", source="127.0.0.2") == 0
    log = gw.log()
    assert "failed login: client 'guess-0' user 'alice' from 127.0.0.1:" in log
    assert "refused without checking: address 127.0.0.1 locked" in log
    # rate-limited: at most 20 lines per 10 s for hundreds of attempts
    lines = [ln for ln in log.splitlines() if "failed login" in ln or "refused without checking" in ln]
    assert len(lines) <= 20 < len(codes)


def test_guesses_at_one_user_from_many_addresses_lock_the_user_but_not_where_it_logs_in_from(
        gateway_factory, passwd_file):
    gw = gateway_factory({"broker": {"password_file": str(passwd_file)}})
    assert login(gw.port, "bob", "builder", source="127.0.0.1") == 0
    for i in range(11):    # one guess per address: no address reaches its 5, user "bob" passes its 10
        assert login(gw.port, "bob", f"guess{i}", source=f"127.0.1.{i + 1}") == 4
    assert login(gw.port, "bob", "builder", source="127.0.2.1") == 5
    assert login(gw.port, "bob", "builder", source="127.0.0.1") == 0       # bob's own device
    assert login(gw.port, "alice", "wonder land", source="127.0.2.1") == 0
    assert "user 'bob' locked" in gw.log()


# -- TLS client certificates ---------------------------------------------------------------------------------


def self_signed(directory: Path, name: str) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl CLI is not installed")
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-keyout", str(key),
                    "-out", str(cert), "-subj", f"/CN={name}", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    return cert, key


@pytest.mark.parametrize("gateway_loop", LOOPS)
def test_a_tls_ca_alone_makes_client_certificates_required(gateway_factory, tmp_path):
    """Before, `ca` without `require_client_cert: true` was silently ignored: any client got in."""
    server_cert, server_key = self_signed(tmp_path, "server")
    device_cert, device_key = self_signed(tmp_path, "device-1")
    port = free_port()
    gateway_factory({"broker": {"listeners": [{"host": "127.0.0.1", "port": port, "tls": {
        "cert": str(server_cert), "key": str(server_key), "ca": str(device_cert)}}]}})

    def connack(certfile: Path | None = None, keyfile: Path | None = None) -> P.Packet:
        ctx = ssl.create_default_context(cafile=str(server_cert))
        if certfile is not None:
            ctx.load_cert_chain(str(certfile), str(keyfile))
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s, \
                ctx.wrap_socket(s, server_hostname="127.0.0.1") as tls:
            tls.sendall(P.encode(P.Connect(P.MQTT_311, "tls-device")))
            data = tls.recv(4)   # TLS 1.3: a missing client certificate shows up here
            if not data:
                raise ConnectionError("closed by broker")
            return P.PacketReader().feed(data)[0]

    assert connack(device_cert, device_key) == P.Connack(0, False)
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        connack()


def tls_connack(port: int, server_cert: Path) -> P.Packet:
    ctx = ssl.create_default_context(cafile=str(server_cert))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s, \
            ctx.wrap_socket(s, server_hostname="127.0.0.1") as tls:
        tls.sendall(P.encode(P.Connect(P.MQTT_311, f"tls-{uuid.uuid4().hex[:6]}")))
        data = tls.recv(4)
        if not data:
            raise ConnectionError("closed by broker")
        return P.PacketReader().feed(data)[0]


def closed_within(sock: socket.socket, seconds: float) -> bool:
    """True when the peer closes ``sock`` (EOF or reset) within ``seconds``; False if it is still open."""
    sock.settimeout(seconds)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


@pytest.mark.parametrize("gateway_loop", LOOPS)
def test_a_tls_handshake_counts_as_a_connection_and_must_finish_in_time(gateway_factory, tmp_path):
    """Connections that never finish the TLS handshake hold a max_connections place only until
    connect_timeout (before: asyncio's own 60 s, and they were not counted at all)."""
    cert, key = self_signed(tmp_path, "server")
    port = free_port()
    gw = gateway_factory({"broker": {
        "listeners": [{"host": "127.0.0.1", "port": port, "max_connections": 2,
                       "tls": {"cert": str(cert), "key": str(key)}}],
        "limits": {"connect_timeout": 1.5}}})
    assert tls_connack(port, cert) == P.Connack(0, False)
    # its place is free once the broker has seen it close (the accept of the next may come first)
    wait_for(lambda: not gw.admin("/connections")[1], 5, what="the first connection gone")
    silent = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(2)]   # no ClientHello
    try:
        started = time.monotonic()
        wait_for(lambda: _refused(port, cert), 10, what="a third connection refused while two are in their handshake")
        assert "max_connections 2 reached" in gw.log()
        assert all(closed_within(s, 8) for s in silent)   # the server gave up on them
        assert time.monotonic() - started < 8
    finally:
        for s in silent:
            s.close()
    wait_for(lambda: not _refused(port, cert), 10, what="a place free again")
    assert "TLS handshake with" in gw.log()


def _refused(port: int, cert: Path) -> bool:
    try:
        return tls_connack(port, cert) != P.Connack(0, False)
    except (OSError, ssl.SSLError, ConnectionError):
        return True


@pytest.mark.parametrize("gateway_loop", LOOPS)
def test_a_tls_listener_refuses_a_denied_address_before_the_handshake(gateway_factory, tmp_path):
    cert, key = self_signed(tmp_path, "server")
    port = free_port()
    gw = gateway_factory({"broker": {"listeners": [{"host": "127.0.0.1", "port": port, "deny": ["127.0.0.2"],
                                                    "tls": {"cert": str(cert), "key": str(key)}}]}})
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.2", 0))
        s.connect(("127.0.0.1", port))
        assert closed_within(s, 5)   # a handshake begun would wait for the ClientHello (connect_timeout: 10 s)
    assert "connection from 127.0.0.2" in gw.log() and "refused by allow/deny list" in gw.log()
    assert "TLS handshake with" not in gw.log()
    assert tls_connack(port, cert) == P.Connack(0, False)


BURST = 48


@pytest.mark.parametrize("gateway_loop", LOOPS)
def test_tls_clients_saying_client_hello_at_once_all_get_connack(gateway_factory, tmp_path, gateway_loop):
    """Many TLS clients at once, each sending its ClientHello right after the TCP connect. Before, the broker's
    handshake (loop.start_tls) began a loop iteration after the accept, and the loop could read the socket in
    between (uvloop always, asyncio under a burst): that ClientHello went to the MQTT protocol, which dropped
    it, and the client's handshake timed out (most of these 48 clients, on both loops)."""
    cert, key = self_signed(tmp_path, "server")
    port = free_port()
    gw = gateway_factory({"broker": {"listeners": [{"host": "127.0.0.1", "port": port,
                                                    "tls": {"cert": str(cert), "key": str(key)}}]}})
    assert f"event loop: {gateway_loop}" in gw.log()
    together = threading.Barrier(BURST)

    def one(_: int) -> P.Packet | str:
        together.wait(10)
        try:
            return tls_connack(port, cert)
        except (OSError, ssl.SSLError) as exc:
            return repr(exc)

    for _ in range(2):
        with ThreadPoolExecutor(BURST) as pool:
            results = list(pool.map(one, range(BURST)))
        assert [r for r in results if r != P.Connack(0, False)] == []


# -- the shipped deployment configuration -----------------------------------------------------------------


def test_deploy_config_refuses_anonymous_clients_and_admits_its_users(tmp_path, passwd_file):
    """deploy/mqbridge.yaml as compose runs it, with only its paths and ports made local: the listener
    there binds 0.0.0.0, here 127.0.0.1 (which allows nothing more by default once users exist)."""
    cfg = yaml.safe_load((REPO / "deploy" / "mqbridge.yaml").read_text(encoding="utf-8"))
    assert cfg["broker"]["password_file"].startswith(cfg["data_dir"] + "/")
    workdir = tmp_path / "deploy"
    workdir.mkdir()
    port = free_port()
    cfg["data_dir"] = str(workdir / "var")
    cfg.pop("rules")                                   # its routes need IBM MQ and ActiveMQ
    cfg["convlog"]["directory"] = str(workdir / "convlog")
    cfg["broker"]["password_file"] = str(passwd_file)
    assert [lst["host"] for lst in cfg["broker"]["listeners"]] == ["0.0.0.0"]
    cfg["broker"]["listeners"][0]["host"] = "127.0.0.1"
    cfg["broker"]["listeners"][0]["port"] = port
    gw = GatewayProcess(workdir, cfg)
    cfg["admin"]["port"] = gw.admin_port
    gw.config = cfg
    gw.start()
    try:
        assert login(port, None, None) == 5
        assert mosquitto_pub(port, "factory/line1/temp", "21.5").returncode != 0
        ok = mosquitto_pub(port, "factory/line1/temp", "21.5", qos=1, extra=("-u", "alice", "-P", "wonder land"))
        assert ok.returncode == 0, ok.stderr
    finally:
        gw.stop()


def test_without_its_password_file_the_deploy_config_does_not_start(tmp_path):
    cfg = yaml.safe_load((REPO / "deploy" / "mqbridge.yaml").read_text(encoding="utf-8"))
    cfg["data_dir"] = str(tmp_path / "var")
    cfg.pop("rules")
    cfg["convlog"]["directory"] = str(tmp_path / "convlog")
    cfg["broker"]["password_file"] = str(tmp_path / "var" / "passwd")
    cfg["broker"]["listeners"][0].update(host="127.0.0.1", port=free_port())
    cfg["admin"]["port"] = free_port()
    path = tmp_path / "mqbridge.yaml"
    path.write_text(yaml.safe_dump(cfg))
    r = mqbridge("serve", "-c", str(path))
    out = r.stdout + r.stderr
    assert r.returncode == 1
    assert "cannot read the password file" in out and "mqbridge passwd -c" in out
    assert not os.path.exists(tmp_path / "var" / "runtime.json")


# -- client ids bound to user names (client_id_pattern) ---------------------------------------------------


@pytest.mark.parametrize("level", [P.MQTT_311, P.MQTT_5])
def test_client_id_pattern_binds_client_ids_to_user_names(gateway_factory, passwd_file, level):
    """Nobody takes over another user's session: with ``client_id_pattern: "%u(-.+)?"`` alice may use
    "alice" and "alice-2", not "bob" or "alicex"; refused with CONNACK 2 (MQTT 5: 0x85)."""
    gw = gateway_factory({"broker": {"password_file": str(passwd_file), "client_id_pattern": "%u(-.+)?"}})
    refused = P.ConnackCode.IDENTIFIER_REJECTED if level == P.MQTT_311 else P.Reason.CLIENT_IDENTIFIER_NOT_VALID
    assert login(gw.port, "alice", "wonder land", client_id="alice", level=level) == 0
    assert login(gw.port, "alice", "wonder land", client_id="alice-2", level=level) == 0
    assert login(gw.port, "alice", "wonder land", client_id="bob", level=level) == refused
    assert login(gw.port, "alice", "wonder land", client_id="alicex", level=level) == refused
    assert login(gw.port, "bob", "builder", client_id="bob", level=level) == 0
    assert login(gw.port, "bob", "builder", client_id="alice", level=level) == refused
    # a wrong password is still refused as such, before the client id is looked at
    bad = P.ConnackCode.BAD_USERNAME_OR_PASSWORD if level == P.MQTT_311 else P.Reason.BAD_USER_NAME_OR_PASSWORD
    assert login(gw.port, "bob", "wrong", client_id="bob", level=level) == bad   # 4; MQTT 5: 0x86


def test_client_id_pattern_with_a_user_needs_a_checked_user_name(gateway_factory):
    """Without a password database a user name is only what the client says: a %u pattern refuses all."""
    gw = gateway_factory({"broker": {"client_id_pattern": "%u", "allow_anonymous": True}})
    assert login(gw.port, "mallory", None, client_id="mallory") == P.ConnackCode.IDENTIFIER_REJECTED
    gw2 = gateway_factory({"broker": {"client_id_pattern": "sensor-[0-9]+", "allow_anonymous": True}})
    assert login(gw2.port, None, None, client_id="sensor-17") == 0
    assert login(gw2.port, None, None, client_id="actuator-1") == P.ConnackCode.IDENTIFIER_REJECTED


def test_an_invalid_client_id_pattern_is_refused_by_validate(tmp_path):
    conf = tmp_path / "gw.yaml"
    conf.write_text("broker:\n  client_id_pattern: 'a(b'\n")
    out = mqbridge("validate", "-c", str(conf))
    assert out.returncode != 0 and "client_id_pattern" in out.stderr and "regular expression" in out.stderr
