"""Sessions against a real `mqbridge serve`: clean vs persistent, queueing while away (QoS 1/2 yes,
QoS 0 no), session present, in-flight re-sent with DUP on reconnect, takeover, survival across a
restart, expiry, and admin deletion."""
from __future__ import annotations

import sqlite3

import pytest

from bridge.mqtt import packets as P
from tests.support import shared_gateway
from tests.support.gateway import wait_for
from tests.support.mqtt_clients import LEVEL, PROTOCOL_IDS, PROTOCOLS, V311, RawClient

# one gateway process per module, reset before each test (see tests/support/shared_gateway.py)
module_gateway = shared_gateway.module_gateway
gateway = shared_gateway.gateway


@pytest.fixture(params=PROTOCOLS, ids=PROTOCOL_IDS)
def proto(request):
    return request.param


def sessions(gateway) -> dict[str, dict]:
    status, body = gateway.admin("/sessions")
    assert status == 200
    return {s["client_id"]: s for s in body}


def connected(gateway) -> set[str]:
    return {c["client_id"] for c in gateway.admin("/connections")[1]}


def wait_offline(gateway, client_id: str) -> None:
    wait_for(lambda: client_id not in connected(gateway), 5, what=f"{client_id} disconnected")


def expect_present(proto, value: bool) -> bool:
    """3.1 CONNACK has no session-present flag: it always reads False there."""
    return value and proto == V311


def test_clean_session_discards_state(gateway, clients, proto):
    c = clients(gateway.port, "cleaner", protocol=proto, clean_session=True).connect()
    c.subscribe("clean/#", 1)
    assert sessions(gateway)["cleaner"]["persistent"] is False
    c.disconnect()
    wait_for(lambda: "cleaner" not in sessions(gateway), 5, what="clean session dropped")
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("clean/x", b"while away", qos=1)
    c2 = clients(gateway.port, "cleaner", protocol=proto, clean_session=True).connect()
    assert c2.session_present is False
    c2.subscribe("clean/marker", 1)
    pub.publish("clean/marker", b"m", qos=1)
    assert [m.payload for m in c2.wait_messages(1)] == [b"m"]
    assert sessions(gateway)["cleaner"]["subscriptions"] == {"clean/marker": 1}


def test_persistent_session_queues_qos1_and_qos2_but_not_qos0(gateway, clients, proto):
    c = clients(gateway.port, "keeper", protocol=proto, clean_session=False).connect()
    assert c.session_present is False
    c.subscribe("keep/#", 2)
    c.disconnect()
    wait_offline(gateway, "keeper")
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("keep/0", b"q0", qos=0)
    pub.publish("keep/1", b"q1", qos=1)
    pub.publish("keep/2", b"q2", qos=2)
    s = sessions(gateway)["keeper"]
    assert (s["persistent"], s["connected"], s["queued"]) == (True, False, 2)
    c2 = clients(gateway.port, "keeper", protocol=proto, clean_session=False).connect()
    assert c2.session_present is expect_present(proto, True)
    pub.publish("keep/marker", b"m", qos=2)    # QoS 2 like q2, so paho hands them over in order
    got = c2.wait_messages(3)
    assert [(m.payload, m.qos) for m in got] == [(b"q1", 1), (b"q2", 2), (b"m", 2)]
    assert sessions(gateway)["keeper"]["subscriptions"] == {"keep/#": 2}


def test_queued_messages_follow_subscription_qos(gateway, clients, proto):
    c = clients(gateway.port, "lowq", protocol=proto, clean_session=False).connect()
    c.subscribe("lowq/#", 1)
    c.disconnect()
    wait_offline(gateway, "lowq")
    pub = clients(gateway.port, protocol=proto).connect()
    for i in range(20):
        pub.publish("lowq/t", str(i).encode(), qos=2)
    c2 = clients(gateway.port, "lowq", protocol=proto, clean_session=False).connect()
    got = c2.wait_messages(20)
    assert [int(m.payload) for m in got] == list(range(20))
    assert {m.qos for m in got} == {1}


