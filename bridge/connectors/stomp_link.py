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
  1.5 x the receive interval and treated like a dropped connection.
- After a drop a supervisor thread reconnects with exponential backoff (``backoff_initial`` doubling
  to ``backoff_max``, +-20 % jitter) and re-subscribes every subscription with its old id.

Handlers run on stomp.py's receiver thread: they must not block for long and must not call
``send`` and wait for its receipt on that same thread (the receipt could never be read). The
``on_state`` callback runs with the link's lock held: record the change and return. Every public
method is safe to call from any other thread.
"""

from __future__ import annotations

import itertools
import logging
import random
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType

import stomp
import stomp.exception
from stomp.utils import Frame

from mappings.stomp.wire import encode_send_head

log = logging.getLogger(__name__)


class LinkState(Enum):
    NEW = "new"
    CONNECTING = "connecting"
    UP = "up"
    DOWN = "down"
    CLOSED = "closed"


class StompLinkError(Exception):
    """Base of the link's errors; ``str()`` is a reason an operator can act on."""


class LinkDown(StompLinkError):
    """The link is not connected (or dropped while waiting); the operation's outcome is unknown."""


class SendRejected(StompLinkError):
    """The provider answered the send with an ERROR frame; ``headers``/``body`` are that frame's."""

    def __init__(self, message: str, headers: Mapping[str, str], body: bytes) -> None:
        super().__init__(message)
        self.headers = headers
        self.body = body


class SendUnconfirmed(StompLinkError):
    """No RECEIPT within the timeout; the provider may or may not have the message."""


@dataclass(frozen=True)
class StompLinkConfig:
    host: str
    port: int
    login: str | None = None
    passcode: str | None = None
    vhost: str | None = None
    client_id: str | None = None
    heartbeat_send_ms: int = 10_000  # we promise a frame at least this often (0: never)
    heartbeat_receive_ms: int = 10_000  # we want one from the provider this often (0: don't care)
    connect_timeout: float = 10.0  # TCP connect, and again for the CONNECTED frame
    receipt_timeout: float = 10.0
    backoff_initial: float = 0.1
    backoff_max: float = 30.0
    backoff_factor: float = 2.0


@dataclass(frozen=True)
class InboundFrame:
    """A MESSAGE frame as received; ``generation`` names the connection it came over."""

    headers: Mapping[str, str]
    body: bytes
    subscription: str
    generation: int

    @property
    def destination(self) -> str:
        return self.headers.get("destination", "")

    @property
    def message_id(self) -> str:
        return self.headers.get("message-id", "")

    @property
    def ack_id(self) -> str | None:
        return self.headers.get("ack")

    @property
    def redelivered(self) -> bool:
        return self.headers.get("redelivered") == "true"


EncodedSend = tuple[bytes, bytes, bool]   # (encode_send_head(...), body, content_length?)
_LINK_HEADERS = frozenset({"content-length", "transaction", "receipt"})   # the link writes these itself


Handler = Callable[[InboundFrame], None]
StateCallback = Callable[[LinkState, str], None]


@dataclass
class _Subscription:
    id: str
    destination: str
    ack: str
    headers: dict[str, str]
    handler: Handler


@dataclass
class _Pending:
    generation: int
    done: threading.Event = field(default_factory=threading.Event)
    error: StompLinkError | None = None


class _Listener(stomp.ConnectionListener):
    """Forwards one connection's events to the link, tagged with that connection's generation."""

    def __init__(self, link: StompLink, generation: int) -> None:
        self.link = link
        self.generation = generation
        self.connected = threading.Event()
        self.connected_headers: dict[str, str] = {}
        self.connect_error: str | None = None

    def on_connected(self, frame: Frame) -> None:
        self.connected_headers = dict(frame.headers)
        self.connected.set()

    def on_error(self, frame: Frame) -> None:
        if not self.connected.is_set():
            self.connect_error = frame.headers.get("message", "ERROR frame before CONNECTED")
            self.connected.set()
            return
        self.link._on_error(self.generation, frame)

    def on_receipt(self, frame: Frame) -> None:
        self.link._on_receipt(self.generation, frame.headers.get("receipt-id", ""))

    def on_message(self, frame: Frame) -> None:
        self.link._on_message(self.generation, frame)

    def on_disconnected(self) -> None:
        self.connected.set()  # wake a connect() still waiting
        self.link._mark_down(self.generation, self.link._close_reason(self.generation))

    def on_heartbeat_timeout(self) -> None:
        self.link._mark_down(self.generation, "heartbeat timeout: provider silent")


