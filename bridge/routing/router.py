"""The router: one worker per route moves messages source -> convert -> target, confirming the source
only after the target accepted (at least once end to end), sending poison messages to the route's
backout queue with the reason, and writing an ingress and an egress record per message to the
conversion log. Routes can be replaced at run time (reload) without losing a message."""
from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import deque
from collections.abc import Iterable
from concurrent.futures import Executor
from dataclasses import dataclass

from bridge.connectors.base import ConnectorError, Inbound, Outbound, Source, Target
from bridge.connectors.embedded import EmbeddedSource, EmbeddedTarget, QueueStore
from bridge.connectors.mqtt_internal import MqttSource, MqttTarget
from bridge.connectors.registry import CONNECTOR_FACTORIES, RouteSetupError
from bridge.convlog import LogSink, RecordLines
from bridge.mqtt.broker import Broker
from bridge.routing.base import Converter, target_protocol
from bridge.routing.convert import DEAD_LETTER_QUEUE, RouteConverter, backout_message
from bridge.routing.direct import DirectIntake
from bridge.routing.envelope import EnvelopeConverter
from bridge.routing.kept import KeptSessions
from bridge.routing.steps import Good, Poison
from mappings.convlog_schema import Direction, Status
from mappings.errors import MappingError
from mappings.report import ConversionReport
from mappings.rules.model import EMBEDDED, MqttEndpoint, QueueEndpoint, Route, RulesFile
from mappings.selector.views import SourceSelector, source_selector

log = logging.getLogger("mqbridge.router")

BATCH = 128
RETRY_MIN = 0.1
RETRY_MAX = 10.0
SETTLE_SECONDS = 2.0   # a stopping route waits this long for the target to accept the batches in flight


def backout_queue_name(route: str) -> str:
    """Default backout queue of a route: BACKOUT.<route>, cut to MQ's 48-character names."""
    return ("BACKOUT." + re.sub(r"[^A-Za-z0-9._/%]", "_", route))[:48]


@dataclass(slots=True)
class _Batch:
    """A batch in a route's pipeline: what came from the source, what was submitted to the target, and
    the target's acceptance of it."""
    items: list[Inbound]
    good: list[Good]
    accepted: asyncio.Future[None]
    filtered: int = 0   # items the route's selector did not match: confirmed with the batch, not converted


def _settled() -> asyncio.Future[None]:
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    done.set_result(None)
    return done


