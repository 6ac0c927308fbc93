"""The versioned conversion-log record schema shared by the bridge's writer and spark_audit (pure)."""
from __future__ import annotations

import functools
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from mappings.errors import MappingError
from mappings.report import Change, Finding

# Bump when a field is added, removed or changes meaning. Readers accept records with
# schema_version <= SCHEMA_VERSION and count newer ones as "future_version" (never crash).
# 2: ``retained`` added; ``qos`` of an egress record to MQTT is the QoS the route published (or delivered) at.
SCHEMA_VERSION = 2

STRUCTURE = "conversion log record"

# Parquet sidecars (docs/conversion-log.md, "Parquet sidecars"): the gateway writes each closed hour file
# X.jsonl once more as X.jsonl.parquet (bridge/convlog_parquet.py); the audit reads it instead of parsing X
# when its key-value metadata still describes X (spark_audit/sidecars.py). Bump SIDECAR_VERSION when the
# sidecar's layout or the meaning of its metadata changes; a reader ignores sidecars of another version.
SIDECAR_SUFFIX = ".parquet"
SIDECAR_VERSION = 1
META_SIDECAR_VERSION = "mqbridge.sidecar_version"
META_SCHEMA_VERSION = "mqbridge.schema_version"
META_SOURCE_NAME = "mqbridge.source_name"    # the JSON file's name (no directory)
META_SOURCE_BYTES = "mqbridge.source_bytes"  # its byte size when the sidecar was written
META_SOURCE_LINES = "mqbridge.source_lines"  # its lines (every one a record: one row each)


def sidecar_mismatch(meta: dict[str, str], rows: int, name: str, size: int) -> str | None:
    """Why a sidecar with key-value metadata ``meta`` and ``rows`` rows does not describe the hour file
    ``name`` of ``size`` bytes now (None: it does). The one rule for the gateway (write it again) and the
    audit (parse the JSON instead)."""
    if meta.get(META_SIDECAR_VERSION) != str(SIDECAR_VERSION):
        return f"sidecar version {meta.get(META_SIDECAR_VERSION)!r}, this audit reads {SIDECAR_VERSION}"
    if meta.get(META_SCHEMA_VERSION) != str(SCHEMA_VERSION):
        return f"schema version {meta.get(META_SCHEMA_VERSION)!r}, this audit's is {SCHEMA_VERSION}"
    if meta.get(META_SOURCE_NAME) != name:
        return f"written for {meta.get(META_SOURCE_NAME)!r}"
    if meta.get(META_SOURCE_BYTES) != str(size):
        return f"written when the file had {meta.get(META_SOURCE_BYTES)} bytes, it has {size} now"
    if meta.get(META_SOURCE_LINES) != str(rows):
        return f"{rows} rows for {meta.get(META_SOURCE_LINES)} lines"
    return None


class Direction(StrEnum):
    """Which side of the gateway a record describes."""

    INGRESS = "ingress"  # the message was taken from its source (MQTT publish in, MQGET, JMS receive)
    EGRESS = "egress"    # the converted message was handed to its target (MQPUT, STOMP SEND, MQTT deliver)


class Status(StrEnum):
    """Outcome of one conversion step."""

    OK = "ok"            # converted and accepted
    FAILED = "failed"    # conversion or delivery failed; `reason` says why
    BACKOUT = "backout"  # sent to the route's backout destination; `reason` says why
    DROPPED = "dropped"  # deliberately not delivered (no subscriber, QoS 0 overflow, selector); `reason`


class Protocol(StrEnum):
    """The three worlds mqbridge connects."""

    MQTT = "mqtt"
    MQ = "mq"
    JMS = "jms"


# Field kinds. spark_audit/schema.py maps each kind to exactly one Spark type.
INT = "int"              # 32-bit integer
LONG = "long"            # 64-bit integer
STRING = "string"
BOOL = "bool"
TIMESTAMP = "timestamp"  # JSON: ISO 8601 UTC with microseconds, "2026-11-22T03:00:00.123456Z"
FINDINGS = "findings"    # JSON: list of {"change", "name", "detail"} (mappings.report.Finding)

TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"        # strftime form written by to_json_line
# The timestamp forms a record may carry (read by from_dict and by the Spark audit alike, one grammar):
# ISO 8601 extended date (years 1900-2999) and time to the second, 'T' or a space between, an optional
# fraction of 1-6 digits, and a UTC offset, Z or +hh:mm / -hh:mm up to 18:00 (Java's range). Written
# without anchors: Python matches it whole (re.fullmatch), Spark's Java regex between ^ and \z.
TIMESTAMP_PATTERN = (r"(?:19|2[0-9])[0-9]{2}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?"
                     r"(?:Z|[+-](?:(?:0[0-9]|1[0-7]):[0-5][0-9]|18:00))")
