"""One client's session: subscriptions, the outbound queue and in-flight window, the acknowledgements.

WebSphere MQ Telemetry docs "Qualities of service provided by an MQTT client" and WebSphere Message
Broker docs ("Quality of Service levels and flows"): QoS 1 PUBLISH/PUBACK, QoS 2
PUBLISH/PUBREC/PUBREL/PUBCOMP; in-flight messages are re-sent with DUP set when the client reconnects.
SwiftMQ docs "MQTT Swiftlet": persistent sessions keep subscriptions and queue QoS 1/2 messages while
the client is away.

A session never touches sockets or SQLite itself: it writes through a ``Link`` (the connection, when
there is one) and journals through a ``DeliveryJournal`` (the broker's store, for persistent sessions).
What it does with a full queue is ``overflow.py``; what its client published and the broker still answers
for (QoS 2 until PUBREL, QoS 1 re-send recognition) is ``inbound.py``.
"""
from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

from bridge.mqtt import packets as P
from bridge.mqtt.acl import Grants
from bridge.mqtt.delivery_journal import DeliveryJournal, Journal
from bridge.mqtt.inbound import Inbound
from bridge.mqtt.message import NO_LIMIT, Message, OutMsg, SessionStats
from bridge.mqtt.outgoing import delivery_bytes, send_qos0_5
from bridge.mqtt.overflow import Overflow
from bridge.mqtt.sink import RouteSink
from bridge.mqtt.store import QUEUED, RELEASED, SENT

__all__ = ["NO_LIMIT", "Journal", "Link", "Message", "OutMsg", "Session", "SessionStats"]

log = logging.getLogger("mqbridge.broker")


class Link(Protocol):
    """What a session needs from a live connection."""

    def send(self, data: bytes) -> None: ...
    def send_durable(self, data: bytes) -> None: ...
    def send_qos0(self, data: bytes) -> bool:
        """Send a QoS 0 delivery unless the client's unsent output is at its QoS 0 limit (False: not sent)."""


