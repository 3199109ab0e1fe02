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
CREATE ARRAY VIEW            the new View (computed and stored)
DROP VIEW                    None
SHOW VIEWS                   pandas DataFrame: name, definition, version, pending
SHOW STATUS OF               pandas DataFrame: base, reflected, current, pending
REFRESH VIEW                 the RefreshResult (``str()`` is its message)
VERIFY VIEW                  bool (True when the stored view equals a recomputation)
===========================  ==========================================================

Names are resolved through ``db.views()`` first: a view is opened with ``db.view(name)``, so reads
see its public aggregates only (not the hidden ``_`` state attributes) and writes to it are refused.
SHOW ARRAYS lists the arrays that are not views; DROP ARRAY refuses views and arrays that views
are defined on.

Semantic errors (an unknown array or attribute, subarray coordinates that do not match the
dimensions) raise the API's errors, with ``(statement at line N)`` added to the message when the
statement came from text; errors in a view definition also say where the offending part was
written (``at line L, column C``). Every check runs before anything is written, and each write is
one atomic version, so a failing statement changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa

from arrayviews.language import syntax as ast
from arrayviews.language.parser import parse_statements, parse_view_query
from arrayviews.language.printer import shape_text, view_query_text
from arrayviews.model import shapes
from arrayviews.model.errors import ArrayViewsError, NotFoundError, ParseError, ValidationError
from arrayviews.model.mappings import AxisMap, Mapping
from arrayviews.model.schema import ArraySchema
from arrayviews.model.types import arrow_type, python_value_problem
from arrayviews.views.definition import (
    SimilarityViewDefinition,
    ViewAggregate,
    ViewDefinition,
    WindowViewDefinition,
)

if TYPE_CHECKING:
    from arrayviews.array import Array
    from arrayviews.database import Database
    from arrayviews.views.view import View



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


def open_array(db: Database, name: str) -> Array:
    """The array or view called ``name`` (a view through ``db.view``: public attributes only)."""
    if name in db.views():
        return db.view(name)
    return db.array(name)


def open_view(db: Database, name: str) -> View:
    """The view called ``name``; a clear error when there is none or ``name`` is an array."""
    views = db.views()
    if name not in views:
        if name in db.arrays():
            raise ValidationError(f"{name} is an array, not a view", array=name)
        raise NotFoundError(f"no view named {name} (views: {', '.join(views) or 'none'})")
    return db.view(name)


@array_builder(ast.ArrayName)
def _name(db: Database, node: ast.ArrayName) -> Array:
    return open_array(db, node.name)


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
    views = db.views()
    if s.name in views:
        raise ValidationError(f"{s.name} is a view; drop it with DROP VIEW {s.name}", array=s.name)
    users = [v for v in views if s.name in db.view(v).definition.bases]
    if users:
        raise ValidationError(
            f"array {s.name} is a base of view(s) {', '.join(users)}; drop the view(s) first (DROP VIEW)",
            array=s.name,
        )
    db.drop_array(s.name)


def _show_arrays(db: Database, s: ast.ShowArrays) -> pd.DataFrame:
    frame = db.describe()
    views = db.views()
    return frame[~frame.name.isin(views)].reset_index(drop=True) if views else frame


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
    array = open_array(db, s.array)
    return array.insert(_cells(array.schema, s.rows))


def _cells(schema: ArraySchema, rows: tuple[tuple[ast.Value, ...], ...]) -> pa.Table:
    """The rows of INSERT ... VALUES as a typed Arrow table (checked value by value)."""
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
        for number, value in enumerate(values, start=1):
            problem = _value_problem(value, type_name, nullable, is_dimension, hints.get(name, ""))
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


def _value_problem(
    value: ast.Value, type_name: str, nullable: bool, is_dimension: bool, null_hint: str
) -> str | None:
    if value is None:
        if is_dimension:
            return "null is not a coordinate"
        return None if nullable else f"null, but the {null_hint}"
    if is_dimension and not isinstance(value, bool) and not isinstance(value, int):
        return f"{value!r} is not an integer coordinate"
    return python_value_problem(value, type_name)


