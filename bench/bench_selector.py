"""Benchmark: JMS message selector compile and evaluate rates (public API of mappings.selector.compile only).

Run: .venv/bin/python bench/bench_selector.py [--rounds 5] [--evals 200000]
Prints a Markdown table (rates per CPU second of this process); results go to bench/README.md by hand.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mappings.selector.compile import build_composite_selector, compile_selector, selector_lookup  # noqa: E402

SELECTORS = {
    # the JMS 1.1 §3.8.1.1 example
    "spec example (3 comparisons)": "JMSType = 'car' AND color = 'blue' AND weight > 2500",
    # WMB's JMSInput example values (docs "JMSInput node"), joined as the node does (7 clauses)
    "WMB composite (7 clauses)": build_composite_selector(
        property_selector="OrderValue > 100.00",
        timestamp="BETWEEN 1057576423231 AND 10575788993265",
        delivery_mode="PERSISTENT",
        priority=">= 5 AND <= 8",
        message_id="> WMBRK123456",
        redelivered="FALSE",
        correlation_id="= WMBRKABCDEFGG",
    ),
    "IN + LIKE + NOT BETWEEN + arithmetic": (
        "region IN ('EU', 'US', 'APAC') AND sku LIKE 'AB-%' AND NOT (qty BETWEEN 0 AND 9) AND price * qty / 100 >= 2.5"
    ),
}

MESSAGES = [
    selector_lookup(
        {"color": "blue", "weight": 3000, "OrderValue": 150.0, "region": "EU", "sku": "AB-1", "qty": 12, "price": 99.5},
        jms_type="car",
        delivery_mode=2,
        priority=6,
        message_id="WMBRK2",
        timestamp=1057576423300,
        redelivered=False,
        correlation_id="WMBRKABCDEFGG",
    ),
    selector_lookup(
        {"color": "red", "weight": 1000, "OrderValue": 50.0, "region": "CN", "sku": "XY-9", "qty": 3, "price": 1},
        jms_type="bike",
        delivery_mode=1,
        priority=2,
        message_id="WMBRK0",
        timestamp=1,
        redelivered=True,
        correlation_id="other",
    ),
    selector_lookup({"weight": 2600}, jms_type="car"),  # mostly missing: UNKNOWN paths
]


def best_rate(fn: Callable[[], int], rounds: int) -> float:
    best = 0.0
    for _ in range(rounds):
        start = time.process_time()  # CPU time: the machine is shared, wall time is noisy
        count = fn()
        elapsed = time.process_time() - start
        best = max(best, count / elapsed)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--evals", type=int, default=200_000)
    args = parser.parse_args()
    print(f"Python {platform.python_version()} on {platform.machine()}, best of {args.rounds} rounds")
    print("| selector | length | compiles/s | evaluations/s | matched of 3 messages |")
    print("|---|---:|---:|---:|---:|")
    for name, text in SELECTORS.items():
        sel = compile_selector(text)

        def compile_many(text: str = text) -> int:
            for _ in range(2_000):
                compile_selector(text)
            return 2_000

        def evaluate_many(sel=sel) -> int:
            matches = sel.matches
            messages = MESSAGES * (args.evals // len(MESSAGES))
            for message in messages:
                matches(message)
            return len(messages)

        compiles = best_rate(compile_many, args.rounds)
        evals = best_rate(evaluate_many, args.rounds)
        matched = sum(sel.matches(m) for m in MESSAGES)
        print(f"| {name} | {len(text)} | {compiles:,.0f} | {evals:,.0f} | {matched} |")


if __name__ == "__main__":
    main()
