"""MQTT 5.0 publish/subscribe in the built-in broker (OASIS "MQTT Version 5.0" §3.3, §3.8-§3.11): PUBLISH
properties forwarded to subscribers, Message Expiry, Topic Aliases from clients, subscription options
(No Local, Retain As Published, Retain Handling, Subscription Identifiers) and SUBACK/UNSUBACK reason
codes; real MQTT 5 clients (paho-mqtt 2.x, mosquitto_pub/sub -V mqttv5) and raw sockets for exact bytes."""
from __future__ import annotations

import subprocess
import time
from typing import Any

import pytest
from paho.mqtt.packettypes import PacketTypes

from bridge.mqtt import packets as P
from bridge.mqtt import properties as PR
from tests.support.gateway import wait_for
from tests.support.mosquitto import AVAILABLE
from tests.support.mqtt5_client import (
    V5,
    mosquitto_sub_v5,
    packet_props,
    publish_props,
    raw5,
    read_until_closed,
    unsubscribe5,
)

USER_PROPS = [("ключ", "значение"), ("a", "1"), ("a", "1"), ("名前", "値 ✓ 😀"), ("a", "0"), ("empty", "")]


def persistent(port: int, client_id: str, clean: bool = True) -> V5:
    """A V5 client whose session outlives its connection by an hour."""
    props = packet_props(PacketTypes.CONNECT, SessionExpiryInterval=3600)
    return V5(port, client_id, clean_start=clean, connect_props=props).connect()


def sub_props(sub_id: int) -> Any:
    return packet_props(PacketTypes.SUBSCRIBE, SubscriptionIdentifier=sub_id)


def until(client: V5, payload: bytes, timeout: float = 10.0) -> list[Any]:
    """The client's messages once one with ``payload`` (a later marker) has arrived."""
    wait_for(lambda: any(m.payload == payload for m in list(client.messages)), timeout,
             what=f"{payload!r} at {client.client._client_id!r}")
    with client.lock:
        return list(client.messages)


def sub_ids(msg: Any) -> list[int]:
    value = getattr(msg.properties, "SubscriptionIdentifier", [])
    return sorted(value if isinstance(value, list) else [value])


def offline(gateway: Any, client_id: str) -> None:
    wait_for(lambda: client_id not in {c["client_id"] for c in gateway.admin("/connections")[1]}, 10,
             what=f"{client_id} offline")


def pass_time(seconds: float) -> None:
    """Let a Message Expiry Interval run out: the wait is what is tested, not a race hidden."""
    deadline = time.monotonic() + seconds
    wait_for(lambda: time.monotonic() >= deadline, seconds + 5, interval=0.05, what="time to pass")


# -- 1. forwarded properties ---------------------------------------------------------------------------


@pytest.mark.parametrize("qos", [0, 1, 2])
def test_publish_properties_are_forwarded_unchanged_except_the_topic_alias(gateway, qos):
    sub = V5(gateway.port, "fp-sub").connect()
    assert sub.subscribe("fp/#", 2) == [2]
    pub = V5(gateway.port, "fp-pub").connect()
    props = publish_props(PayloadFormatIndicator=1, ContentType="application/json; charset=utf-8",
                          ResponseTopic="fp/reply/é", CorrelationData=b"\x00\xffcorr\x00",
                          UserProperty=USER_PROPS, MessageExpiryInterval=3600, TopicAlias=1)
    pub.client.publish("fp/1", "{\"é\": 1}".encode(), qos, properties=props).wait_for_publish(10)
    # the alias alone names the topic now; this one has neither expiry nor other properties
    pub.client.publish("", b"second", qos, properties=publish_props(TopicAlias=1)).wait_for_publish(10)
    first, second = sub.wait(2)
    got = first.properties
    assert (first.topic, first.payload, first.qos) == ("fp/1", "{\"é\": 1}".encode(), qos)
    assert got.PayloadFormatIndicator == 1 and got.ContentType == "application/json; charset=utf-8"
    assert got.ResponseTopic == "fp/reply/é" and got.CorrelationData == b"\x00\xffcorr\x00"
    assert got.UserProperty == USER_PROPS   # order and duplicates kept
    assert 3590 <= got.MessageExpiryInterval <= 3600   # what remains of it
    assert not hasattr(got, "TopicAlias")
    assert (second.topic, second.payload, second.qos) == ("fp/1", b"second", qos)
    for name in ("MessageExpiryInterval", "ContentType", "UserProperty", "TopicAlias", "SubscriptionIdentifier"):
        assert not hasattr(second.properties, name), name
    pub.close()
    sub.close()


