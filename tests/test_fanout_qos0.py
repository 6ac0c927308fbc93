"""A QoS 0 publication's fan-out (Publisher._fan_out_qos0) does inline, for plain subscribers, what
Session.deliver and ClientConnection.send_qos0 do: the same bytes to every subscriber and the same counters,
whatever mix of subscribers (3.1.1, 5.0, with a Topic Alias, with a small Maximum Packet Size, traced, behind a
held acknowledgement, a full output) it meets. And MqttProtocol.queue_qos0, which asks the transport for its
unsent bytes only when its own bound is not enough, drops exactly where asking every time would."""
from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from bridge.config import BrokerConfig
from bridge.mqtt import packets as P
from bridge.mqtt import properties as PR
from bridge.mqtt import publish as publish_module
from bridge.mqtt.broker import Broker
from bridge.mqtt.driver import ConnectionDriver
from bridge.mqtt.server import MqttProtocol
from bridge.mqtt.store import Store


class Loop:
    def call_soon_threadsafe(self, callback: Any, *args: Any) -> None:  # noqa: ANN401
        callback(*args)

    call_soon = call_soon_threadsafe

    def is_closed(self) -> bool:
        return False


class Port:
    """connection.Port, keeping what it is given; ``room``: bytes it takes before QoS 0 is refused."""

    def __init__(self, room: int = 1 << 30) -> None:
        self.data = bytearray()
        self.room = room

    def queue_write(self, data: bytes) -> None:
        self.data += data

    def queue_qos0(self, data: bytes, limit: int) -> bool:
        if len(self.data) + len(data) > self.room:
            return False
        self.data += data
        return True

    def buffered(self) -> int:
        return 0 if len(self.data) < self.room else 1 << 30

    def abort(self) -> None: ...

    def final(self, data: bytes) -> None: ...

    def unhold(self) -> None: ...


SUBSCRIBERS: list[tuple[str, int, dict[int, Any] | None, int]] = [   # client id, level, CONNECT properties, room
    ("v311", P.MQTT_311, None, 1 << 30),
    ("v5", P.MQTT_5, None, 1 << 30),
    ("v5-alias", P.MQTT_5, {PR.TOPIC_ALIAS_MAXIMUM: 4}, 1 << 30),
    ("v5-small", P.MQTT_5, {PR.MAXIMUM_PACKET_SIZE: 40}, 1 << 30),
    ("traced", P.MQTT_311, None, 1 << 30),
    ("full", P.MQTT_5, None, 100),
    ("full311", P.MQTT_311, None, 90),
]


def _run(tmp: Path, level: int, props: dict[int, Any] | None) -> dict[str, Any]:
    store = Store(tmp / "broker.db")
    broker = Broker(BrokerConfig(), store, trace_clients=frozenset({"traced"}))
    broker.recover(store.open())
    store.start(Loop())
    label = broker.config.listeners[0].label()
    ports: dict[str, Port] = {}
    drivers = {}
    for i, (cid, sub_level, connect_props, room) in enumerate(SUBSCRIBERS):
        port = ports[cid] = Port(room)
        driver = drivers[cid] = ConnectionDriver(broker, port=port, peer=f"127.0.0.1:{i}", listener=label, now=0.0)
        driver.receive(P.encode(P.Connect(sub_level, cid, properties=connect_props), sub_level)
                       + P.encode(P.Subscribe(1, (("t/#", 0),)), sub_level), 0.0)
    # one connection with an acknowledgement waiting for a commit: what follows queues behind it
    held = drivers["v311"].conn
    held.send_gated(b"\x40\x02\x00\x09", (lambda callback: None,))
    pub = Port()
    pdriver = ConnectionDriver(broker, port=pub, peer="127.0.0.1:p", listener=label, now=0.0)
    pdriver.receive(P.encode(P.Connect(level, "pub"), level), 0.0)
    for port in ports.values():
        port.data.clear()
    for n in range(6):
        pdriver.receive(P.encode(P.Publish(f"t/{n % 2}", b"x" * (10 * n), 0, properties=props), level), 1.0)
    out: dict[str, Any] = {}
    for cid, port in ports.items():
        session = broker.sessions[cid]
        conn = drivers[cid].conn
        out[cid] = (bytes(port.data), conn.packets_out, conn.bytes_out, session.stats.sent, session.stats.dropped,
                    session.stats.too_large, len(conn.held) if conn.held else 0, held.held_count() if cid == "v311"
                    else None)
    store.close()
    return out


@pytest.mark.parametrize("level,props", [(P.MQTT_311, None), (P.MQTT_5, None),
                                         (P.MQTT_5, {PR.USER_PROPERTY: [("k", "v")]})])
def test_the_inline_fan_out_gives_what_the_general_way_gives(tmp_path: Path, level: int,
                                                            props: dict[int, Any] | None,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    inline = _run(tmp_path / "a", level, props)

    class NotAConnection:   # no link is one: every subscriber goes through Session.deliver
        pass

    monkeypatch.setattr(publish_module, "ClientConnection", NotAConnection)
    general = _run(tmp_path / "b", level, props)
    assert inline == general
    assert inline["v5"][3] == 6 and inline["v311"][3] == 6            # every plain subscriber got all six
    assert inline["full"][4] > 0 and inline["full311"][4] > 0          # full outputs dropped some, counted
    assert inline["v5-small"][5] > 0                                    # too large for it: counted, not sent


class Transport:
    def __init__(self) -> None:
        self.unsent = 0
        self.asked = 0
        self.written: list[bytes] = []

    def get_write_buffer_size(self) -> int:
        self.asked += 1
        return self.unsent

    def is_closing(self) -> bool:
        return False

    def write(self, data: bytes) -> None:
        self.written.append(data)
        self.unsent += len(data)


class Server:
    def schedule_flush(self, proto: MqttProtocol) -> None: ...


def test_queue_qos0_drops_where_asking_the_transport_every_time_would() -> None:
    rng = random.Random(18)
    limit = 2_000
    for _ in range(200):
        proto = MqttProtocol(Server(), None)  # type: ignore[arg-type]
        transport = proto.transport = Transport()  # type: ignore[assignment]
        transport.unsent = rng.randrange(0, 2_500)
        for _ in range(60):
            step = rng.random()
            if step < 0.15:   # the loop sent some of the transport's bytes (it never gains any without a write)
                transport.unsent -= rng.randrange(0, transport.unsent + 1)
            elif step < 0.2:
                proto.flush()
            elif step < 0.3:   # other output (an acknowledgement) may begin the list
                proto.queue_write(b"a" * rng.randrange(1, 100))
            data = b"p" * rng.randrange(1, 200)
            expected = proto._out_bytes + transport.unsent < limit
            assert proto.queue_qos0(data, limit) is expected
    # asked once per list while far from the limit
    proto = MqttProtocol(Server(), None)  # type: ignore[arg-type]
    transport = proto.transport = Transport()  # type: ignore[assignment]
    for _ in range(100):
        assert proto.queue_qos0(b"p" * 10, limit)
    assert transport.asked == 1
