"""The MQTT -> JMS model cache of the native JMS target (bridge/routing/mqtt_stomp.py, MqttToJmsModels) gives
exactly the model path's messages and findings (RouteConverter._mqtt_to_jms: mqtt_to_jms, property_map,
overrides), whether the template comes from the cache or is built for it; only JMSTimestamp is the
template's (the native target never sends it: the provider sets it at send)."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.routing.convert import RouteConverter
from mappings.jms.model import JmsMessage, TextBody
from mappings.mqtt.publication import MqttPublication
from tests.test_mqtt_stomp_fast import _item, _route, property_maps, publications


def _converter(convert: str, swiftmq: bool, property_map: dict[str, str], topic: str) -> RouteConverter:
    conv = RouteConverter(_route(convert, swiftmq, property_map, topic), "mqtt", "jms")
    conv.model_path()   # as the router does for a target that writes JmsMessage values (the native one)
    return conv


def _as_dict(result: Any) -> dict[str, Any]:
    out, target_type, report = result
    msg = out.message
    assert isinstance(msg, JmsMessage)
    assert msg.headers.timestamp > 0   # set (the model path's clock, or the template's): a finding either way
    return {"destination": out.destination, "size": out.size, "type": target_type, "findings": report.findings,
            "message": replace(msg, headers=replace(msg.headers, timestamp=0)), "extra": out.extra}


@given(pubs=st.lists(publications, min_size=1, max_size=4), convert=st.sampled_from(["auto", "text", "bytes"]),
       swiftmq=st.booleans(), property_map=property_maps, topic=st.sampled_from(["out", "out.{topic}", "{1}"]),
       repeat=st.integers(0, 3))
@settings(max_examples=150, deadline=None)
def test_cached_models_equal_the_model_path(pubs: list[MqttPublication], convert: str, swiftmq: bool,
                                            property_map: dict[str, str], topic: str, repeat: int) -> None:
    conv = _converter(convert, swiftmq, property_map, topic)
    first = pubs[0]
    variants = [replace(first, retain=not first.retain), replace(first, qos=(first.qos + 1) % 3),
                replace(first, client_id=(first.client_id or "") + "x"), replace(first, username="u"),
                replace(first, topic=first.topic + "/t"), replace(first, payload=b"other"),
                replace(first, payload=b"nul\x00"), replace(first, payload=b"\x01"), replace(first, payload=b"\xff")]
    for n, pub in enumerate([*pubs, pubs[repeat % len(pubs)], *pubs, *variants, *pubs]):
        item = _item(pub, n)
        assert _as_dict(conv.convert(item)) == _as_dict(conv._mqtt_to_jms(item)), pub


def test_messages_of_one_key_share_headers_and_properties_and_differ_in_body() -> None:
    conv = _converter("auto", True, {}, "out")
    one = conv.convert(_item(MqttPublication("a/b", b"hello", qos=1, client_id="c"), 1))[0].message
    two = conv.convert(_item(MqttPublication("a/b", b"world", qos=1, client_id="c"), 2))[0].message
    raw = conv.convert(_item(MqttPublication("a/b", b"\xff\x00", qos=1, client_id="c"), 3))[0].message
    other = conv.convert(_item(MqttPublication("a/b", b"hello", qos=1, client_id="d"), 4))[0].message
    assert isinstance(one, JmsMessage) and isinstance(two, JmsMessage) and isinstance(raw, JmsMessage)
    assert isinstance(other, JmsMessage)
    assert one.headers is two.headers and one.properties is two.properties
    assert (one.body, two.body) == (TextBody("hello"), TextBody("world"))
    assert raw.body_type.java_class == "BytesMessage" and other.properties is not one.properties
    assert other.properties.get("JMS_SWIFTMQ_CID").value == "d"
