"""bridge.mqtt.rawtcp's transport over a real socket pair: what is not taken at once is written later in
order, close waits for it, abort does not, pause/resume reading, the peer's EOF and reset, and
connection_lost exactly once (the broker's tests cover it with real clients; these cover the edges)."""
from __future__ import annotations

import asyncio
import socket

import pytest

from bridge.mqtt.rawtcp import RawServer, RawTransport, listen, raw_transports


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


def test_unsent_bytes_go_later_in_order_and_close_waits_for_them() -> None:
    async def main() -> None:
        ours, theirs = _pair()
        proto = Recorder()
        t = RawTransport(asyncio.get_running_loop(), ours.detach(), proto, ("peer", 1))
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
    asyncio.run(main())


def test_abort_discards_and_the_peer_sees_the_end() -> None:
    async def main() -> None:
        ours, theirs = _pair()
        proto = Recorder()
        t = RawTransport(asyncio.get_running_loop(), ours.detach(), proto, ("peer", 1))
        t.start()
        t.write(b"x" * (8 << 20))
        t.abort()
        t.abort()
        t.write(b"after")                               # ignored once lost
        await _until(lambda: proto.lost == [None], "connection_lost")
        assert len(await _drain(theirs, 9 << 20)) < 8 << 20   # the buffered rest was not sent
        theirs.close()
    asyncio.run(main())


def test_reading_pauses_and_resumes_and_eof_closes() -> None:
    async def main() -> None:
        ours, theirs = _pair()
        proto = Recorder()
        t = RawTransport(asyncio.get_running_loop(), ours.detach(), proto, ("peer", 1))
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
    asyncio.run(main())


def test_a_reset_by_the_peer_ends_the_connection_with_the_error() -> None:
    async def main() -> None:
        server_sock = listen("127.0.0.1", 0, 8)
        protos: list[Recorder] = []

        def factory() -> Recorder:
            protos.append(Recorder())
            return protos[-1]

        loop = asyncio.get_running_loop()
        server = RawServer(loop, server_sock, raw_transports(loop, factory))
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
    asyncio.run(main())


def test_a_taken_port_names_the_address() -> None:
    taken = listen("127.0.0.1", 0, 8)
    port = taken[0].getsockname()[1]
    try:
        with pytest.raises(OSError, match=rf"error while attempting to bind on address \('127.0.0.1', {port}\): "
                                          "address already in use"):
            listen("127.0.0.1", port, 8)
    finally:
        taken[0].close()


def test_a_protocol_that_fails_on_its_input_ends_only_its_connection() -> None:
    class Failing(Recorder):
        def data_received(self, data: bytes) -> None:
            raise ValueError("bad input")

    async def main() -> None:
        ours, theirs = _pair()
        proto = Failing()
        t = RawTransport(asyncio.get_running_loop(), ours.detach(), proto, ("peer", 1))
        t.start()
        theirs.send(b"x")
        await _until(lambda: proto.lost, "connection_lost")
        assert isinstance(proto.lost[0], ValueError) and t.is_closing()
        assert await _drain(theirs, 1) == b""            # the peer sees the end
        theirs.close()
    asyncio.run(main())