class Session:
    __slots__ = ("client_id", "persistent", "protocol_level", "journal", "max_inflight", "max_queued",
                 "max_queued_bytes", "queued_bytes", "overflow", "subscriptions", "queue",
                 "inflight", "unsent", "inbound", "link", "direct", "direct_out", "sink", "last_seen",
                 "expiry_seconds", "ends_with_connection", "max_packet_out", "clock", "stats", "_next_pid",
                 "_next_seq", "username", "user_via", "acl", "aliases_out", "topic_aliases_out")

    def __init__(self, client_id: str, *, persistent: bool, protocol_level: int,
                 journal: Journal | None, max_inflight: int, max_queued: int,
                 on_release: Callable[[Message], None], max_queued_bytes: int = 1 << 62) -> None:
        self.client_id = client_id
        self.persistent = persistent
        self.protocol_level = protocol_level
        self.journal = DeliveryJournal(journal, client_id, on_release) if persistent and journal else None
        self.max_inflight = max_inflight
        self.max_queued = max_queued
        self.max_queued_bytes = max_queued_bytes   # also bounds the unreleased inbound QoS 2 (Publisher)
        self.queued_bytes = 0                      # Message.size() of what is in ``queue``
        self.overflow: Overflow | None = None      # what happens when the queue is full (overflow.py)
        self.subscriptions: dict[str, int] = {}   # topic filter -> subscription options (3.1/3.1.1: the QoS)
        # QoS 1/2 deliveries waiting for the window: () until one waits (a deque costs 0.7 KiB), see _queue()
        self.queue: deque[OutMsg] | tuple[()] = ()
        self.inflight: dict[int, OutMsg] = {}     # packet id -> delivery, in send order
        # in flight, to be re-sent once the window allows (resume); made when needed (an idle session's memory)
        self.unsent: deque[OutMsg] | None = None
        self.inbound: Inbound | None = None       # made when the client first publishes QoS 2 (take_inbound)
        self.link: Link | None = None
        # in-process consumers (a route) take messages without the wire encoding: QoS 0 as (msg, retain),
        # QoS 1/2 as (delivery, dup, durable) — durable: only once the store has committed
        self.direct: Callable[[Message, bool], None] | None = None
        self.direct_out: Callable[[OutMsg, bool, bool], None] | None = None
        self.sink: RouteSink | None = None   # a route that takes client publications with its own commit (sink.py)
        self.last_seen = 0.0
        self.expiry_seconds = 0
        # MQTT 5: a Session Expiry Interval of 0 on a resumed persistent session: it ends with this connection
        self.ends_with_connection = False
        self.max_packet_out = NO_LIMIT   # MQTT 5: the client's Maximum Packet Size
        # MQTT 5: Topic Aliases towards the client on its current connection (outgoing.py)
        self.aliases_out = 0
        self.topic_aliases_out: dict[str, int] | None = None
        self.clock: Callable[[], float] = time.time   # the broker's (Message.expires is in its time)
        self.stats = SessionStats()
        self._next_pid = 1
        self._next_seq = 1
        self.username: str | None = None   # of its client's last CONNECT
        self.user_via: str | None = ""     # how that name was established (identity.py); None: not recorded
        self.acl: Grants | None = None     # that client's ACL rules (acl.py); None: no ACL file

    # -- outbound ---------------------------------------------------------------------------------

    def deliver(self, msg: Message, qos: int, retain: bool = False, sub_ids: list[int] | None = None,
                shared: str | None = None, hold: Callable[[OutMsg], None] | None = None) -> None:
        """A publication matched one of this session's subscriptions (or is a retained replay); ``sub_ids``:
        the MQTT 5 Subscription Identifiers of the subscriptions it matched; ``hold``: given a QoS 1/2 delivery
        as it is made, before it is sent or journaled (a clean member's shared delivery: shared_guard.py; a route's
        delivery its source holds: source_hold.py)."""
        link = self.link
        if qos == 0:
            if link is None:
                return  # QoS 0 is not queued for absent clients
            if self.direct is not None:   # an in-process consumer (a route) takes the message itself
                self.stats.sent += 1
                self.direct(msg, retain)
                return
            if self.protocol_level != 5:   # the hot path: the same bytes for every such subscriber
                sent = link.send_qos0(msg.qos0_bytes() if not retain else
                                      P.encode_publish(msg.topic_b, msg.payload, 0, True, False, None))
            else:
                data = msg.qos0_5   # once encoded, the same bytes for every plain level 5 subscriber
                if data is None or retain or sub_ids or self.aliases_out or len(data) > self.max_packet_out:
                    sent = send_qos0_5(self, link, msg, retain, sub_ids)
                    if sent is None:
                        return
                else:
                    sent = link.send_qos0(data)
            if sent:
                self.stats.sent += 1
                return
            self.stats.dropped += 1
            if msg.drops is not None:
                msg.drops.append(self.client_id)
            return
        queue = self.queue
        size = msg.size()
        direct = link is not None and not queue and len(self.inflight) < self.max_inflight
        if len(queue) >= self.max_queued or (not direct and self.queued_bytes + size > self.max_queued_bytes):
            overflow = self.overflow
            if overflow is None:
                overflow = self.overflow = Overflow()
            if not overflow.full(self, msg):
                if msg.drops is not None:
                    msg.drops.append(self.client_id)
                return
        out = OutMsg(msg, qos, retain, self._next_seq, sub_ids, shared)
        self._next_seq += 1
        if hold is not None:
            hold(out)
        if self.journal is not None and out.held is None:   # held: the route's source keeps it (source_hold.py)
            self.journal.new(out)
        if direct and link is not None:
            self._send_new(out, link)
        else:
            self._queue().append(out)
            self.queued_bytes += size

    def _queue(self) -> deque[OutMsg]:
        queue = self.queue
        if queue.__class__ is tuple:
            queue = self.queue = deque()
        return queue   # type: ignore[return-value]

    def _allocate_pid(self, preferred: int | None = None) -> int:
        inflight = self.inflight
        if preferred is not None and preferred not in inflight:
            return preferred
        pid = self._next_pid
        while pid in inflight:
            pid = pid + 1 if pid < 65535 else 1
        self._next_pid = pid + 1 if pid < 65535 else 1
        return pid

    def _send_new(self, out: OutMsg, link: Link) -> None:
        msg = out.msg
        if self.protocol_level == 5 and self.direct_out is None and msg.expired(self.clock()):
            # not sent yet: it is deleted (MQTT 5 §3.3.2.3.3)
            self.stats.expired += 1
            self.finish(out)
            return
        pid = self._allocate_pid(msg.delivery_id)
        data = None
        if self.direct_out is None:
            data = delivery_bytes(self, out, False, pid)
            if data is None:   # larger than the client's Maximum Packet Size: discarded as if delivered
                self.finish(out)
                return
        out.packet_id = pid
        out.state = SENT
        self.inflight[pid] = out
        self.stats.sent += 1
        journal = self.journal
        if journal is not None and out.held is None:
            journal.sent(out)
            if out.qos == 2:
                # the packet id must be durable before the PUBLISH leaves, or a crash could make us
                # send the same message again under a new id: a QoS 2 duplicate.
                self._emit(link, out, dup=False, durable=True, data=data)
                return
        elif out.guard is not None and out.qos == 2:
            # a clean member's shared QoS 2 delivery: "sent" durable before the PUBLISH leaves, so that a
            # restart never hands a message this client may have to another member [MQTT-4.8.2-5]
            out.guard[0].sent(out)
            self._emit(link, out, dup=False, durable=True, data=data)
            return
        self._emit(link, out, dup=False, durable=False, data=data)

    def _emit(self, link: Link, out: OutMsg, *, dup: bool, durable: bool, data: bytes | None = None) -> None:
        """Hand a QoS 1/2 delivery to the link: encoded (``data``, when the caller has), or as it is to an
        in-process consumer."""
        if self.direct_out is not None:
            self.direct_out(out, dup, durable)
            return
        if data is None:
            data = delivery_bytes(self, out, dup, out.packet_id, checked=False)
            assert data is not None
        if durable:
            link.send_durable(data)
        else:
            link.send(data)

    def _fill_window(self) -> None:
        link = self.link
        if link is None:
            return
        unsent = self.unsent
        while unsent and len(self.inflight) - len(unsent) < self.max_inflight:   # (None or empty: none)
            out = unsent.popleft()
            if self.inflight.get(out.packet_id) is out:   # type: ignore[arg-type]
                self._resend(link, out)
        queue = self.queue
        while queue and len(self.inflight) < self.max_inflight:
            out = queue.popleft()
            self.queued_bytes -= out.msg.size()
            self._send_new(out, link)
        overflow = self.overflow
        if overflow is not None and overflow.engaged:
            overflow.relieve(self)

    def check_relief(self) -> None:
        """After max_queued changed (a route reloaded with another limit): stop pushing back if under it."""
        if self.overflow is not None:
            self.overflow.relieve(self)

    @property
    def pushing_back(self) -> bool:
        return self.overflow is not None and self.overflow.pushing

    # -- inbound ----------------------------------------------------------------------------------------

    def take_inbound(self) -> Inbound:
        if self.inbound is None:
            self.inbound = Inbound()
        return self.inbound

    @property
    def inbound_bytes(self) -> int:
        return self.inbound.bytes if self.inbound is not None else 0

    def finish(self, out: OutMsg) -> None:
        """A delivery is done (acknowledged, withdrawn): its row goes, its message once unreferenced."""
        held = out.held
        if held is not None:   # never journaled: the route's source lets go of it
            held.done(out)
        elif self.journal is not None:
            self.journal.done(out)
        if out.guard is not None:   # a clean member's shared delivery: its group row goes too
            out.guard[0].done(out)

    def on_puback(self, pid: int) -> None:
        out = self.inflight.get(pid)
        if out is None or out.qos != 1:
            return  # unknown or wrong flow: ignore, as the spec allows
        del self.inflight[pid]
        self.finish(out)
        self._fill_window()

    def on_pubrec(self, pid: int, reason: int = 0) -> None:
        """PUBREC: answered with PUBREL, also for an id not in flight (a PUBREL lost before a reconnect; to an
        MQTT 5 client with reason 0x92 Packet Identifier not found).
        A PUBREC for a QoS 1 delivery is a protocol violation: the PUBREL would confuse the client. An MQTT 5
        PUBREC with an error code (0x80 and up) ends the delivery there, without PUBREL (§4.3.3, §4.9)."""
        out = self.inflight.get(pid)
        if out is not None and out.qos == 1:
            raise P.ProtocolError(f"PUBREC for packet id {pid}, a QoS 1 delivery", packet="PUBREC")
        if reason >= 0x80:
            if out is not None and out.qos == 2 and out.state == SENT:
                log.info("session %s: PUBREC %#04x for packet id %d: the client refused the delivery",
                         self.client_id, reason, pid)
                del self.inflight[pid]
                self.finish(out)
                self._fill_window()
            return
        if out is not None and out.qos == 2 and out.state == SENT:
            out.state = RELEASED
            if self.journal is not None:
                self.journal.released(out)
            if out.guard is not None:   # the client has it: never another member's
                out.guard[0].done(out)
        if out is None and self.protocol_level == 5:   # §3.6.2.1: the id is not one of ours in flight
            if self.link is not None:
                self.link.send(P.encode_ack5(P.PUBREL, pid, P.Reason.PACKET_IDENTIFIER_NOT_FOUND))
            return
        if self.link is not None:
            if self.journal is not None:
                # PUBREL only once "released" is durable: else a crash after the client's PUBCOMP
                # restores state SENT, the PUBLISH is re-sent and the client delivers it again
                self.link.send_durable(P.encode_ack(P.PUBREL, pid))
            else:
                self.link.send(P.encode_ack(P.PUBREL, pid))

    def on_pubcomp(self, pid: int) -> None:
        out = self.inflight.get(pid)
        if out is None or out.qos != 2:
            return
        del self.inflight[pid]
        self.finish(out)
        self._fill_window()

    def resume(self, link: Link) -> None:
        """The client (re)connected to this session: re-send in-flight with DUP, then the queue. An MQTT 5
        client is re-sent at most its Receive Maximum at once (the rest as acknowledgements free the window,
        ``unsent``) and nothing above its Maximum Packet Size (discarded as if delivered)."""
        self.link = link
        self.unsent = None
        window = self.max_inflight
        for pid, out in list(self.inflight.items()):
            if out.state == RELEASED:
                link.send(P.encode_ack(P.PUBREL, pid))
            elif window <= 0:
                if self.unsent is None:
                    self.unsent = deque()
                self.unsent.append(out)
                continue
            elif not self._resend(link, out):
                continue
            window -= 1
        self._fill_window()

    def _resend(self, link: Link, out: OutMsg) -> bool:
        """Re-send an in-flight delivery with DUP; False: too large for the client, discarded."""
        data = None
        if self.direct_out is None:
            data = delivery_bytes(self, out, True, out.packet_id)
            if data is None:
                del self.inflight[out.packet_id]   # type: ignore[arg-type]
                self.finish(out)
                return False
        self._emit(link, out, dup=True, durable=False, data=data)
        self.stats.sent += 1
        return True

    def detach(self, keep: bool = True) -> None:
        """The connection ended. ``keep``: the session outlives it, so what a route's source held for the
        connected client (source_hold.py) is journaled now, to be sent again when the client is back."""
        self.link = None
        self.unsent = None
        if keep and self.journal is not None and (self.inflight or self.queue):
            for out in self.deliveries():
                held = out.held
                if held is not None:
                    held.journal(self, out)

    # -- recovery -----------------------------------------------------------------------------------

    def restore_outbound(self, out: OutMsg) -> None:
        """Put back a delivery read from the store (start-up), keeping its sequence and state."""
        if self.journal is not None:
            self.journal.restored(out)
        if out.state in (SENT, RELEASED) and out.packet_id:
            self.inflight[out.packet_id] = out
        else:
            out.state = QUEUED
            out.packet_id = None
            self._queue().append(out)
            self.queued_bytes += out.msg.size()   # restored beyond max_queued_bytes too: nothing acknowledged is lost
        self._next_seq = max(self._next_seq, out.seq + 1)

    # -- teardown -----------------------------------------------------------------------------------

    def deliveries(self) -> list[OutMsg]:
        """Every queued and in-flight delivery, in-flight first (in send order), then the queue."""
        return list(self.inflight.values()) + list(self.queue)

    def discard_messages(self) -> None:
        """Drop every queued and in-flight delivery (clean session, expiry, admin delete)."""
        for out in list(self.inflight.values()) + list(self.queue):
            if out.held is not None:   # never journaled: the route's source lets go of it
                out.held.done(out)
            elif self.journal is not None:
                self.journal.unref(out.msg)
            if out.guard is not None:   # handed to another member already (Publisher.reassign), or lost
                out.guard[0].done(out)
        self.inflight.clear()
        self.unsent = None
        self.queue = ()
        self.queued_bytes = 0
        self.inbound = None
        if self.overflow is not None:
            self.overflow.drained(self)
