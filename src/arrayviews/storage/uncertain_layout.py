"""Uncertain arrays as a layout of the chunk fragment table: many tuple copies per cell, fences, files.

An uncertain array is one Iceberg table with the ordinary fragment schema (``layout.fragment_schema``)
of a *storage schema*: the array's dimensions (cells and chunking) and one attribute per stored
column. Every present "cell" of a fragment is one **row**: a copy of a tuple or a fence record.
Unlike ordinary arrays, a fragment may list the same cell offset many times (several tuples in one
cell), always sparse-encoded, rows sorted by (offset, id). Row columns:

* ``id`` (int64, stable tuple id), ``role`` (int32: 0 a replica, 1 the tuple's home copy, 2 a fence);
* per dimension ``<d>_mean``, ``<d>_sigma`` (float64) and the possible range ``<d>_first``,
  ``<d>_last`` (int64 cells; for a fence row: the lowest and highest mean cell of the tuples whose
  possible range covers the cell, i.e. the cell's lower and upper fences as absolute cells);
* per correlated pair ``<a>_<b>_corr``; value columns (``v``; ``v``, ``v_sigma``; ``v_low``, ``v_high``).

The fragment min/max metadata of these columns (ids, possible ranges, roles) plans reads without
touching payloads. Files are written sorted by tiles of chunks, one Parquet row group per tile, so a
read of a few chunks skips the other row groups by their statistics. The storage layout of each
version (scheme, step, k) is recorded in its snapshot summary; the uncertain schema in the table
properties.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.schema import ArraySchema, Attribute
from arrayviews.model.types import arrow_type
from arrayviews.model.uncertain import EXACT, GAUSSIAN, UNIFORM, UncertainSchema
from arrayviews.storage import codec, layout
from arrayviews.storage.assemble import local_offsets
from arrayviews.storage.files import filesystem

ROLE_REPLICA, ROLE_HOME, ROLE_FENCE = 0, 1, 2
ID, ROLE = "id", "role"
KIND = "uncertain"
SCHEMA_PROPERTY = "arrayviews.uncertain-schema"
LAYOUT_PROPERTY = "arrayviews.uncertain-layout"  # the layout the array was created with (version 0)
#: Keys of the layout in every snapshot summary (stored with the ``arrayviews.`` prefix).
SCHEME_KEY, STEPS_KEY, SIGMAS_KEY, COPIES_KEY = (
    "uncertain.scheme",
    "uncertain.steps",
    "uncertain.sigmas",
    "uncertain.copies-total",
)
#: Fragment files are split at about this many bytes of payload.
TARGET_FILE_BYTES = 64 * 1024 * 1024
#: Chunks per row-group tile (approximately, over all dimensions).
TILE_CHUNKS = 4


def mean_column(dimension: str) -> str:
    return f"{dimension}_mean"


def sigma_column(dimension: str) -> str:
    return f"{dimension}_sigma"


def first_column(dimension: str) -> str:
    return f"{dimension}_first"


def last_column(dimension: str) -> str:
    return f"{dimension}_last"


def value_columns(schema: UncertainSchema) -> list[tuple[str, str]]:
    """(storage column, attribute type) of every value attribute's columns."""
    columns = []
    for a in schema.attributes:
        if a.kind == EXACT:
            columns.append((a.name, a.type))
        elif a.kind == GAUSSIAN:
            columns += [(a.name, "float64"), (f"{a.name}_sigma", "float64")]
        elif a.kind == UNIFORM:
            columns += [(f"{a.name}_low", "float64"), (f"{a.name}_high", "float64")]
    return columns


def position_columns(schema: UncertainSchema) -> list[str]:
    """The columns the I/O and CPU steps need (everything but the value attributes)."""
    columns = [ID, ROLE]
    for d in schema.dimension_names:
        columns += [mean_column(d), sigma_column(d), first_column(d), last_column(d)]
    columns += [schema.correlation_column(p) for p in schema.correlations]
    return columns