def test_clean_connect_discards_a_persistent_session(gateway, clients, proto):
    c = clients(gateway.port, "flip", protocol=proto, clean_session=False).connect()
    c.subscribe("flip/#", 1)
    c.disconnect()
    wait_offline(gateway, "flip")
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("flip/1", b"queued", qos=1)
    clean = clients(gateway.port, "flip", protocol=proto, clean_session=True).connect()
    assert clean.session_present is False
    clean.subscribe("flip/marker", 1)
    pub.publish("flip/marker", b"m", qos=1)
    assert [m.payload for m in clean.wait_messages(1)] == [b"m"]
    clean.disconnect()
    wait_for(lambda: "flip" not in sessions(gateway), 5, what="session gone")
    again = clients(gateway.port, "flip", protocol=proto, clean_session=False).connect()
    assert again.session_present is False
    assert sessions(gateway)["flip"]["subscriptions"] == {}


@pytest.mark.parametrize("qos", [1, 2])
def test_inflight_resent_with_dup_on_reconnect(gateway, clients, proto, qos):
    level = LEVEL[proto]
    raw = RawClient(gateway.port)
    assert raw.connect("inflight", level, clean=False).return_code == 0
    assert raw.subscribe("infl/#", qos).return_codes == (qos,)
    pub = clients(gateway.port, protocol=proto).connect()
    for i in range(3):
        pub.publish("infl/t", f"m{i}".encode(), qos=qos)
    first = [raw.recv() for _ in range(3)]
    assert all(isinstance(p, P.Publish) and not p.dup and p.qos == qos for p in first)
    raw.close()   # no acks
    wait_offline(gateway, "inflight")
    raw = RawClient(gateway.port)
    ack = raw.connect("inflight", level, clean=False)
    assert ack == P.Connack(0, level == P.MQTT_311)
    again = [raw.recv() for _ in range(3)]
    assert [(p.packet_id, p.payload, p.qos, p.dup) for p in again] == \
        [(p.packet_id, p.payload, qos, True) for p in first]
    for p in again:
        raw.ack(P.PUBACK if qos == 1 else P.PUBREC, p.packet_id)
    if qos == 2:
        for p in again:
            assert raw.recv() == P.PacketIdOnly(P.PUBREL, p.packet_id)
            raw.ack(P.PUBCOMP, p.packet_id)
    pub.publish("infl/marker", b"m", qos=0)
    rest = raw.receive_until(lambda p: p.topic == "infl/marker")
    assert [p.payload for p in rest] == [b"m"]
    wait_for(lambda: sessions(gateway)["inflight"]["inflight"] == 0, 5, what="nothing in flight")


def test_pubrel_resent_on_reconnect_after_pubrec(gateway, clients, proto):
    level = LEVEL[proto]
    raw = RawClient(gateway.port)
    assert raw.connect("half", level, clean=False).return_code == 0
    raw.subscribe("half/#", 2)
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("half/t", b"h", qos=2)
    p = raw.recv()
    assert isinstance(p, P.Publish)
    raw.ack(P.PUBREC, p.packet_id)
    assert raw.recv() == P.PacketIdOnly(P.PUBREL, p.packet_id)
    raw.close()   # PUBCOMP never sent
    wait_offline(gateway, "half")
    raw = RawClient(gateway.port)
    raw.connect("half", level, clean=False)
    assert raw.recv() == P.PacketIdOnly(P.PUBREL, p.packet_id)   # not the PUBLISH again
    raw.ack(P.PUBCOMP, p.packet_id)
    pub.publish("half/marker", b"m", qos=0)
    assert [x.payload for x in raw.receive_until(lambda x: x.topic == "half/marker")] == [b"m"]


