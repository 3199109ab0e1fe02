"""What a hand-written ViewDF query may read: its part references and its own WITH names only.

A stream or view named without brackets (``SELECT max(v) FROM M``) is not a part the maintainer
tracks: it would read whatever the Spark session last registered under that name (a stale copy of
the whole stream, or nothing), and late rows would never recompute the parts that read it. Paths
(``text.`/etc/hostname```), table functions (``range(5)``) and Java reflection are refused as
Spark SQL over streams refuses them (streams/sql.py), unless the database allows unsafe SQL.
"""

from __future__ import annotations

import sqlglot.errors
from sqlglot import exp

from arrayviews.model.errors import ParseError
from arrayviews.model.sql_dialect import parse_spark
from arrayviews.model.text_lines import line_starts, position_in
from arrayviews.model.viewdf import PartQuery, ViewDFDefinition
from arrayviews.streams.sql import UNSAFE_FUNCTIONS

#: The name each part reference stands under while a query is checked (never a user's name: a
#: user name may not begin with two underscores).
_PLACEHOLDER = "__part_reference_{}"


def check_reads(definition: ViewDFDefinition, relations: set[str], allow_unsafe: bool = False) -> None:
    """Refuse, with the line and column at fault, a query of ``definition`` that reads a relation of
    ``relations`` (the warehouse's streams and stream views) by its bare name, or (unless
    ``allow_unsafe``) anything but its part references and WITH names, or that calls Java methods."""
    known = {name.lower() for name in relations} | {definition.name.lower()}
    for clause, query in (("INITIALIZE", definition.initialize), ("UPDATE", definition.update)):
        _check_query(definition, clause, query, known, allow_unsafe)


def _check_query(
    definition: ViewDFDefinition, clause: str, query: PartQuery, known: set[str], allow_unsafe: bool
) -> None:
    rendered, original = _rendered(query)
    try:
        statements = [s for s in parse_spark(rendered) if s is not None]
    except sqlglot.errors.SqlglotError as error:
        if allow_unsafe:
            return  # Spark's own analysis judges it when the view is created
        raise _error(definition, query, 0, f"the {clause} query could not be checked ({error})") from None
    own = {cte.alias_or_name.lower() for statement in statements for cte in statement.find_all(exp.CTE)}
    for statement in statements:
        for table in statement.find_all(exp.Table):
            _check_table(definition, clause, query, table, own, known, allow_unsafe, original)
        if allow_unsafe:
            continue
        for node in statement.find_all(exp.Func, exp.QueryTransform):
            if isinstance(node, exp.QueryTransform):
                what = "TRANSFORM ... USING runs a program"
            elif node.name.lower() in UNSAFE_FUNCTIONS:
                what = f"{node.name}(...) calls Java methods"
            else:
                continue
            raise _error(definition, query, original(_start(node)), f"the {clause} query is refused: {what}")


def _check_table(definition, clause, query, table, own, known, allow_unsafe, original) -> None:
    name = table.name
    if name.startswith(_PLACEHOLDER.format("")):
        return
    at = original(_start(table))
    qualified = table.args.get("db") is not None or table.args.get("catalog") is not None
    if isinstance(table.this, exp.Identifier) and not qualified:
        if name.lower() in own:  # a WITH name shadows a relation of the same name, as in Spark
            return
        if name.lower() in known:
            variable = query.variable
            raise _error(
                definition,
                query,
                at,
                f"the {clause} query reads {name} without a part reference; a ViewDF query reads "
                f"streams and views part by part, e.g. {name}[{variable}] or {name}[{variable}-9 .. {variable}]",
            )
        if allow_unsafe:
            return
        what = f"{name}, which is neither a part reference nor one of its WITH names"
    elif allow_unsafe:
        return
    elif qualified:
        what = f"{table.sql(dialect='spark')}, a path or another catalog"
    else:
        what = f"the table function {table.this.sql(dialect='spark')}"
    raise _error(
        definition,
        query,
        at,
        f"the {clause} query reads {what} (it may read streams and views through part references "
        f"such as M[{query.variable}], and its own WITH names)",
    )


def _rendered(query: PartQuery):
    """The query with each part reference replaced by a placeholder name, and a function mapping an
    offset in that text back to the offset in the query as written."""
    text = query.render({k: _PLACEHOLDER.format(k) for k in range(len(query.references))})
    marks = []  # (offset after a placeholder in the rendered text, offset after the reference)
    shift = 0
    for k, reference in enumerate(query.references):
        shift += len(_PLACEHOLDER.format(k)) - (reference.end - reference.start)
        marks.append((reference.end + shift, reference.end))

    def original(offset: int) -> int:
        rendered_base, written_base = 0, 0
        for rendered_end, written_end in marks:
            if offset >= rendered_end:
                rendered_base, written_base = rendered_end, written_end
        return written_base + offset - rendered_base

    return text, original


def _start(node: exp.Expression) -> int:
    """The offset of the first identifier or literal of ``node`` in the text it was parsed from."""
    starts = [child.meta["start"] for child in node.walk() if child._meta and "start" in child._meta]
    return min(starts) if starts else 0


def _error(definition: ViewDFDefinition, query: PartQuery, offset: int, message: str) -> ParseError:
    """The error, placed in the defining statement when the query's text is found in it (the
    UPDATE body is the last occurrence: both bodies may be written alike)."""
    found = definition.text.rfind if query is definition.update else definition.text.find
    where = found(query.text) if definition.text and query.text else -1
    if where < 0:
        return ParseError(f"view {definition.name}: {message}")
    line, column = position_in(line_starts(definition.text), where + offset)
    return ParseError(f"view {definition.name}: {message}", text=definition.text, line=line, column=column)


__all__ = ["check_reads"]
