"""Property tests of chunk geometry against plain-Python brute force over every cell."""

from __future__ import annotations

import itertools
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from arrayviews.model.geometry import ChunkGrid, DimensionGrid
from arrayviews.model.schema import ArraySchema, Attribute, Dimension

SETTINGS = settings(max_examples=150, deadline=None)


# -- strategies ----------------------------------------------------------------------------------


@st.composite
def dimension_grids(draw: st.DrawFn, max_extent: int = 60) -> DimensionGrid:
    low = draw(st.integers(-50, 50))
    extent = draw(st.integers(1, max_extent))
    length = draw(st.integers(1, 20))
    origin = low - draw(st.one_of(st.just(0), st.integers(1, 45)))
    return DimensionGrid(low, low + extent - 1, length, origin)


def chunk_grids(max_volume: int = 4000) -> st.SearchStrategy[ChunkGrid]:
    """1-4 dimensions, extents capped so that enumerating every cell stays cheap."""

    def of_rank(ndim: int) -> st.SearchStrategy[ChunkGrid]:
        cap = min(60, int(max_volume ** (1 / ndim)))
        grids = st.lists(dimension_grids(cap), min_size=ndim, max_size=ndim)
        return grids.map(lambda dims: ChunkGrid(tuple(dims)))

    return st.integers(1, 4).flatmap(of_rank)


# -- brute force ---------------------------------------------------------------------------------


def scan_spans(grid: DimensionGrid) -> dict[int, tuple[int, int]]:
    """Chunk number -> clipped span, found by stepping chunk starts up from the origin (no division)."""
    spans: dict[int, tuple[int, int]] = {}
    start, k = grid.origin, 0
    while start <= grid.high:
        lo, hi = max(start, grid.low), min(start + grid.length - 1, grid.high)
        if lo <= hi:
            spans[k] = (lo, hi)
        start, k = start + grid.length, k + 1
    return spans


def scan_chunk_of(grid: DimensionGrid) -> dict[int, int]:
    """Cell -> chunk number for every cell of the range, from the scanned spans."""
    return {x: k for k, (lo, hi) in scan_spans(grid).items() for x in range(lo, hi + 1)}


def all_cells(grid: ChunkGrid) -> list[tuple[int, ...]]:
    return list(itertools.product(*(range(g.low, g.high + 1) for g in grid.dimensions)))


def scan_chunks(grid: ChunkGrid) -> dict[tuple[int, ...], tuple[int, ...]]:
    """Cell -> chunk coordinate for every cell of the array range."""
    per_dim = [scan_chunk_of(g) for g in grid.dimensions]
    return {cell: tuple(m[x] for m, x in zip(per_dim, cell, strict=True)) for cell in all_cells(grid)}


def cells_by_chunk(grid: ChunkGrid) -> dict[tuple[int, ...], list[tuple[int, ...]]]:
    groups: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
    for cell, chunk in scan_chunks(grid).items():
        groups.setdefault(chunk, []).append(cell)
    return groups


def as_cells(cells: list[tuple[int, ...]], ndim: int) -> np.ndarray:
    return np.array(cells, dtype=np.int64).reshape(-1, ndim)


# -- one dimension -------------------------------------------------------------------------------


@SETTINGS
@given(dimension_grids())
def test_chunk_of_agrees_with_scan_inside_the_range(grid: DimensionGrid) -> None:
    expected = scan_chunk_of(grid)
    cells = np.array(sorted(expected), dtype=np.int64)
    assert grid.chunk_of(cells).tolist() == [expected[x] for x in cells.tolist()]


