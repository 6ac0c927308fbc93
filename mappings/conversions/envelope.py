"""The MQTT envelope: a whole JMS message carried in an MQTT 3.1.1 payload as the JMS message JSON form
(mappings/jms/message_json.py, docs/json-forms.md), so request/reply works without MQTT 5 properties.

Why: jms_to_mqtt maps JMSReplyTo / JMSCorrelationID / JMSType to MQTT 5 Response Topic / Correlation
Data / Content Type (Eclipse Amlen docs "Conversion between MQTT and JMS", Table 1 and its property
rows), which an MQTT 3.1.1 subscriber never sees. A route with ``options.mqtt_format: envelope``
writes the whole JMS message instead, and reads an MQTT payload back as one:

- JMS -> MQTT (``envelope_payload``): the full typed form; nothing is lost (every header, property
  type and body type is in the JSON), so no finding. QoS (``envelope_qos``): PERSISTENT -> 2,
  NON_PERSISTENT -> 0, as MQ persistence -> QoS in MQ Telemetry Table 4.
- MQTT -> JMS (``read_envelope``): the payload must be UTF-8 JSON of that form; every error names the
  member path (``headers.JMSPriority``, ``properties.n``, ``body.map.k``). Headers the envelope leaves
  out take what a plain MQTT publication would give them (mqtt_to_jms): JMSDeliveryMode from the QoS
  (0 -> NON_PERSISTENT, 1/2 -> PERSISTENT, MQ Telemetry Table 1) and JMSTimestamp = ``now_ms`` (the
  caller passes 0 where the provider sets it anyway, as over STOMP).
- Reply addressing (``reply_destination``): a reply envelope names where it goes in
  ``headers.JMSDestination`` (the responder copies the request's ``JMSReplyTo`` there). A route target
  with ``reply_to: true`` sends it there when the destination's kind and name start with one of the
  target's ``allow`` prefixes (``queue://replies.``, ``topic://a.``; a queue manager is not part of
  the match); otherwise the message is refused with a reason naming ``headers.JMSDestination``.
  A JMS temporary destination (JMSReplyTo of javax.jms.QueueRequestor) is written with the URI option
  ``temporary=true`` and matched as ``temp-queue://<name>`` / ``temp-topic://<name>``, so replies to
  temporary queues are allowed only explicitly.

Pure: no clock (``now_ms`` is an argument), no I/O.
"""
from __future__ import annotations

from mappings.errors import MappingError
from mappings.jms.json_forms import load_json
from mappings.jms.message_json import TEMPORARY, message_from_dict, message_to_json
from mappings.jms.model import DeliveryMode, Destination, JmsMessage
from mappings.report import ConversionReport

STRUCTURE = "MQTT envelope"
DESTINATION_FIELD = "headers.JMSDestination"
ALLOW_KINDS = ("queue://", "topic://", "temp-queue://", "temp-topic://")   # what allow prefixes start with


def _fail(reason: str, field: str | None) -> MappingError:
    return MappingError(reason, structure=STRUCTURE, field=field)


# ------------------------------------------------------------------------------ JMS -> MQTT


def envelope_payload(message: JmsMessage) -> bytes:
    """The MQTT payload of ``message``: its JMS message JSON, UTF-8 (lossless)."""
    return message_to_json(message).encode("utf-8")


def envelope_qos(message: JmsMessage) -> int:
    """MQ Telemetry Table 4 (persistence -> QoS): PERSISTENT -> 2, NON_PERSISTENT -> 0."""
    return 2 if message.headers.delivery_mode is DeliveryMode.PERSISTENT else 0


# ------------------------------------------------------------------------------ MQTT -> JMS


def read_envelope(payload: bytes, *, qos: int, now_ms: int) -> tuple[JmsMessage, ConversionReport]:
    """Read an MQTT payload as a JMS message (module docstring). Raises MappingError naming the member."""
    defaults = {"delivery_mode": DeliveryMode.NON_PERSISTENT if qos == 0 else DeliveryMode.PERSISTENT,
                "timestamp": now_ms}
    try:
        message = message_from_dict(load_json(payload, STRUCTURE), header_defaults=defaults)
    except MappingError as exc:
        raise _fail(exc.reason, exc.field) from None
    return message, ConversionReport()


# ------------------------------------------------------------------------------ reply addressing


def is_temporary(dest: Destination) -> bool:
    """A JMS TemporaryQueue/TemporaryTopic, written ``queue:///ID:...?temporary=true`` in the envelope."""
    return TEMPORARY in dest.options


def temporary(dest: Destination) -> Destination:
    """``dest`` marked as a JMS temporary destination."""
    return Destination(dest.kind, dest.name, dest.queue_manager, (*dest.options, TEMPORARY))


def allow_key(dest: Destination) -> str:
    """What allow prefixes match: ``queue://<name>``, ``topic://<name>``, or ``temp-queue://<name>`` /
    ``temp-topic://<name>`` for a temporary destination (a queue manager is not part of the match)."""
    return f"{'temp-' if is_temporary(dest) else ''}{dest.kind.value}://{dest.name}"


def allowed(dest: Destination, prefixes: tuple[str, ...]) -> bool:
    """Does ``allow_key(dest)`` start with one of ``prefixes``?"""
    key = allow_key(dest)
    return any(key.startswith(p) for p in prefixes)


def admitted(dest: Destination, prefixes: tuple[str, ...], structure: str = STRUCTURE,
             field: str = DESTINATION_FIELD) -> Destination:
    """``dest`` when one of a reply_to target's ``allow`` prefixes admits it; else MappingError naming
    ``structure`` and ``field`` (where the destination was read)."""
    if not allowed(dest, prefixes):
        raise MappingError(f"{dest.uri!r} is not an allowed reply destination (allow: {', '.join(prefixes)})",
                           structure=structure, field=field)
    return dest


def reply_destination(message: JmsMessage, prefixes: tuple[str, ...]) -> Destination | None:
    """The destination a reply envelope names, if ``prefixes`` allow it; None when it names none."""
    dest = message.headers.destination
    return None if dest is None else admitted(dest, prefixes)


def reply_choice(named: Destination | None, fallback: Destination | None, report: ConversionReport, *,
                 absent: str, structure: str = STRUCTURE, field: str = DESTINATION_FIELD) -> tuple[Destination, bool]:
    """Where a reply_to target sends (the envelope's JMSDestination, or an MQTT 5 responder's topic naming a
    JMSReplyTo URI): ``named``, already admitted, as the target's connector names it (a queue manager and URI
    options other than ``temporary`` are dropped findings), and whether it is temporary; else the route's
    ``fallback`` (a defaulted finding; ``absent`` says why none was named), else MappingError."""
    if named is None:
        if fallback is None:
            raise MappingError(f"{absent} and the route has no fallback queue or topic", structure=structure,
                               field=field)
        report.defaulted("JMSDestination", f"{absent}: the route's fallback {fallback.uri}")
        return fallback, False
    temp = is_temporary(named)
    if named.queue_manager or named.options != ((TEMPORARY,) if temp else ()):
        report.dropped("JMSDestination", f"{named.uri}: the route's connector sends to {named.name!r} on its own "
                                         "provider or queue manager, without URI options")
    return Destination(named.kind, named.name), temp
