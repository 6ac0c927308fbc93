# Tests the real-ActiveMQ harness and pins what ActiveMQ 5.17 does with each JMS type over STOMP
# (the facts docs/stomp-facts.md records; the JMS connector is written from them).
from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import stomp
from stomp.utils import Frame

from tests.support.activemq import ActiveMQ, BrokerEndpoints, port_open
from tests.support.jmstool import JmsTool, JmsToolError, typed

pytestmark = pytest.mark.activemq

TEXT = "ActiveMQTextMessage"
BYTES = "ActiveMQBytesMessage"

# Properties of every JMS type a property may have (JMS 1.1 3.5.4), with values that show the type.
TYPED_PROPS = {
    "pBool": typed("boolean", True),
    "pByte": typed("byte", -3),
    "pShort": typed("short", 300),
    "pInt": typed("int", 70000),
    "pLong": typed("long", 2**40 + 1),
    "pFloat": typed("float", 1.5),
    "pDouble": typed("double", 2.25),
    "pString": typed("String", "s v"),
}
JAVA_TYPE = {
    "boolean": "java.lang.Boolean",
    "byte": "java.lang.Byte",
    "short": "java.lang.Short",
    "int": "java.lang.Integer",
    "long": "java.lang.Long",
    "float": "java.lang.Float",
    "double": "java.lang.Double",
    "char": "java.lang.Character",
    "String": "java.lang.String",
    "byte[]": "byte[]",
}
HEADERS = {
    "correlationId": "corr-1",
    "type": "jt-type",
    "replyTo": "queue://reply.q",
    "priority": 6,
    "deliveryMode": "PERSISTENT",
    "expiration": 600_000,
}


def as_received(tv: dict[str, Any]) -> dict[str, Any]:
    """What JmsTool prints for a TYPED value it was given."""
    if tv["type"] == "byte[]":
        raw = bytes.fromhex(tv["hex"])
        return {"type": "byte[]", "base64": base64.b64encode(raw).decode(), "hex": raw.hex()}
    return {"type": JAVA_TYPE[tv["type"]], "value": tv["value"]}


class StompCollector(stomp.ConnectionListener):
    """Collects MESSAGE frames; ``wait(n)`` blocks until n arrived (bounded)."""

    def __init__(self) -> None:
        self.frames: list[Frame] = []
        self.errors: list[Frame] = []
        self.receipts: set[str] = set()
        self.cond = threading.Condition()

    def on_receipt(self, frame: Frame) -> None:
        with self.cond:
            self.receipts.add(frame.headers["receipt-id"])
            self.cond.notify_all()

    def wait_receipt(self, receipt: str, timeout: float = 10.0) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: receipt in self.receipts, timeout), f"no RECEIPT {receipt}"

    def on_message(self, frame: Frame) -> None:
        with self.cond:
            self.frames.append(frame)
            self.cond.notify_all()

    def on_error(self, frame: Frame) -> None:
        with self.cond:
            self.errors.append(frame)
            self.cond.notify_all()

    def wait(self, n: int, timeout: float = 10.0) -> list[Frame]:
        with self.cond:
            ok = self.cond.wait_for(lambda: len(self.frames) >= n or self.errors, timeout)
            assert not self.errors, [(e.headers, e.body) for e in self.errors]
            assert ok, f"got {len(self.frames)} of {n} STOMP messages in {timeout} s"
            return list(self.frames)


@pytest.fixture
def stomp_conn(activemq: BrokerEndpoints) -> Iterator[tuple[stomp.Connection12, StompCollector]]:
    # auto_content_length=False: stomp.py otherwise adds content-length to every SEND, which makes
    # ActiveMQ create a BytesMessage even for text.
    conn = stomp.Connection12([(activemq.host, activemq.stomp_port)], auto_decode=False, auto_content_length=False)
    collector = StompCollector()
    conn.set_listener("collector", collector)
    conn.connect(wait=True)
    try:
        yield conn, collector
    finally:
        conn.disconnect()


