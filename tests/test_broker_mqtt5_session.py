"""MQTT 5.0 sessions, wills and server DISCONNECTs against a real `mqbridge serve`, with paho-mqtt 2.x at
MQTTv5 and byte-level clients: CONNACK properties and Session Present (MQTT Version 5.0 §3.2), Session
Expiry Interval at CONNECT and DISCONNECT (§3.1.2.11, §3.14.2.2.2), Will Properties and Will Delay
Interval (§3.1.3.2), the reason codes of a server DISCONNECT (§3.14.2.1), and a 3.1.1 subscriber next to
MQTT 5 publishers."""
from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.reasoncodes import ReasonCode

from bridge.mqtt import packets as P
from bridge.mqtt import properties as PR
from tests.support import shared_gateway
from tests.support.gateway import wait_for
from tests.support.mqtt5_client import V5, drop, packet_props, publish_props, raw5
from tests.support.mqtt5_client import connected as v5
from tests.support.mqtt_clients import V311, PahoClient, RawClient

# one gateway process per module, reset before each test (tests/support/shared_gateway.py)
module_gateway = shared_gateway.module_gateway
gateway = shared_gateway.gateway


def session(gw: Any, cid: str) -> dict[str, Any] | None:
    """The admin's view of ``cid``'s session, None when it has none."""
    return next((s for s in gw.admin("/sessions")[1] if s["client_id"] == cid), None)


def wait_gone(gw: Any, cid: str, timeout: float = 10.0) -> float:
    """Wait until ``cid`` has no session; returns when (time.monotonic())."""
    wait_for(lambda: session(gw, cid) is None, timeout, interval=0.05, what=f"session {cid} to end")
    return time.monotonic()


def wait_offline(gw: Any, cid: str) -> dict[str, Any]:
    return wait_for(lambda: (s := session(gw, cid)) is not None and not s["connected"] and s, 10,
                    what=f"session {cid} offline")


def session_present(c: V5) -> bool:
    assert c.connack is not None
    return bool(c.connack[0].session_present)


def code(rc: Any) -> int:
    return int(getattr(rc, "value", rc))


def still_serving(port: int) -> None:
    """Another client still connects, subscribes and gets its own publication."""
    raw = RawClient(port)
    try:
        assert raw.connect(f"alive-{uuid.uuid4().hex[:8]}").return_code == 0
        assert raw.subscribe("alive/#", 1).return_codes == (1,)
        raw.publish("alive/x", b"ok", qos=1, packet_id=2)
        got = raw.receive_until(lambda p: p.topic == "alive/x")
        assert got[-1].payload == b"ok"
    finally:
        raw.close()


def disconnect_code(raw: RawClient, timeout: float = 5.0) -> int:
    """The reason code of the server's DISCONNECT (skipping PUBLISHes), after which it closes."""
    while True:
        packet = raw.recv(timeout)
        if isinstance(packet, P.Disconnect):
            assert raw.closed_by_peer(5), "the server sent DISCONNECT but kept the connection open"
            return packet.reason_code
        assert isinstance(packet, P.Publish), packet


def marker_after(watcher: V5, pub: V5, topic: str) -> list[Any]:
    """Publish a marker and return what ``watcher`` received up to it (the marker last)."""
    pub.client.publish(topic, b"marker", 1).wait_for_publish(10)
    wait_for(lambda: any(m.topic == topic for m in watcher.messages), 10, what=f"marker {topic}")
    return list(watcher.messages)


# -- CONNACK ------------------------------------------------------------------------------------------


