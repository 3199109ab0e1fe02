"""Halo exchange: every chunk receives the cells of its neighbours that lie within a reach of it.

A task cuts each input fragment into *pieces*, one per target chunk whose halo region the fragment
overlaps; a piece holds just the cells inside that region, encoded like a fragment but relative to
its own box (``p_low``, ``p_size``). A shuffle by target chunk then brings the target's own cells and
all halo pieces together. Windows and shape-based joins use this; a window larger than a chunk simply
produces pieces for chunks several steps away.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.schema import ArraySchema
from arrayviews.storage import codec, layout

TARGET_PREFIX = "t__"
LOW_PREFIX = "p_low__"
SIZE_PREFIX = "p_size__"


def target_columns(schema: ArraySchema | Sequence[str]) -> list[str]:
    names = schema.dimension_names if isinstance(schema, ArraySchema) else schema
    return [TARGET_PREFIX + d for d in names]


def piece_schema(schema: ArraySchema, target_names: Sequence[str] | None = None) -> pa.Schema:
    """Arrow schema of halo pieces: target chunk, piece box, and a fragment-style encoding of its cells."""
    target_names = schema.dimension_names if target_names is None else target_names
    fields = [pa.field(TARGET_PREFIX + d, pa.int64()) for d in target_names]
    fields += [pa.field(LOW_PREFIX + d, pa.int64()) for d in schema.dimension_names]
    fields += [pa.field(SIZE_PREFIX + d, pa.int64()) for d in schema.dimension_names]
    fragment = layout.fragment_schema(schema)
    keep = {layout.N_CELLS, layout.DENSE, layout.CELLS}
    keep |= {layout.value_column(a.name) for a in schema.attributes}
    keep |= {layout.null_column(a.name) for a in schema.attributes if a.nullable}
    fields += [fragment.field(name) for name in fragment.names if name in keep]
    return pa.schema(fields)


def _clip_box(low: np.ndarray, high: np.ndarray, region_low: np.ndarray, region_high: np.ndarray):
    start, stop = np.maximum(low, region_low), np.minimum(high, region_high)
    return (start, stop) if np.all(start <= stop) else None


Region = tuple[tuple[int, ...], np.ndarray, np.ndarray]  # target chunk, region low, region high


def cut_pieces(
    table: pa.Table,
    schema: ArraySchema,
    before: tuple[int, ...],
    after: tuple[int, ...],
    plan: str = "auto",
    present: np.ndarray | None = None,
) -> pa.Table:
    """Pieces of every fragment in ``table`` for every chunk within reach (only the chunks listed in
    ``present``, the rows of the chunks holding cells, when given: over an unbounded dimension a long
    reach would otherwise name ~2**61 chunks, and even the box of the chunks present names 10**12 of
    them when two clusters lie far apart; a chunk without cells has no window to compute).

    Target chunk ``T`` needs the cells in ``[T_low - before, T_high + after]`` (a window reaching
    ``before`` cells down and ``after`` cells up from each of its cells), so a fragment of chunk ``C``
    feeds the chunks within ``after`` below and ``before`` above ``C``. ``plan="cells"`` finds those
    chunks from the fragment's cells (only the targets some cell reaches); ``"neighbours"`` visits
    every neighbour chunk (``3**d`` of them for a reach below the chunk length), which is cheaper
    while there are few; ``"auto"`` visits neighbours when a chunk has at most
    :data:`FEW_NEIGHBOURS` of them and plans from the cells otherwise.
    """
    grid = ChunkGrid.of(schema)
    reach_low, reach_high = np.asarray(before), np.asarray(after)
    if present is not None:
        present = np.asarray(present, dtype=np.int64).reshape(-1, schema.ndim)
    box = None if present is None or len(present) == 0 else (present.min(axis=0), present.max(axis=0))

    def region(target: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        t_low, t_high = (np.asarray(c, dtype=np.int64) for c in grid.chunk_bounds(target))
        return t_low - reach_low, t_high + reach_high

    def regions(chunk: tuple[int, ...]):
        if present is None:
            targets = grid.neighbour_chunks(chunk, after, before)
        else:
            ranges = None if box is None else grid.neighbour_ranges(chunk, after, before, box)
            if ranges is None:
                return
            low, high = (np.array(r, dtype=np.int64) for r in zip(*ranges, strict=True))
            targets = present[np.all((present >= low) & (present <= high), axis=1)]
        for target in targets:
            yield (tuple(int(t) for t in target), *region(target))

    def cell_targets(cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # Cell x lies in target T's region [T_low - before, T_high + after] exactly when T is one of
        # the chunks overlapping [x - after, x + before].
        first = np.array([g.first_chunk for g in grid.dimensions], dtype=np.int64)
        last = np.array([g.last_chunk for g in grid.dimensions], dtype=np.int64)
        low = np.maximum(grid.chunk_of(cells - reach_high), first)
        high = np.minimum(grid.chunk_of(cells + reach_low), last)
        if present is None:
            return expand_ranges(low, high)
        return listed_in_ranges(present, low, high)

    if plan == "auto":
        neighbours = most_neighbours(grid, before, after, box)
        if present is not None:
            neighbours = min(neighbours, len(present))
        plan = "neighbours" if neighbours <= FEW_NEIGHBOURS else "cells"
    if plan == "neighbours":
        return cut_to_regions(table, schema, regions, schema.dimension_names)
    return cut_to_regions(table, schema, regions, schema.dimension_names, cell_targets, region)


#: Up to this many neighbour chunks per chunk, visiting each is cheaper than planning from the cells
#: (each visit costs tens of microseconds of Python, the cell plan about a millisecond of numpy).
FEW_NEIGHBOURS = 32


def most_neighbours(grid: ChunkGrid, before: Sequence[int], after: Sequence[int], present=None) -> int:
    """The largest number of chunks within reach of one chunk (an interior one, clipped to the grid
    and to the chunk box ``present`` when given)."""
    count = 1
    for k, (dimension, b, a) in enumerate(zip(grid.dimensions, before, after, strict=True)):
        reach = 1 + -(-int(b) // dimension.length) + -(-int(a) // dimension.length)
        span = dimension.chunk_count
        if present is not None:
            span = min(span, int(present[1][k]) - int(present[0][k]) + 1)
        count *= min(reach, span)
    return count


def expand_ranges(low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (row, point) with ``low[row] <= point <= high[row]`` componentwise, as parallel arrays
    ``rows`` (m,) and ``points`` (m, d): the cartesian product of each row's ranges, vectorized."""
    n, d = low.shape
    rows = np.arange(n, dtype=np.int64)
    points = np.zeros((n, 0), dtype=np.int64)
    for k in range(d):
        spans = high[rows, k] - low[rows, k] + 1
        repeat = np.repeat(np.arange(len(rows)), spans)
        step = np.arange(len(repeat), dtype=np.int64) - np.repeat(np.cumsum(spans) - spans, spans)
        points = np.concatenate([points[repeat], (low[rows[repeat], k] + step)[:, None]], axis=1)
        rows = rows[repeat]
    return rows, points