def _load(db: Database, s: ast.Load) -> Any:
    return open_array(db, s.array).load(s.path, s.format)


def _delete(db: Database, s: ast.Delete) -> Any:
    array = open_array(db, s.array)
    box = _box(array.schema, s.target) if isinstance(s.target, ast.Subarray) else {}
    return array.delete(box=box)


def _show_schema(db: Database, s: ast.ShowSchema) -> str:
    return open_array(db, s.name).schema.to_text()


# ---------------------------------------------------------------------------------------------
# Views

#: Builders of each shape node: (node, number of dimensions) -> Shape.
SHAPES: dict[type, Callable[[Any, int], shapes.Shape]] = {}


def shape_builder(node_type: type) -> Callable:
    """Register how a shape node becomes a :class:`~arrayviews.model.shapes.Shape` (a decorator)."""

    def register(builder: Callable) -> Callable:
        SHAPES[node_type] = builder
        return builder

    return register


def build_shape(node: ast.ShapeExpr, ndim: int) -> shapes.Shape:
    """The Shape of ``node`` over ``ndim`` dimensions (balls take the dimensions their place leaves)."""
    builder = SHAPES.get(type(node))
    if builder is None:
        raise TypeError(f"no executor for shape {node!r}")
    shape = builder(node, ndim)
    if shape.ndim != ndim:
        raise ValidationError(f"shape {node.function} has {shape.ndim} dimension(s), the right array {ndim}")
    return shapes.Shape(shape.stencil, shape.centre, shape_text(node))  # named as written


@shape_builder(ast.BallShape)
def _ball(node: ast.BallShape, ndim: int) -> shapes.Shape:
    return (shapes.L1 if node.norm == "L1" else shapes.Linf)(node.radius, node.ndim or ndim)


@shape_builder(ast.BoxShape)
def _box_shape(node: ast.BoxShape, ndim: int) -> shapes.Shape:
    if len(node.ranges) != ndim:
        raise ValidationError(
            f"BOX has {len(node.ranges)} range(s) but the shape needs {ndim} (one per dimension)"
        )
    return shapes.box(list(node.ranges))


@shape_builder(ast.ProductShape)
def _product_shape(node: ast.ProductShape, ndim: int) -> shapes.Shape:
    sizes = [part.fixed_ndim() for part in node.parts]
    fixed = sum(n for n in sizes if n is not None)
    free = ndim - fixed
    if (None in sizes and free < 1) or (None not in sizes and free != 0):
        raise ValidationError(
            f"PRODUCT covers {fixed} dimension(s){' plus a ball' if None in sizes else ''}, "
            f"but the shape needs {ndim}"
        )
    return shapes.product(
        *(build_shape(p, free if n is None else n) for p, n in zip(node.parts, sizes, strict=True))
    )


@shape_builder(ast.SetShape)
def _set_shape(node: ast.SetShape, ndim: int) -> shapes.Shape:
    parts = [build_shape(p, ndim) for p in node.parts]
    combine = {"UNION": shapes.Shape.union, "INTERSECTION": shapes.Shape.intersection}
    result = parts[0]
    for part in parts[1:]:
        result = combine.get(node.operation, shapes.Shape.difference)(result, part)
    return result


def _at(query: ast.SimilaritySelect, part: str) -> str:
    where = query.location(part)
    return "" if where is None else f" (at line {where[0]}, column {where[1]})"


def _base_schema(db: Database, name: str) -> ArraySchema:
    if name in db.views():
        raise ValidationError(f"views over views are not supported: {name} is a view", array=name)
    return db.array(name).schema


def view_definition(db: Database, query: ast.ViewQuery) -> ViewDefinition:
    """The definition object of a view's SELECT, checked against the arrays it reads; its ``text``
    is the canonical SELECT."""
    if isinstance(query, ast.WindowSelect):
        return _window_definition(db, query)
    if isinstance(query, ast.SimilaritySelect):
        return _similarity_definition(db, query)
    raise TypeError(f"no executor for view query {query!r}")


def view_definition_from_text(db: Database, text: str) -> ViewDefinition:
    """The definition of ``SELECT ...`` (a view's SELECT alone), as ``db.create_view(name, text)`` takes it."""
    return view_definition(db, parse_view_query(text))


