"""Running the statements of array views: building view definitions (shapes, ON mappings, window
extents) from their SELECT, checked against the arrays they read, and CREATE / REFRESH / VERIFY."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pandas as pd

from arrayviews.language import relations
from arrayviews.language import syntax as ast
from arrayviews.language.parser import parse_view_query
from arrayviews.language.printer import affine_text, shape_text, to_text, view_query_text
from arrayviews.language.registry import explainer, statement_runner
from arrayviews.language.relations import open_view
from arrayviews.model import shapes
from arrayviews.model.aggregate_calls import parse_aggregate
from arrayviews.model.errors import ArrayViewsError, MaintenanceError, NotFoundError, ValidationError
from arrayviews.model.mappings import AxisMap, Mapping
from arrayviews.model.schema import ArraySchema
from arrayviews.operators.window import window_extents
from arrayviews.scheduling.refresh_limit import limit_outlook
from arrayviews.views.definition import (
    SimilarityViewDefinition,
    ViewAggregate,
    ViewDefinition,
    WindowViewDefinition,
)

if TYPE_CHECKING:
    from arrayviews.database import Database
    from arrayviews.view import View

#: Builders of each shape node: (node, number of dimensions) -> Shape.
SHAPES: dict[type, Callable[[Any, int], shapes.Shape]] = {}


def shape_builder(node_type: type) -> Callable:
    """Register how a shape node becomes a :class:`~arrayviews.model.shapes.Shape` (a decorator)."""

    def register(builder: Callable) -> Callable:
        SHAPES[node_type] = builder
        return builder

    return register


def build_shape(node: ast.ShapeExpr, ndim: int) -> shapes.Shape:
    """The Shape of ``node`` over ``ndim`` dimensions (balls take the dimensions their place leaves);
    a stencil too large to build is refused by the model's constructors (``shapes.check_stencil_size``)."""
    builder = SHAPES.get(type(node))
    if builder is None:
        raise TypeError(f"no executor for shape {node!r}")
    shape = builder(node, ndim)
    if shape.ndim != ndim:
        raise ValidationError(f"shape {node.function} has {shape.ndim} dimension(s), the right array {ndim}")
    return shapes.Shape(shape.stencil, shape.centre, shape_text(node))  # named as written