def test_connack_announces_the_configured_limits(gateway_factory):
    gw = gateway_factory({"broker": {"limits": {"max_inbound_qos2": 20, "max_message_size": 1000,
                                                "topic_alias_maximum": 3}}})
    raw, ack = raw5(gw.port, "limits")
    try:
        assert isinstance(ack, P.Connack) and ack.return_code == 0 and not ack.session_present
        props = ack.properties or {}
        assert props[PR.RECEIVE_MAXIMUM] == 20
        assert props[PR.MAXIMUM_PACKET_SIZE] == 1000 + 1 + 2   # fixed header + remaining length 1000
        assert props[PR.TOPIC_ALIAS_MAXIMUM] == 3
        assert PR.SHARED_SUBSCRIPTION_AVAILABLE not in props   # shared subscriptions available: the default
        assert PR.ASSIGNED_CLIENT_IDENTIFIER not in props and PR.SESSION_EXPIRY_INTERVAL not in props
        # at the announced Maximum Packet Size: taken
        raw.send(P.encode(P.Publish("big", b"x" * (1000 - 2 - 3 - 1), 0), P.MQTT_5))
        raw.send(P.PINGREQ_BYTES)
        assert raw.recv() == P.Bare(P.PINGRESP)
    finally:
        raw.close()


def test_server_keep_alive_caps_the_clients_and_is_enforced(gateway_factory):
    """max_keepalive as mosquitto's: an MQTT 5 client asking for more, or for none, is told the maximum in
    Server Keep Alive (§3.2.2.3.14) and held to it; a 3.1.1 client asking for more is refused."""
    gw = gateway_factory({"broker": {"limits": {"max_keepalive": 2}}})
    for asked, told in ((100, 2), (0, 2), (1, None), (2, None)):
        raw, ack = raw5(gw.port, f"ka{asked}", keepalive=asked)
        try:
            assert isinstance(ack, P.Connack) and ack.return_code == 0
            assert (ack.properties or {}).get(PR.SERVER_KEEP_ALIVE) == told, asked
            if asked == 100:   # silent for 1.5 x the told 2 s, not the asked 100 s: the server closes it
                started = time.monotonic()
                assert disconnect_code(raw, timeout=8) == P.Reason.KEEP_ALIVE_TIMEOUT
                assert time.monotonic() - started < 6
        finally:
            raw.close()
    old = RawClient(gw.port)
    try:
        assert old.connect("ka311-long", keepalive=3).return_code == P.ConnackCode.IDENTIFIER_REJECTED
    finally:
        old.close()
    old = RawClient(gw.port)
    try:
        assert old.connect("ka311-none", keepalive=0).return_code == 0   # as mosquitto 2.0 takes it
    finally:
        old.close()
    paho = v5(gw.port, "ka-paho")   # paho asks for 60 and is told 2
    assert paho.connack[2].ServerKeepAlive == 2
    paho.close()


def test_default_server_keep_alive_for_a_client_without_one(gateway):
    raw, ack = raw5(gateway.port, "ka-none", keepalive=0)
    try:   # mosquitto 2.0 in its default configuration answers the same
        assert (ack.properties or {}).get(PR.SERVER_KEEP_ALIVE) == 65535
    finally:
        raw.close()
    raw, ack = raw5(gateway.port, "ka-some", keepalive=65535)
    try:
        assert PR.SERVER_KEEP_ALIVE not in (ack.properties or {})
    finally:
        raw.close()


@pytest.mark.parametrize("clean", [True, False], ids=["clean-start-1", "clean-start-0"])
def test_empty_client_id_is_assigned(gateway, clean):
    expiry = None if clean else 300
    c = v5(gateway.port, "", clean=clean, expiry=expiry)
    assigned = c.connack[2].AssignedClientIdentifier
    other = v5(gateway.port, "")
    assert assigned and assigned != other.connack[2].AssignedClientIdentifier
    assert not session_present(c)
    assert session(gateway, assigned)["connected"]
    c.subscribe("assigned/#", 1)
    c.close()
    other.close()
    if clean:   # no Session Expiry: the session ended with the connection
        wait_gone(gateway, assigned)
        return
    assert wait_offline(gateway, assigned)["subscriptions"] == {"assigned/#": 1}
    back = v5(gateway.port, assigned, clean=False, expiry=300)   # the assigned id names the session
    assert session_present(back)
    assert not getattr(back.connack[2], "AssignedClientIdentifier", None)
    back.close()