def subscribe_and_wait(
    conn: stomp.Connection12, collector: StompCollector, dest: str, n: int, transformation: str | None = None
) -> list[Frame]:
    headers = {"transformation": transformation} if transformation else {}
    conn.subscribe(dest, id=dest, ack="auto", headers=headers)
    try:
        return collector.wait(n)
    finally:
        # with a receipt: ActiveMQ answers once the consumer is gone, so a message sent next cannot reach it
        # (and come back under the same subscription id with this subscription's transformation)
        receipt = f"unsubscribe-{dest}-{time.monotonic_ns()}"
        conn.unsubscribe(dest, headers={"receipt": receipt})
        collector.wait_receipt(receipt)


# ---------------------------------------------------------------- the harness itself


def test_broker_is_up_on_free_loopback_ports(activemq_broker: ActiveMQ, activemq: BrokerEndpoints) -> None:
    assert activemq.host == "127.0.0.1"
    ports = {activemq.openwire_port, activemq.stomp_port, activemq.mqtt_port}
    assert len(ports) == 3
    for port in ports:
        assert port_open(activemq.host, port)
    assert activemq_broker.startup_seconds is not None and activemq_broker.startup_seconds < 60
    assert "started" in activemq_broker.log_text()


def test_jmstool_receive_times_out_with_a_clear_error(jmstool: JmsTool, unique_name: str) -> None:
    t0 = time.monotonic()
    with pytest.raises(JmsToolError, match="received 0 of 1"):
        jmstool.receive(f"queue://empty.{unique_name}", 1, timeout=0.5)
    assert time.monotonic() - t0 < 30


# ---------------------------------------------------------------- JMS -> JMS (OpenWire both ways)


def test_every_jms_type_round_trips_with_exact_java_types(jmstool: JmsTool, unique_name: str) -> None:
    map_body = {
        "bool": typed("boolean", False),
        "byte": typed("byte", -128),
        "short": typed("short", -2),
        "int": typed("int", 2**31 - 1),
        "long": typed("long", 2**63 - 1),
        "float": typed("float", 0.5),
        "double": typed("double", 0.1),
        "char": typed("char", "z"),
        "str": typed("String", "héllo"),
        "bytes": typed("byte[]", b"\x00\xff\x10"),
    }
    stream_body = [typed("int", 1), typed("String", "x"), typed("byte[]", b"\x01"), typed("double", 1e300)]
    hashmap = {"k": typed("int", 1), "s": typed("String", "v"), "l": typed("long", 5)}
    sent = [
        {"type": "Text", "body": "héllo ✓", "properties": TYPED_PROPS, "headers": HEADERS},
        {"type": "Bytes", "body": {"hex": "00ff10"}, "properties": TYPED_PROPS},
        {"type": "Map", "body": map_body},
        {"type": "Stream", "body": stream_body},
        {"type": "Object", "body": {"class": "java.util.HashMap", "value": hashmap}},
        {"type": "Object", "body": {"class": "java.lang.String", "value": "an object"}},
        {"type": "Message", "properties": {"only": typed("int", 1)}},
    ]
    dest = f"queue://rt.{unique_name}"
    ids = jmstool.send(dest, *sent)
    assert len(ids) == len(sent) and all(i.startswith("ID:") for i in ids)
    got = {m["headers"]["messageId"]: m for m in jmstool.receive(dest, len(sent))}
    text, by, mp, st, om, os_, plain = (got[i] for i in ids)

    assert text["class"] == "org.apache.activemq.command.ActiveMQTextMessage"
    assert text["body"] == "héllo ✓"
    assert text["properties"] == {k: as_received(v) for k, v in TYPED_PROPS.items()}
    h = text["headers"]
    assert (h["correlationId"], h["type"], h["replyTo"], h["priority"], h["deliveryMode"]) == (
        "corr-1",
        "jt-type",
        "queue://reply.q",
        6,
        "PERSISTENT",
    )
    assert h["expiration"] == h["timestamp"] + 600_000  # JMSExpiration is absolute

    assert by["class"].endswith("ActiveMQBytesMessage")
    assert by["body"]["hex"] == "00ff10"
    assert by["properties"]["pFloat"] == {"type": "java.lang.Float", "value": 1.5}

    assert mp["class"].endswith("ActiveMQMapMessage")
    assert mp["body"] == {k: as_received(v) for k, v in map_body.items()}

    assert st["class"].endswith("ActiveMQStreamMessage")
    assert st["body"] == [as_received(v) for v in stream_body]

    assert om["class"].endswith("ActiveMQObjectMessage")
    assert om["body"] == {
        "class": "java.util.HashMap",
        "value": {k: as_received(v) for k, v in hashmap.items()},
    }
    assert os_["body"] == {"class": "java.lang.String", "value": "an object"}

    assert plain["class"] == "org.apache.activemq.command.ActiveMQMessage"
    assert plain["type"] == "Message" and plain["body"] is None
    assert plain["properties"] == {"only": {"type": "java.lang.Integer", "value": 1}}


