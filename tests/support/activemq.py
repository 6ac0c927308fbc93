# Owns starting and stopping a private Debian ActiveMQ broker on loopback for tests (free ports, temp dir).
"""A private ActiveMQ broker for tests.

Debian's ``activemq`` package is started through its ``activemq.jar`` launcher (not the
``/usr/bin/activemq`` service wrapper) with an instance directory of our own: ``conf/activemq.xml``
binds OpenWire, STOMP and MQTT to 127.0.0.1 on free ports, and ``lib/optional`` holds symlinks to the
jars the MQTT and STOMP transports need but Debian leaves off the broker's classpath.

Readiness is "the broker logged `started` and every port accepts a TCP connection", bounded by a
timeout; the JVM's output is kept in ``<instance>/broker.log`` and quoted in every failure message.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from tests.support.gateway import free_port

ACTIVEMQ_HOME = Path("/usr/share/activemq")
LAUNCHER = ACTIVEMQ_HOME / "bin" / "activemq.jar"
JAVA_DIR = Path("/usr/share/java")
# Jars the Debian broker needs for its mqtt:// and stomp:// transports and the jms-json/jms-xml STOMP
# transformations, which its own lib/ and lib/optional do not link (packages libmqtt-client-java,
# libhawtdispatch-java, libxstream-java, libjettison-java, libxpp3-java).
EXTRA_JARS = (
    "mqtt-client.jar",
    "hawtdispatch.jar",
    "hawtdispatch-transport.jar",
    "xstream.jar",
    "jettison.jar",
    "xpp3.jar",
)
APT_PACKAGES = "activemq libmqtt-client-java libxstream-java libjettison-java default-jdk-headless"

_ACTIVEMQ_XML = """\
<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans
    http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
    http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="{name}" useJmx="false"
          persistent="{persistent}" dataDirectory="{data}" schedulerSupport="false">
    {persistence}{extra}
    <systemUsage>
      <systemUsage>
        <memoryUsage><memoryUsage limit="64 mb"/></memoryUsage>
        <storeUsage><storeUsage limit="1 gb"/></storeUsage>
        <tempUsage><tempUsage limit="256 mb"/></tempUsage>
      </systemUsage>
    </systemUsage>
    <transportConnectors>
      <transportConnector name="openwire" uri="tcp://{host}:{openwire_port}"/>
      <transportConnector name="stomp" uri="stomp://{host}:{stomp_port}"/>
      <transportConnector name="mqtt" uri="mqtt://{host}:{mqtt_port}"/>
    </transportConnectors>
  </broker>
</beans>
"""

_LOG4J = """\
log4j.rootLogger=INFO, out
log4j.logger.org.springframework=WARN
log4j.logger.org.apache.xbean=WARN
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1} - %m%n
"""

_BIND_FAILURE = re.compile(r"Address already in use|BindException")


class ActiveMQUnavailable(RuntimeError):
    """The machine lacks java or the Debian activemq packages; the message says what to install."""


class ActiveMQStartError(RuntimeError):
    """The broker did not come up; the message quotes the end of its log."""


@dataclass(frozen=True)
class BrokerEndpoints:
    host: str
    openwire_port: int
    stomp_port: int
    mqtt_port: int

    @property
    def openwire_url(self) -> str:
        return f"tcp://{self.host}:{self.openwire_port}"


def unavailable_reason() -> str | None:
    """Why a broker cannot be started here, or None when java and every needed jar are present."""
    if shutil.which("java") is None:
        return f"java not found on PATH (apt-get install {APT_PACKAGES})"
    if not LAUNCHER.is_file():
        return f"{LAUNCHER} missing: Debian activemq not installed (apt-get install {APT_PACKAGES})"
    missing = [j for j in EXTRA_JARS if not (JAVA_DIR / j).exists()]
    if missing:
        return f"jars missing from {JAVA_DIR}: {', '.join(missing)} (apt-get install {APT_PACKAGES})"
    return None


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct ports free now, below the kernel's ephemeral range and never handed out before in this
    process (``gateway.free_port``). Ports from bind(0) are in the ephemeral range, where the many short
    connections of a test run leave ports in TIME-WAIT that a listener cannot bind: a CI run saw three starts
    in a row fail that way, and every JMS test of that worker with them."""
    if host != "127.0.0.1":
        raise ValueError(f"tests bind only to 127.0.0.1, not {host!r}")
    return [free_port() for _ in range(count)]


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it when the process that started it dies (Linux), so a
    test session killed abruptly never leaves a broker JVM behind."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def port_open(host: str, port: int, timeout: float = 0.2) -> bool:
    with suppress(OSError), socket.create_connection((host, port), timeout=timeout):
        return True
    return False


