"""Reading an array out: dense numpy blocks, cell tables (Arrow, pandas, Spark), xarray, chunk statistics."""

from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from arrayviews.execution.engine import Data, Engine
from arrayviews.model.errors import ValidationError
from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.schema import ArraySchema, Attribute, Dimension
from arrayviews.model.time_scale import TimeScale
from arrayviews.model.types import numpy_dtype
from arrayviews.operators.source import Source, StoredBox, stored_box
from arrayviews.storage import chunk_read, codec, layout
from arrayviews.storage.chunk_cache import ChunkCache, process_cache

#: to_numpy refuses to build arrays with more cells than this (take a subarray first).
MAX_DENSE_CELLS = 2**32


def default_fill(type_name: str) -> object:
    kind = numpy_dtype(type_name).kind
    if kind == "M":
        return np.datetime64("NaT", "ns")
    if kind == "O":  # strings: None where empty
        return None
    return np.nan if kind == "f" else (False if kind == "b" else 0)


def _attribute_columns(schema: ArraySchema, names: list[str]) -> list[str]:
    columns = [*layout.chunk_columns(schema), layout.N_CELLS, layout.DENSE, layout.CELLS]
    for name in names:
        columns.append(layout.value_column(name))
        if schema.attribute(name).nullable:
            columns.append(layout.null_column(name))
    return columns


def _check_fill(array: str, spec: Attribute, dtype: np.dtype, fill: object) -> None:
    """Refuse a fill value the result cannot hold (numpy would raise its own error mid-read)."""
    try:
        np.full(1, fill, dtype=np.result_type(dtype, fill))
    except (OverflowError, TypeError, ValueError) as error:
        raise ValidationError(
            f"array {array}, attribute {spec.name} ({spec.type}): the fill value {fill!r} does not fit "
            f"its values ({error}); give a fill of the attribute's type, or masked=True",
            array=array,
            column=spec.name,
            value=repr(fill),
        ) from None


def to_numpy(
    source: Source, attribute: str | None = None, fill: object = None, masked: bool = False
) -> np.ndarray:
    """The dense numpy array of one attribute; empty (and null) cells hold ``fill``.

    ``fill`` defaults to NaN for float attributes, 0 for integers and False for bool. With
    ``masked=True`` a ``numpy.ma.MaskedArray`` is returned whose mask marks empty and null cells.
    """
    schema = source.schema
    if attribute is None:
        if len(schema.attributes) != 1:
            raise ValidationError(
                f"array {schema.name} has attributes {', '.join(schema.attribute_names) or '(none)'}: name one"
            )
        attribute = schema.attributes[0].name
    spec = schema.attribute(attribute)
    _check_dense(schema, "a dense numpy array")
    cells = math.prod(schema.shape)
    dtype = numpy_dtype(spec.type)
    fill = default_fill(spec.type) if fill is None else fill
    _check_fill(schema.name, spec, dtype, fill)
    box = stored_box(source)
    if box is not None:
        read = box_to_numpy(box, spec, fill, masked)
        if read is not None:  # None: too many cells or files for the chunk path
            return read[0]
    table = source.local(columns=_attribute_columns(schema, [attribute]))
    total = int(np.sum(table.column(layout.N_CELLS))) if table.num_rows else 0
    out_dtype = np.result_type(dtype, fill)
    # When every cell is present (the common dense case) skip the fill and the presence mask.
    complete = total == cells and not spec.nullable
    out = (
        np.empty(schema.shape, dtype=out_dtype) if complete else np.full(schema.shape, fill, dtype=out_dtype)
    )
    present = None if complete and not masked else np.zeros(schema.shape, dtype=bool)
    low = np.asarray([d.low for d in schema.dimensions], dtype=np.int64)
    grid = ChunkGrid.of(schema)
    dense = np.asarray(table.column(layout.DENSE), dtype=bool)
    if dense.any():
        # Batch by batch: each batch's columns are contiguous, so payloads are read without copies.
        for batch in table.filter(pa.array(dense)).to_batches():
            _place_dense(batch, schema, spec, grid, low, out, present)
    if (~dense).any():
        rows = table.filter(pa.array(~dense))
        cell_table = layout.fragments_to_cells(rows, schema.with_attributes([spec]))
        coords = np.stack([np.asarray(cell_table.column(d)) for d in schema.dimension_names], axis=1) - low
        column = cell_table.column(attribute)
        valid = ~np.asarray(column.is_null()) if column.null_count else np.ones(len(column), dtype=bool)
        if codec.is_text(dtype):
            values = column.to_numpy(zero_copy_only=False)
        else:
            values = np.asarray(column.fill_null(fill) if column.null_count else column)
        index = tuple(coords[valid].T)
        out[index] = values[valid]
        if present is not None:
            present[index] = True
    if masked:
        return np.ma.MaskedArray(out, mask=~present)
    return out


