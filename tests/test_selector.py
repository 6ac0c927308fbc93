"""JMS message selectors (JMS 1.1 §3.8.1; WebSphere Message Broker docs "JMS message selector"): expression
table, truth tables, LIKE escapes, errors with columns, composite selector. The property tests against an
independent reference evaluator are in tests/test_selector_properties.py."""
from __future__ import annotations

import pytest

from mappings.errors import MappingError
from mappings.selector.compile import (
    build_composite_selector,
    compile_selector,
    is_valid_identifier,
    selector_lookup,
)

T, F, U = True, False, None

MESSAGE = {
    "i": 5,
    "j": -3,
    "big": 2**62,
    "f": 2.5,
    "s": "abc",
    "t": "",
    "b": True,
    "nb": False,
    "n": None,
    "q": "it's",
    "num_s": "2",
    "pct": "50%off",
    "und": "a_b",
    "und2": "axb",
    "bang": "a!b",
    "dot": "a.c",
    "nl": "a\nb",
    "u": "日本",
    "JMSPriority": 6,
    "JMSDeliveryMode": "PERSISTENT",
    "JMSMessageID": "ID:414D51",
    "JMSTimestamp": 1057576423231,
    "$x": 1,
    "_a1": 2,
    "é": 3,
    "αβ": 4,
    "x£": 5,
    "a\u0300": 6,
    "huge": 2**70,
    "blob": b"abc",
    "p53": 2**53 + 1,
    "f53": 2.0**53,
}

