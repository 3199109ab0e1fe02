"""Cells read in-process from files checked against an array schema and cast to its types, with
the errors Spark's ``conform_frame`` and ``check_frame`` (execution/spark_cells.py) give for the
same rows: column names and types, times labelling no cell, values out of an attribute's range,
coordinates out of the dimension range, nulls where none may be."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from arrayviews.execution.local_cells import CellRows, NotCertain
from arrayviews.model.cell_checks import check_columns, spelled_columns
from arrayviews.model.errors import ValidationError
from arrayviews.model.schema import ArraySchema
from arrayviews.model.time_scale import TimeScale
from arrayviews.model.types import DATETIME64_MICROS, accepts, misfit_reason, value_limits

#: The names Spark gives the Arrow types of the cells read (``DataType.simpleString``).
_SPARK_NAMES = {
    pa.int8(): "tinyint",
    pa.int16(): "smallint",
    pa.int32(): "int",
    pa.int64(): "bigint",
    pa.float32(): "float",
    pa.float64(): "double",
    pa.bool_(): "boolean",
    pa.string(): "string",
    pa.date32(): "date",
    pa.timestamp("us", "UTC"): "timestamp",
    pa.timestamp("us"): "timestamp_ntz",
}
#: The Arrow form of the Spark type each attribute's values take (spark_cells._spark_type).
_TARGETS = {
    "int8": pa.int8(),
    "int16": pa.int16(),
    "uint8": pa.int16(),
    "uint16": pa.int32(),
    "uint32": pa.int64(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "bool": pa.bool_(),
    "string": pa.string(),
    "datetime64": pa.timestamp("us", "UTC"),
}
_EPOCH = dt.datetime(1970, 1, 1)


def _shown(kind: pa.DataType, micros_or_days: int) -> str:
    """A time value as PySpark's ``Row`` shows it (``str`` of the datetime or date it collects)."""
    if pa.types.is_date(kind):
        return str(dt.date(1970, 1, 1) + dt.timedelta(days=micros_or_days))
    seconds, micros = divmod(micros_or_days, 1_000_000)
    if kind.tz is None:  # TIMESTAMP_NTZ: the wall time itself
        return str((_EPOCH + dt.timedelta(seconds=seconds)).replace(microsecond=micros))
    return str(dt.datetime.fromtimestamp(seconds).replace(microsecond=micros))  # the local zone, as PySpark


