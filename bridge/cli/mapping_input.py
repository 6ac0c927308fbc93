"""What the `mqbridge convert` entries share: reading their input (JSON/YAML descriptions with errors that
name the file, line and field; MQTT publications; MQ message bytes from a message file, a hex dump or a
description), the form of a result (:class:`ConvertResult`), and the entry type of the convert table."""
from __future__ import annotations

import argparse
import base64
import binascii
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mappings.mq import constants as C
from mappings.mq.message import MqMessage, decode_message, encode_message, message_from_dict
from mappings.mq.mqmd import Mqmd
from mappings.mqtt.publication import MqttPublication
from mappings.report import ConversionReport
from mappings.rules.yaml_lines import line_of


class InputError(Exception):
    """The input file or its description is unusable (message names the file, line and field)."""


@dataclass(frozen=True, slots=True)
class ConvertResult:
    """``data``: wire bytes (printed as a hex dump or written with --out); ``document``: JSON-able
    description of the result (printed, or written with --out when there are no bytes). With
    ``data_is_payload`` the bytes are only an MQTT payload, which ``document`` already shows (as text
    when UTF-8, else hex): the readable output prints the document, --out still writes the bytes."""

    report: ConversionReport
    data: bytes | None = None
    document: dict[str, Any] | None = None
    notes: tuple[str, ...] = ()
    data_is_payload: bool = False


@dataclass(frozen=True, slots=True)
class ConvertEntry:
    """One conversion of the `mqbridge convert` table: ``--from source --to target`` runs ``run``."""

    source: str
    target: str
    run: Callable[[bytes, str, argparse.Namespace], ConvertResult]   # (input bytes, input name, args)
    help: str = ""


def now_ms(args: argparse.Namespace) -> int:
    """The conversion's clock: --now-ms, else the system clock (the bridge owns clocks; mappings do not)."""
    given = getattr(args, "now_ms", None)
    return int(given) if given is not None else time.time_ns() // 1_000_000


# --------------------------------------------------------------------------------------------------
# Reading descriptions (JSON or YAML), errors with file line and field
# --------------------------------------------------------------------------------------------------
#: the keys of `mqbridge convert --json` output, which is accepted as input again (its "result", or for an
#: MQ message its exact bytes, "hex")
CONVERT_OUTPUT_KEYS = frozenset({"result", "report", "hex", "notes"})


def _is_convert_output(data: Any) -> bool:
    return isinstance(data, dict) and "result" in data and "report" in data and CONVERT_OUTPUT_KEYS.issuperset(data)


def _parse(text: str, name: str) -> Any:
    """JSON text with a JSON parser (YAML 1.1 would read 1e308 or 1e+16 as strings), anything else as YAML."""
    if text.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            json_error = f"{name}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}"
        try:
            return yaml.safe_load(text)   # YAML flow style that is not JSON (e.g. unquoted keys)
        except yaml.YAMLError:
            raise InputError(json_error) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark else name
        raise InputError(f"{where}: not valid JSON/YAML: {getattr(exc, 'problem', exc)}") from None


def load_text(raw: bytes, name: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{name}: not UTF-8 text at byte {exc.start} (use --raw for a raw payload)"
                         ) from None


def load_description(raw: bytes, name: str) -> tuple[Any, str]:
    """Parse JSON/YAML text; returns (data, text). The output of `convert --json` stands for its result."""
    text = load_text(raw, name)
    data = _parse(text, name)
    if _is_convert_output(data):
        data = data["result"]
    return data, text


def validation_message(exc: ValidationError, text: str, name: str) -> str:
    lines = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        line = line_of(text, loc)
        where = f"{name}:{line}" if line else name
        lines.append(f"{where}: {'.'.join(str(p) for p in loc) or '(top level)'}: {err['msg']}")
    return "\n".join(lines)


class MqttDescription(BaseModel):
    """An MQTT publication as a user writes it for `convert --from mqtt` (JSON or YAML)."""

    model_config = ConfigDict(extra="forbid")

    topic: str | None = None
    payload: str | None = Field(None, description="payload as UTF-8 text")
    payload_hex: str | None = None
    payload_base64: str | None = None
    qos: int = Field(0, ge=0, le=2)
    retain: bool = False
    dup: bool = False
    packet_id: int | None = Field(None, ge=1, le=65535)
    client_id: str | None = None
    username: str | None = None
    payload_format_indicator: int | None = Field(None, ge=0, le=1)
    content_type: str | None = None
    response_topic: str | None = None
    correlation_data_hex: str | None = None
    user_properties: list[tuple[str, str]] = Field(default_factory=list)
    message_expiry_interval: int | None = Field(None, ge=0)


def _decode_payload(desc: MqttDescription, name: str) -> bytes:
    given = [k for k in ("payload", "payload_hex", "payload_base64") if getattr(desc, k) is not None]
    if len(given) > 1:
        raise InputError(f"{name}: give only one of payload, payload_hex, payload_base64 (got {given})")
    try:
        if desc.payload_hex is not None:
            return bytes.fromhex(desc.payload_hex)
        if desc.payload_base64 is not None:
            return base64.b64decode(desc.payload_base64, validate=True)
    except (ValueError, binascii.Error) as exc:
        raise InputError(f"{name}: {given[0]}: {exc}") from None
    return (desc.payload or "").encode("utf-8", "surrogatepass")


