"""Hypothesis strategies for the JMS model (shared by the JMS mapping tests)."""
from __future__ import annotations

from hypothesis import strategies as st

from mappings.jms.model import (
    INTEGER_RANGES,
    BytesBody,
    DeliveryMode,
    Destination,
    DestinationKind,
    JavaType,
    JavaValue,
    JmsHeaders,
    JmsMessage,
    MapBody,
    NoBody,
    ObjectBody,
    StreamBody,
    TextBody,
    TypedMap,
    is_jms_identifier,
)
from mappings.jms.typed_xml import float_range_problem, xml_char_problem

# characters() excludes surrogates by default; also drop the ones XML 1.0 cannot carry.
xml_chars = st.characters(blacklist_categories=("Cs",)).filter(lambda c: xml_char_problem(c) is None)
xml_text = st.text(alphabet=xml_chars, max_size=30)
bmp_xml_char = st.characters(max_codepoint=0xFFFF, blacklist_categories=("Cs",)).filter(
    lambda c: xml_char_problem(c) is None
)


def java_values(*, xml_safe: bool = True, nullable: bool = True) -> st.SearchStrategy[JavaValue]:
    """Every Java type, with values the dt= XML form can carry when ``xml_safe``."""
    text = xml_text if xml_safe else st.text(max_size=30)
    char = bmp_xml_char if xml_safe else st.characters(max_codepoint=0xFFFF)

    def floats(jtype: JavaType, width: int) -> st.SearchStrategy[float]:
        s = st.floats(width=width)
        if xml_safe:
            s = s.filter(lambda f: float_range_problem(f, jtype) is None)
        return s

    strategies = [
        st.builds(JavaValue, st.just(JavaType.BOOLEAN), st.booleans()),
        *(
            st.builds(JavaValue, st.just(t), st.integers(lo, hi))
            for t, (lo, hi) in INTEGER_RANGES.items()
        ),
        st.builds(JavaValue, st.just(JavaType.FLOAT), floats(JavaType.FLOAT, 32)),
        st.builds(JavaValue, st.just(JavaType.DOUBLE), floats(JavaType.DOUBLE, 64)),
        st.builds(JavaValue, st.just(JavaType.CHAR), char),
        st.builds(JavaValue, st.just(JavaType.STRING), (st.none() | text) if nullable else text),
        st.builds(JavaValue, st.just(JavaType.BYTES),
                  (st.none() | st.binary(max_size=20)) if nullable else st.binary(max_size=20)),
    ]
    return st.one_of(strategies)


def typed_maps(*, xml_safe: bool = True, max_size: int = 8) -> st.SearchStrategy[TypedMap]:
    keys = st.text(alphabet=xml_chars, min_size=1, max_size=12) if xml_safe else st.text(min_size=1,
                                                                                          max_size=12)
    return st.lists(
        st.tuples(keys, java_values(xml_safe=xml_safe)), max_size=max_size, unique_by=lambda kv: kv[0]
    ).map(TypedMap)


# ------------------------------------------------------------------ whole messages


identifiers = st.one_of(
    st.from_regex(r"[A-Za-z_$][A-Za-z0-9_$]{0,10}", fullmatch=True),
    st.from_regex(r"JMSX[A-Za-z]{1,6}", fullmatch=True),
    st.from_regex(r"JMS_[A-Za-z]{1,6}", fullmatch=True),
    st.from_regex(r"[\u00e0-\u00ff][a-z0-9]{0,4}", fullmatch=True),
).filter(is_jms_identifier)

_dest_name = st.text(alphabet=xml_chars.filter(lambda c: c != "?"), min_size=1, max_size=12)
_qmgr = st.text(alphabet=xml_chars.filter(lambda c: c not in "/?"), max_size=8)
destinations = st.one_of(
    st.builds(Destination, st.just(DestinationKind.QUEUE), _dest_name, _qmgr),
    st.builds(Destination, st.just(DestinationKind.TOPIC), _dest_name),
)
_long = st.integers(-(2**63), 2**63 - 1)

headers = st.builds(
    JmsHeaders,
    destination=st.none() | destinations,
    delivery_mode=st.sampled_from(list(DeliveryMode)),
    expiration=_long,
    priority=st.integers(0, 9),
    timestamp=_long,
    message_id=st.none() | xml_text,
    correlation_id=st.none() | xml_text | st.binary(max_size=24),
    reply_to=st.none() | destinations,
    type=st.none() | xml_text,
    redelivered=st.booleans(),
)

bodies = st.one_of(
    st.just(NoBody()),
    st.builds(TextBody, st.none() | st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)),
    st.builds(BytesBody, st.binary(max_size=40)),
    st.builds(MapBody, typed_maps()),
    st.builds(StreamBody, st.lists(java_values(), max_size=6).map(tuple)),
    st.builds(ObjectBody, st.none() | st.binary(max_size=40),
              st.none() | st.from_regex(r"[a-z]{1,5}(\.[A-Z][a-z]{0,5}){1,2}", fullmatch=True)),
)

properties = st.lists(st.tuples(identifiers, java_values()), max_size=6, unique_by=lambda kv: kv[0]).map(
    lambda pairs: TypedMap(pairs, what="property")
)

messages = st.builds(JmsMessage, headers, properties, bodies)