_TIMESTAMP_RE = re.compile(TIMESTAMP_PATTERN)


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One field of the record: name, kind, whether it may be null, allowed values and meaning."""

    name: str
    kind: str
    required: bool
    doc: str
    enum: type[StrEnum] | None = None
    min_value: int | None = None
    max_value: int | None = None


FIELDS: tuple[FieldSpec, ...] = (
    FieldSpec("schema_version", INT, True, "Version of this schema the record was written with.",
              min_value=1),
    FieldSpec("event_time", TIMESTAMP, True, "When the step happened (UTC, microseconds)."),
    FieldSpec("gateway_id", STRING, True, "Which mqbridge instance wrote the record."),
    FieldSpec("message_key", STRING, True,
              "Ties a message's ingress record to its egress record(s); redeliveries keep the same key."),
    FieldSpec("route", STRING, True, "Name of the route (rules file) that converted the message."),
    FieldSpec("direction", STRING, True, "ingress (taken from the source) or egress (given to the target).",
              enum=Direction),
    FieldSpec("source_protocol", STRING, True, "Protocol the message came from.", enum=Protocol),
    FieldSpec("target_protocol", STRING, True, "Protocol the message goes to.", enum=Protocol),
    FieldSpec("source_type", STRING, True,
              "Source message type: MQTT 'publish', MQ format (MQSTR, MQHRF2, ' '), JMS TextMessage, ..."),
    FieldSpec("target_type", STRING, False,
              "Target message type; null when the conversion did not get there."),
    FieldSpec("qos", INT, True,
              "Delivery guarantee: MQTT QoS; for MQ/JMS 1 when persistent, 0 when not. An egress record to "
              "MQTT has the QoS the route published at (to one client: the QoS delivered to it).",
              min_value=0, max_value=2),
    FieldSpec("persistent", BOOL, False, "MQ/JMS persistence (MQTT: retained messages are not implied)."),
    FieldSpec("retained", BOOL, False,
              "The MQTT RETAIN flag of the publication a route took (from MQTT) or made (to MQTT); null when "
              "neither side is MQTT, and in records of schema version 1."),
    FieldSpec("priority", INT, False, "MQ/JMS priority 0-9; null for MQTT.", min_value=0, max_value=9),
    FieldSpec("source_size", LONG, True, "Payload bytes as received.", min_value=0),
    FieldSpec("target_size", LONG, False, "Payload bytes as sent; null when nothing was sent.", min_value=0),
    FieldSpec("status", STRING, True, "ok, failed, backout or dropped.", enum=Status),
    FieldSpec("reason", STRING, False, "Why the status is not ok (required then); null when ok."),
    FieldSpec("findings", FINDINGS, True,
              "What the conversion dropped, coerced, truncated, defaulted or renamed."),
    FieldSpec("latency_us", LONG, False, "Egress only: microseconds from the ingress record to this one.",
              min_value=0),
    FieldSpec("client_id", STRING, False,
              "MQTT client id (publisher on ingress, subscriber on egress) or JMS/MQ application id."),
    FieldSpec("destination", STRING, False, "Topic, queue or JMS destination on this record's side."),
    FieldSpec("redelivery_count", INT, True,
              "0 on first delivery; MQTT DUP / MQ BackoutCount / JMSXDeliveryCount-1 on redeliveries.",
              min_value=0),
)

FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in FIELDS)
FIELDS_BY_NAME: dict[str, FieldSpec] = {f.name: f for f in FIELDS}
FINDING_KEYS: tuple[str, ...] = ("change", "name", "detail")


class RecordError(MappingError):
    """A conversion-log record is invalid; ``field`` names the offending field."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(message, structure=STRUCTURE, field=field_name)


def format_timestamp(value: datetime) -> str:
    """Render an aware datetime as the log's UTC timestamp string."""
    return value.astimezone(UTC).strftime(TIMESTAMP_FORMAT)


