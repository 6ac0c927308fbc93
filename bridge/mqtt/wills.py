"""Last Will and Testament: what a client's CONNECT asked to publish if its connection fails.

Published when the connection ends without DISCONNECT (network failure, keepalive expiry, protocol
error, takeover); never after DISCONNECT (MQTT 5: unless its reason code is 0x04, Disconnect with Will
Message) or a clean broker shutdown, and never into a ``$`` topic (a will could otherwise forge $SYS
values). WebSphere Message Broker docs on the MQ Telemetry Transport, "Last Will and Testament"; MQTT 5.0
§3.1.3.2 for the Will Properties: forwarded like a PUBLISH's, and a Will Delay Interval during which a
reconnection to the session cancels the will. A will with a delay is session state (§4.1): for a
persistent session it is stored from CONNECT on, so that a broker crash or restart neither loses it
(published after the delay, counted from the restart if the client was connected) nor sends it early.
"""
from __future__ import annotations

import heapq
import logging
from collections.abc import Callable

from bridge.mqtt import packets as P
from bridge.mqtt import properties as PR
from bridge.mqtt.incoming import forwarded
from bridge.mqtt.properties import pack, unpack
from bridge.mqtt.publish import Publisher
from bridge.mqtt.session import Message
from bridge.mqtt.store import Store, StoredWill

log = logging.getLogger("mqbridge.broker")


def publish_will(publisher: Publisher, client_id: str, username: str | None, via: str | None, will: P.Will,
                 reason: str) -> None:
    """The connection of ``client_id`` (user ``username`` established ``via``, identity.py) ended for
    ``reason`` without DISCONNECT: publish its will."""
    grants = publisher.grants(client_id, username, via)   # the rules now: a reload may have changed them
    if grants is not None and not grants.may_publish(will.topic):
        publisher.stats.acl_denied_publish += 1
        log.warning("client %s: will to %s not published: the ACL does not let it publish there", client_id,
                    will.topic)
        return
    if will.topic.startswith("$"):
        log.warning("client %s: will to %s not published: $ topics are reserved", client_id, will.topic)
        return
    log.info("client %s: publishing will to %s (%s)", client_id, will.topic, reason)
    props, expires = forwarded(will.properties or {}, publisher.clock())
    publisher.publish(Message(will.topic, will.payload, will.qos, will.retain, client_id, username=username,
                              user_via=via, props=props, expires=expires))


class DelayedWills:
    """MQTT 5 wills with a Will Delay Interval, waiting for it to pass (``publish_due``, from the sweep),
    for the session to end (``session_ended``) or for the client to come back (``reconnected``)."""

    def __init__(self, publisher: Publisher, clock: Callable[[], float], store: Store) -> None:
        self._publisher = publisher
        self._clock = clock
        self._store = store
        self._pending: dict[str, tuple[float, str | None, str | None, P.Will, str]] = {}
        self._due: list[tuple[float, str]] = []   # heap of (due, client id); stale entries skipped
        self._stored: set[str] = set()            # client ids whose will is in the store

    def __len__(self) -> int:
        return len(self._pending)

    def arm(self, client_id: str, username: str | None, via: str | None, will: P.Will | None,
            persistent: bool) -> None:
        """A CONNECT accepted: a persistent session's will with a delay is stored (or the old one goes)."""
        if will is not None and persistent and (will.properties or {}).get(PR.WILL_DELAY_INTERVAL):
            self._store.save_will(StoredWill(client_id, will.topic, will.payload, will.qos, will.retain,
                                             pack(will.properties), username, None, via))
            self._stored.add(client_id)
        else:
            self.disarm(client_id)

    def disarm(self, client_id: str | None) -> None:
        """The client's will will not be published (a normal DISCONNECT)."""
        if client_id in self._stored:
            self._stored.discard(client_id)
            self._store.delete_will(client_id)

    def add(self, client_id: str, username: str | None, via: str | None, will: P.Will, delay: float,
            reason: str) -> None:
        due = self._clock() + delay
        self._pending[client_id] = (due, username, via, will, reason)
        heapq.heappush(self._due, (due, client_id))
        if client_id in self._stored:
            self._store.set_will_due(client_id, due)

    def recover(self, wills: list[StoredWill]) -> None:
        """After a restart: the stored wills wait again (a client connected at the crash left then)."""
        now = self._clock()
        for w in wills:
            props = unpack(w.props, PR.WILL)
            will = P.Will(w.topic, w.payload, w.qos, w.retain, props)
            self._stored.add(w.client_id)
            delay = (props or {}).get(PR.WILL_DELAY_INTERVAL, 0)
            due = w.due if w.due is not None else now + delay
            self._pending[w.client_id] = (due, w.username, w.user_via, will, "the broker restarted")
            heapq.heappush(self._due, (due, w.client_id))
            if w.due is None:
                self._store.set_will_due(w.client_id, due)

    def _publish(self, client_id: str, entry: tuple[float, str | None, str | None, P.Will, str], why: str) -> None:
        self.disarm(client_id)
        _, user, via, will, reason = entry
        publish_will(self._publisher, client_id, user, via, will, f"{reason}; {why}")

    def reconnected(self, client_id: str, *, session_ends: bool) -> None:
        """A CONNECT for ``client_id``: its waiting will is cancelled, or sent now if the session ends
        (Clean Start)."""
        entry = self._pending.pop(client_id, None)
        if entry is None:
            return
        if session_ends:
            self._publish(client_id, entry, "its session ended")
        else:
            self.disarm(client_id)

    def session_ended(self, client_id: str) -> None:
        entry = self._pending.pop(client_id, None)
        if entry is not None:
            self._publish(client_id, entry, "its session ended")
        else:
            self.disarm(client_id)

    def publish_due(self) -> int:
        now = self._clock()
        due = self._due
        sent = 0
        while due and due[0][0] <= now:
            when, client_id = heapq.heappop(due)
            entry = self._pending.get(client_id)
            if entry is None or entry[0] != when:
                continue   # cancelled, or replaced by a later one
            del self._pending[client_id]
            self._publish(client_id, entry, "will delay passed")
            sent += 1
        return sent
