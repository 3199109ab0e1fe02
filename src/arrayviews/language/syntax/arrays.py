"""The syntax tree of arrays: array expressions (a name or an array function applied to arrays) and
the statements that create, fill, query and drop arrays."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

from arrayviews.language.syntax.base import (
    INT64_MIN,
    UINT64_MAX,
    Statement,
    _identifier,
    _identifiers,
    _integers,
    _set,
)
from arrayviews.model.aggregate_calls import AggregateCall
from arrayviews.model.errors import ParseError
from arrayviews.model.expressions import Expr
from arrayviews.model.schema import ArraySchema

#: A literal of INSERT ... VALUES: null (None), a bool, an int, a float (nan and +-inf included) or a
#: string (for string and timestamp columns of streams).
Value = None | bool | int | float | str

FILE_FORMATS = ("csv", "parquet")

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
class SqlCondition:
    """A WHERE condition kept as Spark SQL text: one that cell expressions do not cover (a stream's
    strings or timestamps, say), read when the relation it filters is known. ``error`` is why cell
    expressions could not read it, placed in the script: what an array filtered by it reports."""

    text: str
    error: ParseError | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise ValueError("a condition needs text")

    def to_text(self) -> str:
        return self.text


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
        if self.where is not None and not isinstance(self.where, Expr | SqlCondition):
            raise ValueError(f"WHERE needs an expression, got {self.where!r}")
        if self.into is not None:
            _identifier(self.into, "array")


def _value(value: object) -> Value:
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        if not INT64_MIN <= value <= UINT64_MAX:
            raise ValueError(f"integer {value} is outside the int64 and uint64 ranges")
        return value
    if isinstance(value, float):
        return math.nan if math.isnan(value) else value  # one nan object, so rows compare equal
    raise ValueError(f"a value must be null, a bool, an int, a float or a string, got {value!r}")


#: What INSERT or LOAD does with a cell that already exists (the arrays' ``on_conflict``).
CONFLICT_RULES = ("error", "replace")


def _conflict_rule(statement: Statement, rule: object) -> None:
    if not isinstance(rule, str) or rule.lower() not in CONFLICT_RULES:
        raise ValueError(f"ON CONFLICT takes {' or '.join(r.upper() for r in CONFLICT_RULES)}, got {rule!r}")
    _set(statement, "on_conflict", rule.lower())


@dataclass(frozen=True)
class Insert(Statement):
    """``INSERT INTO name [(column, ...)] VALUES (...), ... [ON CONFLICT REPLACE | ERROR] [ALLOW
    GAP]``: one tuple per cell (dimensions then attributes) or per stream row; with a column list,
    the values of each row in that order. ``on_conflict`` (arrays only): what a cell that already
    exists does; ``allow_gap`` (streams only): append past the stream's gap limit."""

    array: str
    rows: tuple[tuple[Value, ...], ...]
    columns: tuple[str, ...] | None = None
    #: Where each value was written, (line, column) 1-based, when parsed from text (not compared).
    positions: tuple[tuple[tuple[int, int], ...], ...] | None = field(default=None, compare=False, repr=False)
    allow_gap: bool = False
    on_conflict: str = "error"

    def __post_init__(self) -> None:
        _identifier(self.array, "array")
        _conflict_rule(self, self.on_conflict)
        rows = tuple(tuple(_value(v) for v in row) for row in self.rows)
        if not rows or not all(rows):
            raise ValueError("INSERT needs at least one row, and every row at least one value")
        _set(self, "rows", rows)
        if self.columns is not None:
            columns = _identifiers(self.columns, "column")
            repeated = sorted({c for c in columns if columns.count(c) > 1})
            if repeated:
                raise ValueError(f"INSERT names column {repeated[0]} twice")
            for number, row in enumerate(rows, start=1):
                if len(row) != len(columns):
                    raise ValueError(
                        f"row {number} has {len(row)} value(s) for {len(columns)} column(s) ({', '.join(columns)})"
                    )
            _set(self, "columns", columns)


@dataclass(frozen=True)
class Load(Statement):
    """``LOAD name FROM 'path' [AS CSV | PARQUET] [ON CONFLICT REPLACE | ERROR] [ALLOW GAP]``
    (format from the extension when left out; ``on_conflict``, arrays only, as INSERT's;
    ``allow_gap``, streams only: append past the stream's gap limit)."""

    array: str
    path: str
    format: str | None = None
    allow_gap: bool = False
    on_conflict: str = "error"

    def __post_init__(self) -> None:
        _identifier(self.array, "array")
        _conflict_rule(self, self.on_conflict)
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
    "CONFLICT_RULES",
    "FILE_FORMATS",
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
    "Select",
    "ShowChunks",
    "ShowSchema",
    "ShowVersions",
    "SqlCondition",
    "Subarray",
    "Value",
    "Window",
]
