"""The connector types a route can name: each connector module registers its factory here, and the router
looks it up. Connectors never import the router."""
from __future__ import annotations

from collections.abc import Callable

from bridge.connectors.base import Source, Target
from mappings.rules.model import QueueEndpoint, Route, RulesFile

# (rules, route, endpoint, role) -> Source | Target; role is "source" or "target"
ConnectorFactory = Callable[[RulesFile, Route, QueueEndpoint, str], Source | Target]
CONNECTOR_FACTORIES: dict[str, ConnectorFactory] = {}


class RouteSetupError(Exception):
    """A route cannot be built (unknown connector type, missing client library, bad endpoint)."""
