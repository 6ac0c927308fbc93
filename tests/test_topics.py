"""Topic validation and the subscription trie, checked against the reference matcher."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.mqtt.topics import (
    SubscriptionTrie,
    TopicError,
    topic_matches,
    validate_topic_filter,
    validate_topic_name,
)


@pytest.mark.parametrize("f", ["a", "a/b", "+", "#", "a/+/c", "a/#", "+/+", "/", "$SYS/#", "a//b", "+/#"])
def test_valid_filters(f: str) -> None:
    validate_topic_filter(f)


@pytest.mark.parametrize("f", ["", "a/#/b", "a#", "a/b#", "a+", "a/+b", "#/a", "++"])
def test_invalid_filters(f: str) -> None:
    with pytest.raises(TopicError):
        validate_topic_filter(f)


@pytest.mark.parametrize("t", ["", "a/+", "#", "a/b#"])
def test_invalid_topic_names(t: str) -> None:
    with pytest.raises(TopicError):
        validate_topic_name(t)


@pytest.mark.parametrize(
    "f,t,expected",
    [
        ("a/#", "a", True),
        ("a/#", "a/b/c", True),
        ("a/+", "a/b", True),
        ("a/+", "a/b/c", False),
        ("+/+", "/x", True),
        ("+", "/x", False),
        ("#", "$SYS/broker", False),
        ("+/broker", "$SYS/broker", False),
        ("$SYS/#", "$SYS/broker/uptime", True),
        ("a/b", "a/b/", False),
        ("a/+/", "a/b/", True),
    ],
)
def test_reference_matcher(f: str, t: str, expected: bool) -> None:
    assert topic_matches(f, t) is expected
    trie = SubscriptionTrie()
    trie.add(f, "c", 1)
    assert ("c" in trie.match(t)) is expected


levels = st.sampled_from(["a", "b", "", "$x", "c"])
topics = st.lists(levels, min_size=1, max_size=4).map("/".join).filter(bool)
filter_levels = st.sampled_from(["a", "b", "", "+", "$x"])
filters = st.builds(
    lambda ls, hash_: "/".join(ls + (["#"] if hash_ else [])),
    st.lists(filter_levels, min_size=0, max_size=4),
    st.booleans(),
).filter(bool)


@given(
    st.lists(st.tuples(filters, st.sampled_from(["c1", "c2", "c3"]), st.integers(0, 2)), max_size=12),
    st.lists(topics, min_size=1, max_size=5),
)
@settings(max_examples=400)
def test_trie_agrees_with_reference(subs: list[tuple[str, str, int]], pubs: list[str]) -> None:
    trie = SubscriptionTrie()
    final: dict[tuple[str, str], int] = {}
    for f, c, q in subs:
        trie.add(f, c, q)
        final[(f, c)] = q
    for t in pubs:
        expected: dict[str, int] = {}
        for (f, c), q in final.items():
            if topic_matches(f, t):
                expected[c] = max(expected.get(c, -1), q)
        assert trie.match(t) == expected
    # removing everything leaves an empty trie
    for f, c in final:
        assert trie.remove(f, c)
    assert len(trie) == 0
    assert all(trie.match(t) == {} for t in pubs)
