"""MQ-format messages on the embedded queue store -> a route -> a paho MQTT 5 subscriber, through a running gateway.

What the MQ -> MQTT 5 table of docs/mqtt5-mq.md says reaches the subscriber: `usr` elements as user properties
in element order, `jms/Rto` (else MQMD ReplyToQ/ReplyToQMgr) as the Response Topic, `jms/Cid` (else CorrelId
without its NUL padding) as the Correlation Data, MQMD Expiry as what remains of it in whole seconds, `mcd/Type`
(or an `mcd://` URI of a non-JMS `Msd`) as the Content Type, an MQSTR body in CCSID 1208 as Payload Format
Indicator 1. One gateway for the module: each test has its own queue and topic.
"""
from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from bridge.connectors.embedded import QueueStore, default_path
from mappings.mq import constants as C
from mappings.mq.message import build_message, encode_message
from mappings.mq.mqmd import Mqmd
from mappings.mq.rfh2 import Rfh2, RfhElement, RfhFolder
from tests.support.gateway import GatewayProcess, wait_for
from tests.support.mqtt5_client import V5

ROUTES = ("full", "md", "wait")
RULES = "routes:\n" + "".join(
    f"  - name: {r}\n    from: {{queue: FROM.{r.upper()}}}\n    to: {{mqtt: \"from-mq/{r}\"}}\n" for r in ROUTES)


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    workdir = tmp_path_factory.mktemp("gw-from-mq")
    (workdir / "rules.yaml").write_text(RULES)
    gateway = GatewayProcess(workdir, {"rules": str(workdir / "rules.yaml")}).start()
    yield gateway
    gateway.stop()


@pytest.fixture
def store(gw: GatewayProcess) -> Iterator[QueueStore]:
    s = QueueStore(default_path(gw.data_dir)).open()
    yield s
    s.close()


def _message(md: Mqmd, folders: tuple[RfhFolder, ...], body: bytes, body_format: str = C.MQFMT_STRING,
             body_ccsid: int = C.CCSID_UTF8) -> bytes:
    headers = (Rfh2(folders=folders),) if folders else ()
    return encode_message(build_message(md, headers, body, body_format=body_format, body_ccsid=body_ccsid))


def _subscriber(gw: GatewayProcess, route: str) -> V5:
    sub = V5(gw.port, f"sub-{route}").connect()
    assert sub.subscribe(f"from-mq/{route}", 1) == [1]
    return sub


def _props(msg: Any) -> dict[str, Any]:
    """The MQTT 5 properties paho decoded, by name (absent ones are absent)."""
    return {k: v for k, v in vars(msg.properties).items() if k in (
        "ContentType", "ResponseTopic", "CorrelationData", "MessageExpiryInterval", "PayloadFormatIndicator",
        "UserProperty")}


