"""`mqbridge convert --from mqtt --to mq` and `--from mq --to mqtt`: the MQTT <-> MQ entries of the convert
table, per IBM WebSphere MQ Telemetry docs "Integration of WebSphere MQ Telemetry with queue managers"
(MQ Telemetry Tables 1-3 one way, Tables 4-5 the other; mappings.conversions.mqtt_mq)."""
from __future__ import annotations

import argparse
from collections.abc import Iterable

from bridge.cli.mapping_input import (
    ConvertEntry,
    ConvertResult,
    publication_as_dict,
    read_mq_message,
    read_mqtt_publication,
)
from mappings.conversions.mqtt_mq import MqToMqttOptions, MqttToMqEncoder, MqttToMqOptions, UserIdSource, mq_to_mqtt
from mappings.mq.message import decode_message, message_as_dict


def _mqtt_to_mq(raw: bytes, name: str, args: argparse.Namespace) -> ConvertResult:
    pub = read_mqtt_publication(raw, name, args)
    options = MqttToMqOptions(
        user_id_source=UserIdSource(args.user_id_source), configured_user_id=args.configured_user_id or "",
        encoding=args.encoding, mqmd_version=args.mqmd_version, reply_to_queue=args.reply_to_queue,
    )
    data, report = MqttToMqEncoder(options).encode(pub)
    return ConvertResult(report=report, data=data, document=message_as_dict(decode_message(data)))


def _mq_to_mqtt(raw: bytes, name: str, args: argparse.Namespace) -> ConvertResult:
    msg = read_mq_message(raw, name)
    options = MqToMqttOptions(default_qos=args.default_qos, fallback_topic=args.fallback_topic)
    allocated = args.allocate_packet_id
    pub, report = mq_to_mqtt(msg, subscriber_qos=args.subscriber_qos, options=options,
                             packet_id_allocator=(lambda: allocated) if allocated is not None else None)
    return ConvertResult(report=report, document=publication_as_dict(pub), notes=msg.notes)


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("MQTT input (--from mqtt); flags override the description")
    g.add_argument("--raw", action="store_true", help="INPUT is the raw payload, not a JSON/YAML description")
    g.add_argument("--topic")
    g.add_argument("--qos", type=int, choices=[0, 1, 2])
    g.add_argument("--retain", action="store_true")
    g.add_argument("--packet-id", type=int, help="packet id for QoS 1/2 (default 1)")
    g.add_argument("--client-id")
    g.add_argument("--username")
    g = p.add_argument_group("MQTT -> MQ (MQ Telemetry Tables 1-3)")
    g.add_argument("--user-id-source", choices=[s.value for s in UserIdSource], default="client_id",
                   help="what goes into MQMD.UserIdentifier (MQ Telemetry Table 1)")
    g.add_argument("--configured-user-id", help="the id for --user-id-source configured")
    g.add_argument("--encoding", type=int, choices=[273, 546], default=546,
                   help="MQMD.Encoding: 546 little-endian (x86 native), 273 big-endian")
    g.add_argument("--mqmd-version", type=int, choices=[1, 2], default=1)
    g.add_argument("--reply-to-queue", metavar="QUEUE",
                   help="MQMD.ReplyToQ when the MQTT 5 Response Topic is a topic (docs/mqtt5-mq.md)")
    g = p.add_argument_group("MQ -> MQTT (MQ Telemetry Tables 4-5)")
    g.add_argument("--subscriber-qos", type=int, choices=[0, 1, 2],
                   help="QoS of the matching subscription (omit for an unsolicited message)")
    g.add_argument("--default-qos", type=int, choices=[0, 1, 2], default=2,
                   help="QoS for unsolicited messages (a DEFAULT.QoS subscription)")
    g.add_argument("--fallback-topic", help="topic when the message has no mqps/Top")
    g.add_argument("--allocate-packet-id", type=int, metavar="N",
                   help="packet id to use when the last 2 bytes of MsgId are 0")



def entries() -> Iterable[ConvertEntry]:
    return [
        ConvertEntry("mqtt", "mq", _mqtt_to_mq, "MQTT publication -> MQ message bytes (MQ Telemetry Tables 1-3; "
                     "MQTT 5 properties: docs/mqtt5-mq.md)"),
        ConvertEntry("mq", "mqtt", _mq_to_mqtt, "MQ message -> MQTT publication (MQ Telemetry Tables 4-5)"),
    ]
