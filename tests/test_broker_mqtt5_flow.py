"""MQTT 5.0 flow control and size limits in the built-in broker (OASIS "MQTT Version 5.0" §3.1.2.11.3-4,
§3.2.2.3.3-6, §4.9, §4.13): the client's Receive Maximum and Maximum Packet Size bound what the broker
sends it; the broker's announced Receive Maximum and Maximum Packet Size bound what it takes. Raw sockets
for the exact packets, paho-mqtt 2.x (MQTT 5) for the other clients."""
from __future__ import annotations

import time
from typing import Any

from paho.mqtt.packettypes import PacketTypes

from bridge.mqtt import packets as P
from bridge.mqtt import properties as PR
from tests.support.gateway import wait_for
from tests.support.mqtt5_client import V5, packet_props, publish_props, raw5, read_until_closed


def publish(client: V5, topic: str, payload: bytes, qos: int) -> None:
    info = client.client.publish(topic, payload, qos)
    if qos:
        info.wait_for_publish(10)
        assert info.is_published()


def until(client: V5, payload: bytes, timeout: float = 10.0) -> list[Any]:
    wait_for(lambda: any(m.payload == payload for m in list(client.messages)), timeout, what=f"{payload!r}")
    with client.lock:
        return list(client.messages)


def packets_until(raw: Any, payload: bytes) -> list[P.Packet]:
    """Every packet the raw client receives up to the PUBLISH of ``payload``, acknowledging nothing."""
    packets = [raw.recv()]
    while not (isinstance(packets[-1], P.Publish) and packets[-1].payload == payload):
        packets.append(raw.recv())
    return packets


def publish5_size(topic: str, payload: bytes, qos: int) -> int:
    """The size of the level 5 PUBLISH the broker sends for this (no properties)."""
    return len(P.encode(P.Publish(topic, payload, qos, packet_id=1 if qos else None), 5))


# -- 6. the client's Receive Maximum -------------------------------------------------------------------


def test_receive_maximum_bounds_unacknowledged_deliveries(gateway):
    raw, connack = raw5(gateway.port, "rm-raw", props={PR.RECEIVE_MAXIMUM: 2})
    assert connack.return_code == 0
    raw.send(P.encode(P.Subscribe(1, (("rm/#", 1),)), 5))
    assert raw.recv() == P.Suback(1, (1,))
    pub = V5(gateway.port, "rm-pub").connect()
    for i in range(1, 6):
        publish(pub, f"rm/{i}", b"q%d" % i, 1)
    publish(pub, "rm/marker", b"m1", 0)   # QoS 0 is not counted: it passes the window
    got = raw.receive_until(lambda p: p.payload == b"m1", ack=False)
    assert [(p.topic, p.qos) for p in got] == [("rm/1", 1), ("rm/2", 1), ("rm/marker", 0)]
    assert got[0].packet_id != got[1].packet_id
    raw.ack(P.PUBACK, got[0].packet_id)   # one acknowledged: one more may come, no more
    publish(pub, "rm/marker", b"m2", 0)
    more = raw.receive_until(lambda p: p.payload == b"m2", ack=False)
    assert [p.topic for p in more] == ["rm/3", "rm/marker"]
    raw.ack(P.PUBACK, got[1].packet_id)
    raw.ack(P.PUBACK, more[0].packet_id)
    rest = raw.receive_until(lambda p: p.topic == "rm/5")
    assert [p.topic for p in rest] == ["rm/4", "rm/5"]
    session = wait_for(lambda: [s for s in gateway.admin("/sessions")[1]
                                if s["client_id"] == "rm-raw" and s["inflight"] == 0], 10, what="all acknowledged")
    assert session[0]["queued"] == 0 and session[0]["sent"] == 7
    pub.close()
    raw.close()


def qos2_window(gateway: Any, client_id: str) -> tuple[Any, V5, P.Publish]:
    """A raw client with Receive Maximum 1 subscribed at QoS 2; two QoS 2 messages are published to it
    (``q1``, ``q2``): returns it, the publisher and the first PUBLISH (not acknowledged yet)."""
    raw, _ = raw5(gateway.port, client_id, props={PR.RECEIVE_MAXIMUM: 1})
    raw.send(P.encode(P.Subscribe(1, (("q2/#", 2),)), 5))
    assert raw.recv() == P.Suback(1, (2,))
    pub = V5(gateway.port, f"{client_id}-pub").connect()
    publish(pub, "q2/1", b"q1", 2)
    publish(pub, "q2/2", b"q2", 2)
    (first,) = raw.receive_until(lambda p: p.payload == b"q1", ack=False)
    return raw, pub, first


