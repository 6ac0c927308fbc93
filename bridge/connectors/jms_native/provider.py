"""Where a native JMS connector's objects come from: its connection factory (a class with bean properties, or
a JNDI lookup), its destinations (made by the session, or JNDI names), and the state of its link to the
provider (up, down with the reason, reconnects), which an ExceptionListener learns of as soon as the
provider's client does. Every error names the connector's setting to change. Needs the JVM running."""
from __future__ import annotations

import re
import threading
import time
from typing import Any

from bridge.connectors.base import ConnectorError
from mappings.rules.model import JmsConnector

DEFAULT_SETTING = "connectors.<name>"


class Provider:
    """The JNDI context (when configured) and connection factory of one connector, made once per endpoint."""

    def __init__(self, conn: JmsConnector, setting: str = DEFAULT_SETTING) -> None:
        self.conn = conn
        self.setting = setting   # "connectors.NAME": the prefix of every error's setting
        self.context: Any = None

    def factory(self) -> Any:
        import jpype

        conn = self.conn
        if conn.jndi is None:
            assert conn.connection_factory is not None
            try:
                factory = jpype.JClass(conn.connection_factory)()
            except (TypeError, jpype.JException) as exc:
                raise ConnectorError(f"{self.setting}.connection_factory {conn.connection_factory!r}: {exc}") \
                    from None
            for key, value in conn.factory_properties.items():
                setter = getattr(factory, "set" + key[:1].upper() + key[1:], None)
                if setter is None:
                    raise ConnectorError(f"{self.setting}.factory_properties: {conn.connection_factory} has no "
                                         f"property {key!r}")
                try:
                    setter(value)
                except (TypeError, jpype.JException) as exc:   # e.g. "yes" for a boolean
                    raise ConnectorError(f"{self.setting}.factory_properties.{key}: {value!r} refused by "
                                         f"{conn.connection_factory}: {' '.join(str(exc).split())}") from None
            return factory
        found = self.lookup(conn.jndi.connection_factory, f"{self.setting}.jndi.connection_factory")
        if not isinstance(found, jpype.JClass("javax.jms.ConnectionFactory")):
            raise ConnectorError(f"{self.setting}.jndi.connection_factory: {conn.jndi.connection_factory!r} is a "
                                 f"{found.getClass().getName()}, not a javax.jms.ConnectionFactory")
        return found

    def _context(self) -> Any:
        import jpype

        if self.context is None:
            jndi = self.conn.jndi
            assert jndi is not None
            env = jpype.JClass("java.util.Hashtable")()
            env.put("java.naming.factory.initial", jndi.initial_context_factory)
            if jndi.provider_url is not None:
                env.put("java.naming.provider.url", jndi.provider_url)
            for key, value in jndi.environment.items():
                env.put(key, value)
            try:
                self.context = jpype.JClass("javax.naming.InitialContext")(env)
            except jpype.JException as exc:
                if missing_class(exc) not in (None, jndi.initial_context_factory):   # it loads, a class it needs not
                    raise ConnectorError(f"{self.setting}.jars: the initial context factory "
                                         f"{jndi.initial_context_factory!r} cannot load: {missing_class_hint(exc)}"
                                         ) from None
                raise ConnectorError(f"{self.setting}.jndi.initial_context_factory "
                                     f"{jndi.initial_context_factory!r}: {_why(exc)}") from None
        return self.context

    def lookup(self, name: str, setting: str) -> Any:
        """The object bound to ``name``; ConnectorError naming ``setting`` when there is none."""
        import jpype

        context = self._context()
        try:
            found = context.lookup(name)
        except jpype.JException as exc:
            if missing_class(exc) is not None:   # bound, but its object's class cannot load
                raise ConnectorError(f"{self.setting}.jars: JNDI name {name!r} ({setting}) cannot load: "
                                     f"{missing_class_hint(exc)}") from None
            raise ConnectorError(f"{setting}: JNDI name {name!r} not found ({_why(exc)})") from None
        if found is None:
            raise ConnectorError(f"{setting}: JNDI name {name!r} is bound to nothing")
        return found

    def destination(self, text: str, setting: str) -> Any:
        """A route's ``queue: NAME`` ("NAME") or ``topic: NAME`` ("topic:NAME") looked up as a JNDI name, which
        must hold a Queue (or a Topic); None: the connector names destinations directly (no JNDI for them)."""
        import jpype

        jndi = self.conn.jndi
        if jndi is None or not jndi.destinations or "://" in text or text.startswith("/remote-temp-"):
            return None
        topic = text.startswith("topic:")
        name = text[len("topic:"):] if topic else text.removeprefix("queue:")   # "queue:Q": an envelope route's
        found = self.lookup(name, setting)
        kind = "Topic" if topic else "Queue"
        if not isinstance(found, jpype.JClass(f"javax.jms.{kind}")):
            raise ConnectorError(f"{setting}: JNDI name {name!r} is a {found.getClass().getName()}, not a "
                                 f"javax.jms.{kind}")
        return found

    def close(self) -> None:
        context, self.context = self.context, None
        if context is not None:
            try:
                context.close()
            except Exception:   # noqa: BLE001 - closing a context frees it; a failure changes nothing
                pass