def test_non_persistent_and_defaults(jmstool: JmsTool, unique_name: str) -> None:
    dest = f"queue://np.{unique_name}"
    jmstool.send(dest, {"type": "Text", "body": None, "headers": {"deliveryMode": "NON_PERSISTENT"}})
    (m,) = jmstool.receive(dest)
    assert m["body"] is None
    h = m["headers"]
    assert (h["deliveryMode"], h["priority"], h["expiration"], h["correlationId"], h["replyTo"]) == (
        "NON_PERSISTENT",
        4,
        0,
        None,
        None,
    )


def test_topic_receiver_is_subscribed_before_publish(jmstool: JmsTool, unique_name: str) -> None:
    dest = f"topic://t.{unique_name}"
    rec = jmstool.start_receiver(dest, 1, timeout=10)
    jmstool.send(dest, {"type": "Text", "body": "to topic"})
    (m,) = rec.result()
    assert m["body"] == "to topic" and m["headers"]["destination"] == dest


# ---------------------------------------------------------------- STOMP -> JMS


def test_stomp_send_content_length_decides_text_or_bytes(
    stomp_conn: tuple[stomp.Connection12, StompCollector], jmstool: JmsTool, unique_name: str
) -> None:
    conn, _ = stomp_conn
    dest = f"cl.{unique_name}"
    conn.send(f"/queue/{dest}", "no content-length", headers={"receipt": "r1"})
    conn.send(f"/queue/{dest}", "with", headers={"content-length": "4"})
    conn.send(f"/queue/{dest}", b"\x00\x01\xfe", headers={"content-length": "3"})
    conn.send(f"/queue/{dest}", "x", headers={"content-length": "1", "amq-msg-type": "text"})
    conn.send(f"/queue/{dest}", "y", headers={"amq-msg-type": "bytes"})
    a, b, c, d, e = jmstool.receive(f"queue://{dest}", 5)
    assert a["class"].endswith(TEXT) and a["body"] == "no content-length" and a["properties"] == {}
    assert b["class"].endswith(BYTES) and b["body"]["hex"] == b"with".hex() and b["properties"] == {}
    assert c["class"].endswith(BYTES) and c["body"]["hex"] == "0001fe"
    # amq-msg-type overrides the content-length rule, but it (and content-length) leak into properties
    assert d["class"].endswith(TEXT) and d["body"] == "x"
    assert d["properties"] == {
        "amq-msg-type": {"type": "java.lang.String", "value": "text"},
        "content-length": {"type": "java.lang.String", "value": "1"},
    }
    assert e["class"].endswith(BYTES) and e["body"]["hex"] == b"y".hex()
    assert e["properties"] == {"amq-msg-type": {"type": "java.lang.String", "value": "bytes"}}


