"""MQTT publication <-> IBM MQ message, as MQ Telemetry (MQXR) maps them: IBM WebSphere MQ Telemetry docs
"Integration of WebSphere MQ Telemetry with queue managers" ("MQ Telemetry Table N" below).

MQTT -> MQ follows MQ Telemetry Tables 1-3 (MQMD, MQRFH2, message contents), written by one encoder,
:class:`MqttToMqEncoder`; MQ -> MQTT follows MQ Telemetry Tables 4-5 (fixed and variable header).
Decisions the specification leaves open are documented where they are made and listed in
:data:`DECISIONS`.
"""
from __future__ import annotations

import dataclasses
import functools
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

from mappings.conversions.mqtt5_mq import has_properties, properties_from_mq, properties_to_mq
from mappings.errors import MappingError
from mappings.mq import constants as C
from mappings.mq.message import MqMessage, decode_message
from mappings.mq.mqmd import FIELD_TABLE, Mqmd, encode_mqmd
from mappings.mq.rfh2 import Rfh1, Rfh2, RfhFolder, encode_folder, escape_text
from mappings.mqtt.publication import MqttPublication
from mappings.report import ConversionReport, Finding

#: Rules the specification does not settle, and what this module does (also shown by `mqbridge convert`).
DECISIONS: tuple[str, ...] = (
    "UserIdentifier: characters outside one byte become '?' (coerced), then the value is cut to 12 bytes "
    "(truncated); a missing source (no user name, no configured id) leaves it blank (defaulted). The source "
    "authenticated_user is the user name when the broker checked it (IBM MQ Telemetry's UserName under JAAS "
    "authentication), else the client identifier.",
    "mqtt/clientId: the specification allows 1..23 bytes; a longer id is cut to 23 bytes at a character boundary "
    "(truncated) unless client_id_limit is None; a missing or empty client id is an error.",
    "MQ Persistence AS_Q_DEF/AS_PARENT (unresolved, e.g. a message file never put) takes "
    "MqToMqttOptions.unresolved_persistence, default MQPER_NOT_PERSISTENT (IBM's default objects are "
    "DEFPSIST(NO)) -> QoS 0, reported as defaulted.",
    "Unsolicited messages (no subscription): the subscriber QoS is MqToMqttOptions.default_qos, 2 unless a "
    "DEFAULT.QoS subscription changed it (MQ Telemetry Table 4).",
    "Packet id: the last 2 bytes of MsgId, big-endian (MQ Telemetry Table 5). When they are 0 (an invalid MQTT packet "
    "id) the caller's allocator supplies one (reported as defaulted); without an allocator it is an error.",
    "Topic: mqps/Top; without it, MqToMqttOptions.fallback_topic (e.g. the queue name) or an error.",
    "DUP (MQ Telemetry Table 4) is False here: redelivery to a client is the broker session's business.",
    "mqtt/qos is read whether or not it carries dt= (the specification writes it untyped; IBM MessageSight uses an "
    "INT32 property, i.e. dt='i4'); a value other than 0, 1 or 2 is an error.",
)

SUBSCRIPTION_SEPARATOR = ":"
MAX_CLIENT_ID_BYTES = 23   # MQ Telemetry Table 2: "a length of 1...23 bytes"
MQTT_FOLDER = "mqtt"
MQPS_FOLDER = "mqps"


class UserIdSource(StrEnum):
    """MQ Telemetry Table 1 UserIdentifier: one of ClientIdentifier, UserName, or an administrator-set id."""

    CLIENT_ID = "client_id"
    USER_NAME = "user_name"
    CONFIGURED = "configured"
    AUTHENTICATED_USER = "authenticated_user"   # the user name if the broker checked it, else the client id