@pytest.mark.parametrize("qos", [0, 1, 2])
def test_a_v311_subscriber_gets_the_payload_without_properties(gateway, clients, qos):
    old = clients(gateway.port, "fp-v311").connect()
    assert old.subscribe("fv/#", 2) == [2]
    new = V5(gateway.port, "fp-v5").connect()
    assert new.subscribe("fv/#", 2) == [2]
    pub = V5(gateway.port, "fv-pub").connect()
    props = publish_props(ContentType="c", UserProperty=USER_PROPS, MessageExpiryInterval=60)
    pub.client.publish("fv/t", b"body", qos, properties=props).wait_for_publish(10)
    pub.client.publish("fv/t", b"bare", qos).wait_for_publish(10)
    assert [(m.topic, m.payload, m.qos) for m in old.wait_messages(2)] == [("fv/t", b"body", qos),
                                                                           ("fv/t", b"bare", qos)]
    assert [(m.payload, m.properties.ContentType) for m in new.wait(2)[:1]] == [(b"body", "c")]
    pub.close()
    new.close()


@pytest.mark.skipif(not AVAILABLE, reason="mosquitto-clients not installed")
def test_mosquitto_sub_v5_receives_properties_from_paho(gateway):
    def publish() -> None:
        pub = V5(gateway.port, "mo5-pub").connect()
        props = publish_props(ContentType="text/x", ResponseTopic="mo5/r", UserProperty=[("k", "v")],
                              MessageExpiryInterval=600)
        pub.client.publish("mo5/t", b"hello", 1, properties=props).wait_for_publish(10)
        pub.close()

    code, out, err = mosquitto_sub_v5(gateway, "mo5-sub", ["-q", "1", "-t", "mo5/t", "-C", "1",
                                                           "-F", "%t|%p|%q|%C|%R|%P|%E"], publish)
    assert code == 0, err
    topic, payload, qos, ctype, response, user, expiry = out.strip().split("|")
    assert (topic, payload, qos, ctype, response, user) == ("mo5/t", "hello", "1", "text/x", "mo5/r", "k:v")
    assert 590 <= int(expiry) <= 600


@pytest.mark.skipif(not AVAILABLE, reason="mosquitto-clients not installed")
def test_mosquitto_pub_v5_properties_reach_a_paho_subscriber(gateway):
    sub = V5(gateway.port, "mp5-sub").connect()
    assert sub.subscribe("mp5/#", 1) == [1]
    args = ["mosquitto_pub", "-h", "127.0.0.1", "-p", str(gateway.port), "-V", "mqttv5", "-q", "1",
            "-t", "mp5/t", "-m", "payload", "-D", "publish", "user-property", "k", "v1",
            "-D", "publish", "user-property", "k", "v2", "-D", "publish", "content-type", "text/plain",
            "-D", "publish", "response-topic", "mp5/reply", "-D", "publish", "correlation-data", "c-42",
            "-D", "publish", "payload-format-indicator", "1", "-D", "publish", "message-expiry-interval", "120",
            "-D", "publish", "topic-alias", "1"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=15)
    assert r.returncode == 0, r.stderr
    (msg,) = sub.wait(1)
    got = msg.properties
    assert (msg.topic, msg.payload, msg.qos) == ("mp5/t", b"payload", 1)
    assert got.UserProperty == [("k", "v1"), ("k", "v2")]
    assert got.ContentType == "text/plain" and got.ResponseTopic == "mp5/reply"
    assert got.CorrelationData == b"c-42" and got.PayloadFormatIndicator == 1
    assert 110 <= got.MessageExpiryInterval <= 120 and not hasattr(got, "TopicAlias")
    sub.close()


