"""`mqbridge convert --from mqtt --to jms` and `--from jms --to mqtt`: the MQTT <-> JMS entries of the
convert table (Eclipse Amlen docs "Conversion between MQTT and JMS": its table and property rules; the
informational properties of SwiftMQ docs "MQTT Swiftlet"). JMS messages are read and written in the JMS
message JSON form (docs/json-forms.md)."""
from __future__ import annotations

import argparse
from collections.abc import Iterable

from bridge.cli.mapping_input import (
    ConvertEntry,
    ConvertResult,
    InputError,
    load_description,
    now_ms,
    publication_as_dict,
    read_mqtt_publication,
)
from mappings.conversions.mqtt_jms import SWIFTMQ_NAMES, ConvertMessageType, jms_to_mqtt, mqtt_to_jms
from mappings.jms.message_json import message_from_dict, message_to_dict


def _mqtt_to_jms(raw: bytes, name: str, args: argparse.Namespace) -> ConvertResult:
    pub = read_mqtt_publication(raw, name, args)
    jms, report = mqtt_to_jms(pub, convert=ConvertMessageType(getattr(args, "convert_message_type", "auto")),
                              info=None if getattr(args, "no_info_properties", False) else SWIFTMQ_NAMES,
                              now_ms=now_ms(args))
    return ConvertResult(report=report, document=message_to_dict(jms))


def _jms_to_mqtt(raw: bytes, name: str, args: argparse.Namespace) -> ConvertResult:
    data, _text = load_description(raw, name)
    if not isinstance(data, dict):
        raise InputError(f"{name}: expected a JSON/YAML object describing the JMS message (headers, properties, body)")
    message = message_from_dict(data)
    pub, report = jms_to_mqtt(message, topic=getattr(args, "topic", None), now_ms=now_ms(args))
    doc = publication_as_dict(pub)
    return ConvertResult(report=report, data=pub.payload, document=doc, data_is_payload=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("MQTT <-> JMS (Eclipse Amlen docs \"Conversion between MQTT and JMS\")")
    g.add_argument("--convert-message-type", choices=[c.value for c in ConvertMessageType], default="auto",
                   help="MQTT -> JMS body type: auto (text when valid UTF-8 without control bytes), text, bytes")
    g.add_argument("--no-info-properties", action="store_true",
                   help="MQTT -> JMS: leave out JMSXUserID / client id / publisher QoS properties")


def entries() -> Iterable[ConvertEntry]:
    return [
        ConvertEntry("mqtt", "jms", _mqtt_to_jms, "MQTT publication -> JMS message JSON (Text or Bytes, amlen rules)"),
        ConvertEntry("jms", "mqtt", _jms_to_mqtt, "JMS message JSON -> MQTT publication (Map/Stream -> JSON payload)"),
    ]
