"""A paho-mqtt 2.x client at MQTT 5 for tests: records messages with their properties, CONNACK, SUBACK
reason codes and the server's DISCONNECT."""
from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from bridge.mqtt import packets as P
from tests.support.gateway import wait_for
from tests.support.mqtt_clients import RawClient


class V5:
    """paho-mqtt 2.x at MQTT 5, recording messages with their properties."""

    def __init__(self, port: int, client_id: str = "", clean_start: bool = True,
                 connect_props: Properties | None = None) -> None:
        self.port = port
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5)
        self.clean_start = clean_start
        self.connect_props = connect_props
        self.messages: list[Any] = []
        self.lock = threading.Lock()
        self.connack: tuple[Any, Any, Any] | None = None
        self.disconnect_reason: Any = None
        self.subacks: dict[int, list[int]] = {}
        self.client.on_connect = self._on_connect
        self.client.on_message = self._on_message
        self.client.on_subscribe = self._on_subscribe
        self.client.on_disconnect = self._on_disconnect

    def _on_connect(self, client: Any, userdata: Any, flags: Any, rc: Any, props: Any) -> None:
        self.connack = (flags, rc, props)

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        with self.lock:
            self.messages.append(msg)

    def _on_subscribe(self, client: Any, userdata: Any, mid: int, codes: Any, props: Any) -> None:
        self.subacks[mid] = [int(getattr(c, "value", c)) for c in codes]

    def _on_disconnect(self, client: Any, userdata: Any, flags: Any, rc: Any, props: Any) -> None:
        self.disconnect_reason = rc

    def connect(self) -> V5:
        self.client.connect("127.0.0.1", self.port, clean_start=self.clean_start, properties=self.connect_props)
        self.client.loop_start()
        wait_for(lambda: self.connack is not None, 10, what="CONNACK")
        return self

    def subscribe(self, topic: str, qos: int = 0, props: Properties | None = None, **options: Any) -> list[int]:
        opts = mqtt.SubscribeOptions(qos=qos, **options)
        result, mid = self.client.subscribe(topic, options=opts, properties=props)
        assert result == mqtt.MQTT_ERR_SUCCESS
        wait_for(lambda: mid in self.subacks, 10, what=f"SUBACK for {topic}")
        return self.subacks[mid]

    def wait(self, n: int, timeout: float = 10.0) -> list[Any]:
        wait_for(lambda: len(self.messages) >= n, timeout, what=f"{n} messages (have {len(self.messages)})")
        with self.lock:
            return list(self.messages)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def publish_props(**values: Any) -> Properties:
    props = Properties(PacketTypes.PUBLISH)
    for name, value in values.items():
        setattr(props, name, value)
    return props


def packet_props(packet_type: int, **values: Any) -> Properties:
    """paho Properties of ``packet_type`` (e.g. PacketTypes.CONNECT, WILLMESSAGE, DISCONNECT)."""
    props = Properties(packet_type)
    for name, value in values.items():
        setattr(props, name, value)
    return props


def stay_down(v5: V5) -> V5:
    """A connection the server closes stays closed: paho's network thread would otherwise reconnect (and,
    after a takeover, take the session back from the newer connection)."""
    v5.client._reconnect_on_failure = False
    return v5


def connected(port: int, client_id: str, *, clean: bool = True, expiry: int | None = None,
              will: tuple[str, bytes, int, Properties | None] | None = None) -> V5:
    """A connected V5 that stays down when the server closes it: Clean Start ``clean``, Session Expiry
    Interval ``expiry`` (None: absent, 0), ``will``: (topic, payload, QoS, Will Properties)."""
    props = packet_props(PacketTypes.CONNECT, SessionExpiryInterval=expiry) if expiry is not None else None
    c = stay_down(V5(port, client_id, clean_start=clean, connect_props=props))
    if will is not None:
        topic, payload, qos, will_props = will
        c.client.will_set(topic, payload, qos, False, properties=will_props)
    return c.connect()


def drop(v5: V5) -> None:
    """End the TCP connection without DISCONNECT (an abnormal end: the will applies)."""
    v5.client._thread_terminate = True   # as loop_stop does, so paho does not reconnect
    sock = v5.client.socket()
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    v5.client.loop_stop()
    if sock is not None:
        sock.close()


def raw5(port: int, client_id: str = "", *, clean: bool = True, keepalive: int = 60,
         props: dict[int, Any] | None = None, will: Any = None) -> tuple[RawClient, Any]:
    """A RawClient that sent a level 5 CONNECT (``props`` keyed by bridge.mqtt.properties constants) and
    reads level 5 packets; returns it and the broker's answer (a CONNACK unless the broker closed)."""
    raw = RawClient(port)
    raw.send(P.encode(P.Connect(P.MQTT_5, client_id, clean, keepalive, will, properties=props)))
    raw.reader.level = P.MQTT_5
    return raw, raw.recv()


# -- additions for the MQTT 5 publish/subscribe tests (paho-mqtt and raw sockets) -------------------------


def unsubscribe5(client: V5, topic: str, timeout: float = 10.0) -> list[int]:
    """UNSUBSCRIBE with a V5 client; returns the UNSUBACK reason codes."""
    acks: dict[int, list[int]] = {}

    def on_unsubscribe(c: Any, userdata: Any, mid: int, codes: Any, props: Any) -> None:
        acks[mid] = [int(getattr(code, "value", code)) for code in codes]

    client.client.on_unsubscribe = on_unsubscribe
    result, mid = client.client.unsubscribe(topic)
    assert result == mqtt.MQTT_ERR_SUCCESS
    wait_for(lambda: mid in acks, timeout, what=f"UNSUBACK for {topic}")
    return acks[mid]


def read_until_closed(raw: RawClient, timeout: float = 10.0) -> list[P.Packet]:
    """Every packet the broker sends until it closes the connection (fails when it stays open)."""
    packets: list[P.Packet] = []
    deadline = time.monotonic() + timeout
    while True:
        try:
            packets.append(raw.recv(timeout=max(0.01, deadline - time.monotonic())))
        except TimeoutError:
            raise AssertionError(f"the broker kept the connection open for {timeout} s; got {packets}") from None
        except ConnectionError:
            return packets


def mosquitto_sub_v5(gateway: Any, client_id: str, args: list[str], then: Callable[[], None],
                     timeout: float = 10.0) -> tuple[int, str, str]:
    """Run ``mosquitto_sub -V mqttv5 -i client_id`` with ``args`` (it must end by itself, e.g. ``-C n``);
    once its subscription is in place, call ``then``; return its exit code, output and error output."""
    proc = subprocess.Popen(["mosquitto_sub", "-h", "127.0.0.1", "-p", str(gateway.port), "-V", "mqttv5",
                             "-i", client_id, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: proc.poll() is None and any(
            s["client_id"] == client_id for s in gateway.admin("/subscriptions")[1]), timeout, what="mosquitto_sub")
        then()
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    return proc.returncode, out, err
