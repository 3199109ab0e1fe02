"""Running statements: each statement becomes calls of the Python API (``Database``, ``Array``, ``View``,
``Stream``, ``StreamView``).

``execute_text(db, text)`` parses all of ``text`` first (a syntax error anywhere runs nothing), then
runs the statements in order and returns the result of the last one:

===================================  =============================================================
statement                            result
===================================  =============================================================
CREATE ARRAY / CREATE STREAM         the new (empty) Array / Stream
CREATE ARRAY VIEW                    the new View (computed and stored)
CREATE VIEW (ViewDF, PATTERN,        the new StreamView (its parts built)
WINDOW)
DROP ARRAY / VIEW / STREAM           None
SHOW ARRAYS / VIEWS / STREAMS /      pandas DataFrame, one row per relation (SHOW VIEWS lists array
RELATIONS                            and stream views with their kind and whether data is pending)
SHOW VERSIONS / CHUNKS OF            pandas DataFrame (``A.versions()`` / ``A.chunks()``)
SHOW SCHEMA OF                       the schema text
SHOW STATUS OF                       pandas DataFrame: base, reflected, current, pending
SELECT over an array expression      a lazy Array (nothing runs until it is read)
SELECT ... INTO                      the stored Array
SELECT over a stream or stream view  a Spark DataFrame (Spark SQL; PART_TIMESTAMP available)
any other Spark SQL query            a Spark DataFrame, over the relations it names
CREATE UNCERTAIN ARRAY               the new (empty) UncertainArray
SELECT * FROM an uncertain array,    the API's result objects (UncertainArray, UncertainSubarray,
subarray(U, ..., THRESHOLD p) or     StructureJoin), evaluated when read (``to_pandas()``)
structure_join(A, B, delta, p)
INSERT / LOAD / DELETE               the WriteResult (an array or uncertain array) or AppendResult
REFRESH VIEW                         the RefreshResult (``str()`` is its message)
VERIFY VIEW                          bool (True when the stored view equals a recomputation)
MAINTAIN [ALL]                       the MaintenancePass (a table per view: action, seconds, error);
                                     raises MaintenanceError naming the views that failed
ALTER VIEW ... SET LATENESS / KEEP   None
EXPLAIN statement                    the explanation text
===================================  =============================================================

Names are resolved by kind (:mod:`arrayviews.language.relations`): a view is opened with
``db.view(name)``, so reads see its public aggregates only (not the hidden ``_`` state attributes)
and writes to it are refused. Semantic errors (an unknown relation or attribute, subarray
coordinates that do not match the dimensions) raise the API's errors, with ``(statement at line N,
column C)`` added to the message when the statement came from text. Every check runs before anything
is written, and each write is one atomic version, so a failing statement changes nothing; the
statements of a script before it stay committed. A statement creating a relation is refused while a
relation of any kind has its name.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa

from arrayviews.language import relations, uncertain_executor
from arrayviews.language import syntax as ast
from arrayviews.language.literals import literal_text, time_problem
from arrayviews.language.parser import ParsedStatement, parse_statements, relations_read
from arrayviews.language.printer import array_text, to_text
from arrayviews.language.registry import EXPLAINERS, STATEMENTS, explainer, statement_runner
from arrayviews.language.relations import open_array
from arrayviews.language.stream_executor import spark_query, stream_rows
from arrayviews.language.view_executor import definition_text
from arrayviews.model.aggregate_calls import AggregateCall
from arrayviews.model.errors import (
    AlreadyExistsError,
    ArrayViewsError,
    ConflictError,
    MissingFileError,
    NotFoundError,
    ParseError,
    SchemaError,
    ValidationError,
)
from arrayviews.model.schema import ArraySchema
from arrayviews.model.sql_dialect import parse_spark_query
from arrayviews.model.text_lines import position
from arrayviews.model.time_scale import TimeScale, instant_nanoseconds
from arrayviews.model.types import arrow_type, python_value_problem

if TYPE_CHECKING:
    from arrayviews.array import Array
    from arrayviews.database import Database


def execute_text(db: Database, text: str) -> Any:
    """Parse ``text`` and run its statements in order; the result of the last one (None if none).

    Each statement commits on its own: when one fails, the statements before it stay committed and
    the ones after it do not run (the error says at which line and column the failing one starts)."""
    result = None
    for parsed in parse_statements(text):
        try:
            result = execute(db, parsed.statement)
        except ParseError:
            raise
        except ArrayViewsError as error:
            _add_position(error, parsed)
            raise
        except FileNotFoundError as error:  # a data file deleted by hand, or a missing input file
            missing = _missing_file(db, error)
            _add_position(missing, parsed)
            raise missing from None
    return result


def _missing_file(db: Database, error: FileNotFoundError) -> NotFoundError:
    """The error of a statement that found a file missing: one of the warehouse's own says the
    warehouse is damaged and how to look (before: a bare FileNotFoundError naming only the path)."""
    path = str(error.filename or (error.args[-1] if error.args else ""))
    folder = str(db.warehouse.location).removeprefix("file://")
    if path and path.startswith(os.path.abspath(folder)):
        return MissingFileError(
            f"a data file of the warehouse is missing ({path}): the warehouse is damaged; run "
            "`arrayviews check` (with --repair to roll the relation back to its newest intact version)"
        )
    return NotFoundError(f"file not found: {path}")


#: Where Spark SQL says a problem is, in the query text it was given (1-based line, 0-based pos).
_SPARK_POSITION = re.compile(r";? line (\d+) pos (\d+)")


def _add_position(error: ArrayViewsError, parsed: ParsedStatement) -> None:
    """Say in ``error``'s message where in the script the failed statement starts (the error keeps its
    type and fields); Spark SQL's own ``line l pos p`` in a query is moved to its place in the script."""
    if getattr(error, "statement_line", None) is not None:
        return
    line, column = parsed.line, parsed.column
    error.statement_line, error.statement_column = line, column
    if not error.args or not isinstance(error.args[0], str):
        return
    message = error.args[0]
    if isinstance(parsed.statement, ast.Query):
        query = parsed.text
        # Spark counts lines at '\n' only; the script's lines also end at '\r' (text_lines)
        spark_lines = [0] + [k + 1 for k, char in enumerate(query) if char == "\n"]

        def in_script(match: re.Match) -> str:
            query_line, pos = int(match.group(1)), int(match.group(2))
            if not 0 < query_line <= len(spark_lines):
                return match.group()
            inner_line, inner_column = position(query, spark_lines[query_line - 1] + pos)
            at = column + inner_column - 1 if inner_line == 1 else inner_column
            return f" at line {line + inner_line - 1}, column {at}"

        message = _SPARK_POSITION.sub(in_script, message)
    error.args = (f"{message} (statement at line {line}, column {column})", *error.args[1:])


