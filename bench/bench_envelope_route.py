# Benchmarks a whole MQTT QoS 1 -> ActiveMQ route of mqbridge in the payload form against the envelope form.
"""MQTT QoS 1 -> JMS consumer throughput and gateway CPU through two routes of one ``mqbridge serve``:

- **payload**: ``bench/p/#`` -> JMS topic, the default form (amlen auto rule: a TextMessage of the payload);
- **envelope**: ``bench/e/#`` -> ``reply_to`` target (``options.mqtt_format: envelope``): each payload is
  a reply envelope (JMSCorrelationID, JMSType, a typed property, a text body of the same bytes as the
  payload route's) naming its JMS topic in ``headers.JMSDestination``, checked against ``allow``.

Same publisher, JMS consumer and broker as bench/bench_gateway_activemq.py (its ``one_run``); the two
routes are measured in alternating rounds, back to back, so that other load on the machine hits both
alike; the gateway's CPU seconds per run come from /proc.

Run: ``.venv/bin/python bench/bench_envelope_route.py --count 10000 --rounds 3`` (needs the Debian
ActiveMQ and a JDK, like the activemq tests). Prints a Markdown table.
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

from bench.bench_gateway_activemq import one_run  # noqa: E402
from tests.support.activemq import ActiveMQ  # noqa: E402
from tests.support.gateway import GatewayProcess  # noqa: E402
from tests.support.jmstool import JmsTool  # noqa: E402


def envelope(topic: str, text: str) -> bytes:
    return json.dumps({"headers": {"JMSCorrelationID": "ID:bench-1", "JMSType": "quote-reply",
                                   "JMSDestination": f"topic://{topic}"},
                       "properties": {"n": {"type": "int", "value": 3}},
                       "body": {"type": "jms_text", "text": text}}).encode()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--payload", type=int, default=100)
    ap.add_argument("--window", type=int, default=256)
    args = ap.parse_args(argv)
    text = ("bench-payload " * (args.payload // 14 + 1))[:args.payload]

    work = Path(tempfile.mkdtemp(prefix="mqbridge-bench-env-"))
    broker = ActiveMQ(work / "activemq", persistent=True)
    ep = broker.start()
    tool = JmsTool(JmsTool.compile(work / "jmstool"), ep.openwire_url)
    gw: GatewayProcess | None = None
    results: dict[str, list[dict[str, Any]]] = {"payload": [], "envelope": []}
    load: list[float] = []
    try:
        tag = uuid.uuid4().hex[:8]
        rules = work / "rules.yaml"
        rules.write_text(json.dumps({
            "connectors": {"amq": {"type": "jms", "host": ep.host, "port": ep.stomp_port}},
            "routes": [
                {"name": "payload", "from": {"mqtt": "bench/p/#"}, "to": {"connector": "amq", "topic": f"bp.{tag}"}},
                {"name": "envelope", "from": {"mqtt": "bench/e/#"},
                 "to": {"connector": "amq", "reply_to": True, "allow": [f"topic://be.{tag}"]},
                 "options": {"mqtt_format": "envelope"}}],
        }))
        (work / "gw").mkdir()
        gw = GatewayProcess(work / "gw", {"rules": str(rules), "logging": {"level": "WARNING"}}).start()
        assert gw.proc is not None
        pids = {"mqbridge": gw.proc.pid}
        paths = {"payload": (tool, f"topic://bp.{tag}", gw.port, "bench/p/x", text.encode()),
                 "envelope": (tool, f"topic://be.{tag}", gw.port, "bench/e/x", envelope(f"be.{tag}", text))}
        for t, dest, port, topic, body in paths.values():   # warm both routes
            one_run(t, dest, port, topic, 500, body, args.window, pids)
        for _ in range(args.rounds):
            for name, (t, dest, port, topic, body) in paths.items():
                load.append(os.getloadavg()[0])
                results[name].append(one_run(t, dest, port, topic, args.count, body, args.window, pids))
    finally:
        if gw is not None:
            gw.stop()
        tool.close()
        broker.stop()
    print(f"# {args.count} QoS 1 messages x {args.rounds} rounds per route, window {args.window}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {min(load):.1f}-{max(load):.1f}")
    print(json.dumps(results))
    print("| route form | delivered /s (median) | best | mqbridge CPU µs per message (median) | JMS class |")
    print("|---|---:|---:|---:|---|")
    for name, runs in results.items():
        cpu = statistics.median(r["cpu_s_mqbridge"] / args.count * 1e6 for r in runs)
        print(f"| {name} | {statistics.median(r['delivered_per_s'] for r in runs):,.0f} | "
              f"{max(r['delivered_per_s'] for r in runs):,.0f} | {cpu:,.0f} | {runs[0]['message_class']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
