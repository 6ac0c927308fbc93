"""What a conversion lost or coerced: returned beside every result, logged by the bridge."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Change(StrEnum):
    DROPPED = "dropped"        # a property, header or body part did not survive
    COERCED = "coerced"        # a typed value was turned into another type (usually String)
    TRUNCATED = "truncated"    # a value was shortened to fit (e.g. UserIdentifier to 12 bytes)
    DEFAULTED = "defaulted"    # a missing value was filled with a documented default
    RENAMED = "renamed"        # a name was changed to fit the target's rules


@dataclass(frozen=True, slots=True)
class Finding:
    change: Change
    name: str                  # property / header / field name as in the source message
    detail: str = ""           # human-readable: "i8 -> String", "not valid UTF-8", "> 23 bytes"

    def as_dict(self) -> dict[str, str]:
        return {"change": self.change.value, "name": self.name, "detail": self.detail}


@dataclass(slots=True)
class ConversionReport:
    """Accumulates findings during one conversion. Mutable while the conversion runs."""

    findings: list[Finding] = field(default_factory=list)

    def add(self, change: Change, name: str, detail: str = "") -> None:
        self.findings.append(Finding(change, name, detail))

    def dropped(self, name: str, detail: str = "") -> None:
        self.add(Change.DROPPED, name, detail)

    def coerced(self, name: str, detail: str = "") -> None:
        self.add(Change.COERCED, name, detail)

    def truncated(self, name: str, detail: str = "") -> None:
        self.add(Change.TRUNCATED, name, detail)

    def defaulted(self, name: str, detail: str = "") -> None:
        self.add(Change.DEFAULTED, name, detail)

    def renamed(self, name: str, detail: str = "") -> None:
        self.add(Change.RENAMED, name, detail)

    def extend(self, other: ConversionReport) -> None:
        self.findings.extend(other.findings)

    def __bool__(self) -> bool:  # "was anything lost or coerced?"
        return bool(self.findings)

    def as_list(self) -> list[dict[str, str]]:
        return [f.as_dict() for f in self.findings]
