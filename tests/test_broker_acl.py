"""Per-topic ACLs (mosquitto's acl_file format) against a running `mqbridge serve`, with real paho clients
and password files written by Debian's mosquitto_passwd: denied publications acknowledged and not routed
(MQTT 5: reason 0x87), refused subscriptions, wildcard subscriptions filtered per topic, `$SYS`, patterns,
anonymous rules, retained messages, wills, `mqbridge reload`, a persistent session across a restart, invalid
files. The same files beside Debian's mosquitto 2.0.11: tests/test_broker_acl_mosquitto.py.

Nothing-delivered checks publish a later message the subscriber may read and wait for it: the forbidden
one, published and acknowledged before it, would have arrived first."""
from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from tests.support.gateway import GatewayProcess, wait_for
from tests.support.mqtt5_client import V5, stay_down
from tests.support.mqtt_clients import PahoClient

pytestmark = pytest.mark.skipif(shutil.which("mosquitto_passwd") is None,
                                reason="mosquitto_passwd (Debian's mosquitto package) not installed")

PASSWORDS = {"alice": "wonder land", "bob": "builder", "carol": "c4rol"}

ACL = """\
# clients without a user name
topic read public/#
topic readwrite anon/#

user alice
topic readwrite plant/alice/#
topic deny plant/alice/secret
topic read plant/shared/#
topic read public/#
topic read $SYS/broker/uptime

user bob
topic readwrite plant/bob/#
topic read plant/alice/status
topic read public/#

user carol
topic read #
topic write plant/#
topic write users/#
topic write devices/#
topic write public/#

pattern readwrite devices/%c/#
pattern read users/%u/#
"""

FAILURE = 0x80          # 3.1.1 SUBACK failure
NOT_AUTHORIZED = 0x87   # MQTT 5 reason code


def make_passwd(path: Path, users: dict[str, str]) -> Path:
    """A password file written by Debian's mosquitto_passwd."""
    for i, (user, password) in enumerate(users.items()):
        args = ["mosquitto_passwd", *(["-c"] if i == 0 else []), "-b", str(path), user, password]
        subprocess.run(args, check=True, capture_output=True, timeout=30)
    return path


@pytest.fixture
def passwd(tmp_path: Path) -> Path:
    return make_passwd(tmp_path / "passwd", PASSWORDS)


@pytest.fixture
def acl_file(tmp_path: Path) -> Path:
    path = tmp_path / "acl"
    path.write_text(ACL, encoding="utf-8")
    return path


@pytest.fixture
def acl_gw(gateway_factory, passwd, acl_file) -> GatewayProcess:
    """A gateway with the password file, the ACL file, and anonymous clients allowed."""
    return gateway_factory({"broker": {"password_file": str(passwd), "acl_file": str(acl_file),
                                       "allow_anonymous": True}})


@pytest.fixture
def user_client(clients) -> Callable[..., PahoClient]:
    """A connected 3.1.1 paho client as ``user`` (None: anonymous)."""
    def make(port: int, user: str | None, client_id: str | None = None, **kw: Any) -> PahoClient:
        c = clients(port, client_id, username=user, password=PASSWORDS.get(user or ""), reconnect=False, **kw)
        c.connect()
        assert c.rc == 0, (user, c.rc)
        return c
    return make


@pytest.fixture
def v5_clients() -> Iterator[Callable[..., V5]]:
    made: list[V5] = []

    def make(port: int, user: str | None, client_id: str = "", *,
             will: tuple[str, bytes] | None = None, connect: bool = True) -> V5:
        c = stay_down(V5(port, client_id or f"v5-{uuid.uuid4().hex[:8]}"))
        if user is not None:
            c.client.username_pw_set(user, PASSWORDS[user])
        if will is not None:
            c.client.will_set(will[0], will[1], 1)
        made.append(c)
        return c.connect() if connect else c

    yield make
    for c in made:
        try:
            c.close()
        except Exception:
            pass


