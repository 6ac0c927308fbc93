"""MQTT 5.0 state across gateway restarts and crashes, and MQTT 5 with Debian's mosquitto clients.

A persistent MQTT 5 session (MQTT Version 5.0 §4.1: subscriptions with their options and Subscription
Identifier, queued QoS 1 messages with their properties) and a retained message with properties survive
SIGTERM and SIGKILL of `mqbridge serve`; a message whose Message Expiry Interval passed while it was
queued is not delivered (§3.3.2.3.3). mosquitto_pub/mosquitto_sub at -V 5 (mosquitto docs
"mosquitto_pub", "mosquitto_sub": -D, -F) exchange properties with paho."""
from __future__ import annotations

import sqlite3
import subprocess
import time
from typing import Any

import pytest
from paho.mqtt.packettypes import PacketTypes

from bridge.mqtt import packets as P
from bridge.mqtt import properties as PR
from tests.support.gateway import wait_for
from tests.support.mosquitto import AVAILABLE
from tests.support.mqtt5_client import connected as v5
from tests.support.mqtt5_client import drop, packet_props, publish_props, raw5
from tests.support.mqtt_clients import RawClient

needs_mosquitto = pytest.mark.skipif(not AVAILABLE, reason="mosquitto-clients not installed")



def session(gw: Any, cid: str) -> dict[str, Any] | None:
    return next((s for s in gw.admin("/sessions")[1] if s["client_id"] == cid), None)


def restart(gw: Any, how: str) -> None:
    if how == "kill":
        gw.kill()
    else:
        assert gw.stop() == 0
    gw.start()


def props_of(m: Any) -> dict[str, Any]:
    return {k: getattr(m.properties, k) for k in ("UserProperty", "ContentType", "CorrelationData",
                                                   "ResponseTopic", "SubscriptionIdentifier")
            if hasattr(m.properties, k)}


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_v5_session_and_retained_survive_a_restart(gateway, how):
    gw = gateway
    sub = v5(gw.port, "dur", clean=False, expiry=60)
    sub_props = packet_props(PacketTypes.SUBSCRIBE, SubscriptionIdentifier=7)
    assert sub.subscribe("d/#", 1, sub_props, noLocal=True, retainAsPublished=True) == [1]
    # DISCONNECT raises the Session Expiry Interval: the new one is what is kept
    sub.client.disconnect(properties=packet_props(PacketTypes.DISCONNECT, SessionExpiryInterval=3600))
    sub.client.loop_stop()
    wait_for(lambda: (s := session(gw, "dur")) is not None and not s["connected"], 10, what="dur offline")
    pub = v5(gw.port, "dur-pub")
    sent = []
    for i in range(2):
        props = publish_props(UserProperty=[("i", str(i)), ("x", "y")], ContentType="text/plain",
                              CorrelationData=bytes((i, 0xFF)), ResponseTopic="d/reply",
                              MessageExpiryInterval=3600)
        sent.append(pub.client.publish(f"d/{i}", f"m{i}".encode(), 1, properties=props))
    short = publish_props(MessageExpiryInterval=1, UserProperty=[("short", "1")])
    sent.append(pub.client.publish("d/short", b"expires", 1, properties=short))
    published_short = time.monotonic()
    retained = publish_props(UserProperty=[("kind", "retained")], ContentType="application/x",
                             MessageExpiryInterval=3600)
    sent.append(pub.client.publish("d/ret", b"kept", 1, retain=True, properties=retained))
    for info in sent:
        info.wait_for_publish(10)
        assert info.is_published()
    wait_for(lambda: session(gw, "dur")["queued"] == 4, 10, what="4 queued for dur")
    pub.close()
    watcher = v5(gw.port, "dur-watch") if how == "stop" else None

    restart(gw, how)
    if watcher is not None:   # a clean shutdown tells an MQTT 5 client why
        wait_for(lambda: watcher.disconnect_reason is not None, 10, what="DISCONNECT at shutdown")
        assert int(watcher.disconnect_reason.value) == 0x8B   # Server shutting down
        watcher.client.loop_stop()
    kept = session(gw, "dur")
    assert (kept["subscriptions"], kept["expiry_seconds"]) == ({"d/#": 1 | 0x04 | 0x08}, 3600)
    assert kept["queued"] >= 3   # the short-lived one may be gone already
    # the short one's Message Expiry Interval passes while it is queued (the condition is time itself)
    wait_for(lambda: time.monotonic() > published_short + 2.0, 5, what="1 s message expiry")

    back = v5(gw.port, "dur", clean=False, expiry=3600)
    assert back.connack[0].session_present
    got = back.wait(3)
    assert [(m.topic, m.payload, m.qos) for m in got] == [("d/0", b"m0", 1), ("d/1", b"m1", 1), ("d/ret", b"kept", 1)]
    for i in range(2):
        assert props_of(got[i]) == {"UserProperty": [("i", str(i)), ("x", "y")], "ContentType": "text/plain",
                                    "CorrelationData": bytes((i, 0xFF)), "ResponseTopic": "d/reply",
                                    "SubscriptionIdentifier": [7]}
        assert 3500 <= got[i].properties.MessageExpiryInterval <= 3600
    assert props_of(got[2]) == {"UserProperty": [("kind", "retained")], "ContentType": "application/x",
                                "SubscriptionIdentifier": [7]}
    assert got[2].retain   # Retain As Published survived
    # No Local survived: its own publication is not sent back; another client's is
    back.client.publish("d/own", b"own", 1).wait_for_publish(10)
    other = v5(gw.port, "dur-other")
    other.client.publish("d/marker", b"marker", 1).wait_for_publish(10)
    wait_for(lambda: any(m.topic == "d/marker" for m in back.messages), 10, what="marker")
    assert [m.topic for m in back.messages] == ["d/0", "d/1", "d/ret", "d/marker"]   # no d/short, no d/own
    assert not back.messages[-1].retain and back.messages[-1].properties.SubscriptionIdentifier == [7]

    fresh = v5(gw.port, "dur-fresh")   # the retained message with its properties
    fresh.subscribe("d/ret", 1)
    (r,) = fresh.wait(1)
    assert (r.payload, r.retain) == (b"kept", True)
    assert r.properties.UserProperty == [("kind", "retained")] and r.properties.ContentType == "application/x"
    assert 3500 <= r.properties.MessageExpiryInterval <= 3600
    for c in (back, other, fresh):
        c.close()


