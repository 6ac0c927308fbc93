"""CPU of a closed conversion-log file's Parquet sidecar: built from the values the routes logged
(bridge/convlog_columns.py) against parsing the file's JSON back, on the same file, alternated.

The file is logged the way a route logs (Router.record_ok into a real ConversionLog, batches of 128
messages, two lines each) until it holds ``--messages`` messages (77,000 make ~64 MB, the default file size).

    .venv/bin/python bench/bench_sidecar_values.py --messages 77000 --repeat 3
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bridge.connectors.base import Inbound, Outbound  # noqa: E402
from bridge.convlog import ConversionLog  # noqa: E402
from bridge.convlog_parquet import _write_sidecar  # noqa: E402
from bridge.routing.router import Router  # noqa: E402
from mappings.report import ConversionReport  # noqa: E402
from mappings.rules.model import Route  # noqa: E402

ROUTE = Route.model_validate({"name": "mqtt-to-mq", "from": {"mqtt": "mq/#"}, "to": {"queue": "MQTT.IN"}})


def _batch(b: int) -> list[tuple[Inbound, Outbound, str, ConversionReport]]:
    now = time.time()
    return [(Inbound(key=f"mqtt:pub-{i % 4}:{b}:{i}", protocol="mqtt", message=b"", source_type="publish", size=256,
                     destination=f"mq/{i % 4}", received=now, client_id=f"pub-{i % 4}", qos=1),
             Outbound(f"k{i}", b"", "MQTT.IN", 600), "MQSTR", ConversionReport([])) for i in range(128)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=77_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        log = ConversionLog(Path(d), max_bytes=10**12)
        log.start()
        router = Router(None, None, log, "gw", None)  # type: ignore[arg-type]
        batches = -(-a.messages // 128)
        for b in range(batches):
            router.record_ok(ROUTE, "mq", _batch(b), time.time())
        while log.written < 2 * 128 * batches:
            time.sleep(0.05)
        path, columns = log._path, log._columns
        log.close()
        assert path is not None and columns is not None
        print(f"{path.stat().st_size:,} bytes, {2 * columns.messages:,} records; load {os.getloadavg()[0]:.2f}")
        for _ in range(a.repeat):
            for label, values in (("JSON parse", None), ("from values", columns)):
                c0, w0 = time.process_time(), time.perf_counter()
                _, from_values = _write_sidecar(path, values)
                cpu = time.process_time() - c0
                assert from_values == (values is not None)
                print(f"  {label:<12} CPU {cpu:.3f} s ({cpu / (2 * columns.messages) * 1e6:.2f} µs a record), "
                      f"wall {time.perf_counter() - w0:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
