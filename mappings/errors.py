"""The one error type of the mapping library: every failure names what, where and why."""
from __future__ import annotations


class MappingError(ValueError):
    """A conversion or decode failed.

    ``structure`` is what was being read or built ("MQMD", "MQRFH2", "dt=i4 property 'x'",
    "selector"), ``field`` the field or property name, ``offset`` a byte offset (wire formats),
    a column (selectors) or a line (XML/rules) when one applies.
    """

    def __init__(
        self,
        message: str,
        *,
        structure: str | None = None,
        field: str | None = None,
        offset: int | None = None,
    ) -> None:
        self.reason = message
        self.structure = structure
        self.field = field
        self.offset = offset
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.structure:
            where.append(self.structure)
        if self.offset is not None:
            where.append(f"at offset {self.offset}")
        prefix = " ".join(where)
        if self.field:
            prefix = f"{prefix}: {self.field}" if prefix else self.field
        return f"{prefix}: {self.reason}" if prefix else self.reason