def listed_in_ranges(listed: np.ndarray, low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (row, point) with ``point`` one of the rows of ``listed`` (k, d) and ``low[row] <= point
    <= high[row]`` componentwise, as :func:`expand_ranges` gives them from the whole ranges: a range
    may span 10**12 chunks of which only a few are listed."""
    n, d = low.shape
    if n == 0 or len(listed) == 0:
        return np.zeros(0, np.int64), np.zeros((0, d), np.int64)
    candidates = listed[np.all((listed >= low.min(axis=0)) & (listed <= high.max(axis=0)), axis=1)]
    rows, points = [np.zeros(0, np.int64)], [np.zeros((0, d), np.int64)]
    step = max(1, (1 << 22) // max(1, len(candidates) * d))  # rows per pass: a bounded comparison
    for start in range(0, n, step):
        part_low, part_high = low[start : start + step, None, :], high[start : start + step, None, :]
        inside = np.all((candidates[None] >= part_low) & (candidates[None] <= part_high), axis=2)
        row, which = np.nonzero(inside)
        rows.append(row.astype(np.int64) + start)
        points.append(candidates[which])
    return np.concatenate(rows), np.concatenate(points)


def cut_to_regions(
    table: pa.Table,
    schema: ArraySchema,
    regions: Callable[[tuple[int, ...]], Iterable[Region]],
    target_names: Sequence[str],
    cell_targets: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None,
    region: Callable[[tuple[int, ...]], tuple[np.ndarray, np.ndarray]] | None = None,
) -> pa.Table:
    """Cut every fragment into pieces: for each (target, low, high) that ``regions(chunk)`` yields,
    the fragment's cells inside ``[low, high]``, addressed to ``target`` (a chunk of any array whose
    dimensions are ``target_names``).

    With ``cell_targets`` (cells (n, d) -> the (cell row, target) pairs whose region holds the cell)
    and ``region`` (target -> its region), a fragment that is not a complete chunk is cut from its
    cells instead: only targets some cell reaches are visited. Enumerating every neighbour chunk
    costs ``3**d`` steps per fragment (59049 in 10 dimensions) even when nearly all are empty.
    """
    grid = ChunkGrid.of(schema)
    dtypes = layout.attribute_dtypes(schema)
    rows = []
    for fragment in layout.iter_fragments(table, schema):
        low, high = (np.asarray(c, dtype=np.int64) for c in grid.chunk_bounds(fragment.chunk))
        shape = tuple(int(x) for x in high - low + 1)
        cells = None
        full = fragment.size == math.prod(shape) and not fragment.nulls
        if not full and cell_targets is not None and region is not None:
            rows += _pieces_from_cells(fragment, grid, low, high, cell_targets, region, dtypes)
            continue
        for target, region_low, region_high in regions(fragment.chunk):
            box = _clip_box(low, high, region_low, region_high)
            if box is None:
                continue
            start, stop = box
            piece_shape = tuple(int(x) for x in stop - start + 1)
            if full:
                # A complete chunk: slice the block, no coordinates needed.
                window = tuple(
                    slice(int(a - lo), int(b - lo + 1)) for a, b, lo in zip(start, stop, low, strict=True)
                )
                values = {
                    name: np.ascontiguousarray(column.reshape(shape)[window]).reshape(-1)
                    for name, column in fragment.values.items()
                }
                encoded = codec.encode_full_block(values, math.prod(piece_shape), dtypes, with_range=False)
                rows.append((tuple(target), tuple(int(x) for x in start), piece_shape, encoded))
                continue
            if np.array_equal(start, low) and np.array_equal(stop, high):
                piece = fragment
            else:
                if cells is None:
                    cells = grid.cells_at(fragment.offsets, fragment.chunk)
                inside = np.all((cells >= start) & (cells <= stop), axis=1)
                if not inside.any():
                    continue
                local = cells[inside] - start
                offsets = np.ravel_multi_index(tuple(local.T), piece_shape).astype(np.int64)
                taken = fragment.take(inside)
                piece = codec.Fragment(fragment.chunk, offsets, taken.values, taken.nulls)
            encoded = codec.encode(piece, math.prod(piece_shape), dtypes)
            rows.append((tuple(target), tuple(int(x) for x in start), piece_shape, encoded))
    return _piece_table(rows, schema, target_names)


def _pieces_from_cells(fragment, grid: ChunkGrid, low, high, cell_targets, region, dtypes) -> list:
    """The pieces of one fragment for the targets its cells reach (see :func:`cut_to_regions`)."""
    cells = grid.cells_at(fragment.offsets, fragment.chunk)
    members, targets = cell_targets(cells)
    if len(members) == 0:
        return []
    order = np.lexsort((members, *targets.T[::-1]))
    members, targets = members[order], targets[order]
    starts = np.flatnonzero(np.concatenate(([True], np.any(targets[1:] != targets[:-1], axis=1))))
    ends = np.append(starts[1:], len(members))
    pieces = []
    for start_row, end_row in zip(starts.tolist(), ends.tolist(), strict=True):
        target = tuple(int(t) for t in targets[start_row])
        box = _clip_box(low, high, *region(target))
        assert box is not None, "a target reached by a cell of the fragment overlaps the fragment"
        start, stop = box
        piece_shape = tuple(int(x) for x in stop - start + 1)
        chosen = members[start_row:end_row]
        if len(chosen) == fragment.size and np.array_equal(start, low) and np.array_equal(stop, high):
            piece = fragment
        else:
            local = cells[chosen] - start
            offsets = np.ravel_multi_index(tuple(local.T), piece_shape).astype(np.int64)
            taken = fragment.take(chosen)
            piece = codec.Fragment(fragment.chunk, offsets, taken.values, taken.nulls)
        encoded = codec.encode(piece, math.prod(piece_shape), dtypes)
        pieces.append((target, tuple(int(x) for x in start), piece_shape, encoded))
    return pieces


def _piece_table(rows: list, schema: ArraySchema, target_names: Sequence[str]) -> pa.Table:
    target = piece_schema(schema, target_names)
    if not rows:
        return target.empty_table()
    columns: dict[str, pa.Array] = {}
    for k, name in enumerate(target_names):
        columns[TARGET_PREFIX + name] = pa.array([r[0][k] for r in rows], pa.int64())
    for k, dimension in enumerate(schema.dimension_names):
        columns[LOW_PREFIX + dimension] = pa.array([r[1][k] for r in rows], pa.int64())
        columns[SIZE_PREFIX + dimension] = pa.array([r[2][k] for r in rows], pa.int64())
    encoded = [r[3] for r in rows]
    columns[layout.N_CELLS] = pa.array([e.n_cells for e in encoded], pa.int64())
    columns[layout.DENSE] = pa.array([e.dense for e in encoded], pa.bool_())
    columns[layout.CELLS] = layout.binary_array([e.cells for e in encoded])
    empty = np.zeros(0, np.uint8)
    for attribute in schema.attributes:
        columns[layout.value_column(attribute.name)] = layout.binary_array(
            [e.values[attribute.name] for e in encoded]
        )
        if attribute.nullable:
            columns[layout.null_column(attribute.name)] = layout.binary_array(
                [e.nulls.get(attribute.name, empty) for e in encoded]
            )
    return pa.table([columns[f.name] for f in target], schema=target)


@dataclass
class Piece:
    """One received halo piece: its box and its encoded cells (views of the Arrow buffers)."""

    low: np.ndarray
    shape: tuple[int, ...]
    dense: bool
    n_cells: int
    cells: np.ndarray
    payloads: dict[str, np.ndarray]
    null_bytes: dict[str, np.ndarray]

    @property
    def volume(self) -> int:
        return math.prod(self.shape)

    @property
    def complete(self) -> bool:
        """Every cell of the box present and stored in box order (no offsets needed)."""
        return self.dense and self.n_cells == self.volume

    def offsets(self) -> np.ndarray:
        return codec.decode_offsets(self.dense, self.n_cells, self.cells, self.volume)

    def values(self, name: str, dtype: np.dtype, offsets: np.ndarray) -> np.ndarray:
        return codec.decode_values(self.dense, self.n_cells, self.volume, self.payloads[name], dtype, offsets)

    def nulls(self, name: str, offsets: np.ndarray) -> np.ndarray | None:
        packed = self.null_bytes.get(name)
        if packed is None or len(packed) == 0:
            return None
        return codec.decode_nulls(self.dense, self.n_cells, self.volume, packed, offsets)


def iter_pieces(pieces: pa.Table, schema: ArraySchema) -> Iterator[Piece]:
    """The pieces of a table, batch by batch, without copying their bytes."""
    names = schema.attribute_names
    nullable = [a.name for a in schema.attributes if a.nullable]
    for batch in pieces.to_batches():
        cells_data, cells_off = layout.binary_parts(batch.column(layout.CELLS))
        payloads = {a: layout.binary_parts(batch.column(layout.value_column(a))) for a in names}
        nulls = {a: layout.binary_parts(batch.column(layout.null_column(a))) for a in nullable}
        n_cells = np.asarray(batch.column(layout.N_CELLS))
        dense = np.asarray(batch.column(layout.DENSE))
        lows = np.stack([np.asarray(batch.column(LOW_PREFIX + d)) for d in schema.dimension_names], axis=1)
        sizes = np.stack([np.asarray(batch.column(SIZE_PREFIX + d)) for d in schema.dimension_names], axis=1)
        for row in range(batch.num_rows):
            yield Piece(
                lows[row],
                tuple(int(x) for x in sizes[row]),
                bool(dense[row]),
                int(n_cells[row]),
                cells_data[cells_off[row] : cells_off[row + 1]],
                {a: data[off[row] : off[row + 1]] for a, (data, off) in payloads.items()},
                {a: data[off[row] : off[row + 1]] for a, (data, off) in nulls.items()},
            )


@dataclass
class Neighbourhood:
    """All cells a target chunk needs, as points: coordinates, values, null masks."""

    coords: np.ndarray  # (n, d)
    values: dict[str, np.ndarray]
    nulls: dict[str, np.ndarray]


def gather(pieces: pa.Table, schema: ArraySchema) -> Neighbourhood:
    """Decode the pieces sent to one target chunk into points."""
    dtypes = layout.attribute_dtypes(schema)
    coords, values, nulls = [], {a: [] for a in dtypes}, {a: [] for a in dtypes}
    for piece in iter_pieces(pieces, schema):
        offsets = piece.offsets()
        coords.append(
            np.stack(np.unravel_index(offsets, piece.shape), axis=1).reshape(-1, len(piece.shape)) + piece.low
        )
        for name, dtype in dtypes.items():
            values[name].append(piece.values(name, dtype, offsets))
            mask = piece.nulls(name, offsets)
            nulls[name].append(mask if mask is not None else np.zeros(len(offsets), dtype=bool))
    return Neighbourhood(
        np.vstack(coords) if coords else np.zeros((0, schema.ndim), np.int64),
        {a: (np.concatenate(v) if v else np.zeros(0, dtypes[a])) for a, v in values.items()},
        {a: np.concatenate(v) for a, v in nulls.items() if v and np.concatenate(v).any()},
    )


@dataclass
class Block:
    """All cells a target chunk needs, placed in a dense block (values, presence, null masks)."""

    low: np.ndarray
    values: dict[str, np.ndarray]
    present: np.ndarray
    nulls: dict[str, np.ndarray]


def place(pieces: pa.Table, schema: ArraySchema, low: np.ndarray, shape: tuple[int, ...]) -> Block:
    """Decode the pieces sent to one target chunk straight into a dense block starting at ``low``.

    Complete dense pieces are copied as sub-blocks; other pieces are scattered by their offsets.
    """
    dtypes = layout.attribute_dtypes(schema)
    values = {
        name: np.full(shape, "", dtype=object) if codec.is_text(dtype) else np.zeros(shape, dtype=dtype)
        for name, dtype in dtypes.items()
    }
    present = np.zeros(shape, dtype=bool)
    nulls: dict[str, np.ndarray] = {}
    for piece in iter_pieces(pieces, schema):
        start = piece.low - low
        if piece.complete:
            index = tuple(slice(int(a), int(a) + n) for a, n in zip(start, piece.shape, strict=True))
            offsets = np.arange(piece.volume, dtype=np.int64) if piece.null_bytes else None
            for name, dtype in dtypes.items():
                if codec.is_text(dtype):  # strings: offsets then UTF-8, decoded to str
                    block = codec.text_values(piece.payloads[name], piece.volume)
                else:
                    block = np.frombuffer(
                        piece.payloads[name], dtype=dtype.newbyteorder("<"), count=piece.volume
                    )
                values[name][index] = block.reshape(piece.shape)
        else:
            offsets = piece.offsets()
            local = np.unravel_index(offsets, piece.shape)
            index = tuple(np.asarray(c) + int(a) for c, a in zip(local, start, strict=True))
            for name, dtype in dtypes.items():
                values[name][index] = piece.values(name, dtype, offsets)
        present[index] = True
        for name in piece.null_bytes:
            mask = piece.nulls(name, offsets)
            if mask is not None and mask.any():
                target = nulls.setdefault(name, np.zeros(shape, dtype=bool))
                target[index] = mask.reshape(piece.shape) if piece.complete else mask
    return Block(low, values, present, nulls)


def fragments_as_pieces(table: pa.Table, schema: ArraySchema) -> pa.Table:
    """The fragment rows as pieces of their own chunk (box = the clipped chunk), so that
    :func:`place` decodes them into a block."""
    grid = ChunkGrid.of(schema)
    for dimension, name, column in zip(
        grid.dimensions, schema.dimension_names, layout.chunk_columns(schema), strict=True
    ):
        chunks = np.asarray(table.column(column), dtype=np.int64)
        table = table.append_column(LOW_PREFIX + name, pa.array(dimension.chunk_starts(chunks)))
        table = table.append_column(SIZE_PREFIX + name, pa.array(dimension.chunk_sizes(chunks)))
    return table


def piece_cells(pieces: pa.Table) -> int:
    """Number of cells the pieces hold (from their counts, without decoding)."""
    return int(np.sum(pieces.column(layout.N_CELLS))) if pieces.num_rows else 0


def target_of(pieces: pa.Table, schema: ArraySchema | Sequence[str]) -> tuple[int, ...]:
    names = schema.dimension_names if isinstance(schema, ArraySchema) else schema
    return tuple(int(pieces.column(TARGET_PREFIX + d)[0].as_py()) for d in names)
