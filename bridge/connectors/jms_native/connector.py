"""``type: jms`` with ``client: native``: a JMS provider through its own JMS client, in the gateway's JVM.

Each source and target owns one javax.jms Connection and one transacted Session, used only from its own
worker thread (a JMS session is single-threaded; JVM calls stay off the asyncio loop). A target sends a
batch and commits it before the route confirms its source (batches queue on its worker in the route's
order, so the route converts the next one meanwhile; the batches queued while one was sent go together, in
one transaction; TextMessages from MQTT go in one JVM call, batch.py; a source reads a batch's headers,
properties and texts in one JVM call, batch_read.py);
a source receives a batch inside a transaction and commits it when the route confirms it (the target has the
messages), or rolls it back so that the provider delivers it again, counted (JMSXDeliveryCount feeds the
route's backout threshold): at least once. One batch is open per source at a time, since a commit covers
everything its session received. A provider that goes away (its client's failure, or the connection's
ExceptionListener) fails a target's batch (retried by the router); a source connects again after a pause
that doubles up to ``reconnect_max_seconds``. Each endpoint's link state (provider.LinkStatus) is in the
route's status. The factory and destinations come from a class or from JNDI (provider.Provider);
check_native does the lookups at route setup (on the endpoint's worker) and ``mqbridge validate``.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from bridge.connectors.base import ConnectorError, Inbound, Outbound, Source, Target
from bridge.connectors.jms_native import TEMPORARY, jvm
from bridge.connectors.jms_native.batch import batch_send
from bridge.connectors.jms_native.batch_read import batch_read
from bridge.connectors.jms_native.provider import (
    LinkStatus,
    Provider,
    exception_listener,
    missing_class_hint,
    provider_error,
)
from bridge.connectors.registry import RouteSetupError
from bridge.threadnames import name_this_thread
from mappings.jms.model import DeliveryMode, Destination, DestinationKind, JmsMessage, TextBody
from mappings.report import ConversionReport, Finding
from mappings.rules.model import JmsConnector, QueueEndpoint, RulesFile

log = logging.getLogger("mqbridge.jms")
RECEIVE_WAIT_MS = 500
PREPARED_MAX = 1024   # headers and properties prepared per target (objects.Prepared), cleared when full


def _findings(report: ConversionReport) -> list[Finding]:
    return list(report.findings)   # Finding objects, as every target's (the conversion log's templates hash them)


class _Client:
    """The connection and transacted session of one endpoint, made (again) on the worker thread."""

    def __init__(self, conn: JmsConnector, name: str, connector: str = "", client_id: str | None = None) -> None:
        self.conn = conn
        self.name = name
        self.setting = f"connectors.{connector or '<name>'}"
        self.client_id = client_id   # a durable subscriber's connection only (one connection per client id)
        self.provider = Provider(conn, self.setting)
        self.status = LinkStatus()
        self.connection: Any = None
        self.session: Any = None
        self.objects: Any = None
        self.lossy: frozenset[str] = frozenset()   # where the provider loses characters above U+FFFF

    def open(self, probe: bool = False) -> Any:
        """The session (connected now when there is none, or when the ExceptionListener found the connection
        gone); probe: learn what the provider loses (objects.probe_characters) when connecting."""
        if self.session is not None and self.status.broken is None:
            return self.session
        if self.session is not None:
            self.drop()
        jpype = jvm.start(jvm.expand_jars(self.conn.jars, f"{self.setting}.jars"), self.conn.jvm_options,
                          f"{self.setting}.jvm_options")
        jvm.attach()
        from bridge.connectors.jms_native import objects  # Java types: only once the JVM runs
        self.objects = objects
        generation = self.status.retire()
        try:
            factory = self.provider.factory()
            connection = (factory.createConnection(self.conn.user, self.conn.password) if self.conn.user
                          else factory.createConnection())
        except jpype.JException as exc:
            raise self._down(provider_error(exc, self.setting)) from None
        except ConnectorError as exc:
            raise self._down(str(exc)) from None
        try:
            if self.client_id is not None:
                connection.setClientID(self.client_id)
            connection.setExceptionListener(exception_listener(self.status, generation))
            connection.start()
            self.session = connection.createSession(True, 0)   # transacted (SESSION_TRANSACTED)
        except jpype.JException as exc:
            _close(connection)
            raise self._down(provider_error(exc, self.setting)) from None
        self.connection = connection
        self.status.up()
        if probe:
            try:
                self.lossy = self.objects.probe_characters(connection)
            except jpype.JException as exc:
                log.warning("JMS %s: could not probe the provider's characters (%s); taken to carry every "
                            "character", self.name, exc.getMessage())
            if self.lossy:
                log.warning("JMS %s: this provider loses characters above U+FFFF in %s: reported as "
                            "coerced findings", self.name, " and ".join(sorted(self.lossy)))
        return self.session

    def _down(self, why: str) -> ConnectorError:
        self.status.down(why)
        return ConnectorError(why)

    def destination(self, text: str, setting: str = "destination") -> Any:
        """A route's destination text ("Q", "topic:T", "queue://..", "temp-queue://..") on this provider: a JNDI
        name when the connector looks destinations up (``jndi.destinations``)."""
        found = self.provider.destination(text, setting)
        if found is not None:
            return found
        dest = endpoint_destination(text)
        found = self.objects.java_destination(self.session, dest, self.temporary)
        if found is None:
            raise ConnectorError(f"{text}: this provider's temporary destinations cannot be named")
        return found

    def temporary(self, dest: Destination) -> Any:
        """A temporary destination by name: provider classes that allow it (ActiveMQ's), else None."""
        import jpype

        kind = "Queue" if dest.kind is DestinationKind.QUEUE else "Topic"
        try:
            return jpype.JClass(f"org.apache.activemq.command.ActiveMQTemp{kind}")(dest.name)
        except TypeError:   # not ActiveMQ's client
            return None

    def drop(self, why: str | None = None) -> None:
        """The provider failed (``why``), or the endpoint closes: close what is left; the next call connects
        again."""
        connection, self.connection, self.session = self.connection, None, None
        self.status.retire()
        if why is not None:
            self.status.down(why)
        if connection is not None:
            _close(connection)

    def close(self) -> None:
        self.drop()
        self.provider.close()
        self.status.closed()


def _close(connection: Any) -> None:
    try:
        connection.close()
    except Exception:   # noqa: BLE001 - a broken connection may fail to close: it is gone either way
        pass


class NativeJmsTarget(Target):
    protocol = "jms"
    writes_jms_model = True   # the router's MQTT -> JMS conversion gives it JmsMessage values, not STOMP frames

    def __init__(self, conn: JmsConnector, name: str, connector: str = "", destination: str = "",
                 setting: str = "") -> None:
        self.client = _Client(conn, name, connector)
        self.check_args = (conn, connector, destination, setting)   # check_native's: the route's endpoint
        self._io = ThreadPoolExecutor(1, thread_name_prefix=f"jms-native-{name}", initializer=name_this_thread)
        self._producers: dict[str, Any] = {}
        # id(headers) -> (headers, properties, objects.Prepared): messages of one route key share both
        self._prepared: dict[int, tuple[Any, Any, Any]] = {}
        self._session: Any = None
        self._failed = False   # a batch failed: the pipelined ones after it fail too, until the router resends
        self._queued: list[tuple[list[Outbound], Future[None]]] = []   # submitted, not taken by the worker yet
        self._queued_lock = threading.Lock()
        self._taking = False   # a _send_queued is on the worker's queue: later submissions join it
        self.commits = 0

    async def check(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._io, check_native, *self.check_args)

    async def start(self) -> None:
        return None   # connects with the first batch (a provider that is down fails that batch, retried)

    def _send(self, items: list[Outbound], pipelined: bool = False) -> None:
        """Send and commit one batch (on the worker thread). ``pipelined``: submitted behind others; after a
        failure such batches fail without being sent, so that the router's resend (``send``, in order) comes
        first and batches reach the provider in their order."""
        import jpype  # the JVM is running: the client opened it

        if pipelined and self._failed:
            raise ConnectorError("JMS provider: an earlier batch failed (sent again in order)")
        self._failed = True   # until this batch is committed
        if self.client.status.broken is not None:   # the ExceptionListener saw the connection go
            self._producers.clear()
        try:
            session = self.client.open(probe=True)
            if session is not self._session:   # producers and prepared headers belong to their session
                self._session = session
                self._producers.clear()
                self._prepared.clear()
            now = int(time.time() * 1000)
            rows = [(item, self._prepare(session, item)) for item in items]
            if not self._send_at_once(session, rows, now):
                for item, prepared in rows:
                    report = ConversionReport()
                    jmsg = self.client.objects.new_message(session, item.message, report, self.client.lossy)
                    args = self.client.objects.finish(jmsg, prepared, now, report)
                    self._producer(session, item.destination).send(jmsg, args.delivery_mode, args.priority,
                                                                   args.time_to_live)
                    item.extra.pop("findings", None)
                    if report:
                        item.extra["findings"] = _findings(report)
            session.commit()
            self.commits += 1
        except jpype.JException as exc:
            self._producers.clear()
            why = provider_error(exc, self.client.setting)
            self.client.drop(why)
            raise ConnectorError(why) from None
        self._failed = False

    def _prepare(self, session: Any, item: Outbound) -> Any:
        """The message's objects.Prepared, kept for the messages that share its headers and properties."""
        msg = item.message
        if not isinstance(msg, JmsMessage):
            raise ConnectorError(f"native JMS target got a {type(msg).__name__}, not a JMS message")
        headers, props = msg.headers, msg.properties
        known = self._prepared.get(id(headers))
        if known is None or known[0] is not headers or known[1] is not props:
            known = (headers, props, self.client.objects.prepare(
                session, headers, props, temporary=self.client.temporary, lossy=self.client.lossy))
            if len(self._prepared) >= PREPARED_MAX:
                self._prepared.clear()
            self._prepared[id(headers)] = known   # holds headers: their id is not reused while cached
        return known[2]

    def _producer(self, session: Any, destination: str) -> Any:
        producer = self._producers.get(destination)
        if producer is None:
            producer = session.createProducer(self.client.destination(destination))
            self._producers[destination] = producer
        return producer

    def _send_at_once(self, session: Any, rows: list[tuple[Outbound, Any]], now: int) -> bool:
        """A batch of TextMessages whose headers need no setter, in one JVM call (batch.BatchSend); False: not
        such a batch, or the JVM cannot, or the provider refused something (the transaction rolled back):
        the caller sends it call by call, where a refused property is a finding."""
        import jpype

        send = batch_send()
        if send is None:
            return False
        producers, texts, names, values, modes, priorities, ttls = [], [], [], [], [], [], []
        found: list[Any] = []
        for item, prepared in rows:
            body = item.message.body
            if type(body) is not TextBody or prepared.boxed is None:
                return False
            args = prepared.fixed
            if args is None:   # JMSExpiration: a time to live from now
                report = ConversionReport()
                args = self.client.objects.send_args(prepared, now, report)
                found.append(report.findings)
            else:
                found.append(prepared.findings)
            producers.append(self._producer(session, item.destination))
            texts.append(body.text)
            names.append(prepared.boxed[0])
            values.append(prepared.boxed[1])
            modes.append(args.delivery_mode)
            priorities.append(args.priority)
            ttls.append(args.time_to_live)
        try:
            send(session, producers, texts, names, values, modes, priorities, ttls)
        except jpype.JException as exc:
            log.info("JMS %s: %s; sending the batch call by call", self.client.name, exc.getMessage())
            session.rollback()
            return False
        for (item, _), findings in zip(rows, found, strict=True):
            if findings:
                item.extra["findings"] = list(findings)
        return True

    async def send(self, items: list[Outbound]) -> None:
        await asyncio.get_running_loop().run_in_executor(self._io, self._send, items)

    async def submit(self, items: list[Outbound]) -> asyncio.Future[None]:
        """Queue the batch for the worker and return at once: the route converts its next batch while this one
        is sent (the router's pipeline); the future ends once the batch is committed at the provider. The
        batches submitted while the worker sends one are sent after it together, in one transaction: a commit
        is a round trip to the provider (and its disk), half of the worker's time with one commit a batch
        (bench/HISTORY.md, session 20). One worker thread: batches reach the provider in the order of the calls."""
        done: Future[None] = Future()
        with self._queued_lock:
            self._queued.append((items, done))
            start, self._taking = not self._taking, True
        if start:
            self._io.submit(self._send_queued)
        return asyncio.wrap_future(done)

    def _send_queued(self) -> None:
        """On the worker: every batch queued so far, in one transaction; each batch's future gets the outcome."""
        with self._queued_lock:
            batches, self._queued = self._queued, []
            self._taking = False
        items = [item for batch, _ in batches for item in batch]
        try:
            self._send(items, True)
        except Exception as exc:   # ConnectorError, or a bug: every batch of the transaction fails
            for _, done in batches:
                done.set_exception(exc)
            return
        for _, done in batches:
            done.set_result(None)

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._io, self.client.close)
        self._io.shutdown(wait=False)

    def link_status(self) -> dict[str, object]:
        return self.client.status.as_dict()


