"""Window-aggregate views: refreshed by recomputing only the view chunks whose windows reach a
changed cell (the change dilated by the window extents)."""

from __future__ import annotations

import functools

import numpy as np

from arrayviews.execution.engine import Data, Engine
from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.schema import ArraySchema
from arrayviews.operators import halo
from arrayviews.operators.deltas import Delta
from arrayviews.operators.reduce import parse_calls
from arrayviews.operators.source import StoredSource
from arrayviews.operators.window import WindowJob, _window_chunk
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
    engine: Engine,
    base: StoredSource,
    before: tuple[int, ...],
    after: tuple[int, ...],
    aggregates,
    targets: np.ndarray | None,
    view: ArraySchema,
) -> Data:
    """Window aggregates of the base array for the view chunks ``targets`` (all chunks when None).

    With ``targets`` only the base files that may hold a chunk within the window's reach of a target
    are read (planned from the catalog's chunk metadata), and only pieces for the targets are kept.
    """
    schema = base.schema
    calls = parse_calls(schema, aggregates, window=True)
    ranges = None if targets is None else reach_ranges(schema, targets, before, after)
    pieces = engine.map_batches(
        base.data(engine, ranges),
        functools.partial(halo.cut_pieces, schema=schema, before=before, after=after),
        halo.piece_schema(schema),
    )
    if targets is not None:
        pieces = engine.where_keys(pieces, halo.target_columns(schema), np.asarray(targets))
    function = functools.partial(_window_chunk, job=WindowJob(schema, view, before, after, calls))
    return engine.group(pieces, halo.target_columns(schema), function, layout.fragment_schema(view))


def reach_ranges(schema: ArraySchema, targets: np.ndarray, before, after) -> list[tuple[int, int]] | None:
    """Per dimension the chunk numbers of base chunks whose cells fall in some target's window."""
    targets = np.asarray(targets, dtype=np.int64).reshape(-1, schema.ndim)
    if len(targets) == 0:
        return None
    grid = ChunkGrid.of(schema)
    low = np.min([grid.chunk_bounds(tuple(t))[0] for t in targets], axis=0) - np.asarray(before)
    high = np.max([grid.chunk_bounds(tuple(t))[1] for t in targets], axis=0) + np.asarray(after)
    low = np.maximum(low, [d.low for d in schema.dimensions])
    high = np.minimum(high, [d.high for d in schema.dimensions])
    return grid.chunk_ranges_overlapping(low, high)