def box_to_numpy(
    box: StoredBox, spec: Attribute, fill: object, masked: bool, cache: ChunkCache | None = None
) -> tuple[np.ndarray, chunk_read.BoxRead] | None:
    """``to_numpy`` of one attribute over a box of a stored array, decoded chunk by chunk straight
    into the output (the chunks from the process's chunk cache where it holds them), and what the
    read cost; None when the box's chunks hold more than DIRECT_READ_CELLS cells or span too many
    (file, chunk) pairs for this path."""
    stored = box.source
    read = chunk_read.read_box(
        stored.table, stored.version, spec, box.low, box.high, process_cache() if cache is None else cache
    )
    if read is None:
        return None
    shape = tuple(h - lo + 1 for lo, h in zip(box.low, box.high, strict=True))
    out_dtype = np.result_type(numpy_dtype(spec.type), fill)
    complete = read.complete
    out = np.empty(shape, dtype=out_dtype) if complete else np.full(shape, fill, dtype=out_dtype)
    present = None if complete else np.zeros(shape, dtype=bool)
    slices = read.slices
    copies = None if slices is None else slices.get((box.low, box.high))
    if copies is None:
        copies = _copy_slices(read, np.asarray(box.low, dtype=np.int64), np.asarray(box.high, dtype=np.int64))
        if slices is not None and len(slices) < chunk_read.SLICES_KEPT:
            slices[box.low, box.high] = copies
    if complete:  # every chunk one dense part, every cell present: one copy per chunk
        for _, _, outer, inside in copies:
            out[outer] = inside
    else:
        low, high = np.asarray(box.low, dtype=np.int64), np.asarray(box.high, dtype=np.int64)
        for chunk, inner, outer, inside in copies:
            if inside is not None:  # one dense part, every cell present
                out[outer] = inside
                present[outer] = True
                continue
            for part in chunk.parts:
                if isinstance(part, chunk_read.DenseChunk):
                    _place_block(part, inner, outer, out, present)
                else:
                    _place_cells(part, chunk.shape, np.asarray(chunk.start), low, high, out, present)
    if masked:
        return np.ma.MaskedArray(out, mask=np.zeros(shape, bool) if present is None else ~present), read
    return out, read


def _copy_slices(read: chunk_read.BoxRead, low: np.ndarray, high: np.ndarray) -> list[tuple]:
    """Per chunk read, the slices of its part inside the box ``[low, high]``: in the chunk and in
    the output (whose first cell is ``low``), planned for every chunk at once; and for a chunk of
    one complete dense part, that part's block inside the box (a read-only view of the cached
    block, which the plan keeping these slices keeps alive), else None."""
    chunks = read.chunks
    if not chunks:
        return []
    ndim = len(low)
    geometry = read.geometry
    starts = geometry[:, :ndim]
    first = np.maximum(starts, low)
    stop = np.minimum(starts + geometry[:, ndim:], high + 1)
    plan = np.concatenate([first - starts, stop - starts, first - low, stop - low], axis=1).tolist()
    two, three = 2 * ndim, 3 * ndim
    copies = []
    for chunk, row in zip(chunks, plan, strict=True):
        inner = tuple(map(slice, row[:ndim], row[ndim:two]))
        inside = chunk.parts[0].block[inner] if chunk.complete else None
        copies.append((chunk, inner, tuple(map(slice, row[two:three], row[three:])), inside))
    return copies


