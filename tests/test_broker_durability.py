"""Nothing acknowledged is lost: SIGKILL the broker under QoS 1 and QoS 2 load, restart it, and check
that every acknowledged publication reaches the persistent subscriber and no QoS 2 one arrives twice."""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable

import paho.mqtt.client as mqtt
import pytest

from tests.support.gateway import GatewayProcess, wait_for
from tests.support.mqtt_clients import keep_pubrel_across_reconnects

N = 1500  # per QoS level


class Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.payloads: list[str] = []
        self.acked: set[int] = set()
        self.connects = 0

    def count(self) -> int:
        with self.lock:
            return len(self.payloads)


def _client(port: int, cid: str, rec: Recorder) -> mqtt.Client:
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=cid, protocol=mqtt.MQTTv311, clean_session=False)
    c.reconnect_delay_set(min_delay=0.05, max_delay=0.3)
    c.max_inflight_messages_set(64)
    c.max_queued_messages_set(0)
    keep_pubrel_across_reconnects(c)  # else paho itself re-publishes QoS 2 messages after a failed reconnect

    def on_connect(client: mqtt.Client, userdata: object, flags: object, rc: object, props: object) -> None:
        with rec.lock:
            rec.connects += 1

    def on_message(client: mqtt.Client, userdata: object, msg: mqtt.MQTTMessage) -> None:
        with rec.lock:
            rec.payloads.append(msg.payload.decode())

    def on_publish(client: mqtt.Client, userdata: object, mid: int, rc: object, props: object) -> None:
        with rec.lock:
            rec.acked.add(mid)

    c.on_connect = on_connect
    c.on_message = on_message
    c.on_publish = on_publish
    c.connect("127.0.0.1", port, keepalive=30)
    c.loop_start()
    wait_for(lambda: rec.connects > 0, 10, what=f"{cid} to connect")
    return c


@pytest.mark.slow
@pytest.mark.parametrize("synchronous", ["FULL", "NORMAL"])
def test_sigkill_under_load_loses_nothing_acknowledged(
    gateway_factory: Callable[..., GatewayProcess], synchronous: str
) -> None:
    gw = gateway_factory({"broker": {"limits": {"max_queued": 100_000},   # more queued than the client default
                                     "durability": {"synchronous": synchronous}, "sys_interval": 0}})

    sub_rec, pub_rec = Recorder(), Recorder()
    sub = _client(gw.port, "durable-sub", sub_rec)
    result, mid = sub.subscribe("load/#", 2)
    assert result == mqtt.MQTT_ERR_SUCCESS
    pub = _client(gw.port, "durable-pub", pub_rec)
    mids: dict[int, str] = {}

    def publish_all() -> None:
        for i in range(N):
            for qos in (1, 2):
                payload = f"q{qos}-{i}"
                while True:
                    info = pub.publish(f"load/q{qos}", payload, qos)
                    if info.rc == mqtt.MQTT_ERR_SUCCESS or info.rc == mqtt.MQTT_ERR_NO_CONN:
                        break
                with pub_rec.lock:
                    mids[info.mid] = payload

    # let the subscription be in place before load starts
    wait_for(lambda: gw.admin("/subscriptions")[1], 10, what="subscription")
    t = threading.Thread(target=publish_all, daemon=True)
    t.start()
    wait_for(lambda: sub_rec.count() >= N // 3, 60, what="a third of the load to arrive")
    gw.kill()  # SIGKILL mid-stream
    before_kill = sub_rec.count()
    gw.start()  # same port, same data dir
    t.join(120)
    assert not t.is_alive()

    def acked_payloads() -> set[str]:
        with pub_rec.lock:
            return {mids[m] for m in pub_rec.acked if m in mids}

    # the publisher's own in-flight messages complete after it reconnects (it is a persistent session)
    wait_for(lambda: len(acked_payloads()) == 2 * N, 90, what="every publication to be acknowledged")
    acked = acked_payloads()

    def delivered_all() -> bool:
        with sub_rec.lock:
            return acked <= set(sub_rec.payloads)

    wait_for(delivered_all, 90, what="every acknowledged publication to reach the subscriber")
    with sub_rec.lock:
        counts = collections.Counter(sub_rec.payloads)
    qos2_dupes = sorted(p for p, n in counts.items() if p.startswith("q2-") and n > 1)
    assert not qos2_dupes, f"QoS 2 delivered twice: {qos2_dupes[:10]}"
    assert before_kill < 2 * N, "the kill happened after the load had finished: the test proved nothing"
    sub.loop_stop()
    pub.loop_stop()
    sub.disconnect()
    pub.disconnect()
