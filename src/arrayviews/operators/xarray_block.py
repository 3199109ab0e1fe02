"""Reading an ``xarray.DataArray`` or ``Dataset`` as a dense block of cells: its schema (dimensions
from the coordinates, attributes from the variables' dtypes), its values and where it starts.

Integer coordinates must be consecutive: they are the cells. Float coordinates must be evenly spaced
(ascending or descending): they become a dimension with a coordinate scale (offset + cell * step),
read exactly from the attributes ``A.to_xarray()`` writes, or else found from the values (see
``_scale_of``). A dimension without a coordinate starts at 0. NaN is xarray's missing value: a cell is empty
where every variable is missing; a variable missing where another has a value becomes a nullable
attribute (``v:float64 NULL``) holding nulls there.
"""

from __future__ import annotations

import numpy as np

from arrayviews.model.errors import SchemaError, ValidationError
from arrayviews.model.names import check_identifier
from arrayviews.model.schema import ArraySchema, Attribute, CoordinateScale, Dimension, default_chunk_length
from arrayviews.model.time_scale import TimeScale
from arrayviews.model.types import type_of_dtype


def xarray_block(data: object, name: str) -> tuple[ArraySchema, dict[str, np.ndarray], tuple[int, ...]]:
    """The schema, the values per attribute (each masked where it is missing) and the origin of ``data``."""
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
    dimensions = [_dimension(dataset, str(dim), int(dataset.sizes[dim]), len(dims), name) for dim in dims]
    origin = [d.low for d in dimensions]
    values, gaps = {}, {}
    for variable_name, variable in dataset.data_vars.items():
        block = np.asarray(variable.values)
        if block.dtype.kind == "M":
            block = block.astype("datetime64[ns]")
        values[str(variable_name)] = block
        gaps[str(variable_name)] = _missing(block)
    empty = np.logical_and.reduce(list(gaps.values()))
    # a variable missing where another has a value: a nullable attribute, null in those cells
    attributes = [
        Attribute(key, _attribute_type(block, key, name), nullable=bool((gaps[key] & ~empty).any()))
        for key, block in values.items()
    ]
    schema = ArraySchema(name, tuple(attributes), tuple(dimensions))
    masked = {k: np.ma.MaskedArray(v, mask=gaps[k]) if gaps[k].any() else v for k, v in values.items()}
    return schema, masked, tuple(origin)


def _attribute_type(block: np.ndarray, variable: str, name: str) -> str:
    """The attribute type of a variable's values, or an error naming the variable."""
    try:
        return type_of_dtype(block.dtype)
    except SchemaError as error:
        raise ValidationError(
            f"array {name}: variable {variable}: {error}", array=name, column=variable, value=str(block.dtype)
        ) from None


def _missing(block: np.ndarray) -> np.ndarray:
    """Where ``block`` holds xarray's missing value: NaN (floats), NaT (times), None or NaN (objects,
    e.g. the strings ``to_xarray`` gives, None in empty cells)."""
    if block.dtype.kind == "f":
        return np.isnan(block)
    if block.dtype.kind == "M":
        return np.isnat(block)
    if block.dtype.kind == "O":
        absent = np.frompyfunc(lambda v: v is None or (isinstance(v, float) and v != v), 1, 1)
        return absent(block).astype(bool)
    return np.zeros(block.shape, bool)


#: Evenly spaced float coordinates may deviate from ``x0 + k * step`` by this many units in the last
#: place of their largest magnitude (in their own dtype): the rounding of the values given plus that
#: of the recomputation.
ULPS = 8
#: The step must be at least this many units in the last place of the largest magnitude, so that the
#: coordinates are distinct and ordered when recomputed.
MIN_STEP_ULPS = 1024


def _dimension(dataset, dim: str, extent: int, ndim: int, name: str) -> Dimension:
    """The dimension of ``dim``: integer cells from integer coordinates, a scale from float ones."""
    if extent < 1:
        raise ValidationError(
            f"array {name}: dimension {dim} is empty; arrayviews dimensions hold at least one cell",
            array=name,
            column=dim,
        )
    chunk = default_chunk_length(extent, ndim)
    if dim not in dataset.coords:
        return Dimension(dim, 0, extent - 1, chunk)
    coordinate = dataset.coords[dim]
    values = np.asarray(coordinate.values)
    shown = ", ".join(str(v) for v in values[:3]) + (", ..." if extent > 3 else "")
    if values.dtype.kind in "iu":
        as_integers = values.astype(np.int64)
        too_big = values.dtype.kind == "u" and values.max() > np.iinfo(np.int64).max
        if too_big or not np.array_equal(as_integers, as_integers[0] + np.arange(extent)):
            raise ValidationError(
                f"array {name}: coordinate {dim} ({shown}) is not consecutive integers; integer coordinates "
                f"are cells and must be consecutive (give {dim} float coordinates for a scale, e.g. "
                f"da.assign_coords({dim}=da.{dim}.astype(float)))",
                array=name,
                column=dim,
            )
        return Dimension(dim, int(as_integers[0]), int(as_integers[0]) + extent - 1, chunk)
    if values.dtype.kind == "M":
        return Dimension(dim, 0, extent - 1, chunk, scale=_time_scale_of(values, dim, name, shown))
    if values.dtype.kind != "f":
        raise ValidationError(
            f"array {name}: coordinate {dim} ({shown}) has dtype {values.dtype}; arrayviews takes integer "
            f"coordinates (cells) or evenly spaced float coordinates (a scale): keep {dim} values in a variable",
            array=name,
            column=dim,
        )
    if not np.all(np.isfinite(values)):
        raise ValidationError(
            f"array {name}: coordinate {dim} ({shown}) holds NaN or infinity", array=name, column=dim
        )
    unit = str(coordinate.attrs.get("units", ""))
    try:
        low, scale = _scale_of(values, coordinate.attrs, unit, dim, name, shown)
    except SchemaError as error:  # the unit or the numbers
        raise ValidationError(f"array {name}: coordinate {dim}: {error}", array=name, column=dim) from None
    return Dimension(dim, low, low + extent - 1, chunk, scale=scale)


