"""A native JMS connector's ``jvm_options`` (system properties such as a TLS trust store, heap size) reach the
gateway's one JVM; a connector asking for options that JVM did not start with is refused, naming its setting.
Each case runs in a fresh Python process: a process has one JVM, started once."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("jpype", reason="jpype1 not installed (pip install 'mqbridge[jms]')")

JAR = "/usr/share/java/geronimo-jms_1.1_spec.jar"
SCRIPT = f"""
from bridge.connectors.jms_native import jvm
jpype = jvm.start([{JAR!r}], ["-Dmqbridge.probe=given", "-Xmx96m"], "connectors.a.jvm_options")
print("probe", jpype.java.lang.System.getProperty("mqbridge.probe"))
print("heap", jpype.java.lang.Runtime.getRuntime().maxMemory() // (1024 * 1024))
jvm.start([{JAR!r}], ["-Xmx96m"], "connectors.b.jvm_options")
print("same options: started")
try:
    jvm.start([{JAR!r}], ["-Dmqbridge.other=1"], "connectors.c.jvm_options")
except jvm.JvmError as exc:
    print("refused", exc)
"""


def test_jvm_options_reach_the_jvm_and_other_options_are_refused_by_name():
    if not os.path.exists(JAR):
        pytest.skip(f"{JAR} not installed (Debian's libgeronimo-jms-1.1-spec-java)")
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "probe given"
    assert 80 <= int(lines[1].split()[1]) <= 96   # -Xmx96m: the heap's limit, less a survivor space
    assert lines[2] == "same options: started"
    assert lines[3].startswith("refused connectors.c.jvm_options: the JVM of this process started with "
                               "['-Dmqbridge.probe=given', '-Xmx96m']")


def test_jvm_options_belong_to_a_native_connector():
    from pydantic import ValidationError

    from mappings.rules.model import JmsConnector

    with pytest.raises(ValidationError, match="jvm_options belong to client native"):
        JmsConnector(type="jms", jvm_options=("-Xmx64m",))
    native = JmsConnector(type="jms", client="native", jars=(JAR,), connection_factory="x.Factory",
                          jvm_options=("-Djavax.net.ssl.trustStore=/etc/trust.jks",))
    assert native.jvm_options == ("-Djavax.net.ssl.trustStore=/etc/trust.jks",)


FLAGS = f"""
import sys
from bridge.connectors.jms_native import jvm
jpype = jvm.start([{JAR!r}], sys.argv[1:])
bean = jpype.java.lang.management.ManagementFactory.getRuntimeMXBean()
print(" ".join(str(a) for a in bean.getInputArguments() if str(a).startswith("-XX:")))
"""


@pytest.mark.parametrize(("given", "expected"), [
    ([], ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]),
    (["-XX:+UseParallelGC", "-XX:TieredStopAtLevel=4"], ["-XX:+UseParallelGC", "-XX:TieredStopAtLevel=4"]),
    (["-XX:-TieredCompilation"], ["-XX:+UseSerialGC", "-XX:-TieredCompilation"]),
])
def test_the_gateways_jvm_defaults_step_aside_for_a_connectors_own_choice(given: list[str],
                                                                          expected: list[str]) -> None:
    """C1 alone and the serial collector unless jvm_options choose a compiler or a collector (two collectors
    would stop the JVM)."""
    if not os.path.exists(JAR):
        pytest.skip(f"{JAR} not installed (Debian's libgeronimo-jms-1.1-spec-java)")
    out = subprocess.run([sys.executable, "-c", FLAGS, *given], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == expected
