"""The steps every write shares: stage new fragment files, find overlapping chunks, check conflicts, rewrite.

A write never changes a committed file. New fragments go to new files; chunks whose cells are
replaced or deleted are rewritten into new files by the engine's tasks; the commit swaps them in as one
snapshot. If anything fails before the commit, the staged files are deleted and the array is as
it was (a crash leaves unreferenced files, which ``expire_versions`` removes).
"""

from __future__ import annotations

import collections
import functools
import itertools
import math
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from arrayviews.execution.engine import Engine, WrittenFile, conform
from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.schema import ArraySchema
from arrayviews.model.types import statistics_array
from arrayviews.storage import codec, layout
from arrayviews.storage.array_table import ArrayTable
from arrayviews.storage.assemble import TARGET_FILE_BYTES, SortedCells, sort_cells
from arrayviews.storage.files import filesystem, read_parquet_files, write_parquet
from arrayviews.storage.versioned import StoredFile as DataFile

#: Cells to remove: local offsets per chunk (chunk numbers as a tuple).
Removal = dict[tuple[int, ...], np.ndarray]


def chunk_matrix(table: pa.Table, schema: ArraySchema) -> np.ndarray:
    return np.stack(
        [np.asarray(table.column(layout.chunk_column(d)), dtype=np.int64) for d in schema.dimension_names],
        axis=1,
    ).reshape(table.num_rows, schema.ndim)


