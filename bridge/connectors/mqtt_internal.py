"""The built-in broker as a route's source or target.

As a source, a route is a persistent broker session (client id ``$route:<name>``) subscribed to the
route's topic filter at QoS 2: the broker stores QoS 1/2 publications for it durably before it
acknowledges the publisher, and the route acknowledges them (PUBACK, or PUBREC+PUBCOMP) only after
the target accepted the converted message. A crash in between replays them, as for any client. When
the target is stuck and the session's queue reaches the route's max_queued, the broker holds the
publishers that fill it instead of dropping what it acknowledged (bridge.mqtt.flow). The session is
opened through the broker's public session API (``Broker.attach_route_session``).
A publisher's QoS 1 re-send that the broker stored again (``Message.key_id``, see
``Publisher._publish_qos1_persistent``) keeps the first publication's key ``mqtt:<id>`` and counts as a
redelivery. As a target, converted messages are published into the broker (or to one client's session) and the
target waits for the broker's store commit before the source is confirmed.
Under the broker's ACL file a route acts as its ``acl_user`` (an anonymous client without one): its session
receives only what that user may read, and ``MqttTarget.refusal`` says which topics it may not publish to.
"""
from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable

from bridge.connectors.base import ConnectorError, Inbound, Inbox, Outbound, Source, Target
from bridge.connectors.mqtt5_fields import message_properties, property_losses, publication_fields
from bridge.mqtt import identity
from bridge.mqtt import packets as P
from bridge.mqtt.acl import Acl, Grants
from bridge.mqtt.broker import ROUTE_CLIENT_PREFIX, Broker
from bridge.mqtt.session import Message, OutMsg, Session
from bridge.mqtt.sink import RouteSink
from bridge.mqtt.source_hold import HOLD_SECONDS, SourceHold
from mappings.mqtt.publication import MqttPublication
from mappings.report import Change, Finding

QOS0_BACKLOG = 10_000     # QoS 0 publications a route may have waiting before new ones are dropped
_boot = f"{int(time.time()):x}"
_qos0_keys = itertools.count(1)


def route_client_id(route: str) -> str:
    return ROUTE_CLIENT_PREFIX + route


def committed(broker: Broker) -> asyncio.Future[None]:
    """A future that ends once every store write queued so far is committed."""
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def done() -> None:
        if not fut.done():
            fut.set_result(None)

    broker.store.after_commit(done)
    return fut


async def relieved(broker: Broker, session: Session) -> None:
    """Return once ``session`` (a route's) no longer pushes back (or is gone)."""
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def done() -> None:
        if not fut.done():
            fut.set_result(None)

    if broker.when_relieved(session, done):
        await fut


def inbound_of(msg: Message, qos: int) -> Inbound:
    """A publication as a route would have taken it, for a record of what never reached the route (a
    drop, a removed route's message discarded): its message key is the one the route would have used."""
    kid = msg.key()
    key = f"mqtt:{kid}" if kid is not None and qos else f"mqtt:{_boot}:{next(_qos0_keys)}"
    pub = MqttPublication(topic=msg.topic, payload=msg.payload, qos=qos, retain=msg.retain, client_id=msg.origin,
                          username=msg.username, user_authenticated=identity.checked(msg.user_via),
                          **publication_fields(msg, time.time()))
    return Inbound(key=key, protocol="mqtt", message=pub, source_type="publish", size=len(msg.payload),
                   destination=msg.topic, received=msg.ts, client_id=msg.origin, qos=qos,
                   redelivery_count=msg.redelivery)


#: a route session's queue before it pushes back on its publishers (a soft limit: nothing is dropped)
ROUTE_MAX_QUEUED = 100_000


def dropped_for(clients: list[str]) -> Finding:
    """The finding of a route's publication that subscribers' full queues dropped (limits.max_queued and
    max_queued_bytes, or a QoS 0 backlog): counted by the broker, and said on its conversion-log record."""
    shown = ", ".join(clients[:5]) + (f" and {len(clients) - 5} more" if len(clients) > 5 else "")
    return Finding(Change.DROPPED, "delivery", f"not delivered to {shown}: the subscriber's queue was full")