def test_takeover_closes_the_old_connection(gateway, clients, proto):
    old = clients(gateway.port, "same", protocol=proto, clean_session=False, reconnect=False).connect()
    old.subscribe("take/#", 1)
    new = clients(gateway.port, "same", protocol=proto, clean_session=False, reconnect=False).connect()
    assert new.rc == 0
    assert new.session_present is expect_present(proto, True)
    assert old.disconnected.wait(5)
    assert connected(gateway) == {"same"}
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("take/x", b"to the new one", qos=1)
    assert [m.payload for m in new.wait_messages(1)] == [b"to the new one"]
    assert old.messages == []
    assert "taken over" in gateway.log()


def test_takeover_of_a_raw_connection(gateway, proto):
    level = LEVEL[proto]
    a = RawClient(gateway.port)
    assert a.connect("rawtwin", level).return_code == 0
    b = RawClient(gateway.port)
    assert b.connect("rawtwin", level).return_code == 0
    assert a.closed_by_peer()
    b.send(P.PINGREQ_BYTES)
    assert b.recv() == P.Bare(P.PINGRESP)


def test_persistent_session_survives_restart(gateway, clients, proto):
    c = clients(gateway.port, "durable", protocol=proto, clean_session=False).connect()
    c.subscribe("dur/#", 2)
    c.disconnect()
    wait_offline(gateway, "durable")
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("dur/before", b"queued before restart", qos=1)
    pub.publish("dur/before2", b"qos2 before restart", qos=2)
    pub.disconnect()
    assert gateway.stop() == 0
    gateway.start()
    s = sessions(gateway)["durable"]
    assert (s["persistent"], s["subscriptions"], s["queued"]) == (True, {"dur/#": 2}, 2)
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("dur/after", b"queued after restart", qos=2)   # the subscription came back too
    c2 = clients(gateway.port, "durable", protocol=proto, clean_session=False).connect()
    assert c2.session_present is expect_present(proto, True)
    got = c2.wait_messages(3)
    assert [m.payload for m in got] == [b"queued before restart", b"qos2 before restart",
                                        b"queued after restart"]


def test_inflight_survives_restart_and_is_resent_with_dup(gateway, clients, proto):
    level = LEVEL[proto]
    raw = RawClient(gateway.port)
    raw.connect("dur-raw", level, clean=False)
    raw.subscribe("durr/#", 1)
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("durr/t", b"unacked", qos=1)
    p = raw.recv()
    assert isinstance(p, P.Publish) and not p.dup
    pub.disconnect()
    assert gateway.stop() == 0
    raw.close()
    gateway.start()
    raw = RawClient(gateway.port)
    assert raw.connect("dur-raw", level, clean=False).session_present is (level == P.MQTT_311)
    again = raw.recv()
    assert isinstance(again, P.Publish)
    assert (again.payload, again.packet_id, again.dup) == (b"unacked", p.packet_id, True)
    raw.ack(P.PUBACK, again.packet_id)


def test_persistent_sessions_expire(gateway_factory, clients, proto):
    gw = gateway_factory({"broker": {"limits": {"session_expiry_hours": 1 / 3600}}})   # 1 s
    gone = clients(gw.port, "short-lived", protocol=proto, clean_session=False).connect()
    gone.subscribe("exp/#", 1)
    stay = clients(gw.port, "connected-one", protocol=proto, clean_session=False).connect()
    stay.subscribe("exp/#", 1)
    gone.disconnect()
    wait_offline(gw, "short-lived")
    pub = clients(gw.port, protocol=proto).connect()
    pub.publish("exp/t", b"queued for an expiring session", qos=1)
    assert sessions(gw)["short-lived"]["queued"] == 1
    wait_for(lambda: "short-lived" not in sessions(gw), 10, what="the idle session to expire")
    assert "connected-one" in sessions(gw)   # a connected session never expires
    _, status = gw.admin("/status")
    assert status["messages"]["queued"] == 0
    assert "expired" in gw.log()
    # cleaned up in the store too: a restart does not bring it back
    stay.disconnect()
    pub.disconnect()
    gw.stop()
    gw.start()
    assert "short-lived" not in sessions(gw)
    pub = clients(gw.port, protocol=proto).connect()
    back = clients(gw.port, "short-lived", protocol=proto, clean_session=False).connect()
    assert back.session_present is False
    back.subscribe("exp/marker", 0)
    pub.publish("exp/marker", b"m", qos=0)
    assert [m.payload for m in back.wait_messages(1)] == [b"m"]