def member_rows(rows: np.ndarray, members: np.ndarray) -> np.ndarray:
    """Boolean mask of the rows of ``rows`` (n, d) that appear in ``members`` (m, d)."""
    if len(rows) == 0 or len(members) == 0:
        return np.zeros(len(rows), dtype=bool)
    if len(rows) * len(members) <= 4096:  # small (the usual case per file): compare directly
        return (rows[:, None, :] == members[None, :, :]).all(axis=2).any(axis=1)
    _, inverse = np.unique(np.vstack([rows, members]), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    return np.isin(inverse[: len(rows)], inverse[len(rows) :])


def bounding_ranges(chunks: np.ndarray) -> list[tuple[int, int]]:
    return [(int(chunks[:, k].min()), int(chunks[:, k].max())) for k in range(chunks.shape[1])]


# -- staging new fragments ----------------------------------------------------------------------
def stage_tables(array: ArrayTable, tables: list[pa.Table]) -> list[WrittenFile]:
    """Write fragment tables (built on the driver) as new, uncommitted data files."""
    written = []
    for table in tables:
        if table.num_rows == 0:
            continue
        uri = array.new_file_uri()
        size = write_parquet(table, uri)
        written.append(WrittenFile(uri, table.num_rows, size, int(np.sum(table.column(layout.N_CELLS)))))
    return written


def group_encoded(
    encoded: Iterator[codec.EncodedFragment], schema: ArraySchema, version: int
) -> Iterator[pa.Table]:
    """Fragment tables of about TARGET_FILE_BYTES each from a stream of encoded fragments."""
    pending: list[codec.EncodedFragment] = []
    size = 0
    for fragment in encoded:
        pending.append(fragment)
        size += fragment.nbytes
        if size >= TARGET_FILE_BYTES:
            yield layout.encoded_to_table(pending, schema, version)
            pending, size = [], 0
    if pending:
        yield layout.encoded_to_table(pending, schema, version)


def _block_windows(schema: ArraySchema, shape: tuple[int, ...], origin: tuple[int, ...]) -> Iterator[tuple]:
    """For every chunk a block at ``origin`` overlaps: (chunk, block window, window shape, chunk box
    low, chunk box shape, window start)."""
    grid = ChunkGrid.of(schema)
    block_low = np.asarray(origin, dtype=np.int64)
    block_high = block_low + np.asarray(shape, dtype=np.int64) - 1
    ranges = grid.chunk_ranges_overlapping(block_low, block_high)
    if ranges is None:
        return
    for chunk in itertools.product(*(range(a, b + 1) for a, b in ranges)):
        low, high = (np.asarray(c, dtype=np.int64) for c in grid.chunk_bounds(chunk))
        start, stop = np.maximum(low, block_low), np.minimum(high, block_high)
        window = tuple(
            slice(int(s - o), int(e - o + 1)) for s, e, o in zip(start, stop, block_low, strict=True)
        )
        sub_shape = tuple(int(x) for x in stop - start + 1)
        chunk_shape = tuple(int(x) for x in high - low + 1)
        yield tuple(int(c) for c in chunk), window, sub_shape, low, chunk_shape, start


def dense_block_tables(
    schema: ArraySchema,
    arrays: dict[str, np.ndarray],
    origin: tuple[int, ...],
    present: np.ndarray | None,
    version: int,
) -> Iterator[pa.Table]:
    """Fragment tables of a dense block placed at ``origin``.

    Chunks the block covers completely (the bulk of a large block) are copied straight from the
    block into one Arrow buffer per attribute: one copy, no per-cell work. Chunks it covers in part
    (or with masked cells) go through the fragment codec.
    """
    shape = next(iter(arrays.values())).shape if arrays else present.shape
    whole, partial = [], []
    for window in _block_windows(schema, shape, origin):
        complete = window[2] == window[4] and (present is None or present[window[1]].all())
        (whole if complete else partial).append(window)
    dtypes = layout.attribute_dtypes(schema)
    width = max(1, sum(d.itemsize for d in dtypes.values()))
    group: list[tuple] = []
    size = 0
    for window in whole:
        group.append(window)
        size += math.prod(window[4]) * width
        if size >= TARGET_FILE_BYTES:
            yield _whole_chunk_rows(schema, arrays, group, version)
            group, size = [], 0
    if group:
        yield _whole_chunk_rows(schema, arrays, group, version)
    if partial:
        encoded = (
            codec.encode(f, int(np.prod(f_shape)), dtypes)
            for f, f_shape in _partial_fragments(arrays, present, partial)
        )
        yield from group_encoded(encoded, schema, version)


def _whole_chunk_rows(
    schema: ArraySchema, arrays: dict[str, np.ndarray], group: list[tuple], version: int
) -> pa.Table:
    volumes = np.array([math.prod(w[4]) for w in group], dtype=np.int64)
    columns: dict[str, pa.Array] = {}
    for k, dimension in enumerate(schema.dimension_names):
        columns[layout.chunk_column(dimension)] = pa.array([w[0][k] for w in group], pa.int64())
    columns[layout.N_CELLS] = pa.array(volumes)
    columns[layout.DENSE] = pa.array(np.ones(len(group), dtype=bool))
    columns[layout.CELLS] = layout.binary_array([np.zeros(0, np.uint8)] * len(group))
    nbytes = np.zeros(len(group), dtype=np.int64)
    for attribute in schema.attributes:
        dtype = layout.attribute_dtypes(schema)[attribute.name].newbyteorder("<")
        if codec.is_text(dtype):  # strings: variable width, one payload per chunk
            nbytes += _whole_chunk_text(columns, attribute, arrays[attribute.name], group)
            continue
        sizes = volumes * dtype.itemsize
        offsets = np.concatenate(([0], np.cumsum(sizes)))
        buffer = np.empty(int(offsets[-1]), dtype=np.uint8)
        low, high = [], []
        for row, window in enumerate(group):
            target = buffer[offsets[row] : offsets[row + 1]].view(dtype).reshape(window[4])
            np.copyto(target, arrays[attribute.name][window[1]], casting="same_kind")
            minimum, maximum = codec.value_range(target.reshape(-1), None)
            low.append(minimum)
            high.append(maximum)
        columns[layout.value_column(attribute.name)] = pa.Array.from_buffers(
            pa.binary(), len(group), [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(buffer)]
        )
        if attribute.nullable:
            columns[layout.null_column(attribute.name)] = layout.binary_array(
                [np.zeros(0, np.uint8)] * len(group)
            )
        columns[layout.min_column(attribute.name)] = statistics_array(low, attribute.type)
        columns[layout.max_column(attribute.name)] = statistics_array(high, attribute.type)
        nbytes += sizes
    columns[layout.NBYTES] = pa.array(nbytes)
    columns[layout.VERSION] = pa.array(np.full(len(group), version, dtype=np.int64))
    target_schema = layout.fragment_schema(schema)
    return pa.table([columns[f.name] for f in target_schema], schema=target_schema)


def _whole_chunk_text(columns: dict, attribute, block: np.ndarray, group: list[tuple]) -> np.ndarray:
    """Fill the columns of a string attribute for whole chunks; the bytes of each row."""
    payloads, low, high = [], [], []
    for window in group:
        values = np.asarray(block[window[1]], dtype=object).reshape(-1)
        payloads.append(codec.text_bytes(values))
        minimum, maximum = codec.value_range(values, None)
        low.append(minimum)
        high.append(maximum)
    columns[layout.value_column(attribute.name)] = layout.binary_array(payloads)
    if attribute.nullable:
        columns[layout.null_column(attribute.name)] = layout.binary_array(
            [np.zeros(0, np.uint8)] * len(group)
        )
    columns[layout.min_column(attribute.name)] = statistics_array(low, attribute.type)
    columns[layout.max_column(attribute.name)] = statistics_array(high, attribute.type)
    return np.array([len(p) for p in payloads], dtype=np.int64)


def _partial_fragments(
    arrays: dict[str, np.ndarray], present: np.ndarray | None, windows: list[tuple]
) -> Iterator[tuple[codec.Fragment, tuple[int, ...]]]:
    for chunk, window, sub_shape, low, chunk_shape, start in windows:
        local = np.indices(sub_shape).reshape(len(sub_shape), -1) + (start - low)[:, None]
        offsets = np.ravel_multi_index(tuple(local), chunk_shape).astype(np.int64)
        values = {name: np.ascontiguousarray(array[window]).reshape(-1) for name, array in arrays.items()}
        if present is not None:
            keep = np.ascontiguousarray(present[window]).reshape(-1)
            offsets = offsets[keep]
            values = {name: column[keep] for name, column in values.items()}
        if len(offsets):
            yield codec.Fragment(chunk, offsets, values), chunk_shape


# -- overlap with what is stored ----------------------------------------------------------------
@functools.lru_cache(maxsize=8192)
def file_chunks(uri: str, columns: tuple[str, ...]) -> tuple[np.ndarray, int]:
    """The chunk numbers of every fragment in a data file, and its cell count.

    Data files are never modified (every write makes new files with fresh names), so the answer
    for a path never changes and is cached for the life of the process.
    """
    fs, path = filesystem(uri)
    rows = pq.read_table(path, filesystem=fs, columns=[*columns, layout.N_CELLS])
    chunks = np.stack([np.asarray(rows.column(c), dtype=np.int64) for c in columns], axis=1).reshape(
        -1, len(columns)
    )
    chunks.setflags(write=False)
    return chunks, int(np.sum(rows.column(layout.N_CELLS)))


@dataclass
class Overlap:
    """Existing files holding chunks that a write touches, and which chunks those are."""

    files: list[DataFile]
    chunks: np.ndarray  # (m, d) touched chunks that already have fragments
    file_chunks: list[np.ndarray]  # per affected file, the touched chunks it holds
    file_cells: dict[str, int]  # per affected file (by path), the cells it holds

    def files_holding(self, chunks: np.ndarray) -> list[DataFile]:
        """The affected files that hold any of ``chunks``."""
        return [
            f for f, held in zip(self.files, self.file_chunks, strict=True) if member_rows(held, chunks).any()
        ]

    def cells_in(self, files: list[DataFile]) -> int:
        return sum(self.file_cells[f.file_path] for f in files)


def find_overlap(array: ArrayTable, version: int, touched: np.ndarray) -> Overlap:
    """Which committed files hold fragments of the ``touched`` chunks (read from metadata only)."""
    schema = array.schema
    empty = Overlap([], np.zeros((0, schema.ndim), dtype=np.int64), [], {})
    if len(touched) == 0:
        return empty
    files, found, per_file = [], [], {}
    for data_file in array.data_files(version, bounding_ranges(touched)):
        chunks, cells = file_chunks(data_file.file_path, tuple(layout.chunk_columns(schema)))
        hit = member_rows(chunks, touched)
        if hit.any():
            files.append(data_file)
            found.append(chunks[hit])
            per_file[data_file.file_path] = cells
    if not files:
        return empty
    return Overlap(files, np.unique(np.vstack(found), axis=0), found, per_file)


#: Cell positions of small committed files kept in memory (see ``_small_file_cells``): at most
#: this many bytes per file and in all.
SMALL_FILE_CELLS_BYTES = 256 * 1024
CELLS_CACHE_BYTES = 64 * 1024 * 1024
_cells_cache: collections.OrderedDict[tuple[str, tuple[str, ...]], pa.Table] = collections.OrderedDict()
_cells_cache_lock = threading.Lock()


def _small_file_cells(uri: str, columns: tuple[str, ...]) -> pa.Table | None:
    """The ``columns`` (chunk numbers and cell positions, no values) of every fragment of a small
    committed data file, or None for a large one. Committed files never change, so many small
    batches inserted into one chunk check their conflicts without reading every earlier batch's
    file again (least recently used entries leave once CELLS_CACHE_BYTES are held)."""
    key = (uri, columns)
    with _cells_cache_lock:
        if key in _cells_cache:
            _cells_cache.move_to_end(key)
            return _cells_cache[key]
    fs, path = filesystem(uri)
    info = fs.get_file_info(path)
    if info.size is None:  # gone: another process dropped the array (replanned names it)
        raise FileNotFoundError(f"data file {uri} is gone")
    if info.size > 4 * SMALL_FILE_CELLS_BYTES:
        return None
    rows = pq.read_table(path, filesystem=fs, columns=list(columns))
    if rows.nbytes > SMALL_FILE_CELLS_BYTES:
        return None
    with _cells_cache_lock:
        _cells_cache[key] = rows
        held = sum(t.nbytes for t in _cells_cache.values())
        while held > CELLS_CACHE_BYTES and _cells_cache:
            held -= _cells_cache.popitem(last=False)[1].nbytes
    return rows


def read_chunk_rows(
    uris: list[str], schema: ArraySchema, chunks: np.ndarray, columns: list[str], committed: bool = False
) -> pa.Table:
    """Rows of the given files whose chunk is in ``chunks`` (read on the driver). ``committed``:
    the files are committed (immutable), so small ones may be served from memory."""
    keys = tuple(layout.chunk_columns(schema))
    holding = [uri for uri in uris if member_rows(file_chunks(uri, keys)[0], chunks).any()]
    if not holding:
        return layout.fragment_schema(schema).empty_table().select(columns)
    target = layout.fragment_schema(schema)
    wanted = pa.schema([target.field(c) for c in columns])
    pieces, to_read = [], []
    for uri in holding:
        cached = _small_file_cells(uri, tuple(columns)) if committed else None
        if cached is None:
            to_read.append(uri)
        else:
            pieces.append(cached.cast(wanted))
    if to_read:
        pieces.append(
            read_parquet_files(
                to_read,
                columns=columns,
                row_filter=layout.chunk_ranges_filter(schema, bounding_ranges(chunks)),
                schema=target,
            ).select(columns)
        )
    rows = pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0]
    return rows.filter(pa.array(member_rows(chunk_matrix(rows, schema), chunks)))