class MqttSource(Source):
    def __init__(self, broker: Broker, route: str, topic_filter: str, max_inflight: int = 256,
                 max_queued: int | None = None, acl_user: str | None = None) -> None:
        self.broker = broker
        self.route = route
        self.topic_filter = topic_filter
        self.acl_user = acl_user
        self.client_id = route_client_id(route)
        self.max_inflight = max_inflight
        self.max_queued = max_queued if max_queued is not None else ROUTE_MAX_QUEUED
        self._queue = Inbox()
        self._reader = P.PacketReader()
        self._session: Session | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.sink: RouteSink | None = None   # set before start: the route takes publications directly (sink.py)
        # the router's hook for publications the route drops (QoS 0 beyond QOS0_BACKLOG; QoS 1/2 are never
        # dropped, their publishers are held instead): (the message as an Inbound, the reason)
        self.on_drop: Callable[[Inbound, str], None] | None = None

    # -- Source -------------------------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        # replays in-flight (DUP) and queued deliveries into our queue
        self._session = self.broker.attach_route_session(
            self.client_id, self.topic_filter, self, max_inflight=self.max_inflight, max_queued=self.max_queued,
            direct=self._on_qos0, direct_out=self._on_delivery, acl_user=self.acl_user, sink=self.sink)

    async def receive(self, max_items: int) -> list[Inbound]:
        first = await self._queue.get()
        items = [first]
        while len(items) < max_items and not self._queue.empty():
            items.append(self._queue.get_nowait())
        return items

    async def confirm(self, items: list[Inbound]) -> None:
        session = self._session
        if session is None:
            return
        for item in items:
            pid = item.handle
            if pid is None:
                continue
            if item.qos == 1:
                session.on_puback(pid)  # type: ignore[arg-type]
            else:
                session.on_pubrec(pid)  # type: ignore[arg-type]  # -> PUBREL -> our send -> PUBCOMP

    async def backout(self, items: list[Inbound]) -> None:
        # the broker keeps them in flight; retry them later, in order, as redeliveries
        self._queue.put_back(items)

    def session(self) -> Session | None:
        """The route's broker session, once started."""
        return self._session

    def detach_sink(self) -> None:
        """The route stops taking publications directly: from now on they go to its session."""
        if self._session is not None and self._session.sink is self.sink:
            self._session.sink = None

    async def close(self) -> None:
        self.detach_sink()
        if self._session is not None and self._session.link is self:
            self._session.detach()

    def flow_status(self) -> dict[str, object]:
        """The route session's queue and flow control, for status."""
        session = self._session
        if session is None:
            return {}
        return {"queued": len(session.queue), "inflight": len(session.inflight), "max_queued": session.max_queued,
                "backpressure": session.pushing_back,
                "held_publishers": self.broker.held_publishers(self.client_id)}

    # -- Link (what the session writes to) ------------------------------------------------------------

    def send(self, data: bytes) -> None:
        for packet in self._reader.feed(data):   # only PUBREL arrives encoded; deliveries come direct
            if isinstance(packet, P.PacketIdOnly) and packet.type == P.PUBREL:
                session = self._session
                if session is not None and self._loop is not None:
                    self._loop.call_soon(session.on_pubcomp, packet.packet_id)

    def send_durable(self, data: bytes) -> None:
        self.broker.store.after_commit(lambda: self.send(data))

    def send_qos0(self, data: bytes) -> bool:   # not used: QoS 0 deliveries come direct (_on_qos0)
        if self._queue.qsize() >= QOS0_BACKLOG:
            return False
        self.send(data)
        return True

    def _on_qos0(self, msg: Message, retain: bool) -> None:
        if self._queue.qsize() >= QOS0_BACKLOG:
            if self._session is not None:
                self._session.stats.dropped += 1
            self._dropped(msg, 0, f"QoS 0 publication dropped: the route has {QOS0_BACKLOG} waiting")
            return
        self._enqueue(msg, msg.topic, msg.payload, 0, retain, False, None, f"mqtt:{_boot}:{next(_qos0_keys)}")

    def _dropped(self, msg: Message, qos: int, reason: str) -> None:
        if self.on_drop is not None:
            self.on_drop(inbound_of(msg, qos), reason)

    def _on_delivery(self, out: OutMsg, dup: bool, durable: bool) -> None:
        if durable:   # QoS 2: the packet id is committed first (see Session._send_new)
            self.broker.store.after_commit(lambda: self._on_delivery(out, dup, False))
            return
        msg = out.msg
        kid = msg.key()
        key = f"mqtt:{kid}" if kid is not None else f"mqtt:{_boot}:{next(_qos0_keys)}"
        self._enqueue(msg, msg.topic, msg.payload, out.qos, out.retain, dup, out.packet_id, key)

    def _enqueue(self, msg: Message | None, topic: str, payload: bytes, qos: int, retain: bool, dup: bool,
                 pid: int | None, key: str) -> None:
        self._queue.put_nowait(publication_inbound(msg, topic, payload, qos, retain, dup, pid, key))


