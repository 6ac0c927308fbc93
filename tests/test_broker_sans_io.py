"""The broker's protocol core without sockets or an event loop: bytes in (ConnectionDriver.receive),
bytes and actions out (the write/abort/final sinks and the returned Read). The packets are written by
hand from OASIS "MQTT Version 3.1.1", not by the broker's own encoder."""

from __future__ import annotations

import queue
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from bridge.config import BrokerConfig
from bridge.mqtt.broker import Broker
from bridge.mqtt.driver import ConnectionDriver, Read
from bridge.mqtt.store import Store


class ManualLoop:
    """Runs the store's after-commit callbacks when the test pumps it (the store's CallbackLoop)."""

    def __init__(self) -> None:
        self.calls: queue.Queue[tuple[Callable[..., object], tuple[object, ...]]] = queue.Queue()

    def call_soon_threadsafe(self, callback: Callable[..., object], *args: object) -> object:
        self.calls.put((callback, args))
        return None

    call_soon = call_soon_threadsafe   # the store hands one turn's after-commit callbacks over at its end

    def is_closed(self) -> bool:
        return False

    def pump_until(self, done: Callable[[], bool], timeout: float = 10.0) -> None:
        while not done():
            callback, args = self.calls.get(timeout=timeout)   # queue.Empty fails the test
            callback(*args)


class Client:
    """One connection's sinks."""

    def __init__(self, broker: Broker, name: str) -> None:
        self.out = bytearray()
        self.closed = False
        self.last: bytes | None = None   # what final() wrote
        self.driver = ConnectionDriver(broker, port=self, peer=f"127.0.0.1:{name}",
                                       listener=broker.config.listeners[0].label(), now=0.0)

    # connection.Port
    def queue_write(self, data: bytes) -> None:
        self.out.extend(data)

    def abort(self) -> None:
        self.closed = True

    def final(self, data: bytes) -> None:
        self.last = data
        self.closed = True

    def buffered(self) -> int:
        return len(self.out)

    def queue_qos0(self, data: bytes, limit: int) -> bool:
        if len(self.out) >= limit:
            return False
        self.out.extend(data)
        return True

    def unhold(self) -> None:
        self.driver.resume(0.0)

    def take(self) -> bytes:
        data = bytes(self.out)
        self.out.clear()
        return data


def _str(text: str) -> bytes:
    raw = text.encode()
    return len(raw).to_bytes(2, "big") + raw


def _packet(first: int, body: bytes) -> bytes:
    assert len(body) < 128
    return bytes([first, len(body)]) + body


def connect(client_id: str, *, level: int = 4, clean: bool = True) -> bytes:
    return _packet(0x10, _str("MQTT") + bytes([level, 0x02 if clean else 0x00, 0, 60]) + _str(client_id))


@pytest.fixture
def core(tmp_path: Path):
    loop = ManualLoop()
    store = Store(tmp_path / "broker.db")
    broker = Broker(BrokerConfig(), store)
    broker.recover(store.open())
    store.start(loop)
    yield broker, loop
    store.close()


def test_a_publication_goes_from_bytes_in_to_bytes_out(core) -> None:
    broker, loop = core
    sub, pub = Client(broker, "1"), Client(broker, "2")
    assert sub.driver.receive(connect("sub"), 1.0) is Read.GO_ON
    loop.pump_until(lambda: len(sub.out) >= 4)
    assert sub.take() == b"\x20\x02\x00\x00"                      # CONNACK, accepted
    subscribe = _packet(0x82, b"\x00\x01" + _str("a/b") + b"\x01")
    assert sub.driver.receive(subscribe, 1.1) is Read.GO_ON
    loop.pump_until(lambda: len(sub.out) >= 5)
    assert sub.take() == b"\x90\x03\x00\x01\x01"                  # SUBACK, QoS 1 granted

    # CONNECT and a QoS 1 PUBLISH in one read, split across two reads in the middle of the PUBLISH
    publish = _packet(0x32, _str("a/b") + b"\x00\x07" + b"hello")
    data = connect("pub") + publish
    cut = len(data) - 3
    assert pub.driver.receive(data[:cut], 2.0) is Read.GO_ON
    assert pub.driver.receive(data[cut:], 2.1) is Read.GO_ON
    loop.pump_until(lambda: len(pub.out) >= 8 and len(sub.out) > 0)
    assert pub.take() == b"\x20\x02\x00\x00" + b"\x40\x02\x00\x07"   # CONNACK, then PUBACK for id 7
    delivered = sub.take()
    assert delivered[0] == 0x32 and delivered[2:7] == _str("a/b") and delivered.endswith(b"hello")
    packet_id = delivered[7:9]
    assert packet_id != b"\x00\x00"
    assert int.from_bytes(packet_id, "big") in broker.sessions["sub"].inflight
    assert sub.driver.receive(b"\x40\x02" + packet_id, 3.0) is Read.GO_ON   # PUBACK from the subscriber
    assert not broker.sessions["sub"].inflight

    assert pub.driver.receive(b"\xc0\x00", 4.0) is Read.GO_ON         # PINGREQ -> PINGRESP
    assert pub.take() == b"\xd0\x00"
    assert pub.driver.receive(b"\xe0\x00", 5.0) is Read.CLOSED        # DISCONNECT: the driver closes
    assert pub.closed and pub.last is None


def test_bad_bytes_close_one_connection_and_the_broker_serves_the_others(core) -> None:
    broker, loop = core
    good, bad = Client(broker, "1"), Client(broker, "2")
    good.driver.receive(connect("good"), 1.0)
    bad.driver.receive(connect("bad"), 1.0)
    loop.pump_until(lambda: len(good.out) >= 4 and len(bad.out) >= 4)
    good.take()
    # SUBSCRIBE with the reserved flag bits wrong (0x80 instead of 0x82): a protocol error
    assert bad.driver.receive(_packet(0x80, b"\x00\x01" + _str("x") + b"\x00"), 2.0) is Read.CLOSED
    assert bad.closed and broker.stats.protocol_errors == 1
    assert bad.driver.receive(b"\xc0\x00", 2.1) is Read.CLOSED       # nothing more is processed
    assert good.driver.receive(b"\xc0\x00", 2.2) is Read.GO_ON
    assert good.take() == b"\xd0\x00"
    bad.driver.lost(None)
    assert "bad" not in broker.connections and "good" in broker.connections


def test_a_refused_connect_gets_its_one_connack_and_nothing_else(core) -> None:
    broker, _loop = core
    client = Client(broker, "1")
    assert client.driver.receive(connect("old", level=9), 1.0) is Read.CLOSED
    assert client.last == b"\x20\x02\x00\x01"                       # unacceptable protocol version
    assert client.out == b"" and client.driver.conn.client_id is None


def test_timeouts_come_from_the_driver(core) -> None:
    broker, loop = core
    limit = broker.limits.connect_timeout
    silent = Client(broker, "1")
    assert silent.driver.timed_out(limit - 0.5) is None
    assert "no CONNECT" in (silent.driver.timed_out(limit + 0.5) or "")
    client = Client(broker, "2")
    client.driver.receive(connect("k"), 10.0)                        # keep alive 60 s
    loop.pump_until(lambda: len(client.out) >= 4)
    assert client.driver.timed_out(10.0 + 89.0) is None
    assert "keepalive expired" in (client.driver.timed_out(10.0 + 91.0) or "")


def test_the_protocol_core_imports_no_asyncio() -> None:
    code = ("import sys; import bridge.mqtt.driver, bridge.mqtt.broker, bridge.mqtt.store; "
            "print('asyncio' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.stdout.strip() == "False"