def acl_denied(gw: GatewayProcess) -> dict[str, int]:
    code, status = gw.admin("/status")
    assert code == 200, status
    return status["acl_denied"]


def topics(c: PahoClient) -> list[str]:
    with c.lock:
        return [m.topic for m in c.messages]


def receive_through(c: PahoClient, marker: str, timeout: float = 10.0) -> list[str]:
    """The topics ``c`` received up to and including the first ``marker``."""
    wait_for(lambda: marker in topics(c), timeout, what=f"{marker} at {c.client_id} (has {topics(c)})")
    got = topics(c)
    return got[:got.index(marker) + 1]


def reload(gw: GatewayProcess) -> subprocess.CompletedProcess[str]:
    return gw.cli("reload", "--admin", f"http://127.0.0.1:{gw.admin_port}")


# -- PUBLISH ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("qos", [0, 1, 2])
def test_denied_publish_is_acknowledged_not_delivered_and_counted(acl_gw, user_client, qos):
    bob = user_client(acl_gw.port, "bob")
    assert bob.subscribe("plant/bob/#", 2) == [2]           # bob may read what alice may not write
    assert bob.subscribe("plant/alice/status", 2) == [2]
    before = acl_denied(acl_gw)["publish"]
    alice = user_client(acl_gw.port, "alice")
    info = alice.publish("plant/bob/forged", "from alice", qos=qos)   # QoS 1/2: waits for the acknowledgement
    if qos:
        assert info.is_published()
    alice.publish("plant/alice/status", "later", qos=qos)
    got = receive_through(bob, "plant/alice/status")
    assert got == ["plant/alice/status"]
    assert not alice.disconnected.is_set()                  # a denied publication does not end the connection
    wait_for(lambda: acl_denied(acl_gw)["publish"] == before + 1, 5, what="acl_denied.publish counted once")


@pytest.mark.parametrize("qos", [1, 2])
def test_mqtt5_denied_publish_gets_reason_0x87(acl_gw, v5_clients, qos):
    alice = v5_clients(acl_gw.port, "alice")
    reasons: dict[int, int] = {}      # mid -> reason code of the PUBACK / PUBREC paho decoded
    why: dict[int, str] = {}           # mid -> the PUBACK's Reason String (QoS 1)
    if qos == 1:
        def on_publish(c, u, mid, rc, props) -> None:
            reasons[mid] = int(rc.value)
            why[mid] = getattr(props, "ReasonString", "")
        alice.client.on_publish = on_publish
    else:   # paho does not report a PUBREC's reason code: decode it with paho's own decoder as it arrives
        paho_packet = pytest.importorskip("paho.mqtt._packet")
        client = alice.client
        handle = client._handle_pubrec

        def pubrec() -> Any:
            decoded = paho_packet.decode_pubrec(client._in_packet["command"], client._in_packet["packet"],
                                                client._protocol)
            reasons[decoded.mid] = int(decoded.reason.value)
            return handle()
        client._handle_pubrec = pubrec   # type: ignore[method-assign]
    denied = alice.client.publish("plant/bob/x", b"no", qos)
    allowed = alice.client.publish("plant/alice/x", b"yes", qos)
    wait_for(lambda: denied.mid in reasons and allowed.mid in reasons, 10, what="both acknowledgements")
    assert reasons[denied.mid] == NOT_AUTHORIZED
    assert reasons[allowed.mid] == 0
    if qos == 1:   # why, in words, on the refusal only
        assert why[denied.mid] == "not authorized to publish to 'plant/bob/x'" and not why[allowed.mid]
    for info in (denied, allowed):       # QoS 2: paho sends PUBREL even after 0x87; the broker completes it
        info.wait_for_publish(10)
        assert info.is_published()
    assert alice.disconnect_reason is None and alice.client.is_connected()


