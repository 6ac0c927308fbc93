"""MQTT 5.0 conformance per feature with Debian's mosquitto_pub / mosquitto_sub / mosquitto_rr 2.0.11 at
``-V 5`` against a real `mqbridge serve` (issue #15): user properties (order and duplicates), Content Type,
Response Topic, Correlation Data, Payload Format Indicator and Message Expiry (remaining interval, expiry
while queued), Subscription Identifiers, Retain As Published, shared subscriptions, Will Delay Interval and
will properties, Session Expiry Interval, Maximum Packet Size both ways, ACL refusals as reason codes the
client prints, request/response. What a subscriber got is what mosquitto_sub printed with ``-F``.

mosquitto_sub 2.0.11 has no option for No Local or Retain Handling (its only subscription option is
``--retain-as-published``; ``-R`` filters on the client side): those are covered with paho in
tests/test_broker_mqtt5_pubsub.py. Nothing-delivered checks publish a later message the subscriber may get
and wait for it: the refused one, published before, would have arrived first."""
from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.support import shared_gateway
from tests.support.gateway import GatewayProcess, wait_for
from tests.support.mosquitto import AVAILABLE, MosquittoSub, mosquitto_pub

# one gateway process per module, reset before each test (see tests/support/shared_gateway.py)
module_gateway = shared_gateway.module_gateway
gateway = shared_gateway.gateway

pytestmark = pytest.mark.skipif(not AVAILABLE, reason="mosquitto-clients are not installed")

V5 = "5"
Props = Sequence[tuple[str, ...]]   # -D publish arguments: (identifier, value) or ("user-property", name, value)


