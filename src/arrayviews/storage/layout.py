"""The fragment table layout: column names, Arrow schemas, and batch-wise decoding of fragments to cells."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.schema import ArraySchema
from arrayviews.model.types import arrow_type, numpy_dtype, statistics_array, statistics_type
from arrayviews.storage import codec

_NO_BYTES = np.zeros(0, dtype=np.uint8)

N_CELLS = "n_cells"
DENSE = "dense"
CELLS = "cells"
NBYTES = "nbytes"
VERSION = "version"


def chunk_column(dimension: str) -> str:
    return f"c__{dimension}"


def value_column(attribute: str) -> str:
    return f"v__{attribute}"


def null_column(attribute: str) -> str:
    return f"z__{attribute}"


def min_column(attribute: str) -> str:
    return f"min__{attribute}"


def max_column(attribute: str) -> str:
    return f"max__{attribute}"


def chunk_columns(schema: ArraySchema) -> list[str]:
    return [chunk_column(d) for d in schema.dimension_names]


def chunk_ranges_filter(schema: ArraySchema, ranges) -> ds.Expression | None:
    """A pyarrow filter keeping fragments whose chunk numbers lie in per-dimension (first, last) ranges."""
    if ranges is None:
        return None
    expression = None
    for dimension, (first, last) in zip(schema.dimension_names, ranges, strict=True):
        field = ds.field(chunk_column(dimension))
        term = (field >= first) & (field <= last)
        expression = term if expression is None else expression & term
    return expression


def fragment_schema(schema: ArraySchema) -> pa.Schema:
    """Arrow schema of the fragment table of arrays with ``schema`` (one row per fragment)."""
    fields = [pa.field(chunk_column(d.name), pa.int64(), nullable=False) for d in schema.dimensions]
    fields += [
        pa.field(N_CELLS, pa.int64(), nullable=False),
        pa.field(DENSE, pa.bool_(), nullable=False),
        pa.field(CELLS, pa.binary(), nullable=False),
        pa.field(NBYTES, pa.int64(), nullable=False),
        pa.field(VERSION, pa.int64(), nullable=False),
    ]
    for attribute in schema.attributes:
        fields.append(pa.field(value_column(attribute.name), pa.binary(), nullable=False))
        if attribute.nullable:
            fields.append(pa.field(null_column(attribute.name), pa.binary(), nullable=True))
        fields.append(pa.field(min_column(attribute.name), statistics_type(attribute.type), nullable=True))
        fields.append(pa.field(max_column(attribute.name), statistics_type(attribute.type), nullable=True))
    return pa.schema(fields)


def metadata_columns(schema: ArraySchema) -> list[str]:
    """Columns of the fragment table that describe fragments without holding cell data."""
    columns = chunk_columns(schema) + [N_CELLS, DENSE, NBYTES, VERSION]
    for attribute in schema.attributes:
        columns += [min_column(attribute.name), max_column(attribute.name)]
    return columns


def cell_schema(schema: ArraySchema) -> pa.Schema:
    """Arrow schema of the cell form: one int64 column per dimension, one column per attribute."""
    fields = [pa.field(d, pa.int64(), nullable=False) for d in schema.dimension_names]
    fields += [pa.field(a.name, arrow_type(a.type), nullable=a.nullable) for a in schema.attributes]
    return pa.schema(fields)


def null_filler(data_type: pa.DataType) -> object:
    """The value that stands in for a null of ``data_type`` under a null mask (False, "", or 0)."""
    if pa.types.is_boolean(data_type):
        return False
    if pa.types.is_string(data_type) or pa.types.is_large_string(data_type):
        return ""
    return 0


def arrow_type_of(attribute) -> pa.DataType:
    """The Arrow type of an attribute's values."""
    return arrow_type(attribute.type)


def attribute_dtypes(schema: ArraySchema) -> dict[str, np.dtype]:
    return {a.name: numpy_dtype(a.type) for a in schema.attributes}


# -- encoding ------------------------------------------------------------------------------------
def binary_array(parts: list[np.ndarray]) -> pa.Array:
    """An Arrow binary array whose values are the given uint8 arrays (one copy into one buffer)."""
    lengths = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] >= 2**31:
        raise ValueError("fragment batch exceeds 2 GiB; split it into smaller tables")
    data = np.concatenate(parts) if parts else np.zeros(0, np.uint8)
    return pa.Array.from_buffers(
        pa.binary(), len(parts), [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)]
    )