def test_denied_retained_publication_is_not_kept(acl_gw, user_client):
    alice = user_client(acl_gw.port, "alice")
    alice.publish("plant/bob/r", "forged retained", qos=1, retain=True)
    alice.publish("plant/alice/status", "retained ok", qos=1, retain=True)
    carol = user_client(acl_gw.port, "carol")
    assert carol.subscribe("plant/#", 1) == [1]            # carol may read everything
    carol.publish("plant/bob/marker", "m", qos=1)
    assert receive_through(carol, "plant/bob/marker") == ["plant/alice/status", "plant/bob/marker"]


# -- SUBSCRIBE ---------------------------------------------------------------------------------------------


def test_refused_filters_get_0x80_in_the_same_suback(acl_gw, user_client):
    alice = user_client(acl_gw.port, "alice")
    before = acl_denied(acl_gw)["subscribe"]
    result, mid = alice.client.subscribe([("plant/alice/#", 1), ("plant/bob/#", 1), ("plant/alice/secret", 0),
                                          ("plant/shared/x", 2), ("anon/#", 0)])
    assert result == mqtt.MQTT_ERR_SUCCESS
    wait_for(lambda: mid in alice.subacks, 10, what="SUBACK")
    assert alice.subacks[mid] == [1, FAILURE, FAILURE, 2, FAILURE]
    assert acl_denied(acl_gw)["subscribe"] == before + 3
    _, subs = acl_gw.admin("/subscriptions")
    assert sorted(s["topic_filter"] for s in subs if s["client_id"] == alice.client_id) == \
        ["plant/alice/#", "plant/shared/x"]


def test_mqtt5_refused_subscription_gets_0x87(acl_gw, v5_clients):
    alice = v5_clients(acl_gw.port, "alice")
    assert alice.subscribe("plant/bob/#", 1) == [NOT_AUTHORIZED]
    assert alice.subscribe("plant/alice/#", 1) == [1]
    anon = v5_clients(acl_gw.port, None)
    assert anon.subscribe("plant/alice/status", 0) == [NOT_AUTHORIZED]
    assert anon.subscribe("public/#", 0) == [0]


def test_wildcard_subscription_delivers_only_readable_topics(acl_gw, user_client):
    """`#` is granted (some topics are readable) but each publication is checked: other users' trees, the
    anonymous tree and the `deny` line inside alice's own tree stay out; `plant/alice/#` too."""
    alice = user_client(acl_gw.port, "alice")
    assert alice.subscribe("#", 1) == [1]
    alice_tree = user_client(acl_gw.port, "alice")
    assert alice_tree.subscribe("plant/alice/#", 1) == [1]
    carol = user_client(acl_gw.port, "carol")
    anon = user_client(acl_gw.port, None)
    anon.publish("anon/x", "anonymous", qos=1)
    for topic in ("plant/bob/x", "plant/alice/secret", "plant/alice/x", "plant/shared/s", "users/bob/inbox",
                  "users/alice/inbox", "devices/other/up", "public/news", "plant/alice/status"):
        carol.publish(topic, "from carol", qos=1)
    assert receive_through(alice, "plant/alice/status") == [
        "plant/alice/x", "plant/shared/s", "users/alice/inbox", "public/news", "plant/alice/status"]
    assert receive_through(alice_tree, "plant/alice/status") == ["plant/alice/x", "plant/alice/status"]


def test_mqtt5_subscription_identifier_keeps_the_check_per_message(acl_gw, v5_clients, user_client):
    """A Subscription Identifier takes another delivery path (subscription ids per client)."""
    alice = v5_clients(acl_gw.port, "alice")
    props = Properties(PacketTypes.SUBSCRIBE)
    props.SubscriptionIdentifier = 7
    assert alice.subscribe("plant/#", 1, props) == [1]
    carol = user_client(acl_gw.port, "carol")
    for topic in ("plant/bob/x", "plant/alice/secret", "plant/alice/x"):
        carol.publish(topic, "from carol", qos=1)
    wait_for(lambda: any(m.topic == "plant/alice/x" for m in alice.wait(1)), 10, what="plant/alice/x at alice")
    got = alice.wait(1)
    assert [m.topic for m in got] == ["plant/alice/x"]
    assert got[0].properties.SubscriptionIdentifier == [7]