TABLE: list[tuple[str, bool | None]] = [
    # exact and approximate literals (Java syntax), numeric promotion
    ("i = 5", T), ("i = 5.0", T), ("i = 5L", T), ("i = 5l", T), ("i = 0x5", T), ("i = 0X5L", T),
    ("i = 05", T), ("i = 5e0", T), ("i = 5D", T), ("f = 2.5", T), ("f = 25E-1", T), ("f = .25e1", T),
    ("f = 2.5F", T), ("0.1F = 0.1", F), ("0.1F = 0.1f", T), ("i = +5", T), ("-i = -5", T), ("j = -3", T),
    ("- -i = 5", T), ("0xFF = 255", T), ("0777 = 511", T), ("0 = 0", T), ("7. = 7", T), ("7.e1 = 70", T),
    ("9007199254740993 = 9007199254740992.0", T), ("9007199254740993 = 9007199254740992", F),
    ("-9223372036854775808 < -9223372036854775807", T), ("p53 = f53", T), ("p53 > f53", F),
    ("f53 < p53", F), ("p53 = 9007199254740992", F), ("p53 BETWEEN f53 AND f53", T),
    ("0x7FFFFFFFFFFFFFFF = 9223372036854775807", T),
    # Java long arithmetic: wrap, truncating division, division by zero
    ("big * 2 = -9223372036854775808", T), ("-9223372036854775808 - 1 = 9223372036854775807", T),
    ("9223372036854775807 + 1 < 0", T), ("-9223372036854775808 / -1 = -9223372036854775808", T),
    ("7 / 2 = 3", T), ("-7 / 2 = -3", T), ("7 / -2 = -3", T), ("-7 / -2 = 3", T), ("7 / 2.0 = 3.5", T),
    ("i / 0 = 0", U), ("i / 0 > 0", U), ("NOT i / 0 > 0", U), ("i / 0.0 > 1e308", T),
    ("-i / 0.0 < -1e308", T), ("i / -0.0 < 0", T), ("0 / 0.0 = 0 / 0.0", F), ("0 / 0.0 <> 0 / 0.0", T),
    ("1e308 * 10 > 1e308", T),
    # precedence and associativity
    ("i * 2 + 1 = 11", T), ("i + 2 * 3 = 11", T), ("(i + 2) * 3 = 21", T), ("i - 2 - 1 = 2", T),
    ("20 / 2 / 5 = 2", T), ("-i * -i = 25", T), ("2 * -3 = -6", T), ("i - -1 = 6", T),
    # comparisons and the JMS type rules
    ("s = 'abc'", T), ("s <> 'abc'", F), ("s = 'ABC'", F), ("s > 'abb'", T), ("s < 'abd'", T),
    ("'\uffff' > '\U00010000'", T), ("'\U00010000' < '\ufb01'", T),  # UTF-16 order (Java compareTo)
    ("s >= 'abc'", T), ("s <= 'ab'", F), ("t = ''", T), ("q = 'it''s'", T), ("u = '日本'", T),
    ("s = 1", F), ("s <> 1", F), ("1 = s", F), ("num_s > 1", F), ("NOT (num_s > 1)", T), ("num_s = '2'", T),
    ("b = TRUE", T), ("b <> FALSE", T), ("b = 1", F), ("nb = FALSE", T), ("b = 'true'", F),
    ("b", T), ("nb", F), ("s", U), ("i", U), ("b > nb", F), ("b <> nb", T),
    ("i > 4.99", T), ("f < 3", T), ("f = 2", F), ("i <> 5", F), ("i >= 5", T), ("i <= 4", F),
    ("s + 1 = 2", U), ("b + 1 = 2", U), ("-s = 1", U), ("+s = 1", U), ("+i = 5", T),
    ("huge = huge", F), ("huge + 1 = 1", U), ("blob = 'abc'", F), ("blob IS NULL", F),
    # NULL (missing properties, null values)
    ("missing = 1", U), ("n = 1", U), ("missing <> 1", U), ("NOT missing = 1", U), ("missing = missing", U),
    ("missing IS NULL", T), ("n IS NULL", T), ("i IS NULL", F), ("missing IS NOT NULL", F),
    ("s IS NOT NULL", T), ("missing + 1 = 1", U), ("1 + missing = 1", U), ("-missing = 1", U),
    ("missing", U), ("missing OR TRUE", T), ("missing AND FALSE", F), ("missing OR FALSE", U),
    ("missing AND TRUE", U), ("missing > 'a'", U),
    # BETWEEN
    ("i BETWEEN 1 AND 10", T), ("i BETWEEN 5 AND 5", T), ("i BETWEEN 6 AND 10", F),
    ("i NOT BETWEEN 6 AND 10", T), ("i NOT BETWEEN 1 AND 10", F), ("missing BETWEEN 1 AND 2", U),
    ("missing NOT BETWEEN 1 AND 2", U), ("s BETWEEN 1 AND 10", F), ("s NOT BETWEEN 1 AND 10", F),
    ("i BETWEEN 1 AND missing", U), ("i BETWEEN 6 AND missing", F), ("i NOT BETWEEN 6 AND missing", T),
    ("i NOT BETWEEN 1 AND missing", U), ("i BETWEEN 1 AND 10 AND s = 'abc'", T),
    ("i + 1 BETWEEN i AND i * 2", T), ("f BETWEEN 2 AND 2.5", T),
    ("f BETWEEN 2.5 AND 3", T), ("f NOT BETWEEN 2.5 AND 3", F),
    ("i BETWEEN 5 AND 6", T), ("i BETWEEN 4 AND 5", T), ("i BETWEEN 4.5 AND 5.5", T), ("f BETWEEN 3 AND 4", F),
    ("i BETWEEN 10 AND 1", F),
    ("i between 1 and 10", T),
    # IN
    ("s IN ('abc', 'x')", T), ("s IN ('x')", F), ("s NOT IN ('x', 'y')", T), ("s NOT IN ('abc')", F),
    ("missing IN ('a')", U), ("missing NOT IN ('a')", U), ("i IN ('5')", F), ("i NOT IN ('5')", T),
    ("q IN ('it''s')", T), ("s IN ('ABC')", F), ("s in ('abc')", T),
    # LIKE
    ("s LIKE 'abc'", T), ("s LIKE 'a%'", T), ("s LIKE '%c'", T), ("s LIKE '%b%'", T), ("s LIKE 'a_c'", T),
    ("s LIKE 'a_'", F), ("s LIKE '___'", T), ("s LIKE '%'", T), ("t LIKE '%'", T), ("t LIKE '_%'", F),
    ("s LIKE 'A%'", F), ("s NOT LIKE 'a%'", F), ("s NOT LIKE 'x%'", T), ("missing LIKE '%'", U),
    ("missing NOT LIKE '%'", U), ("i LIKE '5'", F), ("i NOT LIKE '5'", T), ("s LIKE 'a.c'", F),
    ("dot LIKE 'a.c'", T), ("nl LIKE 'a_b'", T), ("nl LIKE 'a%'", T), ("u LIKE '日_'", T),
    ("s LIKE '%%%'", T), ("s LIKE 'abc_'", F), ("s LIKE '[a]bc'", F), ("s like 'ab%'", T),
    # LIKE escapes
    ("pct LIKE '50!%off' ESCAPE '!'", T), ("pct LIKE '50!%%' ESCAPE '!'", T),
    ("pct LIKE '5!%%' ESCAPE '!'", F),
    ("und LIKE 'a\\_b' ESCAPE '\\'", T), ("und2 LIKE 'a\\_b' ESCAPE '\\'", F), ("und2 LIKE 'a_b'", T),
    ("bang LIKE 'a!!b' ESCAPE '!'", T), ("q LIKE 'it''''s' ESCAPE ''''", T), ("pct LIKE '50%'", T),
    ("pct LIKE '%x%%' ESCAPE 'x'", T), ("s LIKE '%x%%' ESCAPE 'x'", F), ("und LIKE '%#_%' escape '#'", T),
    # logic and precedence
    ("TRUE", T), ("FALSE", F), ("NOT TRUE", F), ("true", T), ("False", F), ("i = 5 OR i = 6 AND i = 7", T),
    ("(i = 5 OR i = 6) AND i = 7", F), ("NOT i = 5", F), ("NOT NOT i = 5", T), ("NOT i = 6 AND s = 'abc'", T),
    ("i = 5 and s = 'abc'", T), ("i = 5 Or FALSE", T), ("(i = 5) = TRUE", T), ("(i = 4) <> (s = 'x')", F),
    ("(i = 4) = (missing = 1)", U), ("((((i = 5))))", T), ("NOT (i = 4 OR s = 'x')", T),
    # header fields as selectors see them
    ("JMSPriority >= 5 AND JMSPriority <= 8", T), ("JMSDeliveryMode = 'PERSISTENT'", T),
    ("JMSTimestamp BETWEEN 1057576423231 AND 10575788993265", T), ("JMSCorrelationID IS NULL", T),
    ("JMSMessageID LIKE 'ID:%'", T), ("JMSType = 'car'", U), ("JMSMessageID > 'ID:414D50'", T),
    # identifiers: Java rules, case sensitive
    ("$x = 1", T), ("_a1 = 2", T), ("é = 3", T), ("αβ = 4", T), ("x£ = 5", T), ("a\u0300 = 6", T),
    ("I = 5", U), ("S = 'abc'", U), ("nullx IS NULL", T), ("TRUEish IS NULL", T),
    # whitespace is Java's
    ("i\t=\n5", T), ("\fi=5\r", T), ("i=5 AND s='abc'", T),
]