def test_stomp_send_headers_become_jms_headers_and_string_properties(
    stomp_conn: tuple[stomp.Connection12, StompCollector], jmstool: JmsTool, unique_name: str
) -> None:
    conn, _ = stomp_conn
    dest = f"hdr.{unique_name}"
    expires = int(time.time() * 1000) + 60_000
    conn.send(
        f"/queue/{dest}",
        "h",
        headers={
            "correlation-id": "c9",
            "type": "t9",
            "reply-to": "/topic/rt",
            "priority": "8",
            "persistent": "true",
            "expires": str(expires),
            "num": "5",
            "flag": "true",
            "my-prop": "v",
            "JMSXGroupID": "g1",
        },
    )
    conn.send(f"/queue/{dest}", "defaults")
    # sorted by body: ActiveMQ may reorder persistent and non-persistent messages on one queue
    m, d = sorted(jmstool.receive(f"queue://{dest}", 2), key=lambda r: r["body"], reverse=True)
    h = m["headers"]
    assert (
        h["correlationId"],
        h["type"],
        h["replyTo"],
        h["priority"],
        h["deliveryMode"],
        h["expiration"],
    ) == (
        "c9",
        "t9",
        "topic://rt",
        8,
        "PERSISTENT",
        expires,
    )
    s = "java.lang.String"
    assert m["properties"] == {
        "num": {"type": s, "value": "5"},  # no typed properties over STOMP: every header is a String
        "flag": {"type": s, "value": "true"},
        "my-prop": {"type": s, "value": "v"},  # not a Java identifier, accepted anyway
        "JMSXGroupID": {"type": s, "value": "g1"},
        "JMSXGroupSeq": {"type": "java.lang.Integer", "value": 0},  # added by the broker
    }
    assert (d["headers"]["deliveryMode"], d["headers"]["priority"], d["headers"]["expiration"]) == (
        "NON_PERSISTENT",  # STOMP SEND without persistent:true
        4,
        0,
    )


def test_stomp_send_map_and_object_through_transformation(
    stomp_conn: tuple[stomp.Connection12, StompCollector], jmstool: JmsTool, unique_name: str
) -> None:
    conn, _ = stomp_conn
    dest = f"xf.{unique_name}"
    map_json = '{"map":{"entry":[{"string":["a","x"]},{"string":"b","int":5},{"string":"c","double":1.5}]}}'
    conn.send(f"/queue/{dest}", map_json, headers={"transformation": "jms-map-json"})
    conn.send(
        f"/queue/{dest}",
        "<map><entry><string>a</string><short>3</short></entry></map>",
        headers={"transformation": "jms-map-xml"},
    )
    conn.send(f"/queue/{dest}", '{"string":"objstr"}', headers={"transformation": "jms-object-json"})
    mj, mx, oj = jmstool.receive(f"queue://{dest}", 3)
    assert mj["class"].endswith("ActiveMQMapMessage")
    assert mj["body"] == {
        "a": {"type": "java.lang.String", "value": "x"},
        "b": {"type": "java.lang.Integer", "value": 5},
        "c": {"type": "java.lang.Double", "value": 1.5},
    }
    # the transformation header is kept as a String property of the JMS message
    assert mj["properties"] == {"transformation": {"type": "java.lang.String", "value": "jms-map-json"}}
    assert mx["body"] == {"a": {"type": "java.lang.Short", "value": 3}}
    assert oj["class"].endswith("ActiveMQObjectMessage")
    assert oj["body"] == {"class": "java.lang.String", "value": "objstr"}


# ---------------------------------------------------------------- JMS -> STOMP


