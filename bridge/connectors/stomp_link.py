# Owns one STOMP 1.2 link to a JMS provider: frames in and out, receipts, acks, heartbeats, reconnect.
"""A thin, typed wrapper over stomp.py for the JMS connector.

It deals in frames (headers + body bytes), never in the JMS model: what a frame *means* as a JMS
message is the mapping library's business (docs/stomp-facts.md records what ActiveMQ does).

- ``send`` asks for a RECEIPT and returns only when the provider has accepted the frame, so the
  caller can acknowledge its own source afterwards (at least once). It raises ``SendRejected`` when
  the provider answers with an ERROR for that receipt, ``LinkDown`` when the link is down or drops
  before the receipt (the outcome is then unknown: resend, accepting a possible duplicate), and
  ``SendUnconfirmed`` when no receipt arrives in time (same: outcome unknown).
- ``subscribe`` uses ``ack: client-individual`` by default; handlers get ``InboundFrame`` values and
  call ``ack``/``nack`` when the message is safe elsewhere. Unacknowledged messages are redelivered
  by the provider after a reconnect (``redelivered: true``); an ack for a frame that came over an
  older connection is dropped (``ack`` returns False) because that delivery is void.
- Heartbeats are negotiated on CONNECT; a silent provider is detected by stomp.py after
  ``heartbeat_grace`` (2.5) x the receive interval and treated like a dropped connection.
- After a drop a supervisor thread reconnects with exponential backoff (``backoff_initial`` doubling
  to ``backoff_max``, +-20 % jitter) and re-subscribes every subscription with its old id.

Handlers run on stomp.py's receiver thread: they must not block for long and must not call
``send`` and wait for its receipt on that same thread (the receipt could never be read). The
``on_state`` callback runs with the link's lock held: record the change and return. Every public
method is safe to call from any other thread.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence

import stomp
import stomp.exception

from bridge.connectors.stomp_link_state import (
    Handler,
    InboundFrame,
    LinkCore,
    LinkDown,
    LinkState,
    Pending,
    SendRejected,
    SendUnconfirmed,
    StateCallback,
    StompLinkConfig,
    StompLinkError,
    Subscription,
)
from mappings.stomp.wire import encode_send_head

log = logging.getLogger(__name__)

__all__ = ["EncodedSend", "Handler", "InboundFrame", "LinkDown", "LinkState", "SendRejected", "SendUnconfirmed",
           "StateCallback", "StompLink", "StompLinkConfig", "StompLinkError", "encode_send_head"]

EncodedSend = tuple[bytes, bytes, bool]   # (encode_send_head(...), body, content_length?)
_LINK_HEADERS = frozenset({"content-length", "transaction", "receipt"})   # the link writes these itself


class StompLink(LinkCore):
    """What a caller does on the link: send with a RECEIPT (one frame, or pipelined or transactional
    batches), subscribe and unsubscribe, ack and nack. Connecting and reconnecting: :class:`LinkCore`."""

    # ------------------------------------------------------------------ sending

    def send(
        self,
        destination: str,
        body: bytes,
        headers: Mapping[str, str] | None = None,
        *,
        content_length: bool = True,
        timeout: float | None = None,
    ) -> None:
        """Send one frame and wait for the provider's RECEIPT.

        ``content_length=False`` leaves the header off (ActiveMQ then makes a TextMessage); such a
        body must not contain NUL, which would end the frame early.
        """
        h = dict(headers or {})
        if content_length:
            h["content-length"] = str(len(body))
        elif b"\x00" in body:
            raise ValueError("a body containing NUL needs content-length (it would end the frame)")
        h.pop("receipt", None)
        self._with_receipt(lambda conn, hh: conn.send(destination, body, headers=hh), h, timeout, "SEND")

    def send_many(
        self,
        frames: Sequence[tuple[str, bytes, Mapping[str, str], bool]],
        *,
        timeout: float | None = None,
        transactional: bool = False,
    ) -> None:
        """Send ``(destination, body, headers, content_length)`` frames in order and return only when
        the provider accepted every one; raises like ``send`` otherwise (the outcome of the batch is
        then unknown: resend it, accepting duplicates).

        Without ``transactional`` each SEND asks for a RECEIPT and all are awaited together
        (pipelined: one round trip per batch). With it the batch is BEGIN, the SENDs, and a COMMIT
        asking for the one RECEIPT: the provider commits the batch at once (one store sync) and sends
        one frame back, which also avoids Nagle/delayed-ACK stalls on many small receipts. An ERROR
        frame that arrives while a transactional batch is in flight fails the batch."""
        self.submit_many(frames, transactional=transactional)(timeout)

    def submit_many(
        self,
        frames: Sequence[tuple[str, bytes, Mapping[str, str], bool]],
        *,
        transactional: bool = False,
    ) -> Callable[[float | None], None]:
        """``send_many`` in two halves: write the frames now (raises ``LinkDown`` if that fails) and
        return ``wait(timeout)``, which returns once the provider accepted them or raises like
        ``send_many``. Batches submitted one after another on this link reach the provider in that
        order, so a caller may keep several in flight and wait for them in order."""
        return self.submit_encoded(
            [(encode_send_head(d, {k: v for k, v in h.items() if k not in _LINK_HEADERS}), b, cl)
             for d, b, h, cl in frames], transactional=transactional)

    def submit_encoded(self, frames: Sequence[EncodedSend], *, transactional: bool = False
                       ) -> Callable[[float | None], None]:
        """``submit_many`` for frames whose command and headers are already encoded
        (``encode_send_head``): the whole batch (with BEGIN/COMMIT when ``transactional``) is written
        to the socket at once, in one write, instead of frame by frame through stomp.py."""
        for _, body, content_length in frames:
            if not content_length and b"\x00" in body:
                raise ValueError("a body containing NUL needs content-length (it would end the frame)")
        with self._lock:
            conn = self._conn
            if self._state is not LinkState.UP or conn is None:
                raise LinkDown(f"STOMP link to {self._where()} is {self._state.value}: {self.last_error}")
            generation = self._generation
            errors_before = self.errors_seen
        waiting: list[tuple[str, Pending]] = []

        def expect() -> bytes:
            receipt = f"r{next(self._ids)}"
            pending = Pending(generation)
            with self._lock:
                self._pending[receipt] = pending
            waiting.append((receipt, pending))
            return f"receipt:{receipt}\n".encode()

        def forget() -> None:
            with self._lock:
                for r, _ in waiting:
                    self._pending.pop(r, None)

        transaction = f"t{next(self._ids)}" if transactional else None
        tx_line = f"transaction:{transaction}\n".encode()
        parts: list[bytes] = []
        if transaction is not None:
            parts.append(b"BEGIN\n" + tx_line + b"\n\x00")
        for head, body, content_length in frames:
            parts.append(head)
            if content_length:
                parts.append(b"content-length:%d\n" % len(body))
            parts.append(tx_line if transaction is not None else expect())
            parts.append(b"\n")
            parts.append(body)
            parts.append(b"\x00")
        if transaction is not None:
            parts.append(b"COMMIT\n" + expect() + tx_line + b"\n\x00")
        try:
            transport = conn.transport
            if transport.blocking:
                transport.send(b"".join(parts))
            else:   # stomp.py's TLS transport: its I/O thread writes (as in BaseTransport.transmit)
                transport.send_queue.put(b"".join(parts))
        except (stomp.exception.StompException, OSError) as e:
            forget()
            self._mark_down(generation, f"SEND failed: {e!r}")
            raise LinkDown(f"SEND to {self._where()} failed: {e!r}") from e

        def wait(timeout: float | None = None) -> None:
            deadline = time.monotonic() + (self.config.receipt_timeout if timeout is None else timeout)
            for receipt, pending in waiting:
                if not pending.done.wait(max(0.0, deadline - time.monotonic())):
                    forget()
                    raise SendUnconfirmed(f"no RECEIPT for SEND {receipt} from {self._where()} in time")
                if pending.error is not None:
                    forget()
                    raise pending.error
            if transaction is not None and self.errors_seen != errors_before:
                raise SendRejected(f"{self._where()} sent an ERROR during transaction {transaction}: "
                                   f"{self.last_error}", {}, b"")

        return wait

    def _with_receipt(
        self,
        transmit: Callable[[stomp.Connection12, dict[str, str]], None],
        headers: dict[str, str],
        timeout: float | None,
        what: str,
    ) -> None:
        receipt = f"r{next(self._ids)}"
        headers["receipt"] = receipt
        with self._lock:
            conn = self._conn
            if self._state is not LinkState.UP or conn is None:
                raise LinkDown(f"STOMP link to {self._where()} is {self._state.value}: {self.last_error}")
            pending = Pending(self._generation)
            self._pending[receipt] = pending
        try:
            transmit(conn, headers)
        except stomp.exception.StompException as e:
            with self._lock:
                self._pending.pop(receipt, None)
            self._mark_down(pending.generation, f"{what} failed: {e!r}")
            raise LinkDown(f"{what} to {self._where()} failed: {e!r}") from e
        wait = self.config.receipt_timeout if timeout is None else timeout
        if not pending.done.wait(wait):
            with self._lock:
                self._pending.pop(receipt, None)
            raise SendUnconfirmed(f"no RECEIPT for {what} from {self._where()} within {wait} s")
        if pending.error is not None:
            raise pending.error

    # ------------------------------------------------------------------ receiving

    def subscribe(
        self,
        destination: str,
        handler: Handler,
        *,
        ack: str = "client-individual",
        headers: Mapping[str, str] | None = None,
        sub_id: str | None = None,
        timeout: float | None = None,
    ) -> str:
        """Subscribe; when the link is up, returns after the provider confirmed (RECEIPT).

        While the link is down the subscription is recorded and made on the next connect.
        ``headers`` may carry ``selector``, ``transformation`` and provider extensions.
        """
        sid = sub_id or f"s{next(self._ids)}"
        sub = Subscription(sid, destination, ack, dict(headers or {}), handler)
        with self._lock:
            if sid in self._subs:
                raise ValueError(f"subscription id {sid!r} in use")
            self._subs[sid] = sub
            up = self._state is LinkState.UP
        if up:
            try:
                self._with_receipt(lambda conn, hh: self._subscribe_on(conn, sub, hh), {}, timeout, "SUBSCRIBE")
            except LinkDown:
                pass  # recorded: the reconnect makes it
        return sid

    def unsubscribe(self, sub_id: str) -> None:
        with self._lock:
            self._subs.pop(sub_id, None)
            conn = self._conn if self._state is LinkState.UP else None
        if conn is not None:
            try:
                conn.unsubscribe(sub_id)
            except stomp.exception.StompException as e:
                log.info("UNSUBSCRIBE %s not sent (%r); the connection is gone anyway", sub_id, e)

    def ack(self, frame: InboundFrame) -> bool:
        """ACK one message; False if it came over an earlier connection (it will be redelivered)."""
        return self._ack_or_nack(frame, nack=False)

    def nack(self, frame: InboundFrame) -> bool:
        """NACK one message. On ActiveMQ this moves it to the DLQ at once (docs/stomp-facts.md §5)."""
        return self._ack_or_nack(frame, nack=True)

    def _ack_or_nack(self, frame: InboundFrame, *, nack: bool) -> bool:
        if frame.ack_id is None:
            raise ValueError("frame has no ack header (subscription uses ack: auto)")
        with self._lock:
            conn = self._conn
            if frame.generation != self._generation or self._state is not LinkState.UP or conn is None:
                return False
        try:
            (conn.nack if nack else conn.ack)(frame.ack_id)
        except stomp.exception.StompException as e:
            self._mark_down(frame.generation, f"{'NACK' if nack else 'ACK'} failed: {e!r}")
            return False
        return True
