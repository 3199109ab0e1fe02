"""numpy-style indexing of arrays in dimension coordinates: ``A[0:10, 5:20]``, ``A[3, :]``, ``A[..., 2]``.

Indices are **dimension coordinates**, not positions: on ``[i=1:100:10]``, ``A[1:3]`` is cells 1 and 2.
Slices are half-open like numpy's (``start`` included, ``stop`` excluded), an open end means the end of
the dimension, and a slice reaching past the range is clipped to it (as numpy clips); a slice holding no
coordinate of the range is an error (arrays have no empty dimensions). Negative numbers are
coordinates too (never counted from the end: dimensions may have negative coordinates). An integer
selects one coordinate and **drops nothing**: ``A[3, :]`` keeps dimension ``i`` with the range 3:3, so
the result is still an array with every dimension and its real coordinates. Steps other than 1 are
refused.
"""

from __future__ import annotations

import numbers

from arrayviews.model.errors import ValidationError
from arrayviews.model.schema import ArraySchema


def index_box(schema: ArraySchema, key: object) -> dict[str, tuple[int, int]]:
    """The inclusive box ``{dimension: (low, high)}`` that ``key`` selects (every dimension named)."""
    items = list(key) if isinstance(key, tuple) else [key]
    ellipses = sum(item is Ellipsis for item in items)
    if ellipses > 1:
        raise ValidationError(f"array {schema.name}: an index may hold one '...' only", array=schema.name)
    if ellipses:
        at = next(k for k, item in enumerate(items) if item is Ellipsis)
        items[at : at + 1] = [slice(None)] * (schema.ndim - len(items) + 1)
    if len(items) > schema.ndim:
        raise ValidationError(
            f"array {schema.name} has {schema.ndim} dimension(s) ({', '.join(schema.dimension_names)}); "
            f"the index has {len(items)}",
            array=schema.name,
            value=len(items),
        )
    items += [slice(None)] * (schema.ndim - len(items))
    box = {}
    for dimension, item in zip(schema.dimensions, items, strict=True):
        where = f"array {schema.name}, dimension {dimension.name}"
        if isinstance(item, slice):
            if item.step not in (None, 1):
                raise ValidationError(
                    f"{where}: slices take no step (got {item.step}); use regrid to coarsen",
                    array=schema.name,
                    column=dimension.name,
                    value=item.step,
                )
            start = (
                dimension.low
                if item.start is None
                else _coordinate(item.start, where, schema, dimension.name)
            )
            stop = (
                dimension.high + 1
                if item.stop is None
                else _coordinate(item.stop, where, schema, dimension.name)
            )
            low, high = max(start, dimension.low), min(stop - 1, dimension.high)
            if low > high:
                raise ValidationError(
                    f"{where}: the slice {start}:{stop} holds no coordinate of the range "
                    f"{dimension.low}:{'*' if dimension.unbounded else dimension.high} (slices are half-open, in dimension coordinates)",
                    array=schema.name,
                    column=dimension.name,
                    value=(start, stop),
                )
        else:
            low = high = _coordinate(item, where, schema, dimension.name)
            if not dimension.low <= low <= dimension.high:
                raise ValidationError(
                    f"{where}: coordinate {low} is outside the range {dimension.low}:{'*' if dimension.unbounded else dimension.high}",
                    array=schema.name,
                    column=dimension.name,
                    value=low,
                )
        box[dimension.name] = (low, high)
    return box


def _coordinate(value: object, where: str, schema: ArraySchema, dimension: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValidationError(
            f"{where}: indices are integer coordinates or slices of them, got {value!r}",
            array=schema.name,
            column=dimension,
            value=repr(value),
        )
    return int(value)
