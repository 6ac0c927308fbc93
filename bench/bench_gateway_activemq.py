# Benchmarks MQTT QoS 1 -> ActiveMQ through mqbridge (STOMP and native JMS connectors) against ActiveMQ's MQTT.
"""MQTT QoS 1 -> JMS consumer throughput, three paths to the same ActiveMQ broker on this machine:

- **native**: MQTT publisher -> ActiveMQ's ``mqtt://`` transport -> JMS consumer of ``topic://bn.<tag>``
  (docs/stomp-facts.md §7: a BytesMessage with the payload exact);
- **mqbridge**: MQTT publisher -> ``mqbridge serve`` (built-in broker, durable QoS 1, route
  ``bench/#`` -> JMS topic with full conversion: amlen auto rule, SwiftMQ properties, conversion log)
  -> STOMP SEND with receipts -> the same kind of JMS consumer;
- **mqbridge-native** (``--native``): the same gateway, route ``benchn/#`` -> the same conversion -> the
  native JMS connector (ActiveMQ's own JMS client in the gateway's JVM, transacted session, OpenWire).

``--queue``: the same to ActiveMQ queues (persistent messages stored in KahaDB before the consumer gets them);
ActiveMQ's MQTT transport publishes to topics only, so its path reaches queue ``bn.<tag>`` through a forwarding
composite topic in the broker's configuration.

The publisher is a raw-socket MQTT 3.1.1 client keeping ``--window`` QoS 1 publications in flight
(bench/mqtt_load.py wire helpers); the JMS consumer is tests/java/JmsTool over OpenWire in its own JVM,
started before publishing. A run's rate is messages / (last message received - first publish).

Run: ``.venv/bin/python bench/bench_gateway_activemq.py --count 20000 --rounds 3`` (needs the Debian
ActiveMQ and a JDK, like the activemq tests). Prints JSON and a Markdown table.
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
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.mqtt_load import PUBACK_T, connect_packet, proc_cpu, publish_packet  # noqa: E402
from tests.support.activemq import ActiveMQ  # noqa: E402
from tests.support.gateway import GatewayProcess  # noqa: E402
from tests.support.jmstool import JmsTool  # noqa: E402

NATIVE_JARS = [f"/usr/share/java/{j}.jar" for j in ("activemq-client", "geronimo-jms_1.1_spec", "hawtbuf", "slf4j-api",
                                                    "geronimo-j2ee-management-1.1-spec")]


async def publish_qos1(host: str, port: int, topic: str, count: int, payload: bytes,
                       window: int) -> tuple[float, float]:
    """Publish ``count`` QoS 1 messages with ``window`` unacknowledged at most; returns (start, all acked)."""
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(connect_packet(f"bench-{uuid.uuid4().hex[:8]}", clean=True, keepalive=0))
    head = await reader.readexactly(4)
    if head[0] >> 4 != 2 or head[3] != 0:
        raise RuntimeError(f"CONNACK refused: {head!r}")
    free = asyncio.Semaphore(window)
    acked = 0
    done = asyncio.Event()

    async def read_acks() -> None:
        nonlocal acked
        buf = b""
        while acked < count:
            data = await reader.read(65536)
            if not data:
                raise RuntimeError("broker closed the connection")
            buf += data
            i = 0
            while len(buf) - i >= 4:
                if buf[i] >> 4 != PUBACK_T:
                    raise RuntimeError(f"unexpected packet type {buf[i] >> 4}")
                i += 4
                acked += 1
                free.release()
            buf = buf[i:]
        done.set()

    acker = asyncio.create_task(read_acks())
    start = time.time()
    for n in range(count):
        await free.acquire()
        writer.write(publish_packet(topic, payload, qos=1, packet_id=n % 65535 + 1))
        if n % 64 == 0:
            await writer.drain()
    await writer.drain()
    await done.wait()
    end = time.time()
    await acker
    writer.write(b"\xe0\x00")
    writer.close()
    return start, end


def one_run(tool: JmsTool, jms_dest: str, mqtt_port: int, mqtt_topic: str, count: int, payload: bytes,
            window: int, pids: dict[str, int]) -> dict[str, Any]:
    receiver = tool.start_receiver(jms_dest, count, timeout=max(60.0, count / 200))
    cpu0 = {name: proc_cpu(pid) or 0.0 for name, pid in pids.items()}
    start, acked = asyncio.run(publish_qos1("127.0.0.1", mqtt_port, mqtt_topic, count, payload, window))
    got = receiver.result()
    received = time.time()
    if len(got) != count:
        raise RuntimeError(f"JMS consumer got {len(got)} of {count}")
    cpu = {f"cpu_s_{name}": round((proc_cpu(pid) or 0.0) - cpu0[name], 2) for name, pid in pids.items()}
    return {"publish_per_s": count / (acked - start), "delivered_per_s": count / (received - start),
            "seconds": received - start, "message_class": got[0]["class"].rsplit(".", 1)[-1], **cpu}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--payload", type=int, default=100)
    ap.add_argument("--window", type=int, default=256)
    ap.add_argument("--non-persistent-broker", action="store_true", help="ActiveMQ without KahaDB")
    ap.add_argument("--native", action="store_true", help="also the native JMS connector (needs jpype1)")
    ap.add_argument("--warmup", type=int, default=5000,
                    help="messages per path before the measured rounds (the JVMs' JIT: a gateway runs for days)")
    ap.add_argument("--queue", action="store_true",
                    help="to ActiveMQ queues (persistent messages in KahaDB) instead of topics; ActiveMQ's mqtt:// "
                         "path reaches its queue through a forwarding composite topic (MQTT publishes to topics)")
    args = ap.parse_args(argv)
    payload = (b"bench-payload " * (args.payload // 14 + 1))[:args.payload]

    work = Path(tempfile.mkdtemp(prefix="mqbridge-bench-amq-"))
    tag = uuid.uuid4().hex[:8]
    kind = "queue" if args.queue else "topic"
    # ActiveMQ's MQTT transport publishes to topic bn.<tag>; with --queue the broker forwards it to queue bn.<tag>
    forward = (f'<destinationInterceptors><virtualDestinationInterceptor><virtualDestinations><compositeTopic '
               f'name="bn.{tag}" forwardOnly="true"><forwardTo><queue physicalName="bn.{tag}"/></forwardTo>'
               f'</compositeTopic></virtualDestinations></virtualDestinationInterceptor></destinationInterceptors>')
    broker = ActiveMQ(work / "activemq", persistent=not args.non_persistent_broker,
                      extra_xml=forward if args.queue else "")
    ep = broker.start()
    tool = JmsTool(JmsTool.compile(work / "jmstool"), ep.openwire_url)
    gw: GatewayProcess | None = None
    results: dict[str, list[dict[str, Any]]] = {"native": [], "mqbridge": []}
    if args.native:
        results["mqbridge-native"] = []
    try:
        rules = work / "rules.yaml"
        connectors: dict[str, Any] = {"amq": {"type": "jms", "host": ep.host, "port": ep.stomp_port}}
        routes = [{"name": "bench", "from": {"mqtt": "bench/#"}, "to": {"connector": "amq", kind: f"bg.{tag}"}}]
        if args.native:
            connectors["amqn"] = {"type": "jms", "client": "native", "jars": NATIVE_JARS,
                                  "connection_factory": "org.apache.activemq.ActiveMQConnectionFactory",
                                  # docs/connectors.md: ActiveMQ's send path without the copy, sent async
                                  # (the transaction's commit is what confirms the batch)
                                  "factory_properties": {"brokerURL": ep.openwire_url, "copyMessageOnSend": False,
                                                         "useAsyncSend": True}}
            routes.append({"name": "bench-native", "from": {"mqtt": "benchn/#"},
                           "to": {"connector": "amqn", kind: f"bj.{tag}"}})
        rules.write_text(json.dumps({"connectors": connectors, "routes": routes}))
        (work / "gw").mkdir()
        gw = GatewayProcess(work / "gw", {"rules": str(rules), "logging": {"level": "WARNING"}}).start()
        assert broker.proc is not None and gw.proc is not None
        pids = {"activemq": broker.proc.pid, "mqbridge": gw.proc.pid}
        native = (tool, f"{kind}://bn.{tag}", ep.mqtt_port, f"bn/{tag}")
        paths = {"native": native, "mqbridge": (tool, f"{kind}://bg.{tag}", gw.port, "bench/x")}
        if args.native:
            paths["mqbridge-native"] = (tool, f"{kind}://bj.{tag}", gw.port, "benchn/x")
        for path in paths.values():   # warm every path (JIT, connections, the routes' links)
            one_run(*path, args.warmup, payload, args.window, pids)
        for r in range(args.rounds):   # interleaved, the order reversed every other round
            for name, path in (list(paths.items()) if r % 2 == 0 else list(reversed(paths.items()))):
                results[name].append(one_run(*path, args.count, payload, args.window, pids))
    finally:
        if gw is not None:
            gw.stop()
        tool.close()
        broker.stop()
    summary = {
        path: {
            "delivered_per_s_median": statistics.median(r["delivered_per_s"] for r in runs),
            "delivered_per_s_best": max(r["delivered_per_s"] for r in runs),
            "publish_per_s_median": statistics.median(r["publish_per_s"] for r in runs),
            "message_class": runs[0]["message_class"],
        } for path, runs in results.items()
    }
    ratio = summary["mqbridge"]["delivered_per_s_median"] / summary["native"]["delivered_per_s_median"]
    print(json.dumps({"count": args.count, "payload": args.payload, "window": args.window, "destination": kind,
                      "loadavg": os.getloadavg(),
                      "persistent_broker": not args.non_persistent_broker, "cpus": os.cpu_count(),
                      "runs": results, "summary": summary, "ratio_mqbridge_to_native": ratio}, indent=1))
    print()
    print("| path | delivered to JMS consumer /s (median) | best | QoS 1 publish acked /s (median) | JMS class |")
    print("|---|---:|---:|---:|---|")
    for path, s in summary.items():
        print(f"| {path} | {s['delivered_per_s_median']:,.0f} | {s['delivered_per_s_best']:,.0f} | "
              f"{s['publish_per_s_median']:,.0f} | {s['message_class']} |")
    print(f"\nmqbridge / native (median delivered): {ratio:.2f}x")
    if args.native:
        n = summary["mqbridge-native"]["delivered_per_s_median"]
        print(f"mqbridge-native / native: {n / summary['native']['delivered_per_s_median']:.2f}x; "
              f"mqbridge-native / mqbridge (STOMP): {n / summary['mqbridge']['delivered_per_s_median']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
