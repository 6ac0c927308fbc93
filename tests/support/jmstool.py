# Owns compiling tests/java/JmsTool.java with javac and running it (send / receive real JMS messages).
"""Python side of the JmsTool test client (see tests/java/JmsTool.java for the JSON it speaks).

``JmsTool.compile(workdir)`` runs javac once; ``send`` sends described messages and ``receive`` returns
decoded JSON descriptions, both through one long-lived ``JmsTool serve`` JVM; ``start_receiver`` starts
a consumer JVM in the background (for topics) and returns once the JMS consumer exists.
"""

from __future__ import annotations

import contextlib
import json
import queue
import shutil
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

JAVA_SOURCE = Path(__file__).resolve().parent.parent / "java" / "JmsTool.java"
JAVA_DIR = Path("/usr/share/java")
COMPILE_JARS = (
    "geronimo-jms_1.1_spec.jar",
    "activemq-client.jar",
    "hawtbuf.jar",
    "slf4j-api.jar",
    "geronimo-j2ee-management-1.1-spec.jar",
)
RUN_JARS = COMPILE_JARS + ("slf4j-nop.jar",)  # silences slf4j's "no binding" warning when present
JVM_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx128m", "-Xshare:auto")

Json = dict[str, Any]


class JmsToolError(RuntimeError):
    pass


def native_connector_yaml(url: str | None, *extra: str) -> str:
    """The ``connectors:`` section of a rules file: ``amq``, ActiveMQ through its own JMS client (the native
    connector), by its connection factory at ``url`` (None: ``extra`` says how, e.g. a ``jndi:`` block);
    ``extra``: more lines of the connector, indented as its keys."""
    jars = ", ".join(f'"{JAVA_DIR / j}"' for j in COMPILE_JARS)
    lines = ["connectors:", "  amq:", "    type: jms", "    client: native", f"    jars: [{jars}]"]
    if url is not None:
        lines += ["    connection_factory: org.apache.activemq.ActiveMQConnectionFactory",
                  f'    factory_properties: {{brokerURL: "{url}"}}']
    return "\n".join([*lines, *(f"    {line}" for line in extra)]) + "\n"


def unavailable_reason() -> str | None:
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            return f"{tool} not found on PATH (apt-get install default-jdk-headless)"
    missing = [j for j in COMPILE_JARS if not (JAVA_DIR / j).exists()]
    if missing:
        return f"jars missing from {JAVA_DIR}: {', '.join(missing)} (apt-get install activemq)"
    return None


def typed(java_type: str, value: Any) -> Json:
    """A TYPED value for message descriptions: typed("int", 5), typed("byte[]", b"..")."""
    if java_type == "byte[]":
        return {"type": "byte[]", "hex": bytes(value).hex()}
    return {"type": java_type, "value": value}


@dataclass
class Receiver:
    """A JmsTool receive running in the background; ``result()`` waits for it and decodes its output."""

    proc: subprocess.Popen[str]
    timeout: float
    stdout_lines: list[str] = field(default_factory=list)
    stderr_lines: list[str] = field(default_factory=list)
    pumps: list[threading.Thread] = field(default_factory=list)

    def result(self) -> list[Json]:
        try:
            self.proc.wait(self.timeout + 30)  # JmsTool enforces its own timeout; this is a backstop
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for t in self.pumps:
            t.join(10)
        out = "".join(self.stdout_lines)
        err = "".join(self.stderr_lines)
        if self.proc.returncode not in (0, 3):
            raise JmsToolError(f"JmsTool receive exited {self.proc.returncode}:\n{err}")
        messages = [json.loads(line) for line in out.splitlines() if line.strip()]
        if self.proc.returncode == 3:
            raise JmsToolError(f"JmsTool receive timed out: {err.strip()}; got {messages!r}")
        return messages


class _Server:
    """One ``JmsTool serve`` JVM: JSON command lines in, JSON reply lines out."""

    def __init__(self, cmd: list[str], ready_timeout: float = 60.0) -> None:
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        self.replies: queue.Queue[str | None] = queue.Queue()
        self.stderr_tail: deque[str] = deque(maxlen=40)
        threading.Thread(target=self._pump_out, daemon=True).start()
        threading.Thread(target=self._pump_err, daemon=True).start()
        first = self._next(ready_timeout)
        if json.loads(first) != {"ready": True}:
            self.kill()
            raise JmsToolError(f"JmsTool serve said {first!r}")

    def _pump_out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.replies.put(line)
        self.replies.put(None)

    def _pump_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            if line.strip() != "READY":
                self.stderr_tail.append(line)

    def _next(self, timeout: float) -> str:
        try:
            line = self.replies.get(timeout=timeout)
        except queue.Empty:
            self.kill()
            raise JmsToolError(f"JmsTool serve silent for {timeout:.0f} s; stderr: {self.stderr()}") from None
        if line is None:
            self.proc.wait(10)
            raise JmsToolError(f"JmsTool serve exited {self.proc.returncode}; stderr: {self.stderr()}")
        return line

    def call(self, command: Json, timeout: float) -> Json:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(command) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError) as e:
            raise JmsToolError(f"JmsTool serve gone ({e!r}); stderr: {self.stderr()}") from e
        reply: Json = json.loads(self._next(timeout))
        if "error" in reply:
            raise JmsToolError(f"JmsTool {command['op']} on {command['dest']} failed: {reply['error']}")
        return reply

    def stderr(self) -> str:
        return "".join(self.stderr_tail).strip()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                self.proc.stdin.close()  # EOF ends the serve loop
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


