"""The asyncio side of the broker: listeners (TCP/TLS), sockets, output coalescing, timers.

Hot path: ``data_received`` -> ConnectionDriver.receive (driver.py: PacketReader -> Broker.handle); output
is coalesced per connection and written once per loop iteration. Keepalive and connect timeouts
(ConnectionDriver.timed_out), session expiry and $SYS updates run from one periodic sweep, so 10,000
idle connections cost no timers of their own. With rawtcp.py (plain TCP connections on the loop's selector,
and the accepts of TLS listeners) the only modules in bridge/mqtt that use asyncio.
"""
from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import ssl
import time
from collections import Counter
from dataclasses import dataclass, field

from bridge import __version__
from bridge.config import ListenerConfig
from bridge.mqtt import memory
from bridge.mqtt import packets as P
from bridge.mqtt.broker import Broker
from bridge.mqtt.connection import ClientConnection
from bridge.mqtt.driver import ConnectionDriver, Read
from bridge.mqtt.rawtcp import HAVE_EPOLL, Poller, RawServer, listen, raw_transports

log = logging.getLogger("mqbridge.server")

SWEEP_INTERVAL = 0.5
FLUSH_BYTES = 64 * 1024    # coalesced output is written at the latest when this much is queued
_UNASKED = 1 << 62         # MqttProtocol._base before queue_qos0 asked the transport (larger than any limit)
BACKLOG = 1024


@dataclass(slots=True)
class Listener:
    config: ListenerConfig
    server: asyncio.AbstractServer | RawServer | None = None
    port: int = 0                       # the bound port (config port 0 picks one)
    connections: set[MqttProtocol] = field(default_factory=set)
    accepted: int = 0
    refused: int = 0
    allow: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = field(default_factory=list)
    deny: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = field(default_factory=list)
    # TLS listeners: the handshake runs after our own TCP accept (MqttServer._accept_tls), so that a
    # connection still in it counts against max_connections and must finish it within limits.connect_timeout
    ssl_context: ssl.SSLContext | None = None
    transport: str = ""                 # what holds its connections, once started: "compact" or "loop"
    _label: tuple[int, str] | None = None   # (port, label): one string shared by its connections

    @property
    def running(self) -> bool:
        return self.server is not None

    def label(self) -> str:
        cached = self._label
        if cached is None or cached[0] != self.port:   # a listener not started yet has no bound port
            cached = self._label = (self.port, self.config.label(self.port))
        return cached[1]

    def admit(self, host: str, peer: str) -> bool:
        """Whether a new connection from ``host`` may stay: the allow/deny lists, then max_connections (a
        refusal is counted and logged)."""
        if not self.admits(host):
            self.refused += 1
            log.warning("%s: connection from %s refused by allow/deny list", self.label(), peer)
            return False
        limit = self.config.max_connections
        if limit and len(self.connections) >= limit:
            self.refused += 1
            log.warning("%s: connection from %s refused: max_connections %d reached", self.label(), peer, limit)
            return False
        return True

    def admits(self, host: str) -> bool:
        try:
            addr = ipaddress.ip_address(host.split("%")[0])
        except ValueError:
            return not self.allow
        if any(addr in net for net in self.deny):
            return False
        return not self.allow or any(addr in net for net in self.allow)


