"""A publication as the broker routes it (``Message``), one QoS 1/2 delivery of it to a session (``OutMsg``),
and a session's counters (``SessionStats``)."""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from bridge.mqtt import packets as P
from bridge.mqtt.properties import Props, encode_property_items
from bridge.mqtt.store import QUEUED
from bridge.mqtt.wire import U16, U32, encode_length

NO_LIMIT = 1 << 62


class Message:
    """A publication as the broker routes it: encoded topic cached, stored once when durable."""

    __slots__ = ("topic", "topic_b", "payload", "qos", "retain", "origin", "username", "user_via", "store_id",
                 "store_op", "refs", "ts", "_qos0", "key_id", "redelivery", "packet_id", "delivery_id", "props",
                 "expires", "_items", "qos0_5", "drops", "waits", "held")

    def __init__(self, topic: str, payload: bytes, qos: int, retain: bool = False,
                 origin: str | None = None, store_id: int | None = None, username: str | None = None,
                 key_id: int | None = None, redelivery: int = 0, packet_id: int | None = None,
                 props: Props | None = None, expires: float | None = None, user_via: str | None = None,
                 items: bytes | None = None) -> None:
        self.topic = topic
        self.topic_b = topic.encode("utf-8")
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.origin = origin          # publishing client id
        self.username = username      # its user name (CONNECT), for MQ UserIdentifier / JMSXUserID
        self.user_via = user_via      # how that name was established (identity.py); None: not recorded
        self.packet_id = packet_id    # the publisher's MQTT message id (QoS 1/2), for RFH2 mqtt/msgid
        # the id a QoS 1/2 delivery of it takes where that session has it free (an MQ message's, from its
        # MsgId: MQ Telemetry Table 5); None, or in use: the session's next free id. Not stored: a delivery
        # still queued at a restart takes the next free id
        self.delivery_id: int | None = None
        self.store_id = store_id
        self.store_op: list[object] | None = None   # the queued INSERT, while the writer has not taken it
        self.refs = 0
        self.ts = time.time()     # when the broker took it in (conversion-log latency)
        self._qos0: bytes | None = None
        # a publisher's QoS 1 re-send (DUP) is stored again under the first one's message key: key_id is
        # that publication's store id, redelivery how many times the publisher re-sent it
        self.key_id = key_id
        self.redelivery = redelivery
        # MQTT 5: the properties forwarded unchanged to level 5 subscribers (Payload Format Indicator, Content
        # Type, Response Topic, Correlation Data, User Properties) and when it expires (unix time; None: never)
        self.props = props
        self.expires = expires
        self._items = items   # ``props`` encoded without their length (as received: publish_props.py), once known
        self.qos0_5: bytes | None = None   # its QoS 0 PUBLISH for level 5 subscribers, once encoded
        # a route's publication: the client ids whose full queue (or QoS 0 backlog) dropped it, for its
        # conversion-log record (None: not collected)
        self.drops: list[str] | None = None
        # a client's PUBLISH/PUBREL being routed: the commit gates of route sinks that took it (bridge.mqtt.sink),
        # which its acknowledgement waits for (None: not offered to sinks)
        self.waits: list[Callable[[Callable[[], None]], None]] | None = None
        # a route's publication whose source holds it while it is delivered (source_hold.py); None: not offered
        self.held: Any = None

    def key(self) -> int | None:
        """The id in this publication's message key (``mqtt:<id>``): the first publication's store id."""
        return self.key_id if self.key_id is not None else self.store_id

    def size(self) -> int:
        """What max_queued_bytes counts for this publication: payload, topic and forwarded MQTT 5 property
        bytes (a level 5 publisher's user properties may be far larger than its payload)."""
        if not self.props:
            return len(self.payload) + len(self.topic_b)
        items = self._items
        if items is None:   # encoded once: every level 5 delivery sends these bytes
            items = self._items = encode_property_items(self.props)
        return len(self.payload) + len(self.topic_b) + len(items)

    def expired(self, now: float) -> bool:
        return self.expires is not None and self.expires <= now

    def publish5(self, qos: int, retain: bool, dup: bool, pid: int | None, now: float,
                 sub_ids: list[int] | None = None, alias: tuple[bytes, int] | None = None) -> bytes:
        """The PUBLISH a level 5 subscriber gets: the forwarded properties, the remaining Message Expiry
        Interval (at least 1 s: a delivery already in flight is re-sent even when its time has passed) and
        the Subscription Identifiers of the subscriptions it matched. ``alias``: the topic bytes to send
        (the name, or empty once the client knows the alias) and that connection's Topic Alias."""
        plain = not retain and self.expires is None and not sub_ids and alias is None
        if plain and qos == 0 and self.qos0_5 is not None:
            return self.qos0_5
        if plain and not self.props:   # nothing to forward: an empty property length
            data = P.encode_publish5(self.topic_b, self.payload, qos, False, dup, pid, b"\x00")
            if qos == 0:
                self.qos0_5 = data
            return data
        items = self._items
        if items is None:
            items = self._items = encode_property_items(self.props) if self.props else b""
        extra = b""
        if self.expires is not None:
            extra = b"\x02" + U32.pack(max(1, math.ceil(self.expires - now)))
        if sub_ids:
            extra += b"".join(b"\x0b" + encode_length(i) for i in sub_ids)
        topic = self.topic_b
        if alias is not None:
            topic = alias[0]
            extra += b"\x23" + U16.pack(alias[1])
        props = items + extra
        data = P.encode_publish5(topic, self.payload, qos, retain, dup, pid, encode_length(len(props)) + props)
        if plain and qos == 0:
            self.qos0_5 = data
        return data

    def qos0_bytes(self) -> bytes:
        """QoS 0 delivery is the same bytes for every subscriber: encode once."""
        data = self._qos0
        if data is None:
            data = self._qos0 = P.encode_publish(self.topic_b, self.payload, 0, False, False, None)
        return data


