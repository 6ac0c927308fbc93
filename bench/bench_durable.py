"""The durable paths side by side (issue #18), interleaved run after run in one invocation:

- ``broker``: the broker alone, 4 QoS 1 publishers (64 in flight each, 256 B) -> one persistent QoS 1
  subscriber; mqbridge (FULL) beside mosquitto with and without ``persistence true``;
- ``route-in``: the same publishers on ``mq/<n>`` -> the default route ``mq/#`` -> embedded queue MQTT.IN,
  no subscriber; headline PUBACKs/s, and the count on the queue checked at the end (every acknowledged
  message must be there);
- ``route-out``: N persistent MQ messages put on MQTT.OUT in one transaction while one persistent QoS 1
  subscriber (``out/#``) is connected; headline N / (last - first arrival).

Ceilings, run only when named: ``-b mqbridge-FULL+nosidecar`` (``convlog.parquet_sidecars: false``) and
``-b mqbridge-FULL+nolog`` (``convlog.enabled: false``), what the conversion log costs a route.

Every run starts a fresh gateway on the embedded defaults (bench/run_broker_bench.py's ``Mqbridge``:
no rules file, so the two default routes run) in its own temp directory. Per run: the 1-minute load
average before and after, the gateway's CPU per message (utime + stime of the process and its child
processes, e.g. the sidecar process, from /proc, all threads, over the measured window or the whole drain), and
for mqbridge the fsyncs of a separate short run (``--fsync``: strace -c -f attached for the window; ptrace
slows the process, so that run's rate is reported beside its count and is not a headline).

    .venv/bin/python bench/bench_durable.py --repeat 3                       # all three, ~2 min
    .venv/bin/python bench/bench_durable.py -s route-out --count 50000 --code base=TREE --repeat 3
    .venv/bin/python bench/bench_durable.py --fsync --repeat 1
    .venv/bin/python bench/bench_durable.py -s route-in --consecutive 6     # one gateway, 6 windows in a row

Results: a table on stdout and bench/results/durable-latest.json (``--output``).
"""
from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import multiprocessing as mp
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from mqtt_load import Spec, proc_cpu, run_scenario  # noqa: E402
from run_broker_bench import CODE_TREES, Broker, PySpy, hot_spots, machine, make_broker  # noqa: E402

from bench.mqtt_load_clients import Stats, SubProto  # noqa: E402
from bench.mqtt_load_proc import children, loop_runner, raise_nofile  # noqa: E402
from bench.mqtt_load_wire import DISCONNECT  # noqa: E402
from bridge.connectors.embedded import QueueStore  # noqa: E402
from mappings.mq import constants as C  # noqa: E402
from mappings.mq.message import build_message, encode_message  # noqa: E402
from mappings.mq.mqmd import Mqmd  # noqa: E402
from mappings.mq.rfh2 import Rfh2, RfhElement, RfhFolder  # noqa: E402

PAYLOAD = 256
QUEUE_IN, QUEUE_OUT = "MQTT.IN", "MQTT.OUT"
BROKERS = {"broker": ["mqbridge-FULL", "mosquitto+persist", "mosquitto+persist+unbounded", "mosquitto"],
           "route-in": ["mqbridge-FULL"], "route-out": ["mqbridge-FULL"]}
# ceilings, run only when named with -b: the gateway without the conversion log's Parquet sidecars, or
# without the conversion log at all (what the log costs the route)
CEILINGS = ["mqbridge-FULL+nosidecar", "mqbridge-FULL+nolog"]


def _queue_depth(broker: Broker, queue: str) -> int | None:
    """Messages on an embedded queue, read from the gateway's queue store by a second connection."""
    path = broker.dir / "data" / "queues.sqlite3"
    try:
        with sqlite3.connect(path, timeout=10) as db:
            return int(db.execute("SELECT COUNT(*) FROM queue_messages WHERE queue=?", (queue,)).fetchone()[0])
    except sqlite3.Error:
        return None


def _wait_depth(broker: Broker, queue: str, want: int, timeout: float) -> int | None:
    t_end = time.monotonic() + timeout
    depth = _queue_depth(broker, queue)
    while (depth is None or depth < want) and time.monotonic() < t_end:
        time.sleep(0.2)
        depth = _queue_depth(broker, queue)
    return depth