def test_unacknowledged_delivery_is_sent_again_with_its_properties_after_a_crash(gateway):
    raw, ack = raw5(gateway.port, "inflight5", clean=False, props={PR.SESSION_EXPIRY_INTERVAL: 3600})
    assert ack.return_code == 0
    raw.send(P.encode(P.Subscribe(1, (("if/#", 1),), {PR.SUBSCRIPTION_IDENTIFIER: 5}), P.MQTT_5))
    assert isinstance(raw.recv(), P.Suback)
    pub = v5(gateway.port, "if-pub")
    props = publish_props(UserProperty=[("u", "1")], CorrelationData=b"cd", MessageExpiryInterval=3600)
    pub.client.publish("if/1", b"once", 1, properties=props).wait_for_publish(10)
    (first,) = raw.receive_until(lambda p: True, ack=False)   # received, never acknowledged
    assert not first.dup and first.properties[PR.SUBSCRIPTION_IDENTIFIER] == [5]
    restart(gateway, "kill")
    raw.close()
    raw, ack = raw5(gateway.port, "inflight5", clean=False, props={PR.SESSION_EXPIRY_INTERVAL: 3600})
    try:
        assert ack.session_present
        (again,) = raw.receive_until(lambda p: True)
        assert (again.topic, again.payload, again.qos, again.dup) == ("if/1", b"once", 1, True)
        got = again.properties or {}
        assert got[PR.USER_PROPERTY] == [("u", "1")] and got[PR.CORRELATION_DATA] == b"cd"
        assert got[PR.SUBSCRIPTION_IDENTIFIER] == [5] and 3500 <= got[PR.MESSAGE_EXPIRY_INTERVAL] <= 3600
    finally:
        raw.close()
    wait_for(lambda: session(gateway, "inflight5")["inflight"] == 0, 10, what="acknowledged at last")
    pub.close()


