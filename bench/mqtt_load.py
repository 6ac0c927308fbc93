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

The wire bytes are hand-rolled (CONNECT/SUBSCRIBE/PUBLISH/acks); ``selfcheck`` decodes them
with mqbridge's codec (bridge.mqtt.packets) to show they are well formed.

This module is the command line and the import point (``from bench.mqtt_load import ...``, or
``from mqtt_load import ...`` with bench/ on sys.path); the parts live beside it: mqtt_load_wire
(packet bytes, selfcheck), mqtt_load_clients (Spec, the client Protocols), mqtt_load_run (one
scenario, run_scenario), mqtt_load_idle (idle connections), mqtt_load_ceiling (null peers) and
mqtt_load_proc (event loop, fd limit, /proc metrics).

Library use: ``run_scenario(host, port, Spec(...), broker_pid=...)`` returns a dict of results.
CLI: ``python bench/mqtt_load.py run --port 1883 --qos 1 --publishers 4 ...`` against any broker.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields
from pathlib import Path

# Run as `python bench/mqtt_load.py` or imported as `mqtt_load`, only bench/ is on sys.path; the parts
# are imported as bench.mqtt_load_* (one name each, also in the spawned child processes).
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from bench.mqtt_load_ceiling import ceiling  # noqa: E402
from bench.mqtt_load_clients import PubProto, Spec, Stats, SubProto  # noqa: E402
from bench.mqtt_load_idle import IdleProto, run_idle  # noqa: E402
from bench.mqtt_load_proc import proc_cpu, proc_mem  # noqa: E402
from bench.mqtt_load_run import run_scenario, summarize  # noqa: E402
from bench.mqtt_load_wire import (  # noqa: E402
    CONNACK_T,
    DISCONNECT,
    PINGREQ,
    PINGRESP_T,
    PUBACK_T,
    PUBCOMP_T,
    PUBLISH_T,
    PUBREC_T,
    PUBREL_T,
    SUBACK_T,
    TS_BYTES,
    connect_packet,
    publish_packet,
    publish_parts,
    selfcheck,
    subscribe_packet,
    varlen,
)

__all__ = [
    "CONNACK_T", "DISCONNECT", "PINGREQ", "PINGRESP_T", "PUBACK_T", "PUBCOMP_T", "PUBLISH_T", "PUBREC_T",
    "PUBREL_T", "SUBACK_T", "TS_BYTES", "IdleProto", "PubProto", "Spec", "Stats", "SubProto", "ceiling",
    "connect_packet", "main", "proc_cpu", "proc_mem", "publish_packet", "publish_parts", "run_idle",
    "run_scenario", "selfcheck", "subscribe_packet", "summarize", "varlen",
]


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
