"""The load generator's idle-connections scenario: open ``Spec.idle`` connections, hold them, check that
a sample still answers PINGREQ, and measure the broker's RSS per connection and idle CPU."""
from __future__ import annotations

import asyncio
import multiprocessing as mp
import random
import time
from dataclasses import asdict
from typing import Any

from bench.mqtt_load_clients import Spec
from bench.mqtt_load_proc import loop_runner, proc_cpu, proc_mem, raise_nofile
from bench.mqtt_load_wire import CONNACK_T, PINGREQ, PINGRESP_T, connect_packet


class IdleProto(asyncio.Protocol):
    def __init__(self, cid: str, v5: bool = False) -> None:
        self.cid = cid
        self.v5 = v5
        self.fut = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None
        self.buf = b""
        self.pongs = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.write(connect_packet(self.cid, True, keepalive=0, v5=self.v5))  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while len(self.buf) >= 2:
            t = self.buf[0] >> 4
            n = 2 + self.buf[1]
            if len(self.buf) < n:
                return
            if t == CONNACK_T and not self.fut.done():
                if self.buf[3]:
                    self.fut.set_exception(ConnectionError(f"CONNACK {self.buf[3]}"))
                else:
                    self.fut.set_result(True)
            elif t == PINGRESP_T:
                self.pongs += 1
            self.buf = self.buf[n:]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.fut.done():
            self.fut.set_exception(ConnectionError(f"closed ({exc})"))
        self.transport = None


async def _idle_body(spec: Spec, host: str, port: int, connected: Any, release: Any) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    sem = asyncio.Semaphore(200)
    protos: list[IdleProto] = []
    failures: list[str] = []
    t0 = time.monotonic()
    cpu0 = time.process_time()

    async def one(i: int) -> None:
        async with sem:
            for attempt in range(3):
                try:
                    _, p = await loop.create_connection(lambda: IdleProto(f"{spec.prefix}-idle-{i}", spec.mqtt5),
                                                        host, port)
                    await asyncio.wait_for(p.fut, 30)
                    protos.append(p)
                    return
                except (TimeoutError, OSError, ConnectionError) as exc:
                    if attempt == 2:
                        failures.append(f"{type(exc).__name__}: {exc}")
                    await asyncio.sleep(0.2)

    await asyncio.gather(*(one(i) for i in range(spec.idle)))
    t_conn = time.monotonic() - t0
    cpu_conn = time.process_time() - cpu0
    connected.set()
    while not release.is_set():
        await asyncio.sleep(0.05)
    # still served? ping a sample of the held connections
    sample = random.sample(protos, min(200, len(protos)))
    for p in sample:
        if p.transport is not None:
            p.transport.write(PINGREQ)
    t_ping = time.monotonic()
    while time.monotonic() - t_ping < 5 and sum(p.pongs for p in sample) < len(sample):
        await asyncio.sleep(0.01)
    pongs = sum(1 for p in sample if p.pongs)
    alive = sum(1 for p in protos if p.transport is not None)
    for p in protos:
        if p.transport is not None:
            p.transport.abort()
    return {"connected": len(protos), "alive_after_hold": alive, "failures": len(failures),
            "failure_examples": failures[:5], "connect_seconds": round(t_conn, 3),
            "connects_per_s": round(len(protos) / t_conn) if t_conn else None,
            "gen_cpu_connect_s": round(cpu_conn, 3),
            "ping_sample": len(sample), "ping_answered": pongs,
            "ping_seconds": round(time.monotonic() - t_ping, 3)}


def _idle_child(spec_d: dict[str, Any], host: str, port: int, connected: Any, release: Any, results: Any) -> None:
    spec = Spec.from_dict(spec_d)
    limit = raise_nofile()
    try:
        if limit < spec.idle + 100:
            raise RuntimeError(f"RLIMIT_NOFILE hard limit {limit} is below {spec.idle} connections")
        res = loop_runner(_idle_body(spec, host, port, connected, release))
    except BaseException as exc:
        res = {"error": f"{type(exc).__name__}: {exc}"}
        connected.set()
    results.put(res)


def run_idle(host: str, port: int, spec: Spec, broker_pid: int | None = None) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    connected, release = ctx.Event(), ctx.Event()
    results = ctx.Queue()
    mem0 = proc_mem(broker_pid)
    p = ctx.Process(target=_idle_child, args=(asdict(spec), host, port, connected, release, results))
    p.start()
    connected.wait(300)
    time.sleep(0.5)
    cpu_a = proc_cpu(broker_pid)
    t_a = time.monotonic()
    time.sleep(spec.hold)
    cpu_b = proc_cpu(broker_pid)
    t_b = time.monotonic()
    mem1 = proc_mem(broker_pid)
    release.set()
    try:
        res = results.get(timeout=60)
    except Exception:
        res = {"error": "no result from the idle-connection process"}
    p.join(10)
    if p.is_alive():
        p.kill()
    out: dict[str, Any] = {"scenario": spec.name, "spec": asdict(spec), **res}
    if mem0 and mem1:
        out["broker_rss_before_kib"] = mem0.get("VmRSS")
        out["broker_rss_kib"] = mem1.get("VmRSS")
        out["broker_peak_rss_kib"] = mem1.get("VmHWM")
        if res.get("connected"):
            out["rss_per_connection_kib"] = round((mem1["VmRSS"] - mem0["VmRSS"]) / res["connected"], 2)
    if cpu_a is not None and cpu_b is not None:
        out["broker_idle_cpu"] = round((cpu_b - cpu_a) / (t_b - t_a), 4)
    return out

