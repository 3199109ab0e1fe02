"""Window-aggregate kernels (dense blocks: naive / basic / incremental; sparse points) against an
independent brute-force reference: plain numpy over every output cell, windows cut at the bounds.

Tolerances: counts, integer sums, min and max are compared exactly; float sums and averages with
relative 1e-9; var/stdev with relative 1e-7 on random data, and relative 1e-6 against a float64
two-pass reference on data around 1e8 with spread 1 and on float32 data (the stated requirement).
"""

from __future__ import annotations

import zlib
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arrayviews.kernels.exact_sum import SumOverflow
from arrayviews.kernels.window import FUNCTIONS, METHODS, window_array, window_block
from arrayviews.kernels.window_points import window_points

NUMERIC = ("count", "sum", "avg", "min", "max", "var", "stdev")
_NUMPY = {"sum": np.sum, "avg": np.mean, "min": np.min, "max": np.max}


# -- the reference -------------------------------------------------------------------------------


def reference(values, present, before, after, function, valid=None):
    """(result, null) per cell of the whole array; only present (and valid) cells count."""
    values = np.asarray(values)
    counted = np.ones(values.shape, bool) if present is None else np.asarray(present, bool)
    if valid is not None:
        counted = counted & valid
    out = np.zeros(values.shape, dtype=object)
    null = np.zeros(values.shape, dtype=bool)
    for index in np.ndindex(values.shape):
        box = tuple(slice(max(0, i - b), i + a + 1) for i, b, a in zip(index, before, after, strict=True))
        window = values[box][counted[box]]
        if function == "count":
            out[index] = window.size
        elif function in ("var", "stdev"):
            if window.size < 2:
                null[index] = True
                continue
            with np.errstate(invalid="ignore"):
                var = np.var(window.astype(np.float64), ddof=1)  # two-pass
            out[index] = var if function == "var" else np.sqrt(var)
        elif window.size == 0:
            null[index] = True
        elif function == "sum" and values.dtype.kind in "biu":
            out[index] = sum(int(v) for v in window)  # exact
        else:
            with np.errstate(invalid="ignore", over="ignore"):
                data = window.astype(np.float64) if function in ("sum", "avg") else window
                out[index] = _NUMPY[function](data)
    return out, null


def expected_dtype(function, dtype):
    if function == "count":
        return np.dtype(np.int64)
    if function == "sum":
        return np.dtype(np.int64) if dtype.kind in "biu" else np.dtype(np.float64)
    if function in ("min", "max"):
        return dtype
    return np.dtype(np.float64)


def check(function, dtype, got, ref, rtol=None, atol=None):
    """Compare one kernel result (value, null) with the reference (value, null)."""
    value, null = got
    ref_value, ref_null = ref
    assert value.dtype == expected_dtype(function, np.dtype(dtype)), (function, value.dtype)
    assert value.shape == ref_value.shape
    got_null = np.zeros(value.shape, bool) if null is None else null
    np.testing.assert_array_equal(got_null, ref_null, err_msg=f"{function}: null mask")
    if null is not None:
        assert null.any(), "a null mask must be None when nothing is null"
        assert not np.any(value[null].astype(np.float64)), "null positions hold 0"
    keep = ~ref_null
    exact = function in ("count", "min", "max") or (function == "sum" and np.dtype(dtype).kind in "biu")
    if exact:
        np.testing.assert_array_equal(
            value[keep].astype(object) if function == "sum" else value[keep],
            ref_value[keep].astype(value.dtype) if function != "sum" else ref_value[keep],
            err_msg=function,
        )
        return
    tolerance = rtol if rtol is not None else (1e-7 if function in ("var", "stdev") else 1e-9)
    want = ref_value[keep].astype(np.float64)
    scale = np.nanmax(np.abs(want[np.isfinite(want)]), initial=1.0)
    if atol is None:
        atol = tolerance * scale
    np.testing.assert_allclose(value[keep], want, rtol=tolerance, atol=atol, equal_nan=True, err_msg=function)


def random_values(rng, shape, dtype):
    if np.dtype(dtype) == np.bool_:
        return rng.random(shape) < 0.5
    if np.dtype(dtype).kind == "i":
        return rng.integers(-1000, 1000, size=shape).astype(dtype)
    return (rng.normal(size=shape) * 10).astype(dtype)


