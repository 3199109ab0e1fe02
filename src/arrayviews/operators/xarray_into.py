"""Placing an ``xarray.DataArray`` or ``Dataset`` into the cells of an existing array: each
coordinate read on the array's own dimension (integer cells; times on a time scale, exactly; floats
on a coordinate scale, within a few units in the last place as ``from_xarray`` allows), the values
in the array's dimension order, masked where xarray's missing value is.

So the next day of a satellite grid, an xarray object with its own times, goes where those times
belong (``A.write_xarray(day)``), with no cell arithmetic left to the user.
"""

from __future__ import annotations

import numpy as np

from arrayviews.model.errors import ValidationError
from arrayviews.model.schema import ArraySchema, CoordinateScale, Dimension
from arrayviews.model.time_scale import TimeScale
from arrayviews.model.types import numpy_dtype
from arrayviews.operators.xarray_block import ULPS, _missing


def xarray_cells(data: object, schema: ArraySchema) -> tuple[dict[str, np.ndarray], tuple[int, ...]]:
    """The values per attribute (masked where missing, in ``schema``'s dimension order) and the first
    cell of ``data`` within an array of ``schema``; refused by name where a coordinate, a variable or
    a dimension does not fit the array."""
    import xarray as xr

    name = schema.name
    if isinstance(data, xr.DataArray):
        only = schema.attribute_names[0] if len(schema.attributes) == 1 else "value"
        data = data.to_dataset(name=data.name if data.name is not None else only)
    if not isinstance(data, xr.Dataset):
        raise ValidationError(
            f"array {name}: write_xarray takes a DataArray or Dataset, got {type(data).__name__}"
        )
    if not data.data_vars:
        raise ValidationError(f"array {name}: the xarray object has no data variables", array=name)
    # a dimension of the array given as a scalar coordinate (what ds.sel(lat=45.0) or isel leaves)
    # is a dimension of one cell at that coordinate
    for coordinate in list(data.coords):
        if (
            coordinate not in data.dims
            and data.coords[coordinate].ndim == 0
            and str(coordinate).lower() in {d.lower() for d in schema.dimension_names}
        ):
            data = data.expand_dims(coordinate)
    dims = {schema.spelling(str(d)): str(d) for d in data.dims}
    if sorted(dims) != sorted(schema.dimension_names):
        raise ValidationError(
            f"array {name}: the xarray object has dimensions {tuple(str(d) for d in data.dims)}, the array "
            f"{schema.dimension_names}",
            array=name,
        )
    data = data.transpose(*[dims[d] for d in schema.dimension_names])
    origin, flips = [], []
    for dimension in schema.dimensions:
        cells = _cells(data, dims[dimension.name], dimension, name)
        ascending = len(cells) == 1 or cells[1] > cells[0]
        run = np.arange(len(cells)) * (1 if ascending else -1) + cells[0]
        if not np.array_equal(cells, run):
            raise ValidationError(
                f"array {name}: coordinate {dims[dimension.name]} falls on cells {_shown(cells)}, not on "
                "consecutive cells; write_xarray writes one dense block",
                array=name,
                column=dimension.name,
            )
        low, high = int(cells.min()), int(cells.max())
        if low < dimension.low or high > dimension.high:
            raise ValidationError(
                f"array {name}: coordinate {dims[dimension.name]} falls on cells {low}:{high}, outside the "
                f"dimension's range {dimension.low}:{'*' if dimension.unbounded else dimension.high} (an array made by from_xarray ends "
                f"where its data did: create it from a schema with {dimension.name}={dimension.low}:* to "
                "write beyond)",
                array=name,
                column=dimension.name,
            )
        origin.append(low)
        flips.append(not ascending)
    values = {}
    for variable, array in data.data_vars.items():
        attribute = schema.spelling(str(variable))
        if not schema.has_attribute(attribute):
            raise ValidationError(
                f"array {name}: variable {variable} is no attribute of the array; attributes: "
                f"{', '.join(schema.attribute_names)}",
                array=name,
                column=str(variable),
            )
        if len(array.dims) != len(data.dims):
            raise ValidationError(
                f"array {name}: variable {variable} has dimensions {tuple(str(d) for d in array.dims)}, the "
                f"array {schema.dimension_names}; every variable needs all of them (as from_xarray asks)",
                array=name,
                column=attribute,
            )
        block = np.asarray(array.values)
        block = block[tuple(slice(None, None, -1) if flip else slice(None) for flip in flips)]
        missing = _missing(block)
        block = _whole_values(block, missing, schema.attribute(attribute).type)
        values[attribute] = np.ma.MaskedArray(block, mask=missing) if missing.any() else block
    return values, tuple(origin)