class OutMsg:
    """A QoS 1/2 delivery to one session: queued, then in flight until acknowledged."""

    __slots__ = ("msg", "qos", "retain", "packet_id", "state", "seq", "op", "sub_ids", "shared", "guard", "held")

    def __init__(self, msg: Message, qos: int, retain: bool, seq: int, sub_ids: list[int] | None = None,
                 shared: str | None = None) -> None:
        self.msg = msg
        self.qos = qos
        self.retain = retain
        self.sub_ids = sub_ids    # MQTT 5: the Subscription Identifiers it is delivered for
        self.shared = shared      # the shared subscription (group key) it came through (shared.py)
        self.packet_id: int | None = None
        self.state = QUEUED
        self.seq = seq
        self.op: list[object] | None = None   # its queued INSERT INTO outbound, for cancel/amend
        # a clean member's shared delivery: its group row (shared_guard.SharedGuards, group, seq, insert op)
        self.guard: tuple[Any, str, int, list[object] | None] | None = None
        # not journaled: the route's source holds the message until it is over (source_hold.SourceHold)
        self.held: Any = None


class SessionStats:
    __slots__ = ("received", "sent", "dropped", "expired", "too_large", "bytes_in", "bytes_out", "rate_in", "rate_out",
                 "_last_in", "_last_out")

    def __init__(self) -> None:
        self.received = 0      # publications received from the client
        self.sent = 0          # publications sent to the client
        self.dropped = 0       # publications not delivered (queue full, QoS 0 to a slow client)
        self.expired = 0       # MQTT 5: expired before they could be sent (Message Expiry Interval)
        self.too_large = 0     # MQTT 5: larger than the client's Maximum Packet Size: not sent
        self.bytes_in = 0
        self.bytes_out = 0
        self.rate_in = 0.0     # messages/s, smoothed
        self.rate_out = 0.0
        self._last_in = 0
        self._last_out = 0

    def tick(self, dt: float) -> None:
        if dt <= 0 or (self.received == self._last_in and self.sent == self._last_out
                       and not self.rate_in and not self.rate_out):
            return   # idle: no new float objects for an idle connection's rates
        a = 0.5
        self.rate_in = a * (self.received - self._last_in) / dt + (1 - a) * self.rate_in
        self.rate_out = a * (self.sent - self._last_out) / dt + (1 - a) * self.rate_out
        self._last_in = self.received
        self._last_out = self.sent
