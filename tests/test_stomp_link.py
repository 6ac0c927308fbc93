# Tests bridge/connectors/stomp_link.py on a real ActiveMQ: receipts, acks, redelivery, reconnect, heartbeats.
from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge.connectors.stomp_link import (
    InboundFrame,
    LinkDown,
    LinkState,
    SendRejected,
    StompLink,
    StompLinkConfig,
)
from tests.support.activemq import ActiveMQ, BrokerEndpoints, free_ports
from tests.support.jmstool import JmsTool, JmsToolError


class Inbox:
    """Collects frames from a subscription; ``wait(n)`` blocks (bounded) until n arrived."""

    def __init__(self) -> None:
        self.frames: list[InboundFrame] = []
        self.cond = threading.Condition()

    def __call__(self, frame: InboundFrame) -> None:
        with self.cond:
            self.frames.append(frame)
            self.cond.notify_all()

    def wait(self, n: int, timeout: float = 15.0) -> list[InboundFrame]:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.frames) >= n, timeout), (
                f"got {len(self.frames)} of {n} frames: {[f.body for f in self.frames]}"
            )
            return list(self.frames)


class States:
    def __init__(self) -> None:
        self.seen: list[tuple[LinkState, str]] = []

    def __call__(self, state: LinkState, reason: str) -> None:
        self.seen.append((state, reason))


def config(ep: BrokerEndpoints, **kw: float | int | str) -> StompLinkConfig:
    return StompLinkConfig(ep.host, ep.stomp_port, **kw)  # type: ignore[arg-type]


@pytest.fixture
def link(activemq: BrokerEndpoints) -> Iterator[StompLink]:
    lk = StompLink(config(activemq, heartbeat_send_ms=1000, heartbeat_receive_ms=1000))
    lk.start(timeout=30)
    try:
        yield lk
    finally:
        lk.close()


# ---------------------------------------------------------------- without a broker


def test_send_on_a_link_that_is_not_up_raises_link_down() -> None:
    lk = StompLink(StompLinkConfig("127.0.0.1", 1))
    with pytest.raises(LinkDown, match="is new"):
        lk.send("/queue/x", b"x")


def test_nul_in_a_body_without_content_length_is_refused() -> None:
    lk = StompLink(StompLinkConfig("127.0.0.1", 1))
    with pytest.raises(ValueError, match="NUL"):
        lk.send("/queue/x", b"a\x00b", content_length=False)


def test_start_reports_why_it_cannot_connect() -> None:
    (port,) = free_ports(1)  # nothing listens there
    states = States()
    lk = StompLink(StompLinkConfig("127.0.0.1", port, backoff_initial=0.05, backoff_max=0.2), on_state=states)
    try:
        with pytest.raises(LinkDown, match=f"127.0.0.1:{port} not up after 1.0 s: cannot connect"):
            lk.start(timeout=1.0)
        assert lk.state in (LinkState.DOWN, LinkState.CONNECTING)  # between two attempts, or in one
        assert sum(1 for s, _ in states.seen if s is LinkState.CONNECTING) >= 2  # it kept retrying
    finally:
        lk.close()
    assert lk.state is LinkState.CLOSED


# ---------------------------------------------------------------- against the session broker


@pytest.mark.activemq
def test_send_returns_after_receipt_text_or_bytes(link: StompLink, jmstool: JmsTool, unique_name: str) -> None:
    assert link.state is LinkState.UP and link.server_heartbeat == (1000, 1000)
    dest = f"sl.{unique_name}"
    link.send(
        f"/queue/{dest}",
        "héllo".encode(),
        {"persistent": "true", "correlation-id": "c1"},
        content_length=False,
    )
    link.send(f"/queue/{dest}", b"\x00\x01", {"persistent": "true"})
    text, data = jmstool.receive(f"queue://{dest}", 2)
    assert text["class"].endswith("ActiveMQTextMessage") and text["body"] == "héllo"
    assert text["headers"]["correlationId"] == "c1" and text["headers"]["deliveryMode"] == "PERSISTENT"
    assert data["class"].endswith("ActiveMQBytesMessage") and data["body"]["hex"] == "0001"
    assert text["properties"] == {} and data["properties"] == {}  # receipt/content-length do not leak


@pytest.mark.activemq
def test_error_frame_for_a_send_raises_send_rejected(link: StompLink, unique_name: str) -> None:
    with pytest.raises(SendRejected, match="Invalid transaction id: nope") as info:
        link.send(f"/queue/rej.{unique_name}", b"x", {"transaction": "nope"})
    assert info.value.headers["message"] == "Invalid transaction id: nope"
    assert link.state is LinkState.UP
    link.send(f"/queue/rej.{unique_name}", b"after")  # the link still works


