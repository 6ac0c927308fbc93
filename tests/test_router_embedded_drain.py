"""The embedded queue -> MQTT path under load: a SIGKILL while MQTT.OUT drains into a persistent QoS 1
subscriber loses nothing that was on the queue, and the queue store hands out each message once, in order,
again after a backout, and sees what another connection puts."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from bridge.connectors.embedded import QueueStore, default_path
from bridge.convlog import log_files
from tests.mq_support import topic_message
from tests.support.gateway import GatewayProcess, wait_for
from tests.support.mqtt_clients import PahoClient


def _bodies(*subs: PahoClient) -> set[bytes]:
    out: set[bytes] = set()
    for sub in subs:
        with sub.lock:
            out.update(m.payload for m in sub.messages)
    return out


def test_sigkill_while_the_queue_drains_to_mqtt_loses_nothing(
    gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient]
) -> None:
    # the session may hold all of them: a paho subscriber is slower than the route, and beyond max_queued
    # (1,000 by default) the broker drops QoS 1 deliveries to a client session and counts them
    gateway = gateway_factory({"broker": {"limits": {"max_queued": 50_000}}})
    sub = clients(gateway.port, "drain-sub", clean_session=False, reconnect=False).connect()
    sub.subscribe("drain/#", 1)
    store = QueueStore(default_path(gateway.data_dir)).open()
    n = 20_000
    store.put_many([("MQTT.OUT", topic_message(f"drain/{i % 7}", f"m{i}".encode())) for i in range(n)])
    # the route moves the queue into the broker faster than paho takes it: kill while the queue drains
    wait_for(lambda: store.depth("MQTT.OUT") <= n - 1000, 30, what="the drain to be under way")
    gateway.kill()
    left = store.depth("MQTT.OUT")
    assert 0 < left < n, f"the kill must come while the queue drains ({left} of {n} left)"
    sub.drop()
    gateway.start()
    again = clients(gateway.port, "drain-sub", clean_session=False).connect()
    assert again.session_present
    expected = {f"m{i}".encode() for i in range(n)}
    # every message that was on the queue reaches the subscriber (a second copy is allowed: at least once)
    wait_for(lambda: _bodies(sub, again) >= expected, 120,
             what=f"all {n} messages at the subscriber (have {len(_bodies(sub, again))})")
    wait_for(lambda: store.depth("MQTT.OUT") == 0, 30, what="MQTT.OUT to be empty")
    store.close()
    assert _bodies(sub, again) == expected
    status, body = gateway.admin("/status")
    assert status == 200 and body["messages"]["dropped"] == 0


def test_get_locked_hands_out_each_message_once_in_order(tmp_path: Path) -> None:
    store = QueueStore(tmp_path / "q.sqlite3").open()
    store.put_many([("Q", topic_message("t", f"{i}".encode())) for i in range(6)])
    store.put("OTHER", topic_message("t", b"x"))
    first = store.get_locked("Q", 2)
    second = store.get_locked("Q", 2)
    assert [m.seq for m in first] == [1, 2] and [m.seq for m in second] == [3, 4]
    store.backout([first[0].seq])          # handed out again, before the ones not yet handed out
    third = store.get_locked("Q", 2)
    assert [m.seq for m in third] == [1, 5] and third[0].backout_count == 1
    other = QueueStore(tmp_path / "q.sqlite3").open()   # another process's put, after the store's cursor
    other.put("Q", topic_message("t", b"late"))
    other.close()
    fourth = store.get_locked("Q", 5)
    assert [m.seq for m in fourth] == [6, 8]
    store.confirm([m.seq for m in first + second + third + fourth])
    assert store.depth("Q") == 0 and store.get_locked("Q", 5) == [] and store.depth("OTHER") == 1
    store.close()


def test_a_subscribers_full_queue_drop_is_a_finding_on_the_record(
    gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient]
) -> None:
    """A message taken off MQTT.OUT that a subscriber's full session queue drops is counted by the broker
    and said on its conversion-log record (before: counted only; the record said ok, nothing more)."""
    gateway = gateway_factory({"broker": {"limits": {"max_queued": 5}}})
    sub = clients(gateway.port, "full-sub", clean_session=False, reconnect=False).connect()
    sub.subscribe("full/#", 1)
    sub.drop()   # away: its persistent session queues up to max_queued, then drops
    store = QueueStore(default_path(gateway.data_dir)).open()
    store.put_many([("MQTT.OUT", topic_message("full/t", f"m{i}".encode())) for i in range(12)])
    wait_for(lambda: store.depth("MQTT.OUT") == 0, 30, what="MQTT.OUT to be empty")
    store.close()
    egress = wait_for(lambda: (r := [x for x in _records(gateway) if x["direction"] == "egress"
                                     and x["route"] == "mq-to-mqtt"]) and len(r) == 12 and r, 20,
                      what="12 egress records")
    dropped = [r for r in egress if any(f["change"] == "dropped" and f["name"] == "delivery" for f in r["findings"])]
    assert len(dropped) == 7
    assert all("full-sub" in f["detail"] for r in dropped for f in r["findings"] if f["name"] == "delivery")
    status, body = gateway.admin("/status")
    assert status == 200 and body["messages"]["dropped"] == 7
    back = clients(gateway.port, "full-sub", clean_session=False).connect()
    wait_for(lambda: len(_bodies(back)) == 5, 20, what="the 5 queued messages")


def _records(gateway: GatewayProcess) -> list[dict[str, object]]:
    return [json.loads(line) for f in log_files(gateway.data_dir / "convlog") for line in f.read_text().splitlines()
            if line]