class NativeJmsSource(Source):
    """A queue, a topic, or a durable subscription to a topic (``subscription``: its name, under the connector's
    client_id; it stays at the provider when the route goes: docs/connectors.md says how to remove it)."""

    def __init__(self, conn: JmsConnector, name: str, destination: str, *, selector: str | None = None,
                 connector: str = "", subscription: str | None = None, backout_threshold: int = 0) -> None:
        self.client = _Client(conn, name, connector, conn.client_id if subscription else None)
        self.backout_threshold = backout_threshold   # the route's: the provider must not dead-letter first
        self.destination = destination
        self.selector = selector
        self.subscription = subscription
        self.setting = f"route {name}: from.{'topic' if destination.startswith('topic:') else 'queue'}"
        self.connector = connector
        self._io = ThreadPoolExecutor(1, thread_name_prefix=f"jms-native-{name}", initializer=name_this_thread)
        self._consumer: Any = None
        self._open_batch = asyncio.Event()   # set: no batch awaits its commit or rollback
        self._closing = False

    async def check(self) -> None:
        await asyncio.get_running_loop().run_in_executor(
            self._io, check_native, self.client.conn, self.connector, self.destination, self.setting)

    async def start(self) -> None:
        self._open_batch.set()

    def _receive(self, max_items: int) -> list[Inbound] | None:
        """Up to ``max_items`` messages ([] after a wait with none); None: the provider failed (the connection
        is dropped, its open transaction with it, so the provider delivers those messages again)."""
        import jpype

        try:
            if self.client.status.broken is not None:   # the ExceptionListener saw the connection go
                raise ConnectorError(self.client.status.broken)
            session = self.client.open()
            if self._consumer is None:
                dest = self.client.destination(self.destination, self.setting)
                if self.subscription is not None:
                    self._consumer = session.createDurableSubscriber(dest, self.subscription, self.selector, False)
                else:
                    self._consumer = session.createConsumer(dest, self.selector) if self.selector else \
                        session.createConsumer(dest)
                self._redeliver_to_threshold(self._consumer)
            first = self._consumer.receive(RECEIVE_WAIT_MS)
            if first is None:
                return []
            got = [first]
            while len(got) < max_items:
                more = self._consumer.receiveNoWait()
                if more is None:
                    break
                got.append(more)
            return self._read_all(got)
        except (jpype.JException, ConnectorError) as exc:
            why = provider_error(exc, self.client.setting) if isinstance(exc, jpype.JException) else str(exc)
            log.warning("%s: %s (connecting again)", self.destination, why)
        except Exception as exc:   # a bug must not end the route: logged, and the batch comes again
            log.exception("%s: receiving failed", self.destination)
            why = f"receiving failed: {exc}"
        self._consumer = None
        self.client.drop(why)
        return None

    def _redeliver_to_threshold(self, consumer: Any) -> None:
        """ActiveMQ's client dead-letters a message itself once it was rolled back more than its redelivery
        policy's maximumRedeliveries (6 by default), before a route's backout threshold above that would back
        it out: this consumer's limit is raised to the threshold (-1, no limit, is kept). Other providers'
        limits are their settings (docs/connectors.md)."""
        get = getattr(consumer, "getRedeliveryPolicy", None)
        policy = get() if get is not None else None
        if policy is None:
            return
        most = int(policy.getMaximumRedeliveries())
        if most != -1 and most < self.backout_threshold:
            policy = policy.copy()   # the connection's map may share it with other consumers
            policy.setMaximumRedeliveries(self.backout_threshold)
            consumer.setRedeliveryPolicy(policy)
            log.info("%s: the provider's maximumRedeliveries %d raised to the route's backout threshold %d",
                     self.destination, most, self.backout_threshold)

    def _read_all(self, got: list[Any]) -> list[Inbound]:
        """The batch as Inbounds, its headers, properties and texts read in one JVM call (batch_read.py); a
        message that row cannot describe (or every one, when the call fails) is read call by call (``_read``)."""
        import jpype

        reader = batch_read(self.client.objects.JMSX)
        try:
            rows = reader(got) if reader is not None else None
        except jpype.JException as exc:
            log.info("%s: reading the batch in one call failed (%s); reading it message by message",
                     self.destination, exc.getMessage())
            rows = None
        if rows is None:
            return [self._read(m) for m in got]
        out = []
        for i, jmsg in enumerate(got):
            try:
                out.append(self._inbound(self.client.objects.from_row(jmsg, rows[i])))
            except Exception:   # noqa: BLE001 - whatever it was, the call-by-call reading says it exactly
                out.append(self._read(jmsg))
        return out

    def _read(self, jmsg: Any) -> Inbound:
        """The message as the route's Inbound; one that cannot be read (e.g. an ObjectMessage of a class this
        JVM cannot load, a value no JMS type has) is poison: to the route's backout destination with what could
        be read, not rolled back to the provider again and again until its own dead-letter queue takes it."""
        import jpype

        try:
            return self._inbound(self.client.objects.to_model(jmsg))
        except Exception as exc:   # noqa: BLE001 - a JMSException through JPype, or the model refusing a value
            why = str(exc.getMessage()) if isinstance(exc, jpype.JException) else str(exc)
        msg, findings = self.client.objects.unreadable(jmsg, why)
        item = self._inbound(msg)
        item.findings.extend(findings)
        item.poison = f"the JMS message cannot be read: {why}"
        return item

    def _inbound(self, msg: JmsMessage) -> Inbound:
        count = msg.properties.get("JMSXDeliveryCount")
        return Inbound(
            # JMS lets a producer go without a JMSMessageID (a hint, which ActiveMQ and IBM MQ ignore): a key of
            # its own then, so that records of different messages never share one
            key=f"jms:{msg.headers.message_id or 'none-' + uuid.uuid4().hex}", protocol="jms", message=msg,
            source_type=msg.body_type.java_class,
            size=_size(msg), destination=self.destination, received=time.time(),
            redelivery_count=max(int(count.value) - 1, 0) if count is not None and count.value else 0,
            qos=1 if msg.headers.delivery_mode is DeliveryMode.PERSISTENT else 0,
            persistent=msg.headers.delivery_mode is DeliveryMode.PERSISTENT, priority=msg.headers.priority)

    async def receive(self, max_items: int) -> list[Inbound]:
        await self._open_batch.wait()
        loop = asyncio.get_running_loop()
        delay = 1.0
        while not self._closing:
            items = await loop.run_in_executor(self._io, self._receive, max_items)
            if items:
                self._open_batch.clear()
                return items
            if items is None:   # the provider failed: again after a pause, doubling up to reconnect_max_seconds
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.client.conn.reconnect_max_seconds)
            else:
                delay = 1.0
        return []

    def _settle(self, commit: bool) -> None:
        session = self.client.session
        if session is None:
            return   # the connection went: the provider delivers the messages again
        try:
            session.commit() if commit else session.rollback()
        except Exception as exc:   # noqa: BLE001 - a JMSException through JPype: at least once, they come again
            log.warning("%s: %s failed (%s): the provider delivers the batch again", self.destination,
                        "commit" if commit else "rollback", exc)
            self._consumer = None
            self.client.drop(f"{'commit' if commit else 'rollback'} failed: {exc}")

    async def confirm(self, items: list[Inbound]) -> None:
        await asyncio.get_running_loop().run_in_executor(self._io, self._settle, True)
        self._open_batch.set()

    async def backout(self, items: list[Inbound]) -> None:
        await asyncio.get_running_loop().run_in_executor(self._io, self._settle, False)
        self._open_batch.set()

    async def close(self) -> None:
        self._closing = True
        self._open_batch.set()
        await asyncio.get_running_loop().run_in_executor(self._io, self.client.close)
        self._io.shutdown(wait=False)

    def link_status(self) -> dict[str, object]:
        return self.client.status.as_dict()


