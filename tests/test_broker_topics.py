"""Topics against a real `mqbridge serve`: `+`/`#` matching, invalid filters (SUBACK 0x80 on 3.1.1,
connection closed on 3.1), publishing to a wildcard topic, `$` topics and root wildcards, and the
`$SYS/broker` topics."""
from __future__ import annotations

import pytest

from bridge.mqtt import packets as P
from tests.support import shared_gateway
from tests.support.gateway import wait_for
from tests.support.mqtt_clients import LEVEL, PROTOCOL_IDS, PROTOCOLS, RawClient

# one gateway process per module, reset before each test (see tests/support/shared_gateway.py)
module_gateway = shared_gateway.module_gateway
gateway = shared_gateway.gateway


@pytest.fixture(params=PROTOCOLS, ids=PROTOCOL_IDS)
def proto(request):
    return request.param


TOPICS = ["a", "a/b", "a/b/c", "a/x/c", "a/b/c/d", "/a", "b", "x/b/y", "a/", "a//c"]
MATCHES = {
    "a/+/c": {"a/b/c", "a/x/c", "a//c"},
    "a/#": {"a", "a/b", "a/b/c", "a/x/c", "a/b/c/d", "a/", "a//c"},
    "#": set(TOPICS),
    "+": {"a", "b"},
    "+/+": {"a/b", "/a", "a/"},
    "a/+": {"a/b", "a/"},
    "/+": {"/a"},
    "+/b/#": {"a/b", "a/b/c", "a/b/c/d", "x/b/y"},
    "a/b/c/#": {"a/b/c", "a/b/c/d"},
    "a/b": {"a/b"},
    "+/+/+": {"a/b/c", "a/x/c", "x/b/y", "a//c"},
}


def test_wildcard_matching(gateway, clients, proto):
    subs = {}
    for flt in MATCHES:
        c = clients(gateway.port, protocol=proto).connect()
        assert c.subscribe(flt, 1) == [1]
        c.subscribe("zz/marker", 1)
        subs[flt] = c
    pub = clients(gateway.port, protocol=proto).connect()
    for t in TOPICS:
        pub.publish(t, t.encode(), qos=1)
    pub.publish("zz/marker", b"end", qos=1)
    for flt, c in subs.items():
        got = c.wait_messages(1)
        while got[-1].topic != "zz/marker":
            got = c.wait_messages(len(got) + 1)
        topics = [m.topic for m in got if m.topic != "zz/marker"]
        assert sorted(topics) == sorted(MATCHES[flt]), flt
        assert len(topics) == len(set(topics)), f"{flt}: duplicates {topics}"


def test_overlapping_subscriptions_deliver_one_copy_at_the_highest_qos(gateway, clients, proto):
    c = clients(gateway.port, protocol=proto).connect()
    c.subscribe("ov/#", 0)
    c.subscribe("ov/+", 1)
    c.subscribe("ov/x", 2)
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("ov/x", b"x", qos=2)
    pub.publish("ov/marker", b"m", qos=2)
    pub.publish("ov/x", b"end", qos=2)
    got = c.wait_messages(3)
    while not any(m.payload == b"end" for m in got):
        got = c.wait_messages(len(got) + 1)
    # paho hands a QoS 2 message over at PUBREL, so the QoS 1 marker may overtake "x": compare sets
    assert sorted((m.payload, m.qos) for m in got) == [(b"end", 2), (b"m", 1), (b"x", 2)]


def test_unsubscribe_stops_delivery(gateway, clients, proto):
    c = clients(gateway.port, protocol=proto).connect()
    c.subscribe("un/#", 1)
    c.subscribe("un2/#", 1)
    result, mid = c.client.unsubscribe("un/#")
    wait_for(lambda: not [s for s in gateway.admin("/subscriptions")[1] if s["topic_filter"] == "un/#"], 5,
             what="unsubscribed")
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("un/x", b"no", qos=1)
    pub.publish("un2/marker", b"m", qos=1)
    assert [m.payload for m in c.wait_messages(1)] == [b"m"]


# an empty filter is no topic filter at all ([MQTT-4.7.3-1]): it closes the connection
# (tests/test_broker_bad_input.py), not a SUBACK 0x80
INVALID = ["a/#/b", "a+", "#a", "a/b#", "+a/b", "a/++", "##"]


@pytest.mark.parametrize("bad", INVALID)
def test_invalid_filter_gets_suback_0x80_on_311(gateway, bad):
    raw = RawClient(gateway.port)
    assert raw.connect("badfilter", P.MQTT_311).return_code == 0
    raw.send(P.encode(P.Subscribe(5, (("ok/1", 1), (bad, 1), ("ok/+", 2)))))
    assert raw.recv() == P.Suback(5, (1, 0x80, 2))
    # the connection stays usable and the valid filters work
    raw.send(P.PINGREQ_BYTES)
    assert raw.recv() == P.Bare(P.PINGRESP)
    subs = {s["topic_filter"] for s in gateway.admin("/subscriptions")[1] if s["client_id"] == "badfilter"}
    assert subs == {"ok/1", "ok/+"}