def test_session_present_follows_clean_start_and_expiry(gateway):
    pub = v5(gateway.port, "sp-pub")
    first = v5(gateway.port, "sp", clean=False, expiry=300)
    assert not session_present(first)
    first.subscribe("sp/#", 1)
    first.close()
    wait_offline(gateway, "sp")
    resumed = v5(gateway.port, "sp", clean=False, expiry=300)
    assert session_present(resumed)
    assert [m.payload for m in marker_after(resumed, pub, "sp/m1")] == [b"marker"]   # subscribed still
    resumed.close()
    wait_offline(gateway, "sp")
    fresh = v5(gateway.port, "sp", clean=True, expiry=300)   # Clean Start 1 discards the session
    assert not session_present(fresh)
    assert session(gateway, "sp")["subscriptions"] == {}
    fresh.close()
    pub.close()


# -- Session Expiry Interval ------------------------------------------------------------------------


def test_expiry_zero_ends_the_session_with_the_connection(gateway):
    c = v5(gateway.port, "ez", clean=False)   # no Session Expiry Interval: 0
    c.subscribe("ez/#", 1)
    c.close()
    wait_gone(gateway, "ez")
    again = v5(gateway.port, "ez", clean=False)
    assert not session_present(again)
    assert session(gateway, "ez")["subscriptions"] == {}
    again.close()


def test_resumed_with_expiry_zero_the_session_ends_with_the_connection(gateway):
    c = v5(gateway.port, "rz", clean=False, expiry=300)
    c.subscribe("rz/#", 1)
    c.close()
    wait_offline(gateway, "rz")
    again = v5(gateway.port, "rz", clean=False)   # Session Expiry 0 this time
    assert session_present(again) and session(gateway, "rz")["subscriptions"] == {"rz/#": 1}
    again.close()
    wait_gone(gateway, "rz")


def test_session_resumes_with_qos1_published_while_away(gateway):
    sub = v5(gateway.port, "away", clean=False, expiry=300)
    assert sub.subscribe("away/#", 1) == [1]
    sub.close()
    wait_offline(gateway, "away")
    pub = v5(gateway.port, "away-pub")
    for i in range(3):
        props = publish_props(UserProperty=[("n", str(i))], ContentType="text/plain")
        pub.client.publish(f"away/{i}", f"m{i}".encode(), 1, properties=props).wait_for_publish(10)
    wait_for(lambda: session(gateway, "away")["queued"] == 3, 10, what="3 queued")
    back = v5(gateway.port, "away", clean=False, expiry=300)
    assert session_present(back)
    got = back.wait(3)
    assert [(m.topic, m.payload, m.qos) for m in got] == [(f"away/{i}", f"m{i}".encode(), 1) for i in range(3)]
    assert [m.properties.UserProperty for m in got] == [[("n", str(i))] for i in range(3)]
    assert all(m.properties.ContentType == "text/plain" for m in got)
    back.close()
    pub.close()


def test_session_expires_after_its_interval(gateway):
    c = v5(gateway.port, "exp", clean=False, expiry=2)
    c.subscribe("exp/#", 1)
    c.close()
    left = time.monotonic()
    assert wait_offline(gateway, "exp")["expiry_seconds"] == 2
    gone = wait_gone(gateway, "exp", timeout=10)
    assert gone - left >= 1.5, f"expired after {gone - left:.2f} s, its interval is 2 s"
    again = v5(gateway.port, "exp", clean=False, expiry=2)
    assert not session_present(again)
    again.close()


