"""Resource-limit probes (issue #13): what one hostile or slow client costs the broker in memory.

Each (probe, broker) run starts a fresh broker on a free 127.0.0.1 port, samples its RSS from /proc
every 20 ms while the probe runs, and reports the idle RSS before, the peak, and the RSS once the
probe's clients have gone. Brokers: mqbridge (this tree, or ``--code TREE``) and Debian's mosquitto in
its default configuration (only its own port, anonymous clients, a log file), run back to back.

Probes:
  preconnect-connect  N connections each send a fixed header announcing a 10 MB CONNECT, then stream
                      its body as fast as the broker takes it
  preconnect-publish  the same with a PUBLISH as the first packet
  slow-1k, slow-16k   a QoS 1 subscriber that never reads its socket; a publisher sends QoS 1
                      messages of 1 KiB (120,000) or 16 KiB (8,192) to it
  qos2-unreleased     one client sends QoS 2 PUBLISHes of 16 KiB (packet ids 1..4,000) and never PUBREL

    python bench/probe_limits.py                          # everything, ~1-2 minutes
    python bench/probe_limits.py -p preconnect-connect -b mqbridge --code base=/tmp/base-tree

Results: a table on stdout and bench/results/limits-latest.json.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import selectors
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from run_broker_bench import Broker, Mosquitto, _raise_nofile, _wait_port  # noqa: E402

from bridge.mqtt import packets as P  # noqa: E402

MB = 1_000_000


# ------------------------------------------------------------------------------------------------
# Brokers
# ------------------------------------------------------------------------------------------------


class Mqbridge(Broker):
    """``mqbridge serve`` with its default limits, run by this interpreter from ``code``."""

    def __init__(self, workdir: Path, code: Path, label: str, limits: dict[str, Any],
                 broker: dict[str, Any] | None = None) -> None:
        super().__init__(workdir)
        self.code = code
        self.label = label
        self.limits = limits
        self.broker = broker or {}   # more broker settings (e.g. password_file)

    def start(self) -> None:
        data = self.dir / "data"
        cfg = self.dir / "mqbridge.yaml"
        cfg.write_text(json.dumps({
            "data_dir": str(data),
            "broker": {"listeners": [{"host": "127.0.0.1", "port": self.port}], "sys_interval": 0,
                       "limits": self.limits, **self.broker},
            "admin": {"enabled": False},
            "logging": {"level": "WARNING"},
        }))
        log = open(self.dir / "broker.log", "wb")  # noqa: SIM115 - the child's
        self.proc = subprocess.Popen([sys.executable, "-m", "bridge", "serve", "-c", str(cfg)], cwd=self.code,
                                     env={**os.environ, "PYTHONPATH": str(self.code)},
                                     stdout=log, stderr=subprocess.STDOUT, preexec_fn=_raise_nofile)
        log.close()
        t_end = time.monotonic() + 30
        while not (data / "runtime.json").exists():
            if self.proc.poll() is not None or time.monotonic() > t_end:
                raise RuntimeError(f"mqbridge did not start: {(self.dir / 'broker.log').read_text()[-2000:]}")
            time.sleep(0.05)
        _wait_port(self.port, self.proc)


def rss_kib(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = int(line.split()[1])
    return out


class Sampler:
    """The broker's RSS every 20 ms on a thread; ``peak`` in KiB."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_kib(self.pid).get("VmRSS", 0))
            self._stop.wait(0.02)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_kib(self.pid).get("VmHWM", 0))


# ------------------------------------------------------------------------------------------------
# Probes (plain sockets; each returns what it saw)
# ------------------------------------------------------------------------------------------------


