"""``use_identity_as_username`` against a running `mqbridge serve`: a TLS listener whose client certificates
(verified against its ``ca``) name the user by their subject CN, as mosquitto's option of that name does.
Certificates are made here by the openssl CLI (a CA, the server's, clients'); clients are paho and
mosquitto_pub/sub. A persistent session of a certificate user keeps that user's ACL rules across a restart
and a SIGHUP reload while its client is away (before: no password database, so the stored name got the
anonymous rules, and what was queued for it was withdrawn or never queued)."""
from __future__ import annotations

import shutil
import signal
import ssl
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.gateway import LOOPS, REPO, GatewayProcess, free_port, wait_for
from tests.support.mosquitto import MosquittoSub, mosquitto_pub
from tests.support.mqtt_clients import PahoClient

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None or shutil.which("mosquitto_pub") is None,
                                reason="the openssl CLI / mosquitto-clients not installed")

ACL = """\
topic read public/#

user alice
topic readwrite plant/alice/#
topic read public/#

user writer
topic write #

pattern read users/%u/#
"""

FAILURE = 0x80


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


class Pki:
    """A CA and certificates it signed (EC P-256 keys: quick to make)."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.ca, self.ca_key = directory / "ca.pem", directory / "ca.key"
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
                 "-keyout", str(self.ca_key), "-out", str(self.ca), "-subj", "/CN=mqbridge test CA")

    def issue(self, name: str, subject: str, *, server: bool = False) -> tuple[Path, Path]:
        cert, key, csr = (self.dir / f"{name}.{ext}" for ext in ("pem", "key", "csr"))
        _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", str(key), "-out", str(csr), "-subj", subject)
        ext = self.dir / f"{name}.ext"
        ext.write_text("subjectAltName=IP:127.0.0.1\n" if server else "extendedKeyUsage=clientAuth\n")
        _openssl("x509", "-req", "-in", str(csr), "-CA", str(self.ca), "-CAkey", str(self.ca_key),
                 "-CAcreateserial", "-days", "1", "-out", str(cert), "-extfile", str(ext))
        return cert, key


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    pki = Pki(tmp_path_factory.mktemp("pki"))
    return {"ca": pki.ca, "server": pki.issue("server", "/CN=127.0.0.1", server=True),
            "alice": pki.issue("alice", "/O=plant/CN=alice"), "writer": pki.issue("writer", "/CN=writer"),
            "no-cn": pki.issue("no-cn", "/O=plant/OU=devices")}


@pytest.fixture
def tls_gw(gateway_factory: Callable[..., GatewayProcess], pki: dict[str, Any], tmp_path: Path) -> GatewayProcess:
    """A gateway with one TLS listener naming users by certificate, an ACL file and no password database."""
    acl = tmp_path / "acl"
    acl.write_text(ACL, encoding="utf-8")
    cert, key = pki["server"]
    return gateway_factory({"broker": {"acl_file": str(acl), "listeners": [{
        "host": "127.0.0.1", "port": free_port(), "tls": {
            "cert": str(cert), "key": str(key), "ca": str(pki["ca"]), "use_identity_as_username": True}}]}})


def cert_client(clients: Callable[..., PahoClient], gw: GatewayProcess, pki: dict[str, Any], who: str,
                client_id: str | None = None, **kw: Any) -> PahoClient:
    """A paho client presenting ``who``'s certificate (not yet connected)."""
    c = clients(gw.port, client_id, reconnect=False, **kw)
    cert, key = pki[who]
    c.client.tls_set(ca_certs=str(pki["ca"]), certfile=str(cert), keyfile=str(key),
                     cert_reqs=ssl.CERT_REQUIRED)
    return c


def tls_args(pki: dict[str, Any], who: str) -> tuple[str, ...]:
    cert, key = pki[who]
    return ("--cafile", str(pki["ca"]), "--cert", str(cert), "--key", str(key))


def topics(c: PahoClient) -> list[str]:
    with c.lock:
        return [m.topic for m in c.messages]


def receive_through(c: PahoClient, marker: str) -> list[str]:
    wait_for(lambda: marker in topics(c), 10, what=f"{marker} at {c.client_id} (has {topics(c)})")
    got = topics(c)
    return got[:got.index(marker) + 1]


