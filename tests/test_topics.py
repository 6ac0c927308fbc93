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


ops = st.lists(st.one_of(
    st.tuples(st.just("add"), filters, st.sampled_from(["c1", "c2"]), st.integers(0, 2)),
    st.tuples(st.just("remove"), filters, st.sampled_from(["c1", "c2"]), st.just(0)),
    st.tuples(st.just("match"), topics, st.just(""), st.just(0)),
), max_size=40)


@given(ops)
@settings(max_examples=300)
def test_kept_matches_follow_every_change_and_count_every_match(steps: list[tuple[str, str, str, int]]) -> None:
    """Matches kept per topic (MATCH_CACHE) equal a fresh walk after any add, QoS change or remove, and each
    subscription's ``matched`` counts every publication it matched, kept or walked."""
    trie = SubscriptionTrie()
    final: dict[tuple[str, str], int] = {}
    counted: dict[tuple[str, str], int] = {}
    for op, a, client, qos in steps:
        if op == "add":
            trie.add(a, client, qos)
            final[(a, client)] = qos
            counted.setdefault((a, client), 0)
        elif op == "remove":
            assert trie.remove(a, client) == ((a, client) in final)
            final.pop((a, client), None)
            counted.pop((a, client), None)
        else:
            expected: dict[str, int] = {}
            for (f, c), q in final.items():
                if topic_matches(f, a):
                    expected[c] = max(expected.get(c, -1), q)
                    counted[(f, c)] += 1
            assert trie.match(a) == expected
    assert {(s.topic_filter, s.client_id): s.matched for s in trie.subscriptions()} == counted


def test_long_topics_are_not_kept_and_the_kept_ones_are_bounded() -> None:
    from bridge.mqtt import topics as T

    trie = SubscriptionTrie()
    trie.add("#", "c", 1)
    long_topic = "a/" + "x" * T.MATCH_CACHE_TOPIC
    assert trie.match(long_topic) == {"c": 1}
    assert long_topic not in trie._cache
    for i in range(T.MATCH_CACHE + 10):
        assert trie.match(f"t/{i}") == {"c": 1}
    assert 0 < len(trie._cache) <= T.MATCH_CACHE
    assert next(trie.subscriptions()).matched == T.MATCH_CACHE + 11


def test_no_local_and_subscription_identifiers_are_never_answered_from_kept_matches() -> None:
    trie = SubscriptionTrie()
    trie.add("a/#", "c1", 1)
    assert trie.match("a/b") == {"c1": 1} and "a/b" in trie._cache
    trie.add("a/b", "c2", 1, options=0x04)   # No Local: the publisher decides
    assert trie._cache == {}
    assert trie.match("a/b", origin="c2") == {"c1": 1}
    assert trie.match("a/b", origin="c1") == {"c1": 1, "c2": 1}
    ids: dict[str, list[int]] = {}
    trie.add("a/+", "c1", 2, sub_id=7)
    assert trie.match("a/b", origin="c2", ids=ids) == {"c1": 2} and ids == {"c1": [7]}
    assert trie._cache == {}
