"""Message-domain derivation for received JMS messages, and the output side's JMS message type choice.

Implements the Message Domain tables of WebSphere Message Broker docs "JMS message payload and appropriate
parser" and "Order of precedence for deriving the message domain" (``VALID_TYPES``, ``URI_DOMAINS``,
``CLASS_DEFAULTS``, the rules in ``derive_domain``), and "JMS message for output" (``output_body_type``).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from mappings.errors import MappingError
from mappings.jms.model import BodyType


class Domain(StrEnum):
    BLOB = "BLOB"
    XML = "XML"
    XMLNS = "XMLNS"
    XMLNSC = "XMLNSC"
    MRM = "MRM"
    JMSMAP = "JMSMap"
    JMSSTREAM = "JMSStream"
    MIME = "MIME"
    IDOC = "IDOC"


_B, _T, _M, _S, _O = BodyType.BYTES, BodyType.TEXT, BodyType.MAP, BodyType.STREAM, BodyType.OBJECT

#: Rule 1's "Message domain / Valid JMS message types" matrix ("Order of precedence for deriving the
#: message domain"). The base ``Message`` (jms_none, no payload) is in no row, so it is valid for no
#: configured domain (backed out): the documents leave it open.
VALID_TYPES: dict[Domain, frozenset[BodyType]] = {
    Domain.BLOB: frozenset({_B, _T, _O}),
    Domain.XML: frozenset({_T}),
    Domain.XMLNS: frozenset({_T}),
    Domain.XMLNSC: frozenset({_T}),
    Domain.MRM: frozenset({_B, _T}),
    Domain.JMSMAP: frozenset({_M}),
    Domain.JMSSTREAM: frozenset({_S}),
    Domain.MIME: frozenset({_B, _T}),
    Domain.IDOC: frozenset({_B, _T}),
}

#: Rule 3: "The message domain is set according to the JMS message Java Class". jms_none is ours (the
#: documents leave it open): BLOB with an empty bit stream.
CLASS_DEFAULTS: dict[BodyType, Domain] = {
    BodyType.TEXT: Domain.XML,
    BodyType.BYTES: Domain.BLOB,
    BodyType.MAP: Domain.JMSMAP,
    BodyType.STREAM: Domain.JMSSTREAM,
    BodyType.OBJECT: Domain.BLOB,
    BodyType.MESSAGE: Domain.BLOB,
}

#: Rule 2's table: the domains a JMSType URI may name.
URI_DOMAINS = {d.value.upper(): d for d in (Domain.MRM, Domain.XML, Domain.XMLNS, Domain.XMLNSC,
                                            Domain.IDOC, Domain.MIME)}


class Source(StrEnum):
    CONFIGURED = "configured"    # rule 1
    JMSTYPE = "JMSType"          # rule 2
    CLASS = "class"              # rule 3


@dataclass(frozen=True, slots=True)
class McdType:
    """A JMSType of the ``mcd://`` form. ``conforms`` is False only for a malformed ``mcd://MRM``."""

    domain: Domain
    message_set: str | None = None
    message_type: str | None = None
    message_format: str | None = None
    conforms: bool = True


@dataclass(frozen=True, slots=True)
class InputDomainConfig:
    """The JMSInput node's Message Domain, Set, Type and Format properties (domain None = blank)."""

    domain: Domain | None = None
    message_set: str | None = None
    message_type: str | None = None
    message_format: str | None = None


@dataclass(frozen=True, slots=True)
class DomainDecision:
    domain: Domain
    source: Source
    message_set: str | None = None
    message_type: str | None = None
    message_format: str | None = None
    note: str = ""


@dataclass(frozen=True, slots=True)
class BackOut:
    """The message is not valid for its domain: back it out (to the source or the backout destination)."""

    reason: str
    domain: Domain | None
    body_type: BodyType


def _segments_ok(parts: list[str], allowed: int) -> bool:
    """Parts after the domain: up to ``allowed`` values, with an optional empty last one (trailing /)."""
    if parts and parts[-1] == "":
        parts = parts[:-1]
    return len(parts) <= allowed and all(parts)


def parse_mcd_uri(jms_type: str | None) -> McdType | None:
    """Classify a JMSType by rule 2's URI table; None when it is not such a URI.

    A JMSType that is not an ``mcd://`` URI, or one that names another domain or has extra parts
    (``mcd://XML/extra``), "does not match this URI format" (None: rule 3 applies). A malformed
    ``mcd://MRM`` one gives ``conforms=False`` (handled in the BLOB domain).
    """
    if not jms_type or not jms_type[:6].lower() == "mcd://":
        return None
    rest = jms_type[6:]
    path, question, query = rest.partition("?")
    fmt: str | None = None
    if question:
        key, eq, fmt = query.partition("=")
        if key.lower() != "format" or not eq or not fmt:
            fmt = None
            query_ok = False
        else:
            query_ok = True
    else:
        query_ok = True
    name, slash, tail = path.partition("/")
    domain = URI_DOMAINS.get(name.upper())
    if domain is None:
        return None
    if domain is Domain.MRM:
        # mcd://MRM/[set]/[type]/[?format=fmt] — the type may contain '/' inside {namespace}. The slash after the
        # type is optional, also before ?format= : mcd://MRM/set/type?format=fmt is the JMSType the JMS <-> MQ
        # mapping gives an MQ message with Msd MRM (one URI rule, mappings.conversions.jms_mq.spec).
        message_set, _, message_type = tail.partition("/")
        message_type = message_type.removesuffix("/")
        if not (slash and message_set and message_type and query_ok):
            return McdType(Domain.MRM, conforms=False)
        return McdType(Domain.MRM, message_set, message_type, fmt)
    parts = tail.split("/") if slash else []
    if domain in (Domain.XML, Domain.XMLNS, Domain.MIME):
        if question or not _segments_ok(parts, 0):
            return None
        return McdType(domain)
    if domain is Domain.XMLNSC:
        if question or not _segments_ok(parts, 1):
            return None
        return McdType(domain, parts[0] if parts and parts[0] else None)
    # IDOC: mcd://IDOC/[set]/[?format=fmt]
    if not query_ok or not _segments_ok(parts, 1):
        return None
    return McdType(domain, parts[0] if parts and parts[0] else None, None, fmt)


