"""MQTT 5 Receive Maximum from client to server (§4.9): the CONNACK announces ``limits.max_inbound_qos2``; a
client with more QoS 1/2 publications unanswered (no PUBACK / PUBCOMP yet) is closed with DISCONNECT 0x93,
after the answers it was owed, and every publication it was answered for is delivered."""
from __future__ import annotations

import pytest

from bridge.mqtt import packets as P
from bridge.mqtt import properties as PR
from tests.support.gateway import GatewayProcess
from tests.support.mqtt5_client import raw5, read_until_closed

LIMIT = 10


@pytest.fixture(scope="module")
def rm_gateway(tmp_path_factory):
    gw = GatewayProcess(tmp_path_factory.mktemp("rm"), {"broker": {"limits": {"max_inbound_qos2": LIMIT}}}).start()
    yield gw
    gw.stop()


def _watcher(port: int, name: str, topic: str):
    """A persistent QoS 1 subscriber: every publication to ``topic`` is stored, so its PUBACK waits for the
    store's commit (answers are owed for a while)."""
    raw, connack = raw5(port, name, clean=False, props={PR.SESSION_EXPIRY_INTERVAL: 300})
    assert connack.return_code == 0 and connack.properties[PR.RECEIVE_MAXIMUM] == LIMIT
    raw.send(P.encode(P.Subscribe(1, ((topic, 1),)), 5))
    assert raw.recv().return_codes == (1,)
    return raw


def test_a_client_beyond_the_receive_maximum_is_closed_with_0x93_and_loses_nothing_acknowledged(rm_gateway):
    watcher = _watcher(rm_gateway.port, "rm-watch", "rm/flood")
    pub, _ = raw5(rm_gateway.port, "rm-flood")
    burst = 4 * LIMIT   # one write: the broker reads them before any commit can answer one
    pub.send(b"".join(P.encode(P.Publish("rm/flood", str(i).encode(), 1, False, False, i, {}), 5)
                      for i in range(1, burst + 1)))
    got = read_until_closed(pub)
    acked = [p.packet_id for p in got if isinstance(p, P.PacketIdOnly) and p.type == P.PUBACK]
    (disconnect,) = [p for p in got if isinstance(p, P.Disconnect)]
    assert disconnect.reason_code == P.Reason.RECEIVE_MAXIMUM_EXCEEDED
    assert "Receive Maximum of 10" in disconnect.properties[PR.REASON_STRING]
    assert acked == list(range(1, LIMIT + 1))   # the answers owed left first, in order; nothing beyond
    delivered = watcher.receive_until(lambda p: p.payload == str(LIMIT).encode())
    assert [int(p.payload) for p in delivered] == acked
    status = rm_gateway.admin("/status")[1]["messages"]
    assert status["receive_maximum_exceeded"] >= 1
    watcher.close()


def test_a_client_that_waits_for_its_answers_at_the_limit_is_served(rm_gateway):
    watcher = _watcher(rm_gateway.port, "rm-watch2", "rm/ok")
    pub, _ = raw5(rm_gateway.port, "rm-ok")
    pid = 0
    for _ in range(5):   # LIMIT outstanding at a time: allowed
        pub.send(b"".join(P.encode(P.Publish("rm/ok", str(pid + i).encode(), 1, False, False, pid + i, {}), 5)
                          for i in range(1, LIMIT + 1)))
        acks = [pub.recv() for _ in range(LIMIT)]
        assert [a.packet_id for a in acks] == list(range(pid + 1, pid + LIMIT + 1))
        pid += LIMIT
    delivered = watcher.receive_until(lambda p: p.payload == str(pid).encode())
    assert len(delivered) == pid
    pub.close()
    watcher.close()
