"""Checking and normalizing a batch of cells given on the driver (pandas, Arrow, dict of numpy arrays).

Every check runs before anything is written, and every error names the array, the column and an
offending value, so a rejected batch leaves the array exactly as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from arrayviews.model.cell_checks import check_columns, spelled_columns  # noqa: F401 - callers take it from here
from arrayviews.model.errors import SchemaError, ValidationError
from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.schema import ArraySchema
from arrayviews.model.time_scale import TimeScale, instant_nanoseconds
from arrayviews.model.types import (
    accepts,
    as_arrow,
    first_misfit,
    integral_decimals_as_integers,
    is_integral_decimal,
    misfit_reason,
    numpy_dtype,
)
from arrayviews.storage import codec


@dataclass
class CellBatch:
    """A validated batch: coordinates (n, d), one numpy column per attribute, null masks."""

    coords: np.ndarray
    values: dict[str, np.ndarray]
    nulls: dict[str, np.ndarray]

    @property
    def size(self) -> int:
        return len(self.coords)


def _numpy_column(column: object) -> np.ndarray:
    """A column of a dict batch as numpy; text as Python strings, because pyarrow reads numpy's
    fixed-width text as C strings (cut at the first NUL) and numpy drops trailing NULs."""
    values = np.atleast_1d(np.asarray(column))
    if values.dtype.kind == "M" and np.datetime_data(values.dtype)[0] not in ("s", "ms", "us", "ns"):
        return values.astype("datetime64[s]")  # Arrow has no weeks, days (as times), hours or minutes
    if values.dtype.kind != "U":
        return values
    if isinstance(column, np.ndarray):
        return values.astype(object)
    return np.atleast_1d(np.asarray(column, dtype=object))


def _dict_column(
    array: str, name: str, column: object, noun: str = "array"
) -> pa.Array | pa.ChunkedArray | np.ndarray:
    """One column of a dict batch: Arrow as it is; pandas (a Series or an extension array such as
    ``Int64``) as a DataFrame's column is read, its ``NA`` a null; a list of Python integers
    exactly (numpy would make ``[2**63 + 5, 3]`` floats); a list of numpy times with None as a
    datetime64 array with NaT there; anything else through numpy."""
    if isinstance(column, pa.Array | pa.ChunkedArray):
        return column
    if hasattr(column, "__arrow_array__") or type(column).__name__ == "Series":
        dtype = getattr(column, "dtype", None)
        if isinstance(dtype, np.dtype):
            return _numpy_column(np.asarray(column))  # numpy-backed: NaN stays a value
        return pa.array(column, from_pandas=True)
    if isinstance(column, list | tuple):
        present = [v for v in column if v is not None]
        if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
            return _python_integers(array, name, list(column), present, noun)
        if present and len(present) < len(column) and all(isinstance(v, np.datetime64) for v in present):
            # numpy times beside None: None is NaT (a null, as in a datetime64 array), the unit the finest
            column = np.array([np.datetime64("NaT") if v is None else v for v in column])
    return _numpy_column(column)


def _python_integers(array: str, name: str, values: list, present: list, noun: str = "array") -> pa.Array:
    """Python integers (and None) as int64, or as uint64 when one passes int64 and none is
    negative; a value no 64-bit type holds is refused by row."""
    kind, low, high = (pa.uint64(), 0, 2**64) if max(present) >= 2**63 else (pa.int64(), -(2**63), 2**63)
    for row, value in enumerate(values):
        if value is not None and not low <= value < high:
            raise ValidationError(
                f"{noun} {array}, column {name}: {value} (row {row}) fits no 64-bit integer column "
                f"together with the others (int64: -2**63 .. 2**63 - 1; uint64: 0 .. 2**64 - 1)",
                array=array,
                column=name,
                value=value,
            )
    return pa.array(values, kind)


def to_arrow(data: object, array: str, noun: str = "array") -> pa.Table:
    """Any supported driver-side batch as an Arrow table; errors name ``f"{noun} {array}"`` (an
    uncertain array's reader passes ``noun="uncertain array"``)."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency
        pd = None
    if pd is not None and isinstance(data, pd.DataFrame):
        # NaN in a numpy float column is a value, not a null (from_pandas would make it null);
        # nulls come from pandas' nullable dtypes (pd.NA) or object columns holding None.
        columns = [
            pa.array(column.to_numpy(), from_pandas=False)
            if isinstance(column.dtype, np.dtype) and column.dtype.kind == "f"
            else pa.array(column, from_pandas=True)
            for _, column in data.items()
        ]
        return pa.Table.from_arrays(columns, names=[str(name) for name in data.columns])
    if isinstance(data, Mapping):
        # Arrow columns stay as they are (numpy would turn their nulls into NaN); others via numpy.
        columns = {name: _dict_column(array, str(name), column, noun) for name, column in data.items()}
        lengths = {name: len(column) for name, column in columns.items()}
        if len(set(lengths.values())) > 1:
            described = ", ".join(f"{k}={v}" for k, v in lengths.items())
            raise ValidationError(
                f"{noun} {array}: columns have different lengths ({described})", array=array
            )
        try:
            return pa.table(columns)
        except UnicodeError:
            raise _not_text(array, columns, noun) from None
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            raise _mixed(array, columns, noun) from None
    raise ValidationError(
        f"{noun} {array}: cannot read {_rows(noun)} from {type(data).__name__}; give a pandas DataFrame, "
        "a pyarrow Table, a Spark DataFrame or a dict of numpy arrays",
        array=array,
    )


def _rows(noun: str) -> str:
    """What a batch holds: an array's cells, an uncertain array's tuples."""
    return "cells" if noun == "array" else "tuples"


def _mixed(array: str, columns: Mapping, noun: str = "array") -> ValidationError:
    """The error for a column mixing text with other values, naming the column and the first row
    whose kind differs from the column's first value (only run once a conversion failed)."""
    for name, column in columns.items():
        if _converts(column):
            continue
        present = [(row, value) for row, value in enumerate(column) if value is not None]
        text = isinstance(present[0][1], str) if present else False
        row, value = next(((r, v) for r, v in present if isinstance(v, str) != text), (None, None))
        kinds = "text and other values"
        if row is None and present:  # no text at all: values of different kinds, e.g. numbers and times
            kinds = "values of different kinds"
            first = type(present[0][1])
            row, value = next(((r, v) for r, v in present if type(v) is not first), (None, None))
        where = (
            "" if row is None else f": row {row} holds {value!r}, row {present[0][0]} holds {present[0][1]!r}"
        )
        return ValidationError(
            f"{noun} {array}: column {name} mixes {kinds}{where}",
            array=array,
            column=str(name),
            value=None if row is None else repr(value),
        )
    return ValidationError(f"{noun} {array}: the columns cannot be read as {_rows(noun)}", array=array)


def _converts(column: object) -> bool:
    """Whether Arrow reads ``column`` as one typed array."""
    try:
        pa.array(column)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return False
    return True


def _not_text(array: str, columns: Mapping, noun: str = "array") -> ValidationError:
    """The error for a string that is not valid Unicode (a lone surrogate: UTF-8 cannot hold it),
    naming its column and row (only run once a conversion has failed)."""
    for name, column in columns.items():
        values = column.to_pylist() if isinstance(column, pa.Array | pa.ChunkedArray) else list(column)
        for row, value in enumerate(values):
            if isinstance(value, str):
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError:
                    return ValidationError(
                        f"{noun} {array}: column {name}, row {row}: {value[:40]!r} is not valid Unicode "
                        "text (it holds a lone surrogate, which UTF-8 cannot store)",
                        array=array,
                        column=str(name),
                        value=value,
                    )
    return ValidationError(f"{noun} {array}: a text value is not valid Unicode", array=array)


def whole_decimals(
    column: pa.Array, type_name: str | pa.DataType, fail: Callable[[str, object], Exception]
) -> pa.Array:
    """A scale-0 decimal column (how Spark and pandas carry uint64 and big integers) bound for an
    integer attribute, cast to its type; ``fail(reason, value)`` is raised for the first value out
    of range. Any other column is returned as it is."""
    if not (is_integral_decimal(column.type) and pa.types.is_integer(as_arrow(type_name))):
        return column
    column, misfit = integral_decimals_as_integers(type_name, column)
    if misfit is not None:
        value = int(column[misfit].as_py())
        raise fail(f"{misfit_reason(type_name, value)} (row {misfit})", value)
    return column


def _is_time(kind: pa.DataType) -> bool:
    return pa.types.is_timestamp(kind) or pa.types.is_date(kind)


def _cells_of_times(
    schema: ArraySchema, dimension, column: pa.Array | pa.ChunkedArray
) -> tuple[pa.Array, np.ndarray]:
    """The cells of a dimension with a time scale given as times (UTC instants: Arrow timestamps,
    with or without a zone, or dates); a time that labels no cell is refused by row."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_date(column.type):
        column = column.cast(pa.timestamp("s"))
    instants = np.asarray(column.cast(pa.timestamp(column.type.unit)).to_numpy(zero_copy_only=False))
    cells, first = dimension.scale.cells_of(instants)
    if first is not None:
        raise ValidationError(
            f"array {schema.name}, column {dimension.name}: {instants[first]} (row {first}) labels no "
            f"cell of the dimension ({dimension.scale.to_text()})",
            array=schema.name,
            column=dimension.name,
            value=str(instants[first]),
        )
    return pa.array(cells, pa.int64()), instants


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _text_cells_at_once(column: pa.Array | pa.ChunkedArray, origin: int, step: int) -> np.ndarray | None:
    """The cells of ISO 8601 times read by Arrow in one pass (all zone-less, as UTC, or all with a
    zone, as the instants they name), in exact int64 nanoseconds; None where that cannot be had
    (nulls, a mix, text Arrow does not read, times outside 1677-2262, a time between labels), so
    the caller reads row by row and names the refused one."""
    if column.null_count or not -(2**63) <= origin < 2**63 or not 0 < step < 2**63:
        return None
    instants = None
    for target in (pa.timestamp("ns"), pa.timestamp("ns", "UTC")):
        try:
            instants = column.cast(target)
            break
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
    if instants is None:
        return None
    if isinstance(instants, pa.ChunkedArray):
        instants = instants.combine_chunks()
    nanoseconds = instants.cast(pa.int64()).to_numpy(zero_copy_only=False)
    base = np.int64(origin)
    offsets = nanoseconds - base
    if np.any(((nanoseconds ^ base) & (nanoseconds ^ offsets)) < 0) or np.any(offsets % step):
        return None  # the subtraction wrapped, or a time between two labels
    return offsets // step


def _cells_of_text(
    schema: ArraySchema, dimension, column: pa.Array | pa.ChunkedArray
) -> tuple[pa.Array, list[str]]:
    """The cells of a time dimension given as ISO 8601 text (UTC, as sel, conditions and CSV files
    take it), exactly in integer nanoseconds; text that is no time or labels no cell is refused by row."""
    scale = dimension.scale
    origin = scale.nanoseconds(0)
    step = scale.nanoseconds(1) - origin
    fast = _text_cells_at_once(column, origin, step)
    if fast is not None:
        return pa.array(fast, pa.int64()), column.to_pylist()
    texts = column.to_pylist()  # one at a time, to name the row that is refused and why
    cells = []
    for row, text in enumerate(texts):
        try:
            offset = instant_nanoseconds(text) - origin
        except SchemaError as error:
            raise ValidationError(
                f"array {schema.name}, column {dimension.name}: row {row}: {error}",
                array=schema.name,
                column=dimension.name,
                value=text,
            ) from None
        if offset % step:
            raise ValidationError(
                f"array {schema.name}, column {dimension.name}: {text!r} (row {row}) labels no cell of "
                f"the dimension ({scale.to_text()})",
                array=schema.name,
                column=dimension.name,
                value=text,
            )
        cells.append(offset // step)
    bad = next((row for row, cell in enumerate(cells) if not -(2**63) <= cell < 2**63), None)
    if bad is not None:
        raise ValidationError(
            f"array {schema.name}, column {dimension.name}: {texts[bad]!r} (row {bad}) is outside the "
            f"dimension range {dimension.low}:{'*' if dimension.unbounded else dimension.high}",
            array=schema.name,
            column=dimension.name,
            value=texts[bad],
        )
    return pa.array(cells, pa.int64()), texts


def _first_index(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def normalize_cells(data: object, schema: ArraySchema) -> CellBatch:
    """Validate a driver-side batch against ``schema`` and return it in numpy form."""
    table = to_arrow(data, schema.name)
    table = table.rename_columns(spelled_columns(table.column_names, schema))
    names = table.column_names
    check_columns(names, schema)
    n = table.num_rows
    if n == 0:  # an empty batch writes nothing (empty columns carry no meaningful type: not checked)
        return CellBatch(
            np.zeros((0, schema.ndim), dtype=np.int64),
            {a.name: np.zeros(0, dtype=numpy_dtype(a.type)) for a in schema.attributes},
            {},
        )
    coords = np.empty((n, schema.ndim), dtype=np.int64, order="F")  # columns contiguous
    for k, dimension in enumerate(schema.dimensions):
        column = table.column(dimension.name)
        if column.null_count:
            row = _first_index(np.asarray(column.is_null()))
            raise ValidationError(
                f"array {schema.name}, column {dimension.name}: missing coordinate in row {row}",
                array=schema.name,
                column=dimension.name,
            )
        times = None
        if isinstance(dimension.scale, TimeScale) and _is_time(column.type):
            column, times = _cells_of_times(schema, dimension, column)
        elif isinstance(dimension.scale, TimeScale) and _is_text(column.type):
            column, times = _cells_of_text(schema, dimension, column)
        if not pa.types.is_integer(column.type):
            raise ValidationError(
                f"array {schema.name}, column {dimension.name}: coordinates must be integers"
                f"{' (or times, on a dimension with a time scale)' if _is_time(column.type) else ''}, "
                f"got {column.type}",
                array=schema.name,
                column=dimension.name,
                value=str(column.type),
            )
        values = np.asarray(column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column)
        if values.dtype.kind == "u" and n and values.max() > np.iinfo(np.int64).max:
            raise ValidationError(
                f"array {schema.name}, column {dimension.name}: coordinate {values.max()} is too large",
                array=schema.name,
                column=dimension.name,
                value=int(values.max()),
            )
        values = values.astype(np.int64)
        outside = (values < dimension.low) | (values > dimension.high)
        if outside.any():
            row = _first_index(outside)
            raise ValidationError(
                f"array {schema.name}, column {dimension.name}: coordinate {values[row]}"
                f"{'' if times is None else f' ({times[row]})'} (row {row}) is outside "
                f"the dimension range {dimension.low}:{'*' if dimension.unbounded else dimension.high}",
                array=schema.name,
                column=dimension.name,
                value=int(values[row]),
            )
        coords[:, k] = values
    values: dict[str, np.ndarray] = {}
    nulls: dict[str, np.ndarray] = {}
    for attribute in schema.attributes:
        dtype = numpy_dtype(attribute.type)
        if attribute.name not in names:
            values[attribute.name] = codec.blank(dtype, n)
            if n:
                nulls[attribute.name] = np.ones(n, dtype=bool)
            continue
        column = table.column(attribute.name)
        column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        if not accepts(attribute.type, column.type):
            raise ValidationError(
                f"array {schema.name}, column {attribute.name}: values of type {column.type} cannot be stored "
                f"in attribute {attribute.name} of type {attribute.type}",
                array=schema.name,
                column=attribute.name,
                value=str(column.type),
            )
        column = whole_decimals(
            column,
            attribute.type,
            lambda reason, value, name=attribute.name: ValidationError(
                f"array {schema.name}, column {name}: {reason}", array=schema.name, column=name, value=value
            ),
        )
        null_mask = np.asarray(column.is_null()) if column.null_count else None
        if null_mask is not None and not attribute.nullable:
            row = _first_index(null_mask)
            raise ValidationError(
                f"array {schema.name}, column {attribute.name}: null in row {row}, but {attribute.null_hint} "
                "(NaN is a valid float value; null is not)",
                array=schema.name,
                column=attribute.name,
            )
        if pa.types.is_null(column.type):
            values[attribute.name] = codec.blank(dtype, n)
            nulls[attribute.name] = np.ones(n, dtype=bool)
            continue
        if codec.is_text(dtype):  # strings: any text, kept exactly (nulls hold "" under the mask)
            values[attribute.name] = codec.text_array(column).to_numpy(zero_copy_only=False)
            if null_mask is not None:
                nulls[attribute.name] = null_mask
            continue
        filled = np.asarray(
            column.fill_null(False if pa.types.is_boolean(column.type) else 0)
            if null_mask is not None
            else column
        )
        misfit = first_misfit(attribute.type, filled, None if null_mask is None else ~null_mask)
        if misfit is not None:
            value = filled[misfit].item()
            raise ValidationError(
                f"array {schema.name}, column {attribute.name}: {misfit_reason(attribute.type, value)} "
                f"(row {misfit})",
                array=schema.name,
                column=attribute.name,
                value=value,
            )
        values[attribute.name] = filled.astype(dtype, copy=False)
        if null_mask is not None:
            nulls[attribute.name] = null_mask
    return CellBatch(coords, values, nulls)


def check_inside(coords: np.ndarray, schema: ArraySchema) -> None:
    """Raise ValidationError if any cell lies outside the array range."""
    inside = ChunkGrid.of(schema).contains(coords)
    if not inside.all():
        row = _first_index(~inside)
        cell = ", ".join(f"{d}={c}" for d, c in zip(schema.dimension_names, coords[row], strict=True))
        raise ValidationError(
            f"array {schema.name}: cell ({cell}) is outside the array {schema.to_text()}", array=schema.name
        )


def describe_cells(schema: ArraySchema, coords: np.ndarray, limit: int = 3) -> str:
    """``(i=1, j=2), (i=3, j=4)`` for the first few cells of ``coords``."""
    shown = [
        "(" + ", ".join(f"{d}={int(c)}" for d, c in zip(schema.dimension_names, cell, strict=True)) + ")"
        for cell in coords[:limit]
    ]
    more = f" and {len(coords) - limit} more" if len(coords) > limit else ""
    return ", ".join(shown) + more
