"""MQTT topic names and filters: validity and matching (MQTT 3.1.1 §4.7; SwiftMQ docs "MQTT Swiftlet",
Topic Wildcard Filters).

Pure rules shared by the broker (bridge/mqtt/topics.py builds its trie on them) and by the rules-file
validation (mappings/rules/model.py)."""
from __future__ import annotations


class TopicError(ValueError):
    pass


def validate_topic_name(topic: str) -> None:
    """A topic a client publishes to: non-empty, no wildcards."""
    if not topic:
        raise TopicError("topic name is empty")
    if "+" in topic or "#" in topic:
        raise TopicError(f"topic name {topic!r} contains a wildcard")


def validate_topic_filter(topic_filter: str) -> None:
    """``+`` stands for one whole level, ``#`` only as the whole last level."""
    if not topic_filter:
        raise TopicError("topic filter is empty")
    levels = topic_filter.split("/")
    last = len(levels) - 1
    for i, level in enumerate(levels):
        if "#" in level and (level != "#" or i != last):
            raise TopicError(f"'#' must be a whole last level in {topic_filter!r}")
        if "+" in level and level != "+":
            raise TopicError(f"'+' must be a whole level in {topic_filter!r}")


def topic_matches(topic_filter: str, topic: str) -> bool:
    """One filter against one topic; ``$`` topics are not matched by a root-level wildcard."""
    if topic.startswith("$") and topic_filter[:1] in ("+", "#"):
        return False
    f = topic_filter.split("/")
    t = topic.split("/")
    for i, level in enumerate(f):
        if level == "#":
            return True
        if i >= len(t):
            return False
        if level != "+" and level != t[i]:
            return False
    return len(f) == len(t)


def filters_overlap(a: str, b: str) -> bool:
    """Could one topic match both filters? (Routing loops; the ACL's subscribe verdict.)"""
    fa, fb = a.split("/"), b.split("/")
    if fa[0][:1] == "$" and fb[0] in ("+", "#") or fb[0][:1] == "$" and fa[0] in ("+", "#"):
        return False
    for i in range(max(len(fa), len(fb))):
        la = fa[i] if i < len(fa) else None
        lb = fb[i] if i < len(fb) else None
        if la == "#" or lb == "#":
            return True
        if la is None or lb is None:
            return False
        if la != lb and la != "+" and lb != "+":
            return False
    return True


def filter_covers(outer: str, inner: str) -> bool:
    """Does ``outer`` match every topic that ``inner`` matches? (The ACL's subscribe verdict.)"""
    fo, fi = outer.split("/"), inner.split("/")
    if fi[0][:1] == "$" and fo[0] in ("+", "#"):
        return False
    for i, level in enumerate(fo):
        if level == "#":
            return True
        if i >= len(fi) or fi[i] == "#" or level != "+" and fi[i] != level:
            return False
    return len(fi) == len(fo)