class RouteWorker:
    def __init__(self, router: Router, route: Route, source: Source, target: Target,
                 backout: Target, backout_dest: str, converter: Converter,
                 selector: SourceSelector | None = None) -> None:
        self.router = router
        self.route = route
        self.source = source
        self.target = target
        self.backout = backout
        self.backout_dest = backout_dest
        self.converter = converter
        self.selector = selector   # evaluated here for MQTT sources only (queues and JMS filter at the source)
        self.task: asyncio.Task[None] | None = None
        self.moved = 0
        self.filtered = 0          # acknowledged, not converted, not logged: the selector did not match
        self.dropped = 0           # dropped before the route took them (its broker session's limits): logged
        self.failed = 0
        self.backed_out = 0
        self.last_error: str | None = None
        self._stopping = False
        self.intake: DirectIntake | None = None   # takes clients' publications directly (direct.py)

    @property
    def target(self) -> Target:
        return self._target

    @target.setter
    def target(self, target: Target) -> None:
        self._target = target
        # the broker's ACL check of a route into MQTT (MqttTarget.refusal), looked up here: classify runs per message
        self._refusal = target.refusal if isinstance(target, MqttTarget) else None

    async def start(self) -> None:
        await self.target.start()
        await self.backout.start()
        await self.source.start()
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"route:{self.route.name}")

    async def check(self) -> None:
        """The endpoints' checks (Source.check, Target.check), before anything running is replaced."""
        await self.source.check()
        await self.target.check()
        if self.backout is not self.target:
            await self.backout.check()

    async def stop(self) -> None:
        """Finish the batch in hand, then stop; what was received and not confirmed stays at the source."""
        self._stopping = True
        if self.intake is not None and isinstance(self.source, MqttSource):
            self.source.detach_sink()     # new publications go to the session, for whoever takes it next
            await self.intake.drain()     # and what the route took is committed and acknowledged
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except asyncio.CancelledError:
                pass
            self.task = None
        await self.source.close()
        await self.target.close()
        if self.backout is not self.target:
            await self.backout.close()   # e.g. an mq backout destination holds its own connection

    async def _run(self) -> None:
        """Keep up to ``pipeline`` batches in flight at the target (each converted and submitted while
        the ones before it wait for the target's acceptance) and confirm them at the source strictly in
        order, each only once the target accepted it."""
        depth = self.route.options.pipeline
        inflight: deque[_Batch] = deque()
        receiving: asyncio.Future[list[Inbound]] | None = None
        try:
            while True:
                if receiving is None and len(inflight) < depth:
                    receiving = asyncio.ensure_future(self.source.receive(BATCH))
                head = inflight[0].accepted if inflight else None
                await asyncio.wait([f for f in (head, receiving) if f is not None],
                                   return_when=asyncio.FIRST_COMPLETED)
                if head is not None and head.done():
                    try:
                        await self._finish(inflight)
                    except Exception as exc:   # a bug must not kill the route: back out what is unconfirmed
                        await asyncio.gather(*(b.accepted for b in inflight), return_exceptions=True)
                        unconfirmed = [item for batch in inflight for item in batch.items]
                        inflight.clear()
                        await self._failed(exc, unconfirmed)
                elif receiving is not None and receiving.done():
                    items = receiving.result()
                    receiving = None
                    try:
                        inflight.append(await self._start(items))
                    except Exception as exc:   # nothing of it was submitted: the batches before it go on
                        await self._failed(exc, items)
        except asyncio.CancelledError:
            await asyncio.shield(self._settle(inflight))
            unconfirmed = [item for batch in inflight for item in batch.items]
            if (receiving is not None and not receiving.cancel() and not receiving.cancelled()
                    and receiving.exception() is None):
                unconfirmed += receiving.result()
            if unconfirmed:
                await asyncio.shield(self.source.backout(unconfirmed))
            raise

    async def _settle(self, inflight: deque[_Batch]) -> None:
        """Stopping: the batches in flight that the target accepts within SETTLE_SECONDS are logged and confirmed
        as usual, in order, so that a reload or a stop does not deliver them again; the caller backs out the rest."""
        if not inflight:
            return
        await asyncio.wait([b.accepted for b in inflight], timeout=SETTLE_SECONDS)
        while inflight:
            head = inflight[0].accepted
            if not head.done() or head.cancelled() or head.exception() is not None:
                return
            try:
                await self._finish(inflight)
            except Exception as exc:   # left to the caller's backout
                log.error("route %s: confirming while stopping failed", self.route.name, exc_info=exc)
                return

    async def _failed(self, exc: Exception, items: list[Inbound]) -> None:
        log.error("route %s: batch failed", self.route.name, exc_info=exc)
        self.last_error = str(exc)
        await self.source.backout(items)
        await asyncio.sleep(RETRY_MIN)

    def classify(self, item: Inbound) -> Good | Poison | None:
        """What the route does with one message: convert it (Good), send it to the backout destination
        (Poison: why, and whether it is past the backout threshold), or nothing (None: the route's selector
        did not match it; it is confirmed with its batch)."""
        if self.selector is not None:
            try:
                if not self.selector.matches(item.message, item.received):
                    return None   # never the route's message (JMS selector)
            except MappingError as exc:
                return Poison(item, f"selector: the message has no JMS view: {exc}", False)
        if item.poison is not None:
            return Poison(item, item.poison, False)
        threshold = self.route.options.backout_threshold
        if item.redelivery_count >= threshold:
            return Poison(item, f"delivered {item.redelivery_count} times, backout threshold {threshold}", True)
        try:
            out, target_type, report = self.converter.convert(item)
        except MappingError as exc:
            return Poison(item, f"conversion failed: {exc}", False)
        refusal = self._refusal
        refused = refusal(out.destination) if refusal is not None else None
        if refused is not None:   # the broker's ACL, under the route's acl_user
            return Poison(item, refused, False)
        if item.findings:   # losses of the source's own reading (e.g. JMS over STOMP) come first
            report.findings[:0] = item.findings
        return (item, out, target_type, report)

    def backout_outbound(self, poison: list[Poison]) -> list[Outbound]:
        """The backout destination's messages for ``poison``."""
        dead_letter = self.route.options.backout_dead_letter
        if dead_letter is None:
            dead_letter = self.backout_dest == DEAD_LETTER_QUEUE
        return [Outbound(p.item.key, backout_message(p.item, self.route.name, p.reason, dead_letter=dead_letter,
                                                     threshold=p.past), self.backout_dest)
                for p in poison]

    def backed_out_now(self, poison: list[Poison]) -> None:
        """``poison`` is at the backout destination: log and record it."""
        now = time.time()
        for p in poison:
            log.warning("route %s: message %s to %s: %s", self.route.name, p.item.key, self.backout_dest, p.reason)
            self.router.record(self.route, p.item, "mq", Direction.EGRESS, Status.BACKOUT, reason=p.reason, now=now,
                               destination=self.backout_dest,   # with what the source could not read
                               report=ConversionReport(list(p.item.findings)) if p.item.findings else None)
        self.backed_out += len(poison)

    def accepted_now(self, good: list[Good]) -> None:
        """``good`` is at the target: its conversion-log records (with the target's own findings)."""
        for _, out, _, report in good:
            extra = out.extra.get("findings")
            if extra:
                report.findings.extend(extra)  # type: ignore[arg-type]  # the target's losses
        self.router.record_ok(self.route, self.converter.target_protocol, good, time.time())
        self.moved += len(good)

    async def _start(self, items: list[Inbound]) -> _Batch:
        """Convert a batch, deliver its poison messages to the backout destination and submit the rest."""
        good: list[Good] = []
        poison: list[Poison] = []
        filtered = 0
        for item in items:
            verdict = self.classify(item)
            if verdict is None:
                filtered += 1
            elif isinstance(verdict, Poison):
                poison.append(verdict)
            else:
                good.append(verdict)
        if poison:
            await self._deliver(self.backout_outbound(poison), self.backout)
            self.backed_out_now(poison)
        accepted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if not good:
            accepted.set_result(None)
            return _Batch(items, good, accepted, filtered)
        try:
            accepted = await self.target.submit([g[1] for g in good])
        except (ConnectorError, OSError) as exc:
            accepted.set_exception(exc)   # retried in order when this batch is the oldest in flight
        return _Batch(items, good, accepted, filtered)

    async def _finish(self, inflight: deque[_Batch]) -> None:
        """The oldest batch in flight is settled at the target: log it and confirm it at the source. If
        the target refused it, every batch in flight is delivered again, in order, before that."""
        batch = inflight[0]
        exc = batch.accepted.exception()
        if exc is not None:
            if not isinstance(exc, (ConnectorError, OSError)):
                raise exc
            self._refused(exc, len(batch.good))
            await asyncio.gather(*(b.accepted for b in inflight), return_exceptions=True)
            await asyncio.sleep(RETRY_MIN)
            for later in inflight:   # later ones may have reached the target already: at least once
                await self._deliver([g[1] for g in later.good])
                later.accepted = _settled()
        self.last_error = None
        self.accepted_now(batch.good)
        await self.source.confirm(batch.items)
        self.filtered += batch.filtered
        inflight.popleft()

    def dropped_at_source(self, item: Inbound, reason: str) -> None:
        """A publication the route's broker session dropped (MqttSource.on_drop): counted, and logged
        as an egress record with status dropped."""
        self.dropped += 1
        self.router.record(self.route, item, self.converter.target_protocol, Direction.EGRESS, Status.DROPPED,
                           reason=reason, now=time.time())

    def _refused(self, exc: BaseException, count: int) -> None:
        self.failed += 1
        if self.last_error != str(exc):
            log.warning("route %s: target refused a batch of %d, retrying: %s", self.route.name, count, exc)
        self.last_error = str(exc)

    async def _deliver(self, outs: list[Outbound], target: Target | None = None) -> None:
        target = target or self.target
        delay = RETRY_MIN
        while True:
            try:
                await target.send(outs)
                self.last_error = None
                return
            except (ConnectorError, OSError) as exc:
                self._refused(exc, len(outs))
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX)


