"""sort_cells (storage/cell_order.py kernels) against a plain-Python reference: chunk, local offset, order."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from arrayviews.model.schema import ArraySchema, Attribute, Dimension
from arrayviews.storage import assemble
from arrayviews.storage.assemble import sort_cells

NAMES = ("i", "j", "k")


def _reference(coords: np.ndarray, schema: ArraySchema) -> list[tuple[tuple[int, ...], int, int]]:
    """(chunk, local offset, input row) of every cell, by Python integers, sorted stably by (chunk, offset)."""
    rows = []
    for row, cell in enumerate(coords.tolist()):
        chunk, offset = [], 0
        for x, d in zip(cell, schema.dimensions, strict=True):
            origin = d.low if d.chunk_origin is None else d.chunk_origin
            number = (x - origin) // d.chunk_length
            start = max(origin + number * d.chunk_length, d.low)
            stop = min(origin + (number + 1) * d.chunk_length - 1, d.high)
            chunk.append(number)
            offset = offset * (stop - start + 1) + (x - start)
        rows.append((tuple(chunk), offset, row))
    return sorted(rows, key=lambda r: (r[0], r[1]))


@st.composite
def batches(draw: st.DrawFn) -> tuple[ArraySchema, np.ndarray, str]:
    ndim = draw(st.integers(1, 3))
    dims = []
    for name in NAMES[:ndim]:
        low = draw(st.sampled_from([0, -7, 3, -(10**12), 10**12]))
        extent = draw(st.integers(1, 60))
        length = draw(st.integers(1, 25))
        origin = draw(st.sampled_from([None, low - 3, low - 30]))
        dims.append(Dimension(name, low, low + extent - 1, length, chunk_origin=origin))
    schema = ArraySchema("a", (Attribute("v", "int64"),), tuple(dims))
    n = draw(st.integers(1, 300))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    lows = np.array([d.low for d in dims])
    highs = np.array([d.high for d in dims])
    coords = rng.integers(lows, highs + 1, size=(n, ndim))
    arrangement = draw(st.sampled_from(["random", "sorted", "reverse", "duplicates", "fortran"]))
    if arrangement in ("sorted", "reverse"):
        reference = _reference(coords, schema)
        coords = coords[[r[2] for r in reference]]
        if arrangement == "reverse":
            coords = coords[::-1].copy()
    elif arrangement == "duplicates":
        coords = np.concatenate([coords, coords[rng.integers(0, n, size=n // 2 + 1)]])
    elif arrangement == "fortran":
        coords = np.asfortranarray(coords)
    return schema, coords, arrangement


@settings(max_examples=300, deadline=None)
@given(batches(), st.booleans())
def test_sort_cells_matches_python_reference(batch: tuple[ArraySchema, np.ndarray, str], kernels: bool) -> None:
    """Both the numba kernels (large batches) and the numpy path (small ones) against the reference."""
    schema, coords, _ = batch
    saved = assemble.KERNEL_MIN_CELLS
    assemble.KERNEL_MIN_CELLS = 0 if kernels else 1 << 62
    try:
        _check_against_reference(schema, coords)
    finally:
        assemble.KERNEL_MIN_CELLS = saved


def _check_against_reference(schema: ArraySchema, coords: np.ndarray) -> None:
    values = np.arange(len(coords), dtype=np.int64) * 7 + 1
    cells = sort_cells(coords, {"v": values}, {"v": values % 3 == 0}, schema)
    reference = _reference(coords, schema)
    expected_chunks = sorted({r[0] for r in reference})
    assert cells.chunks.tolist() == [list(c) for c in expected_chunks]
    sizes = np.diff(cells.bounds)
    assert sizes.tolist() == [sum(1 for r in reference if r[0] == c) for c in expected_chunks]
    assert cells.offsets.tolist() == [r[1] for r in reference]
    distinct = len({tuple(c) for c in coords.tolist()}) == len(coords)
    if distinct:  # equal cells may come in any order (they are an error for writes)
        assert cells.order.tolist() == [r[2] for r in reference]
        assert cells.values["v"].tolist() == [int(values[r[2]]) for r in reference]
        assert cells.nulls["v"].tolist() == [bool(values[r[2]] % 3 == 0) for r in reference]
    assert sorted(cells.order.tolist()) == list(range(len(coords)))
    assert np.array_equal(cells.values["v"], values[cells.order])
    assert np.array_equal(cells.nulls["v"], values[cells.order] % 3 == 0)
    assert sorted(map(tuple, cells.coords.tolist())) == sorted(map(tuple, coords.tolist()))
    keyed = _reference(cells.coords, schema)
    assert [r[2] for r in keyed] == list(range(len(coords)))  # the gathered cells are in (chunk, offset) order
    seen: dict[tuple[int, ...], int] = {}
    for cell in coords.tolist():
        seen[tuple(cell)] = seen.get(tuple(cell), 0) + 1
    repeated = sorted(cell for cell, count in seen.items() if count > 1)
    assert [tuple(c) for c in cells.duplicates().tolist()] == repeated


def test_sort_cells_many_chunks_per_cell_uses_the_key_sort() -> None:
    """Cells spread over far more chunks than there are cells (the argsort path), and ranges so wide
    one code per chunk does not fit in int64 (the lexicographic path)."""
    rng = np.random.default_rng(5)
    saved = assemble.KERNEL_MIN_CELLS
    try:
        for kernels in (True, False):
            assemble.KERNEL_MIN_CELLS = 0 if kernels else 1 << 62
            _check_wide(rng)
    finally:
        assemble.KERNEL_MIN_CELLS = saved


def _check_wide(rng: np.random.Generator) -> None:
    for low, high, length in ((0, 10**9, 3), (-(2**40), 2**40, 1)):
        dims = tuple(Dimension(n, low, high, length) for n in NAMES)
        schema = ArraySchema("a", (Attribute("v", "int64"),), dims)
        coords = rng.integers(low, high + 1, size=(500, 3))
        cells = sort_cells(coords, {"v": np.arange(500)}, {}, schema)
        reference = _reference(coords, schema)
        assert cells.offsets.tolist() == [r[1] for r in reference]
        assert [tuple(c) for c in cells.chunks.tolist()] == sorted({r[0] for r in reference})
        assert sorted(cells.order.tolist()) == list(range(500))
        assert [reference_row[0] for reference_row in reference] == [
            tuple(int(v) for v in (coords[i] - low) // length) for i in cells.order
        ]