def _window_definition(db: Database, query: ast.WindowSelect) -> WindowViewDefinition:
    schema = _base_schema(db, query.base)
    extents = query.window.extents
    if len(extents) != 2 * schema.ndim:
        raise ValidationError(
            f"window over {schema.name} needs {2 * schema.ndim} extents (a before, after pair per dimension "
            f"{', '.join(schema.dimension_names)}), got {len(extents)}",
            array=schema.name,
        )
    return WindowViewDefinition(
        query.base,
        tuple(extents[0::2]),
        tuple(extents[1::2]),
        tuple(call.to_text() for call in query.window.aggregates),
        view_query_text(query),
    )


def _similarity_definition(db: Database, q: ast.SimilaritySelect) -> SimilarityViewDefinition:
    try:
        left = _base_schema(db, q.left)
    except ArrayViewsError as error:
        error.args = (f"{error.args[0]}{_at(q, 'left')}", *error.args[1:])
        raise
    try:
        right = _base_schema(db, q.right)
    except ArrayViewsError as error:
        error.args = (f"{error.args[0]}{_at(q, 'right')}", *error.args[1:])
        raise
    if tuple(q.group_by) != left.dimension_names:
        dims = ", ".join(f"{q.left_alias}.{d}" for d in left.dimension_names)
        raise ValidationError(
            f"GROUP BY must list every dimension of {q.left} in order ({dims}): only grouping by the "
            f"left array's cells is supported{_at(q, 'group_by')}",
            array=q.left,
        )
    aggregates = []
    for item in q.aggregates:
        where = _at(q, "aggregate " + item.name)
        if item.name in left.dimension_names:
            raise ValidationError(
                f"view output {item.name!r} clashes with a dimension of {q.left}; rename it with AS{where}",
                array=q.left,
            )
        side = None if item.table is None else q.side(item.table)
        if item.attribute is not None:
            schema = left if side == "left" else right
            if not schema.has_attribute(item.attribute):
                raise ValidationError(
                    f"{item.table}.{item.attribute}: array {schema.name} has no attribute {item.attribute!r}; "
                    f"attributes: {', '.join(schema.attribute_names) or '(none)'}{where}",
                    array=schema.name,
                    column=item.attribute,
                )
            if schema.attribute(item.attribute).type == "bool" and item.function in ("sum", "avg"):
                raise ValidationError(
                    f"{item.function} over bool attribute {item.table}.{item.attribute} is not supported "
                    f"in views{where}",
                    array=schema.name,
                    column=item.attribute,
                )
        aggregates.append(ViewAggregate(item.function, side, item.attribute, item.name))
    mapping = _mapping(q, left, right)
    try:
        shape = build_shape(q.shape, right.ndim)
    except ValidationError as error:
        raise ValidationError(f"WITH SHAPE: {error}{_at(q, 'shape')}", array=q.right) from None
    return SimilarityViewDefinition(q.left, q.right, shape, tuple(aggregates), mapping, view_query_text(q))


def _mapping(q: ast.SimilaritySelect, left: ArraySchema, right: ArraySchema) -> Mapping | None:
    """The Mapping of the ON clause (None without one: dimensions matched by name or position)."""
    where = _at(q, "on")
    if q.mapping is None:
        try:
            Mapping.identity(left, right)
        except ValidationError as error:
            raise ValidationError(f"{error}: add ON (...) equalities{where}", array=q.right) from None
        return None
    for equation in q.mapping:
        for schema, alias, name in (
            (right, q.right_alias, equation.target),
            (left, q.left_alias, equation.source),
        ):
            if not schema.has_dimension(name):
                raise ValidationError(
                    f"ON: {alias}.{name}: array {schema.name} has no dimension {name!r}; dimensions: "
                    f"{', '.join(schema.dimension_names)}{where}",
                    array=schema.name,
                    column=name,
                )
    by_target = {e.target: e for e in q.mapping}
    missing = [d for d in right.dimension_names if d not in by_target]
    if missing:
        raise ValidationError(
            f"ON does not map dimension {missing[0]} of {q.right} ({q.right_alias}): every dimension of the "
            f"right array needs exactly one equality, e.g. ({q.right_alias}.{missing[0]} = "
            f"{q.left_alias}.{left.dimension_names[0]}){where}",
            array=q.right,
            column=missing[0],
        )
    return Mapping(
        tuple(
            AxisMap(
                d, by_target[d].source, by_target[d].multiplier, by_target[d].divisor, by_target[d].offset
            )
            for d in right.dimension_names
        )
    )


