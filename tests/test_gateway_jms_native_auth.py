"""The native JMS connector's ``user``/``password`` against an ActiveMQ that requires them (its
simpleAuthenticationPlugin, anonymous access off), through a running gateway: the right ones connect and carry
messages; wrong ones keep the route's link down with the provider's reason in the status, and the message waits
on its queue, not lost."""
from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge.connectors.embedded import QueueStore, default_path
from mappings.mq import constants as C
from mappings.mq.message import build_message, encode_message
from mappings.mq.mqmd import Mqmd
from tests.support.activemq import BrokerEndpoints
from tests.support.activemq_fixtures import start_broker
from tests.support.gateway import GatewayProcess, wait_for
from tests.support.jmstool import JmsTool, native_connector_yaml

pytest.importorskip("jpype", reason="jpype1 not installed (pip install 'mqbridge[jms]')")
pytestmark = pytest.mark.activemq

USERS = """
    <plugins>
      <simpleAuthenticationPlugin anonymousAccessAllowed="false">
        <users><authenticationUser username="app" password="s3cret" groups="users"/></users>
      </simpleAuthenticationPlugin>
    </plugins>"""


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerEndpoints]:
    broker = start_broker(tmp_path_factory.mktemp("activemq-auth"), persistent=False, extra_xml=USERS)
    assert broker.endpoints is not None
    yield broker.endpoints
    broker.stop()


@pytest.fixture(scope="module")
def app_tool(secured: BrokerEndpoints, jmstool_classes: Path) -> Iterator[JmsTool]:
    tool = JmsTool(jmstool_classes, secured.openwire_url + "?jms.userName=app&jms.password=s3cret")
    yield tool
    tool.close()


def _gateway(factory: Callable[..., GatewayProcess], secured: BrokerEndpoints, tmp_path: Path, password: str,
             tag: str) -> GatewayProcess:
    rules = tmp_path / "rules.yaml"
    rules.write_text(native_connector_yaml(secured.openwire_url, "user: app", f"password: {password}") + f"""\
routes:
  - name: out
    from: {{queue: AUTH.OUT}}
    to: {{connector: amq, queue: auth.{tag}}}
""")
    return factory({"rules": str(rules)})


def _put(gw: GatewayProcess, text: str) -> QueueStore:
    store = QueueStore(default_path(gw.data_dir)).open()
    store.put("AUTH.OUT", encode_message(build_message(Mqmd(persistence=C.MQPER_PERSISTENT), (), text.encode(),
                                                       body_format=C.MQFMT_STRING)))
    return store


def _link(gw: GatewayProcess) -> dict[str, Any]:
    code, status = gw.admin("/status")
    assert code == 200
    (route,) = [r for r in status["routes"] if r["route"] == "out"]
    return dict(route["target_link"])


def test_the_connectors_user_and_password_connect(gateway_factory: Callable[..., GatewayProcess],
                                                  secured: BrokerEndpoints, app_tool: JmsTool,
                                                  tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    gw = _gateway(gateway_factory, secured, tmp_path, "s3cret", tag)
    _put(gw, "hello").close()
    (got,) = app_tool.receive(f"queue://auth.{tag}", 1, timeout=30)
    assert got["body"] == "hello"
    assert _link(gw)["state"] == "up"


def test_a_wrong_password_keeps_the_link_down_with_the_reason_and_loses_nothing(
        gateway_factory: Callable[..., GatewayProcess], secured: BrokerEndpoints, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    gw = _gateway(gateway_factory, secured, tmp_path, "wrong", tag)
    store = _put(gw, "waits")
    try:
        link = wait_for(lambda: (lambda lk: lk if lk["state"] == "down" and lk["error"] else None)(_link(gw)), 30,
                        what="the target link down with the provider's reason")
        assert "password" in link["error"].lower(), link
        assert store.depth("AUTH.OUT") == 1   # not confirmed: it waits for a working connection
    finally:
        store.close()