@dataclass(frozen=True, slots=True)
class MqttToMqOptions:
    """How the telemetry channel is configured. Everything not listed keeps MQMD_DEFAULT (MQ Telemetry Table 1)."""

    user_id_source: UserIdSource = UserIdSource.CLIENT_ID
    configured_user_id: str = ""
    encoding: int = C.MQENC_NATIVE          # MQMD.Encoding: byte order of the MQMD and RFH2 integers
    coded_char_set_id: int = C.CCSID_UTF8   # MQMD.CodedCharSetId: the RFH2's character set
    mqmd_version: int = C.MQMD_VERSION_1    # MQMD_DEFAULT is version 1
    client_id_limit: int | None = MAX_CLIENT_ID_BYTES
    # A route's overrides, written into the MQMD by the encoder (not patched afterwards):
    persistence: int | None = None          # MQMD.Persistence; None: from the QoS (MQ Telemetry Table 1)
    priority: int = C.MQPRI_PRIORITY_AS_Q_DEF   # MQMD.Priority; MQ Telemetry Table 1 leaves the default
    # MQMD.ReplyToQ of a publication whose MQTT 5 Response Topic is a topic (mqtt5_mq); None: left blank
    reply_to_queue: str | None = None


@dataclass(frozen=True, slots=True)
class MqToMqttOptions:
    default_qos: int = 2                    # MQ Telemetry Table 4: unsolicited messages; DEFAULT.QoS may change it
    unresolved_persistence: int = C.PERSISTENCE_WHEN_UNRESOLVED
    fallback_topic: str | None = None


# --------------------------------------------------------------------------------------------------
# Rules, one function each
# --------------------------------------------------------------------------------------------------
def subscription_name(client_id: str, topic: str) -> str:
    """Name of an MQTT client's subscription in MQ: ``ClientIdentifier:Topic name`` (the specification's
    introduction)."""
    return f"{client_id}{SUBSCRIPTION_SEPARATOR}{topic}"


class TopicObjectIndex:
    """Administrative topic objects by topic string; maps a publication topic to the nearest parent
    object (longest topic-string prefix ending at a level boundary), else SYSTEM.BASE.TOPIC (the
    specification's introduction)."""

    __slots__ = ("_by_string", "default")

    def __init__(self, objects: Mapping[str, str] | Iterable[tuple[str, str]] = (),
                 default: str = C.SYSTEM_BASE_TOPIC) -> None:
        """``objects``: topic string -> object name (a mapping or (topic string, name) pairs)."""
        pairs = objects.items() if isinstance(objects, Mapping) else objects
        self._by_string: dict[str, str] = {}
        for topic_string, name in pairs:
            if not name:
                raise MappingError("administrative topic object with an empty name",
                                   structure="topic objects", field=topic_string)
            if topic_string in self._by_string and self._by_string[topic_string] != name:
                other = self._by_string[topic_string]
                raise MappingError(f"topic string {topic_string!r} is claimed by {other} and {name}",
                                   structure="topic objects", field=name)
            self._by_string[topic_string] = name
        self.default = default

    def nearest(self, topic: str) -> str:
        candidate = topic
        while True:
            name = self._by_string.get(candidate)
            if name is not None:
                return name
            cut = candidate.rfind("/")
            if cut < 0:
                return self.default
            candidate = candidate[:cut]


def persistence_for_qos(qos: int) -> int:
    """MQ Telemetry Table 1 Persistence: QoS 0 -> MQPER_NOT_PERSISTENT, QoS 1 and 2 -> MQPER_PERSISTENT."""
    return C.MQPER_NOT_PERSISTENT if qos == 0 else C.MQPER_PERSISTENT


def qos_for_persistence(persistence: int, unresolved: int = C.PERSISTENCE_WHEN_UNRESOLVED) -> int:
    """MQ Telemetry Table 4, WebSphere MQ origin: NOT_PERSISTENT -> 0, PERSISTENT -> 2 (others: see DECISIONS)."""
    if persistence not in (C.MQPER_NOT_PERSISTENT, C.MQPER_PERSISTENT):
        persistence = unresolved
    return 2 if persistence == C.MQPER_PERSISTENT else 0