def preconnect_flood(port: int, first: int, *, connections: int, announce: int,
                     cap: float = 30.0) -> dict[str, Any]:
    """``connections`` sockets each announce a packet of ``announce`` bytes (fixed header ``first``)
    and stream its body; a socket is done when all is sent or the broker closed it."""
    header = bytes((first,)) + P.encode_length(announce)
    chunk = b"\0" * 65536
    sel = selectors.DefaultSelector()
    sent: dict[socket.socket, int] = {}
    closed_after: list[int] = []   # body bytes the broker had taken when it closed a connection
    t0 = time.monotonic()
    for _ in range(connections):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(header)
        s.setblocking(False)
        sent[s] = 0
        sel.register(s, selectors.EVENT_WRITE | selectors.EVENT_READ)
    done: list[socket.socket] = []
    deadline = t0 + cap
    while sel.get_map() and time.monotonic() < deadline:
        for key, events in sel.select(0.5):
            s = key.fileobj
            assert isinstance(s, socket.socket)
            try:
                if events & selectors.EVENT_READ and not s.recv(65536):
                    raise ConnectionResetError
                if events & selectors.EVENT_WRITE:
                    sent[s] += s.send(chunk[:min(len(chunk), announce - sent[s])])
                    if sent[s] >= announce:
                        sel.unregister(s)
                        done.append(s)
            except (ConnectionError, OSError):
                sel.unregister(s)
                closed_after.append(sent[s])
                s.close()
    fed = time.monotonic() - t0
    time.sleep(1.0)   # what the broker does with the complete packets
    # the fully sent ones: did the broker close them by now?
    for s in done:
        s.setblocking(True)
        s.settimeout(0.2)
        with contextlib.suppress(OSError):
            if not s.recv(1):
                closed_after.append(sent[s])
    for s in list(sent):
        s.close()
    return {"connections": connections, "announced_bytes": announce,
            "closed_by_broker": len(closed_after),
            "closed_within_64k": sum(1 for n in closed_after if n <= 65536),
            "body_bytes_sent_before_close_max": max(closed_after, default=0),
            "body_bytes_sent_total": sum(sent.values()), "seconds": round(fed, 2)}


