"""The decoded chunks a box of a stored array version touches, straight from its data files: live
files pruned by their chunk-number bounds, each file's chunk index, and each (file, chunk, attribute)
decoded once into the process's chunk cache.

Freshness: the files a read may use come from the listing of the version's snapshot (the caller has
just asked the catalog which snapshot is current). Data files are immutable and their paths unique,
so what is cached under a path (its chunk index, its decoded chunks) never goes stale; a file that
is no longer live (replaced by a delete, an insert with replace, a compaction) is simply not asked
for again and ages out of the cache.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.schema import ArraySchema, Attribute
from arrayviews.model.types import numpy_dtype
from arrayviews.storage import codec, layout
from arrayviews.storage.chunk_cache import ChunkCache
from arrayviews.storage.file_bounds import live_bounds
from arrayviews.storage.files import filesystem

if TYPE_CHECKING:
    from arrayviews.storage.array_table import ArrayTable

#: Reads touching chunks of at most this many cells in all go through the chunk path; larger reads
#: are left to the bulk reader (one multi-threaded scan, nothing cached).
DIRECT_READ_CELLS = 1 << 22


@dataclass(frozen=True)
class DenseChunk:
    """The values over a chunk's whole (clipped) box; ``valid`` marks cells present and not null
    (None: every cell)."""

    block: np.ndarray
    valid: np.ndarray | None

    @property
    def nbytes(self) -> int:
        return self.block.nbytes + (0 if self.valid is None else self.valid.nbytes)


@dataclass(frozen=True)
class SparseCells:
    """Some cells of a chunk: their row-major offsets in its (clipped) box, their values, and
    ``valid`` marking those not null (None: every one)."""

    offsets: np.ndarray
    values: np.ndarray
    valid: np.ndarray | None

    @property
    def nbytes(self) -> int:
        return self.offsets.nbytes + self.values.nbytes + (0 if self.valid is None else self.valid.nbytes)


Part = DenseChunk | SparseCells


@dataclass(frozen=True)
class ChunkParts:
    """Everything the live files hold of one chunk, for one attribute."""

    chunk: tuple[int, ...]
    start: tuple[int, ...]
    shape: tuple[int, ...]
    parts: tuple[Part, ...]

    @property
    def complete(self) -> bool:
        """True when one dense part holds every cell, none null."""
        return len(self.parts) == 1 and isinstance(self.parts[0], DenseChunk) and self.parts[0].valid is None


@dataclass
class BoxRead:
    """The chunks a box read got, and what it cost (counts that do not depend on the load)."""

    chunks: list[ChunkParts] = field(default_factory=list)
    #: chunks the box overlaps (present or not)
    chunks_touched: int = 0
    files_live: int = 0
    files_kept: int = 0
    files_opened: int = 0
    hits: int = 0
    misses: int = 0


@dataclass(frozen=True)
class _FileIndex:
    metadata: pq.FileMetaData
    chunks: np.ndarray  # (distinct chunks, dims)
    keys: tuple[tuple[int, ...], ...]  # the same as tuples
    rows: tuple[np.ndarray, ...]  # per distinct chunk, its rows in the file
    group_starts: np.ndarray  # first row of each row group, then the row count

    @property
    def nbytes(self) -> int:
        return (
            int(self.metadata.serialized_size) + self.chunks.nbytes + sum(r.nbytes + 100 for r in self.rows)
        )


def touched_cells(schema: ArraySchema, low: Sequence[int], high: Sequence[int]) -> int:
    """Cells of the chunks the box ``[low, high]`` overlaps (what a chunk read decodes at most)."""
    ranges = ChunkGrid.of(schema).chunk_ranges_overlapping(low, high)
    if ranges is None:
        return 0
    grid = ChunkGrid.of(schema)
    return math.prod(
        g.chunk_span(last)[1] - g.chunk_span(first)[0] + 1
        for g, (first, last) in zip(grid.dimensions, ranges, strict=True)
    )


def read_box(
    table: ArrayTable,
    version: int,
    attribute: Attribute,
    low: Sequence[int],
    high: Sequence[int],
    cache: ChunkCache | None,
) -> BoxRead:
    """The parts of every chunk overlapping the box ``[low, high]`` (inclusive cell coordinates) in
    the files live at ``version``, for one attribute; chunks with no cell are left out. Decoded chunks
    come from ``cache`` where it holds them and are put there otherwise (strings are not cached)."""
    schema = table.schema
    grid = ChunkGrid.of(schema)
    result = BoxRead()
    ranges = grid.chunk_ranges_overlapping(low, high)
    if ranges is None:
        return result
    result.chunks_touched = math.prod(last - first + 1 for first, last in ranges)
    first = np.asarray([r[0] for r in ranges], dtype=np.int64)
    last = np.asarray([r[1] for r in ranges], dtype=np.int64)
    bounds = live_bounds(table, version)
    if bounds is None:
        raise ValueError(f"{table.label} is not laid out as chunk fragments")
    result.files_live = len(bounds.files)
    kept = bounds.overlapping(ranges)
    result.files_kept = len(kept)
    dtype = numpy_dtype(attribute.type)
    if cache is not None and (codec.is_text(dtype) or cache.budget == 0):
        cache = None
    if cache is not None and touched_cells(schema, low, high) * dtype.itemsize > cache.budget // 2:
        cache_puts = False  # a read this large would only push out what smaller reads reuse
    else:
        cache_puts = cache is not None
    found: dict[tuple[int, ...], list[Part]] = {}
    for position in kept:
        path = bounds.files[position].file_path
        index = _file_index(path, schema, cache, result)
        inside = np.all((index.chunks >= first) & (index.chunks <= last), axis=1)
        missing: list[int] = []
        for number in np.flatnonzero(inside).tolist():
            chunk = index.keys[number]
            parts = None if cache is None else cache.get((path, chunk, attribute.name, attribute.type))
            if parts is None:
                missing.append(int(number))
                result.misses += 1
            else:
                found.setdefault(chunk, []).extend(parts)
                result.hits += 1
        if not missing:
            continue
        decoded = _read_chunks(path, index, missing, schema, attribute, grid, copy=cache_puts)
        result.files_opened += 1
        for chunk, parts in decoded.items():
            if cache_puts:
                cache.put((path, chunk, attribute.name, attribute.type), parts, sum(p.nbytes for p in parts))
            found.setdefault(chunk, []).extend(parts)
    if found:
        starts, sizes = layout.box_geometry(grid, np.asarray(list(found), dtype=np.int64))
        for (chunk, parts), start, shape in zip(found.items(), starts.tolist(), sizes.tolist(), strict=True):
            result.chunks.append(ChunkParts(chunk, tuple(start), tuple(shape), tuple(parts)))
    return result


# -- which rows -------------------------------------------------------------------------------------
def _file_index(path: str, schema: ArraySchema, cache: ChunkCache | None, result: BoxRead) -> _FileIndex:
    """The chunks a data file holds and their rows (read once per file: its footer and chunk columns)."""
    key = (path, "index")
    index = None if cache is None else cache.get(key)
    if index is not None:
        return index
    fs, inner = filesystem(path)
    with fs.open_input_file(inner) as handle:
        parquet = pq.ParquetFile(handle)
        columns = parquet.read(columns=layout.chunk_columns(schema))
    result.files_opened += 1
    rows_chunks = np.stack(
        [np.asarray(columns.column(c), dtype=np.int64) for c in layout.chunk_columns(schema)], axis=1
    ).reshape(columns.num_rows, schema.ndim)
    chunks, inverse = np.unique(rows_chunks, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(inverse, kind="stable")
    splits = np.searchsorted(inverse[order], np.arange(1, len(chunks)))
    metadata = parquet.metadata
    sizes = [metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)]
    group_starts = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=group_starts[1:])
    keys = tuple(tuple(chunk) for chunk in chunks.tolist())
    index = _FileIndex(metadata, chunks, keys, tuple(np.split(order.astype(np.int64), splits)), group_starts)
    if cache is not None:
        cache.put(key, index, index.nbytes)
    return index


def _read_chunks(
    path: str,
    index: _FileIndex,
    numbers: list[int],
    schema: ArraySchema,
    attribute: Attribute,
    grid: ChunkGrid,
    copy: bool,
) -> dict[tuple[int, ...], tuple[Part, ...]]:
    """Decode the fragments of some of a file's chunks (``numbers`` index ``index.chunks``), reading
    only the row groups that hold them and only the attribute's columns."""
    owners = np.concatenate([np.full(len(index.rows[n]), n, dtype=np.int64) for n in numbers])
    rows = np.concatenate([index.rows[n] for n in numbers])
    groups = np.searchsorted(index.group_starts, rows, side="right") - 1
    wanted_groups = np.unique(groups)
    # where each wanted group's rows begin in the table read
    base = np.zeros(len(index.group_starts), dtype=np.int64)
    sizes = index.group_starts[wanted_groups + 1] - index.group_starts[wanted_groups]
    base[wanted_groups] = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    positions = base[groups] + rows - index.group_starts[groups]
    columns = [layout.N_CELLS, layout.DENSE, layout.CELLS, layout.value_column(attribute.name)]
    if attribute.nullable:
        columns.append(layout.null_column(attribute.name))
    fs, inner = filesystem(path)
    with fs.open_input_file(inner) as handle:
        parquet = pq.ParquetFile(handle, metadata=index.metadata)
        table = parquet.read_row_groups([int(g) for g in wanted_groups], columns=columns)
    table = table.take(pa.array(positions))
    n_cells = np.asarray(table.column(layout.N_CELLS), dtype=np.int64)
    dense = np.asarray(table.column(layout.DENSE), dtype=bool)
    cells_data, cells_offsets = layout.binary_parts(table.column(layout.CELLS))
    value_data, value_offsets = layout.binary_parts(table.column(layout.value_column(attribute.name)))
    null_parts = layout.binary_parts(table.column(columns[-1])) if attribute.nullable else None
    dtype = numpy_dtype(attribute.type)
    decoded: dict[tuple[int, ...], list[Part]] = {}
    for row, number in enumerate(owners):
        chunk = index.keys[number]
        shape = grid.chunk_shape(chunk)
        nulls = None
        if null_parts is not None:
            nulls = null_parts[0][null_parts[1][row] : null_parts[1][row + 1]]
        part = decode_fragment(
            bool(dense[row]),
            int(n_cells[row]),
            shape,
            cells_data[cells_offsets[row] : cells_offsets[row + 1]],
            value_data[value_offsets[row] : value_offsets[row + 1]],
            nulls,
            dtype,
            copy,
        )
        decoded.setdefault(chunk, []).append(part)
    return {chunk: tuple(parts) for chunk, parts in decoded.items()}


