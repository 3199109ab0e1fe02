"""Selecting cells by coordinate labels, as xarray's ``sel``: ``A.sel(ra=slice(10.0, 12.5), t=3)``.

A dimension with a coordinate scale is addressed by its real coordinates (``offset + cell * step``,
the floats ``to_xarray`` shows); one without a scale by its integer cells. As in xarray's label
slicing, a slice includes **both** ends and follows the order of the coordinates: ``slice(lo, hi)``
on ascending coordinates, ``slice(hi, lo)`` on descending ones (a negative step). The cells whose
coordinate lies within the slice are found by bisection over the cells with the same float formula
``to_xarray`` uses, so a bound equal to a shown coordinate selects exactly that cell. A single label
selects the cell whose coordinate equals it exactly and keeps the dimension (as ``A[3, :]`` does).
A dimension with a time scale takes times (ISO text, ``datetime``, ``numpy.datetime64``,
``pandas.Timestamp``), compared exactly as integer nanoseconds.
Selections holding no cell, and labels in the wrong order, are errors naming the dimension.
"""

from __future__ import annotations

import bisect
import datetime as dt
import math
import numbers
import re
from collections.abc import Callable, Mapping

import numpy as np

from arrayviews.model.errors import SchemaError, ValidationError
from arrayviews.model.schema import ArraySchema, Dimension
from arrayviews.model.time_scale import UNIT_WORDS, TimeScale, period_nanoseconds


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
        elif isinstance(dimension.scale, TimeScale):
            box[name] = _period_cells(dimension, label, where, schema.name)
        else:
            value = _number(label, where, schema.name, dimension)
            cell = _exact_cell(dimension, value, where, schema.name, repr(value))
            box[name] = (cell, cell)
    return box


def _period_cells(dimension: Dimension, label: object, where: str, array: str) -> tuple[int, int]:
    """The cells a single time label selects: the one at an instant, or every cell within the
    period that ISO text of a coarser precision names ('2026-01-02' on an hourly axis: that day)."""
    first = _number(label, where, array, dimension)
    last = _number(label, where, array, dimension, end=True)
    if first == last:
        cell = _exact_cell(dimension, first, where, array, repr(label))
        return cell, cell
    ascending = _ascending(dimension)
    low, high = _cells_between(dimension, first if ascending else last, last if ascending else first)
    if low > high:
        cell = min(max(low, dimension.low), dimension.high)
        raise ValidationError(
            f"{where}: no cell has a time within {label!r}; the nearest is {_shown(dimension, cell)} "
            f"(cell {cell}); use a slice for a range",
            array=array,
            column=dimension.name,
        )
    return low, high


def _number(value: object, where: str, array: str, dimension: Dimension, end: bool = False) -> float | int:
    """A label as the number it is compared by (a time: its first nanosecond, or with ``end`` the
    last nanosecond of the period it names)."""
    if isinstance(dimension.scale, TimeScale):
        try:
            return period_nanoseconds(value)[1 if end else 0]
        except SchemaError as error:
            raise ValidationError(f"{where}: {error}", array=array, column=dimension.name) from None
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
    if isinstance(scale, TimeScale):
        return scale.nanoseconds
    return (lambda cell: cell) if scale is None else scale.coordinate


def _shown(dimension: Dimension, cell: int) -> str:
    """A cell's label as a user reads it (the time, the float coordinate or the cell)."""
    scale = dimension.scale
    if isinstance(scale, TimeScale):
        try:
            return f"'{scale.label_text(cell)}'"
        except SchemaError:
            return f"cell {cell} (past datetime64's range)"
    return repr(cell if scale is None else scale.coordinate(cell))


def _ascending(dimension: Dimension) -> bool:
    return dimension.scale is None or dimension.scale.step > 0


def _first(low: int, high: int, holds: Callable[[int], bool]) -> int:
    """The first index of ``low..high`` where the monotone (false, then true) ``holds`` is true, or
    ``high + 1``: a bisection over the range."""
    return low + bisect.bisect_left(range(low, high + 1), True, key=holds)


def _slice_cells(dimension: Dimension, selection: slice, where: str, array: str) -> tuple[int, int]:
    ascending = _ascending(dimension)
    # A time period's bound nearest the slice's outside: a slice to '2026-01-03' holds all of that day.
    start = (
        None if selection.start is None else _number(selection.start, where, array, dimension, not ascending)
    )
    stop = None if selection.stop is None else _number(selection.stop, where, array, dimension, ascending)
    given = f"slice({selection.start!r}, {selection.stop!r})"
    if start is not None and stop is not None and (start > stop if ascending else start < stop):
        order = "ascend" if ascending else "descend"
        raise ValidationError(
            f"{where}: the coordinates {order}, so a label slice runs from the "
            f"{'smaller' if ascending else 'larger'} label to the {'larger' if ascending else 'smaller'}; "
            f"got {given}",
            array=array,
            column=dimension.name,
        )

    low, high = _cells_between(dimension, start, stop)
    if low > high:
        first, last = _shown(dimension, dimension.low), _shown(dimension, dimension.high)
        raise ValidationError(
            f"{where}: {given} holds no coordinate of the dimension "
            f"(its coordinates run from {first} to {last}; label slices include both ends)",
            array=array,
            column=dimension.name,
        )
    return low, high


