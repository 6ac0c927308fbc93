"""The subscription trie that matches publications to subscribers (rules in mappings/mqtt/topics.py)."""
from __future__ import annotations

from collections.abc import Iterator

from mappings.mqtt.topics import TopicError, topic_matches, validate_topic_filter, validate_topic_name

__all__ = ["SubscriptionTrie", "Subscription", "TopicError", "topic_matches", "validate_topic_filter",
           "validate_topic_name"]


NO_LOCAL = 0x04              # MQTT 5 subscription options: not sent the subscriber's own publications
RETAIN_AS_PUBLISHED = 0x08   # forwarded with the RETAIN flag it was published with (else 0)
SHARED_GROUP = 0x40          # (a reserved options bit) the entry is a shared subscription's group (shared.py)
ACL_CHECK = 0x80             # (not an options bit) the subscriber may read only some topics it matches (acl.py)


class Subscription:
    """One client's subscription to one filter, with its delivery counter (for monitoring).

    ``grant`` is what a match yields: the QoS in bits 0-1, RETAIN_AS_PUBLISHED; ``no_local`` and ``sub_id``
    (the MQTT 5 Subscription Identifier, 0: none) decide per publication."""

    __slots__ = ("topic_filter", "client_id", "qos", "grant", "no_local", "sub_id", "matched", "rate", "_last")

    def __init__(self, topic_filter: str, client_id: str, qos: int, options: int = 0,
                 sub_id: int | None = None, checked: bool = False) -> None:
        self.topic_filter = topic_filter
        self.client_id = client_id
        self.set(qos, options, sub_id, checked)
        self.matched = 0  # publications this subscription matched
        self.rate = 0.0   # matched per second, smoothed (updated by the server's sweep)
        self._last = 0

    def set(self, qos: int, options: int, sub_id: int | None, checked: bool = False) -> None:
        self.qos = qos
        self.grant = qos | (options & (RETAIN_AS_PUBLISHED | SHARED_GROUP)) | (ACL_CHECK if checked else 0)
        self.no_local = bool(options & NO_LOCAL)
        self.sub_id = sub_id or 0

    def tick(self, dt: float) -> None:
        self.rate = 0.5 * (self.matched - self._last) / dt + 0.5 * self.rate
        self._last = self.matched


def _merged(prev: int, grant: int) -> int:
    """Two subscriptions of one client match: the higher QoS, Retain As Published if either has it, and an
    ACL check only if both need one (a subscription whose every topic is readable vouches for this one)."""
    return max(prev & 3, grant & 3) | ((prev | grant) & RETAIN_AS_PUBLISHED) | (prev & grant & ACL_CHECK)


def _special(sub: Subscription) -> int:
    return 1 if sub.no_local or sub.sub_id else 0


class _Node:
    __slots__ = ("children", "subscribers", "special")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.subscribers: dict[str, Subscription] = {}  # client id -> subscription
        self.special = 0   # subscribers with No Local or a Subscription Identifier (else the plain loop)


# Topics whose matches ``match`` keeps (while no subscription is special): a broker's publishers mostly repeat
# their topics, and walking the trie was ~1 µs of the ~18 µs the event loop spends on a routed message
# (bench/HISTORY.md, session 26). Any change of a subscription empties it; so does reaching MATCH_CACHE topics.
# A topic longer than MATCH_CACHE_TOPIC is never kept, so a client publishing long unique topics cannot make
# it hold more than about MATCH_CACHE * MATCH_CACHE_TOPIC characters.
MATCH_CACHE = 4096
MATCH_CACHE_TOPIC = 256


