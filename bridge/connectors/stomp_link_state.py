"""The STOMP link's state machine: one stomp.py connection at a time, its generation, the supervisor
thread that connects and reconnects with backoff, the listener that forwards a connection's frames
(MESSAGE to the subscription's handler, RECEIPT/ERROR to the waiting send), and the link's types.
The operations on an up link (send, subscribe, ack) are :class:`bridge.connectors.stomp_link.StompLink`."""
from __future__ import annotations

import itertools
import logging
import random
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Self

import stomp
import stomp.exception
from stomp.utils import Frame

from bridge.threadnames import name_this_thread

log = logging.getLogger("bridge.connectors.stomp_link")   # one logger for the whole link


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
    # silence tolerated: this many negotiated intervals. STOMP 1.2 leaves the tolerance to the receiver;
    # ActiveMQ 5.x sends its first heart-beat two intervals after CONNECTED (then one per interval)
    heartbeat_grace: float = 2.5
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


Handler = Callable[[InboundFrame], None]
StateCallback = Callable[[LinkState, str], None]


@dataclass
class Subscription:
    """A subscription as the link keeps it, to make it again with the same id on every connect."""

    id: str
    destination: str
    ack: str
    headers: dict[str, str]
    handler: Handler


@dataclass
class Pending:
    """A frame waiting for its RECEIPT (``done``); ``error`` when an ERROR or a drop answered instead."""

    generation: int
    done: threading.Event = field(default_factory=threading.Event)
    error: StompLinkError | None = None


class _Listener(stomp.ConnectionListener):
    """Forwards one connection's events to the link, tagged with that connection's generation."""

    def __init__(self, link: LinkCore, generation: int) -> None:
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


class LinkCore:
    """The link's connection, state and generation; the subscriptions it re-makes on every connect and
    the sends waiting for a RECEIPT, which a drop fails."""

    def __init__(self, config: StompLinkConfig, on_state: StateCallback | None = None) -> None:
        self.config = config
        self._on_state = on_state
        self._lock = threading.RLock()
        self._state = LinkState.NEW
        self._since = time.time()   # when the state last changed
        self._state_changed = threading.Condition(self._lock)
        self._conn: stomp.Connection12 | None = None
        self._generation = 0
        self._subs: dict[str, Subscription] = {}
        self._pending: dict[str, Pending] = {}
        self._ids = itertools.count(1)
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._supervisor: threading.Thread | None = None
        self.last_error: str | None = None
        self.server_heartbeat: tuple[int, int] | None = None  # provider's (send, receive) ms
        self.connects = 0  # successful CONNECTs so far (1 + reconnects)
        self.errors_seen = 0  # ERROR frames that answered no receipt (send_many checks it)
        # called (lock held) with True when a connection got its CONNECTED frame, False when it is lost
        self.on_connection: Callable[[bool], None] | None = None
        self._live = False

    # ------------------------------------------------------------------ lifecycle

    @property
    def state(self) -> LinkState:
        return self._state

    @property
    def generation(self) -> int:
        return self._generation

    def link_status(self) -> dict[str, object]:
        """The link as ``mqbridge status`` shows a provider link (the native JMS connector's keys): state,
        since when, the last error while it is not up, reconnects after the first connect."""
        state = self._state
        return {"state": state.value, "since": round(self._since, 3),
                "error": None if state is LinkState.UP else self.last_error,
                "reconnects": max(0, self.connects - 1)}

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

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ subscribing (on connect, on subscribe)

    def set_subscription_headers(self, sub_id: str, headers: Mapping[str, str]) -> None:
        """The headers a subscription is made with from the next connect on."""
        with self._lock:
            sub = self._subs.get(sub_id)
            if sub is not None:
                sub.headers = dict(headers)

    def reconnect(self, reason: str) -> None:
        """Drop the current connection and connect again (the subscriptions with their current headers)."""
        self._mark_down(self._generation, reason)

    @staticmethod
    def _subscribe_on(conn: stomp.Connection12, sub: Subscription, extra: dict[str, str]) -> None:
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
        name_this_thread()
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
            heart_beat_receive_scale=cfg.heartbeat_grace,
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
        _beat_early(conn)
        hb = listener.connected_headers.get("heart-beat", "0,0").split(",")
        with self._lock:
            if generation == self._generation and self._state is LinkState.CONNECTING:
                self._live = True
                if self.on_connection is not None:
                    self.on_connection(True)
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
        if state is not self._state:
            self._since = time.time()
        self._state = state
        self._state_changed.notify_all()
        if self._live and state is not LinkState.UP and state is not LinkState.CONNECTING:
            self._live = False
            if self.on_connection is not None:
                try:
                    self.on_connection(False)
                except Exception:
                    log.exception("connection callback failed")
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


def _beat_early(conn: stomp.Connection12) -> None:
    """Send heart-beats at half the interval promised. ActiveMQ closes a connection that sent nothing for one
    promised interval, with no grace ("Channel was inactive for too (>1000) long"), and stomp.py beats once
    the interval has passed: a beat late by a scheduling delay lost the link (STOMP 1.2 lets the receiver
    choose its tolerance; this leaves the provider a whole interval's margin)."""
    if not conn.heartbeats[0]:
        return
    # stomp.py's own CONNECTED handling (which sets send_sleep, then running) comes just after ours
    deadline = time.monotonic() + 1.0
    while not getattr(conn, "running", False) and time.monotonic() < deadline:
        time.sleep(0.001)
    sleep = getattr(conn, "send_sleep", 0)
    if sleep:
        conn.send_sleep = sleep / 2
        due = getattr(conn, "next_outbound_heartbeat", None)
        if due is not None:
            conn.next_outbound_heartbeat = min(due, time.monotonic() + sleep / 2)
