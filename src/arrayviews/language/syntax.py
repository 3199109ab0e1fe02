"""The syntax tree of the statement language: one small frozen dataclass per statement and operator.

Nodes compare equal when structurally equal (``parse(to_text(s)) == s``). Cell expressions are the
model's :class:`~arrayviews.model.expressions.Expr` nodes, aggregate calls its
:class:`~arrayviews.model.aggregate_calls.AggregateCall` and array schemas its
:class:`~arrayviews.model.schema.ArraySchema`, so the executor hands them on unchanged.

Constructors check shape only (names are identifiers, coordinate lists line up, lists are not empty);
whether names exist in the database is the executor's business.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import ClassVar

from arrayviews.model.aggregate_calls import AggregateCall
from arrayviews.model.expressions import Expr
from arrayviews.model.schema import ArraySchema

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

#: A literal of INSERT ... VALUES: null (None), a bool, an int or a float (nan and +-inf included).
Value = None | bool | int | float

FILE_FORMATS = ("csv", "parquet")


def _identifier(value: object, what: str) -> str:
    if not isinstance(value, str) or not _IDENTIFIER.fullmatch(value):
        raise ValueError(f"invalid {what} name {value!r}")
    return value


def _identifiers(values: object, what: str, allow_empty: bool = False) -> tuple[str, ...]:
    names = tuple(values)
    if not names and not allow_empty:
        raise ValueError(f"at least one {what} name is needed")
    for name in names:
        _identifier(name, what)
    return names


def _integers(values: object, what: str) -> tuple[int, ...]:
    numbers = tuple(values)
    for number in numbers:
        if isinstance(number, bool) or not isinstance(number, int):
            raise ValueError(f"{what} must be integers, got {number!r}")
    return numbers


def _set(node: object, name: str, value: object) -> None:
    object.__setattr__(node, name, value)


# ---------------------------------------------------------------------------------------------
# Array expressions


class ArrayExpr:
    """Base of the array expressions: a stored array's name or an operator applied to arrays.

    Operator nodes name their array function in ``function`` (the spelling used in statements).
    """

    __slots__ = ()
    function: ClassVar[str | None] = None

    def inputs(self) -> tuple[ArrayExpr, ...]:
        """The array expressions this one reads, left to right."""
        return ()


@dataclass(frozen=True)
class ArrayName(ArrayExpr):
    """A stored array, by name."""

    name: str

    def __post_init__(self) -> None:
        _identifier(self.name, "array")


@dataclass(frozen=True)
class Subarray(ArrayExpr):
    """``subarray(source, lo_1, ..., lo_d, hi_1, ..., hi_d)``: the cells inside a box."""

    function: ClassVar[str] = "subarray"
    source: ArrayExpr
    low: tuple[int, ...]
    high: tuple[int, ...]

    def __post_init__(self) -> None:
        _set(self, "low", _integers(self.low, "subarray coordinates"))
        _set(self, "high", _integers(self.high, "subarray coordinates"))
        if not self.low or len(self.low) != len(self.high):
            raise ValueError(
                f"subarray needs as many high as low coordinates (at least one), got {self.low} and {self.high}"
            )

    def inputs(self) -> tuple[ArrayExpr, ...]:
        return (self.source,)


@dataclass(frozen=True)
class Filter(ArrayExpr):
    """``filter(source, predicate)``: the cells where the predicate holds."""

    function: ClassVar[str] = "filter"
    source: ArrayExpr
    predicate: Expr

    def inputs(self) -> tuple[ArrayExpr, ...]:
        return (self.source,)


@dataclass(frozen=True)
class Project(ArrayExpr):
    """``project(source, a, b, ...)``: only the named attributes, in that order."""

    function: ClassVar[str] = "project"
    source: ArrayExpr
    attributes: tuple[str, ...]

    def __post_init__(self) -> None:
        _set(self, "attributes", _identifiers(self.attributes, "attribute"))

    def inputs(self) -> tuple[ArrayExpr, ...]:
        return (self.source,)


@dataclass(frozen=True)
class Apply(ArrayExpr):
    """``apply(source, name, expression [, name, expression]...)``: new attributes computed per cell."""

    function: ClassVar[str] = "apply"
    source: ArrayExpr
    assignments: tuple[tuple[str, Expr], ...]

    def __post_init__(self) -> None:
        pairs = tuple((name, expression) for name, expression in self.assignments)
        if not pairs:
            raise ValueError("apply needs at least one name and expression")
        for name, expression in pairs:
            _identifier(name, "attribute")
            if not isinstance(expression, Expr):
                raise ValueError(f"apply: {name} needs an expression, got {expression!r}")
        _set(self, "assignments", pairs)

    def inputs(self) -> tuple[ArrayExpr, ...]:
        return (self.source,)


def _calls(values: object) -> tuple[AggregateCall, ...]:
    calls = tuple(values)
    if not calls:
        raise ValueError("at least one aggregate call is needed")
    for call in calls:
        if not isinstance(call, AggregateCall):
            raise ValueError(f"not an aggregate call: {call!r}")
    return calls


@dataclass(frozen=True)
class Window(ArrayExpr):
    """``window(source, before_1, after_1, ..., before_d, after_d, agg(...), ...)``: window aggregates."""

    function: ClassVar[str] = "window"
    source: ArrayExpr
    extents: tuple[int, ...]
    aggregates: tuple[AggregateCall, ...]

    def __post_init__(self) -> None:
        _set(self, "extents", _integers(self.extents, "window extents"))
        if not self.extents or len(self.extents) % 2:
            raise ValueError("window needs a (before, after) pair of extents per dimension")
        _set(self, "aggregates", _calls(self.aggregates))

    def inputs(self) -> tuple[ArrayExpr, ...]:
        return (self.source,)


@dataclass(frozen=True)
class Regrid(ArrayExpr):
    """``regrid(source, b_1, ..., b_d, agg(...), ...)``: aggregates over blocks of cells."""

    function: ClassVar[str] = "regrid"
    source: ArrayExpr
    blocks: tuple[int, ...]
    aggregates: tuple[AggregateCall, ...]

    def __post_init__(self) -> None:
        _set(self, "blocks", _integers(self.blocks, "regrid block sizes"))
        if not self.blocks:
            raise ValueError("regrid needs a block size per dimension")
        _set(self, "aggregates", _calls(self.aggregates))

    def inputs(self) -> tuple[ArrayExpr, ...]:
        return (self.source,)


@dataclass(frozen=True)
class Aggregate(ArrayExpr):
    """``aggregate(source, agg(...), ..., dim, ...)``: aggregates over all cells or per group."""

    function: ClassVar[str] = "aggregate"
    source: ArrayExpr
    aggregates: tuple[AggregateCall, ...]
    by: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _set(self, "aggregates", _calls(self.aggregates))
        _set(self, "by", _identifiers(self.by, "dimension", allow_empty=True))

    def inputs(self) -> tuple[ArrayExpr, ...]:
        return (self.source,)


@dataclass(frozen=True)
class Join(ArrayExpr):
    """``join(left, right)``: cells present in both, with the attributes of both."""

    function: ClassVar[str] = "join"
    left: ArrayExpr
    right: ArrayExpr

    def inputs(self) -> tuple[ArrayExpr, ...]:
        return (self.left, self.right)


# ---------------------------------------------------------------------------------------------
# Statements


class Statement:
    """Base of the statements."""

    __slots__ = ()


@dataclass(frozen=True)
class CreateArray(Statement):
    """``CREATE ARRAY name <attributes> [dimensions]``."""

    schema: ArraySchema


@dataclass(frozen=True)
class DropArray(Statement):
    """``DROP ARRAY name``."""

    name: str

    def __post_init__(self) -> None:
        _identifier(self.name, "array")


@dataclass(frozen=True)
class ShowArrays(Statement):
    """``SHOW ARRAYS``: one row per array."""


@dataclass(frozen=True)
class ShowVersions(Statement):
    """``SHOW VERSIONS OF name``."""

    name: str

    def __post_init__(self) -> None:
        _identifier(self.name, "array")


@dataclass(frozen=True)
class ShowChunks(Statement):
    """``SHOW CHUNKS OF name``: chunk metadata."""

    name: str

    def __post_init__(self) -> None:
        _identifier(self.name, "array")


@dataclass(frozen=True)
class ShowSchema(Statement):
    """``SHOW SCHEMA OF name``: the schema text."""

    name: str

    def __post_init__(self) -> None:
        _identifier(self.name, "array")


@dataclass(frozen=True)
class Select(Statement):
    """``SELECT * | a, b [INTO name] FROM source [WHERE predicate]``.

    ``attributes`` None means ``*``. The predicate is applied before the projection, so it may read
    attributes that are not selected.
    """

    source: ArrayExpr
    attributes: tuple[str, ...] | None = None
    where: Expr | None = None
    into: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.source, ArrayExpr):
            raise ValueError(f"SELECT needs an array expression, got {self.source!r}")
        if self.attributes is not None:
            _set(self, "attributes", _identifiers(self.attributes, "attribute"))
        if self.where is not None and not isinstance(self.where, Expr):
            raise ValueError(f"WHERE needs an expression, got {self.where!r}")
        if self.into is not None:
            _identifier(self.into, "array")


def _value(value: object) -> Value:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise ValueError(f"integer {value} is outside the int64 range")
        return value
    if isinstance(value, float):
        return math.nan if math.isnan(value) else value  # one nan object, so rows compare equal
    raise ValueError(f"a value must be null, a bool, an int or a float, got {value!r}")


@dataclass(frozen=True)
class Insert(Statement):
    """``INSERT INTO name VALUES (...), ...``: one tuple per cell, dimensions then attributes."""

    array: str
    rows: tuple[tuple[Value, ...], ...]

    def __post_init__(self) -> None:
        _identifier(self.array, "array")
        rows = tuple(tuple(_value(v) for v in row) for row in self.rows)
        if not rows or not all(rows):
            raise ValueError("INSERT needs at least one row, and every row at least one value")
        _set(self, "rows", rows)


@dataclass(frozen=True)
class Load(Statement):
    """``LOAD name FROM 'path' [AS CSV | PARQUET]`` (format from the extension when left out)."""

    array: str
    path: str
    format: str | None = None

    def __post_init__(self) -> None:
        _identifier(self.array, "array")
        if not isinstance(self.path, str) or "\n" in self.path:
            raise ValueError(f"invalid path {self.path!r}")
        if self.format is not None:
            if self.format.lower() not in FILE_FORMATS:
                raise ValueError(f"unknown file format {self.format!r}; use {' or '.join(FILE_FORMATS)}")
            _set(self, "format", self.format.lower())


@dataclass(frozen=True)
class Delete(Statement):
    """``DELETE FROM name`` (every cell) or ``DELETE FROM subarray(name, lo..., hi...)`` (a box)."""

    target: ArrayName | Subarray

    def __post_init__(self) -> None:
        target = self.target
        if isinstance(target, Subarray):
            target = target.source
        if not isinstance(target, ArrayName):
            raise ValueError("DELETE FROM takes an array name or subarray(name, low..., high...)")

    @property
    def array(self) -> str:
        target = self.target
        return target.source.name if isinstance(target, Subarray) else target.name


__all__ = [
    "Aggregate",
    "Apply",
    "ArrayExpr",
    "ArrayName",
    "CreateArray",
    "Delete",
    "DropArray",
    "Filter",
    "Insert",
    "Join",
    "Load",
    "Project",
    "Regrid",
    "Window",
    "Select",
    "ShowArrays",
    "ShowChunks",
    "ShowSchema",
    "ShowVersions",
    "Statement",
    "Subarray",
    "Value",
    "FILE_FORMATS",
]