def storage_schema(schema: UncertainSchema) -> ArraySchema:
    """The fragment-table schema storing an uncertain array."""
    attributes = [Attribute(ID, "int64"), Attribute(ROLE, "int32")]
    for d in schema.dimension_names:
        attributes += [Attribute(mean_column(d), "float64"), Attribute(sigma_column(d), "float64")]
        attributes += [Attribute(first_column(d), "int64"), Attribute(last_column(d), "int64")]
    attributes += [Attribute(schema.correlation_column(p), "float64") for p in schema.correlations]
    nullable = {a.name for a in schema.attributes if a.nullable}
    attributes += [Attribute(name, kind, name in nullable) for name, kind in value_columns(schema)]
    return ArraySchema(schema.name, tuple(attributes), schema.dimensions)


@dataclass
class Rows:
    """Rows of an uncertain array in numpy form: cell coordinates (m, d) and one array per column."""

    cells: np.ndarray
    columns: dict[str, np.ndarray]
    nulls: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.cells)

    def take(self, index: np.ndarray) -> Rows:
        return Rows(
            self.cells[index],
            {k: v[index] for k, v in self.columns.items()},
            {k: v[index] for k, v in self.nulls.items()},
        )

    @staticmethod
    def concat(parts: list[Rows], ndim: int) -> Rows:
        parts = [p for p in parts if len(p)]
        if not parts:
            return Rows(np.zeros((0, ndim), np.int64), {})
        if len(parts) == 1:
            return parts[0]
        names = parts[0].columns.keys()
        nulls = {}
        for name in {n for p in parts for n in p.nulls}:
            nulls[name] = np.concatenate([p.nulls.get(name, np.zeros(len(p), bool)) for p in parts])
        return Rows(
            np.concatenate([p.cells for p in parts]),
            {n: np.concatenate([p.columns[n] for p in parts]) for n in names},
            nulls,
        )


# -- encoding ------------------------------------------------------------------------------------
def tile_side(ndim: int) -> int:
    """Chunks per row-group tile along each dimension."""
    return max(1, round(TILE_CHUNKS ** (1.0 / ndim)))


def _codes(columns: list[np.ndarray]) -> np.ndarray:
    """A row-major int64 code of integer columns (over their ranges in this batch)."""
    code = np.zeros(len(columns[0]), dtype=np.int64)
    for column in columns:
        low = int(column.min()) if len(column) else 0
        span = (int(column.max()) - low + 1) if len(column) else 1
        code = code * span + (column - low)
    return code