def test_admin_deletes_offline_session_and_refuses_connected(gateway, clients, proto):
    c = clients(gateway.port, "doomed", protocol=proto, clean_session=False).connect()
    c.subscribe("doom/#", 1)
    status, body = gateway.admin("/sessions/doomed", "DELETE")
    assert status == 409 and "connected" in body["error"]
    assert "doomed" in sessions(gateway)
    c.disconnect()
    wait_offline(gateway, "doomed")
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("doom/x", b"queued", qos=1)
    status, body = gateway.admin("/sessions/doomed", "DELETE")
    assert (status, body) == (200, {"deleted": "doomed"})
    assert "doomed" not in sessions(gateway)
    status, body = gateway.admin("/sessions/doomed", "DELETE")
    assert status == 404
    again = clients(gateway.port, "doomed", protocol=proto, clean_session=False).connect()
    assert again.session_present is False
    again.subscribe("doom/marker", 0)
    pub.publish("doom/marker", b"m", qos=0)
    assert [m.payload for m in again.wait_messages(1)] == [b"m"]


def test_deleted_session_stays_deleted_after_restart(gateway, clients, proto):
    c = clients(gateway.port, "erased", protocol=proto, clean_session=False).connect()
    c.subscribe("erase/#", 1)
    c.disconnect()
    wait_offline(gateway, "erased")
    assert gateway.admin("/sessions/erased", "DELETE")[0] == 200
    gateway.stop()
    gateway.start()
    assert "erased" not in sessions(gateway)


def test_takeover_resends_inflight_with_dup_to_the_new_connection(gateway, clients, proto):
    level = LEVEL[proto]
    old = RawClient(gateway.port)
    assert old.connect("handover", level, clean=False).return_code == 0
    old.subscribe("ho/#", 1)
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("ho/t", b"unacked at takeover", qos=1)
    first = old.recv()
    assert isinstance(first, P.Publish)
    new = RawClient(gateway.port)   # the old socket is still open: this is a takeover
    assert new.connect("handover", level, clean=False) == P.Connack(0, level == P.MQTT_311)
    assert old.closed_by_peer()
    again = new.recv()
    assert isinstance(again, P.Publish)
    assert (again.payload, again.packet_id, again.dup) == (b"unacked at takeover", first.packet_id, True)
    new.ack(P.PUBACK, again.packet_id)
    pub.publish("ho/t", b"next", qos=1)
    assert [p.payload for p in new.receive_until(lambda p: p.payload == b"next")] == [b"next"]


def test_window_and_queue_keep_order_across_reconnect(gateway_factory, clients, proto):
    gw = gateway_factory({"broker": {"limits": {"max_inflight": 4}}})
    level = LEVEL[proto]
    raw = RawClient(gw.port)
    raw.connect("window", level, clean=False)
    raw.subscribe("win/#", 2)
    pub = clients(gw.port, protocol=proto).connect()
    for i in range(12):
        pub.publish("win/t", str(i).encode(), qos=1 + i % 2)
    first = [raw.recv() for _ in range(4)]
    assert [p.payload for p in first] == [b"0", b"1", b"2", b"3"]
    raw.close()
    raw = RawClient(gw.port)
    raw.connect("window", level, clean=False)
    got = raw.receive_until(lambda p: p.payload == b"11")
    assert [(p.payload, p.dup) for p in got[:4]] == [(p.payload, True) for p in first]
    assert [p.payload for p in got] == [str(i).encode() for i in range(12)]
    assert [p.qos for p in got] == [1 + i % 2 for i in range(12)]