def read_mqtt_publication(raw: bytes, name: str, args: argparse.Namespace) -> MqttPublication:
    """A publication from a description (default) or raw payload bytes (--raw); flags override fields."""
    if getattr(args, "raw", False):
        desc = MqttDescription()
        payload = raw
    else:
        data, text = load_description(raw, name)
        if not isinstance(data, dict):
            raise InputError(f"{name}: expected a JSON/YAML object describing the publication")
        try:
            desc = MqttDescription.model_validate(data)
        except ValidationError as exc:
            raise InputError(validation_message(exc, text, name)) from None
        payload = _decode_payload(desc, name)
    overrides = {k: getattr(args, k) for k in ("topic", "qos", "packet_id", "client_id", "username")
                 if getattr(args, k, None) is not None}
    if getattr(args, "retain", False):
        overrides["retain"] = True
    values = desc.model_dump()
    values.update(overrides)
    topic = values["topic"]
    if not topic:
        raise InputError(f"{name}: no topic (give 'topic' in the description or --topic)")
    qos = values["qos"]
    packet_id = values["packet_id"]
    if qos and packet_id is None:
        packet_id = 1  # a CLI convenience: QoS 1/2 needs a packet id; documented in --help
    corr = None
    if desc.correlation_data_hex is not None:
        try:
            corr = bytes.fromhex(desc.correlation_data_hex)
        except ValueError as exc:
            raise InputError(f"{name}: correlation_data_hex: {exc}") from None
    return MqttPublication(
        topic=topic, payload=payload, qos=qos, retain=values["retain"], dup=values["dup"],
        packet_id=packet_id if qos else None, client_id=values["client_id"], username=values["username"],
        payload_format_indicator=desc.payload_format_indicator, content_type=desc.content_type,
        response_topic=desc.response_topic, correlation_data=corr,
        user_properties=tuple((k, v) for k, v in desc.user_properties),
        message_expiry_interval=desc.message_expiry_interval,
    )


_HEX_DIGITS = frozenset(b"0123456789abcdefABCDEF")
#: StrucId of a header that can start message data -> (Format if Version is this, version)
HEADER_STRUC_IDS: dict[bytes, tuple[tuple[int, str], ...]] = {
    b"RFH ": ((2, C.MQFMT_RF_HEADER_2), (1, C.MQFMT_RF_HEADER)),
    b"MDE ": ((2, C.MQFMT_MD_EXTENSION),),
    b"DLH ": ((1, C.MQFMT_DEAD_LETTER_HEADER),),
}


def data_context(data: bytes, *, fmt: str | None = None, encoding: int | None = None,
                 ccsid: int | None = None) -> Mqmd:
    """The MQMD to read message data that has no MQMD of its own (e.g. a saved RFH2 + body).

    Unless given, Format and Encoding are guessed from the first header's StrucId and the byte order
    in which its Version field reads as a valid version (a guess only: a real MQMD says it).
    """
    guessed_fmt, guessed_enc = C.MQFMT_NONE, C.MQENC_NATIVE
    for version, header_fmt in HEADER_STRUC_IDS.get(bytes(data[:4]), ()):
        raw = bytes(data[4:8])
        if len(raw) == 4 and version in (int.from_bytes(raw, "big"), int.from_bytes(raw, "little")):
            guessed_fmt = header_fmt
            guessed_enc = C.MQENC_NORMAL if int.from_bytes(raw, "big") == version else C.MQENC_REVERSED
            break
    return Mqmd(format=fmt if fmt is not None else guessed_fmt,
                encoding=encoding if encoding is not None else guessed_enc,
                coded_char_set_id=ccsid if ccsid is not None else C.CCSID_UTF8)


def mq_message_bytes(raw: bytes, name: str) -> bytes:
    """Message-file bytes from a message file (binary, starting 'MD  '), a hex dump of one, or a
    JSON/YAML description (encoded)."""
    if raw.startswith(b"MD  ") or raw[:4] in HEADER_STRUC_IDS:
        return raw
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        decode_message(raw)  # binary but not an MQMD: the decoder says what is wrong (StrucId ...)
        return raw
    compact = b"".join(raw.split())
    if compact and len(compact) % 2 == 0 and _HEX_DIGITS.issuperset(compact):
        return bytes.fromhex(compact.decode())
    data = _parse(load_text(raw, name), name)
    if _is_convert_output(data):
        if isinstance(data.get("hex"), str):
            return mq_message_bytes(data["hex"].encode(), name)   # the exact bytes of that conversion
        data = data["result"]
    return encode_message(message_from_dict(data))


def read_mq_message(raw: bytes, name: str) -> MqMessage:
    """The message in a message file, a hex dump of one, or a JSON/YAML description."""
    return decode_message(mq_message_bytes(raw, name))


def publication_as_dict(pub: MqttPublication) -> dict[str, Any]:
    """A publication as JSON: payload as text when it is UTF-8, else ``payload_hex``; the MQTT 5
    properties only when the conversion set them (the built-in broker delivers MQTT 3.1.1 without them)."""
    out: dict[str, Any] = {"topic": pub.topic, "qos": pub.qos, "retain": pub.retain, "dup": pub.dup,
                           "packet_id": pub.packet_id, "client_id": pub.client_id}
    try:
        out["payload"] = pub.payload.decode("utf-8")
    except UnicodeDecodeError:
        out["payload_hex"] = pub.payload.hex().upper()
    mqtt5: dict[str, Any] = {
        "payload_format_indicator": pub.payload_format_indicator, "content_type": pub.content_type,
        "response_topic": pub.response_topic,
        "correlation_data_hex": None if pub.correlation_data is None else pub.correlation_data.hex().upper(),
        "message_expiry_interval": pub.message_expiry_interval,
        "user_properties": [list(p) for p in pub.user_properties] or None,
    }
    out.update((k, v) for k, v in mqtt5.items() if v is not None)
    return out
