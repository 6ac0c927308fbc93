"""bridge.mqtt.rawtcp's transport over a real socket pair: what is not taken at once is written later in
order, close waits for it, abort does not, pause/resume reading, the peer's EOF and reset, and
connection_lost exactly once, many connections on one epoll set, on asyncio's loop and on uvloop, with libc's
calls that keep the GIL and with os.read/os.write where those cannot be had (the broker's tests cover it with
real clients; these cover the edges)."""
from __future__ import annotations

import asyncio
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from bridge.mqtt import rawtcp
from bridge.mqtt.rawtcp import Poller, RawServer, RawTransport, listen, raw_transports
from tests.support.gateway import LOOPS


@pytest.fixture(autouse=True, params=["libc", "os"])
def socket_calls(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Every test with libc's read/write (the GIL kept) and with os.read/os.write (the fallback)."""
    if request.param == "os":
        monkeypatch.setattr(rawtcp, "_C_READ", None)
        monkeypatch.setattr(rawtcp, "_C_WRITE", None)
    elif rawtcp._C_WRITE is None:
        pytest.skip("libc cannot be loaded through ctypes here")
    yield request.param


class Recorder(asyncio.Protocol):
    def __init__(self) -> None:
        self.data = bytearray()
        self.made = 0
        self.eof = 0
        self.lost: list[Exception | None] = []
        self.transport: RawTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.made += 1
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.data += data

    def eof_received(self) -> bool | None:
        self.eof += 1
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.append(exc)


async def _until(cond, what: str, timeout: float = 10.0) -> None:  # noqa: ANN001
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


def _run(main, loop_name: str) -> None:  # noqa: ANN001
    if loop_name == "uvloop":
        import uvloop
        uvloop.run(main)
    else:
        asyncio.run(main)


def _pair() -> tuple[socket.socket, socket.socket]:
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    theirs.setblocking(False)
    return ours, theirs


async def _drain(sock: socket.socket, want: int) -> bytes:
    loop = asyncio.get_running_loop()
    got = bytearray()
    while len(got) < want:
        chunk = await loop.sock_recv(sock, 1 << 20)
        if not chunk:
            break
        got += chunk
    return bytes(got)


@pytest.mark.parametrize("loop_name", LOOPS)
def test_unsent_bytes_go_later_in_order_and_close_waits_for_them(loop_name: str) -> None:
    async def main() -> None:
        ours, theirs = _pair()
        proto = Recorder()
        t = RawTransport(Poller(asyncio.get_running_loop()), ours.detach(), proto, ("peer", 1))
        t.start()
        payload = bytes(range(256)) * (32 * 1024)     # 8 MiB: more than the socket buffers take
        t.write(payload[:1000])
        t.write(payload[1000:])
        assert t.get_write_buffer_size() > 0 and proto.made == 1
        t.close()
        assert t.is_closing() and not proto.lost       # not lost while bytes wait
        got = await _drain(theirs, len(payload) + 1)
        assert got == payload                           # all of it, in order, then EOF
        await _until(lambda: proto.lost == [None], "connection_lost")
        theirs.close()
    _run(main(), loop_name)


@pytest.mark.parametrize("loop_name", LOOPS)
def test_abort_discards_and_the_peer_sees_the_end(loop_name: str) -> None:
    async def main() -> None:
        ours, theirs = _pair()
        proto = Recorder()
        t = RawTransport(Poller(asyncio.get_running_loop()), ours.detach(), proto, ("peer", 1))
        t.start()
        t.write(b"x" * (8 << 20))
        t.abort()
        t.abort()
        t.write(b"after")                               # ignored once lost
        await _until(lambda: proto.lost == [None], "connection_lost")
        assert len(await _drain(theirs, 9 << 20)) < 8 << 20   # the buffered rest was not sent
        theirs.close()
    _run(main(), loop_name)


@pytest.mark.parametrize("loop_name", LOOPS)
def test_reading_pauses_and_resumes_and_eof_closes(loop_name: str) -> None:
    async def main() -> None:
        ours, theirs = _pair()
        proto = Recorder()
        t = RawTransport(Poller(asyncio.get_running_loop()), ours.detach(), proto, ("peer", 1))
        t.start()
        theirs.send(b"one")
        await _until(lambda: proto.data == b"one", "the first bytes")
        t.pause_reading()
        theirs.send(b"two")
        await asyncio.sleep(0.05)                        # an event that must not happen, for a bounded time
        assert proto.data == b"one"
        t.resume_reading()
        await _until(lambda: proto.data == b"onetwo", "the bytes sent while paused")
        theirs.shutdown(socket.SHUT_WR)
        await _until(lambda: proto.lost == [None], "connection_lost after the peer's EOF")
        assert proto.eof == 1
        theirs.close()
    _run(main(), loop_name)


@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_reset_by_the_peer_ends_the_connection_with_the_error(loop_name: str) -> None:
    async def main() -> None:
        server_sock = listen("127.0.0.1", 0, 8)
        protos: list[Recorder] = []

        def factory() -> Recorder:
            protos.append(Recorder())
            return protos[-1]

        loop = asyncio.get_running_loop()
        server = RawServer(loop, server_sock, raw_transports(Poller(loop), factory))
        port = server.sockets[0].getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        await _until(lambda: protos and protos[0].made == 1, "the accepted connection")
        assert protos[0].transport is not None
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        client.close()                                  # linger 0: RST
        await _until(lambda: protos[0].lost, "connection_lost")
        assert isinstance(protos[0].lost[0], ConnectionResetError) and len(protos[0].lost) == 1
        server.close()
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1)
    _run(main(), loop_name)


