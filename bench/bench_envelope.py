"""Benchmark: what options.mqtt_format envelope costs per message against the payload form, both ways
(public API of mappings.conversions: envelope, mqtt_jms, jms_mq and mqtt_mq only).

Run: .venv/bin/python bench/bench_envelope.py [--rounds 7] [--count 10000]
Each pair (payload form, envelope form) is measured in alternating rounds, back to back, so that load
from other processes hits both alike; prints conversions per CPU second of this process (best round)
and the envelope/payload ratio as a Markdown table. Results go to bench/README.md by hand.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mappings.conversions.envelope import envelope_payload, envelope_qos, read_envelope  # noqa: E402
from mappings.conversions.jms_mq import jms_to_mq_bytes  # noqa: E402
from mappings.conversions.mqtt_jms import jms_to_mqtt, mqtt_to_jms  # noqa: E402
from mappings.conversions.mqtt_mq import MqttToMqEncoder, MqttToMqOptions  # noqa: E402
from mappings.jms.model import (  # noqa: E402
    Destination,
    JmsHeaders,
    JmsMessage,
    MapBody,
    TextBody,
    TypedMap,
    jdouble,
    jint,
    jstring,
)
from mappings.mqtt.publication import MqttPublication  # noqa: E402

NOW = 1_700_000_000_000
PROPS = TypedMap([("region", jstring("eu")), ("qty", jint(3)), ("price", jdouble(12.5)), ("sku", jstring("A-1"))],
                 what="property")
HEADERS = JmsHeaders(destination=Destination.queue("PRICE.REQ"), message_id="ID:host-1-2:1:1:1:1",
                     reply_to=Destination.queue("PRICE.REPLY.app1"), type="quote", timestamp=NOW)
TEXT = JmsMessage(HEADERS, PROPS, TextBody("price A-1?"))
MAP = JmsMessage(HEADERS, PROPS, MapBody(TypedMap([(f"k{i}", jint(i) if i % 2 else jstring(f"v{i}"))
                                                   for i in range(10)])))
REPLY = json.dumps({"headers": {"JMSCorrelationID": "ID:" + "ab" * 24, "JMSDestination": "queue:///PRICE.REPLY.app1",
                                "JMSType": "quote-reply"},
                    "properties": {"currency": "EUR", "price": {"type": "double", "value": 12.5}},
                    "body": {"type": "jms_text", "text": "12.50 EUR"}}).encode()
PLAIN = b"12.50 EUR"


def to_mqtt_envelope(message: JmsMessage) -> object:
    return MqttPublication("svc/request", envelope_payload(message), qos=envelope_qos(message))


def pairs() -> dict[str, tuple[Callable[[], object], Callable[[], object]]]:
    encoder = MqttToMqEncoder(MqttToMqOptions())
    plain_pub = MqttPublication("svc/reply/1", PLAIN, qos=1, packet_id=1, client_id="svc")
    return {
        "JMS TextMessage (4 props, reply-to) -> MQTT": (
            lambda: jms_to_mqtt(TEXT, topic="svc/request", now_ms=NOW), lambda: to_mqtt_envelope(TEXT)),
        "JMS MapMessage (10 entries, 4 props) -> MQTT": (
            lambda: jms_to_mqtt(MAP, topic="svc/request", now_ms=NOW), lambda: to_mqtt_envelope(MAP)),
        "MQTT reply -> JMS message": (
            lambda: mqtt_to_jms(plain_pub, now_ms=NOW), lambda: read_envelope(REPLY, qos=1, now_ms=NOW)),
        "MQTT reply -> MQ message bytes": (
            lambda: encoder.encode(plain_pub),
            lambda: jms_to_mq_bytes(read_envelope(REPLY, qos=1, now_ms=NOW)[0], now_ms=NOW)),
    }


def one_round(fn: Callable[[], object], count: int) -> float:
    start = time.process_time()
    for _ in range(count):
        fn()
    elapsed = time.process_time() - start
    return count / elapsed if elapsed > 0 else float("inf")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--count", type=int, default=10000)
    args = parser.parse_args()
    print(f"# {platform.python_version()} on {platform.machine()}, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print("| conversion | payload form /s | envelope /s | envelope / payload |")
    print("|---|---:|---:|---:|")
    for name, (payload, envelope) in pairs().items():
        best_p = best_e = 0.0
        for _ in range(args.rounds):
            best_p = max(best_p, one_round(payload, args.count))
            best_e = max(best_e, one_round(envelope, args.count))
        print(f"| {name} | {best_p:,.0f} | {best_e:,.0f} | {best_e / best_p:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