def functions_for(dtype):
    """bool takes count, sum (as 0/1), min and max; the model rejects var/stdev over bool."""
    return ("count", "sum", "avg", "min", "max") if np.dtype(dtype) == np.bool_ else NUMERIC


def run_all(values, present, before, after, functions, valid=None, methods=METHODS):
    references = {f: reference(values, present, before, after, f, valid) for f in functions}
    for method in methods:
        results = window_array(values, present, before, after, functions, method, valid=valid)
        assert list(results) == list(functions)
        for f in functions:
            check(f, values.dtype, results[f], references[f])
    # the sparse point kernel on the same cells, queried at every cell
    counted = np.ones(values.shape, bool) if present is None else np.asarray(present, bool)
    coords = np.argwhere(counted)
    queries = np.argwhere(np.ones(values.shape, bool))
    points = window_points(
        coords,
        values[counted],
        queries,
        before,
        after,
        functions,
        valid=None if valid is None else valid[counted],
    )
    for f in functions:
        check(f, values.dtype, shaped(points[f], values.shape), references[f])


def shaped(pair, shape):
    """A point-kernel result (flat over the queries) in the shape of the array."""
    value, null = pair
    return value.reshape(shape), None if null is None else null.reshape(shape)


# -- dense and sparse against the reference ------------------------------------------------------

CASES = [
    ((17,), (2,), (1,)),
    ((9,), (0,), (3,)),
    ((6, 7), (1, 2), (2, 0)),
    ((5, 6), (0, 0), (0, 0)),
    ((4, 5, 3), (1, 0, 2), (0, 2, 1)),
    ((3, 4, 3, 2), (1, 1, 0, 1), (0, 1, 2, 0)),
    ((2, 3, 2, 3, 4), (1, 1, 0, 1, 2), (0, 1, 2, 1, 0)),
]


@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "int64", "bool"])
@pytest.mark.parametrize(("shape", "before", "after"), CASES)
def test_dense_and_sparse_match_reference(shape, before, after, dtype):
    rng = np.random.default_rng(zlib.crc32(repr((shape, dtype)).encode()))
    values = random_values(rng, shape, dtype)
    present = rng.random(shape) < 0.6
    run_all(values, present, before, after, functions_for(dtype))


@pytest.mark.parametrize("density", [1.0, 0.5, 0.01, 0.0])
def test_densities(density):
    rng = np.random.default_rng(7)
    shape = (9, 11)
    values = random_values(rng, shape, "float64")
    present = None if density == 1.0 else rng.random(shape) < density
    run_all(values, present, (2, 1), (1, 3), NUMERIC)


def test_windows_larger_than_the_array():
    rng = np.random.default_rng(3)
    values = random_values(rng, (5, 4), "int64")
    present = rng.random((5, 4)) < 0.7
    run_all(values, present, (7, 0), (2, 9), NUMERIC)
    run_all(values[0], present[0], (10,), (10,), NUMERIC)


def test_nan_and_infinities_propagate_like_numpy():
    rng = np.random.default_rng(5)
    values = random_values(rng, (8, 9), "float64")
    values[1, 1] = np.nan
    values[4, 6] = np.inf
    values[5, 7] = -np.inf
    values[7, 0] = np.inf
    present = rng.random((8, 9)) < 0.8
    present[1, 1] = present[4, 6] = present[5, 7] = present[7, 0] = True
    values[0, 8] = np.nan  # an empty cell holding NaN does not count
    present[0, 8] = False
    run_all(values, present, (1, 1), (1, 2), NUMERIC)


def test_null_values_count_like_empty_cells():
    rng = np.random.default_rng(11)
    values = random_values(rng, (7, 8), "int32")
    present = rng.random((7, 8)) < 0.8
    valid = rng.random((7, 8)) < 0.7
    run_all(values, present, (1, 2), (2, 1), NUMERIC, valid=valid)


def test_integer_extremes_and_exact_sums():
    big = np.iinfo(np.int64)
    values = np.array([[big.min, 3, big.max], [2**62, 2**62, -(2**62)], [7, big.max, -1]], dtype=np.int64)
    present = np.array([[True, True, True], [True, True, True], [False, True, True]])
    # the sums of these windows stay within int64 where they are checked; wrap-around is the caller's
    for f in ("count", "min", "max"):
        run_all(values, present, (1, 1), (1, 1), (f,))
    small = np.array([2**53 + 1, 2**53 + 3, 5, -(2**53)], dtype=np.int64)
    run_all(small, None, (1,), (2,), ("sum", "avg"))


