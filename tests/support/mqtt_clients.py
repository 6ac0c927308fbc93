"""Real MQTT clients for tests: a paho-mqtt wrapper that records what arrives, and a raw socket
client for byte-level tests (malformed packets, exact flags)."""
from __future__ import annotations

import socket
import threading
import uuid
from dataclasses import dataclass
from typing import Any

import paho.mqtt.client as mqtt

from bridge.mqtt import packets as P
from tests.support.gateway import wait_for

V31 = mqtt.MQTTv31
V311 = mqtt.MQTTv311


@dataclass(frozen=True)
class Received:
    topic: str
    payload: bytes
    qos: int
    retain: bool
    dup: bool
    mid: int


class PahoClient:
    """paho-mqtt with its network loop in a thread; every received message is recorded."""

    def __init__(self, port: int, client_id: str | None = None, *, protocol: int = V311,
                 clean_session: bool = True, keepalive: int = 60,
                 will: tuple[str, bytes, int, bool] | None = None,
                 username: str | None = None, password: str | None = None) -> None:
        self.client_id = client_id if client_id is not None else f"t-{uuid.uuid4().hex[:12]}"
        self.port = port
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=self.client_id,
                                  protocol=protocol, clean_session=clean_session)
        self.keepalive = keepalive
        self.messages: list[Received] = []
        self.lock = threading.Lock()
        self.connack: tuple[Any, Any] | None = None
        self.disconnected = threading.Event()
        self.subacks: dict[int, list[int]] = {}
        if will is not None:
            self.client.will_set(will[0], will[1], will[2], will[3])
        if username is not None:
            self.client.username_pw_set(username, password)
        self.client.on_connect = self._on_connect
        self.client.on_message = self._on_message
        self.client.on_disconnect = self._on_disconnect
        self.client.on_subscribe = self._on_subscribe

    def _on_connect(self, client: Any, userdata: Any, flags: Any, rc: Any, props: Any = None) -> None:
        self.connack = (flags, rc)

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        with self.lock:
            self.messages.append(Received(msg.topic, bytes(msg.payload), msg.qos, bool(msg.retain),
                                          bool(msg.dup), msg.mid))

    def _on_disconnect(self, *args: Any) -> None:
        self.disconnected.set()

    def _on_subscribe(self, client: Any, userdata: Any, mid: int, reason_codes: Any,
                      props: Any = None) -> None:
        self.subacks[mid] = [int(getattr(rc, "value", rc)) for rc in reason_codes]

    def connect(self, timeout: float = 10.0) -> PahoClient:
        self.client.connect("127.0.0.1", self.port, keepalive=self.keepalive)
        self.client.loop_start()
        wait_for(lambda: self.connack is not None, timeout, what=f"CONNACK for {self.client_id}")
        return self

    @property
    def session_present(self) -> bool:
        assert self.connack is not None
        return bool(self.connack[0].session_present)

    @property
    def rc(self) -> int:
        assert self.connack is not None
        return int(getattr(self.connack[1], "value", self.connack[1]))

    def subscribe(self, topic: str, qos: int = 0, timeout: float = 10.0) -> list[int]:
        result, mid = self.client.subscribe(topic, qos)
        assert result == mqtt.MQTT_ERR_SUCCESS
        wait_for(lambda: mid in self.subacks, timeout, what=f"SUBACK for {topic}")
        return self.subacks[mid]

    def publish(self, topic: str, payload: bytes | str, qos: int = 0, retain: bool = False,
                wait: bool = True, timeout: float = 10.0) -> Any:
        info = self.client.publish(topic, payload, qos, retain)
        if wait and qos:
            info.wait_for_publish(timeout)
            assert info.is_published(), f"publish to {topic} not acknowledged"
        return info

    def wait_messages(self, n: int, timeout: float = 10.0) -> list[Received]:
        wait_for(lambda: len(self.messages) >= n, timeout,
                 what=f"{n} messages at {self.client_id} (have {len(self.messages)})")
        with self.lock:
            return list(self.messages)

    def disconnect(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()

    def drop(self) -> None:
        """Close the TCP connection without DISCONNECT (an abnormal end: the will fires)."""
        self.client.loop_stop()
        sock = self.client.socket()
        if sock is not None:
            sock.close()


class RawClient:
    """A plain socket speaking bytes; for the tests that must send what no library would."""

    def __init__(self, port: int, timeout: float = 5.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.reader = P.PacketReader()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def connect(self, client_id: str = "raw", level: int = P.MQTT_311, clean: bool = True,
                keepalive: int = 60) -> P.Connack:
        self.send(P.encode(P.Connect(level, client_id, clean, keepalive)))
        packet = self.recv()
        assert isinstance(packet, P.Connack), packet
        return packet

    def recv(self) -> P.Packet:
        while True:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed by broker")
            packets = self.reader.feed(data)
            if packets:
                assert len(packets) == 1, packets
                return packets[0]

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True when the broker closes the connection within ``timeout`` (data before EOF is read)."""
        self.sock.settimeout(timeout)
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()
