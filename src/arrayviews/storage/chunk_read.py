"""The decoded chunks a box of a stored array version touches, straight from its data files: live
files pruned by their chunk-number bounds, each file's chunk index, and each (file, chunk, attribute)
decoded once into the process's chunk cache.

Freshness: the files a read may use come from the listing of the version's snapshot (the caller has
just asked the catalog which snapshot is current). Data files are immutable and their paths unique,
so what is cached under a path (its chunk index, its decoded chunks) never goes stale; a file that
is no longer live (replaced by a delete, an insert with replace, a compaction) is simply not asked
for again and ages out of the cache. What a read resolved (a chunk's cached parts, a box of chunks
with its geometry and copy slices) is kept in the cache's derived map of (table, snapshot,
attribute): a snapshot's live files never change, and another snapshot is another map.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

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
#: ... and whose live files times touched chunks (the (file, chunk) pairs looked up) are at most this.
MAX_FILE_CHUNKS = 1024
#: Cell boxes whose copy slices a kept box plan holds.
SLICES_KEPT = 16


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

    @functools.cached_property
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

    @property
    def geometry(self) -> np.ndarray:
        """Per chunk of ``chunks`` its clipped start, then its shape: an (n, 2 * ndim) int64 array."""
        if self._geometry is None:
            ndim = len(self.chunks[0].start) if self.chunks else 0
            rows = [c.start + c.shape for c in self.chunks]
            self._geometry = np.array(rows, dtype=np.int64).reshape(len(rows), 2 * ndim)
        return self._geometry

    @property
    def complete(self) -> bool:
        """True when every chunk the box overlaps is one dense part with every cell, none null."""
        if self._complete is None:
            self._complete = len(self.chunks) == self.chunks_touched and all(c.complete for c in self.chunks)
        return self._complete

    _geometry: np.ndarray | None = field(default=None, repr=False)
    _complete: bool | None = field(default=None, repr=False)
    #: the kept plan's map of exact boxes to their copy slices (None: no plan kept), see _BoxPlan
    slices: dict | None = field(default=None, repr=False)


@dataclass(frozen=True)
class _BoxPlan:
    """What a box of chunks resolved to at one snapshot, for one attribute (kept in the cache's
    derived map under the box's chunk ranges): its chunks with cells, the cache keys they are made
    of, their geometry, and the live files the box's ranges kept."""

    chunks: tuple[ChunkParts, ...]
    keys: tuple
    geometry: np.ndarray
    files_kept: int
    complete: bool
    #: (low, high) of a cell box within these chunks -> what its reader planned to copy (at most
    #: SLICES_KEPT boxes; the reader's to fill)
    slices: dict = field(default_factory=dict, compare=False)


def _cells_of_ranges(grid: ChunkGrid, ranges: Sequence[tuple[int, int]]) -> int:
    """Cells of the chunks within per-dimension (first, last) chunk ranges (what a read decodes at most)."""
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
) -> BoxRead | None:
    """The parts of every chunk overlapping the box ``[low, high]`` (inclusive cell coordinates) in
    the files live at ``version``, for one attribute; chunks with no cell are left out. Decoded chunks
    come from ``cache`` where it holds them and are put there otherwise (strings are not cached).
    None when the box's chunks hold more than DIRECT_READ_CELLS cells, or its files times its chunks
    exceed MAX_FILE_CHUNKS: a read that large, or of many fragments spread over many files, is left
    to the bulk reader.

    A chunk whose parts all came from (or went into) the cache is remembered, with the cache keys it
    was made of, in the cache's derived map of the snapshot and attribute: the next read of that
    chunk at the same snapshot takes it from there without looking up its files one by one. When
    every chunk of the box is so remembered, the box's chunks, keys and geometry are kept under its
    chunk ranges too, and a read of the same ranges is answered from them alone. Entries used
    either way are still marked used in the cache; the map is dropped once anything leaves it."""
    schema = table.schema
    grid = ChunkGrid.of(schema)
    result = BoxRead()
    ranges = grid.chunk_ranges_overlapping(low, high)
    if ranges is None:
        return result
    cells = _cells_of_ranges(grid, ranges)
    if cells > DIRECT_READ_CELLS:
        return None
    result.chunks_touched = math.prod(last - first + 1 for first, last in ranges)
    bounds = live_bounds(table, version)
    if bounds is None:
        raise ValueError(f"{table.label} is not laid out as chunk fragments")
    result.files_live = len(bounds.files)
    dtype = numpy_dtype(attribute.type)
    if cache is not None and (codec.is_text(dtype) or cache.budget == 0):
        cache = None
    derived_key = (
        None
        if cache is None or bounds.snapshot is None
        else (*bounds.snapshot, attribute.name, attribute.type)
    )
    generation, resolved = (0, {}) if derived_key is None else cache.derived(derived_key)
    plan = resolved.get(ranges)
    if plan is not None:  # this box of chunks was resolved at this snapshot, its parts all cached
        result.files_kept = plan.files_kept
        if plan.files_kept * result.chunks_touched > MAX_FILE_CHUNKS:
            return None
        cache.touch(plan.keys)
        result.hits = len(plan.keys)
        result.chunks = list(plan.chunks)
        result._geometry, result._complete, result.slices = plan.geometry, plan.complete, plan.slices
        return result
    kept = bounds.overlapping(ranges)
    result.files_kept = len(kept)
    if len(kept) * result.chunks_touched > MAX_FILE_CHUNKS:
        return None
    if cache is not None and cells * dtype.itemsize > cache.budget // 2:
        cache_puts = False  # a read this large would only push out what smaller reads reuse
    else:
        cache_puts = cache is not None
    chunks = list(itertools.product(*(range(f, t + 1) for f, t in ranges)))
    found: dict[tuple[int, ...], ChunkParts | None] = {}
    todo = []
    used: list = []
    for chunk in chunks:
        entry = resolved.get(chunk)
        if entry is None:
            todo.append(chunk)
        else:
            found[chunk] = entry[0]
            used += entry[1]
    if used:
        cache.touch(used)
        result.hits += len(used)
    remember = {}
    if todo:
        made = _resolve(todo, bounds, kept, ranges, schema, attribute, grid, cache, cache_puts, result)
        found.update((chunk, parts) for chunk, (parts, _) in made.items())
        remember = {chunk: entry for chunk, entry in made.items() if entry[1] is not None}
    result.chunks = [parts for parts in (found[chunk] for chunk in chunks) if parts is not None]
    if derived_key is not None and len(remember) == len(todo):  # every chunk's parts are cached
        for chunk in todo:
            used += remember[chunk][1]
        plan = _BoxPlan(tuple(result.chunks), tuple(used), result.geometry, len(kept), result.complete)
        remember[ranges] = plan
        result.slices = plan.slices
    if remember:
        # a box plan counts as its chunks times the copy slices it may come to hold
        weight = len(remember) + (len(result.chunks) * SLICES_KEPT if ranges in remember else 0)
        cache.add_derived(derived_key, generation, remember, weight)
    return result