def publication_inbound(msg: Message | None, topic: str, payload: bytes, qos: int, retain: bool, dup: bool,
                        pid: int | None, key: str) -> Inbound:
    """A publication as a route takes it: from its session (``pid`` its delivery's packet id) or from its sink
    (bridge.routing.direct: no delivery, ``pid`` None)."""
    # the publication as its publisher sent it (MQ Telemetry Table 2: mqtt/msgid is the publisher's message
    # id, mqps/Ret its RETAIN flag). ``pid`` is this route's own delivery id, which acknowledges it, and
    # stands in for a publication that has no id of its own (a will, a message another route published,
    # a retained message recovered after a restart)
    if msg is None:
        pub = MqttPublication(topic, payload, qos, retain, dup, pid if qos else None)
        return Inbound(key, "mqtt", pub, "publish", len(payload), topic, time.time(), None, 1 if dup else 0, qos,
                       handle=pid)
    origin = msg.origin
    packet_id = (msg.packet_id or pid) if qos else None
    checked = identity.checked(msg.user_via)
    if not msg.props and msg.expires is None:
        # the usual publication, without MQTT 5 fields: by position, which costs about half of keywords (a
        # route-in message: 1.5 against 2.6 us for this function; tests/test_mqtt_internal_inbound.py)
        pub = MqttPublication(topic, payload, qos, retain or msg.retain, dup, packet_id, origin, msg.username,
                              None, None, None, None, (), None, checked)
    else:
        pub = MqttPublication(topic=topic, payload=payload, qos=qos, retain=retain or msg.retain, dup=dup,
                              packet_id=packet_id, client_id=origin, username=msg.username, user_authenticated=checked,
                              **publication_fields(msg, time.time()))
    return Inbound(key, "mqtt", pub, "publish", len(payload), topic, msg.ts, origin, msg.redelivery + (1 if dup else 0),
                   qos, handle=pid)