def execute(db: Database, statement: ast.Statement) -> Any:
    """Run one statement (see the module docstring for what each returns)."""
    runner = STATEMENTS.get(type(statement))
    if runner is None:
        raise TypeError(f"no executor for statement {statement!r}")
    _check_new_name(db, statement)
    return runner(db, statement)


def _new_name(statement: ast.Statement) -> str | None:
    """The name of the relation a statement creates (None for the other statements); EXPLAIN of such
    a statement is refused as the statement would be."""
    if isinstance(statement, ast.Explain):
        return _new_name(statement.statement)
    if isinstance(statement, ast.CreateArray):
        return statement.schema.name
    if isinstance(statement, ast.CreateViewDF):
        return statement.definition.name
    if isinstance(statement, ast.Select):
        return statement.into
    creating = (
        ast.CreateUncertainArray,
        ast.CreateView,
        ast.CreateStream,
        ast.CreatePatternView,
        ast.CreateWindowView,
    )
    return statement.name if isinstance(statement, creating) else None


def _check_new_name(db: Database, statement: ast.Statement) -> None:
    """Arrays, views and streams share one namespace (names compared without regard to case): a
    statement creating a relation is refused while one of any kind has its name."""
    name = _new_name(statement)
    kind = None if name is None else relations.kind_of(db, name)
    if kind is not None:
        raise AlreadyExistsError(
            f"{relations.a_kind(kind)} named {name} already exists (arrays, views and streams share one "
            "namespace; names are compared without regard to case)"
        )


@statement_runner(ast.Explain)
def _explain(db: Database, s: ast.Explain) -> str:
    writer = EXPLAINERS.get(type(s.statement))
    if writer is None:
        raise ValidationError(
            f"EXPLAIN is not available for {' '.join(to_text(s.statement).split(None, 2)[:2])}; it explains "
            "SELECT, CREATE VIEW (stream views), REFRESH VIEW and MAINTAIN"
        )
    return writer(db, s.statement)