def parse_timestamp(value: str) -> datetime:
    """Parse a timestamp of the log's grammar (TIMESTAMP_PATTERN) into an aware UTC datetime."""
    if _TIMESTAMP_RE.fullmatch(value) is None:
        if _TIMESTAMP_RE.fullmatch(value + "Z") is not None:
            raise ValueError("timestamp has no UTC offset")
        raise ValueError("not of the form 2026-11-22T03:00:00[.ffffff](Z|+hh:mm)")
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)


def _check_value(spec: FieldSpec, value: Any) -> Any:  # noqa: ANN401 - values are JSON-typed
    """Validate and normalise one JSON value against its field spec."""
    if value is None:
        if spec.required:
            raise RecordError(spec.name, "is required")
        return None
    if spec.kind in (INT, LONG):
        if isinstance(value, bool) or not isinstance(value, int):
            raise RecordError(spec.name, f"must be an integer, got {type(value).__name__}")
        bits = 31 if spec.kind == INT else 63
        if not -(2**bits) <= value < 2**bits:
            raise RecordError(spec.name, f"{value} does not fit a {spec.kind}")
        if spec.min_value is not None and value < spec.min_value:
            raise RecordError(spec.name, f"{value} is below {spec.min_value}")
        if spec.max_value is not None and value > spec.max_value:
            raise RecordError(spec.name, f"{value} is above {spec.max_value}")
        return value
    if spec.kind == BOOL:
        if not isinstance(value, bool):
            raise RecordError(spec.name, f"must be true or false, got {type(value).__name__}")
        return value
    if spec.kind == STRING:
        if not isinstance(value, str):
            raise RecordError(spec.name, f"must be a string, got {type(value).__name__}")
        if spec.enum is not None:
            try:
                return spec.enum(value)
            except ValueError:
                allowed = ", ".join(m.value for m in spec.enum)
                raise RecordError(spec.name, f"{value!r} is not one of {allowed}") from None
        return value
    if spec.kind == TIMESTAMP:
        if isinstance(value, datetime):
            if value.tzinfo is None:
                raise RecordError(spec.name, "datetime must be timezone-aware")
            return value.astimezone(UTC)
        if not isinstance(value, str):
            raise RecordError(spec.name, f"must be an ISO 8601 string, got {type(value).__name__}")
        try:
            return parse_timestamp(value)
        except ValueError as exc:
            raise RecordError(spec.name, f"{value!r} is not an ISO 8601 UTC timestamp ({exc})") from None
    if spec.kind == FINDINGS:
        return _check_findings(spec.name, value)
    raise RecordError(spec.name, f"unknown field kind {spec.kind!r}")  # pragma: no cover - FIELDS is fixed