def native_jvm(conn: JmsConnector, name: str) -> Any:
    """The ``jpype`` module, the JVM running with the connector's jars, or RouteSetupError naming the setting.
    Route setup starts it on the calling (the event loop's) thread: JPype's JVM stays with the thread that
    started it, and an endpoint's worker ends with its route."""
    try:
        return jvm.start(jvm.expand_jars(conn.jars, f"connectors.{name}.jars"), conn.jvm_options,
                         f"connectors.{name}.jvm_options")
    except jvm.JvmError as exc:   # named by its setting already (connectors.NAME.jars), or by the connector
        why = str(exc)
        raise RouteSetupError(why if why.startswith(f"connectors.{name}.") else f"connectors.{name}: {why}") \
            from None


def check_native(conn: JmsConnector, name: str, destination: str = "", setting: str = "") -> None:
    """At route setup (an endpoint's check, on its worker: JNDI lookups may wait on the network): the JVM runs
    with the connector's jars and its connection factory class loads and takes its factory_properties (or, with
    jndi, its connection factory and ``destination`` are bound in the directory), or RouteSetupError says which
    setting is wrong (``setting``: the endpoint's, for the destination)."""
    jpype = native_jvm(conn, name)
    jvm.attach()
    if conn.jndi is None:
        try:
            jpype.JClass(conn.connection_factory)
        except TypeError as exc:
            raise RouteSetupError(f"connectors.{name}.connection_factory: {conn.connection_factory!r} is not on "
                                  f"the class path of jars ({exc})") from None
        except jpype.JException as exc:   # NoClassDefFoundError: a class it needs is in none of the jars
            raise RouteSetupError(f"connectors.{name}.jars: the connection factory {conn.connection_factory!r} "
                                  f"cannot load: {missing_class_hint(exc)}") from None
        try:   # made and given its factory_properties (a JMS connection factory connects only when asked)
            Provider(conn, f"connectors.{name}").factory()
        except ConnectorError as exc:
            raise RouteSetupError(str(exc)) from None
        return
    provider = Provider(conn, f"connectors.{name}")
    try:
        provider.factory()
        if destination and not destination.startswith("temp-"):
            provider.destination(destination, setting)
    except ConnectorError as exc:
        raise RouteSetupError(str(exc)) from None
    finally:
        provider.close()


