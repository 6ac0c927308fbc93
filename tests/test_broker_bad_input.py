"""Malformed input closes only the offending connection, with a logged reason; everyone else is served."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bridge.mqtt import packets as P
from tests.support.gateway import GatewayProcess, wait_for
from tests.support.mqtt_clients import PahoClient, RawClient

CONNECT = P.encode(P.Connect(P.MQTT_311, "bad-client"))

CASES = {
    "remaining length with a 5th byte": CONNECT + bytes([0x30, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]),
    "bad PUBACK flags": CONNECT + bytes([0x41, 2, 0, 1]),
    "truncated topic string": CONNECT + bytes([0x30, 5, 0, 9, 0x61, 0x62, 0x63]),
    "invalid UTF-8 topic": CONNECT + bytes([0x30, 5, 0, 3, 0x61, 0xC0, 0xAF]),
    "packet before CONNECT": bytes([0xC0, 0]),
    "publish before CONNECT": P.encode(P.Publish("a", b"x")),
    "second CONNECT": CONNECT + CONNECT,
    "unknown packet type 15": CONNECT + bytes([0xF0, 0]),
    "reserved type 0": CONNECT + bytes([0x00, 0]),
    "publish to a wildcard topic": CONNECT + P.encode(P.Publish("a/+", b"x")),
    "client sends CONNACK": CONNECT + bytes([0x20, 2, 0, 0]),
    "client sends SUBACK": CONNECT + bytes([0x90, 3, 0, 1, 0]),
    "subscribe without topics": CONNECT + bytes([0x82, 2, 0, 1]),
    "oversize packet": CONNECT + bytes([0x30]) + P.encode_length(5_000_000),
    "reserved connect flag": CONNECT[:9] + bytes([CONNECT[9] | 1]) + CONNECT[10:],
    "subscribe to an empty filter": CONNECT + bytes([0x82, 5, 0, 1, 0, 0, 0]),
    "unsubscribe an invalid filter": CONNECT + bytes([0xA2, 9, 0, 1, 0, 5]) + b"a/#/b",
    "unsubscribe an empty filter": CONNECT + bytes([0xA2, 4, 0, 1, 0, 0]),
}

EXPECTED_LOG = {
    "remaining length with a 5th byte": "more than 4 bytes",
    "bad PUBACK flags": "flags",
    "truncated topic string": "declares 9 bytes",
    "invalid UTF-8 topic": "not valid UTF-8",
    "packet before CONNECT": "PINGREQ before CONNECT",
    "publish before CONNECT": "PUBLISH before CONNECT",
    "second CONNECT": "second CONNECT",
    "unknown packet type 15": "unknown packet type 15",
    "reserved type 0": "unknown packet type 0",
    "publish to a wildcard topic": "contains a wildcard",
    "client sends CONNACK": "must not send CONNACK",
    "client sends SUBACK": "must not send SUBACK",
    "subscribe without topics": "no topic filters",
    "oversize packet": "exceeds the limit",
    "reserved connect flag": "reserved connect flag",
    "subscribe to an empty filter": "SUBSCRIBE: invalid topic filter: topic filter is empty",
    "unsubscribe an invalid filter": "UNSUBSCRIBE: invalid topic filter: '#' must be a whole last level",
    "unsubscribe an empty filter": "UNSUBSCRIBE: invalid topic filter: topic filter is empty",
}


@pytest.fixture(scope="module")
def shared_gateway(tmp_path_factory: pytest.TempPathFactory) -> GatewayProcess:
    gw = GatewayProcess(
        tmp_path_factory.mktemp("badinput"), {"broker": {"limits": {"max_message_size": 1_000_000}, "sys_interval": 0}}
    ).start()
    yield gw
    gw.stop()


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_input_closes_only_that_connection(
    shared_gateway: GatewayProcess, clients: Callable[..., PahoClient], case: str
) -> None:
    gw = shared_gateway
    bystander = clients(gw.port).connect()
    bystander.subscribe("still/here", 1)

    raw = RawClient(gw.port)
    raw.send(CASES[case])
    assert raw.closed_by_peer(5), f"{case}: the broker kept the connection open"
    raw.close()

    wait_for(lambda: EXPECTED_LOG[case] in gw.log(), 5, what=f"log line for {case!r}")
    # the broker keeps serving the other client
    bystander.publish("still/here", f"after {case}", 1)
    got = bystander.wait_messages(1)
    assert got[-1].payload == f"after {case}".encode()
    assert gw.proc is not None and gw.proc.poll() is None


def test_bad_protocol_level_gets_connack_1(shared_gateway: GatewayProcess) -> None:
    raw = RawClient(shared_gateway.port)
    raw.send(P.encode(P.Connect(P.MQTT_311, "x")).replace(b"MQTT\x04", b"MQTT\x07"))
    packet = raw.recv()
    assert packet == P.Connack(P.ConnackCode.UNACCEPTABLE_PROTOCOL_VERSION)
    assert raw.closed_by_peer(5)


def test_garbage_bytes_then_silence_times_out_with_reason(gateway_factory: Callable[..., GatewayProcess]) -> None:
    gw = gateway_factory({"broker": {"limits": {"connect_timeout": 0.5}, "sys_interval": 0}})
    raw = RawClient(gw.port)
    raw.send(b"\x10")  # the start of a CONNECT that never completes
    assert raw.closed_by_peer(5)
    wait_for(lambda: "no CONNECT within 0.5 s" in gw.log(), 5, what="connect timeout log line")


def test_pubrec_for_a_qos1_delivery_is_a_protocol_error(shared_gateway: GatewayProcess,
                                                        clients: Callable[..., PahoClient]) -> None:
    """A PUBREC answers only a QoS 2 delivery; for a QoS 1 one the broker closes the connection instead of
    sending a PUBREL the client never expects."""
    gw = shared_gateway
    raw = RawClient(gw.port)
    raw.connect("pubrec-q1")
    assert raw.subscribe("pubrec/q1", 1).return_codes == (1,)
    clients(gw.port).connect().publish("pubrec/q1", "one", 1)
    delivery = raw.recv()
    assert isinstance(delivery, P.Publish) and delivery.qos == 1 and delivery.packet_id
    raw.send(bytes([0x50, 2]) + delivery.packet_id.to_bytes(2, "big"))   # PUBREC
    assert raw.closed_by_peer(5), "the broker answered a PUBREC for a QoS 1 delivery"
    wait_for(lambda: "a QoS 1 delivery" in gw.log(), 5, what="protocol error logged")


def test_a_31_client_may_set_the_bits_its_specification_calls_not_used(shared_gateway: GatewayProcess) -> None:
    """MQTT V3.1 calls DUP/QoS/RETAIN "not used" in most packets, RETAIN "not used" in PUBREL and
    SUBSCRIBE, and has no rule for CONNECT flag bit 0: a 3.1 client setting them is served (3.1.1's
    stricter rule is the parametrized cases above)."""
    raw = RawClient(shared_gateway.port)
    connect = bytearray(P.encode(P.Connect(P.MQTT_31, "old-31")))
    connect[0] |= 0x0B                       # DUP, QoS 1, RETAIN on a CONNECT
    connect[11] |= 0x01                      # reserved connect flag (after 0x10 len 00 06 MQIsdp 03)
    raw.send(bytes(connect))
    assert raw.recv() == P.Connack(P.ConnackCode.ACCEPTED)
    raw.send(bytes([0x83]) + P.encode(P.Subscribe(1, (("old/31", 2),)))[1:])   # SUBSCRIBE with RETAIN set
    assert raw.recv() == P.Suback(1, (2,))
    raw.send(bytes([0xC9, 0]))               # PINGREQ with DUP and RETAIN set
    assert raw.recv() == P.Bare(P.PINGRESP)
    raw.send(P.encode(P.Publish("old/31", b"q2", 2, packet_id=9)))
    assert raw.recv() == P.PacketIdOnly(P.PUBREC, 9)
    raw.send(bytes([0x63, 2, 0, 9]))         # PUBREL with RETAIN set
    packets = [raw.recv(), raw.recv()]       # PUBCOMP, and the delivery of its own publication
    assert P.PacketIdOnly(P.PUBCOMP, 9) in packets
    assert any(isinstance(p, P.Publish) and p.payload == b"q2" for p in packets)
    raw.close()