def test_jms_text_and_bytes_to_stomp_frames(
    stomp_conn: tuple[stomp.Connection12, StompCollector], jmstool: JmsTool, unique_name: str
) -> None:
    conn, collector = stomp_conn
    dest = f"j2s.{unique_name}"
    jmstool.send(
        f"queue://{dest}",
        {"type": "Text", "body": "héllo", "properties": TYPED_PROPS, "headers": HEADERS},
        {"type": "Bytes", "body": {"hex": "00ff10"}},
        {"type": "Bytes", "body": {"hex": ""}},
        {"type": "Text", "body": ""},
        {"type": "Text", "body": None},
    )
    text, by, empty_bytes, empty_text, null_text = subscribe_and_wait(conn, collector, f"/queue/{dest}", 5)
    assert text.body == "héllo".encode()
    assert "content-length" not in text.headers  # TextMessage: no content-length
    th = text.headers
    assert {k: th[k] for k in ("correlation-id", "type", "reply-to", "priority", "persistent")} == {
        "correlation-id": "corr-1",
        "type": "jt-type",
        "reply-to": "/queue/reply.q",
        "priority": "6",
        "persistent": "true",
    }
    assert int(th["expires"]) == int(th["timestamp"]) + 600_000
    assert th["message-id"].startswith("ID:") and th["destination"] == f"/queue/{dest}"
    assert "amq-msg-type" not in th  # ActiveMQ 5.17 never emits amq-msg-type on MESSAGE frames
    # typed properties arrive as plain strings: the Java type is lost
    assert {k: th[k] for k in TYPED_PROPS} == {
        "pBool": "true",
        "pByte": "-3",
        "pShort": "300",
        "pInt": "70000",
        "pLong": str(2**40 + 1),
        "pFloat": "1.5",
        "pDouble": "2.25",
        "pString": "s v",
    }
    assert by.body == b"\x00\xff\x10" and by.headers["content-length"] == "3"  # BytesMessage
    assert empty_bytes.body == b"" and empty_bytes.headers["content-length"] == "0"
    for f in (empty_text, null_text):  # "" and null text look the same
        assert f.body == b"" and "content-length" not in f.headers
    collector.frames.clear()

    np_dest = f"{dest}.np"  # own queue: ActiveMQ may reorder persistent and non-persistent messages
    jmstool.send(f"queue://{np_dest}", {"type": "Text", "body": "np", "headers": {"deliveryMode": "NON_PERSISTENT"}})
    (np,) = subscribe_and_wait(conn, collector, f"/queue/{np_dest}", 1)
    assert "persistent" not in np.headers  # NON_PERSISTENT: no persistent header at all
    assert (np.headers["priority"], np.headers["expires"]) == ("4", "0")
    assert not {"correlation-id", "type", "reply-to", "redelivered"} & set(np.headers)


def test_map_message_read_over_stomp_with_transformation(
    stomp_conn: tuple[stomp.Connection12, StompCollector], jmstool: JmsTool, unique_name: str
) -> None:
    conn, collector = stomp_conn
    dest = f"map.{unique_name}"
    body = {
        "int": typed("int", 1),
        "long": typed("long", 2**62),
        "short": typed("short", 2),
        "byte": typed("byte", -1),
        "bool": typed("boolean", False),
        "float": typed("float", 0.5),
        "double": typed("double", 0.1),
        "char": typed("char", "z"),
        "bytes": typed("byte[]", b"\x01\x02"),
        "str": typed("String", "x"),
        "strNum": typed("String", "5"),
        "strTrue": typed("String", "true"),
        "strZeros": typed("String", "007"),
    }
    maps = [
        {"type": "Map", "body": body},
        {"type": "Map", "body": {"only": typed("int", 1)}},
        {"type": "Map", "body": {}},
    ]
    jmstool.send(f"queue://{dest}", *maps)
    for plain in subscribe_and_wait(conn, collector, f"/queue/{dest}", 3):
        # without a transformation the map is dropped: an empty body, like an empty TextMessage
        assert plain.body == b"" and "content-length" not in plain.headers
        assert "transformation" not in plain.headers
    collector.frames.clear()

    jmstool.send(f"queue://{dest}", *maps)
    full, single, empty = subscribe_and_wait(conn, collector, f"/queue/{dest}", 3, "jms-map-json")
    assert full.headers["transformation"] == "jms-map-json"
    assert "content-length" not in full.headers
    entries = json.loads(full.body)["map"]["entry"]
    # XStream/Jettison "mapped" JSON: key under "string", value under its Java type name; when the
    # value is a String too, both merge into one "string" list. Jettison turns numeric- or
    # boolean-looking strings into JSON numbers/booleans ("5" -> 5, "true" -> true).
    as_dict = {}
    for e in entries:
        if isinstance(e["string"], list):
            as_dict[e["string"][0]] = ("string", e["string"][1])
        else:
            ((t, v),) = [(k, v) for k, v in e.items() if k != "string"]
            as_dict[e["string"]] = (t, v)
    assert as_dict == {
        "int": ("int", 1),
        "long": ("long", 2**62),
        "short": ("short", 2),
        "byte": ("byte", -1),
        "bool": ("boolean", False),
        "float": ("float", 0.5),
        "double": ("double", 0.1),
        "char": ("char", "z"),
        "bytes": ("byte-array", base64.b64encode(b"\x01\x02").decode()),
        "str": ("string", "x"),
        "strNum": ("string", 5),
        "strTrue": ("string", True),
        "strZeros": ("string", "007"),
    }
    assert json.loads(single.body) == {"map": {"entry": {"string": "only", "int": 1}}}  # object, not list
    assert json.loads(empty.body) == {"map": ""}
    collector.frames.clear()

    jmstool.send(f"queue://{dest}", maps[0])
    (xml,) = subscribe_and_wait(conn, collector, f"/queue/{dest}", 1, "jms-map-xml")
    assert xml.headers["transformation"] == "jms-map-xml"
    assert b"<entry>\n    <string>strNum</string>\n    <string>5</string>\n  </entry>" in xml.body
    assert b"<string>bytes</string>\n    <byte-array>AQI=</byte-array>" in xml.body


