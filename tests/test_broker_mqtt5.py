"""MQTT 5.0 in the built-in broker, with real MQTT 5 clients (paho-mqtt 2.x, MQTTv5)."""
from __future__ import annotations

from bridge.mqtt import packets as P
from bridge.mqtt import properties as PR
from tests.support.mqtt5_client import V5, publish_props, raw5, read_until_closed
from tests.support.mqtt_clients import RawClient


def test_properties_reach_a_v5_subscriber_unchanged(gateway):
    sub = V5(gateway.port, "sub").connect()
    assert sub.subscribe("p/#", 1) == [1]
    pub = V5(gateway.port, "pub").connect()
    props = publish_props(ContentType="text/plain", ResponseTopic="reply/here", CorrelationData=b"\x00\x01corr",
                          PayloadFormatIndicator=1, UserProperty=[("a", "1"), ("b", "2"), ("a", "3")],
                          MessageExpiryInterval=3600)
    pub.client.publish("p/1", b"hello", 1, properties=props).wait_for_publish(10)
    (msg,) = sub.wait(1)
    got = msg.properties
    assert msg.payload == b"hello" and msg.topic == "p/1"
    assert got.ContentType == "text/plain" and got.ResponseTopic == "reply/here"
    assert got.CorrelationData == b"\x00\x01corr" and got.PayloadFormatIndicator == 1
    assert got.UserProperty == [("a", "1"), ("b", "2"), ("a", "3")]
    assert 3590 <= got.MessageExpiryInterval <= 3600
    pub.close()
    sub.close()


def test_packets_sent_with_the_connect_are_decoded_at_its_level(gateway):
    """A client may send SUBSCRIBE and PUBLISH right behind its CONNECT, before CONNACK: they are level 5."""
    raw = RawClient(gateway.port)
    raw.send(P.encode(P.Connect(5, "pipelined", properties={PR.RECEIVE_MAXIMUM: 10}))
             + P.encode(P.Subscribe(1, (("pipe/#", 1),), {PR.SUBSCRIPTION_IDENTIFIER: 7}), 5)
             + P.encode(P.Publish("pipe/a", b"x", 1, packet_id=2, properties={PR.CONTENT_TYPE: "t"}), 5))
    raw.reader.level = 5
    got = [raw.recv() for _ in range(4)]
    assert isinstance(got[0], P.Connack) and got[0].return_code == 0
    assert P.Suback(1, (1,)) in got
    assert P.PacketIdOnly(P.PUBACK, 2) in got
    (pub,) = [p for p in got if isinstance(p, P.Publish)]
    assert pub.topic == "pipe/a" and pub.properties == {PR.CONTENT_TYPE: "t", PR.SUBSCRIPTION_IDENTIFIER: [7]}
    raw.close()


def test_a_publication_read_together_with_a_broken_packet_is_not_lost(gateway):
    sub = V5(gateway.port, "watcher").connect()
    assert sub.subscribe("kept/#", 1) == [1]
    raw = RawClient(gateway.port)
    raw.send(P.encode(P.Connect(5, "sloppy")))
    raw.reader.level = 5
    assert raw.recv().return_code == 0
    raw.send(P.encode(P.Publish("kept/1", b"first", 1, packet_id=9), 5) + b"\xf5\x00")   # AUTH flags must be 0
    assert raw.recv() == P.PacketIdOnly(P.PUBACK, 9)
    closing = raw.recv()
    assert isinstance(closing, P.Disconnect) and closing.reason_code == P.Reason.MALFORMED_PACKET
    (msg,) = sub.wait(1)
    assert msg.payload == b"first"
    sub.close()


def test_request_problem_information_0_reason_strings_only_on_connack_and_disconnect(gateway):
    """§3.1.2.11.7: with Request Problem Information 0 the server may send a Reason String or User Properties
    on CONNACK and DISCONNECT only (and PUBLISH); the broker's acknowledgements carry none at all."""
    raw, connack = raw5(gateway.port, "rpi0", props={PR.REQUEST_PROBLEM_INFORMATION: 0})
    assert isinstance(connack, P.Connack) and connack.return_code == 0
    assert not {PR.REASON_STRING, PR.USER_PROPERTY} & set(connack.properties or {})
    raw.send(P.encode(P.Subscribe(1, (("bad/#/x", 1), ("ok/#", 1))), P.MQTT_5))
    assert raw.recv() == P.Suback(1, (P.Reason.TOPIC_FILTER_INVALID, 1))   # no properties
    raw.send(P.encode(P.Unsubscribe(2, ("never/subscribed",)), P.MQTT_5))
    assert raw.recv() == P.Unsuback(2, (P.Reason.NO_SUBSCRIPTION_EXISTED,))
    raw.send(P.encode(P.Publish("ok/1", b"x", 2, False, False, 3, {}), P.MQTT_5))
    assert raw.recv() == P.PacketIdOnly(P.PUBREC, 3)
    raw.send(P.encode_ack5(P.PUBREL, 3))
    packets = []
    while len(packets) < 2:   # PUBCOMP, and the publication back through ok/#, in either order
        packets.append(raw.recv())
    assert P.PacketIdOnly(P.PUBCOMP, 3) in packets
    # a PUBLISH with an empty topic (no Topic Alias): DISCONNECT 0x90 with its Reason String all the same
    raw.send(P.encode(P.Publish("", b"x", 0, False, False, None, {}), P.MQTT_5))
    (disconnect,) = [p for p in read_until_closed(raw) if not isinstance(p, P.PacketIdOnly)]
    assert isinstance(disconnect, P.Disconnect) and disconnect.reason_code == P.Reason.TOPIC_NAME_INVALID
    assert "topic name is empty" in (disconnect.properties or {})[PR.REASON_STRING]
