"""Operators that keep every cell where it is: subarray, filter, project, apply."""

from __future__ import annotations

import functools
import numbers
from collections.abc import Callable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from arrayviews.execution.cost import Choice
from arrayviews.execution.engine import Engine, conform
from arrayviews.kernels.evaluate import evaluate, evaluate_predicate
from arrayviews.model.errors import SchemaError, ValidationError
from arrayviews.model.expressions import (
    VOID,
    Expr,
    infer_type,
    nullable,
    parse_expression,
    referenced_names,
    resolve_names,
    sql_name,
)
from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.names import check_identifier
from arrayviews.model.schema import ArraySchema, Attribute, Dimension
from arrayviews.model.time_conditions import time_cells_compared
from arrayviews.model.time_scale import TimeScale
from arrayviews.model.types import arrow_type
from arrayviews.operators.cells import transform_cells
from arrayviews.operators.source import ComputedSource, DeferredSource, Source, StoredBox, stored_box
from arrayviews.storage import layout


# -- subarray -----------------------------------------------------------------------------------
def subarray_schema(schema: ArraySchema, box: Mapping[str, tuple[int, int]]) -> ArraySchema:
    """The schema of ``schema`` cut to ``box`` (dimensions not named keep their range); the schemas
    of boxes already cut are kept (a box that is refused is not)."""
    try:
        # the bounds' types are part of the key: 1.0 and True equal 1 but are refused where 1 is not
        key = tuple((name, type(low), low, type(high), high) for name, (low, high) in box.items())
        hash((schema, key))
    except (TypeError, ValueError):  # unhashable or malformed bounds: cut afresh, raising as it does
        return _subarray_schema(schema, box)
    return _kept_subarray_schema(schema, key)


@functools.lru_cache(maxsize=256)
def _kept_subarray_schema(schema: ArraySchema, key: tuple) -> ArraySchema:
    return _subarray_schema(schema, {name: (low, high) for name, _, low, _, high in key})


def _subarray_schema(schema: ArraySchema, box: Mapping[str, tuple[int, int]]) -> ArraySchema:
    for name in box:
        schema.dimension(name)  # raises SchemaError naming the array's dimensions
    dimensions = []
    for dimension in schema.dimensions:
        bounds = box.get(dimension.name, (dimension.low, dimension.high))
        if (
            not isinstance(bounds, tuple | list)
            or len(bounds) != 2
            or any(isinstance(b, bool | np.bool_) or not isinstance(b, numbers.Integral) for b in bounds)
        ):
            raise ValidationError(
                f"array {schema.name}: the subarray bounds of {dimension.name} are a (low, high) pair "
                f"of integer coordinates, both included, got {bounds!r}; {dimension.name}=(c, c) selects one",
                array=schema.name,
                column=dimension.name,
                value=repr(bounds),
            )
        low, high = int(bounds[0]), int(bounds[1])
        if low > high:
            raise ValidationError(
                f"array {schema.name}: subarray bound {dimension.name}={low}:{high} is empty (low > high)",
                array=schema.name,
                column=dimension.name,
                value=(low, high),
            )
        new_low, new_high = max(low, dimension.low), min(high, dimension.high)
        if new_low > new_high:
            raise ValidationError(
                f"array {schema.name}: subarray {dimension.name}={low}:{high} lies outside the dimension "
                f"range {dimension.low}:{'*' if dimension.unbounded else dimension.high}",
                array=schema.name,
                column=dimension.name,
                value=(low, high),
            )
        dimensions.append(
            Dimension(
                dimension.name,
                new_low,
                new_high,
                dimension.chunk_length,
                dimension.chunk_origin,
                dimension.scale,
            )
        )
    return schema.with_dimensions(dimensions)