# ---------------------------------------------------------------------------------------------
# Array expressions

#: Builders of each array-expression node: (database, node) -> Array.
ARRAY_EXPRESSIONS: dict[type, Callable[[Database, Any], Array]] = {}


def array_builder(node_type: type) -> Callable:
    """Register how an array-expression node becomes an Array (a decorator)."""

    def register(builder: Callable) -> Callable:
        ARRAY_EXPRESSIONS[node_type] = builder
        return builder

    return register


def evaluate(db: Database, node: ast.ArrayExpr) -> Array:
    """The (lazy) Array of an array expression; schema-level errors are raised here."""
    builder = ARRAY_EXPRESSIONS.get(type(node))
    if builder is None:
        raise TypeError(f"no executor for array expression {node!r}")
    return builder(db, node)


def _spelled(names: list[str], name: str) -> str | None:
    """``name`` as ``names`` spell it: an exact match first, else the one equal without regard to case
    (column names are case-insensitive, as in Spark SQL and the cell expressions), else None."""
    if name in names:
        return name
    return next((n for n in names if n.lower() == name.lower()), None)


def _check_attributes(array: Array, names: tuple[str, ...]) -> tuple[str, ...]:
    """``names`` as the array's attributes are spelled (a ValidationError names one it lacks)."""
    schema = array.schema
    spelled = []
    for name in names:
        found = _spelled(list(schema.attribute_names), name)
        if found is None:
            raise ValidationError(
                f"array {schema.name} has no attribute {name!r}; attributes: "
                f"{', '.join(schema.attribute_names) or '(none)'}",
                array=schema.name,
                column=name,
            )
        spelled.append(found)
    return tuple(spelled)


def _check_dimensions(array: Array, names: tuple[str, ...]) -> tuple[str, ...]:
    """``names`` as the array's dimensions are spelled (a ValidationError names one it lacks)."""
    schema = array.schema
    spelled = []
    for name in names:
        found = _spelled(list(schema.dimension_names), name)
        if found is None:
            raise ValidationError(
                f"array {schema.name} has no dimension {name!r}; dimensions: {', '.join(schema.dimension_names)}",
                array=schema.name,
                column=name,
            )
        spelled.append(found)
    return tuple(spelled)


def _calls(array: Array, calls: tuple[AggregateCall, ...]) -> list[str]:
    """The texts of aggregate calls, their attributes as the array spells them."""
    names = list(array.schema.attribute_names)
    texts = []
    for call in calls:
        found = None if call.attribute is None else _spelled(names, call.attribute)
        texts.append((call if found is None else replace(call, attribute=found)).to_text())
    return texts


def _box(schema: ArraySchema, node: ast.Subarray) -> dict[str, tuple[int, int]]:
    given = len(node.low) + len(node.high)
    if len(node.low) != schema.ndim:
        dims = ", ".join(schema.dimension_names)
        raise ValidationError(
            f"subarray of array {schema.name} needs {2 * schema.ndim} coordinates (the low then the high "
            f"coordinate of each of {dims}), got {given}",
            array=schema.name,
        )
    return {d: (lo, hi) for d, lo, hi in zip(schema.dimension_names, node.low, node.high, strict=True)}


def _plain_array(db: Database, name: str, what: str = "array functions read arrays") -> Array:
    """The array or view ``name``; an uncertain array is refused with what it takes instead."""
    array = open_array(db, name, what)
    if not isinstance(array.schema, ArraySchema):
        raise ValidationError(
            f"{name} is an uncertain array: {what}; {uncertain_executor.USAGE}",
            array=name,
        )
    return array


@array_builder(ast.ArrayName)
def _name(db: Database, node: ast.ArrayName) -> Array:
    return _plain_array(db, node.name)


@array_builder(ast.Subarray)
def _subarray(db: Database, node: ast.Subarray) -> Array:
    if isinstance(node.source, ast.ArrayName):
        what = "array functions read arrays"
        if relations.kind_of(db, node.source.name) == relations.UNCERTAIN_ARRAY:
            what = f"its subarray needs a threshold, subarray({node.source.name}, lo..., hi..., THRESHOLD p)"
        source = _plain_array(db, node.source.name, what)
    else:
        source = evaluate(db, node.source)
    return source.subarray(_box(source.schema, node))


