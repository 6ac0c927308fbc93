"""Plain TCP listeners and connections on one epoll set, without asyncio's transport objects.

An idle MQTT connection is mostly the memory of what holds it: asyncio's socket transport (an object with a
__dict__, its extra-info dict, a write-buffer deque, the accept task and its weak reference) costs about
1.6 KiB per connection, uvloop's about 2 KiB, and even registering a descriptor with the loop costs a selector
key and a handle (asyncio, ~0.35 KiB) or a libuv poll handle (uvloop, ~0.65 KiB). Here the connections'
descriptors sit in one ``select.epoll`` of their own (``Poller``), which the loop watches as one descriptor:
a connection costs a slotted ``RawTransport`` and one dict entry (docs/broker.md "Memory per connection").
The transport keeps the part of asyncio's Transport contract that ``MqttProtocol`` uses: ``write`` (sent at
once when nothing waits, the rest buffered until the socket takes it), ``close`` (after the buffer is
written), ``abort``, ``pause_reading`` / ``resume_reading``, ``is_closing``, ``get_write_buffer_size``,
``get_extra_info("peername")`` (until ``connection_made`` returns), and it calls ``connection_made``,
``data_received``, ``eof_received`` and ``connection_lost`` (from the loop, never from inside a call of the
protocol's) as asyncio does. The same on asyncio's loop and on uvloop. Its reads and its writes of bytes
keep the GIL (``_calls_keeping_the_gil``); a buffer left over from a full socket goes out by os.write.

``RawServer`` accepts on the loop's ``add_reader`` and hands each accepted socket to a callable: a
``RawTransport`` for plain TCP (``raw_transports``), or, for TLS listeners, the broker's admission and
``loop.connect_accepted_socket`` (server.py), whose TLS protocol reads the socket's first byte.
"""
from __future__ import annotations

import asyncio
import ctypes
import errno
import logging
import os
import select
import socket
from collections.abc import Callable
from typing import Any

log = logging.getLogger("mqbridge.server")

READ_SIZE = 256 * 1024     # what one read takes at most (asyncio's max_size), into the poller's buffer
ACCEPT_BURST = 128         # connections accepted per readiness event of a listening socket
ACCEPT_RETRY = 1.0         # seconds without accepting after the process ran out of file descriptors
POLL_EVENTS = 1024         # ready connections handled per readiness of the epoll set (the rest: next time)
_RESOURCE_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
HAVE_EPOLL = hasattr(select, "epoll")   # Linux; elsewhere the server uses the loop's own transports
if HAVE_EPOLL:
    _IN, _OUT = select.EPOLLIN, select.EPOLLOUT
    # an error or hang-up is reported whatever was asked for: to the reader and the writer, as asyncio's selector
    _READ_EVENTS = _IN | select.EPOLLERR | select.EPOLLHUP
    _WRITE_EVENTS = _OUT | select.EPOLLERR | select.EPOLLHUP


def _calls_keeping_the_gil() -> tuple[Any, Any]:
    """libc's ``read`` and ``write`` called through ``ctypes.PyDLL``, which keeps the GIL across the call.
    os.read/os.write release it for every call; on a non-blocking socket the call never waits, but each
    release hands the GIL to any other thread that wants it (the store's writer), and the loop then waits for
    it to come back: with the writer busy, QoS 1 ran at 0.8x of uvloop's own transports, which release the GIL
    only while the loop waits for events (docs/broker.md "listeners[].transport"). (None, None) where libc
    cannot be loaded this way: os.read/os.write then."""
    try:
        libc = ctypes.PyDLL(None, use_errno=True)
        return libc.read, libc.write
    except (OSError, AttributeError):
        return None, None


_C_READ, _C_WRITE = _calls_keeping_the_gil()
_C_WRITE_MAX = 1 << 30   # argtypes left unset (a faster call): a Python int goes as a C int


def _errno_error() -> OSError:
    code = ctypes.get_errno()
    return OSError(code, os.strerror(code))   # BlockingIOError, ConnectionResetError, ... by its errno


