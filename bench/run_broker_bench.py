"""Broker benchmark: mqbridge's built-in MQTT broker side by side with Debian's mosquitto.

Each (scenario, broker) run starts a fresh broker on a free 127.0.0.1 port with its own temp
directory, drives it with bench/mqtt_load.py (publishers and subscribers in separate processes),
samples the broker's CPU and RSS from /proc, and stops it. mosquitto and mqbridge runs alternate
scenario by scenario so that background load on the machine hits both alike.

    .venv/bin/python bench/run_broker_bench.py                  # everything, ~3-4 minutes
    .venv/bin/python bench/run_broker_bench.py -s qos0-64 -s qos1 --duration 3
    .venv/bin/python bench/run_broker_bench.py -s qos0-64 --profile   # py-spy on mqbridge
    .venv/bin/python bench/run_broker_bench.py -s idle -b mqbridge-FULL -b mqbridge-FULL+compact   # listener transport

Results: a table on stdout and bench/results/broker-latest.json.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import random
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(ROOT))

from mqtt_load import Spec, ceiling, run_scenario  # noqa: E402

from bridge.config import LimitsConfig  # noqa: E402

# the tuned mosquitto peers take mqbridge's own default limits (until session 18, 2026-11-27, they had 32 in
# flight and 100,000 queued, mqbridge's limits of an older day: mqbridge has had 128 and 1,000 since)
_LIMITS = LimitsConfig()

VENV_PY = ROOT / ".venv" / "bin" / "python"
MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A port free now, below the kernel's ephemeral range (32768 up): a load generator's client connection
    never takes it, so one left in TIME-WAIT cannot keep a broker from binding it; never handed out twice."""
    rng = random.Random()
    for _ in range(1000):
        port = rng.randrange(10_000, 32_768)
        if port in _HANDED_OUT:
            continue
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    raise RuntimeError("no free port in 10000-32767")


def _raise_nofile() -> None:  # runs in the broker child before exec
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 20) -> None:
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode} before listening")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"broker did not listen on {port} within {timeout}s")


class Broker:
    """A broker process started for one run."""

    label = "?"

    def __init__(self, workdir: Path) -> None:
        self.dir = workdir
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def counters(self, timeout: float = 5.0) -> dict[str, Any]:
        return {}

    def stop(self) -> dict[str, Any]:
        """SIGTERM, then SIGKILL after 15 s; returns exit status and the tail of the log."""
        info: dict[str, Any] = {}
        if self.proc is None:
            return info
        if self.proc.poll() is not None:
            info["crashed"] = f"exited with {self.proc.returncode} during the run"
        else:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                info["hung"] = "did not stop within 15 s of SIGTERM; killed"
                self.proc.kill()
                self.proc.wait()
        log = self.dir / "broker.log"
        if log.exists():
            tail = [ln for ln in log.read_text(errors="replace").splitlines()
                    if "ERROR" in ln or "Traceback" in ln or "CRITICAL" in ln or "Error" in ln][-5:]
            if tail:
                info["log_errors"] = tail
        return info


# "+acl" variants: both brokers read this acl_file. The load generator's anonymous clients may use b/# but a
# denied subtree: their "b/#" is only partly readable, so every delivery is checked (mosquitto: always)
BENCH_ACL = "topic readwrite b/#\ntopic deny b/secret/#\n"


def _acl_file(workdir: Path) -> Path:
    path = workdir / "acl"
    path.write_text(BENCH_ACL)
    return path


