"""Conversions per second of the MQ-side mappings (public API only), one core, best of several runs.

Run: .venv/bin/python bench/bench_mappings.py [--seconds 1.0] [--json]
"""
from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import platform
import time
from collections.abc import Callable

from mappings.conversions.mqtt_mq import MqttToMqEncoder, mq_to_mqtt, mqtt_to_mq
from mappings.mq.message import decode_message, encode_message
from mappings.mq.mqmd import Mqmd, decode_mqmd, encode_mqmd
from mappings.mqtt.publication import MqttPublication

PUB = MqttPublication(topic="sensors/building-1/floor-2/room-17/temperature",
                      payload=b'{"t": 21.5, "u": "C"}', qos=1, packet_id=4242, client_id="device-000123")


def measure(fn: Callable[[], object], seconds: float, repeats: int = 3) -> float:
    """Best rate (calls/s) over ``repeats`` runs of about ``seconds`` each."""
    batch = 1000
    best = 0.0
    for _ in range(repeats):
        done, start = 0, time.perf_counter()
        while True:
            for _ in range(batch):
                fn()
            done += batch
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                break
        best = max(best, done / elapsed)
    return best


def cases() -> dict[str, Callable[[], object]]:
    encoder = MqttToMqEncoder()
    retained_qos0 = MqttPublication(topic="a/b", payload=b"x", qos=0, retain=True, client_id="c")
    mq_bytes, _ = encoder.encode(PUB)
    msg = decode_message(mq_bytes)
    md_id = msg.md.__class__(**{**{f: getattr(msg.md, f) for f in msg.md.__slots__},
                                "msg_id": b"AMQ QM1".ljust(22, b"\0") + b"\x10\x92"})
    from_mq = encode_message(msg.__class__(md_id, msg.headers, msg.body))
    md2 = encode_mqmd(Mqmd(version=2))
    # worst case for the publisher cache: every call from a publisher not seen for 20,000 calls
    many = itertools.cycle([dataclasses.replace(PUB, client_id=f"device-{i:06d}") for i in range(20_000)])
    return {
        "MQTT->MQ bytes (MqttToMqEncoder, QoS 1)": lambda: encoder.encode(PUB),
        "MQTT->MQ bytes (MqttToMqEncoder, QoS 0 retained)": lambda: encoder.encode(retained_qos0),
        "MQTT->MQ bytes (MqttToMqEncoder, new publisher each)": lambda: encoder.encode(next(many)),
        "MQTT->MQ model + encode_message": lambda: encode_message(mqtt_to_mq(PUB)[0]),
        "MQ bytes->MQTT (decode_message + mq_to_mqtt)":
            lambda: mq_to_mqtt(decode_message(from_mq), subscriber_qos=2),
        "MQMD v2 decode": lambda: decode_mqmd(md2),
        "MQMD v2 encode": lambda: encode_mqmd(Mqmd(version=2)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=1.0, help="length of each timed run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = {name: measure(fn, args.seconds) for name, fn in cases().items()}
    if args.json:
        print(json.dumps({"python": platform.python_version(), "machine": platform.machine(),
                          "results": results}, indent=2))
    else:
        print(f"Python {platform.python_version()} on {platform.machine()} ({platform.processor() or '?'})")
        for name, rate in results.items():
            print(f"  {name:<50} {rate:>12,.0f} /s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
