"""MQTT 5.0 reason codes the broker sends, packet by packet, over raw sockets (OASIS "MQTT Version 5.0"
§2.4 and each packet's reason code table): 0x92 Packet Identifier not found on PUBREL and PUBCOMP (3.1.1 keeps
its plain acknowledgements), 0x97 Quota exceeded, 0x90 Topic Name invalid on PUBLISH and on a will, and the
CONNACK of the defaults: the properties whose absence means "available", and the 168-hour session expiry that
3.1/3.1.1 sessions get and MQTT 5 requests are capped at."""
from __future__ import annotations

import pytest

from bridge.mqtt import packets as P
from bridge.mqtt import properties as PR
from tests.support.gateway import wait_for
from tests.support.mqtt5_client import V5, raw5, read_until_closed
from tests.support.mqtt_clients import RawClient

WEEK = 168 * 3600   # limits.session_expiry_hours' default, in seconds


def test_pubrec_for_a_packet_id_not_in_flight_is_answered_with_pubrel_0x92(gateway):
    raw, connack = raw5(gateway.port, "nf-rec")
    assert connack.return_code == 0
    raw.send(P.encode(P.PacketIdOnly(P.PUBREC, 77), 5))
    assert raw.recv() == P.PacketIdOnly(P.PUBREL, 77, reason_code=P.Reason.PACKET_IDENTIFIER_NOT_FOUND)
    raw.send(P.encode(P.Subscribe(1, (("nf/#", 2),)), 5))   # the connection goes on
    assert raw.recv() == P.Suback(1, (2,))
    raw.close()


def test_a_known_qos2_delivery_is_released_with_0x00_and_a_repeated_pubrec_too(gateway):
    raw, _ = raw5(gateway.port, "nf-known")
    raw.send(P.encode(P.Subscribe(1, (("nk/#", 2),)), 5))
    assert raw.recv() == P.Suback(1, (2,))
    pub = V5(gateway.port, "nf-known-pub").connect()
    pub.client.publish("nk/1", b"one", 2).wait_for_publish(10)
    (delivery,) = raw.receive_until(lambda p: p.payload == b"one", ack=False)
    for _ in range(2):   # the second PUBREC: the PUBREL was lost, the id is still ours (released)
        raw.ack(P.PUBREC, delivery.packet_id)
        assert raw.recv() == P.PacketIdOnly(P.PUBREL, delivery.packet_id)
    raw.ack(P.PUBCOMP, delivery.packet_id)
    raw.ack(P.PUBREC, delivery.packet_id)   # completed: no longer ours
    assert raw.recv() == P.PacketIdOnly(P.PUBREL, delivery.packet_id,
                                        reason_code=P.Reason.PACKET_IDENTIFIER_NOT_FOUND)
    pub.close()
    raw.close()


def test_pubrel_for_a_publication_not_held_is_answered_with_pubcomp_0x92(gateway):
    sub = V5(gateway.port, "nf-rel-sub").connect()
    assert sub.subscribe("nr/#", 2) == [2]
    raw, _ = raw5(gateway.port, "nf-rel")
    raw.send(P.encode(P.Publish("nr/t", b"held", 2, packet_id=5), 5))
    assert raw.recv() == P.PacketIdOnly(P.PUBREC, 5)
    raw.ack(P.PUBREL, 5)
    assert raw.recv() == P.PacketIdOnly(P.PUBCOMP, 5)
    raw.ack(P.PUBREL, 5)   # again (as after a lost PUBCOMP): released already
    assert raw.recv() == P.PacketIdOnly(P.PUBCOMP, 5, reason_code=P.Reason.PACKET_IDENTIFIER_NOT_FOUND)
    raw.ack(P.PUBREL, 9)   # never published
    assert raw.recv() == P.PacketIdOnly(P.PUBCOMP, 9, reason_code=P.Reason.PACKET_IDENTIFIER_NOT_FOUND)
    wait_for(lambda: [m.payload for m in list(sub.messages)] == [b"held"], 10, what="the one publication")
    raw.close()
    sub.close()


def test_a_311_client_gets_plain_pubrel_and_pubcomp_for_unknown_ids(gateway):
    raw = RawClient(gateway.port)
    assert raw.connect("nf-311").return_code == 0
    raw.ack(P.PUBREC, 31)
    assert raw.recv() == P.PacketIdOnly(P.PUBREL, 31)
    raw.ack(P.PUBREL, 32)
    assert raw.recv() == P.PacketIdOnly(P.PUBCOMP, 32)
    raw.sock.close()


