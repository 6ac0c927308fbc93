"""The load generator's own ceiling: its publishers against a null broker that only reads, its
subscribers against one that only writes, each peer in its own process (``ceiling``)."""
from __future__ import annotations

import asyncio
import multiprocessing as mp
from typing import Any

from bench.mqtt_load_clients import Spec
from bench.mqtt_load_proc import loop_runner
from bench.mqtt_load_run import run_scenario
from bench.mqtt_load_wire import publish_packet


class _SinkProto(asyncio.Protocol):
    """Null broker for publishers: CONNACK once, then reads and discards (QoS 0)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.t = transport
        self.first = True

    def data_received(self, data: bytes) -> None:
        if self.first:
            self.first = False
            self.t.write(b"\x20\x02\x00\x00")  # type: ignore[attr-defined]


class _BlastProto(asyncio.Protocol):
    """Null broker for subscribers: CONNACK + SUBACK, then an endless stream of pre-built PUBLISH
    packets under back-pressure (QoS ``qos``, the acks it gets back are discarded)."""

    def __init__(self, payload: int, qos: int) -> None:
        pkts = []
        for pid in range(1, 513):
            pkts.append(publish_packet("b/0", b"\x00" * payload, qos, pid))
        self.chunk = b"".join(pkts)
        self.paused = False
        self.go = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.t = transport
        self.t.set_write_buffer_limits(high=1 << 20)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        if not self.go:
            self.go = True
            self.t.write(b"\x20\x02\x00\x00\x90\x03\x00\x01\x00")  # type: ignore[attr-defined]
            asyncio.get_running_loop().call_soon(self.pump)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        asyncio.get_running_loop().call_soon(self.pump)

    def pump(self) -> None:
        while not self.paused and not self.t.is_closing():
            self.t.write(self.chunk)  # type: ignore[attr-defined]

    def connection_lost(self, exc: Exception | None) -> None:
        self.paused = True


def _null_server(kind: str, payload: int, qos: int, port_q: Any) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        factory = _SinkProto if kind == "sink" else (lambda: _BlastProto(payload, qos))
        server = await loop.create_server(factory, "127.0.0.1", 0)
        port_q.put(server.sockets[0].getsockname()[1])
        await asyncio.sleep(3600)
    loop_runner(main())


def ceiling(payload: int = 64, duration: float = 3.0) -> dict[str, Any]:
    """Publisher ceiling (QoS 0, 4 connections -> sink) and subscriber ceiling (QoS 0 and QoS 1
    streams from a blaster), each on loopback with the null peer in its own process."""
    ctx = mp.get_context("spawn")
    out: dict[str, Any] = {"payload": payload}
    cases = [("publisher_qos0", "sink", 0, Spec(name="ceiling-pub", publishers=4, payload=payload,
                                                duration=duration, warmup=0.5, drain=0.5))]
    for q in (0, 1):
        cases.append((f"subscriber_qos{q}", "blast", q, Spec(name=f"ceiling-sub{q}", qos=q, publishers=0,
                                                              payload=payload, duration=duration, warmup=0.5,
                                                              drain=0.5)))
    for label, kind, q, spec in cases:
        port_q = ctx.Queue()
        srv = ctx.Process(target=_null_server, args=(kind, payload, q, port_q), daemon=True)
        srv.start()
        port = port_q.get(timeout=20)
        try:
            res = run_scenario("127.0.0.1", port, spec, broker_pid=srv.pid)
        finally:
            srv.kill()
            srv.join()
        if kind == "sink":
            out[label] = {"msgs_per_s": res.get("published_per_s"), "gen_cpu": res.get("pub_cpu"),
                          "peer_cpu": res.get("broker_cpu")}
        else:
            out[label] = {"msgs_per_s": res.get("delivered_per_s"), "gen_cpu": res.get("sub_cpu"),
                          "peer_cpu": res.get("broker_cpu")}
    return out