def test_qos2_delivery_holds_the_receive_maximum_until_pubcomp(gateway):
    raw, pub, first = qos2_window(gateway, "qw-raw")
    raw.ack(P.PUBREC, first.packet_id)
    assert raw.recv() == P.PacketIdOnly(P.PUBREL, first.packet_id)
    publish(pub, "q2/marker", b"m1", 0)
    assert [type(p) for p in packets_until(raw, b"m1")] == [P.Publish]   # q2 waits for the PUBCOMP
    raw.ack(P.PUBCOMP, first.packet_id)   # now the next one may come
    got = raw.receive_until(lambda p: p.payload == b"q2")
    assert [(p.payload, p.qos) for p in got] == [(b"q2", 2)]
    pub.close()
    raw.close()


def test_pubrec_with_an_error_code_ends_the_qos2_flow_and_frees_the_window(gateway):
    raw, pub, first = qos2_window(gateway, "qe-raw")
    raw.send(P.encode(P.PacketIdOnly(P.PUBREC, first.packet_id, reason_code=0x80), 5))
    publish(pub, "q2/marker", b"m1", 0)
    got = packets_until(raw, b"m1")
    # §4.3.3: PUBREL only answers a PUBREC below 0x80; §4.9: a PUBREC of 0x80 or more returns the quota
    assert [(type(p), getattr(p, "payload", None)) for p in got] == [(P.Publish, b"q2"), (P.Publish, b"m1")]
    pub.close()
    raw.close()


def test_message_expiring_while_queued_behind_the_window_is_not_sent(gateway):
    raw, _ = raw5(gateway.port, "rw-raw", props={PR.RECEIVE_MAXIMUM: 1})
    raw.send(P.encode(P.Subscribe(1, (("rw/#", 1),)), 5))
    assert raw.recv() == P.Suback(1, (1,))
    pub = V5(gateway.port, "rw-pub").connect()
    publish(pub, "rw/first", b"first", 1)
    (first,) = raw.receive_until(lambda p: p.payload == b"first", ack=False)
    pub.client.publish("rw/short", b"short", 1, properties=publish_props(MessageExpiryInterval=1)).wait_for_publish(10)
    pub.client.publish("rw/long", b"long", 1, properties=publish_props(MessageExpiryInterval=100)).wait_for_publish(10)
    deadline = time.monotonic() + 1.5   # the wait is the expiry under test
    wait_for(lambda: time.monotonic() >= deadline, 5, interval=0.05, what="rw/short to expire")
    raw.ack(P.PUBACK, first.packet_id)
    got = raw.receive_until(lambda p: p.payload == b"long")
    assert [p.payload for p in got] == [b"long"]
    assert 90 <= got[0].properties[PR.MESSAGE_EXPIRY_INTERVAL] <= 99
    pub.close()
    raw.close()


def offline(gateway: Any, client_id: str) -> None:
    wait_for(lambda: client_id not in {c["client_id"] for c in gateway.admin("/connections")[1]}, 10,
             what=f"{client_id} offline")


def inflight_left_unacknowledged(gateway: Any, client_id: str, payloads: list[bytes], props: dict[int, Any]) -> Any:
    """A persistent raw session sent ``payloads`` at QoS 1 which it never acknowledges, then gone; returns a
    new connection to that session with the CONNECT properties ``props`` (and a publisher)."""
    session = {PR.SESSION_EXPIRY_INTERVAL: 3600}
    raw, _ = raw5(gateway.port, client_id, props=session)
    raw.send(P.encode(P.Subscribe(1, (("rs/#", 1),)), 5))
    assert raw.recv() == P.Suback(1, (1,))
    pub = V5(gateway.port, f"{client_id}-pub").connect()
    for i, payload in enumerate(payloads):
        publish(pub, f"rs/{i}", payload, 1)
    got = raw.receive_until(lambda p: p.payload == payloads[-1], ack=False)
    assert [p.payload for p in got] == payloads
    raw.close()   # no DISCONNECT, no PUBACK
    offline(gateway, client_id)
    again, connack = raw5(gateway.port, client_id, clean=False, props={**session, **props})
    assert connack.session_present
    return again, pub


