"""JMS message selector evaluation: a syntax tree -> a closure over a header/property lookup (JMS 1.1 §3.8.1).

Values are Python ``bool``, ``int`` (a Java long), ``float`` (a Java double), ``str`` or ``None``
(NULL: a missing property or a null header). Results of conditions are ``True``, ``False`` or
``None`` (UNKNOWN). A message is selected only when the selector is ``True`` (JMS 1.1 §3.8.1.1).
Each semantic rule, with its source, is written at the function that implements it.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping
from typing import Any

from mappings.selector.lexer import LONG_MAX, LONG_MIN
from mappings.selector.parser import (
    And,
    Arith,
    Between,
    Compare,
    Ident,
    In,
    IsNull,
    Like,
    Literal,
    Negate,
    Node,
    Not,
    Or,
    UnaryPlus,
)

Lookup = Mapping[str, Any]
Evaluator = Callable[[Lookup], Any]

# JMSDeliveryMode is 'PERSISTENT' or 'NON_PERSISTENT' in selectors (JMS 1.1 §3.8.1.1); if the lookup holds
# the integer constants instead (DeliveryMode.PERSISTENT = 2, NON_PERSISTENT = 1) they read as those strings.
DELIVERY_MODE_NAMES = {1: "NON_PERSISTENT", 2: "PERSISTENT"}

_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "<>": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}

_NUM, _STR, _BOOL, _OTHER = 1, 2, 3, 4


def _kind(v: Any) -> int:
    # A Python int outside the Java long range, or a value of any other Python type, is not a JMS value:
    # it compares as a non-like type (FALSE) and makes arithmetic UNKNOWN.
    t = type(v)
    if t is str:
        return _STR
    if t is bool:
        return _BOOL
    if t is int:
        return _NUM if LONG_MIN <= v <= LONG_MAX else _OTHER
    if t is float:
        return _NUM
    return _OTHER


def _utf16(s: str) -> bytes:
    return s.encode("utf-16-be", "surrogatepass")


def compare(op: str, a: Any, b: Any) -> bool | None:
    """One comparison with the JMS type rules; NULL on either side gives UNKNOWN.

    - "Only like type values can be compared ... If the comparison of non-like type values is
      attempted, the value of the operation is false" (JMS 1.1 §3.8.1.1). So ``'2' > 1`` is FALSE (not
      UNKNOWN), and so is ``s <> 1`` for a string ``s``; ``NOT ('2' > 1)`` is therefore TRUE, exactly as
      the spec's "NumberOfOrders > 1" example implies.
    - Exact and approximate numerics compare after Java binary numeric promotion: if either side is a
      double both are (so a long beyond 2**53 compares as its double value).
    - Booleans compare only with = and <> (JMS 1.1); an ordering comparison of booleans found at run
      time is FALSE, like a comparison of non-like types.
    - Strings also order (<, <=, >, >=) by Java ``String.compareTo`` (UTF-16 code units): an extension
      WebSphere Message Broker docs "JMS message selector" need for their JMSInput
      "Message ID > WMBRK123456" example.
    """
    if a is None or b is None:
        return None
    ka = _kind(a)
    kb = _kind(b)
    if ka != kb or ka == _OTHER:
        return False
    if ka == _NUM:
        if type(a) is float or type(b) is float:
            return _ORDER[op](float(a), float(b))
        return _ORDER[op](a, b)
    if op == "=":
        return a == b
    if op == "<>":
        return a != b
    if ka == _STR:
        if a.isascii() and b.isascii():  # O(1) in CPython; code point order is UTF-16 order here
            return _ORDER[op](a, b)
        return _ORDER[op](_utf16(a), _utf16(b))
    return False  # ordering booleans is not allowed (JMS 1.1 §3.8.1.1)


def wrap_long(value: int) -> int:
    if LONG_MIN <= value <= LONG_MAX:
        return value
    return ((value - LONG_MIN) & 0xFFFFFFFFFFFFFFFF) + LONG_MIN


def arithmetic(op: str, a: Any, b: Any) -> int | float | None:
    """One binary arithmetic operation with Java long/double semantics.

    Integer arithmetic is Java long arithmetic: results wrap in 64-bit two's complement; ``/`` truncates
    toward zero (``-7 / 2`` is ``-3``); integer division by zero, which throws in Java, is UNKNOWN.
    Double arithmetic is IEEE 754 as in Java (``1 / 0.0`` is +Infinity, ``0 / 0.0`` is NaN). Arithmetic
    on a value that is not a number (a string, a boolean) or on NULL is UNKNOWN: the spec gives such an
    expression no value ("a string cannot be used in an arithmetic expression").
    """
    if _kind(a) != _NUM or _kind(b) != _NUM:
        return None
    if type(a) is int and type(b) is int:
        if op == "+":
            return wrap_long(a + b)
        if op == "-":
            return wrap_long(a - b)
        if op == "*":
            return wrap_long(a * b)
        if b == 0:
            return None  # ArithmeticException in Java
        q = abs(a) // abs(b)
        return wrap_long(-q if (a < 0) != (b < 0) else q)
    fa = float(a)
    fb = float(b)
    if op == "+":
        return fa + fb
    if op == "-":
        return fa - fb
    if op == "*":
        return fa * fb
    if fb == 0.0:
        if fa == 0.0 or math.isnan(fa):
            return math.nan
        return math.copysign(math.inf, fa) * math.copysign(1.0, fb)
    return fa / fb


def negate(a: Any) -> int | float | None:
    if _kind(a) != _NUM:
        return None
    return -a if type(a) is float else wrap_long(-a)


def like_regex(pattern: str, escape: str | None) -> re.Pattern[str]:
    """Translate a LIKE pattern (already validated by the parser) to an anchored regular expression.

    ``_`` is one character (one code point), ``%`` any sequence; matching is case sensitive.
    """
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if escape is not None and ch == escape:
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return re.compile("".join(out), re.DOTALL)


def compile_tree(node: Node) -> Evaluator:
    """The tree as a closure; ``compile_tree(node)(lookup)`` is the selector's value for one message."""
    return _condition(node)