@pytest.mark.parametrize(("text", "expected"), TABLE, ids=[t for t, _ in TABLE])
def test_expression_table(text: str, expected: bool | None) -> None:
    selector = compile_selector(text)
    assert selector.evaluate(MESSAGE) is expected
    assert selector.matches(MESSAGE) is (expected is True)


def test_number_glued_to_keyword_is_an_identifier_error() -> None:
    # "5AND" is not "5 AND": a number glued to letters is rejected rather than split
    with pytest.raises(MappingError):
        compile_selector("i=5AND s='abc'")


def test_table_is_wide() -> None:
    assert len(TABLE) >= 200
    assert {e for _, e in TABLE} == {T, F, U}


# -- three-valued truth tables (JMS 1.1 §3.8.1.2), written out, not computed ----------------------

OPERAND = {"T": "TRUE", "F": "FALSE", "U": "missing"}
RESULT = {"T": True, "F": False, "U": None}
AND_TABLE = {"TT": "T", "TF": "F", "TU": "U",
             "FT": "F", "FF": "F", "FU": "F",
             "UT": "U", "UF": "F", "UU": "U"}
OR_TABLE = {"TT": "T", "TF": "T", "TU": "T",
            "FT": "T", "FF": "F", "FU": "U",
            "UT": "T", "UF": "U", "UU": "U"}