@shape_builder(ast.BallShape)
def _ball(node: ast.BallShape, ndim: int) -> shapes.Shape:
    if node.ndim is not None and node.ndim != ndim:  # a count written is checked, never overridden
        raise ValidationError(
            f"{node.norm}({node.radius}, {node.ndim}) has {node.ndim} dimension(s) but the shape needs {ndim}"
        )
    return (shapes.L1 if node.norm == "L1" else shapes.Linf)(node.radius, ndim)


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
    parts = [build_shape(p, free if n is None else n) for p, n in zip(node.parts, sizes, strict=True)]
    return shapes.product(*parts)


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
    kind = relations.kind_of(db, name)
    if kind is not None and kind not in (relations.ARRAY, relations.ARRAY_VIEW):
        raise ValidationError(f"array views read arrays; {name} is {relations.a_kind(kind)}", array=name)
    return db.array(name).schema  # a view reads as its public aggregates (views over views)


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
    before, after = window_extents(schema, extents)  # cut to the dimensions, as A.window cuts them
    cut = tuple(x for pair in zip(before, after, strict=True) for x in pair)
    query = ast.WindowSelect(dataclasses.replace(query.window, extents=cut))
    return WindowViewDefinition(
        query.base,
        before,
        after,
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
        attribute = item.attribute
        if attribute is not None:
            schema = left if side == "left" else right
            attribute = schema.spelling(attribute)  # column names are case-insensitive
            if not schema.has_attribute(attribute):
                raise ValidationError(
                    f"{item.table}.{item.attribute}: array {schema.name} has no attribute {item.attribute!r}; "
                    f"attributes: {', '.join(schema.attribute_names) or '(none)'}{where}",
                    array=schema.name,
                    column=item.attribute,
                )
            if schema.attribute(attribute).type == "bool" and item.function in ("sum", "avg"):
                raise ValidationError(
                    f"{item.function} over bool attribute {item.table}.{item.attribute} is not supported "
                    f"in views{where}",
                    array=schema.name,
                    column=item.attribute,
                )
        aggregates.append(ViewAggregate(item.function, side, attribute, item.name))
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


@statement_runner(ast.CreateView)
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
        extents = tuple(x for pair in zip(definition.before, definition.after, strict=True) for x in pair)
        calls = tuple(parse_aggregate(a) for a in definition.aggregates)
        return view_query_text(ast.WindowSelect(ast.Window(ast.ArrayName(definition.base), extents, calls)))
    text = f"similarity join of {definition.left} and {definition.right} with shape {definition.shape!r}"
    if definition.mapping is not None and not definition.mapping.is_identity:
        text += " mapping " + ", ".join(_axis_text(axis) for axis in definition.mapping.axes)
    return text


def _axis_text(axis) -> str:
    """``x = p * 2 / 3 - 1``: one right dimension as the floor of an affine map of a left one."""
    return f"{axis.target} = {affine_text(axis.source, axis.multiplier, axis.divisor, axis.offset)}"


@statement_runner(ast.ShowStatus)
def _show_status(db: Database, s: ast.ShowStatus) -> pd.DataFrame:
    """Per relation a view reads, the version it reflects and the current one: array and stream views."""
    kind = relations.kind_of(db, s.name)
    if kind == relations.STREAM_VIEW:
        frame = pd.DataFrame(db.stream_view(s.name).bases(), columns=["base", "reflected", "current"])
        frame["pending"] = frame.reflected != frame.current
        return frame
    if kind is None:  # both kinds of view have a status: name them all
        known = ", ".join([*db.views(), *db.stream_views()]) or "none"
        raise NotFoundError(f"no view named {s.name} (views: {known})")
    # an array view: a base version that only compacts files changes no cells, so it is not pending
    frame = pd.DataFrame(
        open_view(db, s.name).status()["bases"], columns=["base", "reflected", "current", "pending_batches"]
    )
    frame["pending"] = frame.pop("pending_batches") > 0
    return frame


@statement_runner(ast.RefreshView)
def _refresh_view(db: Database, s: ast.RefreshView) -> Any:
    view = open_view(db, s.name)
    return view.refresh(s.strategy or "auto", None if s.bases is None else list(s.bases))


statement_runner(ast.VerifyView)(lambda db, s: open_view(db, s.name).verify())
statement_runner(ast.AlterViewRefreshLimit)(lambda db, s: open_view(db, s.name).set_refresh_limit(s.seconds))


@statement_runner(ast.Maintain)
def _maintain(db: Database, s: ast.Maintain) -> Any:
    """One pass (``db.maintain``); when a view failed, the others are maintained and the statement
    then raises naming each failed view (as ``arrayviews maintain`` exits 1), so a script stops."""
    report = db.maintain(refresh_all=s.refresh_all)
    if report.ok:
        return report
    failed = "; ".join(
        f"{name}: {message.splitlines()[0] if message else 'failed'}"
        for name, message in report.errors.items()
    )
    raise MaintenanceError(
        f"{to_text(s)}: {len(report.errors)} view(s) failed ({failed}); the other views were maintained",
        views=report.errors,
        report=report,
    )


@explainer(ast.Maintain)
def _explain_maintain(db: Database, s: ast.Maintain) -> str:
    """What a pass would do now with each view (nothing is computed or committed)."""
    lines = [f"{to_text(s)}: one maintenance pass; per view, what it would do now"]
    for name in db.stream_views():
        view = db.stream_view(name)
        failed = view.status()["failed"]
        if failed:
            first = str(failed).splitlines()[0]
            lines.append(f"  stream view {view.name}: skipped (its maintenance failed: {first})")
        elif view.pending():
            lines.append(f"  stream view {view.name}: brought up to date (a source changed)")
        else:
            lines.append(f"  stream view {view.name}: up to date")
    for name in db.views():
        view = open_view(db, name)
        pending = view.status()["pending"]
        if view.refresh_limit is not None:
            lines.append(f"  array view {view.name}: {limit_outlook(db, view)}")
        elif not pending:
            lines.append(f"  array view {view.name}: up to date")
        elif s.refresh_all:
            lines.append(f"  array view {view.name}: refreshed (auto): batches pending")
        else:
            lines.append(
                f"  array view {view.name}: left alone (batches pending, no refresh limit; MAINTAIN ALL refreshes it)"
            )
    if len(lines) == 1:
        lines.append("  no views")
    return "\n".join(lines) + "\n"


def _similarity_join(db: Database, s: ast.SimilarityQuery):
    definition = _similarity_definition(db, s.query)
    join = db.similarity_join(definition.left, definition.right, definition.shape, definition.mapping)
    return join, definition.aggregates


@statement_runner(ast.SimilarityQuery)
def _similarity_query(db: Database, s: ast.SimilarityQuery) -> Any:
    join, aggregates = _similarity_join(db, s)
    return join.aggregate(*aggregates, through=s.through or "auto")


@explainer(ast.SimilarityQuery)
def _explain_similarity_query(db: Database, s: ast.SimilarityQuery) -> str:
    join, aggregates = _similarity_join(db, s)
    return join.explain(*aggregates, through=s.through or "auto")


@explainer(ast.RefreshView)
def _explain_refresh(db: Database, s: ast.RefreshView) -> str:
    view = open_view(db, s.name)
    status = _show_status(db, ast.ShowStatus(s.name))
    lines = [f"refresh of view {view.name} ({definition_text(view.definition)})"]
    for row in status.itertuples():
        state = "pending" if row.pending else "fresh"
        lines.append(f"  base {row.base}: reflects version {row.reflected}, current {row.current} ({state})")
    if status.pending.any():
        lines.append(view.explain_refresh(s.strategy or "auto", None if s.bases is None else list(s.bases)))
    return "\n".join(lines) + "\n"


__all__ = [
    "SHAPES",
    "build_shape",
    "definition_text",
    "shape_builder",
    "view_definition",
    "view_definition_from_text",
]
