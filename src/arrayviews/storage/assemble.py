"""Turning a batch of cells into fragment rows: bucket by chunk, sort, detect duplicates, encode.

Vectorized over the whole batch: sparse chunks (the many small ones) are encoded straight into Arrow
buffers without a loop; only dense chunks, which are few and large, are encoded one at a time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.schema import ArraySchema
from arrayviews.model.types import statistics_array
from arrayviews.storage import cell_order, codec, layout

#: Fragment rows are grouped into tables (one Parquet file each) of about this many bytes.
TARGET_FILE_BYTES = 128 * 1024 * 1024


@dataclass
class SortedCells:
    """Cells sorted by (chunk, local offset), with the chunk boundaries."""

    chunks: np.ndarray  # (m, d) distinct chunks, sorted
    bounds: np.ndarray  # (m + 1,) cell index where each chunk starts
    offsets: np.ndarray  # (n,) local offsets, sorted within each chunk
    unsorted_coords: np.ndarray  # (n, d) cell coordinates as given
    order: np.ndarray  # (n,) position in the input of each sorted cell
    values: dict[str, np.ndarray]
    nulls: dict[str, np.ndarray]
    volumes: np.ndarray  # (m,) cells in each chunk's clipped box

    @property
    def coords(self) -> np.ndarray:
        """Cell coordinates (n, d) in sorted order (gathered on demand: only error reports need them)."""
        return self.unsorted_coords[self.order]

    @property
    def n_cells(self) -> int:
        return len(self.offsets)

    def duplicates(self) -> np.ndarray:
        """Coordinates of cells that occur more than once (each repeated coordinate listed once)."""
        if self.n_cells < 2:
            return np.zeros((0, self.unsorted_coords.shape[1]), dtype=np.int64)
        same_chunk = np.ones(self.n_cells - 1, dtype=bool)
        same_chunk[self.bounds[1:-1] - 1] = False
        repeated = np.flatnonzero(same_chunk & (self.offsets[1:] == self.offsets[:-1])) + 1
        return np.unique(self.unsorted_coords[self.order[repeated]], axis=0)

    def fragment(self, index: int) -> codec.Fragment:
        lo, hi = self.bounds[index], self.bounds[index + 1]
        return codec.Fragment(
            tuple(int(c) for c in self.chunks[index]),
            self.offsets[lo:hi],
            {name: column[lo:hi] for name, column in self.values.items()},
            {name: mask[lo:hi] for name, mask in self.nulls.items() if mask[lo:hi].any()},
        )


def local_offsets(coords: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """C-order offsets of cells (n, d) in their chunk boxes, given per-cell box starts and sizes."""
    offsets = np.zeros(len(coords), dtype=np.int64)
    for k in range(coords.shape[1]):
        offsets = offsets * sizes[:, k] + (coords[:, k] - starts[:, k])
    return offsets


def _edges(grid: ChunkGrid) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per dimension, the first and last chunk where clipped to the range: chunk, first cell, size.

    Unclipped edges get chunk -1 and size 0 (the kernel then numbers their cells like any chunk's).
    """
    d = len(grid.dimensions)
    chunk = np.full((d, 2), -1, dtype=np.int64)
    low = np.zeros((d, 2), dtype=np.int64)
    size = np.zeros((d, 2), dtype=np.int64)
    for k, dimension in enumerate(grid.dimensions):
        for e, edge in enumerate((dimension.first_chunk, dimension.last_chunk)):
            first, last = dimension.chunk_span(edge)
            if last - first + 1 < dimension.length:
                chunk[k, e], low[k, e], size[k, e] = edge, first, last - first + 1
    return chunk, low, size


def _chunk_ranges(coords: np.ndarray, grid: ChunkGrid) -> tuple[np.ndarray, list[int]]:
    """The lowest chunk number of the batch in each dimension, and the number of chunk numbers spanned."""
    low, spans = [], []
    for k, dimension in enumerate(grid.dimensions):
        column = coords[:, k]
        first = (int(column.min()) - dimension.origin) // dimension.length
        last = (int(column.max()) - dimension.origin) // dimension.length
        low.append(first)
        spans.append(last - first + 1)
    return np.asarray(low, dtype=np.int64), spans


def _decode_chunks(codes: np.ndarray, low: np.ndarray, spans: list[int]) -> np.ndarray:
    """Chunk numbers (m, d) of row-major chunk codes over ``low + [0, spans)``."""
    chunks = np.empty((len(codes), len(spans)), dtype=np.int64)
    rest = codes.copy()
    for k in range(len(spans) - 1, -1, -1):
        rest, digit = np.divmod(rest, spans[k])
        chunks[:, k] = digit + low[k]
    return chunks


