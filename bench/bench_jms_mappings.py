"""Benchmark: JMS Map -> JSON and Map XML decode rates (public API of mappings.jms_* only).

Run: .venv/bin/python bench/bench_jms_mappings.py [--rounds 5] [--count 20000]
Prints a Markdown table of conversions per CPU second of this process (best round); results go to
bench/README.md by hand.
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mappings.conversions.mqtt_jms import jms_to_mqtt, mqtt_to_jms  # noqa: E402
from mappings.jms.bodies import decode_map, decode_stream, encode_map  # noqa: E402
from mappings.jms.json_forms import map_to_json, map_to_typed_json, stream_to_json  # noqa: E402
from mappings.jms.model import MapBody, StreamBody  # noqa: E402
from mappings.mqtt.publication import MqttPublication  # noqa: E402

# The examples of WebSphere Message Broker docs "JMS message payload and appropriate parser".
SEED_MAP = """<map>
  <Item_8_of_10_Char dt='char'>A</Item_8_of_10_Char>
  <Item_5_of_10_Double dt='r8'>999999.0</Item_5_of_10_Double>
  <Item_10_of_10_String>Last Map Item</Item_10_of_10_String>
  <Item_9_of_10_Boolean dt='boolean'>0</Item_9_of_10_Boolean>
  <Item_2_of_10_Integrer dt='i4'>999</Item_2_of_10_Integrer>
  <Item_3_of_10_Short dt='i2'>9999</Item_3_of_10_Short>
  <Item_7_of_10_Byte dt='i1'>9</Item_7_of_10_Byte>
  <Item_6_of_10_Float dt='r4'>2.24</Item_6_of_10_Float>
  <Item_1_of_10_String>P2P Map Msg Number:1</Item_1_of_10_String>
  <Item_4_of_10_Long dt='i8'>99999</Item_4_of_10_Long>
</map>"""
SEED_STREAM = """<stream><elt>P2P Stream Message Number :7</elt><elt dt='i4'>999</elt><elt dt='i2'>9999</elt>
<elt dt='i8'>99999</elt><elt dt='r8'>999999.0</elt><elt dt='r4'>2.24</elt><elt dt='i1'>9</elt>
<elt dt='char'>A</elt><elt dt='boolean'>0</elt><elt>Last Stream Item</elt></stream>"""


def cases() -> dict[str, Callable[[], object]]:
    map_body: MapBody = decode_map(SEED_MAP)
    stream_body: StreamBody = decode_stream(SEED_STREAM)
    wire_map = encode_map(map_body)
    seed_map_bytes = SEED_MAP.encode()
    wire_map_bytes = wire_map.encode()
    publication = MqttPublication("sensors/t1", b'{"t": 21.5}', qos=1, client_id="dev1", username="alice",
                                  user_properties=(("site", "north"), ("unit", "C")))
    from mappings.jms.model import JmsMessage

    map_message = JmsMessage(body=map_body)
    return {
        "JMS Map (10 entries) -> plain JSON": lambda: map_to_json(map_body),
        "JMS Map (10 entries) -> typed JSON": lambda: map_to_typed_json(map_body),
        "JMS Stream (10 items) -> plain JSON": lambda: stream_to_json(stream_body),
        "Map XML decode, WMB element-per-key form (10)": lambda: decode_map(seed_map_bytes),
        "Map XML decode, MQ wire form (10)": lambda: decode_map(wire_map_bytes),
        "Map encode, MQ wire form (10)": lambda: encode_map(map_body),
        "MQTT publication -> JMS (auto rule, 2 props)": lambda: mqtt_to_jms(publication),
        "JMS MapMessage -> MQTT publication": lambda: jms_to_mqtt(map_message, topic="t"),
    }


def measure(fn: Callable[[], object], count: int, rounds: int) -> float:
    best = 0.0
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(count):
            fn()
        elapsed = time.process_time() - start
        best = max(best, count / elapsed if elapsed > 0 else float("inf"))
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--count", type=int, default=20000)
    args = parser.parse_args()
    print(f"Python {platform.python_version()} on {platform.machine()} ({platform.processor() or 'cpu'}), "
          f"best of {args.rounds} rounds x {args.count}\n")
    print("| conversion | per second |")
    print("|---|---:|")
    for name, fn in cases().items():
        fn()  # warm up (and fail fast)
        print(f"| {name} | {measure(fn, args.count, args.rounds):,.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