def _condition(node: Node) -> Evaluator:
    # An identifier used as a condition must hold a boolean; any other value is UNKNOWN.
    if isinstance(node, Ident):
        get = _getter(node.name)

        def ident_condition(lk: Lookup) -> bool | None:
            v = get(lk)
            return v if type(v) is bool else None

        return ident_condition
    return _value(node)


def _getter(name: str) -> Callable[[Lookup], Any]:
    if name == "JMSDeliveryMode":

        def delivery_mode(lk: Lookup) -> Any:
            v = lk.get(name)
            return DELIVERY_MODE_NAMES.get(v, v) if type(v) is int else v

        return delivery_mode

    def get(lk: Lookup) -> Any:
        return lk.get(name)

    return get


def _value(node: Node) -> Evaluator:  # one branch per node type
    if isinstance(node, Literal):
        value = node.value

        def constant(lk: Lookup) -> Any:
            return value

        return constant
    if isinstance(node, Ident):
        return _getter(node.name)
    if isinstance(node, Compare):
        return _compare(node)
    if isinstance(node, And):
        return _all([_condition(part) for part in _flatten(node, And)])
    if isinstance(node, Or):
        return _any([_condition(part) for part in _flatten(node, Or)])
    if isinstance(node, Not):
        inner = _condition(node.operand)

        def not_(lk: Lookup) -> bool | None:
            v = inner(lk)
            return None if v is None else not v

        return not_
    if isinstance(node, Arith):
        return _arith(node)
    if isinstance(node, Negate):
        inner = _value(node.operand)
        return lambda lk: negate(inner(lk))
    if isinstance(node, UnaryPlus):
        inner = _value(node.operand)

        def plus(lk: Lookup) -> Any:
            v = inner(lk)
            return v if _kind(v) == _NUM else None

        return plus
    if isinstance(node, Between):
        return _between(node)
    if isinstance(node, In):
        return _in(node)
    if isinstance(node, Like):
        return _like(node)
    if isinstance(node, IsNull):
        get = _getter(node.operand.name)
        if node.negated:
            return lambda lk: get(lk) is not None
        return lambda lk: get(lk) is None
    raise TypeError(f"not a selector node: {node!r}")  # unreachable for trees from the parser


def _flatten(node: Node, kind: type[And] | type[Or]) -> list[Node]:
    """Operands of a chain of one associative operator, left to right: ((a AND b) AND c) -> [a, b, c]."""
    if isinstance(node, kind):
        return _flatten(node.left, kind) + _flatten(node.right, kind)
    return [node]


def _all(parts: list[Evaluator]) -> Evaluator:
    """Three-valued AND of a chain: FALSE if any is FALSE, else UNKNOWN if any is UNKNOWN, else TRUE.

    AND, OR and NOT follow the JMS 1.1 §3.8.1.2 truth tables.
    """
    chain = tuple(parts)

    def and_chain(lk: Lookup) -> bool | None:
        result: bool | None = True
        for part in chain:
            v = part(lk)
            if v is False:
                return False
            if v is not True:
                result = None
        return result

    return and_chain


def _any(parts: list[Evaluator]) -> Evaluator:
    """Three-valued OR of a chain: TRUE if any is TRUE, else UNKNOWN if any is UNKNOWN, else FALSE."""
    chain = tuple(parts)

    def or_chain(lk: Lookup) -> bool | None:
        result: bool | None = False
        for part in chain:
            v = part(lk)
            if v is True:
                return True
            if v is not False:
                result = None
        return result

    return or_chain


