"""What a route does with each message, as the router's worker offers it to the parts that run beside it (the
direct intake, direct.py): the verdict on one message, its backout message, and the records once it is
committed."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from bridge.connectors.base import Inbound, Outbound
from mappings.report import ConversionReport
from mappings.rules.model import Route

Good = tuple[Inbound, Outbound, str, ConversionReport]   # a converted message: (message, converted, type, report)


@dataclass(slots=True)
class Poison:
    """A message for the route's backout destination: why, and whether it is past the backout threshold."""
    item: Inbound
    reason: str
    past: bool


class RouteSteps(Protocol):
    route: Route
    filtered: int
    last_error: str | None

    def classify(self, item: Inbound) -> Good | Poison | None:
        """Convert it (Good), back it out (Poison), or nothing (None: the route's selector did not match)."""

    def backout_outbound(self, poison: list[Poison]) -> list[Outbound]:
        """The backout destination's messages for ``poison``."""

    def accepted_now(self, good: list[Good]) -> None:
        """``good`` is at the target: count and record it."""

    def backed_out_now(self, poison: list[Poison]) -> None:
        """``poison`` is at the backout destination: count, log and record it."""
