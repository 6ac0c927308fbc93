"""The table of the `mqbridge convert` command's conversions: (from, to) -> :class:`ConvertEntry`, put
together from the entry modules (MQTT <-> MQ, MQTT <-> JMS, JMS <-> MQ), and its help text.

An entry module exposes ``entries() -> Iterable[ConvertEntry]`` and ``add_arguments(parser)`` for its
own flags; the convert command's options are the union of those flags.
"""
from __future__ import annotations

import argparse
from collections.abc import Iterable
from types import ModuleType

from bridge.cli import mapping_jms_mq, mapping_mqtt_jms, mapping_mqtt_mq
from bridge.cli.mapping_input import ConvertEntry
from mappings.conversions.mqtt_mq import DECISIONS

#: the modules whose entries make up the table, in the order their flags appear in `convert --help`
ENTRY_MODULES: tuple[ModuleType, ...] = (mapping_mqtt_mq, mapping_mqtt_jms, mapping_jms_mq)

ConvertTable = dict[tuple[str, str], ConvertEntry]


def load_convert_table(parser: argparse.ArgumentParser | None = None) -> ConvertTable:
    """The table of every entry module; with ``parser``, each module's flags are added to it."""
    table: ConvertTable = {}
    for module in ENTRY_MODULES:
        if parser is not None and hasattr(module, "add_arguments"):
            module.add_arguments(parser)
        for entry in module.entries():
            table[(entry.source, entry.target)] = entry
    return table


def describe(table: ConvertTable) -> str:
    """Help text: the available conversions and the MQTT <-> MQ decisions MQ Telemetry's tables leave open."""
    lines = ["conversions:"]
    lines += [f"  --from {s} --to {t}: {c.help}" for (s, t), c in sorted(table.items())]
    lines.append("")
    lines.append("MQTT <-> MQ decisions (mappings.conversions.mqtt_mq.DECISIONS):")
    lines += [f"  - {d}" for d in DECISIONS]
    return "\n".join(lines)


def known_families(table: Iterable[tuple[str, str]]) -> list[str]:
    return sorted({name for pair in table for name in pair} | {"mqtt", "mq", "jms"})
