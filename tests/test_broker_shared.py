"""Shared subscriptions ($share/{name}/{filter}, MQTT 5.0 §4.8.2; also for 3.1.1 clients) through a running
gateway with real clients."""
from __future__ import annotations

from collections import Counter
from typing import Any

import paho.mqtt.client as mqtt
import pytest

from bridge.mqtt import packets as P
from bridge.mqtt import properties as PR
from tests.support.gateway import GatewayProcess, wait_for
from tests.support.mqtt5_client import V5, connected, raw5
from tests.support.mqtt_clients import V311, RawClient

LEVELS = [P.MQTT_311, P.MQTT_5]
LEVEL_IDS = ["mqtt311", "mqtt5"]


def test_each_publication_goes_to_one_member_load_balanced(gateway, clients):
    a = V5(gateway.port, "member-a").connect()
    b = V5(gateway.port, "member-b").connect()
    c = clients(gateway.port, "member-c", protocol=V311).connect()   # 3.1.1 clients may share too
    plain = V5(gateway.port, "plain").connect()
    assert a.subscribe("$share/workers/jobs/#", 1) == [1]
    assert b.subscribe("$share/workers/jobs/#", 1) == [1]
    assert c.subscribe("$share/workers/jobs/#", 1) == [1]
    assert plain.subscribe("jobs/#", 1) == [1]
    pub = V5(gateway.port, "producer").connect()
    for i in range(90):
        pub.client.publish(f"jobs/{i}", str(i).encode(), 1).wait_for_publish(10)
    plain.wait(90)   # an ordinary subscription still gets every one
    wait_for(lambda: len(a.messages) + len(b.messages) + len(c.messages) >= 90, 15, what="90 shared deliveries")
    got = [m.payload for m in a.messages] + [m.payload for m in b.messages] + [m.payload for m in c.messages]
    assert sorted(got, key=int) == [str(i).encode() for i in range(90)]   # each exactly once in the group
    share = Counter({"a": len(a.messages), "b": len(b.messages), "c": len(c.messages)})
    assert min(share.values()) >= 20, share   # balanced (round robin over members with room)
    for client in (a, b, pub, plain):
        client.close()


def test_a_group_gets_no_retained_messages_and_no_local_is_refused(gateway):
    pub = V5(gateway.port, "retainer").connect()
    pub.client.publish("state/x", b"old", 1, retain=True).wait_for_publish(10)
    member = V5(gateway.port, "m1").connect()
    assert member.subscribe("$share/g/state/#", 1) == [1]
    assert member.subscribe("state/#", 1) == [1]   # the ordinary subscription: the retained one
    (retained,) = member.wait(1)
    assert retained.retain and retained.payload == b"old"
    pub.client.publish("state/x", b"new", 1).wait_for_publish(10)
    msgs = member.wait(3)   # the new one twice: through the group and through the ordinary subscription
    assert sorted(m.payload for m in msgs) == [b"new", b"new", b"old"]
    bad = V5(gateway.port, "nl").connect()
    bad.client.subscribe("$share/g/state/#", options=mqtt.SubscribeOptions(qos=1, noLocal=True))
    wait_for(lambda: bad.disconnect_reason is not None, 10, what="the server's DISCONNECT")
    assert int(getattr(bad.disconnect_reason, "value", bad.disconnect_reason)) == P.Reason.PROTOCOL_ERROR
    for client in (pub, member):
        client.close()


def test_a_departing_member_s_messages_go_to_another_member(gateway):
    """A member that leaves for good (its clean session ends) holding deliveries it never acknowledged:
    they go to the group's other member, none is lost."""
    stays = V5(gateway.port, "stays").connect()
    assert stays.subscribe("$share/w/work/#", 1) == [1]
    leaver = RawClient(gateway.port)
    leaver.connect("leaver")
    assert leaver.subscribe("$share/w/work/#", 1).return_codes == (1,)
    pub = V5(gateway.port, "p").connect()
    for i in range(20):
        pub.client.publish(f"work/{i}", str(i).encode(), 1).wait_for_publish(10)
    held = leaver.receive_until(lambda p: True, ack=False)   # at least one, never acknowledged
    assert held and held[0].qos == 1
    leaver.close()   # no DISCONNECT needed: the clean session ends with the connection
    wait_for(lambda: len(stays.messages) >= 20, 15, what="every message at the remaining member")
    assert sorted((m.payload for m in stays.messages), key=int) == [str(i).encode() for i in range(20)]
    for client in (stays, pub):
        client.close()


def test_a_persistent_member_keeps_its_group_across_a_restart(gateway_factory):
    gw = gateway_factory()
    member = connected(gw.port, "durable-member", clean=False, expiry=3600)
    assert member.subscribe("$share/g/d/#", 1) == [1]
    member.close()
    assert gw.stop() == 0
    gw.start()
    pub = V5(gw.port, "after").connect()
    pub.client.publish("d/1", b"queued for the group", 1).wait_for_publish(10)   # the member is away: queued
    back = connected(gw.port, "durable-member", clean=False, expiry=3600)
    (msg,) = back.wait(1)
    assert msg.payload == b"queued for the group"
    back.close()
    pub.close()


def _raw_member(gw: GatewayProcess, client_id: str, level: int, group_filter: str | None, *,
                clean: bool = True) -> RawClient:
    """A packet-level member of a group at QoS 2 (it answers nothing unless told); 3.1.1 or 5 (a persistent
    level 5 session: Session Expiry 3600). ``group_filter`` None: resuming, no SUBSCRIBE."""
    if level == P.MQTT_5:
        props = None if clean else {PR.SESSION_EXPIRY_INTERVAL: 3600}
        raw, connack = raw5(gw.port, client_id, clean=clean, props=props)
        assert isinstance(connack, P.Connack) and connack.return_code == 0, connack
    else:
        raw = RawClient(gw.port)
        raw.connect(client_id, clean=clean)
    if group_filter is None:
        return raw
    raw.send(P.encode(P.Subscribe(1, ((group_filter, 2),)), level))
    suback = raw.recv()
    assert isinstance(suback, P.Suback) and suback.return_codes == (2,), suback
    return raw


