"""The rules file's checks that are not about the envelope (tests/test_rules_envelope.py): routing loops
of plain routes, topic templates of MQTT, JMS and MQ targets, options a target kind cannot take."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mappings.rules.model import (
    RulesError,
    dotted_to_mqtt,
    mqtt_to_dotted,
    parse_rules,
    render_dotted_topic,
    render_topic,
)

AMQ = "connectors:\n  amq: {type: jms}\n  qm1: {type: mq, queue_manager: QM1}\nroutes:\n"


def problems(text: str) -> list[str]:
    with pytest.raises(RulesError) as info:
        parse_rules(text, "r.yaml")
    return info.value.problems


@pytest.mark.parametrize("routes, loop", [
    # MQTT -> embedded queue -> MQTT, back under the filter
    ("  - {name: a, from: {mqtt: 'x/#'}, to: {queue: Q1}}\n"
     "  - {name: b, from: {queue: Q1}, to: {mqtt: 'x/{topic}'}}\n", "a -> b -> a"),
    # MQTT -> ActiveMQ queue -> MQTT
    ("  - {name: a, from: {mqtt: 'x/+'}, to: {connector: amq, queue: Q1}}\n"
     "  - {name: b, from: {connector: amq, queue: Q1}, to: {mqtt: 'x/y'}}\n", "a -> b -> a"),
    # a JMS wildcard subscription that matches the topic a route sends to (ActiveMQ '>' and '.')
    ("  - {name: a, from: {mqtt: 'm/#'}, to: {connector: amq, topic: 't.{2}'}}\n"
     "  - {name: b, from: {connector: amq, topic: 't.>'}, to: {mqtt: 'm/{topic}'}}\n", "a -> b -> a"),
    # an MQ topic subscription with '#' under the topic a route publishes to
    ("  - {name: a, from: {mqtt: 'm/#'}, to: {connector: qm1, topic: 'dev/{topic}'}}\n"
     "  - {name: b, from: {connector: qm1, topic: 'dev/#'}, to: {mqtt: 'm/back'}}\n", "a -> b -> a"),
    # MQ <-> JMS ping-pong
    ("  - {name: a, from: {connector: qm1, queue: A}, to: {connector: amq, queue: B}}\n"
     "  - {name: b, from: {connector: amq, queue: B}, to: {connector: qm1, queue: A}}\n", "a -> b -> a"),
])
def test_a_routing_loop_is_refused_with_the_routes_it_goes_through(routes: str, loop: str) -> None:
    (problem,) = problems(AMQ + routes)
    assert problem.startswith("r.yaml:5: routes.0: routes loop a message back to its source: ")
    assert problem.endswith(loop)


@pytest.mark.parametrize("routes", [
    # the JMS subscription does not match what the first route sends
    "  - {name: a, from: {mqtt: 'm/#'}, to: {connector: amq, topic: 't.{2}'}}\n"
    "  - {name: b, from: {connector: amq, topic: 'u.>'}, to: {mqtt: 'm/{topic}'}}\n",
    # the way back publishes outside the first route's filter
    "  - {name: a, from: {mqtt: 'x/#'}, to: {queue: Q1}}\n"
    "  - {name: b, from: {queue: Q1}, to: {mqtt: 'y/{topic}'}}\n",
    # same queue name on two different connectors
    "  - {name: a, from: {mqtt: 'x/#'}, to: {connector: amq, queue: Q1}}\n"
    "  - {name: b, from: {queue: Q1}, to: {mqtt: 'x/y'}}\n",
    # a disabled route breaks the cycle
    "  - {name: a, from: {mqtt: 'x/#'}, to: {queue: Q1}}\n"
    "  - {name: b, from: {queue: Q1}, to: {mqtt: 'x/y'}, enabled: false}\n",
])
def test_routes_that_cannot_return_a_message_are_accepted(routes: str) -> None:
    assert len(parse_rules(AMQ + routes).routes) == 2


@pytest.mark.parametrize("route, needle", [
    ("{name: a, from: {queue: Q}, to: {mqtt: 'x'}, options: {priority: 5}}",
     "options.priority: MQTT has no message priority"),
    ("{name: a, from: {connector: amq, topic: 't.{1}'}, to: {mqtt: 'x'}}",
     "from.topic: 't.{1}': a source topic is not a template"),
    ("{name: a, from: {connector: amq, queue: Q}, to: {connector: qm1, topic: 'dev/{topic}'}}",
     "to.topic: 'dev/{topic}': a topic template is filled from the MQTT topic"),
    ("{name: a, from: {mqtt: 'x/#'}, to: {connector: amq, topic: 't.{dest}'}}",
     "to.topic: unknown template field {dest}"),
    ("{name: a, from: {mqtt: 'x/#'}, to: {mqtt: 'y/{nope}'}}", "to.mqtt: unknown template field {nope}"),
    ("{name: a, from: {queue: Q}, to: {mqtt: 'y/+'}}", "must be a topic name (no wildcards)"),
    ("{name: a, from: {mqtt: 'x/#'}, to: {queue: Q}, options: {json_style: pretty}}", "options.json_style"),
    ("{name: a, from: {queue: Q}, to: {mqtt: 'x'}, options: {max_queued: 10}}",
     "options.max_queued: only a route from an MQTT topic filter"),
    ("{name: a, from: {mqtt: 'x/#'}, to: {queue: Q}, options: {max_queued: 0}}", "options.max_queued"),
])
def test_bad_route_options_and_templates_name_the_line_and_field(route: str, needle: str) -> None:
    (problem,) = problems(AMQ + "  - " + route + "\n")
    assert problem.startswith("r.yaml:5: routes.0") and needle in problem


def test_max_queued_is_a_route_from_mqtt_option() -> None:
    rules = parse_rules(AMQ + "  - {name: a, from: {mqtt: 'x/#'}, to: {connector: amq, queue: Q}, "
                              "options: {max_queued: 500}}\n")
    assert rules.routes[0].options.max_queued == 500


def test_priority_is_accepted_on_mq_and_jms_targets() -> None:
    rules = parse_rules(AMQ + "  - {name: a, from: {mqtt: 'x/#'}, to: {connector: amq, queue: Q}, "
                              "options: {priority: 9, persistence: not_persistent}}\n")
    assert rules.routes[0].options.priority == 9


def test_templates_fill_mqtt_levels_and_activemq_dotted_names() -> None:
    assert render_topic("from-mq/{topic}", topic="a/b") == "from-mq/a/b"
    assert render_topic("{2}/{1}/{client}", topic="a/b", client="c1") == "b/a/c1"
    assert render_topic("x/{dest}", dest="JMS.TO.MQTT") == "x/JMS/TO/MQTT"
    # a dot inside an MQTT level, as the dotted naming writes it (%2E), is a dot again (payload and envelope)
    assert render_topic("x/{dest}", dest="plant.v1%2E2.temp") == "x/plant/v1.2/temp"
    assert render_topic("{topic}", dest="plant.v1%2E2") == "plant/v1.2"
    assert render_topic("x/{3}", topic="a/b") == "x/"   # a missing level renders empty
    # ActiveMQ: MQTT levels become dot-separated; the template may be written either way
    assert render_dotted_topic("plant.{topic}", topic="a/b") == "plant.a.b"
    assert render_dotted_topic("plant/{topic}", topic="a/b") == "plant.a.b"
    assert render_dotted_topic("t.{2}.{client}", topic="a/b", client="dev.1") == "t.b.dev%2E1"
    assert render_dotted_topic("{topic}", topic="v1.2/x") == "v1%2E2.x"   # a dot inside a level stays in it


@given(st.text(alphabet=st.sampled_from("ab./%2E5"), min_size=1, max_size=12))
def test_the_dotted_naming_gives_every_mqtt_topic_back(topic: str) -> None:
    """MQTT -> the provider's dotted naming -> MQTT is the identity, also for a topic holding ``%2E`` or ``%25``
    itself (before, ``x%2Ey`` came back as ``x.y``)."""
    assert dotted_to_mqtt(mqtt_to_dotted(topic)) == topic
