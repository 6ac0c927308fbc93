"""The mapping rules a gateway runs: the rules file named in the configuration, or the embedded default
routes (README's first command) when there is none. Read by `mqbridge serve`, on reload, and by
`mqbridge validate`."""
from __future__ import annotations

from pathlib import Path

from mappings.rules.model import RulesError, RulesFile, parse_rules

# With no rules file the gateway runs these routes on the embedded queue store (README's first command).
DEFAULT_RULES = """
routes:
  - name: mqtt-to-mq          # MQTT publications under mq/... become MQ messages on queue MQTT.IN
    from: {mqtt: "mq/#"}
    to: {connector: embedded, queue: MQTT.IN}
  - name: mq-to-mqtt          # MQ messages put on MQTT.OUT are published to their mqps/Top topic
    from: {connector: embedded, queue: MQTT.OUT}
    to: {mqtt: "{topic}"}
"""


def load_rules(path: Path | None) -> RulesFile:
    """The rules of ``path``, or the default routes for None; RulesError lists what is wrong (file:line)."""
    if path is None:
        return parse_rules(DEFAULT_RULES, "<embedded default rules>")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise RulesError([f"{path}: cannot read: {exc.strerror}"]) from None
    return parse_rules(text, str(path))