def test_shared_subscription_must_be_wholly_readable(acl_gw, user_client):
    alice = user_client(acl_gw.port, "alice")
    assert alice.subscribe("$share/g/plant/alice/#", 1) == [FAILURE]   # the deny line is inside
    assert alice.subscribe("$share/g/plant/shared/#", 1) == [1]
    carol = user_client(acl_gw.port, "carol")
    carol.publish("plant/alice/secret", "s", qos=1)
    carol.publish("plant/shared/x", "x", qos=1)
    assert receive_through(alice, "plant/shared/x") == ["plant/shared/x"]


def test_sys_subscriptions_only_where_granted(acl_gw, user_client):
    """alice may read $SYS/broker/uptime only; carol's `read #` does not reach `$SYS` (as a `#` subscription
    does not); bob and anonymous clients have no $SYS rule."""
    alice = user_client(acl_gw.port, "alice")
    assert alice.subscribe("$SYS/#", 0) == [0]                  # some of it readable: checked per message
    assert alice.subscribe("$SYS/broker/uptime", 0) == [0]
    assert alice.subscribe("$SYS/broker/version", 0) == [FAILURE]
    carol = user_client(acl_gw.port, "carol")
    assert carol.subscribe("$SYS/#", 0) == [FAILURE]
    assert carol.subscribe("$SYS/broker/uptime", 0) == [FAILURE]
    assert user_client(acl_gw.port, "bob").subscribe("$SYS/broker/uptime", 0) == [FAILURE]
    assert user_client(acl_gw.port, None).subscribe("$SYS/broker/#", 0) == [FAILURE]
    assert carol.subscribe("#", 0) == [0]
    assert carol.subscribe("+/broker/uptime", 0) == [0]
    # $SYS is published every second (sys_interval 1 in tests): two more rounds reach alice, none carol
    n = topics(alice).count("$SYS/broker/uptime")
    wait_for(lambda: topics(alice).count("$SYS/broker/uptime") >= n + 2, 10, what="two $SYS rounds at alice")
    carol.publish("plant/marker", "m", qos=1)
    assert receive_through(carol, "plant/marker") == ["plant/marker"]


def test_sys_wildcard_delivers_only_readable_sys_topics(acl_gw, user_client):
    alice = user_client(acl_gw.port, "alice")
    assert alice.subscribe("$SYS/#", 0) == [0]
    wait_for(lambda: topics(alice).count("$SYS/broker/uptime") >= 2, 10, what="two $SYS rounds at alice")
    assert set(topics(alice)) == {"$SYS/broker/uptime"}


def test_sys_acl_counters(acl_gw, user_client, acl_file):
    """The counters in $SYS (for a user granted them) and in /status agree."""
    acl_file.write_text(ACL.replace("topic read $SYS/broker/uptime", "topic read $SYS/broker/acl/#"))
    assert reload(acl_gw).returncode == 0
    alice = user_client(acl_gw.port, "alice")
    alice.publish("plant/bob/x", "denied", qos=1)
    assert alice.subscribe("plant/bob/#", 0) == [FAILURE]
    assert alice.subscribe("$SYS/broker/acl/denied/+", 0) == [0]
    counts = acl_denied(acl_gw)
    assert counts["publish"] >= 1 and counts["subscribe"] >= 1

    def sys_value(name: str) -> int | None:
        with alice.lock:
            values = [int(m.payload) for m in alice.messages if m.topic == f"$SYS/broker/acl/denied/{name}"]
        return values[-1] if values else None
    wait_for(lambda: sys_value("publish") == counts["publish"] and sys_value("subscribe") == counts["subscribe"],
             10, what=f"$SYS acl/denied equal to /status {counts}")