def _time_scale_of(values: np.ndarray, dim: str, name: str, shown: str) -> TimeScale:
    """The time scale whose labels of cells 0..n-1 are exactly ``values`` (datetime64)."""
    if np.any(np.isnat(values)):
        raise ValidationError(f"array {name}: coordinate {dim} ({shown}) holds NaT", array=name, column=dim)
    unit, count = np.datetime_data(values.dtype)
    if unit in ("Y", "M"):
        raise ValidationError(
            f"array {name}: coordinate {dim} ({shown}) is in {'years' if unit == 'Y' else 'months'}, which are not "
            f"a fixed length; arrayviews time dimensions step by days or finer: keep {dim} values in a variable",
            array=name,
            column=dim,
        )
    counts = [int(c) for c in values.astype(np.int64)]  # Python integers: no wrap in the differences
    steps = {b - a for a, b in zip(counts, counts[1:], strict=False)}
    first = np.datetime64(counts[0] * count, unit)
    try:
        if len(counts) == 1:
            return TimeScale.of(np.timedelta64(1, "D"), first)
        if steps == {0}:
            raise ValidationError(
                f"array {name}: coordinate {dim} ({shown}) holds one time for every cell; arrayviews time "
                f"dimensions have evenly spaced, distinct times",
                array=name,
                column=dim,
            )
        if len(steps) != 1:
            position = next(
                i for i in range(1, len(counts)) if counts[i] - counts[i - 1] != counts[1] - counts[0]
            )
            raise ValidationError(
                f"array {name}: coordinate {dim} ({shown}) is not evenly spaced: {values[position]} at position "
                f"{position} does not follow the step {values[1] - values[0]} of the first two; arrayviews time "
                f"dimensions have evenly spaced times: keep {dim} values in a variable",
                array=name,
                column=dim,
            )
        return TimeScale.of(np.timedelta64(steps.pop() * count, unit), first)
    except SchemaError as error:
        raise ValidationError(
            f"array {name}: coordinate {dim} ({shown}): {error}", array=name, column=dim
        ) from None


def _scale_of(
    values: np.ndarray, attrs, unit: str, dim: str, name: str, shown: str
) -> tuple[int, CoordinateScale]:
    """The first cell and the scale whose coordinates are ``values``.

    A scale written by to_xarray (exact step and offset in the attributes) is taken when it gives the
    values exactly, with the cells it gives them at. Otherwise the cells are 0..n-1 with offset
    ``values[0]``, and the step is one that reproduces the values exactly if one near
    ``(last - first) / (n - 1)`` does, else that quotient when every value lies within ``ULPS`` units
    in the last place (of the largest magnitude) of ``offset + k * step``.
    """
    x = values.astype(np.float64)
    extent = len(x)
    cells = np.arange(extent, dtype=np.int64)
    if "arrayviews_step" in attrs and "arrayviews_offset" in attrs:
        try:
            written = CoordinateScale(
                float(attrs["arrayviews_step"]), float(attrs["arrayviews_offset"]), unit
            )
            first = round((x[0] - written.offset) / written.step)
            if np.array_equal(written.coordinates(first + cells), x):
                return first, written
        except (TypeError, ValueError, OverflowError, SchemaError):
            pass  # attributes that do not describe these values: read the values alone
    if extent == 1:
        return 0, CoordinateScale(1.0, float(x[0]), unit)
    estimate = float((x[-1] - x[0]) / (extent - 1))
    magnitude = float(np.max(np.abs(values)))
    ulp = float(np.spacing(values.dtype.type(magnitude)))
    if estimate == 0.0 or not abs(estimate) >= MIN_STEP_ULPS * ulp:
        raise ValidationError(
            f"array {name}: coordinate {dim} ({shown}) is not evenly spaced: its step "
            f"{float(estimate)!r} is not resolved by {values.dtype} at magnitude {magnitude!r}",
            array=name,
            column=dim,
        )
    candidates = [estimate, float(x[1] - x[0])]
    up, down = estimate, estimate
    for _ in range(4):
        up, down = float(np.nextafter(up, np.inf)), float(np.nextafter(down, -np.inf))
        candidates += [up, down]
    for step in candidates:
        if step != 0.0 and np.array_equal(CoordinateScale(step, float(x[0])).coordinates(cells), x):
            return 0, CoordinateScale(step, float(x[0]), unit)
    scale = CoordinateScale(estimate, float(x[0]), unit)
    deviation = np.abs(scale.coordinates(cells) - x)
    worst = int(np.argmax(deviation))
    if deviation[worst] > ULPS * ulp:
        raise ValidationError(
            f"array {name}: coordinate {dim} ({shown}) is not evenly spaced: value {float(x[worst])!r} at "
            f"position {worst} is {deviation[worst]:.3g} from {scale.coordinate(worst)!r} on the step "
            f"{float(estimate)!r} (allowed: {ULPS} units in the last place, {ULPS * ulp:.3g}); arrayviews "
            f"dimensions have evenly spaced coordinates: keep {dim} values in a variable",
            array=name,
            column=dim,
        )
    return 0, scale
