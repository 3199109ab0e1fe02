"""Spark's ``date_trunc(unit, ts)`` spelled for DuckDB, so an in-process query that groups by the
hour or the day runs in this process instead of costing a Spark job each step.

Spark reads the unit case-insensitively ('YEAR', 'YYYY', 'YY', 'QUARTER', 'MONTH', 'MON', 'MM',
'WEEK' (the Monday), 'DAY', 'DD', 'HOUR', 'MINUTE', 'SECOND', 'MILLISECOND', 'MICROSECOND') and
truncates in its session time zone, UTC here; in-process queries see times as UTC wall times
(``local_sql._naive_times``), where DuckDB's ``date_trunc`` with the unit's full name means the
same, the week starting on Monday as Spark's does. A DATE argument is Spark's midnight TIMESTAMP.

A query is rewritten only when every ``date_trunc`` in its text names its unit as a string literal
Spark knows and every argument is typed TIMESTAMP or DATE (sqlglot keeps no trace of whether its
unit was a literal or a column, so the text's tokens are read); otherwise it is left as it was, and
the query runs on Spark."""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
import sqlglot
import sqlglot.errors
from sqlglot import exp
from sqlglot.tokens import Token, TokenType

from arrayviews.execution.decimal_guard import annotated

#: Spark's units of ``date_trunc`` and DuckDB's name of each.
SPARK_UNITS = {
    "YEAR": "year",
    "YYYY": "year",
    "YY": "year",
    "QUARTER": "quarter",
    "MONTH": "month",
    "MON": "month",
    "MM": "month",
    "WEEK": "week",
    "DAY": "day",
    "DD": "day",
    "HOUR": "hour",
    "MINUTE": "minute",
    "SECOND": "second",
    "MILLISECOND": "millisecond",
    "MICROSECOND": "microsecond",
}
TIME_TYPES = (
    exp.DataType.Type.TIMESTAMP,  # sqlglot's name of Spark's TIMESTAMP is TIMESTAMPTZ
    exp.DataType.Type.TIMESTAMPTZ,
    exp.DataType.Type.TIMESTAMPLTZ,
    exp.DataType.Type.TIMESTAMPNTZ,
    exp.DataType.Type.DATE,
)


def calls_in(text: str, function: str) -> tuple[list[Token], list[int]] | None:
    """The Spark tokens of ``text`` and the position of the first token inside each call's
    parentheses of ``function`` (upper case), in order; None when the text cannot be tokenized."""
    try:
        tokens = sqlglot.tokenize(text, read="spark")
    except sqlglot.errors.SqlglotError:
        return None
    return tokens, [
        number + 2
        for number, token in enumerate(tokens[:-1])
        if token.text.upper() == function and tokens[number + 1].token_type == TokenType.L_PAREN
    ]


def _literal_units(text: str) -> list[str] | None:
    """The unit of each ``date_trunc(...)`` call in ``text``, in order; None when a call's unit is
    not a string literal (or the text cannot be tokenized)."""
    found = calls_in(text, "DATE_TRUNC")
    if found is None:
        return None
    tokens, starts = found
    units = []
    for start in starts:
        following = tokens[start : start + 2]
        if len(following) < 2 or following[0].token_type != TokenType.STRING:
            return None
        if following[1].token_type != TokenType.COMMA:
            return None
        units.append(following[0].text)
    return units


def spell_time_truncation(
    text: str, tree: exp.Expression, schemas: Mapping[str, pa.Schema]
) -> exp.Expression:
    """``tree`` (Spark query ``text`` over inputs of ``schemas``) with each ``date_trunc`` written as
    DuckDB's ``date_trunc`` of the same meaning, or ``tree`` unchanged when that cannot be told."""
    calls = list(tree.find_all(exp.TimestampTrunc))
    if not calls:
        return tree
    units = _literal_units(text)
    if units is None or len(units) != len(calls) or any(u.upper() not in SPARK_UNITS for u in units):
        return tree
    typed = annotated(tree, schemas)
    if typed is None:
        return tree
    for call in typed.find_all(exp.TimestampTrunc):
        kind = call.this.type
        if kind is None or kind.this not in TIME_TYPES:
            return tree

    def spelled(node: exp.Expression) -> exp.Expression:
        if not isinstance(node, exp.TimestampTrunc):
            return node
        unit = SPARK_UNITS[node.args["unit"].name.upper()]
        moment = exp.cast(node.this, exp.DataType.build("TIMESTAMP"))
        return exp.Anonymous(this="date_trunc", expressions=[exp.Literal.string(unit), moment])

    return tree.transform(spelled)
