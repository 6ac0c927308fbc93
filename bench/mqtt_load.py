"""MQTT load generator for broker benchmarks: raw-socket clients, publishers and subscribers in
separate processes, asyncio Protocols (uvloop when installed).

Built so that it is not the bottleneck:
- QoS 0 publishers write pre-built chunks of PUBLISH packets (tens of KiB per ``write``) and obey
  TCP back-pressure (``pause_writing``), so a publisher costs almost nothing per message;
- subscribers scan the byte stream with one tight loop (no packet objects), batch their acks into
  one ``write`` per read, and only decode a payload when measuring latency;
- publishers and subscribers run in separate processes, so each side has its own core;
- ``python bench/mqtt_load.py ceiling`` measures the generator against null peers (a sink that only
  reads, a blaster that only writes), and every run reports the generator's own CPU use.

The wire bytes are hand-rolled here (CONNECT/SUBSCRIBE/PUBLISH/acks); ``selfcheck`` decodes them
with mqbridge's codec (bridge.mqtt.packets) to show they are well formed.

Library use: ``run_scenario(host, port, Spec(...), broker_pid=...)`` returns a dict of results.
CLI: ``python bench/mqtt_load.py run --port 1883 --qos 1 --publishers 4 ...`` against any broker.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import random
import resource
import socket
import sys
import time
from array import array
from dataclasses import asdict, dataclass, fields
from typing import Any

CONNACK_T, PUBLISH_T, PUBACK_T, PUBREC_T, PUBREL_T, PUBCOMP_T, SUBACK_T, PINGRESP_T = 2, 3, 4, 5, 6, 7, 9, 13
PINGREQ = b"\xc0\x00"
DISCONNECT = b"\xe0\x00"
TS_BYTES = 8   # latency payloads start with a CLOCK_MONOTONIC timestamp in ns, big-endian


# ------------------------------------------------------------------------------------------------
# Wire format (MQTT 3.1.1)
# ------------------------------------------------------------------------------------------------


def varlen(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _s(text: str) -> bytes:
    raw = text.encode()
    return len(raw).to_bytes(2, "big") + raw


def connect_packet(client_id: str, clean: bool = True, keepalive: int = 0) -> bytes:
    body = _s("MQTT") + bytes((4, 0x02 if clean else 0)) + keepalive.to_bytes(2, "big") + _s(client_id)
    return b"\x10" + varlen(len(body)) + body


def subscribe_packet(packet_id: int, topic_filter: str, qos: int) -> bytes:
    body = packet_id.to_bytes(2, "big") + _s(topic_filter) + bytes((qos,))
    return b"\x82" + varlen(len(body)) + body


def publish_parts(topic: str, payload_len: int, qos: int) -> tuple[bytes, int]:
    """Fixed header + topic of a PUBLISH (the packet id, for QoS > 0, and payload follow)."""
    t = _s(topic)
    remaining = len(t) + (2 if qos else 0) + payload_len
    return bytes((0x30 | (qos << 1),)) + varlen(remaining) + t, remaining


def publish_packet(topic: str, payload: bytes, qos: int = 0, packet_id: int = 0) -> bytes:
    head, _ = publish_parts(topic, len(payload), qos)
    return head + (packet_id.to_bytes(2, "big") if qos else b"") + payload


# ------------------------------------------------------------------------------------------------
# Scenario description
# ------------------------------------------------------------------------------------------------


@dataclass
class Spec:
    name: str = "qos0"
    qos: int = 0                 # publish QoS
    sub_qos: int | None = None   # subscription QoS (default: qos)
    publishers: int = 4
    subscribers: int = 1
    payload: int = 64            # bytes
    duration: float = 4.0        # measured seconds
    warmup: float = 1.0          # seconds before the window
    window: int = 64             # QoS 1/2 messages in flight per publisher
    rate: float = 0.0            # total messages/s for all publishers; 0: as fast as possible
    clean: bool = True           # subscriber clean session (False: persistent, stored durably)
    pub_clean: bool = True       # publisher clean session (False: persistent; mqbridge then keeps a
                                 # QoS 1 re-send index row per publication, see Publisher._publish_qos1_persistent)
    latency: bool = False        # timestamps in payloads, subscriber measures percentiles
    idle: int = 0                # idle-connections scenario: how many connections to hold
    hold: float = 3.0            # idle: seconds to hold them
    drain: float = 10.0          # max seconds to wait for stragglers after publishing stops
    idle_exit: float = 2.0       # subscribers leave after this long without a message (once publishing stopped)
    budget: int = 0              # QoS 0 closed loop: at most this many messages sent and not yet
                                 # delivered (per subscriber); 0: open loop (flood, drops allowed)
    prefix: str = "b"

    def __post_init__(self) -> None:
        if self.sub_qos is None:
            self.sub_qos = self.qos

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Spec:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


# ------------------------------------------------------------------------------------------------
# Subscriber side: one tight scanner per connection
# ------------------------------------------------------------------------------------------------


class _Stats:
    """Counters shared by all connections of one process."""

    __slots__ = ("received", "acked", "sent", "done", "lat", "lat_from", "last_rx", "first_rx", "errors")

    def __init__(self) -> None:
        self.received = 0     # PUBLISH packets received (subscriber) / completed (publisher)
        self.acked = 0
        self.sent = 0
        self.done = 0
        self.lat: array | None = None
        self.lat_from = 0     # only record latencies of messages stamped after this (ns)
        self.last_rx = 0.0
        self.first_rx = 0.0
        self.errors: list[str] = []


class SubProto(asyncio.Protocol):
    def __init__(self, stats: _Stats, client_id: str, clean: bool, topic_filter: str, qos: int,
                 shared: Any = None) -> None:
        self.st = stats
        self.shared = shared     # mp.Value: messages received by this process, read by publishers
        self.cid = client_id
        self.clean = clean
        self.filter = topic_filter
        self.qos = qos
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.subscribed = asyncio.get_running_loop().create_future()
        self.pongs = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        transport.write(connect_packet(self.cid, self.clean) + subscribe_packet(1, self.filter, self.qos))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.subscribed.done():
            self.subscribed.set_exception(ConnectionError(f"{self.cid}: closed before SUBACK ({exc})"))
        self.transport = None

    def data_received(self, data: bytes) -> None:  # noqa: C901 - the hot loop is kept in one place
        buf = self.buf
        if buf:
            buf += data
            data = buf
        n = len(data)
        pos = 0
        received = 0
        acks: list[bytes] = []
        st = self.st
        lat = st.lat
        now_ns = time.monotonic_ns() if lat is not None else 0
        while n - pos >= 2:
            b0 = data[pos]
            ln = data[pos + 1]
            if ln < 128:
                h = pos + 2
            else:
                ln &= 0x7F
                shift = 7
                i = pos + 2
                while True:
                    if i >= n:
                        ln = -1
                        break
                    b = data[i]
                    i += 1
                    ln |= (b & 0x7F) << shift
                    if b < 128:
                        break
                    shift += 7
                if ln < 0:
                    break
                h = i
            end = h + ln
            if end > n:
                break
            t = b0 >> 4
            if t == PUBLISH_T:
                received += 1
                if b0 & 6 or lat is not None:
                    p = h + 2 + ((data[h] << 8) | data[h + 1])
                    if b0 & 6:
                        acks.append((b"\x40\x02" if b0 & 2 else b"\x50\x02") + data[p:p + 2])
                        p += 2
                    if lat is not None:
                        ts = int.from_bytes(data[p:p + TS_BYTES], "big")
                        if ts >= st.lat_from:
                            lat.append(now_ns - ts)
            elif t == PUBREL_T:
                acks.append(b"\x70\x02" + data[h:h + 2])
            elif t == SUBACK_T:
                if data[h + 2] & 0x80:
                    self.subscribed.set_exception(ConnectionError(f"{self.cid}: subscription refused"))
                elif not self.subscribed.done():
                    self.subscribed.set_result(True)
            elif t == CONNACK_T:
                if data[h + 1]:
                    st.errors.append(f"{self.cid}: CONNACK return code {data[h + 1]}")
            elif t == PINGRESP_T:
                self.pongs += 1
            pos = end
        if received:
            st.received += received
            if self.shared is not None:
                self.shared.value = st.received
            st.last_rx = time.monotonic()
            if not st.first_rx:
                st.first_rx = st.last_rx
        if acks and self.transport is not None:
            self.transport.write(b"".join(acks))
        if data is buf:
            del buf[:pos]
        elif pos < n:
            self.buf = bytearray(data[pos:])


# ------------------------------------------------------------------------------------------------
# Publisher side
# ------------------------------------------------------------------------------------------------


class PubProto(asyncio.Protocol):
    """One publishing connection. QoS 0: pre-built chunks under TCP back-pressure. QoS 1/2: a window
    of ``window`` messages in flight (completed on PUBACK / PUBCOMP). With ``rate``: paced ticks,
    each message stamped with CLOCK_MONOTONIC ns."""

    def __init__(self, stats: _Stats, spec: Spec, index: int, deadline: list[float],
                 delivered: Any = None) -> None:
        self.st = stats
        self.delivered = delivered if spec.budget else None
        self.spec = spec
        self.cid = f"{spec.prefix}-pub-{os.getpid()}-{index}"
        self.topic = f"{spec.prefix}/{index}"
        self.qos = spec.qos
        self.window = spec.window
        self.deadline = deadline         # [monotonic time to stop sending]; shared and mutable
        self.loop = asyncio.get_running_loop()
        self.connected = self.loop.create_future()
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.paused = False
        self.running = False
        self.stopped = False
        self.inflight = 0
        self.next_pid = 1
        self.head, _ = publish_parts(self.topic, spec.payload, spec.qos)
        self.body = b"\x00" * spec.payload
        if spec.qos == 0 and not spec.rate:
            pkt = self.head + self.body
            per = max(1, 32768 // len(pkt))
            self.chunk = pkt * per
            self.per_chunk = per
        self.rate = spec.rate / max(1, spec.publishers)
        self.t0 = 0.0
        self.paced = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        transport.set_write_buffer_limits(high=256 * 1024)
        transport.write(connect_packet(self.cid, self.spec.pub_clean))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.connected.done():
            self.connected.set_exception(ConnectionError(f"{self.cid}: closed before CONNACK ({exc})"))
        elif not self.stopped:
            self.st.errors.append(f"{self.cid}: connection lost while publishing ({exc})")
        self.transport = None
        self.stopped = True

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.running and self.qos == 0 and not self.rate:
            self.loop.call_soon(self._pump0)

    # -- sending --------------------------------------------------------------------------------

    def start(self) -> None:
        self.running = True
        self.t0 = time.monotonic()
        if self.rate:
            self._tick()
        elif self.qos == 0:
            self._pump0()
        else:
            self._fill()

    def _pump0(self) -> None:
        if self.paused or not self.running or self.transport is None:
            return
        if time.monotonic() >= self.deadline[0]:
            self.running = False
            return
        w = self.transport.write
        for _ in range(8):
            d = self.delivered
            if d is not None and self.st.sent - d.value // self.spec.subscribers > self.spec.budget:
                self.loop.call_later(0.001, self._pump0)   # closed loop: wait for deliveries
                return
            w(self.chunk)
            self.st.sent += self.per_chunk
            if self.paused:
                return
        self.loop.call_soon(self._pump0)

    def _packet(self, stamp: bool) -> bytes:
        body = time.monotonic_ns().to_bytes(TS_BYTES, "big") + self.body[TS_BYTES:] if stamp else self.body
        if not self.qos:
            return self.head + body
        pid = self.next_pid
        self.next_pid = pid + 1 if pid < 65535 else 1
        self.inflight += 1
        return self.head + pid.to_bytes(2, "big") + body

    def _fill(self) -> None:
        """QoS 1/2: top the window up."""
        if not self.running or self.transport is None:
            return
        if time.monotonic() >= self.deadline[0]:
            self.running = False
            return
        k = self.window - self.inflight
        if k > 0:
            self.transport.write(b"".join([self._packet(False) for _ in range(k)]))
            self.st.sent += k

    def _tick(self) -> None:
        """Paced: send what is due at this instant, stamped; re-arm every millisecond."""
        if not self.running or self.transport is None:
            return
        now = time.monotonic()
        if now >= self.deadline[0]:
            self.running = False
            return
        due = int((now - self.t0) * self.rate) - self.paced
        if self.qos:
            due = min(due, self.window - self.inflight)
        if due > 0 and not self.paused:
            self.transport.write(b"".join([self._packet(True) for _ in range(due)]))
            self.paced += due
            self.st.sent += due
        self.loop.call_later(0.001, self._tick)

    # -- receiving (CONNACK and acks only) --------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        n = len(buf)
        pos = 0
        done = 0
        out: list[bytes] = []
        while n - pos >= 2:
            b0 = buf[pos]
            ln = buf[pos + 1]
            if ln >= 128:   # nothing a broker sends a publisher is that long; be safe anyway
                self.st.errors.append(f"{self.cid}: unexpected long packet type {b0 >> 4}")
                self.transport.abort()  # type: ignore[union-attr]
                return
            end = pos + 2 + ln
            if end > n:
                break
            t = b0 >> 4
            if t == PUBACK_T or t == PUBCOMP_T:
                done += 1
            elif t == PUBREC_T:
                out.append(b"\x62\x02" + buf[pos + 2:pos + 4])
            elif t == CONNACK_T:
                if buf[pos + 3]:
                    self.connected.set_exception(ConnectionError(f"{self.cid}: CONNACK {buf[pos + 3]}"))
                elif not self.connected.done():
                    self.connected.set_result(True)
            pos = end
        del buf[:pos]
        if done:
            self.inflight -= done
            self.st.acked += done
            self.st.received += done
        if out and self.transport is not None:
            self.transport.write(b"".join(out))
        if done and not self.rate:
            self._fill()


# ------------------------------------------------------------------------------------------------
# Process bodies
# ------------------------------------------------------------------------------------------------


def _loop_runner(coro: Any) -> Any:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def _raise_nofile() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        return hard
    except (ValueError, OSError):
        return soft


async def _wait_start(start_at: Any) -> float:
    while start_at.value == 0.0:
        await asyncio.sleep(0.002)
    delay = start_at.value - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)
    return start_at.value


def _sampler(loop: asyncio.AbstractEventLoop, st: _Stats, samples: list[tuple[float, int, int]]) -> None:
    samples.append((time.monotonic(), st.received, st.sent))
    loop.call_later(0.05, _sampler, loop, st, samples)


async def _sub_body(spec: Spec, host: str, port: int, ready: Any, start_at: Any, pubs_done: Any,
                    expected: Any, delivered: Any) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    st = _Stats()
    protos: list[SubProto] = []
    for i in range(spec.subscribers):
        cid = f"{spec.prefix}-sub-{os.getpid()}-{i}"
        _, proto = await loop.create_connection(
            lambda cid=cid: SubProto(st, cid, spec.clean, f"{spec.prefix}/#", spec.sub_qos or 0, delivered),
            host, port)
        protos.append(proto)
    await asyncio.wait_for(asyncio.gather(*(p.subscribed for p in protos)), 10)
    ready.set()
    start = await _wait_start(start_at)
    if spec.latency:
        st.lat = array("q")
        st.lat_from = int((start + spec.warmup) * 1e9)
    samples: list[tuple[float, int, int]] = []
    _sampler(loop, st, samples)
    cpu0 = time.process_time()
    wend = start + spec.warmup + spec.duration
    cpu_w0 = cpu_w1 = None
    while True:
        now = time.monotonic()
        if cpu_w0 is None and now >= start + spec.warmup:
            cpu_w0 = time.process_time()
        if cpu_w1 is None and now >= wend:
            cpu_w1 = time.process_time()
        if pubs_done.is_set():
            if st.received >= expected.value * spec.subscribers:
                break
            idle_for = now - max(st.last_rx, wend)
            if idle_for > spec.idle_exit or now > wend + spec.drain:
                break
        await asyncio.sleep(0.01)
    cpu1 = time.process_time()
    for p in protos:
        if p.transport is not None:
            p.transport.write(DISCONNECT)
            p.transport.close()
    await asyncio.sleep(0.05)   # let the DISCONNECTs and closes go out before the loop ends
    res: dict[str, Any] = {
        "received": st.received, "samples": samples, "cpu_total": cpu1 - cpu0,
        "cpu_window": (cpu_w1 or cpu1) - (cpu_w0 or cpu0), "first_rx": st.first_rx, "last_rx": st.last_rx,
        "errors": st.errors[:10],
    }
    if st.lat is not None:
        res["latency_us"] = _percentiles(st.lat)
    return res


def _percentiles(lat: array) -> dict[str, float]:
    if not lat:
        return {"count": 0}
    s = sorted(lat)
    n = len(s)

    def q(f: float) -> float:
        return round(s[min(n - 1, int(f * n))] / 1000, 1)
    return {"count": n, "p50": q(0.50), "p90": q(0.90), "p99": q(0.99), "p999": q(0.999),
            "max": round(s[-1] / 1000, 1)}


async def _pub_body(spec: Spec, host: str, port: int, ready: Any, start_at: Any, pubs_done: Any,
                    expected: Any, delivered: Any) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    st = _Stats()
    deadline = [float("inf")]
    protos: list[PubProto] = []
    for i in range(spec.publishers):
        _, proto = await loop.create_connection(lambda i=i: PubProto(st, spec, i, deadline, delivered), host, port)
        protos.append(proto)
    await asyncio.wait_for(asyncio.gather(*(p.connected for p in protos)), 10)
    ready.set()
    start = await _wait_start(start_at)
    deadline[0] = start + spec.warmup + spec.duration
    samples: list[tuple[float, int, int]] = []
    _sampler(loop, st, samples)
    cpu0 = time.process_time()
    for p in protos:
        p.start()
    await asyncio.sleep(max(0.0, deadline[0] - time.monotonic()))
    cpu_w1 = time.process_time()
    # QoS 1/2: wait for the window to drain
    t_end = time.monotonic() + spec.drain
    while spec.qos and any(p.inflight > 0 and p.transport is not None for p in protos) \
            and time.monotonic() < t_end:
        await asyncio.sleep(0.005)
    if spec.publishers:
        expected.value = st.sent
    pubs_done.set()
    cpu1 = time.process_time()
    unacked = sum(p.inflight for p in protos) if spec.qos else 0
    await asyncio.sleep(0.05)
    for p in protos:
        if p.transport is not None:
            p.transport.write(DISCONNECT)
            p.transport.close()
    return {"sent": st.sent, "acked": st.acked, "unacked": unacked, "samples": samples,
            "cpu_total": cpu1 - cpu0, "cpu_window": cpu_w1 - cpu0, "errors": st.errors[:10]}


def _child(role: str, spec_d: dict[str, Any], host: str, port: int, ready: Any, start_at: Any,
           pubs_done: Any, expected: Any, delivered: Any, results: Any) -> None:
    spec = Spec.from_dict(spec_d)
    _raise_nofile()
    body = _sub_body if role == "sub" else _pub_body
    try:
        res = _loop_runner(body(spec, host, port, ready, start_at, pubs_done, expected, delivered))
    except BaseException as exc:  # report, never hang the parent
        res = {"error": f"{type(exc).__name__}: {exc}"}
        ready.set()
        if role == "pub":
            pubs_done.set()
    results.put((role, res))


# ------------------------------------------------------------------------------------------------
# Broker process metrics (/proc)
# ------------------------------------------------------------------------------------------------

_CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int | None) -> float | None:
    """utime + stime of a process (all its threads), seconds."""
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            parts = f.read().rsplit(")", 1)[1].split()
        return (int(parts[11]) + int(parts[12])) / _CLK_TCK
    except OSError:
        return None


def proc_mem(pid: int | None) -> dict[str, int]:
    """VmRSS and VmHWM (peak RSS) in KiB."""
    out: dict[str, int] = {}
    if not pid:
        return out
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    out[line.split(":")[0]] = int(line.split()[1])
    except OSError:
        pass
    return out


def _rate_between(samples: list[list[float]], t0: float, t1: float, col: int = 1) -> float:
    """Counter increase between t0 and t1 (linear interpolation between samples) per second."""
    def at(t: float) -> float:
        prev = None
        for s in samples:
            if s[0] >= t:
                if prev is None:
                    return float(s[col])
                span = s[0] - prev[0]
                f = (t - prev[0]) / span if span else 1.0
                return prev[col] + f * (s[col] - prev[col])
            prev = s
        return float(samples[-1][col]) if samples else 0.0
    return (at(t1) - at(t0)) / (t1 - t0) if t1 > t0 else 0.0


# ------------------------------------------------------------------------------------------------
# Orchestration
# ------------------------------------------------------------------------------------------------


def run_scenario(host: str, port: int, spec: Spec, broker_pid: int | None = None,
                 on_window: Any = None) -> dict[str, Any]:
    """Run one scenario: a subscriber process and a publisher process; returns the measurements.

    ``on_window(start, end)`` is called in this process when the measured window begins (e.g. to
    start a profiler for ``end - start`` seconds)."""
    if spec.idle:
        return run_idle(host, port, spec, broker_pid)
    ctx = mp.get_context("spawn")
    ready_s, ready_p, pubs_done = ctx.Event(), ctx.Event(), ctx.Event()
    start_at = ctx.Value("d", 0.0)
    expected = ctx.Value("q", 1 << 62)
    delivered = ctx.Value("q", 0, lock=False)
    results = ctx.Queue()
    d = asdict(spec)
    common = (host, port)
    sub = ctx.Process(target=_child, args=("sub", d, *common, ready_s, start_at, pubs_done, expected, delivered,
                                           results))
    pub = ctx.Process(target=_child, args=("pub", d, *common, ready_p, start_at, pubs_done, expected, delivered,
                                           results))
    sub.start()
    if not ready_s.wait(30):
        raise RuntimeError("subscribers did not get ready")
    pub.start()
    if not ready_p.wait(30):
        raise RuntimeError("publishers did not get ready")
    start = time.monotonic() + 0.2
    start_at.value = start
    w0, w1 = start + spec.warmup, start + spec.warmup + spec.duration
    time.sleep(max(0.0, w0 - time.monotonic()))
    cpu_a = proc_cpu(broker_pid)
    if on_window is not None:
        on_window(w0, w1)
    time.sleep(max(0.0, w1 - time.monotonic()))
    cpu_b = proc_cpu(broker_pid)
    mem = proc_mem(broker_pid)
    got: dict[str, Any] = {}
    deadline = time.monotonic() + spec.drain + 30
    while len(got) < 2 and time.monotonic() < deadline:
        try:
            role, res = results.get(timeout=1)
            got[role] = res
        except Exception:  # queue.Empty
            if not (sub.is_alive() or pub.is_alive()) and results.empty():
                break
    for p in (sub, pub):
        p.join(5)
        if p.is_alive():
            p.kill()
    return summarize(spec, got.get("pub", {"error": "no result"}), got.get("sub", {"error": "no result"}),
                     w0, w1, cpu_a, cpu_b, mem)


def _timeline(samples: list[list[float]], t0: float, step: float = 0.5) -> list[int]:
    """Messages received per ``step`` seconds from t0 (the publishing start): shows stalls."""
    out: list[int] = []
    t = t0
    while samples and t < samples[-1][0]:
        out.append(round(_rate_between(samples, t, t + step) * step))
        t += step
    return out


def summarize(spec: Spec, pub: dict[str, Any], sub: dict[str, Any], w0: float, w1: float,
              cpu_a: float | None, cpu_b: float | None, mem: dict[str, int]) -> dict[str, Any]:
    out: dict[str, Any] = {"scenario": spec.name, "spec": asdict(spec)}
    errors = [e for r in (pub, sub) for e in ([r["error"]] if "error" in r else r.get("errors", []))]
    if errors:
        out["errors"] = errors
    dur = w1 - w0
    if "samples" in sub:
        out["delivered_per_s"] = round(_rate_between(sub["samples"], w0, w1))
        out["received_total"] = sub["received"]
        out["sub_cpu"] = round(sub["cpu_window"] / dur, 3)
        if "latency_us" in sub:
            out["latency_us"] = sub["latency_us"]
        out["delivered_timeline"] = _timeline(sub["samples"], w0 - spec.warmup)
    if "samples" in pub:
        out["published_per_s"] = round(_rate_between(pub["samples"], w0, w1, col=2))
        if spec.qos:
            out["acked_per_s"] = round(_rate_between(pub["samples"], w0, w1, col=1))
            out["unacked"] = pub["unacked"]
        out["sent_total"] = pub["sent"]
        out["pub_cpu"] = round(pub["cpu_window"] / dur, 3)
    if "sent_total" in out and "received_total" in out and out["sent_total"]:
        out["delivery_ratio"] = round(out["received_total"] / (out["sent_total"] * spec.subscribers), 4)
    if cpu_a is not None and cpu_b is not None:
        out["broker_cpu"] = round((cpu_b - cpu_a) / dur, 3)    # cores used by the broker in the window
        if out.get("delivered_per_s") and cpu_b > cpu_a:
            out["delivered_per_broker_cpu_s"] = round(out["delivered_per_s"] / ((cpu_b - cpu_a) / dur))
    if mem:
        out["broker_rss_kib"] = mem.get("VmRSS")
        out["broker_peak_rss_kib"] = mem.get("VmHWM")
    return out


# ------------------------------------------------------------------------------------------------
# Idle connections
# ------------------------------------------------------------------------------------------------


class IdleProto(asyncio.Protocol):
    def __init__(self, cid: str) -> None:
        self.cid = cid
        self.fut = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None
        self.buf = b""
        self.pongs = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.write(connect_packet(self.cid, True, keepalive=0))  # type: ignore[attr-defined]

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
                    _, p = await loop.create_connection(lambda: IdleProto(f"{spec.prefix}-idle-{i}"), host, port)
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
    limit = _raise_nofile()
    try:
        if limit < spec.idle + 100:
            raise RuntimeError(f"RLIMIT_NOFILE hard limit {limit} is below {spec.idle} connections")
        res = _loop_runner(_idle_body(spec, host, port, connected, release))
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


# ------------------------------------------------------------------------------------------------
# Generator ceiling: the generator against null peers
# ------------------------------------------------------------------------------------------------


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
    _loop_runner(main())


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


# ------------------------------------------------------------------------------------------------
# Self-check of the hand-rolled bytes against mqbridge's codec
# ------------------------------------------------------------------------------------------------


def selfcheck() -> None:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from bridge.mqtt import packets as P

    r = P.PacketReader()
    got = r.feed(connect_packet("c1", False, 30) + subscribe_packet(7, "b/#", 1)
                 + publish_packet("b/1", b"x" * 200, 1, 9) + publish_packet("b/2", b"y" * 64, 0)
                 + publish_packet("b/3", b"z" * 300, 2, 65535))
    assert got[0] == P.Connect(4, "c1", False, 30), got[0]
    assert got[1] == P.Subscribe(7, (("b/#", 1),)), got[1]
    assert got[2] == P.Publish("b/1", b"x" * 200, 1, packet_id=9), got[2]
    assert got[3] == P.Publish("b/2", b"y" * 64, 0), got[3]
    assert got[4] == P.Publish("b/3", b"z" * 300, 2, packet_id=65535), got[4]
    assert P.encode_publish(b"b/1", b"x" * 200, 1, False, False, 9) == publish_packet("b/1", b"x" * 200, 1, 9)
    print("selfcheck: hand-rolled CONNECT/SUBSCRIBE/PUBLISH bytes decode with bridge.mqtt.packets: ok")


# ------------------------------------------------------------------------------------------------
# CLI
# ------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run one scenario against a broker")
    r.add_argument("--host", default="127.0.0.1")
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--broker-pid", type=int, help="sample this process's CPU and RSS")
    for f in fields(Spec):
        if f.name == "sub_qos":
            r.add_argument("--sub-qos", type=int)
        elif f.type in ("bool",):
            r.add_argument(f"--{f.name.replace('_', '-')}", action=argparse.BooleanOptionalAction,
                           default=f.default)
        else:
            conv = {"int": int, "float": float, "str": str}[str(f.type)]
            r.add_argument(f"--{f.name.replace('_', '-')}", type=conv, default=f.default)
    c = sub.add_parser("ceiling", help="the generator's own ceiling against null peers")
    c.add_argument("--payload", type=int, default=64)
    c.add_argument("--duration", type=float, default=3.0)
    sub.add_parser("selfcheck", help="decode the hand-rolled packets with mqbridge's codec")
    a = ap.parse_args(argv)
    if a.cmd == "selfcheck":
        selfcheck()
        return 0
    if a.cmd == "ceiling":
        print(json.dumps(ceiling(a.payload, a.duration), indent=2))
        return 0
    spec = Spec.from_dict({f.name: getattr(a, f.name) for f in fields(Spec)})
    res = run_scenario(a.host, a.port, spec, a.broker_pid)
    res.pop("spec", None)
    print(json.dumps(res, indent=2))
    return 1 if res.get("errors") or res.get("error") else 0


if __name__ == "__main__":
    sys.exit(main())
