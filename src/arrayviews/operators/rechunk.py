"""Turning a data set of cells into fragments of a schema's chunk grid (one shuffle by chunk)."""

from __future__ import annotations

import functools
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from arrayviews.execution.engine import Data, Engine, conform
from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.schema import ArraySchema
from arrayviews.operators.cells import cells_to_fragment_table
from arrayviews.storage import layout

CHUNK_KEY_PREFIX = "k__"


def _assemble(tables: Iterator[pa.Table], schema: ArraySchema) -> Iterator[pa.Table]:
    target = layout.cell_schema(schema)
    parts = [conform(t, target) for t in tables]
    if parts:
        yield cells_to_fragment_table(pa.concat_tables(parts), schema)


def _keyed_cells(fragments: pa.Table, schema: ArraySchema, target: ArraySchema) -> pa.Table:
    """The cells of fragments of ``schema`` with the numbers of their chunks in ``target``'s grid."""
    cells = layout.fragments_to_cells(fragments, schema)
    coords = np.stack([np.asarray(cells.column(d)) for d in schema.dimension_names], axis=1)
    chunks = ChunkGrid.of(target).chunk_of(coords).reshape(-1, target.ndim)
    for k, dimension in enumerate(target.dimension_names):
        cells = cells.append_column(CHUNK_KEY_PREFIX + dimension, pa.array(chunks[:, k], pa.int64()))
    return cells


def fragments_to_grid(engine: Engine, fragments: Data, schema: ArraySchema, target: ArraySchema) -> Data:
    """Fragments of ``schema`` re-cut into the chunk grid of ``target`` (same dimensions and
    attributes; its cells must lie inside ``target``'s range)."""
    keys = [CHUNK_KEY_PREFIX + d for d in target.dimension_names]
    keyed_schema = layout.cell_schema(schema)
    for key in keys:
        keyed_schema = keyed_schema.append(pa.field(key, pa.int64()))
    cells = engine.map_batches(
        fragments, functools.partial(_keyed_cells, schema=schema, target=target), keyed_schema
    )
    return engine.map_partitions_by(
        cells, keys, functools.partial(_assemble, schema=target), layout.fragment_schema(target)
    )