def _cells(data, dim: str, dimension: Dimension, name: str) -> np.ndarray:
    """The cells of the array's ``dimension`` that coordinate ``dim`` of ``data`` labels."""
    extent = int(data.sizes[dim])
    if dim not in data.coords:
        raise ValidationError(
            f"array {name}: dimension {dim} has no coordinate; give it one so its cells can be found",
            array=name,
            column=dimension.name,
        )
    where = f"array {name}, coordinate {dim}"
    scale = dimension.scale
    values = _aware_times(data, dim)
    if values is None:
        values = np.asarray(data.coords[dim].values)
    if values.dtype.kind == "M":
        if not isinstance(scale, TimeScale):
            raise ValidationError(
                f"{where}: times, but the dimension has no time scale", array=name, column=dim
            )
        if np.any(np.isnat(values)):
            raise ValidationError(f"{where}: holds NaT", array=name, column=dim)
        if np.datetime_data(values.dtype)[0] in ("Y", "M"):  # a year's or month's first instant
            values = values.astype("datetime64[s]")
        cells, first = scale.cells_of(values)
        if first is not None:
            raise ValidationError(
                f"{where}: {values[first]} labels no cell of the dimension ({scale.to_text()})",
                array=name,
                column=dim,
            )
        return cells
    if values.dtype.kind in "iu" and scale is None:
        return values.astype(np.int64)
    if values.dtype.kind in "fiu" and isinstance(scale, CoordinateScale):
        x = values.astype(np.float64)
        if not np.all(np.isfinite(x)):
            raise ValidationError(f"{where}: holds NaN or infinity", array=name, column=dim)
        cells = np.rint((x - scale.offset) / scale.step)
        tolerance = ULPS * np.spacing(np.maximum(np.abs(x), abs(scale.offset)))
        off = np.abs(scale.coordinates(cells.astype(np.int64)) - x) > tolerance
        if off.any() or np.any(np.abs(cells) > 2.0**62):
            position = int(np.flatnonzero(off)[0]) if off.any() else 0
            raise ValidationError(
                f"{where}: {x[position]!r} is no coordinate of the dimension ({scale.to_text()})",
                array=name,
                column=dim,
            )
        return cells.astype(np.int64)
    kind = "times" if isinstance(scale, TimeScale) else "numbers" if scale is not None else "integer cells"
    raise ValidationError(
        f"{where}: dtype {values.dtype} with {extent} value(s), but the dimension takes {kind}",
        array=name,
        column=dim,
    )


def _whole_values(block: np.ndarray, missing: np.ndarray, target: str) -> np.ndarray:
    """A float variable with NaN bound for an integer or bool attribute, as ``to_xarray`` gives one
    with empty cells (float64, NaN there), back as integers (bools) when every other value is one
    exactly; otherwise unchanged, for write_dense to refuse by name."""
    kind = numpy_dtype(target).kind
    if block.dtype.kind != "f" or kind not in "iub" or not missing.any():
        return block  # floats with no NaN are floats: refused for an integer attribute, as everywhere
    given = block[~missing]
    if not np.all(np.isfinite(given)) or np.any(np.abs(given) > 2.0**53) or np.any(given != np.trunc(given)):
        return block
    if kind == "b":
        return np.where(missing, 0, block).astype(bool) if np.all((given == 0) | (given == 1)) else block
    return np.where(missing, 0, block).astype(np.int64)


def _aware_times(data, dim: str) -> np.ndarray | None:
    """Time-zone-aware times (a pandas index xarray does not hold as datetime64) as their UTC
    instants, as ``insert`` reads aware timestamps; None for any other coordinate."""
    import pandas as pd

    index = data.indexes.get(dim)
    if isinstance(index, pd.DatetimeIndex) and index.tz is not None:
        return index.tz_convert(None).to_numpy()
    return None


def _shown(cells: np.ndarray) -> str:
    return ", ".join(str(int(c)) for c in cells[:4]) + (", ..." if len(cells) > 4 else "")