def test_inbound_qos2_state_survives_restart(gateway, clients, proto):
    level = LEVEL[proto]
    sub = clients(gateway.port, "in2-sub", protocol=proto, clean_session=False).connect()
    sub.subscribe("in2/#", 2)
    raw = RawClient(gateway.port)
    raw.connect("in2-pub", level, clean=False)
    raw.publish("in2/t", b"pubrel after restart", qos=2, packet_id=42)
    assert raw.recv() == P.PacketIdOnly(P.PUBREC, 42)
    raw.close()
    sub.disconnect()
    assert gateway.stop() == 0
    gateway.start()
    raw = RawClient(gateway.port)
    raw.connect("in2-pub", level, clean=False)
    raw.publish("in2/t", b"pubrel after restart", qos=2, packet_id=42, dup=True)   # a retry
    assert raw.recv() == P.PacketIdOnly(P.PUBREC, 42)
    raw.ack(P.PUBREL, 42)
    assert raw.recv() == P.PacketIdOnly(P.PUBCOMP, 42)
    raw.publish("in2/marker", b"m", qos=2, packet_id=43)
    assert raw.recv() == P.PacketIdOnly(P.PUBREC, 43)
    raw.ack(P.PUBREL, 43)
    assert raw.recv() == P.PacketIdOnly(P.PUBCOMP, 43)
    sub2 = clients(gateway.port, "in2-sub", protocol=proto, clean_session=False).connect()
    got = sub2.wait_messages(2)
    assert [m.payload for m in got] == [b"pubrel after restart", b"m"]


def test_unsubscribe_of_a_persistent_session_survives_restart(gateway, clients, proto):
    c = clients(gateway.port, "unsub", protocol=proto, clean_session=False).connect()
    c.subscribe("us/a", 1)
    c.subscribe("us/b", 1)
    c.client.unsubscribe("us/a")
    wait_for(lambda: sessions(gateway)["unsub"]["subscriptions"] == {"us/b": 1}, 5, what="unsubscribed")
    c.disconnect()
    wait_offline(gateway, "unsub")
    gateway.stop()
    gateway.start()
    assert sessions(gateway)["unsub"]["subscriptions"] == {"us/b": 1}
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("us/a", b"no", qos=1)
    pub.publish("us/b", b"yes", qos=1)
    c2 = clients(gateway.port, "unsub", protocol=proto, clean_session=False).connect()
    assert [m.payload for m in c2.wait_messages(1)] == [b"yes"]
    c2.subscribe("us/marker", 1)
    pub.publish("us/marker", b"m", qos=1)
    assert [m.payload for m in c2.wait_messages(2)] == [b"yes", b"m"]


def test_max_queued_drops_beyond_the_limit(gateway_factory, clients, proto):
    gw = gateway_factory({"broker": {"limits": {"max_queued": 5}}})
    c = clients(gw.port, "bounded", protocol=proto, clean_session=False).connect()
    c.subscribe("mq5/#", 1)
    c.disconnect()
    wait_offline(gw, "bounded")
    pub = clients(gw.port, protocol=proto).connect()
    for i in range(8):
        pub.publish("mq5/t", str(i).encode(), qos=1)
    s = sessions(gw)["bounded"]
    assert (s["queued"], s["dropped"]) == (5, 3)
    c2 = clients(gw.port, "bounded", protocol=proto, clean_session=False).connect()
    c2.subscribe("mq5/marker", 1)
    pub.publish("mq5/marker", b"m", qos=1)
    got = c2.wait_messages(6)
    assert [m.payload for m in got] == [b"0", b"1", b"2", b"3", b"4", b"m"]