def test_resumed_session_resends_no_more_than_the_new_receive_maximum(gateway):
    payloads = [b"r%d" % i for i in range(5)]
    raw, pub = inflight_left_unacknowledged(gateway, "rr-raw", payloads, {PR.RECEIVE_MAXIMUM: 2})
    publish(pub, "rs/marker", b"marker", 0)
    got = raw.receive_until(lambda p: p.payload == b"marker", ack=False)
    # MQTT 5 §3.3.4 [MQTT-3.3.4-9]: at most Receive Maximum unacknowledged QoS 1/2 PUBLISHes
    assert [(p.payload, p.qos) for p in got] == [(b"r0", 1), (b"r1", 1), (b"marker", 0)]
    for p in got[:2]:
        raw.ack(P.PUBACK, p.packet_id)
    rest = raw.receive_until(lambda p: p.payload == b"r4")
    assert [p.payload for p in rest] == payloads[2:]
    pub.close()
    raw.close()


def test_resumed_session_is_not_resent_what_exceeds_its_new_maximum_packet_size(gateway):
    raw, pub = inflight_left_unacknowledged(gateway, "rp-raw", [b"x" * 500, b"small"], {PR.MAXIMUM_PACKET_SIZE: 100})
    publish(pub, "rs/marker", b"marker", 0)
    got = raw.receive_until(lambda p: p.payload == b"marker")
    # [MQTT-3.1.2-24]: never a packet above the client's maximum; [MQTT-3.1.2-25]: discarded as if sent
    assert [(p.payload, p.dup) for p in got] == [(b"small", True), (b"marker", False)]
    wait_for(lambda: [s for s in gateway.admin("/sessions")[1] if s["client_id"] == "rp-raw" and not s["inflight"]],
             10, what="nothing left in flight")
    pub.close()
    raw.close()


# -- 7. the client's Maximum Packet Size ---------------------------------------------------------------


def test_message_larger_than_the_clients_maximum_packet_size_is_not_sent(gateway):
    # Receive Maximum 1: a QoS 1 message left in flight would hold back every later one
    raw, _ = raw5(gateway.port, "mp-raw", props={PR.MAXIMUM_PACKET_SIZE: 100, PR.RECEIVE_MAXIMUM: 1})
    raw.send(P.encode(P.Subscribe(1, (("mp/#", 1),)), 5))
    assert raw.recv() == P.Suback(1, (1,))
    fits0, fits1 = b"a" * (100 - publish5_size("mp/e", b"", 0)), b"b" * (100 - publish5_size("mp/e", b"", 1))
    assert publish5_size("mp/e", fits0, 0) == publish5_size("mp/e", fits1, 1) == 100
    pub = V5(gateway.port, "mp-pub").connect()
    publish(pub, "mp/big", b"x" * 500, 0)
    publish(pub, "mp/e", fits0 + b"!", 0)   # one byte over
    publish(pub, "mp/small", b"s0", 0)
    publish(pub, "mp/e", fits0, 0)          # exactly the maximum
    publish(pub, "mp/big", b"y" * 500, 1)
    publish(pub, "mp/e", fits1 + b"!", 1)
    publish(pub, "mp/small", b"s1", 1)
    publish(pub, "mp/e", fits1, 1)
    got = raw.receive_until(lambda p: p.payload == fits1)
    assert [(p.topic, p.payload, p.qos) for p in got] == [
        ("mp/small", b"s0", 0), ("mp/e", fits0, 0), ("mp/small", b"s1", 1), ("mp/e", fits1, 1)]
    pub.close()
    raw.close()


def test_server_disconnect_leaves_out_its_reason_string_beyond_the_clients_maximum_packet_size(gateway):
    roomy, _ = raw5(gateway.port, "ds-roomy")
    tight, _ = raw5(gateway.port, "ds-tight", props={PR.MAXIMUM_PACKET_SIZE: 30})
    for raw in (roomy, tight):   # a Topic Alias never set: a protocol error with a long Reason String
        raw.send(P.encode(P.Publish("", b"x", 0, properties={PR.TOPIC_ALIAS: 1}), 5))
    (long,) = read_until_closed(roomy)
    (short,) = read_until_closed(tight)
    assert isinstance(long, P.Disconnect) and long.reason_code == 0x82 and long.properties[PR.REASON_STRING]
    assert short == P.Disconnect(0x82) and len(P.encode(short, 5)) <= 30
    roomy.close()
    tight.close()


