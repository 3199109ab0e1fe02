"""Reading an ``xarray.DataArray`` or ``Dataset`` as a dense block of cells: its schema (dimensions
from the coordinates, attributes from the variables' dtypes), its values and where it starts.

Coordinates must be consecutive integers (step 1): arrayviews dimensions are integer cell
coordinates, so ``A.to_xarray()`` gives exactly such coordinates and reading it back gives the same
array. A dimension without a coordinate starts at 0. NaN is xarray's missing value: a cell is empty
where every variable is NaN, and variables must agree on where they are missing.
"""

from __future__ import annotations

import numpy as np

from arrayviews.model.errors import ValidationError
from arrayviews.model.names import check_identifier
from arrayviews.model.schema import ArraySchema, Attribute, Dimension, default_chunk_length
from arrayviews.model.types import type_of_dtype


def xarray_block(data: object, name: str) -> tuple[ArraySchema, dict[str, np.ndarray], tuple[int, ...]]:
    """The schema, the (masked where missing) values per attribute and the origin of ``data``."""
    try:
        import xarray as xr
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("from_xarray needs xarray: pip install xarray") from error
    check_identifier(name, "array")
    if isinstance(data, xr.DataArray):
        dataset = data.to_dataset(name=data.name if data.name is not None else "value")
    elif isinstance(data, xr.Dataset):
        dataset = data
    else:
        raise ValidationError(f"from_xarray takes an xarray DataArray or Dataset, got {type(data).__name__}")
    if not dataset.data_vars:
        raise ValidationError(f"array {name}: the xarray object has no data variables", array=name)
    dims = list(next(iter(dataset.data_vars.values())).dims)
    for variable_name, variable in dataset.data_vars.items():
        if list(variable.dims) != dims:
            raise ValidationError(
                f"array {name}: variable {variable_name} has dimensions {variable.dims}, the first has {tuple(dims)}; "
                "every variable needs the same dimensions in the same order",
                array=name,
                column=str(variable_name),
            )
    dimensions, origin = [], []
    for dim in dims:
        extent = int(dataset.sizes[dim])
        low = _first_coordinate(dataset, str(dim), extent, name)
        dimensions.append(Dimension(str(dim), low, low + extent - 1, default_chunk_length(extent, len(dims))))
        origin.append(low)
    attributes, values = [], {}
    missing = None
    for variable_name, variable in dataset.data_vars.items():
        block = np.asarray(variable.values)
        if block.dtype.kind == "M":
            block = block.astype("datetime64[ns]")
        attributes.append(Attribute(str(variable_name), type_of_dtype(block.dtype)))
        gaps = np.isnan(block) if block.dtype.kind == "f" else np.zeros(block.shape, bool)
        if block.dtype.kind == "M":
            gaps = np.isnat(block)
        if missing is None:
            missing = gaps
        elif not np.array_equal(missing, gaps):
            raise ValidationError(
                f"array {name}: variable {variable_name} is missing (NaN) in other cells than the first "
                "variable; arrayviews cells are empty for every attribute at once",
                array=name,
                column=str(variable_name),
            )
        values[str(variable_name)] = block
    schema = ArraySchema(name, tuple(attributes), tuple(dimensions))
    masked = {k: np.ma.MaskedArray(v, mask=missing) if missing.any() else v for k, v in values.items()}
    return schema, masked, tuple(origin)


def _first_coordinate(dataset, dim: str, extent: int, name: str) -> int:
    if dim not in dataset.coords:
        return 0
    coordinate = np.asarray(dataset.coords[dim].values)
    if coordinate.dtype.kind in "iu" or (
        coordinate.dtype.kind == "f"
        and np.all(np.isfinite(coordinate))
        and np.all(coordinate == np.round(coordinate))
    ):
        as_integers = coordinate.astype(np.int64)
    else:
        as_integers = None
    if as_integers is None or not np.array_equal(as_integers, as_integers[0] + np.arange(extent)):
        shown = ", ".join(str(v) for v in coordinate[:3]) + (", ..." if extent > 3 else "")
        raise ValidationError(
            f"array {name}: coordinate {dim} ({shown}) is not consecutive integers; arrayviews dimensions "
            f"are integer cell coordinates: give {dim} integer coordinates (e.g. "
            f"da.assign_coords({dim}=range({extent}))) and keep the physical values in a variable",
            array=name,
            column=dim,
        )
    return int(as_integers[0])