def test_admin_disconnect_keeps_a_persistent_session(gateway, clients, proto):
    c = clients(gateway.port, "kept", protocol=proto, clean_session=False, reconnect=False).connect()
    c.subscribe("kept/#", 1)
    assert gateway.admin("/connections/kept", "DELETE")[0] == 200
    assert c.disconnected.wait(5)
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("kept/x", b"queued", qos=1)
    wait_for(lambda: sessions(gateway)["kept"]["queued"] == 1, 5, what="queued while kicked out")
    c2 = clients(gateway.port, "kept", protocol=proto, clean_session=False).connect()
    assert [m.payload for m in c2.wait_messages(1)] == [b"queued"]


def test_pubrel_state_survives_restart(gateway, clients, proto):
    """After PUBREC the broker owes only PUBREL: after a restart it must not re-send the PUBLISH."""
    level = LEVEL[proto]
    raw = RawClient(gateway.port)
    raw.connect("rel-restart", level, clean=False)
    raw.subscribe("rr/#", 2)
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("rr/t", b"half done", qos=2)
    p = raw.recv()
    assert isinstance(p, P.Publish)
    raw.ack(P.PUBREC, p.packet_id)
    assert raw.recv() == P.PacketIdOnly(P.PUBREL, p.packet_id)
    pub.disconnect()
    assert gateway.stop() == 0
    raw.close()
    gateway.start()
    raw = RawClient(gateway.port)
    raw.connect("rel-restart", level, clean=False)
    assert raw.recv() == P.PacketIdOnly(P.PUBREL, p.packet_id)
    raw.ack(P.PUBCOMP, p.packet_id)
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("rr/marker", b"m", qos=0)
    assert [x.payload for x in raw.receive_until(lambda x: x.topic == "rr/marker")] == [b"m"]


def test_one_stored_message_shared_by_two_sessions_across_restarts(gateway, clients, proto):
    a = clients(gateway.port, "share-a", protocol=proto, clean_session=False).connect()
    a.subscribe("share/#", 1)
    b = clients(gateway.port, "share-b", protocol=proto, clean_session=False).connect()
    b.subscribe("share/#", 1)
    b.disconnect()
    wait_offline(gateway, "share-b")
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("share/t", b"for both", qos=1)
    assert [m.payload for m in a.wait_messages(1)] == [b"for both"]   # a acks it
    a.disconnect()
    pub.disconnect()
    gateway.stop()
    gateway.start()
    b2 = clients(gateway.port, "share-b", protocol=proto, clean_session=False).connect()
    assert [m.payload for m in b2.wait_messages(1)] == [b"for both"]   # still there for b
    b2.disconnect()
    wait_offline(gateway, "share-b")
    gateway.stop()
    gateway.start()
    assert {s["client_id"]: s["queued"] + s["inflight"] for s in gateway.admin("/sessions")[1]} == \
        {"share-a": 0, "share-b": 0}
    a2 = clients(gateway.port, "share-a", protocol=proto, clean_session=False).connect()
    a2.subscribe("share/marker", 1)
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("share/marker", b"m", qos=1)
    assert [m.payload for m in a2.wait_messages(1)] == [b"m"]   # nothing delivered twice
    # and the store holds no message nobody needs any more (only the marker, queued for share-b)
    a2.disconnect()
    pub.disconnect()
    wait_offline(gateway, "share-a")
    gateway.stop()
    with sqlite3.connect(f"file:{gateway.data_dir / 'broker.sqlite3'}?mode=ro", uri=True) as db:
        assert db.execute("SELECT COUNT(*) FROM messages WHERE id NOT IN "
                          "(SELECT message_id FROM outbound)").fetchone() == (0,)
        rows = db.execute("SELECT o.client_id, m.payload FROM outbound o JOIN messages m "
                          "ON m.id = o.message_id").fetchall()
        assert rows == [("share-b", b"m")]
    gateway.start()
