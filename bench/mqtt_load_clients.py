"""The load generator's clients: a scenario's description (``Spec``), the per-process counters, and the
asyncio Protocols of one subscribing and one publishing connection, built so that the generator is not
the bottleneck (see bench/mqtt_load.py)."""
from __future__ import annotations

import asyncio
import os
import socket
import time
from array import array
from dataclasses import dataclass, fields
from typing import Any

from bench.mqtt_load_wire import (
    CONNACK_T,
    PINGRESP_T,
    PUBACK_T,
    PUBCOMP_T,
    PUBLISH_T,
    PUBREC_T,
    PUBREL_T,
    SUBACK_T,
    TS_BYTES,
    connect_packet,
    publish_parts,
    publish_properties,
    subscribe_packet,
)

# ------------------------------------------------------------------------------------------------
# Scenario description
# ------------------------------------------------------------------------------------------------


@dataclass
class Spec:
    name: str = "qos0"
    qos: int = 0                 # publish QoS
    sub_qos: int | None = None   # subscription QoS (default: qos)
    publishers: int = 4
    subscribers: int = 1
    payload: int = 64            # bytes
    duration: float = 4.0        # measured seconds
    warmup: float = 1.0          # seconds before the window
    window: int = 64             # QoS 1/2 messages in flight per publisher
    rate: float = 0.0            # total messages/s for all publishers; 0: as fast as possible
    clean: bool = True           # subscriber clean session (False: persistent, stored durably)
    pub_clean: bool = True       # publisher clean session (False: persistent; mqbridge then keeps a
                                 # QoS 1 re-send index row per publication, see Publisher._publish_qos1_persistent)
    latency: bool = False        # timestamps in payloads, subscriber measures percentiles
    idle: int = 0                # idle-connections scenario: how many connections to hold
    hold: float = 3.0            # idle: seconds to hold them
    drain: float = 10.0          # max seconds to wait for stragglers after publishing stops
    idle_exit: float = 2.0       # subscribers leave after this long without a message (once publishing stopped)
    budget: int = 0              # QoS 0 closed loop: at most this many messages sent and not yet
                                 # delivered (per subscriber); 0: open loop (flood, drops allowed)
    prefix: str = "b"
    mqtt5: bool = False          # every client speaks MQTT 5.0 (else 3.1.1)
    user_props: int = 0          # MQTT 5: user properties on each publication
    topic_alias: bool = False    # MQTT 5: publishers send the topic once, then a Topic Alias

    def __post_init__(self) -> None:
        if self.sub_qos is None:
            self.sub_qos = self.qos

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Spec:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


# ------------------------------------------------------------------------------------------------
# Subscriber side: one tight scanner per connection
# ------------------------------------------------------------------------------------------------


class Stats:
    """Counters shared by all connections of one process."""

    __slots__ = ("received", "acked", "sent", "done", "lat", "lat_from", "last_rx", "first_rx", "errors")

    def __init__(self) -> None:
        self.received = 0     # PUBLISH packets received (subscriber) / completed (publisher)
        self.acked = 0
        self.sent = 0
        self.done = 0
        self.lat: array | None = None
        self.lat_from = 0     # only record latencies of messages stamped after this (ns)
        self.last_rx = 0.0
        self.first_rx = 0.0
        self.errors: list[str] = []