@pytest.fixture
def subs() -> Iterator[Callable[..., MosquittoSub]]:
    """Start ``mosquitto_sub -V 5`` processes; every one still running is killed at teardown."""
    made: list[MosquittoSub] = []

    def make(*args: Any, **kw: Any) -> MosquittoSub:
        s = MosquittoSub(*args, version=V5, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.kill()


def pub5(port: int, topic: str, payload: str | None, *, qos: int = 1, props: Props = (),
         retain: bool = False, extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """One ``mosquitto_pub -V 5`` with ``-D publish`` properties."""
    args = [arg for prop in props for arg in ("-D", "publish", *prop)]
    return mosquitto_pub(port, topic, payload, version=V5, qos=qos, retain=retain, extra=(*args, *extra))


def pub_ok(*args: Any, **kw: Any) -> None:
    r = pub5(*args, **kw)
    assert r.returncode == 0 and r.stderr == "", r.stderr


def session(gw: GatewayProcess, cid: str) -> dict[str, Any] | None:
    """The admin's view of ``cid``'s session, None when it has none."""
    return next((s for s in gw.admin("/sessions")[1] if s["client_id"] == cid), None)


def connected(gw: GatewayProcess, cid: str) -> bool:
    return cid in {c["client_id"] for c in gw.admin("/connections")[1]}


def wait_connected(gw: GatewayProcess, cid: str, up: bool = True) -> None:
    wait_for(lambda: connected(gw, cid) == up, 10, what=f"{cid} {'connected' if up else 'gone'}")


def wait_in_session(gw: GatewayProcess, sub: MosquittoSub) -> MosquittoSub:
    """Until ``sub`` is connected and its session holds every one of its filters (a shared subscription is
    listed under its group in /subscriptions, not under the member)."""
    def ready() -> bool:
        if sub.proc.poll() is not None:
            raise AssertionError(f"mosquitto_sub exited {sub.proc.returncode}: {sub.stderr()}")
        s = session(gw, sub.client_id)
        return s is not None and s["connected"] and set(sub.topics) <= set(s["subscriptions"])
    wait_for(ready, 10, what=f"mosquitto_sub {sub.client_id} subscribed")
    return sub


def pass_time(until: float) -> None:
    """Let an interval (expiry, will delay) run out: the wait is what is tested, not a race hidden."""
    wait_for(lambda: time.monotonic() >= until, until - time.monotonic() + 5, interval=0.05, what="time to pass")


# -- properties forwarded ----------------------------------------------------------------------------------

USER_PROPS = [("k", "v1"), ("k", "v2"), ("a", "1"), ("k", "v1"), ("ключ", "значение✓"), ("empty", "")]


@pytest.mark.parametrize("qos", [0, 1, 2])
def test_user_properties_keep_order_and_duplicates(gateway, subs, qos):
    s = subs(gateway.port, "m5/up", qos=2, client_id="up-sub", fmt="%t|%p|%q|%P").wait_subscribed(gateway)
    pub_ok(gateway.port, "m5/up", "with", qos=qos, props=[("user-property", k, v) for k, v in USER_PROPS])
    pub_ok(gateway.port, "m5/up", "without", qos=qos)   # nothing carried over from the previous one
    assert s.wait_lines(2) == [f"m5/up|with|{qos}|k:v1 k:v2 a:1 k:v1 ключ:значение✓ empty:",
                               f"m5/up|without|{qos}|"]


def test_content_type_response_topic_correlation_data_format_and_expiry(gateway, subs):
    s = subs(gateway.port, "m5/props", qos=1, client_id="props-sub",
             fmt="%p|%C|%R|%D|%F|%E").wait_subscribed(gateway)
    pub_ok(gateway.port, "m5/props", "{\"q\": 1}", props=[
        ("content-type", "application/json; charset=utf-8"), ("response-topic", "m5/reply/42"),
        ("correlation-data", "corr-42"), ("payload-format-indicator", "1"), ("message-expiry-interval", "120")])
    pub_ok(gateway.port, "m5/props", "bare")
    first, second = s.wait_lines(2)
    payload, ctype, response, corr, fmt, expiry = first.split("|")
    assert (payload, ctype, response, corr, fmt) == ("{\"q\": 1}", "application/json; charset=utf-8",
                                                     "m5/reply/42", "corr-42", "1")
    assert 100 <= int(expiry) <= 120   # the remaining interval, at most what was sent
    assert second == "bare|||||"


def test_message_expiry_counts_down_while_queued(gateway, subs):
    cid = "exp-sub"
    first = subs(gateway.port, "m5/exp/#", qos=1, client_id=cid, clean=False, extra=("-x", "300"))
    first.wait_subscribed(gateway).stop()
    wait_connected(gateway, cid, up=False)
    pub_ok(gateway.port, "m5/exp/short", "short", props=[("message-expiry-interval", "1")])
    pub_ok(gateway.port, "m5/exp/long", "long", props=[("message-expiry-interval", "600")])
    pub_ok(gateway.port, "m5/exp/none", "none")
    published = time.monotonic()
    wait_for(lambda: session(gateway, cid)["queued"] == 3, 10, what="3 messages queued")
    pass_time(published + 2.5)
    back = subs(gateway.port, "m5/exp/#", qos=1, client_id=cid, clean=False, extra=("-x", "300"),
                fmt="%t|%p|%E")
    back.wait_subscribed(gateway)
    wait_connected(gateway, cid)
    pub_ok(gateway.port, "m5/exp/marker", "m")
    lines = back.wait_lines(3)
    assert [line.rsplit("|", 1)[0] for line in lines] == ["m5/exp/long|long", "m5/exp/none|none", "m5/exp/marker|m"]
    assert [line.rsplit("|", 1)[1] for line in lines][1:] == ["", ""]
    assert 500 <= int(lines[0].rsplit("|", 1)[1]) <= 598   # 600 less the 2.5 s and more it waited


# -- subscription options and identifiers ------------------------------------------------------------------


def test_subscription_identifiers_are_delivered_back(gateway, subs):
    pub_ok(gateway.port, "m5/sid/kept", "retained", retain=True)
    fmt = "%t|%p|%S"
    small = subs(gateway.port, "m5/sid/#", qos=1, client_id="sid-7", fmt=fmt,
                 extra=("-D", "subscribe", "subscription-identifier", "7"))
    largest = subs(gateway.port, "m5/sid/#", qos=1, client_id="sid-max", fmt=fmt,   # a 4-byte variable integer
                   extra=("-D", "subscribe", "subscription-identifier", "268435455"))
    none = subs(gateway.port, "m5/sid/#", qos=1, client_id="sid-none", fmt=fmt)
    for s in (small, largest, none):
        s.wait_subscribed(gateway)
    pub_ok(gateway.port, "m5/sid/live", "live")
    # the retained message sent on subscribing carries the identifier too (MQTT 5.0 §3.8.2.1.2)
    assert small.wait_lines(2) == ["m5/sid/kept|retained|7", "m5/sid/live|live|7"]
    assert largest.wait_lines(2) == ["m5/sid/kept|retained|268435455", "m5/sid/live|live|268435455"]
    assert none.wait_lines(2) == ["m5/sid/kept|retained|", "m5/sid/live|live|"]


def test_retain_as_published(gateway, subs):
    pub_ok(gateway.port, "m5/rap", "old", retain=True)
    rap = subs(gateway.port, "m5/rap", qos=1, client_id="rap-on", fmt="%p|%r", extra=("--retain-as-published",))
    plain = subs(gateway.port, "m5/rap", qos=1, client_id="rap-off", fmt="%p|%r")
    for s in (rap, plain):
        s.wait_subscribed(gateway)
    pub_ok(gateway.port, "m5/rap", "new", retain=True)
    pub_ok(gateway.port, "m5/rap", "fresh")
    assert rap.wait_lines(3) == ["old|1", "new|1", "fresh|0"]     # the flag as the publisher set it
    assert plain.wait_lines(3) == ["old|1", "new|0", "fresh|0"]   # set only on the replay at subscribe


def test_shared_subscription_each_message_to_exactly_one_member(gateway, subs):
    members = [wait_in_session(gateway, subs(gateway.port, "$share/g5/m5/jobs/#", qos=1, client_id=f"member-{i}",
                                             fmt="%p")) for i in (1, 2)]
    everyone = subs(gateway.port, "m5/jobs/#", qos=1, client_id="jobs-all", fmt="%p").wait_subscribed(gateway)

    def publish(numbers: range) -> None:
        r = subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(gateway.port), "-V", V5, "-q", "1",
                            "-t", "m5/jobs/x", "-l"], input="".join(f"{i}\n" for i in numbers),
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr

    n = 40
    publish(range(n))
    assert everyone.wait_lines(n) == [str(i) for i in range(n)]   # an ordinary subscription gets them all
    wait_for(lambda: sum(len(m.lines) for m in members) >= n, 10, what=f"{n} shared deliveries")
    got = [[int(p) for p in m.lines] for m in members]
    assert sorted(got[0] + got[1]) == list(range(n))   # each exactly once in the group
    assert all(g == sorted(g) for g in got)            # in order within each member
    assert min(len(g) for g in got) >= n // 4, got     # balanced between the members
    members[0].stop()   # leaves the group: the rest go to the other member
    wait_for(lambda: session(gateway, "member-1") is None, 10, what="member-1's session ended")
    publish(range(n, n + 10))
    assert [int(p) for p in members[1].wait_lines(len(got[1]) + 10)] == got[1] + list(range(n, n + 10))
    assert everyone.wait_lines(n + 10)[n:] == [str(i) for i in range(n, n + 10)]
    assert len(members[1].lines) == len(got[1]) + 10


# -- wills and sessions ------------------------------------------------------------------------------------

DELAY = 4   # Will Delay Interval (s): a reconnection within it must be done well before


def will_args(name: str, delay: int, *more: str) -> tuple[str, ...]:
    return ("--will-topic", f"m5/will/{name}", "--will-payload", f"{name} died", "--will-qos", "1",
            "-D", "will", "will-delay-interval", str(delay), *more)


def test_will_delay_interval_sends_late_and_a_reconnection_cancels(gateway, subs):
    watcher = subs(gateway.port, "m5/will/#", qos=1, client_id="will-watch", fmt="%t|%p|%C|%P")
    watcher.wait_subscribed(gateway)
    # "back" is killed, then reconnects to its session within the delay: its will is not sent
    back = subs(gateway.port, "m5/none", client_id="w-back", clean=False,
                extra=("-x", "300", *will_args("back", DELAY))).wait_subscribed(gateway)
    killed_back = time.monotonic()
    back.kill()
    wait_connected(gateway, "w-back", up=False)
    subs(gateway.port, "m5/none", client_id="w-back", clean=False, extra=("-x", "300"))
    wait_connected(gateway, "w-back")
    assert time.monotonic() - killed_back < DELAY - 1, "the reconnection came too late for this test to mean much"
    # "late" is killed after it, with the same delay: its will (with its properties) comes after the delay
    late = subs(gateway.port, "m5/none", client_id="w-late", clean=False,
                extra=("-x", "300", *will_args("late", DELAY, "-D", "will", "content-type", "text/plain",
                                               "-D", "will", "user-property", "why", "test"))).wait_subscribed(gateway)
    killed_late = time.monotonic()
    late.kill()
    assert watcher.wait_lines(1, timeout=DELAY + 10) == ["m5/will/late|late died|text/plain|why:test"]
    assert time.monotonic() - killed_late >= DELAY - 0.1   # not before the delay
    # back's will, due before late's, would have been sent by now: a marker comes next
    pub_ok(gateway.port, "m5/will/marker", "m")
    assert watcher.wait_lines(2)[1:] == ["m5/will/marker|m||"]


def test_will_delay_interval_ends_with_the_session(gateway, subs):
    watcher = subs(gateway.port, "m5/will/#", qos=1, client_id="will-watch2", fmt="%t|%p")
    watcher.wait_subscribed(gateway)
    # a delay of 60 s, but the session ends when the connection does (expiry 0) or 2 s after it: the will is
    # sent at the end of the session (MQTT 5.0 §3.1.3.2.2)
    at_once = subs(gateway.port, "m5/none", client_id="w-once",
                   extra=will_args("once", 60)).wait_subscribed(gateway)
    short = subs(gateway.port, "m5/none", client_id="w-short", clean=False,
                 extra=("-x", "2", *will_args("short", 60))).wait_subscribed(gateway)
    killed = time.monotonic()
    at_once.kill()
    short.kill()
    assert watcher.wait_lines(2, timeout=15) == ["m5/will/once|once died", "m5/will/short|short died"]
    assert time.monotonic() - killed >= 2 - 0.1
    assert session(gateway, "w-short") is None


@pytest.mark.parametrize("expiry", [0, 60])
def test_session_expiry_interval_decides_what_a_returning_client_gets(gateway, subs, expiry):
    cid = f"se-{expiry}"
    first = subs(gateway.port, "m5/se/#", qos=1, client_id=cid, clean=False, extra=("-x", str(expiry)))
    first.wait_subscribed(gateway).stop()   # DISCONNECT (normal)
    wait_connected(gateway, cid, up=False)
    if expiry:
        kept = session(gateway, cid)
        assert kept is not None and (kept["expiry_seconds"], list(kept["subscriptions"])) == (60, ["m5/se/#"])
    else:
        assert session(gateway, cid) is None
    for q in (0, 1, 2):
        pub_ok(gateway.port, f"m5/se/{q}", f"q{q}", qos=q, props=[("user-property", "q", str(q))])
    back = subs(gateway.port, "m5/mark/se", qos=1, client_id=cid, clean=False, extra=("-x", str(expiry)),
                fmt="%t|%p|%q|%P")
    wait_in_session(gateway, back)
    pub_ok(gateway.port, "m5/mark/se", "marker")
    queued = ["m5/se/1|q1|1|q:1", "m5/se/2|q2|1|q:2"] if expiry else []   # QoS 1 and 2, not 0; at most QoS 1
    assert back.wait_lines(len(queued) + 1) == [*queued, "m5/mark/se|marker|1|"]


def test_a_session_ends_after_its_expiry_interval(gateway, subs):
    cid = "se-short"
    s = subs(gateway.port, "m5/se/#", qos=1, client_id=cid, clean=False, extra=("-x", "2"))
    s.wait_subscribed(gateway)
    before = time.monotonic()
    s.stop()
    wait_for(lambda: session(gateway, cid) is None, 15, interval=0.05, what=f"session {cid} to expire")
    assert time.monotonic() - before >= 2 - 0.1
    pub_ok(gateway.port, "m5/se/1", "after")
    back = subs(gateway.port, "m5/mark/se2", qos=1, client_id=cid, clean=False, extra=("-x", "2"), fmt="%t|%p")
    wait_in_session(gateway, back)
    pub_ok(gateway.port, "m5/mark/se2", "marker")
    assert back.wait_lines(1) == ["m5/mark/se2|marker"]


# -- limits and refusals -----------------------------------------------------------------------------------


def test_maximum_packet_size_of_a_subscriber(gateway, subs):
    """A message too large for a subscriber's Maximum Packet Size is not sent to it (MQTT 5.0 §3.1.2.11.4)."""
    small = subs(gateway.port, "m5/mps", qos=1, client_id="mps-small", fmt="%t|%l",
                 extra=("-D", "connect", "maximum-packet-size", "200")).wait_subscribed(gateway)
    big = subs(gateway.port, "m5/mps", qos=1, client_id="mps-big", fmt="%t|%l").wait_subscribed(gateway)
    pub_ok(gateway.port, "m5/mps", "x" * 150)   # 150 + topic + header: under 200
    pub_ok(gateway.port, "m5/mps", "y" * 400)
    pub_ok(gateway.port, "m5/mps", "z" * 10)
    assert big.wait_lines(3) == ["m5/mps|150", "m5/mps|400", "m5/mps|10"]
    assert small.wait_lines(2) == ["m5/mps|150", "m5/mps|10"]
    assert connected(gateway, "mps-small")


def test_maximum_packet_size_of_the_broker(gateway_factory, subs):
    """The CONNACK's Maximum Packet Size: mosquitto_pub -V 5 (``-d`` shows its packets) does not send a larger
    PUBLISH (and exits 0 saying nothing: libmosquitto's refusal is not reported); a 3.1.1 client, told
    nothing, sends it and loses its connection. Nothing too large is routed."""
    gw = gateway_factory({"broker": {"limits": {"max_message_size": 1024}}})
    s = subs(gw.port, "m5/big", qos=1, client_id="big-sub", fmt="%t|%l").wait_subscribed(gw)
    r5 = pub5(gw.port, "m5/big", "x" * 2000, extra=("-d",))
    assert "received CONNACK (0)" in r5.stdout and "sending PUBLISH" not in r5.stdout, r5.stdout + r5.stderr
    r311 = mosquitto_pub(gw.port, "m5/big", "x" * 2000, version="mqttv311", qos=1, extra=("-d",))
    assert "sending PUBLISH" in r311.stdout and r311.returncode != 0, r311.stdout + r311.stderr
    assert "connection was lost" in r311.stderr
    pub_ok(gw.port, "m5/big", "y" * 1000)
    assert s.wait_lines(1) == ["m5/big|1000"]
    status = gw.admin("/status")[1]
    assert (status["messages"]["received"], status["protocol_errors"]) == (1, 1)


def test_acl_refusals_are_reason_codes_mosquitto_prints(gateway_factory, tmp_path: Path, subs):
    acl = tmp_path / "acl"
    acl.write_text("topic readwrite open/#\ntopic read closed/#\n", encoding="utf-8")
    gw = gateway_factory({"broker": {"acl_file": str(acl)}})
    watcher = subs(gw.port, ["open/#", "closed/#"], qos=1, client_id="acl-watch", fmt="%t|%p")
    watcher.wait_subscribed(gw)
    # PUBACK 0x87 Not authorized: mosquitto_pub at 5 prints it; at 3.1.1 the PUBACK has no reason code
    r5 = pub5(gw.port, "closed/x", "refused")
    assert r5.stderr.splitlines() == ["Warning: Publish 1 failed: Not authorized.",
                                      "not authorized to publish to 'closed/x'"]   # and the Reason String
    r311 = mosquitto_pub(gw.port, "closed/x", "refused too", version="mqttv311", qos=1)
    assert r311.returncode == 0 and r311.stderr == ""
    pub_ok(gw.port, "open/x", "allowed")
    assert watcher.wait_lines(1) == ["open/x|allowed"]
    # SUBACK 0x87 for a filter it may not read
    r = subprocess.run(["mosquitto_sub", "-h", "127.0.0.1", "-p", str(gw.port), "-V", V5, "-t", "secret/#",
                        "-W", "10"], capture_output=True, text=True, timeout=30)
    assert "All subscription requests were denied." in r.stderr
    assert gw.admin("/status")[1]["acl_denied"] == {"publish": 2, "subscribe": 1}


# -- request / response ------------------------------------------------------------------------------------


def test_request_response_between_mosquitto_rr_and_a_responder(gateway, subs):
    """mosquitto_rr sends a request with a Response Topic and Correlation Data and waits on that topic; the
    responder (a mosquitto_sub printing both, then a mosquitto_pub) answers with the correlation data."""
    responder = subs(gateway.port, "m5/rr/req", qos=1, client_id="rr-responder", fmt="%p|%R|%D")
    responder.wait_subscribed(gateway)
    rr = subprocess.Popen(["mosquitto_rr", "-h", "127.0.0.1", "-p", str(gateway.port), "-V", V5, "-q", "1",
                           "-i", "rr-requester", "-t", "m5/rr/req", "-e", "m5/rr/resp/1", "-m", "ping",
                           "-D", "publish", "correlation-data", "c-1", "-W", "20", "-F", "%t|%p|%D"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        (request,) = responder.wait_lines(1)
        payload, reply_to, corr = request.split("|")
        assert (payload, reply_to, corr) == ("ping", "m5/rr/resp/1", "c-1")
        pub_ok(gateway.port, reply_to, "pong", props=[("correlation-data", corr)])
        out, err = rr.communicate(timeout=20)
    finally:
        if rr.poll() is None:
            rr.kill()
            rr.wait(5)
    assert rr.returncode == 0, err
    assert out.splitlines() == ["m5/rr/resp/1|pong|c-1"]
