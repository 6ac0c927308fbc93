"""Routes under the broker's ACL file: a route acts as its ``options.acl_user``. A route from an MQTT topic
filter of which that user may read nothing is refused at validate, start and reload, naming the route and
filter (it would never move a message); one it may read in part is checked per publication by the broker.
Publications into the broker are checked by ``MqttTarget.refusal`` (a route without an acl_user under the
anonymous rules: its topics may come from the message); a refused one goes to the route's backout
destination with the reason. A route without an acl_user reads its filter unrestricted, as before: the
rules file's author chose it, and what it reads goes only to the target the same author chose.
"""
from __future__ import annotations

from bridge.connectors.mqtt_internal import route_client_id
from bridge.connectors.registry import RouteSetupError
from bridge.mqtt.acl import Acl, Verdict
from mappings.rules.model import MqttEndpoint, RulesFile


def route_acl_problems(rules: RulesFile, acl: Acl | None) -> list[str]:
    """One line per enabled route whose acl_user ``acl`` lets read nothing of the route's filter."""
    if acl is None:
        return []
    problems = []
    for route in rules.routes:
        src = route.source
        if not route.enabled or not isinstance(src, MqttEndpoint):
            continue
        user = route.options.acl_user
        if user is not None and acl.grants(route_client_id(route.name), user).subscribe(src.mqtt) is Verdict.NONE:
            problems.append(f"route {route.name}: the ACL ({acl.source}) does not let acl_user {user!r} read any "
                            f"topic of from.mqtt {src.mqtt!r}; grant it there, or give the route another acl_user")
    return problems


def check_route_acl(rules: RulesFile, acl: Acl | None) -> None:
    """RouteSetupError naming every route ``route_acl_problems`` finds."""
    problems = route_acl_problems(rules, acl)
    if problems:
        raise RouteSetupError("; ".join(problems))
