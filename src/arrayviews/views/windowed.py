"""Window-aggregate views: refreshed by recomputing only the view chunks whose windows reach a
changed cell (the change dilated by the window extents)."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from arrayviews.execution.engine import Data, Engine
from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.labels import reach_cells
from arrayviews.model.schema import ArraySchema
from arrayviews.operators import halo
from arrayviews.operators.deltas import Delta
from arrayviews.operators.reduce import parse_calls
from arrayviews.operators.source import StoredSource
from arrayviews.operators.window import MANY_NEIGHBOURS, WindowJob, _window_chunk
from arrayviews.operators.window import present_chunks as present_in_data
from arrayviews.storage import layout
from arrayviews.views.definition import WindowViewDefinition


def affected_chunks(
    delta: Delta, view: ArraySchema, before, after, present: np.ndarray | None = None
) -> np.ndarray:
    """View chunks with a cell whose window reaches a changed base cell.

    A change at ``x`` alters the windows of cells in ``[x - after, x + before]``; the affected view
    chunks are those overlapping that box around any changed cell and holding a view cell before or
    after. With ``present`` (the chunks holding base cells at the new version), only those chunks
    and the removed cells' chunks are candidates: the other chunks hold no view cell before or after
    (counting them made a one-cell batch in a sparse array "touch 121% of the view's chunks" and
    sent it to a full refresh), and a long reach over an unbounded dimension stays within the data,
    even when two clusters lie 10**12 chunks apart.
    """
    coords = np.vstack([delta.coords("minus"), delta.coords("plus")])
    if len(coords) == 0:
        return np.zeros((0, view.ndim), np.int64)
    grid = ChunkGrid.of(view)
    held = None
    if present is not None:
        held = np.vstack(
            [np.asarray(present, np.int64).reshape(-1, view.ndim), grid.chunk_of(delta.coords("minus"))]
        )
        held = np.unique(held, axis=0)
        if halo.most_neighbours(grid, after, before) > MANY_NEIGHBOURS:
            return _reached(grid, held, coords, before, after)
    chunks = set()
    for cell in np.unique(grid.chunk_of(coords), axis=0):
        chunks.update(grid.neighbour_chunks(tuple(int(c) for c in cell), after, before))
    if held is not None:
        chunks &= {tuple(int(c) for c in row) for row in held}
    return _reached(grid, np.array(sorted(chunks), np.int64).reshape(-1, view.ndim), coords, before, after)


def _reached(grid: ChunkGrid, chunks: np.ndarray, coords: np.ndarray, before, after) -> np.ndarray:
    """The rows of ``chunks`` whose box dilated by the window (``before`` down, ``after`` up) holds
    one of the cells ``coords``: the chunks with a cell whose window reaches a changed cell."""
    if len(chunks) == 0:
        return chunks
    low = np.stack([g.chunk_starts(chunks[:, k]) for k, g in enumerate(grid.dimensions)], axis=1)
    high = low - 1 + np.stack([g.chunk_sizes(chunks[:, k]) for k, g in enumerate(grid.dimensions)], axis=1)
    rows, _ = halo.listed_in_ranges(coords, low - np.asarray(before), high + np.asarray(after))
    return chunks[np.unique(rows)]


def present_chunks(base: StoredSource) -> np.ndarray:
    """The chunks holding cells in ``base`` (distinct rows of the fragments' metadata columns): the
    only chunks besides those of removed cells where a refresh may find view cells."""
    schema = base.schema
    meta = base.metadata()
    columns = layout.chunk_columns(schema)
    if meta.num_rows == 0:
        return np.zeros((0, schema.ndim), np.int64)
    return np.unique(np.stack([np.asarray(meta.column(c), np.int64) for c in columns], axis=1), axis=0)


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
    data = base.data(engine, ranges)
    present = present_in_data(data, engine, schema, before, after)
    cut = functools.partial(halo.cut_pieces, schema=schema, before=before, after=after, present=present)
    pieces = engine.map_batches(data, cut, halo.piece_schema(schema))
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


def in_cells(definition: WindowViewDefinition, base: ArraySchema) -> WindowViewDefinition:
    """``definition`` with every extent a count of cells: a duration on a time dimension of ``base``
    (``"1 day"``, a ``timedelta``) becomes its whole number of steps; the view stores cells."""
    if len(definition.before) != base.ndim or len(definition.after) != base.ndim:
        return definition  # the window's own check names the mismatch
    pairs = [
        reach_cells(base, n, b, a)
        for n, b, a in zip(base.dimension_names, definition.before, definition.after, strict=True)
    ]
    return dataclasses.replace(
        definition, before=tuple(p[0] for p in pairs), after=tuple(p[1] for p in pairs)
    )
