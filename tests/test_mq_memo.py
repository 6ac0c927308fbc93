"""A route's MQ -> MQTT conversion remembered by header (bridge/routing/mq_memo.py) gives exactly what the full
conversion gives, message after message: the publication, its topic and size, and the findings; a message
whose headers were seen is not decoded again, and other header chains always take the full path."""
from __future__ import annotations

import dataclasses

import pytest

from bridge.connectors.base import Inbound
from bridge.routing.convert import RouteConverter, mq_to_publication
from bridge.routing.mq_memo import MqToMqttMemo, header_end
from mappings.mq import constants as C
from mappings.mq.headers import Mqdlh
from mappings.mq.message import build_message, encode_message
from mappings.mq.mqmd import Mqmd
from mappings.mq.rfh2 import Rfh2, RfhElement, RfhFolder
from mappings.rules.model import parse_rules

RULES = """
routes:
  - {name: plain, from: {connector: embedded, queue: Q}, to: {mqtt: "{topic}"}}
  - {name: templ, from: {connector: embedded, queue: Q}, to: {mqtt: "x/{dest}/{client}/{topic}"},
     options: {persistence: not_persistent}}
"""


def _routes() -> dict[str, object]:
    return {r.name: r for r in parse_rules(RULES).routes}


def _msg(*, topic: str = "a/b", body: bytes = b"hello", md: dict[str, object] | None = None,
         folders: tuple[RfhFolder, ...] = (), fmt: str = C.MQFMT_NONE,
         msg_id: bytes = b"AMQ Q" + bytes(17) + b"\x12\x34", ccsid: int = C.CCSID_UTF8) -> bytes:
    mqps = RfhFolder("mqps", (RfhElement("Top", topic),)) if topic else None
    rfh = Rfh2(folders=tuple(f for f in (mqps, *folders) if f is not None))
    fields: dict[str, object] = {"persistence": C.MQPER_PERSISTENT, **(md or {})}
    mqmd = Mqmd(msg_id=msg_id, put_date="20261126", put_time="08000000", **fields)  # type: ignore[arg-type]
    return encode_message(build_message(mqmd, (rfh,), body, body_format=fmt, body_ccsid=ccsid))


def _item(raw: bytes, dest: str = "Q") -> Inbound:
    return Inbound(key="k", protocol="mq", message=raw, source_type="MQHRF2", size=len(raw), destination=dest,
                   received=0.0)


def _same(memo: MqToMqttMemo, route: object, raw: bytes, dest: str = "Q") -> None:
    got = memo.convert(_item(raw, dest))
    want = mq_to_publication(route, _item(raw, dest))  # type: ignore[arg-type]
    assert got[0].message == want[0].message
    assert (got[0].destination, got[0].size, got[1]) == (want[0].destination, want[0].size, want[1])
    assert got[2].findings == want[2].findings


USR = RfhFolder("usr", (RfhElement("color", "red"), RfhElement("n", "7", "i4")))
VARIANTS = [
    {},
    {"body": "grüße".encode()},
    {"body": "grüße".encode(), "fmt": C.MQFMT_STRING},
    {"body": b"\xff\xfe not utf-8", "fmt": C.MQFMT_STRING},
    {"folders": (USR,)},
    {"folders": (RfhFolder("mqtt", (RfhElement("clientId", "dev-1"), RfhElement("qos", "1"))),)},
    {"md": {"correl_id": b"corr-1".ljust(24, b"\x00"), "reply_to_q": "REPLY.Q", "expiry": 600}},
    {"md": {"backout_count": 2, "priority": 7, "persistence": C.MQPER_NOT_PERSISTENT}},
    {"md": {"encoding": 273}},   # big-endian integers
    {"msg_id": b"AMQ Q" + bytes(19)},   # MsgId ending in 0000: no packet id of its own (Table 5)
    {"topic": ""},                      # no mqps/Top: the route's template with {topic} empty
]