def _check_publication(pub: MqttPublication) -> None:
    where = "MQTT publication"
    if not isinstance(pub, MqttPublication):
        raise MappingError(f"expected an MqttPublication, got {type(pub).__name__}", structure=where)
    if pub.qos not in (0, 1, 2) or not isinstance(pub.qos, int):
        raise MappingError(f"QoS {pub.qos!r} is not 0, 1 or 2", structure=where, field="qos")
    if pub.qos and (not isinstance(pub.packet_id, int) or not 1 <= pub.packet_id <= 0xFFFF):
        raise MappingError(f"QoS {pub.qos} needs a packet id 1..65535, got {pub.packet_id!r}",
                           structure="MQTT publication", field="packet_id")
    if not isinstance(pub.topic, str) or not pub.topic:
        raise MappingError("topic must be a non-empty string", structure="MQTT publication", field="topic")
    if not isinstance(pub.payload, bytes | bytearray | memoryview):
        raise MappingError("payload must be bytes", structure=where, field="payload")
    for name in ("client_id", "username", "content_type", "response_topic"):
        if not isinstance(getattr(pub, name), str | None):
            raise MappingError(f"must be a string, got {type(getattr(pub, name)).__name__}", structure=where,
                               field=name)
    for name, low, high in (("payload_format_indicator", 0, 1), ("message_expiry_interval", 0, 2**32 - 1)):
        value = getattr(pub, name)
        if value is not None and (value.__class__ is not int or not low <= value <= high):
            raise MappingError(f"must be an integer {low}..{high}, got {value!r}", structure=where, field=name)
    if pub.user_authenticated.__class__ is not bool:
        raise MappingError(f"must be True or False, got {pub.user_authenticated!r}", structure=where,
                           field="user_authenticated")
    if not isinstance(pub.correlation_data, bytes | None):
        raise MappingError(f"must be bytes, got {type(pub.correlation_data).__name__}", structure=where,
                           field="correlation_data")
    if not isinstance(pub.user_properties, tuple | list) or not all(
            isinstance(p, tuple | list) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], str)
            for p in pub.user_properties):
        raise MappingError("must be a sequence of (name, value) pairs", structure=where,
                           field="user_properties")


def user_id_of(pub: MqttPublication, source: UserIdSource, configured: str) -> tuple[UserIdSource, str | None]:
    """The UserIdentifier source that applies to ``pub`` (AUTHENTICATED_USER: its user name when the broker
    checked it, else its client id) and that source's value, not yet fitted to the MQMD field."""
    if source is UserIdSource.AUTHENTICATED_USER:
        source = UserIdSource.USER_NAME if pub.user_authenticated and pub.username else UserIdSource.CLIENT_ID
    if source is UserIdSource.CLIENT_ID:
        return source, pub.client_id
    if source is UserIdSource.USER_NAME:
        return source, pub.username
    return source, configured


def user_identifier(pub: MqttPublication, options: MqttToMqOptions, report: ConversionReport) -> str:
    """MQ Telemetry Table 1 UserIdentifier (MQCHAR12): client id, user name or configured id, fitted to 12 bytes."""
    source, value = user_id_of(pub, options.user_id_source, options.configured_user_id)
    if not value:
        report.defaulted("MQMD.UserIdentifier", f"no {source.value} to copy; left blank")
        return ""
    fitted = value.encode("latin-1", "replace").decode("latin-1")
    if fitted != value:
        report.coerced("MQMD.UserIdentifier", "characters outside one byte replaced by '?'")
    if len(fitted) > C.MQ_USER_ID_LENGTH:
        report.truncated("MQMD.UserIdentifier", f"{value!r} cut to {C.MQ_USER_ID_LENGTH} bytes")
        fitted = fitted[: C.MQ_USER_ID_LENGTH]
    return fitted


