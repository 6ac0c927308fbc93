"""Benchmark: MQ bytes -> JMS (and JMS -> MQ bytes) conversions per second, public API of mappings.jms_mq only.

Run: .venv/bin/python bench/bench_jms_mq.py [--rounds 5] [--count 5000]
Prints a Markdown table of conversions per CPU second of this process (best round); the results go to
bench/README.md ("JMS <-> MQ") by hand.
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mappings import mqconst as C  # noqa: E402
from mappings.jms import (  # noqa: E402
    DeliveryMode,
    Destination,
    JmsHeaders,
    JmsMessage,
    MapBody,
    TextBody,
    TypedMap,
    jboolean,
    jdouble,
    jint,
    jlong,
    jstring,
)
from mappings.jms_mq import jms_to_mq, jms_to_mq_bytes, mq_bytes_to_jms, mq_to_jms  # noqa: E402
from mappings.mqmd import Mqmd, encode_mqmd  # noqa: E402
from mappings.mqmessage import decode_message  # noqa: E402

NOW = 1_700_000_000_000
HEADERS = JmsHeaders(destination=Destination.queue("DEV.QUEUE.1"), delivery_mode=DeliveryMode.PERSISTENT,
                     expiration=NOW + 60_000, priority=4, timestamp=NOW + 120,
                     message_id="ID:414d5120514d312020202020202020206a1b2c3000012ab0",
                     correlation_id="order-17", reply_to=Destination.queue("REPLY.Q", "QM1"))
PROPS = TypedMap([("JMSXDeliveryCount", jint(1)), ("JMSXUserID", jstring("app")), ("color", jstring("blue")),
                  ("count", jint(3)), ("big", jlong(2**40)), ("ok", jboolean(True))], what="property")
TEXT = JmsMessage(HEADERS, PROPS, TextBody("caf\u00e9 & cr\u00e8me " * 8))
MAP = JmsMessage(HEADERS, PROPS, MapBody(TypedMap([(f"k{i}", jdouble(i / 3) if i % 2 else jint(i))
                                                   for i in range(10)])))


def cases() -> dict[str, Callable[[], object]]:
    text_bytes = jms_to_mq_bytes(TEXT, now_ms=NOW)[0]
    map_bytes = jms_to_mq_bytes(MAP, now_ms=NOW)[0]
    native = encode_mqmd(Mqmd(version=2, format=C.MQFMT_STRING, coded_char_set_id=C.CCSID_UTF8, priority=4,
                              persistence=1, put_date="20231114", put_time="22132012")) + b"hello from MQ" * 8
    text_model = decode_message(text_bytes)
    return {
        "MQ bytes -> JMS TextMessage (RFH2 mcd/jms/usr, 5 usr props)": lambda: mq_bytes_to_jms(text_bytes, now_ms=NOW),
        "MQ bytes -> JMS MapMessage (10 entries)": lambda: mq_bytes_to_jms(map_bytes, now_ms=NOW),
        "MQ bytes -> JMS TextMessage, MQ-native (no RFH2)": lambda: mq_bytes_to_jms(native, now_ms=NOW),
        "  of which decode_message (MQMD + RFH2 folders, lxml)": lambda: decode_message(text_bytes),
        "  of which mq_to_jms on the decoded model": lambda: mq_to_jms(text_model, now_ms=NOW),
        "JMS TextMessage -> MQ model (jms_to_mq)": lambda: jms_to_mq(TEXT, now_ms=NOW),
        "JMS TextMessage -> MQ bytes": lambda: jms_to_mq_bytes(TEXT, now_ms=NOW),
        "JMS MapMessage -> MQ bytes": lambda: jms_to_mq_bytes(MAP, now_ms=NOW),
    }


def best_rate(fn: Callable[[], object], rounds: int, count: int) -> float:
    best = 0.0
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(count):
            fn()
        elapsed = time.process_time() - start
        best = max(best, count / elapsed if elapsed else float("inf"))
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--count", type=int, default=5000)
    args = parser.parse_args()
    print(f"Python {platform.python_version()} on {platform.machine()}")
    print("| conversion | per second |\n|---|---:|")
    for name, fn in cases().items():
        print(f"| {name} | {best_rate(fn, args.rounds, args.count):,.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
