"""A route's MQ -> MQTT conversion remembered by the message's headers: messages from one producer differ in
their MsgId, PutDate/PutTime and body, and the conversion (MQ Telemetry Tables 4-5, mq_to_publication) reads
none of those but the MsgId's last two bytes (the packet id, Table 5) and, for an MQSTR body, whether it is
UTF-8 (the payload format indicator). So the MQMD without those fields and the MQRFH2 headers after it are
the key; a message whose headers were seen is converted by taking the remembered publication with its own
body and packet id. Anything else (another header kind, a v1 MQMD in a 364-byte region, a chain that does
not end where the decoder's does) is converted in full every time, and so is a JMS message (an RFH2 jms
folder): its JMSMessageID and JMSTimestamp user properties come from the MsgId and PutDate/PutTime."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields

from bridge.connectors.base import Inbound, Outbound
from bridge.routing.base import Result
from mappings.conversions.mqtt_mq import packet_id_from_msg_id
from mappings.mq import constants as C
from mappings.mq.message import HEADER_FORMATS
from mappings.mqtt.publication import MqttPublication
from mappings.report import ConversionReport, Finding
from mappings.rules.model import Route

MSGID = slice(48, 72)
PUT_DATE_TIME = slice(304, 320)     # PutDate, PutTime: not read by the MQ -> MQTT conversion


def _head(raw: bytes, end: int) -> bytes:
    """The header bytes up to ``end`` that the conversion reads: all but the MsgId and PutDate/PutTime."""
    return raw[:MSGID.start] + raw[MSGID.stop:PUT_DATE_TIME.start] + raw[PUT_DATE_TIME.stop:end]
_VERSIONS = {b"\x00\x00\x00\x01": (324, "big"), b"\x01\x00\x00\x00": (324, "little"),
             b"\x00\x00\x00\x02": (364, "big"), b"\x02\x00\x00\x00": (364, "little")}
_RFH2 = C.MQFMT_RF_HEADER_2
_STRING = C.MQFMT_STRING
_KNOWN = {f.encode("latin-1"): f for f in (_RFH2, _STRING, C.MQFMT_NONE)}
MAX_ENTRIES = 1024                  # distinct header sets remembered per route (forgotten all at once beyond)


def _format(raw: bytes) -> str:
    """An 8-byte Format field as the decoder reads it (cut at NUL, trailing blanks, padded to 8)."""
    known = _KNOWN.get(raw)
    if known is not None:
        return known
    cut = raw.find(b"\x00")
    return (raw[:cut] if cut >= 0 else raw).decode("latin-1").rstrip(" ").ljust(8)


def header_end(raw: bytes) -> tuple[int, str] | None:
    """Where the body starts and its Format, for an MQMD followed by MQRFH2 headers only; None otherwise."""
    if raw[:4] != b"MD  ":
        return None
    version = _VERSIONS.get(raw[4:8])
    if version is None:
        return None
    pos, order = version
    encoding = int.from_bytes(raw[24:28], order)
    fmt = _format(raw[32:40])
    for _ in range(8):
        if fmt != _RFH2:
            return (pos, fmt) if fmt not in HEADER_FORMATS and pos <= len(raw) else None
        o = "big" if C.integer_byte_order(encoding) == ">" else "little"
        if raw[pos:pos + 4] != b"RFH " or int.from_bytes(raw[pos + 4:pos + 8], o) != 2:
            return None
        length = int.from_bytes(raw[pos + 8:pos + 12], o)
        if length < 36 or pos + length > len(raw):
            return None
        encoding = int.from_bytes(raw[pos + 12:pos + 16], o)
        fmt = _format(raw[pos + 20:pos + 28])
        pos += length
    return None


class _Entry:
    __slots__ = ("topic", "qos", "flags", "tail", "findings")

    def __init__(self, pub: MqttPublication, findings: list[Finding]) -> None:
        # the publication's fields around payload and packet_id, which each message sets: a positional call
        # builds the next one (a dict of 15 keywords cost about 3 µs more a message)
        self.topic = pub.topic
        self.qos = pub.qos
        self.flags = pub.retain, pub.dup
        self.tail = tuple(getattr(pub, f.name) for f in fields(MqttPublication))[6:]   # client_id onwards
        self.findings = findings

    def publication(self, payload: bytes, packet_id: int | None) -> MqttPublication:
        return MqttPublication(self.topic, payload, self.qos, *self.flags, packet_id, *self.tail)


class MqToMqttMemo:
    """``convert(item)`` gives what ``full(route, item)`` gives, remembering it by header (module docstring)."""

    def __init__(self, route: Route, full: Callable[[Route, Inbound], Result]) -> None:
        self.route = route
        self.full = full
        self.entries: dict[tuple[bytes, str, bool, bool], _Entry] = {}
        self.hits = 0
        # the last message's header end, Format and header bytes: a message with the same bytes up to there
        # has the same header chain (header_end reads nothing else), so it need not be walked again
        self._last: tuple[int, str, bytes] = (0, "", b"")

    def convert(self, item: Inbound) -> Result:
        raw = item.message
        assert isinstance(raw, bytes)
        pos, body_format, head = self._last
        if not pos or _head(raw, pos) != head:
            end = header_end(raw)
            if end is None:
                return self.full(self.route, item)
            pos, body_format = end
            head = _head(raw, pos)
            self._last = (pos, body_format, head)
        body = raw[pos:]
        text = body_format == _STRING and _is_utf8(body)
        msg_id_packet = packet_id_from_msg_id(raw[MSGID])   # MQ Telemetry Table 5; 0: none
        zero_id = msg_id_packet == 0
        key = (head, item.destination, text, zero_id)
        entry = self.entries.get(key)
        if entry is None:
            out, target_type, report = self.full(self.route, item)
            pub = out.message
            assert isinstance(pub, MqttPublication)
            if len(raw) - len(pub.payload) == pos and not _reads_ids(pub):   # headers end where header_end said
                if len(self.entries) >= MAX_ENTRIES:
                    self.entries.clear()
                self.entries[key] = _Entry(pub, list(report.findings))
            return out, target_type, report
        self.hits += 1
        packet_id = msg_id_packet if entry.qos and not zero_id else None
        pub = entry.publication(body, packet_id)
        return Outbound(item.key, pub, entry.topic, len(body)), "publish", ConversionReport(list(entry.findings))


def _reads_ids(pub: MqttPublication) -> bool:
    """A JMS message's publication (an RFH2 jms folder) starts its user properties with the JMSMessageID and
    JMSTimestamp of its MsgId and PutDate/PutTime (mqtt5_mq.properties_from_mq), which the key leaves out: not
    remembered, converted in full each time."""
    users = pub.user_properties
    return bool(users) and users[0][0] in ("JMSMessageID", "JMSTimestamp")


def _is_utf8(body: bytes) -> bool:
    if body.isascii():
        return True
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