def _check_findings(name: str, value: Any) -> tuple[Finding, ...]:  # noqa: ANN401
    """Validate the findings list: each item a Finding or a {change, name, detail} mapping."""
    if not isinstance(value, list | tuple):
        raise RecordError(name, f"must be a list, got {type(value).__name__}")
    out: list[Finding] = []
    for i, item in enumerate(value):
        where = f"{name}[{i}]"
        if isinstance(item, Finding):
            out.append(item)
            continue
        if not isinstance(item, Mapping):
            raise RecordError(where, f"must be an object, got {type(item).__name__}")
        extra = set(item) - set(FINDING_KEYS)
        if extra:
            raise RecordError(f"{where}.{sorted(extra)[0]}", "is not a finding field")
        try:
            change = Change(item.get("change"))
        except ValueError:
            allowed = ", ".join(c.value for c in Change)
            raise RecordError(f"{where}.change", f"{item.get('change')!r} is not one of {allowed}") from None
        fname, detail = item.get("name"), item.get("detail", "")
        if not isinstance(fname, str) or not fname:
            raise RecordError(f"{where}.name", "must be a non-empty string")
        if not isinstance(detail, str):
            raise RecordError(f"{where}.detail", "must be a string")
        out.append(Finding(change, fname, detail))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class ConversionRecord:
    """One conversion step as written to the log (one JSON line)."""

    event_time: datetime
    gateway_id: str
    message_key: str
    route: str
    direction: Direction
    source_protocol: Protocol
    target_protocol: Protocol
    source_type: str
    qos: int
    source_size: int
    status: Status
    target_type: str | None = None
    persistent: bool | None = None
    retained: bool | None = None
    priority: int | None = None
    target_size: int | None = None
    reason: str | None = None
    findings: tuple[Finding, ...] = field(default_factory=tuple)
    latency_us: int | None = None
    client_id: str | None = None
    destination: str | None = None
    redelivery_count: int = 0
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        for spec in FIELDS:
            normalised = _check_value(spec, getattr(self, spec.name))
            if normalised is not getattr(self, spec.name):
                object.__setattr__(self, spec.name, normalised)
        if self.schema_version > SCHEMA_VERSION:
            raise RecordError("schema_version", f"{self.schema_version} is newer than {SCHEMA_VERSION}")
        if self.status is not Status.OK and not self.reason:
            raise RecordError("reason", f"is required when status is {self.status.value}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict with every field present (nulls explicit), in FIELDS order."""
        out: dict[str, Any] = {}
        for spec in FIELDS:
            value = getattr(self, spec.name)
            if spec.kind == TIMESTAMP:
                value = format_timestamp(value)
            elif spec.kind == FINDINGS:
                value = [f.as_dict() for f in value]
            elif isinstance(value, StrEnum):
                value = value.value
            out[spec.name] = value
        return out

    def to_json_line(self) -> str:
        """The record as one compact JSON line, terminated by a newline."""
        return json.dumps(self.to_dict(), separators=(",", ":"), ensure_ascii=False) + "\n"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ConversionRecord:
        """Validate a decoded JSON object; raises RecordError naming the first bad field."""
        if not isinstance(data, Mapping):
            raise RecordError("<record>", f"must be a JSON object, got {type(data).__name__}")
        unknown = [k for k in data if k not in FIELDS_BY_NAME]
        version = data.get("schema_version")
        if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
            raise RecordError("schema_version", f"{version} is newer than {SCHEMA_VERSION}")
        if unknown:
            raise RecordError(unknown[0], f"is not a field of schema version {SCHEMA_VERSION}")
        values = {spec.name: _check_value(spec, data.get(spec.name)) for spec in FIELDS}
        return cls(**values)

    @classmethod
    def from_json_line(cls, line: str) -> ConversionRecord:
        """Decode and validate one JSON line."""
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RecordError("<line>", f"not valid JSON: {exc.msg} at column {exc.colno}") from None
        return cls.from_dict(data)


def _split_seconds(seconds: float) -> tuple[int, int]:
    """A unix time as whole seconds and microseconds, rounded as every timestamp of the log is."""
    whole = int(seconds // 1)
    micros = round((seconds - whole) * 1_000_000)   # round() of a float is an int already
    if micros == 1_000_000:
        whole, micros = whole + 1, 0
    return whole, micros


def epoch_timestamp(seconds: float) -> str:
    """The log's UTC timestamp string for a unix time (same text as format_timestamp)."""
    whole, micros = _split_seconds(seconds)
    return _second_text(whole) + f".{micros:06d}Z"


def epoch_micros(seconds: float) -> int:
    """The instant ``epoch_timestamp(seconds)`` writes, in microseconds since the epoch (the Parquet value)."""
    whole, micros = _split_seconds(seconds)
    return whole * 1_000_000 + micros


@functools.lru_cache(maxsize=4)
def _second_text(whole: int) -> str:  # records come in bursts within one second: format it once
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))


# what json.dumps(..., separators=(",", ":"), ensure_ascii=False) builds on every call, built once
_LINE_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def trusted_json_line(values: Mapping[str, Any]) -> str:
    """The writer's fast path: one record as a JSON line, in FIELDS order, without re-validating.

    For values the gateway built itself from typed data: ``event_time`` as a unix time (float),
    enums as their string values, ``findings`` as Finding objects. The text is identical to
    ``ConversionRecord(...).to_json_line()`` for the same values (a test holds the two together);
    readers still validate every line (ConversionRecord.from_json_line, spark_audit's schema).
    """
    out: dict[str, Any] = {}
    for name in FIELD_NAMES:
        value = values.get(name)
        if name == "event_time":
            value = epoch_timestamp(value)  # type: ignore[arg-type]
        elif name == "findings":
            value = [f.as_dict() for f in value] if value else []
        elif name == "schema_version":
            value = SCHEMA_VERSION
        out[name] = value
    return _LINE_ENCODER.encode(out) + "\n"


def _encode_int(value: int | None) -> str:
    return "null" if value is None else str(int(value))


def _encode_string(value: str | None) -> str:
    return "null" if value is None else _LINE_ENCODER.encode(value)


def _encode_findings(value: Any) -> str:  # noqa: ANN401 - a sequence of Finding
    return _LINE_ENCODER.encode([f.as_dict() for f in value] if value else [])


def _encode_any(value: Any) -> str:  # noqa: ANN401 - bool or None
    return _LINE_ENCODER.encode(value)


