"""Benchmark: the cost of a route selector on non-JMS sources (mappings/selector/views.py).

1. Per message: building the JMS view and evaluating the selector, for an MQTT publication (MQTT -> JMS
   mapping without the payload) and an MQ message (MQMD/RFH2 -> JMS mapping), next to the route's own
   conversion of the same message (MQTT -> MQ encode, MQ -> MQTT) for scale.
2. The embedded queue's get with a selector: CPU per `get_locked` of 64 messages when N non-matching
   messages lie ahead of them, first call (every view built) and later calls (verdicts known: only the
   SQLite row reads), against the same get without a selector.

Run: .venv/bin/python bench/bench_route_selector.py [--rounds 5]
Prints Markdown tables (CPU seconds of this process, best of the rounds); results go to bench/README.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bridge.connectors.embedded import QueueStore, StoredQueueMessage, StoreSelection  # noqa: E402
from mappings.conversions.mqtt_mq import MqToMqttOptions, MqttToMqEncoder, mq_to_mqtt  # noqa: E402
from mappings.mq.message import decode_message  # noqa: E402
from mappings.mqtt.publication import MqttPublication  # noqa: E402
from mappings.rules.model import RouteOptions  # noqa: E402
from mappings.selector.views import mqtt_view, source_selector  # noqa: E402
from tests.mq_support import usr_message  # noqa: E402

MQTT_SELECTOR = "JMSDeliveryMode = 'PERSISTENT' AND JMS_SWIFTMQ_CID LIKE 'plant-%'"
MQ_SELECTOR = "region = 'eu' AND n > 1"


def best_cpu(fn: Callable[[], object], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def per_message(rounds: int, count: int) -> list[tuple[str, float]]:
    pub = MqttPublication("plant/line1/temp", b"21.5" * 64, qos=1, packet_id=7, client_id="plant-7", username="op")
    mq = usr_message(5, "eu")
    mqtt_sel = source_selector(RouteOptions(selector=MQTT_SELECTOR), "mqtt")
    mq_sel = source_selector(RouteOptions(selector=MQ_SELECTOR), "mq")
    assert mqtt_sel is not None and mq_sel is not None
    assert mqtt_sel.matches(pub, 1.0) and mq_sel.matches(mq, 1.0)
    encoder = MqttToMqEncoder()
    opts = MqToMqttOptions(fallback_topic="t")

    def loop(body: Callable[[], object]) -> Callable[[], None]:
        def run() -> None:
            for _ in range(count):
                body()
        return run

    cases = [
        ("MQTT publication: JMS view + selector", loop(lambda: mqtt_sel.matches(pub, 1.0))),
        ("MQTT publication: same, view not cached (mqtt_view each time)",
         loop(lambda: mqtt_sel.selector.matches(mqtt_view(pub, RouteOptions(), 1.0)))),
        ("MQTT publication: MQTT -> MQ conversion (for scale)", loop(lambda: encoder.encode(pub))),
        ("MQ message: JMS view + selector", loop(lambda: mq_sel.matches(mq, 1.0))),
        ("MQ message: MQ -> MQTT conversion (for scale)",
         loop(lambda: mq_to_mqtt(decode_message(mq), subscriber_qos=None, packet_id_allocator=lambda: 1,
                                 options=opts))),
    ]
    return [(name, best_cpu(fn, rounds) / count * 1e6) for name, fn in cases]


def store_gets(rounds: int, ahead_counts: list[int]) -> list[tuple[int, float, float, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        return [(ahead, *one_depth(Path(tmp), rounds, ahead)) for ahead in ahead_counts]


def one_depth(tmp: Path, rounds: int, ahead: int) -> tuple[float, float, float]:
    """(first get, later gets, get without selector) in ms CPU, with ``ahead`` non-matching messages
    in front of 64 matching ones."""
    store = QueueStore(tmp / f"q{ahead}.sqlite3", synchronous="OFF").open()
    plain_store = QueueStore(tmp / f"p{ahead}.sqlite3", synchronous="OFF").open()
    try:
        store.put_many([("Q", usr_message(i, "us")) for i in range(ahead)])
        store.put_many([("Q", usr_message(ahead + 2 + i, "eu")) for i in range(64)])   # n > 1
        plain_store.put_many([("Q", usr_message(i, "eu")) for i in range(64)])
        sel = source_selector(RouteOptions(selector=MQ_SELECTOR), "mq")
        assert sel is not None

        def get(selection: StoreSelection) -> None:
            got = store.get_locked("Q", 64, selection)
            assert len(got) == 64 and got[0].seq > ahead
            _release(store, got)

        def plain() -> None:
            _release(plain_store, plain_store.get_locked("Q", 64))

        cold = min(_timed(lambda: get(StoreSelection(sel, "Q"))) for _ in range(rounds))
        warm_selection = StoreSelection(sel, "Q")
        get(warm_selection)
        warm = best_cpu(lambda: get(warm_selection), rounds)
        base = best_cpu(plain, rounds)
        return cold * 1e3, warm * 1e3, base * 1e3
    finally:
        store.close()
        plain_store.close()


def _release(store: QueueStore, got: list[StoredQueueMessage]) -> None:
    """Hand the messages back unchanged for the next round (a backout would raise BackoutCount, which
    makes the selection judge them again): the store's own in-flight set, a benchmark-only shortcut."""
    store._locked.difference_update(m.seq for m in got)


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--count", type=int, default=20_000, help="messages per round for the per-message table")
    args = ap.parse_args()
    print(f"python {platform.python_version()}, {os.cpu_count()} cpus, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print("\n| per message | CPU µs |\n|---|---:|")
    for name, us in per_message(args.rounds, args.count):
        print(f"| {name} | {us:.1f} |")
    print("\n| non-matching ahead | get of 64 with selector, first (ms CPU) | later, verdicts known (ms CPU) |"
          " without selector (ms CPU) |\n|---:|---:|---:|---:|")
    for ahead, cold, warm, base in store_gets(args.rounds, [0, 1_000, 10_000]):
        print(f"| {ahead:,} | {cold:.1f} | {warm:.1f} | {base:.1f} |")


if __name__ == "__main__":
    main()