# -- patterns, anonymous clients --------------------------------------------------------------------------


def test_patterns_substitute_client_id_and_user_name(acl_gw, user_client):
    dev = user_client(acl_gw.port, "alice", "dev-a")
    assert dev.subscribe("devices/dev-a/#", 1) == [1]
    assert dev.subscribe("devices/dev-b/#", 1) == [FAILURE]
    assert dev.subscribe("users/alice/#", 1) == [1]
    assert dev.subscribe("users/bob/#", 1) == [FAILURE]
    carol = user_client(acl_gw.port, "carol")
    assert carol.subscribe("devices/#", 1) == [1]
    dev.publish("devices/dev-b/up", "not mine", qos=1)
    dev.publish("users/alice/x", "read only", qos=1)
    dev.publish("devices/dev-a/up", "mine", qos=1)
    assert receive_through(carol, "devices/dev-a/up") == ["devices/dev-a/up"]
    carol.publish("users/alice/inbox", "hi", qos=1)
    assert receive_through(dev, "users/alice/inbox") == ["devices/dev-a/up", "users/alice/inbox"]
    # a %u pattern grants nothing to a client without a user name
    anon = user_client(acl_gw.port, None, "dev-c")
    assert anon.subscribe("users/None/#", 0) == [FAILURE]
    assert anon.subscribe("users/+/#", 0) == [FAILURE]
    assert anon.subscribe("devices/dev-c/#", 0) == [0]          # %c still applies


@pytest.mark.parametrize("client_id", ["+", "#", "dev/a", "dev-a/+"])
def test_client_id_with_wildcard_or_slash_gets_nothing_from_a_client_id_pattern(acl_gw, user_client, client_id):
    """`%c` = `+` would make `devices/+/#` (every device); `dev/a` would reach into `devices/dev/...`."""
    sneaky = user_client(acl_gw.port, "bob", client_id)
    assert sneaky.subscribe("devices/+/#", 1) == [FAILURE]
    assert sneaky.subscribe("devices/#", 1) == [FAILURE]
    if "+" not in client_id and "#" not in client_id:
        assert sneaky.subscribe(f"devices/{client_id}/#", 1) == [FAILURE]
    assert sneaky.subscribe("plant/bob/#", 1) == [1]          # bob's own rules still apply
    carol = user_client(acl_gw.port, "carol")
    assert carol.subscribe("devices/#", 1) == [1]
    sneaky.publish("devices/dev/a/up", "forged", qos=1)
    carol.publish("devices/dev/a/x", "to the device", qos=1)
    carol.publish("plant/bob/marker", "m", qos=1)
    assert receive_through(sneaky, "plant/bob/marker") == ["plant/bob/marker"]
    assert receive_through(carol, "devices/dev/a/x") == ["devices/dev/a/x"]


def test_read_and_write_are_granted_separately(acl_gw, user_client):
    """carol may write plant/# but read only via `read #`; alice may read plant/shared/# but not write it;
    anonymous clients may read public/# but not write it."""
    alice = user_client(acl_gw.port, "alice")
    assert alice.subscribe("plant/shared/#", 1) == [1]
    alice.publish("plant/shared/by-alice", "read-only for alice", qos=1)
    anon = user_client(acl_gw.port, None)
    assert anon.subscribe("public/#", 1) == [1]
    anon.publish("public/by-anon", "read-only for anonymous", qos=1)
    carol = user_client(acl_gw.port, "carol")
    carol.publish("plant/shared/by-carol", "writable by carol", qos=1)
    carol.publish("public/by-carol", "writable by carol", qos=1)
    assert receive_through(alice, "plant/shared/by-carol") == ["plant/shared/by-carol"]
    assert receive_through(anon, "public/by-carol") == ["public/by-carol"]