#: Batches of fewer cells are ordered with numpy (loading numba's compiled kernels costs about a
#: second once per process, more than sorting such a batch).
KERNEL_MIN_CELLS = 1 << 16


def _order_small(
    coords: np.ndarray, grid: ChunkGrid, low: np.ndarray, spans: list[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_order_by_chunk` for a small batch whose chunk codes fit in int64, in numpy (stable)."""
    n = len(coords)
    codes, offsets = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    for k, dimension in enumerate(grid.dimensions):
        chunk = dimension.chunk_of(coords[:, k])
        starts, sizes = dimension.chunk_starts(chunk), dimension.chunk_sizes(chunk)
        offsets = offsets * sizes + (coords[:, k] - starts)
        codes = codes * spans[k] + (chunk - low[k])
    order = np.lexsort((offsets, codes))
    codes = codes[order]
    first = np.flatnonzero(np.concatenate(([True], codes[1:] != codes[:-1])))
    bounds = np.append(first, n).astype(np.int64)
    return order, offsets[order], _decode_chunks(codes[first], low, spans), bounds


def _order_by_chunk(
    coords: np.ndarray, grid: ChunkGrid
) -> tuple[np.ndarray | None, np.ndarray, np.ndarray, np.ndarray]:
    """Order of cells by (chunk, local offset): the order (None when the input already is in order),
    the sorted offsets, the distinct chunks (m, d) and the bounds (m + 1) of their cells.

    Chunks get one row-major code over the batch's chunk ranges when these fit in int64 (nearly
    always). With at most ``CODES_PER_CELL`` codes per cell, a counting sort on the code orders the
    batch; otherwise one int64 key (code times chunk volume plus offset) is sorted, or, where even that
    does not fit, the code and offset lexicographically. Ranges too wide for one code fall back to a
    lexicographic sort over the chunk numbers and the offset.
    """
    n = len(coords)
    edge_chunk, edge_low, edge_size = _edges(grid)
    origins = np.array([d.origin for d in grid.dimensions], dtype=np.int64)
    lengths = np.array([d.length for d in grid.dimensions], dtype=np.int64)
    low, spans = _chunk_ranges(coords, grid)
    code_count = math.prod(spans)
    if code_count >= 2**62:  # one code per chunk does not fit: offsets here, chunk numbers by numpy
        _, offsets = cell_order.codes_and_offsets(
            coords, origins, lengths, low, np.zeros(len(spans), np.int64), edge_chunk, edge_low, edge_size
        )
        chunks = [grid.dimensions[k].chunk_of(coords[:, k]) for k in range(len(spans))]
        order = np.lexsort((offsets, *chunks[::-1]))
        stacked = np.stack([c[order] for c in chunks], axis=1)
        first = np.flatnonzero(np.concatenate(([True], np.any(stacked[1:] != stacked[:-1], axis=1))))
        return order, offsets[order], stacked[first], np.append(first, n).astype(np.int64)
    if n < KERNEL_MIN_CELLS:  # small batch: numpy, without loading the compiled kernels
        return _order_small(coords, grid, low, spans)
    codes, offsets = cell_order.codes_and_offsets(
        coords, origins, lengths, low, np.asarray(spans, dtype=np.int64), edge_chunk, edge_low, edge_size
    )
    if cell_order.is_ordered(codes, offsets):
        bounds = cell_order.runs_of_codes(codes)
        return None, offsets, _decode_chunks(codes[bounds[:-1]], low, spans), bounds
    if code_count <= max(cell_order.CODES_PER_CELL * n, 4096):
        order, offsets, distinct, bounds = cell_order.counting_order(codes, offsets, code_count)
        return order, offsets, _decode_chunks(distinct, low, spans), bounds
    volume = math.prod(d.length for d in grid.dimensions)
    if code_count * volume < 2**62:
        order = np.argsort(codes * volume + offsets)
    else:
        order = np.lexsort((offsets, codes))
    codes = codes[order]
    bounds = cell_order.runs_of_codes(codes)
    return order, offsets[order], _decode_chunks(codes[bounds[:-1]], low, spans), bounds


def sort_cells(
    coords: np.ndarray, values: dict[str, np.ndarray], nulls: dict[str, np.ndarray], schema: ArraySchema
) -> SortedCells:
    """Bucket cells (all inside the array range) by chunk and sort them by local offset."""
    grid = ChunkGrid.of(schema)
    coords = np.asarray(coords, dtype=np.int64).reshape(-1, schema.ndim)
    n = len(coords)
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return SortedCells(
            chunks=np.zeros((0, schema.ndim), np.int64),
            bounds=np.zeros(1, np.int64),
            offsets=empty,
            unsorted_coords=coords,
            order=empty,
            values={k: np.asarray(v) for k, v in values.items()},
            nulls={k: np.asarray(v, bool) for k, v in nulls.items()},
            volumes=empty,
        )
    order, offsets, chunk_matrix, bounds = _order_by_chunk(coords, grid)
    _, sizes = layout.box_geometry(grid, chunk_matrix)
    if order is None:  # already in order: the columns are used as given
        order = np.arange(n, dtype=np.int64)
        sorted_values = {name: np.asarray(column) for name, column in values.items()}
        sorted_nulls = {name: np.asarray(mask, dtype=bool) for name, mask in nulls.items()}
    else:
        sorted_values = {name: np.take(np.asarray(column), order) for name, column in values.items()}
        sorted_nulls = {name: np.take(np.asarray(mask, dtype=bool), order) for name, mask in nulls.items()}
    return SortedCells(
        chunks=chunk_matrix,
        bounds=bounds,
        offsets=offsets,
        unsorted_coords=coords,
        order=order,
        values=sorted_values,
        nulls=sorted_nulls,
        volumes=np.prod(sizes, axis=1).astype(np.int64),
    )


def _binary_array(data: np.ndarray, row_lengths: np.ndarray) -> pa.Array:
    ends = np.cumsum(row_lengths, dtype=np.int64)
    offsets = np.concatenate(([0], ends)).astype(np.int32)
    return pa.Array.from_buffers(
        pa.binary(), len(row_lengths), [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data))]
    )


def _segment_range(
    values: np.ndarray, nulls: np.ndarray | None, bounds: np.ndarray
) -> tuple[pa.Array, pa.Array, type]:
    """Per-segment min and max ignoring NaN and nulls (null where a segment has no such value)."""
    if codec.is_text(values.dtype):
        return _text_segment_range(values, nulls, bounds)
    starts = bounds[:-1]
    kind = values.dtype.kind
    work = values.view(np.uint8) if kind == "b" else values.view(np.int64) if kind == "M" else values
    excluded = np.zeros(len(values), dtype=bool) if nulls is None else nulls.copy()
    if kind == "M":  # NaT has no place in an order: like NaN, it is no minimum or maximum
        excluded |= np.isnat(values)
    if kind == "f":
        excluded |= np.isnan(values)
    if kind == "f":
        low_src = np.where(excluded, np.inf, work)
        high_src = np.where(excluded, -np.inf, work)
    else:
        info = np.iinfo(work.dtype)
        low_src = np.where(excluded, info.max, work) if excluded.any() else work
        high_src = np.where(excluded, info.min, work) if excluded.any() else work
    minimum = np.minimum.reduceat(low_src, starts)
    maximum = np.maximum.reduceat(high_src, starts)
    empty = np.logical_and.reduceat(excluded, starts)
    if kind == "b":
        minimum, maximum = minimum.astype(bool), maximum.astype(bool)
    return minimum, maximum, empty


def _text_segment_range(
    values: np.ndarray, nulls: np.ndarray | None, bounds: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-segment smallest and largest string by UTF-8 bytes (Spark's order), ignoring nulls."""
    segments = len(bounds) - 1
    segment_of = np.repeat(np.arange(segments, dtype=np.int64), np.diff(bounds))
    table = pa.table({"segment": segment_of, "value": codec.text_array(values).cast(pa.binary())})
    if nulls is not None and nulls.any():
        table = table.filter(pa.array(~nulls))
    found = table.group_by("segment").aggregate([("value", "min"), ("value", "max")])
    where = found.column("segment").to_numpy()
    minimum = np.full(segments, None, dtype=object)
    maximum = np.full(segments, None, dtype=object)
    minimum[where] = found.column("value_min").cast(pa.string()).to_numpy(zero_copy_only=False)
    maximum[where] = found.column("value_max").cast(pa.string()).to_numpy(zero_copy_only=False)
    empty = np.ones(segments, dtype=bool)
    empty[where] = False
    return minimum, maximum, empty


def _sparse_rows(cells: SortedCells, selected: np.ndarray, schema: ArraySchema, version: int) -> pa.Table:
    """Fragment rows for the chunks in ``selected`` (indices), all encoded sparse, in one pass."""
    counts = np.diff(cells.bounds)[selected]
    if len(selected) == len(cells.chunks):  # every chunk: the columns as they are, without a copy
        cell_mask = slice(None)
    else:
        cell_mask = np.repeat(np.isin(np.arange(len(cells.chunks)), selected), np.diff(cells.bounds))
    sub_bounds = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    columns: dict[str, pa.Array] = {}
    for k, dimension in enumerate(schema.dimension_names):
        columns[layout.chunk_column(dimension)] = pa.array(cells.chunks[selected, k], pa.int64())
    columns[layout.N_CELLS] = pa.array(counts, pa.int64())
    columns[layout.DENSE] = pa.array(np.zeros(len(selected), dtype=bool))
    offsets = cells.offsets[cell_mask].astype(codec.OFFSET_DTYPE, copy=False)
    columns[layout.CELLS] = _binary_array(offsets.view(np.uint8), counts * 8)
    nbytes = counts * 8
    for attribute in schema.attributes:
        name = attribute.name
        column = cells.values[name][cell_mask]
        nulls = cells.nulls.get(name)
        nulls = nulls[cell_mask] if nulls is not None else None
        if codec.is_text(column.dtype):  # variable width: one payload per chunk
            text = codec.text_array(column)
            payloads = [
                codec.text_bytes(text.slice(int(sub_bounds[i]), int(counts[i]))) for i in range(len(selected))
            ]
            columns[layout.value_column(name)] = layout.binary_array(payloads)
            nbytes = nbytes + np.array([len(p) for p in payloads], dtype=np.int64)
        else:
            width = column.dtype.itemsize
            columns[layout.value_column(name)] = _binary_array(
                column.astype(column.dtype.newbyteorder("<"), copy=False).view(np.uint8), counts * width
            )
            nbytes = nbytes + counts * width
        if attribute.nullable:
            packed = []
            for i in range(len(selected)):
                segment = nulls[sub_bounds[i] : sub_bounds[i + 1]] if nulls is not None else None
                packed.append(
                    np.packbits(segment, bitorder="little").tobytes()
                    if segment is not None and segment.any()
                    else b""
                )
            columns[layout.null_column(name)] = pa.array(packed, pa.binary())
            nbytes = nbytes + np.array([len(p) for p in packed], dtype=np.int64)
        low, high, empty = _segment_range(column, nulls, sub_bounds)
        columns[layout.min_column(name)] = statistics_array(low, attribute.type, mask=empty)
        columns[layout.max_column(name)] = statistics_array(high, attribute.type, mask=empty)
    columns[layout.NBYTES] = pa.array(nbytes, pa.int64())
    columns[layout.VERSION] = pa.array(np.full(len(selected), version, dtype=np.int64))
    target = layout.fragment_schema(schema)
    return pa.table([columns[f.name] for f in target], schema=target)


def encode_sorted(
    cells: SortedCells, schema: ArraySchema, version: int, target_bytes: int = TARGET_FILE_BYTES
) -> list[pa.Table]:
    """Encode sorted cells into fragment tables of about ``target_bytes`` each (one fragment per chunk)."""
    if cells.n_cells == 0:
        return []
    dtypes = layout.attribute_dtypes(schema)
    width = max((codec.value_width(d) for d in dtypes.values()), default=1)
    counts = np.diff(cells.bounds)
    dense = (counts == cells.volumes) | (cells.volumes * (width + 0.125) <= counts * (width + 8))
    row_bytes = np.where(dense, cells.volumes * max(width, 1), counts * (8 + width)) * max(len(dtypes), 1)
    group_of = np.cumsum(row_bytes) // max(1, target_bytes)
    tables = []
    for group in np.unique(group_of):
        members = np.flatnonzero(group_of == group)
        parts = []
        sparse = members[~dense[members]]
        if len(sparse):
            parts.append(_sparse_rows(cells, sparse, schema, version))
        dense_members = members[dense[members]]
        if len(dense_members):
            encoded = [codec.encode(cells.fragment(i), int(cells.volumes[i]), dtypes) for i in dense_members]
            parts.append(layout.encoded_to_table(encoded, schema, version))
        if len(parts) == 1:  # rows of one kind come in chunk order already
            tables.append(parts[0])
            continue
        sort_keys = [(layout.chunk_column(d), "ascending") for d in schema.dimension_names]
        tables.append(pa.concat_tables(parts).sort_by(sort_keys))
    return tables


def merge_fragments(fragments: list[codec.Fragment]) -> codec.Fragment:
    """One fragment holding the cells of several disjoint fragments of the same chunk, sorted."""
    if len(fragments) == 1:
        return fragments[0]
    offsets = np.concatenate([f.offsets for f in fragments])
    order = np.argsort(offsets, kind="stable")
    names = fragments[0].values.keys()
    values = {name: np.concatenate([f.values[name] for f in fragments])[order] for name in names}
    nulls = {}
    for name in names:
        if any(name in f.nulls for f in fragments):
            mask = np.concatenate([f.nulls.get(name, np.zeros(f.size, dtype=bool)) for f in fragments])[order]
            nulls[name] = mask
    return codec.Fragment(fragments[0].chunk, offsets[order], values, nulls)