def test_server_caps_the_session_expiry_and_says_so(gateway_factory):
    gw = gateway_factory({"broker": {"limits": {"session_expiry_hours": 0.001}}})   # 3.6 s: 3 s
    capped = v5(gw.port, "cap", clean=False, expiry=3600)
    assert capped.connack[2].SessionExpiryInterval == 3
    never = v5(gw.port, "never", clean=False, expiry=0xFFFFFFFF)
    assert never.connack[2].SessionExpiryInterval == 3
    within = v5(gw.port, "within", clean=False, expiry=2)
    assert not hasattr(within.connack[2], "SessionExpiryInterval")   # the client's own applies
    left = time.monotonic()   # before the close: cap's 3 s start when the broker sees it, not after what follows
    for c in (capped, never):
        c.close()
    # nor may DISCONNECT raise it beyond the server's limit
    within.client.disconnect(properties=packet_props(PacketTypes.DISCONNECT, SessionExpiryInterval=3600))
    within.client.loop_stop()
    assert wait_offline(gw, "within")["expiry_seconds"] == 3
    wait_offline(gw, "cap")
    gone = wait_gone(gw, "cap", timeout=12)
    assert gone - left >= 2.5, f"expired after {gone - left:.2f} s, the server's limit is 3 s"


def test_disconnect_changes_the_session_expiry(gateway):
    up = v5(gateway.port, "up", clean=False, expiry=1)
    up.client.disconnect(properties=packet_props(PacketTypes.DISCONNECT, SessionExpiryInterval=600))
    up.client.loop_stop()
    assert wait_offline(gateway, "up")["expiry_seconds"] == 600
    down = v5(gateway.port, "down", clean=False, expiry=600)
    down.client.disconnect(properties=packet_props(PacketTypes.DISCONNECT, SessionExpiryInterval=1))
    down.client.loop_stop()
    wait_gone(gateway, "down", timeout=10)
    ends = v5(gateway.port, "ends", clean=False, expiry=600)
    ends.subscribe("ends/#", 1)
    ends.client.disconnect(properties=packet_props(PacketTypes.DISCONNECT, SessionExpiryInterval=0))
    ends.client.loop_stop()
    wait_gone(gateway, "ends", timeout=5)
    assert session(gateway, "up")["expiry_seconds"] == 600   # still there


def test_disconnect_may_not_set_an_expiry_after_zero(gateway):
    watcher = v5(gateway.port, "w-zero")
    watcher.subscribe("zero/will", 1)
    will = P.Will("zero/will", b"protocol error", 1)
    raw, ack = raw5(gateway.port, "zero", clean=False, will=will)   # Session Expiry 0
    try:
        assert ack.return_code == 0
        raw.send(P.encode(P.Disconnect(0, {PR.SESSION_EXPIRY_INTERVAL: 60}), P.MQTT_5))
        assert disconnect_code(raw) == P.Reason.PROTOCOL_ERROR
    finally:
        raw.close()
    (m,) = watcher.wait(1)   # not a valid DISCONNECT: the will is published
    assert m.payload == b"protocol error"
    wait_gone(gateway, "zero")
    watcher.close()
    still_serving(gateway.port)


# -- wills ---------------------------------------------------------------------------------------------


def will_props(**values: Any) -> Any:
    return packet_props(PacketTypes.WILLMESSAGE, **values)


def test_will_properties_reach_a_v5_subscriber(gateway):
    watcher = v5(gateway.port, "w-props")
    watcher.subscribe("wp/#", 1)
    props = will_props(ContentType="application/json", UserProperty=[("k", "v"), ("k", "w")],
                       ResponseTopic="wp/reply", CorrelationData=b"\x01\x02", PayloadFormatIndicator=1,
                       MessageExpiryInterval=600)
    c = v5(gateway.port, "wp", will=("wp/gone", b'{"gone": true}', 1, props))
    drop(c)
    (m,) = watcher.wait(1)
    got = m.properties
    assert (m.topic, m.payload, m.qos) == ("wp/gone", b'{"gone": true}', 1)
    assert got.ContentType == "application/json" and got.UserProperty == [("k", "v"), ("k", "w")]
    assert got.ResponseTopic == "wp/reply" and got.CorrelationData == b"\x01\x02"
    assert got.PayloadFormatIndicator == 1 and 590 <= got.MessageExpiryInterval <= 600
    assert not hasattr(got, "WillDelayInterval")
    watcher.close()


