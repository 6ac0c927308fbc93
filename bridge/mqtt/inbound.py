"""A session's inbound state: what its client published that the broker still answers for.

QoS 2 (OASIS "MQTT Version 3.1.1" §4.3.3, method B): a publication is kept from PUBREC until the client's
PUBREL, and its packet id stays in use until then. QoS 1 on persistent sessions: the last stored
publication per packet id, so that the client's DUP re-send after a reconnect keeps its message key.
Made when the client first needs it (an idle session holds none).
"""
from __future__ import annotations

from bridge.mqtt.message import Message


class Inbound:
    __slots__ = ("qos2", "ops", "qos1", "bytes")

    def __init__(self) -> None:
        self.qos2: dict[int, Message] = {}         # packet id -> publication held until PUBREL
        self.ops: dict[int, list[object]] = {}     # their queued store INSERTs, for Journal.cancel
        # packet id -> (key id, redelivery, digest) of the last stored QoS 1 publication (persistent sessions)
        self.qos1: dict[int, tuple[int, int, bytes]] = {}
        self.bytes = 0                             # Message.size() of what is in ``qos2``

    def hold(self, pid: int, msg: Message) -> None:
        """A QoS 2 publication received and acknowledged (PUBREC): kept until the client's PUBREL."""
        old = self.qos2.get(pid)
        if old is not None:
            self.bytes -= old.size()
        self.qos2[pid] = msg
        self.bytes += msg.size()

    def release(self, pid: int) -> Message | None:
        """PUBREL: the held publication, now to be published (None: not held, e.g. released before)."""
        msg = self.qos2.pop(pid, None)
        if msg is not None:
            self.bytes -= msg.size()
        return msg