@pytest.mark.parametrize("name", ["plain", "templ"])
@pytest.mark.parametrize("variant", range(len(VARIANTS)))
def test_remembered_conversion_is_the_full_one(name: str, variant: int) -> None:
    route = _routes()[name]
    memo = MqToMqttMemo(route, mq_to_publication)  # type: ignore[arg-type]
    kw = VARIANTS[variant]
    raw = _msg(**kw)  # type: ignore[arg-type]
    _same(memo, route, raw)
    # the next message from the same producer: another MsgId, PutTime and body, the same headers
    body = kw.get("body", b"hello") + b" again"  # type: ignore[operator]
    other = _msg(**{**kw, "body": body, "msg_id": b"AMQ Q" + bytes(17) + b"\x56\x78"})  # type: ignore[arg-type]
    other = other[:312] + b"09151299" + other[320:]
    before = memo.hits
    _same(memo, route, other)
    _same(memo, route, other, dest="Q2")   # another source queue: {dest} may differ, so not the same entry
    if header_end(raw) is not None and "msg_id" not in kw:
        assert memo.hits == before + 1


def test_a_message_of_another_producer_is_converted_in_full() -> None:
    route = _routes()["plain"]
    memo = MqToMqttMemo(route, mq_to_publication)  # type: ignore[arg-type]
    _same(memo, route, _msg(topic="t/1"))
    _same(memo, route, _msg(topic="t/2"))   # the topic is in the RFH2: another entry
    assert memo.hits == 0 and len(memo.entries) == 2


def test_other_header_chains_take_the_full_path() -> None:
    route = _routes()["plain"]
    memo = MqToMqttMemo(route, mq_to_publication)  # type: ignore[arg-type]
    rfh = Rfh2(folders=(RfhFolder("mqps", (RfhElement("Top", "dl/1"),)),))
    raw = encode_message(build_message(Mqmd(persistence=C.MQPER_PERSISTENT), (Mqdlh(), rfh), b"x"))
    assert header_end(raw) is None
    for _ in range(2):
        _same(memo, route, raw)
    assert memo.hits == 0 and not memo.entries


def test_the_route_converter_remembers() -> None:
    route = _routes()["plain"]
    conv = RouteConverter(route, "mq", "mqtt")  # type: ignore[arg-type]
    raw = _msg()
    first = conv.convert(_item(raw))
    first[2].findings.append(first[2].findings[0] if first[2].findings else None)  # type: ignore[arg-type]
    second = conv.convert(_item(raw))   # the router's additions to one report do not reach the next
    assert second[0].message == dataclasses.replace(first[0].message)
    assert second[2].findings == mq_to_publication(route, _item(raw))[2].findings  # type: ignore[arg-type]


def test_an_mqstr_body_that_is_not_utf8_after_one_that_is() -> None:
    route = _routes()["plain"]
    memo = MqToMqttMemo(route, mq_to_publication)  # type: ignore[arg-type]
    _same(memo, route, _msg(body=b"text", fmt=C.MQFMT_STRING))           # payload format indicator 1
    _same(memo, route, _msg(body=b"\xff\xfe", fmt=C.MQFMT_STRING))       # the same headers, not UTF-8: none
    _same(memo, route, _msg(body="grüße".encode(), fmt=C.MQFMT_STRING))
    assert memo.hits == 1


def test_a_jms_message_is_converted_in_full_each_time() -> None:
    """A jms folder makes MsgId and PutDate/PutTime the JMSMessageID and JMSTimestamp user properties, which the
    key leaves out: each message gets its own, never the remembered one's."""
    route = _routes()["plain"]
    memo = MqToMqttMemo(route, mq_to_publication)  # type: ignore[arg-type]
    jms = RfhFolder("jms", (RfhElement("Cid", "c-1"),))
    for i in range(3):
        raw = _msg(folders=(jms, USR), msg_id=b"AMQ Q" + bytes(17) + bytes((0x10, i)))
        _same(memo, route, raw)
        users = dict(memo.convert(_item(raw))[0].message.user_properties)
        assert users["JMSMessageID"].endswith(f"10{i:02x}")
    assert memo.hits == 0
