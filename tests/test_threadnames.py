"""The gateway's threads carry their names into the OS (bridge/threadnames.py), so that top -H, ps -L and
/proc/PID/task/TID/comm (and bench/bench_durable.py's CPU per thread) tell them apart."""
from __future__ import annotations

import importlib.util
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bridge.threadnames import name_this_thread, os_name
from tests.support.gateway import GatewayProcess, wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="thread names via prctl: Linux")


def _comm(pid: int, tid: int) -> str:
    return Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()


def test_a_thread_and_an_executors_workers_get_their_os_names() -> None:
    import os

    seen: list[str] = []

    def body() -> None:
        name_this_thread()
        seen.append(_comm(os.getpid(), threading.get_native_id()))

    t = threading.Thread(target=body, name="mqbridge-convlog-parquet")
    t.start()
    t.join()
    with ThreadPoolExecutor(2, thread_name_prefix="mqbridge-io", initializer=name_this_thread) as pool:
        worker = pool.submit(lambda: _comm(os.getpid(), threading.get_native_id())).result()
    assert seen == ["mqb-convlog-par"]          # mqbridge- shortened, cut at the kernel's 15 bytes
    assert worker == "mqb-io_0"
    assert os_name("jms-native-\u00e9\u00e9\u00e9\u00e9\u00e9") == "jms-native-\u00e9\u00e9"   # never half a character


def _thread_names(pid: int) -> set[str]:
    out = set()
    for tid in Path(f"/proc/{pid}/task").iterdir():
        try:
            out.add((tid / "comm").read_text().strip())
        except OSError:
            continue
    return out


def _child_pids(pid: int) -> list[int]:
    try:
        return [int(c) for t in Path(f"/proc/{pid}/task").iterdir()
                for c in (t / "children").read_text().split()]
    except OSError:
        return []


def test_a_running_gateways_threads_are_named(gateway: GatewayProcess) -> None:
    """The gateway's threads, and those of its conversion log process (the writer and, with pyarrow, the
    sidecar thread)."""
    assert gateway.proc is not None
    pid = gateway.proc.pid
    assert wait_for(lambda: {"mqb-store", "mqb-convlog"} <= _thread_names(pid), 10, what="the gateway's threads")
    want = {"mqb-convlog", "mqb-convlog-sta"} | ({"mqb-convlog-par"} if importlib.util.find_spec("pyarrow") else set())
    assert wait_for(lambda: any(want <= _thread_names(c) for c in _child_pids(pid)), 10,
                    what=f"the log process's threads {sorted(want)}")
