"""The broker's fan-out cost without sockets: CPU per QoS 0 delivery in the protocol core.

The socket benchmark (run_broker_bench.py) swings by 1.5x from run to run on this VM, more than a code
change moves it. This one drives the sans-IO core (``ConnectionDriver.receive``, as tests/test_broker_sans_io.py
does): one publisher's PUBLISH bytes in, 50 subscribers' output collected by ports that only count bytes,
no syscalls. It measures the broker's own Python per delivery (decode, match, deliver, queue) by process
CPU time, and with ``--code NAME=TREE`` runs another source tree in alternation, each in a fresh process.

    .venv/bin/python bench/bench_fanout_core.py --code base=../wt/base --rounds 5
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CASES = {   # name -> (protocol level, user properties per publication, Topic Alias)
    "v311": (4, 0, False),
    "v5": (5, 0, False),
    "v5-props": (5, 2, False),
    "v5-alias": (5, 2, True),   # the publisher names the topic once, then sends only the alias
}


def _one(case: str, subscribers: int, publications: int) -> dict[str, float]:
    """Runs inside the child process (PYTHONPATH: the tree under test)."""
    from bridge.config import BrokerConfig
    from bridge.mqtt import packets as P
    from bridge.mqtt import properties as PR
    from bridge.mqtt.broker import Broker
    from bridge.mqtt.driver import ConnectionDriver
    from bridge.mqtt.store import Store

    class Loop:
        def call_soon_threadsafe(self, callback, *args) -> None:
            callback(*args)

        call_soon = call_soon_threadsafe

        def is_closed(self) -> bool:
            return False

    class Port:   # connection.Port, counting what it is given
        def __init__(self) -> None:
            self.bytes = 0
            self.packets = 0

        def queue_write(self, data: bytes) -> None:
            self.bytes += len(data)
            self.packets += 1

        def queue_qos0(self, data: bytes, limit: int) -> bool:
            self.bytes += len(data)
            self.packets += 1
            return True

        def buffered(self) -> int:
            return 0

        def abort(self) -> None: ...

        def final(self, data: bytes) -> None: ...

        def unhold(self) -> None: ...

    level, nprops, alias = CASES[case]
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "broker.db")
        broker = Broker(BrokerConfig(), store)
        broker.recover(store.open())
        store.start(Loop())
        label = broker.config.listeners[0].label()
        ports = []
        for i in range(subscribers):
            port = Port()
            driver = ConnectionDriver(broker, port=port, peer=f"127.0.0.1:{i}", listener=label, now=0.0)
            driver.receive(P.encode(P.Connect(level, f"s{i}")) + P.encode(P.Subscribe(1, (("b/0", 0),)), level), 0.0)
            ports.append(port)
        pub = Port()
        pdriver = ConnectionDriver(broker, port=pub, peer="127.0.0.1:p", listener=label, now=0.0)
        pdriver.receive(P.encode(P.Connect(level, "pub")), 0.0)
        props = {PR.USER_PROPERTY: [(f"k{i}", f"value-{i}") for i in range(nprops)]} if nprops else {}
        if alias:
            props[PR.TOPIC_ALIAS] = 1
            pdriver.receive(P.encode(P.Publish("b/0", b"x" * 64, 0, properties=props), level), 0.0)
        one = P.encode(P.Publish("" if alias else "b/0", b"x" * 64, 0, properties=props or None), level)
        chunk = one * 100
        for port in ports:
            port.packets = 0
        warm = 2_000
        for _ in range(warm // 100):
            pdriver.receive(chunk, 1.0)
        t0 = time.process_time()
        for _ in range(publications // 100):
            pdriver.receive(chunk, 1.0)
        cpu = time.process_time() - t0
        delivered = sum(p.packets for p in ports) - warm * subscribers
        store.close()
    assert delivered == publications * subscribers, (delivered, publications * subscribers)
    return {"cpu_s": cpu, "deliveries": delivered, "us_per_delivery": 1e6 * cpu / delivered}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", action="append", choices=sorted(CASES), help="default: all")
    ap.add_argument("--subscribers", type=int, default=50)
    ap.add_argument("--publications", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--code", action="append", default=[], metavar="NAME=TREE", help="another source tree")
    ap.add_argument("--output", type=Path)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(_one(a.child, a.subscribers, a.publications)))
        return 0
    trees = {"this": ROOT, **{n: Path(t).resolve() for n, t in (c.split("=", 1) for c in a.code)}}
    results: dict[str, dict[str, list[float]]] = {}
    loads = []
    for r in range(a.rounds):
        for case in a.case or list(CASES):
            for name, tree in (trees.items() if r % 2 == 0 else reversed(trees.items())):
                loads.append(os.getloadavg()[0])
                out = subprocess.run([sys.executable, __file__, "--child", case, "--subscribers", str(a.subscribers),
                                      "--publications", str(a.publications)], capture_output=True, text=True,
                                     cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, check=True)
                us = json.loads(out.stdout.strip().splitlines()[-1])["us_per_delivery"]
                results.setdefault(case, {}).setdefault(name, []).append(us)
                print(f"round {r + 1} {case:9s} {name:6s} {us:.3f} us/delivery", flush=True)
    print(f"\nload average (1 min) during the runs: {min(loads):.2f}-{max(loads):.2f}")
    for case, by_tree in results.items():
        meds = {n: statistics.median(v) for n, v in by_tree.items()}
        line = ", ".join(f"{n} {m:.3f} us (min {min(by_tree[n]):.3f})" for n, m in meds.items())
        ratio = ""
        if "this" in meds and len(meds) > 1:
            ratio = "; " + ", ".join(f"{n}/this {meds[n] / meds['this']:.2f}x" for n in meds if n != "this")
        print(f"{case:9s} median CPU per delivery: {line}{ratio}")
    if a.output:
        a.output.write_text(json.dumps({"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                        "subscribers": a.subscribers, "publications": a.publications,
                                        "load": [min(loads), max(loads)], "us_per_delivery": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