NOT_TABLE = {"T": "F", "F": "T", "U": "U"}


@pytest.mark.parametrize("pair", sorted(AND_TABLE))
def test_and_truth_table(pair: str) -> None:
    text = f"{OPERAND[pair[0]]} AND {OPERAND[pair[1]]}"
    assert compile_selector(text).evaluate({}) is RESULT[AND_TABLE[pair]]


@pytest.mark.parametrize("pair", sorted(OR_TABLE))
def test_or_truth_table(pair: str) -> None:
    text = f"{OPERAND[pair[0]]} OR {OPERAND[pair[1]]}"
    assert compile_selector(text).evaluate({}) is RESULT[OR_TABLE[pair]]


@pytest.mark.parametrize("value", sorted(NOT_TABLE))
def test_not_truth_table(value: str) -> None:
    assert compile_selector(f"NOT {OPERAND[value]}").evaluate({}) is RESULT[NOT_TABLE[value]]


def test_unknown_operand_from_null_comparison_behaves_like_unknown() -> None:
    # UNKNOWN produced by a comparison with NULL, not only by a missing boolean identifier
    assert compile_selector("n = 1 OR TRUE").evaluate(MESSAGE) is True
    assert compile_selector("n = 1 AND TRUE").evaluate(MESSAGE) is None
    assert compile_selector("n = 1 AND FALSE").evaluate(MESSAGE) is False


def test_delivery_mode_integer_constants_read_as_names() -> None:
    sel = compile_selector("JMSDeliveryMode = 'NON_PERSISTENT'")
    assert sel.matches({"JMSDeliveryMode": 1})
    assert not sel.matches({"JMSDeliveryMode": 2})
    assert compile_selector("JMSDeliveryMode = 'PERSISTENT'").matches({"JMSDeliveryMode": 2})


def test_empty_selector_selects_everything() -> None:
    for text in ("", "   ", "\t\n"):
        sel = compile_selector(text)
        assert sel.matches({}) and sel.evaluate({"x": 1}) is True


def test_identifiers_are_collected() -> None:
    sel = compile_selector(
        "a = 1 AND (b + c > 2 OR d IN ('x')) AND e LIKE 'y' AND f IS NULL AND g BETWEEN h AND 3"
    )
    assert sel.identifiers == frozenset("abcdefgh")


def test_lookup_is_any_mapping_and_unknown_names_are_null() -> None:
    class Lazy(dict[str, object]):
        pass

    assert compile_selector("x IS NULL").matches(Lazy())
    assert compile_selector("x = 1").evaluate(Lazy(x=1)) is True


def test_selector_lookup_applies_jms_header_rules() -> None:
    values = selector_lookup(
        {"color": "blue", "JMSPriority": 0, "JMSXGroupID": "g"},
        delivery_mode=2,
        priority=7,
        message_id="ID:1",
        redelivered=False,
    )
    assert values == {
        "color": "blue",
        "JMSXGroupID": "g",
        "JMSDeliveryMode": "PERSISTENT",
        "JMSPriority": 7,
        "JMSMessageID": "ID:1",
        "JMSRedelivered": False,
    }
    assert selector_lookup(delivery_mode=1)["JMSDeliveryMode"] == "NON_PERSISTENT"
    assert "JMSPriority" not in selector_lookup({"JMSPriority": 9})  # properties cannot spoof headers
    with pytest.raises(MappingError) as err:
        selector_lookup(delivery_mode=3)
    assert err.value.field == "JMSDeliveryMode"
    sel = compile_selector("JMSDeliveryMode = 'PERSISTENT' AND JMSPriority > 5 AND color = 'blue'")
    assert sel.matches(values)


# -- errors: MappingError, structure "selector", 1-based column, text and caret -------------------