# -- 2. Message Expiry ---------------------------------------------------------------------------------


def test_queued_message_expires_for_an_offline_session_and_a_live_one_keeps_its_remaining_time(gateway):
    sub = persistent(gateway.port, "ex-sub")
    assert sub.subscribe("ex/#", 1, props=sub_props(42)) == [1]
    sub.close()
    offline(gateway, "ex-sub")
    pub = V5(gateway.port, "ex-pub").connect()
    pub.client.publish("ex/short", b"short", 1, properties=publish_props(MessageExpiryInterval=1)).wait_for_publish(10)
    pub.client.publish("ex/long", b"long", 1, properties=publish_props(MessageExpiryInterval=100)).wait_for_publish(10)
    pub.client.publish("ex/marker", b"marker", 1).wait_for_publish(10)
    acked = time.monotonic()
    sessions = {s["client_id"]: s for s in gateway.admin("/sessions")[1]}
    assert sessions["ex-sub"]["queued"] == 3   # all three wait for the client
    pass_time(acked + 1.5 - time.monotonic())
    sub = persistent(gateway.port, "ex-sub", clean=False)
    assert sub.connack is not None and sub.connack[0].session_present
    got = until(sub, b"marker")
    assert [m.topic for m in got] == ["ex/long", "ex/marker"]
    assert 90 <= got[0].properties.MessageExpiryInterval <= 99   # what remains of 100 s
    assert sub_ids(got[0]) == sub_ids(got[1]) == [42]   # kept with the queued deliveries
    assert not hasattr(got[1].properties, "MessageExpiryInterval")
    pub.close()
    sub.close()


def test_retained_message_is_not_sent_to_new_subscribers_once_expired(gateway):
    pub = V5(gateway.port, "rx-pub").connect()
    for topic, expiry in (("rx/short", 1), ("rx/gone", 1), ("rx/long", 100)):
        pub.client.publish(topic, topic.encode(), 1, retain=True,
                           properties=publish_props(MessageExpiryInterval=expiry)).wait_for_publish(10)
    acked = time.monotonic()
    pass_time(acked + 1.5 - time.monotonic())
    exact = V5(gateway.port, "rx-exact").connect()   # a filter without wildcards: looked up directly
    assert exact.subscribe("rx/short", 1) == [1]
    wild = V5(gateway.port, "rx-wild").connect()
    assert wild.subscribe("rx/#", 1) == [1]
    pub.client.publish("rx/short", b"marker", 1).wait_for_publish(10)
    assert [m.payload for m in until(exact, b"marker")] == [b"marker"]
    got = until(wild, b"marker")
    assert [(m.topic, m.retain) for m in got] == [("rx/long", True), ("rx/short", False)]
    assert 90 <= got[0].properties.MessageExpiryInterval <= 99
    for c in (pub, wild, exact):
        c.close()


# -- 3. Topic Aliases, client to server ----------------------------------------------------------------


def test_topic_alias_from_paho_is_resolved_and_can_be_remapped(gateway):
    sub = V5(gateway.port, "ta-sub").connect()
    assert sub.subscribe("ta/#", 1) == [1]
    pub = V5(gateway.port, "ta-pub").connect()
    assert pub.connack is not None and pub.connack[2].TopicAliasMaximum == 10   # the default limit
    for topic, payload in (("ta/one", b"1"), ("", b"2"), ("ta/two", b"3"), ("", b"4")):
        pub.client.publish(topic, payload, 1, properties=publish_props(TopicAlias=10)).wait_for_publish(10)
    got = sub.wait(4)
    assert [(m.topic, m.payload) for m in got] == [("ta/one", b"1"), ("ta/one", b"2"), ("ta/two", b"3"),
                                                   ("ta/two", b"4")]
    assert not any(hasattr(m.properties, "TopicAlias") for m in got)
    pub.close()
    sub.close()


