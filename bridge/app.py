"""`mqbridge serve`: wires the configuration into the store, broker, listeners and admin channel,
and shuts them down cleanly (in-flight state flushed to the store) on SIGINT/SIGTERM."""
from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import signal
import sqlite3
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import bridge.connectors.jms  # noqa: F401 - registers connector type "jms" (STOMP)
import bridge.connectors.mq  # noqa: F401 - registers connector type "mq"; pymqi/ibmmq load only when used
from bridge.admin import AdminServer
from bridge.admin_token import ensure_token
from bridge.config import GatewayConfig
from bridge.connectors.embedded import QueueStore, QueueStoreError, default_path
from bridge.connectors.registry import RouteSetupError
from bridge.convlog_process import LogProcess
from bridge.mqtt.broker import Broker
from bridge.mqtt.passwords import AuthFileError
from bridge.mqtt.server import MqttServer
from bridge.mqtt.store import Store
from bridge.routing.route_acl import check_route_acl
from bridge.routing.router import Router
from bridge.rules_file import load_rules
from bridge.threadnames import name_this_thread
from mappings.rules.model import RulesError

QUEUE_DEPTH_WAIT = 2.0   # seconds /status waits for the queue depths (_read_queue_depths)
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
        self.queues: QueueStore | None = None
        self.convlog: LogProcess | None = None
        self.router: Router | None = None
        self.executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="mqbridge-io",
                                           initializer=name_this_thread)
        self._stopping = asyncio.Event()
        self._depths: list[dict[str, object]] = []   # the queue depths /status shows (_read_queue_depths)
        self._depths_at: float | None = None
        self._depths_problem: str | None = None
        self._depth_read: asyncio.Future[list[tuple[str, int, float | None]]] | None = None
        self._tasks: set[asyncio.Task[object]] = set()

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
        rules = load_rules(cfg.rules)
        self.queues = QueueStore(default_path(self.data_dir), synchronous=cfg.broker.durability.synchronous,
                                 definition=cfg.embedded.definition).open()
        if cfg.convlog.enabled:
            self.convlog = LogProcess(cfg.convlog.directory or self.data_dir / "convlog",
                                      max_bytes=cfg.convlog.max_file_mb * 1024 * 1024,
                                      sidecars=cfg.convlog.parquet_sidecars)
            if not cfg.convlog.parquet_sidecars:
                log.info("conversion log: no Parquet sidecars (convlog.parquet_sidecars: false)")
            self.convlog.start()
        self.router = Router(broker, self.queues, self.convlog, cfg.gateway_id, self.executor)
        check_route_acl(rules, broker.acl)
        for line in await self.router.apply(rules):   # routes attach before clients can publish
            log.info("route %s", line)
        server = MqttServer(broker, list(cfg.broker.listeners), sys_interval=cfg.broker.sys_interval)
        await server.start()
        self.server = server
        if cfg.admin.enabled:
            admin = AdminServer(broker, server, cfg.gateway_id, extra_status=self._extra_status,
                                reload=self.reload, token=ensure_token(self.data_dir),
                                before_status=self._read_queue_depths)
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

    async def _read_queue_depths(self) -> None:
        """The embedded queues' depths for /status, read on the executor: the store's lock may be held by a put
        waiting for SQLite (another process writing), and a deep queue takes a while to count; the event loop
        goes on meanwhile. Waits at most QUEUE_DEPTH_WAIT; then /status shows the last depths read, and when."""
        if self.queues is None:
            return
        reading = self._depth_read
        if reading is None or reading.done():   # one read at a time: a blocked read holds an executor thread
            reading = self._depth_read = asyncio.get_running_loop().run_in_executor(self.executor, self.queues.queues)
        try:
            rows = await asyncio.wait_for(asyncio.shield(reading), QUEUE_DEPTH_WAIT)
        except (TimeoutError, sqlite3.Error, QueueStoreError) as exc:
            self._depths_problem = f"queue depths not read now ({exc or 'the store is busy'})"
            return
        self._depths = [{"queue": q, "depth": d} for q, d, _ in rows]
        self._depths_at = time.time()
        self._depths_problem = None

    def _extra_status(self) -> dict[str, object]:
        out: dict[str, object] = {}
        if self.router is not None:
            out["routes"] = self.router.status()
            out["kept_route_sessions"] = self.router.kept.status()   # of routes that are gone
        if self.queues is not None:
            out["queues"] = self._depths
            if self._depths_problem is not None:
                out["queues_read_at"] = self._depths_at
                out["queues_problem"] = self._depths_problem
        if self.convlog is not None:
            # sent: records handed to the log process (written: by it, to the files); pid: that process's
            out["convlog"] = {"written": self.convlog.written, "dropped": self.convlog.dropped,
                              "sent": self.convlog.sent, "pid": self.convlog.pid}
            sidecars = self.convlog.sidecars
            if sidecars is not None:
                out["convlog"]["sidecars"] = {"written": sidecars.written, "from_values": sidecars.from_values,
                                              "rejected": sidecars.rejected}
        return out

    async def reload(self, discard: Sequence[str] = ()) -> tuple[bool, list[str]]:
        """Re-read the rules file and the password file; validate everything first, then swap routes without
        losing a message. ``discard``: removed routes whose kept messages are dropped (``mqbridge reload
        --discard``)."""
        assert self.broker is not None
        try:
            users = self.broker.connects.auth.read_users()
            acl = self.broker.connects.auth.read_acl()
            rules = load_rules(self.config.rules)
            check_route_acl(rules, acl)   # the new rules under the new ACL, before anything changes
            assert self.router is not None
            changes = await self.router.apply(rules, discard)
            changes += self.broker.connects.auth.install(users)
            changes += self.broker.reload_acl(acl)
        except AuthFileError as exc:
            log.error("reload refused, the password or ACL file is invalid:\n%s", exc)
            return False, exc.problems
        except RulesError as exc:
            log.error("reload refused, rules are invalid:\n%s", exc)
            return False, exc.problems
        except RouteSetupError as exc:
            log.error("reload refused: %s", exc)
            return False, [str(exc)]
        log.info("rules reloaded: %s", ", ".join(changes) or "no change")
        return True, changes

    def request_reload(self) -> None:
        task = asyncio.get_running_loop().create_task(self.reload())
        self._tasks.add(task)                   # the loop keeps only a weak reference to tasks
        task.add_done_callback(self._tasks.discard)

    def request_stop(self) -> None:
        self._stopping.set()

    async def wait_stopped(self) -> None:
        await self._stopping.wait()

    async def stop(self) -> None:
        if self.admin is not None:
            await self.admin.close()
        if self.server is not None:
            await self.server.close()
        if self.router is not None:
            await self.router.close()
        if self.convlog is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.convlog.close)
        if self.queues is not None:
            self.queues.close()
        self.executor.shutdown(wait=True)
        if self.store is not None:
            # flush: every queued write committed, then the writer thread ends
            await asyncio.get_running_loop().run_in_executor(None, self.store.close)
        try:
            (self.data_dir / RUNTIME_FILE).unlink()
        except OSError:
            pass
        log.info("gateway stopped")


