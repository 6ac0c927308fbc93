"""JMS message selector parser: tokens -> a typed syntax tree, with static type checks (JMS 1.1 §3.8.1.1).

Operator precedence and the static checks are listed on ``_Parser``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal as Lit

from mappings.selector.lexer import LONG_MAX, LONG_MIN, Kind, Token, syntax_error, tokenize

StaticType = Lit["bool", "num", "str", "any"]
Value = bool | int | float | str


@dataclass(frozen=True, slots=True)
class Literal:
    value: Value
    column: int


@dataclass(frozen=True, slots=True)
class Ident:
    name: str
    column: int


@dataclass(frozen=True, slots=True)
class Negate:  # unary minus (unary plus only checks its operand is numeric)
    operand: Node
    column: int


@dataclass(frozen=True, slots=True)
class UnaryPlus:
    operand: Node
    column: int


@dataclass(frozen=True, slots=True)
class Arith:
    op: str  # + - * /
    left: Node
    right: Node
    column: int


@dataclass(frozen=True, slots=True)
class Compare:
    op: str  # = <> < <= > >=
    left: Node
    right: Node
    column: int


@dataclass(frozen=True, slots=True)
class Between:
    operand: Node
    low: Node
    high: Node
    negated: bool
    column: int


@dataclass(frozen=True, slots=True)
class In:
    operand: Ident
    values: tuple[str, ...]
    negated: bool
    column: int


@dataclass(frozen=True, slots=True)
class Like:
    operand: Ident
    pattern: str
    escape: str | None
    negated: bool
    column: int
    pattern_column: int


@dataclass(frozen=True, slots=True)
class IsNull:
    operand: Ident
    negated: bool
    column: int


@dataclass(frozen=True, slots=True)
class Not:
    operand: Node
    column: int


@dataclass(frozen=True, slots=True)
class And:
    left: Node
    right: Node
    column: int


@dataclass(frozen=True, slots=True)
class Or:
    left: Node
    right: Node
    column: int


Node = Literal | Ident | Negate | UnaryPlus | Arith | Compare | Between | In | Like | IsNull | Not | And | Or

_COMPARISON_OPS = frozenset({"=", "<>", "<", "<=", ">", ">="})


def static_type(node: Node) -> StaticType:
    """What a node is known to produce before evaluation ("any" for identifiers)."""
    if isinstance(node, Literal):
        v = node.value
        if isinstance(v, bool):
            return "bool"
        return "str" if isinstance(v, str) else "num"
    if isinstance(node, Ident):
        return "any"
    if isinstance(node, Negate | UnaryPlus | Arith):
        return "num"
    return "bool"


def parse(text: str) -> Node:
    """Parse selector text into a syntax tree; raises MappingError(structure="selector") on bad input."""
    parser = _Parser(text, tokenize(text))
    tree = parser.or_expr()
    end = parser.peek()
    if end.kind is not Kind.END:
        if end.kind is Kind.OP and end.value == ")":
            raise syntax_error(text, end.column, "')' has no matching '('")
        raise syntax_error(text, end.column, f"unexpected {_describe(end)} after a complete expression")
    parser.require_condition(tree, "the selector")
    return tree


def _describe(tok: Token) -> str:
    if tok.kind is Kind.END:
        return "end of selector"
    if tok.kind is Kind.KEYWORD:
        return tok.text
    return f"{tok.kind.value} {tok.text}" if tok.kind is not Kind.OP else f"'{tok.text}'"


class _Parser:
    """Recursive descent, one method per precedence level.

    Precedence, loosest first (JMS 1.1 §3.8.1.1 "Expressions" and "Logical operators in precedence order"):
    OR, AND, NOT, comparison (= <> < <= > >=, [NOT] BETWEEN, [NOT] IN, [NOT] LIKE, IS [NOT] NULL),
    additive (+ -), multiplicative (* /), unary (+ -). Binary operators are left-associative; comparisons
    do not chain (``a = b = c`` is an error; write ``(a = b) = c``).

    Static checks (the spec lets providers check what is known before any message is seen): a string or
    boolean literal, or a condition, cannot be an arithmetic operand; a number or string cannot be a
    condition; booleans only take = and <>; BETWEEN bounds are arithmetic; IN lists are string literals
    only (JMS 1.1 "identifier [NOT] IN (string-literal1, ...)"); LIKE patterns and ESCAPE are string literals,
    ESCAPE exactly one character; IN, LIKE and IS NULL apply to an identifier; NULL is not a value (it only
    appears in IS [NOT] NULL). Identifiers have no static type: their values are checked at evaluation.
    """

    def __init__(self, text: str, tokens: list[Token]) -> None:
        self.text = text
        self.tokens = tokens
        self.pos = 0

    # -- token helpers -------------------------------------------------------------------------
    def peek(self) -> Token:
        return self.tokens[self.pos]

    def take(self) -> Token:
        tok = self.tokens[self.pos]
        if tok.kind is not Kind.END:
            self.pos += 1
        return tok

    def at_keyword(self, word: str) -> bool:
        tok = self.tokens[self.pos]
        return tok.kind is Kind.KEYWORD and tok.value == word

    def at_op(self, op: str) -> bool:
        tok = self.tokens[self.pos]
        return tok.kind is Kind.OP and tok.value == op

    def error(self, tok: Token, reason: str) -> Exception:
        return syntax_error(self.text, tok.column, reason)

    def expect_keyword(self, word: str, context: str) -> Token:
        tok = self.take()
        if tok.kind is not Kind.KEYWORD or tok.value != word:
            raise self.error(tok, f"expected {word} {context}, found {_describe(tok)}")
        return tok

    # -- static checks -------------------------------------------------------------------------
    def require_condition(self, node: Node, where: str) -> None:
        kind = static_type(node)
        if kind in ("num", "str"):
            what = "a numeric expression" if kind == "num" else "a string literal"
            raise syntax_error(self.text, _column(node), f"{where} must be a condition, not {what}")

    def require_arithmetic(self, node: Node, where: str) -> None:
        kind = static_type(node)
        if kind == "str":
            raise syntax_error(self.text, _column(node), f"a string cannot be {where}")
        if kind == "bool":
            raise syntax_error(self.text, _column(node), f"a boolean cannot be {where}")

    # -- grammar -------------------------------------------------------------------------------
    def or_expr(self) -> Node:
        left = self.and_expr()
        while self.at_keyword("OR"):
            op = self.take()
            right = self.and_expr()
            self.require_condition(left, "the left operand of OR")
            self.require_condition(right, "the right operand of OR")
            left = Or(left, right, op.column)
        return left

    def and_expr(self) -> Node:
        left = self.not_expr()
        while self.at_keyword("AND"):
            op = self.take()
            right = self.not_expr()
            self.require_condition(left, "the left operand of AND")
            self.require_condition(right, "the right operand of AND")
            left = And(left, right, op.column)
        return left

    def not_expr(self) -> Node:
        if self.at_keyword("NOT"):
            op = self.take()
            operand = self.not_expr()
            self.require_condition(operand, "the operand of NOT")
            return Not(operand, op.column)
        return self.comparison()

    def comparison(self) -> Node:
        left = self.additive()
        tok = self.peek()
        node: Node
        if tok.kind is Kind.OP and tok.value in _COMPARISON_OPS:
            self.take()
            right = self.additive()
            op = str(tok.value)
            if op not in ("=", "<>"):
                for side in (left, right):
                    if static_type(side) == "bool":
                        raise syntax_error(
                            self.text, _column(side), f"booleans can only be compared with = and <>, not {op}"
                        )
            node = Compare(op, left, right, tok.column)
        elif tok.kind is Kind.KEYWORD and tok.value in ("NOT", "BETWEEN", "IN", "LIKE", "IS"):
            node = self.special_comparison(left)
        else:
            return left
        nxt = self.peek()
        if (nxt.kind is Kind.OP and nxt.value in _COMPARISON_OPS) or (
            nxt.kind is Kind.KEYWORD and nxt.value in ("BETWEEN", "IN", "LIKE", "IS")
        ):
            raise self.error(nxt, "comparisons cannot be chained; add parentheses")
        return node

    def special_comparison(self, left: Node) -> Node:
        first = self.take()
        negated = False
        op = first
        if first.value == "NOT":
            negated = True
            op = self.take()
            if op.kind is not Kind.KEYWORD or op.value not in ("BETWEEN", "IN", "LIKE"):
                raise self.error(op, f"expected BETWEEN, IN or LIKE after NOT, found {_describe(op)}")
        if op.value == "BETWEEN":
            low = self.additive()
            self.expect_keyword("AND", "between the bounds of BETWEEN")
            high = self.additive()
            for part, where in ((left, "tested with BETWEEN"), (low, "a BETWEEN bound"), (high, "a BETWEEN bound")):
                self.require_arithmetic(part, where)
            return Between(left, low, high, negated, first.column)
        if not isinstance(left, Ident):
            raise syntax_error(self.text, _column(left), f"{op.value} applies to an identifier (JMS 1.1 §3.8.1.1)")
        if op.value == "IN":
            return self.in_list(left, negated, first.column)
        if op.value == "LIKE":
            pattern = self.take()
            if pattern.kind is not Kind.STRING:
                raise self.error(pattern, f"LIKE needs a string literal pattern, found {_describe(pattern)}")
            escape: str | None = None
            if self.at_keyword("ESCAPE"):
                self.take()
                esc = self.take()
                if esc.kind is not Kind.STRING or len(str(esc.value)) != 1:
                    raise self.error(esc, "ESCAPE needs a string literal of exactly one character")
                escape = str(esc.value)
            _check_like_pattern(self.text, pattern, escape)
            return Like(left, str(pattern.value), escape, negated, first.column, pattern.column)
        # IS [NOT] NULL
        is_not = False
        if self.at_keyword("NOT"):
            self.take()
            is_not = True
        self.expect_keyword("NULL", "after IS" + (" NOT" if is_not else ""))
        return IsNull(left, is_not, first.column)

    def in_list(self, left: Ident, negated: bool, column: int) -> In:
        opening = self.take()
        if opening.kind is not Kind.OP or opening.value != "(":
            raise self.error(opening, f"expected '(' after IN, found {_describe(opening)}")
        values: list[str] = []
        while True:
            tok = self.take()
            if tok.kind is not Kind.STRING:
                raise self.error(tok, f"IN lists hold string literals only, found {_describe(tok)}")
            values.append(str(tok.value))
            sep = self.take()
            if sep.kind is Kind.OP and sep.value == ")":
                return In(left, tuple(values), negated, column)
            if sep.kind is not Kind.OP or sep.value != ",":
                raise self.error(sep, f"expected ',' or ')' in the IN list, found {_describe(sep)}")

    def additive(self) -> Node:
        left = self.multiplicative()
        while self.at_op("+") or self.at_op("-"):
            op = self.take()
            right = self.multiplicative()
            self.require_arithmetic(left, f"an operand of {op.value}")
            self.require_arithmetic(right, f"an operand of {op.value}")
            left = Arith(str(op.value), left, right, op.column)
        return left

    def multiplicative(self) -> Node:
        left = self.unary()
        while self.at_op("*") or self.at_op("/"):
            op = self.take()
            right = self.unary()
            self.require_arithmetic(left, f"an operand of {op.value}")
            self.require_arithmetic(right, f"an operand of {op.value}")
            left = Arith(str(op.value), left, right, op.column)
        return left

    def unary(self) -> Node:
        if self.at_op("-") or self.at_op("+"):
            op = self.take()
            nxt = self.peek()
            if op.value == "-" and nxt.kind is Kind.EXACT and nxt.value == LONG_MAX + 1:
                self.take()  # -9223372036854775808: the one place this magnitude is a long (Java rule)
                return Literal(LONG_MIN, op.column)
            operand = self.unary()
            self.require_arithmetic(operand, f"the operand of unary {op.value}")
            if isinstance(operand, Literal) and not isinstance(operand.value, bool | str):
                if op.value == "+":
                    return Literal(operand.value, op.column)
                value = operand.value
                return Literal(-value if isinstance(value, float) else _wrap(-value), op.column)
            return Negate(operand, op.column) if op.value == "-" else UnaryPlus(operand, op.column)
        return self.primary()

    def primary(self) -> Node:
        tok = self.take()
        if tok.kind is Kind.IDENT:
            return Ident(str(tok.value), tok.column)
        if tok.kind is Kind.STRING:
            return Literal(str(tok.value), tok.column)
        if tok.kind is Kind.EXACT:
            if tok.value == LONG_MAX + 1:
                raise self.error(tok, f"{tok.text} is outside the range of a Java long")
            return Literal(tok.value, tok.column)
        if tok.kind is Kind.APPROX:
            return Literal(tok.value, tok.column)
        if tok.kind is Kind.KEYWORD and tok.value in ("TRUE", "FALSE"):
            return Literal(tok.value == "TRUE", tok.column)
        if tok.kind is Kind.OP and tok.value == "(":
            inner = self.or_expr()
            closing = self.take()
            if closing.kind is not Kind.OP or closing.value != ")":
                raise self.error(
                    closing, f"expected ')' to close '(' at column {tok.column}, found {_describe(closing)}"
                )
            return inner
        if tok.kind is Kind.KEYWORD and tok.value == "NULL":
            raise self.error(tok, "NULL is not a value; test for it with IS NULL or IS NOT NULL")
        if tok.kind is Kind.END:
            raise self.error(tok, "the selector ends where an operand is expected")
        raise self.error(tok, f"expected an operand, found {_describe(tok)}")


def _check_like_pattern(text: str, pattern: Token, escape: str | None) -> None:
    """The escape character may only precede %, _ or itself (SQL-92 8.5 rule; JMS 1.1 leaves it open)."""
    if escape is None:
        return
    # Walk the raw literal so a column can be given: '' inside the literal is one character.
    raw = pattern.text[1:-1]
    chars: list[tuple[str, int]] = []
    i = 0
    while i < len(raw):
        chars.append((raw[i], pattern.column + 1 + i))
        i += 2 if raw[i] == "'" else 1
    k = 0
    while k < len(chars):
        ch, column = chars[k]
        if ch == escape:
            if k + 1 >= len(chars):
                raise syntax_error(text, column, f"LIKE pattern ends with its escape character {escape!r}")
            following = chars[k + 1][0]
            if following not in ("%", "_", escape):
                raise syntax_error(
                    text,
                    column,
                    f"escape character {escape!r} must be followed by %, _ or itself, not {following!r}",
                )
            k += 2
        else:
            k += 1


def _wrap(value: int) -> int:
    """Two's complement wrap to a Java long."""
    return ((value - LONG_MIN) & 0xFFFFFFFFFFFFFFFF) + LONG_MIN


def _column(node: Node) -> int:
    """The column where the source text of ``node`` starts (leftmost operand for binary nodes)."""
    while isinstance(node, Arith | Compare | And | Or | Between | In | Like | IsNull):
        node = node.left if isinstance(node, Arith | Compare | And | Or) else node.operand
    return node.column
