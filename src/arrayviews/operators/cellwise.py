"""Operators that keep every cell where it is: subarray, filter, project, apply."""

from __future__ import annotations

import functools
from collections.abc import Mapping

import numpy as np
import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from arrayviews.execution import jobs
from arrayviews.kernels.evaluate import evaluate, evaluate_predicate
from arrayviews.model.errors import ValidationError
from arrayviews.model.expressions import infer_type, parse_expression, referenced_names
from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.names import check_identifier
from arrayviews.model.schema import ArraySchema, Attribute, Dimension
from arrayviews.model.types import arrow_type
from arrayviews.operators.cells import transform_cells
from arrayviews.operators.source import ComputedSource, Source
from arrayviews.storage import layout


# -- subarray -----------------------------------------------------------------------------------
def subarray_schema(schema: ArraySchema, box: Mapping[str, tuple[int, int]]) -> ArraySchema:
    """The schema of ``schema`` cut to ``box`` (dimensions not named keep their range)."""
    for name in box:
        schema.dimension(name)  # raises SchemaError naming the array's dimensions
    dimensions = []
    for dimension in schema.dimensions:
        low, high = box.get(dimension.name, (dimension.low, dimension.high))
        if low > high:
            raise ValidationError(
                f"array {schema.name}: subarray bound {dimension.name}={low}:{high} is empty (low > high)"
            )
        new_low, new_high = max(low, dimension.low), min(high, dimension.high)
        if new_low > new_high:
            raise ValidationError(
                f"array {schema.name}: subarray {dimension.name}={low}:{high} lies outside the dimension "
                f"range {dimension.low}:{dimension.high}"
            )
        dimensions.append(
            Dimension(dimension.name, new_low, new_high, dimension.chunk_length, dimension.chunk_origin)
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
    return pa.concat_tables([jobs.conform(whole, target), jobs.conform(partial, target)])


def subarray(source: Source, spark: SparkSession, box: Mapping[str, tuple[int, int]]) -> ComputedSource:
    """Cells inside a box of dimension coordinates; only chunks overlapping the box are read."""
    out_schema = subarray_schema(source.schema, box)
    grid = ChunkGrid.of(source.schema)
    ranges = grid.chunk_ranges_overlapping(
        [d.low for d in out_schema.dimensions], [d.high for d in out_schema.dimensions]
    )
    frame = source.frame(spark, ranges)
    function = functools.partial(_subarray_batch, in_schema=source.schema, out_schema=out_schema)
    return ComputedSource(out_schema, jobs.map_batches(frame, function, layout.fragment_schema(out_schema)))


# -- filter and apply ---------------------------------------------------------------------------
def _expression_types(schema: ArraySchema) -> dict[str, str]:
    types = {d: "int64" for d in schema.dimension_names}
    types.update({a.name: a.type for a in schema.attributes})
    return types


def _columns(cells: pa.Table, names) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Numpy columns for the referenced names, and a mask of cells where any of them is null."""
    columns, null = {}, np.zeros(cells.num_rows, dtype=bool)
    for name in names:
        column = cells.column(name).combine_chunks()
        if column.null_count:
            null |= np.asarray(column.is_null())
            column = column.fill_null(False if pa.types.is_boolean(column.type) else 0)
        columns[name] = np.asarray(column)
    return columns, null


def _filter_cells(cells: pa.Table, predicate_text: str) -> pa.Table:
    expression = parse_expression(predicate_text)
    columns, null = _columns(cells, referenced_names(expression))
    keep = evaluate_predicate(expression, columns, cells.num_rows) & ~null
    return cells.filter(pa.array(keep))


def filter_cells(source: Source, spark: SparkSession, predicate: str) -> ComputedSource:
    """Cells whose attributes (and coordinates) satisfy ``predicate``; a null operand means false."""
    schema = source.schema
    expression = parse_expression(predicate)
    kind = infer_type(expression, _expression_types(schema))
    if kind != "bool":
        raise ValidationError(
            f"array {schema.name}: filter predicate {predicate!r} is {kind}, not a condition"
        )
    function = functools.partial(
        transform_cells,
        in_schema=schema,
        out_schema=schema,
        function=functools.partial(_filter_cells, predicate_text=predicate),
    )
    return ComputedSource(
        schema, jobs.map_batches(source.frame(spark), function, layout.fragment_schema(schema))
    )


def _apply_cells(
    cells: pa.Table, name: str, expression_text: str, type_name: str, nullable: bool
) -> pa.Table:
    expression = parse_expression(expression_text)
    columns, null = _columns(cells, referenced_names(expression))
    values = evaluate(expression, columns, cells.num_rows)
    column = pa.array(values, arrow_type(type_name), mask=null if nullable and null.any() else None)
    return cells.append_column(name, column)


def apply(source: Source, spark: SparkSession, name: str, expression: str) -> ComputedSource:
    """A new attribute ``name`` computed from ``expression`` for every cell."""
    schema = source.schema
    check_identifier(name, "attribute")
    if schema.has_attribute(name) or schema.has_dimension(name):
        raise ValidationError(f"array {schema.name} already has a dimension or attribute named {name!r}")
    parsed = parse_expression(expression)
    kind = infer_type(parsed, _expression_types(schema))
    nullable = any(schema.has_attribute(n) and schema.attribute(n).nullable for n in referenced_names(parsed))
    out_schema = schema.with_attributes([*schema.attributes, Attribute(name, kind, nullable)])
    cell_function = functools.partial(
        _apply_cells, name=name, expression_text=expression, type_name=kind, nullable=nullable
    )
    function = functools.partial(
        transform_cells, in_schema=schema, out_schema=out_schema, function=cell_function
    )
    return ComputedSource(
        out_schema, jobs.map_batches(source.frame(spark), function, layout.fragment_schema(out_schema))
    )


# -- project ------------------------------------------------------------------------------------
def project(source: Source, spark: SparkSession, attributes: list[str]) -> ComputedSource:
    """Only the named attributes, in the given order; cell data is not decoded."""
    schema = source.schema
    kept = [schema.attribute(a) for a in attributes]
    if len(set(attributes)) != len(attributes):
        raise ValidationError(f"array {schema.name}: project names an attribute twice")
    out_schema = schema.with_attributes(kept)
    frame = source.frame(spark)
    size = F.length(F.col(layout.CELLS))
    for attribute in kept:
        size = size + F.length(F.col(layout.value_column(attribute.name)))
    frame = frame.withColumn(layout.NBYTES, size.cast("long"))
    return ComputedSource(out_schema, frame.select(*layout.fragment_schema(out_schema).names))