def test_will_delay_passes_without_the_client(gateway):
    watcher = v5(gateway.port, "w-delay")
    watcher.subscribe("wd/#", 1)
    c = v5(gateway.port, "wd", expiry=300, will=("wd/late", b"late", 1, will_props(WillDelayInterval=2)))
    drop(c)
    dropped = time.monotonic()
    (m,) = watcher.wait(1, timeout=10)
    assert m.payload == b"late"
    assert time.monotonic() - dropped >= 1.5, "the will came before its delay"
    watcher.close()


def test_will_delay_cancelled_when_the_client_comes_back(gateway):
    watcher = v5(gateway.port, "w-back")
    watcher.subscribe("wb/#", 1)
    will = ("wb/gone", b"gone", 1, will_props(WillDelayInterval=2))
    c = v5(gateway.port, "wb", clean=False, expiry=300, will=will)
    drop(c)
    back = v5(gateway.port, "wb", clean=False, expiry=300)
    assert session_present(back)
    # the condition is the delay itself: wait until it (and a sweep) has passed, then publish a marker
    passed = time.monotonic() + 3
    wait_for(lambda: time.monotonic() > passed, 5, what="the will delay to pass")
    assert [m.topic for m in marker_after(watcher, back, "wb/marker")] == ["wb/marker"]
    back.close()
    watcher.close()


def test_will_sent_at_once_when_a_clean_start_ends_the_session(gateway):
    watcher = v5(gateway.port, "w-clean")
    watcher.subscribe("wc/#", 1)
    c = v5(gateway.port, "wc", clean=False, expiry=300,
           will=("wc/gone", b"gone", 1, will_props(WillDelayInterval=60)))
    drop(c)
    wait_offline(gateway, "wc")
    fresh = v5(gateway.port, "wc", clean=True, expiry=300)   # ends the old session: its will is due now
    (m,) = watcher.wait(1, timeout=5)
    assert m.payload == b"gone"
    fresh.close()
    watcher.close()


@pytest.mark.parametrize("expiry", [0, 1], ids=["expiry-0", "expiry-1s"])
def test_will_sent_when_the_session_ends_before_the_delay(gateway, expiry):
    watcher = v5(gateway.port, "w-ends")
    watcher.subscribe("we/#", 1)
    c = v5(gateway.port, "we", clean=False, expiry=expiry,
           will=("we/gone", b"session ended", 1, will_props(WillDelayInterval=60)))
    drop(c)
    (m,) = watcher.wait(1, timeout=8)   # well before the 60 s delay
    assert m.payload == b"session ended"
    assert session(gateway, "we") is None
    watcher.close()


def test_disconnect_with_will_message_publishes_it_normal_does_not(gateway):
    watcher = v5(gateway.port, "w-0x04")
    watcher.subscribe("w4/#", 1)
    normal = v5(gateway.port, "w4-normal", will=("w4/normal", b"no", 1, None))
    normal.close()
    wait_for(lambda: session(gateway, "w4-normal") is None, 10, what="normal client gone")
    with_will = v5(gateway.port, "w4-will", will=("w4/will", b"yes", 1, None))
    with_will.client.disconnect(reasoncode=ReasonCode(PacketTypes.DISCONNECT, identifier=0x04))
    with_will.client.loop_stop()
    pub = v5(gateway.port, "w4-pub")
    assert [(m.topic, m.payload) for m in marker_after(watcher, pub, "w4/marker")] == \
        [("w4/will", b"yes"), ("w4/marker", b"marker")]
    pub.close()
    watcher.close()


def test_disconnect_with_an_error_code_publishes_the_will(gateway):
    """MQTT 5 §3.1.2.5: the will is published when the client closes without a DISCONNECT with Reason Code
    0x00, and [MQTT-3.1.2-10] removes it on a DISCONNECT with 0x00 only; 0x80 is Unspecified error."""
    watcher = v5(gateway.port, "w-0x80")
    watcher.subscribe("w80/#", 1)
    c = v5(gateway.port, "w80", will=("w80/will", b"failed", 1, None))
    c.client.disconnect(reasoncode=ReasonCode(PacketTypes.DISCONNECT, identifier=0x80))
    c.client.loop_stop()
    wait_for(lambda: session(gateway, "w80") is None, 10, what="w80 gone")
    pub = v5(gateway.port, "w80-pub")
    assert [m.topic for m in marker_after(watcher, pub, "w80/marker")] == ["w80/will", "w80/marker"]
    pub.close()
    watcher.close()