ERRORS: list[tuple[str, int, str]] = [
    ("a =", 4, "ends where an operand"),
    ("a = 'x", 5, "not closed"),
    ("= 1", 1, "expected an operand"),
    ("a = 1 AND", 10, "ends where an operand"),
    ("a IN ()", 7, "string literals only"),
    ("a IN ('x' 'y')", 11, "expected ',' or ')'"),
    ("a IN ('x',)", 11, "string literals only"),
    ("a IN 'x'", 6, "expected '('"),
    ("5 IN ('x')", 1, "identifier"),
    ("a + 1 LIKE 'x'", 1, "identifier"),
    ("a LIKE b", 8, "string literal pattern"),
    ("a LIKE 'x' ESCAPE 'ab'", 19, "exactly one character"),
    ("a LIKE 'x' ESCAPE ''", 19, "exactly one character"),
    ("a LIKE 'ab!' ESCAPE '!'", 11, "ends with its escape"),
    ("a LIKE 'a!b' ESCAPE '!'", 10, "must be followed by"),
    ("a LIKE 'it''s!x' ESCAPE '!'", 14, "must be followed by"),
    ("a LIKE 'x''' ESCAPE ''''", 10, "ends with its escape"),
    ("a IS 5", 6, "expected NULL"),
    ("a IS NOT 5", 10, "expected NULL"),
    ("NULL IS NULL", 1, "NULL is not a value"),
    ("a = NULL", 5, "NULL is not a value"),
    ("a NOT 5", 7, "expected BETWEEN, IN or LIKE"),
    ("a BETWEEN 1 OR 2", 13, "expected AND"),
    ("a BETWEEN 'x' AND 'y'", 11, "a string cannot be"),
    ("a BETWEEN TRUE AND 2", 11, "a boolean cannot be"),
    ("TRUE + 1 = 2", 1, "a boolean cannot be"),
    ("'a' = 1 + 'b'", 11, "a string cannot be"),
    ("(a = 1) * 2 = 2", 2, "a boolean cannot be"),
    ("and = 1", 1, "expected an operand, found and"),
    ("Escape = 1", 1, "expected an operand"),
    ("1 = 1 = 1", 7, "cannot be chained"),
    ("a = 1 IS NULL", 7, "cannot be chained"),
    ("a = 1.5.2", 8, "after a numeric literal"),
    ("12abc = 1", 3, "after a numeric literal"),
    ("0x = 1", 1, "at least one digit"),
    ("0x1G = 1", 4, "after a numeric literal"),
    ("1e = 1", 2, "exponent"),
    ("1e400 = a", 1, "range of a Java double"),
    ("3.5e38F = a", 1, "range of a Java float"),
    ("09 = a", 2, "octal"),
    ("a = 0128", 8, "octal"),
    ('a = "x"', 5, "single quotes"),
    ("a != 1", 3, "<>"),
    ("a = 1; b = 2", 6, "unexpected character"),
    ("a = 5 a", 7, "after a complete expression"),
    ("(a = 1", 7, "expected ')' to close '(' at column 1"),
    ("a = 1)", 6, "no matching '('"),
    ("a < TRUE", 5, "= and <>"),
    ("FALSE >= a", 1, "= and <>"),
    ("NOT 'x'", 5, "must be a condition"),
    ("5", 1, "must be a condition"),
    ("'abc'", 1, "must be a condition"),
    ("a + 1", 1, "must be a condition, not a numeric expression"),
    ("a = 1 AND 2", 11, "must be a condition"),
    ("a OR 'x'", 6, "must be a condition"),
    ("9223372036854775808 = a", 1, "range of a Java long"),
    ("-(9223372036854775808) = a", 3, "range of a Java long"),
    ("a = 99999999999999999999", 5, "range of a Java long"),
    ("a\u00a0= 1", 2, "unexpected character"),
    ("a IN ('x') IN ('y')", 12, "cannot be chained"),
    ("a = 'x' ESCAPE 'y'", 9, "after a complete expression"),
    ("a LIKE 'x' ESCAPE", 18, "exactly one character"),
    ("a BETWEEN 1", 12, "expected AND"),
]


