"""JMS message selectors: property tests against an independent reference evaluator (arithmetic and
comparisons, BETWEEN, three-valued logic, LIKE, literals, and any text compiling or failing with a column)."""
from __future__ import annotations

import ctypes
import math
import struct
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from mappings.errors import MappingError
from mappings.selector.compile import compile_selector

LONG = st.integers(min_value=-(2**63), max_value=2**63 - 1)
SMALL = st.one_of(st.integers(min_value=-50, max_value=50),
                  st.integers(min_value=2**53 - 2, max_value=2**53 + 2))
FINITE = st.floats(allow_nan=False, allow_infinity=False, width=64)
VARS = ("x", "y", "z")


def leaf() -> st.SearchStrategy[tuple]:
    return st.one_of(
        st.tuples(st.just("int"), st.one_of(SMALL, LONG)),
        st.tuples(st.just("float"), FINITE),
        st.tuples(st.just("var"), st.sampled_from(VARS)),
    )


def arith_tree() -> st.SearchStrategy[tuple]:
    return st.recursive(
        leaf(),
        lambda kids: st.one_of(
            st.tuples(st.just("neg"), kids),
            st.tuples(st.sampled_from(["+", "-", "*", "/"]), kids, kids),
        ),
        max_leaves=8,
    )


VALUE = st.one_of(SMALL, LONG, FINITE, st.none(), st.sampled_from(["a", "5"]), st.booleans())


def java_long(v: int) -> int:
    return ctypes.c_int64(v & 0xFFFFFFFFFFFFFFFF).value


def is_number(v: object) -> bool:
    return type(v) in (int, float)


def ref_arith(tree: tuple, env: dict[str, object]) -> object:
    """Reference semantics written independently of mappings.selector.evaluate."""
    kind = tree[0]
    if kind in ("int", "float"):
        return tree[1]
    if kind == "var":
        return env.get(tree[1])
    if kind == "neg":
        v = ref_arith(tree[1], env)
        if not is_number(v):
            return None
        return -v if isinstance(v, float) else java_long(-v)
    a = ref_arith(tree[1], env)
    b = ref_arith(tree[2], env)
    if not (is_number(a) and is_number(b)):
        return None
    if isinstance(a, int) and isinstance(b, int):
        if kind == "/":
            return None if b == 0 else java_long(math.trunc(Fraction(a, b)))
        return java_long({"+": a + b, "-": a - b, "*": a * b}[kind])
    a, b = float(a), float(b)
    if kind == "/":
        if b == 0:
            if a == 0 or a != a:
                return math.nan
            negative = (a < 0) != (math.copysign(1.0, b) < 0)
            return -math.inf if negative else math.inf
        return a / b
    return {"+": a + b, "-": a - b, "*": a * b}[kind]


def ref_compare(op: str, a: object, b: object) -> bool | None:
    if a is None or b is None:
        return None
    if is_number(a) and is_number(b):
        if isinstance(a, float) or isinstance(b, float):
            a, b = float(a), float(b)  # type: ignore[arg-type]
    elif type(a) is not type(b):
        return False
    elif isinstance(a, bool) and op not in ("=", "<>"):
        return False
    return {"=": a == b, "<>": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]  # type: ignore[operator]


PREC = {"+": 1, "-": 1, "*": 2, "/": 2, "neg": 3}


def render_literal(tree: tuple) -> str:
    if tree[0] == "int":
        return str(tree[1])
    if tree[0] == "float":
        text = repr(tree[1])
        return text if any(c in text for c in ".e") else text + ".0"
    return tree[1]


def render_full(tree: tuple) -> str:
    if tree[0] in ("int", "float", "var"):
        return f"({render_literal(tree)})"
    if tree[0] == "neg":
        return f"(-{render_full(tree[1])})"
    return f"({render_full(tree[1])} {tree[0]} {render_full(tree[2])})"


def prec(tree: tuple) -> int:
    if tree[0] in ("int", "float", "var"):
        # a negative literal renders as unary minus
        return 3 if tree[0] != "var" and str(render_literal(tree)).startswith("-") else 4
    return PREC[tree[0]]


def render_min(tree: tuple) -> str:
    """Fewest parentheses the precedence rules allow (left-associative binary operators)."""
    if tree[0] in ("int", "float", "var"):
        return render_literal(tree)
    if tree[0] == "neg":
        inner = render_min(tree[1])
        return f"- {inner}" if prec(tree[1]) >= 3 else f"-({inner})"
    op = tree[0]
    left = render_min(tree[1])
    right = render_min(tree[2])
    if prec(tree[1]) < PREC[op]:
        left = f"({left})"
    if prec(tree[2]) <= PREC[op]:
        right = f"({right})"
    return f"{left} {op} {right}"


def same(a: bool | None, b: bool | None) -> bool:
    return a is b


@settings(max_examples=400, deadline=None)
@given(arith_tree(), arith_tree(), st.sampled_from(["=", "<>", "<", "<=", ">", ">="]),
       st.fixed_dictionaries({v: VALUE for v in VARS}))
def test_arithmetic_comparisons_match_reference(left: tuple, right: tuple, op: str, env: dict) -> None:
    expected = ref_compare(op, ref_arith(left, env), ref_arith(right, env))
    full = compile_selector(f"{render_full(left)} {op} {render_full(right)}")
    minimal = compile_selector(f"{render_min(left)} {op} {render_min(right)}")
    assert same(full.evaluate(env), expected)
    assert same(minimal.evaluate(env), expected)


