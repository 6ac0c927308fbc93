"""Debian's mosquitto_pub / mosquitto_sub as test clients: real processes, real sockets.

``MosquittoSub`` runs ``mosquitto_sub -F %j`` in the background and parses each JSON line it prints;
``mosquitto_pub`` runs one publication to completion. Versions are mosquitto's names: ``mqttv31``,
``mqttv311`` (``VERSIONS``) and ``mqttv5`` / ``5``. Another ``-F`` format (``fmt``, e.g. MQTT 5 properties:
``%P``, ``%C``, ``%S``) keeps each printed line as it is, in ``lines`` (``wait_lines``).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import threading
from dataclasses import dataclass
from typing import Any

from tests.support.gateway import wait_for

VERSIONS = ["mqttv31", "mqttv311"]
AVAILABLE = shutil.which("mosquitto_sub") is not None and shutil.which("mosquitto_pub") is not None


@dataclass(frozen=True)
class SubMessage:
    topic: str
    payload: str
    qos: int
    retain: bool


def mosquitto_pub(port: int, topic: str, payload: str | None, *, version: str = "mqttv311", qos: int = 0,
                  retain: bool = False, client_id: str | None = None, extra: tuple[str, ...] = (),
                  timeout: float = 15.0) -> subprocess.CompletedProcess[str]:
    """One ``mosquitto_pub`` run; ``payload=None`` sends an empty message (``-n``)."""
    args = ["mosquitto_pub", "-h", "127.0.0.1", "-p", str(port), "-V", version, "-t", topic, "-q", str(qos)]
    args += ["-n"] if payload is None else ["-m", payload]
    if retain:
        args.append("-r")
    if client_id is not None:
        args += ["-i", client_id]
    args += list(extra)
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout)


class MosquittoSub:
    """A background ``mosquitto_sub``; its messages are parsed as they are printed."""

    def __init__(self, port: int, topics: list[str] | str, *, version: str = "mqttv311", qos: int = 0,
                 client_id: str, clean: bool = True, keepalive: int = 60, count: int | None = None,
                 extra: tuple[str, ...] = (), fmt: str = "%j") -> None:
        self.client_id = client_id
        self.json = fmt == "%j"
        self.topics = [topics] if isinstance(topics, str) else list(topics)
        args = ["mosquitto_sub", "-h", "127.0.0.1", "-p", str(port), "-V", version, "-q", str(qos),
                "-i", client_id, "-k", str(keepalive), "-F", fmt]
        for t in self.topics:
            args += ["-t", t]
        if not clean:
            args.append("-c")
        if count is not None:
            args += ["-C", str(count)]
        args += list(extra)
        self.args = args
        self.messages: list[SubMessage] = []
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            if not self.json:
                with self._lock:
                    self.lines.append(line)
                continue
            try:
                data: dict[str, Any] = json.loads(line)
            except ValueError:
                with self._lock:
                    self.lines.append(line)
                continue
            msg = SubMessage(data["topic"], data.get("payload", ""), int(data["qos"]), bool(data["retain"]))
            with self._lock:
                self.messages.append(msg)

    def wait_subscribed(self, gateway: Any, timeout: float = 10.0) -> MosquittoSub:
        """Until the broker lists every one of this client's subscriptions (admin channel)."""
        def subscribed() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"mosquitto_sub exited {self.proc.returncode}: {self.stderr()}")
            _, subs = gateway.admin("/subscriptions")
            mine = {s["topic_filter"] for s in subs if s["client_id"] == self.client_id}
            return set(self.topics) <= mine
        wait_for(subscribed, timeout, what=f"mosquitto_sub {self.client_id} subscribed")
        return self

    def wait_messages(self, n: int, timeout: float = 10.0) -> list[SubMessage]:
        wait_for(lambda: len(self.messages) >= n, timeout,
                 what=f"{n} messages at mosquitto_sub {self.client_id} (have {len(self.messages)})")
        with self._lock:
            return list(self.messages)

    def wait_lines(self, n: int, timeout: float = 10.0) -> list[str]:
        """The first ``n`` (or more) lines printed in a ``fmt`` other than ``%j``."""
        wait_for(lambda: len(self.lines) >= n, timeout,
                 what=f"{n} lines from mosquitto_sub {self.client_id} (have {len(self.lines)})")
        with self._lock:
            return list(self.lines)

    def wait_exit(self, timeout: float = 10.0) -> int:
        rc = self.proc.wait(timeout)
        self._thread.join(5)
        return rc

    def stderr(self) -> str:
        if self.proc.poll() is None or self.proc.stderr is None:
            return ""
        return self.proc.stderr.read()

    def stop(self) -> None:
        """SIGTERM: mosquitto_sub sends DISCONNECT and exits (no will is published)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._thread.join(5)

    def kill(self) -> None:
        """SIGKILL: the TCP connection ends without DISCONNECT (the will fires)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        self._thread.join(5)