@pytest.mark.parametrize(("text", "column", "fragment"), ERRORS, ids=[t for t, _, _ in ERRORS])
def test_syntax_errors_name_the_column(text: str, column: int, fragment: str) -> None:
    with pytest.raises(MappingError) as err:
        compile_selector(text)
    exc = err.value
    assert exc.structure == "selector"
    assert exc.offset == column
    assert fragment.lower() in exc.reason.lower()
    lines = str(exc).splitlines()
    assert f"(column {column})" in lines[0]
    assert lines[-1] == "  " + " " * (column - 1) + "^"
    assert len(lines[-2]) == len(text) + 2  # the text, whitespace shown as spaces so the caret aligns


def test_non_string_selector_is_a_mapping_error() -> None:
    with pytest.raises(MappingError):
        compile_selector(5)  # type: ignore[arg-type]


def test_reserved_words_are_not_identifiers() -> None:
    for word in ("NULL", "true", "False", "not", "AND", "or", "Between", "like", "IN", "is", "escape"):
        assert not is_valid_identifier(word)
    for name in ("JMSPriority", "$a", "_", "a1", "é", "x£"):
        assert is_valid_identifier(name)
    for name in ("", "1a", "a-b", "a b", "a.b"):
        assert not is_valid_identifier(name)


# -- composite selector of the JMSInput node (WebSphere Message Broker docs "JMS message selector") ---

WMB_COMPOSITE = (
    "(OrderValue > 100.00) AND (JMSTimestamp BETWEEN 1057576423231 AND 10575788993265)"
    " AND (JMSDeliveryMode = 'PERSISTENT') AND (JMSPriority >= 5 AND JMSPriority <= 8)"
    " AND (JMSMessageID > 'WMBRK123456') AND (JMSRedelivered = FALSE)"
    " AND (JMSCorrelationID = 'WMBRKABCDEFGG')"
)


def wmb_composite() -> str:
    # the example value of every property in the document's table
    return build_composite_selector(
        property_selector="OrderValue > 100.00",
        timestamp="BETWEEN 1057576423231 AND 10575788993265",
        delivery_mode="PERSISTENT",
        priority=">= 5 AND <= 8",
        message_id="> WMBRK123456",
        redelivered="FALSE",
        correlation_id="= WMBRKABCDEFGG",
    )


def test_composite_from_wmb_examples() -> None:
    assert wmb_composite() == WMB_COMPOSITE


def test_composite_selects_as_wmb_describes() -> None:
    sel = compile_selector(wmb_composite())
    message = selector_lookup(
        {"OrderValue": 150.0},
        timestamp=1057576423232,
        delivery_mode=2,
        priority=5,
        message_id="WMBRK2",
        redelivered=False,
        correlation_id="WMBRKABCDEFGG",
    )
    assert sel.matches(message)
    for change, value in [("JMSPriority", 9), ("JMSPriority", 4), ("JMSDeliveryMode", "NON_PERSISTENT"),
                          ("JMSRedelivered", True), ("JMSMessageID", "WMBRK0"), ("OrderValue", 99),
                          ("JMSCorrelationID", "x"), ("JMSTimestamp", 1)]:
        assert not sel.matches({**message, change: value}), change
    for absent in ("OrderValue", "JMSRedelivered", "JMSPriority"):
        reduced = {k: v for k, v in message.items() if k != absent}
        assert sel.evaluate(reduced) is None, absent