def encode_rows(rows: Rows, schema: ArraySchema, version: int) -> list[pa.Table]:
    """Fragment tables (about TARGET_FILE_BYTES each) holding ``rows``: one sparse fragment per chunk,
    rows sorted by (cell offset, id), fragments sorted by (tile, chunk)."""
    n = len(rows)
    if n == 0:
        return []
    grid = ChunkGrid.of(schema)
    chunks = grid.chunk_of(rows.cells)
    starts, sizes = layout.box_geometry(grid, chunks)
    offsets = local_offsets(rows.cells, starts, sizes)
    side = tile_side(schema.ndim)
    tiles = [np.floor_divide(chunks[:, k] - g.first_chunk, side) for k, g in enumerate(grid.dimensions)]
    chunk_code = _codes([chunks[:, k] for k in range(schema.ndim)])
    tile_code = _codes(tiles)
    order = np.lexsort((rows.columns[ID], offsets, chunk_code, tile_code))
    chunk_code, offsets, tile_code = chunk_code[order], offsets[order], tile_code[order]
    cells_sorted = chunks[order]
    boundary = np.flatnonzero(np.concatenate(([True], chunk_code[1:] != chunk_code[:-1])))
    bounds = np.append(boundary, n).astype(np.int64)
    counts = np.diff(bounds)
    dtypes = layout.attribute_dtypes(schema)
    widths = sum(np.dtype(t).itemsize for t in dtypes.values()) + 8
    group_of = np.cumsum(counts * widths) // TARGET_FILE_BYTES
    tables = []
    for group in np.unique(group_of):
        members = np.flatnonzero(group_of == group)
        lo, hi = int(bounds[members[0]]), int(bounds[members[-1] + 1])
        columns: dict[str, pa.Array] = {}
        sub_bounds = bounds[members[0] : members[-1] + 2] - lo
        sub_counts = np.diff(sub_bounds)
        first_rows = bounds[members]
        for k, dimension in enumerate(schema.dimension_names):
            columns[layout.chunk_column(dimension)] = pa.array(cells_sorted[first_rows, k], pa.int64())
        columns[layout.N_CELLS] = pa.array(sub_counts, pa.int64())
        columns[layout.DENSE] = pa.array(np.zeros(len(members), dtype=bool))
        columns[layout.CELLS] = _binary(offsets[lo:hi].astype(codec.OFFSET_DTYPE), sub_counts)
        nbytes = sub_counts * 8
        picked = order[lo:hi]
        for attribute in schema.attributes:
            name = attribute.name
            values = np.asarray(rows.columns[name])[picked].astype(dtypes[name], copy=False)
            mask = rows.nulls.get(name)
            mask = None if mask is None else np.asarray(mask, bool)[picked]
            if codec.is_text(values.dtype):  # variable width: one payload per fragment, as arrays do
                text = codec.text_array(values)
                payloads = [codec.text_bytes(text.slice(int(a), int(b - a))) for a, b in segments(sub_bounds)]
                columns[layout.value_column(name)] = layout.binary_array(payloads)
                nbytes = nbytes + np.array([len(p) for p in payloads], dtype=np.int64)
            else:
                columns[layout.value_column(name)] = _binary(values, sub_counts)
                nbytes = nbytes + sub_counts * values.dtype.itemsize
            if attribute.nullable:
                packed = [
                    np.packbits(mask[a:b], bitorder="little").tobytes()
                    if mask is not None and mask[a:b].any()
                    else b""
                    for a, b in segments(sub_bounds)
                ]
                columns[layout.null_column(name)] = pa.array(packed, pa.binary())
                nbytes = nbytes + np.array([len(p) for p in packed], dtype=np.int64)
            low, high, empty = _segment_range(values, mask, sub_bounds)
            kind = arrow_type(attribute.type)
            columns[layout.min_column(name)] = pa.array(low, kind, mask=empty)
            columns[layout.max_column(name)] = pa.array(high, kind, mask=empty)
        columns[layout.NBYTES] = pa.array(nbytes, pa.int64())
        columns[layout.VERSION] = pa.array(np.full(len(members), version, dtype=np.int64))
        target = layout.fragment_schema(schema)
        table = pa.table([columns[f.name] for f in target], schema=target)
        tables.append(table.replace_schema_metadata({b"tiles": _tile_bounds(tile_code[boundary[members]])}))
    return tables


def _tile_bounds(tile_codes: np.ndarray) -> bytes:
    """Row indices where a new tile starts (row groups are cut there when the file is written)."""
    starts = np.flatnonzero(np.concatenate(([True], tile_codes[1:] != tile_codes[:-1])))
    return ",".join(str(int(s)) for s in starts).encode()


def _binary(values: np.ndarray, counts: np.ndarray) -> pa.Array:
    data = np.ascontiguousarray(values.astype(values.dtype.newbyteorder("<"), copy=False)).view(np.uint8)
    width = values.dtype.itemsize
    offsets = np.concatenate(([0], np.cumsum(counts * width))).astype(np.int64)
    if offsets[-1] >= 2**31:
        raise ValueError("uncertain fragment batch exceeds 2 GiB; insert smaller batches")
    return pa.Array.from_buffers(
        pa.binary(), len(counts), [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)]
    )


def segments(bounds: np.ndarray):
    """(start, end) of every fragment's rows."""
    return zip(bounds[:-1], bounds[1:], strict=True)


def _segment_range(values: np.ndarray, nulls: np.ndarray | None, bounds: np.ndarray):
    """Per-fragment min and max (ignoring NaN, NaT and nulls) and which fragments have no such value."""
    if codec.is_text(values.dtype):  # by UTF-8 bytes, as arrays keep them
        ranges = [
            codec.text_range(values[a:b] if nulls is None else values[a:b][~nulls[a:b]])
            for a, b in segments(bounds)
        ]
        empty = np.array([low is None for low, _ in ranges], dtype=bool)
        return [r[0] or "" for r in ranges], [r[1] or "" for r in ranges], empty
    starts = bounds[:-1]
    kind = values.dtype.kind
    work = values.view(np.uint8) if kind == "b" else values.view(np.int64) if kind in "mM" else values
    excluded = np.zeros(len(values), dtype=bool) if nulls is None else nulls.copy()
    if kind in "mM":
        excluded |= np.isnat(values)
    if kind == "f":
        excluded |= np.isnan(values)
        low_src, high_src = np.where(excluded, np.inf, work), np.where(excluded, -np.inf, work)
    else:
        info = np.iinfo(work.dtype)
        low_src, high_src = np.where(excluded, info.max, work), np.where(excluded, info.min, work)
    minimum = np.minimum.reduceat(low_src, starts)
    maximum = np.maximum.reduceat(high_src, starts)
    empty = np.logical_and.reduceat(excluded, starts)
    if kind == "b":
        minimum, maximum = minimum.astype(bool), maximum.astype(bool)
    elif kind in "mM":  # compared as int64, returned as the column's time unit
        minimum, maximum = minimum.view(values.dtype), maximum.view(values.dtype)
    return minimum, maximum, empty


