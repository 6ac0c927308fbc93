"""Durable copies of a shared subscription's deliveries to members whose sessions are clean.

A clean session lives in memory only, so a QoS 1/2 delivery it holds would end with the gateway (SIGKILL,
restart) although its publisher was acknowledged and the group has a persistent member that outlives the
restart. MQTT 5.0 §4.8.2: if a member's session terminates before it acknowledged a delivery, the server
SHOULD send the message to another member. So while a group has a persistent member, each delivery to a
clean member is also an ``outbound`` row whose client id is the group's key (``$share/<group>/<filter>``:
client ids starting ``$share/`` are refused, so none is a client's): the message is stored, and the publisher's
acknowledgement waits for that commit like any durable delivery. The row goes when the delivery ends
(acknowledged, or handed to another member while the gateway runs); after a restart the rows left are
handed to the group's members (``Publisher.recover_shared``). A group of clean members only has no one to
hand them to after a restart, so nothing is written for it.
"""
from __future__ import annotations

from collections.abc import Callable

from bridge.mqtt.message import Message, OutMsg
from bridge.mqtt.store import QUEUED, SENT, Store


class SharedGuards:
    """Writes, ends and recovers the group rows of clean members' shared deliveries."""

    __slots__ = ("_store", "_release", "_seq", "recovered", "lost")

    def __init__(self, store: Store, release: Callable[[Message], None]) -> None:
        self._store = store
        self._release = release   # StoredMessages.release: the message's last reference ended
        self._seq = 1
        # after a restart, until handed out: (group key, message, row seq) of the rows the gateway left
        self.recovered: list[tuple[str, Message, int]] = []
        self.lost: list[tuple[str, Message, int]] = []   # QoS 2 ones sent to the clean member: to no one else

    def hold(self, key: str, out: OutMsg) -> None:
        """``out`` (a clean member's delivery of a stored message) is also a row of group ``key``."""
        msg = out.msg
        msg.refs += 1
        seq = self._seq
        self._seq += 1
        op = self._store.insert_outbound((key, seq, msg.store_id, out.qos, int(out.retain), None, QUEUED,
                                          None))
        out.guard = (self, key, seq, op)

    def sent(self, out: OutMsg) -> None:
        """A QoS 2 delivery's PUBLISH is about to leave: its row says so (a restart drops it, counted)."""
        guard = out.guard
        if guard is None:
            return
        key, seq, op = guard[1], guard[2], guard[3]
        msg = out.msg
        row = (key, seq, msg.store_id, out.qos, int(out.retain), out.packet_id, SENT, None)
        if not self._store.amend(op, row):
            self._store.mark_outbound_sent(key, seq, out.packet_id)   # type: ignore[arg-type]

    def done(self, out: OutMsg) -> None:
        """The delivery ended (acknowledged, withdrawn, handed to another member): its group row goes."""
        guard = out.guard
        if guard is None:
            return
        out.guard = None
        self.drop(guard[1], guard[2], guard[3], out.msg)

    def drop(self, key: str, seq: int, op: list[object] | None, msg: Message) -> None:
        if not self._store.cancel(op):
            self._store.delete_outbound(key, seq)
        msg.refs -= 1
        if msg.refs <= 0 and msg.store_id is not None:
            self._release(msg)

    def take(self) -> tuple[list[tuple[str, Message, int]], list[tuple[str, Message, int]]]:
        """Once, after a restart: the restored rows to hand out, and the QoS 2 ones sent (to no one else)."""
        recovered, lost, self.recovered, self.lost = self.recovered, self.lost, [], []
        return recovered, lost

    def restore(self, key: str, seq: int, msg: Message, qos: int, state: int) -> None:
        """A row the gateway left at its last stop (its message's reference counted, as a delivery's); a QoS 2
        one whose PUBLISH was sent is kept apart: it may go to no other member [MQTT-4.8.2-5]."""
        msg.refs += 1
        self._seq = max(self._seq, seq + 1)
        (self.lost if qos == 2 and state != QUEUED else self.recovered).append((key, msg, seq))


__all__ = ["SharedGuards"]
