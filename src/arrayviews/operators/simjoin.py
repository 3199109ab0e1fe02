"""The shape-based array similarity join, run on an engine: chunk pairs from metadata, right cells routed
to the left chunks whose shapes reach them, and the signed join kernel per left chunk.

For every non-empty cell ``a`` of the left array (alpha), the join pairs it with the non-empty cells
``b`` of the right array (beta) such that ``b - M(a)`` lies in the shape, where ``M`` maps alpha's
coordinates into beta's. The usual use, a group-by aggregate over alpha's cells, never materializes
the pairs: each left chunk receives the right cells within its reach and the kernel aggregates them.
The same machinery evaluates the signed terms of view maintenance (``roles`` below).
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from arrayviews.execution.engine import Data, Engine, conform
from arrayviews.model.errors import ValidationError
from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.mappings import Mapping
from arrayviews.model.schema import ArraySchema
from arrayviews.model.shapes import Shape
from arrayviews.operators import halo
from arrayviews.storage import layout

ROLE = "role"
#: Roles of rows in a join: which side, and whether old content or a signed delta.
LEFT_OLD, LEFT_MINUS, LEFT_PLUS, RIGHT_OLD, RIGHT_MINUS, RIGHT_PLUS = range(6)


@dataclass(frozen=True)
class JoinSpec:
    """What to join: left (alpha) and right (beta) schemas, the shape (in beta's dimensions) and the mapping."""

    left: ArraySchema
    right: ArraySchema
    shape: Shape
    mapping: Mapping

    def __post_init__(self) -> None:
        if self.shape.ndim != self.right.ndim:
            raise ValidationError(
                f"shape {self.shape!r} has {self.shape.ndim} dimension(s), the right array {self.right.name} {self.right.ndim}"
            )

    def right_region(self, low: Sequence[int], high: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """The box of right coordinates that left cells in ``[low, high]`` can pair with."""
        mapped_low, mapped_high = self.mapping.map_box(low, high, self.left)
        return mapped_low - np.asarray(self.shape.before), mapped_high + np.asarray(self.shape.after)

    def right_chunks_of(self, left_chunk: Sequence[int]) -> tuple[tuple[int, int], ...] | None:
        """Per right dimension the chunk range a left chunk's cells can reach."""
        low, high = ChunkGrid.of(self.left).chunk_bounds(left_chunk)
        region_low, region_high = self.right_region(low, high)
        return ChunkGrid.of(self.right).chunk_ranges_overlapping(region_low, region_high)

    def right_chunk_box(self, left_chunks: np.ndarray) -> tuple[tuple[int, int], ...] | None:
        """Per right dimension the chunk range that any of ``left_chunks`` can reach (a box around
        all of them; None if they reach nothing)."""
        left_chunks = np.asarray(left_chunks, dtype=np.int64).reshape(-1, self.left.ndim)
        if len(left_chunks) == 0:
            return None
        grid = ChunkGrid.of(self.left)
        low = [g.chunk_starts(left_chunks[:, k]).min() for k, g in enumerate(grid.dimensions)]
        high = [
            (g.chunk_starts(left_chunks[:, k]) + g.chunk_sizes(left_chunks[:, k]) - 1).max()
            for k, g in enumerate(grid.dimensions)
        ]
        region_low, region_high = self.right_region(low, high)
        return ChunkGrid.of(self.right).chunk_ranges_overlapping(region_low, region_high)

    def left_chunk_box(self, right_chunks: np.ndarray) -> tuple[tuple[int, int], ...] | None:
        """Per left dimension the chunk range holding every left chunk whose reach may include one of
        ``right_chunks`` (a box around them; None if no left chunk reaches them). Each right axis is
        a monotone map of one left axis, so the left chunks whose image, widened by the shape, meets
        the right box form one run per axis: its ends are found by bisection over the chunk indices
        (an unbounded dimension has some 2**59 chunks; none is listed)."""
        right_chunks = np.asarray(right_chunks, dtype=np.int64).reshape(-1, self.right.ndim)
        if len(right_chunks) == 0:
            return None
        right_grid, left_grid = ChunkGrid.of(self.right), ChunkGrid.of(self.left)
        box_low = [int(g.chunk_starts(right_chunks[:, k]).min()) for k, g in enumerate(right_grid.dimensions)]
        box_high = [
            int((g.chunk_starts(right_chunks[:, k]) + g.chunk_sizes(right_chunks[:, k]) - 1).max())
            for k, g in enumerate(right_grid.dimensions)
        ]
        before, after = self.shape.before, self.shape.after
        ranges = []
        for s, dimension in enumerate(left_grid.dimensions):
            first, last = dimension.first_chunk, dimension.last_chunk
            for k, axis in enumerate(self.mapping.axes):
                if self.left.dimension_names.index(axis.source) != s:
                    continue

                def image_span(chunk: int, dimension=dimension, axis=axis) -> tuple[int, int]:
                    at = np.array([chunk], dtype=np.int64)
                    start = dimension.chunk_starts(at)
                    ends = axis.image(np.concatenate([start, start + dimension.chunk_sizes(at) - 1]))
                    return int(ends.min()), int(ends.max())

                def below_top(chunk: int, k=k, image_span=image_span) -> bool:  # low end within reach
                    return image_span(chunk)[0] - before[k] <= box_high[k]

                def above_bottom(chunk: int, k=k, image_span=image_span) -> bool:  # high end within reach
                    return image_span(chunk)[1] + after[k] >= box_low[k]

                if axis.multiplier > 0:  # images grow with the chunk index
                    low_end = _first(first, last, above_bottom)
                    high_end = _first(first, last, lambda c, f=below_top: not f(c)) - 1
                else:
                    low_end = _first(first, last, below_top)
                    high_end = _first(first, last, lambda c, f=above_bottom: not f(c)) - 1
                first, last = max(first, low_end), min(last, high_end)
                if first > last:
                    return None
            ranges.append((first, last))
        return tuple(ranges)


def _first(low: int, high: int, holds: Callable[[int], bool]) -> int:
    """The first index of ``low..high`` where the monotone (false, then true) ``holds`` is true, or
    ``high + 1``: a bisection over the range."""
    return low + bisect.bisect_left(range(low, high + 1), True, key=holds)


def plan_pairs(
    spec: JoinSpec, left_chunks: np.ndarray, right_chunks: np.ndarray, boxes: Boxes | None = None
) -> list[tuple[tuple, tuple]]:
    """The (left chunk, right chunk) pairs to join, from chunk lists alone (metadata, never data);
    with ``boxes``, only the right chunks within reach of each left chunk's box."""
    existing = {tuple(int(c) for c in row) for row in np.asarray(right_chunks).reshape(-1, spec.right.ndim)}
    pairs = []
    for row in np.asarray(left_chunks).reshape(-1, spec.left.ndim):
        left = tuple(int(c) for c in row)
        if boxes is None:
            ranges = spec.right_chunks_of(left)
        else:
            region_low, region_high = spec.right_region(*boxes[left])
            ranges = ChunkGrid.of(spec.right).chunk_ranges_overlapping(region_low, region_high)
        if ranges is None:
            continue
        volume = 1
        for a, b in ranges:
            volume *= b - a + 1
        if volume <= 4 * len(existing):
            candidates = (
                tuple(c)
                for c in np.stack(
                    np.meshgrid(*[np.arange(a, b + 1) for a, b in ranges], indexing="ij"), -1
                ).reshape(-1, len(ranges))
            )
            pairs.extend(
                (left, tuple(int(x) for x in q)) for q in candidates if tuple(int(x) for x in q) in existing
            )
        else:  # a reach far wider than the data: test the existing chunks instead
            pairs.extend(
                (left, q) for q in existing if all(a <= c <= b for c, (a, b) in zip(q, ranges, strict=True))
            )
    return pairs


def _targets_by_right(pairs) -> dict[tuple, list[tuple]]:
    """For every right chunk, the distinct left chunks it must reach (pairs may repeat)."""
    targets: dict[tuple, list[tuple]] = {}
    for left, right in dict.fromkeys(pairs):
        targets.setdefault(right, []).append(left)
    return targets


#: Per left chunk, the box ``(low, high)`` of the left cells that need right cells (default: the chunk).
Boxes = dict[tuple, tuple[np.ndarray, np.ndarray]]


def _regions_for(spec: JoinSpec, targets: dict[tuple, list[tuple]], boxes: Boxes | None = None):
    grid = ChunkGrid.of(spec.left)

    def regions(chunk: tuple[int, ...]) -> Iterator[halo.Region]:
        for target in targets.get(tuple(int(c) for c in chunk), ()):
            low, high = boxes[target] if boxes is not None else grid.chunk_bounds(target)
            region_low, region_high = spec.right_region(low, high)
            yield target, region_low, region_high

    return regions


def _right_pieces(
    table: pa.Table, spec: JoinSpec, targets: dict, role: int, boxes: Boxes | None = None
) -> pa.Table:
    regions = _regions_for(spec, targets, boxes)
    pieces = halo.cut_to_regions(table, spec.right, regions, spec.left.dimension_names)
    return pieces.append_column(ROLE, pa.array(np.full(pieces.num_rows, role, dtype=np.int8)))


def _left_pieces(table: pa.Table, spec: JoinSpec, role: int) -> pa.Table:
    """Left fragments addressed to their own chunk."""
    grid = ChunkGrid.of(spec.left)

    def regions(chunk: tuple[int, ...]) -> Iterator[halo.Region]:
        low, high = grid.chunk_bounds(chunk)
        yield tuple(int(c) for c in chunk), np.asarray(low), np.asarray(high)

    pieces = halo.cut_to_regions(table, spec.left, regions, spec.left.dimension_names)
    return pieces.append_column(ROLE, pa.array(np.full(pieces.num_rows, role, dtype=np.int8)))


def left_piece_schema(spec: JoinSpec) -> pa.Schema:
    return halo.piece_schema(spec.left, spec.left.dimension_names).append(pa.field(ROLE, pa.int8()))


def right_piece_schema(spec: JoinSpec) -> pa.Schema:
    return halo.piece_schema(spec.right, spec.left.dimension_names).append(pa.field(ROLE, pa.int8()))


def route_left(
    engine: Engine, frame: Data, spec: JoinSpec, role: int, chunks: np.ndarray | None = None
) -> Data:
    """Left fragments as pieces addressed to their own chunks (optionally only ``chunks``)."""
    if chunks is not None:
        frame = only_chunks(engine, frame, spec.left, chunks)
    function = functools.partial(_left_pieces, spec=spec, role=role)
    return engine.map_batches(frame, function, left_piece_schema(spec))


def route_right(
    engine: Engine,
    frame: Data,
    spec: JoinSpec,
    pairs: list[tuple[tuple, tuple]],
    role: int,
    boxes: Boxes | None = None,
) -> Data:
    """Right fragments cut into pieces for every left chunk of ``pairs`` that reaches them (only the
    part within reach of the box of ``boxes`` for that left chunk, when given)."""
    targets = _targets_by_right(pairs)
    if not targets:
        return engine.empty(right_piece_schema(spec))
    frame = only_chunks(engine, frame, spec.right, np.array(list(targets), dtype=np.int64))
    function = functools.partial(_right_pieces, spec=spec, targets=targets, role=role, boxes=boxes)
    return engine.map_batches(frame, function, right_piece_schema(spec))


def only_chunks(engine: Engine, frame: Data, schema: ArraySchema, chunks: np.ndarray) -> Data:
    """Rows of a fragment data set whose chunk is one of ``chunks``."""
    return engine.where_keys(frame, layout.chunk_columns(schema), np.asarray(chunks, dtype=np.int64))


def fragments_to_left(engine: Engine, tables: dict[int, pa.Table], spec: JoinSpec) -> Data:
    """Small fragment tables on the driver (e.g. the signed parts of a delta, by role) as left pieces,
    in one data set."""
    schema = left_piece_schema(spec)
    parts = [conform(_left_pieces(table, spec, role), schema) for role, table in tables.items()]
    return engine.from_arrow(pa.concat_tables(parts) if parts else schema.empty_table(), schema)


def fragments_to_right(engine: Engine, tables: dict[int, pa.Table], spec: JoinSpec, pairs) -> Data:
    """Small fragment tables on the driver (by role) as right pieces for ``pairs``, in one data set."""
    schema = right_piece_schema(spec)
    targets = _targets_by_right(pairs)
    parts = [conform(_right_pieces(table, spec, targets, role), schema) for role, table in tables.items()]
    return engine.from_arrow(pa.concat_tables(parts) if parts else schema.empty_table(), schema)