def test_anonymous_clients_get_the_rules_before_any_user_line(acl_gw, user_client):
    anon = user_client(acl_gw.port, None)
    assert anon.subscribe("public/#", 1) == [1]
    assert anon.subscribe("anon/#", 1) == [1]
    assert anon.subscribe("plant/alice/status", 1) == [FAILURE]
    assert anon.subscribe("#", 1) == [1]                        # some topics readable: checked per message
    carol = user_client(acl_gw.port, "carol")
    anon.publish("public/forged", "anonymous may not write public/", qos=1)
    carol.publish("plant/alice/status", "not for anonymous", qos=1)
    anon.publish("anon/x", "ok", qos=1)
    carol.publish("public/news", "for everyone", qos=1)
    got = receive_through(anon, "public/news")
    assert list(dict.fromkeys(got)) == ["anon/x", "public/news"]   # once, or once per matching filter
    # a user is not given the anonymous rules
    alice = user_client(acl_gw.port, "alice")
    assert alice.subscribe("anon/#", 0) == [FAILURE]


def test_without_a_password_database_a_user_name_gets_the_anonymous_rules(gateway_factory, user_client, acl_file):
    """Anyone could claim `alice` without a password file: the claimed name grants nothing of alice's."""
    gw = gateway_factory({"broker": {"acl_file": str(acl_file)}})
    claims = user_client(gw.port, "alice")
    assert claims.subscribe("plant/alice/#", 0) == [FAILURE]
    assert claims.subscribe("users/alice/#", 0) == [FAILURE]
    assert claims.subscribe("public/#", 0) == [0]
    v = gw.cli("validate", "-c", str(gw.config_path))
    assert v.returncode == 0, v.stderr
    assert "every client gets the anonymous rules" in v.stdout


# -- retained messages and wills ---------------------------------------------------------------------------


def test_retained_messages_replayed_only_where_readable(acl_gw, user_client):
    carol = user_client(acl_gw.port, "carol")
    for topic in ("plant/alice/secret", "plant/alice/status", "plant/bob/state", "public/r"):
        carol.publish(topic, f"retained {topic}", qos=1, retain=True)
    alice = user_client(acl_gw.port, "alice")
    assert alice.subscribe("#", 1) == [1]
    assert alice.subscribe("plant/alice/#", 1) == [1]
    carol.publish("plant/alice/live", "after the replay", qos=1)
    got = receive_through(alice, "plant/alice/live")
    assert set(got) == {"plant/alice/status", "public/r", "plant/alice/live"}
    bob = user_client(acl_gw.port, "bob")
    assert bob.subscribe("plant/+/status", 1) == [1]           # plant/alice/status is readable by bob
    assert bob.subscribe("plant/alice/secret", 1) == [FAILURE]
    carol.publish("plant/bob/status", "live", qos=1)
    assert receive_through(bob, "plant/bob/status") == ["plant/alice/status", "plant/bob/status"]
    assert all(m.retain for m in bob.messages[:1])


@pytest.mark.parametrize("version", ["3.1.1", "5"])
def test_will_to_a_topic_the_client_may_not_write_refuses_the_connect(acl_gw, clients, v5_clients, version):
    before = acl_denied(acl_gw)["publish"]
    if version == "5":
        refused = v5_clients(acl_gw.port, "alice", will=("plant/bob/will", b"gone"))
        assert int(refused.connack[1].value) == NOT_AUTHORIZED
    else:
        c = clients(acl_gw.port, username="alice", password=PASSWORDS["alice"], reconnect=False,
                    will=("plant/bob/will", b"gone", 1, False)).connect()
        assert c.rc == 5
    assert acl_denied(acl_gw)["publish"] == before + 1
    # a will it may write is accepted, and published when the connection ends without DISCONNECT
    watcher = clients(acl_gw.port, username="alice", password=PASSWORDS["alice"], reconnect=False).connect()
    assert watcher.subscribe("plant/alice/#", 1) == [1]
    ok = clients(acl_gw.port, username="alice", password=PASSWORDS["alice"], reconnect=False,
                 will=("plant/alice/will", b"gone", 1, False)).connect()
    assert ok.rc == 0
    ok.drop()
    assert receive_through(watcher, "plant/alice/will") == ["plant/alice/will"]


