"""Per-connection state: the packet reader, who the client is, and the ordered output that waits
for store commits (an acknowledgement leaves only after what it acknowledges is durable)."""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from bridge.mqtt import packets as P
from bridge.mqtt import properties as PR
from bridge.mqtt.sink import Gate

if TYPE_CHECKING:
    from bridge.mqtt.session import Session

trace_log = logging.getLogger("mqbridge.trace")


NOT_HELD: frozenset[str] = frozenset()   # ClientConnection.held_by of a connection no route session holds

# MQTT 5 connections whose CONNECT had Request Problem Information 0 (§3.1.2.11.7): no Reason String on any
# packet but CONNACK and DISCONNECT. A set beside the connections rather than a slot: few clients send it,
# and one more slot would cost every idle connection 16 bytes
_NO_PROBLEM_INFO: set[ClientConnection] = set()


class Port(Protocol):
    """The transport's end of a connection, given by the server (one object rather than a callback per
    operation: each bound method or closure would cost an idle connection 64-200 bytes)."""

    def queue_write(self, data: bytes) -> None:
        """Queue output."""

    def abort(self) -> None:
        """Flush what is queued and close."""

    def final(self, data: bytes) -> None:
        """Write the one answer a refused CONNECT gets, dropping anything queued, then close."""

    def buffered(self) -> int:
        """Output bytes not yet sent."""

    def queue_qos0(self, data: bytes, limit: int) -> bool:
        """Queue output unless ``limit`` bytes or more are not yet sent (False: not queued)."""

    def unhold(self) -> None:
        """No route session holds the publisher any more: resume processing what it sent (soon)."""


