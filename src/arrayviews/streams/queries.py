"""The queries translated into ViewDF views: pattern queries (``PATTERN [a, b+]``) and sliding-window
queries (``[WINDOW 10 MINUTES]``), their select items, pattern variables and conditions."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp


@dataclass(frozen=True)
class Position:
    """Where something was written: 1-based line and column in the statement ``text``."""

    line: int = 0
    column: int = 0


@dataclass(frozen=True)
class SelectItem:
    """One output column of a pattern or window query.

    ``function``: None for a group column, else ``count``, ``sum``, ``avg``, ``min`` or ``max``;
    ``attribute``: the column read (None for ``count(*)``); ``alias``: the output name.
    """

    function: str | None
    attribute: str | None
    alias: str

    @property
    def is_group(self) -> bool:
        return self.function is None

    def call(self) -> tuple[str, str | None] | None:
        """``(function, attribute)`` of an aggregate item, None for a group column."""
        return None if self.function is None else (self.function, self.attribute)

    def text(self) -> str:
        if self.function is None:
            return self.alias if self.alias == self.attribute else f"{self.attribute} AS {self.alias}"
        return f"{self.function}({self.attribute or '*'}) AS {self.alias}"


@dataclass(frozen=True)
class PatternVariable:
    """A variable of the PATTERN list; ``kleene`` for ``d+`` (one or more consecutive tuples)."""

    name: str
    kleene: bool = False


@dataclass(frozen=True)
class Conjunct:
    """One AND-ed predicate of a pattern query's WHERE: its text, its Spark SQL syntax tree, and the
    pattern variables it reads, in pattern order (one variable, or two consecutive ones)."""

    text: str
    variables: tuple[str, ...]
    expression: exp.Expression = field(compare=False, repr=False)
    position: Position = field(default=Position(), compare=False)


@dataclass(frozen=True)
class PatternQuery:
    """``SELECT g..., count(*), sum(x) FROM stream PATTERN [a, b+, ...] WHERE ... GROUP BY g...``."""

    stream: str
    group_by: tuple[str, ...]
    items: tuple[SelectItem, ...]
    variables: tuple[PatternVariable, ...]
    conjuncts: tuple[Conjunct, ...]

    def summed(self) -> tuple[str, ...]:
        """The attributes of the ``sum`` items, each once, in select order."""
        return tuple(dict.fromkeys(item.attribute for item in self.items if item.function == "sum"))

    def variable_index(self, name: str) -> int:
        """The 1-based state number of pattern variable ``name``."""
        return [variable.name for variable in self.variables].index(name) + 1


@dataclass(frozen=True)
class Having:
    """The HAVING predicate of a window query (over aliases, group columns and aggregate calls)."""

    text: str
    expression: exp.Expression = field(compare=False, repr=False)


@dataclass(frozen=True)
class WindowQuery:
    """``SELECT g..., max(x), sum(y), ... FROM stream [WINDOW n MINUTES] GROUP BY g... HAVING h``.

    ``window_seconds`` is the window's length; ``window_position`` where the window was written
    (for the error of a window that is not a whole number of stream parts).
    """

    stream: str
    group_by: tuple[str, ...]
    items: tuple[SelectItem, ...]
    window_seconds: int
    having: Having | None = None
    window_position: Position = field(default=Position(), compare=False)

    def aggregate_calls(self) -> tuple[tuple[str, str | None], ...]:
        """Every distinct aggregate call of the SELECT list and of HAVING, in order of appearance."""
        calls = [item.call() for item in self.items if item.call() is not None]
        if self.having is not None:
            calls += having_calls(self.having.expression)
        return tuple(dict.fromkeys(calls))


#: sqlglot node types of the aggregate functions the window and pattern queries accept.
AGGREGATE_TYPES: dict[type[exp.Expression], str] = {
    exp.Count: "count",
    exp.Sum: "sum",
    exp.Avg: "avg",
    exp.Min: "min",
    exp.Max: "max",
}


def aggregate_call(node: exp.Expression) -> tuple[str, str | None] | None:
    """``(function, attribute)`` when ``node`` is ``f(column)`` or ``count(*)``, else None."""
    function = AGGREGATE_TYPES.get(type(node))
    if function is None:
        return None
    argument = node.this
    if function == "count" and isinstance(argument, exp.Star):
        return ("count", None)
    if isinstance(argument, exp.Column) and not argument.table:
        return (function, argument.name)
    return None


def having_calls(expression: exp.Expression) -> list[tuple[str, str | None]]:
    """The aggregate calls inside a HAVING predicate, in order of appearance."""
    calls = []
    for node in expression.walk():
        call = aggregate_call(node)
        if call is not None:
            calls.append(call)
    return calls
