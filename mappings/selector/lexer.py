"""JMS message selector lexer: selector text -> tokens with 1-based columns (JMS 1.1 §3.8.1.1).

The lexical rules (JMS 1.1 "Message Selector Syntax"; WebSphere Message Broker docs "JMS message
selector", table of Literals) are listed at ``tokenize``.
"""

from __future__ import annotations

import math
import struct
import unicodedata
from dataclasses import dataclass
from enum import Enum

from mappings.errors import MappingError

STRUCTURE = "selector"

RESERVED_WORDS = frozenset({"NULL", "TRUE", "FALSE", "NOT", "AND", "OR", "BETWEEN", "LIKE", "IN", "IS", "ESCAPE"})

LONG_MIN = -(2**63)
LONG_MAX = 2**63 - 1

_WHITESPACE = frozenset(" \t\f\r\n")
_OPERATORS = ("<>", "<=", ">=", "=", "<", ">", "+", "-", "*", "/", "(", ")", ",")
# Character.isJavaIdentifierStart: letters, letter numbers, currency symbols, connecting punctuation.
_ID_START_CATEGORIES = frozenset({"Lu", "Ll", "Lt", "Lm", "Lo", "Nl", "Sc", "Pc"})
# Character.isJavaIdentifierPart adds digits, combining marks and the identifier-ignorable characters.
_ID_PART_CATEGORIES = _ID_START_CATEGORIES | {"Nd", "Mn", "Mc", "Cf"}


class Kind(Enum):
    IDENT = "identifier"
    KEYWORD = "keyword"  # value is the upper-cased reserved word
    STRING = "string literal"
    EXACT = "exact numeric literal"
    APPROX = "approximate numeric literal"
    OP = "operator"  # value is the operator text, also ( ) ,
    END = "end of selector"


@dataclass(frozen=True, slots=True)
class Token:
    kind: Kind
    value: str | int | float  # str for IDENT/KEYWORD/STRING/OP, int for EXACT, float for APPROX
    column: int  # 1-based column of the first character
    text: str  # the source text of the token (for messages)


def syntax_error(text: str, column: int, reason: str, field: str | None = None) -> MappingError:
    """A selector syntax error: names the column and shows the text with a caret under it."""
    # Every whitespace character is one column, so render each as one space to keep the caret aligned.
    shown = "".join(" " if ch in _WHITESPACE else ch for ch in text)
    caret = " " * (column - 1) + "^"
    message = f"{reason} (column {column})\n  {shown}\n  {caret}"
    return MappingError(message, structure=STRUCTURE, field=field, offset=column)


def is_identifier_start(ch: str) -> bool:
    return unicodedata.category(ch) in _ID_START_CATEGORIES


def is_identifier_part(ch: str) -> bool:
    if unicodedata.category(ch) in _ID_PART_CATEGORIES:
        return True
    # Character.isIdentifierIgnorable: the ISO controls that are not whitespace.
    code = ord(ch)
    return code <= 0x08 or 0x0E <= code <= 0x1B or 0x7F <= code <= 0x9F


def is_valid_identifier(name: str) -> bool:
    """True when ``name`` is usable as a selector identifier (Java identifier, not a reserved word)."""
    return (
        bool(name)
        and is_identifier_start(name[0])
        and all(is_identifier_part(ch) for ch in name[1:])
        and name.upper() not in RESERVED_WORDS
    )


def tokenize(text: str) -> list[Token]:
    """Split selector text into tokens; the list always ends with an END token.

    Rules (JMS 1.1 §3.8.1.1 "Message Selector Syntax"; WebSphere Message
    Broker docs "JMS message selector", table of Literals):

    - whitespace is Java's: space, horizontal tab, form feed, line terminators (CR, LF);
    - string literals are single-quoted, ``''`` stands for one quote, any other character is literal;
    - exact numeric literals use the Java integer literal syntax: decimal, hex ``0x1F``, octal ``017``,
      optional ``L``/``l`` suffix, value within Java long (hex and octal are magnitudes, not two's
      complement bit patterns, as in ActiveMQ and IBM MQ); signs are unary operators;
    - approximate numeric literals use the Java floating point syntax: ``7.``, ``.5``, ``-57.9E2``, ``5E2``,
      optional ``F``/``D`` suffix (``F`` rounds to a Java float); finite values only;
    - identifiers follow ``Character.isJavaIdentifierStart/Part``; they are case sensitive;
    - the words NULL TRUE FALSE NOT AND OR BETWEEN LIKE IN IS ESCAPE are reserved, case-insensitively;
    - SQL comments are not supported (JMS 1.1 §3.8.1.1).
    """
    tokens: list[Token] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        column = i + 1
        if ch in _WHITESPACE:
            i += 1
        elif ch == "'":
            i = _string(text, i, tokens)
        elif ch.isdigit() and ch.isascii() or (ch == "." and i + 1 < n and _ascii_digit(text[i + 1])):
            i = _number(text, i, tokens)
        elif is_identifier_start(ch):
            j = i + 1
            while j < n and is_identifier_part(text[j]):
                j += 1
            word = text[i:j]
            if word.upper() in RESERVED_WORDS:
                tokens.append(Token(Kind.KEYWORD, word.upper(), column, word))
            else:
                tokens.append(Token(Kind.IDENT, word, column, word))
            i = j
        else:
            for op in _OPERATORS:
                if text.startswith(op, i):
                    tokens.append(Token(Kind.OP, op, column, op))
                    i += len(op)
                    break
            else:
                if ch == '"':
                    reason = "string literals use single quotes, not double quotes"
                elif ch == "!":
                    reason = "unexpected character '!' (not-equal is written <>)"
                else:
                    reason = f"unexpected character {ch!r}"
                raise syntax_error(text, column, reason)
    tokens.append(Token(Kind.END, "", n + 1, ""))
    return tokens