def offsets_by_chunk(cells: SortedCells) -> dict[tuple[int, ...], np.ndarray]:
    """Local offsets per chunk of sorted cells."""
    return {
        tuple(int(c) for c in chunk): cells.offsets[cells.bounds[i] : cells.bounds[i + 1]]
        for i, chunk in enumerate(cells.chunks)
    }


def find_conflicts(
    schema: ArraySchema, existing_uris: list[str], new_uris: list[str], chunks: np.ndarray
) -> dict[tuple[int, ...], np.ndarray]:
    """Local offsets, per chunk, of cells in the new files that the existing files already hold.

    Both sides are decoded to coordinates at once (vectorized); a cell held by both shows up as a
    duplicate once the two sets are sorted together.
    """
    bare = schema.with_attributes([])
    columns = [*layout.chunk_columns(schema), layout.N_CELLS, layout.DENSE, layout.CELLS]
    sides = [
        layout.fragments_to_cells(read_chunk_rows(uris, schema, chunks, columns, committed), bare)
        for uris, committed in ((existing_uris, True), (new_uris, False))
    ]
    coords = np.vstack(
        [
            np.stack([np.asarray(side.column(d)) for d in bare.dimension_names], axis=1).reshape(
                -1, bare.ndim
            )
            for side in sides
        ]
    )
    common = sort_cells(coords, {}, {}, bare).duplicates()
    return offsets_by_chunk(sort_cells(common, {}, {}, bare))