def _check_valid(domain: Domain, body_type: BodyType, how: str) -> BackOut | None:
    if body_type in VALID_TYPES[domain]:
        return None
    if body_type is BodyType.MESSAGE:
        reason = f"a JMS Message without a payload is not valid for the {domain.value} domain {how}"
    else:
        valid = ", ".join(sorted(t.java_class for t in VALID_TYPES[domain]))
        reason = (f"{body_type.java_class} is not valid for the {domain.value} domain {how} "
                  f"(valid: {valid})")
    return BackOut(reason, domain, body_type)


def derive_domain(
    body_type: BodyType,
    jms_type: str | None,
    config: InputDomainConfig | None = None,
) -> DomainDecision | BackOut:
    """Apply the order of precedence for deriving the message domain to one received message.

    1. a configured Message Domain wins; the message's type must be valid for it (``VALID_TYPES``),
       otherwise the message is backed out (a ``BackOut`` value with the reason, never an exception);
    2. with no configured domain, a JMSType of the form ``mcd://DOMAIN/...`` (domain in any letter case)
       chooses the domain (same matrix, same back-out); an ``mcd://MRM`` JMSType that does not conform
       to ``mcd://MRM/[set]/[type]/[?format=fmt]`` is handled in the BLOB domain;
    3. otherwise the JMS message class decides (``CLASS_DEFAULTS``).

    A configured MRM domain needs a message set and type, from the configuration or else from an
    ``mcd://MRM/set/type`` JMSType ("If the message set, type, and format are not supplied in the
    JMSInput node then the JMSType header field must be set"); with neither, the message is backed out
    (a choice the documents leave open).
    """
    config = config or InputDomainConfig()
    if not isinstance(body_type, BodyType):
        raise MappingError(f"unknown body type {body_type!r}", structure="domain derivation")
    mcd = parse_mcd_uri(jms_type)
    if config.domain is not None:
        domain = config.domain
        backout = _check_valid(domain, body_type, "configured on the input")
        if backout:
            return backout
        if domain is Domain.MRM:
            m_set, m_type, m_fmt = config.message_set, config.message_type, config.message_format
            if not (m_set and m_type):
                if mcd is None or mcd.domain is not Domain.MRM or not mcd.conforms:
                    return BackOut("the MRM domain needs a message set and type: configure them or send "
                                   "JMSType mcd://MRM/set/type/", domain, body_type)
                m_set, m_type, m_fmt = m_set or mcd.message_set, m_type or mcd.message_type, (
                    m_fmt or mcd.message_format)
            return DomainDecision(domain, Source.CONFIGURED, m_set, m_type, m_fmt)
        return DomainDecision(domain, Source.CONFIGURED, config.message_set, config.message_type,
                              config.message_format)
    if mcd is not None:
        if not mcd.conforms:
            backout = _check_valid(Domain.BLOB, body_type, "(non-conforming mcd://MRM JMSType)")
            if backout:
                return backout
            return DomainDecision(Domain.BLOB, Source.JMSTYPE,
                                  note=f"JMSType {jms_type!r} does not conform to mcd://MRM/set/type/: BLOB")
        backout = _check_valid(mcd.domain, body_type, f"named by JMSType {jms_type!r}")
        if backout:
            return backout
        return DomainDecision(mcd.domain, Source.JMSTYPE, mcd.message_set, mcd.message_type,
                              mcd.message_format)
    note = "" if not jms_type else f"JMSType {jms_type!r} is not an mcd:// URI"
    return DomainDecision(CLASS_DEFAULTS[body_type], Source.CLASS, note=note)


# ---------------------------------------------------------------------------------- output side

#: Accepted Message_MetaData payload values. "jms_byte" is how the WMB V6.0 documentation spelled
#: jms_bytes; it is read (never written) for tolerance.
_PAYLOAD_VALUES = {t.payload_value: t for t in BodyType} | {"jms_byte": BodyType.BYTES}


def output_body_type(payload_type: str | None) -> tuple[BodyType, bool]:
    """The JMS message type the output side creates: (type, defaulted).

    "JMS message for output": "If the Message_MetaData folder is not present, the output node
    creates a BytesMessage by default." An empty value counts as absent; an unknown one is an error.
    """
    if payload_type is None or not payload_type.strip():
        return BodyType.BYTES, True
    body_type = _PAYLOAD_VALUES.get(payload_type.strip().lower())
    if body_type is None:
        allowed = ", ".join(t.payload_value for t in BodyType)
        raise MappingError(f"unknown payload type {payload_type!r} (expected one of {allowed})",
                           structure="Message_MetaData", field="PayloadType")
    return body_type, False
