"""A route link for in-process broker tests: what a route session writes to, collected."""
from __future__ import annotations


class CollectingLink:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send(self, data: bytes) -> None:
        self.sent.append(data)

    def send_durable(self, data: bytes) -> None:
        self.sent.append(data)

    def send_qos0(self, data: bytes) -> bool:
        self.sent.append(data)
        return True