def _take_share(raw: RawClient, other: V5, total: int) -> list[P.Publish]:
    """The PUBLISHes ``raw`` gets, unanswered, until it and ``other`` hold ``total`` between them."""
    held: list[P.Publish] = []

    def placed() -> bool:
        while True:
            try:
                packet = raw.recv(timeout=0.05)
            except TimeoutError:
                break
            assert isinstance(packet, P.Publish), packet
            held.append(packet)
        return len(held) + len(other.messages) >= total

    wait_for(placed, 15, what=f"{total} shared deliveries placed")
    return held


def _gone(gw: GatewayProcess, client_id: str) -> bool:
    return all(s["client_id"] != client_id for s in gw.admin("/sessions")[1])


def _exactly_then(stays: V5, pub: V5, expected: list[bytes]) -> list[Any]:
    """``stays`` gets ``expected`` and nothing more: a marker published after them arrives right behind them."""
    stays.wait(len(expected))
    pub.client.publish("work/marker", b"marker", 2).wait_for_publish(10)
    msgs = stays.wait(len(expected) + 1)
    assert sorted(m.payload for m in msgs) == sorted([*expected, b"marker"])
    return msgs


@pytest.mark.parametrize("level", LEVELS, ids=LEVEL_IDS)
def test_a_departing_member_s_unacknowledged_qos2_goes_to_no_other_member(gateway, level):
    """MQTT 5.0 §4.8.2: a QoS 2 message sent to a member whose session ends before its PUBREC is sent to no
    other member [MQTT-4.8.2-5] (lost, counted); its unacknowledged QoS 1 ones go to another member."""
    stays = V5(gateway.port, "stays").connect()
    assert stays.subscribe("$share/w/work/#", 2) == [2]
    leaver = _raw_member(gateway, "leaver", level, "$share/w/work/#")
    pub = V5(gateway.port, "p").connect()
    qos_of = [1, 1, 2, 2] * 4   # round robin over two members: each gets QoS 1 and QoS 2 ones
    for i, qos in enumerate(qos_of):
        pub.client.publish(f"work/{i}", str(i).encode(), qos).wait_for_publish(10)
    held = _take_share(leaver, stays, len(qos_of))
    held_qos2 = {p.payload for p in held if p.qos == 2}
    assert held_qos2 and any(p.qos == 1 for p in held), held
    leaver.close()   # no DISCONNECT, clean session (level 5: Session Expiry 0): the session ends
    wait_for(lambda: _gone(gateway, "leaver"), 10, what="the leaver's session to end")
    # every message but the QoS 2 ones the leaver was sent: its QoS 1 ones reach the member that stays
    _exactly_then(stays, pub, [str(i).encode() for i in range(len(qos_of)) if str(i).encode() not in held_qos2])
    assert gateway.admin("/status")[1]["messages"]["shared_qos2_lost"] == len(held_qos2)
    assert "not sent to another member" in gateway.log()
    for client in (stays, pub):
        client.close()


@pytest.mark.parametrize("level", LEVELS, ids=LEVEL_IDS)
def test_a_persistent_member_that_reconnects_completes_its_qos2_deliveries(gateway, level):
    """[MQTT-4.8.2-4]: the connection of a persistent member breaks before its PUBRECs; its session stays in
    the group, no other member gets those messages, and they are completed to it when it reconnects."""
    stays = V5(gateway.port, "stays").connect()
    assert stays.subscribe("$share/w/work/#", 2) == [2]
    member = _raw_member(gateway, "durable", level, "$share/w/work/#", clean=False)
    pub = V5(gateway.port, "p").connect()
    for i in range(6):
        pub.client.publish(f"work/{i}", str(i).encode(), 2).wait_for_publish(10)
    held = _take_share(member, stays, 6)
    assert held and all(p.qos == 2 for p in held)
    member.close()   # the connection breaks; the session waits for the client
    wait_for(lambda: all(c["client_id"] != "durable" for c in gateway.admin("/connections")[1]), 10,
             what="the member's connection to end")
    held_payloads = {p.payload for p in held}
    _exactly_then(stays, pub, [str(i).encode() for i in range(6) if str(i).encode() not in held_payloads])
    back = _raw_member(gateway, "durable", level, None, clean=False)
    again = []
    while len(again) < len(held):
        packet = back.recv()
        if isinstance(packet, P.Publish):   # re-sent with DUP and the same packet id: answered now
            again.append(packet)
            back.ack(P.PUBREC, packet.packet_id)  # type: ignore[arg-type]
    assert [(p.packet_id, p.payload) for p in again] == [(p.packet_id, p.payload) for p in held]
    assert all(p.dup for p in again)
    released = [back.recv() for _ in held]
    assert released == [P.PacketIdOnly(P.PUBREL, p.packet_id) for p in held]
    for p in held:
        back.ack(P.PUBCOMP, p.packet_id)  # type: ignore[arg-type]
    wait_for(lambda: next(s for s in gateway.admin("/sessions")[1] if s["client_id"] == "durable")["inflight"] == 0,
             10, what="the member's deliveries completed")
    assert gateway.admin("/status")[1]["messages"]["shared_qos2_lost"] == 0
    back.close()
    for client in (stays, pub):
        client.close()
