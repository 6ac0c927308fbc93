"""One client connection's protocol side, without sockets or an event loop: bytes in, actions out.

The server gives ``receive`` the bytes it read and obeys the returned ``Read`` (go on, or stop reading
this socket); everything the broker answers comes out through the connection's ``write`` sink, and a
close through its ``abort`` sink. ``resume`` (a route session let go of this publisher), ``lost`` (the
socket ended) and ``timed_out`` (the periodic sweep) complete the interface. tests/test_broker_sans_io.py
drives two clients through a broker with nothing but these calls.
"""
from __future__ import annotations

import enum
import logging

from bridge.mqtt import memory
from bridge.mqtt import packets as P
from bridge.mqtt import properties as PR
from bridge.mqtt.broker import Broker
from bridge.mqtt.connection import ClientConnection, Port

log = logging.getLogger("mqbridge.server")

# a publisher held by a route's flow control is still read (its PINGREQs answered, its acknowledgements of
# deliveries to it processed) until this much is waiting unprocessed; then its socket is not read at all
HELD_READ_BYTES = 1024 * 1024


class Read(enum.Enum):
    """What the server does with the socket after ``receive``/``resume``."""
    GO_ON = 0       # keep reading
    PAUSE = 1       # stop reading until ``resume`` says GO_ON (flow control holds this publisher)
    CLOSED = 2      # the connection is closing; nothing more is processed


def _passes_hold(packet: P.Packet) -> bool:
    """What a held publisher's connection still processes: acknowledgements of deliveries to it (they add
    nothing to any queue) and PINGREQ (so its keepalive is answered)."""
    if type(packet) is P.PacketIdOnly:
        return packet.type != P.PUBREL   # PUBREL publishes a QoS 2 message: held
    return type(packet) is P.Bare and packet.type == P.PINGREQ