# -- reload ------------------------------------------------------------------------------------------------


def test_reload_changes_the_rules_of_a_connected_client(acl_gw, user_client, acl_file):
    alice = user_client(acl_gw.port, "alice")
    assert alice.subscribe("plant/shared/#", 1) == [1]         # every topic readable: no check per message
    assert alice.subscribe("#", 1) == [1]
    carol = user_client(acl_gw.port, "carol")
    carol.publish("plant/shared/a", "before", qos=1)
    assert receive_through(alice, "plant/shared/a") == ["plant/shared/a"]

    acl_file.write_text(ACL.replace("topic read plant/shared/#", "topic read plant/new/#"))
    r = reload(acl_gw)
    assert r.returncode == 0, r.stderr
    assert f"acl: {acl_file}" in r.stdout
    assert not alice.disconnected.is_set()
    carol.publish("plant/shared/b", "after: no longer readable by alice", qos=1)
    alice.publish("plant/shared/c", "alice never could write there", qos=1)
    carol.publish("plant/new/x", "after: newly readable", qos=1)
    assert receive_through(alice, "plant/new/x") == ["plant/shared/a", "plant/new/x"]
    assert alice.subscribe("plant/shared/#", 1) == [FAILURE]
    assert alice.subscribe("plant/new/#", 1) == [1]


def test_reload_of_an_invalid_acl_keeps_the_old_rules(acl_gw, user_client, acl_file):
    alice = user_client(acl_gw.port, "alice")
    acl_file.write_text(ACL + "topic read plant/ba+d\n")
    line = ACL.count("\n") + 1
    r = reload(acl_gw)
    assert r.returncode == 1
    assert f"{acl_file}:{line}:" in r.stderr and "plant/ba+d" in r.stderr
    assert alice.subscribe("plant/shared/#", 0) == [0]
    assert alice.subscribe("plant/bob/#", 0) == [FAILURE]


# -- a persistent session whose client is away --------------------------------------------------------------


def persistent_alice(clients, port: int, client_id: str) -> PahoClient:
    return clients(port, client_id, username="alice", password=PASSWORDS["alice"], clean_session=False,
                   reconnect=False)


def test_persistent_session_keeps_its_users_rules_across_a_restart(acl_gw, clients, user_client):
    away = persistent_alice(clients, acl_gw.port, "alice-p").connect()
    assert away.subscribe("#", 1) == [1]
    assert away.subscribe("plant/alice/#", 1) == [1]
    away.disconnect()
    acl_gw.stop()
    acl_gw.start()
    carol = user_client(acl_gw.port, "carol")
    for topic in ("plant/bob/x", "plant/alice/secret", "plant/alice/a", "users/bob/inbox", "anon/x",
                  "users/alice/inbox", "plant/alice/z"):
        carol.publish(topic, "while alice is away", qos=1)
    back = persistent_alice(clients, acl_gw.port, "alice-p").connect()
    assert back.session_present
    got = receive_through(back, "plant/alice/z")
    assert set(got) == {"plant/alice/a", "users/alice/inbox", "plant/alice/z"}


def test_reload_applies_to_a_persistent_session_whose_client_is_away(acl_gw, clients, user_client, acl_file):
    away = persistent_alice(clients, acl_gw.port, "alice-away").connect()
    assert away.subscribe("plant/shared/#", 1) == [1]
    assert away.subscribe("plant/alice/#", 1) == [1]
    away.disconnect()
    acl_file.write_text(ACL.replace("topic read plant/shared/#\n", ""))
    assert reload(acl_gw).returncode == 0
    carol = user_client(acl_gw.port, "carol")
    carol.publish("plant/shared/x", "no longer readable by alice", qos=1)
    carol.publish("plant/alice/z", "still readable", qos=1)
    back = persistent_alice(clients, acl_gw.port, "alice-away").connect()
    assert back.session_present
    assert receive_through(back, "plant/alice/z") == ["plant/alice/z"]