@pytest.mark.parametrize("gateway_loop", LOOPS)
def test_the_certificate_names_the_user(tls_gw, clients, pki):
    # the CONNECT's user name and password are not used: the certificate's CN is the user
    alice = cert_client(clients, tls_gw, pki, "alice", username="writer", password="anything").connect()
    assert alice.rc == 0
    _, conns = tls_gw.admin("/connections")
    assert [c["username"] for c in conns if c["client_id"] == alice.client_id] == ["alice"]
    assert "accepts no client" not in tls_gw.log()   # no password database is needed on such a listener
    assert alice.subscribe("plant/bob/#", 1) == [FAILURE]        # alice's rules
    assert alice.subscribe("plant/alice/#", 1) == [1]
    assert alice.subscribe("users/alice/#", 1) == [1]            # %u is the CN
    sub = MosquittoSub(tls_gw.port, "users/#", qos=1, client_id="alice-sub", extra=tls_args(pki, "alice"))
    try:
        sub.wait_subscribed(tls_gw)
        r = mosquitto_pub(tls_gw.port, "plant/alice/from-writer", "w", qos=1, extra=tls_args(pki, "writer"))
        assert r.returncode == 0, r.stderr
        r = mosquitto_pub(tls_gw.port, "users/alice/inbox", "x", qos=1, extra=tls_args(pki, "writer"))
        assert r.returncode == 0, r.stderr
        assert receive_through(alice, "users/alice/inbox") == ["plant/alice/from-writer", "users/alice/inbox"]
        # mosquitto_sub as alice subscribed users/#, of which it may read users/alice/# only: filtered per topic
        mosquitto_pub(tls_gw.port, "users/bob/inbox", "not alice's", qos=1, extra=tls_args(pki, "writer"))
        mosquitto_pub(tls_gw.port, "users/alice/second", "y", qos=1, extra=tls_args(pki, "writer"))
        assert [m.topic for m in sub.wait_messages(2)][:2] == ["users/alice/inbox", "users/alice/second"]
    finally:
        sub.stop()


@pytest.mark.parametrize("gateway_loop", LOOPS)
def test_a_certificate_without_a_cn_is_refused(tls_gw, clients, pki):
    c = cert_client(clients, tls_gw, pki, "no-cn", username="alice", password="x").connect()
    assert c.rc == 5
    r = mosquitto_pub(tls_gw.port, "public/x", "y", extra=(*tls_args(pki, "no-cn"), "-u", "alice"))
    assert r.returncode != 0 and "not authori" in r.stderr.lower(), r.stderr
    assert "the client certificate's subject has no CN" in tls_gw.log()


def test_use_identity_as_username_needs_a_ca(tmp_path, pki):
    cert, key = pki["server"]
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(f"broker:\n  listeners:\n    - port: 0\n      tls:\n        cert: {cert}\n        key: {key}\n"
                   "        use_identity_as_username: true\n", encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "bridge", "validate", "-c", str(cfg)], capture_output=True,
                       text=True, timeout=60, cwd=REPO)
    assert r.returncode != 0
    assert "use_identity_as_username needs ca" in r.stdout + r.stderr


@pytest.mark.parametrize("gateway_loop", LOOPS)
def test_a_certificate_users_persistent_session_keeps_its_rules_across_restart_and_reload(
        tls_gw, clients, pki, tmp_path):
    def away_alice() -> PahoClient:
        return cert_client(clients, tls_gw, pki, "alice", "alice-p", clean_session=False).connect()

    def publish(*topics: str) -> None:
        for topic in topics:
            r = mosquitto_pub(tls_gw.port, topic, "while alice is away", qos=1, extra=tls_args(pki, "writer"))
            assert r.returncode == 0, r.stderr

    alice = away_alice()
    assert alice.subscribe("#", 1) == [1]                 # readable in part: checked per publication
    assert alice.subscribe("plant/alice/#", 1) == [1]
    alice.disconnect()
    tls_gw.stop()
    tls_gw.start()
    publish("plant/alice/a", "plant/bob/x", "users/alice/inbox", "public/p", "plant/alice/z")
    back = away_alice()
    assert back.session_present
    assert receive_through(back, "plant/alice/z") == ["plant/alice/a", "users/alice/inbox", "public/p",
                                                      "plant/alice/z"]
    back.disconnect()
    # away again: queued before a SIGHUP reload that changes the ACL file, and after it
    publish("plant/alice/before-reload")
    acl = tmp_path / "acl"
    acl.write_text(ACL + "\nuser carol\ntopic read carol/#\n", encoding="utf-8")
    tls_gw.mark_log()
    assert tls_gw.proc is not None
    tls_gw.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "rules reloaded" in tls_gw.log(), 15, what="the reload")
    publish("plant/alice/after-reload")
    again = away_alice()
    assert again.session_present
    assert receive_through(again, "plant/alice/after-reload") == ["plant/alice/before-reload",
                                                                  "plant/alice/after-reload"]
