"""A route that takes QoS 1/2 publications straight from the publisher's PUBLISH (or PUBREL), with no rows in
the broker's store: its own target's commit (e.g. the embedded queue store's) is the one durable copy, and the
publisher's acknowledgement waits for that commit (``ClientConnection.send_gated``). The broker offers a
publication to a route session's sink only from a client's PUBLISH/PUBREL (``Message.waits`` is a list
there), only while the session has nothing queued or in flight (so nothing overtakes older deliveries), and
only when the sink has room; otherwise the delivery takes the session's stored path as before. Issue #18;
docs/broker.md "Routes that take publications directly"."""
from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from bridge.mqtt.message import Message

Gate = Callable[[Callable[[], None]], None]   # registers a callback for when a commit is done


class RouteSink(Protocol):
    def room(self) -> bool:
        """Whether the sink takes another publication now (its uncommitted backlog is below its bound)."""

    def take(self, msg: Message, qos: int) -> Gate | None:
        """Take the publication (delivered at ``qos``); the gate of the commit that will hold it, or None when
        nothing need be waited for (the route's selector did not match it)."""
