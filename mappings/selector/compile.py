"""JMS message selectors: compile once, evaluate many; and the JMSInput node's composite selector.

The public API of the selector language (mappings.selector.lexer, .parser and .evaluate hold the rules):
``compile_selector`` -> ``Selector``, ``selector_lookup`` (the values a selector sees for one message) and
``build_composite_selector`` (WebSphere Message Broker docs "JMS message selector").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Literal

from mappings.errors import MappingError
from mappings.selector.evaluate import DELIVERY_MODE_NAMES, Evaluator, compile_tree
from mappings.selector.lexer import STRUCTURE, Kind, is_valid_identifier, syntax_error, tokenize
from mappings.selector.parser import Ident, Node, parse

__all__ = [
    "SELECTOR_HEADER_FIELDS",
    "Selector",
    "build_composite_selector",
    "compile_selector",
    "is_valid_identifier",
    "selector_lookup",
]

# JMS 1.1 §3.8.1.1: "Message header field references are restricted to JMSDeliveryMode, JMSPriority,
# JMSMessageID, JMSTimestamp, JMSCorrelationID, and JMSType." The broker's JMSInput node also generates
# JMSRedelivered clauses (its "Redelivered" property), so that header is offered as well.
SELECTOR_HEADER_FIELDS = (
    "JMSDeliveryMode",
    "JMSPriority",
    "JMSMessageID",
    "JMSTimestamp",
    "JMSCorrelationID",
    "JMSType",
    "JMSRedelivered",
)


def _always_true(lookup: Mapping[str, Any]) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class Selector:
    """A compiled selector. Immutable and safe to share between threads."""

    text: str
    identifiers: frozenset[str]
    _evaluate: Evaluator = field(repr=False, compare=False)

    def matches(self, lookup: Mapping[str, Any]) -> bool:
        """True when the message is selected (the selector is TRUE; FALSE and UNKNOWN do not select)."""
        return self._evaluate(lookup) is True

    def evaluate(self, lookup: Mapping[str, Any]) -> bool | None:
        """The selector's three-valued result: True, False, or None for UNKNOWN."""
        result = self._evaluate(lookup)
        return result if isinstance(result, bool) else None


def compile_selector(text: str) -> Selector:
    """Parse and check ``text`` once; raises MappingError(structure="selector", offset=column).

    ``Selector.matches(lookup)`` is True only when the selector evaluates to TRUE for that message;
    ``Selector.evaluate(lookup)`` returns True, False or None (UNKNOWN). ``lookup`` is any Mapping from
    identifier to a header or property value (bool/int/float/str/None); a name it does not hold is
    NULL. An empty or all-whitespace selector means "no selector" and matches every message (JMS 1.1
    §3.8.1.1).
    """
    if not isinstance(text, str):
        raise MappingError(f"a selector must be a string, not {type(text).__name__}", structure=STRUCTURE)
    if not text.strip(" \t\f\r\n"):
        return Selector(text, frozenset(), _always_true)
    tree = parse(text)
    return Selector(text, frozenset(_identifiers(tree)), compile_tree(tree))


def _identifiers(node: Node) -> set[str]:
    if isinstance(node, Ident):
        return {node.name}
    found: set[str] = set()
    for f in fields(node):
        child = getattr(node, f.name)
        if is_dataclass(child):
            found |= _identifiers(child)  # type: ignore[arg-type]
    return found