int64_values = st.one_of(
    st.integers(-(2**63), 2**63 - 1), st.integers(-5, 5), st.sampled_from([2**63 - 1, -(2**63)])
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(int64_values, min_size=1, max_size=25),
    st.integers(0, 3),
    st.integers(0, 3),
    st.sampled_from(METHODS + ("points",)),
)
def test_integer_window_sums_never_wrap(values, before, after, method):
    """Python integers as the reference: a window sum beyond int64 raises, one within is exact (even
    when the window's partial sums leave int64), and avg is the exact quotient rounded."""
    n = len(values)
    windows = [values[max(0, i - before) : i + after + 1] for i in range(n)]
    exact = [sum(w) for w in windows]
    array = np.array(values, dtype=np.int64)

    def run(function):
        if method == "points":
            coords = np.arange(n, dtype=np.int64).reshape(-1, 1)
            return window_points(coords, array, coords, (before,), (after,), function)[function][0]
        return window_array(array, None, (before,), (after,), function, method)[function][0]

    if all(-(2**63) <= x < 2**63 for x in exact):
        assert run("sum").tolist() == exact
    else:
        with pytest.raises(SumOverflow) as caught:
            run("sum")
        (index,) = caught.value.index
        assert caught.value.value == exact[index] and not -(2**63) <= exact[index] < 2**63
    averages = run("avg")
    for got, total, window in zip(averages.tolist(), exact, windows, strict=True):
        want = float(Fraction(total, len(window)))
        assert got == pytest.approx(want, rel=4e-16, abs=0)


def test_a_window_sum_of_two_int64_maxima_raises_and_avg_is_exact():
    values = np.array([2**63 - 1, 2**63 - 1], dtype=np.int64)
    for method in METHODS:
        with pytest.raises(SumOverflow, match="18446744073709551614"):
            window_array(values, None, (1,), (0,), "sum", method)
        assert window_array(values, None, (1,), (0,), "avg", method)["avg"][0][1] == float(2**63 - 1)


def test_several_functions_share_a_call_and_aliases():
    rng = np.random.default_rng(2)
    values = random_values(rng, (6, 6), "float64")
    results = window_array(values, None, (1, 1), (1, 1), ["mean", "max", "std", "avg"])
    assert list(results) == ["avg", "max", "stdev"]
    check("avg", values.dtype, results["avg"], reference(values, None, (1, 1), (1, 1), "avg"))