@pytest.mark.activemq
def test_client_individual_ack_and_redelivery_of_unacked(
    activemq: BrokerEndpoints, jmstool: JmsTool, unique_name: str
) -> None:
    dest = f"ack.{unique_name}"
    jmstool.send(f"queue://{dest}", {"type": "Text", "body": "one"}, {"type": "Text", "body": "two"})
    first = StompLink(config(activemq))
    first.start()
    inbox = Inbox()
    try:
        first.subscribe(f"/queue/{dest}", inbox)
        one, two = inbox.wait(2)
        assert (one.body, two.body, one.redelivered) == (b"one", b"two", False)
        assert one.ack_id and one.subscription == two.subscription
        assert first.ack(one)
    finally:
        first.close()
    assert not first.ack(two)  # the link is closed: nothing sent, the message comes again

    second = StompLink(config(activemq))
    second.start()
    inbox2 = Inbox()
    try:
        second.subscribe(f"/queue/{dest}", inbox2)
        (again,) = inbox2.wait(1)
        assert again.body == b"two" and again.redelivered and again.message_id == two.message_id
        assert second.ack(again)
    finally:
        second.close()
    with pytest.raises(JmsToolError, match="received 0 of 1"):  # both acked: queue empty
        jmstool.receive(f"queue://{dest}", 1, timeout=0.5)


@pytest.mark.activemq
def test_nack_sends_the_message_to_the_dlq(link: StompLink, jmstool: JmsTool, unique_name: str) -> None:
    dest = f"nack.{unique_name}"
    (msg_id,) = jmstool.send(f"queue://{dest}", {"type": "Text", "body": "poison"})
    inbox = Inbox()
    link.subscribe(f"/queue/{dest}", inbox)
    (frame,) = inbox.wait(1)
    assert link.nack(frame)
    (dlq,) = jmstool.receive("queue://ActiveMQ.DLQ", 1, selector=f"JMSMessageID = '{msg_id}'")
    assert dlq["body"] == "poison"


@pytest.mark.activemq
def test_subscribe_headers_pass_through(link: StompLink, jmstool: JmsTool, unique_name: str) -> None:
    dest = f"sub.{unique_name}"
    inbox = Inbox()
    link.subscribe(f"/topic/x.{unique_name}", inbox, ack="auto")
    link.subscribe(f"/queue/{dest}", inbox, headers={"transformation": "jms-map-json", "selector": "k = 'yes'"})
    jmstool.send(
        f"queue://{dest}",
        {
            "type": "Map",
            "body": {"a": {"type": "int", "value": 1}},
            "properties": {"k": {"type": "String", "value": "no"}},
        },
        {
            "type": "Map",
            "body": {"a": {"type": "int", "value": 2}},
            "properties": {"k": {"type": "String", "value": "yes"}},
        },
    )
    jmstool.send(f"topic://x.{unique_name}", {"type": "Text", "body": "on topic"})
    frames = inbox.wait(2)
    by_dest = {f.destination: f for f in frames}
    assert by_dest[f"/queue/{dest}"].body == b'{"map":{"entry":{"string":"a","int":2}}}'
    assert by_dest[f"/queue/{dest}"].headers["transformation"] == "jms-map-json"
    assert by_dest[f"/topic/x.{unique_name}"].body == b"on topic"
    assert by_dest[f"/topic/x.{unique_name}"].ack_id is None  # ack: auto


# ---------------------------------------------------------------- with a broker of its own


