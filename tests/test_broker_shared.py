"""Shared subscriptions ($share/{name}/{filter}, MQTT 5.0 §4.8.2; also for 3.1.1 clients) through a running
gateway with real clients."""
from __future__ import annotations

from collections import Counter

import paho.mqtt.client as mqtt

from bridge.mqtt import packets as P
from tests.support.gateway import wait_for
from tests.support.mqtt5_client import V5, connected
from tests.support.mqtt_clients import V311, RawClient


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