class ConnectionDriver:
    """Feeds one connection's packets to the broker in order, holding them while flow control says so."""

    __slots__ = ("broker", "conn", "paused")

    def __init__(self, broker: Broker, *, port: Port, peer: str, listener: str, now: float) -> None:
        """``port``: the transport's end (connection.Port)."""
        self.broker = broker
        limits = broker.limits
        self.conn = ClientConnection(
            peer=peer, listener=listener, max_packet_size=limits.max_message_size, now=now, port=port,
            after_commit=broker.after_commit, qos0_buffer_limit=limits.qos0_buffer_bytes,
            max_connect_size=limits.max_connect_size)
        self.paused = False

    def receive(self, data: bytes, now: float) -> Read:
        """Bytes read from the socket."""
        conn = self.conn
        if conn.closed or conn.closing:
            return Read.CLOSED
        conn.last_activity = now
        conn.bytes_in += len(data)
        handle = self.broker.handle
        held = conn.held
        try:
            packets = conn.reader.feed(data)
        except P.ProtocolError as exc:   # not decodable: Malformed Packet (MQTT 5), unless it says otherwise
            self._protocol_error(exc, P.Reason.MALFORMED_PACKET)
            return Read.CLOSED
        try:
            for packet in packets:
                conn.packets_in += 1
                if (conn.held_by or held) and not _passes_hold(packet):
                    if not held:
                        held = conn.held = []
                    held.append(packet)   # in order, processed once no route session holds it
                    continue
                handle(conn, packet)
                if conn.closed or conn.closing:
                    return Read.CLOSED
            if conn.reader.error is not None:   # a bad packet after the good ones just handled
                self._protocol_error(conn.reader.error, P.Reason.MALFORMED_PACKET)
                return Read.CLOSED
            if held:
                conn.held_bytes += len(data)
                if conn.held_bytes >= HELD_READ_BYTES:
                    self.paused = True
        except P.ProtocolError as exc:
            self._protocol_error(exc)
            return Read.CLOSED
        except Exception as exc:  # a broker bug must cost one connection, not the process
            log.exception("client %s (%s): internal error", conn.client_id, conn.peer)
            self.close(f"internal error: {exc}")
            return Read.CLOSED
        return Read.PAUSE if self.paused else Read.GO_ON

    def resume(self, now: float) -> Read:
        """No route session holds this publisher any more: process what it sent meanwhile, in order (it
        may be held again on the way)."""
        conn = self.conn
        if conn.closed or conn.closing:
            return Read.CLOSED
        conn.last_activity = now   # not the client's fault that nothing was processed
        held = conn.held
        if not held:
            conn.held_bytes = 0
            self.paused = False
            return Read.GO_ON
        handle = self.broker.handle
        done = 0
        try:
            while done < len(held) and not conn.held_by:
                packet = held[done]
                done += 1
                handle(conn, packet)
                if conn.closed or conn.closing:
                    held.clear()   # nothing is processed after a DISCONNECT
                    return Read.CLOSED
        except P.ProtocolError as exc:
            held.clear()   # what followed a broken packet is not processed
            self._protocol_error(exc)
            return Read.CLOSED
        except Exception as exc:  # as in receive: one connection, not the process
            held.clear()
            log.exception("client %s (%s): internal error", conn.client_id, conn.peer)
            self.close(f"internal error: {exc}")
            return Read.CLOSED
        finally:
            del held[:done]
        if held:
            return Read.PAUSE if self.paused else Read.GO_ON
        conn.held_bytes = 0
        self.paused = False
        return Read.GO_ON

    def lost(self, error: str | None) -> None:
        """The socket ended (``error``: why, when it was not a clean close)."""
        conn = self.conn
        if conn.held:
            self._handle_held_at_close()
        reason = conn.close_reason or (f"I/O error: {error}" if error else "connection closed by peer")
        conn.closed = True
        conn.forget()
        if conn.client_id is not None:
            log.info("client %s (%s) disconnected: %s", conn.client_id, conn.peer, reason)
        else:
            memory.freed(conn.bytes_in)   # a refused pre-CONNECT flood's buffers: given back (memory.py)
            if conn.close_reason:
                log.warning("connection from %s closed before CONNECT: %s", conn.peer, reason)
        self.broker.connection_lost(conn, reason)

    def timed_out(self, now: float) -> str | None:
        """Why the broker closes this connection at ``now``: no CONNECT within ``connect_timeout``, or no
        packet within 1.5 x its keep alive (WebSphere Message Broker docs "Keep Alive timer"); else None.
        A publisher held by a route's flow control is exempt: its socket may not have been read at all."""
        conn = self.conn
        if conn.closed or conn.closing:
            return None
        if conn.client_id is None:
            timeout = self.broker.limits.connect_timeout
            return f"no CONNECT within {timeout:g} s" if now - conn.created > timeout else None
        if (conn.keepalive and not (conn.held_by or conn.held)
                and now - conn.last_activity > 1.5 * conn.keepalive):
            return f"keepalive expired ({conn.keepalive} s x 1.5 without a packet)"
        return None

    def close(self, reason: str, code: int | None = None) -> None:
        """Close the connection; ``code``: an MQTT 5 client is told why with a DISCONNECT first."""
        self.conn.abort(reason, code)

    # -- internals ----------------------------------------------------------------------------------

    def _handle_held_at_close(self) -> None:
        """The connection ended while packets it sent were held: they were received, so they are processed
        (publications stored and routed, a DISCONNECT honoured: no will); answers go nowhere."""
        conn = self.conn
        broker = self.broker
        held, conn.held = conn.held, ()
        if conn.client_id is None or broker.connections.get(conn.client_id) is not conn:
            return   # taken over: the session belongs to the new connection now
        for packet in held:
            try:
                broker.handle(conn, packet)
            except P.ProtocolError as exc:
                log.warning("client %s (%s): held packet refused at close: %s", conn.client_id, conn.peer, exc)
                return
            except Exception:
                log.exception("client %s (%s): internal error on a held packet", conn.client_id, conn.peer)
                return
            if type(packet) is P.Disconnect or type(packet) is P.Bare and packet.type == P.DISCONNECT:
                return

    def _protocol_error(self, exc: P.ProtocolError, default: int = P.Reason.PROTOCOL_ERROR) -> None:
        """Close for ``exc``: a refused CONNECT is answered with CONNACK, an MQTT 5 client is sent DISCONNECT
        with the reason code (``exc.code``, else ``default``) and the error as Reason String."""
        conn = self.conn
        conn.reader.clear()   # what it sent after the broken packet is not kept until the socket is gone
        self.broker.stats.protocol_errors += 1
        who = conn.client_id or "(not connected)"
        log.warning("client %s (%s): protocol error, closing: %s", who, conn.peer, exc)
        code = exc.code if exc.code is not None else default
        if conn.client_id is None and P.MQTT_5 in (conn.protocol_level, exc.level):
            # a level 5 CONNECT refused: CONNACK with its reason code and why (where the client's Maximum
            # Packet Size allows; unknown when its CONNECT could not be decoded), then the connection closes
            if exc.connack is not None and exc.code is None:
                code = P.CONNACK_REASON[exc.connack]
            conn.close_reason = f"CONNACK {code:#04x}: {exc.reason}"
            conn.closed = conn.closing = True
            data = P.encode_connack5(code, False, {PR.REASON_STRING: exc.reason[:256]})
            if exc.level == P.MQTT_5 or len(data) > conn.max_packet_out:
                data = P.encode_connack5(code, False, None)
            self.conn.port.final(data)
            return
        if exc.connack is not None and conn.client_id is None:
            # the one answer a refused CONNECT gets, then the connection closes
            conn.close_reason = f"CONNACK {int(exc.connack)}: {exc.reason}"
            conn.closed = conn.closing = True
            self.conn.port.final(P.encode_connack(int(exc.connack)))
            return
        self.close(f"protocol error: {exc}", code)