def test_unreleased_qos2_publication_keeps_its_properties_across_a_crash(gateway):
    sub = v5(gateway.port, "q2-sub", clean=False, expiry=3600)
    sub.subscribe("q2/#", 2)
    raw, ack = raw5(gateway.port, "q2-pub", clean=False, props={PR.SESSION_EXPIRY_INTERVAL: 3600})
    assert ack.return_code == 0
    props = {PR.USER_PROPERTY: [("p", "q")], PR.CONTENT_TYPE: "text/plain", PR.MESSAGE_EXPIRY_INTERVAL: 3600}
    raw.send(P.encode(P.Publish("q2/t", b"exactly once", 2, packet_id=9, properties=props), P.MQTT_5))
    assert raw.recv() == P.PacketIdOnly(P.PUBREC, 9)   # stored: the broker owns it now
    restart(gateway, "kill")
    raw.close()
    sub.client.loop_stop()
    raw, ack = raw5(gateway.port, "q2-pub", clean=False, props={PR.SESSION_EXPIRY_INTERVAL: 3600})
    try:
        assert ack.session_present
        raw.send(P.encode(P.PacketIdOnly(P.PUBREL, 9), P.MQTT_5))
        assert raw.recv() == P.PacketIdOnly(P.PUBCOMP, 9)
    finally:
        raw.close()
    back = v5(gateway.port, "q2-sub", clean=False, expiry=3600)
    (m,) = back.wait(1)
    assert (m.topic, m.payload, m.qos) == ("q2/t", b"exactly once", 2)
    assert m.properties.UserProperty == [("p", "q")] and m.properties.ContentType == "text/plain"
    assert 3500 <= m.properties.MessageExpiryInterval <= 3600
    back.close()


def test_v311_persistent_session_gets_queued_v5_messages_and_wills_as_payload_only(gateway):
    raw = RawClient(gateway.port)
    assert raw.connect("old311", clean=False).return_code == 0
    assert raw.subscribe("mixq/#", 1).return_codes == (1,)
    raw.send(P.DISCONNECT_BYTES)
    raw.close()
    wait_for(lambda: not session(gateway, "old311")["connected"], 10, what="old311 away")
    pub = v5(gateway.port, "mixq-pub")
    props = publish_props(UserProperty=[("a", "b")], ContentType="text/plain", MessageExpiryInterval=600)
    pub.client.publish("mixq/1", b"queued", 1, properties=props).wait_for_publish(10)
    will = ("mixq/will", b"will", 1, packet_props(PacketTypes.WILLMESSAGE, UserProperty=[("w", "1")]))
    drop(v5(gateway.port, "mixq-dies", will=will))
    wait_for(lambda: session(gateway, "old311")["queued"] == 2, 10, what="2 queued for old311")
    # the will was acknowledged to nobody: only once its rows are committed must a SIGKILL keep it
    wait_for(lambda: _committed_outbound(gateway, "old311") == 2, 10, what="both deliveries committed")
    restart(gateway, "kill")
    raw = RawClient(gateway.port)
    try:
        assert raw.connect("old311", clean=False).session_present
        got = raw.receive_until(lambda p: p.topic == "mixq/will")
        assert [(p.topic, p.payload, p.properties) for p in got] == [("mixq/1", b"queued", None),
                                                                     ("mixq/will", b"will", None)]
        raw.send(P.PINGREQ_BYTES)   # still connected and understood
        assert raw.recv() == P.Bare(P.PINGRESP)
    finally:
        raw.close()
    pub.client.loop_stop()


