"""The JVM of the gateway process (JPype): started once, with the jars the native JMS connectors name.

JPype runs one JVM per process, and its class path is fixed when it starts: the first connector's jars
start it, and a later connector whose jars are not on that class path is refused with a message naming
them (restart the gateway to change jars). JPype itself is an optional dependency (``mqbridge[jms]``),
imported only here and only when a native connector is configured.
"""
from __future__ import annotations

import glob
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

_lock = threading.Lock()


class JvmError(RuntimeError):
    """The JVM cannot run what a connector needs; the message says which setting to change."""


def _jpype() -> Any:
    try:
        import jpype  # optional: the native JMS connector only
    except ImportError:
        raise JvmError("the native JMS connector needs JPype: pip install 'mqbridge[jms]' (jpype1)") from None
    return jpype


def expand_jars(entries: Iterable[str], setting: str = "jars") -> list[str]:
    """Each entry is a jar path or a glob; every entry must name at least one existing file."""
    jars: list[str] = []
    for entry in entries:
        found = sorted(glob.glob(os.path.expanduser(entry))) if glob.has_magic(entry) else (
            [os.path.expanduser(entry)] if Path(os.path.expanduser(entry)).is_file() else [])
        if not found:
            raise JvmError(f"{setting}: {entry!r} matches no file")
        jars.extend(str(Path(j).resolve()) for j in found)
    return list(dict.fromkeys(jars))


_options: list[tuple[str, ...]] = []   # the options this process's JVM started with, once started here


def default_options(wanted: tuple[str, ...]) -> list[str]:
    """The options the gateway adds before a connector's own (``wanted``), each only when those do not choose
    otherwise. The JVM's work here is a JMS client's (marshalling, a socket): C1 alone compiles it within the
    first messages, where C2's compile cost about 35 µs a message over the first 10,000 and 16 µs over the
    next, more than its code saves (bench/HISTORY.md, session 21); the serial collector keeps the small heap
    without a thread per core beside the gateway's."""
    out = []
    if not any(o.startswith(("-XX:TieredStopAtLevel", "-XX:-TieredCompilation", "-XX:+TieredCompilation"))
               for o in wanted):
        out.append("-XX:TieredStopAtLevel=1")
    if not any(o.startswith("-XX:+Use") and o.endswith("GC") for o in wanted):
        out.append("-XX:+UseSerialGC")
    return out


def start(jars: list[str], options: Iterable[str] = (), setting: str = "jvm_options") -> Any:
    """The ``jpype`` module with the JVM running, ``jars`` on its class path and ``options`` (a connector's
    ``jvm_options``, named by ``setting`` in errors) among its options."""
    jpype = _jpype()
    wanted = tuple(options)
    with _lock:
        if not jpype.isJVMStarted():
            try:
                # -Xrs: the JVM leaves SIGTERM, SIGINT and SIGHUP to the gateway (else its handlers replace the
                # gateway's: SIGTERM would end the process at once, without closing routes; SIGHUP, no reload)
                jpype.startJVM("-Xrs", *default_options(wanted), *wanted, classpath=jars, convertStrings=False,
                               interrupt=False)
            except (OSError, RuntimeError, ValueError) as exc:   # no libjvm (JVMNotFoundException), a bad option
                hint = f"check {setting} {list(wanted)}" if wanted else \
                    "install a Java runtime (JAVA_HOME, or java on PATH)"
                raise JvmError(f"cannot start a JVM ({exc}): {hint}") from None
            _options.append(wanted)
            return jpype
    started = set(str(jpype.java.lang.System.getProperty("java.class.path")).split(os.pathsep))
    missing = [j for j in jars if j not in started]
    if missing:
        raise JvmError(f"the JVM of this process started without {', '.join(missing)}: a process has one JVM "
                       "and its class path is fixed at start; give every native connector the same jars")
    if _options and set(wanted) - set(_options[0]):
        raise JvmError(f"{setting}: the JVM of this process started with {list(_options[0])}: a process has one "
                       "JVM and its options are fixed at start; give every native connector the same jvm_options")
    return jpype


def attach() -> None:
    """Attach the calling thread to the JVM (worker threads, before their first JVM call)."""
    jpype = _jpype()
    if jpype.isJVMStarted() and not jpype.java.lang.Thread.isAttached():
        jpype.java.lang.Thread.attach()


__all__ = ["JvmError", "attach", "default_options", "expand_jars", "start"]