def selector_lookup(
    properties: Mapping[str, Any] | None = None,
    *,
    delivery_mode: int | str | None = None,
    priority: int | None = None,
    message_id: str | None = None,
    timestamp: int | None = None,
    correlation_id: str | None = None,
    jms_type: str | None = None,
    redelivered: bool | None = None,
) -> dict[str, Any]:
    """The values a selector sees for one message (JMS 1.1 §3.8.1.1).

    JMSDeliveryMode is given as 'PERSISTENT'/'NON_PERSISTENT' (the integer constants 2/1 are converted);
    header fields that are None are absent, so they are NULL. Properties named like a selector header
    field are ignored: a JMS property cannot carry a header's name, and a header must not be spoofed.
    """
    values: dict[str, Any] = {}
    if properties:
        values.update((k, v) for k, v in properties.items() if k not in SELECTOR_HEADER_FIELDS)
    if isinstance(delivery_mode, int) and not isinstance(delivery_mode, bool):
        if delivery_mode not in DELIVERY_MODE_NAMES:
            raise MappingError(
                f"delivery mode {delivery_mode} is neither 1 (NON_PERSISTENT) nor 2 (PERSISTENT)",
                structure=STRUCTURE,
                field="JMSDeliveryMode",
            )
        delivery_mode = DELIVERY_MODE_NAMES[delivery_mode]
    headers = {
        "JMSDeliveryMode": delivery_mode,
        "JMSPriority": priority,
        "JMSMessageID": message_id,
        "JMSTimestamp": timestamp,
        "JMSCorrelationID": correlation_id,
        "JMSType": jms_type,
        "JMSRedelivered": redelivered,
    }
    values.update((k, v) for k, v in headers.items() if v is not None)
    return values


# -- composite selector of the JMSInput node -------------------------------------------------------

ValueType = Literal["num", "str", "bool", "mode"]

# (node property, identifier the node prefixes, type of its literals), in the order of the table in
# WebSphere Message Broker docs "JMS message selector".
_HEADER_PROPERTIES: tuple[tuple[str, str, ValueType], ...] = (
    ("TimeStamp", "JMSTimestamp", "num"),
    ("DeliveryMode", "JMSDeliveryMode", "mode"),
    ("Priority", "JMSPriority", "num"),
    ("MessageID", "JMSMessageID", "str"),
    ("Redelivered", "JMSRedelivered", "bool"),  # the docs print "JMSRedlivered": a typo
    ("CorrelationID", "JMSCorrelationID", "str"),
)


def build_composite_selector(
    *,
    property_selector: str | None = None,
    timestamp: str | None = None,
    delivery_mode: str | None = None,
    priority: str | None = None,
    message_id: str | None = None,
    redelivered: str | None = None,
    correlation_id: str | None = None,
) -> str:
    """The selector a JMSInput node generates from its selector properties.

    WebSphere Message Broker docs "JMS message selector": PropertySelector is used as written; each
    header property holds only "the operator and literal part" and the node prefixes the identifier.
    Each part is wrapped in parentheses and the parts are joined with AND, in the order of its table.
    Empty properties are left out; with none set the result is "" (no selector). Header property forms accepted:

    - an operator and a literal: ``> WMBRK123456``, ``= 'ABC'``, ``>= 5``;
    - several of those joined with AND/OR, the identifier repeated in each: ``>= 5 AND <= 8`` gives
      ``JMSPriority >= 5 AND JMSPriority <= 8``;
    - ``[NOT] BETWEEN a AND b``, ``[NOT] IN ('a', 'b')``, ``[NOT] LIKE 'p%' [ESCAPE '!']``, ``IS [NOT] NULL``;
    - a bare literal, meaning ``=``: ``PERSISTENT``, ``FALSE``, ``4``.

    For the string headers (MessageID, CorrelationID, DeliveryMode) a literal written without quotes is
    quoted (the docs write ``> WMBRK123456``); DeliveryMode must be PERSISTENT or NON_PERSISTENT
    (bare words in any case); TimeStamp and Priority take numeric literals; Redelivered TRUE or FALSE.
    Errors name the node property as ``field`` and give the column within that property's text.
    """
    parts: list[str] = []
    if property_selector is not None and property_selector.strip():
        try:
            compile_selector(property_selector)
        except MappingError as exc:
            raise _with_field(exc, "PropertySelector") from None
        parts.append(f"({property_selector.strip()})")
    given = {
        "TimeStamp": timestamp,
        "DeliveryMode": delivery_mode,
        "Priority": priority,
        "MessageID": message_id,
        "Redelivered": redelivered,
        "CorrelationID": correlation_id,
    }
    for prop, identifier, value_type in _HEADER_PROPERTIES:
        fragment = given[prop]
        if fragment is not None and fragment.strip():
            clause = _HeaderFragment(fragment, prop, identifier, value_type).render()
            try:  # rules the fragment splitter leaves to the parser (LIKE escapes): column in the clause
                compile_selector(clause)
            except MappingError as exc:
                raise _with_field(exc, prop) from None
            parts.append(f"({clause})")
    composite = " AND ".join(parts)
    compile_selector(composite)  # every part was checked; this guards the joining itself
    return composite


