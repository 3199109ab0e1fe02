"""Turning a Spark DataFrame of cells into fragments of a schema's chunk grid (one shuffle by chunk)."""

from __future__ import annotations

import functools
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from arrayviews.execution import jobs
from arrayviews.model.schema import ArraySchema
from arrayviews.operators.cells import cells_to_fragment_table
from arrayviews.storage import layout

CHUNK_KEY_PREFIX = "k__"


def by_chunk(cells: DataFrame, schema: ArraySchema, partitions: int | None = None) -> DataFrame:
    """Cells repartitioned so that all cells of one chunk are in the same partition."""
    keys = []
    for dimension in schema.dimensions:
        name = CHUNK_KEY_PREFIX + dimension.name
        cells = cells.withColumn(
            name,
            jobs.integer_div(F.col(dimension.name) - F.lit(dimension.chunk_origin), dimension.chunk_length),
        )
        keys.append(name)
    if partitions is None:
        return cells.repartition(*keys)
    return cells.repartition(partitions, *keys)


def _assemble(tables: Iterator[pa.Table], schema: ArraySchema) -> Iterator[pa.Table]:
    target = layout.cell_schema(schema)
    parts = [jobs.conform(t, target) for t in tables]
    if parts:
        yield cells_to_fragment_table(pa.concat_tables(parts), schema)


def cells_to_fragments(cells: DataFrame, schema: ArraySchema) -> DataFrame:
    """Fragments (one per chunk) of a cell DataFrame whose cells are distinct and inside the range."""
    shuffled = by_chunk(cells.select(*schema.dimension_names, *schema.attribute_names), schema)
    return jobs.map_partitions(
        shuffled, functools.partial(_assemble, schema=schema), layout.fragment_schema(schema)
    )