@array_builder(ast.Filter)
def _filter(db: Database, node: ast.Filter) -> Array:
    return evaluate(db, node.source).filter(node.predicate.to_text())


@array_builder(ast.Project)
def _project(db: Database, node: ast.Project) -> Array:
    source = evaluate(db, node.source)
    return source.project(*_check_attributes(source, node.attributes))


@array_builder(ast.Apply)
def _apply(db: Database, node: ast.Apply) -> Array:
    array = evaluate(db, node.source)
    for name, expression in node.assignments:
        array = array.apply(name, expression.to_text())
    return array


@array_builder(ast.Regrid)
def _regrid(db: Database, node: ast.Regrid) -> Array:
    source = evaluate(db, node.source)
    return source.regrid(list(node.blocks), *_calls(source, node.aggregates))


@array_builder(ast.Window)
def _window(db: Database, node: ast.Window) -> Array:
    source = evaluate(db, node.source)
    if len(node.extents) != 2 * source.schema.ndim:
        raise ValidationError(
            f"window over {source.name} needs {2 * source.schema.ndim} extents (a before, after pair per "
            f"dimension {', '.join(source.schema.dimension_names)}), got {len(node.extents)}"
        )
    return source.window(list(node.extents), *_calls(source, node.aggregates))


@array_builder(ast.Aggregate)
def _aggregate(db: Database, node: ast.Aggregate) -> Array:
    source = evaluate(db, node.source)
    by = _check_dimensions(source, node.by)
    return source.aggregate(*_calls(source, node.aggregates), by=list(by))


@array_builder(ast.Join)
def _join(db: Database, node: ast.Join) -> Array:
    return evaluate(db, node.left).join(evaluate(db, node.right))


# ---------------------------------------------------------------------------------------------
# Statements


def _create_array(db: Database, s: ast.CreateArray) -> Array:
    return db.create_array(s.schema)


def _cells(
    schema: ArraySchema,
    rows: tuple[tuple[ast.Value, ...], ...],
    positions: tuple[tuple[tuple[int, int], ...], ...] | None = None,
) -> pa.Table:
    """The rows of INSERT ... VALUES as a typed Arrow table (checked value by value; a refused value
    is named with its line and column when ``positions`` says where each was written)."""
    columns = [(d.name, "int64", False, True) for d in schema.dimensions]
    columns += [(a.name, a.type, a.nullable, False) for a in schema.attributes]
    hints = {a.name: a.null_hint for a in schema.attributes}
    wanted = ", ".join(name for name, *_ in columns)
    for number, row in enumerate(rows, start=1):
        if len(row) != len(columns):
            raise ValidationError(
                f"array {schema.name}: row {number} has {len(row)} value(s); each row needs {len(columns)} "
                f"({wanted})",
                array=schema.name,
            )
    arrays = {}
    for k, (name, type_name, nullable, is_dimension) in enumerate(columns):
        values = [row[k] for row in rows]
        if is_dimension and _times_on_a_time_axis(schema, name, values):
            for number, value in enumerate(values, start=1):
                problem = _time_cell_problem(schema.dimension(name), value)
                if problem:
                    raise _refused(schema, "dimension", name, problem, number, value, positions, k)
            arrays[name] = pa.array(values, pa.string())  # the insert reads them as the cells they label
            continue
        mixed = is_dimension and any(isinstance(v, str) for v in values)
        for number, value in enumerate(values, start=1):
            problem = _value_problem(value, type_name, nullable, is_dimension, hints.get(name, ""))
            if problem and mixed and isinstance(schema.dimension(name).scale, TimeScale):
                problem = (
                    f"{literal_text(value)} is a time where other rows give this dimension as cell "
                    "numbers (give every row's as text, or every row's as a number)"
                )
            if not problem and is_dimension:
                problem = _outside(schema.dimension(name), value)
            if problem:
                what = "dimension" if is_dimension else "attribute"
                raise _refused(schema, what, name, problem, number, value, positions, k)
        if type_name.startswith("float"):
            values = [None if v is None else float(v) for v in values]
        if type_name == "datetime64":  # ISO text, checked above: exact nanoseconds since 1970, UTC
            arrays[name] = pa.array(
                [None if v is None else instant_nanoseconds(v) for v in values], pa.int64()
            ).cast(arrow_type(type_name))
            continue
        arrays[name] = pa.array(values, arrow_type(type_name))
    return pa.table(arrays)