# -- the block API: core shape, halo, targets, validation ----------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_block_core_is_the_cells_with_whole_windows(method):
    rng = np.random.default_rng(9)
    values = random_values(rng, (12, 10), "float64")
    present = rng.random((12, 10)) < 0.5
    before, after = (2, 1), (1, 3)
    block = window_block(values, present, before, after, FUNCTIONS, method)
    whole = window_array(values, present, before, after, FUNCTIONS, method)
    core = (slice(2, 12 - 1), slice(1, 10 - 3))
    for f in FUNCTIONS:
        value, null = block[f]
        assert value.shape == (9, 6)
        whole_value, whole_null = whole[f]
        np.testing.assert_allclose(value, whole_value[core], rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(
            np.zeros((9, 6), bool) if null is None else null,
            np.zeros((9, 6), bool) if whole_null is None else whole_null[core],
        )


@pytest.mark.parametrize("method", ["naive", "basic"])
def test_targets_compute_only_the_wanted_windows(method):
    rng = np.random.default_rng(4)
    values = random_values(rng, (10, 9), "int64")
    present = rng.random((10, 9)) < 0.4
    targets = present[1:-1, 1:-1]
    full = window_block(values, present, (1, 1), (1, 1), FUNCTIONS, "incremental")
    part = window_block(values, present, (1, 1), (1, 1), FUNCTIONS, method, targets=targets)
    for f in FUNCTIONS:
        np.testing.assert_allclose(part[f][0][targets], full[f][0][targets])
        assert not np.any(part["count"][0][~targets])
    dense = window_block(values, None, (1, 1), (1, 1), ["count", "sum"], method, targets=targets)
    assert np.all(dense["count"][0][targets] == 9)
    assert dense["count"][1] is None
    np.testing.assert_array_equal(dense["sum"][1], ~targets)


def test_block_edge_cases_and_errors():
    values = np.arange(6.0)
    exact = window_block(values, None, (2,), (3,), ["sum", "var"])
    np.testing.assert_allclose(exact["sum"][0], [15.0])
    np.testing.assert_allclose(exact["var"][0], [np.var(values, ddof=1)])
    assert window_block(values, None, (3,), (3,), ["sum"])["sum"][0].shape == (0,)
    single = window_block(values, None, (0,), (0,), ["var", "count", "max"])
    assert single["var"][1].all() and (single["count"][0] == 1).all()
    np.testing.assert_array_equal(single["max"][0], values)
    counts = window_block(None, values > 2, (1,), (1,), "count")
    np.testing.assert_array_equal(counts["count"][0], [0, 1, 2, 3])
    with pytest.raises(ValueError, match="smaller than its windows"):
        window_block(values, None, (4,), (4,), ["sum"])
    with pytest.raises(ValueError, match="method"):
        window_block(values, None, (1,), (1,), ["sum"], method="fast")
    with pytest.raises(ValueError, match="each of the 1 dimensions"):
        window_block(values, None, (1, 1), (1,), ["sum"])
    with pytest.raises(ValueError, match=">= 0"):
        window_block(values, None, (-1,), (1,), ["sum"])
    with pytest.raises(ValueError, match="unknown aggregate"):
        window_block(values, None, (1,), (1,), ["median"])
    with pytest.raises(ValueError, match="mask shape"):
        window_block(values, np.ones(5, bool), (1,), (1,), ["sum"])
    with pytest.raises(TypeError):
        window_block(values.astype(str), None, (1,), (1,), ["count"])


# -- numerical robustness --------------------------------------------------------------------------


def two_pass_var(values, present, before, after):
    var, null = reference(values.astype(np.float64), present, before, after, "var")
    return var, null


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_variance_far_from_zero_is_accurate(dtype):
    """Data around 1e8 with spread 1 (float64) and float32 data: var and stdev within 1e-6 relative
    of a float64 two-pass reference, for every method and the point kernel."""
    rng = np.random.default_rng(12)
    shape = (40, 30)
    if dtype == "float64":
        values = 1e8 + rng.normal(size=shape)
    else:
        values = (1e3 + rng.normal(size=shape)).astype(np.float32)
    present = rng.random(shape) < 0.7
    before, after = (3, 2), (2, 4)
    var_ref, null = two_pass_var(values, present, before, after)
    stdev_ref = reference(values.astype(np.float64), present, before, after, "stdev")
    for method in METHODS:
        results = window_array(values, present, before, after, ["var", "stdev", "avg"], method)
        check("var", values.dtype, results["var"], (var_ref, null), rtol=1e-6, atol=0)
        check("stdev", values.dtype, results["stdev"], stdev_ref, rtol=1e-6, atol=0)
        check(
            "avg", values.dtype, results["avg"], reference(values, present, before, after, "avg"), rtol=1e-12
        )
    coords = np.argwhere(present)
    queries = np.argwhere(np.ones(shape, bool))
    points = window_points(coords, values[present], queries, before, after, ["var", "stdev"])
    check("var", values.dtype, shaped(points["var"], shape), (var_ref, null), rtol=1e-6, atol=0)
    check("stdev", values.dtype, shaped(points["stdev"], shape), stdev_ref, rtol=1e-6, atol=0)


@pytest.mark.parametrize("method", METHODS)
def test_a_huge_value_leaves_no_residue_in_later_windows(method):
    """Float window sums never subtract: windows without the 1e17 cell are exact (running sums would
    keep a rounding residue of about 16 in every later window)."""
    line = np.ones(200)
    line[50] = 1e17
    plane = np.ones((200, 3))
    plane[50, 1] = 1e17
    for values, before, after in ((line, (5,), (5,)), (plane, (5, 1), (5, 1))):
        results = window_array(values, None, before, after, ["sum", "var"], method)
        for f in ("sum", "var"):
            check(f, values.dtype, results[f], reference(values, None, before, after, f), atol=0)


def test_constant_integer_windows_have_zero_variance():
    values = np.full((6, 6), 123456789, dtype=np.int64)
    for method in METHODS:
        result, _ = window_array(values, None, (1, 1), (1, 1), ["stdev"], method)["stdev"]
        assert np.all(result == 0.0)


# -- sparse points over huge coordinate ranges ----------------------------------------------------


def brute_points(coords, values, queries, before, after, function):
    out, null = [], []
    for q in queries:
        inside = np.all((coords >= q - np.asarray(before)) & (coords <= q + np.asarray(after)), axis=1)
        window = values[inside]
        if function == "count":
            out.append(window.size)
            null.append(False)
        elif window.size < (2 if function in ("var", "stdev") else 1):
            out.append(0)
            null.append(True)
        elif function in ("var", "stdev"):
            var = np.var(window.astype(np.float64), ddof=1)
            out.append(var if function == "var" else np.sqrt(var))
            null.append(False)
        else:
            out.append(_NUMPY[function](window.astype(np.float64) if function in ("sum", "avg") else window))
            null.append(False)
    return np.array(out, dtype=object), np.array(null)


@pytest.mark.parametrize("spread", [10**4, 2**40])
def test_points_far_apart(spread):
    """Clustered points spread over a huge 3-D box (the bucket keys may wrap around int64)."""
    rng = np.random.default_rng(spread % 1000)
    centres = rng.integers(-spread, spread, size=(6, 3))
    coords = np.unique(
        np.concatenate([c + rng.integers(-4, 5, size=(25, 3)) for c in centres]), axis=0
    ).astype(np.int64)
    values = rng.normal(size=len(coords)) * 5
    queries = np.concatenate([coords[::3], centres + 1, rng.integers(-spread, spread, size=(5, 3))])
    before, after = (2, 0, 3), (1, 2, 2)
    results = window_points(coords, values, queries, before, after, NUMERIC)
    for f in NUMERIC:
        check(f, values.dtype, results[f], brute_points(coords, values, queries, before, after, f))


def test_points_edge_cases():
    coords = np.array([[0, 0], [1, 1], [5, 5]], dtype=np.int64)
    values = np.array([1, 2, 3], dtype=np.int32)
    none = window_points(coords[:0], values[:0], coords, (1, 1), (1, 1), ["count", "sum", "min"])
    assert np.all(none["count"][0] == 0) and none["sum"][1].all() and none["min"][0].dtype == np.int32
    nothing = window_points(coords, values, coords[:0], (1, 1), (1, 1), ["avg"])
    assert nothing["avg"][0].shape == (0,)
    valid = np.array([True, False, True])
    queries = np.array([[0, 0], [1, 1], [3, 3], [5, 5]], dtype=np.int64)
    got = window_points(coords, values, queries, (1, 1), (1, 1), ["count", "sum"], valid=valid)
    np.testing.assert_array_equal(got["count"][0], [1, 1, 0, 1])
    np.testing.assert_array_equal(got["sum"][0], [1, 1, 0, 3])
    np.testing.assert_array_equal(got["sum"][1], [False, False, True, False])
    counts = window_points(coords, None, coords, (5, 5), (0, 0), "count")
    np.testing.assert_array_equal(counts["count"][0], [1, 2, 3])
    with pytest.raises(ValueError, match="same d"):
        window_points(coords, values, coords[:, :1], (1,), (1,), ["sum"])
    with pytest.raises(ValueError, match="values are needed"):
        window_points(coords, None, coords, (1, 1), (1, 1), ["sum"])


# -- property test ---------------------------------------------------------------------------------


@st.composite
def window_cases(draw):
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=ndim, max_size=ndim)))
    before = tuple(draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim)))
    after = tuple(draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim)))
    density = draw(st.sampled_from([0.0, 0.05, 0.5, 1.0]))
    dtype = draw(st.sampled_from(["float64", "int32", "bool"]))
    seed = draw(st.integers(0, 2**32 - 1))
    return shape, before, after, density, dtype, seed


@settings(max_examples=80, deadline=None)
@given(window_cases())
def test_property_all_methods_and_points_agree_with_reference(case):
    shape, before, after, density, dtype, seed = case
    rng = np.random.default_rng(seed)
    values = random_values(rng, shape, dtype)
    present = rng.random(shape) < density
    run_all(values, present, before, after, functions_for(dtype))