class SubProto(asyncio.Protocol):
    def __init__(self, stats: Stats, client_id: str, clean: bool, topic_filter: str, qos: int,
                 shared: Any = None, v5: bool = False) -> None:
        self.st = stats
        self.shared = shared     # mp.Value: messages received by this process, read by publishers
        self.cid = client_id
        self.clean = clean
        self.filter = topic_filter
        self.qos = qos
        self.v5 = v5
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.subscribed = asyncio.get_running_loop().create_future()
        self.pongs = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        transport.write(connect_packet(self.cid, self.clean, v5=self.v5)
                        + subscribe_packet(1, self.filter, self.qos, v5=self.v5))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.subscribed.done():
            self.subscribed.set_exception(ConnectionError(f"{self.cid}: closed before SUBACK ({exc})"))
        self.transport = None

    def data_received(self, data: bytes) -> None:  # noqa: C901 - the hot loop is kept in one place
        buf = self.buf
        if buf:
            buf += data
            data = buf
        n = len(data)
        pos = 0
        received = 0
        acks: list[bytes] = []
        st = self.st
        lat = st.lat
        now_ns = time.monotonic_ns() if lat is not None else 0
        while n - pos >= 2:
            b0 = data[pos]
            ln = data[pos + 1]
            if ln < 128:
                h = pos + 2
            else:
                ln &= 0x7F
                shift = 7
                i = pos + 2
                while True:
                    if i >= n:
                        ln = -1
                        break
                    b = data[i]
                    i += 1
                    ln |= (b & 0x7F) << shift
                    if b < 128:
                        break
                    shift += 7
                if ln < 0:
                    break
                h = i
            end = h + ln
            if end > n:
                break
            t = b0 >> 4
            if t == PUBLISH_T:
                received += 1
                if b0 & 6 or lat is not None:
                    p = h + 2 + ((data[h] << 8) | data[h + 1])
                    if b0 & 6:
                        acks.append((b"\x40\x02" if b0 & 2 else b"\x50\x02") + data[p:p + 2])
                        p += 2
                    if lat is not None and self.v5:   # skip the properties
                        plen = shift = 0
                        while True:
                            b = data[p]
                            p += 1
                            plen |= (b & 0x7F) << shift
                            if b < 128:
                                break
                            shift += 7
                        p += plen
                    if lat is not None:
                        ts = int.from_bytes(data[p:p + TS_BYTES], "big")
                        if ts >= st.lat_from:
                            lat.append(now_ns - ts)
            elif t == PUBREL_T:
                acks.append(b"\x70\x02" + data[h:h + 2])
            elif t == SUBACK_T:
                if data[h + 2] & 0x80:
                    self.subscribed.set_exception(ConnectionError(f"{self.cid}: subscription refused"))
                elif not self.subscribed.done():
                    self.subscribed.set_result(True)
            elif t == CONNACK_T:
                if data[h + 1]:
                    st.errors.append(f"{self.cid}: CONNACK return code {data[h + 1]}")
            elif t == PINGRESP_T:
                self.pongs += 1
            pos = end
        if received:
            st.received += received
            if self.shared is not None:
                self.shared.value = st.received
            st.last_rx = time.monotonic()
            if not st.first_rx:
                st.first_rx = st.last_rx
        if acks and self.transport is not None:
            self.transport.write(b"".join(acks))
        if data is buf:
            del buf[:pos]
        elif pos < n:
            self.buf = bytearray(data[pos:])


# ------------------------------------------------------------------------------------------------
# Publisher side
# ------------------------------------------------------------------------------------------------