class StompLink:
    def __init__(self, config: StompLinkConfig, on_state: StateCallback | None = None) -> None:
        self.config = config
        self._on_state = on_state
        self._lock = threading.RLock()
        self._state = LinkState.NEW
        self._state_changed = threading.Condition(self._lock)
        self._conn: stomp.Connection12 | None = None
        self._generation = 0
        self._subs: dict[str, _Subscription] = {}
        self._pending: dict[str, _Pending] = {}
        self._ids = itertools.count(1)
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._supervisor: threading.Thread | None = None
        self.last_error: str | None = None
        self.server_heartbeat: tuple[int, int] | None = None  # provider's (send, receive) ms
        self.connects = 0  # successful CONNECTs so far (1 + reconnects)
        self.errors_seen = 0  # ERROR frames that answered no receipt (send_many checks it)

    # ------------------------------------------------------------------ lifecycle

    @property
    def state(self) -> LinkState:
        return self._state

    @property
    def generation(self) -> int:
        return self._generation

    def start(self, timeout: float | None = 30.0) -> None:
        """Connect (retrying with backoff) and wait until the link is up.

        Raises ``LinkDown`` with the last reason if it is not up within ``timeout`` s; the link then
        keeps retrying in the background until ``close()``.
        """
        with self._lock:
            if self._supervisor is None:
                self._supervisor = threading.Thread(target=self._supervise, name="stomp-link", daemon=True)
                self._wake.set()
                self._supervisor.start()
        if timeout is not None and not self.wait_until_up(timeout):
            raise LinkDown(f"STOMP link to {self._where()} not up after {timeout} s: {self.last_error}")

    def wait_until_up(self, timeout: float) -> bool:
        with self._state_changed:
            return (
                self._state_changed.wait_for(lambda: self._state in (LinkState.UP, LinkState.CLOSED), timeout)
                and self._state is LinkState.UP
            )

    def wait_until_down(self, timeout: float) -> bool:
        with self._state_changed:
            return self._state_changed.wait_for(lambda: self._state is not LinkState.UP, timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Disconnect politely (bounded by ``timeout``) and stop reconnecting."""
        self._closed.set()
        self._wake.set()
        with self._lock:
            conn, self._conn = self._conn, None
            was_up = self._state is LinkState.UP
            self._set_state(LinkState.CLOSED, "closed by caller")
            self._fail_pending(LinkDown("link closed"))
        if conn is not None:
            self._drop_connection(conn, polite=was_up, timeout=timeout)
        if self._supervisor is not None and self._supervisor is not threading.current_thread():
            self._supervisor.join(timeout)

    def __enter__(self) -> StompLink:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
        waiting: list[tuple[str, _Pending]] = []

        def expect() -> bytes:
            receipt = f"r{next(self._ids)}"
            pending = _Pending(generation)
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
            pending = _Pending(self._generation)
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
        sub = _Subscription(sid, destination, ack, dict(headers or {}), handler)
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

    @staticmethod
    def _subscribe_on(conn: stomp.Connection12, sub: _Subscription, extra: dict[str, str]) -> None:
        conn.subscribe(sub.destination, id=sub.id, ack=sub.ack, headers={**sub.headers, **extra})

    # ------------------------------------------------------------------ callbacks (receiver thread)

    def _on_message(self, generation: int, frame: Frame) -> None:
        sid = frame.headers.get("subscription", "")
        with self._lock:
            if generation != self._generation:
                return
            sub = self._subs.get(sid)
        if sub is None:
            log.info("MESSAGE for unknown subscription %r dropped (it will be redelivered)", sid)
            return
        body = frame.body if isinstance(frame.body, bytes) else (frame.body or "").encode()
        inbound = InboundFrame(MappingProxyType(dict(frame.headers)), body, sid, generation)
        try:
            sub.handler(inbound)
        except Exception:  # a handler bug must not kill the receiver thread; message stays unacked
            log.exception("handler for subscription %s failed on %s", sid, inbound.message_id)

    def _on_receipt(self, generation: int, receipt: str) -> None:
        with self._lock:
            pending = self._pending.pop(receipt, None)
        if pending is not None:
            pending.done.set()

    def _on_error(self, generation: int, frame: Frame) -> None:
        message = frame.headers.get("message", "ERROR frame")
        body = frame.body if isinstance(frame.body, bytes) else (frame.body or "").encode()
        receipt = frame.headers.get("receipt-id")
        with self._lock:
            self.last_error = message
            pending = self._pending.pop(receipt, None) if receipt else None
        if pending is not None:
            pending.error = SendRejected(f"{self._where()} refused: {message}", dict(frame.headers), body)
            pending.done.set()
        else:
            with self._lock:
                self.errors_seen += 1
            log.warning("ERROR from %s: %s", self._where(), message)

    def _close_reason(self, generation: int) -> str:
        """Why a connection closed. stomp.py closes the socket *before* it reports a heartbeat
        timeout, so look at its heartbeat bookkeeping (HeartbeatListener attributes) first."""
        with self._lock:
            conn = self._conn if generation == self._generation else None
        last = getattr(conn, "received_heartbeat", None)
        allowed = getattr(conn, "receive_sleep", 0)
        if isinstance(last, float) and allowed and time.monotonic() - last > allowed:
            return f"heartbeat timeout: nothing from the provider for {time.monotonic() - last:.1f} s"
        return "connection closed"

    def _mark_down(self, generation: int, reason: str) -> None:
        with self._lock:
            if generation != self._generation or self._state in (LinkState.DOWN, LinkState.CLOSED):
                return
            self.last_error = reason
            self._set_state(LinkState.DOWN, reason)
            self._fail_pending(LinkDown(f"STOMP link to {self._where()} dropped: {reason}"))
        self._wake.set()

    # ------------------------------------------------------------------ supervisor thread

    def _supervise(self) -> None:
        delay = self.config.backoff_initial
        while not self._closed.is_set():
            self._wake.wait()
            if self._closed.is_set():
                break
            self._wake.clear()
            with self._lock:
                if self._state is LinkState.UP:
                    continue
                old, self._conn = self._conn, None
            if old is not None:
                self._drop_connection(old, polite=False, timeout=self.config.connect_timeout)
            try:
                self._connect_once()
                delay = self.config.backoff_initial
            except Exception as e:  # any failure to connect is retried; the reason is reported
                reason = str(e) or repr(e)
                with self._lock:
                    self.last_error = reason
                    if self._state is not LinkState.CLOSED:
                        self._set_state(LinkState.DOWN, reason)
                wait = delay * random.uniform(0.8, 1.2)
                log.info("STOMP link to %s down (%s); retrying in %.2f s", self._where(), reason, wait)
                if self._closed.wait(wait):  # retry delay; returns early when the link is closed
                    break
                delay = min(delay * self.config.backoff_factor, self.config.backoff_max)
                self._wake.set()

    def _connect_once(self) -> None:
        cfg = self.config
        conn = stomp.Connection12(
            [(cfg.host, cfg.port)],
            heartbeats=(cfg.heartbeat_send_ms, cfg.heartbeat_receive_ms),
            heart_beat_receive_scale=1.5,
            auto_decode=False,
            auto_content_length=False,
            reconnect_attempts_max=1,  # backoff is ours
            timeout=cfg.connect_timeout,
            vhost=cfg.vhost,
        )
        with self._lock:
            if self._closed.is_set():
                return
            self._generation += 1
            generation = self._generation
            listener = _Listener(self, generation)
            conn.set_listener("link", listener)
            self._conn = conn
            self._set_state(LinkState.CONNECTING, f"connecting to {self._where()}")
        headers = {"client-id": cfg.client_id} if cfg.client_id else {}
        try:
            conn.connect(cfg.login, cfg.passcode, wait=False, headers=headers)
        except stomp.exception.ConnectFailedException as e:
            raise LinkDown(f"cannot connect to {self._where()}") from e
        try:  # frames are small and answered one by one: Nagle + delayed ACK would stall each ~40 ms
            conn.transport.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except (AttributeError, OSError) as e:
            log.debug("TCP_NODELAY not set: %r", e)
        if not listener.connected.wait(cfg.connect_timeout):
            raise LinkDown(f"no CONNECTED frame from {self._where()} within {cfg.connect_timeout} s")
        if listener.connect_error is not None:
            raise LinkDown(f"{self._where()} refused the connection: {listener.connect_error}")
        if not listener.connected_headers:
            raise LinkDown(f"{self._where()} closed the connection during CONNECT")
        hb = listener.connected_headers.get("heart-beat", "0,0").split(",")
        with self._lock:
            subs = list(self._subs.values())
        for sub in subs:  # same ids as before, so frames in flight still find their handler
            self._subscribe_on(conn, sub, {})
        with self._lock:
            if generation != self._generation or self._state is not LinkState.CONNECTING:
                raise LinkDown(f"connection to {self._where()} dropped while subscribing: {self.last_error}")
            self.server_heartbeat = (int(hb[0]), int(hb[1]))
            self.connects += 1
            self._set_state(LinkState.UP, f"connected to {self._where()} (heart-beat {','.join(hb)})")

    def _drop_connection(self, conn: stomp.Connection12, *, polite: bool, timeout: float) -> None:
        """Close a connection without ever blocking longer than ``timeout``."""

        def run() -> None:
            try:
                if polite:
                    conn.disconnect()
                else:
                    conn.transport.disconnect_socket()
            except Exception as e:  # closing a dead connection can fail in many ways; all harmless
                log.debug("closing STOMP connection: %r", e)

        t = threading.Thread(target=run, name="stomp-link-close", daemon=True)
        t.start()
        t.join(timeout)

    # ------------------------------------------------------------------ helpers (lock held)

    def _set_state(self, state: LinkState, reason: str) -> None:
        if self._state is LinkState.CLOSED:
            return
        self._state = state
        self._state_changed.notify_all()
        log.info("STOMP link %s:%s %s: %s", self.config.host, self.config.port, state.value, reason)
        if self._on_state is not None:
            try:
                self._on_state(state, reason)
            except Exception:
                log.exception("state callback failed")

    def _fail_pending(self, error: StompLinkError) -> None:
        pending, self._pending = self._pending, {}
        for p in pending.values():
            p.error = error
            p.done.set()

    def _where(self) -> str:
        return f"{self.config.host}:{self.config.port}"