class ClientConnection:
    """Transport-independent half of a connection; its transport is the server's ``Port``."""

    __slots__ = ("peer", "listener", "reader", "created", "last_activity", "connected_at", "client_id",
                 "protocol_level", "keepalive", "clean_session", "username", "user_via",
                 "peer_certificate", "identity_from_certificate", "will", "session",
                 "topic_aliases", "topic_alias_max", "expiry_at_connect", "max_packet_out", "disconnect_sent",
                 "closed", "closing", "close_reason", "trace", "port", "_after_commit", "_abort_after",
                 "_qos0_limit", "_held", "_held_start", "held_by", "held", "held_bytes", "packets_in",
                 "packets_out", "bytes_in", "bytes_out")

    def __init__(self, *, peer: str, listener: str, max_packet_size: int, now: float,
                 port: Port, after_commit: Callable[[Callable[[], None]], None], qos0_buffer_limit: int,
                 max_connect_size: int | None = None) -> None:
        """``max_connect_size``: what the connection may buffer before it has connected (a CONNECT of
        at most that remaining length, nothing else first); None: no such check."""
        self.peer = peer
        self.listener = listener
        connect_max = None if max_connect_size is None else min(max_connect_size, max_packet_size)
        self.reader = P.PacketReader(max_packet_size, connect_max=connect_max)
        self.created = now
        self.last_activity = now
        self.connected_at: float | None = None   # set when CONNECT is accepted
        self.client_id: str | None = None
        self.protocol_level = 0
        self.keepalive = 0
        self.clean_session = True
        self.username: str | None = None
        self.user_via = ""           # how ``username`` was established (identity.py: checked or only claimed)
        # a listener with use_identity_as_username: the verified client certificate (ssl's getpeercert()
        # form) names the user (identity.certificate_user); set by the server after the TLS handshake
        self.identity_from_certificate = False
        self.peer_certificate: dict[str, object] | None = None
        self.will: P.Will | None = None
        self.session: Session | None = None
        # MQTT 5 (connect.py): the client's Topic Aliases, and how many it may set; whether it asked for
        # Session Expiry 0 at CONNECT (then DISCONNECT may not set another); its Maximum Packet Size
        self.topic_aliases: dict[int, str] | None = None   # made at the first alias
        self.topic_alias_max = 0
        self.expiry_at_connect = 0
        self.max_packet_out = 1 << 62
        self.disconnect_sent = False
        self.closed = False      # the socket ended
        self.closing = False     # closing by the broker's decision: nothing more is processed
        self.close_reason = ""
        self.trace = False
        self.port = port
        self._after_commit = after_commit
        self._qos0_limit = qos0_buffer_limit
        # output held back until commits: [data, gates still to call back] in order; () until something waits
        self._held: list[list[object]] | tuple[()] = ()
        self._held_start = 0   # absolute index of _held[0]
        self._abort_after: tuple[str, int | None] | None = None   # abort_after_commit's, once nothing is held
        # flow control: the route sessions (client ids) whose queues this publisher filled. While any
        # holds it, what it sends is read but not processed (except acknowledgements and PINGREQ), in
        # order, until the last one lets go (FlowControl.hold / FlowControl._on_flow)
        self.held_by: set[str] | frozenset[str] = NOT_HELD   # a set once held (an idle connection's memory)
        self.held: list[P.Packet] | tuple[()] = ()   # () until a packet is held
        self.held_bytes = 0
        self.packets_in = 0
        self.packets_out = 0
        self.bytes_in = 0
        self.bytes_out = 0

    # -- output ---------------------------------------------------------------------------------

    def send(self, data: bytes) -> None:
        if self.closed:
            return
        if self.trace:
            self._trace_out(data)
        if self._held:
            self._held.append([data, 0])  # type: ignore[union-attr] # keep order behind what waits for a commit
            return
        self.packets_out += 1
        self.bytes_out += len(data)
        self.port.queue_write(data)

    def send_durable(self, data: bytes, ack: bool = False) -> None:
        """Send ``data`` once every store write queued so far is committed, keeping order."""
        self.send_gated(data, (self._after_commit,), ack)

    def send_gated(self, data: bytes, gates: Sequence[Gate], ack: bool = False) -> None:
        """Send ``data`` once each of ``gates`` (a commit's after-commit registration: the broker's store, or
        the queue store of a route that took the publication, bridge.mqtt.sink) has called back, keeping
        order: what follows waits behind it. The commits may complete in any order across stores."""
        if self.closed:
            return
        if self.trace:
            self._trace_out(data)
        held = self._held
        if not held:
            held = self._held = []
        index = self._held_start + len(held)
        held.append([data, len(gates), True] if ack else [data, len(gates)])
        for gate in gates:
            gate(lambda: self._ready(index))

    def _ready(self, index: int) -> None:
        """One gate of the held item ``index`` called back; release the front items that wait for nothing."""
        held = self._held
        i = index - self._held_start
        if i < 0 or i >= len(held):
            return
        held[i][1] -= 1  # type: ignore[index]
        if i or held[0][1]:  # type: ignore[index]
            return   # an earlier item still waits (it releases this one), or this one waits for another gate
        n = 1
        while n < len(held) and not held[n][1]:  # type: ignore[index]
            n += 1
        items = held[:n]
        del held[:n]   # type: ignore[union-attr]
        self._held_start += n
        if not self.closed:
            for item in items:
                data = item[0]
                self.packets_out += 1
                self.bytes_out += len(data)  # type: ignore[arg-type]
                self.port.queue_write(data)  # type: ignore[arg-type]
        if not held and self._abort_after is not None:
            reason, code = self._abort_after
            self._abort_after = None
            self.abort(reason, code)

    def held_count(self) -> int:
        """Output items waiting for commits (acknowledgements, and what follows them)."""
        return len(self._held)

    def held_acks(self) -> int:
        """PUBACKs and PUBCOMPs among them (``send_gated(..., ack=True)``): publications not yet answered."""
        return sum(1 for item in self._held if len(item) == 3)

    def _trace_out(self, data: bytes) -> None:
        try:
            packets = P.PacketReader(level=self.protocol_level or P.MQTT_311).feed(data)
        except P.ProtocolError:
            packets = []
        for packet in packets:
            trace_log.info("%s -> %s", self.client_id, packet)

    def unhold(self, session_id: str) -> None:
        """A route session no longer holds this publisher; the last one to let go resumes it."""
        held_by = self.held_by
        if session_id in held_by:
            held_by.discard(session_id)   # type: ignore[union-attr]
            if not held_by:
                self.port.unhold()

    def send_qos0(self, data: bytes) -> bool:
        """A QoS 0 delivery: dropped (False) when the client's unsent output holds ``qos0_buffer_limit`` bytes.
        One call to the port for the check and the write. (A QoS 0 publication's fan-out does the same inline:
        Publisher._fan_out_qos0; keep the two in step.)"""
        if self._held or self.trace or self.closed:
            if self.port.buffered() >= self._qos0_limit:
                return False
            self.send(data)
            return True
        if not self.port.queue_qos0(data, self._qos0_limit):
            return False
        self.packets_out += 1
        self.bytes_out += len(data)
        return True

    def abort_after_commit(self, reason: str, code: int | None = None) -> None:
        """Close like ``abort``, but only once the acknowledgements waiting for a store commit have left
        (what they acknowledge is stored); nothing more from the client is processed meanwhile."""
        if not self._held:
            self.abort(reason, code)
            return
        self.close_reason = self.close_reason or reason
        self.closing = True
        self._abort_after = (reason, code)   # _ready closes once the last held item has left

    def abort(self, reason: str, code: int | None = None) -> None:
        """Flush what is queued (e.g. a final acknowledgement) and close. ``code``: an MQTT 5 client is sent
        DISCONNECT with that reason code and ``reason`` as its Reason String first."""
        if not self.closed:
            self.close_reason = self.close_reason or reason
            if code is not None and self.protocol_level == P.MQTT_5 and self.client_id is not None \
                    and not self.disconnect_sent:
                self.disconnect_sent = True
                self.port.queue_write(self.disconnect_packet(code, reason))
        self.closing = True
        self.port.abort()

    def quiet_problems(self, quiet: bool) -> None:
        """Request Problem Information from the CONNECT: 0 (``quiet``) leaves Reason Strings off acknowledgements."""
        if quiet:
            _NO_PROBLEM_INFO.add(self)
        else:
            _NO_PROBLEM_INFO.discard(self)

    def forget(self) -> None:
        """The connection ended."""
        _NO_PROBLEM_INFO.discard(self)

    def refusal(self, encode: Callable[[PR.Props | None], bytes], reason: str) -> bytes:
        """An MQTT 5 acknowledgement that refuses something (a reason code of 0x80 or more), with ``reason``
        as its Reason String unless the client asked for none (Request Problem Information 0) or it would
        exceed the client's Maximum Packet Size (§3.4.2.2.2: the sender MUST NOT send it then)."""
        if reason and self not in _NO_PROBLEM_INFO:
            data = encode({PR.REASON_STRING: reason[:256]})
            if len(data) <= self.max_packet_out:
                return data
        return encode(None)

    def disconnect_packet(self, code: int, reason: str) -> bytes:
        """A server DISCONNECT; the Reason String only where it fits the client's Maximum Packet Size."""
        data = P.encode_disconnect5(code, {PR.REASON_STRING: reason[:256]} if reason else None)
        if len(data) > self.max_packet_out:
            data = P.encode_disconnect5(code)
        self.packets_out += 1
        self.bytes_out += len(data)
        return data