class PubProto(asyncio.Protocol):
    """One publishing connection. QoS 0: pre-built chunks under TCP back-pressure. QoS 1/2: a window
    of ``window`` messages in flight (completed on PUBACK / PUBCOMP). With ``rate``: paced ticks,
    each message stamped with CLOCK_MONOTONIC ns."""

    def __init__(self, stats: Stats, spec: Spec, index: int, deadline: list[float],
                 delivered: Any = None) -> None:
        self.st = stats
        self.delivered = delivered if spec.budget else None
        self.spec = spec
        self.cid = f"{spec.prefix}-pub-{os.getpid()}-{index}"
        self.topic = f"{spec.prefix}/{index}"
        self.qos = spec.qos
        self.window = spec.window
        self.deadline = deadline         # [monotonic time to stop sending]; shared and mutable
        self.loop = asyncio.get_running_loop()
        self.connected = self.loop.create_future()
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.paused = False
        self.running = False
        self.stopped = False
        self.inflight = 0
        self.next_pid = 1
        self.props = publish_properties(spec.user_props, 1 if spec.topic_alias else 0) if spec.mqtt5 else b""
        # with a Topic Alias, the first publication names the topic (``first``), the others only the alias
        self.first = b""
        if spec.topic_alias:
            first_head, _ = publish_parts(self.topic, spec.payload, spec.qos, self.props)
            self.first = first_head
            self.head, _ = publish_parts("", spec.payload, spec.qos, self.props)
        else:
            self.head, _ = publish_parts(self.topic, spec.payload, spec.qos, self.props)
        self.body = self.props + b"\x00" * spec.payload if not spec.qos else b"\x00" * spec.payload
        if spec.qos == 0 and not spec.rate:
            pkt = self.head + self.body
            per = max(1, 32768 // len(pkt))
            self.chunk = pkt * per
            self.per_chunk = per
        self.rate = spec.rate / max(1, spec.publishers)
        self.t0 = 0.0
        self.paced = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        transport.set_write_buffer_limits(high=256 * 1024)
        transport.write(connect_packet(self.cid, self.spec.pub_clean, v5=self.spec.mqtt5))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.connected.done():
            self.connected.set_exception(ConnectionError(f"{self.cid}: closed before CONNACK ({exc})"))
        elif not self.stopped:
            self.st.errors.append(f"{self.cid}: connection lost while publishing ({exc})")
        self.transport = None
        self.stopped = True

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.running and self.qos == 0 and not self.rate:
            self.loop.call_soon(self._pump0)

    # -- sending --------------------------------------------------------------------------------

    def start(self) -> None:
        self.running = True
        self.t0 = time.monotonic()
        if self.first and self.transport is not None:   # the publication that sets the Topic Alias
            head, self.head = self.head, self.first
            self.transport.write(self._packet(False))
            self.head = head
            self.st.sent += 1
        if self.rate:
            self._tick()
        elif self.qos == 0:
            self._pump0()
        else:
            self._fill()

    def _pump0(self) -> None:
        if self.paused or not self.running or self.transport is None:
            return
        if time.monotonic() >= self.deadline[0]:
            self.running = False
            return
        w = self.transport.write
        for _ in range(8):
            d = self.delivered
            if d is not None and self.st.sent - d.value // self.spec.subscribers > self.spec.budget:
                self.loop.call_later(0.001, self._pump0)   # closed loop: wait for deliveries
                return
            w(self.chunk)
            self.st.sent += self.per_chunk
            if self.paused:
                return
        self.loop.call_soon(self._pump0)

    def _packet(self, stamp: bool) -> bytes:
        if stamp:   # the timestamp starts the payload, after any properties
            k = len(self.props) if not self.qos else 0
            body = self.body[:k] + time.monotonic_ns().to_bytes(TS_BYTES, "big") + self.body[k + TS_BYTES:]
        else:
            body = self.body
        if not self.qos:
            return self.head + body
        pid = self.next_pid
        self.next_pid = pid + 1 if pid < 65535 else 1
        self.inflight += 1
        return self.head + pid.to_bytes(2, "big") + self.props + body

    def _fill(self) -> None:
        """QoS 1/2: top the window up."""
        if not self.running or self.transport is None:
            return
        if time.monotonic() >= self.deadline[0]:
            self.running = False
            return
        k = self.window - self.inflight
        if k > 0:
            self.transport.write(b"".join([self._packet(False) for _ in range(k)]))
            self.st.sent += k

    def _tick(self) -> None:
        """Paced: send what is due at this instant, stamped; re-arm every millisecond."""
        if not self.running or self.transport is None:
            return
        now = time.monotonic()
        if now >= self.deadline[0]:
            self.running = False
            return
        due = int((now - self.t0) * self.rate) - self.paced
        if self.qos:
            due = min(due, self.window - self.inflight)
        if due > 0 and not self.paused:
            self.transport.write(b"".join([self._packet(True) for _ in range(due)]))
            self.paced += due
            self.st.sent += due
        self.loop.call_later(0.001, self._tick)

    # -- receiving (CONNACK and acks only) --------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        n = len(buf)
        pos = 0
        done = 0
        out: list[bytes] = []
        while n - pos >= 2:
            b0 = buf[pos]
            ln = buf[pos + 1]
            if ln >= 128:   # nothing a broker sends a publisher is that long; be safe anyway
                self.st.errors.append(f"{self.cid}: unexpected long packet type {b0 >> 4}")
                self.transport.abort()  # type: ignore[union-attr]
                return
            end = pos + 2 + ln
            if end > n:
                break
            t = b0 >> 4
            if t == PUBACK_T or t == PUBCOMP_T:
                done += 1
            elif t == PUBREC_T:
                out.append(b"\x62\x02" + buf[pos + 2:pos + 4])
            elif t == CONNACK_T:
                if buf[pos + 3]:
                    self.connected.set_exception(ConnectionError(f"{self.cid}: CONNACK {buf[pos + 3]}"))
                elif not self.connected.done():
                    self.connected.set_result(True)
            pos = end
        del buf[:pos]
        if done:
            self.inflight -= done
            self.st.acked += done
            self.st.received += done
        if out and self.transport is not None:
            self.transport.write(b"".join(out))
        if done and not self.rate:
            self._fill()


