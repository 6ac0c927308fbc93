"""listeners[].transport: what holds a plain TCP listener's connections (docs/broker.md "listeners[].transport"),
on asyncio's loop and on uvloop: each choice is the one /status reports, and clients on listeners of different
transports exchange messages both ways."""
from __future__ import annotations

import pytest

from bridge.config import ListenerConfig
from tests.support.gateway import LOOPS, free_port


@pytest.mark.parametrize("gateway_loop", LOOPS)
def test_each_listener_uses_the_transport_it_names_and_they_interoperate(gateway_factory, clients, gateway_loop):
    ports = {name: free_port() for name in ("auto", "compact", "loop")}
    gw = gateway_factory({"broker": {"listeners": [
        {"name": name, "host": "127.0.0.1", "port": port, **({} if name == "auto" else {"transport": name})}
        for name, port in ports.items()]}})
    _, status = gw.admin("/status")
    chosen = {lst["name"]: lst["transport"] for lst in status["listeners"]}
    assert chosen == {"auto": "compact", "compact": "compact", "loop": "loop"}   # auto: compact on either loop
    assert f"listener compact started on 127.0.0.1:{ports['compact']} (compact transport)" in gw.log()

    subs = {name: clients(port, f"sub-{name}").connect() for name, port in ports.items()}
    for sub in subs.values():
        sub.subscribe("t/#", 1)
    pubs = {name: clients(port, f"pub-{name}").connect() for name, port in ports.items()}
    big = bytes(range(256)) * 4096   # 1 MiB: more than one write takes, so the compact transport buffers
    for name, pub in pubs.items():
        pub.publish(f"t/{name}", f"from {name}".encode(), qos=1)
        pub.publish(f"t/{name}/big", big, qos=1)
    for name, sub in subs.items():
        got = sub.wait_messages(6)
        assert sorted((m.topic, m.payload) for m in got) == sorted(
            [(f"t/{p}", f"from {p}".encode()) for p in ports] + [(f"t/{p}/big", big) for p in ports]), name


def test_compact_is_refused_on_a_tls_listener_naming_the_setting():
    tls = {"cert": "s.pem", "key": "s.key"}
    with pytest.raises(ValueError, match="transport: compact is for plain TCP"):
        ListenerConfig.model_validate({"tls": tls, "transport": "compact"})
    assert ListenerConfig.model_validate({"tls": tls, "transport": "loop"}).transport == "loop"
    with pytest.raises(ValueError, match="transport"):
        ListenerConfig.model_validate({"transport": "fast"})
