"""A persistent session's deliveries in the broker's store: one ``outbound`` row per delivery.

Each queued or in-flight QoS 1/2 delivery of a persistent session is a row (sequence, message, QoS,
packet id, state QUEUED/SENT/RELEASED) that references a stored message; the message is released when
its last delivery is done. Writes go through the store's named operations (``Journal``); an operation
still queued for the writer is amended or cancelled instead of followed by another write.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from bridge.mqtt.message import Message, OutMsg


class Journal(Protocol):
    """The store operations a persistent session's deliveries need (``Store``'s named operations)."""

    def insert_outbound(self, row: tuple[object, ...]) -> list[object]: ...
    def mark_outbound_sent(self, client_id: str, seq: int, packet_id: int) -> list[object]: ...
    def mark_outbound_released(self, client_id: str, seq: int) -> list[object]: ...
    def delete_outbound(self, client_id: str, seq: int) -> list[object]: ...
    def cancel(self, op: list[object] | None) -> bool: ...
    def amend(self, op: list[object] | None, params: tuple[object, ...]) -> bool: ...


class DeliveryJournal:
    __slots__ = ("store", "client_id", "on_release")

    def __init__(self, store: Journal, client_id: str, on_release: Callable[[Message], None]) -> None:
        self.store = store
        self.client_id = client_id
        self.on_release = on_release    # called when a stored message loses its last reference

    def row(self, out: OutMsg) -> tuple[object, ...]:
        sub_ids = ",".join(map(str, out.sub_ids)) if out.sub_ids else None
        return (self.client_id, out.seq, out.msg.store_id, out.qos, int(out.retain), out.packet_id, out.state, sub_ids)

    def new(self, out: OutMsg) -> None:
        msg = out.msg
        if msg.store_id is None:
            raise RuntimeError("a journaled delivery needs a stored message")
        msg.refs += 1
        out.op = self.store.insert_outbound(self.row(out))

    def sent(self, out: OutMsg) -> None:
        if not self.store.amend(out.op, self.row(out)):
            self.store.mark_outbound_sent(self.client_id, out.seq, out.packet_id)   # type: ignore[arg-type]

    def released(self, out: OutMsg) -> None:
        if not self.store.amend(out.op, self.row(out)):
            self.store.mark_outbound_released(self.client_id, out.seq)

    def done(self, out: OutMsg) -> None:
        """Acknowledged or withdrawn: the row goes (never written, if the writer has not taken the insert)."""
        if not self.store.cancel(out.op):
            self.store.delete_outbound(self.client_id, out.seq)
        out.op = None
        self.unref(out.msg)

    def restored(self, out: OutMsg) -> None:
        out.msg.refs += 1

    def unref(self, msg: Message) -> None:
        msg.refs -= 1
        if msg.refs <= 0 and msg.store_id is not None:
            self.on_release(msg)
