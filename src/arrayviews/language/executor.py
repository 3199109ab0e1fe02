"""Running statements: each statement becomes calls of the Python API (``Database`` and ``Array``).

``execute_text(db, text)`` parses all of ``text`` first (a syntax error anywhere runs nothing), then
runs the statements in order and returns the result of the last one:

===========================  ==========================================================
statement                    result
===========================  ==========================================================
CREATE ARRAY                 the new (empty) Array
DROP ARRAY                   None
SHOW ARRAYS                  pandas DataFrame (``db.describe()``)
SHOW VERSIONS / CHUNKS OF    pandas DataFrame (``A.versions()`` / ``A.chunks()``)
SHOW SCHEMA OF               the schema text
SELECT                       a lazy Array (nothing runs until it is read)
SELECT ... INTO              the stored Array
INSERT / LOAD / DELETE       the WriteResult
===========================  ==========================================================

Semantic errors (an unknown array or attribute, subarray coordinates that do not match the
dimensions) raise the API's errors, with ``(statement at line N)`` added to the message when the
statement came from text. Every check runs before anything is written, and each write is one
atomic version, so a failing statement changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from arrayviews.language import syntax as ast
from arrayviews.language.parser import parse_statements
from arrayviews.model.errors import ArrayViewsError, ParseError, ValidationError
from arrayviews.model.schema import ArraySchema
from arrayviews.model.types import arrow_type

if TYPE_CHECKING:
    from arrayviews.array import Array
    from arrayviews.database import Database

_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (ast.INT64_MIN, ast.INT64_MAX)}


def execute_text(db: Database, text: str) -> Any:
    """Parse ``text`` and run its statements in order; the result of the last one (None if none)."""
    result = None
    for parsed in parse_statements(text):
        try:
            result = execute(db, parsed.statement)
        except ParseError:
            raise
        except ArrayViewsError as error:
            _add_line(error, parsed.line)
            raise
    return result


def _add_line(error: ArrayViewsError, line: int) -> None:
    """Say in ``error``'s message which statement failed (the error keeps its type and fields)."""
    if getattr(error, "statement_line", None) is not None:
        return
    error.statement_line = line
    if error.args and isinstance(error.args[0], str):
        error.args = (f"{error.args[0]} (statement at line {line})", *error.args[1:])


def execute(db: Database, statement: ast.Statement) -> Any:
    """Run one statement (see the module docstring for what each returns)."""
    runner = STATEMENTS.get(type(statement))
    if runner is None:
        raise TypeError(f"no executor for statement {statement!r}")
    return runner(db, statement)


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


def _check_attributes(array: Array, names: tuple[str, ...]) -> None:
    schema = array.schema
    for name in names:
        if not schema.has_attribute(name):
            raise ValidationError(
                f"array {schema.name} has no attribute {name!r}; attributes: "
                f"{', '.join(schema.attribute_names) or '(none)'}",
                array=schema.name,
                column=name,
            )


def _check_dimensions(array: Array, names: tuple[str, ...]) -> None:
    schema = array.schema
    for name in names:
        if not schema.has_dimension(name):
            raise ValidationError(
                f"array {schema.name} has no dimension {name!r}; dimensions: {', '.join(schema.dimension_names)}",
                array=schema.name,
                column=name,
            )


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


@array_builder(ast.ArrayName)
def _name(db: Database, node: ast.ArrayName) -> Array:
    return db.array(node.name)


@array_builder(ast.Subarray)
def _subarray(db: Database, node: ast.Subarray) -> Array:
    source = evaluate(db, node.source)
    return source.subarray(_box(source.schema, node))


@array_builder(ast.Filter)
def _filter(db: Database, node: ast.Filter) -> Array:
    return evaluate(db, node.source).filter(node.predicate.to_text())


@array_builder(ast.Project)
def _project(db: Database, node: ast.Project) -> Array:
    source = evaluate(db, node.source)
    _check_attributes(source, node.attributes)
    return source.project(*node.attributes)


@array_builder(ast.Apply)
def _apply(db: Database, node: ast.Apply) -> Array:
    array = evaluate(db, node.source)
    for name, expression in node.assignments:
        array = array.apply(name, expression.to_text())
    return array


@array_builder(ast.Regrid)
def _regrid(db: Database, node: ast.Regrid) -> Array:
    source = evaluate(db, node.source)
    return source.regrid(list(node.blocks), *(call.to_text() for call in node.aggregates))


