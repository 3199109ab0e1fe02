"""Halo exchange: every target chunk receives exactly the cells inside its reach, whichever way the
pieces are planned (from the cells a fragment holds, or by visiting every neighbour chunk), in any
number of dimensions. The reference is a brute force over every chunk of the grid and every cell."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from arrayviews.model.schema import ArraySchema, Attribute, Dimension
from arrayviews.operators import halo
from arrayviews.operators.cells import cells_to_fragment_table


@st.composite
def halo_cases(draw):
    ndim = draw(st.integers(1, 6))
    dims, lows, highs = [], [], []
    for k in range(ndim):
        low = draw(st.integers(-5, 5))
        extent = draw(st.integers(1, max(2, round(300 ** (1 / ndim)))))  # at most a few hundred cells
        length = draw(st.integers(1, 4))
        dims.append(Dimension(f"d{k}", low, low + extent - 1, length))
        lows.append(low)
        highs.append(low + extent - 1)
    schema = ArraySchema("A", (Attribute("v", "int64"), Attribute("w", "float64", True)), tuple(dims))
    grid = np.indices([h - lo + 1 for lo, h in zip(lows, highs, strict=True)]).reshape(ndim, -1).T + lows
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    density = draw(st.sampled_from([0.05, 0.3, 1.0]))
    cells = grid[rng.random(len(grid)) < density]
    before = tuple(draw(st.integers(0, 4)) for _ in range(ndim))
    after = tuple(draw(st.integers(0, 4)) for _ in range(ndim))
    return schema, cells, before, after, rng


def _table(schema: ArraySchema, cells: np.ndarray, rng) -> tuple[pa.Table, dict]:
    values = np.arange(len(cells), dtype=np.int64) * 7 - 3
    nulls = rng.random(len(cells)) < 0.3
    columns = {d: pa.array(cells[:, k], pa.int64()) for k, d in enumerate(schema.dimension_names)}
    columns["v"] = pa.array(values, pa.int64())
    columns["w"] = pa.array(values / 2, pa.float64(), mask=nulls)
    content = {
        tuple(int(x) for x in c): (int(v), None if n else float(v) / 2)
        for c, v, n in zip(cells, values, nulls, strict=True)
    }
    return cells_to_fragment_table(pa.table(columns), schema), content


def _received(pieces: pa.Table, schema: ArraySchema) -> dict[tuple, dict[tuple, tuple]]:
    """What each target chunk receives: {target: {cell: (v, w)}}; no cell may arrive twice."""
    out: dict[tuple, dict[tuple, tuple]] = {}
    for row in range(pieces.num_rows):
        piece = pieces.slice(row, 1)
        target = halo.target_of(piece, schema)
        got = halo.gather(piece, schema)
        w_nulls = got.nulls.get("w")
        for k, cell in enumerate(got.coords):
            key = tuple(int(x) for x in cell)
            w = None if w_nulls is not None and w_nulls[k] else float(got.values["w"][k])
            assert key not in out.setdefault(target, {}), f"{key} sent twice to {target}"
            out[target][key] = (int(got.values["v"][k]), w)
    return out


def _expected(schema: ArraySchema, content: dict, before, after) -> dict[tuple, dict[tuple, tuple]]:
    """Brute force: every chunk of the grid, every cell within [chunk low - before, chunk high + after]."""
    ranges = []
    for d in schema.dimensions:
        first = (d.low - d.chunk_origin) // d.chunk_length
        last = (d.high - d.chunk_origin) // d.chunk_length
        ranges.append(range(first, last + 1))
    out = {}
    for target in itertools.product(*ranges):
        low = [max(d.low, d.chunk_origin + t * d.chunk_length) for d, t in zip(schema.dimensions, target, strict=True)]
        high = [
            min(d.high, d.chunk_origin + (t + 1) * d.chunk_length - 1)
            for d, t in zip(schema.dimensions, target, strict=True)
        ]
        inside = {
            cell: value
            for cell, value in content.items()
            if all(lo - b <= x <= hi + a for x, lo, hi, b, a in zip(cell, low, high, before, after, strict=True))
        }
        if inside:
            out[target] = inside
    return out


@settings(max_examples=60, deadline=None)
@given(halo_cases())
def test_every_plan_sends_each_chunk_exactly_the_cells_in_its_reach(case) -> None:
    schema, cells, before, after, rng = case
    table, content = _table(schema, cells, rng)
    expected = _expected(schema, content, before, after)
    chunks = np.unique(halo.ChunkGrid.of(schema).chunk_of(cells), axis=0) if len(cells) else cells
    visits = len(chunks) * halo.most_neighbours(halo.ChunkGrid.of(schema), before, after)
    for plan in ("cells", "auto") + (("neighbours",) if visits <= 20_000 else ()):
        pieces = halo.cut_pieces(table, schema, before, after, plan=plan)
        assert _received(pieces, schema) == expected, plan


def test_ten_dimensions_plan_from_the_cells() -> None:
    """50 scattered cells in 10 dimensions of 50 (chunks of 10), reach 1: 3**10 neighbours per chunk,
    yet only the chunks the cells reach get pieces."""
    dims = tuple(Dimension(f"d{k}", 0, 49, 10) for k in range(10))
    schema = ArraySchema("A", (Attribute("v", "int64"), Attribute("w", "float64", True)), dims)
    rng = np.random.default_rng(3)
    cells = np.unique(rng.integers(0, 50, size=(50, 10)), axis=0)
    table, content = _table(schema, cells, rng)
    reach = (1,) * 10
    pieces = halo.cut_pieces(table, schema, reach, reach)
    # the reference, per cell: the chunks whose reach holds it (one or two per dimension)
    expected: dict[tuple, dict] = {}
    for cell, value in content.items():
        options = [sorted({(x - 1) // 10, x // 10, (x + 1) // 10} & set(range(5))) for x in cell]
        for target in itertools.product(*options):
            low = [10 * t for t in target]
            if all(lo - 1 <= x <= lo + 10 for x, lo in zip(cell, low, strict=True)):
                expected.setdefault(target, {})[cell] = value
    assert _received(pieces, schema) == expected