class ActiveMQ:
    """One broker process with its own instance directory ``base``.

    ``start()`` picks free ports (retrying with new ones if another process grabs one first) and waits
    until the broker is ready; ``stop()`` kills the process group; ``restart()`` reuses the same ports
    (and, when ``persistent``, the same KahaDB store) so clients can test reconnection.
    """

    def __init__(
        self,
        base: Path,
        *,
        host: str = "127.0.0.1",
        persistent: bool = False,
        name: str = "mqbridge-test",
        heap_mb: int = 256,
        serializable_packages: str | None = "*",
        extra_xml: str = "",
    ) -> None:
        self.base = base
        self.host = host
        self.persistent = persistent
        self.name = name
        self.heap_mb = heap_mb
        self.serializable_packages = serializable_packages   # None: the broker's default
        self.extra_xml = extra_xml   # more of <broker>'s elements (e.g. destinationInterceptors), after persistence
        self.endpoints: BrokerEndpoints | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = base / "broker.log"
        self.startup_seconds: float | None = None

    # ------------------------------------------------------------------ setup

    def _write_instance(self, ep: BrokerEndpoints) -> None:
        conf, data, optional = self.base / "conf", self.base / "data", self.base / "lib" / "optional"
        for d in (conf, data, optional):
            d.mkdir(parents=True, exist_ok=True)
        for jar in EXTRA_JARS:
            link = optional / jar
            if not link.exists():
                link.symlink_to(JAVA_DIR / jar)
        persistence = (
            f'<persistenceAdapter><kahaDB directory="{data / "kahadb"}"/></persistenceAdapter>'
            if self.persistent
            else ""
        )
        (conf / "activemq.xml").write_text(
            _ACTIVEMQ_XML.format(
                name=self.name,
                persistent=str(self.persistent).lower(),
                data=data,
                persistence=persistence,
                extra=self.extra_xml,
                host=ep.host,
                openwire_port=ep.openwire_port,
                stomp_port=ep.stomp_port,
                mqtt_port=ep.mqtt_port,
            )
        )
        (conf / "log4j.properties").write_text(_LOG4J)

    def command(self) -> list[str]:
        return [
            "java",
            f"-Xmx{self.heap_mb}m",
            "-Xms64m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",  # start fast; tests are not throughput runs
            "-Djava.awt.headless=true",
            f"-Dactivemq.home={ACTIVEMQ_HOME}",
            f"-Dactivemq.base={self.base}",
            f"-Dactivemq.conf={self.base / 'conf'}",
            f"-Dactivemq.data={self.base / 'data'}",
            f"-Dlog4j.configuration=file:{self.base / 'conf' / 'log4j.properties'}",
            # ObjectMessages holding java.util classes must be readable by the broker's jms-json
            # STOMP transformation.
            *([f"-Dorg.apache.activemq.SERIALIZABLE_PACKAGES={self.serializable_packages}"]
              if self.serializable_packages is not None else []),
            "-jar",
            str(LAUNCHER),
            "start",
            f"xbean:file:{self.base / 'conf' / 'activemq.xml'}",
        ]

    # ------------------------------------------------------------------ lifecycle

    def start(self, timeout: float = 60.0, attempts: int = 3) -> BrokerEndpoints:
        reason = unavailable_reason()
        if reason is not None:
            raise ActiveMQUnavailable(reason)
        last: ActiveMQStartError | None = None
        for _ in range(attempts):
            ow, st, mq = free_ports(3, self.host)
            try:
                return self._launch(BrokerEndpoints(self.host, ow, st, mq), timeout)
            except ActiveMQStartError as e:
                last = e
                if not _BIND_FAILURE.search(self.log_text()):
                    raise
        assert last is not None
        raise last

    def restart(self, timeout: float = 60.0) -> BrokerEndpoints:
        """Stop and start again on the same ports (same store when persistent)."""
        assert self.endpoints is not None, "start() first"
        ep = self.endpoints
        self.stop()
        return self._launch(ep, timeout)

    def _launch(self, ep: BrokerEndpoints, timeout: float) -> BrokerEndpoints:
        self._write_instance(ep)
        t0 = time.monotonic()
        with open(self.log_path, "ab") as log:
            log.write(f"\n==== starting {ep} ====\n".encode())
            log.flush()
            offset = log.tell()
            self.proc = subprocess.Popen(
                self.command(),
                cwd=self.base,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group: stop() kills the JVM and nothing else
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        self.endpoints = ep
        deadline = t0 + timeout
        started = re.compile(rf"Apache ActiveMQ \S+ \({re.escape(self.name)}, .*\) started")
        pending = [ep.openwire_port, ep.stomp_port, ep.mqtt_port]
        while True:
            if self.proc.poll() is not None:
                self._fail(f"broker exited with code {self.proc.returncode} during start-up")
            if _BIND_FAILURE.search(self.log_text(offset)):
                self._fail("a port was taken before the broker could bind it")
            if started.search(self.log_text(offset)):
                pending = [p for p in pending if not port_open(ep.host, p)]
                if not pending:
                    break
            if time.monotonic() > deadline:
                self._fail(f"not ready after {timeout:.0f} s (ports not accepting: {pending})")
            time.sleep(0.05)  # poll interval while waiting on the log line / ports, bounded above
        self.startup_seconds = time.monotonic() - t0
        return ep

    def _fail(self, why: str) -> None:
        self.stop()
        raise ActiveMQStartError(f"ActiveMQ: {why}\n--- {self.log_path} (tail) ---\n{self.log_tail()}")

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM the broker's process group, SIGKILL it if it is still there after ``grace`` s."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(grace)

    def kill(self) -> None:
        """SIGKILL at once (a crash, for reconnect tests)."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # ------------------------------------------------------------------ logs

    def log_text(self, offset: int = 0) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])


def running_broker(base: Path, *, persistent: bool = False) -> Iterator[ActiveMQ]:
    """Generator for fixtures: a started broker, stopped afterwards whatever happens."""
    broker = ActiveMQ(base, persistent=persistent)
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.support.activemq [DIR]``: run a private broker until Ctrl-C (benchmarks,
    manual checks); prints its endpoints as JSON."""
    import json
    import tempfile
    from dataclasses import asdict

    args = sys.argv[1:] if argv is None else argv
    base = Path(args[0]) if args else Path(tempfile.mkdtemp(prefix="mqbridge-activemq-"))
    broker = ActiveMQ(base, persistent=True)
    try:
        ep = broker.start()
    except (ActiveMQUnavailable, ActiveMQStartError) as e:
        print(e, file=sys.stderr)
        return 1
    print(json.dumps({**asdict(ep), "base": str(base), "startup_seconds": broker.startup_seconds}), flush=True)
    try:
        assert broker.proc is not None
        broker.proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        broker.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
