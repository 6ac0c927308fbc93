"""The IBM MQ connector: client connections through pymqi (or IBM's successor package ``ibmmq``),
MQPUT of the mapping library's message bytes under syncpoint and MQCMIT per batch, MQGET under
syncpoint with MQCMIT/MQBACK as the router confirms or backs out, durable subscriptions to MQ topics
named ``ClientIdentifier:Topic``, and reconnection with backoff. Registers connector type "mq".

Our MQ message bytes are MQMD + data (headers + body), exactly what `bridge.connectors.embedded`
stores. On MQPUT the MQMD part travels as the MD structure and the rest as the message data; on MQGET
the two are joined again. The MQMD's own integers are written in the byte order of MQMD.Encoding
(IBM MQ docs "MQMD - Message descriptor"), so a message keeps its bytes through the queue manager.

pymqi/ibmmq are imported on first use only, so the gateway runs without them unless an mq connector
is configured. MQI handles are bound to the thread that made them: each connection owns one thread
and every MQI call of that connection runs there.

Rooms: :mod:`.mqi` (loading pymqi/ibmmq, MQI constants, MQMD <-> MD), :mod:`.connection` (one
connection and its thread), :mod:`.endpoints` (source and target); this module is the factory."""
from __future__ import annotations

from bridge.connectors.base import ConnectorError, Source, Target
from bridge.connectors.mq.connection import MqConnection, MqSourceSpec
from bridge.connectors.mq.endpoints import MqSource, MqTarget
from bridge.connectors.mq.mqi import MqUnavailable, load_mqi
from bridge.connectors.mqtt_internal import route_client_id
from bridge.connectors.registry import CONNECTOR_FACTORIES, RouteSetupError
from mappings.conversions.mqtt_mq import subscription_name
from mappings.rules.model import MqConnector, QueueEndpoint, Route, RulesFile


def make_connector(rules: RulesFile, route: Route, endpoint: QueueEndpoint, role: str) -> Source | Target:
    """CONNECTOR_FACTORIES["mq"]: one connection (and thread) per route endpoint, so a route's
    unit of work is never mixed with another's. Fails early, with what to install, when the MQI
    library cannot load."""
    config = rules.connector(endpoint.connector)
    if not isinstance(config, MqConnector):
        raise ConnectorError(f"connector {endpoint.connector!r} is not an mq connector")
    try:
        load_mqi()
    except MqUnavailable as exc:
        raise RouteSetupError(f"route {route.name}: connector {endpoint.connector!r}: {exc}") from None
    conn = MqConnection(f"{route.name}.{role}", config)
    topics = dict(route.options.admin_topics)
    if role == "target":
        return MqTarget(conn, topics)
    sub = endpoint.subscription
    if endpoint.topic is not None and sub is None:
        sub = subscription_name(route_client_id(route.name), endpoint.topic)
    selector = route.options.selector if route.options.selector and route.options.selector.strip() else None
    return MqSource(conn, MqSourceSpec(endpoint.queue, endpoint.topic, sub or "", topics, selector))


def register() -> None:
    CONNECTOR_FACTORIES.setdefault("mq", make_connector)


register()

