"""Query regions of uncertain arrays: the query box, its expanded region under each storage scheme
(Prop. 3.1 for store-multiple, the per-cell fences for store-mean) and the chunks to read.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from arrayviews.model.copy_layout import STORE_ALL, STORE_MEAN, StorageLayout
from arrayviews.model.errors import ValidationError
from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.uncertain import UncertainSchema, tail_mass
from arrayviews.storage import uncertain_layout as ul
from arrayviews.storage.uncertain_table import UncertainTable


@dataclass(frozen=True)
class QueryBox:
    """A Subarray condition: cells ``lo..hi`` per dimension, i.e. the continuous box [lo, hi + 1).

    Dimensions without a range are unconstrained (the whole line; their cells are the whole domain).
    """

    cells: tuple[tuple[int, int], ...]
    constrained: tuple[bool, ...]

    @property
    def lows(self) -> np.ndarray:
        return np.array(
            [lo if c else -np.inf for (lo, _), c in zip(self.cells, self.constrained, strict=True)]
        )

    @property
    def highs(self) -> np.ndarray:
        return np.array(
            [hi + 1.0 if c else np.inf for (_, hi), c in zip(self.cells, self.constrained, strict=True)]
        )

    @property
    def cell_count(self) -> int:
        return math.prod(hi - lo + 1 for lo, hi in self.cells)


def query_box(schema: UncertainSchema, ranges: Mapping[str, object]) -> QueryBox | None:
    """The query box of ``ranges`` (dimension name -> (lo, hi) cells, inclusive), clipped to the domain;
    None when it lies outside the domain."""
    for name in ranges:
        if name not in schema.dimension_names:
            raise ValidationError(
                f"uncertain array {schema.name} has no dimension {name!r}; dimensions: "
                f"{', '.join(schema.dimension_names)}",
                array=schema.name,
                column=name,
            )
    cells, constrained, empty = [], [], False
    for d in schema.dimensions:
        if d.name not in ranges:
            cells.append((d.low, d.high))
            constrained.append(False)
            continue
        value = ranges[d.name]
        try:
            lo, hi = value
        except (TypeError, ValueError):
            raise ValidationError(
                f"uncertain array {schema.name}, dimension {d.name}: a range is (low, high) in cells, got {value!r}",
                array=schema.name,
                column=d.name,
                value=value,
            ) from None
        for bound in (lo, hi):
            if isinstance(bound, bool) or not isinstance(bound, int | np.integer):
                raise ValidationError(
                    f"uncertain array {schema.name}, dimension {d.name}: range bounds are whole cells "
                    f"(integers), got {bound!r}",
                    array=schema.name,
                    column=d.name,
                    value=bound,
                )
        if lo > hi:
            raise ValidationError(
                f"uncertain array {schema.name}, dimension {d.name}: range low {lo} is above high {hi}",
                array=schema.name,
                column=d.name,
                value=(lo, hi),
            )
        lo, hi = max(int(lo), d.low), min(int(hi), d.high)
        empty |= lo > hi
        cells.append((lo, hi))
        constrained.append(True)
    return None if empty else QueryBox(tuple(cells), tuple(constrained))


def as_number(value: object) -> float:
    """``value`` as a float, or NaN (which every range check refuses) for what is no number: text
    ("0.5" is not read as a number, as in workloads), a bool, or an int beyond the float range."""
    if isinstance(value, str | bytes | bool | np.bool_):
        return float("nan")
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return float("nan")


def check_threshold(schema: UncertainSchema, layout_: StorageLayout, threshold: object, what: str) -> float:
    """A threshold lambda in (epsilon, 1], where epsilon is the tail mass outside the possible range.

    Tuples (or pairs) whose possible ranges miss the query have a probability below epsilon, so the
    I/O step may skip them only when lambda is above it; below, exactness cannot be promised.
    """
    value = as_number(threshold)
    if isinstance(threshold, bool | np.bool_) or (
        value != value and not isinstance(threshold, numbers.Real | np.number)
    ):
        raise ValidationError(
            f"uncertain array {schema.name}: {what} threshold must be a number, got {threshold!r}",
            array=schema.name,
            value=threshold,
        )
    epsilon = tail_mass(layout_.sigmas)
    if not (value <= 1.0) or not (value > epsilon):
        raise ValidationError(
            f"uncertain array {schema.name}: {what} threshold {threshold!r} must lie in ({epsilon:.3g}, 1]: "
            f"a tuple outside the possible range (mean +- {layout_.sigmas:g} sigma) can still have up to "
            f"{epsilon:.3g} probability, which the I/O step cannot see (create the array with more sigmas "
            "for lower thresholds)",
            array=schema.name,
            value=value,
        )
    return value


@dataclass(frozen=True)
class ChunkSelection:
    """Chunks to read: a bounding range per dimension, and optionally only some chunks inside it."""

    ranges: tuple[tuple[int, int], ...] | None  # None: nothing to read
    origin: np.ndarray | None = None  # with ``codes``: the chunk set, as row-major codes over ``spans``
    spans: np.ndarray | None = None
    codes: np.ndarray | None = None

    @property
    def count(self) -> int:
        if self.ranges is None:
            return 0
        if self.codes is not None:
            return len(self.codes)
        return math.prod(b - a + 1 for a, b in self.ranges)

    def filter(self, grid: ChunkGrid):
        if self.codes is None:
            return None
        return ul.chunk_set_filter(self.codes, grid, self.origin, self.spans)


def box_chunks(schema: UncertainSchema, low: np.ndarray, high: np.ndarray) -> ChunkSelection:
    grid = ChunkGrid.of(ul.storage_schema(schema))
    ranges = grid.chunk_ranges_overlapping(low, high)
    return ChunkSelection(ranges)


def union_chunks(schema: UncertainSchema, lows: np.ndarray, highs: np.ndarray) -> ChunkSelection:
    """The chunks overlapping any of the boxes [lows[i], highs[i]] (cells, clipped to the domain)."""
    if len(lows) == 0:
        return ChunkSelection(None)
    dims = schema.dimensions
    origin_cells = np.array([d.chunk_origin for d in dims], np.int64)
    length = np.array([d.chunk_length for d in dims], np.int64)
    low_bound = np.array([d.low for d in dims], np.int64)
    high_bound = np.array([d.high for d in dims], np.int64)
    lows = np.clip(lows, low_bound, high_bound)
    highs = np.clip(highs, low_bound, high_bound)
    first = (lows - origin_cells) // length
    last = (highs - origin_cells) // length
    origin = first.min(axis=0)
    spans = last.max(axis=0) - origin + 1
    if math.prod(int(s) for s in spans) > 50_000_000:
        # Too many chunks for a bitmap: read the bounding range.
        return ChunkSelection(tuple((int(a), int(a + s - 1)) for a, s in zip(origin, spans, strict=True)))
    d = len(dims)
    difference = np.zeros(tuple(int(s) + 1 for s in spans), dtype=np.int64)
    a, b = first - origin, last - origin + 1
    for corner in range(2**d):
        index, sign = [], 1
        for k in range(d):
            if corner >> k & 1:
                index.append(b[:, k])
                sign = -sign
            else:
                index.append(a[:, k])
        np.add.at(difference, tuple(index), sign)
    for k in range(d):
        np.cumsum(difference, axis=k, out=difference)
    covered = difference[tuple(slice(0, int(s)) for s in spans)] > 0
    codes = np.flatnonzero(covered.reshape(-1)).astype(np.int64)
    ranges = tuple((int(o), int(o + s - 1)) for o, s in zip(origin, spans, strict=True))
    return ChunkSelection(ranges, origin.astype(np.int64), spans.astype(np.int64), codes)


@dataclass(frozen=True)
class ExpandedRegion:
    """The cells a query reads under a scheme: a bounding box, how many cells, and the chunks."""

    low: tuple[int, ...]
    high: tuple[int, ...]
    cells: int
    chunks: ChunkSelection
    fence_records: int = 0  # store-mean: fence records read to expand the query
    fence_boxes: int = 0  # store-mean: distinct boxes in the union


def expand(table: UncertainTable, version: int, layout_: StorageLayout, box: QueryBox) -> ExpandedRegion:
    """The expanded query region of ``box`` (Definition 3.1) under the version's scheme."""
    schema = table.schema
    lows = np.array([lo for lo, _ in box.cells], np.int64)
    highs = np.array([hi for _, hi in box.cells], np.int64)
    if layout_.scheme != STORE_MEAN:
        steps = np.zeros(schema.ndim, np.int64) if layout_.scheme == STORE_ALL else np.asarray(layout_.steps)
        domain_low = np.array([d.low for d in schema.dimensions], np.int64)
        domain_high = np.array([d.high for d in schema.dimensions], np.int64)
        low = np.maximum(lows - steps, domain_low)  # Prop. 3.1: k_i cells on each side
        high = np.minimum(highs + steps, domain_high)
        return ExpandedRegion(
            tuple(int(x) for x in low),
            tuple(int(x) for x in high),
            math.prod(int(h - lo + 1) for lo, h in zip(low, high, strict=True)),
            box_chunks(schema, low, high),
        )
    # store-mean: walk from every cell of the query to its fences; union of the walks.
    storage = table.storage
    selection = box_chunks(schema, lows, highs)
    firsts = [ul.first_column(d) for d in schema.dimension_names]
    lasts = [ul.last_column(d) for d in schema.dimension_names]
    fragments = table.read(version, firsts + lasts, selection.ranges, roles="fences")
    fences = ul.decode_rows(fragments, storage, firsts + lasts)
    inside = (
        np.all((fences.cells >= lows) & (fences.cells <= highs), axis=1) if len(fences) else np.zeros(0, bool)
    )
    if not inside.any():
        return ExpandedRegion(
            tuple(int(x) for x in lows), tuple(int(x) for x in highs), 0, ChunkSelection(None), len(fences), 0
        )
    box_lows = np.stack([fences.columns[c] for c in firsts], axis=1)[inside]
    box_highs = np.stack([fences.columns[c] for c in lasts], axis=1)[inside]
    boxes = np.unique(np.concatenate([box_lows, box_highs], axis=1), axis=0)
    box_lows, box_highs = boxes[:, : schema.ndim], boxes[:, schema.ndim :]
    chunks = union_chunks(schema, box_lows, box_highs)
    low, high = box_lows.min(axis=0), box_highs.max(axis=0)
    return ExpandedRegion(
        tuple(int(x) for x in low),
        tuple(int(x) for x in high),
        _union_cells(box_lows, box_highs),
        chunks,
        int(inside.sum()),
        len(boxes),
    )


def _union_cells(lows: np.ndarray, highs: np.ndarray) -> int:
    """Number of cells in the union of boxes (a bounding-box bitmap when small, else the bounding box)."""
    low, high = lows.min(axis=0), highs.max(axis=0)
    spans = high - low + 1
    if math.prod(int(s) for s in spans) > 20_000_000:
        return math.prod(int(s) for s in spans)
    d = lows.shape[1]
    difference = np.zeros(tuple(int(s) + 1 for s in spans), dtype=np.int64)
    a, b = lows - low, highs - low + 1
    for corner in range(2**d):
        index, sign = [], 1
        for k in range(d):
            if corner >> k & 1:
                index.append(b[:, k])
                sign = -sign
            else:
                index.append(a[:, k])
        np.add.at(difference, tuple(index), sign)
    for k in range(d):
        np.cumsum(difference, axis=k, out=difference)
    return int((difference[tuple(slice(0, int(s)) for s in spans)] > 0).sum())