def _why(exc: Any) -> str:
    """A Java failure's message, followed by what its causes add: ActiveMQ's ExceptionListener gets "Force close
    due to SecurityException on connect", whose cause says that the user name or password is invalid."""
    message = exc.getMessage()
    text = str(message) if message is not None else str(exc.getClass().getName())
    cause = exc.getCause()
    for _ in range(8):   # a cause chain, bounded
        if cause is None:
            break
        detail = cause.getMessage()
        if detail is not None and str(detail) not in text:
            text += f": {detail}"
        cause = cause.getCause()
    return text


_MISSING = re.compile(r"(?:NoClassDefFoundError|ClassNotFoundException):? ([\w$./]+)")


def missing_class(exc: Any) -> str | None:
    """The class a Java failure, or one of its causes, could not find (a jar left out of ``jars``), else None."""
    for _ in range(16):   # a cause chain, bounded
        if exc is None:
            return None
        name, message = str(exc.getClass().getName()), str(exc.getMessage() or "")
        if name in ("java.lang.NoClassDefFoundError", "java.lang.ClassNotFoundException") and message:
            return message.replace("/", ".")
        found = _MISSING.search(message)   # a provider that wraps it in its own message (ActiveMQ)
        if found:
            return found.group(1).replace("/", ".")
        exc = exc.getCause()
    return None


def missing_class_hint(exc: Any) -> str:
    """Why a class cannot load: the class none of the jars holds, or the Java failure's message."""
    cls = missing_class(exc)
    return _why(exc) if cls is None else f"it needs class {cls}, which none of the jars holds (a dependency jar " \
        "left out?)"


def provider_error(exc: Any, setting: str) -> str:
    """A failure of the provider's client as the endpoint's link shows it; a class missing from the jars (which
    only shows once the client runs, e.g. ActiveMQ without hawtbuf.jar) names ``setting``.jars."""
    why = f"JMS provider: {_why(exc)}"
    cls = missing_class(exc)
    return why if cls is None else f"{why} ({setting}.jars: no jar holds class {cls}: a dependency jar left out?)"


class LinkStatus:
    """An endpoint's link to its provider, as `mqbridge status` shows it: new, up, down (with why and
    since when) or closed, and how many times it came back up. Written by the worker thread and the
    provider's ExceptionListener thread, read by the admin channel."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.state = "new"
        self.since = time.time()
        self.error: str | None = None
        self.reconnects = 0
        self.broken: str | None = None   # set by the ExceptionListener: the connection is gone
        self.generation = 0              # of the current connection: a listener of an older one is not heard

    def retire(self) -> int:
        """The current connection is dropped (or a new one is being made): its listener no longer counts;
        returns the generation of the next connection."""
        with self._lock:
            self.generation += 1
            self.broken = None
            return self.generation

    def up(self) -> None:
        with self._lock:
            if self.state == "down":
                self.reconnects += 1
            self.state, self.since, self.error, self.broken = "up", time.time(), None, None

    def down(self, why: str) -> None:
        with self._lock:
            if self.state != "down":
                self.since = time.time()
            self.state, self.error = "down", why

    def lost(self, why: str, generation: int) -> None:
        """From the ExceptionListener of connection ``generation``: the worker drops it at its next call. A
        link the worker already marked down keeps the worker's reason: the failed call's own exception is the
        specific one (ActiveMQ's listener says only "Force close due to SecurityException on connect" where
        the connect call said the user name or password is invalid)."""
        with self._lock:
            if generation != self.generation:
                return
            self.broken = why
            if self.state == "down" and self.error:
                return
        self.down(why)

    def closed(self) -> None:
        with self._lock:
            self.state, self.since = "closed", time.time()

    def as_dict(self) -> dict[str, object]:
        with self._lock:
            return {"state": self.state, "since": round(self.since, 3), "error": self.error,
                    "reconnects": self.reconnects}


def exception_listener(status: LinkStatus, generation: int) -> Any:
    """A javax.jms.ExceptionListener that marks connection ``generation`` of ``status`` lost (the class is
    made once the JVM runs)."""
    from jpype import JImplements, JOverride

    @JImplements("javax.jms.ExceptionListener")
    class _Listener:
        @JOverride
        def onException(self, exc: Any) -> None:   # noqa: N802 - the Java interface's name
            status.lost(f"provider connection lost: {_why(exc)}", generation)

    return _Listener()


__all__ = ["LinkStatus", "Provider", "exception_listener", "missing_class", "missing_class_hint", "provider_error"]
