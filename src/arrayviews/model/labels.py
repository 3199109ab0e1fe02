"""Selecting cells by coordinate labels, as xarray's ``sel``: ``A.sel(ra=slice(10.0, 12.5), t=3)``.

A dimension with a coordinate scale is addressed by its real coordinates (``offset + cell * step``,
the floats ``to_xarray`` shows); one without a scale by its integer cells. As in xarray's label
slicing, a slice includes **both** ends and follows the order of the coordinates: ``slice(lo, hi)``
on ascending coordinates, ``slice(hi, lo)`` on descending ones (a negative step). The cells whose
coordinate lies within the slice are found by bisection over the cells with the same float formula
``to_xarray`` uses, so a bound equal to a shown coordinate selects exactly that cell. A single label
selects the cell whose coordinate equals it exactly and keeps the dimension (as ``A[3, :]`` does).
Selections holding no cell, and labels in the wrong order, are errors naming the dimension.
"""

from __future__ import annotations

import bisect
import math
import numbers
from collections.abc import Callable, Mapping

from arrayviews.model.errors import ValidationError
from arrayviews.model.schema import ArraySchema, Dimension


def label_box(schema: ArraySchema, labels: Mapping[str, object]) -> dict[str, tuple[int, int]]:
    """The inclusive cell box ``{dimension: (low, high)}`` that ``labels`` select (named dimensions only)."""
    box = {}
    for name, label in labels.items():
        dimension = schema.dimension(name)
        where = f"array {schema.name}, dimension {name}"
        if isinstance(label, slice):
            if label.step is not None:
                raise ValidationError(
                    f"{where}: label slices take no step (got {label.step!r}); use regrid to coarsen",
                    array=schema.name,
                    column=name,
                )
            box[name] = _slice_cells(dimension, label, where, schema.name)
        else:
            cell = _exact_cell(dimension, _number(label, where, schema.name, dimension), where, schema.name)
            box[name] = (cell, cell)
    return box


def _number(value: object, where: str, array: str, dimension: Dimension) -> float | int:
    wanted = "numbers" if dimension.scale is not None else "integer cells"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValidationError(
            f"{where}: labels are {wanted}, got {value!r}", array=array, column=dimension.name
        )
    if dimension.scale is None:
        if not isinstance(value, numbers.Integral) and not float(value).is_integer():
            raise ValidationError(
                f"{where}: the dimension has no coordinate scale, so labels are integer cells; got {value!r}",
                array=array,
                column=dimension.name,
            )
        return int(value)
    if math.isnan(float(value)):
        raise ValidationError(f"{where}: a label may not be NaN", array=array, column=dimension.name)
    return float(value)


def _label(dimension: Dimension) -> Callable[[int], float | int]:
    """The coordinate label of a cell (its scaled coordinate, or the cell itself)."""
    scale = dimension.scale
    return (lambda cell: cell) if scale is None else scale.coordinate


def _ascending(dimension: Dimension) -> bool:
    return dimension.scale is None or dimension.scale.step > 0


def _first(low: int, high: int, holds: Callable[[int], bool]) -> int:
    """The first index of ``low..high`` where the monotone (false, then true) ``holds`` is true, or
    ``high + 1``: a bisection over the range."""
    return low + bisect.bisect_left(range(low, high + 1), True, key=holds)


def _slice_cells(dimension: Dimension, selection: slice, where: str, array: str) -> tuple[int, int]:
    label = _label(dimension)
    start = None if selection.start is None else _number(selection.start, where, array, dimension)
    stop = None if selection.stop is None else _number(selection.stop, where, array, dimension)
    ascending = _ascending(dimension)
    if start is not None and stop is not None and (start > stop if ascending else start < stop):
        order = "ascend" if ascending else "descend"
        raise ValidationError(
            f"{where}: the coordinates {order}, so a label slice runs from the "
            f"{'smaller' if ascending else 'larger'} label to the {'larger' if ascending else 'smaller'}; "
            f"got slice({start!r}, {stop!r})",
            array=array,
            column=dimension.name,
        )

    # Along the cells, "past start" turns from false to true and "past stop" likewise.
    def past_start(cell: int) -> bool:
        return start is None or (label(cell) >= start if ascending else label(cell) <= start)

    def past_stop(cell: int) -> bool:
        return stop is not None and (label(cell) > stop if ascending else label(cell) < stop)

    low = _first(dimension.low, dimension.high, past_start)
    high = _first(dimension.low, dimension.high, past_stop) - 1
    if low > high:
        first, last = label(dimension.low), label(dimension.high)
        raise ValidationError(
            f"{where}: slice({start!r}, {stop!r}) holds no coordinate of the dimension "
            f"(its coordinates run from {first!r} to {last!r}; label slices include both ends)",
            array=array,
            column=dimension.name,
        )
    return low, high


def _exact_cell(dimension: Dimension, value: float | int, where: str, array: str) -> int:
    label = _label(dimension)
    ascending = _ascending(dimension)
    cell = _first(
        dimension.low, dimension.high, lambda c: label(c) >= value if ascending else label(c) <= value
    )
    if cell <= dimension.high and label(cell) == value:
        return cell
    near = [c for c in (cell - 1, cell) if dimension.low <= c <= dimension.high]
    nearest = min(near, key=lambda c: abs(label(c) - value))
    raise ValidationError(
        f"{where}: no cell has the coordinate {value!r}; the nearest is {label(nearest)!r} (cell {nearest}); "
        "use a slice for a range",
        array=array,
        column=dimension.name,
    )