def test_composite_single_parts_and_empty() -> None:
    assert build_composite_selector() == ""
    assert build_composite_selector(property_selector="  ", priority="") == ""
    assert build_composite_selector(property_selector=" a = 1 ") == "(a = 1)"
    assert build_composite_selector(priority="4") == "(JMSPriority = 4)"
    assert build_composite_selector(priority="BETWEEN 5 AND 8") == "(JMSPriority BETWEEN 5 AND 8)"
    assert build_composite_selector(priority="not between 0 and 3") == "(JMSPriority NOT BETWEEN 0 AND 3)"
    assert build_composite_selector(priority="= 4 or = -1") == "(JMSPriority = 4 OR JMSPriority = -1)"
    assert build_composite_selector(delivery_mode="non_persistent") == "(JMSDeliveryMode = 'NON_PERSISTENT')"
    assert build_composite_selector(delivery_mode="<> 'PERSISTENT'") == "(JMSDeliveryMode <> 'PERSISTENT')"
    assert build_composite_selector(redelivered="true") == "(JMSRedelivered = TRUE)"
    assert build_composite_selector(redelivered="<> FALSE") == "(JMSRedelivered <> FALSE)"
    assert build_composite_selector(message_id="ID:414D5120") == "(JMSMessageID = 'ID:414D5120')"
    assert build_composite_selector(message_id="LIKE 'ID:%'") == "(JMSMessageID LIKE 'ID:%')"
    assert build_composite_selector(correlation_id="IN ('a', b)") == "(JMSCorrelationID IN ('a', 'b'))"
    assert build_composite_selector(correlation_id="IS NOT NULL") == "(JMSCorrelationID IS NOT NULL)"
    assert build_composite_selector(correlation_id="= 'it''s'") == "(JMSCorrelationID = 'it''s')"
    assert build_composite_selector(timestamp=">= 0x10 AND < 1e13") == (
        "(JMSTimestamp >= 0x10 AND JMSTimestamp < 1e13)"
    )
    # a property selector with OR is kept whole inside its parentheses, so AND cannot bind into it
    both = build_composite_selector(property_selector="a = 1 OR b = 2", priority="> 4")
    assert both == "(a = 1 OR b = 2) AND (JMSPriority > 4)"
    assert not compile_selector(both).matches({"a": 1, "JMSPriority": 3})


COMPOSITE_ERRORS: list[tuple[dict[str, str], str, int, str]] = [
    ({"property_selector": "OrderValue >"}, "PropertySelector", 13, "ends where an operand"),
    ({"priority": ">= 5 AND <= "}, "Priority", 13, "expected a literal"),
    ({"priority": ">= high"}, "Priority", 4, "numeric literal"),
    ({"priority": "'5'"}, "Priority", 1, "numeric literal"),
    ({"priority": "IN ('5')"}, "Priority", 1, "not a string"),
    ({"priority": "> 5 6"}, "Priority", 5, "expected AND, OR"),
    ({"delivery_mode": "SOMETIMES"}, "DeliveryMode", 1, "PERSISTENT or NON_PERSISTENT"),
    ({"delivery_mode": "= 'persistent'"}, "DeliveryMode", 3, "PERSISTENT or NON_PERSISTENT"),
    ({"redelivered": "maybe"}, "Redelivered", 1, "TRUE or FALSE"),
    ({"redelivered": "> FALSE"}, "Redelivered", 1, "only = and <>"),
    ({"message_id": "BETWEEN 'a' AND 'b'"}, "MessageID", 1, "not numeric"),
    ({"message_id": "= 'abc"}, "MessageID", 3, "not closed"),
    ({"correlation_id": "IN ('a' 'b')"}, "CorrelationID", 9, "expected ',' or ')'"),
    ({"correlation_id": "NOT = 'a'"}, "CorrelationID", 5, "expected BETWEEN, IN or LIKE"),
    ({"timestamp": "IS 5"}, "TimeStamp", 4, "expected NULL"),
    ({"timestamp": "BETWEEN 1 OR 2"}, "TimeStamp", 11, "expected AND"),
    # checked by the selector parser on the generated clause: the column is within "JMSMessageID LIKE ..."
    ({"message_id": "LIKE 'a!' ESCAPE '!'"}, "MessageID", 21, "escape character"),
]


@pytest.mark.parametrize(("kwargs", "prop", "column", "fragment"), COMPOSITE_ERRORS,
                         ids=[repr(k) for k, *_ in COMPOSITE_ERRORS])
def test_composite_errors_name_the_property(kwargs: dict[str, str], prop: str, column: int,
                                            fragment: str) -> None:
    with pytest.raises(MappingError) as err:
        build_composite_selector(**kwargs)  # type: ignore[arg-type]
    exc = err.value
    assert exc.structure == "selector"
    assert fragment.lower() in exc.reason.lower()
    assert exc.field == prop
    assert exc.offset == column
