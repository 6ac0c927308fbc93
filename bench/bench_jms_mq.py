"""Benchmark: MQ bytes -> JMS (and JMS -> MQ bytes) conversions per second,
public API of mappings.conversions.jms_mq only.

Run: .venv/bin/python bench/bench_jms_mq.py [--rounds 5] [--count 5000] [--code TREE]
Prints a Markdown table of conversions per CPU second of this process and per wall second (each the best
round); the results go to bench/README.md ("JMS <-> MQ") by hand. ``--code TREE`` imports ``mappings`` from
another source tree (e.g. ``git archive`` of the commit before a change), for before/after runs of the same
benchmark.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path


def _code_root() -> Path:
    """The source tree to import ``mappings`` from: ``--code TREE`` or this checkout (read before argparse,
    since the imports below need it)."""
    if "--code" in sys.argv[:-1]:
        return Path(sys.argv[sys.argv.index("--code") + 1]).resolve()
    return Path(__file__).resolve().parent.parent


sys.path.insert(0, str(_code_root()))

from mappings.conversions.jms_mq import jms_to_mq, jms_to_mq_bytes, mq_bytes_to_jms, mq_to_jms  # noqa: E402
from mappings.jms.model import (  # noqa: E402
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
from mappings.mq import constants as C  # noqa: E402
from mappings.mq.message import decode_message  # noqa: E402
from mappings.mq.mqmd import Mqmd, encode_mqmd  # noqa: E402

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


def best_rates(fn: Callable[[], object], rounds: int, count: int) -> tuple[float, float]:
    """(per CPU second, per wall second), each the best of ``rounds``."""
    best_cpu = best_wall = 0.0
    for _ in range(rounds):
        start, wall = time.process_time(), time.perf_counter()
        for _ in range(count):
            fn()
        cpu, wall = time.process_time() - start, time.perf_counter() - wall
        best_cpu = max(best_cpu, count / cpu if cpu else float("inf"))
        best_wall = max(best_wall, count / wall if wall else float("inf"))
    return best_cpu, best_wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--code", type=Path, default=None, help="import mappings from this source tree")
    args = parser.parse_args()
    print(f"Python {platform.python_version()} on {platform.machine()}, code {_code_root()}, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print("| conversion | per CPU second | per wall second |\n|---|---:|---:|")
    for name, fn in cases().items():
        cpu, wall = best_rates(fn, args.rounds, args.count)
        print(f"| {name} | {cpu:,.0f} | {wall:,.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
