"""Building the generated ViewDF queries: placeholder tables for part references, fresh column
names and the small sqlglot constructors the pattern and window translations share."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from sqlglot import exp

from arrayviews.model.viewdf import PartIndex, Presentation, ViewDFDefinition, viewdf_definition
from arrayviews.model.window_step import WindowStep

# A query under construction: built for one part variable ("i" or "j") with the placeholder tables
# handed out by a _References.
QueryBuilder = Callable[["_References"], exp.Expression]


def _duration(seconds: int) -> str:
    if seconds % 3600 == 0:
        return f"{seconds // 3600} hours"
    if seconds % 60 == 0:
        return f"{seconds // 60} minutes"
    return f"{seconds} seconds"


class _Names:
    """Column names that collide neither with the user's columns nor with each other."""

    def __init__(self, taken: Iterable[str]) -> None:
        self.taken = {name.lower() for name in taken}

    def fresh(self, wanted: str) -> str:
        name, k = wanted, 1
        while name.lower() in self.taken:
            name, k = f"{wanted}_{k}", k + 1
        self.taken.add(name.lower())
        return name


class _References:
    """Hands out placeholder tables for part references while a query is built for ``variable``."""

    def __init__(self, variable: str) -> None:
        self.variable = variable
        self.texts: dict[str, str] = {}

    def part(self, relation: str, low: int, high: int | None = None) -> exp.Table:
        """``relation[variable+low .. variable+high]`` (one part when ``high`` is None)."""
        placeholder = f"__part_{len(self.texts)}__"
        low_text = PartIndex(1, low).text(self.variable)
        if high is None or high == low:
            self.texts[placeholder] = f"{relation}[{low_text}]"
        else:
            self.texts[placeholder] = f"{relation}[{low_text} .. {PartIndex(1, high).text(self.variable)}]"
        return exp.to_table(placeholder)

    def render(self, query: exp.Expression) -> str:
        # literals kept verbatim (streams.literals) that span lines would be indented by the pretty
        # printer, which would change their value: they are printed in place after it
        held: dict[str, str] = {}

        def hold(node: exp.Expression) -> exp.Expression:
            if isinstance(node, exp.Literal) and not node.is_string and any(c in node.this for c in "\r\n"):
                key = f"__literal_{len(held)}__"
                held[key] = node.this
                return exp.Literal(this=key, is_string=False)
            return node

        text = query.transform(hold).sql(dialect="spark", pretty=True)
        for placeholder, reference in [*self.texts.items(), *held.items()]:
            if text.count(placeholder) != 1:  # pragma: no cover - every placeholder is used once
                raise AssertionError(f"placeholder {placeholder} appears {text.count(placeholder)} times")
            text = text.replace(placeholder, reference)
        return text


def _column(name: str, table: str | None = None) -> exp.Column:
    return exp.Column(this=exp.to_identifier(name), table=exp.to_identifier(table) if table else None)


def _number(value: int) -> exp.Literal:
    return exp.Literal.number(value)


def _alias(expression: exp.Expression, name: str) -> exp.Alias:
    return exp.Alias(this=expression, alias=exp.to_identifier(name))


def _coalesce(*expressions: exp.Expression) -> exp.Coalesce:
    first, *rest = expressions
    return exp.Coalesce(this=first, expressions=list(rest))


def _is_null(expression: exp.Expression) -> exp.Expression:
    return exp.Is(this=expression.copy(), expression=exp.null())


def _is_set(expression: exp.Expression) -> exp.Expression:
    """``expression IS NOT NULL``."""
    return exp.Not(this=_is_null(expression))


def _group_values(group_by: Iterable[str]) -> list[exp.Expression]:
    """``g=value`` per group column (NULL spelled out), for error messages naming a group."""
    return [
        exp.Anonymous(
            this="concat",
            expressions=[
                exp.Literal.string(f"{g}="),
                _coalesce(exp.cast(_column(g), "STRING"), exp.Literal.string("NULL")),
            ],
        )
        for g in group_by
    ]


def _same_groups(group_by: tuple[str, ...], left: str, right: str) -> exp.Expression:
    """Null-safe equality of the group columns of ``left`` and ``right``."""
    return exp.and_(
        *(exp.NullSafeEQ(this=_column(g, left), expression=_column(g, right)) for g in group_by), copy=False
    )


def _statement_text(name: str, initialize: str, update: str, partition_length: int) -> str:
    """The ViewDF statement around two generated query texts (kept as they are, so that each body is
    exactly the generated query)."""
    return (
        f"CREATE VIEW {name} AS\nINITIALIZE {name}[i] AS\n{initialize}\n"
        f"UPDATE {name}[j] AS\n{update}\nPARTITION LENGTH {partition_length}"
    )


def _definition(
    name: str,
    initialize: QueryBuilder,
    update: QueryBuilder,
    partition_length: int,
    helper: bool,
    presentation: Presentation | None = None,
    window_step: WindowStep | None = None,
) -> ViewDFDefinition:
    texts = []
    for variable, build in (("i", initialize), ("j", update)):
        references = _References(variable)
        texts.append(references.render(build(references)))
    text = _statement_text(name, texts[0], texts[1], partition_length)
    return viewdf_definition(
        name,
        ("i", texts[0]),
        ("j", texts[1]),
        partition_length,
        backfill=True,
        helper=helper,
        text=text,
        presentation=presentation,
        window_step=window_step,
    )