class Poller:
    """One level-triggered epoll set holding many connections' descriptors; the event loop watches its
    descriptor and, when it is readable, ``_ready`` calls each ready transport directly (no handle per event).

    A descriptor is in the set only while its transport wants something (reading, or bytes to write): an
    error or hang-up is reported even for an empty event mask, and a paused connection whose peer hung up
    would otherwise be reported on every poll."""

    __slots__ = ("loop", "_epoll", "_fds", "_closed", "_into", "_view", "_into_array", "_into_address")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        # every read goes into this buffer and its bytes are copied out: os.read(fd, 256 KiB) would allocate
        # (and, above glibc's mmap threshold, map and unmap) 256 KiB per call, ~12 us a read even of 4 bytes
        self._into = bytearray(READ_SIZE)
        self._view = memoryview(self._into)
        self._into_array = (ctypes.c_char * READ_SIZE).from_buffer(self._into)   # never resized: a fixed address
        self._into_address = ctypes.c_void_p(ctypes.addressof(self._into_array))
        self._epoll = select.epoll()
        self._fds: dict[int, RawTransport] = {}
        self._closed = False
        loop.add_reader(self._epoll.fileno(), self._ready)

    def __len__(self) -> int:
        return len(self._fds)

    def __contains__(self, fd: int) -> bool:
        return fd in self._fds

    def update(self, transport: RawTransport) -> None:
        """Register, change or drop ``transport``'s descriptor to what it wants now."""
        if self._closed:
            return
        fd = transport._fd
        want = (_IN if transport._reading else 0) | (_OUT if transport._buffer is not None else 0)
        if want:
            if fd in self._fds:
                self._epoll.modify(fd, want)
            else:
                self._epoll.register(fd, want)
                self._fds[fd] = transport
        elif self._fds.pop(fd, None) is not None:
            self._epoll.unregister(fd)

    def close(self) -> None:
        """Stop watching (the event loop's end); descriptors still held stay their transports' to close."""
        if self._closed:
            return
        self._closed = True
        self._fds.clear()
        self.loop.remove_reader(self._epoll.fileno())
        self._epoll.close()

    def _ready(self) -> None:
        fds = self._fds
        for fd, events in self._epoll.poll(0, POLL_EVENTS):
            transport = fds.get(fd)
            if transport is None:   # dropped by a transport handled before it in this batch
                continue
            try:
                if events & _READ_EVENTS and transport._reading:
                    transport._read_ready()
                if events & _WRITE_EVENTS and transport._buffer is not None and fds.get(fd) is transport:
                    transport._write_ready()
            except Exception as exc:   # a bug in one connection's handling ends that connection only
                log.exception("connection %s: its event failed", transport._peer)
                transport._end(exc)