class JmsTool:
    """``send``/``receive`` go to one long-lived ``JmsTool serve`` JVM (started on first use: a JVM
    start costs far more than a JMS round trip); ``start_receiver`` runs a JVM of its own."""

    def __init__(self, classes: Path, url: str) -> None:
        self.classes = classes
        self.url = url
        self.classpath = ":".join([str(classes)] + [str(JAVA_DIR / j) for j in RUN_JARS if (JAVA_DIR / j).exists()])
        self._server: _Server | None = None
        self._lock = threading.Lock()

    @staticmethod
    def compile(workdir: Path) -> Path:
        """javac JmsTool.java into ``workdir`` (~1.5 s on two cores); returns the class dir."""
        reason = unavailable_reason()
        if reason is not None:
            raise JmsToolError(reason)
        workdir.mkdir(parents=True, exist_ok=True)
        cp = ":".join(str(JAVA_DIR / j) for j in COMPILE_JARS)
        proc = subprocess.run(
            ["javac", "-Xlint:all", "-Werror", "-d", str(workdir), "-cp", cp, str(JAVA_SOURCE)],
            capture_output=True,
            text=True,
            timeout=180,
        )
        if proc.returncode != 0:
            raise JmsToolError(f"javac failed:\n{proc.stdout}{proc.stderr}")
        return workdir

    def _cmd(self, *args: str) -> list[str]:
        return ["java", *JVM_FLAGS, "-cp", self.classpath, "JmsTool", *args, "--url", self.url]

    def _call(self, command: Json, timeout: float) -> Json:
        with self._lock:
            if self._server is None or not self._server.alive:
                self._server = _Server(self._cmd("serve"))
            return self._server.call(command, timeout)

    def close(self) -> None:
        with self._lock:
            server, self._server = self._server, None
        if server is not None:
            server.close()

    def send(self, dest: str, *messages: Json) -> list[str]:
        """Send the described messages to ``dest`` ("queue://x" / "topic://x"); returns JMSMessageIDs
        once the broker has accepted every one (synchronous sends)."""
        reply = self._call({"op": "send", "dest": dest, "messages": list(messages)}, timeout=120)
        return list(reply["sent"])

    def request(self, dest: str, message: Json, timeout: float = 15.0) -> Json:
        """What javax.jms.QueueRequestor does: send ``message`` to ``dest`` with JMSReplyTo = a new
        TemporaryQueue and wait up to ``timeout`` s for one reply on it. Returns {"sent": JMSMessageID,
        "replyTo": the temporary queue, "reply": the received message or None}. Blocks this JmsTool."""
        command: Json = {"op": "request", "dest": dest, "message": message, "timeoutMs": int(timeout * 1000)}
        return self._call(command, timeout=timeout + 60)

    def receive(self, dest: str, count: int = 1, timeout: float = 15.0, selector: str | None = None) -> list[Json]:
        """Receive exactly ``count`` messages (JmsToolError if fewer arrive within ``timeout`` s)."""
        command: Json = {"op": "receive", "dest": dest, "count": count, "timeoutMs": int(timeout * 1000)}
        if selector is not None:
            command["selector"] = selector
        messages: list[Json] = self._call(command, timeout=timeout + 60)["messages"]
        if len(messages) < count:
            raise JmsToolError(f"received {len(messages)} of {count} before the timeout; got {messages!r}")
        return messages

    def start_receiver(self, dest: str, count: int = 1, timeout: float = 15.0, selector: str | None = None) -> Receiver:
        """Start a consumer on ``dest``; returns when it is subscribed (JmsTool printed READY)."""
        args = ["receive", "--dest", dest, "--count", str(count), "--timeout-ms", str(int(timeout * 1000))]
        if selector is not None:
            args += ["--selector", selector]
        proc = subprocess.Popen(self._cmd(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        rec = Receiver(proc, timeout)
        ready = threading.Event()

        def pump_err() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                rec.stderr_lines.append(line)
                if line.strip() == "READY":
                    ready.set()
            ready.set()  # process ended: result() reports why

        def pump_out() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                rec.stdout_lines.append(line)

        rec.pumps = [threading.Thread(target=f, daemon=True) for f in (pump_err, pump_out)]
        for t in rec.pumps:
            t.start()
        t0 = time.monotonic()
        if not ready.wait(60):
            proc.kill()
            raise JmsToolError(f"JmsTool receiver not ready after {time.monotonic() - t0:.0f} s")
        return rec