def test_jms_json_subscription_labels_each_frame(
    stomp_conn: tuple[stomp.Connection12, StompCollector], jmstool: JmsTool, unique_name: str
) -> None:
    conn, collector = stomp_conn
    dest = f"auto.{unique_name}"
    jmstool.send(
        f"queue://{dest}",
        {"type": "Text", "body": "t"},
        {"type": "Bytes", "body": {"hex": "01"}},
        {"type": "Map", "body": {"k": typed("int", 1)}},
        {"type": "Object", "body": {"class": "java.util.HashMap", "value": {"k": typed("int", 1)}}},
        {"type": "Object", "body": {"class": "java.lang.String", "value": "os"}},
        {"type": "Stream", "body": [typed("int", 1)]},
        {"type": "Message"},
    )
    frames = subscribe_and_wait(conn, collector, f"/queue/{dest}", 7, "jms-json")
    seen = [(f.headers.get("transformation"), f.headers.get("content-length"), f.body) for f in frames]
    assert seen == [
        ("jms-json", None, b"t"),  # Text: subscription's transformation echoed, body as is
        (None, "1", b"\x01"),  # Bytes: no transformation header at all
        ("jms-map-json", None, b'{"map":{"entry":{"string":"k","int":1}}}'),
        ("jms-object-json", None, b'{"map":{"entry":{"string":"k","int":1}}}'),  # HashMap object
        ("jms-object-json", None, b'{"string":"os"}'),
        ("jms-json", None, b""),  # StreamMessage: body lost, frame looks like an empty TextMessage
        ("jms-json", None, b""),  # plain Message
    ]
    collector.frames.clear()

    # StreamMessage bodies are unreadable over STOMP whatever the subscription asks for
    transformations = (None, "jms-xml", "jms-map-json", "jms-object-json", "jms-map-xml")
    jmstool.send(
        f"queue://{dest}",
        *(
            {"type": "Stream", "body": [typed("int", 1)], "destination": f"queue://{dest}.s.{t}"}
            for t in transformations
        ),
    )
    frames = []
    for transformation in transformations:
        collector.frames.clear()
        frames += subscribe_and_wait(conn, collector, f"/queue/{dest}.s.{transformation}", 1, transformation)
    assert [(f.body, f.headers.get("content-length")) for f in frames] == [(b"", None)] * 5


def test_activemq_mqtt_port_delivers_bytes_messages(
    activemq: BrokerEndpoints, jmstool: JmsTool, unique_name: str
) -> None:
    mqtt = pytest.importorskip("paho.mqtt.client")
    rec = jmstool.start_receiver(f"topic://mq.{unique_name}.a", 1, timeout=10)
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=unique_name[-20:], protocol=mqtt.MQTTv311)
    client.connect(activemq.host, activemq.mqtt_port)
    client.loop_start()
    try:
        info = client.publish(f"mq/{unique_name}/a", b"\x00payload", qos=1)
        info.wait_for_publish(10)
        (m,) = rec.result()
    finally:
        client.loop_stop()
        client.disconnect()
    # ActiveMQ's own MQTT transport maps '/' to '.' and delivers a BytesMessage
    assert m["class"].endswith(BYTES) and m["body"]["hex"] == b"\x00payload".hex()
    assert m["headers"]["destination"] == f"topic://mq.{unique_name}.a"