def test_topic_alias_above_the_maximum_is_refused_with_0x94(gateway_factory):
    gw = gateway_factory({"broker": {"limits": {"topic_alias_maximum": 3}}})
    sub = V5(gw.port, "tm-sub").connect()
    assert sub.subscribe("tm/#", 1) == [1]
    raw, connack = raw5(gw.port, "tm-raw")
    assert connack.properties[PR.TOPIC_ALIAS_MAXIMUM] == 3
    raw.send(P.encode(P.Publish("tm/ok", b"at the maximum", 0, properties={PR.TOPIC_ALIAS: 3}), 5))
    raw.send(P.encode(P.Publish("tm/bad", b"above it", 0, properties={PR.TOPIC_ALIAS: 4}), 5))
    packets = read_until_closed(raw)
    assert [type(p) for p in packets] == [P.Disconnect] and packets[0].reason_code == 0x94
    raw.close()
    other = V5(gw.port, "tm-other").connect()   # the broker goes on serving everyone else
    other.client.publish("tm/after", b"after", 1).wait_for_publish(10)
    got = until(sub, b"after")
    assert [(m.topic, m.payload) for m in got] == [("tm/ok", b"at the maximum"), ("tm/after", b"after")]
    other.close()
    sub.close()


def test_no_topic_aliases_when_the_maximum_is_0(gateway_factory):
    gw = gateway_factory({"broker": {"limits": {"topic_alias_maximum": 0}}})
    raw, connack = raw5(gw.port, "t0-raw")
    assert PR.TOPIC_ALIAS_MAXIMUM not in (connack.properties or {})   # absent: 0, no aliases
    raw.send(P.encode(P.Publish("t0/t", b"x", 0, properties={PR.TOPIC_ALIAS: 1}), 5))
    packets = read_until_closed(raw)
    assert [(type(p), getattr(p, "reason_code", None)) for p in packets] == [(P.Disconnect, 0x94)]
    raw.close()


def test_unknown_topic_alias_is_a_protocol_error_and_aliases_are_per_connection(gateway):
    sub = V5(gateway.port, "tu-sub").connect()
    assert sub.subscribe("tu/#", 1) == [1]
    first, _ = raw5(gateway.port, "tu-first")
    first.send(P.encode(P.Publish("tu/set", b"set", 1, packet_id=1, properties={PR.TOPIC_ALIAS: 1}), 5))
    assert first.recv() == P.PacketIdOnly(P.PUBACK, 1)
    second, _ = raw5(gateway.port, "tu-second")   # alias 1 was set on another connection: unknown here
    second.send(P.encode(P.Publish("", b"unknown alias", 0, properties={PR.TOPIC_ALIAS: 1}), 5))
    packets = read_until_closed(second)
    assert [type(p) for p in packets] == [P.Disconnect] and packets[0].reason_code == 0x82
    third, _ = raw5(gateway.port, "tu-third")
    third.send(P.encode(P.Publish("", b"no alias at all", 0), 5))
    packets = read_until_closed(third)
    assert [type(p) for p in packets] == [P.Disconnect] and packets[0].reason_code in (0x82, 0x90)
    first.send(P.encode(P.Publish("", b"after", 1, packet_id=2, properties={PR.TOPIC_ALIAS: 1}), 5))
    assert first.recv() == P.PacketIdOnly(P.PUBACK, 2)   # its own alias still works
    assert [(m.topic, m.payload) for m in until(sub, b"after")] == [("tu/set", b"set"), ("tu/set", b"after")]
    for raw in (first, second, third):
        raw.close()
    sub.close()


# -- 4. subscription options ---------------------------------------------------------------------------