def _refused(schema: ArraySchema, what: str, name: str, problem: str, number: int, value, positions, k: int):
    """The error of a value of INSERT: the array, column, row and (when known) where it was written."""
    where = ""
    if positions is not None:
        line, column = positions[number - 1][k]
        where = f" at line {line}, column {column}"
    return ValidationError(
        f"array {schema.name}, {what} {name}: {problem} in row {number}{where}",
        array=schema.name,
        column=name,
        value=value,
    )


def _time_cell_problem(dimension, text: str) -> str | None:
    """Why the ISO text ``text`` names no cell of the time dimension (no time, between two labels,
    outside the range), or None; exactly in integer nanoseconds, as the insert reads it."""
    scale = dimension.scale
    try:
        offset = instant_nanoseconds(text) - scale.nanoseconds(0)
    except SchemaError as error:
        return str(error)
    step = scale.nanoseconds(1) - scale.nanoseconds(0)
    if offset % step:
        return f"{text!r} labels no cell of the dimension ({scale.to_text()})"
    return _outside(dimension, offset // step)


def _times_on_a_time_axis(schema: ArraySchema, name: str, values: list) -> bool:
    """Whether INSERT gives a time dimension's cells as ISO text (every value a string)."""
    return isinstance(schema.dimension(name).scale, TimeScale) and all(isinstance(v, str) for v in values)


def _value_problem(
    value: ast.Value, type_name: str, nullable: bool, is_dimension: bool, null_hint: str
) -> str | None:
    if type_name == "string" and not is_dimension:
        if value is None:
            return None if nullable else f"null, but the {null_hint}"
        return None if isinstance(value, str) else f"{literal_text(value)} is not a string (quote it: '...')"
    if type_name == "datetime64" and not is_dimension:
        if value is None:
            return None if nullable else f"null, but the {null_hint}"
        return time_problem(value)
    if isinstance(value, str):
        return f"{value!r} is a string, not {'a coordinate' if is_dimension else f'a {type_name} value'}"
    if value is None:
        if is_dimension:
            return "null is not a coordinate"
        return None if nullable else f"null, but the {null_hint}"
    if is_dimension and not isinstance(value, bool) and not isinstance(value, int):
        return f"{value!r} is not an integer coordinate"
    return python_value_problem(value, type_name)


def _outside(dimension, value: int) -> str | None:
    """Why the coordinate ``value`` is outside ``dimension``'s range, or None."""
    if dimension.low <= value <= dimension.high:
        return None
    high = "*" if dimension.unbounded else dimension.high
    return f"coordinate {value} is outside the dimension range {dimension.low}:{high}"


def _delete(db: Database, s: ast.Delete) -> Any:
    array = _plain_array(db, s.array, "DELETE removes cells of arrays")
    box = _box(array.schema, s.target) if isinstance(s.target, ast.Subarray) else {}
    return array.delete(box=box)


def _show_schema(db: Database, s: ast.ShowSchema) -> str:
    return open_array(db, s.name, "SHOW SCHEMA shows those of arrays").schema.to_text()


@statement_runner(ast.DropArray)
def _drop_array(db: Database, s: ast.DropArray) -> None:
    kind = relations.kind_of(db, s.name)  # names are compared without regard to case
    if kind == relations.UNCERTAIN_ARRAY:
        db.drop_uncertain_array(s.name)
        return
    if kind == relations.ARRAY_VIEW:
        raise ValidationError(f"{s.name} is a view; drop it with DROP VIEW {s.name}", array=s.name)
    if kind in (relations.STREAM, relations.STREAM_VIEW):
        use = "DROP STREAM" if kind == relations.STREAM else "DROP VIEW"
        raise ValidationError(
            f"{s.name} is {relations.a_kind(kind)}; drop it with {use} {s.name}", array=s.name
        )
    db.drop_array(s.name)  # refused, naming them, while views read it


@statement_runner(ast.ShowRelations)
def _show_relations(db: Database, s: ast.ShowRelations) -> pd.DataFrame:
    if s.kind == "arrays":
        return uncertain_executor.with_uncertain_arrays(db, relations.arrays_frame(db), "arrays")
    if s.kind == "views":
        return relations.views_frame(db, definition_text)
    if s.kind == "streams":
        return relations.streams_frame(db)
    return relations.relations_frame(db, definition_text)


@statement_runner(ast.Select)
def _select(db: Database, s: ast.Select) -> Array | Any:
    if uncertain_executor.is_uncertain_select(db, s):
        return uncertain_executor.select(db, s)
    if isinstance(s.source, ast.ArrayName):
        kind = relations.kind_of(db, s.source.name)
        if kind in (relations.STREAM, relations.STREAM_VIEW):
            if s.into is not None:
                raise ValidationError(
                    f"{s.source.name} is a {kind}: SELECT ... INTO stores array queries only",
                    array=s.source.name,
                )
            text = to_text(s)
            return spark_query(db, text, relations_read(parse_spark_query(text)))
    array = evaluate(db, s.source)
    if isinstance(s.where, ast.SqlCondition) and s.where.error is not None:
        # the name is an array: why cell expressions cannot read the condition, placed in the script
        e = s.where.error
        raise ParseError(e.reason, text=e.text, line=e.line, column=e.column, expected=e.expected)
    if s.where is not None:
        array = array.filter(s.where.to_text())
    if s.attributes is not None:
        # a dimension may be listed too: every cell of the result keeps its dimensions anyway
        dimensions = {name.lower() for name in array.schema.dimension_names}
        attributes = tuple(name for name in s.attributes if name.lower() not in dimensions)
        array = array.project(*_check_attributes(array, attributes))
    if s.into is not None:
        return array.store(s.into)
    return array


@explainer(ast.Select)
def _explain_select(db: Database, s: ast.Select) -> str:
    if uncertain_executor.is_uncertain_select(db, s):
        return uncertain_executor.explain(db, s)
    if isinstance(s.source, ast.ArrayName):
        kind = relations.kind_of(db, s.source.name)
        if kind in (relations.STREAM, relations.STREAM_VIEW):
            return f"Spark SQL query over the {kind} {s.source.name}:\n{to_text(s)}\n"
    array = _select(db, ast.Select(s.source, s.attributes, s.where))
    lines = [f"array query {array_text(s.source)}", f"result schema: {array.schema.to_text()}"]
    lines.append(f"executor: {array.explain()}")
    if s.into is not None:
        lines.append(f"stored into the new array {s.into} as one version")
    return "\n".join(lines) + "\n"


@statement_runner(ast.Query)
def _query(db: Database, s: ast.Query) -> Any:
    return spark_query(db, s.text, s.relations)


@explainer(ast.Query)
def _explain_query(db: Database, s: ast.Query) -> str:
    frame = spark_query(db, s.text, s.relations)  # checked and analysed: nothing runs
    read = ", ".join(f"{name} ({relations.kind_of(db, name)})" for name in s.relations) or "no relation"
    plan = io.StringIO()
    with contextlib.redirect_stdout(plan):
        frame.explain()
    return f"Spark SQL query reading {read}:\n{plan.getvalue().strip()}\n"


@statement_runner(ast.Insert)
def _insert(db: Database, s: ast.Insert) -> Any:
    kind = relations.kind_of(db, s.array)
    _gap_for_streams_only(s, kind)
    _no_rows_into_stream_views(s, kind)
    _conflict_rule_for_arrays_only(s, kind)
    if kind == relations.UNCERTAIN_ARRAY:
        return uncertain_executor.insert(db, s)
    if kind == relations.STREAM:
        stream = db.stream(s.array)
        names = [field.name for field in stream.schema.fields]
        rows = _in_order(s, names, f"stream {s.array}")
        return stream.append(stream_rows(stream, rows, _positions(s, names)), allow_gap=s.allow_gap)
    array = open_array(db, s.array)
    if kind == relations.ARRAY_VIEW:  # said before any value is checked against the view's schema
        raise ValidationError(f"{s.array} is a view: write to its base arrays and refresh it", array=s.array)
    schema = array.schema
    names = [*schema.dimension_names, *schema.attribute_names]
    rows = _in_order(s, names, f"array {s.array}")
    with _conflicts_named_by_statement():
        return array.insert(_cells(schema, rows, _positions(s, names)), on_conflict=s.on_conflict)


def _positions(s: ast.Insert, names: list[str]) -> tuple[tuple[tuple[int, int], ...], ...] | None:
    """Where each value of INSERT was written, in the relation's column order (as ``_in_order``)."""
    if s.positions is None or s.columns is None:
        return s.positions
    columns = [_spelled(names, c) for c in s.columns]
    order = [columns.index(name) for name in names]
    return tuple(tuple(row[k] for k in order) for row in s.positions)


def _no_rows_into_stream_views(s: ast.Insert | ast.Load, kind: str | None) -> None:
    if kind == relations.STREAM_VIEW:
        verb = "INSERT" if isinstance(s, ast.Insert) else "LOAD"
        raise ValidationError(
            f"{s.array} is a stream view: its rows come from the relations it reads; {verb} adds "
            "rows to streams and arrays",
            array=s.array,
        )


def _conflict_rule_for_arrays_only(s: ast.Insert | ast.Load, kind: str | None) -> None:
    if s.on_conflict != "error" and kind in (relations.STREAM, relations.UNCERTAIN_ARRAY):
        what = (
            "a stream appends rows" if kind == relations.STREAM else "an uncertain array keeps tuples by id"
        )
        raise ValidationError(
            f"ON CONFLICT REPLACE overwrites cells of arrays; {s.array} is not one ({what})", array=s.array
        )


@contextlib.contextmanager
def _conflicts_named_by_statement() -> Iterator[None]:
    """A batch refused for cells that already exist names the statement's way to overwrite them."""
    try:
        yield
    except ConflictError as error:
        message = str(error).replace(
            "pass on_conflict='replace' to overwrite them",
            "end the statement with ON CONFLICT REPLACE to overwrite them",
        )
        raise ConflictError(message, array=error.array, column=error.column, value=error.value) from None


def _gap_for_streams_only(s: ast.Insert | ast.Load, kind: str | None) -> None:
    if s.allow_gap and kind is not None and kind != relations.STREAM:
        raise ValidationError(
            f"ALLOW GAP appends past a stream's gap limit; {s.array} is not a stream", array=s.array
        )


def _in_order(s: ast.Insert, names: list[str], relation: str) -> tuple[tuple[ast.Value, ...], ...]:
    """The rows of INSERT in the relation's column order: a column list must name every column once."""
    if s.columns is None:
        return s.rows
    columns = [_spelled(names, c) or c for c in s.columns]
    unknown = [c for c in columns if c not in names]
    missing = [c for c in names if c not in columns]
    if unknown or missing:
        problem = f"has no column {unknown[0]!r}" if unknown else f"needs a value for column {missing[0]}"
        raise ValidationError(
            f"{relation} {problem}: a column list names each of its columns ({', '.join(names)}) once",
            array=s.array,
            column=(unknown or missing)[0],
        )
    order = [columns.index(name) for name in names]
    return tuple(tuple(row[k] for k in order) for row in s.rows)


@statement_runner(ast.Load)
def _load(db: Database, s: ast.Load) -> Any:
    kind = relations.kind_of(db, s.array)
    _gap_for_streams_only(s, kind)
    _no_rows_into_stream_views(s, kind)
    _conflict_rule_for_arrays_only(s, kind)
    if kind == relations.UNCERTAIN_ARRAY:
        return uncertain_executor.load(db, s)
    if kind == relations.STREAM:
        return db.stream(s.array).load(s.path, s.format, allow_gap=s.allow_gap)
    with _conflicts_named_by_statement():
        return open_array(db, s.array).load(s.path, s.format, on_conflict=s.on_conflict)


STATEMENTS.update(
    {
        ast.CreateArray: _create_array,
        ast.ShowVersions: lambda db, s: open_array(
            db, s.name, "SHOW VERSIONS lists those of arrays"
        ).versions(),
        ast.ShowChunks: lambda db, s: _plain_array(
            db, s.name, "SHOW CHUNKS lists the chunks of arrays"
        ).chunks(),
        ast.ShowSchema: _show_schema,
        ast.Delete: _delete,
    }
)


__all__ = [
    "ARRAY_EXPRESSIONS",
    "array_builder",
    "evaluate",
    "execute",
    "execute_text",
]
