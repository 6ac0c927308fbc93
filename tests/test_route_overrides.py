"""A route's persistence/priority overrides on MQ bytes: MQTT -> MQ passes them to MqttToMqEncoder, JMS -> MQ
writes the two MQMD integers in place. Both give the bytes the earlier decode, replace and re-encode gave."""
from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.connectors.base import Inbound
from bridge.routing.base import with_mqmd_overrides
from bridge.routing.convert import RouteConverter
from mappings.conversions.jms_mq import jms_to_mq_bytes
from mappings.conversions.mqtt_mq import MqttToMqEncoder, MqttToMqOptions, UserIdSource
from mappings.errors import MappingError
from mappings.jms.model import DeliveryMode, JmsMessage
from mappings.mq import constants as C
from mappings.mq.message import decode_message, encode_message
from mappings.mqtt.publication import MqttPublication
from mappings.rules.model import Route
from tests.jms_strategies import messages

PERSISTENCE = ["as_source", "persistent", "not_persistent"]
PRIORITY = [None, 0, 4, 9]


def _decode_replace_encode(data: bytes, options: dict[str, Any], source_persistent: bool) -> bytes:
    """What the router did before: decode the MQ message, set MQMD Persistence and Priority, encode it again."""
    persistence = options.get("persistence", "as_source")
    priority = options.get("priority")
    if persistence == "as_source" and priority is None:
        return data
    msg = decode_message(data)
    per = {"persistent": C.MQPER_PERSISTENT, "not_persistent": C.MQPER_NOT_PERSISTENT}.get(
        persistence, C.MQPER_PERSISTENT if source_persistent else C.MQPER_NOT_PERSISTENT)
    md = dataclasses.replace(msg.md, persistence=per, priority=priority if priority is not None else msg.md.priority)
    return encode_message(dataclasses.replace(msg, md=md))


def _route(options: dict[str, Any], source: dict[str, str]) -> Route:
    return Route.model_validate({"name": "r", "from": source, "to": {"queue": "Q"}, "options": options})


@pytest.mark.parametrize("persistence", PERSISTENCE)
@pytest.mark.parametrize("priority", PRIORITY)
@pytest.mark.parametrize("user", ["client_id", "user_name"])
def test_mqtt_to_mq_overrides_are_written_by_the_encoder(persistence: str, priority: int | None, user: str) -> None:
    options: dict[str, Any] = {"persistence": persistence, "priority": priority, "user_identifier": user}
    conv = RouteConverter(_route(options, {"mqtt": "a/#"}), "mqtt", "mq")
    plain = MqttToMqEncoder(MqttToMqOptions(user_id_source=UserIdSource(user)))
    for n, pub in enumerate([MqttPublication("a/b", b"x", qos=0, client_id="c1", username="u"),
                             MqttPublication("a/b", b"yy", qos=1, packet_id=9, client_id="c1", username="u",
                                             retain=True),
                             MqttPublication("a/c", b"", qos=2, packet_id=3, client_id="c2")]):
        item = Inbound(f"k{n}", "mqtt", pub, "publish", len(pub.payload), pub.topic, 0.0, pub.client_id, qos=pub.qos)
        out, _, report = conv.convert(item)
        data, plain_report = plain.encode(pub)
        assert out.message == _decode_replace_encode(data, options, pub.qos > 0)
        assert report.as_list() == plain_report.as_list()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(message=messages, persistence=st.sampled_from(PERSISTENCE), priority=st.sampled_from(PRIORITY))
def test_jms_to_mq_overrides_in_place_equal_decode_and_encode(message: JmsMessage, persistence: str,
                                                              priority: int | None) -> None:
    try:
        data, _ = jms_to_mq_bytes(message, now_ms=1_700_000_000_000)
    except MappingError:
        return
    route = _route({"persistence": persistence, "priority": priority}, {"queue": "IN"})
    source_persistent = message.headers.delivery_mode is DeliveryMode.PERSISTENT
    assert with_mqmd_overrides(data, route.options, source_persistent) == _decode_replace_encode(
        data, {"persistence": persistence, "priority": priority}, source_persistent)