def encoded_to_table(encoded: list[codec.EncodedFragment], schema: ArraySchema, version: int) -> pa.Table:
    """The fragment table rows for encoded fragments, stamped with ``version``."""
    columns: dict[str, pa.Array] = {}
    for k, dimension in enumerate(schema.dimension_names):
        columns[chunk_column(dimension)] = pa.array([e.chunk[k] for e in encoded], pa.int64())
    columns[N_CELLS] = pa.array([e.n_cells for e in encoded], pa.int64())
    columns[DENSE] = pa.array([e.dense for e in encoded], pa.bool_())
    columns[CELLS] = binary_array([e.cells for e in encoded])
    columns[NBYTES] = pa.array([e.nbytes for e in encoded], pa.int64())
    columns[VERSION] = pa.array([version] * len(encoded), pa.int64())
    for attribute in schema.attributes:
        name = attribute.name
        columns[value_column(name)] = binary_array([e.values[name] for e in encoded])
        if attribute.nullable:
            columns[null_column(name)] = binary_array([e.nulls.get(name, _NO_BYTES) for e in encoded])
        columns[min_column(name)] = statistics_array([e.minimum[name] for e in encoded], attribute.type)
        columns[max_column(name)] = statistics_array([e.maximum[name] for e in encoded], attribute.type)
    target = fragment_schema(schema)
    return pa.table([columns[f.name] for f in target], schema=target)


def encode_fragments(fragments: list[codec.Fragment], schema: ArraySchema, version: int) -> pa.Table:
    """Encode decoded fragments into fragment table rows."""
    grid = ChunkGrid.of(schema)
    dtypes = attribute_dtypes(schema)
    encoded = [codec.encode(f, int(np.prod(grid.chunk_shape(f.chunk))), dtypes) for f in fragments]
    return encoded_to_table(encoded, schema, version)


def empty_fragment_table(schema: ArraySchema) -> pa.Table:
    return fragment_schema(schema).empty_table()