def test_paho_client_with_a_maximum_packet_size_gets_the_small_messages(gateway):
    sub = V5(gateway.port, "mpp-sub", connect_props=packet_props(PacketTypes.CONNECT, MaximumPacketSize=100)).connect()
    assert sub.subscribe("mpp/#", 1) == [1]
    pub = V5(gateway.port, "mpp-pub").connect()
    publish(pub, "mpp/big", b"z" * 500, 1)
    publish(pub, "mpp/small", b"small", 1)
    assert [(m.topic, m.payload) for m in until(sub, b"small")] == [("mpp/small", b"small")]
    assert sub.disconnect_reason is None   # the client was not sent what it cannot take
    pub.close()
    sub.close()


# -- 8. the server's limits ----------------------------------------------------------------------------


def test_publish_larger_than_the_servers_maximum_packet_size_closes_the_connection(gateway_factory):
    gw = gateway_factory({"broker": {"limits": {"max_message_size": 1024}}})
    sub = V5(gw.port, "ms-sub").connect()
    assert sub.subscribe("ms/#", 0) == [0]
    raw, connack = raw5(gw.port, "ms-raw")
    limit = connack.properties[PR.MAXIMUM_PACKET_SIZE]
    assert limit == 1024 + 1 + 2   # remaining length 1024, its 2-byte encoding and the first byte
    fits = 1024 - (2 + 4 + 2 + 1)   # remaining length 1024: "ms/t" with its length, packet id, no properties
    exact = P.encode(P.Publish("ms/t", b"e" * fits, 1, packet_id=1), 5)
    assert len(exact) == limit
    raw.send(exact)
    assert raw.recv() == P.PacketIdOnly(P.PUBACK, 1)   # taken: exactly the announced maximum
    raw.send(P.encode(P.Publish("ms/t", b"o" * (fits + 1), 1, packet_id=2), 5))
    packets = read_until_closed(raw)
    # closed, after at most a DISCONNECT (its reason code: the next test)
    assert all(isinstance(p, P.Disconnect) for p in packets) and len(packets) <= 1, packets
    raw.close()
    other = V5(gw.port, "ms-other").connect()
    publish(other, "ms/after", b"after", 1)
    got = until(sub, b"after")
    assert [(m.topic, len(m.payload)) for m in got] == [("ms/t", fits), ("ms/after", 5)]
    other.close()
    sub.close()


def test_publish_larger_than_the_servers_maximum_packet_size_is_answered_with_0x95(gateway_factory):
    gw = gateway_factory({"broker": {"limits": {"max_message_size": 1024}}})
    raw, _ = raw5(gw.port, "mt-raw")
    raw.send(P.encode(P.Publish("mt/t", b"o" * 1100, 1, packet_id=1), 5))
    packets = read_until_closed(raw)
    # MQTT 5 §3.2.2.3.6: a client that exceeds the server's Maximum Packet Size is disconnected with 0x95
    assert [(type(p), getattr(p, "reason_code", None)) for p in packets] == [(P.Disconnect, 0x95)]
    raw.close()


def test_more_unreleased_qos2_than_the_servers_receive_maximum_is_refused_with_0x93(gateway_factory):
    gw = gateway_factory({"broker": {"limits": {"max_inbound_qos2": 2}}})
    sub = V5(gw.port, "rq-sub").connect()
    assert sub.subscribe("rq/#", 2) == [2]
    raw, connack = raw5(gw.port, "rq-raw")
    assert connack.properties[PR.RECEIVE_MAXIMUM] == 2
    for pid in (1, 2):
        raw.send(P.encode(P.Publish("rq/t", b"m%d" % pid, 2, packet_id=pid), 5))
        assert raw.recv() == P.PacketIdOnly(P.PUBREC, pid)
    raw.ack(P.PUBREL, 1)   # released: its place is free again
    assert raw.recv() == P.PacketIdOnly(P.PUBCOMP, 1)
    for pid in (3, 4):   # 2 and 3 unreleased: the 4th is one more than the server's Receive Maximum
        raw.send(P.encode(P.Publish("rq/t", b"m%d" % pid, 2, packet_id=pid), 5))
    packets = read_until_closed(raw)
    assert packets[:1] == [P.PacketIdOnly(P.PUBREC, 3)]
    assert [(type(p), getattr(p, "reason_code", None)) for p in packets[1:]] == [(P.Disconnect, 0x93)]
    raw.close()
    other = V5(gw.port, "rq-other").connect()   # the broker goes on serving the others
    publish(other, "rq/after", b"after", 2)
    assert [m.payload for m in until(sub, b"after")] == [b"m1", b"after"]   # only the released one
    other.close()
    sub.close()