def folder_client_id(pub: MqttPublication, options: MqttToMqOptions, report: ConversionReport) -> str:
    """MQ Telemetry Table 2 mqtt/clientId: a copy of the client identifier, 1..23 bytes."""
    cid = pub.client_id
    if not cid:
        raise MappingError("a client identifier (1..23 bytes) is required for mqtt/clientId",
                           structure="MQTT publication", field="client_id")
    limit = options.client_id_limit
    raw = cid.encode("utf-8", "surrogatepass")
    if limit is not None and len(raw) > limit:
        cut = raw[:limit].decode("utf-8", "ignore")
        report.truncated("mqtt/clientId",
                         f"{len(raw)} bytes cut to {len(cut.encode())} (MQ Telemetry Table 2: 1..23 bytes)")
        return cut
    return cid


# --------------------------------------------------------------------------------------------------
# MQTT -> MQ (MQ Telemetry Tables 1-3)
# --------------------------------------------------------------------------------------------------
def _mqmd_for(options: MqttToMqOptions, qos: int) -> Mqmd:
    """MQ Telemetry Table 1: MQMD_DEFAULT except Format, UserIdentifier (written per publisher), Priority,
    Persistence."""
    persistence = persistence_for_qos(qos) if options.persistence is None else options.persistence
    return Mqmd(version=options.mqmd_version, encoding=options.encoding,
                coded_char_set_id=options.coded_char_set_id, format=C.MQFMT_RF_HEADER_2,
                priority=options.priority, persistence=persistence)


@lru_cache(maxsize=64)
def _shared_encoder(options: MqttToMqOptions) -> MqttToMqEncoder:
    return MqttToMqEncoder(options)


def mqtt_to_mq(pub: MqttPublication, options: MqttToMqOptions = MqttToMqOptions()
               ) -> tuple[MqMessage, ConversionReport]:
    """An MQTT publication as the MQ message MQXR builds: MQMD + MQRFH2 (mqtt, mqps) + payload.

    The model of :class:`MqttToMqEncoder`'s bytes (read back with decode_message): the encoder is the
    one implementation of MQ Telemetry Tables 1-3."""
    data, report = _shared_encoder(options).encode(pub)
    msg = decode_message(data)
    # decode_message ends an MQCHAR field at a NUL and drops trailing blanks: keep the rule's value
    user_id = user_identifier(pub, options, ConversionReport())
    if user_id != msg.md.user_identifier:
        msg = dataclasses.replace(msg, md=dataclasses.replace(msg.md, user_identifier=user_id))
    return msg, report


# (MQMD of QoS 0, MQMD of QoS 1 and 2, escaped mqtt/clientId, findings) of one publisher
_PublisherEntry = tuple[bytes, bytes, bytes, tuple[Finding, ...]]


