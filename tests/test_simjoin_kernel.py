"""The signed similarity-join kernel (kernels/simjoin.py) against brute force over all pairs (numpy),
and against scipy's cKDTree neighbour counts for L1/Linf balls. No Spark.

Shape membership in the references comes from the definition of each generated shape (norm, ranges,
or the user's mask), never from the Shape object under test.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial import cKDTree

from arrayviews.kernels.exact_sum import ExactSumError
from arrayviews.kernels.simjoin import join_aggregate, join_pairs
from arrayviews.model.shapes import L1, Linf, Shape, box, product, stencil


@dataclass
class ShapeCase:
    shape: Shape
    member: Callable[[np.ndarray], np.ndarray]  # offsets (..., d) -> bool (...)
    label: str


def l1_case(radius: int, ndim: int) -> ShapeCase:
    return ShapeCase(L1(radius, ndim), lambda o: np.abs(o).sum(axis=-1) <= radius, f"L1({radius})")


def linf_case(radius: int, ndim: int) -> ShapeCase:
    return ShapeCase(Linf(radius, ndim), lambda o: np.abs(o).max(axis=-1) <= radius, f"Linf({radius})")


def box_case(ranges) -> ShapeCase:
    low = np.array([lo for lo, _ in ranges])
    high = np.array([hi for _, hi in ranges])
    return ShapeCase(box(ranges), lambda o: np.all((o >= low) & (o <= high), axis=-1), f"box({ranges})")


def stencil_case(mask: np.ndarray, centre) -> ShapeCase:
    centre_arr = np.asarray(centre)
    size = np.asarray(mask.shape)

    def member(o: np.ndarray) -> np.ndarray:
        index = o + centre_arr
        valid = np.all((index >= 0) & (index < size), axis=-1)
        out = np.zeros(o.shape[:-1], dtype=bool)
        out[valid] = mask[tuple(np.moveaxis(index[valid], -1, 0))]
        return out

    return ShapeCase(stencil(mask, centre), member, "stencil")


@st.composite
def shape_cases(draw, ndim: int) -> ShapeCase:
    kind = draw(st.sampled_from(["L1", "Linf", "box", "stencil", "product"]))
    if kind == "L1":
        return l1_case(draw(st.integers(0, 3)), ndim)
    if kind == "Linf":
        return linf_case(draw(st.integers(0, 2)), ndim)
    if kind == "box":
        ranges = []
        for _ in range(ndim):
            low = draw(st.integers(-3, 2))
            ranges.append((low, low + draw(st.integers(0, 3))))
        return box_case(ranges)
    if kind == "product" and ndim > 1:  # a range on the first dimension times L1(1) on the rest
        low = draw(st.integers(-3, 0))
        first = (low, draw(st.integers(0, 2)))
        rest = l1_case(1, ndim - 1)
        shape = product(box([first]), L1(1, ndim - 1))
        return ShapeCase(
            shape,
            lambda o: (o[..., 0] >= first[0]) & (o[..., 0] <= first[1]) & rest.member(o[..., 1:]),
            "product",
        )
    size = tuple(draw(st.integers(1, 4)) for _ in range(ndim))
    flat = draw(st.lists(st.booleans(), min_size=int(np.prod(size)), max_size=int(np.prod(size))))
    mask = np.array(flat, dtype=bool).reshape(size)
    centre = tuple(draw(st.integers(-1, s)) for s in size)
    return stencil_case(mask, centre)


@st.composite
def point_sets(draw, ndim: int, max_points: int = 25, spread: int = 7):
    n = draw(st.integers(0, max_points))
    low = draw(st.integers(-5, 5))
    flat = draw(st.lists(st.integers(low, low + spread), min_size=n * ndim, max_size=n * ndim))
    return np.array(flat, dtype=np.int64).reshape(n, ndim)


# magnitudes 1e-10 .. 1e17 with both signs: sums that cancel catastrophically in float64
adversarial_floats = st.builds(
    lambda sign, magnitude: sign * magnitude, st.sampled_from([1.0, -1.0]), st.floats(1e-10, 1e17)
)


@st.composite
def join_cases(draw):
    ndim = draw(st.integers(1, 3))
    shape = draw(shape_cases(ndim))
    left = draw(point_sets(ndim))
    right = draw(point_sets(ndim))
    n, m = len(left), len(right)
    signed = draw(st.booleans())
    left_sign = np.array(draw(st.lists(st.sampled_from([1, -1]), min_size=n, max_size=n)), np.int64)
    right_sign = np.array(draw(st.lists(st.sampled_from([1, -1]), min_size=m, max_size=m)), np.int64)
    if not signed:
        left_sign[:], right_sign[:] = 1, 1
    wide = st.one_of(st.integers(-(10**12), 10**12), st.integers(-(2**63), 2**63 - 1))
    ints = np.array(draw(st.lists(wide, min_size=m, max_size=m)), np.int64)
    small = np.array(draw(st.lists(st.integers(-100, 100), min_size=m, max_size=m)), np.int32)
    floats = np.array(
        draw(
            st.lists(
                st.one_of(
                    st.floats(-1e6, 1e6),
                    adversarial_floats,
                    st.sampled_from([float("nan"), float("inf"), -float("inf")]),
                ),
                min_size=m,
                max_size=m,
            )
        ),
        np.float64,
    )
    valid = {
        name: np.array(draw(st.lists(st.booleans(), min_size=m, max_size=m)), dtype=bool)
        | draw(st.booleans())
        for name in ("a", "b", "f")
    }
    return shape, left, right, left_sign, right_sign, {"a": ints, "b": small, "f": floats}, valid


def brute_pairs(case: ShapeCase, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """(n, m) boolean matrix: right[j] - left[i] in the shape."""
    if len(left) == 0 or len(right) == 0:
        return np.zeros((len(left), len(right)), dtype=bool)
    offsets = right[None, :, :] - left[:, None, :]
    return case.member(offsets)


def brute_aggregates(pairs, left_sign, right_sign, values, valid):
    sign = left_sign[:, None] * right_sign[None, :] * pairs
    out = {"count": sign.sum(axis=1), "negative": (sign < 0).any(axis=1)}
    positive = sign > 0
    for name, column in values.items():
        ok = valid[name][None, :]
        out[f"valid_{name}"] = (sign * ok).sum(axis=1)
        weight = sign * ok
        if column.dtype.kind == "f":  # finite values summed exactly, non-finite ones counted
            finite = np.isfinite(column)
            out[f"sum_{name}"] = [
                math.fsum(float(w) * float(v) for w, v, f in zip(row, column, finite, strict=True) if w and f)
                for row in weight
            ]
            out[f"nonfinite_{name}"] = [
                [int((row * test(column)).sum()) for test in (np.isposinf, np.isneginf, np.isnan)]
                for row in weight
            ]
        else:  # Python integers: no wrap-around
            out[f"sum_{name}"] = [
                sum(int(w) * int(v) for w, v in zip(row, column, strict=True)) for row in weight
            ]
        has = (positive & ok).any(axis=1)
        out[f"has_{name}"] = has
        mins, maxs = [], []
        for i in range(len(left_sign)):
            chosen = column[positive[i] & ok[0]]
            mins.append(np.min(chosen) if len(chosen) else None)
            maxs.append(np.max(chosen) if len(chosen) else None)
        out[f"min_{name}"], out[f"max_{name}"] = mins, maxs
    return out


def assert_same_extreme(actual, expected, has) -> None:
    for got, want, present in zip(actual, expected, has, strict=True):
        if not present:
            continue
        if isinstance(want, float) and np.isnan(want):
            assert np.isnan(got)
        else:
            assert got == want


@settings(max_examples=150, deadline=None)
@given(join_cases())
def test_join_aggregate_matches_brute_force(case) -> None:
    shape_case, left, right, left_sign, right_sign, values, valid = case
    pairs = brute_pairs(shape_case, left, right)
    try:
        result = join_aggregate(left, right, shape_case.shape, values, valid, left_sign, right_sign)
    except ExactSumError as error:
        # Exact or loud: the kernel may refuse only a cell whose float terms leave the range it
        # guarantees (magnitudes 1e-10 .. 1e17, kernels/exact_sum.py), never one inside it.
        f = values["f"]
        terms = np.abs(f[pairs[error.index] & valid["f"] & np.isfinite(f) & (f != 0)])
        assert len(terms) and ((terms < 1e-10) | (terms > 1e17)).any(), (error, terms)
        return
    expected = brute_aggregates(pairs, left_sign, right_sign, values, valid)
    np.testing.assert_array_equal(result.count, expected["count"])
    np.testing.assert_array_equal(result.negative, expected["negative"])
    assert sorted(result.int_columns) == ["a", "b"] and result.float_columns == ["f"]
    for name in values:
        np.testing.assert_array_equal(result.valid_count[name], expected[f"valid_{name}"])
        if name == "f":  # to the last bit
            assert result.sums[name].parts[:, 0].tolist() == expected[f"sum_{name}"]
            assert result.sums[name].nonfinite.tolist() == expected[f"nonfinite_{name}"]
        else:
            assert [result.sums[name].to_python(i) for i in range(len(left))] == expected[f"sum_{name}"]
        np.testing.assert_array_equal(result.has_extreme[name], expected[f"has_{name}"])
        assert_same_extreme(result.minimum[name], expected[f"min_{name}"], expected[f"has_{name}"])
        assert_same_extreme(result.maximum[name], expected[f"max_{name}"], expected[f"has_{name}"])


def test_a_sum_spanning_more_orders_than_four_components_hold_is_refused_by_cell() -> None:
    """Found by hypothesis (terms from 1e6 down to 2e-224 in one cell): five terms 100 binary orders
    apart have an exact sum of five nonoverlapping float64 components, one more than the kernel keeps;
    it names that cell instead of rounding. Inside the guaranteed range the sum is math.fsum."""
    f = np.array([0.0, 1.0, 2.0**-100, 2.0**-200, 2.0**-300, 2.0**-400])
    right = np.zeros((len(f), 1), np.int64)
    left = np.array([[5], [0]], np.int64)  # the first left cell has no neighbour, the second all six
    with pytest.raises(ExactSumError) as caught:
        join_aggregate(left, right, L1(0, 1), {"f": f}, {"f": np.ones(len(f), bool)})
    assert caught.value.index == 1 and "more than 4 float64 components" in str(caught.value)
    small = np.array([999999.906, 48577.0, 1e-10, -3.5e16])
    result = join_aggregate(
        left[1:], right[: len(small)], L1(0, 1), {"f": small}, {"f": np.ones(len(small), bool)}
    )
    assert result.sums["f"].parts[:, 0].tolist() == [math.fsum(small)]


@settings(max_examples=150, deadline=None)
@given(join_cases())
def test_join_pairs_matches_brute_force(case) -> None:
    shape_case, left, right = case[:3]
    i, j = join_pairs(left, right, shape_case.shape)
    expected = set(zip(*np.nonzero(brute_pairs(shape_case, left, right)), strict=True))
    got = list(zip(i.tolist(), j.tolist(), strict=True))
    assert len(got) == len(set(got)), "a pair was produced twice"
    assert set(got) == {(int(a), int(b)) for a, b in expected}
    assert np.all(np.diff(i) >= 0), "pairs are not grouped by left index"


@pytest.mark.parametrize("norm", ["L1", "Linf"])
@pytest.mark.parametrize("ndim", [1, 2, 3])
@pytest.mark.parametrize("radius", [0, 1, 2, 4])
def test_counts_match_kdtree(norm: str, ndim: int, radius: int) -> None:
    """A second, independent reference: neighbour counts from cKDTree.query_ball_point."""
    rng = np.random.default_rng(100 * ndim + 10 * radius + (norm == "L1"))
    extent = {1: 60, 2: 14, 3: 7}[ndim]
    right = np.unique(rng.integers(-extent // 2, extent // 2, size=(120, ndim)), axis=0)
    left = rng.integers(-extent // 2 - 3, extent // 2 + 3, size=(80, ndim))
    shape = L1(radius, ndim) if norm == "L1" else Linf(radius, ndim)
    p = 1 if norm == "L1" else np.inf
    tree = cKDTree(right)
    expected = tree.query_ball_point(left, radius + 0.5, p=p, return_length=True)
    result = join_aggregate(left, right, shape)
    np.testing.assert_array_equal(result.count, expected)
    assert not result.negative.any()
    i, _ = join_pairs(left, right, shape)
    np.testing.assert_array_equal(np.bincount(i, minlength=len(left)), expected)


def test_signed_terms_sum_to_the_change() -> None:
    """(alpha + d_alpha) join (beta + d_beta) - alpha join beta == the three signed delta terms."""
    rng = np.random.default_rng(7)
    shape = L1(2, 2)
    old = np.unique(rng.integers(0, 12, size=(60, 2)), axis=0)
    gone = rng.random(len(old)) < 0.3
    deleted, kept = old[gone], old[~gone]
    present = {tuple(c) for c in old}
    inserted = np.array(
        sorted({tuple(x) for x in rng.integers(0, 12, size=(30, 2))} - present), np.int64
    ).reshape(-1, 2)
    new = np.vstack([kept, inserted])
    delta = np.vstack([deleted, inserted])
    delta_sign = np.concatenate([-np.ones(len(deleted), np.int64), np.ones(len(inserted), np.int64)])
    # per-cell change of the count, keyed by left coordinate
    change: dict[tuple, int] = {}
    for left, right, ls, rs in (
        (delta, old, delta_sign, None),
        (old, delta, None, delta_sign),
        (delta, delta, delta_sign, delta_sign),
    ):
        result = join_aggregate(left, right, shape, left_sign=ls, right_sign=rs)
        for cell, count in zip(map(tuple, left), result.count, strict=True):
            change[cell] = change.get(cell, 0) + int(count)
    before = dict(zip(map(tuple, old), join_aggregate(old, old, shape).count.tolist(), strict=True))
    after = dict(zip(map(tuple, new), join_aggregate(new, new, shape).count.tolist(), strict=True))
    for cell in set(before) | set(after):
        assert after.get(cell, 0) - before.get(cell, 0) == change.get(cell, 0), cell


def test_empty_inputs() -> None:
    shape = L1(1, 2)
    empty = np.zeros((0, 2), np.int64)
    points = np.array([[0, 0], [0, 1]], np.int64)
    result = join_aggregate(points, empty, shape, {"v": np.zeros(0)})
    np.testing.assert_array_equal(result.count, [0, 0])
    assert not result.has_extreme["v"].any()
    assert len(join_aggregate(empty, points, shape).count) == 0
    for left, right in ((empty, points), (points, empty)):
        i, j = join_pairs(left, right, shape)
        assert len(i) == len(j) == 0


def test_far_apart_points_and_negative_coordinates() -> None:
    left = np.array([[-1000, 5], [10**9, -(10**9)], [3, 3]], np.int64)
    right = np.array([[-1000, 6], [10**9 + 1, -(10**9)], [-5, -5], [3, 3]], np.int64)
    result = join_aggregate(left, right, L1(1, 2))
    np.testing.assert_array_equal(result.count, [1, 1, 1])


def test_nan_propagates_to_min_and_max_but_nulls_are_skipped() -> None:
    left = np.array([[0]], np.int64)
    right = np.array([[-1], [0], [1]], np.int64)
    values = {"f": np.array([2.0, np.nan, -3.0])}
    result = join_aggregate(left, right, L1(1, 1), values)
    assert np.isnan(result.minimum["f"][0]) and np.isnan(result.maximum["f"][0])
    assert np.isnan(result.sums["f"].values()[0])
    result = join_aggregate(left, right, L1(1, 1), values, {"f": np.array([True, False, True])})
    assert result.minimum["f"][0] == -3.0 and result.maximum["f"][0] == 2.0
    assert result.sums["f"].values()[0] == -1.0 and result.valid_count["f"][0] == 2
    # a negative pair neither sets the extremes nor hides the positive ones; it flags the cell
    result = join_aggregate(
        left, right, L1(1, 1), {"v": np.array([5, 9, 1])}, right_sign=np.array([1, -1, 1])
    )
    assert result.minimum["v"][0] == 1 and result.maximum["v"][0] == 5
    assert result.negative[0] and result.count[0] == 1 and result.sums["v"].values()[0] == -3
    assert result.has_gone["v"][0] and result.gone_minimum["v"][0] == result.gone_maximum["v"][0] == 9