# -- server DISCONNECT reason codes ------------------------------------------------------------------


def test_takeover_sends_session_taken_over(gateway):
    old = v5(gateway.port, "twin5")
    new = v5(gateway.port, "twin5")
    wait_for(lambda: old.disconnect_reason is not None, 5, what="DISCONNECT to the older connection")
    assert code(old.disconnect_reason) == P.Reason.SESSION_TAKEN_OVER
    assert new.disconnect_reason is None and new.subscribe("twin5/#", 1) == [1]
    new.close()
    still_serving(gateway.port)


def test_takeover_resumes_the_session_and_publishes_the_old_will(gateway):
    watcher = v5(gateway.port, "w-tk")
    watcher.subscribe("tk/will", 1)
    old = v5(gateway.port, "tk", clean=False, expiry=300, will=("tk/will", b"taken", 1, None))
    old.subscribe("tk/data", 1)
    new = v5(gateway.port, "tk", clean=False, expiry=300)
    assert session_present(new)
    wait_for(lambda: old.disconnect_reason is not None, 5, what="DISCONNECT to the older connection")
    assert code(old.disconnect_reason) == P.Reason.SESSION_TAKEN_OVER
    (m,) = watcher.wait(1)
    assert m.payload == b"taken"
    assert [m.topic for m in marker_after(new, watcher, "tk/data")] == ["tk/data"]   # its subscription
    assert old.messages == []
    new.close()
    watcher.close()


@pytest.mark.parametrize("clean", [False, True], ids=["clean-start-0", "clean-start-1"])
def test_takeover_and_a_delayed_will(gateway, clean):
    """A takeover that continues the session (Clean Start 0) cancels a delayed will: nothing comes once the
    2 s delay has passed; one that starts a new session (Clean Start 1) ends the old session, so its will
    (delay 60 s) is sent at once."""
    watcher = v5(gateway.port, "w-tkd")
    watcher.subscribe("tkd/#", 1)
    old = v5(gateway.port, "tkd", clean=False, expiry=300,
             will=("tkd/will", b"gone", 1, will_props(WillDelayInterval=60 if clean else 2)))
    new = v5(gateway.port, "tkd", clean=clean, expiry=300)
    taken = time.monotonic()
    assert session_present(new) is not clean
    wait_for(lambda: old.disconnect_reason is not None, 5, what="DISCONNECT to the older connection")
    assert code(old.disconnect_reason) == P.Reason.SESSION_TAKEN_OVER
    if not clean:   # the condition is the delay itself: wait until it (and a sweep) has passed
        wait_for(lambda: time.monotonic() > taken + 3, 5, what="the will delay to pass")
    got = marker_after(watcher, new, "tkd/marker")
    assert [m.topic for m in got] == (["tkd/will", "tkd/marker"] if clean else ["tkd/marker"])
    new.close()
    watcher.close()


@pytest.mark.parametrize("max_size", [None, 8], ids=["any-size", "max-packet-8"])
def test_keepalive_timeout_disconnect(gateway, max_size):
    props = {PR.MAXIMUM_PACKET_SIZE: max_size} if max_size else None
    raw, ack = raw5(gateway.port, "silent5", keepalive=1, props=props)
    try:
        assert ack.return_code == 0
        packet = raw.recv(6)
        assert isinstance(packet, P.Disconnect) and packet.reason_code == P.Reason.KEEP_ALIVE_TIMEOUT
        if max_size:   # the Reason String is left out rather than exceed the client's Maximum Packet Size
            assert len(P.encode(packet, P.MQTT_5)) <= max_size
        assert raw.closed_by_peer(5)
    finally:
        raw.close()
    still_serving(gateway.port)


