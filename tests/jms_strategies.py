"""Hypothesis strategies for the JMS model (shared by the JMS mapping tests)."""
from __future__ import annotations

from hypothesis import strategies as st

from mappings.jms import INTEGER_RANGES, JavaType, JavaValue, TypedMap
from mappings.typed_xml import float_range_problem, xml_char_problem

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