def _place_block(part, inner: tuple, outer: tuple, out: np.ndarray, present: np.ndarray | None) -> None:
    """Copy the part of a decoded dense chunk inside the box into ``out`` (and mark ``present``)."""
    if part.valid is None:
        out[outer] = part.block[inner]
        if present is not None:
            present[outer] = True
        return
    valid = part.valid[inner]
    np.copyto(out[outer], part.block[inner], where=valid)
    present[outer] |= valid


def _place_cells(part, chunk_shape, start, low, high, out: np.ndarray, present: np.ndarray | None) -> None:
    """Copy the cells of a decoded sparse fragment that lie inside the box into ``out``."""
    coords = np.stack(np.unravel_index(part.offsets, chunk_shape), axis=1) + start
    keep = np.all((coords >= low) & (coords <= high), axis=1)
    if part.valid is not None:
        keep &= part.valid
    index = tuple((coords[keep] - low).T)
    out[index] = part.values[keep]
    present[index] = True


def _place_dense(
    rows: pa.RecordBatch, schema, spec, grid: ChunkGrid, low: np.ndarray, out: np.ndarray, present
) -> None:
    """Copy dense fragments block by block into ``out`` (and mark ``present``)."""
    dtype = numpy_dtype(spec.type)
    chunks = np.stack([np.asarray(rows.column(c)) for c in layout.chunk_columns(schema)], axis=1)
    n_cells = np.asarray(rows.column(layout.N_CELLS))
    cells_data, cells_offsets = layout.binary_parts(rows.column(layout.CELLS))
    value_data, value_offsets = layout.binary_parts(rows.column(layout.value_column(spec.name)))
    null_parts = layout.binary_parts(rows.column(layout.null_column(spec.name))) if spec.nullable else None
    for row in range(rows.num_rows):
        chunk = tuple(int(c) for c in chunks[row])
        box_low, _ = grid.chunk_bounds(chunk)
        shape = grid.chunk_shape(chunk)
        volume = math.prod(shape)
        payload = value_data[value_offsets[row] : value_offsets[row + 1]]
        cell_bytes = cells_data[cells_offsets[row] : cells_offsets[row + 1]]
        block, mask = codec.dense_block(True, int(n_cells[row]), volume, payload, dtype, cell_bytes)
        null_bytes = null_parts[0][null_parts[1][row] : null_parts[1][row + 1]] if null_parts else None
        window = tuple(slice(b - lo, b - lo + s) for b, lo, s in zip(box_low, low, shape, strict=True))
        if mask is None and (null_bytes is None or len(null_bytes) == 0):
            out[window] = block.reshape(shape)
            if present is not None:
                present[window] = True
            continue
        valid = np.ones(volume, dtype=bool) if mask is None else mask.copy()
        if null_bytes is not None and len(null_bytes):
            valid &= ~np.unpackbits(null_bytes, count=volume, bitorder="little").view(bool)
        np.copyto(out[window], block.reshape(shape), where=valid.reshape(shape))
        if present is not None:
            present[window] |= valid.reshape(shape)


def to_arrow(source: Source, sort: bool = True) -> pa.Table:
    """One row per non-empty cell (dimension columns, then attributes), in row-major order if ``sort``."""
    schema = source.schema
    cells = layout.fragments_to_cells(source.local(), schema)
    if sort and cells.num_rows:
        cells = cells.sort_by([(d, "ascending") for d in schema.dimension_names])
    return cells