# The cyclic garbage collector's thresholds for the gateway process: a young generation of 5,000 objects
# instead of 700, and the older ones collected 5 times less often. Each routed or delivered message allocates a
# handful of tracked objects (the publication, its delivery, a record) that almost never form a cycle, while the
# older generations hold every session, queued delivery and stored message, which each of their collections
# walks. Measured against the defaults (bench/HISTORY.md, session 22): the durable broker path and the route
# from MQTT run faster; a young generation of 20,000 made QoS 0 fan-out slower (its cache), 5,000 did not
# measurably. The objects made while starting (modules, configuration, recovered state) are frozen out of
# later collections.
GC_THRESHOLDS = (5_000, 50, 50)


async def serve(config: GatewayConfig) -> int:
    gc.set_threshold(*GC_THRESHOLDS)
    gateway = Gateway(config)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, gateway.request_stop)
        except (NotImplementedError, RuntimeError):
            pass
    try:
        loop.add_signal_handler(signal.SIGHUP, gateway.request_reload)
    except (NotImplementedError, RuntimeError, AttributeError):
        pass
    try:
        await gateway.start()
    except (OSError, RulesError, RouteSetupError, AuthFileError) as exc:
        log.error("cannot start: %s", exc)
        await gateway.stop()
        return 1
    gc.collect()
    gc.freeze()   # what starting made lives as long as the process: later collections skip it
    log.info("mqbridge %s ready (data in %s)", config.gateway_id, gateway.data_dir.resolve())
    await gateway.wait_stopped()
    log.info("shutting down")
    await gateway.stop()
    return 0


# MQBRIDGE_EVENT_LOOP: "auto" (uvloop when installed), "asyncio", or "uvloop" (must be installed)
EVENT_LOOP_ENV = "MQBRIDGE_EVENT_LOOP"


def run(config: GatewayConfig) -> int:
    choice = os.environ.get(EVENT_LOOP_ENV, "auto").strip().lower() or "auto"
    if choice not in ("auto", "asyncio", "uvloop"):
        log.error("cannot start: %s=%r: expected auto, asyncio or uvloop", EVENT_LOOP_ENV, choice)
        return 2
    if choice != "asyncio":
        try:
            import uvloop  # optional speed-up: pip install mqbridge[speed]
        except ImportError:
            if choice == "uvloop":
                log.error("cannot start: %s=uvloop but uvloop is not installed (pip install mqbridge[speed])",
                          EVENT_LOOP_ENV)
                return 2
        else:
            log.info("event loop: uvloop %s", uvloop.__version__)
            return uvloop.run(serve(config))
    log.info("event loop: asyncio")
    return asyncio.run(serve(config))
