"""The MQTT -> STOMP fast path (bridge/routing/mqtt_stomp.py) gives exactly the model path's frames and
findings: RouteConverter._mqtt_to_jms (mqtt_to_jms, property_map) followed by jms_to_frame, for any
publication and route options, whether the template comes from the cache or is built for it."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.connectors.base import Inbound
from bridge.connectors.stomp_link import encode_send_head
from bridge.routing.convert import RouteConverter
from mappings.errors import MappingError
from mappings.jms.model import JmsMessage
from mappings.mqtt.publication import MqttPublication
from mappings.report import ConversionReport
from mappings.rules.model import Route
from mappings.stomp.frames import SendFrame, jms_to_frame

names = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
strings = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12) | st.sampled_from(
    ["a:b", "x\ny", "back\\slash", "nul\x00", "\r", "caf\u00e9"])
payloads = (st.binary(max_size=40) | strings.map(lambda s: s.encode("utf-8"))
            | st.sampled_from([b"", b"plain text", b"tab\tnl\n", b"\x00", b"bell\x07", b"\xc3\x28", b"\xed\xa0\x80",
                               b"\xf4\x90\x80\x80", b"\xc2\x80", b"\x7f", "\u00e9\u4e2d".encode()]))
property_maps = st.dictionaries(
    st.sampled_from(["JMSXUserID", "JMS_SWIFTMQ_CID", "JMS_SWIFTMQ_MQTT_PUBQOS", "color"]),
    st.sampled_from(["user", "priority", "JMS_SWIFTMQ_CID", "cid", "MQBRIDGE_BODY_TYPE"]), max_size=3)
mqtt5 = st.fixed_dictionaries({}, optional={   # MQTT 5 properties (the broker hands routes none today)
    "payload_format_indicator": st.sampled_from([0, 1]), "content_type": strings,
    "correlation_data": st.binary(max_size=4), "user_properties": st.lists(st.tuples(names, strings),
                                                                             min_size=1, max_size=2).map(tuple)})
plain = st.builds(
    MqttPublication, topic=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                                   min_size=1, max_size=12) | st.sampled_from(["a/b", "a/b.c", "x:y/z"]),
    payload=payloads, qos=st.integers(0, 2), retain=st.booleans(), dup=st.booleans(),
    client_id=st.none() | strings, username=st.none() | strings,
)
publications = st.tuples(plain, st.just({}) | mqtt5).map(lambda p: replace(p[0], **p[1]))


def _route(convert: str, swiftmq: bool, property_map: dict[str, str], topic: str) -> Route:
    return Route.model_validate({
        "name": "r", "from": {"mqtt": "#"}, "to": {"connector": "amq", "topic": topic},
        "options": {"convert_message_type": convert, "swiftmq_properties": swiftmq, "property_map": property_map}})


def _item(pub: MqttPublication, n: int) -> Inbound:
    return Inbound(key=f"mqtt:{n}", protocol="mqtt", message=pub, source_type="publish", size=len(pub.payload),
                   destination=pub.topic, received=1_795_320_000.0, client_id=pub.client_id, qos=pub.qos, handle=n)


def _model(conv: RouteConverter, item: Inbound) -> dict[str, Any]:
    out, target_type, report = conv._mqtt_to_jms(item)
    assert isinstance(out.message, JmsMessage)
    frame_report = ConversionReport()
    frame = jms_to_frame(out.message, out.destination, frame_report)
    # the router logs the conversion's findings followed by those the JMS target reports for its frame
    return {"destination": out.destination, "size": out.size, "type": target_type,
            "findings": report.findings + frame_report.findings,
            "frame": (frame.destination, frame.headers, frame.body, frame.content_length, frame.head)}


def _fast(conv: RouteConverter, item: Inbound) -> dict[str, Any]:
    out, target_type, report = conv.convert(item)
    frame = out.message
    assert isinstance(frame, SendFrame)
    assert "findings" not in out.extra   # all of them are in the report
    return {"destination": out.destination, "size": out.size, "type": target_type, "findings": report.findings,
            "frame": (frame.destination, frame.headers, frame.body, frame.content_length, frame.head)}


@given(pubs=st.lists(publications, min_size=1, max_size=4), convert=st.sampled_from(["auto", "text", "bytes"]),
       swiftmq=st.booleans(), property_map=property_maps, topic=st.sampled_from(["out", "out.{topic}", "{1}"]),
       repeat=st.integers(0, 3))
@settings(max_examples=400, deadline=None)
def test_fast_path_equals_model_path(pubs: list[MqttPublication], convert: str, swiftmq: bool,
                                     property_map: dict[str, str], topic: str, repeat: int) -> None:
    conv = RouteConverter(_route(convert, swiftmq, property_map, topic), "mqtt", "jms")
    # the same publications again (cached templates), then the first one changed in one part of the
    # cache key at a time, or only in its payload (same key)
    first = pubs[0]
    variants = [replace(first, retain=not first.retain), replace(first, qos=(first.qos + 1) % 3),
                replace(first, client_id=(first.client_id or "") + "x"), replace(first, username=None),
                replace(first, username="u"), replace(first, topic=first.topic + "/t"),
                replace(first, payload=b"other"), replace(first, payload=b"\x01"), replace(first, payload=b"\xff")]
    for n, pub in enumerate([*pubs, pubs[repeat % len(pubs)], *pubs, *variants, *pubs]):
        item = _item(pub, n)
        assert _outcome(_fast, conv, item) == _outcome(_model, conv, item), pub


def _outcome(path: Any, conv: RouteConverter, item: Inbound) -> dict[str, Any] | str:
    """A path's frame, or its refusal: e.g. topic ``/`` under ``{1}`` names an empty JMS topic, which both paths
    must refuse alike (the route backs the message out with the reason)."""
    try:
        return path(conv, item)  # type: ignore[no-any-return]
    except MappingError as exc:
        return f"refused: {exc}"


def test_an_empty_topic_name_is_refused_by_both_paths() -> None:
    """Found by the property test above: MQTT topic ``/`` under the route topic ``{1}`` (its first level, empty)."""
    conv = RouteConverter(_route("auto", False, {}, "{1}"), "mqtt", "jms")
    item = _item(MqttPublication("/", b"", qos=0), 1)
    assert _outcome(_fast, conv, item) == _outcome(_model, conv, item)
    assert str(_outcome(_fast, conv, item)).startswith("refused: Destination: name")


def test_one_template_serves_a_topic_and_the_frame_bytes_are_the_link_encoding() -> None:
    """Two messages of one publisher and topic share the cached header block; the text/bytes decision
    is per payload (amlen auto rule), and the frame's head is what the link would encode."""
    conv = RouteConverter(_route("auto", True, {}, "out"), "mqtt", "jms")
    first, _, report = conv.convert(_item(MqttPublication("a/b", b"hello", qos=1, client_id="c:1"), 1))
    second, second_type, _ = conv.convert(_item(MqttPublication("a/b", b"\x01\x02", qos=1, client_id="c:1"), 2))
    third, third_type, _ = conv.convert(_item(MqttPublication("a/b", b"world", qos=1, client_id="c:1"), 3))
    f1, f2, f3 = first.message, second.message, third.message
    assert isinstance(f1, SendFrame) and isinstance(f2, SendFrame) and isinstance(f3, SendFrame)
    assert f1.headers is f3.headers and f1.head is f3.head
    assert (f1.content_length, f2.content_length, f3.content_length) == (False, True, False)
    assert (second_type, third_type) == ("BytesMessage", "TextMessage")
    assert f3.body == b"world"
    assert f1.head == encode_send_head("/topic/out", f1.headers)
    assert b"JMS_SWIFTMQ_CID:c\\c1\n" in f1.head and f1.headers["persistent"] == "true"
    assert [f.name for f in report.findings] == ["JMS_SWIFTMQ_MQTT_PUBQOS", "JMSTimestamp"]
