# Benchmarks JMS -> MQ conversions through a running gateway: the STOMP connector beside the native one.
"""JMS queue (ActiveMQ, persistent) -> ``mqbridge serve`` -> embedded MQ queue, messages per second, for the
two JMS connectors side by side in one gateway (issue #16: "JMS -> MQ conversions per second"):

- **stomp**: ``type: jms`` (STOMP 1.2, client acknowledgement after the store's commit);
- **native**: ``type: jms, client: native`` (ActiveMQ's own client in the gateway's JVM, a transacted session
  committed after the store's commit).

Each round preloads ``--count`` persistent TextMessages (100 B of text, an int and a String property, a
correlation id) on a fresh ActiveMQ queue per path with tests/java/JmsTool.java, then adds the route from that
queue to an embedded queue with a rules reload. The rate is ``count`` / (the last message on the embedded queue -
the first), so neither the preload nor the route's set-up is in it. Paths alternate their order each round.
Gateway CPU per message is taken over the same window (from /proc).

Run: ``.venv/bin/python bench/bench_gateway_jms_mq.py --count 20000 --rounds 3`` (needs the Debian ActiveMQ, a
JDK and jpype1, like the native connector's tests). Prints JSON and a Markdown table.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.mqtt_load_proc import proc_cpu, thread_cpu  # noqa: E402
from bridge.connectors.embedded import QueueStore, default_path  # noqa: E402
from tests.support.activemq import ActiveMQ  # noqa: E402
from tests.support.gateway import GatewayProcess  # noqa: E402
from tests.support.jmstool import COMPILE_JARS, JAVA_DIR, JmsTool, typed  # noqa: E402

SEND_CHUNK = 5000   # messages per JmsTool call


def _connectors(openwire: str, host: str, stomp: int) -> dict[str, Any]:
    return {
        "stomp": {"type": "jms", "host": host, "port": stomp},
        "native": {"type": "jms", "client": "native", "jars": [str(JAVA_DIR / j) for j in COMPILE_JARS],
                   "connection_factory": "org.apache.activemq.ActiveMQConnectionFactory",
                   "factory_properties": {"brokerURL": openwire}},
    }


def preload(tool: JmsTool, queue: str, count: int, payload: str) -> None:
    message = {"type": "Text", "body": payload, "headers": {"correlationId": "bench-corr"},
               "properties": {"seq": typed("int", 1), "region": typed("String", "emea")}}
    for start in range(0, count, SEND_CHUNK):
        tool.send(f"queue://{queue}", *([message] * min(SEND_CHUNK, count - start)))


def drain_rate(gw: GatewayProcess, store: QueueStore, queue: str, count: int, timeout: float) -> dict[str, Any]:
    """Wait until ``count`` messages are on the embedded ``queue``; the rate from the first to the last."""
    assert gw.proc is not None
    deadline = time.monotonic() + timeout
    first = last = 0.0
    cpu0 = 0.0
    threads0: dict[str, float] = {}
    while True:
        depth = store.depth(queue)
        now = time.monotonic()
        if depth and not first:
            first, cpu0, threads0 = now, proc_cpu(gw.proc.pid) or 0.0, thread_cpu(gw.proc.pid)
        if depth >= count:
            last = now
            break
        if now > deadline:
            raise RuntimeError(f"{queue}: {depth} of {count} after {timeout:.0f} s")
        time.sleep(0.002)
    cpu = (proc_cpu(gw.proc.pid) or 0.0) - cpu0
    threads = {name: round((spent - threads0.get(name, 0.0)) / count * 1e6, 1)
               for name, spent in thread_cpu(gw.proc.pid).items() if spent - threads0.get(name, 0.0) > 0}
    seconds = max(last - first, 1e-6)
    return {"per_s": count / seconds, "seconds": seconds, "cpu_us_per_msg": cpu / count * 1e6,
            "thread_cpu_us_per_msg": dict(sorted(threads.items(), key=lambda kv: -kv[1]))}   # type: ignore[dict-item]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--payload", type=int, default=100)
    args = ap.parse_args(argv)
    payload = ("bench-payload " * (args.payload // 14 + 1))[:args.payload]

    work = Path(tempfile.mkdtemp(prefix="mqbridge-bench-jmsmq-"))
    broker = ActiveMQ(work / "activemq", persistent=True)
    ep = broker.start()
    tool = JmsTool(JmsTool.compile(work / "jmstool"), ep.openwire_url)
    gw: GatewayProcess | None = None
    results: dict[str, list[dict[str, Any]]] = {"stomp": [], "native": []}
    try:
        tag = uuid.uuid4().hex[:8]
        rules = work / "rules.yaml"
        routes: list[dict[str, Any]] = []
        connectors = _connectors(ep.openwire_url, ep.host, ep.stomp_port)
        rules.write_text(json.dumps({"connectors": connectors, "routes": routes}))
        (work / "gw").mkdir()
        gw = GatewayProcess(work / "gw", {"rules": str(rules), "logging": {"level": "WARNING"}}).start()
        store = QueueStore(default_path(gw.data_dir)).open()

        def one(path: str, name: str, count: int) -> dict[str, Any]:
            queue = f"j2m.{tag}.{name}"
            target = f"J2M.{name.upper()}"
            preload(tool, queue, count, payload)
            routes.append({"name": f"j2m-{name}", "from": {"connector": path, "queue": queue},
                           "to": {"queue": target}})
            rules.write_text(json.dumps({"connectors": connectors, "routes": routes}))
            done = gw.cli("reload", "--admin", f"http://127.0.0.1:{gw.admin_port}")
            if done.returncode != 0:
                raise RuntimeError(f"reload failed: {done.stdout}{done.stderr}")
            return drain_rate(gw, store, target, count, timeout=max(120.0, count / 100))

        for path in results:   # warm each path (the JVM's JIT, the links)
            one(path, f"warm{path}", 1000)
        for r in range(args.rounds):
            order = list(results) if r % 2 == 0 else list(reversed(results))
            for path in order:
                results[path].append(one(path, f"{path}{r}", args.count))
                print(f"round {r} {path}: {results[path][-1]['per_s']:,.0f}/s "
                      f"({results[path][-1]['cpu_us_per_msg']:.0f} us CPU/msg; by thread "
                      f"{dict(list(results[path][-1]['thread_cpu_us_per_msg'].items())[:6])})",
                      file=sys.stderr, flush=True)
        store.close()
    finally:
        if gw is not None:
            gw.stop()
        tool.close()
        broker.stop()
    summary = {p: {"per_s_median": statistics.median(r["per_s"] for r in runs),
                   "cpu_us_per_msg_median": statistics.median(r["cpu_us_per_msg"] for r in runs)}
               for p, runs in results.items()}
    ratio = summary["native"]["per_s_median"] / summary["stomp"]["per_s_median"]
    print(json.dumps({"count": args.count, "payload": args.payload, "cpus": os.cpu_count(),
                      "loadavg": os.getloadavg(), "runs": results, "summary": summary,
                      "ratio_native_to_stomp": ratio}, indent=1))
    print()
    print("| path | JMS -> MQ messages/s (median) | gateway CPU µs/msg (median) |")
    print("|---|---:|---:|")
    for p, s in summary.items():
        print(f"| {p} | {s['per_s_median']:,.0f} | {s['cpu_us_per_msg_median']:.0f} |")
    print(f"\nnative / stomp: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