def test_unreleased_qos2_beyond_max_queued_bytes_ends_the_connection_with_0x97(gateway_factory):
    gw = gateway_factory({"broker": {"limits": {"max_queued_bytes": 1024}}})
    raw, _ = raw5(gw.port, "quota")
    raw.send(P.encode(P.Publish("qb/t", b"a" * 600, 2, packet_id=1), 5))
    assert raw.recv() == P.PacketIdOnly(P.PUBREC, 1)
    raw.send(P.encode(P.Publish("qb/t", b"b" * 600, 2, packet_id=2), 5))   # 1,200 bytes unreleased
    packets = read_until_closed(raw)
    assert [(type(p), getattr(p, "reason_code", None)) for p in packets] == [
        (P.Disconnect, P.Reason.QUOTA_EXCEEDED)]
    raw.close()
    other = V5(gw.port, "quota-other").connect()   # the broker goes on serving the others
    assert other.subscribe("qb/#", 1) == [1]
    other.close()


@pytest.mark.parametrize("topic", ["wild/+/t", "wild/#"])
def test_a_publish_to_a_topic_with_a_wildcard_ends_the_connection_with_0x90(gateway, topic):
    raw, _ = raw5(gateway.port, "wild-pub")
    raw.send(P.encode(P.Publish(topic, b"x", 1, packet_id=1), 5))
    packets = read_until_closed(raw)
    assert [(type(p), getattr(p, "reason_code", None)) for p in packets] == [
        (P.Disconnect, P.Reason.TOPIC_NAME_INVALID)]
    raw.close()


def test_a_will_topic_with_a_wildcard_is_refused_in_connack_with_0x90(gateway):
    raw, connack = raw5(gateway.port, "wild-will", will=P.Will("last/+/words", b"bye"))
    assert isinstance(connack, P.Connack) and connack.return_code == P.Reason.TOPIC_NAME_INVALID
    read_until_closed(raw)
    raw.close()


def test_connack_leaves_out_what_is_available_by_default(gateway):
    """Maximum QoS, Retain, Wildcard Subscriptions and Subscription Identifiers: all supported, so CONNACK
    leaves the properties out (§3.2.2.3.4-12: absent means QoS 2 and available); a client that relied on
    them works (the feature tests), and none is sent as 0."""
    raw, connack = raw5(gateway.port, "defaults")
    props = connack.properties or {}
    for name in (PR.MAXIMUM_QOS, PR.RETAIN_AVAILABLE, PR.WILDCARD_SUBSCRIPTION_AVAILABLE,
                 PR.SUBSCRIPTION_IDENTIFIER_AVAILABLE):
        assert name not in props, f"CONNACK carries property {name:#04x}"
    raw.send(P.encode(P.Subscribe(1, (("d/+/#", 2),), properties={PR.SUBSCRIPTION_IDENTIFIER: 7}), 5))
    assert raw.recv() == P.Suback(1, (2,))
    raw.send(P.encode(P.Publish("d/r/t", b"kept", 2, retain=True, packet_id=2), 5))
    assert raw.recv() == P.PacketIdOnly(P.PUBREC, 2)
    raw.ack(P.PUBREL, 2)
    got = raw.receive_until(lambda p: isinstance(p, P.Publish) and p.payload == b"kept")
    assert got[-1].qos == 2 and (got[-1].properties or {}).get(PR.SUBSCRIPTION_IDENTIFIER) == [7]
    raw.close()


def test_a_311_session_expires_after_168_hours_and_a_longer_v5_request_is_capped(gateway):
    raw = RawClient(gateway.port)
    assert raw.connect("week-311", clean=False).return_code == 0
    raw5_client, connack = raw5(gateway.port, "week-v5", clean=False,
                                props={PR.SESSION_EXPIRY_INTERVAL: 0xFFFFFFFE})
    # §3.2.2.3.2: the server tells the client the expiry it uses when it differs from the one asked for
    assert connack.properties[PR.SESSION_EXPIRY_INTERVAL] == WEEK
    sessions = {s["client_id"]: s for s in gateway.admin("/sessions")[1]}
    assert sessions["week-311"]["expiry_seconds"] == WEEK
    assert sessions["week-v5"]["expiry_seconds"] == WEEK
    raw.sock.close()
    raw5_client.close()