def _committed_outbound(gateway, client_id: str) -> int:
    with sqlite3.connect(f"file:{gateway.data_dir / 'broker.sqlite3'}?mode=ro", uri=True) as db:
        return db.execute("SELECT COUNT(*) FROM outbound WHERE client_id=?", (client_id,)).fetchone()[0]


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_session_with_expiry_zero_does_not_survive_a_restart(gateway, how):
    """A persistent session resumed with Session Expiry 0 ends with its connection, even when that
    connection ends with the gateway."""
    first = v5(gateway.port, "ends-with-conn", clean=False, expiry=3600)
    first.subscribe("z/#", 1)
    first.close()
    wait_for(lambda: not session(gateway, "ends-with-conn")["connected"], 10, what="offline")
    again = v5(gateway.port, "ends-with-conn", clean=False, expiry=0)
    assert again.connack[0].session_present
    restart(gateway, how)
    again.client.loop_stop()
    assert session(gateway, "ends-with-conn") is None
    third = v5(gateway.port, "ends-with-conn", clean=False, expiry=0)
    assert not third.connack[0].session_present
    third.close()


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_session_expiry_counts_from_the_end_of_the_connection_after_a_restart(gateway, how):
    c = v5(gateway.port, "long-lived", clean=False, expiry=6)
    c.subscribe("ll/#", 1)
    connected = time.monotonic()
    # connected for longer than its Session Expiry Interval (the condition is time itself)
    wait_for(lambda: time.monotonic() > connected + 7, 10, what="7 s connected")
    restart(gateway, how)   # the connection ends here: the 6 s start now
    restarted = time.monotonic()
    c.client.loop_stop()
    # a few sweeps (every 0.5 s) later, well within the 6 s, it is still there
    while time.monotonic() < restarted + 2:
        assert session(gateway, "long-lived") is not None, "the session expired while its client was connected"
        time.sleep(0.1)
    back = v5(gateway.port, "long-lived", clean=False, expiry=6)
    assert back.connack[0].session_present, "the session expired while its client was connected"
    assert session(gateway, "long-lived")["subscriptions"] == {"ll/#": 1}
    back.close()


def test_delayed_will_of_a_persistent_session_survives_a_restart(gateway):
    watcher = v5(gateway.port, "dw-watch", clean=False, expiry=3600)
    watcher.subscribe("dw/#", 1)
    will = ("dw/gone", b"gone", 1, packet_props(PacketTypes.WILLMESSAGE, WillDelayInterval=3))
    c = v5(gateway.port, "dw", clean=False, expiry=3600, will=will)
    drop(c)
    wait_for(lambda: not session(gateway, "dw")["connected"], 10, what="dw offline")
    restart(gateway, "stop")
    watcher.client.loop_stop()
    back = v5(gateway.port, "dw-watch", clean=False, expiry=3600)
    # MQTT 5 §4.1: the Will Message and its delay are session state; the session still exists
    assert session(gateway, "dw") is not None
    (m,) = back.wait(1, timeout=10)
    assert m.payload == b"gone"
    back.close()


# -- Debian mosquitto clients at MQTT 5 --------------------------------------------------------------------


@needs_mosquitto
def test_mosquitto_sub_v5_persistent_session_across_a_restart(gateway):
    """mosquitto_sub -V mqttv5 -c -x: its session (Session Expiry 3600) keeps what was published while it
    was away, across a gateway restart, and prints the properties."""
    def sub(count: int) -> subprocess.Popen[str]:
        args = ["mosquitto_sub", "-h", "127.0.0.1", "-p", str(gateway.port), "-V", "mqttv5", "-i", "msub5",
                "-c", "-x", "3600", "-q", "1", "-t", "ms/#", "-C", str(count), "-W", "20", "-F", "%t|%p|%P|%C"]
        return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    first = sub(1)   # subscribes, gets the first message, disconnects
    wait_for(lambda: any(s["client_id"] == "msub5" for s in gateway.admin("/subscriptions")[1]), 10,
             what="mosquitto_sub subscribed")
    pub = v5(gateway.port, "ms-pub")
    pub.client.publish("ms/0", b"live", 1, properties=publish_props(UserProperty=[("n", "0")])).wait_for_publish(10)
    out, err = first.communicate(timeout=20)
    assert first.returncode == 0 and out.splitlines() == ["ms/0|live|n:0|"], err
    wait_for(lambda: (s := session(gateway, "msub5")) is not None and not s["connected"], 10, what="msub5 away")
    for i in (1, 2):
        props = publish_props(UserProperty=[("n", str(i)), ("k", "v")], ContentType="text/csv")
        pub.client.publish(f"ms/{i}", f"a,{i}".encode(), 1, properties=props).wait_for_publish(10)
    pub.close()
    restart(gateway, "kill")
    second = sub(2)
    try:
        out, err = second.communicate(timeout=20)
    finally:
        if second.poll() is None:
            second.kill()
            second.wait(5)
    assert second.returncode == 0, err
    assert out.splitlines() == ["ms/1|a,1|n:1 k:v|text/csv", "ms/2|a,2|n:2 k:v|text/csv"]
