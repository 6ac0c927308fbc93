"""`mqbridge serve`: wires the configuration into the store, broker, listeners and admin channel,
and shuts them down cleanly (in-flight state flushed to the store) on SIGINT/SIGTERM."""
from __future__ import annotations

import asyncio
import json
import logging
import signal
from pathlib import Path

from bridge.admin import AdminServer
from bridge.config import GatewayConfig
from bridge.mqtt.broker import Broker
from bridge.mqtt.server import MqttServer
from bridge.mqtt.store import Store

log = logging.getLogger("mqbridge")

STORE_FILE = "broker.sqlite3"
RUNTIME_FILE = "runtime.json"   # where a running gateway says its ports are (read by status/admin)


class Gateway:
    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.data_dir = Path(config.data_dir)
        self.store: Store | None = None
        self.broker: Broker | None = None
        self.server: MqttServer | None = None
        self.admin: AdminServer | None = None
        self._stopping = asyncio.Event()

    async def start(self) -> None:
        cfg = self.config
        self.data_dir.mkdir(parents=True, exist_ok=True)
        loop = asyncio.get_running_loop()
        store = Store(self.data_dir / STORE_FILE, synchronous=cfg.broker.durability.synchronous)
        state = store.open()
        store.start(loop)
        self.store = store
        broker = Broker(cfg.broker, store, trace_clients=frozenset(cfg.logging.trace_clients))
        broker.recover(state)
        self.broker = broker
        server = MqttServer(broker, list(cfg.broker.listeners), sys_interval=cfg.broker.sys_interval)
        await server.start()
        self.server = server
        if cfg.admin.enabled:
            admin = AdminServer(broker, server, cfg.gateway_id)
            await admin.start(cfg.admin.host, cfg.admin.port)
            self.admin = admin
        self._write_runtime()

    def _write_runtime(self) -> None:
        assert self.server is not None
        info = {
            "gateway_id": self.config.gateway_id,
            "listeners": [{"name": lst.label(), "host": lst.config.host, "port": lst.port}
                          for lst in self.server.listeners],
            "admin": (f"http://{self.config.admin.host}:{self.admin.port}" if self.admin else None),
        }
        path = self.data_dir / RUNTIME_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)

    def request_stop(self) -> None:
        self._stopping.set()

    async def wait_stopped(self) -> None:
        await self._stopping.wait()

    async def stop(self) -> None:
        if self.admin is not None:
            await self.admin.close()
        if self.server is not None:
            await self.server.close()
        if self.store is not None:
            # flush: every queued write committed, then the writer thread ends
            await asyncio.get_running_loop().run_in_executor(None, self.store.close)
        try:
            (self.data_dir / RUNTIME_FILE).unlink()
        except OSError:
            pass
        log.info("gateway stopped")


async def serve(config: GatewayConfig) -> int:
    gateway = Gateway(config)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, gateway.request_stop)
        except (NotImplementedError, RuntimeError):
            pass
    try:
        await gateway.start()
    except OSError as exc:
        log.error("cannot start: %s", exc)
        await gateway.stop()
        return 1
    log.info("mqbridge %s ready (data in %s)", config.gateway_id, gateway.data_dir.resolve())
    await gateway.wait_stopped()
    log.info("shutting down")
    await gateway.stop()
    return 0


def run(config: GatewayConfig) -> int:
    try:
        import uvloop  # optional speed-up: pip install mqbridge[speed]
    except ImportError:
        return asyncio.run(serve(config))
    return uvloop.run(serve(config))