def _subarray_batch(table: pa.Table, in_schema: ArraySchema, out_schema: ArraySchema) -> pa.Table:
    grid_in = ChunkGrid.of(in_schema)
    low = np.array([d.low for d in out_schema.dimensions])
    high = np.array([d.high for d in out_schema.dimensions])
    chunks = np.stack([np.asarray(table.column(c)) for c in layout.chunk_columns(in_schema)], axis=1)
    starts, sizes = layout.box_geometry(grid_in, chunks)
    inside = np.all((starts >= low) & (starts + sizes - 1 <= high), axis=1)
    whole = table.filter(pa.array(inside))

    def cut(cells: pa.Table) -> pa.Table:
        coords = np.stack([np.asarray(cells.column(d)) for d in in_schema.dimension_names], axis=1)
        keep = np.all((coords >= low) & (coords <= high), axis=1)
        return cells.filter(pa.array(keep))

    partial = transform_cells(table.filter(pa.array(~inside)), in_schema, out_schema, cut)
    target = layout.fragment_schema(out_schema)
    return pa.concat_tables([conform(whole, target), conform(partial, target)])


def subarray_ranges(schema: ArraySchema, box: Mapping[str, tuple[int, int]]):
    """Per dimension the (first, last) chunk a subarray reads."""
    out_schema = subarray_schema(schema, box)
    return ChunkGrid.of(schema).chunk_ranges_overlapping(
        [d.low for d in out_schema.dimensions], [d.high for d in out_schema.dimensions]
    )


def subarray(source: Source, engine: Engine, box: Mapping[str, tuple[int, int]]) -> ComputedSource:
    """Cells inside a box of dimension coordinates; only chunks overlapping the box are read."""
    out_schema = subarray_schema(source.schema, box)
    ranges = subarray_ranges(source.schema, box)
    frame = source.data(engine, ranges)
    function = functools.partial(_subarray_batch, in_schema=source.schema, out_schema=out_schema)
    return ComputedSource(
        out_schema,
        engine.map_batches(frame, function, layout.fragment_schema(out_schema)),
        engine=engine,
        box=_box_of(source, out_schema),
    )


def deferred_subarray(
    source: Source,
    choose: Callable[[Source, object], tuple[Engine, Choice]],
    box: Mapping[str, tuple[int, int]],
) -> ComputedSource:
    """``subarray`` of a stored array (or of a subarray of one), its engine chosen by ``choose(source,
    chunk ranges)`` and its plan made only when something needs them: a dense read of the result
    takes its chunks from storage without either."""
    out_schema = subarray_schema(source.schema, box)

    def build() -> tuple[ComputedSource, Choice]:
        engine, choice = choose(source, subarray_ranges(source.schema, box))
        return subarray(source, engine, box), choice

    return DeferredSource(out_schema, build, box=_box_of(source, out_schema))


def _box_of(source: Source, out_schema: ArraySchema) -> StoredBox | None:
    """The stored box a subarray of ``source`` holds, when ``source`` is stored or a subarray of a
    stored array (``out_schema``'s ranges are already cut to ``source``'s)."""
    inner = stored_box(source)
    if inner is None:
        return None
    low = tuple(d.low for d in out_schema.dimensions)
    high = tuple(d.high for d in out_schema.dimensions)
    return StoredBox(inner.source, low, high)


# -- filter and apply ---------------------------------------------------------------------------
def _expression_types(schema: ArraySchema) -> dict[str, str]:
    types = {d: "int64" for d in schema.dimension_names}
    types.update({a.name: a.type for a in schema.attributes})
    return types


def _bound(schema: ArraySchema, text: str) -> tuple[Expr, str]:
    """The expression of ``text`` with names spelled as in the schema, and its type."""
    types = _expression_types(schema)
    expression = parse_expression(text)
    try:
        expression = resolve_names(expression, types)
        # a time dimension compared with a time written as text: a condition on its cells
        scales = {d.name: d.scale for d in schema.dimensions if isinstance(d.scale, TimeScale)}
        expression = time_cells_compared(expression, scales)
    except ValidationError as error:
        raise ValidationError(
            f"array {schema.name}: {error} in expression {expression.to_text()!r}", column=error.column
        ) from None
    return expression, infer_type(expression, types)