def test_a_taken_port_names_the_address() -> None:
    taken = listen("127.0.0.1", 0, 8)
    port = taken[0].getsockname()[1]
    try:
        with pytest.raises(OSError, match=rf"error while attempting to bind on address \('127.0.0.1', {port}\): "
                                          "address already in use"):
            listen("127.0.0.1", port, 8)
    finally:
        taken[0].close()


@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_protocol_that_fails_on_its_input_ends_only_its_connection(loop_name: str) -> None:
    class Failing(Recorder):
        def data_received(self, data: bytes) -> None:
            raise ValueError("bad input")

    async def main() -> None:
        ours, theirs = _pair()
        proto = Failing()
        t = RawTransport(Poller(asyncio.get_running_loop()), ours.detach(), proto, ("peer", 1))
        t.start()
        theirs.send(b"x")
        await _until(lambda: proto.lost, "connection_lost")
        assert isinstance(proto.lost[0], ValueError) and t.is_closing()
        assert await _drain(theirs, 1) == b""            # the peer sees the end
        theirs.close()
    _run(main(), loop_name)


@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_paused_connection_whose_peer_hung_up_leaves_the_set_and_ends_on_resume(loop_name: str) -> None:
    """epoll reports a hang-up whatever the mask: a paused descriptor must not stay in the set (it would be
    reported on every poll, a busy loop)."""
    async def main() -> None:
        ours, theirs = _pair()
        fd = ours.fileno()
        poller = Poller(asyncio.get_running_loop())
        proto = Recorder()
        t = RawTransport(poller, ours.detach(), proto, ("peer", 1))
        t.start()
        assert fd in poller
        t.pause_reading()
        assert fd not in poller and len(poller) == 0
        theirs.close()                                   # hang-up while paused
        await asyncio.sleep(0.05)                        # an event that must not happen, for a bounded time
        assert not proto.lost and proto.eof == 0
        t.resume_reading()
        await _until(lambda: proto.lost == [None], "connection_lost after resuming")
        assert proto.eof == 1 and fd not in poller
        poller.close()
    _run(main(), loop_name)


@pytest.mark.parametrize("loop_name", LOOPS)
def test_many_connections_share_one_set_and_each_gets_its_own_bytes(loop_name: str) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        poller = Poller(loop)
        protos: list[Recorder] = []

        def factory() -> Recorder:
            protos.append(Recorder())
            return protos[-1]

        server = RawServer(loop, listen("127.0.0.1", 0, 64), raw_transports(poller, factory))
        port = server.sockets[0].getsockname()[1]
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(40)]
        await _until(lambda: len(protos) == 40 and len(poller) == 40, "40 accepted connections")
        for i, client in enumerate(clients):
            client.sendall(f"c{i};".encode())
        await _until(lambda: sorted(bytes(p.data) for p in protos) == sorted(f"c{i};".encode() for i in range(40)),
                     "every client's bytes")
        for proto in protos:                             # and back, each on its own socket
            assert proto.transport is not None
            proto.transport.write(b"echo:" + bytes(proto.data))
        for i, client in enumerate(clients):
            client.settimeout(10)
            assert client.recv(64) == f"echo:c{i};".encode()
        server.close()                                   # connections made stay
        for client in clients[:20]:
            client.close()
        await _until(lambda: sum(1 for p in protos if p.lost == [None]) == 20 and len(poller) == 20,
                     "20 ended connections gone from the set")
        for proto in protos:
            if not proto.lost:
                assert proto.transport is not None
                proto.transport.abort()
        await _until(lambda: all(p.lost for p in protos) and len(poller) == 0, "every connection_lost")
        poller.close()
        for client in clients[20:]:
            client.close()
    _run(main(), loop_name)


@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_failure_in_one_connections_event_ends_only_that_connection(loop_name: str) -> None:
    class Broken(RawTransport):
        __slots__ = ()

        def _read_ready(self) -> None:
            raise RuntimeError("a bug in the transport")

    async def main() -> None:
        poller = Poller(asyncio.get_running_loop())
        (bad_ours, bad_theirs), (ours, theirs) = _pair(), _pair()
        bad, good = Recorder(), Recorder()
        Broken(poller, bad_ours.detach(), bad, ("bad", 1)).start()
        RawTransport(poller, ours.detach(), good, ("good", 1)).start()
        bad_theirs.send(b"x")
        theirs.send(b"y")
        await _until(lambda: bad.lost and good.data == b"y", "the broken connection's end and the other's bytes")
        assert isinstance(bad.lost[0], RuntimeError) and not good.lost
        theirs.send(b"z")
        await _until(lambda: good.data == b"yz", "more bytes on the connection that works")
        poller.close()
        bad_theirs.close()
        theirs.close()
    _run(main(), loop_name)