class MqttToMqEncoder:
    """MQTT publication -> MQ message bytes (MQ Telemetry Tables 1-3): MQMD, MQRFH2 (mqtt, mqps folders), payload.

    MQ Telemetry Table 2's folders, untyped as the specification writes them: <mqtt><clientId/><qos/><msgid/></mqtt>
    (msgid only for QoS 1 and 2) and <mqps><Top/><Ret>1</Ret></mqps> (Ret only when retained); the RFH2's
    Format is MQFMT_NONE (a jms-bytes message, no <mcd>); MQ Telemetry Table 3: the body is a copy of the payload.

    Precomputed per options: the MQMD of QoS 0 and of QoS 1/2 (Persistence, and the route's Priority)
    and the RFH2 fixed-part packer. Cached per publisher (client id, user name, checked): the MQMD bytes with its
    UserIdentifier, the escaped mqtt/clientId and their findings. Escaped topics are cached too.
    """

    MAX_CACHED_PUBLISHERS = 10_000

    def __init__(self, options: MqttToMqOptions = MqttToMqOptions()) -> None:
        self.options = options
        order = self._order = C.integer_byte_order(options.encoding)
        # MQMD bytes around UserIdentifier (offset 196, 12 bytes; IBM MQ docs "MQMD - Message descriptor")
        mds = [encode_mqmd(_mqmd_for(options, qos)) for qos in (0, 1)]
        self._md_parts = tuple((md[:196], md[208:]) for md in mds)
        rfh = Rfh2()
        self._head = functools.partial(struct.Struct(order + "4s4i8s2i").pack, b"RFH ", 2)
        self._rfh_fixed = (rfh.encoding, rfh.coded_char_set_id, C.MQFMT_NONE.encode(), rfh.flags,
                           rfh.name_value_ccsid)
        self._long = struct.Struct(order + "i").pack
        self._topic = lru_cache(maxsize=8192)(functools.partial(_escape_utf8, what="mqps/Top"))
        self._publishers: dict[tuple[str | None, str | None, bool], _PublisherEntry] = {}

    def _publisher(self, pub: MqttPublication) -> _PublisherEntry:
        report = ConversionReport()
        user_id = user_identifier(pub, self.options, report)
        cid = _escape_utf8(folder_client_id(pub, self.options, report), "mqtt/clientId")
        field_ = user_id.encode("latin-1").ljust(12, b" ")
        (head0, tail0), (head1, tail1) = self._md_parts
        entry = (head0 + field_ + tail0, head1 + field_ + tail1, cid, tuple(report.findings))
        if len(self._publishers) >= self.MAX_CACHED_PUBLISHERS:
            self._publishers.clear()
        self._publishers[(pub.client_id, pub.username, pub.user_authenticated)] = entry
        return entry

    def encode(self, pub: MqttPublication) -> tuple[bytes, ConversionReport]:
        qos = pub.qos
        topic = pub.topic
        payload = pub.payload
        if (qos.__class__ is not int or not 0 <= qos <= 2 or topic.__class__ is not str or not topic
                or payload.__class__ is not bytes
                or (qos and (pub.packet_id.__class__ is not int or not 0 < pub.packet_id <= 0xFFFF))):
            _check_publication(pub)  # raises the precise error, or accepts e.g. a bytearray payload
        try:
            entry = self._publishers.get((pub.client_id, pub.username, pub.user_authenticated))
        except TypeError:  # unhashable: a wrongly typed field, reported by _check_publication
            entry = None
        if entry is None:
            _check_publication(pub)  # rare path: a new publisher gets the full check
            entry = self._publisher(pub)
        md0, md12, cid, findings = entry
        report = ConversionReport(list(findings)) if findings else ConversionReport()
        if qos:
            md = md12
            mqtt = (b"<mqtt><clientId>%s</clientId><qos>%d</qos><msgid>%d</msgid></mqtt>"
                    % (cid, qos, pub.packet_id))
        else:
            md = md0
            mqtt = b"<mqtt><clientId>%s</clientId><qos>0</qos></mqtt>" % cid
        mqtt += b"   "[: -len(mqtt) % 4]
        mqps = (_MQPS_RETAINED if pub.retain else _MQPS) % self._topic(topic)
        mqps += b"   "[: -len(mqps) % 4]
        long_ = self._long
        if has_properties(pub):
            _check_publication(pub)
            return self._with_properties(pub, md, (mqtt, mqps), report), report
        head = self._head(44 + len(mqtt) + len(mqps), *self._rfh_fixed)
        return b"".join((md, head, long_(len(mqtt)), mqtt, long_(len(mqps)), mqps, payload)), report

    def _with_properties(self, pub: MqttPublication, md: bytes, folders: tuple[bytes, ...],
                         report: ConversionReport) -> bytes:
        """MQ Telemetry's message plus the MQTT 5 properties (mqtt5_mq): MQMD fields, mcd/jms/usr folders."""
        fields = properties_to_mq(pub, report, reply_to_queue=self.options.reply_to_queue)
        if fields.md:
            base = _mqmd_for(self.options, pub.qos)
            md = encode_mqmd(dataclasses.replace(base, user_identifier=md[196:208].decode("latin-1"), **fields.md))
        encoding, ccsid, fmt, flags, nv_ccsid = self._rfh_fixed
        if fields.text:
            fmt = C.MQFMT_STRING.encode()
            if self.options.coded_char_set_id != C.CCSID_UTF8:   # UTF-8 text, whatever the channel's CCSID
                ccsid = C.CCSID_UTF8
        parts = [*folders, *(encode_folder(f, nv_ccsid, self._order) for f in fields.folders)]
        body = b"".join(self._long(len(part)) + part for part in parts)
        return b"".join((md, self._head(36 + len(body), encoding, ccsid, fmt, flags, nv_ccsid), body, pub.payload))


