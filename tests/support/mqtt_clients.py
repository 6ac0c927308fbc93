"""Real MQTT clients for tests: a paho-mqtt wrapper that records what arrives, and a raw socket
client for byte-level tests (malformed packets, exact flags)."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any

import paho.mqtt.client as mqtt

from bridge.mqtt import packets as P
from tests.support.gateway import wait_for

V31 = mqtt.MQTTv31
V311 = mqtt.MQTTv311
# for @pytest.mark.parametrize("proto", PROTOCOLS, ids=PROTOCOL_IDS)
PROTOCOLS = [V31, V311]
PROTOCOL_IDS = ["mqtt31", "mqtt311"]
LEVEL = {V31: P.MQTT_31, V311: P.MQTT_311}

# paho 2.x reports a 3.1/3.1.1 CONNACK return code as an MQTT 5 reason code; map it back
_V5_TO_V3_CONNACK = {0: 0, 132: 1, 133: 2, 136: 3, 134: 4, 135: 5}


def keep_pubrel_across_reconnects(client: mqtt.Client) -> None:
    """Work around paho-mqtt 2.x: ``reconnect()`` resets outgoing message states before every
    attempt, and a second reset (after a failed attempt, e.g. while the broker restarts) turns an
    owed PUBREL (RESEND_PUBREL) into PUBLISH, so a QoS 2 message whose PUBREL was already sent is
    published again as a new message. Keep RESEND_PUBREL as it is."""
    reset_out = client._messages_reconnect_reset_out
    owed_state = mqtt.MessageState.MQTT_MS_RESEND_PUBREL

    def reset_out_keeping_pubrel() -> None:
        owed = [m for m in client._out_messages.values() if m.state == owed_state]
        reset_out()
        for m in owed:
            m.state = owed_state

    client._messages_reconnect_reset_out = reset_out_keeping_pubrel  # type: ignore[method-assign]


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

    def __init__(
        self,
        port: int,
        client_id: str | None = None,
        *,
        protocol: int = V311,
        clean_session: bool = True,
        keepalive: int = 60,
        will: tuple[str, bytes, int, bool] | None = None,
        username: str | None = None,
        password: str | None = None,
        tls_ca: str | None = None,
        reconnect: bool = True,
    ) -> None:
        self.client_id = client_id if client_id is not None else f"t-{uuid.uuid4().hex[:12]}"
        self.port = port
        self.client = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=self.client_id,
            protocol=protocol,
            clean_session=clean_session,
            reconnect_on_failure=reconnect,  # False: a lost connection stays lost (takeover tests)
        )
        keep_pubrel_across_reconnects(self.client)
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
        if tls_ca is not None:  # a TLS listener whose certificate this CA file verifies
            self.client.tls_set(ca_certs=tls_ca)
        self.client.on_connect = self._on_connect
        self.client.on_message = self._on_message
        self.client.on_disconnect = self._on_disconnect
        self.client.on_subscribe = self._on_subscribe

    def _on_connect(self, client: Any, userdata: Any, flags: Any, rc: Any, props: Any = None) -> None:
        self.connack = (flags, rc)

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        with self.lock:
            self.messages.append(
                Received(msg.topic, bytes(msg.payload), msg.qos, bool(msg.retain), bool(msg.dup), msg.mid)
            )

    def _on_disconnect(self, *args: Any) -> None:
        self.disconnected.set()

    def _on_subscribe(self, client: Any, userdata: Any, mid: int, reason_codes: Any, props: Any = None) -> None:
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
        """The CONNACK return code as MQTT 3.1/3.1.1 numbers it (0 accepted .. 5 not authorized)."""
        assert self.connack is not None
        value = int(getattr(self.connack[1], "value", self.connack[1]))
        return _V5_TO_V3_CONNACK.get(value, value)

    def subscribe(self, topic: str, qos: int = 0, timeout: float = 10.0) -> list[int]:
        result, mid = self.client.subscribe(topic, qos)
        assert result == mqtt.MQTT_ERR_SUCCESS
        wait_for(lambda: mid in self.subacks, timeout, what=f"SUBACK for {topic}")
        return self.subacks[mid]

    def publish(
        self,
        topic: str,
        payload: bytes | str,
        qos: int = 0,
        retain: bool = False,
        wait: bool = True,
        timeout: float = 10.0,
    ) -> Any:
        info = self.client.publish(topic, payload, qos, retain)
        if wait and qos:
            info.wait_for_publish(timeout)
            assert info.is_published(), f"publish to {topic} not acknowledged"
        return info

    def wait_messages(self, n: int, timeout: float = 10.0) -> list[Received]:
        wait_for(
            lambda: len(self.messages) >= n,
            timeout,
            what=f"{n} messages at {self.client_id} (have {len(self.messages)})",
        )
        with self.lock:
            return list(self.messages)

    def disconnect(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()

    def drop(self) -> None:
        """Close the TCP connection without DISCONNECT (an abnormal end: the will fires)."""
        # End paho's network thread without waiting out its 1 s select: mark it to terminate (as
        # loop_stop does, so it does not reconnect), then shut the socket down, which wakes it.
        self.client._thread_terminate = True
        sock = self.client.socket()
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)   # FIN, no DISCONNECT
            except OSError:
                pass
        self.client.loop_stop()
        if sock is not None:
            sock.close()


class RawClient:
    """A plain socket speaking bytes; for the tests that must send what no library would."""

    def __init__(self, port: int, timeout: float = 5.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.timeout = timeout
        self.reader = P.PacketReader()
        self.pending: deque[P.Packet] = deque()  # decoded but not yet returned by recv()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def connect(
        self,
        client_id: str = "raw",
        level: int = P.MQTT_311,
        clean: bool = True,
        keepalive: int = 60,
        will: P.Will | None = None,
    ) -> P.Connack:
        self.send(P.encode(P.Connect(level, client_id, clean, keepalive, will)))
        packet = self.recv()
        assert isinstance(packet, P.Connack), packet
        return packet

    def recv(self, timeout: float | None = None) -> P.Packet:
        """The next packet from the broker (several may arrive in one TCP segment)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while not self.pending:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed by broker")
            self.pending.extend(self.reader.feed(data))
        return self.pending.popleft()

    def subscribe(self, topic_filter: str, qos: int = 0, packet_id: int = 1) -> P.Suback:
        self.send(P.encode(P.Subscribe(packet_id, ((topic_filter, qos),))))
        packet = self.recv()
        assert isinstance(packet, P.Suback), packet
        return packet

    def publish(
        self,
        topic: str,
        payload: bytes,
        qos: int = 0,
        packet_id: int | None = None,
        retain: bool = False,
        dup: bool = False,
    ) -> None:
        self.send(P.encode(P.Publish(topic, payload, qos, retain, dup, packet_id)))

    def ack(self, ptype: int, packet_id: int) -> None:
        self.send(P.encode_ack(ptype, packet_id))

    def receive_until(self, last: Any, timeout: float = 10.0, ack: bool = True) -> list[P.Publish]:
        """PUBLISHes in arrival order up to and including the first for which ``last(publish)`` is
        true; QoS 1/2 are acknowledged (PUBACK, PUBREC then PUBCOMP) unless ``ack`` is False.
        Unlike paho, which hands a QoS 2 message over only at PUBREL, this shows the wire order."""
        out: list[P.Publish] = []
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"timed out; received so far: {out}")
            packet = self.recv(timeout=remaining)
            if isinstance(packet, P.Publish):
                out.append(packet)
                if ack and packet.qos == 1:
                    self.ack(P.PUBACK, packet.packet_id)  # type: ignore[arg-type]
                elif ack and packet.qos == 2:
                    self.ack(P.PUBREC, packet.packet_id)  # type: ignore[arg-type]
                if last(packet):
                    return out
            elif isinstance(packet, P.PacketIdOnly) and packet.type == P.PUBREL and ack:
                self.ack(P.PUBCOMP, packet.packet_id)

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
