"""The `mqbridge` command table: each command imports only its own group's module."""
from __future__ import annotations

import argparse
import importlib
import subprocess
import sys

from bridge.cli.main import COMMANDS, GROUPS, build_parser


def _commands(parser: argparse.ArgumentParser) -> set[str]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(sub.choices)


def test_the_table_names_every_command_of_each_group():
    for group in GROUPS:
        parser = argparse.ArgumentParser()
        importlib.import_module(f"bridge.cli.{group}").register(parser.add_subparsers())
        assert _commands(parser) == {c for c, g in COMMANDS.items() if g == group}, group
    assert _commands(build_parser()) == set(COMMANDS)
    assert _commands(build_parser("audit")) == {"audit"}
    assert _commands(build_parser("no-such-command")) == set(COMMANDS)


def test_the_audit_command_does_not_import_the_gateway():
    code = ("import sys; from bridge.cli.main import build_parser; build_parser('audit').parse_args(['audit', 'x']);"
            "print(sorted(m for m in ('bridge.app', 'bridge.config', 'bridge.cli.gateway') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
    done = subprocess.run([sys.executable, "-m", "bridge", "audit", "--help"], capture_output=True, text=True,
                          check=True)
    assert "--no-parquet-tables" in done.stdout


def test_help_and_an_unknown_command_list_every_command():
    done = subprocess.run([sys.executable, "-m", "bridge", "--help"], capture_output=True, text=True, check=True)
    assert all(command in done.stdout for command in COMMANDS)
    done = subprocess.run([sys.executable, "-m", "bridge", "frobnicate"], capture_output=True, text=True)
    assert done.returncode == 2 and "invalid choice: 'frobnicate'" in done.stderr and "serve" in done.stderr