def with_labels(cells: pa.Table, schema: ArraySchema) -> pa.Table:
    """``cells`` (one row per cell) with each scaled dimension's cells replaced by their
    coordinates, as ``to_pandas(labels=True)`` gives them: float64, or timestamps of the time
    scale's resolution (UTC)."""
    for dimension in schema.dimensions:
        if dimension.scale is None:
            continue
        position = cells.schema.get_field_index(dimension.name)
        numbers = cells.column(position).to_numpy(zero_copy_only=False).astype(np.int64)
        coordinates = dimension.scale.coordinates(numbers)
        if coordinates.dtype.kind == "M":  # Arrow's timestamps count s, ms, us or ns
            unit = np.datetime_data(coordinates.dtype)[0]
            unit = unit if unit in ("s", "ms", "us", "ns") else "s"
            labels = pa.array(coordinates.astype(f"datetime64[{unit}]"), pa.timestamp(unit, tz="UTC"))
        else:
            labels = pa.array(coordinates)
        cells = cells.set_column(position, dimension.name, labels)
    return cells


def stored_extent(source: Source, names: list[str]) -> dict[str, tuple[int, int]] | None:
    """The first and last cell holding data along each dimension of ``names`` (None when no cell
    holds data): the bounding box to_xarray shows of an open-ended dimension."""
    cells = to_arrow(source, sort=False)
    if cells.num_rows == 0:
        return None
    extent = {}
    for name in names:
        ends = pc.min_max(cells.column(name))
        extent[name] = (ends["min"].as_py(), ends["max"].as_py())
    return extent


def to_pandas(source: Source, sort: bool = True) -> pd.DataFrame:
    return exact_pandas(to_arrow(source, sort))


#: pandas' nullable integer dtypes, for integer columns that hold nulls.
_NULLABLE_INTEGERS = {
    pa.int8(): pd.Int8Dtype(),
    pa.int16(): pd.Int16Dtype(),
    pa.int32(): pd.Int32Dtype(),
    pa.int64(): pd.Int64Dtype(),
    pa.uint8(): pd.UInt8Dtype(),
    pa.uint16(): pd.UInt16Dtype(),
    pa.uint32(): pd.UInt32Dtype(),
    pa.uint64(): pd.UInt64Dtype(),
}


def exact_pandas(table: pa.Table) -> pd.DataFrame:
    """``table`` as pandas with every integer exact: an integer column holding nulls becomes pandas'
    nullable integer dtype (``Int64``, ``UInt64``, ... with ``<NA>``), where Arrow's default would
    turn it into float64 and round values beyond 2**53. Maps (from Spark) become dicts. Repeated
    column names (Spark SQL allows them) are kept, each column with its own values and dtype."""
    names = table.column_names
    if len(set(names)) < len(names):  # Arrow's conversion mixes up columns of the same name
        frame = exact_pandas(table.rename_columns([f"c{k}" for k in range(len(names))]))
        frame.columns = names
        return frame
    frame = table.to_pandas(maps_as_pydicts="strict")
    for index, field in enumerate(table.schema):
        if field.type in _NULLABLE_INTEGERS and table.column(index).null_count:
            exact = table.column(index).to_pandas(types_mapper=_NULLABLE_INTEGERS.get)
            frame.isetitem(index, exact.array)
    return frame


#: Spark has no unsigned integers (its Arrow conversion refuses them): each is presented in the
#: signed type holding every one of its values exactly (uint64 as DECIMAL(20,0)).
_SPARK_UNSIGNED = {
    "uint8": pa.int16(),
    "uint16": pa.int32(),
    "uint32": pa.int64(),
    "uint64": pa.decimal128(20, 0),
}


def spark_cell_schema(schema: ArraySchema) -> pa.Schema:
    """The cell schema as Spark is given it: unsigned attributes in an exact signed type, datetime64
    ones in microseconds (Spark's timestamps hold no nanoseconds, and refuse Arrow's; a time with a
    nanosecond part is refused when the cells are read)."""
    cells = layout.cell_schema(schema)
    for attribute in schema.attributes:
        kind = _SPARK_UNSIGNED.get(attribute.type)
        if kind is None and pa.types.is_timestamp(cells.field(attribute.name).type):
            kind = pa.timestamp("us")
        if kind is not None:
            index = cells.get_field_index(attribute.name)
            cells = cells.set(index, cells.field(index).with_type(kind))
    return cells