def _with_field(exc: MappingError, prop: str) -> MappingError:
    """The same syntax error (text, caret, column), naming the node property it came from."""
    return MappingError(exc.reason, structure=STRUCTURE, field=prop, offset=exc.offset)


_FRAGMENT_PUNCT = "()<>=,'"
_CMP_OPS = ("<>", "<=", ">=", "=", "<", ">")


@dataclass(frozen=True, slots=True)
class _Piece:
    kind: Literal["word", "quoted", "op", "punct", "end"]
    text: str
    column: int


class _HeaderFragment:
    """One header selector property ("operator and literal part") -> a clause with the identifier."""

    def __init__(self, text: str, prop: str, identifier: str, value_type: ValueType) -> None:
        self.text = text
        self.prop = prop
        self.identifier = identifier
        self.value_type = value_type
        self.pieces = self._split()
        self.pos = 0

    def error(self, column: int, reason: str) -> MappingError:
        return syntax_error(self.text, column, reason, self.prop)

    def _split(self) -> list[_Piece]:
        text = self.text
        pieces: list[_Piece] = []
        i = 0
        while i < len(text):
            ch = text[i]
            if ch in " \t\f\r\n":
                i += 1
            elif ch == "'":
                j = i + 1
                while True:
                    j = text.find("'", j)
                    if j < 0:
                        raise self.error(i + 1, "string literal is not closed with a single quote")
                    if j + 1 < len(text) and text[j + 1] == "'":
                        j += 2
                        continue
                    break
                pieces.append(_Piece("quoted", text[i : j + 1], i + 1))
                i = j + 1
            elif ch in "<>=":
                op = next(o for o in _CMP_OPS if text.startswith(o, i))
                pieces.append(_Piece("op", op, i + 1))
                i += len(op)
            elif ch in "(),":
                pieces.append(_Piece("punct", ch, i + 1))
                i += 1
            else:
                j = i
                while j < len(text) and text[j] not in _FRAGMENT_PUNCT and text[j] not in " \t\f\r\n":
                    j += 1
                pieces.append(_Piece("word", text[i:j], i + 1))
                i = j
        pieces.append(_Piece("end", "", len(text) + 1))
        return pieces

    def peek(self) -> _Piece:
        return self.pieces[self.pos]

    def take(self) -> _Piece:
        piece = self.pieces[self.pos]
        if piece.kind != "end":
            self.pos += 1
        return piece

    def at_word(self, *words: str) -> bool:
        piece = self.peek()
        return piece.kind == "word" and piece.text.upper() in words

    def render(self) -> str:
        out = [self.part()]
        while self.at_word("AND", "OR"):
            out.append(self.take().text.upper())
            out.append(self.part())
        end = self.peek()
        if end.kind != "end":
            raise self.error(end.column, f"expected AND, OR or the end of {self.prop}, found {end.text!r}")
        return " ".join(out)

    def part(self) -> str:
        ident = self.identifier
        first = self.peek()
        if first.kind == "op":
            self.take()
            if self.value_type == "bool" and first.text not in ("=", "<>"):
                raise self.error(first.column, f"{self.prop} is a boolean: only = and <> apply")
            return f"{ident} {first.text} {self.literal()}"
        negated = ""
        if self.at_word("NOT"):
            self.take()
            negated = "NOT "
            if not self.at_word("BETWEEN", "IN", "LIKE"):
                raise self.error(self.peek().column, "expected BETWEEN, IN or LIKE after NOT")
        if self.at_word("BETWEEN"):
            word = self.take()
            if self.value_type != "num":
                raise self.error(word.column, f"BETWEEN needs numbers; {self.prop} is not numeric")
            low = self.literal()
            if not self.at_word("AND"):
                raise self.error(self.peek().column, "expected AND between the bounds of BETWEEN")
            self.take()
            return f"{ident} {negated}BETWEEN {low} AND {self.literal()}"
        if self.at_word("IN"):
            word = self.take()
            if self.value_type not in ("str", "mode"):
                raise self.error(word.column, f"IN takes string literals; {self.prop} is not a string")
            opening = self.take()
            if opening.text != "(" or opening.kind != "punct":
                raise self.error(opening.column, "expected '(' after IN")
            items = [self.literal()]
            while self.peek().text == "," and self.peek().kind == "punct":
                self.take()
                items.append(self.literal())
            closing = self.take()
            if closing.text != ")" or closing.kind != "punct":
                raise self.error(closing.column, "expected ',' or ')' in the IN list")
            return f"{ident} {negated}IN ({', '.join(items)})"
        if self.at_word("LIKE"):
            word = self.take()
            if self.value_type not in ("str", "mode"):
                raise self.error(word.column, f"LIKE applies to strings; {self.prop} is not a string")
            clause = f"{ident} {negated}LIKE {self.literal(as_pattern=True)}"
            if self.at_word("ESCAPE"):
                self.take()
                clause += f" ESCAPE {self.literal(as_pattern=True)}"
            return clause
        if self.at_word("IS"):
            self.take()
            is_not = ""
            if self.at_word("NOT"):
                self.take()
                is_not = "NOT "
            if not self.at_word("NULL"):
                raise self.error(self.peek().column, "expected NULL after IS")
            self.take()
            return f"{ident} IS {is_not}NULL"
        if negated:
            raise self.error(first.column, "expected BETWEEN, IN or LIKE after NOT")
        return f"{ident} = {self.literal()}"

    def literal(self, as_pattern: bool = False) -> str:
        piece = self.take()
        keyword = piece.kind == "word" and piece.text.upper() in ("AND", "OR")
        if piece.kind not in ("word", "quoted") or keyword:
            found = "the end" if piece.kind == "end" else repr(piece.text)
            raise self.error(piece.column, f"expected a literal for {self.prop}, found {found}")
        vt = self.value_type
        if as_pattern or vt == "str":
            if piece.kind == "quoted":
                return piece.text
            return "'" + piece.text + "'"  # a bare word holds no quote: the splitter ends words at quotes
        if vt == "mode":
            if piece.kind == "quoted":
                value = piece.text[1:-1].replace("''", "'")
            else:
                value = piece.text.upper()
            if value not in ("PERSISTENT", "NON_PERSISTENT"):
                raise self.error(piece.column, f"DeliveryMode is PERSISTENT or NON_PERSISTENT, not {piece.text}")
            return f"'{value}'"
        if vt == "bool":
            if piece.kind == "word" and piece.text.upper() in ("TRUE", "FALSE"):
                return piece.text.upper()
            raise self.error(piece.column, f"{self.prop} is TRUE or FALSE, not {piece.text}")
        # numeric: an optionally signed exact or approximate literal, checked with the selector lexer
        if piece.kind == "word":
            body = piece.text[1:] if piece.text[:1] in "+-" else piece.text
            try:
                tokens = tokenize(body)
            except MappingError:
                tokens = []
            if len(tokens) == 2 and tokens[0].kind in (Kind.EXACT, Kind.APPROX):
                return piece.text
        raise self.error(piece.column, f"{self.prop} needs a numeric literal, not {piece.text}")