class Mosquitto(Broker):
    """``default``: Debian's mosquitto as shipped, with only what a loopback test needs (its own port,
    anonymous clients on that listener, a log file); otherwise tuned to mqbridge's limits (below).
    ``acl``: with BENCH_ACL as its acl_file."""

    def __init__(self, workdir: Path, persistence: bool, default: bool = False, acl: bool = False,
                 unbounded: bool = False) -> None:
        """``unbounded``: no limit on a session's queued messages (``max_queued_messages 0``): nothing accepted
        is dropped, as mqbridge's durable path drops nothing (its publishers wait for the commit instead)."""
        super().__init__(workdir)
        self.persistence = persistence
        self.default = default
        self.acl = acl
        self.unbounded = unbounded
        self.label = "mosquitto-default" if default else "mosquitto+persist" if persistence else "mosquitto"
        self.label += ("+unbounded" if unbounded else "") + ("+acl" if acl else "")

    def start(self) -> None:
        conf = self.dir / "mosquitto.conf"
        if self.default:
            conf.write_text(f"listener {self.port} 127.0.0.1\nallow_anonymous true\nuser root\n"
                            f"log_dest file {self.dir / 'broker.log'}\n"
                            + (f"acl_file {_acl_file(self.dir)}\n" if self.acl else ""))
            self.proc = subprocess.Popen([MOSQUITTO, "-c", str(conf)], stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, preexec_fn=_raise_nofile)
            _wait_port(self.port, self.proc)
            return
        lines = [
            f"listener {self.port} 127.0.0.1",
            "allow_anonymous true",
            "max_connections -1",
            "user root",                      # stay root so the temp dir stays writable
            "set_tcp_nodelay true",           # as mqbridge does
            f"max_inflight_messages {_LIMITS.max_inflight}",   # = mqbridge limits.max_inflight
            f"max_queued_messages {0 if self.unbounded else _LIMITS.max_queued}",   # = mqbridge limits.max_queued
            "sys_interval 0",
            f"log_dest file {self.dir / 'broker.log'}",
            "log_type error", "log_type warning",
        ]
        if self.persistence:
            lines += ["persistence true", f"persistence_location {self.dir}/",
                      "persistence_file mosquitto.db"]
        else:
            lines += ["persistence false"]
        conf.write_text("\n".join(lines) + "\n")
        self.proc = subprocess.Popen([MOSQUITTO, "-c", str(conf)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, preexec_fn=_raise_nofile)
        _wait_port(self.port, self.proc)


class Mqbridge(Broker):
    def __init__(self, workdir: Path, synchronous: str = "FULL", code: Path = ROOT, acl: bool = False,
                 transport: str | None = None, convlog: dict[str, Any] | None = None) -> None:
        super().__init__(workdir)
        self.convlog = convlog    # e.g. {"enabled": False}: a ceiling measure without the conversion log
        self.synchronous = synchronous
        self.code = code          # the source tree the broker runs from (--code: A/B of two commits)
        self.acl = acl
        self.transport = transport
        self.label = f"mqbridge-{synchronous}" + ("+acl" if acl else "")
        self.admin_port = free_port()

    def counters(self, timeout: float = 5.0) -> dict[str, Any]:
        """Broker-side counters from the admin /status: drops and group-commit efficiency."""
        t0 = time.monotonic()
        try:
            req = urllib.request.Request(f"http://127.0.0.1:{self.admin_port}/status")
            token = self.dir / "data" / "admin.token"   # the gateway's admin token (absent in older trees)
            if token.exists():
                req.add_header("Authorization", f"Bearer {token.read_text().strip()}")
            with urllib.request.urlopen(req, timeout=timeout) as r:
                st = json.loads(r.read())
        except (OSError, ValueError) as exc:
            return {"error": str(exc)}
        msgs, store = st.get("messages", {}), st.get("store", {})
        out = {"received": msgs.get("received"), "sent": msgs.get("sent"), "dropped": msgs.get("dropped"),
               "queued": msgs.get("queued"), "commits": store.get("commits"), "store_ops": store.get("ops"),
               "last_commit_ms": store.get("last_commit_ms")}
        out["admin_response_s"] = round(time.monotonic() - t0, 3)
        if out["commits"] and out["received"]:
            out["messages_per_commit"] = round(out["received"] / out["commits"], 1)
            out["store_ops_per_message"] = round((out["store_ops"] or 0) / out["received"], 2)
        return out

    def start(self) -> None:
        data = self.dir / "data"
        cfg = self.dir / "mqbridge.yaml"
        cfg.write_text(json.dumps({   # JSON is YAML
            "data_dir": str(data),
            "broker": {"listeners": [{"host": "127.0.0.1", "port": self.port, "max_connections": 0,  # idle: 10,000
                                      **({"transport": self.transport} if self.transport else {})}],
                       "sys_interval": 0,
                       "durability": {"synchronous": self.synchronous},
                       **({"acl_file": str(_acl_file(self.dir))} if self.acl else {})},
            "admin": {"enabled": True, "port": self.admin_port},   # loopback; read once after the run
            "logging": {"level": "WARNING"},
            **({"convlog": self.convlog} if self.convlog else {}),
        }))
        log = open(self.dir / "broker.log", "wb")
        self.proc = subprocess.Popen([str(VENV_PY), "-m", "bridge", "serve", "-c", str(cfg)], cwd=self.code,
                                     env={**os.environ, "PYTHONPATH": str(self.code)},
                                     stdout=log, stderr=subprocess.STDOUT, preexec_fn=_raise_nofile)
        log.close()
        t_end = time.monotonic() + 30
        while not (data / "runtime.json").exists():
            if self.proc.poll() is not None or time.monotonic() > t_end:
                raise RuntimeError(f"mqbridge did not start: {(self.dir / 'broker.log').read_text()[-2000:]}")
            time.sleep(0.05)
        _wait_port(self.port, self.proc)


# ------------------------------------------------------------------------------------------------
# Scenarios
# ------------------------------------------------------------------------------------------------


def scenarios(duration: float, idle: int) -> dict[str, tuple[Spec, list[str]]]:
    """name -> (spec, brokers). Durable scenarios compare mosquitto with persistence on against
    mqbridge with synchronous FULL (fsync per group commit) and NORMAL."""
    d = duration
    plain = ["mosquitto-default", "mosquitto", "mqbridge-FULL"]
    durable = ["mosquitto-default", "mosquitto+persist", "mqbridge-FULL", "mqbridge-NORMAL"]
    return {
        # QoS 0 closed loop: publishers keep at most ``budget`` messages sent and not yet delivered,
        # so the number is the throughput without drops (budget well below mqbridge's 8 MiB
        # qos0_buffer_bytes); the -flood variant is open loop and shows overload behaviour.
        "qos0-64": (Spec("qos0-64", qos=0, publishers=4, payload=64, budget=50_000, duration=d), plain),
        "qos0-1k": (Spec("qos0-1k", qos=0, publishers=4, payload=1024, budget=4_000, duration=d), plain),
        "qos0-64-flood": (Spec("qos0-64-flood", qos=0, publishers=4, payload=64, duration=d, idle_exit=8.0,
                               drain=20.0), plain),
        "qos1": (Spec("qos1", qos=1, publishers=4, payload=64, window=64, clean=False, duration=d), durable),
        # the same with persistent publishers (CleanSession=0): what recognising their QoS 1 re-sends costs
        "qos1-pubpersist": (Spec("qos1-pubpersist", qos=1, publishers=4, payload=64, window=64, clean=False,
                                 pub_clean=False, duration=d), durable),
        "qos2": (Spec("qos2", qos=2, publishers=4, payload=64, window=64, clean=False, duration=d), durable),
        "fanout-50": (Spec("fanout-50", qos=0, publishers=1, subscribers=50, payload=64, budget=2_000,
                           duration=d), plain),
        # the same under an ACL file (BENCH_ACL): each of the 50 deliveries per publication checked
        "fanout-50-acl": (Spec("fanout-50-acl", qos=0, publishers=1, subscribers=50, payload=64, budget=2_000,
                               duration=d), ["mosquitto-default", "mosquitto-default+acl", "mqbridge-FULL",
                                             "mqbridge-FULL+acl"]),
        "latency-qos0": (Spec("latency-qos0", qos=0, publishers=1, payload=64, rate=5000, latency=True,
                              duration=d), plain),
        "latency-qos1": (Spec("latency-qos1", qos=1, publishers=1, payload=64, rate=2000, window=1000,
                              clean=False, latency=True, duration=d), durable),
        "idle": (Spec("idle", idle=idle, hold=3.0, publishers=0), plain),
        "idle-v5": (Spec("idle-v5", idle=idle, hold=3.0, publishers=0, mqtt5=True), plain),
        # MQTT 5.0: the same shapes with level 5 clients; fan-out with 2 user properties per publication,
        # and with those and a Topic Alias (the publisher sends the topic once)
        "qos0-64-v5": (Spec("qos0-64-v5", qos=0, publishers=4, payload=64, budget=50_000, duration=d,
                            mqtt5=True), plain),
        "qos1-v5": (Spec("qos1-v5", qos=1, publishers=4, payload=64, window=64, clean=False, duration=d,
                         mqtt5=True), durable),
        "fanout-50-v5-props": (Spec("fanout-50-v5-props", qos=0, publishers=1, subscribers=50, payload=64,
                                    budget=2_000, duration=d, mqtt5=True, user_props=2), plain),
        "fanout-50-v5-alias": (Spec("fanout-50-v5-alias", qos=0, publishers=1, subscribers=50, payload=64,
                                    budget=2_000, duration=d, mqtt5=True, user_props=2, topic_alias=True), plain),
    }


# The one number per scenario that the table and the ratios use.
HEADLINE = {
    "qos0-64": ("delivered_per_s", "msg/s delivered"),
    "qos0-1k": ("delivered_per_s", "msg/s delivered"),
    "qos0-64-flood": ("delivered_per_s", "msg/s delivered"),
    "qos1": ("delivered_per_s", "msg/s end to end"),
    "qos1-pubpersist": ("delivered_per_s", "msg/s end to end"),
    "qos2": ("delivered_per_s", "msg/s end to end"),
    "fanout-50": ("delivered_per_s", "deliveries/s"),
    "fanout-50-acl": ("delivered_per_s", "deliveries/s"),
    "qos0-64-v5": ("delivered_per_s", "msg/s delivered"),
    "qos1-v5": ("delivered_per_s", "msg/s end to end"),
    "fanout-50-v5-props": ("delivered_per_s", "deliveries/s"),
    "fanout-50-v5-alias": ("delivered_per_s", "deliveries/s"),
    "latency-qos0": ("p50/p99", "us"),
    "latency-qos1": ("p50/p99", "us"),
    "idle": ("connected", "connections"),
    "idle-v5": ("connected", "connections"),
}


CODE_TREES: dict[str, Path] = {}   # --code NAME=TREE: label suffix "@NAME" -> source tree
# mqbridge-MODE+compact / +loop: the listener's `transport` (docs/broker.md "listeners[].transport"), any scenario
TRANSPORTS = ("compact", "loop")


def make_broker(label: str, workdir: Path) -> Broker:
    acl = label.endswith("+acl") or "+acl@" in label
    if label.startswith("mosquitto"):
        base = label.removesuffix("+acl")
        unbounded = base.endswith("+unbounded")
        base = base.removesuffix("+unbounded")
        return Mosquitto(workdir, persistence=base.endswith("+persist"), default=base == "mosquitto-default", acl=acl,
                         unbounded=unbounded)
    mode, _, code = label.split("-", 1)[1].partition("@")
    synchronous, *extras = mode.split("+")
    transport = next((e for e in extras if e in TRANSPORTS), None)
    convlog = {"nolog": {"enabled": False}, "nosidecar": {"parquet_sidecars": False}}
    broker = Mqbridge(workdir, synchronous=synchronous, code=CODE_TREES[code] if code else ROOT, acl=acl,
                      transport=transport, convlog=next((convlog[e] for e in extras if e in convlog), None))
    broker.label = label
    return broker


class PySpy:
    """py-spy record attached to the broker for the measured window; raw collapsed stacks."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.thread: threading.Thread | None = None
        self.exe = shutil.which("py-spy") or str(VENV_PY.parent / "py-spy")

    def attach(self, pid: int, seconds: float) -> None:
        def run() -> None:
            subprocess.run([self.exe, "record", "--pid", str(pid), "--duration", str(max(1, int(seconds))),
                            "--rate", "200", "--format", "raw", "--output", str(self.out), "--nonblocking",
                            *os.environ.get("MQB_PYSPY_ARGS", "").split()],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def wait(self) -> None:
        if self.thread is not None:
            self.thread.join(60)


def hot_spots(raw: Path, top: int = 15) -> dict[str, list[tuple[str, float]]]:
    """Self and inclusive time per function from py-spy's collapsed stacks (event-loop thread
    and store writer thread together; idle frames are kept, so % are of wall-clock samples)."""
    self_c: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack:
            continue
        count = int(n)
        total += count
        frames = [f.split(" (")[0] + " (" + f.split(" (")[1].split(":")[0].rsplit("/", 1)[-1] + ")"
                  if " (" in f else f for f in stack.split(";")]
        self_c[frames[-1]] += count
        for f in set(frames):
            incl[f] += count
    if not total:
        return {}
    return {"self": [(f, round(100 * c / total, 1)) for f, c in self_c.most_common(top)],
            "inclusive": [(f, round(100 * c / total, 1)) for f, c in incl.most_common(top + 10)]}


def run_one(spec: Spec, label: str, keep: Path | None, profile: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"mqb-bench-{label}-") as tmp:
        broker = make_broker(label, Path(tmp))
        broker.start()
        spy: PySpy | None = None
        if profile and label.startswith("mqbridge"):
            spy = PySpy(HERE / "results" / f"profile-{spec.name}-{label}.txt")
        at_window_end: dict[str, Any] = {}

        def on_window(w0: float, w1: float, pid: int = broker.pid) -> None:
            if spy is not None:
                spy.attach(pid, w1 - w0)
            # counters while the clients are still connected (sessions' drop counts go with them)
            timer = threading.Timer(max(0.0, w1 - time.monotonic() - 0.1),
                                    lambda: at_window_end.update(broker.counters(20.0)))
            timer.daemon = True
            timer.start()
        load0 = os.getloadavg()[0]
        try:
            res = run_scenario("127.0.0.1", broker.port, spec, broker_pid=broker.pid, on_window=on_window)
        except Exception as exc:
            res = {"scenario": spec.name, "error": f"{type(exc).__name__}: {exc}"}
        finally:
            counters = broker.counters()
            status = broker.stop()
        if counters:
            res["broker_counters"] = counters
        if at_window_end:
            res["broker_counters_window_end"] = at_window_end
        res["broker"] = label
        res["loadavg_1m_before"] = round(load0, 2)
        res.update(status)
        if spy is not None:
            spy.wait()
            if spy.out.exists():
                res["profile"] = hot_spots(spy.out)
                res["profile_file"] = str(spy.out.relative_to(ROOT))
        if keep is not None:
            shutil.copytree(tmp, keep / f"{spec.name}-{label}", dirs_exist_ok=True)
        return res


def headline(res: dict[str, Any]) -> str:
    if res.get("error"):
        return "ERROR"
    key, _ = HEADLINE.get(res["scenario"], ("delivered_per_s", ""))
    if key == "p50/p99":
        lat = res.get("latency_us") or {}
        return f"{lat.get('p50', '?')}/{lat.get('p99', '?')}"
    v = res.get(key)
    return f"{v:,}" if isinstance(v, int) else str(v)


def headline_value(res: dict[str, Any]) -> float | None:
    key, _ = HEADLINE.get(res["scenario"], ("delivered_per_s", ""))
    if key == "p50/p99":
        return (res.get("latency_us") or {}).get("p50")
    v = res.get(key)
    return float(v) if isinstance(v, (int, float)) else None


def _median(values: list[float]) -> float:
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def ratios(results: list[dict[str, Any]], metric: str = "headline",
           peer: str | None = None) -> dict[str, dict[str, float]]:
    """mqbridge / mosquitto per scenario and mqbridge mode, from the median over repeats
    (latency: mosquitto p50 / mqbridge p50, so > 1 is better for mqbridge everywhere).
    ``metric="efficiency"``: delivered messages per broker CPU-second instead of the headline.
    ``peer``: the mosquitto variant to divide by (default: the tuned one, with persistence where run)."""
    vals: dict[tuple[str, str], list[float]] = {}
    for r in results:
        if r.get("error"):
            continue
        v = headline_value(r) if metric == "headline" else r.get("delivered_per_broker_cpu_s")
        if v:
            vals.setdefault((r["scenario"], r["broker"]), []).append(float(v))
    med = {k: _median(v) for k, v in vals.items()}
    out: dict[str, dict[str, float]] = {}
    for (name, label), a in med.items():
        if not label.startswith("mqbridge"):
            continue
        b = med.get((name, peer)) if peer else med.get((name, "mosquitto+persist")) or med.get((name, "mosquitto"))
        if not b:
            continue
        lat = name.startswith("latency") and metric == "headline"
        out.setdefault(name, {})[label] = round(b / a if lat else a / b, 3)
    return out


def print_table(results: list[dict[str, Any]], rts: dict[str, dict[str, float]],
                rts_default: dict[str, dict[str, float]] | None = None) -> None:
    """``ratio``: over tuned mosquitto; ``vs dflt``: over mosquitto in its default configuration."""
    rts_default = rts_default or {}
    hdr = (f"{'scenario':<15} {'broker':<20} {'headline':>14}  {'unit':<17} {'ratio':>6} {'vs dflt':>7} {'brk cpu':>7} "
           f"{'msg/cpu-s':>10} {'pub/sub cpu':>11} {'deliv':>6} {'RSS MiB':>7}")
    print(hdr)
    print("-" * len(hdr))
    for r in results:
        name = r["scenario"]
        unit = HEADLINE.get(name, ("", ""))[1]
        ratio = rts.get(name, {}).get(r["broker"])
        dflt = rts_default.get(name, {}).get(r["broker"])
        rss = r.get("broker_rss_kib")
        gen = f"{r.get('pub_cpu', '-')}/{r.get('sub_cpu', '-')}" if "pub_cpu" in r or "sub_cpu" in r else "-"
        print(f"{name:<15} {r['broker']:<20} {headline(r):>14}  {unit:<17} "
              f"{(f'{ratio:.2f}x' if ratio else ''):>6} {(f'{dflt:.2f}x' if dflt else ''):>7} "
              f"{r.get('broker_cpu', r.get('broker_idle_cpu', '-'))!s:>7} "
              f"{r.get('delivered_per_broker_cpu_s', '-')!s:>10} {gen:>11} {r.get('delivery_ratio', '-')!s:>6} "
              f"{(f'{rss / 1024:.1f}' if rss else '-'):>7}")
        for key in ("errors", "crashed", "hung", "log_errors"):
            if r.get(key):
                print(f"    {key}: {r[key]}")


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {"python": platform.python_version(), "kernel": platform.release(),
                            "cores": os.cpu_count()}
    with contextlib.suppress(Exception):
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                info["cpu"] = line.split(":", 1)[1].strip()
    with contextlib.suppress(Exception), open("/proc/meminfo") as f:
        info["ram_gib"] = round(int(f.readline().split()[1]) / 1024 / 1024, 1)
    with contextlib.suppress(Exception):
        info["mosquitto"] = subprocess.run([MOSQUITTO, "-h"], capture_output=True, text=True).stdout.split("\n")[0]
    with contextlib.suppress(Exception):
        import uvloop
        info["uvloop"] = uvloop.__version__
    # the gateway's event loop (MQBRIDGE_EVENT_LOOP, passed on to mqbridge serve): auto = uvloop when installed
    info["mqbridge_event_loop"] = os.environ.get("MQBRIDGE_EVENT_LOOP", "auto")
    with contextlib.suppress(Exception):
        info["mqbridge_commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                                 capture_output=True, text=True).stdout.strip()
    return info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-s", "--scenario", action="append", help="run only these (repeatable)")
    ap.add_argument("-b", "--broker", action="append", help="run only these brokers (repeatable)")
    ap.add_argument("--duration", type=float, default=4.0, help="measured seconds per run")
    ap.add_argument("--idle", type=int, default=10_000, help="connections for the idle scenario")
    ap.add_argument("--repeat", type=int, default=1, help="run every (scenario, broker) N times, "
                    "interleaved; ratios use the medians")
    ap.add_argument("--no-ceiling", action="store_true", help="skip the generator ceiling check")
    ap.add_argument("--profile", action="store_true", help="py-spy record mqbridge during the window "
                    "(MQB_PYSPY_ARGS adds py-spy options, e.g. '--threads' or '--gil')")
    ap.add_argument("--keep", type=Path, help="copy each run's temp dir (configs, logs, stores) here")
    ap.add_argument("--output", type=Path, default=HERE / "results" / "broker-latest.json")
    ap.add_argument("--markdown", type=Path, metavar="JSON", help="print the README table of a results file")
    ap.add_argument("--code", action="append", default=[], metavar="NAME=TREE",
                    help="also run mqbridge from another source tree (e.g. a worktree of the commit before a "
                         "change) as broker mqbridge-MODE@NAME, interleaved with this checkout's runs")
    a = ap.parse_args(argv)
    for item in a.code:
        name, _, tree = item.partition("=")
        if not name or not tree or not (Path(tree) / "bridge").is_dir():
            ap.error(f"--code {item!r}: expected NAME=TREE with TREE a mqbridge source tree")
        CODE_TREES[name] = Path(tree).resolve()
    if a.markdown:
        print(markdown(json.loads(a.markdown.read_text())))
        return 0
    table = scenarios(a.duration, a.idle)
    names = a.scenario or list(table)
    unknown = [n for n in names if n not in table]
    if unknown:
        ap.error(f"unknown scenario(s) {unknown}; choose from {list(table)}")
    (HERE / "results").mkdir(exist_ok=True)
    started = dt.datetime.now(dt.UTC)
    results: list[dict[str, Any]] = []
    gen_ceiling = None
    if not a.no_ceiling:
        print("generator ceiling (null peers, 64 B) ...", flush=True)
        gen_ceiling = ceiling(64, 3.0)
        print(json.dumps(gen_ceiling))
    for name in names:
        spec, brokers = table[name]
        brokers = brokers + [b for b in a.broker or () if b.startswith("mqbridge")
                             and any(f"+{t}" in b for t in TRANSPORTS) and b not in brokers]
        brokers = [v for b in brokers for v in [b, *(f"{b}@{n}" for n in CODE_TREES if b.startswith("mqbridge"))]]
        for rep in range(a.repeat):
            for label in brokers:
                if a.broker and label.partition("@")[0] not in a.broker:
                    continue
                print(f"{name} on {label} ..." + (f" (run {rep + 1}/{a.repeat})" if a.repeat > 1 else ""),
                      flush=True)
                res = run_one(replace(spec), label, a.keep, a.profile)
                results.append(res)
    rts = ratios(results)
    print()
    print_table(results, rts, ratios(results, peer="mosquitto-default"))
    doc = {
        "date": started.isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, "bench/run_broker_bench.py", *(argv or sys.argv[1:])]),
        "machine": machine(),
        "generator_ceiling": gen_ceiling,
        "ratios_mqbridge_over_mosquitto": rts,
        "ratios_per_broker_cpu_second": ratios(results, "efficiency"),
        "ratios_mqbridge_over_mosquitto_default": ratios(results, peer="mosquitto-default"),
        "targets": targets(results, rts),
        "results": results,
    }
    a.output.parent.mkdir(parents=True, exist_ok=True)
    a.output.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"\nwrote {a.output.relative_to(ROOT) if a.output.is_relative_to(ROOT) else a.output}")
    for k, v in doc["targets"].items():
        print(f"target {k}: {v}")
    return 0


def markdown(doc: dict[str, Any]) -> str:
    """The results table for bench/README.md, from a results JSON document."""
    rts = doc["ratios_mqbridge_over_mosquitto"]
    lines = ["| scenario | broker | headline | ratio | broker CPU (cores) | msg per broker CPU-s | "
             "gen pub/sub CPU | delivered | RSS MiB |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in doc["results"]:
        name = r["scenario"]
        unit = HEADLINE.get(name, ("", ""))[1]
        ratio = rts.get(name, {}).get(r["broker"])
        rss = r.get("broker_rss_kib")
        gen = f"{r.get('pub_cpu', '-')}/{r.get('sub_cpu', '-')}" if "pub_cpu" in r or "sub_cpu" in r else "-"
        cpu = r.get("broker_cpu", r.get("broker_idle_cpu", "-"))
        eff = r.get("delivered_per_broker_cpu_s")
        lines.append(f"| {name} | {r['broker']} | {headline(r)} {unit} | {f'{ratio:.2f}x' if ratio else ''} | "
                     f"{cpu} | {f'{eff:,}' if eff else '-'} | {gen} | {r.get('delivery_ratio', '-')} | "
                     f"{f'{rss / 1024:.1f}' if rss else '-'} |")
    return "\n".join(lines)


def targets(results: list[dict[str, Any]], rts: dict[str, dict[str, float]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name in ("qos0-64", "qos0-1k"):
        r = rts.get(name, {}).get("mqbridge-FULL")
        if r is not None:
            out[f"{name} >= 0.5x mosquitto"] = f"{r:.2f}x {'MET' if r >= 0.5 else 'NOT MET'}"
    for mode in ("mqbridge-FULL", "mqbridge-NORMAL"):
        r = rts.get("qos1", {}).get(mode)
        if r is not None:
            out[f"qos1 durable ({mode}) >= 0.5x mosquitto+persist"] = f"{r:.2f}x {'MET' if r >= 0.5 else 'NOT MET'}"
    for r in results:
        if r["scenario"] in ("idle", "idle-v5") and r["broker"].startswith("mqbridge"):
            n, want = r.get("connected", 0), r["spec"]["idle"]
            ok = n >= want and r.get("ping_answered") == r.get("ping_sample")
            out[f"{want} idle connections"] = (f"{n} held, {r.get('ping_answered')}/{r.get('ping_sample')} "
                                               f"pings answered, RSS {r.get('broker_rss_kib')} KiB "
                                               f"{'MET' if ok else 'NOT MET'}")
    return out


if __name__ == "__main__":
    sys.exit(main())