class SubscriptionTrie:
    """Topic filter -> {client id: subscription}; ``match(topic)`` gives each client's highest QoS (one delivery
    per client, for all its matching subscriptions: MQTT 5 §3.3.4 allows it, and it carries every matching
    Subscription Identifier)."""

    def __init__(self) -> None:
        self._root = _Node()
        self._count = 0
        self.special = 0   # subscriptions with No Local or a Subscription Identifier (match needs ``ids`` then)
        # topic -> (match's result, the subscriptions it counted): see MATCH_CACHE
        self._cache: dict[str, tuple[dict[str, int], tuple[Subscription, ...]]] = {}

    def __len__(self) -> int:
        return self._count

    def add(self, topic_filter: str, client_id: str, qos: int, options: int = 0, sub_id: int | None = None,
            checked: bool = False) -> bool:
        """Returns True when the subscription is new, False when it replaced one (new QoS or options).
        ``checked``: each publication it matches is checked against the subscriber's ACL (ACL_CHECK)."""
        self._cache.clear()
        node = self._root
        for level in topic_filter.split("/"):
            child = node.children.get(level)
            if child is None:
                child = node.children[level] = _Node()
            node = child
        existing = node.subscribers.get(client_id)
        if existing is not None:
            before = _special(existing)
            existing.set(qos, options, sub_id, checked)
            change = _special(existing) - before
            node.special += change
            self.special += change
            return False
        sub = node.subscribers[client_id] = Subscription(topic_filter, client_id, qos, options, sub_id, checked)
        node.special += _special(sub)
        self.special += _special(sub)
        self._count += 1
        return True

    def get(self, topic_filter: str, client_id: str) -> Subscription | None:
        node: _Node | None = self._root
        for level in topic_filter.split("/"):
            node = node.children.get(level) if node is not None else None
        return node.subscribers.get(client_id) if node is not None else None

    def remove(self, topic_filter: str, client_id: str) -> bool:
        self._cache.clear()
        path: list[tuple[_Node, str]] = []
        node = self._root
        for level in topic_filter.split("/"):
            child = node.children.get(level)
            if child is None:
                return False
            path.append((node, level))
            node = child
        sub = node.subscribers.pop(client_id, None)
        if sub is None:
            return False
        node.special -= _special(sub)
        self.special -= _special(sub)
        self._count -= 1
        # prune empty branches
        for parent, level in reversed(path):
            child = parent.children[level]
            if child.subscribers or child.children:
                break
            del parent.children[level]
        return True

    def match(self, topic: str, origin: str | None = None, ids: dict[str, list[int]] | None = None) -> dict[str, int]:
        """Client id -> grant (QoS | RETAIN_AS_PUBLISHED) of the subscriptions ``topic`` matches, leaving
        out a No Local subscription of the publisher ``origin``; ``ids`` collects Subscription Identifiers.
        The result may be the one kept for the topic (MATCH_CACHE): callers only read it."""
        if self.special:   # No Local and Subscription Identifiers depend on the publication: never kept
            result: dict[str, int] = {}
            self._walk(self._root, topic.split("/"), 0, result, topic.startswith("$"), origin, ids, None)
            return result
        kept = self._cache.get(topic)
        if kept is not None:
            result, counted = kept
            for sub in counted:
                sub.matched += 1
            return result
        result = {}
        found: list[Subscription] = []
        self._walk(self._root, topic.split("/"), 0, result, topic.startswith("$"), origin, ids, found)
        if len(topic) <= MATCH_CACHE_TOPIC:
            if len(self._cache) >= MATCH_CACHE:
                self._cache.clear()
            self._cache[topic] = (result, tuple(found))
        return result

    def _walk(self, node: _Node, levels: list[str], i: int, result: dict[str, int], dollar: bool,
              origin: str | None, ids: dict[str, list[int]] | None, found: list[Subscription] | None) -> None:
        children = node.children
        if i == len(levels):
            self._collect(node, result, origin, ids, found)
            # "a/#" also matches "a"
            hash_node = children.get("#")
            if hash_node is not None:
                self._collect(hash_node, result, origin, ids, found)
            return
        wildcards_ok = not (dollar and i == 0)  # $-topics are not matched by root wildcards
        if wildcards_ok:
            hash_node = children.get("#")
            if hash_node is not None:
                self._collect(hash_node, result, origin, ids, found)
            plus = children.get("+")
            if plus is not None:
                self._walk(plus, levels, i + 1, result, dollar, origin, ids, found)
        exact = children.get(levels[i])
        if exact is not None:
            self._walk(exact, levels, i + 1, result, dollar, origin, ids, found)

    @staticmethod
    def _collect(node: _Node, result: dict[str, int], origin: str | None, ids: dict[str, list[int]] | None,
                 found: list[Subscription] | None) -> None:
        if not node.special:   # the hot path: no No Local, no Subscription Identifier here
            for client_id, sub in node.subscribers.items():
                sub.matched += 1
                grant = sub.grant
                prev = result.get(client_id)
                if prev is None:
                    result[client_id] = grant
                elif prev != grant:
                    result[client_id] = _merged(prev, grant)
            if found is not None:
                found.extend(node.subscribers.values())
            return
        for client_id, sub in node.subscribers.items():
            sub.matched += 1
            if sub.no_local and client_id == origin:
                continue
            grant = sub.grant
            prev = result.get(client_id)
            if prev is None:
                result[client_id] = grant
            elif prev != grant:
                result[client_id] = _merged(prev, grant)
            if sub.sub_id and ids is not None:
                ids.setdefault(client_id, []).append(sub.sub_id)

    def subscriptions(self) -> Iterator[Subscription]:
        stack = [self._root]
        while stack:
            node = stack.pop()
            yield from node.subscribers.values()
            stack.extend(node.children.values())
