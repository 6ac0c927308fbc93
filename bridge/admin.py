"""Admin and monitoring channel: a small JSON-over-HTTP server on loopback, used by `mqbridge status`
and `mqbridge admin`. Read-mostly views of the broker plus a few actions (disconnect a client,
delete a persistent session, toggle a packet trace, reload the rules: POST /reload?discard=ROUTE).

Every request needs ``Authorization: Bearer <token>`` (bridge/admin_token.py: the file only the gateway's
user can read), else 401; a ``Host`` other than the channel's own address, or an ``Origin`` from anywhere
else, gets 403 (a web page in a local browser can neither read the channel nor post to it)."""
from __future__ import annotations

import asyncio
import hmac
import json
import logging
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any

from bridge import __version__
from bridge.admin_token import HEADER, bearer
from bridge.mqtt import packets as P
from bridge.mqtt.broker import ROUTE_CLIENT_PREFIX, Broker
from bridge.mqtt.server import MqttServer
from bridge.mqtt.session import Session

log = logging.getLogger("mqbridge.admin")

MAX_REQUEST = 64 * 1024


class AdminServer:
    def __init__(self, broker: Broker, server: MqttServer, gateway_id: str,
                 extra_status: Callable[[], dict[str, Any]] | None = None,
                 reload: Callable[[list[str]], Awaitable[tuple[bool, list[str]]]] | None = None,
                 token: str | None = None, before_status: Callable[[], Awaitable[None]] | None = None) -> None:
        self.reload = reload
        self.before_status = before_status   # awaited before /status: what must be read off the event loop
        self.token = token   # None: no token checked (in-process use only; the gateway always gives one)
        self.host = ""
        self.broker = broker
        self.server = server
        self.gateway_id = gateway_id
        self.extra_status = extra_status
        self._server: asyncio.AbstractServer | None = None
        self.port = 0

    async def start(self, host: str, port: int) -> None:
        self._server = await asyncio.start_server(self._serve, host, port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        self.host = host
        log.info("admin channel on http://%s:%d", host, self.port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    # -- HTTP -----------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
            if len(head) > MAX_REQUEST:
                raise ValueError("request too large")
            request_line, *header_lines = head.decode("latin-1").split("\r\n")
            method, target, _ = request_line.split(" ", 2)
            url = urllib.parse.urlsplit(target)
            refused = self._refused({k.strip().lower(): v.strip() for k, _, v in
                                     (line.partition(":") for line in header_lines if line)})
            if refused is not None:
                status, body = refused
            elif method.upper() == "POST" and url.path.rstrip("/") == "/reload" and self.reload is not None:
                # ?discard=ROUTE (repeatable): drop what a removed route's session keeps
                discard = [v for k, v in urllib.parse.parse_qsl(url.query) if k == "discard"]
                ok, lines = await self.reload(discard)
                status, body = (200 if ok else 400), ({"reloaded": lines} if ok else {"error": lines})
            else:
                if self.before_status is not None and method.upper() == "GET" and url.path.strip("/") == "status":
                    await self.before_status()
                status, body = self.dispatch(method.upper(), target)
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        except ValueError as exc:
            status, body = 400, {"error": str(exc)}
        payload = json.dumps(body, indent=2, default=str).encode() + b"\n"
        reason = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
                  405: "Method Not Allowed", 409: "Conflict"}.get(status, "OK")
        writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode() + payload)
        try:
            await writer.drain()
        except ConnectionError:
            pass
        writer.close()

    def _refused(self, headers: dict[str, str]) -> tuple[int, Any] | None:
        """403 for another site's request (DNS rebinding, a page's form or fetch), 401 without the token."""
        port = self.port
        own = {f"{self.host}:{port}", f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"}
        if headers.get("host") not in own:
            return 403, {"error": f"Host {headers.get('host')!r} is not this admin channel"}
        origin = headers.get("origin")
        if origin is not None and origin.removeprefix("http://") not in own:
            return 403, {"error": f"cross-site request from {origin!r} refused"}
        if self.token is not None and not hmac.compare_digest(headers.get(HEADER.lower(), "").encode(),
                                                              bearer(self.token).encode()):
            return 401, {"error": "the admin token is missing or wrong (mqbridge reads it from the data "
                                  "directory's admin.token)"}
        return None

    def dispatch(self, method: str, target: str) -> tuple[int, Any]:
        url = urllib.parse.urlsplit(target)
        parts = [urllib.parse.unquote(p) for p in url.path.split("/") if p]
        query = dict(urllib.parse.parse_qsl(url.query))
        if not parts:
            return 404, {"error": "try /status, /connections, /sessions, /subscriptions"}
        head = parts[0]
        if method == "GET":
            if head == "status" and len(parts) == 1:
                return 200, self.status()
            if head == "connections" and len(parts) == 1:
                return 200, self.connections()
            if head == "sessions" and len(parts) == 1:
                return 200, self.sessions()
            if head == "subscriptions" and len(parts) == 1:
                return 200, self.subscriptions()
            return 404, {"error": f"no such resource {url.path}"}
        if method == "DELETE" and len(parts) == 2:
            if head == "connections":
                return self.disconnect(parts[1])
            if head == "sessions":
                if parts[1].startswith(ROUTE_CLIENT_PREFIX):   # its messages are logged when dropped
                    name = parts[1][len(ROUTE_CLIENT_PREFIX):]
                    return 409, {"error": f"{parts[1]!r} is a route's session: `mqbridge reload --discard {name}` "
                                          "drops what a removed route keeps"}
                reason = self.broker.delete_session(parts[1])
                if reason:
                    return (409 if "connected" in reason else 404), {"error": reason}
                return 200, {"deleted": parts[1]}
        if method == "POST" and head == "trace" and len(parts) == 2:
            on = query.get("on", "1") not in ("0", "false", "off")
            cid = parts[1]
            if on:
                self.broker.trace_clients.add(cid)
            else:
                self.broker.trace_clients.discard(cid)
            conn = self.broker.connections.get(cid)
            if conn is not None:
                conn.trace = on
            return 200, {"client_id": cid, "trace": on}
        return 405, {"error": f"{method} {url.path} is not supported"}

    # -- views ------------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        b = self.broker
        # routes' own sessions are shown under "routes", not as client sessions
        sessions = [s for s in b.sessions.values() if not s.client_id.startswith(ROUTE_CLIENT_PREFIX)]
        now = b.clock()
        out: dict[str, Any] = {
            "gateway_id": self.gateway_id,
            "version": __version__,
            "uptime_seconds": round(now - b.stats.started, 1),
            "listeners": [
                {"name": lst.label(), "host": lst.config.host, "port": lst.port or lst.config.port,
                 "tls": lst.config.tls is not None, "running": lst.running,
                 "connections": len(lst.connections), "accepted": lst.accepted, "refused": lst.refused,
                 "max_connections": lst.config.max_connections, "transport": lst.transport or None}
                for lst in self.server.listeners
            ],
            "connections": len(b.connections),
            "sessions": {"total": len(sessions),
                         "persistent": sum(1 for s in sessions if s.persistent),
                         "offline": sum(1 for s in sessions if s.link is None)},
            "subscriptions": len(b.trie),
            "retained": len(b.retained),
            "messages": {"received": b.stats.received,
                         "sent": sum(s.stats.sent for s in sessions),
                         "dropped": sum(s.stats.dropped for s in sessions),
                         "queued": sum(len(s.queue) for s in sessions),
                         "queued_bytes": sum(s.queued_bytes for s in sessions),
                         "inflight": sum(len(s.inflight) for s in sessions),
                         # a persistent publisher's QoS 1 re-sends (DUP, same packet id and content)
                         # routed again under the first publication's message key
                         "resends": b.stats.resends_recognised,
                         # QoS 2 shared-subscription deliveries whose member's session ended before its
                         # PUBREC: given to no other member (MQTT 5.0 §4.8.2)
                         "shared_qos2_lost": b.stats.shared_qos2_lost,
                         "receive_maximum_exceeded": b.stats.receive_maximum_exceeded},
            "rates": {"received_per_s": round(sum(s.stats.rate_in for s in sessions), 1),
                      "sent_per_s": round(sum(s.stats.rate_out for s in sessions), 1)},
            "protocol_errors": b.stats.protocol_errors,
            "inbound_qos2_refused": b.stats.inbound_qos2_refused,
            # refused by the ACL file (docs/broker.md): publications (and wills) not routed, subscriptions
            "acl_denied": {"publish": b.stats.acl_denied_publish, "subscribe": b.stats.acl_denied_subscribe},
            "top_queued": self.top_queued(sessions),
            "store": {"commits": b.store.commits, "ops": b.store.ops_written,
                      "last_commit_ms": round(b.store.last_commit_seconds * 1000, 2),
                      "failed": str(b.store.failed) if b.store.failed else None},
        }
        if self.extra_status is not None:
            out.update(self.extra_status())
        return out

    def top_queued(self, sessions: list[Session], n: int = 5) -> list[dict[str, Any]]:
        """The ``n`` sessions holding the most queued bytes (the memory a slow or absent client costs)."""
        top = sorted((s for s in sessions if s.queued_bytes or s.inbound_bytes),
                     key=lambda s: s.queued_bytes + s.inbound_bytes, reverse=True)[:n]
        limits = self.broker.limits
        return [{"client_id": s.client_id, "connected": s.link is not None, "queued": len(s.queue),
                 "queued_bytes": s.queued_bytes, "inflight": len(s.inflight), "inbound_qos2_bytes": s.inbound_bytes,
                 "dropped": s.stats.dropped, "max_queued": s.max_queued, "max_queued_bytes": limits.max_queued_bytes}
                for s in top]

    def connections(self) -> list[dict[str, Any]]:
        out = []
        for cid, conn in self.broker.connections.items():
            s = conn.session
            out.append({
                "client_id": cid, "peer": conn.peer, "listener": conn.listener,
                "protocol_level": conn.protocol_level, "clean_session": conn.clean_session,
                "keepalive": conn.keepalive, "username": conn.username,
                "connected_at": conn.connected_at,
                "packets_in": conn.packets_in, "packets_out": conn.packets_out,
                "bytes_in": conn.bytes_in, "bytes_out": conn.bytes_out,
                "received": s.stats.received if s else 0, "sent": s.stats.sent if s else 0,
                "rate_in": round(s.stats.rate_in, 1) if s else 0.0,
                "rate_out": round(s.stats.rate_out, 1) if s else 0.0,
                "inflight": len(s.inflight) if s else 0, "queued": len(s.queue) if s else 0,
                "queued_bytes": s.queued_bytes if s else 0,
                "trace": conn.trace,
            })
        return out

    def sessions(self) -> list[dict[str, Any]]:
        return [{
            "client_id": s.client_id, "persistent": s.persistent, "connected": s.link is not None,
            "protocol_level": s.protocol_level, "subscriptions": dict(s.subscriptions),
            "queued": len(s.queue), "queued_bytes": s.queued_bytes, "inflight": len(s.inflight),
            "inbound_qos2": len(s.inbound.qos2) if s.inbound else 0, "inbound_qos2_bytes": s.inbound_bytes,
            "last_seen": s.last_seen, "expiry_seconds": s.expiry_seconds,
            "received": s.stats.received, "sent": s.stats.sent, "dropped": s.stats.dropped,
        } for s in self.broker.sessions.values() if not s.client_id.startswith(ROUTE_CLIENT_PREFIX)]

    def subscriptions(self) -> list[dict[str, Any]]:
        return [{"topic_filter": sub.topic_filter, "client_id": sub.client_id, "qos": sub.qos,
                 "matched": sub.matched, "rate": round(sub.rate, 1)} for sub in self.broker.trie.subscriptions()]

    def disconnect(self, client_id: str) -> tuple[int, Any]:
        conn = self.broker.connections.get(client_id)
        if conn is None:
            return 404, {"error": f"client {client_id!r} is not connected"}
        conn.close_reason = "disconnected by administrator"
        conn.abort("disconnected by administrator", P.Reason.ADMINISTRATIVE_ACTION)
        return 200, {"disconnected": client_id}
