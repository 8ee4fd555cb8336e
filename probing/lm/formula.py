"""SyntaxGym prediction formulas, parsed by a recursive-descent parser (never ``eval``).

A formula states how region surprisals should relate, e.g. ``[(7;%match_sing%) < (7;%mismatch_sing%)] &
[(7;%match_plural%) < (7;%mismatch_plural%)]``. The grammar and its semantics follow SyntaxGym's own
(``syntaxgym/prediction.py``):

- a *region term* ``(N;%condition%)`` is the surprisal of region N in that condition (``(*;%condition%)``:
  the sum over all the condition's regions; the ``%`` around the condition name may be left out);
- a number (``0``, ``1.5``, ``-2``) is a constant;
- ``+`` and ``-`` (same precedence, left to right) combine numbers;
- one comparison ``<``, ``>`` or ``=`` turns two sums into a truth value (``=`` is ``np.isclose`` with
  SyntaxGym's tolerances ``rtol = 1e-5``, ``atol = 1e-3``); a chain ``a < b < c`` is refused;
- ``&`` and ``|`` (same precedence, left to right) combine truth values;
- ``[ ... ]`` and ``( ... )`` group.

A formula must be a truth value as a whole; a sum where a truth value belongs (or the reverse) is an error
naming the formula, as is any malformed text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from probing.errors import InputError

EQUALITY_RTOL = 1e-5
EQUALITY_ATOL = 1e-3

_TOKEN = re.compile(
    r"\s*(?:"
    r"(?P<region>\(\s*(?P<number>\d+|\*)\s*;\s*(?P<condition>%[^%()]+%|[A-Za-z0-9_\-.]+)\s*\))"
    r"|(?P<float>\d+(?:\.\d*)?|\.\d+)"
    r"|(?P<op>[-+<>=&|\[\]()])"
    r")"
)
_CLOSE = {"[": "]", "(": ")"}


class FormulaError(InputError):
    """A prediction formula that does not parse or does not type-check; the message names it."""


@dataclass(frozen=True)
class Region:
    """``(number;%condition%)``; ``number`` None for ``*`` (every region of the condition, summed)."""

    number: int | None
    condition: str


@dataclass(frozen=True)
class Number:
    value: float


@dataclass(frozen=True)
class Binary:
    op: str
    left: Node
    right: Node


Node = Region | Number | Binary
Values = Mapping[tuple[str, int], float]


def _tokens(text: str, where: str) -> list[tuple[str, str | Region | float, int]]:
    out: list[tuple[str, str | Region | float, int]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise FormulaError(f"{where}: cannot read the formula {text!r} at character {pos + 1}: {text[pos:]!r}")
        start = m.start(m.lastgroup) if m.lastgroup else pos
        if m.group("region"):
            number = m.group("number")
            condition = m.group("condition").strip("%")
            out.append(("region", Region(None if number == "*" else int(number), condition), start))
        elif m.group("float"):
            out.append(("number", float(m.group("float")), start))
        else:
            out.append(("op", m.group("op"), start))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str, where: str) -> None:
        self.text, self.where = text, where
        self.tokens = _tokens(text, where)
        self.i = 0

    def fail(self, message: str) -> FormulaError:
        at = self.tokens[self.i][2] + 1 if self.i < len(self.tokens) else len(self.text.rstrip()) + 1
        return FormulaError(f"{self.where}: formula {self.text!r}: {message} (at character {at})")

    def peek(self) -> str | None:
        if self.i < len(self.tokens) and self.tokens[self.i][0] == "op":
            return str(self.tokens[self.i][1])
        return None

    def parse(self) -> Node:
        if not self.tokens:
            raise FormulaError(f"{self.where}: formula {self.text!r} is empty")
        node, kind = self.boolean()
        if self.i < len(self.tokens):
            raise self.fail(f"unexpected {self._shown()}")
        if kind != "bool":
            raise FormulaError(f"{self.where}: formula {self.text!r} is a number, not a comparison (< > =)")
        return node

    def _shown(self) -> str:
        kind, value, _ = self.tokens[self.i]
        return repr(value) if kind == "op" else f"{kind} {value!r}"

    def boolean(self) -> tuple[Node, str]:
        node, kind = self.comparison()
        while self.peek() in ("&", "|"):
            op = str(self.tokens[self.i][1])
            if kind != "bool":
                raise self.fail(f"{op!r} joins truth values, but its left side is a number")
            self.i += 1
            right, rkind = self.comparison()
            if rkind != "bool":
                raise self.fail(f"{op!r} joins truth values, but its right side is a number")
            node = Binary(op, node, right)
        return node, kind

    def comparison(self) -> tuple[Node, str]:
        node, kind = self.sum()
        if self.peek() in ("<", ">", "="):
            op = str(self.tokens[self.i][1])
            if kind != "num":
                raise self.fail(f"{op!r} compares numbers, but its left side is a truth value")
            self.i += 1
            right, rkind = self.sum()
            if rkind != "num":
                raise self.fail(f"{op!r} compares numbers, but its right side is a truth value")
            if self.peek() in ("<", ">", "="):
                raise self.fail("a chain of comparisons; group them with [ ] and join them with & or |")
            return Binary(op, node, right), "bool"
        return node, kind

    def sum(self) -> tuple[Node, str]:
        node, kind = self.atom()
        while self.peek() in ("+", "-"):
            op = str(self.tokens[self.i][1])
            if kind != "num":
                raise self.fail(f"{op!r} adds numbers, but its left side is a truth value")
            self.i += 1
            right, rkind = self.atom()
            if rkind != "num":
                raise self.fail(f"{op!r} adds numbers, but its right side is a truth value")
            node = Binary(op, node, right)
        return node, kind

    def atom(self) -> tuple[Node, str]:
        if self.i >= len(self.tokens):
            raise self.fail("the formula ends where a region term, a number or a bracket was expected")
        kind, value, _ = self.tokens[self.i]
        if kind == "region":
            self.i += 1
            assert isinstance(value, Region)
            return value, "num"
        if kind == "number":
            self.i += 1
            assert isinstance(value, float)
            return Number(value), "num"
        if value in ("-", "+") and self.i + 1 < len(self.tokens) and self.tokens[self.i + 1][0] == "number":
            number = self.tokens[self.i + 1][1]
            assert isinstance(number, float)
            self.i += 2
            return Number(-number if value == "-" else number), "num"
        if value in _CLOSE:
            self.i += 1
            node, inner = self.boolean()
            if self.peek() != _CLOSE[str(value)]:
                raise self.fail(f"{value!r} is not closed by {_CLOSE[str(value)]!r}")
            self.i += 1
            return node, inner
        raise self.fail(f"unexpected {self._shown()} where a region term, a number or a bracket was expected")


def parse_formula(text: str, where: str = "prediction") -> Node:
    """The syntax tree of ``text``; :class:`FormulaError` (an ``InputError``) naming ``where`` (e.g. the
    suite and prediction) and the formula when it is malformed."""
    if not isinstance(text, str):
        raise FormulaError(f"{where}: a formula must be a string, got {text!r}")
    return _Parser(text, where).parse()


def regions(node: Node) -> set[tuple[str, int | None]]:
    """The ``(condition, region number)`` pairs a formula reads (number None for ``*``)."""
    if isinstance(node, Region):
        return {(node.condition, node.number)}
    if isinstance(node, Binary):
        return regions(node.left) | regions(node.right)
    return set()


def evaluate(node: Node, values: Values) -> bool | float:
    """``node`` on region surprisals ``values`` (``(condition, region) -> surprisal``). A comparison with a
    NaN side is false (as in SyntaxGym, where NaN compares false)."""
    if isinstance(node, Number):
        return node.value
    if isinstance(node, Region):
        if node.number is None:
            return math.fsum(v for (c, _), v in values.items() if c == node.condition)
        return values[(node.condition, node.number)]
    left, right = evaluate(node.left, values), evaluate(node.right, values)
    if node.op == "&":
        return bool(left) and bool(right)
    if node.op == "|":
        return bool(left) or bool(right)
    a, b = float(left), float(right)
    if node.op == "+":
        return a + b
    if node.op == "-":
        return a - b
    if node.op == "<":
        return a < b
    if node.op == ">":
        return a > b
    return bool(math.isfinite(a) and math.isfinite(b) and abs(a - b) <= EQUALITY_ATOL + EQUALITY_RTOL * abs(b))


def show(node: Node) -> str:
    """The formula written back, fully bracketed: ``[(7;%a%) < (7;%b%)]``."""
    if isinstance(node, Number):
        return f"{node.value:g}"
    if isinstance(node, Region):
        return f"({'*' if node.number is None else node.number};%{node.condition}%)"
    return f"[{show(node.left)} {node.op} {show(node.right)}]"