class MqttTarget(Target):
    protocol = "mqtt"

    def __init__(self, broker: Broker, route: str, client_id: str | None = None, default_qos: int = 2,
                 acl_user: str | None = None, hold: bool = True) -> None:
        """``hold``: QoS 1 deliveries to connected persistent sessions are held by the source, not journaled
        (source_hold.py; the route's ``direct`` option)."""
        self.broker = broker
        self.hold = hold
        self.held = 0              # deliveries held now, across the batches in flight
        self.held_journaled = 0    # held deliveries that had to be journaled (the client left, or was slow)
        self.origin = route_client_id(route)
        self.client_id = client_id
        self.default_qos = default_qos   # to one client without its own DEFAULT.QoS subscription (Table 4)
        self.acl_user = acl_user
        self._grants: tuple[Acl | None, Grants | None] = (None, None)   # resolved under this ACL

    def refusal(self, topic: str) -> str | None:
        """Why the route may not publish to ``topic`` under the broker's ACL file (None: it may)."""
        acl = self.broker.acl
        if acl is None:
            return None
        if self._grants[0] is not acl:   # a reload installed other rules
            self._grants = (acl, self.broker.route_grants(self.origin, self.acl_user))
        grants = self._grants[1]
        if grants is None or grants.may_publish(topic):
            return None
        who = f"acl_user {self.acl_user!r}" if self.acl_user is not None else "an anonymous client (no acl_user)"
        return f"the ACL ({acl.source}) does not let {who} publish to {topic!r}"

    async def start(self) -> None:
        return None

    async def send(self, items: list[Outbound]) -> None:
        """Publish the batch and wait for the store commit (``submit``)."""
        await (await self.submit(items))

    async def submit(self, items: list[Outbound]) -> asyncio.Future[None]:
        """Publish the batch (or hand it to the one client's session) now; the future returned ends at the
        store commit that holds it (the router keeps several batches in flight, published in order). A
        route to one client whose session does not exist (it never connected, or its clean session
        ended) is refused as a whole: the messages stay at the source and the router retries, with
        backoff, until the client has a session (as MQ keeps messages for a client that is away). To
        one client, each message is delivered at most at the QoS of the client's own subscription to
        ``DEFAULT.QoS`` (MQ Telemetry Table 4), else at most the route's ``default_qos``."""
        b = self.broker
        if self.client_id is not None and self.client_id not in b.sessions:
            raise ConnectorError(f"MQTT client {self.client_id!r} has no session on the broker: the messages "
                                 "stay at the source until it connects")
        b.take_pressing()   # forget what a publication this route did not make left there
        now = b.clock()
        hold = SourceHold(b.messages, b.store) if self.hold else None
        for item in items:
            pub = item.message
            assert isinstance(pub, MqttPublication)
            props, expires = message_properties(pub, now)
            msg = Message(pub.topic, pub.payload, pub.qos, pub.retain, self.origin, props=props, expires=expires)
            if props is not None or expires is not None:
                older = b.without_properties(pub.topic, self.client_id)
                if older:   # the conversion log says what those subscribers did not receive
                    item.extra["findings"] = property_losses(pub, older)
            msg.delivery_id = pub.packet_id   # MQ Telemetry Table 5: the MsgId's id, where the subscriber has it free
            msg.drops = []
            msg.held = hold
            if self.client_id is None:
                b.publish(msg)
            else:   # the QoS the client's DEFAULT.QoS subscription (or the route's default_qos) allows, for the log
                item.extra["qos"] = b.deliver_to_client(self.client_id, msg, self.default_qos)
            if msg.drops:   # subscribers whose full queue dropped it: no silent loss
                item.extra["findings"] = [*item.extra.get("findings", ()), dropped_for(msg.drops)]
            msg.drops = msg.held = None   # later deliveries of it (a retained replay) are journaled as usual
        pressing = b.take_pressing()
        return asyncio.ensure_future(self._accepted(committed(b), pressing, self._settled(hold)))

    def _settled(self, hold: SourceHold | None) -> asyncio.Future[None] | None:
        """A future that ends once ``hold`` holds nothing (None: it holds nothing now); what it still holds after
        HOLD_SECONDS is journaled (a slow client must not stall the route)."""
        if hold is None or not hold.pending:
            return None
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()

        held = hold.pending
        self.held += held

        def settled() -> None:
            timer.cancel()
            self.held -= held
            self.held_journaled += hold.journaled
            if not fut.done():
                fut.set_result(None)

        timer = loop.call_later(HOLD_SECONDS, hold.expire)
        hold.settle(settled)
        return fut

    def held_status(self) -> dict[str, int]:
        """For `mqbridge status`: deliveries held by the source now (in the batches in flight), and how many
        held ones were journaled in the broker after all."""
        return {"now": self.held, "journaled": self.held_journaled}

    async def _accepted(self, commit: asyncio.Future[None], pressing: list[Session],
                        held: asyncio.Future[None] | None = None) -> None:
        await commit
        if held is not None:   # every held delivery acknowledged, or journaled and committed
            await held
        # the batch reached routes from MQTT that push back (their target is stuck): like a publisher's
        # connection, this route is held (its source not confirmed) until they are down to their low water
        for session in pressing:
            await relieved(self.broker, session)