def _resolve(
    chunks: list[tuple[int, ...]],
    bounds,
    kept: np.ndarray,
    ranges: Sequence[tuple[int, int]],
    schema: ArraySchema,
    attribute: Attribute,
    grid: ChunkGrid,
    cache: ChunkCache | None,
    cache_puts: bool,
    result: BoxRead,
) -> dict[tuple[int, ...], tuple[ChunkParts | None, tuple | None]]:
    """Per chunk its parts (None: no cell) from the kept files whose chunk bounds contain it, each
    (file, chunk) from ``cache`` or decoded (and put there when ``cache_puts``), and the cache keys
    it was made of (None when some part is not in the cache)."""
    cells = np.asarray(chunks, dtype=np.int64).reshape(len(chunks), grid.ndim)
    covering = bounds.covering(kept, cells) if len(kept) else np.zeros((len(chunks), 0), dtype=bool)
    paths = [bounds.files[k].file_path for k in kept.tolist()]
    key_tail = (attribute.name, attribute.type)
    # per chunk, per covering file: the cached parts, or None until decoded below
    held: list[list[tuple[str, tuple | None]]] = []
    missing: set[tuple[str, tuple[int, ...]]] = set()
    for chunk, row in zip(chunks, covering.tolist(), strict=True):
        of_chunk = []
        for path, covers in zip(paths, row, strict=True):
            if not covers:
                continue
            # an empty tuple is kept too: the file holds nothing of that chunk
            parts = None if cache is None else cache.get((path, chunk, *key_tail))
            if parts is None:
                missing.add((path, chunk))
                result.misses += 1
            else:
                result.hits += 1
            of_chunk.append((path, parts))
        held.append(of_chunk)
    decoded = {}
    refused = set()  # (file, chunk) pairs decoded but not kept by the cache
    if missing:
        decoded = _read_chunks(missing, ranges, schema, attribute, grid, copy=cache_puts, result=result)
        if not cache_puts:
            refused = missing
        for path, chunk in missing if cache_puts else ():
            parts = decoded.get((path, chunk), ())
            if not cache.put((path, chunk, *key_tail), parts, 64 + sum(p.nbytes for p in parts)):
                refused.add((path, chunk))
    starts, sizes = layout.box_geometry(grid, cells)
    made = {}
    for chunk, of_chunk, start, size in zip(chunks, held, starts.tolist(), sizes.tolist(), strict=True):
        parts = []
        for path, got in of_chunk:
            parts.extend(decoded.get((path, chunk), ()) if got is None else got)
        in_cache = cache is not None and all((path, chunk) not in refused for path, _ in of_chunk)
        keys = tuple((path, chunk, *key_tail) for path, _ in of_chunk) if in_cache else None
        made[chunk] = (ChunkParts(chunk, tuple(start), tuple(size), tuple(parts)) if parts else None, keys)
    return made


