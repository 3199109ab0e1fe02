"""Tiles of chunks for work that needs each chunk's neighbourhood: one task per tile reads the
tile's fragments and those within reach straight from the stored files, so no cell crosses a
shuffle.

A halo exchange moves every cell of a dense array through a shuffle (cut, group by target chunk)
although only the thin strips along chunk borders are needed twice. When the array is stored and
dense, a tile of whole chunks plus the chunks within reach of it can be read by one task directly
(the files to read are pruned from the catalog's chunk statistics on the driver, and the rows by
chunk number in the task); the ring of chunks around a tile is read twice, which costs far less
than a shuffle of the whole array. Tiles are planned from chunk metadata only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.schema import ArraySchema
from arrayviews.storage import layout
from arrayviews.storage.files import read_parquet_files

ChunkBox = tuple[tuple[int, int], ...]  # per dimension (first, last) chunk number, inclusive

#: Tile column of the work table handed to the tasks.
TILE = "tile"


@dataclass(frozen=True)
class Tile:
    """A box of chunks a task computes, the box it reads (the tile and the chunks within reach),
    and the data files that may hold fragments of the read box."""

    own: ChunkBox
    read: ChunkBox
    uris: tuple[str, ...]

    def owns(self, chunks: np.ndarray) -> np.ndarray:
        """Which rows of chunk numbers ``chunks`` (n, d) lie in the tile."""
        inside = np.ones(len(chunks), dtype=bool)
        for k, (first, last) in enumerate(self.own):
            inside &= (chunks[:, k] >= first) & (chunks[:, k] <= last)
        return inside

    def own_chunks(self) -> set[tuple[int, ...]]:
        """The chunk numbers of the tile."""
        return {
            tuple(first + int(o) for (first, _), o in zip(self.own, offset, strict=True))
            for offset in np.ndindex(*(last - first + 1 for first, last in self.own))
        }

    def cell_box(self, grid: ChunkGrid) -> tuple[np.ndarray, np.ndarray]:
        """The inclusive (low, high) cells of the tile's chunks (edge chunks clipped)."""
        low = [
            dimension.chunk_span(first)[0]
            for dimension, (first, _) in zip(grid.dimensions, self.own, strict=True)
        ]
        high = [
            dimension.chunk_span(last)[1]
            for dimension, (_, last) in zip(grid.dimensions, self.own, strict=True)
        ]
        return np.asarray(low, dtype=np.int64), np.asarray(high, dtype=np.int64)


def _box_cells(grid: ChunkGrid, box: ChunkBox) -> int:
    """Cells of the array range covered by a box of chunks (edge chunks clipped)."""
    total = 1
    for dimension, (first, last) in zip(grid.dimensions, box, strict=True):
        low, _ = dimension.chunk_span(first)
        _, high = dimension.chunk_span(last)
        total *= high - low + 1
    return total


def _reach_box(grid: ChunkGrid, box: ChunkBox, before: Sequence[int], after: Sequence[int]) -> ChunkBox:
    """The chunks holding a cell within ``before`` below or ``after`` above some cell of ``box``
    (a window reaching ``before`` down needs cells down to ``low - before``)."""
    out = []
    for dimension, (first, last), down, up in zip(grid.dimensions, box, before, after, strict=True):
        low, _ = dimension.chunk_span(first)
        _, high = dimension.chunk_span(last)
        out.append(dimension.chunks_overlapping(low - int(down), high + int(up)))
    return tuple(out)


def _split(box: ChunkBox) -> tuple[ChunkBox, ChunkBox] | None:
    """Halves of a box along its longest side (in chunks), or None for a single chunk."""
    sides = [last - first + 1 for first, last in box]
    k = int(np.argmax(sides))
    if sides[k] == 1:
        return None
    first, last = box[k]
    middle = first + sides[k] // 2 - 1
    lower = box[:k] + ((first, middle),) + box[k + 1 :]
    upper = box[:k] + ((middle + 1, last),) + box[k + 1 :]
    return lower, upper


def plan(
    schema: ArraySchema,
    metadata: pa.Table,
    files_of,
    before: Sequence[int],
    after: Sequence[int],
    tasks: int,
    max_read_cells: int,
    dense_fraction: float,
) -> list[Tile] | None:
    """Tiles over the chunks present in ``metadata`` (fragment metadata of a stored array), at
    least ``tasks`` of them where the chunks allow, each reading at most ``max_read_cells`` cells of
    range; None when the array is too sparse for dense work (cells below ``dense_fraction`` of the
    box of its chunks), a tile cannot be made small enough, or the tiles would read more than twice
    the array. ``files_of(read box)`` gives the data files that may hold a box's fragments."""
    if metadata.num_rows == 0:
        return None
    grid = ChunkGrid.of(schema)
    chunks = np.stack(
        [np.asarray(metadata.column(c), dtype=np.int64) for c in layout.chunk_columns(schema)], axis=1
    )
    cells = int(np.sum(metadata.column(layout.N_CELLS)))
    whole: ChunkBox = tuple((int(lo), int(hi)) for lo, hi in zip(chunks.min(0), chunks.max(0), strict=True))
    whole_cells = _box_cells(grid, whole)
    if cells < dense_fraction * whole_cells:
        return None
    pending, done = [whole], []
    while pending:
        box = pending.pop(0)  # breadth first: tiles of even size
        if _box_cells(grid, _reach_box(grid, box, before, after)) <= max_read_cells and (
            len(done) + len(pending) + 1 >= tasks
        ):
            done.append(box)
            continue
        halves = _split(box)
        if halves is None:
            if _box_cells(grid, _reach_box(grid, box, before, after)) > max_read_cells:
                return None
            done.append(box)
            continue
        pending.extend(halves)
    present = {tuple(int(c) for c in row) for row in np.unique(chunks, axis=0)}
    tiles = []
    read_cells = 0
    for box in done:
        read = _reach_box(grid, box, before, after)
        tile = Tile(box, read, ())
        if not tile.own_chunks() & present:
            continue
        read_cells += _box_cells(grid, read)
        tiles.append(Tile(box, read, tuple(files_of(read))))
    if read_cells > 2 * max(whole_cells, 1):
        return None
    return tiles


def work_table(tiles: Sequence[Tile]) -> pa.Table:
    """The table of tile numbers, one row per task."""
    return pa.table({TILE: pa.array(range(len(tiles)), pa.int64())})


def read_tile(tile: Tile, schema: ArraySchema) -> pa.Table:
    """The fragments of the tile's read box, from its files (rows pruned by chunk number)."""
    return read_parquet_files(
        list(tile.uris),
        row_filter=layout.chunk_ranges_filter(schema, list(tile.read)),
        schema=layout.fragment_schema(schema),
    )


def keep_own(table: pa.Table | None, tile: Tile, schema: ArraySchema) -> pa.Table | None:
    """The rows of a fragment table whose chunk lies in the tile."""
    if table is None or table.num_rows == 0:
        return table
    chunks = np.stack([np.asarray(table.column(c), dtype=np.int64) for c in layout.chunk_columns(schema)], 1)
    return table.filter(pa.array(tile.owns(chunks)))
