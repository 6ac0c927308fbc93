# Owns the pytest fixtures for tests against a real ActiveMQ broker and the JmsTool Java client.
"""Fixtures (import them into tests/conftest.py):

- ``activemq``: session-wide broker on 127.0.0.1 -> BrokerEndpoints(host, openwire_port, stomp_port,
  mqtt_port). Started on first use only; skipped with the reason when java/activemq are absent.
- ``activemq_broker``: the same broker's controller (log tail, startup time).
- ``jmstool``: JmsTool compiled once per session, pointed at the session broker.
- ``own_activemq``: a fresh broker for one test (persistent KahaDB), for tests that stop, kill or
  restart it (reconnect tests); never disturbs the session broker.
- ``unique_name``: a destination-name suffix unique to the test, so tests sharing the broker never
  read each other's messages.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.activemq import ActiveMQ, ActiveMQUnavailable, BrokerEndpoints
from tests.support.activemq import unavailable_reason as broker_unavailable
from tests.support.jmstool import JmsTool
from tests.support.jmstool import unavailable_reason as jmstool_unavailable


def start_broker(base: Path, persistent: bool, extra_xml: str = "") -> ActiveMQ:
    """A started broker of our own (skips the test when ActiveMQ cannot run here); the caller stops it."""
    reason = broker_unavailable()
    if reason is not None:
        pytest.skip(f"ActiveMQ unavailable: {reason}")
    broker = ActiveMQ(base, persistent=persistent, extra_xml=extra_xml)
    try:
        broker.start()
    except ActiveMQUnavailable as e:
        pytest.skip(f"ActiveMQ unavailable: {e}")
    return broker


@pytest.fixture(scope="session")
def activemq_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ActiveMQ]:
    broker = start_broker(tmp_path_factory.mktemp("activemq"), persistent=False)
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def activemq(activemq_broker: ActiveMQ) -> BrokerEndpoints:
    assert activemq_broker.endpoints is not None
    return activemq_broker.endpoints


@pytest.fixture(scope="session")
def jmstool_classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    reason = jmstool_unavailable()
    if reason is not None:
        pytest.skip(f"JmsTool unavailable: {reason}")
    return JmsTool.compile(tmp_path_factory.mktemp("jmstool"))


@pytest.fixture(scope="session")
def jmstool(jmstool_classes: Path, activemq: BrokerEndpoints) -> Iterator[JmsTool]:
    tool = JmsTool(jmstool_classes, activemq.openwire_url)
    try:
        yield tool
    finally:
        tool.close()


@pytest.fixture
def own_activemq(tmp_path: Path) -> Iterator[ActiveMQ]:
    reason = broker_unavailable()
    if reason is not None:
        pytest.skip(f"ActiveMQ unavailable: {reason}")
    broker = start_broker(tmp_path / "activemq", persistent=True)
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", request.node.nodeid)[-80:].strip("_")