class Strace:
    """strace -c -f on a process for a window: how many fsync/fdatasync calls it made."""

    def __init__(self, pid: int, out: Path) -> None:
        self.out = out
        self.proc = subprocess.Popen(["strace", "-c", "-f", "-p", str(pid), "-e", "trace=fsync,fdatasync",
                                      "-o", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)   # attached to every thread

    def stop(self) -> dict[str, int]:
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(10)
        calls: dict[str, int] = {}
        for line in self.out.read_text().splitlines():   # % time, seconds, usecs/call, calls, [errors], syscall
            parts = line.split()
            if parts and parts[-1] in ("fsync", "fdatasync") and len(parts) >= 5:
                calls[parts[-1]] = int(parts[3])
        return calls


def thread_cpu(pid: int, top: bool = True) -> dict[str, float]:
    """CPU seconds (utime + stime) per thread of a process, from /proc, by the thread's OS name (the gateway
    names its threads: bridge/threadnames.py; "main" is the event loop; a name used twice gets its id); with
    ``top``, also its child processes' threads ("child:NAME")."""
    out: dict[str, float] = {}
    tck = os.sysconf("SC_CLK_TCK")
    for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                parts = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue
        key = "main" if int(tid) == pid else (name if name not in out else f"{name}/{tid}")
        out[key] = (int(parts[11]) + int(parts[12])) / tck
    if top:
        for child in children(pid):   # the gateway's sidecar process: its threads as "child:NAME"
            try:
                with open(f"/proc/{child}/comm") as f:
                    comm = f.read().strip()
            except OSError:
                continue
            out.update({f"child:{comm if name == 'main' else name}": v
                        for name, v in thread_cpu(child, top=False).items()})
    return out


def _per_message(before: dict[str, float], after: dict[str, float], count: float) -> dict[str, float]:
    """µs of CPU per message by thread, the busiest first; threads under 1 µs left out."""
    used = {t: (v - before.get(t, 0.0)) / count * 1e6 for t, v in after.items()} if count else {}
    return {t: round(v, 1) for t, v in sorted(used.items(), key=lambda kv: -kv[1]) if v >= 1}


def _publishers(name: str, duration: float, prefix: str, subscribers: int) -> Spec:
    return Spec(name, qos=1, publishers=4, window=64, payload=PAYLOAD, clean=False, duration=duration,
                prefix=prefix, subscribers=subscribers, drain=20.0)


def run_publish(scenario: str, broker: Broker, duration: float, fsync: bool, wait_queue: bool = True,
                spy: PySpy | None = None) -> dict[str, Any]:
    """``broker`` or ``route-in``: the load generator's QoS 1 publishers for ``duration`` seconds."""
    into_queue = scenario == "route-in"
    spec = _publishers(scenario, duration, "mq" if into_queue else "b", 0 if into_queue else 1)
    marks: dict[str, Any] = {}

    def on_window(w0: float, w1: float) -> None:
        def at_start() -> None:
            marks["threads_w0"] = thread_cpu(broker.pid) if broker.label.startswith("mqbridge") else {}
            if into_queue:
                marks["depth_w0"] = (time.monotonic(), _queue_depth(broker, QUEUE_IN))
            if fsync:
                marks["strace"] = Strace(broker.pid, broker.dir / "strace.txt")
                marks["strace_t0"] = time.monotonic()
            if spy is not None:
                spy.attach(broker.pid, w1 - w0)

        def at_end() -> None:
            if marks.get("threads_w0"):
                marks["threads_w1"] = thread_cpu(broker.pid)
            if fsync and "strace" in marks:
                marks["fsync_calls"] = marks.pop("strace").stop()
                marks["strace_s"] = time.monotonic() - marks.pop("strace_t0")
            if into_queue:
                marks["depth_w1"] = (time.monotonic(), _queue_depth(broker, QUEUE_IN))
        at_start()
        timer = threading.Timer(max(0.0, w1 - time.monotonic()), at_end)
        timer.daemon = True
        timer.start()
        marks["timer"] = timer

    depth_before = (_queue_depth(broker, QUEUE_IN) or 0) if into_queue else 0
    res = run_scenario("127.0.0.1", broker.port, spec, broker_pid=broker.pid, on_window=on_window)
    t_done = time.monotonic()
    if "timer" in marks:
        marks.pop("timer").join(30)
    rate = res.get("acked_per_s" if into_queue else "delivered_per_s") or 0
    res["headline"] = rate
    if res.get("broker_cpu") and rate:
        res["cpu_us_per_msg"] = round(res["broker_cpu"] / rate * 1e6, 1)
    if "threads_w1" in marks:
        res["thread_cpu_us_per_msg"] = _per_message(marks["threads_w0"], marks["threads_w1"], rate * duration)
    if into_queue:
        acked = res.get("sent_total", 0) - res.get("unacked", 0)
        res["acked_total"] = acked
        # every acknowledged publication reaches the queue: the route may still be moving the last ones
        res["queue_depth_before"] = depth_before
        res["queue_depth_end"] = _wait_depth(broker, QUEUE_IN, depth_before + acked, 120 if wait_queue else 0)
        res["queue_has_every_acked"] = (res["queue_depth_end"] or 0) >= depth_before + acked
        if not wait_queue:   # back to back: what the route has yet to move carries over to the next window
            res["route_backlog"] = depth_before + acked - (res["queue_depth_end"] or 0)
            res["queue_has_every_acked"] = None
        res["route_drain_after_s"] = round(time.monotonic() - t_done, 1)
        (t0, d0), (t1, d1) = marks.get("depth_w0", (0, None)), marks.get("depth_w1", (0, None))
        if d0 is not None and d1 is not None and t1 > t0:
            res["queued_per_s_window"] = round((d1 - d0) / (t1 - t0))   # the route's rate into the queue
    if "fsync_calls" in marks:
        res["fsync_calls"] = marks["fsync_calls"]
        res["fsync_per_s"] = round(sum(marks["fsync_calls"].values()) / marks["strace_s"])
        if rate:
            res["fsync_per_1000_msgs"] = round(res["fsync_per_s"] / rate * 1000, 2)
    return res


# -- route-out: a pre-loaded queue drained into one subscriber ------------------------------------------------


def _sub_child(port: int, count: int, ready: Any, results: Any) -> None:
    raise_nofile()

    async def body() -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        st = Stats()
        _, proto = await loop.create_connection(
            lambda: SubProto(st, f"drain-sub-{os.getpid()}", False, "out/#", 1), "127.0.0.1", port)
        await asyncio.wait_for(proto.subscribed, 10)
        ready.set()
        cpu0 = time.process_time()
        t_end = time.monotonic() + 600
        while st.received < count and time.monotonic() < t_end:
            if st.last_rx and time.monotonic() - st.last_rx > 20:
                break   # nothing for 20 s: report what came
            await asyncio.sleep(0.01)
        cpu = time.process_time() - cpu0
        if proto.transport is not None:
            proto.transport.write(DISCONNECT)
            proto.transport.close()
        await asyncio.sleep(0.05)
        return {"received": st.received, "first_rx": st.first_rx, "last_rx": st.last_rx, "sub_cpu_s": cpu,
                "errors": st.errors[:5]}
    try:
        results.put(loop_runner(body()))
    except BaseException as exc:
        ready.set()
        results.put({"error": f"{type(exc).__name__}: {exc}"})


def _out_message() -> bytes:
    """A persistent MQ message with an MQRFH2 naming its topic (mqps/Top): QoS 2 in the broker, QoS 1 to the
    subscriber (MQ Telemetry Table 4: the lower of the two)."""
    rfh = Rfh2(folders=(RfhFolder("mqps", (RfhElement("Top", "out/0"),)),))
    return encode_message(build_message(Mqmd(persistence=C.MQPER_PERSISTENT), (rfh,), b"\x00" * PAYLOAD))


def run_drain(broker: Broker, count: int, fsync: bool, spy: PySpy | None = None) -> dict[str, Any]:
    """``route-out``: put ``count`` messages on MQTT.OUT in one transaction (a second connection to the
    gateway's queue store) while the subscriber is connected, and time the drain."""
    ctx = mp.get_context("spawn")
    ready, results = ctx.Event(), ctx.Queue()
    sub = ctx.Process(target=_sub_child, args=(broker.port, count, ready, results))
    sub.start()
    if not ready.wait(30):
        raise RuntimeError("the subscriber did not get ready")
    store = QueueStore(broker.dir / "data" / "queues.sqlite3").open()
    msg = _out_message()
    store.put_many([(QUEUE_OUT, msg)] * count)
    store.close()
    cpu0 = proc_cpu(broker.pid)
    threads0 = thread_cpu(broker.pid)
    strace = Strace(broker.pid, broker.dir / "strace.txt") if fsync else None
    if spy is not None:   # most of the drain at the rate seen so far (~10k/s)
        spy.attach(broker.pid, count / 12_000)
    t0 = time.monotonic()
    got = results.get(timeout=660)
    elapsed = time.monotonic() - t0
    fsync_calls = strace.stop() if strace is not None else None
    cpu1 = proc_cpu(broker.pid)
    sub.join(10)
    res: dict[str, Any] = {"scenario": "route-out", "count": count, **got}
    if got.get("received") and got["last_rx"] > got["first_rx"]:
        res["headline"] = round((got["received"] - 1) / (got["last_rx"] - got["first_rx"]))
        if cpu0 is not None and cpu1 is not None:
            res["cpu_us_per_msg"] = round((cpu1 - cpu0) / got["received"] * 1e6, 1)
            res["thread_cpu_us_per_msg"] = _per_message(threads0, thread_cpu(broker.pid), got["received"])
    res["queue_depth_end"] = _wait_depth_zero(broker)
    if fsync_calls is not None:
        res["fsync_calls"] = fsync_calls
        res["fsync_per_s"] = round(sum(fsync_calls.values()) / elapsed)
        res["fsync_per_1000_msgs"] = round(sum(fsync_calls.values()) / count * 1000, 2)
    return res


def _wait_depth_zero(broker: Broker, timeout: float = 30) -> int | None:
    t_end = time.monotonic() + timeout
    depth = _queue_depth(broker, QUEUE_OUT)
    while depth and time.monotonic() < t_end:
        time.sleep(0.2)
        depth = _queue_depth(broker, QUEUE_OUT)
    return depth


# -- orchestration ---------------------------------------------------------------------------------------------


def _files(broker: Broker) -> dict[str, int]:
    """Bytes of the gateway's stores (with their WAL) and of its conversion log, after a window."""
    data = broker.dir / "data"
    out = {p.name: p.stat().st_size for p in sorted(data.glob("*.sqlite3*"))}
    out["convlog"] = sum(p.stat().st_size for p in (data / "convlog").rglob("*") if p.is_file())
    return out


def run_one(scenario: str, label: str, a: argparse.Namespace) -> list[dict[str, Any]]:
    """One gateway (or mosquitto) for ``a.consecutive`` windows back to back (route-in: the queue grows)."""
    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix=f"mqb-durable-{label}-") as tmp:
        broker = make_broker(label, Path(tmp))
        broker.start()
        windows = a.consecutive if scenario == "route-in" else 1
        try:
            for window in range(windows):
                load0 = os.getloadavg()[0]
                try:
                    spy = PySpy(a.profile / f"profile-{scenario}-{label}.txt") if a.profile else None
                    if scenario == "route-out":
                        res = run_drain(broker, a.count, a.fsync, spy)
                    else:
                        res = run_publish(scenario, broker, a.duration, a.fsync,
                                          wait_queue=not a.back_to_back or window == windows - 1, spy=spy)
                    if spy is not None:
                        spy.wait()
                        res["profile"] = hot_spots(spy.out, 25)
                except Exception as exc:
                    res = {"scenario": scenario, "error": f"{type(exc).__name__}: {exc}"}
                res.pop("spec", None)
                res.update(broker=label, loadavg_1m_before=round(load0, 2),
                           loadavg_1m_after=round(os.getloadavg()[0], 2), fsync_run=a.fsync, window=window + 1)
                if label.startswith("mqbridge"):
                    res["files_after"] = _files(broker)
                out.append(res)
                if windows > 1:
                    print_row(res)
        finally:
            out[-1].update(broker.stop())
    return out