_MQPS = b"<mqps><Top>%s</Top></mqps>"
_MQPS_RETAINED = b"<mqps><Top>%s</Top><Ret>1</Ret></mqps>"


def _escape_utf8(text: str, what: str) -> bytes:
    try:
        return escape_text(text, what).encode("utf-8")
    except UnicodeEncodeError:
        raise MappingError("contains a lone surrogate, not valid UTF-8", structure="MQTT publication",
                           field=what) from None


# --------------------------------------------------------------------------------------------------
# MQ -> MQTT (MQ Telemetry Tables 4-5)
# --------------------------------------------------------------------------------------------------
_USED_ELEMENTS = {MQTT_FOLDER: {"clientId", "qos", "msgid"}, MQPS_FOLDER: {"Top", "Ret"}}
# MQMD fields whose information MQTT cannot carry; reported as dropped when not at their default.
_REPORTED_MQMD_FIELDS = ("report", "msg_type", "expiry", "feedback", "priority", "correl_id", "reply_to_q",
                         "reply_to_q_mgr", "group_id", "msg_flags")
_MQMD_DEFAULT = Mqmd()


def _folder_int(folder: RfhFolder, name: str, low: int, high: int) -> int | None:
    raw = folder.value(name)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        raise MappingError(f"{raw!r} is not an integer {low}..{high}",
                           structure=f"MQRFH2 folder {folder.name}", field=name)
    return value


def derived_qos(msg: MqMessage, options: MqToMqttOptions, report: ConversionReport) -> int:
    """MQ Telemetry Table 4 QoS source: the MQTT publisher's mqtt/qos, or from Persistence for MQ-origin messages."""
    mqtt = msg.rfh2_folder(MQTT_FOLDER)
    if mqtt is not None:
        qos = _folder_int(mqtt, "qos", 0, 2)
        if qos is not None:
            return qos
    if msg.md.persistence not in (C.MQPER_NOT_PERSISTENT, C.MQPER_PERSISTENT):
        report.defaulted("MQMD.Persistence", f"{msg.md.persistence} is unresolved; taken as "
                         f"{options.unresolved_persistence}")
    return qos_for_persistence(msg.md.persistence, options.unresolved_persistence)


def packet_id_from_msg_id(msg_id: bytes) -> int:
    """MQ Telemetry Table 5 Message ID: the last 2 bytes of MQMD.MsgId (big-endian). 0 means 'not usable'."""
    return int.from_bytes(msg_id[-2:], "big")


def _report_discarded(msg: MqMessage, report: ConversionReport, used: set[str]) -> None:
    """MQ Telemetry Table 4 preamble: any other MQMD data or header is discarded -- each one is reported.
    ``used``: the MQMD attributes and folder/element names the MQTT 5 properties carry (mqtt5_mq)."""
    for attr in _REPORTED_MQMD_FIELDS:
        if attr in used:
            continue
        value = getattr(msg.md, attr)
        if value != getattr(_MQMD_DEFAULT, attr) and not (attr == "priority" and value < 0):
            report.dropped(f"MQMD.{FIELD_TABLE[attr][1]}", "not carried by MQTT (MQ Telemetry Tables 4-5)")
    for index, header in enumerate(msg.headers):
        if isinstance(header, Rfh1):
            report.dropped(f"MQRFH header {index + 1}", f"{len(header.pairs)} name/value pairs")
            continue
        if not isinstance(header, Rfh2):
            report.dropped(f"{type(header).__name__.upper()} header {index + 1}", "not carried by MQTT")
            continue
        for folder in header.folders:
            known = _USED_ELEMENTS.get(folder.name, set())
            if not known and not any(f"{folder.name}/{el.name}" in used for el in folder.elements):
                report.dropped(f"MQRFH2 folder {folder.name}", f"{len(folder.elements)} elements")
                continue
            for el in folder.elements:
                if el.name not in known and f"{folder.name}/{el.name}" not in used:
                    report.dropped(f"{folder.name}/{el.name}", "not carried by MQTT (MQ Telemetry Tables 4-5)")