class RawTransport:
    """One accepted TCP connection, read and written through a ``Poller``."""

    __slots__ = ("_poller", "_fd", "_protocol", "_peer", "_buffer", "_closing", "_reading", "_lost")
    # _peer: the peer's address until connection_made has taken it, then the file descriptor (for the log)

    def __init__(self, poller: Poller, fd: int, protocol: asyncio.Protocol,
                 peer: tuple[object, ...] | int) -> None:
        """``fd``: a connected, non-blocking TCP socket's file descriptor, owned from now on (a socket object
        would cost another 88 bytes per connection)."""
        self._poller = poller
        self._fd = fd
        self._protocol = protocol
        self._peer = peer
        self._buffer: bytearray | None = None   # what the socket did not take yet
        self._closing = False
        self._reading = False
        self._lost = False

    def start(self) -> None:
        """``connection_made``, then reading (unless the protocol closed or paused it meanwhile)."""
        self._reading = True
        try:
            self._protocol.connection_made(self)  # type: ignore[arg-type]
        except Exception:
            log.exception("connection_made failed")
            self.abort()
            return
        self._peer = self._fd   # the protocol has it: an idle connection keeps no address tuple
        if self._reading and not self._closing:
            self._poller.update(self)

    # -- asyncio.Transport, the part MqttProtocol uses -------------------------------------------------

    def get_extra_info(self, name: str, default: object = None) -> object:
        if name == "peername":
            return self._peer if isinstance(self._peer, tuple) else default
        return default   # "socket": none to hand out (TCP_NODELAY is set at accept)

    def is_closing(self) -> bool:
        return self._closing

    def get_write_buffer_size(self) -> int:
        buffer = self._buffer
        return len(buffer) if buffer is not None else 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._lost or not data:
            return
        buffer = self._buffer
        if buffer is not None:
            buffer += data
            return
        try:
            if _C_WRITE is not None and type(data) is bytes and len(data) < _C_WRITE_MAX:
                sent = _C_WRITE(self._fd, data, len(data))
                if sent < 0:
                    raise _errno_error()
            else:
                sent = os.write(self._fd, data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError as exc:
            self._fail(exc)
            return
        if sent < len(data):
            self._buffer = bytearray(memoryview(data)[sent:])
            self._poller.update(self)

    def pause_reading(self) -> None:
        if self._reading and not self._closing:
            self._reading = False
            self._poller.update(self)

    def resume_reading(self) -> None:
        if not self._reading and not self._closing and not self._lost:
            self._reading = True
            self._poller.update(self)

    def close(self) -> None:
        """Stop reading; the connection ends once what is buffered is written."""
        if self._closing:
            return
        self._closing = True
        if self._reading:
            self._reading = False
            self._poller.update(self)
        if self._buffer is None:
            self._poller.loop.call_soon(self._connection_lost, None)

    def abort(self) -> None:
        """End the connection now; what is buffered is discarded."""
        self._end(None)

    # -- the selector's callbacks --------------------------------------------------------------------------

    def _read_ready(self) -> None:
        poller = self._poller
        try:
            if _C_READ is not None:
                size = _C_READ(self._fd, poller._into_address, READ_SIZE)
                if size < 0:
                    raise _errno_error()
            else:
                size = os.readv(self._fd, (poller._into,))
            data = poller._view[:size].tobytes()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._fail(exc)
            return
        try:
            if data:
                self._protocol.data_received(data)
                return
            keep_open = self._protocol.eof_received()   # the peer closed its side
        except Exception as exc:   # as asyncio's transport: a protocol that failed ends its connection only
            log.exception("connection %s: the protocol failed on its input", self._peer)
            self._end(exc)
            return
        if keep_open:
            self.pause_reading()
        else:
            self.close()

    def _write_ready(self) -> None:
        buffer = self._buffer
        if buffer is None:
            return
        try:   # os.write: libc's write would need the bytearray exported (and unexported before the del below)
            sent = os.write(self._fd, buffer)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._fail(exc)
            return
        del buffer[:sent]
        if not buffer:
            self._buffer = None
            self._poller.update(self)
            if self._closing:
                self._poller.loop.call_soon(self._connection_lost, None)

    def _fail(self, exc: OSError) -> None:
        if isinstance(exc, ConnectionError):
            log.debug("connection %s: %s", self._peer, exc)
        else:
            log.info("connection %s: socket error: %s", self._peer, exc)
        self._end(exc)

    def _end(self, exc: Exception | None) -> None:
        if self._lost:
            return
        self._closing = True
        self._reading = False
        self._buffer = None
        self._poller.update(self)
        self._poller.loop.call_soon(self._connection_lost, exc)

    def _connection_lost(self, exc: Exception | None) -> None:
        if self._lost:
            return
        self._lost = True
        self._buffer = None
        self._reading = False
        self._poller.update(self)
        try:
            self._protocol.connection_lost(exc)
        finally:
            os.close(self._fd)


Handoff = Callable[[socket.socket, tuple[object, ...]], None]


def raw_transports(poller: Poller, factory: Callable[[], asyncio.Protocol]) -> Handoff:
    """The hand-off of a plain TCP listener: each accepted socket gets a ``RawTransport`` and a new protocol."""
    def handoff(sock: socket.socket, peer: tuple[object, ...]) -> None:
        RawTransport(poller, sock.detach(), factory(), peer).start()
    return handoff


class RawServer:
    """Listening sockets whose accepted connections (non-blocking, TCP_NODELAY) go to ``handoff`` with the
    peer's address, which owns them from then on; ``sockets`` and ``close`` as asyncio.Server."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sockets: list[socket.socket], handoff: Handoff) -> None:
        self.loop = loop
        self.sockets = sockets
        self.handoff = handoff
        self._closed = False
        for sock in sockets:
            loop.add_reader(sock.fileno(), self._accept, sock)

    def close(self) -> None:
        """Stop accepting; connections already made stay."""
        if self._closed:
            return
        self._closed = True
        for sock in self.sockets:
            self.loop.remove_reader(sock.fileno())
            sock.close()

    def _accept(self, listening: socket.socket) -> None:
        for _ in range(ACCEPT_BURST):
            try:
                sock, peer = listening.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as exc:
                if exc.errno not in _RESOURCE_ERRORS:
                    raise
                log.error("cannot accept a connection (%s): not accepting for %.0f s", exc, ACCEPT_RETRY)
                self.loop.remove_reader(listening.fileno())
                self.loop.call_later(ACCEPT_RETRY, self._resume, listening)
                return
            sock.setblocking(False)
            try:   # frames are small and answered one by one: Nagle + delayed ACK would stall each ~40 ms
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
            try:
                self.handoff(sock, peer)
            except Exception:   # one connection's failure: the listener goes on accepting
                log.exception("connection from %s: the hand-off failed", peer)
                sock.close()

    def _resume(self, listening: socket.socket) -> None:
        if not self._closed:
            self.loop.add_reader(listening.fileno(), self._accept, listening)


def listen(host: str | None, port: int, backlog: int) -> list[socket.socket]:
    """Bound, listening, non-blocking sockets for ``host`` (every address it resolves to) and ``port``; the
    OSError of a failed bind names the address, as asyncio's create_server does."""
    infos = socket.getaddrinfo(host or None, port, family=socket.AF_UNSPEC, type=socket.SOCK_STREAM,
                               flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    seen: set[tuple[int, object]] = set()
    try:
        for family, kind, proto, _, address in infos:
            if (family, address) in seen:
                continue
            seen.add((family, address))
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as err:
                raise OSError(err.errno, f"error while attempting to bind on address {address!r}: "
                                         f"{(err.strerror or str(err)).lower()}") from None
            sock.listen(backlog)
            sock.setblocking(False)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets
