"""Shared subscriptions (MQTT 5.0 §4.8.2, also offered to 3.1.1 clients as mosquitto does): the sessions
subscribed to ``$share/{ShareName}/{filter}`` form one group, and each publication matching the filter
goes to one member of the group, not to each.

A group is one entry of the subscription tree, keyed by its full ``$share/...`` filter in place of a
client id (client ids beginning with ``$share/`` are refused at CONNECT). ``pick`` chooses the member:
round robin over the members that are connected and have room in their in-flight window, else over the
connected ones, else over all (a persistent member's session queues it). When a member's session ends,
the deliveries it still held from the group go to another member (``Publisher.reassign``), except the QoS 2
ones it was sent and had not answered with a PUBREC, which §4.8.2 forbids sending to another client
[MQTT-4.8.2-5]: those are lost with the session (counted).
"""
from __future__ import annotations

from collections.abc import Mapping, Sized
from dataclasses import dataclass
from typing import Protocol

from bridge.mqtt.topics import TopicError, validate_topic_filter

PREFIX = "$share/"


def parse_shared(topic_filter: str) -> tuple[str, str] | None:
    """(share name, filter) of a shared subscription's filter; None for an ordinary one. TopicError for a
    malformed one (§4.8.2: the share name is at least one character, without '/', '+' or '#')."""
    if not topic_filter.startswith(PREFIX):
        return None
    rest = topic_filter[len(PREFIX):]
    name, sep, real = rest.partition("/")
    if not sep or not name:
        raise TopicError(f"shared subscription {topic_filter!r} needs $share/<share name>/<topic filter>")
    if "+" in name or "#" in name:
        raise TopicError(f"share name {name!r} may not contain '+' or '#'")
    validate_topic_filter(real)
    return name, real


@dataclass(slots=True)
class Member:
    qos: int
    options: int
    sub_id: int | None


class SessionView(Protocol):
    """What ``pick`` looks at in a member's session (bridge.mqtt.session.Session has these)."""

    link: object
    inflight: Mapping[int, object]
    queue: Sized
    max_inflight: int


class SharedGroups:
    """Group key (the full ``$share/...`` filter) -> its members and where round robin stands."""

    def __init__(self) -> None:
        self.members: dict[str, dict[str, Member]] = {}
        self._turn: dict[str, int] = {}

    def join(self, key: str, client_id: str, qos: int, options: int, sub_id: int | None) -> bool:
        """True: the group is new (the caller adds it to the subscription tree)."""
        group = self.members.get(key)
        new = group is None
        if group is None:
            group = self.members[key] = {}
        group[client_id] = Member(qos, options, sub_id)
        return new

    def leave(self, key: str, client_id: str) -> bool:
        """True: the group is now empty (the caller removes it from the subscription tree)."""
        group = self.members.get(key)
        if group is None or group.pop(client_id, None) is None:
            return False
        if group:
            return False
        del self.members[key]
        self._turn.pop(key, None)
        return True

    def pick(self, key: str, sessions: Mapping[str, SessionView],
             exclude: str | None = None) -> tuple[str, Member] | None:
        """The member the next publication of group ``key`` goes to (None: no member has a session)."""
        group = self.members.get(key)
        if not group:
            return None
        ids = [cid for cid in group if cid != exclude and cid in sessions]
        if not ids:
            return None
        start = self._turn.get(key, 0)
        order = ids[start % len(ids):] + ids[:start % len(ids)]
        chosen = None
        for wanted in (_has_room, _connected, None):
            chosen = next((cid for cid in order if wanted is None or wanted(sessions[cid])), None)
            if chosen is not None:
                break
        assert chosen is not None
        self._turn[key] = (ids.index(chosen) + 1) % len(ids)
        return chosen, group[chosen]


def _connected(s: SessionView) -> bool:
    return s.link is not None


def _has_room(s: SessionView) -> bool:
    return s.link is not None and not s.queue and len(s.inflight) < s.max_inflight

