"""Rules for options.mqtt_format envelope and reply_to targets: validation with file:line, loop detection."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mappings.rules.model import QueueEndpoint, RulesError, find_loop, parse_rules

REPO = Path(__file__).resolve().parents[1]
HEAD = """\
connectors:
  amq: {type: jms}
routes:
"""

REQUEST = """\
  - name: req
    from: {connector: amq, queue: rr.req}
    to: {mqtt: svc/request}
    options: {mqtt_format: envelope}
"""


def problems(routes: str) -> list[str]:
    with pytest.raises(RulesError) as exc:
        parse_rules(HEAD + routes, "rr.yaml")
    return exc.value.problems


def test_a_reply_route_with_allow_list_and_fallback_parses() -> None:
    rules = parse_rules(HEAD + REQUEST + """\
  - name: rep
    from: {mqtt: svc/reply/#}
    to: {connector: amq, reply_to: true, allow: ["queue://rr.rep.", "topic://replies."], queue: rr.lost}
    options: {mqtt_format: envelope}
""", "rr.yaml")
    target = rules.routes[1].target
    assert isinstance(target, QueueEndpoint)
    assert target.reply_to and target.allow == ("queue://rr.rep.", "topic://replies.")
    assert target.destination == "rr.lost"
    assert rules.routes[0].options.mqtt_format == "envelope"
    assert rules.routes[1].options.mqtt_format == "envelope"


def test_default_format_is_payload() -> None:
    rules = parse_rules(HEAD + """\
  - name: plain
    from: {mqtt: a/#}
    to: {connector: amq, queue: q}
""")
    assert rules.routes[0].options.mqtt_format == "payload"


@pytest.mark.parametrize("routes, line, needle", [
    # reply_to in the payload form: the topic names a JMS destination, so the target must be a jms connector
    ("""\
  - name: rep
    from: {mqtt: svc/reply/#}
    to:
      connector: embedded
      reply_to: true
      allow: ["queue://rr."]
""", 8, "routes.0.to.reply_to: in the payload form the reply's topic names a JMS destination"),
    # no allow list: MQTT clients could send anywhere
    ("""\
  - name: rep
    from: {mqtt: svc/reply/#}
    to:
      connector: amq
      reply_to: true
    options: {mqtt_format: envelope}
""", 8, "routes.0.to.reply_to: give allow"),
    # a JMS source: the envelope is read from MQTT only
    ("""\
  - name: rep
    from: {connector: amq, queue: x}
    to:
      connector: amq
      reply_to: true
      allow: ["queue://rr."]
""", 8, "from must be an mqtt topic filter"),
    # envelope on a route with no MQTT end
    ("""\
  - name: j2j
    from: {connector: amq, queue: x}
    to: {connector: amq, queue: y}
    options:
      mqtt_format: envelope
""", 8, "routes.0.options.mqtt_format: envelope is a payload format of MQTT"),
    # reply_to on a source
    ("""\
  - name: src
    from:
      connector: amq
      queue: x
      reply_to: true
    to: {mqtt: a}
""", 8, "routes.0.from.reply_to: only a target"),
    # topics in the embedded store
    ("""\
  - name: rep
    from: {mqtt: r/#}
    to:
      reply_to: true
      allow: ["topic://r."]
    options: {mqtt_format: envelope}
""", 8, "routes.0.to.allow: the embedded store has queues, not topics"),
])
def test_envelope_rules_errors_name_file_line_and_field(routes: str, line: int, needle: str) -> None:
    found = problems(routes)
    assert any(p.startswith(f"rr.yaml:{line}:") and needle in p for p in found), found


def test_allow_prefixes_must_name_a_kind() -> None:
    found = problems("""\
  - name: rep
    from: {mqtt: r/#}
    to: {connector: amq, reply_to: true, allow: ["rr.rep."]}
    options: {mqtt_format: envelope}
""")
    expected = "'rr.rep.' must start with queue://, topic://, temp-queue:// or temp-topic://"
    assert any("rr.yaml:6:" in p and expected in p for p in found), found


def test_temporary_prefixes_only_on_jms_connectors() -> None:
    parse_rules(HEAD + """\
  - name: rep
    from: {mqtt: r/#}
    to: {connector: amq, reply_to: true, allow: ["temp-queue://ID:"]}
    options: {mqtt_format: envelope}
""")
    found = problems("""\
  - name: rep
    from: {mqtt: r/#}
    to:
      reply_to: true
      allow: ["temp-queue://ID:"]
    options: {mqtt_format: envelope}
""")
    assert any("rr.yaml:8:" in p and "temporary destinations are JMS destinations" in p for p in found), found


def test_allow_without_reply_to_and_two_fallbacks_are_refused() -> None:
    found = problems("""\
  - name: a
    from: {mqtt: r/#}
    to: {connector: amq, queue: q, allow: ["queue://x"]}
  - name: b
    from: {mqtt: s/#}
    to: {connector: amq, reply_to: true, allow: ["queue://x"], queue: q, topic: t}
    options: {mqtt_format: envelope}
""")
    assert any("rr.yaml:6:" in p and "only a reply_to target has an allow list" in p for p in found), found
    assert any("rr.yaml:9:" in p and "at most one of queue or topic" in p for p in found), found


def test_a_reply_target_allowed_to_write_a_routed_queue_is_a_loop() -> None:
    """rr.req -> MQTT -> (reply route, allowed prefix rr.) -> rr.req again."""
    found = problems(REQUEST + """\
  - name: svc
    from: {mqtt: svc/request}
    to: {connector: amq, reply_to: true, allow: ["queue://rr."]}
    options: {mqtt_format: envelope}
""")
    assert any("routes loop a message back to its source: req -> svc -> req" in p for p in found), found


def test_a_reply_target_outside_the_routed_queues_is_no_loop() -> None:
    rules = parse_rules(HEAD + REQUEST + """\
  - name: svc
    from: {mqtt: svc/request}
    to: {connector: amq, reply_to: true, allow: ["queue://rr.rep."], queue: rr.rep.lost}
    options: {mqtt_format: envelope}
""")
    assert find_loop(rules.routes) == []


def test_a_reply_fallback_that_is_a_routed_queue_is_a_loop() -> None:
    found = problems(REQUEST + """\
  - name: svc
    from: {mqtt: svc/request}
    to: {connector: amq, reply_to: true, allow: ["queue://rr.rep."], queue: rr.req}
    options: {mqtt_format: envelope}
""")
    assert any("req -> svc -> req" in p for p in found), found


def test_a_wildcard_topic_source_under_an_allowed_prefix_is_a_loop() -> None:
    found = problems("""\
  - name: fan
    from: {connector: amq, topic: "events.>"}
    to: {mqtt: "ev/{topic}"}
  - name: back
    from: {mqtt: "ev/#"}
    to: {connector: amq, reply_to: true, allow: ["topic://events.in."]}
    options: {mqtt_format: envelope}
""")
    assert any("fan -> back -> fan" in p or "back -> fan -> back" in p for p in found), found


def test_a_reply_target_on_another_connector_is_no_loop() -> None:
    rules = parse_rules("""\
connectors:
  amq: {type: jms}
  amq2: {type: jms, port: 61614}
routes:
""" + REQUEST + """\
  - name: svc
    from: {mqtt: svc/request}
    to: {connector: amq2, reply_to: true, allow: ["queue://rr."]}
    options: {mqtt_format: envelope}
""")
    assert find_loop(rules.routes) == []


def test_validate_command_describes_reply_targets_and_names_the_line(tmp_path: Path) -> None:
    good = tmp_path / "rr.yaml"
    good.write_text(HEAD + REQUEST + """\
  - name: rep
    from: {mqtt: svc/reply/#}
    to: {connector: amq, reply_to: true, allow: ["queue://rr.rep.", "temp-queue://ID:"], queue: rr.lost}
    options: {mqtt_format: envelope}
""")
    run = subprocess.run([sys.executable, "-m", "bridge", "validate", str(good)], capture_output=True, text=True,
                         timeout=60, cwd=REPO)
    assert run.returncode == 0, run.stderr
    assert "rep: mqtt svc/reply/# -> amq reply_to (queue://rr.rep., temp-queue://ID:, else rr.lost)" in run.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text(good.read_text().replace("{connector: amq, reply_to: true, allow: [\"queue://rr.rep.\", "
                                            "\"temp-queue://ID:\"], queue: rr.lost}\n    options: {mqtt_format: "
                                            "envelope}\n", "{connector: embedded, reply_to: true, allow: "
                                            "[\"queue://rr.rep.\"], queue: rr.lost}\n"))
    run = subprocess.run([sys.executable, "-m", "bridge", "validate", str(bad)], capture_output=True, text=True,
                         timeout=60, cwd=REPO)
    assert run.returncode != 0
    assert f"{bad}:10: routes.1.to.reply_to: in the payload form the reply's topic names" in run.stderr, run.stderr


def test_an_undefined_reply_connector_is_reported_once() -> None:
    found = problems("""\
  - name: rep
    from: {mqtt: r/#}
    to: {connector: nowhere, reply_to: true, allow: ["topic://r.", "temp-queue://ID:"]}
    options: {mqtt_format: envelope}
""")
    assert len(found) == 1 and "connector 'nowhere' is not defined" in found[0], found
