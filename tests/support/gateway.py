"""Runs a real `mqbridge serve` process for tests: free ports on 127.0.0.1, a temp data dir,
readiness by its runtime file, stop by SIGTERM or SIGKILL, restart on the same ports and data."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]

# The event loop a test gateway runs on (MQBRIDGE_EVENT_LOOP, bridge/app.py). The dev extra installs uvloop,
# under which "auto" would pick it: test gateways run on asyncio (the rawtcp transport) unless the
# environment or the test names another; tests of what differs between the loops (TLS) run on both, LOOPS.
EVENT_LOOP_ENV = "MQBRIDGE_EVENT_LOOP"
DEFAULT_LOOP = os.environ.get(EVENT_LOOP_ENV, "").strip() or "asyncio"
try:
    import uvloop  # noqa: F401
    HAVE_UVLOOP = True
except ImportError:
    HAVE_UVLOOP = False
LOOPS = ["asyncio", pytest.param("uvloop", marks=pytest.mark.skipif(not HAVE_UVLOOP, reason="uvloop not installed"))]


_HANDED_OUT: set[int] = set()


def _ephemeral_low() -> int:
    """The lowest port the kernel gives to outgoing connections (and to bind(0))."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _worker_range(low: int, high: int) -> tuple[int, int]:
    """Under pytest-xdist each worker takes its own slice of the range: ports one worker hands out are never
    another's, so two workers cannot pick the same free port in the moment before their gateways bind it."""
    try:
        index = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
        count = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    except ValueError:
        return low, high
    size = (high - low) // count
    return (low + index * size, low + (index + 1) * size) if size >= 1000 else (low, high)


_LOW, _HIGH = _worker_range(10_000, min(_ephemeral_low(), 65_536))


def free_port() -> int:
    """A port free now, below the kernel's ephemeral range, never handed out before in this process.

    Below the ephemeral range: a client connection can never take it as its local port. Such a connection
    left in TIME-WAIT blocks a listener's bind for 60 s even with SO_REUSEADDR (the client socket had no
    SO_REUSEADDR), which failed gateway restarts in a busy run. Never handed out twice: two bind(0) in a row
    may give the same port (seen in CI: a gateway's admin port equal to its MQTT port)."""
    if _HIGH - _LOW < 1000:   # an unusual port range: fall back to bind(0)
        for _ in range(1000):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", 0))
                port = int(s.getsockname()[1])
            if port not in _HANDED_OUT:
                _HANDED_OUT.add(port)
                return port
        raise AssertionError("no port left that this test process has not handed out already")
    rng = random.Random()   # its own generator: tests that seed ``random`` must not make ports collide
    for _ in range(1000):
        port = rng.randrange(_LOW, _HIGH)
        if port in _HANDED_OUT or bind_error(port) is not None:
            continue
        _HANDED_OUT.add(port)
        return port
    raise AssertionError(f"no free port in {_LOW}-{_HIGH - 1} that this process has not handed out already")


def wait_for(predicate: Any, timeout: float = 10.0, interval: float = 0.02, what: str = "condition") -> Any:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def convlog_records(directory: Path) -> list[dict[str, Any]]:
    """The records of a running gateway's conversion log: complete lines only (the writer may be in the middle
    of a line, as the audit and ``mqbridge log tail`` also allow)."""
    out = []
    for f in sorted(Path(directory).glob("convlog-*.jsonl")):
        text = f.read_text("utf-8", errors="replace")
        out.extend(json.loads(line) for line in text[:text.rfind("\n") + 1].splitlines() if line)
    return out