class MqttProtocol(asyncio.Protocol):
    """asyncio's end of one connection: moves bytes between the socket and the ConnectionDriver and does
    what it says (pause reading, close)."""
    __slots__ = ("server", "listener", "transport", "driver", "conn", "_out", "_out_bytes", "_base",
                 "_reading_paused", "_handshake")

    def __init__(self, server: MqttServer, listener: Listener) -> None:
        self.server = server
        self.listener = listener
        self.transport: asyncio.Transport | None = None
        self.driver: ConnectionDriver | None = None
        self.conn: ClientConnection | None = None
        self._out: list[bytes] | tuple[()] = ()   # a list while output waits for the flush
        self._out_bytes = 0
        # the transport's unsent bytes when queue_qos0 last asked: until the next write (flush) they can only
        # fall, so "our bytes + _base below the limit" proves what "our bytes + the transport's below it" asks,
        # without asking the transport for every QoS 0 delivery; _UNASKED while the list has not asked
        self._base = _UNASKED
        self._reading_paused = False
        self._handshake: asyncio.Task[None] | None = None

    # -- asyncio callbacks ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses: no isinstance check here
        self.transport = transport  # type: ignore[assignment]
        peername = transport.get_extra_info("peername") or ("?", 0)
        host = str(peername[0])
        peer = f"{host}:{peername[1]}" if len(peername) >= 2 else host
        listener = self.listener
        if self._handshake is not None:   # a TLS connection, admitted at its accept (accept_tls): handshake done
            self._handshake = None
            self._begin(peer)
            tls_config = listener.config.tls
            if tls_config is not None and tls_config.use_identity_as_username and self.conn is not None:
                self.conn.identity_from_certificate = True
                self.conn.peer_certificate = transport.get_extra_info("peercert")
            return
        if not listener.admit(host, peer):
            transport.abort()
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        listener.connections.add(self)
        self._begin(peer)

    def accept_tls(self, sock: socket.socket, peer: str, ctx: ssl.SSLContext) -> None:
        """A TLS listener's accepted socket, admitted: it counts as a connection from now on, and the
        handshake must end within connect_timeout. ``connect_accepted_socket`` gives the socket to the TLS
        protocol before anything reads it, so no byte of the ClientHello can reach this protocol unread by
        TLS; ``connection_made`` follows the handshake."""
        self.listener.connections.add(self)
        self._handshake = self.server.loop.create_task(self._tls(sock, peer, ctx))

    async def _tls(self, sock: socket.socket, peer: str, ctx: ssl.SSLContext) -> None:
        done = False
        try:
            await self.server.loop.connect_accepted_socket(
                lambda: self, sock, ssl=ctx, ssl_handshake_timeout=self.server.broker.limits.connect_timeout)
            done = True
        except Exception as exc:   # noqa: BLE001 - any failed handshake: this connection only
            log.info("%s: TLS handshake with %s failed: %s", self.listener.label(), peer,
                     str(exc) or type(exc).__name__)
            # the transport that took the socket is closed by now (asyncio closed the socket, uvloop detached
            # it): a no-op then, the close of a socket no transport took otherwise
            sock.close()
        finally:   # failed, or cancelled (the broker's shutdown; the loop closes the transport): the protocol
            if not done and self.driver is None:   # had neither connection_made nor connection_lost
                self._handshake = None
                self.connection_lost(None)

    def _begin(self, peer: str) -> None:
        """The MQTT side of a connection whose bytes now flow (after the TLS handshake on a TLS listener)."""
        server, listener = self.server, self.listener
        self.driver = driver = ConnectionDriver(server.broker, port=self, peer=peer, listener=listener.label(),
                                                now=server.loop.time())
        self.conn = driver.conn
        listener.accepted += 1

    def data_received(self, data: bytes) -> None:
        driver = self.driver
        if driver is not None and driver.receive(data, self.server.loop.time()) is Read.PAUSE:
            self._pause()

    def unhold(self) -> None:
        self.server.loop.call_soon(self._unheld)

    def _unheld(self) -> None:
        driver = self.driver
        if driver is None or self.transport is None:
            return
        if driver.resume(self.server.loop.time()) is Read.GO_ON and self._reading_paused:
            self._reading_paused = False
            self.transport.resume_reading()

    def _pause(self) -> None:
        if not self._reading_paused and self.transport is not None:
            self._reading_paused = True
            self.transport.pause_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.listener.connections.discard(self)
        if self.driver is not None:
            self.driver.lost(str(exc) if exc else None)
        self.transport = None

    # -- output -----------------------------------------------------------------------------------

    def queue_write(self, data: bytes) -> None:
        out = self._out
        if not out:
            self._base = _UNASKED   # a QoS 0 delivery into this list asks the transport first
            out = self._out = []
            self.server.schedule_flush(self)
        out.append(data)
        self._out_bytes += len(data)
        if self._out_bytes >= FLUSH_BYTES:
            # under a flood the loop may not get back to the scheduled flush soon: write now
            self.flush()

    def queue_qos0(self, data: bytes, limit: int) -> bool:
        """``queue_write`` unless ``buffered()`` is at ``limit`` or more (False): both in one call. The transport
        is asked only when the list begins, or when the bound ``_base`` gives is not enough."""
        queued = self._out_bytes
        out = self._out
        if not out or queued + self._base >= limit:
            transport = self.transport
            base = self._base = transport.get_write_buffer_size() if transport is not None else 0
            if queued + base >= limit:
                return False
        if not out:
            out = self._out = []
            self.server.schedule_flush(self)
        out.append(data)
        queued += len(data)
        self._out_bytes = queued
        if queued >= FLUSH_BYTES:
            self.flush()
        return True

    def buffered(self) -> int:
        """Bytes queued for this client: ours not yet handed over plus the transport's buffer."""
        transport = self.transport
        return self._out_bytes + (transport.get_write_buffer_size() if transport is not None else 0)

    def flush(self) -> None:
        out = self._out
        if not out:
            return
        self._out_bytes = 0
        transport = self.transport
        self._out = ()   # an idle connection holds no list
        if transport is None or transport.is_closing():
            return
        if len(out) == 1:
            transport.write(out[0])
        else:
            transport.write(b"".join(out))

    # -- closing ----------------------------------------------------------------------------------

    def close(self, reason: str, code: int | None = None) -> None:
        if self.driver is not None:
            self.driver.close(reason, code)
        else:
            self.abort()

    def final(self, data: bytes) -> None:
        """The last bytes (a refusing CONNACK) instead of anything queued, then close."""
        self._out = ()
        self._out_bytes = 0
        if self.transport is not None:
            self.transport.write(data)
            self.transport.close()

    def abort(self) -> None:
        """Flush what is queued (e.g. a final ack) and close; a TLS handshake under way is given up."""
        transport = self.transport
        if transport is None:
            if self._handshake is not None:
                self._handshake.cancel()
            return
        self.flush()
        transport.close()