# a PUBLISH whose property list holds 0x7F, no property identifier
MALFORMED_PUBLISH = bytes((0x30, 6, 0, 1)) + b"t" + bytes((1, 0x7F)) + b"x"


@pytest.mark.parametrize(("data", "expected"), [
    (MALFORMED_PUBLISH, P.Reason.MALFORMED_PACKET),
    (P.encode(P.Connect(P.MQTT_5, "again")), P.Reason.PROTOCOL_ERROR),   # a second CONNECT
    (P.encode(P.Auth(0x19), P.MQTT_5), P.Reason.PROTOCOL_ERROR),        # AUTH, no Authentication Method
], ids=["malformed", "second-connect", "auth"])
def test_broken_packet_disconnect(gateway, data, expected):
    raw, ack = raw5(gateway.port, "broken5")
    try:
        assert ack.return_code == 0
        raw.send(data)
        assert disconnect_code(raw) == expected
    finally:
        raw.close()
    still_serving(gateway.port)


@pytest.mark.parametrize(("props", "expected"), [
    ({PR.AUTHENTICATION_METHOD: "SCRAM-SHA-1", PR.AUTHENTICATION_DATA: b"n,,n=user"},
     P.Reason.BAD_AUTHENTICATION_METHOD),
    ({PR.AUTHENTICATION_DATA: b"data"}, P.Reason.PROTOCOL_ERROR),   # §3.1.2.11.10: data without a method
], ids=["method", "data-alone"])
def test_authentication_refused_in_connack(gateway, props, expected):
    raw, ack = raw5(gateway.port, "scram", props=props)
    try:
        assert isinstance(ack, P.Connack) and ack.return_code == expected
        assert not ack.session_present
        assert raw.closed_by_peer(5)
    finally:
        raw.close()
    assert session(gateway, "scram") is None
    still_serving(gateway.port)


def test_refusing_connack_respects_the_clients_maximum_packet_size(gateway):
    raw, ack = raw5(gateway.port, "small-refused", props={PR.AUTHENTICATION_METHOD: "SCRAM-SHA-1",
                                                          PR.MAXIMUM_PACKET_SIZE: 16})
    try:
        assert isinstance(ack, P.Connack) and ack.return_code == P.Reason.BAD_AUTHENTICATION_METHOD
        # MQTT 5 §3.1.2.11.4: the Server MUST NOT send packets exceeding Maximum Packet Size to the Client
        assert len(P.encode(ack, P.MQTT_5)) <= 16, ack
    finally:
        raw.close()


# -- 3.1.1 and 5.0 side by side --------------------------------------------------------------------------


def test_v311_subscriber_gets_the_payload_only(gateway):
    old = PahoClient(gateway.port, "v311", protocol=V311, reconnect=False).connect()
    old.subscribe("mix/#", 1)
    raw = RawClient(gateway.port)
    assert raw.connect("raw311").return_code == 0
    raw.subscribe("mix/#", 1)
    new = v5(gateway.port, "v5-sub")
    new.subscribe("mix/#", 1)
    pub = v5(gateway.port, "v5-pub")
    props = publish_props(UserProperty=[("a", "b")], ContentType="text/plain", CorrelationData=b"c",
                          ResponseTopic="mix/reply", MessageExpiryInterval=60, PayloadFormatIndicator=1)
    pub.client.publish("mix/1", b"payload", 1, properties=props).wait_for_publish(10)
    pub.client.publish("mix/2", b"second", 0).wait_for_publish(10)
    (first, second) = raw.receive_until(lambda p: p.topic == "mix/2")
    assert (first.topic, first.payload, first.properties) == ("mix/1", b"payload", None)   # exact bytes
    assert second.payload == b"second"
    got = old.wait_messages(2)
    assert [(m.topic, m.payload) for m in got] == [("mix/1", b"payload"), ("mix/2", b"second")]
    assert not old.disconnected.is_set()
    assert new.wait(2)[0].properties.UserProperty == [("a", "b")]
    raw.close()
    old.disconnect()
    for c in (new, pub):
        c.close()