def write_rows_file(table: pa.Table, uri: str) -> int:
    """Write one fragment table as a Parquet file, one row group per tile; returns its size in bytes."""
    fs, path = filesystem(uri)
    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    metadata = table.schema.metadata or {}
    starts = [int(s) for s in metadata.get(b"tiles", b"0").decode().split(",") if s]
    table = table.replace_schema_metadata(None)
    small = [f.name for f in table.schema if not pa.types.is_binary(f.type)]
    bounds = [*starts, table.num_rows]
    with pq.ParquetWriter(
        path, table.schema, filesystem=fs, compression="snappy", use_dictionary=small, write_statistics=small
    ) as writer:
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            if b > a:
                writer.write_table(table.slice(a, b - a), row_group_size=b - a)
    return fs.get_file_info(path).size


# -- decoding ------------------------------------------------------------------------------------
class FragmentFiles:
    """The fragment files of one version with the chunk and role ranges of every row group (from
    the Parquet footers, parsed once): reads pick their row groups with numpy and read only those."""

    def __init__(self, uris: list[str], schema: ArraySchema) -> None:
        self.schema = schema
        self.parts: list[tuple] = []
        self.row_groups_read = 0  # a running count, for statistics
        keys = layout.chunk_columns(schema)
        for uri in uris:
            fs, path = filesystem(uri)
            metadata = pq.read_metadata(path, filesystem=fs)
            names = metadata.schema.to_arrow_schema().names
            positions = [names.index(k) for k in keys]
            role_low = names.index(layout.min_column(ROLE))
            role_high = names.index(layout.max_column(ROLE))
            groups = metadata.num_row_groups
            low = np.empty((groups, len(keys)), np.int64)
            high = np.empty((groups, len(keys)), np.int64)
            roles_low = np.empty(groups, np.int64)
            roles_high = np.empty(groups, np.int64)
            for g in range(groups):
                group = metadata.row_group(g)
                for k, position in enumerate(positions):
                    stats = group.column(position).statistics
                    low[g, k], high[g, k] = stats.min, stats.max
                roles_low[g] = group.column(role_low).statistics.min
                roles_high[g] = group.column(role_high).statistics.max
            self.parts.append((path, fs, metadata, low, high, roles_low, roles_high))

    def row_groups(self, chunk_ranges=None, roles: str | None = None):
        """Per file, the row groups that may hold fragments in ``chunk_ranges`` with the wanted roles."""
        for path, fs, metadata, low, high, roles_low, roles_high in self.parts:
            keep = np.ones(len(low), dtype=bool)
            if chunk_ranges is not None:
                for k, (first, last) in enumerate(chunk_ranges):
                    keep &= (high[:, k] >= first) & (low[:, k] <= last)
            if roles == "tuples":
                keep &= roles_low <= ROLE_HOME
            elif roles == "fences":
                keep &= roles_high == ROLE_FENCE
            if keep.any():
                yield path, fs, metadata, np.flatnonzero(keep)