def decode_fragment(
    dense: bool,
    n_cells: int,
    shape: tuple[int, ...],
    cells: np.ndarray,
    payload: np.ndarray,
    nulls: np.ndarray | None,
    dtype: np.dtype,
    copy: bool,
) -> Part:
    """One encoded fragment of one attribute as a :data:`Part` (its arrays made read-only, and owned
    rather than views of the file's buffers when ``copy``)."""
    volume = math.prod(shape)
    if dense:
        block, present = codec.dense_block(True, n_cells, volume, payload, dtype, cells)
        valid = present
        if nulls is not None and len(nulls):
            not_null = ~np.unpackbits(nulls, count=volume, bitorder="little").view(bool)
            valid = not_null if valid is None else valid & not_null
        if copy and not codec.is_text(dtype):
            block = block.copy()
        return DenseChunk(
            _frozen(block.reshape(shape)), None if valid is None else _frozen(valid.reshape(shape))
        )
    offsets = codec.decode_offsets(False, n_cells, cells, volume)
    values = codec.decode_values(False, n_cells, volume, payload, dtype, offsets)
    null_mask = codec.decode_nulls(False, n_cells, volume, nulls, offsets)
    if copy:
        offsets, values = offsets.copy(), values.copy()
    return SparseCells(_frozen(offsets), _frozen(values), None if null_mask is None else _frozen(~null_mask))


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array
