"""A route between two ends of the same protocol (JMS -> JMS, MQ queue -> MQ queue) gets one verdict:
`mqbridge validate` refuses it, naming the route's line, and a running gateway's reload refuses the same
file with the same reason and keeps its routes (before: validate said OK and reload refused it)."""
from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.support.gateway import GatewayProcess

RULES = {
    "jms-jms": {"connectors": {"amq": {"type": "jms", "host": "127.0.0.1", "port": 1}},
                "routes": [{"name": "j2j", "from": {"connector": "amq", "queue": "A"},
                            "to": {"connector": "amq", "queue": "B"}}]},
    "mq-mq": {"routes": [{"name": "m2m", "from": {"connector": "embedded", "queue": "A"},
                          "to": {"connector": "embedded", "queue": "B"}}]},
}
REASON = {"jms-jms": "no conversion from jms to jms", "mq-mq": "no conversion from mq to mq"}


@pytest.mark.parametrize("case", sorted(RULES))
def test_validate_and_reload_give_one_verdict(case: str, gateway_factory: Callable[..., GatewayProcess],
                                              tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(RULES[case], sort_keys=False))
    run = subprocess.run([sys.executable, "-m", "bridge", "validate", str(bad)], capture_output=True, text=True,
                         check=False)
    assert run.returncode != 0 and REASON[case] in run.stdout + run.stderr
    assert f"{bad}:" in run.stdout + run.stderr                         # names the file and line

    good = tmp_path / "rules.yaml"
    good.write_text(yaml.safe_dump({"routes": [{"name": "keep", "from": {"mqtt": "k/#"},
                                                "to": {"connector": "embedded", "queue": "K"}}]}))
    gw = gateway_factory({"rules": str(good)})
    good.write_text(bad.read_text())
    r = gw.cli("reload", "--admin", f"http://127.0.0.1:{gw.admin_port}")
    assert r.returncode != 0 and REASON[case] in r.stdout + r.stderr
    status, routes = gw.admin("/status")
    assert status == 200 and [row["route"] for row in routes["routes"]] == ["keep"]