def read_fragments(
    files: list[str] | FragmentFiles,
    schema: ArraySchema,
    columns: list[str] | None,
    chunk_ranges=None,
    chunk_filter=None,
    roles: str | None = None,
) -> pa.Table:
    """Fragment rows within per-dimension chunk ranges (only the row groups that may hold them are
    read), optionally only where ``chunk_filter(chunks (n, d)) -> mask`` holds; ``roles`` is
    "tuples" (copies only) or "fences" (fence records only). ``columns`` are storage columns (None:
    all)."""
    names = None
    if columns is not None:
        names = layout.chunk_columns(schema) + [layout.N_CELLS, layout.DENSE, layout.CELLS]
        names += [layout.min_column(ROLE), layout.max_column(ROLE)]
        for name in columns:
            schema.attribute(name)
            names.append(layout.value_column(name))
            if schema.attribute(name).nullable:
                names.append(layout.null_column(name))
    target = layout.fragment_schema(schema)
    if not isinstance(files, FragmentFiles):
        files = FragmentFiles(files, schema)
    parts = []
    for path, fs, metadata, groups in files.row_groups(chunk_ranges, roles):
        handle = pq.ParquetFile(path, filesystem=fs, metadata=metadata)
        parts.append(handle.read_row_groups(groups.tolist(), columns=names))
        files.row_groups_read += len(groups)
    if not parts:
        table = target.empty_table()
        return table.select(names) if names else table
    table = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
    if table.num_rows == 0:
        return table
    keep = np.ones(table.num_rows, dtype=bool)
    chunks = np.stack([np.asarray(table.column(c), np.int64) for c in layout.chunk_columns(schema)], axis=1)
    if chunk_ranges is not None:
        for k, (first, last) in enumerate(chunk_ranges):
            keep &= (chunks[:, k] >= first) & (chunks[:, k] <= last)
    if chunk_filter is not None:
        keep &= chunk_filter(chunks)
    if roles == "tuples":
        keep &= np.asarray(table.column(layout.max_column(ROLE))) <= ROLE_HOME
    elif roles == "fences":
        keep &= np.asarray(table.column(layout.min_column(ROLE))) == ROLE_FENCE
    return table if keep.all() else table.filter(pa.array(keep))


def open_dataset(uris: list[str], schema: ArraySchema) -> FragmentFiles:
    """The fragment files of a version, ready for repeated reads (see :class:`FragmentFiles`)."""
    return FragmentFiles(uris, schema)


def home_fragments(fragments: pa.Table) -> pa.Table:
    """The fragments (or fragment metadata rows) that may hold home copies of tuples: those whose
    highest role is at most ROLE_HOME (fragments of fence copies only are left out)."""
    if fragments.num_rows == 0:
        return fragments
    roles = np.asarray(fragments.column(layout.max_column(ROLE)))
    return fragments.filter(pa.array(roles <= ROLE_HOME))


def decode_rows(fragments: pa.Table, schema: ArraySchema, columns: list[str] | None = None) -> Rows:
    """Rows (cells and the wanted storage columns) of fragment rows read by :func:`read_fragments`."""
    names = [a.name for a in schema.attributes] if columns is None else list(columns)
    narrowed = schema.with_attributes([schema.attribute(n) for n in names])
    if fragments.num_rows == 0:
        return Rows(
            np.zeros((0, schema.ndim), np.int64),
            {n: np.zeros(0, layout.attribute_dtypes(narrowed)[n]) for n in names},
        )
    cells = layout.fragments_to_cells(fragments, narrowed)
    coords = np.stack([np.asarray(cells.column(d), np.int64) for d in schema.dimension_names], axis=1)
    values, nulls = {}, {}
    for name in names:
        column = cells.column(name)
        if column.null_count:
            nulls[name] = np.asarray(column.is_null())
            column = pc.fill_null(column, layout.null_filler(column.type))
        values[name] = column.to_numpy(zero_copy_only=False)
    return Rows(coords, values, nulls)


def chunk_set_filter(chunk_codes: np.ndarray, grid: ChunkGrid, origin: np.ndarray, spans: np.ndarray):
    """A ``chunk_filter`` keeping chunks whose row-major codes (relative to ``origin`` over ``spans``)
    are in the sorted array ``chunk_codes``."""

    def keep(chunks: np.ndarray) -> np.ndarray:
        relative = chunks - origin
        inside = np.all((relative >= 0) & (relative < spans), axis=1)
        codes = np.zeros(len(chunks), dtype=np.int64)
        for k in range(chunks.shape[1]):
            codes = codes * spans[k] + np.clip(relative[:, k], 0, spans[k] - 1)
        position = np.searchsorted(chunk_codes, codes)
        found = position < len(chunk_codes)
        found[found] = chunk_codes[position[found]] == codes[found]
        return inside & found

    return keep