@array_builder(ast.Window)
def _window(db: Database, node: ast.Window) -> Array:
    source = evaluate(db, node.source)
    if len(node.extents) != 2 * source.schema.ndim:
        raise ValidationError(
            f"window over {source.name} needs {2 * source.schema.ndim} extents (a before, after pair per "
            f"dimension {', '.join(source.schema.dimension_names)}), got {len(node.extents)}"
        )
    return source.window(list(node.extents), *(call.to_text() for call in node.aggregates))


@array_builder(ast.Aggregate)
def _aggregate(db: Database, node: ast.Aggregate) -> Array:
    source = evaluate(db, node.source)
    _check_dimensions(source, node.by)
    return source.aggregate(*(call.to_text() for call in node.aggregates), by=list(node.by))


@array_builder(ast.Join)
def _join(db: Database, node: ast.Join) -> Array:
    return evaluate(db, node.left).join(evaluate(db, node.right))


# ---------------------------------------------------------------------------------------------
# Statements


def _create_array(db: Database, s: ast.CreateArray) -> Array:
    return db.create_array(s.schema)


def _drop_array(db: Database, s: ast.DropArray) -> None:
    db.drop_array(s.name)


def _select(db: Database, s: ast.Select) -> Array:
    array = evaluate(db, s.source)
    if s.where is not None:
        array = array.filter(s.where.to_text())
    if s.attributes is not None:
        _check_attributes(array, s.attributes)
        array = array.project(*s.attributes)
    if s.into is not None:
        return array.store(s.into)
    return array


def _insert(db: Database, s: ast.Insert) -> Any:
    array = db.array(s.array)
    return array.insert(_cells(array.schema, s.rows))


def _cells(schema: ArraySchema, rows: tuple[tuple[ast.Value, ...], ...]) -> pa.Table:
    """The rows of INSERT ... VALUES as a typed Arrow table (checked value by value)."""
    columns = [(d.name, "int64", False, True) for d in schema.dimensions]
    columns += [(a.name, a.type, a.nullable, False) for a in schema.attributes]
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
        for number, value in enumerate(values, start=1):
            problem = _value_problem(value, type_name, nullable, is_dimension)
            if problem:
                what = "dimension" if is_dimension else "attribute"
                raise ValidationError(
                    f"array {schema.name}, {what} {name}: {problem} in row {number}",
                    array=schema.name,
                    column=name,
                    value=value,
                )
        if type_name.startswith("float"):
            values = [None if v is None else float(v) for v in values]
        arrays[name] = pa.array(values, arrow_type(type_name))
    return pa.table(arrays)


def _value_problem(value: ast.Value, type_name: str, nullable: bool, is_dimension: bool) -> str | None:
    if value is None:
        if is_dimension:
            return "null is not a coordinate"
        return None if nullable else f"null, but the attribute is not nullable ({type_name})"
    if type_name == "bool":
        return None if isinstance(value, bool) else f"{value!r} is not a bool (use true or false)"
    if isinstance(value, bool):
        return f"{str(value).lower()} is not a {type_name} value"
    if type_name in _INT_RANGES:
        if not isinstance(value, int):
            kind = "an integer coordinate" if is_dimension else f"an {type_name} value"
            return f"{value!r} is not {kind}"
        low, high = _INT_RANGES[type_name]
        if not low <= value <= high:
            return f"{value} is outside the {type_name} range"
    return None


def _load(db: Database, s: ast.Load) -> Any:
    return db.array(s.array).load(s.path, s.format)


def _delete(db: Database, s: ast.Delete) -> Any:
    array = db.array(s.array)
    box = _box(array.schema, s.target) if isinstance(s.target, ast.Subarray) else {}
    return array.delete(box=box)


def _show_schema(db: Database, s: ast.ShowSchema) -> str:
    return db.array(s.name).schema.to_text()


#: Runners of each statement type: (database, statement) -> result.
STATEMENTS: dict[type, Callable[[Database, Any], Any]] = {
    ast.CreateArray: _create_array,
    ast.DropArray: _drop_array,
    ast.ShowArrays: lambda db, s: db.describe(),
    ast.ShowVersions: lambda db, s: db.array(s.name).versions(),
    ast.ShowChunks: lambda db, s: db.array(s.name).chunks(),
    ast.ShowSchema: _show_schema,
    ast.Select: _select,
    ast.Insert: _insert,
    ast.Load: _load,
    ast.Delete: _delete,
}


def statement_runner(node_type: type) -> Callable:
    """Register the runner of a statement type (a decorator)."""

    def register(runner: Callable) -> Callable:
        STATEMENTS[node_type] = runner
        return runner

    return register


__all__ = [
    "ARRAY_EXPRESSIONS",
    "STATEMENTS",
    "array_builder",
    "evaluate",
    "execute",
    "execute_text",
    "statement_runner",
]