def conflict_cells(schema: ArraySchema, conflicts: dict[tuple[int, ...], np.ndarray]) -> np.ndarray:
    """Coordinates (n, d) of the conflicting cells, sorted."""
    grid = ChunkGrid.of(schema)
    if not conflicts:
        return np.zeros((0, schema.ndim), dtype=np.int64)
    cells = np.vstack([grid.cells_at(offsets, chunk) for chunk, offsets in conflicts.items()])
    return cells[np.lexsort(cells.T[::-1])]


# -- rewriting chunks ---------------------------------------------------------------------------
def _rewrite_batch(
    table: pa.Table,
    schema: ArraySchema,
    version: int,
    removal: Removal | None,
    box: tuple[tuple[int, ...], tuple[int, ...]] | None,
) -> pa.Table:
    """Remove cells from the fragments of a batch: those ``removal`` lists for their chunk, or
    those inside ``box``."""
    fragment_columns = layout.fragment_schema(schema).names
    table = table.select(fragment_columns)
    grid = ChunkGrid.of(schema)
    chunks = chunk_matrix(table, schema)
    if box is None:
        keys = [tuple(int(c) for c in row) for row in chunks]
        touched = np.array([key in removal for key in keys], dtype=bool)
        removals = [removal[key] for key, hit in zip(keys, touched, strict=True) if hit]
    else:
        starts, sizes = layout.box_geometry(grid, chunks)
        ends = starts + sizes - 1
        low, high = np.asarray(box[0]), np.asarray(box[1])
        disjoint = np.any((ends < low) | (starts > high), axis=1)
        inside = np.all((starts >= low) & (ends <= high), axis=1)
        touched = ~disjoint & ~inside
        table = table.filter(pa.array(~inside))
        touched = touched[~inside]
        removals = [None] * int(touched.sum())
    kept = table.filter(pa.array(~touched))
    changed = table.filter(pa.array(touched))
    if changed.num_rows == 0:
        return conform(kept, layout.fragment_schema(schema))
    dtypes = layout.attribute_dtypes(schema)
    untouched = np.zeros(changed.num_rows, dtype=bool)
    modified: list[codec.Fragment] = []
    for row, (fragment, remove) in enumerate(
        zip(layout.iter_fragments(changed, schema), removals, strict=True)
    ):
        if remove is None:
            cells = grid.cells_at(fragment.offsets, fragment.chunk)
            drop = np.all((cells >= np.asarray(box[0])) & (cells <= np.asarray(box[1])), axis=1)
        else:
            drop = np.isin(fragment.offsets, remove, assume_unique=True)
        if not drop.any():
            untouched[row] = True
        elif not drop.all():
            modified.append(fragment.take(~drop))
    parts = [kept, changed.filter(pa.array(untouched))]
    if modified:
        encoded = [codec.encode(f, int(np.prod(grid.chunk_shape(f.chunk))), dtypes) for f in modified]
        parts.append(layout.encoded_to_table(encoded, schema, version))
    target = layout.fragment_schema(schema)
    return pa.concat_tables([conform(part, target) for part in parts])


def rewrite_files(
    engine: Engine,
    array: ArrayTable,
    files: list[DataFile],
    version: int,
    removal: Removal | None = None,
    box: tuple[tuple[int, ...], tuple[int, ...]] | None = None,
) -> list[WrittenFile]:
    """One job: rewrite ``files`` without the cells ``removal`` lists per chunk, or inside ``box``
    (the removal travels with the task function, as a broadcast would)."""
    schema = array.schema
    arrow_schema = layout.fragment_schema(schema)
    if removal is not None:
        removal = {
            tuple(int(c) for c in chunk): np.unique(np.asarray(offsets, dtype=codec.OFFSET_DTYPE))
            for chunk, offsets in removal.items()
        }
    data = engine.read_files([f.file_path for f in files], arrow_schema)
    function = functools.partial(_rewrite_batch, schema=schema, version=version, removal=removal, box=box)
    rewritten = engine.map_batches(data, function, arrow_schema)
    return engine.write_files(rewritten, array.data_directory, arrow_schema)