def test_no_local_leaves_out_own_publications_only(gateway):
    local = V5(gateway.port, "nl-self").connect()
    assert local.subscribe("nl/#", 1, noLocal=True) == [1]
    watcher = V5(gateway.port, "nl-watch").connect()
    assert watcher.subscribe("nl/#", 1) == [1]
    local.client.publish("nl/own", b"own", 1).wait_for_publish(10)
    other = V5(gateway.port, "nl-other").connect()
    other.client.publish("nl/other", b"other", 1).wait_for_publish(10)
    assert [m.payload for m in until(local, b"other")] == [b"other"]
    assert [m.payload for m in until(watcher, b"other")] == [b"own", b"other"]
    for c in (local, watcher, other):
        c.close()


def test_no_local_subscription_overlapping_a_plain_one_of_the_same_client(gateway):
    sub = V5(gateway.port, "nlo-sub").connect()
    assert sub.subscribe("nlo/#", 2, props=sub_props(1), noLocal=True) == [2]
    assert sub.subscribe("nlo/t", 1, props=sub_props(2)) == [1]
    sub.client.publish("nlo/t", b"own", 2).wait_for_publish(10)   # only the plain one takes it
    sub.client.publish("nlo/u", b"own-u", 2).wait_for_publish(10)   # only the No Local one matches
    other = V5(gateway.port, "nlo-other").connect()
    other.client.publish("nlo/t", b"other", 2).wait_for_publish(10)
    got = until(sub, b"other")
    assert [(m.payload, m.qos, sub_ids(m)) for m in got] == [(b"own", 1, [2]), (b"other", 2, [1, 2])]
    other.close()
    sub.close()


def test_retain_as_published_keeps_the_retain_flag_on_live_messages(gateway):
    keep = V5(gateway.port, "rap-keep").connect()
    assert keep.subscribe("rap/t", 1, retainAsPublished=True) == [1]
    plain = V5(gateway.port, "rap-plain").connect()
    assert plain.subscribe("rap/t", 1) == [1]
    pub = V5(gateway.port, "rap-pub").connect()
    props = publish_props(ContentType="text/plain", UserProperty=[("k", "v")])
    pub.client.publish("rap/t", b"retained", 1, retain=True, properties=props).wait_for_publish(10)
    pub.client.publish("rap/t", b"live", 1).wait_for_publish(10)
    assert [(m.payload, m.retain) for m in until(keep, b"live")] == [(b"retained", True), (b"live", False)]
    assert [(m.payload, m.retain) for m in until(plain, b"live")] == [(b"retained", False), (b"live", False)]
    late = V5(gateway.port, "rap-late").connect()   # a retained message sent for a new subscription: RETAIN 1
    assert late.subscribe("rap/t", 1) == [1]
    (msg,) = late.wait(1)
    assert (msg.payload, msg.retain, msg.properties.ContentType, msg.properties.UserProperty) == (
        b"retained", True, "text/plain", [("k", "v")])   # kept with the retained message
    for c in (keep, plain, pub, late):
        c.close()


def test_retain_handling_0_1_2(gateway):
    pub = V5(gateway.port, "rh-pub").connect()
    pub.client.publish("rh/t", b"ret", 1, retain=True).wait_for_publish(10)
    always = V5(gateway.port, "rh-0").connect()
    new_only = V5(gateway.port, "rh-1").connect()
    never = V5(gateway.port, "rh-2").connect()
    for _ in range(2):   # subscribe, then subscribe again to the same filter
        assert always.subscribe("rh/t", 1, retainHandling=0) == [1]
        assert new_only.subscribe("rh/t", 1, retainHandling=1) == [1]
        assert never.subscribe("rh/t", 1, retainHandling=2) == [1]
    pub.client.publish("rh/t", b"marker", 1).wait_for_publish(10)
    assert [m.payload for m in until(always, b"marker")] == [b"ret", b"ret", b"marker"]
    assert [m.payload for m in until(new_only, b"marker")] == [b"ret", b"marker"]
    assert [m.payload for m in until(never, b"marker")] == [b"marker"]
    assert unsubscribe5(new_only, "rh/t") == [0]   # a new subscription again: sent the retained message
    assert new_only.subscribe("rh/t", 1, retainHandling=1) == [1]
    pub.client.publish("rh/t", b"marker2", 1).wait_for_publish(10)
    assert [m.payload for m in until(new_only, b"marker2")] == [b"ret", b"marker", b"ret", b"marker2"]
    for c in (pub, always, new_only, never):
        c.close()


