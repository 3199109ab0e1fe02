"""Window-aggregate views: refreshed by recomputing only the view chunks whose windows reach a
changed cell (the change dilated by the window extents)."""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from arrayviews.execution import jobs
from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.schema import ArraySchema
from arrayviews.operators import halo
from arrayviews.operators.deltas import Delta
from arrayviews.operators.reduce import parse_calls
from arrayviews.operators.source import StoredSource
from arrayviews.operators.window import _window_chunk
from arrayviews.storage import layout


def affected_chunks(delta: Delta, view: ArraySchema, before, after) -> np.ndarray:
    """View chunks with a cell whose window reaches a changed base cell.

    A change at ``x`` alters the windows of cells in ``[x - after, x + before]``; the affected view
    chunks are those overlapping that box around any changed cell.
    """
    coords = np.vstack([delta.coords("minus"), delta.coords("plus")])
    if len(coords) == 0:
        return np.zeros((0, view.ndim), np.int64)
    grid = ChunkGrid.of(view)
    chunks = set()
    low_cells = np.unique(
        grid.chunk_of(np.maximum(coords - np.asarray(after), [d.low for d in view.dimensions])), axis=0
    )
    high_cells = np.unique(
        grid.chunk_of(np.minimum(coords + np.asarray(before), [d.high for d in view.dimensions])), axis=0
    )
    del low_cells, high_cells
    for cell in np.unique(grid.chunk_of(coords), axis=0):
        chunks.update(grid.neighbour_chunks(tuple(int(c) for c in cell), after, before))
    # keep only chunks whose dilated box really meets a changed cell
    result = []
    for chunk in sorted(chunks):
        low, high = grid.chunk_bounds(chunk)
        reach_low = np.asarray(low) - np.asarray(before)
        reach_high = np.asarray(high) + np.asarray(after)
        if np.any(np.all((coords >= reach_low) & (coords <= reach_high), axis=1)):
            result.append(chunk)
    return np.array(result, dtype=np.int64).reshape(-1, view.ndim)


def window_fragments(
    spark: SparkSession,
    base: StoredSource,
    before: tuple[int, ...],
    after: tuple[int, ...],
    aggregates,
    targets: np.ndarray | None,
    view: ArraySchema,
) -> DataFrame:
    """Window aggregates of the base array for the view chunks ``targets`` (all chunks when None)."""
    schema = base.schema
    calls = parse_calls(schema, aggregates)
    pieces = jobs.map_batches(
        base.frame(spark),
        functools.partial(halo.cut_pieces, schema=schema, before=before, after=after),
        halo.piece_schema(schema),
    )
    if targets is not None:
        names = halo.target_columns(schema)
        wanted = spark.createDataFrame(
            pa.table({name: pa.array(np.asarray(targets)[:, k], pa.int64()) for k, name in enumerate(names)})
        )
        pieces = pieces.join(F.broadcast(wanted), on=names, how="left_semi")
    function = functools.partial(
        _window_chunk,
        schema=schema,
        out_schema=view,
        before=before,
        after=after,
        calls=calls,
        method="incremental",
    )
    return jobs.group_tables(pieces, halo.target_columns(schema), function, layout.fragment_schema(view))