def _compare(node: Compare) -> Evaluator:
    op = node.op
    left = _value(node.left)
    # A plain identifier on the left is read inline (saves a call per evaluation); "" means "call left".
    name = node.left.name if isinstance(node.left, Ident) and node.left.name != "JMSDeliveryMode" else ""
    if isinstance(node.right, Literal) and _kind(node.right.value) == _NUM:
        # Hot path: identifier-or-expression against a numeric literal.
        lit = node.right.value
        lit_f = float(lit)
        lit_is_int = type(lit) is int
        fn = _ORDER[op]

        def compare_number(lk: Lookup) -> bool | None:
            v = lk.get(name) if name else left(lk)
            t = type(v)
            if t is int and lit_is_int and LONG_MIN <= v <= LONG_MAX:
                return fn(v, lit)
            if t is float or (t is int and LONG_MIN <= v <= LONG_MAX):
                return fn(float(v), lit_f)
            return compare(op, v, lit)

        return compare_number
    if isinstance(node.right, Literal) and type(node.right.value) is str and op in ("=", "<>"):
        lit_s = node.right.value
        equal = op == "="

        def compare_string(lk: Lookup) -> bool | None:
            v = lk.get(name) if name else left(lk)
            if type(v) is str:
                return (v == lit_s) is equal
            return None if v is None else False

        return compare_string
    right = _value(node.right)
    return lambda lk: compare(op, left(lk), right(lk))


def _arith(node: Arith) -> Evaluator:
    op = node.op
    left = _value(node.left)
    right = _value(node.right)

    def arith(lk: Lookup) -> int | float | None:
        a = left(lk)
        if a is None:
            return None
        return arithmetic(op, a, right(lk))

    return arith


def in_range(v: Any, low: Any, high: Any) -> bool | None:
    """``v BETWEEN low AND high`` as JMS 1.1 defines it: ``v >= low AND v <= high``, three-valued."""
    above_low = compare(">=", v, low)
    if above_low is False:
        return False
    below_high = compare("<=", v, high)
    if below_high is False:
        return False
    return True if above_low is True and below_high is True else None


def out_of_range(v: Any, low: Any, high: Any) -> bool | None:
    """``v NOT BETWEEN low AND high`` as JMS 1.1 defines it: ``v < low OR v > high``, three-valued."""
    below = compare("<", v, low)
    if below is True:
        return True
    above = compare(">", v, high)
    if above is True:
        return True
    return False if below is False and above is False else None


def _between(node: Between) -> Evaluator:
    operand = _value(node.operand)
    if not node.negated and isinstance(node.low, Literal) and isinstance(node.high, Literal):
        lo, hi = node.low.value, node.high.value
        if _kind(lo) == _NUM and _kind(hi) == _NUM:
            return _between_constants(operand, lo, hi)
    low = _value(node.low)
    high = _value(node.high)
    test = out_of_range if node.negated else in_range
    return lambda lk: test(operand(lk), low(lk), high(lk))


# ``x IN ('a', 'b')`` is ``x = 'a' OR x = 'b'``; NOT IN and NOT LIKE are the negation of IN and LIKE
# (JMS 1.1 §3.8.1.1 gives these equivalences). So a number tested with IN is FALSE and with NOT IN is
# TRUE. IN, NOT IN, LIKE and NOT LIKE on NULL are UNKNOWN.
def _in(node: In) -> Evaluator:
    get = _getter(node.operand.name)
    members = frozenset(node.values)
    negated = node.negated

    def in_(lk: Lookup) -> bool | None:
        v = get(lk)
        if v is None:
            return None
        found = type(v) is str and v in members
        return found is not negated

    return in_


def _like(node: Like) -> Evaluator:
    get = _getter(node.operand.name)
    match = like_regex(node.pattern, node.escape).fullmatch
    negated = node.negated

    def like(lk: Lookup) -> bool | None:
        v = get(lk)
        if v is None:
            return None
        found = type(v) is str and match(v) is not None
        return found is not negated

    return like


def _between_constants(operand: Evaluator, lo: int | float, hi: int | float) -> Evaluator:
    """BETWEEN with numeric literal bounds (the usual form): typed fast paths, else ``in_range``."""
    lo_f, hi_f = float(lo), float(hi)
    ints = type(lo) is int and type(hi) is int

    def between_constants(lk: Lookup) -> bool | None:
        v = operand(lk)
        t = type(v)
        if t is float:
            return lo_f <= v <= hi_f  # Java promotes the long bounds to double
        if t is int and ints and LONG_MIN <= v <= LONG_MAX:
            return lo <= v <= hi
        return in_range(v, lo, hi)

    return between_constants