def mq_to_mqtt(msg: MqMessage, *, subscriber_qos: int | None = None,
               packet_id_allocator: Callable[[], int] | None = None,
               options: MqToMqttOptions = MqToMqttOptions()) -> tuple[MqttPublication, ConversionReport]:
    """An MQ message (a publication or an unsolicited message) as the PUBLISH MQXR sends to a client.

    ``subscriber_qos`` is the matching subscription's QoS, None for an unsolicited message.
    """
    if not isinstance(msg, MqMessage):
        raise MappingError(f"expected an MqMessage, got {type(msg).__name__}", structure="MQ message")
    report = ConversionReport()
    if subscriber_qos is not None and subscriber_qos not in (0, 1, 2):
        raise MappingError(f"subscriber QoS {subscriber_qos!r} is not 0, 1 or 2", structure="subscription",
                           field="qos")
    if options.default_qos not in (0, 1, 2):
        raise MappingError(f"DEFAULT.QoS {options.default_qos!r} is not 0, 1 or 2", structure="options",
                           field="default_qos")
    limit = subscriber_qos if subscriber_qos is not None else options.default_qos
    qos = min(derived_qos(msg, options, report), limit)                     # MQ Telemetry Table 4 QoS
    mqps = msg.rfh2_folder(MQPS_FOLDER)
    retained = False
    topic: str | None = None
    if mqps is not None:
        ret = mqps.value("Ret")
        retained = ret is not None and ret.strip().lower() in ("1", "true", "yes")   # MQ Telemetry Table 4 RETAIN
        topic = mqps.value("Top")                                                  # MQ Telemetry Table 5 Topic name
    if not topic:
        if options.fallback_topic is None:
            raise MappingError("no mqps/Top topic string and no fallback topic configured",
                               structure="MQRFH2 folder mqps", field="Top")
        topic = options.fallback_topic
        report.defaulted("topic", f"no mqps/Top; used {topic!r}")
    packet_id: int | None = None
    if qos:
        packet_id = packet_id_from_msg_id(msg.md.msg_id)                        # MQ Telemetry Table 5 Message ID
        if packet_id == 0:
            if packet_id_allocator is None:
                raise MappingError("the last 2 bytes of MsgId are 0, not a valid MQTT packet id, and no "
                                   "packet id allocator was given", structure="MQMD", field="MsgId",
                                   offset=48)
            packet_id = packet_id_allocator()
            if not isinstance(packet_id, int) or not 1 <= packet_id <= 0xFFFF:
                raise MappingError(f"allocator returned {packet_id!r}, not 1..65535", structure="MQMD",
                                   field="MsgId")
            report.defaulted("packet id", f"MsgId ends in 0000; allocator gave {packet_id}")
    client_id = None
    mqtt = msg.rfh2_folder(MQTT_FOLDER)
    if mqtt is not None:
        client_id = mqtt.value("clientId") or None
    properties, used = properties_from_mq(msg, report)
    _report_discarded(msg, report, used)
    pub = MqttPublication(topic=topic, payload=msg.body, qos=qos, retain=retained, dup=False,
                          packet_id=packet_id, client_id=client_id, **properties)
    return pub, report


__all__ = [
    "DECISIONS",
    "MqToMqttOptions",
    "MqttToMqEncoder",
    "MqttToMqOptions",
    "TopicObjectIndex",
    "UserIdSource",
    "derived_qos",
    "mq_to_mqtt",
    "mqtt_to_mq",
    "packet_id_from_msg_id",
    "persistence_for_qos",
    "qos_for_persistence",
    "subscription_name",
    "user_id_of",
    "user_identifier",
]