def _median(values: list[float]) -> float:
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def summary(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per (scenario, broker): median headline and CPU per message over the runs, and the runs' range."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault((r["scenario"], r["broker"]), []).append(r)
    out: dict[str, dict[str, Any]] = {}
    for (scenario, label), rs in groups.items():
        rates = [r["headline"] for r in rs if r.get("headline")]
        cpus = [r["cpu_us_per_msg"] for r in rs if r.get("cpu_us_per_msg")]
        out[f"{scenario} {label}"] = {
            "runs": [r.get("headline") for r in rs], "median": _median(rates) if rates else None,
            "cpu_us_per_msg_median": _median(cpus) if cpus else None,
            "loadavg": [r["loadavg_1m_before"] for r in rs],
            "fsync_per_s": [r["fsync_per_s"] for r in rs if "fsync_per_s" in r] or None}
    base = out.get("broker mqbridge-FULL", {}).get("median")
    for key, row in out.items():
        if base and row["median"] and key != "broker mqbridge-FULL":
            row["over_broker_mqbridge"] = round(row["median"] / base, 3)
    return out


def print_row(r: dict[str, Any]) -> None:
    extra = ""
    if r["scenario"] == "route-in":
        extra = (f" queued/s {r.get('queued_per_s_window')} acked {r.get('acked_total')} on queue"
                 f" {r.get('queue_depth_before')}->{r.get('queue_depth_end')}"
                 + (f" backlog {r['route_backlog']}" if "route_backlog" in r else
                    f" {'OK' if r.get('queue_has_every_acked') else 'MISSING'} (+{r.get('route_drain_after_s')} s)"))
    elif r["scenario"] == "route-out":
        extra = f" received {r.get('received')}/{r.get('count')} left {r.get('queue_depth_end')}"
    elif "delivery_ratio" in r:
        extra = f" delivered {r['delivery_ratio']}"
    th = r.get("thread_cpu_us_per_msg")
    if th:
        extra += "  threads " + " ".join(f"{t}:{v}" for t, v in list(th.items())[:4])
    fs = f" fsync/s {r['fsync_per_s']} ({r.get('fsync_per_1000_msgs')}/1000 msgs)" if "fsync_per_s" in r else ""
    print(f"  {r['scenario']:<10} {r['broker']:<20} {r.get('headline', 'ERROR')!s:>8} msg/s  "
          f"cpu {r.get('cpu_us_per_msg', '-')!s:>6} us/msg  load {r['loadavg_1m_before']}->{r['loadavg_1m_after']}"
          f"{fs}{extra}" + (f"  ERROR {r['error']}" if r.get("error") else ""), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-s", "--scenario", action="append", choices=list(BROKERS), help="only these (repeatable)")
    ap.add_argument("-b", "--broker", action="append", help="only these brokers (repeatable)")
    ap.add_argument("--duration", type=float, default=5.0, help="measured seconds of broker and route-in")
    ap.add_argument("--count", type=int, default=100_000, help="messages pre-loaded for route-out")
    ap.add_argument("--repeat", type=int, default=1, help="runs of every (scenario, broker), interleaved")
    ap.add_argument("--consecutive", type=int, default=1, help="route-in: this many windows on one gateway, "
                    "back to back (what the queue's growth does to the rate)")
    ap.add_argument("--back-to-back", action="store_true", help="with --consecutive: start the next window at "
                    "once, while the route may still be moving the last one's publications to the queue")
    ap.add_argument("--profile", type=Path, metavar="DIR", help="py-spy the gateway during the window (raw stacks "
                    "and hot spots in DIR; slows it: not a headline; MQB_PYSPY_ARGS adds py-spy options, e.g. "
                    "'--threads' or '--gil')")
    ap.add_argument("--fsync", action="store_true", help="count fsync/fdatasync with strace (slows the process)")
    ap.add_argument("--code", action="append", default=[], metavar="NAME=TREE",
                    help="also run mqbridge from another source tree as mqbridge-FULL@NAME, interleaved")
    ap.add_argument("--output", type=Path, default=HERE / "results" / "durable-latest.json")
    a = ap.parse_args(argv)
    if a.profile:
        a.profile.mkdir(parents=True, exist_ok=True)
    for item in a.code:
        name, _, tree = item.partition("=")
        if not name or not (Path(tree) / "bridge").is_dir():
            ap.error(f"--code {item!r}: expected NAME=TREE with TREE a mqbridge source tree")
        CODE_TREES[name] = Path(tree).resolve()
    started = dt.datetime.now(dt.UTC)
    results: list[dict[str, Any]] = []
    for rep in range(a.repeat):
        for scenario in a.scenario or list(BROKERS):
            for base in BROKERS[scenario] + (CEILINGS if scenario != "broker" else []):
                if base in CEILINGS and base not in (a.broker or []):
                    continue
                variants = [base, *(f"{base}@{n}" for n in CODE_TREES if base.startswith("mqbridge"))]
                for label in variants:
                    if a.broker and label.partition("@")[0] not in a.broker:
                        continue
                    if a.fsync and not label.startswith("mqbridge") and scenario != "broker":
                        continue
                    runs = run_one(scenario, label, a)
                    for res in runs:
                        res["repeat"] = rep + 1
                    results.extend(runs)
                    if len(runs) == 1:
                        print_row(runs[0])
                    for res in runs:
                        for kind, rows in res.get("profile", {}).items():
                            print(f"    py-spy {kind}: " + "; ".join(f"{f} {pct}%" for f, pct in rows))
    summ = summary(results)
    print()
    for key, row in summ.items():
        print(f"{key:<40} median {row['median']!s:>8}  runs {row['runs']}  cpu {row['cpu_us_per_msg_median']} us/msg"
              + (f"  x{row['over_broker_mqbridge']} of broker alone" if "over_broker_mqbridge" in row else "")
              + f"  load {row['loadavg']}" + (f"  fsync/s {row['fsync_per_s']}" if row["fsync_per_s"] else ""))
    doc = {"date": started.isoformat(timespec="seconds"),
           "command": " ".join(["python", "bench/bench_durable.py", *(argv if argv is not None else sys.argv[1:])]),
           "machine": machine(), "code_trees": {k: str(v) for k, v in CODE_TREES.items()},
           "summary": summ, "results": results}
    a.output.parent.mkdir(parents=True, exist_ok=True)
    a.output.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"\nwrote {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