def test_invalid_filter_closes_the_connection_on_31(gateway):
    """3.1 has no failure return code in SUBACK: the broker closes the connection, with a reason."""
    raw = RawClient(gateway.port)
    assert raw.connect("badfilter31", P.MQTT_31).return_code == 0
    raw.send(P.encode(P.Subscribe(5, (("a/#/b", 1),))))
    assert raw.closed_by_peer()
    wait_for(lambda: "invalid topic filter" in gateway.log(), 5, what="reason logged")


@pytest.mark.parametrize("topic", ["a/+", "a/#", "+", "#", "a/b+"])
def test_publishing_to_a_wildcard_topic_closes_the_connection(gateway, clients, proto, topic):
    watcher = clients(gateway.port, protocol=proto).connect()
    watcher.subscribe("#", 0)
    raw = RawClient(gateway.port)
    assert raw.connect("wild", LEVEL[proto]).return_code == 0
    raw.publish(topic, b"illegal", qos=0)
    assert raw.closed_by_peer()
    wait_for(lambda: "contains a wildcard" in gateway.log(), 5, what="reason logged")
    # nothing was routed, and the broker still serves everyone
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("after/wild", b"m", qos=0)
    assert [m.topic for m in watcher.wait_messages(1)] == ["after/wild"]


def test_sys_topics_not_matched_by_root_wildcards(gateway, clients, proto):
    root = clients(gateway.port, protocol=proto).connect()
    root.subscribe("#", 0)
    root.subscribe("+/broker/#", 0)
    root.subscribe("+/+/+", 0)
    sys = clients(gateway.port, protocol=proto).connect()
    sys.subscribe("$SYS/#", 0)
    # wait for live $SYS updates (not only the retained replay at subscribe time)
    wait_for(lambda: any(not m.retain for m in sys.messages), 10, what="a live $SYS update")
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("plain/marker", b"m", qos=0)
    got = root.wait_messages(1)
    assert [m.topic for m in got] == ["plain/marker"]


def test_clients_cannot_publish_into_dollar_topics(gateway, clients, proto):
    c = clients(gateway.port, protocol=proto).connect()
    c.subscribe("$app/#", 1)
    c.subscribe("$SYS/custom/#", 1)
    c.subscribe("m/marker", 1)
    c.publish("$app/x", b"reserved", qos=1)
    c.publish("$SYS/custom/y", b"reserved", qos=1)
    c.publish("m/marker", b"m", qos=1)
    assert [m.payload for m in c.wait_messages(1)] == [b"m"]
    assert "$ topics are reserved" in gateway.log()


def test_sys_broker_topics_are_readable(gateway, clients, proto):
    c = clients(gateway.port, protocol=proto).connect()
    c.subscribe("$SYS/broker/#", 0)

    def values():
        return {m.topic[len("$SYS/broker/"):]: m.payload.decode() for m in c.messages}

    wanted = {"version", "uptime", "clients/connected", "clients/total", "messages/received",
              "messages/sent", "subscriptions/count", "messages/retained/count"}
    wait_for(lambda: wanted <= set(values()), 10, what=f"$SYS/broker topics {wanted}")
    v = values()
    assert v["version"].startswith("mqbridge")
    assert v["uptime"].endswith("seconds")
    assert int(v["clients/connected"]) >= 1
    assert int(v["subscriptions/count"]) >= 1
    # a specific topic, no wildcard
    d = clients(gateway.port, protocol=proto).connect()
    d.subscribe("$SYS/broker/clients/connected", 0)
    (m,) = d.wait_messages(1)[:1]
    assert m.retain is True and int(m.payload) >= 1   # the last update's value, replayed


def test_sys_clients_connected_follows_connections(gateway, clients, proto):
    watch = clients(gateway.port, protocol=proto).connect()
    watch.subscribe("$SYS/broker/clients/connected", 0)
    others = [clients(gateway.port, protocol=proto).connect() for _ in range(3)]
    wait_for(lambda: any(m.payload == b"4" and not m.retain for m in watch.messages), 10,
             what="$SYS/broker/clients/connected = 4")
    for o in others:
        o.disconnect()
    wait_for(lambda: watch.messages[-1].payload == b"1", 10, what="$SYS/broker/clients/connected = 1")


def test_unicode_and_odd_topics(gateway, clients, proto):
    c = clients(gateway.port, protocol=proto).connect()
    c.subscribe("capteur/+/température", 1)
    c.subscribe("with space/#", 1)
    c.subscribe("日本/#", 1)
    pub = clients(gateway.port, protocol=proto).connect()
    sent = ["capteur/salle-1/température", "with space/a b", "日本/東京/🌸", "capteur/x/temperature"]
    for t in sent:
        pub.publish(t, t.encode(), qos=1)
    pub.publish("日本/marker", b"m", qos=1)
    got = c.wait_messages(4)
    assert [m.topic for m in got] == sent[:3] + ["日本/marker"]
    assert all(m.payload == m.topic.encode() for m in got[:3])