def _cells_between(
    dimension: Dimension, start: float | int | None, stop: float | int | None
) -> tuple[int, int]:
    """The first and last cell whose label lies from ``start`` to ``stop`` (both included, in the
    order of the labels; None is open); low > high when none does."""
    label = _label(dimension)
    ascending = _ascending(dimension)

    # Along the cells, "past start" turns from false to true and "past stop" likewise.
    def past_start(cell: int) -> bool:
        return start is None or (label(cell) >= start if ascending else label(cell) <= start)

    def past_stop(cell: int) -> bool:
        return stop is not None and (label(cell) > stop if ascending else label(cell) < stop)

    return _first(dimension.low, dimension.high, past_start), _first(
        dimension.low, dimension.high, past_stop
    ) - 1


def _exact_cell(dimension: Dimension, value: float | int, where: str, array: str, given: str) -> int:
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
        f"{where}: no cell has the coordinate {given}; the nearest is {_shown(dimension, nearest)} "
        f"(cell {nearest}); use a slice for a range",
        array=array,
        column=dimension.name,
    )


#: A span written as text: a whole count and a unit, e.g. "6 hours", "1D", "90min".
_SPAN = re.compile(r"^\s*(\d+)\s*([A-Za-z]+)\s*$")
_SPAN_UNITS = {"w": ("D", 7), "d": ("D", 1), "h": ("h", 1), "min": ("m", 1), "m": ("m", 1), "s": ("s", 1)}
_SPAN_UNITS |= {"ms": ("ms", 1), "us": ("us", 1), "ns": ("ns", 1)}


def span_cells(schema: ArraySchema, name: str, span: object) -> object:
    """A duration along dimension ``name`` (``"1 day"``, ``"6h"``, ``datetime.timedelta``,
    ``numpy.timedelta64``, a pandas ``Timedelta``) as its count of cells, which the dimension's time
    scale must divide exactly; anything else is returned as it is, for the operator's own check."""
    dimension = schema.dimension(name)
    if not is_duration(span):
        return span
    where = f"array {schema.name}, dimension {name}"
    scale = dimension.scale
    if not isinstance(scale, TimeScale):
        raise ValidationError(
            f"{where}: a span is a whole number of cells, got {span!r} (durations need a time scale on the "
            "dimension)",
            array=schema.name,
            column=name,
        )
    try:
        duration = _duration(span)
    except (SchemaError, ValueError, OverflowError) as error:
        raise ValidationError(f"{where}: {error}", array=schema.name, column=name) from None
    try:
        return scale.cells_in(duration)
    except SchemaError as error:
        raise ValidationError(f"{where}: {error}", array=schema.name, column=name) from None


def reach_cells(schema: ArraySchema, name: str, before: object, after: object) -> tuple[object, object]:
    """A window's (before, after) along dimension ``name`` as counts of cells in cell order. Given
    as durations, the pair is in time order (``("18h", "0h")``: the trailing 18 hours, as pandas'
    ``rolling``), so on a descending time axis, where earlier times are higher cells, it is turned
    around; counts of cells stay in cell order."""
    cells = span_cells(schema, name, before), span_cells(schema, name, after)
    scale = schema.dimension(name).scale
    if isinstance(scale, TimeScale) and scale.step < 0 and (is_duration(before) or is_duration(after)):
        count = after if is_duration(before) else before
        if not is_duration(count) and count != 0:  # a count is in cell order, the duration in time order
            raise ValidationError(
                f"array {schema.name}, dimension {name}: the window ({before!r}, {after!r}) mixes a "
                f"duration and a count of cells on an axis running backwards in time, where durations "
                "are in time order and counts in cell order; give both as durations or both as counts",
                array=schema.name,
                column=name,
                value=repr((before, after)),
            )
        return cells[1], cells[0]
    return cells


def is_duration(value: object) -> bool:
    """Whether ``value`` is written as a duration (text, or a time delta of any library)."""
    return isinstance(value, str | dt.timedelta | np.timedelta64) or hasattr(value, "to_timedelta64")


def _duration(span: object) -> np.timedelta64:
    """A value :func:`is_duration` accepts, as a ``numpy.timedelta64``."""
    if hasattr(span, "to_timedelta64"):  # pandas.Timedelta
        return span.to_timedelta64()
    if isinstance(span, dt.timedelta):
        return np.timedelta64(span)
    if isinstance(span, np.timedelta64):
        return span
    found = _SPAN.match(span)  # text
    if found and found.group(2) == "M":  # pandas refuses it too: "1M" read as a minute was silent
        raise SchemaError(
            f"{span!r} is ambiguous: a month is no fixed duration; write '{found.group(1)}min' for minutes"
        )
    word = found.group(2).lower() if found else ""
    unit = (
        _SPAN_UNITS.get(word)
        or UNIT_WORDS.get(word)
        or UNIT_WORDS.get(word[:-1] if word.endswith("s") else "")
    )
    if unit is None:
        raise SchemaError(f"{span!r} is not a duration such as '6 hours', '1 day', '90min' or '1D'")
    resolution, per = unit
    try:
        return np.timedelta64(int(found.group(1)) * per, resolution)
    except OverflowError:  # before: "int too big to convert", with no value named
        raise SchemaError(f"{span!r} is longer than any duration an int64 count holds") from None