def _columns(cells: pa.Table, names) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Numpy columns for the referenced names, and the masks of NULL cells of the nullable ones."""
    columns, nulls = {}, {}
    for name in names:
        column = cells.column(name).combine_chunks()
        if column.null_count:
            nulls[name] = np.asarray(column.is_null())
            column = column.fill_null(layout.null_filler(column.type))
        columns[name] = np.asarray(column)
    return columns, nulls


def _filter_cells(cells: pa.Table, predicate: Expr) -> pa.Table:
    columns, nulls = _columns(cells, referenced_names(predicate))
    keep = evaluate_predicate(predicate, columns, cells.num_rows, nulls)
    return cells.filter(pa.array(keep))


def filter_cells(source: Source, engine: Engine, predicate: str) -> ComputedSource:
    """Cells where the Spark SQL condition ``predicate`` is TRUE (not false, not NULL)."""
    schema = source.schema
    expression, kind = _bound(schema, predicate)
    if kind not in ("bool", VOID):
        raise ValidationError(
            f"array {schema.name}: filter predicate {predicate!r} is {sql_name(kind)}, not a condition"
        )
    function = functools.partial(
        transform_cells,
        in_schema=schema,
        out_schema=schema,
        function=functools.partial(_filter_cells, predicate=expression),
    )
    return ComputedSource(
        schema,
        engine.map_batches(source.data(engine), function, layout.fragment_schema(schema)),
        engine=engine,
    )


def _apply_cells(cells: pa.Table, name: str, expression: Expr, type_name: str) -> pa.Table:
    columns, nulls = _columns(cells, referenced_names(expression))
    values = evaluate(expression, columns, cells.num_rows, nulls)
    mask = np.ma.getmaskarray(values)
    column = pa.array(np.ma.getdata(values), arrow_type(type_name), mask=mask if mask.any() else None)
    return cells.append_column(name, column)


def apply(source: Source, engine: Engine, name: str, expression: str) -> ComputedSource:
    """A new attribute ``name`` computed from the Spark SQL ``expression`` for every cell; it is
    nullable if the expression can be NULL (a nullable attribute read, ``ln``, ``nullif``, ...)."""
    schema = source.schema
    check_identifier(name, "attribute")
    if schema.has_attribute(name) or schema.has_dimension(name):
        raise ValidationError(f"array {schema.name} already has a dimension or attribute named {name!r}")
    parsed, kind = _bound(schema, expression)
    if kind == VOID:
        raise ValidationError(
            f"array {schema.name}: expression {expression!r} is always an untyped NULL; give it a type, "
            f"e.g. CAST(NULL AS DOUBLE)"
        )
    nullable_names = {a.name for a in schema.attributes if a.nullable}
    is_nullable = nullable(parsed, _expression_types(schema), nullable_names)
    out_schema = schema.with_attributes([*schema.attributes, Attribute(name, kind, is_nullable)])
    cell_function = functools.partial(_apply_cells, name=name, expression=parsed, type_name=kind)
    function = functools.partial(
        transform_cells, in_schema=schema, out_schema=out_schema, function=cell_function
    )
    return ComputedSource(
        out_schema,
        engine.map_batches(source.data(engine), function, layout.fragment_schema(out_schema)),
        engine=engine,
    )


# -- project ------------------------------------------------------------------------------------
def project(source: Source, engine: Engine, attributes: list[str]) -> ComputedSource:
    """Only the named attributes, in the given order; cell data is not decoded."""
    schema = source.schema
    dimension = next((a for a in attributes if schema.has_dimension(a)), None)
    if dimension is not None:  # SchemaError, as for any name that is no attribute
        raise SchemaError(
            f"array {schema.name}: {dimension!r} is a dimension, which every result keeps; name only "
            f"attributes ({', '.join(schema.attribute_names)})",
            array=schema.name,
            column=dimension,
        )
    kept = [schema.attribute(a) for a in attributes]
    if len(set(attributes)) != len(attributes):
        raise ValidationError(f"array {schema.name}: project names an attribute twice")
    out_schema = schema.with_attributes(kept)
    target = layout.fragment_schema(out_schema)
    function = functools.partial(_project_batch, attributes=[a.name for a in kept], target=target)
    return ComputedSource(
        out_schema, engine.map_batches(source.data(engine), function, target), engine=engine
    )


def _project_batch(table: pa.Table, attributes: list[str], target: pa.Schema) -> pa.Table:
    """Fragments keeping only some attributes' columns, their byte counts recomputed to match."""
    size = pc.binary_length(table.column(layout.CELLS)).cast(pa.int64())
    for name in attributes:
        size = pc.add(size, pc.binary_length(table.column(layout.value_column(name))).cast(pa.int64()))
    index = table.schema.get_field_index(layout.NBYTES)
    return conform(table.set_column(index, layout.NBYTES, size), target)
