"""MQTT 5 Topic Aliases from the broker to a client (§3.3.2.3.4), when `limits.topic_aliases_out` allows
them: only to a client that announced a Topic Alias Maximum, never above it or that limit, per connection.
Off by default: mosquitto_sub 2.0.11 announces a maximum and then fails on the first aliased PUBLISH."""
from __future__ import annotations

import pytest

from bridge.mqtt import packets as P
from bridge.mqtt import properties as PR
from tests.support.gateway import wait_for
from tests.support.mosquitto import AVAILABLE
from tests.support.mqtt5_client import V5, mosquitto_sub_v5, raw5


def _deliveries(raw, n: int) -> list[tuple[str, int | None, bytes]]:
    """The next ``n`` PUBLISH packets as (topic on the wire, Topic Alias, payload), each acknowledged."""
    got = []
    while len(got) < n:
        packet = raw.recv(timeout=10)
        if isinstance(packet, P.Publish):
            got.append((packet.topic, (packet.properties or {}).get(PR.TOPIC_ALIAS), packet.payload))
            if packet.qos == 1:
                raw.send(P.encode_ack(P.PUBACK, packet.packet_id))
    return got


def _subscribed(raw, topic_filter: str) -> None:
    raw.send(P.encode(P.Subscribe(1, ((topic_filter, 1),)), 5))
    assert isinstance(raw.recv(timeout=10), P.Suback)


@pytest.fixture
def aliased(gateway_factory):
    return gateway_factory({"broker": {"limits": {"topic_aliases_out": 2}}})


def test_aliases_up_to_the_smaller_maximum_then_names_and_anew_on_each_connection(aliased):
    raw, connack = raw5(aliased.port, "ao-sub", clean=False, props={PR.TOPIC_ALIAS_MAXIMUM: 5,
                                                                     PR.SESSION_EXPIRY_INTERVAL: 600})
    assert isinstance(connack, P.Connack)
    _subscribed(raw, "ao/#")
    pub = V5(aliased.port, "ao-pub").connect()
    sends = [("ao/long/one", 0), ("ao/long/one", 1), ("ao/long/two", 1), ("ao/long/three", 0),
             ("ao/long/two", 0), ("ao/long/three", 1)]
    for i, (topic, qos) in enumerate(sends):
        pub.client.publish(topic, f"m{i}".encode(), qos).wait_for_publish(10)
    assert _deliveries(raw, len(sends)) == [
        ("ao/long/one", 1, b"m0"),     # the name with its new alias
        ("", 1, b"m1"),                # then the alias alone, QoS 1 as QoS 0
        ("ao/long/two", 2, b"m2"),
        ("ao/long/three", None, b"m3"),   # the broker's limit (2) is below the client's (5): no third
        ("", 2, b"m4"),
        ("ao/long/three", None, b"m5"),
    ]
    raw.close()

    def session() -> dict:
        return next(s for s in aliased.admin("/sessions")[1] if s["client_id"] == "ao-sub")

    # offline (once the broker has seen the connection end): queued for the session, then sent on a new
    # connection, where no alias is known yet
    wait_for(lambda: not session()["connected"], 10, what="the broker to see the subscriber leave")
    pub.client.publish("ao/long/two", b"queued", 1).wait_for_publish(10)
    wait_for(lambda: session()["queued"] + session()["inflight"] == 1, 10,
             what="the publication held for the offline session")
    again, connack = raw5(aliased.port, "ao-sub", clean=False, props={PR.TOPIC_ALIAS_MAXIMUM: 1,
                                                                       PR.SESSION_EXPIRY_INTERVAL: 600})
    assert connack.session_present
    pub.client.publish("ao/long/one", b"live", 0).wait_for_publish(10)
    pub.client.publish("ao/long/two", b"live2", 0).wait_for_publish(10)
    pub.client.publish("ao/long/two", b"live3", 0).wait_for_publish(10)
    assert _deliveries(again, 4) == [("ao/long/two", 1, b"queued"), ("ao/long/one", None, b"live"),
                                     ("", 1, b"live2"), ("", 1, b"live3")]
    again.close()
    pub.close()


def test_no_alias_to_a_client_without_a_maximum_or_for_a_topic_shorter_than_one(aliased):
    plain, _ = raw5(aliased.port, "ao-plain")                      # announced no Topic Alias Maximum
    short, _ = raw5(aliased.port, "ao-short", props={PR.TOPIC_ALIAS_MAXIMUM: 3})
    _subscribed(plain, "a/#")
    _subscribed(short, "a/#")
    pub = V5(aliased.port, "ao-pub2").connect()
    for payload in (b"1", b"2"):
        pub.client.publish("a/b", payload, 1).wait_for_publish(10)     # 3 bytes: an alias saves nothing
        pub.client.publish("a/bcd", payload, 1).wait_for_publish(10)
    assert _deliveries(plain, 4) == [("a/b", None, b"1"), ("a/bcd", None, b"1"),
                                     ("a/b", None, b"2"), ("a/bcd", None, b"2")]
    assert _deliveries(short, 4) == [("a/b", None, b"1"), ("a/bcd", 1, b"1"), ("a/b", None, b"2"), ("", 1, b"2")]
    for raw in (plain, short):
        raw.close()
    pub.close()


@pytest.mark.skipif(not AVAILABLE, reason="mosquitto-clients not installed")
def test_by_default_no_alias_reaches_mosquitto_sub_which_announces_a_maximum_it_cannot_read(gateway):
    topics = ["ao/m/first", "ao/m/second", "ao/m/third", "ao/m/first", "ao/m/second", "ao/m/third"]

    def publish() -> None:
        pub = V5(gateway.port, "ao-pub3").connect()
        for i, topic in enumerate(topics):
            pub.client.publish(topic, f"p{i}".encode(), i % 2).wait_for_publish(10)
        pub.close()

    code, out, err = mosquitto_sub_v5(gateway, "ao-mosq", ["-q", "1", "-t", "ao/m/#", "-C", "6", "-F", "%t|%p",
                                                           "-D", "connect", "topic-alias-maximum", "10"], publish)
    assert code == 0, err
    assert out.splitlines() == [f"{t}|p{i}" for i, t in enumerate(topics)]