def test_reload_ends_a_shared_subscription_no_longer_wholly_readable(acl_gw, user_client, acl_file):
    alice = user_client(acl_gw.port, "alice")
    assert alice.subscribe("$share/g/plant/shared/#", 1) == [1]
    assert alice.subscribe("plant/alice/#", 1) == [1]
    acl_file.write_text(ACL.replace("topic read plant/shared/#", "topic read plant/shared/open/#"))
    assert reload(acl_gw).returncode == 0
    carol = user_client(acl_gw.port, "carol")
    carol.publish("plant/shared/open/x", "readable, but the group's filter is wider", qos=1)
    carol.publish("plant/shared/closed", "not readable", qos=1)
    carol.publish("plant/alice/z", "marker", qos=1)
    assert receive_through(alice, "plant/alice/z") == ["plant/alice/z"]
    _, subs = acl_gw.admin("/subscriptions")
    assert [s["topic_filter"] for s in subs if s["client_id"] == alice.client_id] == ["plant/alice/#"]


def test_a_session_resumed_by_another_user_is_filtered_by_that_users_rules(acl_gw, clients, user_client):
    """alice's persistent session taken over by bob (same client id): alice's subscriptions are checked
    against bob's rules from then on."""
    alice = clients(acl_gw.port, "plant-7", username="alice", password=PASSWORDS["alice"], clean_session=False,
                    reconnect=False).connect()
    assert alice.subscribe("plant/alice/#", 1) == [1]
    alice.disconnect()
    bob = clients(acl_gw.port, "plant-7", username="bob", password=PASSWORDS["bob"], clean_session=False,
                  reconnect=False).connect()
    assert bob.session_present
    carol = user_client(acl_gw.port, "carol")
    carol.publish("plant/alice/x", "alice's, not bob's", qos=1)
    carol.publish("plant/alice/status", "bob may read this one", qos=1)
    assert receive_through(bob, "plant/alice/status") == ["plant/alice/status"]


# -- invalid files -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad, problem", [
    ("topic read plant/#/x\n", "plant/#/x"),          # the problem's wording is the parser's; its line is ours
    ("topic\n", "'topic'"),
    ("user\n", "'user'"),
    ("topik read plant/x\n", "'topik'"),
])
def test_invalid_acl_file_refuses_start_and_validate(tmp_path, passwd, bad, problem):
    acl = tmp_path / "bad.acl"
    acl.write_text("# rules\nuser alice\n" + bad)
    gw = GatewayProcess(tmp_path / "gw", {"broker": {"password_file": str(passwd), "acl_file": str(acl)}})
    (tmp_path / "gw").mkdir()
    with pytest.raises(AssertionError, match="mqbridge exited with 1") as exc:
        gw.start(timeout=30)
    assert f"{acl}:3:" in str(exc.value) and problem in str(exc.value)
    v = gw.cli("validate", "-c", str(gw.config_path))
    assert v.returncode == 1
    assert f"{acl}:3:" in v.stderr and problem in v.stderr
    acl.write_text("# rules\nuser alice\ntopic read plant/#\n")
    v = gw.cli("validate", "-c", str(gw.config_path))
    assert v.returncode == 0, v.stderr
    assert f"acl {acl}: rules for 1 users" in v.stdout


def test_missing_acl_file_refuses_start(tmp_path, passwd):
    missing = tmp_path / "nowhere.acl"
    gw = GatewayProcess(tmp_path / "gw", {"broker": {"password_file": str(passwd), "acl_file": str(missing)}})
    (tmp_path / "gw").mkdir()
    with pytest.raises(AssertionError, match="mqbridge exited with 1") as exc:
        gw.start(timeout=30)
    assert f"{missing}: cannot read the ACL file" in str(exc.value)
