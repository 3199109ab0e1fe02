"""Float sums of regrid and aggregate are exact (math.fsum of the cells, however they are split into
partials and merged) or a clear error naming the output cell: no silent cancellation."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import arrayviews
from arrayviews.kernels.aggregates import finalize, merge_states, pack_states, partial_states, unpack_states
from arrayviews.kernels.window import CANCELLATION_TOLERANCE
from arrayviews.model.errors import RangeError

FRESH = itertools.count()

#: Magnitudes inside the range where four components always hold an exact sum (kernels/exact_sum.py).
adversarial = st.one_of(
    st.floats(min_value=1e-10, max_value=1e17),
    st.floats(min_value=-1e17, max_value=-1e-10),
    st.sampled_from([1e16, -1e16, 1.0, -1.0, 2.0**53, -(2.0**53), 0.1, -0.1, 1e17, -1e17, 0.0]),
)


@pytest.mark.parametrize("execution", ["local", "spark"])
def test_regrid_and_aggregate_sums_do_not_cancel(spark, tmp_path, execution) -> None:
    """1e16 + 1 - 1e16 is 1 (a plain float sum gives 0): before, regrid gave 0 and the total 1e16."""
    db = arrayviews.connect(str(tmp_path / "w"), spark=spark, execution=execution)
    array = db.create_array("c<v:float64>[i=0:5:3]")
    terms = [1e16, 1.0, -1e16, 3.0, 1e300, -1e300]
    array.write_dense(np.array(terms))
    blocks = array.regrid([3], "sum(v)", "avg(v)").to_pandas()
    assert blocks["v_sum"].tolist() == [math.fsum(terms[:3]), math.fsum(terms[3:])] == [1.0, 3.0]
    assert blocks["v_avg"].tolist() == [1.0 / 3, 1.0]
    total = array.aggregate("sum(v)", "avg(v)").to_pandas()
    assert total["v_sum"].tolist() == [math.fsum(terms)] == [4.0]
    grouped = array.aggregate("sum(v)", by=["i"]).to_pandas()
    assert grouped["v_sum"].tolist() == terms


@pytest.mark.parametrize("execution", ["local", "spark"])
def test_a_sum_beyond_four_components_is_refused_naming_the_cell(spark, tmp_path, execution) -> None:
    db = arrayviews.connect(str(tmp_path / "w"), spark=spark, execution=execution)
    array = db.create_array("wide<v:float64>[i=0:9:5]")
    values = np.ones(10)
    values[5:] = [1e300, 1e200, 1e100, 1.0, 1e-100]  # five components apart: block 1 cannot be held
    array.write_dense(values)
    with pytest.raises(RangeError, match=r"sum of v at cell \(i=1\).*more than 4 float64 components"):
        array.regrid([5], "sum(v)").to_numpy()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 6), adversarial, st.booleans()), min_size=1, max_size=80),
    st.integers(1, 5),
    st.randoms(use_true_random=False),
)
def test_partial_sums_merge_to_fsum_however_split(rows, pieces, rng) -> None:
    """Cells of 7 groups (some null) split at random into partials, each packed and unpacked as
    between tasks, then merged: every sum is math.fsum of the group's non-null values, and avg is
    that sum over the count."""
    keys = np.array([r[0] for r in rows])
    values = np.array([r[1] for r in rows])
    valid = np.array([r[2] for r in rows])
    split = [rng.randrange(pieces) for _ in rows]
    partials = []
    for piece in range(pieces):
        chosen = np.array([s == piece for s in split])
        if chosen.any():
            states = partial_states(keys[chosen], values[chosen], {"sum"}, valid=valid[chosen])
            partials.append(unpack_states(pack_states(states)))
    merged = merge_states(partials)
    sums, _ = finalize(merged, "sum")
    averages, _ = finalize(merged, "avg")
    for group, total, average in zip(merged.keys, sums, averages, strict=True):
        terms = [v for k, v, ok in rows if k == group and ok]
        assert total == math.fsum(terms)
        assert average == (math.fsum(terms) / len(terms) if terms else 0.0)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(adversarial, min_size=12, max_size=12),
    st.lists(st.booleans(), min_size=12, max_size=12),
    st.integers(1, 4),
)
def test_regrid_sums_equal_fsum_of_each_block(local_db, terms, present, block) -> None:
    """A 3 x 4 array (absent cells as drawn) regridded in blocks of ``block`` columns."""
    grid = np.array(terms).reshape(3, 4)
    mask = ~np.array(present).reshape(3, 4)
    name = f"g{next(FRESH)}"  # hypothesis may replay an example: every run gets its own array
    array = local_db.create_array(f"{name}<v:float64>[r=0:2:2; c=0:3:3]")
    array.write_dense(np.ma.MaskedArray(grid, mask=mask))
    got = array.regrid([1, block], "sum(v)", "count(v)").to_pandas()
    expected = {}
    for r in range(3):
        for c in range(4):
            if not mask[r, c]:
                expected.setdefault((r, c // block), []).append(grid[r, c])
    assert {(int(a), int(b)): s for a, b, s in zip(got["r"], got["c"], got["v_sum"], strict=True)} == {
        key: math.fsum(v) for key, v in expected.items()
    }


@pytest.fixture(scope="module")
def local_db(spark, tmp_path_factory):
    return arrayviews.connect(str(tmp_path_factory.mktemp("exact")), spark=spark, execution="local")


def assert_close_to_fsum(frame, expected: dict) -> None:
    got = dict(zip(zip(frame["r"], frame["c"], strict=True), frame["v_sum"], strict=True))
    assert got.keys() == expected.keys()
    for cell, total in expected.items():
        assert abs(got[cell] - total) <= CANCELLATION_TOLERANCE * 1.001 * abs(total), (cell, got[cell], total)


def brute_window_sums(present: np.ndarray, values: np.ndarray, before, after) -> dict:
    """Per present cell of a 2-D grid, math.fsum of the present values in its window."""
    out = {}
    for a, b in zip(*np.nonzero(present), strict=True):
        box = (slice(max(a - before[0], 0), a + after[0] + 1), slice(max(b - before[1], 0), b + after[1] + 1))
        out[(int(a), int(b))] = math.fsum(values[box][present[box]].tolist())
    return out


@pytest.mark.parametrize("method", ["incremental", "basic", "naive"])
def test_dense_window_sums_do_not_cancel(local_db, method) -> None:
    """Huge values of both signs next to small ones: every window sum is math.fsum of its cells
    (before, 1e16 + 1 - 1e16 came out as 0 and 3 + 1e300 - 1e300 as 0)."""
    values = np.array([[1e16, 1.0, -1e16, 3.0, 1e300, -1e300, 2.5, -2.5]])
    array = local_db.create_array(f"cancel_{method}<v:float64>[r=0:0:1; c=0:7:3]")
    array.write_dense(values)
    got = array.window([0, 0, 1, 1], "sum(v)", "avg(v)", method=method).to_pandas()
    expected = brute_window_sums(np.ones_like(values, bool), values, (0, 1), (0, 1))
    assert got["v_sum"].tolist() == [expected[(0, c)] for c in range(8)]
    assert got["v_sum"].tolist()[:2] == [1e16, 1.0]


@settings(max_examples=30, deadline=None)
@given(
    st.lists(adversarial, min_size=30, max_size=30),
    st.lists(st.booleans(), min_size=30, max_size=30),
    st.integers(0, 2),
    st.integers(0, 3),
)
def test_window_sums_equal_fsum_dense_and_sparse(local_db, terms, present, reach_rows, reach_columns) -> None:
    """A 5 x 6 grid with the drawn cells present: every window sum is within the kernel's tolerance (2**-36) of math.fsum
    relative to it (so a window whose terms cancel to 0 gives exactly 0), dense and sparse (the point
    kernel)."""
    grid = np.array(terms).reshape(5, 6)
    mask = np.array(present).reshape(5, 6)
    if not mask.any():
        mask[0, 0] = True
    before = after = (reach_rows, reach_columns)
    expected = brute_window_sums(mask, grid, before, after)
    key = next(FRESH)  # hypothesis may replay an example: every run gets its own arrays
    dense = local_db.create_array(f"wd{key}<v:float64>[r=0:4:5; c=0:5:6]")
    dense.write_dense(np.ma.MaskedArray(grid, mask=~mask))
    extents = [reach_rows, reach_rows, reach_columns, reach_columns]
    got = dense.window(extents, "sum(v)").to_pandas()
    assert_close_to_fsum(got, expected)
    # sparse: the same cells in a huge domain, 40 chunks apart from one another per row
    sparse = local_db.create_array(f"ws{key}<v:float64>[r=0:999999:1000; c=0:999999:1000]")
    cells = np.argwhere(mask)
    sparse.insert({"r": cells[:, 0], "c": cells[:, 1], "v": grid[mask]})
    got = sparse.window(extents, "sum(v)").to_pandas()
    assert_close_to_fsum(got, expected)


def test_a_window_sum_beyond_four_components_is_refused_naming_the_cell(local_db) -> None:
    """Cell 0's window holds 1e300 - 1e300 (they cancel) beside 1e200, 1e100, 1, 1e-100 and 1e-200:
    its exact sum needs five components."""
    array = local_db.create_array("wide_window<v:float64>[c=0:9:10]")
    array.write_dense(np.array([1e300, 1e200, 1e100, 1.0, 1e-100, 1e-200, -1e300, 0.0, 0.0, 0.0]))
    with pytest.raises(RangeError, match=r"window sum of v at cell \(c=0\).*more than 4 float64"):
        array.window([0, 6], "sum(v)").to_numpy()
