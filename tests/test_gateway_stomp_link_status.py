"""A STOMP connector's link in `mqbridge status` and the admin channel's `/status`, as the native JMS
connector's: up with no reconnects against the session's ActiveMQ, down with the reason while the provider
refuses connections (a running `mqbridge serve`, its CLI)."""
from __future__ import annotations

import json
import re
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.activemq import BrokerEndpoints
from tests.support.gateway import GatewayProcess, wait_for


def _link(gw: GatewayProcess, route: str, end: str) -> dict[str, Any] | None:
    rows = {r["route"]: r for r in gw.admin("/status")[1].get("routes", [])}
    return rows.get(route, {}).get(f"{end}_link")


@pytest.mark.activemq
def test_stomp_links_show_up_and_down_with_the_reason(
        gateway_factory: Callable[..., GatewayProcess], activemq: BrokerEndpoints, tmp_path: Path) -> None:
    with socket.socket() as refused:   # bound, never listening: connections to it are refused
        refused.bind(("127.0.0.1", 0))
        rules = tmp_path / "rules.yaml"
        rules.write_text(json.dumps({
            "connectors": {"amq": {"type": "jms", "host": activemq.host, "port": activemq.stomp_port},
                           "gone": {"type": "jms", "host": "127.0.0.1", "port": refused.getsockname()[1],
                                    "reconnect_max_seconds": 1.0}},
            "routes": [{"name": "to-amq", "from": {"mqtt": "ls/up/#"}, "to": {"connector": "amq", "queue": "ls.q"}},
                       {"name": "from-amq", "from": {"connector": "amq", "queue": "ls.in"}, "to": {"queue": "LS"}},
                       {"name": "to-gone", "from": {"mqtt": "ls/down/#"},
                        "to": {"connector": "gone", "queue": "ls.q"}}]}))
        gw = gateway_factory({"rules": str(rules)})
        up = wait_for(lambda: (link := _link(gw, "to-amq", "target")) and link["state"] == "up" and link,
                      20, what="the STOMP target link up")
        assert up["error"] is None and up["reconnects"] == 0
        wait_for(lambda: (link := _link(gw, "from-amq", "source")) and link["state"] == "up", 20,
                 what="the STOMP source link up")
        down = wait_for(lambda: (link := _link(gw, "to-gone", "target")) and link["state"] == "down" and link,
                        20, what="the refused STOMP target link down")
        assert f"cannot connect to 127.0.0.1:{refused.getsockname()[1]}" in str(down["error"]), down
        status = gw.cli("status", "--admin", f"http://127.0.0.1:{gw.admin_port}")
        assert status.returncode == 0, status.stderr
        # the refused link retries: between two attempts it is down, during one connecting (the reason stays)
        port = refused.getsockname()[1]
        assert "target link UP since" in status.stdout and "source link UP since" in status.stdout
        assert re.search(rf"target link (DOWN|CONNECTING) since .*cannot connect to 127\.0\.0\.1:{port}",
                         status.stdout), status.stdout