def _cells_of_batch(table: pa.Table, schema: ArraySchema, out: pa.Schema | None = None) -> pa.Table:
    cells = layout.fragments_to_cells(table, schema)
    if out is None or cells.schema == out:
        return cells
    columns = [
        _spark_times(column, field, schema)
        if pa.types.is_timestamp(field.type)
        else column.cast(field.type, safe=True)
        for column, field in zip(cells.columns, out, strict=True)
    ]
    return pa.Table.from_arrays(columns, schema=out)


def _spark_times(column: pa.ChunkedArray, field: pa.Field, schema: ArraySchema) -> pa.ChunkedArray:
    """A datetime64 attribute in Spark's microseconds, exactly: a time with a nanosecond part is
    refused by name (Spark's TIMESTAMP cannot hold it; cutting it would change the value)."""
    try:
        return column.cast(field.type, safe=True)
    except pa.ArrowInvalid:
        whole = pc.equal(pc.floor_temporal(column, unit="microsecond"), column)
        row = pc.index(whole, False).as_py()
        value = column[row].value if row >= 0 else None
        moment = np.datetime64(value, "ns") if value is not None else None
        raise ValidationError(
            f"array {schema.name}, attribute {field.name}: {moment} has a nanosecond part, which Spark's "
            "TIMESTAMP (microseconds) cannot hold; read the array with an array query, to_pandas() "
            "or to_arrow(), which keep nanoseconds",
            array=schema.name,
            column=field.name,
        ) from None


def to_spark(source: Source, engine: Engine) -> Data:
    """A data set of ``engine`` (a Spark DataFrame for the Spark engine) with one row per non-empty
    cell, decoded by its tasks; unsigned attributes in an exact signed type (:func:`spark_cell_schema`)."""
    schema = source.schema
    out = spark_cell_schema(schema)
    return engine.map_batches(
        source.data(engine), functools.partial(_cells_of_batch, schema=schema, out=out), out
    )


def _check_dense(schema: ArraySchema, target: str) -> None:
    """Refuse by name an array too large to hold densely (an open-ended dimension, for one)."""
    cells = math.prod(schema.shape)
    if cells > MAX_DENSE_CELLS:
        open_ended = [d.name for d in schema.dimensions if d.unbounded]
        hint = f" (dimension {', '.join(open_ended)} is open-ended)" if open_ended else ""
        raise ValidationError(
            f"array {schema.name} spans {cells} cells{hint}, too many for {target}; "
            "read a subarray (e.g. A[0:100, :]), or use to_pandas/to_spark for the non-empty cells",
            array=schema.name,
        )


def to_xarray(source: Source):
    """An ``xarray.Dataset`` with one variable per attribute over the real dimension coordinates:
    ``low..high`` of each dimension, or with a scale the float64 ``offset + cell * step``. Empty (and
    null) cells are NaN; an integer or bool variable keeps its dtype when it has no empty cell and
    becomes float64 (NaN for empty) otherwise, refused by name when a value would round there;
    datetime64 holds NaT and string None where empty."""
    try:
        import xarray as xr
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("to_xarray needs xarray: pip install xarray") from error
    schema = source.schema
    _check_dense(schema, "an xarray Dataset")
    coords = {d.name: _coordinate(d) for d in schema.dimensions}
    variables = {}
    for attribute in schema.attributes:
        values = to_numpy(source, attribute.name, masked=True)
        mask = np.ma.getmaskarray(values)
        if not mask.any():
            data = np.ma.getdata(values)
        elif values.dtype.kind in "fc":
            data = np.ma.filled(values, np.nan)
        elif values.dtype.kind == "M":
            data = np.ma.filled(values, np.datetime64("NaT", "ns"))
        elif values.dtype.kind == "O":  # strings: None where empty
            data = np.where(mask, None, np.ma.getdata(values))
        else:
            _check_exact_as_float(schema.name, attribute.name, np.ma.getdata(values), mask)
            data = np.ma.filled(values.astype(np.float64), np.nan)
        variables[attribute.name] = (schema.dimension_names, data, {"arrayviews_type": attribute.type})
    return xr.Dataset(variables, coords=coords, attrs={"arrayviews_schema": schema.to_text()})