# -- decoding ------------------------------------------------------------------------------------
def binary_parts(column: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Data bytes and per-row (start, end) offsets of a binary column (no copy)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    buffers = column.buffers()
    offset_dtype = np.int64 if pa.types.is_large_binary(column.type) else np.int32
    offsets = np.frombuffer(buffers[1], dtype=offset_dtype)[column.offset : column.offset + len(column) + 1]
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    return data, offsets.astype(np.int64)


def _chunk_matrix(batch: pa.RecordBatch | pa.Table, schema: ArraySchema) -> np.ndarray:
    return np.stack(
        [np.asarray(batch.column(chunk_column(d)), dtype=np.int64) for d in schema.dimension_names], axis=1
    ).reshape(batch.num_rows, schema.ndim)


def box_geometry(grid: ChunkGrid, chunks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Clipped box starts and sizes (rows x dims) of many chunks at once."""
    starts = np.stack([g.chunk_starts(chunks[:, k]) for k, g in enumerate(grid.dimensions)], axis=1)
    sizes = np.stack([g.chunk_sizes(chunks[:, k]) for k, g in enumerate(grid.dimensions)], axis=1)
    return starts.reshape(len(chunks), grid.ndim), sizes.reshape(len(chunks), grid.ndim)


def offsets_to_cells(offsets: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Cell coordinates (n, d) of local offsets given each cell's box start and size (n, d)."""
    ndim = sizes.shape[1]
    coords = np.empty((len(offsets), ndim), dtype=np.int64, order="F")  # contiguous columns
    remainder = offsets.astype(np.int64, copy=True)
    for k in range(ndim - 1, -1, -1):
        coords[:, k] = remainder % sizes[:, k] + starts[:, k]
        remainder //= sizes[:, k]
    return coords


def iter_fragments(batch: pa.RecordBatch | pa.Table, schema: ArraySchema) -> Iterator[codec.Fragment]:
    """Decode every row of a fragment batch into a :class:`codec.Fragment`."""
    grid = ChunkGrid.of(schema)
    chunks = _chunk_matrix(batch, schema)
    _, sizes = box_geometry(grid, chunks)
    volumes = np.prod(sizes, axis=1)
    n_cells = np.asarray(batch.column(N_CELLS), dtype=np.int64)
    dense = np.asarray(batch.column(DENSE), dtype=bool)
    cells_data, cells_off = binary_parts(batch.column(CELLS))
    value_parts = {a.name: binary_parts(batch.column(value_column(a.name))) for a in schema.attributes}
    null_parts = {
        a.name: binary_parts(batch.column(null_column(a.name)))
        for a in schema.attributes
        if a.nullable and null_column(a.name) in batch.schema.names
    }
    dtypes = attribute_dtypes(schema)
    for row in range(batch.num_rows):
        volume = int(volumes[row])
        cells = cells_data[cells_off[row] : cells_off[row + 1]]
        offsets = codec.decode_offsets(bool(dense[row]), int(n_cells[row]), cells, volume)
        values, nulls = {}, {}
        for name, (data, off) in value_parts.items():
            payload = data[off[row] : off[row + 1]]
            values[name] = codec.decode_values(
                bool(dense[row]), int(n_cells[row]), volume, payload, dtypes[name], offsets
            )
        for name, (data, off) in null_parts.items():
            mask = codec.decode_nulls(
                bool(dense[row]), int(n_cells[row]), volume, data[off[row] : off[row + 1]], offsets
            )
            if mask is not None:
                nulls[name] = mask
        yield codec.Fragment(tuple(int(c) for c in chunks[row]), offsets, values, nulls)


def fragments_to_cells(batch: pa.RecordBatch | pa.Table, schema: ArraySchema) -> pa.Table:
    """Decode a fragment batch into the cell form (one row per present cell).

    Sparse fragments are decoded vectorised, group of record batches by group (see
    DECODE_GROUP_CELLS), from the Arrow buffers where they lie; only dense fragments (which are
    large) are handled one by one.
    """
    target = cell_schema(schema)
    if batch.num_rows == 0:
        return target.empty_table()
    dense = np.asarray(batch.column(DENSE), dtype=bool)
    parts: list[pa.Table] = []
    if (~dense).any():
        sparse_rows = batch.filter(pa.array(~dense)) if dense.any() else batch
        parts.append(_sparse_to_cells(sparse_rows, schema, target))
    if dense.any():
        dense_rows = batch.filter(pa.array(dense)) if (~dense).any() else batch
        grid = ChunkGrid.of(schema)
        for fragment in iter_fragments(dense_rows, schema):
            parts.append(fragment_cells(fragment, grid, schema, target))
    return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


def fragment_cells(
    fragment: codec.Fragment, grid: ChunkGrid, schema: ArraySchema, target: pa.Schema | None = None
) -> pa.Table:
    """The cell form of one decoded fragment."""
    target = target or cell_schema(schema)
    chunk = np.asarray(fragment.chunk, dtype=np.int64)[None, :]
    starts, sizes = box_geometry(grid, chunk)
    n = fragment.size
    coords = offsets_to_cells(
        fragment.offsets, np.broadcast_to(starts, (n, grid.ndim)), np.broadcast_to(sizes, (n, grid.ndim))
    )
    return _cells_table(coords, fragment.values, fragment.nulls, schema, target)


def _unravel_by_box(
    offsets: np.ndarray, starts: np.ndarray, sizes: np.ndarray, counts: np.ndarray
) -> np.ndarray:
    """Coordinates of the offsets of consecutive fragments (``counts`` cells each, in boxes of
    ``starts`` and ``sizes``, rows x dims), in row-major order within each box.

    A dimension whose boxes all have one size (every dimension but those clipped at the array edge)
    divides by a scalar, which numpy does several times faster than by an array; the others divide by
    each cell's box size.
    """
    ndim = sizes.shape[1]
    coords = arrow_pool_empty((ndim, len(offsets)), np.int64)  # one contiguous row per dimension
    if len(offsets) == 0:
        return coords.T
    # The quotients alternate between a scratch row and coords[0] so that the last one, which is the
    # first coordinate, lands in coords[0] without a copy.
    rows = [coords[0], arrow_pool_empty((len(offsets),), np.int64) if ndim > 2 else None]
    remaining = offsets
    for k in range(ndim - 1, 0, -1):
        size = int(sizes[0, k]) if (sizes[:, k] == sizes[0, k]).all() else np.repeat(sizes[:, k], counts)
        quotient = rows[(k - 1) % 2]
        np.floor_divide(remaining, size, out=quotient)
        np.multiply(quotient, size, out=coords[k])
        np.subtract(remaining, coords[k], out=coords[k])
        remaining = quotient
    if ndim == 1:
        coords[0] = offsets
    for k in range(ndim):
        start = starts[0, k] if (starts[:, k] == starts[0, k]).all() else np.repeat(starts[:, k], counts)
        coords[k] += start
    return coords.T


def arrow_pool_empty(shape: tuple[int, ...], dtype) -> np.ndarray:
    """An uninitialized C-order numpy array in memory from Arrow's pool.

    Arrow's allocator keeps freed memory for reuse, while large numpy allocations come fresh from the
    operating system each time, and first-touch page faults then cost more than the decoding itself.
    """
    dtype = np.dtype(dtype)
    count = int(np.prod(shape))
    buffer = pa.allocate_buffer(max(1, count * dtype.itemsize))
    return np.frombuffer(buffer, dtype=dtype, count=count).reshape(shape)


#: Sparse fragments are decoded in groups of Arrow record batches holding at least this many cells:
#: a large batch (a row group of a big file) is decoded where it lies, without first copying every
#: batch into one buffer; small ones (many small files) are joined so that each group pays the fixed
#: cost of a decode once.
DECODE_GROUP_CELLS = 1 << 16


def _sparse_to_cells(batch: pa.RecordBatch | pa.Table, schema: ArraySchema, target: pa.Schema) -> pa.Table:
    if isinstance(batch, pa.RecordBatch) or batch.column(CELLS).num_chunks <= 1:
        return _sparse_group_to_cells(batch, schema, target)
    groups: list[list[pa.RecordBatch]] = [[]]
    cells = 0
    for record_batch in batch.to_batches():
        if cells >= DECODE_GROUP_CELLS:
            groups.append([])
            cells = 0
        groups[-1].append(record_batch)
        cells += int(pc.sum(record_batch.column(N_CELLS)).as_py() or 0)
    parts = [
        _sparse_group_to_cells(
            group[0] if len(group) == 1 else pa.Table.from_batches(group, batch.schema), schema, target
        )
        for group in groups
    ]
    return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


def _sparse_group_to_cells(
    batch: pa.RecordBatch | pa.Table, schema: ArraySchema, target: pa.Schema
) -> pa.Table:
    grid = ChunkGrid.of(schema)
    chunks = _chunk_matrix(batch, schema)
    starts, sizes = box_geometry(grid, chunks)
    n_cells = np.asarray(batch.column(N_CELLS), dtype=np.int64)
    total = int(n_cells.sum())
    data, off = binary_parts(batch.column(CELLS))
    offsets = np.frombuffer(data, dtype=codec.OFFSET_DTYPE, count=total, offset=int(off[0]))
    coords = _unravel_by_box(offsets, starts, sizes, n_cells)
    values, nulls = {}, {}
    for attribute in schema.attributes:
        dtype = numpy_dtype(attribute.type).newbyteorder("<")
        data, off = binary_parts(batch.column(value_column(attribute.name)))
        if codec.is_text(dtype):  # variable width: one Arrow array per fragment, joined
            pieces = [
                codec.text_arrow(data[off[row] : off[row + 1]], int(count))
                for row, count in enumerate(n_cells)
            ]
            values[attribute.name] = pa.concat_arrays(pieces) if pieces else pa.array([], pa.string())
        else:
            values[attribute.name] = np.frombuffer(data, dtype=dtype, count=total, offset=int(off[0]))
        if attribute.nullable and null_column(attribute.name) in batch.schema.names:
            masks = []
            for fragment_nulls, count in _iter_null_masks(batch.column(null_column(attribute.name)), n_cells):
                masks.append(fragment_nulls if fragment_nulls is not None else np.zeros(count, dtype=bool))
            mask = np.concatenate(masks) if masks else np.zeros(0, dtype=bool)
            if mask.any():
                nulls[attribute.name] = mask
    return _cells_table(coords, values, nulls, schema, target)


def _iter_null_masks(column: pa.Array, n_cells: np.ndarray) -> Iterator[tuple[np.ndarray | None, int]]:
    data, off = binary_parts(column)
    for row, count in enumerate(n_cells):
        packed = data[off[row] : off[row + 1]]
        mask = None
        if len(packed):
            mask = np.unpackbits(packed, count=int(count), bitorder="little").view(bool)
        yield mask, int(count)


def _cells_table(
    coords: np.ndarray, values: dict, nulls: dict, schema: ArraySchema, target: pa.Schema
) -> pa.Table:
    arrays = [pa.array(coords[:, k], pa.int64()) for k in range(schema.ndim)]
    for attribute in schema.attributes:
        column = values[attribute.name]
        mask = nulls.get(attribute.name)
        if isinstance(column, pa.Array):  # strings, decoded straight to Arrow
            if mask is not None:
                column = pc.if_else(pa.array(mask), pa.scalar(None, column.type), column)
            arrays.append(column)
            continue
        arrays.append(pa.array(column, arrow_type(attribute.type), mask=mask))
    return pa.Table.from_arrays(arrays, schema=target)