def native_problems(rules: RulesFile) -> list[str]:
    """``mqbridge validate``: what check_native refuses for each endpoint of a native JMS connector (the JVM
    starts in the validating process; a JNDI directory must answer)."""
    problems: list[str] = []
    for route in rules.routes:
        ends = (("from", route.source), ("to", route.target), ("options.backout_destination",
                                                                route.options.backout_destination))
        for where, ep in ends:
            if not isinstance(ep, QueueEndpoint) or ep.connector not in rules.connectors:
                continue
            conn = rules.connectors[ep.connector]
            if not isinstance(conn, JmsConnector) or conn.client != "native":
                continue
            try:
                check_native(conn, ep.connector, ep.destination,
                             f"route {route.name}: {where}.{'topic' if ep.topic is not None else 'queue'}")
            except RouteSetupError as exc:
                if str(exc) not in problems:
                    problems.append(str(exc))
    return problems


_TEMPORARY_PREFIXES = (("temp-queue://", DestinationKind.QUEUE), ("temp-topic://", DestinationKind.TOPIC),
                       # what an envelope route names a temporary reply destination (the STOMP target's form)
                       ("/remote-temp-queue/", DestinationKind.QUEUE), ("/remote-temp-topic/", DestinationKind.TOPIC))


def endpoint_destination(text: str) -> Destination:
    """A route endpoint's destination text as a JMS destination (QueueEndpoint.destination: "Q", "topic:T";
    envelope targets name "queue:Q" and "topic:T", reply targets URIs, ActiveMQ's temp-queue:// and
    temp-topic:// too)."""
    for prefix, kind in _TEMPORARY_PREFIXES:
        if text.startswith(prefix):
            return Destination(kind, text[len(prefix):], "", (TEMPORARY,))
    if "://" in text:
        return Destination.parse(text)
    if text.startswith("topic:"):
        return Destination.topic(text[len("topic:"):])
    return Destination.queue(text.removeprefix("queue:"))


def _size(msg: JmsMessage) -> int:
    body: Any = msg.body
    for attr in ("data", "text"):
        value = getattr(body, attr, None)
        if isinstance(value, bytes | str):
            return len(value)
    return 0


__all__ = ["NativeJmsSource", "NativeJmsTarget", "check_native", "endpoint_destination", "native_jvm",
           "native_problems"]
