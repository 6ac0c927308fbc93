"""Per-topic access control in mosquitto's ``acl_file`` format (mosquitto docs "mosquitto.conf", acl_file).

    # comment
    topic read sensors/#          <- before any ``user`` line: clients without a user name
    user alice                    <- the lines below, up to the next ``user``, are alice's
    topic readwrite plant/alice/#
    topic deny plant/alice/secret
    pattern write devices/%c/up   <- every client; %c its client id, %u its user name

Access is ``read``, ``write``, ``readwrite`` (the default when omitted) or ``deny``. Once a file is
configured everything not granted is refused. A ``deny`` line that matches wins over every grant, as in
mosquitto 2. A pattern whose %c or %u value contains ``/``, ``+`` or ``#`` grants nothing (the value could
otherwise widen the topic), nor does a %u pattern for a client without a user name. ``$`` topics match only
rules that name them (``#`` does not reach ``$SYS``), as in subscriptions.

A client's rules are resolved once per connection (``Acl.grants``). For a subscription, ``Grants.subscribe``
tells whether every topic it can match is readable (no check per message), none is (refused: SUBACK 0x80),
or only some are (each publication it matches is checked, the answer cached per topic).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path

from bridge.mqtt.passwords import AuthFileError
from mappings.mqtt.topics import TopicError, filter_covers, filters_overlap, topic_matches, validate_topic_filter

READ, WRITE = 1, 2
_ACCESS = {"read": READ, "write": WRITE, "readwrite": READ | WRITE, "deny": 0}
_CACHE_MAX = 4096


class AclError(AuthFileError):
    """The ACL file cannot be used; the problem names the file and line."""

    def __init__(self, problem: str) -> None:
        super().__init__([problem])


class Verdict(IntEnum):
    NONE = 0      # no topic the filter matches is readable
    SOME = 1      # some are: check each publication
    ALL = 2       # all are


@dataclass(frozen=True, slots=True)
class Rule:
    access: int          # READ | WRITE bits; 0: deny
    topic: str           # a topic filter, %c/%u not yet substituted for a pattern
    line: int


@dataclass(slots=True)
class Acl:
    anonymous: list[Rule] = field(default_factory=list)
    users: dict[str, list[Rule]] = field(default_factory=dict)
    patterns: list[Rule] = field(default_factory=list)
    source: str = ""

    def grants(self, client_id: str, user: str | None) -> Grants:
        rules = list(self.users.get(user, ()) if user is not None else self.anonymous)
        for rule in self.patterns:
            topic = _substitute(rule.topic, client_id, user)
            if topic is not None:
                rules.append(Rule(rule.access, topic, rule.line))
        return Grants([(r.access, r.topic) for r in rules if r.access], [r.topic for r in rules if not r.access])


def _substitute(topic: str, client_id: str, user: str | None) -> str | None:
    for key, value in (("%c", client_id), ("%u", user)):
        if key in topic:
            if not value or any(ch in value for ch in "/+#"):
                return None
            topic = topic.replace(key, value)
    return topic


def parse_acl(text: str, source: str = "acl_file") -> Acl:
    acl = Acl(source=source)
    current: list[Rule] = acl.anonymous
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        rest = rest.strip()
        where = f"{source}:{number}"
        if keyword == "user":
            if not rest:
                raise AclError(f"{where}: 'user' needs a user name")
            current = acl.users.setdefault(rest, [])
            continue
        if keyword not in ("topic", "pattern"):
            raise AclError(f"{where}: {keyword!r} is not 'user', 'topic' or 'pattern'")
        first, _, topic = rest.partition(" ")
        if first in _ACCESS and topic.strip():
            access, topic = _ACCESS[first], topic.strip()
        else:
            access, topic = READ | WRITE, rest
        if not topic:
            raise AclError(f"{where}: '{keyword}' needs a topic")
        try:
            validate_topic_filter(topic)
        except TopicError as exc:
            raise AclError(f"{where}: {exc}") from None
        (acl.patterns if keyword == "pattern" else current).append(Rule(access, topic, number))
    return acl


def read_acl(path: Path) -> Acl:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AclError(f"{path}: cannot read the ACL file: {exc}") from None
    return parse_acl(text, str(path))


class Grants:
    """One client's resolved rules: what it may publish to and read."""

    __slots__ = ("allow", "deny", "_cache")

    def __init__(self, allow: list[tuple[int, str]], deny: list[str]) -> None:
        self.allow = allow
        self.deny = deny
        self._cache: dict[tuple[str, int], bool] = {}   # (topic, READ or WRITE) -> allowed

    def _may(self, topic: str, access: int) -> bool:
        known = self._cache.get((topic, access))
        if known is None:
            known = not any(topic_matches(d, topic) for d in self.deny) and any(
                a & access and topic_matches(f, topic) for a, f in self.allow)
            if len(self._cache) >= _CACHE_MAX:
                self._cache.clear()
            self._cache[(topic, access)] = known
        return known

    def may_publish(self, topic: str) -> bool:
        return self._may(topic, WRITE)

    def may_read(self, topic: str) -> bool:
        return self._may(topic, READ)

    def subscribe(self, topic_filter: str) -> Verdict:
        if any(filter_covers(d, topic_filter) for d in self.deny):
            return Verdict.NONE
        readable = [f for a, f in self.allow if a & READ]
        if not any(filters_overlap(f, topic_filter) for f in readable):
            return Verdict.NONE
        if any(filter_covers(f, topic_filter) for f in readable) and not any(
                filters_overlap(d, topic_filter) for d in self.deny):
            return Verdict.ALL
        return Verdict.SOME


__all__ = ["Acl", "AclError", "Grants", "Verdict", "parse_acl", "read_acl"]
