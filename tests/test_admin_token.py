"""The admin channel answers only its token's holder and only requests addressed to it: another local user
(without the token file) gets 401, a web page's cross-site request 403; the CLI reads the token from the
data directory."""
from __future__ import annotations

import http.client
import stat
from collections.abc import Callable

from tests.support.gateway import GatewayProcess


def _raw(gw: GatewayProcess, method: str, path: str, headers: dict[str, str]) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", gw.admin_port, timeout=5)
    try:
        conn.request(method, path, headers=headers)
        return conn.getresponse().status
    finally:
        conn.close()


def test_admin_requests_need_the_token_and_the_cli_has_it(gateway_factory: Callable[..., GatewayProcess]) -> None:
    gw = gateway_factory()
    token_file = gw.data_dir / "admin.token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600          # only the gateway's user reads it
    token = token_file.read_text().strip()
    assert len(token) >= 40
    assert gw.admin("/status", token=False)[0] == 401
    assert gw.admin("/connections", "DELETE", token=False)[0] == 401
    assert gw.admin("/reload", "POST", token=False)[0] == 401
    assert gw.admin("/status")[0] == 200
    wrong = {"Authorization": "Bearer " + token[:-1] + ("A" if token[-1] != "A" else "B")}
    assert _raw(gw, "GET", "/status", {"Host": f"127.0.0.1:{gw.admin_port}", **wrong}) == 401
    # the CLI finds the token through the configuration's data directory
    r = gw.cli("status", "-c", str(gw.config_path))
    assert r.returncode == 0, r.stderr
    # and a restart keeps the same token
    gw.stop()
    gw.start()
    assert token_file.read_text().strip() == token


def test_cross_site_requests_are_refused(gateway_factory: Callable[..., GatewayProcess]) -> None:
    gw = gateway_factory()
    auth = {"Authorization": f"Bearer {(gw.data_dir / 'admin.token').read_text().strip()}"}
    own = f"127.0.0.1:{gw.admin_port}"
    assert _raw(gw, "GET", "/status", {"Host": own, **auth}) == 200
    assert _raw(gw, "GET", "/status", {"Host": f"evil.example:{gw.admin_port}", **auth}) == 403   # DNS rebinding
    assert _raw(gw, "POST", "/reload", {"Host": own, "Origin": "http://evil.example", **auth}) == 403
    assert _raw(gw, "POST", "/reload", {"Host": own, "Origin": f"http://{own}"}) == 401   # a form has no token