def port_holders(port: int) -> str:
    """What `ss` says holds a TCP port: the diagnosis when a restart cannot bind it again."""
    try:
        out = subprocess.run(["ss", "-tanp"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return f"(ss failed: {exc})"
    lines = [line for line in out.splitlines() if re.search(rf":{port}(\s|$)", line)]
    return "\n".join(lines) or "(ss lists no socket on it)"


def bind_error(port: int) -> str | None:
    """Why a listener could not bind 127.0.0.1:port now (with SO_REUSEADDR, as the gateway binds it);
    None: it could."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            return str(exc)
        return None


class GatewayProcess:
    def __init__(self, workdir: Path, config: dict[str, Any] | None = None, *, loop: str | None = None) -> None:
        """``loop``: its MQBRIDGE_EVENT_LOOP (None: DEFAULT_LOOP)."""
        self.workdir = workdir
        self.loop = loop or DEFAULT_LOOP
        self.data_dir = workdir / "var"
        self.port = free_port()
        self.admin_port = free_port()
        cfg: dict[str, Any] = {
            "data_dir": str(self.data_dir),
            "broker": {"listeners": [{"host": "127.0.0.1", "port": self.port}], "sys_interval": 1.0},
            "admin": {"host": "127.0.0.1", "port": self.admin_port},
            "logging": {"level": "INFO"},
        }
        for key, value in (config or {}).items():
            if isinstance(value, dict) and isinstance(cfg.get(key), dict):
                cfg[key] = {**cfg[key], **value}
            else:
                cfg[key] = value
        self.config = cfg
        self.config_path = workdir / "mqbridge.yaml"
        self.log_path = workdir / "mqbridge.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_offset = 0  # log() starts here (see mark_log)
        self.listener_ports: list[int] = []  # bound ports, in config order (from runtime.json)

    def write_config(self) -> None:
        self.config_path.write_text(yaml.safe_dump(self.config), encoding="utf-8")

    def start(self, timeout: float = 15.0) -> GatewayProcess:
        self.write_config()
        # A restart must get the same ports back, but for a moment after a kill another process's
        # bind(0) may hold one (seen once in CI): wait, with a bound, for them to be free, and launch
        # again if the gateway still lost that race (it refuses to start on a taken port, as it should).
        for attempt in range(3):
            for port in (self.port, self.admin_port, *self.listener_ports):
                try:
                    wait_for(lambda p=port: bind_error(p) is None, 30, interval=0.05, what=f"port {port} to be free")
                except AssertionError as exc:
                    raise AssertionError(f"{exc} ({bind_error(port)}); held by:\n{port_holders(port)}") from None
            try:
                return self._launch(timeout)
            except AssertionError as exc:
                if attempt == 2 or "address already in use" not in str(exc):
                    raise
        raise AssertionError("unreachable")

    def _launch(self, timeout: float) -> GatewayProcess:
        runtime = self.data_dir / "runtime.json"
        if runtime.exists():
            runtime.unlink()
        try:
            start_offset = self.log_path.stat().st_size
        except OSError:
            start_offset = 0
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child for its lifetime
        env = dict(os.environ, PYTHONUNBUFFERED="1", **{EVENT_LOOP_ENV: self.loop})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bridge", "serve", "-c", str(self.config_path)],
            cwd=self.workdir,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        log.close()

        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                rc = self.proc.returncode
                self.proc = None
                with open(self.log_path, "rb") as f:
                    f.seek(start_offset)
                    tail = f.read().decode("utf-8", errors="replace")
                raise AssertionError(f"mqbridge exited with {rc}:\n{self.log()}" + (
                    f"\nport holders: {[port_holders(p) for p in (self.port, self.admin_port)]}"
                    if "address already in use" in tail else ""))
            return runtime.exists()

        wait_for(ready, timeout, what="mqbridge to start")
        logged = str(self.config.get("logging", {}).get("level", "INFO")).upper() in ("DEBUG", "INFO")
        with open(self.log_path, "rb") as f:   # the loop is named at INFO (a benchmark may log less)
            f.seek(start_offset)
            assert self.loop == "auto" or not logged or \
                f"event loop: {self.loop}" in f.read().decode("utf-8", errors="replace"), \
                f"the gateway did not start on the event loop {self.loop}"
        try:
            info = json.loads(runtime.read_text(encoding="utf-8"))
            self.listener_ports = [int(lst["port"]) for lst in info.get("listeners", [])]
        except (OSError, ValueError, KeyError):
            self.listener_ports = []
        if self.listener_ports and self.port not in self.listener_ports:
            self.port = self.listener_ports[0]  # the config replaced the default listener
        return self

    def log(self) -> str:
        """The gateway's log from ``log_offset`` (0: all of it; a shared gateway sets it per test)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.log_offset)
                return f.read().decode("utf-8", errors="replace")
        except OSError:
            return ""

    def mark_log(self) -> None:
        """From now on ``log()`` returns only what is written after this call."""
        try:
            self.log_offset = self.log_path.stat().st_size
        except OSError:
            self.log_offset = 0

    def stop(self, timeout: float = 15.0) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait(5)
        self.proc = None
        return rc

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None

    def admin(self, path: str, method: str = "GET", *, token: bool = True) -> tuple[int, Any]:
        """An admin request with the gateway's token (``token=False``: without it)."""
        req = urllib.request.Request(f"http://127.0.0.1:{self.admin_port}{path}", method=method)
        if token:
            req.add_header("Authorization", f"Bearer {(self.data_dir / 'admin.token').read_text().strip()}")
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "bridge", *args], cwd=self.workdir, capture_output=True, text=True, timeout=60
        )
