"""The ACL rules (bridge/mqtt/acl.py) against brute force: every topic name of a small universe, matched
one by one, is the reference for the filter relations and the subscribe verdicts; and the file parser."""
from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.mqtt.acl import AclError, Verdict, parse_acl
from mappings.mqtt.topics import filter_covers, filters_overlap, topic_matches

# topic names of 1..4 levels over these: "c" stands for any other name, "$x" for a "$" level
NAMES = ("a", "b", "c", "$x", "")
UNIVERSE = [list(t) for n in range(1, 5) for t in itertools.product(NAMES, repeat=n)]


def _matched(flt: list[str]) -> set[tuple[str, ...]]:
    return {tuple(t) for t in UNIVERSE if topic_matches("/".join(flt), "/".join(t))}


@st.composite
def filters(draw: st.DrawFn) -> list[str]:
    n = draw(st.integers(1, 3))
    levels = draw(st.lists(st.sampled_from(("a", "b", "$x", "+")), min_size=n, max_size=n))
    if draw(st.booleans()):
        levels.append("#")
    return levels


@settings(max_examples=400, deadline=None)
@given(filters(), filters())
def test_covers_and_overlaps_agree_with_brute_force(a: list[str], b: list[str]) -> None:
    ma, mb = _matched(a), _matched(b)
    assert filter_covers("/".join(a), "/".join(b)) == (mb <= ma), (a, b)
    assert filters_overlap("/".join(a), "/".join(b)) == bool(ma & mb), (a, b)


def test_matches_follows_the_mqtt_rules() -> None:
    assert topic_matches("a/#", "a") and topic_matches("a/#", "a/b/c")
    assert topic_matches("+", "") and not topic_matches("+", "a/b")
    assert not topic_matches("#", "$SYS/x") and not topic_matches("+/x", "$SYS/x")
    assert topic_matches("$SYS/#", "$SYS/x")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(("read", "write", "readwrite", "deny")), filters()), max_size=4),
       filters())
def test_subscribe_verdicts_are_sound(rules: list[tuple[str, list[str]]], flt: list[str]) -> None:
    """ALL: every topic the filter matches is readable (no check per message is needed); NONE: none is."""
    text = "user u\n" + "".join(f"topic {access} {'/'.join(f)}\n" for access, f in rules)
    grants = parse_acl(text).grants("cid", "u")
    readable = {t for t in _matched(flt) if grants.may_read("/".join(t))}
    verdict = grants.subscribe("/".join(flt))
    if verdict is Verdict.ALL:
        assert readable == _matched(flt)
    elif verdict is Verdict.NONE:
        assert readable == set()


def test_the_rules_of_the_file() -> None:
    acl = parse_acl("""
# comment
topic read public/#
user alice smith
topic plant/#
topic deny plant/secret/#
topic write out/alice
pattern write devices/%c/up
pattern read users/%u/#
""")
    alice = acl.grants("dev-1", "alice smith")
    assert alice.may_read("plant/a") and alice.may_publish("plant/a")          # readwrite when omitted
    assert not alice.may_read("plant/secret/x") and not alice.may_publish("plant/secret")   # deny wins
    assert alice.may_publish("out/alice") and not alice.may_read("out/alice")
    assert alice.may_publish("devices/dev-1/up") and not alice.may_publish("devices/dev-2/up")
    assert alice.may_read("users/alice smith/inbox") and not alice.may_read("public/x")   # anonymous lines only
    anonymous = acl.grants("dev-1", None)
    assert anonymous.may_read("public/x") and not anonymous.may_publish("public/x")
    assert not anonymous.may_read("users//inbox")       # no %u for a client without a user name
    # a client id that would widen the pattern grants nothing
    for cid in ("a/b", "+", "#"):
        grants = acl.grants(cid, "alice smith")
        assert not grants.may_publish(f"devices/{cid}/up") and not grants.may_publish("devices/x/up")
    assert acl.grants("x", "nobody").may_read("plant/a") is False       # a user without lines: nothing


@pytest.mark.parametrize(("text", "line", "what"), [
    ("user alice\ntopic read a/#/b\n", 2, "'#' must be"),
    ("topic read a+/b\n", 1, "'+' must be"),
    ("\n\nuser\n", 3, "needs a user name"),
    ("topic\n", 1, "needs a topic"),
    ("# ok\nsubscribe a\n", 2, "is not 'user', 'topic' or 'pattern'"),
])
def test_a_bad_file_is_refused_naming_the_line(text: str, line: int, what: str) -> None:
    with pytest.raises(AclError) as err:
        parse_acl(text, "acl.conf")
    assert f"acl.conf:{line}:" in str(err.value) and what in str(err.value)
