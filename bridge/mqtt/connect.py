"""CONNECT, takeover and the end of a connection.

CONNECT checks the client identifier (MQTT 3.1: 1..23 characters; 3.1.1: empty means an assigned id
with a clean session; ``$route:`` is the gateway's own), the will topic and the credentials (auth.py),
closes an older connection of the same client id (takeover: its will is published), opens the session and
answers CONNACK (after the session row is committed, for a persistent session), then resumes the
session's deliveries. When a connection ends the will is published unless the client sent DISCONNECT.
WebSphere Message Broker docs on the MQ Telemetry Transport (CONNECT return codes, keep alive);
MQTT 3.1.1 for level 4 (assigned client ids, session present).
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

from bridge.config import BrokerConfig
from bridge.mqtt import packets as P
from bridge.mqtt.auth import Authenticator
from bridge.mqtt.connection import ClientConnection
from bridge.mqtt.flow import FlowControl
from bridge.mqtt.publish import Publisher
from bridge.mqtt.sessions import SessionTable
from bridge.mqtt.stats import BrokerStats
from bridge.mqtt.topics import TopicError, validate_topic_name
from bridge.mqtt.wills import publish_will

log = logging.getLogger("mqbridge.broker")

ROUTE_CLIENT_PREFIX = "$route:"   # the broker sessions of the gateway's own routes; no client may use it
MAX_31_CLIENT_ID = 23   # MQTT 3.1: "The Client Identifier ... between 1 and 23 characters"


class Connections:
    """Client id -> its live connection; CONNECT and the end of a connection."""

    def __init__(self, config: BrokerConfig, table: SessionTable, publisher: Publisher, flow: FlowControl,
                 stats: BrokerStats, clock: Callable[[], float], trace_clients: set[str]) -> None:
        self.connections: dict[str, ClientConnection] = {}
        self.config = config
        self.table = table
        self.publisher = publisher
        self.flow = flow
        self.stats = stats
        self.clock = clock
        self.trace_clients = trace_clients
        self.auth = Authenticator(config)   # PasswordFileError: the broker cannot start

    def on_connect(self, conn: ClientConnection, packet: P.Connect) -> None:
        level = packet.protocol_level
        conn.reader.level = level
        conn.protocol_level = level
        client_id = packet.client_id
        if level == P.MQTT_31 and not 1 <= len(client_id) <= MAX_31_CLIENT_ID:
            raise P.ProtocolError(f"client identifier of {len(client_id)} characters (3.1 allows 1..23)",
                                  packet="CONNECT", connack=P.ConnackCode.IDENTIFIER_REJECTED)
        if client_id.startswith(ROUTE_CLIENT_PREFIX):
            raise P.ProtocolError(f"client identifier prefix {ROUTE_CLIENT_PREFIX!r} is reserved for routes",
                                  packet="CONNECT", connack=P.ConnackCode.IDENTIFIER_REJECTED)
        if not client_id:
            if not packet.clean_session:
                raise P.ProtocolError("empty client identifier without clean session",
                                      packet="CONNECT", connack=P.ConnackCode.IDENTIFIER_REJECTED)
            client_id = f"auto-{uuid.uuid4().hex}"
        if packet.will is not None:
            try:
                validate_topic_name(packet.will.topic)
            except TopicError as exc:
                raise P.ProtocolError(f"will topic: {exc}", packet="CONNECT") from None
        refused = self.auth.check(conn.listener, conn.peer, packet.client_id, packet.username, packet.password)
        if refused is not None:
            raise P.ProtocolError("not authorized", packet="CONNECT", connack=refused)

        # takeover: the older connection is closed, and its will published (it did not DISCONNECT)
        old = self.connections.get(client_id)
        if old is not None and old is not conn:
            log.info("client %s: session taken over by %s (was %s)", client_id, conn.peer, old.peer)
            self.connection_lost(old, "session taken over by a new connection")
            old.abort("session taken over")

        now = self.clock()
        conn.client_id = client_id
        conn.keepalive = packet.keepalive
        conn.clean_session = packet.clean_session
        conn.username = packet.username
        # a user name is authenticated when a password database checked it (else it is only what the client said)
        conn.authenticated = packet.username is not None and bool(self.auth.users)
        conn.will = packet.will
        conn.connected_at = now
        conn.trace = client_id in self.trace_clients
        self.stats.connections_total += 1

        session, session_present = self.table.open(
            client_id, clean=packet.clean_session, level=level,
            expiry_seconds=int(self.table.limits.session_expiry_hours * 3600), now=now)
        conn.session = session
        self.connections[client_id] = conn
        present = session_present and level == P.MQTT_311
        # CONNACK waits for the session row (a persistent session must exist once acknowledged)
        if session.persistent:
            conn.send_durable(P.encode_connack(P.ConnackCode.ACCEPTED, present))
        else:
            conn.send(P.encode_connack(P.ConnackCode.ACCEPTED, present))
        log.info("client %s connected from %s (%s level %d, clean=%s, keepalive=%ds)", client_id,
                 conn.peer, packet.protocol_name, level, packet.clean_session, packet.keepalive)
        session.resume(conn)

    def connection_lost(self, conn: ClientConnection, reason: str) -> None:
        """The connection ended (any reason). Publishes the will unless the client sent DISCONNECT."""
        self.flow.forget(conn)
        client_id = conn.client_id
        if client_id is None or self.connections.get(client_id) is not conn:
            return
        del self.connections[client_id]
        will = conn.will
        conn.will = None
        if will is not None:
            publish_will(self.publisher, client_id, conn.username, will, reason)
        session = conn.session
        if session is not None:
            self.table.left(session)