_VARIABLE_ENCODERS = {TIMESTAMP: lambda t: json_timestamp(t), INT: _encode_int, LONG: _encode_int,
                      STRING: _encode_string, FINDINGS: _encode_findings, BOOL: _encode_any}


class LineTemplate:
    """``trusted_json_line`` for many records that share most of their values: the fields in ``fixed``
    are rendered once, and ``render`` encodes only the ``variable`` ones (given in FIELDS order).

    The router's two records per message differ from the message before mostly in event time, key
    and sizes; rendering the rest once per route/client/topic saves most of the line's cost. The text
    is identical to ``trusted_json_line({**fixed, **variable})`` (tests/test_convlog_fast_path.py)."""

    __slots__ = ("variable", "values", "_literals", "_encoders", "slots")

    def __init__(self, fixed: Mapping[str, Any], variable: tuple[str, ...]) -> None:
        unknown = [n for n in (*fixed, *variable) if n not in FIELDS_BY_NAME]
        if unknown:
            raise RecordError(unknown[0], "not a field of the conversion log record")
        self.variable = tuple(n for n in FIELD_NAMES if n in variable)
        if self.variable != variable:
            raise RecordError(variable[0], f"variable fields must be given in schema order: {self.variable}")
        whole = json.loads(trusted_json_line({"event_time": 0.0, **fixed}))   # the fixed values' JSON
        self.values: dict[str, Any] = whole   # each field as a reader gets it (variable: placeholders)
        literals: list[str] = []
        pending = "{"
        for name in FIELD_NAMES:
            sep = "" if name == FIELD_NAMES[0] else ","
            if name in variable:
                literals.append(f"{pending}{sep}{_LINE_ENCODER.encode(name)}:")
                pending = ""
            else:
                pending += f"{sep}{_LINE_ENCODER.encode(name)}:{_LINE_ENCODER.encode(whole[name])}"
        literals.append(pending + "}\n")
        self._finish(tuple(literals))

    def _finish(self, literals: tuple[str, ...]) -> None:
        """What follows from the variable fields and the literal texts (also for an unpickled template)."""
        self._literals = literals
        self._encoders = tuple(_VARIABLE_ENCODERS[FIELDS_BY_NAME[n].kind] for n in self.variable)
        # literals with a None slot between each two: render fills the slots (one slice assignment) and
        # joins; a %-format of the ~500-character line parsed its format on every call, 4x slower
        # (bridge.convlog.render_lines fills a copy itself: the variable fields' texts go to slots[1::2])
        self.slots: list[str | None] = [part for lit in literals[:-1] for part in (lit, None)] + [literals[-1]]

    def __getstate__(self) -> tuple[tuple[str, ...], dict[str, Any], tuple[str, ...]]:
        """Pickled as its fields and literal texts (the encoders are functions of the fields' kinds): the
        conversion log process renders the gateway's templates as they were made (bridge/convlog_process)."""
        return self.variable, self.values, self._literals

    def __setstate__(self, state: tuple[tuple[str, ...], dict[str, Any], tuple[str, ...]]) -> None:
        self.variable, self.values, literals = state
        self._finish(literals)

    def render(self, *values: Any) -> str:  # noqa: ANN401 - JSON-typed values of the variable fields
        """The line with the variable fields set to ``values`` (in the order of ``variable``)."""
        return self.render_encoded(*(encode(value) for encode, value in zip(self._encoders, values, strict=True)))

    def render_encoded(self, *texts: str) -> str:
        """``render`` for values the caller already wrote as JSON text (``json_timestamp``,
        ``json_string``, ``str`` of an int): the hot path, where a batch shares its egress time."""
        parts = self.slots.copy()
        parts[1::2] = texts   # ValueError unless one text per variable field
        return "".join(parts)  # type: ignore[arg-type]  # every None slot was just filled


_last_second: tuple[int, str] = (-1, "")


def json_timestamp(seconds: float) -> str:
    """An ``event_time`` value as JSON text: ``'"' + epoch_timestamp(seconds) + '"'`` (tested), with the
    text of the last whole second kept (records come in bursts within one second)."""
    global _last_second
    whole, micros = _split_seconds(seconds)
    last = _last_second
    if last[0] != whole:
        last = _last_second = (whole, f'"{_second_text(whole)}.')
    return f'{last[1]}{micros:06d}Z"'


json_string = json.encoder.encode_basestring   # a str as JSON text, as _LINE_ENCODER (ensure_ascii off) writes it
