"""One `mqbridge serve` per test module, reset between tests, instead of one process per test.

Starting the gateway costs most of a broker test's time, so the broker feature tests that need no
special configuration share a process. Import both fixtures into a test module to override the
conftest ``gateway`` fixture there::

    from tests.support.shared_gateway import gateway, module_gateway  # noqa: F401

Before each test the shared gateway is brought back to a fresh state through its public interfaces
only: every client connection is closed (admin), every persistent session deleted (admin), every
retained message cleared (an MQTT client publishes an empty retained message on each topic it is
sent), and ``log()`` restarted so a test sees only its own log lines. Tests may stop, kill and
restart it; a gateway left stopped is started again.
"""
from __future__ import annotations

import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge.mqtt import packets as P
from tests.support.gateway import GatewayProcess, wait_for
from tests.support.mqtt_clients import RawClient


def reset(gw: GatewayProcess, username: str | None = None, password: bytes | None = None) -> None:
    """Back to a fresh state; ``username``/``password`` for the reset client when auth is on."""
    if gw.proc is None or gw.proc.poll() is not None:
        gw.proc = None
        gw.start()
    _, conns = gw.admin("/connections")
    for c in conns:
        gw.admin("/connections/" + urllib.parse.quote(c["client_id"], safe=""), "DELETE")
    wait_for(lambda: gw.admin("/connections")[1] == [], 10, what="all connections closed")
    _, sessions = gw.admin("/sessions")
    for s in sessions:
        gw.admin("/sessions/" + urllib.parse.quote(s["client_id"], safe=""), "DELETE")
    wait_for(lambda: gw.admin("/sessions")[1] == [], 10, what="all sessions deleted")
    # retained messages: what a new "#" subscription is sent, before a marker, is every one of them
    cid = f"reset-{uuid.uuid4().hex[:8]}"
    raw = RawClient(gw.port)
    try:
        raw.send(P.encode(P.Connect(P.MQTT_311, cid, True, 60, None, username, password)))
        assert raw.recv() == P.Connack(0, False)
        assert raw.subscribe("#", 0).return_codes == (0,)
        marker = f"reset-marker/{uuid.uuid4().hex}"
        raw.publish(marker, b"", qos=0)
        retained = [p.topic for p in raw.receive_until(lambda p: p.topic == marker) if p.retain]
        for i, topic in enumerate(retained, start=1):
            raw.publish(topic, b"", qos=1, packet_id=i, retain=True)
            while (packet := raw.recv()) != P.PacketIdOnly(P.PUBACK, i):
                assert isinstance(packet, P.Publish), packet   # its own clearing, sent back to it
        raw.send(P.DISCONNECT_BYTES)
    finally:
        raw.close()
    wait_for(lambda: gw.admin("/connections")[1] == [], 10, what="the reset client gone")
    gw.mark_log()


def started(tmp_path_factory: pytest.TempPathFactory, name: str = "shared-gw",
            config: dict[str, Any] | None = None) -> Iterator[GatewayProcess]:
    """The body of a module-scoped gateway fixture (``yield from started(...)``): started, stopped after."""
    workdir: Path = tmp_path_factory.mktemp(name)
    gw = GatewayProcess(workdir, config).start()
    try:
        yield gw
    finally:
        gw.stop()


@pytest.fixture(scope="module")
def module_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    yield from started(tmp_path_factory)


@pytest.fixture
def gateway(module_gateway: GatewayProcess) -> GatewayProcess:
    reset(module_gateway)
    return module_gateway
