"""The positional equi-join: cells present in both arrays, with the attributes of both."""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa

from arrayviews.execution.engine import Engine
from arrayviews.model.errors import ValidationError
from arrayviews.model.schema import ArraySchema, Dimension
from arrayviews.operators.cells import cells_to_fragment_table
from arrayviews.operators.cellwise import subarray
from arrayviews.operators.rechunk import fragments_to_grid
from arrayviews.operators.source import ComputedSource, Source
from arrayviews.storage import layout


def join_schema(left: ArraySchema, right: ArraySchema) -> ArraySchema:
    if left.dimension_names != right.dimension_names:
        raise ValidationError(
            f"join needs the same dimensions: {left.name} has {', '.join(left.dimension_names)}, "
            f"{right.name} has {', '.join(right.dimension_names)}"
        )
    clash = set(left.attribute_names) & set(right.attribute_names)
    if clash:
        name = sorted(clash)[0]
        raise ValidationError(
            f"join of {left.name} and {right.name}: both have an attribute named {name!r}; "
            "rename one first (project, or apply a copy under a new name)"
        )
    dimensions = []
    for a, b in zip(left.dimensions, right.dimensions, strict=True):
        low, high = max(a.low, b.low), min(a.high, b.high)
        if low > high:
            raise ValidationError(
                f"join of {left.name} and {right.name}: dimension {a.name} ranges do not overlap"
            )
        if a.scale is not None and b.scale is not None and a.scale != b.scale:
            raise ValidationError(
                f"join of {left.name} and {right.name}: dimension {a.name} has the coordinate scale "
                f"{a.scale.to_text()} in {left.name} and {b.scale.to_text()} in {right.name}; cells would "
                "pair up at different coordinates (regrid, or store one with the other's scale)"
            )
        scale = a.scale if a.scale is not None else b.scale  # a side without a scale is in cells
        dimensions.append(Dimension(a.name, low, high, a.chunk_length, a.chunk_origin, scale))
    return ArraySchema(left.name, left.attributes + right.attributes, tuple(dimensions))


def _keys(cells: pa.Table, out: ArraySchema) -> tuple[np.ndarray, np.ndarray]:
    """Row-major keys of the cells inside ``out``'s range, and which rows those are.

    All cells belong to one chunk, so keys relative to their smallest corner fit in int64.
    """
    coords = np.stack([np.asarray(cells.column(d)) for d in out.dimension_names], axis=1).reshape(
        -1, out.ndim
    )
    low = np.array([d.low for d in out.dimensions])
    high = np.array([d.high for d in out.dimensions])
    inside = np.flatnonzero(np.all((coords >= low) & (coords <= high), axis=1))
    if len(inside) == 0:
        return np.zeros(0, dtype=np.int64), inside
    local = coords[inside] - coords[inside].min(axis=0)
    span = tuple(int(x) + 1 for x in local.max(axis=0))
    return np.ravel_multi_index(tuple(local.T), span).astype(np.int64), inside


def _join_chunk(
    left_rows: pa.Table, right_rows: pa.Table, left: ArraySchema, right: ArraySchema, out: ArraySchema
) -> pa.Table | None:
    if left_rows.num_rows == 0 or right_rows.num_rows == 0:
        return None
    left_cells = layout.fragments_to_cells(left_rows.select(layout.fragment_schema(left).names), left)
    right_cells = layout.fragments_to_cells(right_rows.select(layout.fragment_schema(right).names), right)
    both = pa.concat_tables(
        [left_cells.select(list(out.dimension_names)), right_cells.select(list(out.dimension_names))]
    )
    keys, inside = _keys(both, out)
    n_left = left_cells.num_rows
    left_mask = inside < n_left
    left_keys, left_rows_idx = keys[left_mask], inside[left_mask]
    right_keys, right_rows_idx = keys[~left_mask], inside[~left_mask] - n_left
    _, li, ri = np.intersect1d(left_keys, right_keys, assume_unique=True, return_indices=True)
    if len(li) == 0:
        return None
    taken_left = left_cells.take(pa.array(left_rows_idx[li]))
    taken_right = right_cells.take(pa.array(right_rows_idx[ri]))
    columns = {d: taken_left.column(d) for d in out.dimension_names}
    for name in left.attribute_names:
        columns[name] = taken_left.column(name)
    for name in right.attribute_names:
        columns[name] = taken_right.column(name)
    return cells_to_fragment_table(pa.table(columns), out)


def join(left: Source, right: Source, engine: Engine) -> ComputedSource:
    """Cells non-empty in both arrays (same dimension names), with both arrays' attributes."""
    out = join_schema(left.schema, right.schema)
    right_schema = right.schema
    right_frame = right.data(engine)
    if not left.schema.same_grid(right.schema):
        # Bring the right array onto the left's chunk grid, cut to the common range.
        cut = subarray(right, engine, {d.name: (d.low, d.high) for d in out.dimensions})
        right_schema = right.schema.with_dimensions(out.dimensions)
        right_frame = fragments_to_grid(engine, cut.data(engine), cut.schema, right_schema)
    keys = layout.chunk_columns(out)
    function = functools.partial(_join_chunk, left=left.schema, right=right_schema, out=out)
    frame = engine.cogroup(left.data(engine), right_frame, keys, function, layout.fragment_schema(out))
    return ComputedSource(out, frame, engine=engine)