def test_overlapping_subscriptions_give_one_delivery_with_every_identifier(gateway):
    sub = V5(gateway.port, "si-sub").connect()
    assert sub.subscribe("si/#", 0, props=sub_props(1)) == [0]
    assert sub.subscribe("si/+", 1, props=sub_props(268_435_455)) == [1]   # the largest identifier
    assert sub.subscribe("si/+/z", 2) == [2]   # no identifier
    pub = V5(gateway.port, "si-pub").connect()
    pub.client.publish("si/a", b"both", 2).wait_for_publish(10)
    pub.client.publish("si/a/b", b"one", 2).wait_for_publish(10)
    pub.client.publish("si/a/z", b"mixed", 2).wait_for_publish(10)
    got = until(sub, b"mixed")
    assert [(m.payload, m.qos, sub_ids(m)) for m in got] == [
        (b"both", 1, [1, 268_435_455]), (b"one", 0, [1]), (b"mixed", 2, [1])]
    pub.close()
    sub.close()


def test_retained_message_sent_for_a_subscription_carries_its_identifier(gateway):
    pub = V5(gateway.port, "sir-pub").connect()
    pub.client.publish("sir/t", b"ret", 1, retain=True).wait_for_publish(10)
    sub = V5(gateway.port, "sir-sub").connect()
    assert sub.subscribe("sir/+", 1, props=sub_props(9)) == [1]
    (msg,) = sub.wait(1)
    assert (msg.payload, msg.retain, sub_ids(msg)) == (b"ret", True, [9])
    pub.close()
    sub.close()


def test_subscribing_again_replaces_the_options(gateway):
    sub = V5(gateway.port, "cs-sub").connect()
    assert sub.subscribe("cs/t", 0, props=sub_props(5), noLocal=True) == [0]
    sub.client.publish("cs/t", b"own-1", 1).wait_for_publish(10)
    assert sub.subscribe("cs/t", 1, props=sub_props(6)) == [1]   # No Local off, QoS 1, identifier 6
    sub.client.publish("cs/t", b"own-2", 1).wait_for_publish(10)
    assert sub.subscribe("cs/t", 2) == [2]   # no identifier any more
    sub.client.publish("cs/t", b"own-3", 2).wait_for_publish(10)
    got = until(sub, b"own-3")
    assert [(m.payload, m.qos, sub_ids(m)) for m in got] == [(b"own-2", 1, [6]), (b"own-3", 2, [])]
    assert [s["qos"] for s in gateway.admin("/subscriptions")[1] if s["client_id"] == "cs-sub"] == [2]
    sub.close()


@pytest.mark.parametrize("packet", [
    P.Subscribe(1, (("bad/rh", 0x31),)),                                        # Retain Handling 3
    P.Subscribe(1, (("bad/si", 1),), {PR.SUBSCRIPTION_IDENTIFIER: 0}),          # identifier 0
    P.Publish("bad/si", b"x", 0, properties={PR.SUBSCRIPTION_IDENTIFIER: [1]}),  # only servers send one
    P.Publish("bad/rt", b"x", 0, properties={PR.RESPONSE_TOPIC: "reply/#"}),    # wildcard Response Topic
], ids=["retain-handling-3", "subscription-identifier-0", "publish-with-identifier", "wildcard-response-topic"])
def test_protocol_errors_in_subscribe_and_publish_close_with_0x82(gateway, packet):
    sub = V5(gateway.port, "pe-sub").connect()
    assert sub.subscribe("bad/#", 0) == [0]
    raw, _ = raw5(gateway.port, "pe-raw")
    raw.send(P.encode(packet, 5))
    packets = read_until_closed(raw)
    assert [(type(p), getattr(p, "reason_code", None)) for p in packets] == [(P.Disconnect, 0x82)]
    raw.close()
    pub = V5(gateway.port, "pe-pub").connect()
    pub.client.publish("bad/after", b"after", 1).wait_for_publish(10)
    assert [m.payload for m in until(sub, b"after")] == [b"after"]   # nothing of the refused one
    pub.close()
    sub.close()


