"""Shared pytest fixtures: a real `mqbridge serve` process per test, real MQTT clients, ActiveMQ."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from tests.support.activemq_fixtures import *  # noqa: F403 - activemq, jmstool, own_activemq, unique_name
from tests.support.gateway import GatewayProcess
from tests.support.mqtt_clients import PahoClient

# No timed tests (speed is measured in bench/): hypothesis' per-example deadline (200 ms) fails pure
# mapping tests when other work loads the machine's two cores. Tests that set settings keep this.
settings.register_profile("mqbridge", deadline=None)
settings.load_profile("mqbridge")


@pytest.fixture
def gateway_loop() -> str | None:
    """The event loop of the gateways ``gateway_factory`` starts (None: tests.support.gateway.DEFAULT_LOOP,
    asyncio unless MQBRIDGE_EVENT_LOOP says otherwise); ``@pytest.mark.parametrize("gateway_loop", LOOPS)``
    runs a test on each loop."""
    return None


@pytest.fixture
def gateway_factory(tmp_path: Path, gateway_loop: str | None) -> Iterator[Callable[..., GatewayProcess]]:
    """Start `mqbridge serve` processes with config overrides; all are stopped at teardown."""
    started: list[GatewayProcess] = []

    def make(config: dict[str, Any] | None = None, name: str = "gw") -> GatewayProcess:
        workdir = tmp_path / name
        workdir.mkdir(exist_ok=True)
        gw = GatewayProcess(workdir, config, loop=gateway_loop).start()
        started.append(gw)
        return gw

    yield make
    for gw in started:
        gw.stop()


@pytest.fixture
def gateway(gateway_factory: Callable[..., GatewayProcess]) -> GatewayProcess:
    return gateway_factory()


@pytest.fixture
def clients() -> Iterator[Callable[..., PahoClient]]:
    """Make paho clients; every one still connected is closed at teardown."""
    made: list[PahoClient] = []

    def make(port: int, client_id: str | None = None, **kw: Any) -> PahoClient:
        c = PahoClient(port, client_id, **kw)
        made.append(c)
        return c

    yield make
    for c in made:
        try:
            c.client.disconnect()
            c.client.loop_stop()
        except Exception:
            pass
