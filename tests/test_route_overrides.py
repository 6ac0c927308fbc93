"""A route's persistence/priority overrides on MQ bytes, written once by the encoder: MQTT -> MQ passes them to
MqttToMqEncoder (the bytes the earlier decode, replace and re-encode gave); JMS -> MQ sets them on the JMS
headers before the JMS -> MQ encoder, so the MQMD is the one the earlier patch gave and the RFH2 jms folder
(Dlv, Pri) agrees with it: a JMS reader of the MQ message sees the route's delivery mode and priority."""
from __future__ import annotations

import dataclasses
import types
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.connectors.base import Inbound, Outbound
from bridge.routing import convert as convert_module
from bridge.routing.convert import RouteConverter
from mappings.conversions.jms_mq import jms_to_mq_bytes, mq_bytes_to_jms
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
def test_jms_to_mq_overrides_reach_the_mqmd_and_the_jms_view(message: JmsMessage, persistence: str,
                                                             priority: int | None) -> None:
    now_ms = 1_700_000_000_000
    try:
        data, _ = jms_to_mq_bytes(message, now_ms=now_ms)
    except MappingError:
        return
    route = _route({"persistence": persistence, "priority": priority}, {"connector": "amq", "queue": "IN"})
    item = Inbound(key="k", protocol="jms", message=message, source_type="TextMessage", size=1, destination="IN",
                   received=0.0)
    conv = RouteConverter(route, "jms", "mq")
    with mock.patch.object(convert_module, "time", types.SimpleNamespace(time=lambda: now_ms / 1000)):
        out, _, _ = conv.convert(item)
    assert isinstance(out, Outbound) and isinstance(out.message, bytes)
    source_persistent = message.headers.delivery_mode is DeliveryMode.PERSISTENT
    before = decode_message(_decode_replace_encode(data, {"persistence": persistence, "priority": priority},
                                                   source_persistent)).md
    after = decode_message(out.message).md
    assert after == before            # the MQMD is what the decode/replace/re-encode patch wrote
    jms, _ = mq_bytes_to_jms(out.message, now_ms=now_ms)
    want_mode = {"persistent": DeliveryMode.PERSISTENT, "not_persistent": DeliveryMode.NON_PERSISTENT}.get(
        persistence, message.headers.delivery_mode)
    assert jms.headers.delivery_mode == want_mode
    assert jms.headers.priority == (message.headers.priority if priority is None else priority)