def _ascii_digit(ch: str) -> bool:
    return "0" <= ch <= "9"


def _string(text: str, start: int, tokens: list[Token]) -> int:
    parts: list[str] = []
    i = start + 1
    n = len(text)
    while True:
        end = text.find("'", i)
        if end < 0:
            raise syntax_error(text, start + 1, "string literal is not closed with a single quote")
        parts.append(text[i:end])
        if end + 1 < n and text[end + 1] == "'":  # '' is one quote inside the literal
            parts.append("'")
            i = end + 2
            continue
        tokens.append(Token(Kind.STRING, "".join(parts), start + 1, text[start : end + 1]))
        return end + 1


def _number(text: str, start: int, tokens: list[Token]) -> int:
    n = len(text)
    column = start + 1
    # Hexadecimal exact literal.
    if text.startswith(("0x", "0X"), start):
        j = start + 2
        while j < n and text[j] in "0123456789abcdefABCDEF":
            j += 1
        if j == start + 2:
            raise syntax_error(text, column, "hexadecimal literal needs at least one digit after 0x")
        value = int(text[start + 2 : j], 16)
        j = _long_suffix(text, j)
        return _exact(text, start, j, value, tokens)
    j = start
    while j < n and _ascii_digit(text[j]):
        j += 1
    int_end = j
    is_float = False
    if j < n and text[j] == ".":
        is_float = True
        j += 1
        while j < n and _ascii_digit(text[j]):
            j += 1
    if j < n and text[j] in "eE":
        k = j + 1
        if k < n and text[k] in "+-":
            k += 1
        if k >= n or not _ascii_digit(text[k]):
            raise syntax_error(text, j + 1, "exponent needs at least one digit")
        while k < n and _ascii_digit(text[k]):
            k += 1
        is_float = True
        j = k
    single = False
    if j < n and text[j] in "fFdD":
        is_float = True
        single = text[j] in "fF"
        j += 1
    if is_float:
        literal = text[start:j].rstrip("fFdD")
        value_f = float(literal)
        if math.isinf(value_f):
            raise syntax_error(text, column, f"{text[start:j]} is outside the range of a Java double")
        if single:
            try:
                value_f = struct.unpack("<f", struct.pack("<f", value_f))[0]
            except OverflowError:
                raise syntax_error(text, column, f"{text[start:j]} is outside the range of a Java float") from None
        j = _check_end(text, j)
        tokens.append(Token(Kind.APPROX, value_f, column, text[start:j]))
        return j
    digits = text[start:int_end]
    if len(digits) > 1 and digits[0] == "0":
        bad = next((k for k, d in enumerate(digits) if d in "89"), None)
        if bad is not None:
            raise syntax_error(text, start + bad + 1, f"digit {digits[bad]} in octal literal {digits}")
        value = int(digits, 8)
    else:
        value = int(digits)
    j = _long_suffix(text, int_end)
    return _exact(text, start, j, value, tokens)


def _long_suffix(text: str, j: int) -> int:
    return j + 1 if j < len(text) and text[j] in "lL" else j


def _check_end(text: str, j: int) -> int:
    # A number glued to letters or digits ("12abc", "0x1G", "1.5.2") is a syntax error, not two tokens.
    if j < len(text) and (is_identifier_part(text[j]) or text[j] == "."):
        raise syntax_error(text, j + 1, f"unexpected character {text[j]!r} after a numeric literal")
    return j


def _exact(text: str, start: int, j: int, value: int, tokens: list[Token]) -> int:
    j = _check_end(text, j)
    # 9223372036854775808 is allowed only as the operand of unary minus (Java rule); the parser checks.
    if value > LONG_MAX + 1:
        raise syntax_error(text, start + 1, f"{text[start:j]} is outside the range of a Java long")
    tokens.append(Token(Kind.EXACT, value, start + 1, text[start:j]))
    return j
