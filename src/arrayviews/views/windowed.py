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
    chunks, _ = fragment_cells(base)
    return np.unique(chunks, axis=0) if len(chunks) else chunks


def fragment_cells(source: StoredSource, ranges=None) -> tuple[np.ndarray, np.ndarray]:
    """(chunk (n, d), cells (n,)) of every stored fragment of ``source`` (of ``ranges`` of chunks),
    from the fragments' metadata columns; no cell is read."""
    schema = source.schema
    meta = source.metadata(ranges)
    if meta.num_rows == 0:
        return np.zeros((0, schema.ndim), np.int64), np.zeros(0, np.int64)
    columns = layout.chunk_columns(schema)
    chunks = np.stack([np.asarray(meta.column(c), np.int64) for c in columns], axis=1)
    return chunks, np.asarray(meta.column(layout.N_CELLS), np.int64)


def cells_in_chunks(chunks: np.ndarray, cells: np.ndarray, wanted: np.ndarray) -> int:
    """The cells of the fragments (``chunks``, ``cells``) whose chunk is a row of ``wanted``."""
    return int(cells[_member(chunks, wanted)].sum())


def _member(rows: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Whether each row of ``rows`` (n, d) is a row of ``wanted`` (m, d)."""
    if len(rows) == 0 or len(wanted) == 0:
        return np.zeros(len(rows), bool)
    _, inverse = np.unique(np.vstack([wanted, rows]), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    return np.isin(inverse[len(wanted) :], inverse[: len(wanted)])


#: Up to this many (target, neighbour chunk) pairs the chunks within reach are listed from the
#: grid; beyond, the present chunks are matched against the targets' ranges.
LISTED_REACH = 1 << 22


def reached_chunks(
    schema: ArraySchema, targets: np.ndarray, before, after, present: np.ndarray
) -> np.ndarray:
    """The rows of ``present`` (base chunks holding cells) with a cell in the window of some cell of
    a chunk in ``targets``: the only base chunks a refresh of ``targets`` reads. Per target, not the
    box of all targets (a batch at two opposite corners read the whole array, and its estimate
    counted every cell of that box)."""
    targets = np.asarray(targets, np.int64).reshape(-1, schema.ndim)
    present = np.asarray(present, np.int64).reshape(-1, schema.ndim)
    if len(targets) == 0 or len(present) == 0:
        return np.zeros((0, schema.ndim), np.int64)
    grid = ChunkGrid.of(schema)
    starts = np.stack([g.chunk_starts(targets[:, k]) for k, g in enumerate(grid.dimensions)], axis=1)
    sizes = np.stack([g.chunk_sizes(targets[:, k]) for k, g in enumerate(grid.dimensions)], axis=1)
    lows = np.array([d.low for d in schema.dimensions], np.int64)
    highs = np.array([d.high for d in schema.dimensions], np.int64)
    first = grid.chunk_of(np.maximum(starts - np.asarray(before, np.int64), lows))
    last = grid.chunk_of(np.minimum(starts + sizes - 1 + np.asarray(after, np.int64), highs))
    if np.prod((last - first + 1).astype(np.float64), axis=1).sum() <= LISTED_REACH:
        _, listed = halo.expand_ranges(first, last)
        return np.unique(present[_member(present, listed)], axis=0)
    _, points = halo.listed_in_ranges(present, first, last)
    return np.unique(points, axis=0) if len(points) else points


@dataclasses.dataclass(frozen=True)
class Reads:
    """What an incremental refresh reads: the cells and bytes of the base chunks it reaches and of
    the view chunks it replaces, and those base chunks."""

    cells: int
    bytes: int
    reached: np.ndarray


def incremental_estimate(
    base: StoredSource, delta: Delta, view: ArraySchema, before, after, view_source: StoredSource | None
) -> tuple[Reads, np.ndarray]:
    """(what an incremental refresh reads, the view chunks it recomputes), from metadata only: the
    cells of the fragments of the base chunks within reach of an affected chunk and of the view's
    fragments in the affected chunks (bytes in proportion to the cells, from the versions' totals)."""
    chunks, cells = fragment_cells(base)
    present = np.unique(chunks, axis=0) if len(chunks) else chunks
    affected = affected_chunks(delta, view, before, after, present)
    if len(affected) == 0:
        return Reads(0, 0, present[:0]), affected
    reached = reached_chunks(base.schema, affected, before, after, present)
    read = cells_in_chunks(chunks, cells, reached)
    total = base.estimate()
    read_bytes = total.bytes * read // max(1, total.cells)
    if view_source is not None:
        box = [(int(a), int(b)) for a, b in zip(affected.min(axis=0), affected.max(axis=0), strict=True)]
        kept = cells_in_chunks(*fragment_cells(view_source, box), affected)
        whole = view_source.estimate()
        read, read_bytes = read + kept, read_bytes + whole.bytes * kept // max(1, whole.cells)
    return Reads(read, read_bytes, reached), affected


def window_fragments(
    engine: Engine,
    base: StoredSource,
    before: tuple[int, ...],
    after: tuple[int, ...],
    aggregates,
    targets: np.ndarray | None,
    view: ArraySchema,
    reached: np.ndarray | None = None,
) -> Data:
    """Window aggregates of the base array for the view chunks ``targets`` (all chunks when None).

    With ``targets`` only the base files that may hold a chunk within the window's reach of a target
    are read (planned from the catalog's chunk metadata), and only pieces for the targets are kept.
    With ``reached`` (:func:`reached_chunks`), only the fragments of those base chunks are cut.
    """
    schema = base.schema
    calls = parse_calls(schema, aggregates, window=True)
    ranges = None if targets is None else reach_ranges(schema, targets, before, after)
    data = base.data(engine, ranges)
    if targets is not None and reached is not None:
        data = engine.where_keys(data, layout.chunk_columns(schema), reached)
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
