"""The subscription trie that matches publications to subscribers (rules in mappings/mqtt/topics.py)."""
from __future__ import annotations

from collections.abc import Iterator

from mappings.mqtt.topics import TopicError, topic_matches, validate_topic_filter, validate_topic_name

__all__ = ["SubscriptionTrie", "Subscription", "TopicError", "topic_matches", "validate_topic_filter",
           "validate_topic_name"]


class Subscription:
    """One client's subscription to one filter, with its delivery counter (for monitoring)."""

    __slots__ = ("topic_filter", "client_id", "qos", "matched", "rate", "_last")

    def __init__(self, topic_filter: str, client_id: str, qos: int) -> None:
        self.topic_filter = topic_filter
        self.client_id = client_id
        self.qos = qos
        self.matched = 0  # publications this subscription matched
        self.rate = 0.0   # matched per second, smoothed (updated by the server's sweep)
        self._last = 0

    def tick(self, dt: float) -> None:
        self.rate = 0.5 * (self.matched - self._last) / dt + 0.5 * self.rate
        self._last = self.matched


class _Node:
    __slots__ = ("children", "subscribers")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.subscribers: dict[str, Subscription] = {}  # client id -> subscription


class SubscriptionTrie:
    """Topic filter -> {client id: QoS}; ``match(topic)`` gives each client's highest QoS."""

    def __init__(self) -> None:
        self._root = _Node()
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def add(self, topic_filter: str, client_id: str, qos: int) -> bool:
        """Returns True when the subscription is new, False when it replaced one (new QoS)."""
        node = self._root
        for level in topic_filter.split("/"):
            child = node.children.get(level)
            if child is None:
                child = node.children[level] = _Node()
            node = child
        existing = node.subscribers.get(client_id)
        if existing is not None:
            existing.qos = qos
            return False
        node.subscribers[client_id] = Subscription(topic_filter, client_id, qos)
        self._count += 1
        return True

    def remove(self, topic_filter: str, client_id: str) -> bool:
        path: list[tuple[_Node, str]] = []
        node = self._root
        for level in topic_filter.split("/"):
            child = node.children.get(level)
            if child is None:
                return False
            path.append((node, level))
            node = child
        if node.subscribers.pop(client_id, None) is None:
            return False
        self._count -= 1
        # prune empty branches
        for parent, level in reversed(path):
            child = parent.children[level]
            if child.subscribers or child.children:
                break
            del parent.children[level]
        return True

    def match(self, topic: str) -> dict[str, int]:
        result: dict[str, int] = {}
        levels = topic.split("/")
        dollar = topic.startswith("$")
        self._walk(self._root, levels, 0, result, dollar)
        return result

    def _walk(self, node: _Node, levels: list[str], i: int, result: dict[str, int], dollar: bool) -> None:
        children = node.children
        if i == len(levels):
            self._collect(node, result)
            # "a/#" also matches "a"
            hash_node = children.get("#")
            if hash_node is not None:
                self._collect(hash_node, result)
            return
        wildcards_ok = not (dollar and i == 0)  # $-topics are not matched by root wildcards
        if wildcards_ok:
            hash_node = children.get("#")
            if hash_node is not None:
                self._collect(hash_node, result)
            plus = children.get("+")
            if plus is not None:
                self._walk(plus, levels, i + 1, result, dollar)
        exact = children.get(levels[i])
        if exact is not None:
            self._walk(exact, levels, i + 1, result, dollar)

    @staticmethod
    def _collect(node: _Node, result: dict[str, int]) -> None:
        for client_id, sub in node.subscribers.items():
            sub.matched += 1
            prev = result.get(client_id)
            if prev is None or sub.qos > prev:
                result[client_id] = sub.qos

    def subscriptions(self) -> Iterator[Subscription]:
        stack = [self._root]
        while stack:
            node = stack.pop()
            yield from node.subscribers.values()
            stack.extend(node.children.values())