def _check_exact_as_float(array: str, attribute: str, raw: np.ndarray, empty: np.ndarray) -> None:
    """An integer variable with empty cells goes to xarray as float64 (NaN where empty): refuse when
    a stored value has no exact float64 value (beyond 2**53), naming it, instead of rounding it."""
    if raw.dtype.kind not in "iu" or raw.dtype.itemsize < 8:
        return  # every int32 and smaller is exact in float64
    as_float = raw.astype(np.float64)
    top = 2.0**64 if raw.dtype.kind == "u" else 2.0**63
    inside = (as_float < top) & (as_float >= (0.0 if raw.dtype.kind == "u" else -top))
    back = np.where(inside, as_float, 0.0).astype(raw.dtype)
    inexact = ~empty & ~(inside & (back == raw))
    if inexact.any():
        value = int(raw[np.unravel_index(int(np.flatnonzero(inexact)[0]), raw.shape)])
        raise ValidationError(
            f"array {array}, attribute {attribute}: {value} has no exact float64 value, and xarray "
            f"holds an integer attribute with empty cells as float64 (NaN where empty); read it "
            f"exactly with to_numpy({attribute!r}, masked=True) or to_pandas()",
            array=array,
            column=attribute,
            value=value,
        )


def _coordinate(dimension: Dimension):
    """The xarray coordinate of ``dimension``: its integer cells, its times (``datetime64``), or its
    scaled float64 coordinates with the unit (CF's ``units``) and the exact step and offset in the
    attributes, so that from_xarray reads the same scale back."""
    cells = np.arange(dimension.low, dimension.high + 1, dtype=np.int64)
    scale = dimension.scale
    if scale is None:
        return cells
    if isinstance(scale, TimeScale):
        times = scale.coordinates(cells)
        if np.datetime_data(times.dtype)[0] in ("D", "h", "m"):
            times = times.astype("datetime64[s]")  # the coarsest resolution pandas indexes keep
        return (dimension.name, times, {})
    attrs = {"arrayviews_step": scale.step, "arrayviews_offset": scale.offset}
    if scale.unit:
        attrs["units"] = scale.unit
    return (dimension.name, scale.coordinates(cells), attrs)


def chunk_statistics(source: Source) -> pd.DataFrame:
    """Per chunk: its number and bounds per dimension, cells, bytes, fragments, newest version, min/max."""
    schema = source.schema
    meta = source.metadata().to_pandas()
    keys = layout.chunk_columns(schema)
    if meta.empty:
        columns = [*schema.dimension_names, "cells", "bytes", "fragments", "version"]
        return pd.DataFrame(columns=columns)
    aggregations = {
        "cells": (layout.N_CELLS, "sum"),
        "bytes": (layout.NBYTES, "sum"),
        "fragments": (layout.N_CELLS, "size"),
        "version": (layout.VERSION, "max"),
    }
    for attribute in schema.attribute_names:
        aggregations[f"{attribute}_min"] = (layout.min_column(attribute), "min")
        aggregations[f"{attribute}_max"] = (layout.max_column(attribute), "max")
    stats = meta.groupby(keys, sort=True).agg(**aggregations).reset_index()
    for attribute in schema.attributes:
        if numpy_dtype(attribute.type).kind == "M":  # statistics are kept as int64 nanoseconds
            for end in ("min", "max"):
                stats[f"{attribute.name}_{end}"] = pd.to_datetime(stats[f"{attribute.name}_{end}"], unit="ns")
    stats = stats.rename(columns={layout.chunk_column(d): d for d in schema.dimension_names})
    grid = ChunkGrid.of(schema)
    for k, dimension in enumerate(schema.dimension_names):
        numbers = stats[dimension].to_numpy(dtype=np.int64)
        starts = grid.dimensions[k].chunk_starts(numbers)
        stats[f"{dimension}_low"] = starts
        stats[f"{dimension}_high"] = starts + grid.dimensions[k].chunk_sizes(numbers) - 1
    return stats
