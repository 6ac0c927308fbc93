"""Last Will and Testament: what a client's CONNECT asked to publish if its connection fails.

Published when the connection ends without DISCONNECT (network failure, keepalive expiry, protocol
error, takeover); never after DISCONNECT or a clean broker shutdown, and never into a ``$`` topic (a
will could otherwise forge $SYS values). WebSphere Message Broker docs on the MQ Telemetry Transport,
"Last Will and Testament".
"""
from __future__ import annotations

import logging

from bridge.mqtt import packets as P
from bridge.mqtt.publish import Publisher
from bridge.mqtt.session import Message

log = logging.getLogger("mqbridge.broker")


def publish_will(publisher: Publisher, client_id: str, username: str | None, will: P.Will, reason: str) -> None:
    """The connection of ``client_id`` ended for ``reason`` without DISCONNECT: publish its will."""
    if will.topic.startswith("$"):
        log.warning("client %s: will to %s not published: $ topics are reserved", client_id, will.topic)
        return
    log.info("client %s: publishing will to %s (%s)", client_id, will.topic, reason)
    publisher.publish(Message(will.topic, will.payload, will.qos, will.retain, client_id, username=username))