# -- which rows -------------------------------------------------------------------------------------
def _scan(
    paths: list[str], schema: ArraySchema, columns: list[str], row_filter=None
) -> tuple[pa.Table, list[str]]:
    """``columns`` of the rows of several data files in one (multi-threaded) scan, with each row's
    file as ``__filename`` (dictionary-encoded), and the files' paths as those codes name them."""
    fs, _ = filesystem(paths[0])
    inner = {filesystem(p)[1]: p for p in paths}
    dataset = ds.dataset(list(inner), filesystem=fs, format="parquet", schema=layout.fragment_schema(schema))
    table = dataset.to_table(columns=[*columns, "__filename"], filter=row_filter)
    if table.num_rows == 0:
        return table.set_column(table.num_columns - 1, "__filename", pa.array([], pa.int32())), []
    names = pc.dictionary_encode(table.column("__filename")).combine_chunks()
    table = table.set_column(table.num_columns - 1, "__filename", names.indices)
    return table, [inner[name] for name in names.dictionary.to_pylist()]


def _read_chunks(
    wanted: set[tuple[str, tuple[int, ...]]],
    ranges: Sequence[tuple[int, int]],
    schema: ArraySchema,
    attribute: Attribute,
    grid: ChunkGrid,
    copy: bool,
    result: BoxRead,
) -> dict[tuple[str, tuple[int, ...]], tuple[Part, ...]]:
    """Decode the fragments of the wanted (file, chunk) pairs, reading in one scan only the files
    named, the row groups their chunk statistics do not rule out, and the attribute's columns."""
    paths = sorted({path for path, _ in wanted})
    chunk_columns = layout.chunk_columns(schema)
    columns = [
        *chunk_columns,
        layout.N_CELLS,
        layout.DENSE,
        layout.CELLS,
        layout.value_column(attribute.name),
    ]
    if attribute.nullable:
        columns.append(layout.null_column(attribute.name))
    table, names = _scan(paths, schema, columns, layout.chunk_ranges_filter(schema, ranges))
    result.files_opened += len(paths)
    codes = np.asarray(table.column("__filename"), dtype=np.int64)
    chunks = np.stack([np.asarray(table.column(c), dtype=np.int64) for c in chunk_columns], axis=1)
    n_cells = np.asarray(table.column(layout.N_CELLS), dtype=np.int64)
    dense = np.asarray(table.column(layout.DENSE), dtype=bool)
    cells_data, cells_offsets = layout.binary_parts(table.column(layout.CELLS))
    value_data, value_offsets = layout.binary_parts(table.column(layout.value_column(attribute.name)))
    null_parts = layout.binary_parts(table.column(columns[-1])) if attribute.nullable else None
    dtype = numpy_dtype(attribute.type)
    decoded: dict[tuple[str, tuple[int, ...]], list[Part]] = {}
    for row, (code, chunk) in enumerate(zip(codes.tolist(), chunks.tolist(), strict=True)):
        key = (names[code], tuple(chunk))
        if key not in wanted:
            continue  # in the files and ranges read, but already cached
        nulls = None
        if null_parts is not None:
            nulls = null_parts[0][null_parts[1][row] : null_parts[1][row + 1]]
        part = decode_fragment(
            bool(dense[row]),
            int(n_cells[row]),
            grid.chunk_shape(key[1]),
            cells_data[cells_offsets[row] : cells_offsets[row + 1]],
            value_data[value_offsets[row] : value_offsets[row + 1]],
            nulls,
            dtype,
            copy,
        )
        decoded.setdefault(key, []).append(part)
    return {key: tuple(parts) for key, parts in decoded.items()}


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
