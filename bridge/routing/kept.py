"""What the router does with the broker sessions of routes that are gone (removed, renamed, disabled, or no
longer reading from MQTT), so that the QoS 1/2 messages they hold, acknowledged to their publishers, are
not lost: retired and handed to the routes that now match them (``bridge.mqtt.route_sessions``), kept
while no route matches (logged, in status), and dropped only on the user's word (``mqbridge reload
--discard ROUTE``), one conversion-log record per message. docs/rules.md "Reload" says it for users.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from bridge.connectors.mqtt_internal import inbound_of, route_client_id
from bridge.connectors.registry import RouteSetupError
from bridge.convlog import LogSink, RecordLines
from bridge.mqtt.broker import ROUTE_CLIENT_PREFIX, Broker
from bridge.mqtt.session import OutMsg
from mappings.convlog_schema import Direction, Status

log = logging.getLogger("mqbridge.router")

TOPICS_SHOWN = 5


def route_name(client_id: str) -> str:
    return client_id[len(ROUTE_CLIENT_PREFIX):]


class KeptSessions:
    """The router's side of retired route sessions: which to retire, the summary lines and log of what
    became of their messages, status, and discarding."""

    def __init__(self, broker: Broker, convlog: LogSink | None, lines: RecordLines) -> None:
        self.broker = broker
        self.convlog = convlog
        self.lines = lines
        self.target_protocols: dict[str, str] = {}   # route -> its target's protocol, once it ran here
        self._last_kept: dict[str, int] = {}   # retired session -> what it kept at the last settle (logged)

    def check_discard(self, names: Iterable[str], reading_mqtt: set[str]) -> list[str]:
        """The route sessions ``--discard`` names, each a route that is gone (or goes with these rules)
        and had a broker session. Raises RouteSetupError, before anything changed, otherwise."""
        out = []
        for name in names:
            name = route_name(name) if name.startswith(ROUTE_CLIENT_PREFIX) else name
            if name in reading_mqtt:
                raise RouteSetupError(f"--discard {name}: route {name} reads from MQTT in the rules file; "
                                      "only the messages of a removed route can be discarded")
            if route_client_id(name) not in self.broker.sessions:
                raise RouteSetupError(f"--discard {name}: route {name} holds no messages (no broker session "
                                      f"{route_client_id(name)!r})")
            out.append(name)
        return out

    def retire(self, reading_mqtt: set[str]) -> None:
        """Retire every route session that no route of the rules reading from MQTT uses."""
        gone = [cid for cid in self.broker.sessions
                if cid.startswith(ROUTE_CLIENT_PREFIX) and route_name(cid) not in reading_mqtt]
        self.broker.retire_route_sessions(gone)

    def settle(self, discarding: Iterable[str] = ()) -> list[str]:
        """Withdraw what was handed over; log what became of each retired session (those about to be
        discarded aside). Returns summary lines for the sessions that changed."""
        skip = set(discarding)
        summary = []
        for s in self.broker.settle_route_sessions():
            name = route_name(s.client_id)
            handed = ", ".join(f"{n} to {route_name(cid)}" for cid, n in sorted(s.handed.items()))
            if s.handed:
                log.info("route %s is gone: its queued messages were handed over: %s", name, handed)
                summary.append(f"{name}: handed {handed}")
            if s.kept and name not in skip and self._last_kept.get(s.client_id) != s.kept:
                session = self.broker.sessions[s.client_id]
                log.warning("route %s is gone: its broker session keeps %d queued message(s) no route matches "
                            "(topics %s); a route that matches them gets them, `mqbridge reload --discard %s` "
                            "drops them", name, s.kept, ", ".join(_topics(session.deliveries())), name)
                summary.append(f"{name}: kept {s.kept} queued (no route matches)")
            elif s.deleted and not s.handed:
                summary.append(f"{name}: no queued messages")
            if s.kept:
                self._last_kept[s.client_id] = s.kept
            else:
                self._last_kept.pop(s.client_id, None)
        return summary

    def discard(self, name: str) -> str:
        """Drop what route ``name``'s retired session keeps, one conversion-log record (egress, status
        dropped, the reason) per message, then the session."""
        cid = route_client_id(name)
        session = self.broker.routes.retired.get(cid)
        if session is None:
            return f"{name}: nothing kept"
        outs = session.deliveries()
        proto = self.target_protocols.get(name, "mqtt")
        reason = f"discarded by `mqbridge reload --discard {name}`: route {name} was removed and no route matches"
        now = time.time()
        if self.convlog is not None:
            for out in outs:
                self.convlog.record_lines(self.lines.one(name, proto, inbound_of(out.msg, out.qos), Direction.EGRESS,
                                                         Status.DROPPED, now, reason=reason))
        self.broker.drop_retired_route_session(cid)
        self._last_kept.pop(cid, None)
        log.warning("route %s: %d kept message(s) discarded on request (--discard)%s", name, len(outs),
                    ", each in the conversion log" if self.convlog is not None else " (the conversion log is off)")
        return f"{name}: discarded {len(outs)}"

    def status(self) -> list[dict[str, object]]:
        out: list[dict[str, object]] = []
        for cid, session in self.broker.routes.retired.items():
            out.append({"route": route_name(cid), "kept": len(session.queue) + len(session.inflight),
                        "topics": _topics(session.deliveries())})
        return out


def _topics(outs: Iterable[OutMsg]) -> list[str]:
    """The first few distinct topics of these deliveries."""
    topics: dict[str, None] = {}
    for out in outs:
        topics.setdefault(out.msg.topic)
        if len(topics) >= TOPICS_SHOWN:
            break
    return list(topics)
