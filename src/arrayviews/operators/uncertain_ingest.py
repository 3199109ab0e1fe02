"""Checking a batch of uncertain tuples and placing its copies (and fences) in cells.

Every check runs before anything is written and names the array, the column, the row and the value:
a missing or unknown column, a non-numeric or null value, NaN or infinity, a negative standard
deviation, a correlation outside (-1, 1), a mean outside the dimension range, a uniform value whose
low is above its high, a repeated id. Placement follows the array's storage layout
(``model.copy_layout``); store-mean also produces the batch's fence records. A batch whose copies or
fence records would exceed ``PLACEMENT_LIMIT`` rows (a sigma far wider than the array's cells) is
refused before they are allocated.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from arrayviews.kernels.fences import batch_fences, fence_capacity
from arrayviews.model.copy_layout import (
    STORE_ALL,
    STORE_MEAN,
    StorageLayout,
    copies_per_dimension,
    scheme_copies,
)
from arrayviews.model.errors import ValidationError
from arrayviews.model.types import accepts, first_misfit, misfit_reason, numpy_dtype
from arrayviews.model.uncertain import EXACT, GAUSSIAN, ID, UNIFORM, UncertainSchema, possible_range
from arrayviews.operators.ingest import to_arrow, whole_decimals
from arrayviews.storage import codec
from arrayviews.storage import uncertain_layout as ul
from arrayviews.storage.layout import null_filler


@dataclass
class TupleBatch:
    """A validated batch: ids (None until assigned), means, sigmas (n, d), correlations (n, p) and the
    value columns under their storage names."""

    ids: np.ndarray | None
    means: np.ndarray
    sigmas: np.ndarray
    corrs: np.ndarray
    values: dict[str, np.ndarray]
    nulls: dict[str, np.ndarray]

    @property
    def size(self) -> int:
        return len(self.means)


def _error(schema: UncertainSchema, column: str, message: str, value=None) -> ValidationError:
    return ValidationError(
        f"uncertain array {schema.name}, column {column}: {message}; nothing was written",
        array=schema.name,
        column=column,
        value=value,
    )


def _numeric(table: pa.Table, name: str, schema: UncertainSchema, integer: bool = False) -> np.ndarray:
    column = table.column(name)
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if column.null_count:
        row = int(np.flatnonzero(np.asarray(column.is_null()))[0])
        raise _error(schema, name, f"missing value (null) in row {row}")
    kind = column.type
    if integer:
        if pa.types.is_floating(kind) and pc.any(pc.is_nan(column)).as_py():
            # pandas holds None in a column of numbers as NaN (and the column as float64)
            row = int(np.flatnonzero(np.isnan(np.asarray(column, dtype=np.float64)))[0])
            raise _error(
                schema, name, f"missing value (NaN, as pandas stores None among numbers) in row {row}"
            )
        if not pa.types.is_integer(kind):
            raise _error(schema, name, f"ids must be integers, got {kind}", str(kind))
        values = np.asarray(column)
        if values.dtype.kind == "u" and len(values) and values.max() > np.iinfo(np.int64).max:
            raise _error(schema, name, f"id {values.max()} does not fit in int64", int(values.max()))
        return values.astype(np.int64)
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        # as an array's float64 attribute: decimals and anything else are refused by type
        raise _error(
            schema,
            name,
            f"values of type {kind} cannot be stored as float64 (give integers or floats)",
            str(kind),
        )
    values = np.asarray(column)
    misfit = first_misfit("float64", values)  # an integer float64 would round (above 2**53)
    if misfit is not None:
        value = values[misfit].item()
        raise _error(schema, name, f"{misfit_reason('float64', value)} (row {misfit})", value)
    values = values.astype(np.float64)
    bad = ~np.isfinite(values)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        value = float(values[row])
        shown = "NaN" if np.isnan(value) else repr(value)  # NaN is no missing value: say what it is
        raise _error(schema, name, f"value {shown} in row {row} is not a finite number", value)
    return values


def spelled_columns(names: list[str], expected: list[str]) -> list[str]:
    """``names`` as the array spells its input columns (names match without regard to case, as an
    array's columns do); a name it does not have stays as given, for the checks to name."""
    folded = {column.lower(): column for column in expected}
    return [name if name in expected else folded.get(name.lower(), name) for name in names]


def normalize_tuples(data: object, schema: UncertainSchema) -> TupleBatch:
    """Validate a batch (pandas, Arrow, dict of arrays or a Spark DataFrame) against ``schema``."""
    if hasattr(data, "toArrow") and hasattr(data, "sparkSession"):
        data = data.toArrow()
    table = to_arrow(data, schema.name, noun="uncertain array")
    expected = schema.input_columns()
    table = table.rename_columns(spelled_columns(table.column_names, expected))
    names = table.column_names
    if len(set(names)) != len(names):
        duplicate = next(n for n in names if names.count(n) > 1)
        raise _error(schema, duplicate, "the column appears twice (names match without regard to case)")
    unknown = [n for n in names if n not in expected]
    if unknown:
        raise _error(schema, unknown[0], f"unknown column; expected {', '.join(expected)}")
    optional = {ID} | {schema.correlation_column(p) for p in schema.correlations}
    optional |= {a.name for a in schema.attributes if a.kind == EXACT and a.nullable}
    missing = [c for c in expected if c not in names and c not in optional]
    if missing:
        raise _error(schema, missing[0], "missing column")
    n = table.num_rows
    ids = _numeric(table, ID, schema, integer=True) if ID in names else None
    if ids is not None and n:
        unique, counts = np.unique(ids, return_counts=True)
        if (counts > 1).any():
            repeated = int(unique[np.argmax(counts > 1)])
            again = int(np.flatnonzero(ids == repeated)[1])  # the row a statement's error points at
            raise _error(
                schema,
                ID,
                f"id {repeated} appears {int(counts[unique == repeated][0])} times in the batch (again in row {again})",
                repeated,
            )
    d = schema.ndim
    means = np.empty((n, d), dtype=np.float64)
    sigmas = np.empty((n, d), dtype=np.float64)
    for k, dimension in enumerate(schema.dimensions):
        mean = _numeric(table, dimension.name, schema)
        outside = (mean < dimension.low) | (mean >= dimension.high + 1)
        if outside.any():
            row = int(np.flatnonzero(outside)[0])
            raise _error(
                schema,
                dimension.name,
                f"mean {mean[row]} in row {row} is outside the dimension range [{dimension.low}, "
                f"{dimension.high + 1}) (cells {dimension.low}:{dimension.high})",
                float(mean[row]),
            )
        sigma_name = f"{dimension.name}_sigma"
        sigma = _numeric(table, sigma_name, schema)
        negative = sigma < 0
        if negative.any():
            row = int(np.flatnonzero(negative)[0])
            raise _error(
                schema,
                sigma_name,
                f"negative standard deviation {sigma[row]} in row {row}",
                float(sigma[row]),
            )
        means[:, k], sigmas[:, k] = mean, sigma
    corrs = np.zeros((n, len(schema.correlations)), dtype=np.float64)
    for q, pair in enumerate(schema.correlations):
        name = schema.correlation_column(pair)
        if name not in names:
            continue
        rho = _numeric(table, name, schema)
        bad = (rho <= -1.0) | (rho >= 1.0)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise _error(
                schema, name, f"correlation {rho[row]} in row {row} is outside (-1, 1)", float(rho[row])
            )
        corrs[:, q] = rho
    values: dict[str, np.ndarray] = {}
    nulls: dict[str, np.ndarray] = {}
    for attribute in schema.attributes:
        if attribute.kind == GAUSSIAN:
            values[attribute.name] = _numeric(table, attribute.name, schema)
            sigma_name = f"{attribute.name}_sigma"
            sigma = _numeric(table, sigma_name, schema)
            if (sigma < 0).any():
                row = int(np.flatnonzero(sigma < 0)[0])
                raise _error(
                    schema,
                    sigma_name,
                    f"negative standard deviation {sigma[row]} in row {row}",
                    float(sigma[row]),
                )
            values[sigma_name] = sigma
        elif attribute.kind == UNIFORM:
            low_name, high_name = f"{attribute.name}_low", f"{attribute.name}_high"
            low, high = _numeric(table, low_name, schema), _numeric(table, high_name, schema)
            if (low > high).any():
                row = int(np.flatnonzero(low > high)[0])
                raise _error(
                    schema,
                    high_name,
                    f"high {high[row]} is below low {low[row]} in row {row}",
                    float(high[row]),
                )
            values[low_name], values[high_name] = low, high
        else:
            values[attribute.name], mask = _exact_column(table, attribute, schema, n)
            if mask is not None:
                nulls[attribute.name] = mask
    return TupleBatch(ids, means, sigmas, corrs, values, nulls)


def _exact_column(table: pa.Table, attribute, schema: UncertainSchema, n: int):
    dtype = numpy_dtype(attribute.type)
    if attribute.name not in table.column_names:
        return codec.blank(dtype, n), (np.ones(n, dtype=bool) if n else None)
    column = table.column(attribute.name)
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_null(column.type):
        if not attribute.nullable:
            raise _error(
                schema, attribute.name, f"null values, but attribute {attribute.name} is not nullable"
            )
        return codec.blank(dtype, n), np.ones(n, dtype=bool)
    if not accepts(attribute.type, column.type):
        raise _error(
            schema,
            attribute.name,
            f"values of type {column.type} cannot be stored as {attribute.type}",
            str(column.type),
        )
    column = whole_decimals(
        column,
        attribute.type,
        lambda reason, value: _error(schema, attribute.name, reason, value),
    )
    mask = np.asarray(column.is_null()) if column.null_count else None
    if mask is not None and not attribute.nullable:
        row = int(np.flatnonzero(mask)[0])
        raise _error(
            schema, attribute.name, f"null in row {row}, but attribute {attribute.name} is not nullable"
        )
    if codec.is_text(dtype):  # any text, kept exactly (nulls hold "" under the mask)
        return codec.text_array(column).to_numpy(zero_copy_only=False), mask
    filled = column.fill_null(null_filler(column.type)) if mask is not None else column  # "" for text
    filled = filled.to_numpy(zero_copy_only=False)
    misfit = first_misfit(attribute.type, filled, None if mask is None else ~mask)
    if misfit is not None:
        value = filled[misfit].item()
        raise _error(schema, attribute.name, f"{misfit_reason(attribute.type, value)} (row {misfit})", value)
    return filled.astype(dtype, copy=False), mask


def possible_ranges(
    batch: TupleBatch, schema: UncertainSchema, sigmas: float
) -> tuple[np.ndarray, np.ndarray]:
    """First and last cells (n, d) of every tuple's possible range."""
    n, d = batch.means.shape
    first = np.empty((n, d), dtype=np.int64)
    last = np.empty((n, d), dtype=np.int64)
    for k, dimension in enumerate(schema.dimensions):
        first[:, k], last[:, k] = possible_range(
            batch.means[:, k], batch.sigmas[:, k], sigmas, dimension.low, dimension.high
        )
    return first, last


def mean_cells(batch: TupleBatch, schema: UncertainSchema) -> np.ndarray:
    highs = np.array([d.high for d in schema.dimensions], dtype=np.int64)
    return np.minimum(np.floor(batch.means).astype(np.int64), highs)


#: Rows (tuple copies and fence records) one insert or relayout may place: far above real batches
#: (200,000 SDSS-like tuples are 4.1 million copies under store-all), well below what exhausts the
#: driver's memory (each row holds about ten 8-byte columns, several times over while encoded).
PLACEMENT_LIMIT = 20_000_000


def check_placement(
    batch: TupleBatch, schema: UncertainSchema, layout: StorageLayout, first: np.ndarray, last: np.ndarray
) -> None:
    """Refuse a batch whose copies (store-all, store-multiple) or fence records (store-mean: the cells
    of the chunks its possible ranges touch) would exceed ``PLACEMENT_LIMIT`` rows, naming the tuple
    that needs the most and the sigma that makes it so, before anything is allocated."""
    if batch.size == 0:
        return
    cells = last.astype(np.float64) - first.astype(np.float64) + 1  # (n, d) cells of each possible range
    if layout.scheme == STORE_MEAN:
        dims = schema.dimensions
        origin = np.array([d.chunk_origin for d in dims], np.int64)
        length = np.array([d.chunk_length for d in dims], np.int64)
        lows = np.array([d.low for d in dims], np.int64)
        highs = np.array([d.high for d in dims], np.int64)
        rows = batch.size + fence_capacity(first, last, origin, length, lows, highs, PLACEMENT_LIMIT)
        what = "tuples and fence records, one per cell of the box the possible ranges cover in a chunk"
        advice = "give smaller sigmas (positions are in cells), split the batch, or use smaller chunks"
    else:
        steps = (0,) * schema.ndim if layout.scheme == STORE_ALL else layout.steps
        per_tuple = np.ones(batch.size)
        for k, step in enumerate(steps):
            per_tuple *= copies_per_dimension(first[:, k], last[:, k], int(step)).astype(np.float64)
        rows = float(per_tuple.sum())
        what = "tuple copies"
        advice = (
            "give smaller sigmas (positions are in cells), split the batch, or store it under "
            "store-multiple with a larger step"
        )
    if rows <= PLACEMENT_LIMIT:
        return
    row = int(np.argmax(np.prod(cells, axis=1)))
    k = int(np.argmax(cells[row]))
    dimension = schema.dimension_names[k]
    sigma = float(batch.sigmas[row, k])
    raise _error(
        schema,
        ul.sigma_column(dimension),
        f"the batch would store {rows:.3g} rows ({what}) under {layout.describe()}, more than "
        f"{PLACEMENT_LIMIT:,} per insert or relayout; row {row} (id {int(batch.ids[row])}) has the widest "
        f"possible range, {cells[row, k]:.3g} cells along {dimension} for sigma {sigma:g}: {advice}",
        sigma,
    )


def place(
    batch: TupleBatch, schema: UncertainSchema, layout: StorageLayout
) -> tuple[ul.Rows, ul.Rows | None]:
    """The rows to store for a batch with assigned ids: tuple copies, and fence rows (store-mean)."""
    first, last = possible_ranges(batch, schema, layout.sigmas)
    check_placement(batch, schema, layout, first, last)
    centre = mean_cells(batch, schema)
    owner, cells, home = scheme_copies(layout.scheme, first, last, centre, layout.steps or ())
    columns: dict[str, np.ndarray] = {
        ul.ID: batch.ids[owner],
        ul.ROLE: np.where(home, ul.ROLE_HOME, ul.ROLE_REPLICA).astype(np.int32),
    }
    for k, name in enumerate(schema.dimension_names):
        columns[ul.mean_column(name)] = batch.means[owner, k]
        columns[ul.sigma_column(name)] = batch.sigmas[owner, k]
        columns[ul.first_column(name)] = first[owner, k]
        columns[ul.last_column(name)] = last[owner, k]
    for q, pair in enumerate(schema.correlations):
        columns[schema.correlation_column(pair)] = batch.corrs[owner, q]
    for name, column in batch.values.items():
        columns[name] = column[owner]
    nulls = {name: mask[owner] for name, mask in batch.nulls.items()}
    rows = ul.Rows(cells, columns, nulls)
    fences = None
    if layout.scheme == STORE_MEAN:
        fences = fence_rows(first, last, centre, schema)
    return rows, fences


def fence_rows(first: np.ndarray, last: np.ndarray, centre: np.ndarray, schema: UncertainSchema) -> ul.Rows:
    """Fence records of a batch as rows (role 2): per covered cell, the lowest and highest mean cell."""
    dims = schema.dimensions
    cells, low, high = batch_fences(
        first,
        last,
        centre,
        np.array([d.chunk_origin for d in dims], np.int64),
        np.array([d.chunk_length for d in dims], np.int64),
        np.array([d.low for d in dims], np.int64),
        np.array([d.high for d in dims], np.int64),
    )
    m = len(cells)
    storage = ul.storage_schema(schema)
    columns: dict[str, np.ndarray] = {}
    for attribute in storage.attributes:
        columns[attribute.name] = codec.blank(numpy_dtype(attribute.type), m)  # "" for text
    columns[ul.ROLE][:] = ul.ROLE_FENCE
    for k, name in enumerate(schema.dimension_names):
        columns[ul.first_column(name)] = low[:, k]
        columns[ul.last_column(name)] = high[:, k]
    return ul.Rows(cells, columns, {})
