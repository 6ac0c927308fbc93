"""Shared subscriptions across a gateway's stop: what a member with a clean session held, unacknowledged, goes to
a persistent member of its group after the restart (MQTT 5.0 §4.8.2: the server SHOULD send it to another
member once that session ended; it ended with the gateway), through a running gateway with real clients.
The rows that make this durable are gone once the deliveries are acknowledged."""
from __future__ import annotations

import sqlite3

import pytest

from tests.support.gateway import GatewayProcess, wait_for
from tests.support.mqtt5_client import V5, connected
from tests.support.mqtt_clients import RawClient
from tests.test_broker_shared import _take_share

GROUP = "$share/w/work/#"
N = 20


def _rows(gw: GatewayProcess) -> tuple[int, int]:
    """(outbound rows of shared groups, stored messages) in the stopped gateway's store."""
    with sqlite3.connect(f"file:{gw.data_dir / 'broker.sqlite3'}?mode=ro", uri=True) as db:
        groups = db.execute("SELECT count(*) FROM outbound WHERE client_id LIKE '$share/%'").fetchone()[0]
        messages = db.execute("SELECT count(*) FROM messages").fetchone()[0]
    return groups, messages


def _members(gw: GatewayProcess, suffix: str, qos: int) -> tuple[V5, RawClient, V5]:
    """A persistent member (paho, acknowledging), a clean one that answers nothing (raw), and a publisher."""
    durable = connected(gw.port, f"durable{suffix}", clean=False, expiry=3600)
    assert durable.subscribe(GROUP, qos) == [qos]
    clean = RawClient(gw.port)
    clean.connect(f"clean{suffix}")
    assert clean.subscribe(GROUP, qos).return_codes == (qos,)
    return durable, clean, V5(gw.port, f"pub{suffix}").connect()


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_a_clean_members_unacknowledged_deliveries_reach_a_persistent_member_after_a_restart(gateway_factory, how):
    """A persistent member and a clean one that never acknowledges share 20 QoS 1 publications, every one
    acknowledged to its publisher; the gateway is SIGKILLed (or stopped); after the restart the persistent
    member gets every one the clean member held: the group got all 20 (before: those were lost)."""
    gw = gateway_factory()
    durable, clean, pub = _members(gw, "", 1)
    for i in range(N):
        pub.client.publish(f"work/{i}", str(i).encode(), 1).wait_for_publish(10)   # PUBACKed: the broker has it
    held = _take_share(clean, durable, N)
    assert held, "the clean member was given none"
    first = {m.payload for m in durable.messages}
    durable.close()
    pub.close()
    if how == "kill":
        gw.kill()
    else:
        assert gw.stop() == 0
    gw.start()
    back = connected(gw.port, "durable", clean=False, expiry=3600)
    every = {str(i).encode() for i in range(N)}
    wait_for(lambda: first | {m.payload for m in back.messages} >= every, 15, what="all 20 in the group")
    assert {m.payload for m in back.messages} >= {p.payload for p in held}
    if how == "kill":   # a stop ends the clean session first: its deliveries go to the member then
        assert f"recovered {len(held)} deliveries of shared subscriptions" in gw.log()
    back.close()
    clean.close()


def test_the_group_rows_go_once_the_clean_member_acknowledges(gateway_factory):
    """Every delivery acknowledged (the clean member acknowledges what it is sent): the stopped gateway's store
    holds no group row and no message."""
    gw = gateway_factory()
    durable = connected(gw.port, "durable2", clean=False, expiry=3600)
    assert durable.subscribe(GROUP, 1) == [1]
    clean = V5(gw.port, "clean2").connect()
    assert clean.subscribe(GROUP, 1) == [1]
    pub = V5(gw.port, "pub2").connect()
    for i in range(N):
        pub.client.publish(f"work/{i}", str(i).encode(), 1).wait_for_publish(10)
    wait_for(lambda: len(durable.messages) + len(clean.messages) >= N, 15, what="all 20 delivered")
    assert clean.messages and durable.messages
    wait_for(lambda: all(s["inflight"] == 0 and s["queued"] == 0 for s in gw.admin("/sessions")[1]), 10,
             what="every delivery acknowledged")
    for client in (durable, clean, pub):
        client.close()
    assert gw.stop() == 0
    assert _rows(gw) == (0, 0)


def test_a_clean_members_sent_qos2_deliveries_go_to_no_other_member_after_a_restart(gateway_factory):
    """QoS 2 publications a clean member was sent and did not answer (no PUBREC) when the gateway was SIGKILLed:
    after the restart no other member gets them [MQTT-4.8.2-5]; they are counted as shared_qos2_lost."""
    gw = gateway_factory()
    durable, clean, pub = _members(gw, "3", 2)
    for i in range(10):
        pub.client.publish(f"work/{i}", str(i).encode(), 2).wait_for_publish(10)
    held = _take_share(clean, durable, 10)
    assert held and all(p.qos == 2 for p in held)
    first = {m.payload for m in durable.messages}
    durable.close()
    pub.close()
    gw.kill()
    gw.start()
    back = connected(gw.port, "durable3", clean=False, expiry=3600)
    pub = V5(gw.port, "pub3").connect()
    pub.client.publish("work/marker", b"marker", 2).wait_for_publish(10)
    (marker,) = back.wait(1)   # the marker alone: none of the clean member's QoS 2 ones came before it
    assert marker.payload == b"marker" and not first & {p.payload for p in held}
    assert gw.admin("/status")[1]["messages"]["shared_qos2_lost"] == len(held)
    assert "not sent to another member (MQTT 5.0 §4.8.2), lost" in gw.log()
    for client in (back, pub):
        client.close()
    clean.close()