def _time_cells(column: pa.Array, scale: TimeScale) -> tuple[np.ndarray, np.ndarray]:
    """(cells, labels no cell) of times on a time dimension, exact as spark_cells.time_cells."""
    if pa.types.is_date(column.type):
        micros = [None if d is None else d * 86_400_000_000 for d in column.cast(pa.int32()).to_pylist()]
    else:
        micros = column.cast(pa.int64()).to_pylist()
    origin = scale.nanoseconds(0)
    step = scale.nanoseconds(1) - origin
    cells = np.zeros(len(micros), np.int64)
    none = np.zeros(len(micros), bool)
    for row, value in enumerate(micros):
        if value is None:
            continue
        offset = value * 1000 - origin
        if offset % step or abs(offset // step) > 2**62:
            none[row] = True
        else:
            cells[row] = offset // step
    return cells, none


def checked_cells(rows: CellRows, schema: ArraySchema) -> tuple[pa.Table, int]:
    """The rows checked and cast as ``conform_frame`` then ``check_frame`` do on Spark, with the
    cell count; the same ValidationError for the same first bad row."""
    table = rows.table
    table = table.rename_columns(spelled_columns(table.column_names, schema))
    names = table.column_names
    check_columns(names, schema)
    columns: dict[str, pa.Array] = {}
    for dimension in schema.dimensions:
        column = table.column(dimension.name).combine_chunks()
        kind = column.type
        timed = pa.types.is_timestamp(kind) or pa.types.is_date(kind)
        if timed and isinstance(dimension.scale, TimeScale):
            cells, none = _time_cells(column, dimension.scale)
            if none.any():
                row = rows.first(none)
                value = column.cast(pa.int32() if pa.types.is_date(kind) else pa.int64())[row].as_py()
                shown = _shown(kind, value)
                raise ValidationError(
                    f"array {schema.name}, column {dimension.name}: {shown} labels no cell of the "
                    f"dimension ({dimension.scale.to_text()})",
                    array=schema.name,
                    column=dimension.name,
                    value=shown,
                )
            columns[dimension.name] = pa.array(cells, pa.int64(), mask=~np.asarray(column.is_valid()))
            continue
        if not pa.types.is_integer(kind):
            hint = " (or times, on a dimension with a time scale)" if timed else ""
            raise ValidationError(
                f"array {schema.name}, column {dimension.name}: coordinates must be integers{hint}, got "
                f"{_spark_name(kind)}",
                array=schema.name,
                column=dimension.name,
                value=_spark_name(kind),
            )
        columns[dimension.name] = column.cast(pa.int64())
    for attribute in schema.attributes:
        if attribute.type not in _TARGETS:
            raise NotCertain(f"attribute {attribute.name} of type {attribute.type}")
        target = _TARGETS[attribute.type]
        if attribute.name not in names:
            columns[attribute.name] = pa.nulls(table.num_rows, target)
            continue
        column = table.column(attribute.name).combine_chunks()
        if not accepts(attribute.type, column.type):
            raise ValidationError(
                f"array {schema.name}, column {attribute.name}: values of type {_spark_name(column.type)} cannot be "
                f"stored in attribute {attribute.name} of type {attribute.type}",
                array=schema.name,
                column=attribute.name,
                value=_spark_name(column.type),
            )
        limits = value_limits(attribute.type, column.type)
        if limits is not None:
            _check_limits(rows, column, schema, attribute.name, attribute.type, limits)
        if attribute.type == "datetime64":
            _check_times(rows, column, schema, attribute.name)
        columns[attribute.name] = column.cast(target)
    checked = pa.table(columns)
    return checked, _check_cells(rows, checked, schema)


def _spark_name(kind: pa.DataType) -> str:
    if kind not in _SPARK_NAMES:
        raise NotCertain(f"Spark names the type {kind} its own way")
    return _SPARK_NAMES[kind]


def _check_limits(
    rows: CellRows, column: pa.Array, schema: ArraySchema, name: str, type_name: str, limits
) -> None:
    """Every value of a column wider than its attribute must fit (spark_cells._check_limits)."""
    low, high = limits
    values = column.to_numpy(zero_copy_only=False)
    valid = np.asarray(column.is_valid())
    if pa.types.is_floating(column.type):
        values = np.where(valid, values, 0.0)
        outside = ((values < low) | (values > high)) & np.isfinite(values)
    else:
        values = np.asarray(column.fill_null(0).to_numpy(zero_copy_only=False))
        outside = (values.astype(object) < low) | (values.astype(object) > high)
    outside &= valid
    if outside.any():
        value = values[rows.first(outside)].item()
        raise ValidationError(
            f"array {schema.name}, column {name}: {misfit_reason(type_name, value)}",
            array=schema.name,
            column=name,
            value=value,
        )


def _check_times(rows: CellRows, column: pa.Array, schema: ArraySchema, name: str) -> None:
    """Times bound for a datetime64 attribute lie in its nanoseconds' range (spark_cells._check_times)."""
    low, high = DATETIME64_MICROS
    micros = column.cast(pa.timestamp("us", column.type.tz)).cast(pa.int64())
    values = micros.fill_null(0).to_numpy(zero_copy_only=False)
    outside = ((values < low) | (values > high)) & np.asarray(micros.is_valid())
    if outside.any():
        shown = _shown(column.type, int(values[rows.first(outside)]))
        raise ValidationError(
            f"array {schema.name}, column {name}: {shown} is outside the datetime64 range "
            "1677-09-21 00:12:43.145225 .. 2262-04-11 23:47:16.854775",
            array=schema.name,
            column=name,
            value=shown,
        )


def _check_cells(rows: CellRows, table: pa.Table, schema: ArraySchema) -> int:
    """Coordinates out of range and nulls where none may be (spark_cells.check_frame)."""
    for dimension in schema.dimensions:
        column = table.column(dimension.name).combine_chunks()
        missing = ~np.asarray(column.is_valid())
        values = column.fill_null(dimension.low).to_numpy(zero_copy_only=False)
        bad = missing | (values < dimension.low) | (values > dimension.high)
        if bad.any():
            row = rows.first(bad)
            if missing[row]:
                raise ValidationError(
                    f"array {schema.name}, column {dimension.name}: missing coordinate",
                    array=schema.name,
                    column=dimension.name,
                )
            value = int(values[row])
            raise ValidationError(
                f"array {schema.name}, column {dimension.name}: coordinate {value} is outside the dimension range "
                f"{dimension.low}:{dimension.high} ({int(bad.sum())} such cells)",
                array=schema.name,
                column=dimension.name,
                value=value,
            )
    for attribute in schema.attributes:
        nulls = table.column(attribute.name).null_count
        if not attribute.nullable and nulls:
            raise ValidationError(
                f"array {schema.name}, column {attribute.name}: {nulls} null value(s), but "
                f"{attribute.null_hint} (NaN is a valid float value; null is not)",
                array=schema.name,
                column=attribute.name,
            )
    return table.num_rows


def duplicates_in_one_chunk(table: pa.Table, schema: ArraySchema) -> None:
    """NotCertain when cells repeat in more than one chunk: Spark names an example from whichever
    of its tasks reports first, which this process cannot know."""
    if table.num_rows < 2:
        return
    coords = np.stack(
        [pc.fill_null(table.column(d), 0).to_numpy() for d in schema.dimension_names], axis=1
    ).astype(np.int64)
    unique, counts = np.unique(coords, axis=0, return_counts=True)
    repeated = unique[counts > 1]
    if len(repeated) < 2:
        return
    chunks = np.stack(
        [(repeated[:, k] - d.chunk_origin) // d.chunk_length for k, d in enumerate(schema.dimensions)], axis=1
    )
    if len(np.unique(chunks, axis=0)) > 1:
        raise NotCertain("cells repeat in several chunks")