# -- 5. SUBACK and UNSUBACK reason codes ---------------------------------------------------------------


def test_suback_and_unsuback_reason_codes(gateway):
    raw, connack = raw5(gateway.port, "rc-raw")
    assert PR.SHARED_SUBSCRIPTION_AVAILABLE not in connack.properties   # available: the default
    filters = (("rc/a", 2), ("a/#/b", 1), ("$share/g/t", 1), ("rc/b", 0), ("rc/+x", 1), ("rc/c", 1),
               ("$share/g", 1), ("$share/g+/t", 1))
    raw.send(P.encode(P.Subscribe(1, filters), 5))
    suback = raw.recv()
    assert (suback.packet_id, suback.return_codes) == (1, (2, 0x8F, 1, 0, 0x8F, 1, 0x8F, 0x8F))
    why = suback.properties[PR.REASON_STRING]   # each refused filter named, with why
    assert why.startswith("refused: ") and all(f"{f!r}:" in why for f in ("a/#/b", "rc/+x", "$share/g", "$share/g+/t"))
    mine = {s["topic_filter"] for s in gateway.admin("/subscriptions")[1] if s["client_id"] == "rc-raw"}
    assert mine == {"rc/a", "rc/b", "rc/c"}   # the group is listed under its own key
    raw.send(P.encode(P.Unsubscribe(2, ("rc/a", "never/subscribed", "a/#/b", "$share/g/t")), 5))
    unsuback = raw.recv()
    assert (unsuback.packet_id, unsuback.reason_codes) == (2, (0x00, 0x11, 0x8F, 0x00))
    assert "'a/#/b':" in unsuback.properties[PR.REASON_STRING] and "never" not in unsuback.properties[PR.REASON_STRING]
    raw.send(P.encode(P.Unsubscribe(3, ("rc/a", "rc/b")), 5))
    assert raw.recv() == P.Unsuback(3, (0x11, 0x00))
    raw.send(P.encode(P.Publish("rc/a", b"gone", 0), 5))
    raw.send(P.encode(P.Publish("rc/c", b"kept", 0), 5))
    got = raw.receive_until(lambda p: p.topic == "rc/c")
    assert [(p.topic, p.payload) for p in got] == [("rc/c", b"kept")]
    raw.close()


def test_unsuback_codes_seen_by_paho(gateway):
    sub = V5(gateway.port, "ru-sub").connect()
    assert sub.subscribe("ru/t", 1) == [1]
    assert unsubscribe5(sub, "ru/t") == [0x00]
    assert unsubscribe5(sub, "ru/t") == [0x11]
    sub.close()


def test_reason_strings_follow_request_problem_information_and_maximum_packet_size(gateway):
    """A refusing SUBACK carries a Reason String, except to a client that asked for none (Request Problem
    Information 0, §3.1.2.11.7) or whose Maximum Packet Size it would exceed (§3.9.2.1.2)."""
    refused = (("ok/a", 1), ("bad/#/x", 1))
    for props, expect_reason in (({}, True), ({PR.REQUEST_PROBLEM_INFORMATION: 0}, False),
                                 ({PR.MAXIMUM_PACKET_SIZE: 40}, False)):
        raw, connack = raw5(gateway.port, f"rs-{len(props)}-{expect_reason}", props=props or None)
        assert connack.return_code == 0
        raw.send(P.encode(P.Subscribe(1, refused), 5))
        suback = raw.recv()
        assert suback.return_codes == (1, 0x8F)
        assert (PR.REASON_STRING in (suback.properties or {})) is expect_reason, props
        raw.close()