class RawMqtt:
    """Minimal blocking MQTT 3.1.1 client on a socket (encoding by bridge.mqtt.packets)."""

    def __init__(self, port: int, client_id: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.reader = P.PacketReader()
        self.pending: list[P.Packet] = []
        self.sock.sendall(P.encode(P.Connect(P.MQTT_311, client_id, True, 0)))
        assert isinstance(self.recv(), P.Connack)

    def recv(self) -> P.Packet:
        while not self.pending:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed by broker")
            self.pending.extend(self.reader.feed(data))
        return self.pending.pop(0)


def slow_consumer(port: int, *, size: int, count: int, window: int = 200) -> dict[str, Any]:
    """A QoS 1 subscriber that never reads after its SUBACK; a QoS 1 publisher sends ``count``
    messages of ``size`` bytes (at most ``window`` unacknowledged)."""
    sub = RawMqtt(port, "probe-slow-sub")
    sub.sock.sendall(P.encode(P.Subscribe(1, (("probe/slow", 1),))))
    assert isinstance(sub.recv(), P.Suback)
    pub = RawMqtt(port, "probe-pub")
    acked = 0
    cond = threading.Condition()

    def read_acks() -> None:
        nonlocal acked
        with contextlib.suppress(OSError, ConnectionError):
            while acked < count:
                pub.recv()
                with cond:
                    acked += 1
                    cond.notify()

    reader = threading.Thread(target=read_acks, daemon=True)
    reader.start()
    payload = b"x" * size
    t0 = time.monotonic()
    for i in range(count):
        with cond:
            if not cond.wait_for(lambda i=i: i - acked < window, timeout=30):
                break
        pub.sock.sendall(P.encode(P.Publish("probe/slow", payload, 1, False, False, i % 65535 + 1)))
    with cond:
        cond.wait_for(lambda: acked >= count, timeout=30)
    elapsed = time.monotonic() - t0
    time.sleep(1.0)   # the broker settles (queues what reached it)
    pub.sock.close()
    sub.sock.close()
    return {"size": size, "published": count, "acknowledged": acked, "seconds": round(elapsed, 2)}


def qos2_unreleased(port: int, *, size: int, count: int) -> dict[str, Any]:
    """QoS 2 PUBLISH with packet ids 1..count, never PUBREL; counts PUBRECs until the broker closes."""
    c = RawMqtt(port, "probe-qos2")
    payload = b"y" * size
    pubrecs = 0
    closed = False
    stop = threading.Event()

    def read() -> None:
        nonlocal pubrecs, closed
        try:
            while not stop.is_set():
                packet = c.recv()
                if isinstance(packet, P.PacketIdOnly) and packet.type == P.PUBREC:
                    pubrecs += 1
        except (OSError, ConnectionError):
            closed = True

    t = threading.Thread(target=read, daemon=True)
    t.start()
    sent = 0
    t0 = time.monotonic()
    with contextlib.suppress(OSError):
        for pid in range(1, count + 1):
            c.sock.sendall(P.encode(P.Publish("probe/qos2", payload, 2, False, False, pid)))
            sent += 1
    deadline = time.monotonic() + 10
    while not closed and pubrecs < sent and time.monotonic() < deadline:
        time.sleep(0.05)
    elapsed = time.monotonic() - t0
    time.sleep(0.5)
    stop.set()
    c.sock.close()
    return {"size": size, "sent": sent, "pubrecs": pubrecs, "closed_by_broker": closed,
            "seconds": round(elapsed, 2)}


def probes(connections: int, announce: int) -> dict[str, Callable[[int], dict[str, Any]]]:
    return {
        "preconnect-connect": lambda port: preconnect_flood(port, 0x10, connections=connections, announce=announce),
        "preconnect-publish": lambda port: preconnect_flood(port, 0x30, connections=connections, announce=announce),
        "slow-1k": lambda port: slow_consumer(port, size=1024, count=120_000),
        "slow-16k": lambda port: slow_consumer(port, size=16 * 1024, count=8192),
        "qos2-unreleased": lambda port: qos2_unreleased(port, size=16 * 1024, count=4000),
    }


# ------------------------------------------------------------------------------------------------
# Runner
# ------------------------------------------------------------------------------------------------


def run_one(name: str, probe: Callable[[int], dict[str, Any]], label: str, code: Path,
            limits: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"mqb-limits-{label}-") as tmp:
        broker: Broker = (Mosquitto(Path(tmp), persistence=False, default=True) if label == "mosquitto"
                          else Mqbridge(Path(tmp), code, label, limits))
        broker.start()
        try:
            time.sleep(0.5)
            idle = rss_kib(broker.pid).get("VmRSS", 0)
            with Sampler(broker.pid) as sampler:
                result = probe(broker.port)
            time.sleep(2.0)   # clients gone: is the memory given back?
            after = rss_kib(broker.pid).get("VmRSS", 0)
            alive = broker.proc is not None and broker.proc.poll() is None
        finally:
            info = broker.stop()
    return {"probe": name, "broker": label, "idle_rss_mib": round(idle / 1024, 1),
            "peak_rss_mib": round(sampler.peak / 1024, 1), "growth_mib": round((sampler.peak - idle) / 1024, 1),
            "after_rss_mib": round(after / 1024, 1), "broker_alive": alive, **result, **info}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-p", "--probe", action="append", help="probe name (repeatable; default: all)")
    ap.add_argument("-b", "--broker", action="append",
                    help="mqbridge, mosquitto, or mqbridge@NAME for a --code tree (default: mqbridge, mosquitto)")
    ap.add_argument("--code", action="append", default=[], metavar="NAME=TREE",
                    help="another source tree to run as broker mqbridge@NAME")
    ap.add_argument("--connections", type=int, default=150)
    ap.add_argument("--announce", type=int, default=10 * MB, help="bytes each pre-CONNECT flood packet announces")
    ap.add_argument("--limits", type=json.loads, default={}, metavar="JSON",
                    help='mqbridge broker.limits overrides, e.g. \'{"max_queued": 1000}\'')
    ap.add_argument("--out", type=Path, default=HERE / "results" / "limits-latest.json")
    args = ap.parse_args()
    trees = {"": ROOT}
    for item in args.code:
        key, _, tree = item.partition("=")
        trees[key] = Path(tree).resolve()
    table = probes(args.connections, args.announce)
    chosen = args.probe or list(table)
    brokers = args.broker or ["mqbridge", "mosquitto"]
    results = []
    for name in chosen:
        for label in brokers:
            code = trees[label.partition("@")[2]] if label.startswith("mqbridge") else ROOT
            res = run_one(name, table[name], label, code, args.limits if label.startswith("mqbridge") else {})
            results.append(res)
            extra = {k: v for k, v in res.items() if k not in ("probe", "broker", "idle_rss_mib", "peak_rss_mib",
                                                                "growth_mib", "after_rss_mib")}
            print(f"{name:<20} {label:<16} idle {res['idle_rss_mib']:>7} MiB  peak {res['peak_rss_mib']:>7} MiB  "
                  f"(+{res['growth_mib']})  after {res['after_rss_mib']:>7} MiB  {extra}", flush=True)
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text(json.dumps({"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "limits": args.limits,
                                    "load_avg_1m": os.getloadavg()[0], "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
