"""The `mqbridge` command: argument parsing and dispatch to the sub-command modules."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from types import ModuleType

from bridge.cli import audit, broker, gateway, mapping, passwd

# Each command group's module exposes ``register(subparsers: argparse._SubParsersAction) -> None``;
# every parser it adds sets ``func`` (``Callable[[argparse.Namespace], int]``) as its default.
COMMAND_MODULES: tuple[ModuleType, ...] = (
    broker,    # serve, status, admin
    mapping,   # inspect, convert
    audit,     # audit
    gateway,   # validate, reload, queue, log
    passwd,    # passwd
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mqbridge",
        description="MQTT / IBM MQ / JMS conversion gateway with a built-in MQTT broker.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in COMMAND_MODULES:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