def _create_view(db: Database, s: ast.CreateView) -> View:
    definition = view_definition(db, s.query)
    chunks = None
    if s.chunks is not None:
        grid = db.array(definition.base if isinstance(definition, WindowViewDefinition) else definition.left)
        if len(s.chunks) != grid.schema.ndim:
            raise ValidationError(
                f"WITH CHUNKS needs one chunk length per dimension of the view "
                f"({', '.join(grid.schema.dimension_names)}), got {len(s.chunks)}",
                array=s.name,
            )
        chunks = list(s.chunks)
    return db.create_view(s.name, definition, chunks)


def definition_text(definition: ViewDefinition) -> str:
    """The SELECT of a view definition (its stored text, or one rebuilt for window views)."""
    if definition.text:
        return definition.text
    if isinstance(definition, WindowViewDefinition):
        from arrayviews.model.aggregate_calls import parse_aggregate

        extents = tuple(x for pair in zip(definition.before, definition.after, strict=True) for x in pair)
        calls = tuple(parse_aggregate(a) for a in definition.aggregates)
        return view_query_text(ast.WindowSelect(ast.Window(ast.ArrayName(definition.base), extents, calls)))
    return f"similarity join of {definition.left} and {definition.right} with shape {definition.shape!r}"


def _show_views(db: Database, s: ast.ShowViews) -> pd.DataFrame:
    rows = []
    for name in db.views():
        view = db.view(name)
        status = view.status()
        rows.append(
            {
                "name": name,
                "definition": definition_text(view.definition),
                "version": status["version"],
                "pending": status["pending"],
            }
        )
    return pd.DataFrame(rows, columns=["name", "definition", "version", "pending"])


def _show_status(db: Database, s: ast.ShowStatus) -> pd.DataFrame:
    frame = pd.DataFrame(open_view(db, s.name).status()["bases"], columns=["base", "reflected", "current"])
    frame["pending"] = frame.reflected != frame.current
    return frame


def _refresh_view(db: Database, s: ast.RefreshView) -> Any:
    view = open_view(db, s.name)
    return view.refresh() if s.strategy is None else view.refresh(s.strategy)


def _drop_view(db: Database, s: ast.DropView) -> None:
    open_view(db, s.name)
    db.drop_view(s.name)


#: Runners of each statement type: (database, statement) -> result.
STATEMENTS: dict[type, Callable[[Database, Any], Any]] = {
    ast.CreateArray: _create_array,
    ast.DropArray: _drop_array,
    ast.ShowArrays: _show_arrays,
    ast.ShowVersions: lambda db, s: open_array(db, s.name).versions(),
    ast.ShowChunks: lambda db, s: open_array(db, s.name).chunks(),
    ast.ShowSchema: _show_schema,
    ast.Select: _select,
    ast.Insert: _insert,
    ast.Load: _load,
    ast.Delete: _delete,
    ast.CreateView: _create_view,
    ast.DropView: _drop_view,
    ast.ShowViews: _show_views,
    ast.ShowStatus: _show_status,
    ast.RefreshView: _refresh_view,
    ast.VerifyView: lambda db, s: open_view(db, s.name).verify(),
}


def statement_runner(node_type: type) -> Callable:
    """Register the runner of a statement type (a decorator)."""

    def register(runner: Callable) -> Callable:
        STATEMENTS[node_type] = runner
        return runner

    return register


__all__ = [
    "ARRAY_EXPRESSIONS",
    "SHAPES",
    "STATEMENTS",
    "array_builder",
    "build_shape",
    "definition_text",
    "evaluate",
    "execute",
    "execute_text",
    "open_array",
    "open_view",
    "shape_builder",
    "statement_runner",
    "view_definition",
    "view_definition_from_text",
]
