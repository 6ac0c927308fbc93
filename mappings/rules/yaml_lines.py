"""Where a key path sits in YAML (or JSON) text: the line that error messages name."""
from __future__ import annotations

from typing import Any

import yaml


def line_of(text: str, loc: tuple[Any, ...]) -> int | None:
    """1-based line of the deepest part of ``loc`` (keys and list indexes) found in ``text``."""
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return None
    line = None
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            match = next(((k, v) for k, v in node.value if k.value == str(key)), None)
            if match is None:
                return line
            line, node = match[0].start_mark.line + 1, match[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            return line
    return line
