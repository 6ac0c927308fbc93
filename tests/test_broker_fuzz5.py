"""Hostile MQTT 5 bytes into the running protocol core (sans-IO, as tests/test_broker_sans_io.py drives it):
whatever a connected client sends (well-formed packets of every kind, mutated or cut), the broker answers
that connection only, never raises, and keeps serving the others: a subscriber gets a publication made
after each attack. tests/test_packets5_fuzz.py fuzzes the codec alone; this is the broker around it."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.mqtt import packets as P
from tests.test_broker_sans_io import Client, ManualLoop, core  # noqa: F401 - core: the fixture
from tests.test_packets5_fuzz import packets5

PUBLISH_OK = P.encode(P.Publish("fz/ok", b"still served", 0), 5)


def _connected(broker, loop: ManualLoop, name: str, *subscribe: str) -> Client:
    client = Client(broker, name)
    client.driver.receive(P.encode(P.Connect(5, name)), 1.0)
    loop.pump_until(lambda: bool(client.out))
    if subscribe:
        client.take()
        client.driver.receive(P.encode(P.Subscribe(1, tuple((t, 0) for t in subscribe)), 5), 1.0)
        loop.pump_until(lambda: bool(client.out))
    client.take()
    return client


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(packets5, min_size=1, max_size=4), st.integers(0, 400), st.integers(0, 255),
       st.sampled_from(["as is", "mutated", "cut"]))
def test_a_hostile_client_does_not_disturb_the_others(core, packets, where, value, how):  # noqa: F811
    broker, loop = core
    victim = _connected(broker, loop, "fz-victim", "fz/#")
    publisher = _connected(broker, loop, "fz-publisher")
    attacker = _connected(broker, loop, "fz-attacker")
    data = bytearray(b"".join(P.encode(p, 5) for p in packets))
    if how == "mutated":
        data[where % len(data)] = value
    elif how == "cut":
        del data[where % len(data):]
    attacker.driver.receive(bytes(data), 2.0)   # must not raise, whatever it is
    # the others are served: a publication from another client reaches the subscriber
    publisher.driver.receive(PUBLISH_OK, 3.0)
    got = P.PacketReader(level=5).feed(victim.take())
    assert any(isinstance(p, P.Publish) and p.topic == "fz/ok" and p.payload == b"still served" for p in got)
    for client in (victim, publisher, attacker):
        if not client.closed:
            client.driver.lost(None)