class MqttServer:
    """Owns the listeners and the periodic sweep for one Broker."""

    def __init__(self, broker: Broker, listeners: list[ListenerConfig],
                 sys_interval: float = 10.0) -> None:
        self.broker = broker
        self.loop = asyncio.get_running_loop()
        self.listeners = [self._make_listener(cfg) for cfg in listeners]
        self.sys_interval = sys_interval
        self._dirty: list[MqttProtocol] = []
        self._flush_scheduled = False
        self._sweeper: asyncio.Task[None] | None = None
        self.poller: Poller | None = None   # the compact transports' epoll set (rawtcp.py), made when needed
        self._last_sys = 0.0
        self._last_rates = time.monotonic()
        broker.listener_control = self._listener_control_sync

    @staticmethod
    def _make_listener(cfg: ListenerConfig) -> Listener:
        listener = Listener(cfg)
        listener.allow = [ipaddress.ip_network(a, strict=False) for a in cfg.allow]
        listener.deny = [ipaddress.ip_network(a, strict=False) for a in cfg.deny]
        return listener

    def connections(self) -> list[MqttProtocol]:
        """Every open connection (each listener keeps its own: one set entry per connection, not two)."""
        return [proto for listener in self.listeners for proto in listener.connections]

    # -- output coalescing ------------------------------------------------------------------------

    def schedule_flush(self, proto: MqttProtocol) -> None:
        self._dirty.append(proto)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush_all)

    def _flush_all(self) -> None:
        self._flush_scheduled = False
        dirty, self._dirty = self._dirty, []
        for proto in dirty:
            proto.flush()

    # -- listeners --------------------------------------------------------------------------------

    async def start(self) -> None:
        for listener in self.listeners:
            if listener.config.start:
                await self.start_listener(listener)
        self._sweeper = self.loop.create_task(self._sweep_forever())

    async def start_listener(self, listener: Listener) -> None:
        if listener.server is not None:
            return
        cfg = listener.config
        ctx = listener.ssl_context = _ssl_context(cfg) if cfg.tls else None
        server: asyncio.AbstractServer | RawServer
        transport = "loop"
        if ctx is not None:
            # TLS: accepted here (rawtcp.RawServer, on either loop) and admitted before the handshake, which
            # connect_accepted_socket then runs with the socket unread. Before, loop.start_tls on an accepted
            # transport began a loop iteration later, and a ClientHello read in between was lost (uvloop reads
            # right after connection_made; asyncio under a burst of connections): docs/broker.md
            server = RawServer(self.loop, listen(cfg.host, listener.port or cfg.port, BACKLOG),
                               lambda sock, address: self._accept_tls(listener, ctx, sock, address))
        elif self._compact(cfg):
            transport = "compact"
            server = RawServer(self.loop, listen(cfg.host, listener.port or cfg.port, BACKLOG),
                               raw_transports(self._poller(), lambda: MqttProtocol(self, listener)))
        else:
            server = await self.loop.create_server(
                lambda: MqttProtocol(self, listener), host=cfg.host, port=listener.port or cfg.port,
                reuse_address=True, backlog=BACKLOG)
        listener.server = server
        listener.transport = transport
        sock = server.sockets[0]
        listener.port = sock.getsockname()[1]
        log.info("listener %s started on %s:%d%s (%s transport)", listener.label(), cfg.host, listener.port,
                 " (TLS)" if ctx else "", listener.transport)

    def _compact(self, cfg: ListenerConfig) -> bool:
        """Plain TCP on rawtcp.py's transports (one epoll set, ~1.6 KiB an idle connection), or the loop's own
        ("loop"; uvloop's cost ~2.7 KiB). "auto" is compact on either loop: as fast as uvloop's C transports
        since its socket calls keep the GIL (bench/HISTORY.md session 20)."""
        return HAVE_EPOLL and cfg.transport != "loop"

    def _poller(self) -> Poller:
        if self.poller is None:
            self.poller = Poller(self.loop)
        return self.poller

    def _accept_tls(self, listener: Listener, ctx: ssl.SSLContext, sock: socket.socket,
                    address: tuple[object, ...]) -> None:
        host = str(address[0])
        peer = f"{host}:{address[1]}" if len(address) >= 2 else host
        if not listener.admit(host, peer):
            sock.close()
            return
        MqttProtocol(self, listener).accept_tls(sock, peer, ctx)

    async def stop_listener(self, listener: Listener) -> None:
        """Stop accepting on this listener; connected clients stay connected."""
        server = listener.server
        if server is None:
            return
        listener.server = None
        server.close()
        log.info("listener %s stopped (existing connections kept)", listener.label())

    def _listener_control_sync(self, target: str, on: bool) -> list[str]:
        """WebSphere MQ Telemetry "Starting and stopping listeners": ``<port>`` or ``all``, payload ON/OFF."""
        if target == "all":
            chosen = list(self.listeners)
        else:
            chosen = [lst for lst in self.listeners if str(lst.port or lst.config.port) == target]
        changed = []
        for listener in chosen:
            if on and not listener.running:
                self.loop.create_task(self.start_listener(listener))
                changed.append(f"{listener.label()} ON")
            elif not on and listener.running:
                self.loop.create_task(self.stop_listener(listener))
                changed.append(f"{listener.label()} OFF")
        return changed

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            try:
                await self._sweeper
            except asyncio.CancelledError:
                pass
        for listener in self.listeners:
            await self.stop_listener(listener)
        for proto in self.connections():
            conn = proto.conn
            if conn is not None:
                conn.will = None   # a clean shutdown is not a client failure
                conn.abort("broker shutting down", P.Reason.SERVER_SHUTTING_DOWN)
            else:
                proto.abort()
        self._flush_all()
        # let connection_lost callbacks run
        for _ in range(3):
            await asyncio.sleep(0)
        if self.poller is not None:
            self.poller.close()

    # -- periodic work ----------------------------------------------------------------------------

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_INTERVAL)
            try:
                self.sweep()
            except Exception:
                log.exception("periodic sweep failed")

    def sweep(self) -> None:
        now = self.loop.time()
        for proto in self.connections():
            driver = proto.driver
            reason = driver.timed_out(now) if driver is not None else None
            if reason is not None:
                proto.close(reason, P.Reason.KEEP_ALIVE_TIMEOUT)
        mono = time.monotonic()
        dt = mono - self._last_rates
        if dt >= 1.0:
            self._last_rates = mono
            for session in self.broker.sessions.values():
                session.stats.tick(dt)
            for sub in self.broker.trie.subscriptions():
                sub.tick(dt)
        self.broker.expire_sessions()   # scans only when one may be due (SessionTable.expire)
        self.broker.publish_due_wills()
        memory.trim_if_due()   # give what a refused flood or a dropped queue held back to the OS
        if self.sys_interval and mono - self._last_sys >= self.sys_interval:
            self._last_sys = mono
            self.publish_sys()

    def publish_sys(self) -> None:
        b = self.broker
        stats = b.stats
        values = {
            "version": f"mqbridge {__version__}",
            "uptime": f"{int(b.clock() - stats.started)} seconds",
            "clients/connected": str(len(b.connections)),
            "clients/sessions": str(len(b.sessions)),
            "clients/total": str(stats.connections_total),
            "messages/received": str(stats.received),
            "messages/sent": str(sum(s.stats.sent for s in b.sessions.values())),
            "messages/retained/count": str(len(b.retained)),
            "messages/resends": str(stats.resends_recognised),
            "messages/shared_qos2_lost": str(stats.shared_qos2_lost),
            "clients/receive_maximum_exceeded": str(stats.receive_maximum_exceeded),
            "acl/denied/publish": str(stats.acl_denied_publish),
            "acl/denied/subscribe": str(stats.acl_denied_subscribe),
            "subscriptions/count": str(len(b.trie)),
            "load/messages/received/rate": f"{sum(s.stats.rate_in for s in b.sessions.values()):.1f}",
            "load/messages/sent/rate": f"{sum(s.stats.rate_out for s in b.sessions.values()):.1f}",
            "store/commits": str(b.store.commits),
            "messages/expired": str(sum(s.stats.expired for s in b.sessions.values())),
            "messages/too_large": str(sum(s.stats.too_large for s in b.sessions.values())),
            "wills/delayed": str(len(b.connects.delayed_wills)),
        }
        levels = Counter(c.protocol_level for c in b.connections.values())
        for level, name in ((P.MQTT_31, "mqtt31"), (P.MQTT_311, "mqtt311"), (P.MQTT_5, "mqtt5")):
            values[f"clients/connected/{name}"] = str(levels.get(level, 0))
        for key, value in values.items():
            b.publish_system(f"$SYS/broker/{key}", value)


def _ssl_context(cfg: ListenerConfig) -> ssl.SSLContext:
    tls = cfg.tls
    assert tls is not None
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(str(tls.cert), str(tls.key))
    if tls.ca is not None:
        ctx.load_verify_locations(str(tls.ca))
    ctx.verify_mode = ssl.CERT_REQUIRED if tls.require_client_cert else ssl.CERT_NONE
    return ctx
