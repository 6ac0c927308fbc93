"""The values behind the lines convlog.render_lines writes, kept per hour file, so that the file's Parquet sidecar
is built from them (bridge/convlog_parquet.columns_table) instead of parsing its JSON back: that parse cost
~8 µs a line on the sidecar thread, ~16 µs a routed message (docs/conversion-log.md, "Parquet sidecars").

Two lines a message, ingress then egress, each from one LineTemplate of the message's pair: a line is its
template's fixed values with the message's variable ones, so the pair and those values are the line."""
from __future__ import annotations

from array import array
from typing import Any, NamedTuple

MAX_MESSAGES = 400_000   # values kept for one file at most (~45 MB); a larger file's sidecar parses its JSON


class TemplateFields(NamedTuple):
    """What a sidecar takes from a LineTemplate (its fields, not its encoders): sent to the sidecar process."""

    variable: tuple[str, ...]
    values: dict[str, Any]


class LineColumns:
    """One batch's messages (RecordLines.values), in line order: per message its template pair (RecordLines' cache
    entry: ingress template, egress template, findings), receive time, key, sizes and redelivery count; the
    egress time of the whole batch."""

    __slots__ = ("pairs", "received", "keys", "sizes", "out_sizes", "redelivered", "now")

    def __init__(self, now: float, pairs: list[tuple[Any, ...]], received: list[float], keys: list[str],
                 sizes: list[int], out_sizes: list[int], redelivered: list[int]) -> None:
        self.now = now
        self.pairs = pairs
        self.received = received
        self.keys = keys
        self.sizes = sizes
        self.out_sizes = out_sizes
        self.redelivered = redelivered


class FileColumns:
    """Every line of one hour file, when all of them came from render calls of this process (the writer
    drops it for a file it did not create, or that got any other line): ``size`` is the bytes written."""

    __slots__ = ("templates", "_index", "pair", "received", "now", "keys", "sizes", "out_sizes", "redelivered",
                 "size")

    def __init__(self) -> None:
        self.templates: list[tuple[Any, ...]] = []   # distinct pairs; ``pair`` holds an index into it per message
        self._index: dict[int, int] = {}             # id(pair) -> index (the list keeps the pair alive)
        self.pair = array("q")
        self.received = array("d")
        self.now = array("d")
        self.keys: list[str] = []
        self.sizes = array("q")
        self.out_sizes = array("q")
        self.redelivered = array("q")
        self.size = 0

    def add(self, cols: LineColumns) -> bool:
        """Keep ``cols``; False when they do not fit (a size beyond 64 bits, or more than MAX_MESSAGES in the file):
        the file's values are then unusable."""
        if len(self.pair) + len(cols.pairs) > MAX_MESSAGES:
            return False
        index, templates, pair = self._index, self.templates, self.pair
        for p in cols.pairs:
            i = index.get(id(p))
            if i is None:
                i = index[id(p)] = len(templates)
                templates.append(p)
            pair.append(i)
        try:
            self.sizes.extend(cols.sizes)
            self.out_sizes.extend(cols.out_sizes)
            self.redelivered.extend(cols.redelivered)
            self.received.extend(cols.received)
        except (OverflowError, TypeError):
            return False
        self.now.extend([cols.now] * len(cols.pairs))
        self.keys.extend(cols.keys)
        return True

    @property
    def messages(self) -> int:
        return len(self.pair)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled for the sidecar process (bridge/convlog_sidecar_process): each template pair as the fields
        columns_table reads (``variable``, ``values``); the id index stays behind."""
        state = {name: getattr(self, name) for name in self.__slots__ if name not in ("templates", "_index")}
        state["templates"] = [tuple(TemplateFields(t.variable, t.values) for t in p[:2]) for p in self.templates]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self, name, value)
        self._index = {}
