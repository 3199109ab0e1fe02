"""Conditions comparing a time dimension with a time written as text, as conditions on its cells.

A time dimension's column in a cell expression holds cell numbers (BIGINT), so
``time >= '2026-01-02'`` would compare a number with a text. Before typing, each comparison (and
BETWEEN) of a time dimension with text written as an ISO 8601 time becomes the same comparison of
the cell numbers, exactly: the instant is placed among the labels ``origin + cell * step`` in
integer nanoseconds, and the bound rounded to the cells on the right side of it. As in SQL, the text
names one instant (``'2026-01-02'`` is its midnight, UTC), not a period as in ``sel``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction

from arrayviews.model.errors import SchemaError, ValidationError
from arrayviews.model.expression_tree import (
    INT64_MAX,
    INT64_MIN,
    Between,
    Binary,
    Expr,
    Literal,
    Name,
    Unary,
    transform,
)
from arrayviews.model.time_scale import TimeScale, instant_nanoseconds

#: Text read as a time: a year of four digits, a dash and a month, then anything ISO 8601 allows.
_TIME_TEXT = re.compile(r"\s*[+-]?\d{4}-\d{2}")
#: The comparison that holds with the sides swapped (``'t' < time`` is ``time > 't'``).
_SWAPPED = {"=": "=", "<>": "<>", "<=>": "<=>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def time_cells_compared(expression: Expr, scales: Mapping[str, TimeScale]) -> Expr:
    """``expression`` with every comparison of a dimension in ``scales`` (name -> its time scale)
    with a time written as text made a comparison of cell numbers."""
    if not scales:
        return expression

    def rewrite(node: Expr) -> Expr:
        if isinstance(node, Binary) and node.op in _SWAPPED:
            if _time_text(node.left) and _timed(node.right, scales):
                return _cells(node.right.name, _SWAPPED[node.op], node.left.value, scales)
            if _timed(node.left, scales) and _time_text(node.right):
                return _cells(node.left.name, node.op, node.right.value, scales)
        if (
            isinstance(node, Between)
            and _timed(node.operand, scales)
            and _time_text(node.low)
            and _time_text(node.high)
        ):
            name = node.operand.name
            both = Binary(
                "and", _cells(name, ">=", node.low.value, scales), _cells(name, "<=", node.high.value, scales)
            )
            return Unary("not", both) if node.negated else both
        return node

    return transform(expression, rewrite)


def _timed(node: Expr, scales: Mapping[str, TimeScale]) -> bool:
    return isinstance(node, Name) and node.name in scales


def _time_text(node: Expr) -> bool:
    return isinstance(node, Literal) and node.type == "string" and bool(_TIME_TEXT.match(node.value))


def _cells(name: str, op: str, text: str, scales: Mapping[str, TimeScale]) -> Expr:
    """``name op text`` over the cells: ``text``'s instant as a (fractional) cell position q, then
    ``cell op q`` with q rounded toward the cells it keeps (the order flips on a descending axis)."""
    scale = scales[name]
    try:
        instant = instant_nanoseconds(text)
    except (SchemaError, ValueError) as error:
        raise ValidationError(
            f"dimension {name}: {text!r} is not a time ({str(error).splitlines()[0]})",
            column=name,
            value=text,
        ) from None
    origin = scale.nanoseconds(0)
    step = scale.nanoseconds(1) - origin
    position = Fraction(instant - origin, step)
    if step < 0 and op in ("<", "<=", ">", ">="):
        op = _SWAPPED[op]  # a later time is a lower cell
    whole = position.denominator == 1
    if op in ("=", "<=>"):
        return _bound(name, "=", position.numerator) if whole else Literal(False)
    if op == "<>":
        return _bound(name, "<>", position.numerator) if whole else Literal(True)
    floor, ceiling = (
        position.numerator // position.denominator,
        -(-position.numerator // position.denominator),
    )
    return _bound(name, op, ceiling if op in ("<", ">=") else floor)


def _bound(name: str, op: str, cell: int) -> Expr:
    """``name op cell``, with a cell past int64 (where no dimension reaches) decided at once."""
    if cell > INT64_MAX:
        return Literal(op in ("<", "<=", "<>"))
    if cell < INT64_MIN:
        return Literal(op in (">", ">=", "<>"))
    return Binary(op, Name(name), Literal(cell))