@SETTINGS
@given(dimension_grids(), st.lists(st.integers(-300, 300), max_size=50))
def test_chunk_of_is_floor_division_everywhere(grid: DimensionGrid, xs: list[int]) -> None:
    got = grid.chunk_of(np.array(xs, dtype=np.int64)).tolist()
    assert got == [(x - grid.origin) // grid.length for x in xs]


@SETTINGS
@given(dimension_grids())
def test_chunk_spans_partition_the_range(grid: DimensionGrid) -> None:
    spans = scan_spans(grid)
    assert grid.first_chunk == min(spans)
    assert grid.last_chunk == max(spans)
    assert grid.chunk_count == len(spans)
    assert list(spans) == list(range(grid.first_chunk, grid.last_chunk + 1))
    got = [grid.chunk_span(k) for k in range(grid.first_chunk, grid.last_chunk + 1)]
    assert got == list(spans.values())
    # contiguous, non-empty, at most one chunk long, clipped exactly at low and high
    assert got[0][0] == grid.low and got[-1][1] == grid.high
    for (_, hi), (next_lo, _) in itertools.pairwise(got):
        assert next_lo == hi + 1
    for lo, hi in got:
        assert 1 <= hi - lo + 1 <= grid.length
    # every cell of the range in exactly one span
    for x in range(grid.low, grid.high + 1):
        assert sum(lo <= x <= hi for lo, hi in got) == 1


@SETTINGS
@given(dimension_grids())
def test_chunk_sizes_and_starts_agree_with_chunk_span(grid: DimensionGrid) -> None:
    chunks = np.arange(grid.first_chunk, grid.last_chunk + 1, dtype=np.int64)
    spans = [grid.chunk_span(int(k)) for k in chunks]
    assert grid.chunk_starts(chunks).tolist() == [lo for lo, _ in spans]
    assert grid.chunk_sizes(chunks).tolist() == [hi - lo + 1 for lo, hi in spans]
    assert int(grid.chunk_sizes(chunks).sum()) == grid.high - grid.low + 1


@SETTINGS
@given(dimension_grids(), st.integers(-100, 100), st.integers(-100, 100))
def test_dimension_chunks_overlapping(grid: DimensionGrid, a: int, b: int) -> None:
    chunk_of = scan_chunk_of(grid)
    expected = {chunk_of[x] for x in range(a, b + 1) if x in chunk_of}
    got = grid.chunks_overlapping(a, b)
    if not expected:
        assert got is None
    else:
        assert got == (min(expected), max(expected))


# -- whole arrays --------------------------------------------------------------------------------


@SETTINGS
@given(chunk_grids())
def test_grid_chunk_of_agrees_with_scan(grid: ChunkGrid) -> None:
    expected = scan_chunks(grid)
    cells = list(expected)
    got = grid.chunk_of(as_cells(cells, grid.ndim))
    assert got.shape == (len(cells), grid.ndim)
    assert [tuple(row) for row in got.tolist()] == [expected[c] for c in cells]
    assert grid.chunk_count == len(set(expected.values()))


@SETTINGS
@given(chunk_grids())
def test_chunk_bounds_and_shape_agree_with_cells(grid: ChunkGrid) -> None:
    for chunk, cells in cells_by_chunk(grid).items():
        low = tuple(min(c[d] for c in cells) for d in range(grid.ndim))
        high = tuple(max(c[d] for c in cells) for d in range(grid.ndim))
        assert grid.chunk_bounds(chunk) == (low, high)
        shape = grid.chunk_shape(chunk)
        assert shape == tuple(h - lo + 1 for lo, h in zip(low, high, strict=True))
        assert math.prod(shape) == len(cells)  # the chunk's cells fill its clipped box


@SETTINGS
@given(chunk_grids())
def test_local_offsets_and_cells_at_are_inverse(grid: ChunkGrid) -> None:
    for chunk, cells in cells_by_chunk(grid).items():
        size = math.prod(grid.chunk_shape(chunk))
        ordered = sorted(cells)  # C order is lexicographic order of the cells
        offsets = grid.local_offsets(as_cells(ordered, grid.ndim), chunk)
        assert offsets.tolist() == list(range(size))
        shuffled = ordered[::-1]
        back = grid.cells_at(grid.local_offsets(as_cells(shuffled, grid.ndim), chunk), chunk)
        assert [tuple(row) for row in back.tolist()] == shuffled
        every = grid.cells_at(np.arange(size, dtype=np.int64), chunk)
        assert [tuple(row) for row in every.tolist()] == ordered


@st.composite
def grids_with_box(draw: st.DrawFn) -> tuple[ChunkGrid, tuple[int, ...], tuple[int, ...]]:
    grid = draw(chunk_grids())
    low, high = [], []
    for g in grid.dimensions:
        low.append(draw(st.integers(g.low - 25, g.high + 25)))
        # mostly a proper box, sometimes an empty one (high < low)
        high.append(draw(st.integers(low[-1] - 3, g.high + 25)))
    return grid, tuple(low), tuple(high)


@SETTINGS
@given(grids_with_box())
def test_chunks_overlapping_box(case: tuple[ChunkGrid, tuple[int, ...], tuple[int, ...]]) -> None:
    grid, low, high = case
    expected = {
        chunk
        for cell, chunk in scan_chunks(grid).items()
        if all(lo <= x <= hi for lo, x, hi in zip(low, cell, high, strict=True))
    }
    got = list(grid.chunks_overlapping(low, high))
    assert len(got) == len(set(got))
    assert set(got) == expected
    ranges = grid.chunk_ranges_overlapping(low, high)
    if expected:
        assert ranges is not None
        assert math.prod(b - a + 1 for a, b in ranges) == len(expected)
    else:
        assert ranges is None


@st.composite
def grids_with_reach(draw: st.DrawFn) -> tuple[ChunkGrid, tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    grid = draw(chunk_grids(max_volume=1200))
    chunk = tuple(draw(st.integers(g.first_chunk, g.last_chunk)) for g in grid.dimensions)
    before = tuple(draw(st.integers(0, 25)) for _ in grid.dimensions)
    after = tuple(draw(st.integers(0, 25)) for _ in grid.dimensions)
    return grid, chunk, before, after


@SETTINGS
@given(grids_with_reach())
def test_neighbour_chunks(case: tuple[ChunkGrid, tuple[int, ...], tuple[int, ...], tuple[int, ...]]) -> None:
    grid, chunk, before, after = case
    owners = scan_chunks(grid)
    mine = as_cells([c for c, k in owners.items() if k == chunk], grid.ndim)  # (n, d)
    everyone = as_cells(list(owners), grid.ndim)  # (m, d)
    # y is within reach of x when x - before <= y <= x + after in every dimension
    delta = everyone[None, :, :] - mine[:, None, :]
    reached = ((delta >= -np.array(before)) & (delta <= np.array(after))).all(axis=2).any(axis=0)
    expected = {owners[tuple(cell)] for cell in everyone[reached].tolist()}
    got = list(grid.neighbour_chunks(chunk, before, after))
    assert len(got) == len(set(got))
    assert set(got) == expected
    assert chunk in expected


@SETTINGS
@given(st.data())
def test_contains(data: st.DataObject) -> None:
    grid = data.draw(chunk_grids())
    cell = st.tuples(*(st.integers(g.low - 30, g.high + 30) for g in grid.dimensions))
    cells = data.draw(st.lists(cell, max_size=40))
    expected = [all(g.low <= x <= g.high for g, x in zip(grid.dimensions, c, strict=True)) for c in cells]
    assert grid.contains(as_cells(cells, grid.ndim)).tolist() == expected


def test_grid_of_schema_uses_dimension_chunking() -> None:
    schema = ArraySchema(
        "A",
        (Attribute("v", "float64"),),
        (Dimension("i", -3, 10, 4), Dimension("j", 0, 5, 2, chunk_origin=-1)),
    )
    grid = ChunkGrid.of(schema)
    assert grid.dimensions == (DimensionGrid(-3, 10, 4, -3), DimensionGrid(0, 5, 2, -1))
    assert grid.chunk_count == 4 * 4
    assert grid.chunk_bounds((0, 0)) == ((-3, 0), (0, 0))
