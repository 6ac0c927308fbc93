"""StompLink writes SEND frames itself (encode_send_head; one socket write per batch): header values holding
the characters STOMP 1.2 escapes (backslash, LF, CR, colon), non-ASCII text, and bodies with and without
content-length reach a JMS consumer of a real ActiveMQ exactly, in order, with and without a transaction;
except that ActiveMQ turns a character above U+FFFF in a header into U+FFFD U+FFFD (stomp.py's own SEND
gives the same), which jms_to_frame reports."""
from __future__ import annotations

import pytest

from bridge.connectors.stomp_link import StompLink, StompLinkConfig, encode_send_head
from mappings.jms.model import JmsHeaders, JmsMessage, TextBody, TypedMap, jstring
from mappings.report import Change, ConversionReport
from mappings.stomp.frames import jms_to_frame
from tests.support.activemq_fixtures import BrokerEndpoints
from tests.support.jmstool import JmsTool

activemq = pytest.mark.activemq

AWKWARD = ["a:b", "line\nbreak", "cr\rhere", "back\\slash", "\\n literally", "caf\u00e9 \u4e2d \U0001f600", ":", ""]


def test_head_escapes_names_and_values() -> None:
    head = encode_send_head("/queue/a:b", {"k:1": "x\\y\nz\r"})
    assert head == b"SEND\ndestination:/queue/a\\cb\nk\\c1:x\\\\y\\nz\\r\n"


def test_a_character_above_u_ffff_in_a_header_is_reported() -> None:
    report = ConversionReport()
    msg = JmsMessage(JmsHeaders(type="t\U0001f600"), TypedMap([("p", jstring("\U0001f600")), ("q", jstring("ok"))]),
                     TextBody("x"))
    frame = jms_to_frame(msg, "q", report)
    assert frame.headers["p"] == "\U0001f600"   # sent as it is: the broker's decoding is what changes it
    assert [(f.change, f.name) for f in report.findings] == [(Change.COERCED, "p"), (Change.COERCED, "JMSType")]


def test_an_unpaired_surrogate_in_a_header_is_dropped_not_sent() -> None:
    """A Java String may hold one; UTF-8 cannot: the header is dropped with a finding instead of the
    frame failing to encode (which would fail the route's batch again and again)."""
    report = ConversionReport()
    msg = JmsMessage(JmsHeaders(correlation_id="c\ud800"), TypedMap([("p", jstring("x\udc00y")), ("q", jstring("ok"))]),
                     TextBody("x"))
    frame = jms_to_frame(msg, "q", report)
    assert "p" not in frame.headers and "correlation-id" not in frame.headers and frame.headers["q"] == "ok"
    assert {(f.change, f.name) for f in report.findings} == {(Change.DROPPED, "p"),
                                                             (Change.DROPPED, "JMSCorrelationID")}
    assert b"q:ok\n" in frame.head


@activemq
@pytest.mark.parametrize("transactional", [True, False])
def test_awkward_header_values_and_bodies_arrive_exactly(activemq: BrokerEndpoints, jmstool: JmsTool,
                                                         unique_name: str, transactional: bool) -> None:
    q = f"enc.{unique_name}.{int(transactional)}"
    frames: list[tuple[str, bytes, dict[str, str], bool]] = [
        (f"/queue/{q}", f"text {n}".encode(), {"persistent": "true", "awk": value, "n": str(n)}, False)
        for n, value in enumerate(AWKWARD)]
    frames.append((f"/queue/{q}", b"\x00\x01bytes\x00", {"persistent": "true", "n": str(len(AWKWARD))}, True))
    frames.append((f"/queue/{q}", b"", {"persistent": "true", "n": str(len(AWKWARD) + 1)}, False))
    link = StompLink(StompLinkConfig(activemq.host, activemq.stomp_port))
    link.start(timeout=20)
    try:
        link.send_many(frames, transactional=transactional)
    finally:
        link.close()
    got = jmstool.receive(f"queue://{q}", len(frames))
    assert [int(m["properties"]["n"]["value"]) for m in got] == list(range(len(frames)))
    assert [m["properties"]["awk"]["value"] for m in got[:len(AWKWARD)]] == [
        v.replace("\U0001f600", "\ufffd\ufffd") for v in AWKWARD]
    assert [m["body"] for m in got[:len(AWKWARD)]] == [f"text {n}" for n in range(len(AWKWARD))]
    assert got[-2]["class"].endswith("ActiveMQBytesMessage") and got[-2]["body"]["hex"] == "0001627974657300"
    assert got[-1]["class"].endswith("ActiveMQTextMessage") and got[-1]["body"] == ""
