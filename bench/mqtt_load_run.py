"""One publish/subscribe scenario of the load generator: a subscriber process and a publisher process
(each its own event loop and core), started together, measured over a window after the warm-up, and
summarized with the broker's CPU and RSS (``run_scenario``)."""
from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import time
from array import array
from dataclasses import asdict
from typing import Any

from bench.mqtt_load_clients import PubProto, Spec, Stats, SubProto
from bench.mqtt_load_idle import run_idle
from bench.mqtt_load_proc import loop_runner, proc_cpu, proc_mem, raise_nofile
from bench.mqtt_load_wire import DISCONNECT

# ------------------------------------------------------------------------------------------------
# Process bodies
# ------------------------------------------------------------------------------------------------


async def _wait_start(start_at: Any) -> float:
    while start_at.value == 0.0:
        await asyncio.sleep(0.002)
    delay = start_at.value - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)
    return start_at.value


def _sampler(loop: asyncio.AbstractEventLoop, st: Stats, samples: list[tuple[float, int, int]]) -> None:
    samples.append((time.monotonic(), st.received, st.sent))
    loop.call_later(0.05, _sampler, loop, st, samples)


async def _sub_body(spec: Spec, host: str, port: int, ready: Any, start_at: Any, pubs_done: Any,
                    expected: Any, delivered: Any) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    st = Stats()
    protos: list[SubProto] = []
    for i in range(spec.subscribers):
        cid = f"{spec.prefix}-sub-{os.getpid()}-{i}"
        _, proto = await loop.create_connection(
            lambda cid=cid: SubProto(st, cid, spec.clean, f"{spec.prefix}/#", spec.sub_qos or 0, delivered,
                                     spec.mqtt5),
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
    st = Stats()
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
    raise_nofile()
    body = _sub_body if role == "sub" else _pub_body
    try:
        res = loop_runner(body(spec, host, port, ready, start_at, pubs_done, expected, delivered))
    except BaseException as exc:  # report, never hang the parent
        res = {"error": f"{type(exc).__name__}: {exc}"}
        ready.set()
        if role == "pub":
            pubs_done.set()
    results.put((role, res))


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
    if "sent_total" in out and "received_total" in out and out["sent_total"] and spec.subscribers:
        out["delivery_ratio"] = round(out["received_total"] / (out["sent_total"] * spec.subscribers), 4)
    if cpu_a is not None and cpu_b is not None:
        out["broker_cpu"] = round((cpu_b - cpu_a) / dur, 3)    # cores used by the broker in the window
        if out.get("delivered_per_s") and cpu_b > cpu_a:
            out["delivered_per_broker_cpu_s"] = round(out["delivered_per_s"] / ((cpu_b - cpu_a) / dur))
    if mem:
        out["broker_rss_kib"] = mem.get("VmRSS")
        out["broker_peak_rss_kib"] = mem.get("VmHWM")
    return out

