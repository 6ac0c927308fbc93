# Benchmarks MQTT QoS 1 -> MQ (embedded queue store) through mqbridge: payload form against envelope form.
"""MQTT QoS 1 -> MQ queue throughput and gateway CPU through two routes of one ``mqbridge serve`` with the
embedded queue store (the MQ-format messages it holds are what would be put to IBM MQ):

- **payload**: ``bench/p/#`` -> queue ``BENCH.P`` (MQTT -> MQ, ``MqttToMqEncoder``'s template);
- **envelope**: ``bench/e/#`` -> ``reply_to`` target (``options.mqtt_format: envelope``): each payload is a
  reply envelope (JMSCorrelationID, JMSType, a typed property, a text body of the same bytes as the payload
  route's) naming ``queue:///BENCH.E`` in ``headers.JMSDestination``; converted by the JMS -> MQ mapping
  (``mappings.conversions.jms_mq.jms_to_mq_bytes``).

The two routes are measured in alternating rounds, back to back; a run publishes ``--count`` QoS 1 messages
(``--window`` in flight) and ends when the queue holds them all; the gateway's CPU seconds per run come from
/proc. ``--code TREE`` runs the gateway from another source tree (PYTHONPATH), e.g. the commit before a change.

Run: ``.venv/bin/python bench/bench_envelope_mq_route.py --count 5000 --rounds 3``. Prints a Markdown table.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_gateway_activemq import publish_qos1  # noqa: E402
from bench.mqtt_load import proc_cpu  # noqa: E402
from bridge.connectors.embedded import QueueStore, default_path  # noqa: E402
from tests.support.gateway import GatewayProcess, wait_for  # noqa: E402

RULES = """\
routes:
  - name: payload
    from: {mqtt: "bench/p/#"}
    to: {queue: BENCH.P}
  - name: envelope
    from: {mqtt: "bench/e/#"}
    to: {reply_to: true, allow: ["queue://BENCH.E"]}
    options: {mqtt_format: envelope}
"""


def envelope(text: str) -> bytes:
    return json.dumps({"headers": {"JMSCorrelationID": "ID:bench-1", "JMSType": "quote-reply",
                                   "JMSDestination": "queue:///BENCH.E"},
                       "properties": {"n": {"type": "int", "value": 3}},
                       "body": {"type": "jms_text", "text": text}}).encode()


def one_run(gw: GatewayProcess, store: QueueStore, queue: str, topic: str, count: int, payload: bytes,
            window: int) -> dict[str, Any]:
    assert gw.proc is not None
    store.clear(queue)
    cpu0 = proc_cpu(gw.proc.pid) or 0.0
    start = time.perf_counter()
    asyncio.run(publish_qos1("127.0.0.1", gw.port, topic, count, payload, window))
    wait_for(lambda: store.depth(queue) >= count, 120, 0.05, what=f"{count} messages on {queue}")
    wall = time.perf_counter() - start
    cpu = (proc_cpu(gw.proc.pid) or 0.0) - cpu0
    return {"per_s": count / wall, "cpu_us": cpu / count * 1e6, "wall_s": wall, "cpu_s": cpu}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=5_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--payload", type=int, default=100)
    ap.add_argument("--window", type=int, default=256)
    ap.add_argument("--code", type=Path, default=None, help="run the gateway from this source tree")
    args = ap.parse_args(argv)
    text = ("bench-payload " * (args.payload // 14 + 1))[:args.payload]
    if args.code is not None:
        os.environ["PYTHONPATH"] = str(args.code.resolve())
    work = Path(tempfile.mkdtemp(prefix="mqbridge-bench-envmq-"))
    (work / "rules.yaml").write_text(RULES)
    (work / "gw").mkdir()
    gw = GatewayProcess(work / "gw", {"rules": str(work / "rules.yaml"), "logging": {"level": "WARNING"}}).start()
    results: dict[str, list[dict[str, Any]]] = {"payload": [], "envelope": []}
    paths = {"payload": ("BENCH.P", "bench/p/x", text.encode()), "envelope": ("BENCH.E", "bench/e/x", envelope(text))}
    load: list[float] = []
    try:
        store = QueueStore(default_path(gw.data_dir)).open()
        for queue, topic, body in paths.values():            # warm both routes
            one_run(gw, store, queue, topic, 500, body, args.window)
        for _ in range(args.rounds):
            for name, (queue, topic, body) in paths.items():
                load.append(os.getloadavg()[0])
                results[name].append(one_run(gw, store, queue, topic, args.count, body, args.window))
    finally:
        gw.stop()
    print(f"# {args.count} QoS 1 messages x {args.rounds} rounds per route, window {args.window}, code "
          f"{args.code or 'this tree'}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
          f"{min(load):.1f}-{max(load):.1f}")
    print(json.dumps(results))
    print("| route form | queued /s (median) | best | mqbridge CPU µs per message (median) |")
    print("|---|---:|---:|---:|")
    for name, runs in results.items():
        print(f"| {name} | {statistics.median(r['per_s'] for r in runs):,.0f} | "
              f"{max(r['per_s'] for r in runs):,.0f} | {statistics.median(r['cpu_us'] for r in runs):,.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
