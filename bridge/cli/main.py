"""The `mqbridge` command: argument parsing and dispatch to the sub-command modules."""
from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Each command group's module exposes ``register(subparsers: argparse._SubParsersAction) -> None``;
# every parser it adds sets ``func`` (``Callable[[argparse.Namespace], int]``) as its default. A command
# imports only its own group's module (the gateway's modules cost `mqbridge audit` ~0.4 s of start);
# help and an unknown command register them all. tests/test_cli_commands.py holds this table to them.
COMMANDS: dict[str, str] = {
    "serve": "broker", "status": "broker", "admin": "broker",
    "inspect": "mapping", "convert": "mapping",
    "audit": "audit",
    "validate": "gateway", "reload": "gateway", "queue": "gateway", "log": "gateway",
    "passwd": "passwd",
}
GROUPS = ("broker", "mapping", "audit", "gateway", "passwd")   # the order of the help's command list


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser with every command, or with only the group of ``command`` when it names one."""
    parser = argparse.ArgumentParser(
        prog="mqbridge",
        description="MQTT / IBM MQ / JMS conversion gateway with a built-in MQTT broker.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for group in (COMMANDS[command],) if command in COMMANDS else GROUPS:
        importlib.import_module(f"bridge.cli.{group}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(args_in[0] if args_in else None)
    args = parser.parse_args(args_in)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