class Router:
    def __init__(self, broker: Broker, queues: QueueStore, convlog: LogSink | None,
                 gateway_id: str, executor: Executor) -> None:
        self.broker = broker
        self.queues = queues
        self.convlog = convlog
        self.gateway_id = gateway_id
        self.executor = executor
        self.rules = RulesFile()
        self.workers: dict[str, RouteWorker] = {}
        self._lines = RecordLines(gateway_id)
        self.kept = KeptSessions(broker, convlog, self._lines)   # the sessions of routes that are gone
        self._applying = asyncio.Lock()

    # -- building ---------------------------------------------------------------------------------

    def _connector_type(self, rules: RulesFile, ep: QueueEndpoint) -> str:
        return rules.connector(ep.connector).type

    def _endpoint(self, rules: RulesFile, route: Route, ep: MqttEndpoint | QueueEndpoint,
                  role: str) -> Source | Target:
        if isinstance(ep, MqttEndpoint):
            if role == "source":
                return MqttSource(self.broker, route.name, ep.mqtt,
                                  max_inflight=max(256, BATCH * route.options.pipeline),
                                  max_queued=route.options.max_queued, acl_user=route.options.acl_user)
            return MqttTarget(self.broker, route.name, ep.client_id, route.options.default_qos,
                              route.options.acl_user, hold=route.options.direct)
        ctype = self._connector_type(rules, ep)
        if ctype == EMBEDDED:
            if role == "target" and ep.reply_to and ep.topic is None:   # queues named by the envelope
                return EmbeddedTarget(self.queues, self.executor)
            if ep.queue is None:
                raise RouteSetupError(f"route {route.name}: the embedded store has queues, not topics")
            if role == "source":
                return EmbeddedSource(self.queues, ep.queue, self.executor,
                                      selector=source_selector(route.options, "mq"))
            return EmbeddedTarget(self.queues, self.executor)
        factory = CONNECTOR_FACTORIES.get(ctype)
        if factory is None:
            raise RouteSetupError(f"route {route.name}: no {ctype} connector is available in this build")
        return factory(rules, route, ep, role)

    def _source_protocol(self, rules: RulesFile, route: Route) -> str:
        src = route.source
        if isinstance(src, MqttEndpoint):
            return "mqtt"
        return "jms" if self._connector_type(rules, src) == "jms" else "mq"

    def build(self, rules: RulesFile, route: Route) -> RouteWorker:
        source = self._endpoint(rules, route, route.source, "source")
        target = self._endpoint(rules, route, route.target, "target")
        assert isinstance(source, Source) and isinstance(target, Target)
        tproto = target_protocol(route, self._connector_type(rules, route.target)
                                 if isinstance(route.target, QueueEndpoint) else "mqtt")
        try:
            kind: type[RouteConverter | EnvelopeConverter] = (
                EnvelopeConverter if route.options.mqtt_format == "envelope" else RouteConverter)
            converter: Converter = kind(route, self._source_protocol(rules, route), tproto)
        except MappingError as exc:
            raise RouteSetupError(f"route {route.name}: {exc.reason}") from None
        if getattr(target, "writes_jms_model", False) and isinstance(converter, RouteConverter):
            converter.model_path()   # the native JMS target: JmsMessage values, not STOMP frames
        bdest = route.options.backout_destination
        if bdest is None:
            backout: Target = EmbeddedTarget(self.queues, self.executor)
            dest = backout_queue_name(route.name)
        else:
            built = self._endpoint(rules, route, bdest, "target")
            assert isinstance(built, Target)
            backout, dest = built, bdest.destination
        selector = source_selector(route.options, "mqtt") if isinstance(route.source, MqttEndpoint) else None
        worker = RouteWorker(self, route, source, target, backout, dest, converter, selector)
        if isinstance(source, MqttSource):   # what the route's broker session drops is logged, not silent
            source.on_drop = worker.dropped_at_source
            if route.options.direct and isinstance(target, EmbeddedTarget) and isinstance(backout, EmbeddedTarget):
                worker.intake = DirectIntake(worker, source, self.broker, self.queues, self.executor)
                source.sink = worker.intake
        return worker

    # -- lifecycle --------------------------------------------------------------------------------

    async def apply(self, rules: RulesFile, discard: Iterable[str] = ()) -> list[str]:
        """Start, stop or restart routes so that the running set matches ``rules``. Every new worker
        is built (validated) before any running one is touched. The broker sessions of routes that are
        gone are retired and their messages handed to the routes that match them, or kept (kept.py);
        ``discard`` names routes whose kept messages are dropped instead. Returns what changed."""
        async with self._applying:   # a SIGHUP and an admin reload at once run one after the other
            return await self._apply(rules, discard)

    async def _apply(self, rules: RulesFile, discard: Iterable[str]) -> list[str]:
        wanted = {r.name: r for r in rules.routes if r.enabled}
        changed = [name for name, r in wanted.items()
                   if name not in self.workers or self.workers[name].route != r]
        reading_mqtt = {name for name, r in wanted.items() if isinstance(r.source, MqttEndpoint)}
        discarding = self.kept.check_discard(discard, reading_mqtt)
        built = {name: self.build(rules, wanted[name]) for name in changed}
        for worker in built.values():
            await worker.check()
        removed = [name for name in self.workers if name not in wanted]
        summary = []
        for name in removed + [n for n in changed if n in self.workers]:
            worker = self.workers.pop(name)
            await worker.stop()
            self.kept.target_protocols[name] = worker.converter.target_protocol
        summary += [f"stopped {name}" for name in removed]
        self.kept.retire(reading_mqtt)   # before any new route subscribes: what they hold goes to it
        for name, worker in built.items():
            await worker.start()
            self.workers[name] = worker
            summary.append(f"started {name}")
        summary += self.kept.settle(discarding)
        summary += [self.kept.discard(name) for name in discarding]
        self.rules = rules
        return summary

    async def close(self) -> None:
        for worker in list(self.workers.values()):
            await worker.stop()
        self.workers.clear()

    def status(self) -> list[dict[str, object]]:
        out: list[dict[str, object]] = []
        for name, w in self.workers.items():
            row: dict[str, object] = {"route": name, "moved": w.moved, "filtered": w.filtered, "dropped": w.dropped,
                                      "backout": w.backed_out, "delivery_failures": w.failed,
                                      "last_error": w.last_error}
            if isinstance(w.source, MqttSource):   # queue, max_queued, backpressure, held_publishers
                row.update(w.source.flow_status())
            if w.intake is not None:   # publications taken directly: not yet committed, and the commits
                row["direct"] = {"pending": w.intake.pending, "commits": w.intake.commits}
            if isinstance(w.target, MqttTarget) and w.target.hold:   # deliveries the source held (source_hold.py)
                row["held"] = w.target.held_status()
            for end, endpoint in (("source", w.source), ("target", w.target)):   # a provider link's state
                link = getattr(endpoint, "link_status", None)
                if link is not None:
                    row[f"{end}_link"] = link()
            out.append(row)
        return out

    # -- conversion log ---------------------------------------------------------------------------------

    def record_ok(self, route: Route, target_proto: str,
                  good: list[tuple[Inbound, Outbound, str, ConversionReport]], now: float) -> None:
        """The ingress and egress records of a batch the target accepted, queued as one entry: their templates
        and values (convlog.RecordLines.values), rendered by the conversion log process."""
        if self.convlog is not None:
            self.convlog.record_values(self._lines.values(route.name, target_proto, good, now))

    def record(self, route: Route, item: Inbound, target_proto: str, direction: Direction, status: Status, *,
               now: float, target_type: str | None = None, target_size: int | None = None,
               report: ConversionReport | None = None, reason: str | None = None,
               destination: str | None = None) -> None:
        """The ingress and egress records of one message (a backout, a drop): the lines of convlog.RecordLines."""
        if self.convlog is None:
            return
        self.convlog.record_lines(self._lines.one(
            route.name, target_proto, item, direction, status, now, target_type=target_type,
            target_size=target_size, findings=report.findings if report is not None else (), reason=reason,
            destination=destination))