@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_connection_that_ends_after_its_poller_closed_still_closes_its_socket(loop_name: str) -> None:
    async def main() -> None:
        poller = Poller(asyncio.get_running_loop())
        ours, theirs = _pair()
        proto = Recorder()
        t = RawTransport(poller, ours.detach(), proto, ("peer", 1))
        t.start()
        poller.close()                                   # the server's shutdown, before connection_lost
        t.abort()
        await _until(lambda: proto.lost == [None], "connection_lost")
        assert await _drain(theirs, 1) == b""            # the peer sees the end: the descriptor was closed
        theirs.close()
    _run(main(), loop_name)


@pytest.mark.parametrize("loop_name", LOOPS)
def test_input_larger_than_one_read_arrives_whole_and_each_connection_keeps_its_own(loop_name: str) -> None:
    """Reads go through one buffer per poller and are copied out: nothing a protocol holds may change."""
    async def main() -> None:
        poller = Poller(asyncio.get_running_loop())
        pairs = [_pair() for _ in range(3)]
        protos = [Recorder() for _ in pairs]

        class Keeping(Recorder):
            def __init__(self, into: Recorder) -> None:
                super().__init__()
                self.chunks: list[bytes] = []
                self.into = into

            def data_received(self, data: bytes) -> None:
                self.chunks.append(data)     # kept as received, compared at the end
                self.into.data += data

        keepers = [Keeping(p) for p in protos]
        for (ours, _), keeper in zip(pairs, keepers, strict=True):
            RawTransport(poller, ours.detach(), keeper, ("peer", 1)).start()
        payloads = [os.urandom(700_000) for _ in pairs]   # more than one 256 KiB read each
        loop = asyncio.get_running_loop()
        await asyncio.gather(*(loop.sock_sendall(theirs, data)
                               for (_, theirs), data in zip(pairs, payloads, strict=True)))
        await _until(lambda: all(len(p.data) == len(d) for p, d in zip(protos, payloads, strict=True)),
                     "every payload")
        for proto, keeper, data in zip(protos, keepers, payloads, strict=True):
            assert bytes(proto.data) == data and b"".join(keeper.chunks) == data and len(keeper.chunks) > 1
        poller.close()
        for _, theirs in pairs:
            theirs.close()
    _run(main(), loop_name)


def test_reads_and_writes_keep_the_gil(socket_calls: str) -> None:
    """A thread waiting for the GIL (the store's writer) does not run during a connection's read or write: each
    release would hand it the GIL and leave the loop waiting for it (docs/broker.md "listeners[].transport")."""
    if socket_calls == "os":
        pytest.skip("os.read/os.write release the GIL")
    loop = asyncio.new_event_loop()
    poller = Poller(loop)
    ours, theirs = _pair()
    proto = Recorder()
    transport = RawTransport(poller, ours.detach(), proto, ("peer", 1))
    transport.start()
    theirs.sendall(b"y" * 100)
    spins = [0]
    stop = [False]

    def spin() -> None:   # pure Python: runs only while it holds the GIL
        while not stop[0]:
            spins[0] += 1

    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.2)    # a waiting thread takes the GIL by force only after 0.2 s
    spinner = threading.Thread(target=spin)
    try:
        spinner.start()
        while spins[0] == 0:
            time.sleep(0.001)     # lets the spinner run; it waits for the GIL from our return on
        before = spins[0]
        for _ in range(20):
            transport.write(b"x" * 100)
        transport._read_ready()
        after = spins[0]
    finally:
        stop[0] = True
        spinner.join()
        sys.setswitchinterval(interval)
    assert after == before, f"another thread ran {after - before} steps during the socket calls"
    assert bytes(proto.data) == b"y" * 100
    theirs.setblocking(True)
    got = b""
    while len(got) < 2000:
        got += theirs.recv(4096)
    assert got == b"x" * 2000
    transport.abort()
    theirs.close()
    poller.close()
    loop.run_until_complete(asyncio.sleep(0))   # connection_lost closes our socket
    loop.close()
    assert proto.lost == [None]


@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_write_to_a_peer_that_reset_ends_the_connection_with_the_error(loop_name: str) -> None:
    async def main() -> None:
        ours, theirs = _pair()
        proto = Recorder()
        transport = RawTransport(Poller(asyncio.get_running_loop()), ours.detach(), proto, ("peer", 1))
        transport.start()
        theirs.close()                         # a Unix socket pair: the next write fails with EPIPE
        transport.write(b"after the end")
        await _until(lambda: proto.lost, "connection_lost")
        assert len(proto.lost) == 1 and isinstance(proto.lost[0], BrokenPipeError)
        assert transport.is_closing()
    _run(main(), loop_name)