def test_rfh2_folders_and_mqmd_fields_become_mqtt5_properties(gw: GatewayProcess, store: QueueStore) -> None:
    sub = _subscriber(gw, "full")
    # jms/Rto and jms/Cid win over ReplyToQ and CorrelId (they differ here on purpose); typed usr elements
    md = Mqmd(coded_char_set_id=C.CCSID_UTF8, correl_id=b"ignored-correl".ljust(24, b"\x00"), expiry=6000,
              reply_to_q="OTHER.Q", msg_type=C.MQMT_REQUEST)
    folders = (RfhFolder("mcd", (RfhElement("Msd", "jms_text"), RfhElement("Type", "application/json"))),
               RfhFolder("jms", (RfhElement("Rto", "topic://svc/answers"), RfhElement("Cid", "order-77"))),
               RfhFolder("usr", (RfhElement("zeta", "last-name-first"), RfhElement("alpha", "2"),
                                 RfhElement("count", "3", dt="i4"), RfhElement("ok", "1", dt="boolean"))))
    before = time.time()
    store.put("FROM.FULL", _message(md, folders, '{"price": "9 €"}'.encode()))
    (got,) = sub.wait(1, timeout=20)
    sub.close()
    assert got.payload == '{"price": "9 €"}'.encode()
    props = _props(got)
    # a JMS message (jms folder): its JMSMessageID (the MsgId the store gave it) and JMSTimestamp (the put
    # time) go first, as on a JMS -> MQTT 5 route
    (mid_name, mid), (ts_name, ts), *users = props.pop("UserProperty")
    assert (mid_name, ts_name) == ("JMSMessageID", "JMSTimestamp")
    assert re.fullmatch(r"ID:[0-9a-f]{48}", mid)
    put = datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()
    assert before - 1 <= put <= time.time() + 1
    props["UserProperty"] = users
    expiry = props.pop("MessageExpiryInterval")
    assert 595 <= expiry <= 600                              # 6000 tenths, rounded up to seconds, as remains
    assert props == {
        "ContentType": "application/json",                   # mcd/Type with a JMS Msd
        "ResponseTopic": "svc/answers",                      # jms/Rto, a topic by its name
        "CorrelationData": b"order-77",                      # jms/Cid's UTF-8 bytes, not the CorrelId
        "PayloadFormatIndicator": 1,                         # MQSTR in CCSID 1208
        "UserProperty": [("zeta", "last-name-first"), ("alpha", "2"), ("count", "3"), ("ok", "true")],
    }


def test_mqmd_reply_to_q_and_correl_id_without_jms_folder(gw: GatewayProcess, store: QueueStore) -> None:
    """No jms folder: ReplyToQ/ReplyToQMgr give a queue URI, the binary CorrelId its bytes without padding; a
    non-JMS Msd gives an mcd:// Content Type; a body in another CCSID gives no Payload Format Indicator."""
    sub = _subscriber(gw, "md")
    correl = bytes(range(1, 11))
    md = Mqmd(coded_char_set_id=819, correl_id=correl.ljust(24, b"\x00"), reply_to_q="REPLY.Q",
              reply_to_q_mgr="QM2", msg_type=C.MQMT_REQUEST)
    folders = (RfhFolder("mcd", (RfhElement("Msd", "xml"), RfhElement("Set", "S1"), RfhElement("Type", "Order"))),)
    store.put("FROM.MD", _message(md, folders, b"<order/>", body_ccsid=819))
    (got,) = sub.wait(1, timeout=20)
    sub.close()
    assert got.payload == b"<order/>"
    assert _props(got) == {
        "ContentType": "mcd://xml/S1/Order",
        "ResponseTopic": "queue://QM2/REPLY.Q",
        "CorrelationData": correl,
    }


def test_expiry_counts_down_while_the_message_waits_and_an_expired_one_is_not_sent(
        gw: GatewayProcess, store: QueueStore) -> None:
    """MQMD Expiry is what remains when the message is got: one that waited 3 s of its 10 s arrives with at
    most 7 s (without the count-down it would say 10); one that had 2 s is discarded, not published."""
    sub = _subscriber(gw, "wait")
    store.put("HOLD.WAIT", _message(Mqmd(coded_char_set_id=C.CCSID_UTF8, expiry=20), (), b"expired"))
    store.put("HOLD.WAIT", _message(Mqmd(coded_char_set_id=C.CCSID_UTF8, expiry=100), (), b"waited"))
    held = [m.seq for m in store.browse("HOLD.WAIT")]
    assert len(held) == 2
    time.sleep(3.0)                                          # the wait being measured; no route reads HOLD.WAIT
    for seq in held:
        store.move(seq, "FROM.WAIT")                         # in order; the store keeps their put time
    (got,) = sub.wait(1, timeout=20)                         # the first on the queue would have come first
    sub.close()
    assert got.payload == b"waited"
    assert 1 <= _props(got)["MessageExpiryInterval"] <= 7
    # the expired one was discarded, and the route confirms (deletes) the one it published after the publish:
    # wait for that, bounded (CI once saw depth 1 right after the subscriber had it)
    wait_for(lambda: store.depth("FROM.WAIT") == 0, 20, what="FROM.WAIT empty: the expired message discarded")
