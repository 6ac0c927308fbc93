"""Last Will and Testament against a real `mqbridge serve`: published on an I/O error (TCP closed
without DISCONNECT), on keepalive expiry, on takeover and on an admin disconnect; never after
DISCONNECT; will QoS and retain honoured."""
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


def watcher(gateway, clients, proto, qos: int = 2):
    w = clients(gateway.port, protocol=proto).connect()
    w.subscribe("will/#", qos)
    return w


def test_will_on_connection_dropped(gateway, clients, proto):
    w = watcher(gateway, clients, proto)
    c = clients(gateway.port, protocol=proto, will=("will/drop", b"gone", 1, False)).connect()
    c.drop()
    (m,) = w.wait_messages(1)
    assert (m.topic, m.payload, m.qos, m.retain) == ("will/drop", b"gone", 1, False)
    wait_for(lambda: "publishing will to will/drop" in gateway.log(), 5, what="will logged")


def test_will_on_keepalive_expiry(gateway, clients, proto):
    w = watcher(gateway, clients, proto)
    c = clients(gateway.port, protocol=proto, keepalive=1, will=("will/silent", b"timed out", 0, False),
                reconnect=False).connect()
    c.client.loop_stop()   # the socket stays open, but no PINGREQ is sent any more
    (m,) = w.wait_messages(1, timeout=6)
    assert (m.topic, m.payload, m.qos) == ("will/silent", b"timed out", 0)
    assert "keepalive expired" in gateway.log()


def test_will_on_takeover(gateway, clients, proto):
    w = watcher(gateway, clients, proto)
    old = clients(gateway.port, "twin", protocol=proto, will=("will/twin", b"taken over", 1, False),
                  reconnect=False).connect()
    new = clients(gateway.port, "twin", protocol=proto, reconnect=False).connect()
    assert new.rc == 0
    assert old.disconnected.wait(5), "the older connection was not closed"
    (m,) = w.wait_messages(1)
    assert (m.topic, m.payload, m.qos) == ("will/twin", b"taken over", 1)
    # the new connection has no will: its DISCONNECT-less end publishes nothing
    new.drop()
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("will/marker", b"m", qos=2)
    got = w.wait_messages(2)
    assert [x.payload for x in got] == [b"taken over", b"m"]


def test_no_will_after_disconnect(gateway, clients, proto):
    w = watcher(gateway, clients, proto)
    c = clients(gateway.port, protocol=proto, will=("will/clean", b"must not appear", 1, True)).connect()
    c.disconnect()
    wait_for(lambda: c.client_id not in {x["client_id"] for x in gateway.admin("/connections")[1]}, 5,
             what="client gone")
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("will/marker", b"m", qos=2)
    got = w.wait_messages(1)
    assert [x.payload for x in got] == [b"m"]
    # and nothing was retained either
    late = clients(gateway.port, protocol=proto).connect()
    late.subscribe("will/clean", 2)
    late.subscribe("will/marker2", 0)
    pub.publish("will/marker2", b"m2", qos=0)
    assert [x.payload for x in late.wait_messages(1)] == [b"m2"]


def test_no_will_after_raw_disconnect_then_close(gateway, clients, proto):
    w = watcher(gateway, clients, proto)
    raw = RawClient(gateway.port)
    assert raw.connect("polite", LEVEL[proto], will=P.Will("will/polite", b"no", 0, False)).return_code == 0
    raw.send(P.DISCONNECT_BYTES)
    assert raw.closed_by_peer()
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("will/marker", b"m", qos=2)
    assert [x.payload for x in w.wait_messages(1)] == [b"m"]


@pytest.mark.parametrize("will_qos,sub_qos", [(0, 2), (1, 2), (2, 2), (2, 1), (2, 0)])
def test_will_qos_is_honoured(gateway, clients, proto, will_qos, sub_qos):
    w = watcher(gateway, clients, proto, qos=sub_qos)
    c = clients(gateway.port, protocol=proto, will=("will/q", b"q", will_qos, False)).connect()
    c.drop()
    (m,) = w.wait_messages(1)
    assert m.qos == min(will_qos, sub_qos)


def test_will_retain_is_honoured(gateway, clients, proto):
    w = watcher(gateway, clients, proto)
    c = clients(gateway.port, protocol=proto, will=("will/status/dev1", b"offline", 1, True)).connect()
    c.drop()
    (m,) = w.wait_messages(1)
    assert (m.payload, m.retain) == (b"offline", False)   # live subscribers: an ordinary message
    late = clients(gateway.port, protocol=proto).connect()
    late.subscribe("will/status/+", 2)
    (r,) = late.wait_messages(1)
    assert (r.topic, r.payload, r.qos, r.retain) == ("will/status/dev1", b"offline", 1, True)


def test_will_on_admin_disconnect(gateway, clients, proto):
    w = watcher(gateway, clients, proto)
    c = clients(gateway.port, "kicked", protocol=proto, will=("will/kicked", b"bye", 1, False),
                reconnect=False).connect()
    status, body = gateway.admin("/connections/kicked", "DELETE")
    assert status == 200, body
    assert c.disconnected.wait(5)
    (m,) = w.wait_messages(1)
    assert m.payload == b"bye"


def test_no_will_on_clean_broker_shutdown(gateway, clients, proto):
    """SIGTERM is not a client failure: a retained will must not be published on the way down."""
    c = clients(gateway.port, protocol=proto, will=("will/shutdown", b"not this", 1, True)).connect()
    assert gateway.stop() == 0
    c.client.loop_stop()
    gateway.start()
    late = clients(gateway.port, protocol=proto).connect()
    late.subscribe("will/shutdown", 1)
    late.subscribe("will/marker", 0)
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("will/marker", b"m", qos=0)
    assert [x.payload for x in late.wait_messages(1)] == [b"m"]


def test_will_cannot_publish_into_dollar_topics(gateway, clients, proto):
    """Clients may not publish into `$` topics; a will is a publication by the client."""
    sys = clients(gateway.port, protocol=proto).connect()
    sys.subscribe("$SYS/fake/#", 1)
    sys.subscribe("will/marker", 1)
    c = clients(gateway.port, protocol=proto, will=("$SYS/fake/status", b"forged", 1, True)).connect()
    c.drop()
    wait_for(lambda: c.client_id not in {x["client_id"] for x in gateway.admin("/connections")[1]}, 5,
             what="client gone")
    pub = clients(gateway.port, protocol=proto).connect()
    pub.publish("will/marker", b"m", qos=1)
    assert [m.payload for m in sys.wait_messages(1)] == [b"m"]
    late = clients(gateway.port, protocol=proto).connect()
    late.subscribe("$SYS/fake/#", 1)
    late.subscribe("will/marker", 1)
    pub.publish("will/marker", b"m2", qos=1)
    assert [m.payload for m in late.wait_messages(1)] == [b"m2"]