@pytest.mark.activemq
def test_reconnects_after_broker_crash_and_resubscribes(
    own_activemq: ActiveMQ, jmstool_classes: Path, unique_name: str
) -> None:
    ep = own_activemq.endpoints
    assert ep is not None
    jt = JmsTool(jmstool_classes, ep.openwire_url)
    states = States()
    lk = StompLink(
        config(ep, backoff_initial=0.05, backoff_max=0.5, connect_timeout=5, heartbeat_receive_ms=2000),
        on_state=states,
    )
    inbox = Inbox()
    dest = f"rc.{unique_name}"
    try:
        lk.start()
        sid = lk.subscribe(f"/queue/{dest}", inbox)
        jt.send(f"queue://{dest}", {"type": "Text", "body": "before"})
        (before,) = inbox.wait(1)
        assert lk.ack(before)
        jt.send(f"queue://{dest}", {"type": "Text", "body": "in flight"})  # persistent, never acked
        inbox.wait(2)

        own_activemq.kill()
        assert lk.wait_until_down(10), "link did not notice the broker died"
        with pytest.raises(LinkDown):
            lk.send(f"/queue/{dest}", b"while down")
        late_inbox = Inbox()
        lk.subscribe(f"/queue/{dest}.late", late_inbox)  # recorded now, made on reconnect
        own_activemq.restart()
        assert lk.wait_until_up(30), f"no reconnect: {lk.last_error}"
        assert lk.connects == 2

        jt.send(f"queue://{dest}", {"type": "Text", "body": "after"})
        frames = inbox.wait(4)
        late = frames[2:]
        assert sorted(f.body for f in late) == [b"after", b"in flight"]  # unacked one delivered again
        assert all(f.subscription == sid and f.generation == lk.generation for f in late)
        for f in late:
            assert lk.ack(f)
        jt.send(f"queue://{dest}.late", {"type": "Text", "body": "late"})
        assert [f.body for f in late_inbox.wait(1)] == [b"late"]
        lk.send(f"/queue/{dest}.out", b"sent after reconnect")
        (out,) = jt.receive(f"queue://{dest}.out", 1)
        assert out["body"]["hex"] == b"sent after reconnect".hex()
    finally:
        lk.close()
        jt.close()
    kinds = [s for s, _ in states.seen]
    assert kinds[:2] == [LinkState.CONNECTING, LinkState.UP]
    assert LinkState.DOWN in kinds[2:] and kinds[-1] is LinkState.CLOSED
    assert kinds[kinds.index(LinkState.DOWN) :].count(LinkState.UP) == 1


def _stopped(pid: int, timeout: float = 10.0) -> bool:
    """Every thread of ``pid`` is stopped (state T): a SIGSTOP takes effect a little after kill() returns,
    and a thread still running meanwhile can answer (seen once on a loaded CI machine)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = []
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
            except (OSError, IndexError):
                continue   # a thread that just ended
        if states and all(state in ("T", "t") for state in states):
            return True
        time.sleep(0.01)
    return False


@pytest.mark.activemq
def test_heartbeat_timeout_detects_a_frozen_broker(own_activemq: ActiveMQ) -> None:
    ep = own_activemq.endpoints
    assert ep is not None and own_activemq.proc is not None
    lk = StompLink(config(ep, heartbeat_send_ms=300, heartbeat_receive_ms=300, connect_timeout=2, backoff_initial=0.05))
    pid = own_activemq.proc.pid
    try:
        lk.start()
        assert lk.server_heartbeat == (300, 300)
        os.kill(pid, signal.SIGSTOP)  # the broker stops answering but its sockets stay open
        try:
            assert _stopped(pid), "the broker's threads did not stop"
            t0 = time.monotonic()
            with pytest.raises(LinkDown):  # no receipt can come; the drop ends the wait, not the timeout
                lk.send("/queue/frozen", b"x", timeout=30)
            assert time.monotonic() - t0 < 10
            assert lk.wait_until_down(10), "heartbeat timeout not detected"
            assert "heartbeat" in (lk.last_error or "")
        finally:
            os.kill(pid, signal.SIGCONT)
        assert lk.wait_until_up(30), f"no reconnect after the broker resumed: {lk.last_error}"
    finally:
        lk.close()


def test_heart_beats_go_at_half_the_promised_interval() -> None:
    """ActiveMQ drops a connection that sent nothing for one promised interval, with no grace (seen: "Channel
    was inactive for too (>1000) long" on a loaded machine), so the link beats at half its promise. A plain
    STOMP server here records when the beats arrive."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    beats: list[float] = []
    done = threading.Event()

    def serve() -> None:
        conn, _ = server.accept()
        conn.settimeout(0.2)
        buf = b""
        while b"\x00" not in buf:
            buf += conn.recv(4096)
        conn.sendall(b"CONNECTED\nversion:1.2\nheart-beat:0,1000\n\n\x00")
        while not done.is_set():
            try:
                data = conn.recv(4096)
            except TimeoutError:
                continue
            if not data:
                break
            beats.extend(time.monotonic() for b in data if b == 0x0A)
        conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    lk = StompLink(StompLinkConfig(host="127.0.0.1", port=server.getsockname()[1], heartbeat_send_ms=1000,
                                   heartbeat_receive_ms=0))
    try:
        lk.start(timeout=10)
        deadline = time.monotonic() + 10
        while len(beats) < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        done.set()
        lk.close()
        server.close()
    gaps = [b - a for a, b in zip(beats, beats[1:], strict=False)]
    assert len(beats) >= 6 and max(gaps) < 0.8, gaps