@settings(max_examples=300, deadline=None)
@given(arith_tree(), st.fixed_dictionaries({v: VALUE for v in VARS}))
def test_between_is_its_spec_equivalence(tree: tuple, env: dict) -> None:
    # JMS 1.1: "age BETWEEN 15 AND 19" is "age >= 15 AND age <= 19"; NOT BETWEEN is "age < 15 OR age > 19"
    e = render_full(tree)
    for lo, hi in (("x", "y"), ("-3", "2.5"), ("-3", "7"), ("-2.5", "7.5"), ("9007199254740992", "z")):
        assert same(compile_selector(f"{e} BETWEEN {lo} AND {hi}").evaluate(env),
                    compile_selector(f"{e} >= {lo} AND {e} <= {hi}").evaluate(env))
        assert same(compile_selector(f"{e} NOT BETWEEN {lo} AND {hi}").evaluate(env),
                    compile_selector(f"{e} < {lo} OR {e} > {hi}").evaluate(env))


def bool_tree() -> st.SearchStrategy[tuple]:
    return st.recursive(
        st.tuples(st.just("leaf"), st.sampled_from(["T", "F", "U"])),
        lambda kids: st.one_of(
            st.tuples(st.just("NOT"), kids),
            st.tuples(st.sampled_from(["AND", "OR"]), kids, kids),
        ),
        max_leaves=10,
    )


LEVEL = {"F": 0, "U": 1, "T": 2}  # Kleene logic as min/max over F < U < T


def ref_logic(tree: tuple) -> int:
    if tree[0] == "leaf":
        return LEVEL[tree[1]]
    if tree[0] == "NOT":
        return 2 - ref_logic(tree[1])
    a, b = ref_logic(tree[1]), ref_logic(tree[2])
    return min(a, b) if tree[0] == "AND" else max(a, b)


LOGIC_PREC = {"OR": 1, "AND": 2, "NOT": 3, "leaf": 4}
LEAF_TEXT = {"T": "TRUE", "F": "FALSE", "U": "unset"}


def render_logic(tree: tuple) -> str:
    if tree[0] == "leaf":
        return LEAF_TEXT[tree[1]]
    if tree[0] == "NOT":
        inner = render_logic(tree[1])
        return f"NOT {inner}" if LOGIC_PREC[tree[1][0]] >= 3 else f"NOT ({inner})"
    op = tree[0]
    left, right = render_logic(tree[1]), render_logic(tree[2])
    if LOGIC_PREC[tree[1][0]] < LOGIC_PREC[op]:
        left = f"({left})"
    if LOGIC_PREC[tree[2][0]] <= LOGIC_PREC[op]:
        right = f"({right})"
    return f"{left} {op} {right}"


@settings(max_examples=400, deadline=None)
@given(bool_tree())
def test_three_valued_logic_matches_kleene_reference(tree: tuple) -> None:
    expected = {0: False, 1: None, 2: True}[ref_logic(tree)]
    assert compile_selector(render_logic(tree)).evaluate({}) is expected


def quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=20), st.text(min_size=1, max_size=3))
def test_string_literals_and_escaped_like_patterns_round_trip(s: str, extra: str) -> None:
    assert compile_selector(f"v = {quote(s)}").matches({"v": s})
    escaped = "".join("\\" + c if c in "%_\\" else c for c in s)
    like = compile_selector(f"v LIKE {quote(escaped)} ESCAPE '\\'")
    assert like.matches({"v": s})
    assert not like.matches({"v": s + extra})
    assert compile_selector(f"v LIKE {quote(escaped + '%')} ESCAPE '\\'").matches({"v": s + extra})


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12), st.text(max_size=6))
def test_like_wildcards_against_reference(pattern: str, value: str) -> None:
    # reference: dynamic programming over the pattern, written independently of the regex translation
    pattern = pattern.replace("\\", "")

    def ref(p: str, v: str) -> bool:
        table = [[False] * (len(v) + 1) for _ in range(len(p) + 1)]
        table[0][0] = True
        for i in range(1, len(p) + 1):
            for j in range(len(v) + 1):
                if p[i - 1] == "%":
                    table[i][j] = table[i - 1][j] or (j > 0 and table[i][j - 1])
                elif j > 0 and (p[i - 1] == "_" or p[i - 1] == v[j - 1]):
                    table[i][j] = table[i - 1][j - 1]
        return table[len(p)][len(v)]

    assert compile_selector(f"v LIKE {quote(pattern)}").matches({"v": value}) is ref(pattern, value)


SELECTOR_BITS = list("ab1'()=<>+-*/ .eEx%_,\t") + ["AND", " OR ", "NOT ", " IN ", " LIKE ", " IS ", "NULL"]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(SELECTOR_BITS), max_size=25).map("".join))
def test_any_text_compiles_or_raises_mapping_error_with_a_column(text: str) -> None:
    try:
        sel = compile_selector(text)
    except MappingError as exc:
        assert exc.structure == "selector"
        assert exc.offset is not None and 1 <= exc.offset <= len(text) + 1
        return
    sel.evaluate({"a": 1, "b": "x", "ab": True})  # must not raise either


@settings(max_examples=200, deadline=None)
@given(FINITE)
def test_float_literals_in_java_syntax_read_back_exactly(value: float) -> None:
    text = repr(value)
    assert compile_selector(f"v = {text}").matches({"v": value})
    single = struct.unpack("<f", struct.pack("<f", value))[0] if abs(value) < 3.4e38 else None
    if single is not None and text[0] != "-":
        assert compile_selector(f"v = {text}F").matches({"v": single})


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=2**63 - 1))
def test_exact_literals_in_every_radix(value: int) -> None:
    sel = compile_selector(f"v = {value} AND v = 0x{value:X} AND v = 0{value:o}L AND -v = -{value}")
    assert sel.matches({"v": value})
