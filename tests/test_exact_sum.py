"""Exact sums (kernels/exact_sum.py) against independent references: math.fsum and exact rational
arithmetic (fractions.Fraction) for float expansions, Python integers for 128-bit integer sums."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arrayviews.kernels.exact_sum import ExactSumError, FloatSums, IntSums, K

INF, NAN = float("inf"), float("nan")

# magnitudes 1e-10 .. 1e17, both signs, and now and then a non-finite value
adversarial = st.builds(lambda sign, m: sign * m, st.sampled_from([1.0, -1.0]), st.floats(1e-10, 1e17))
values = st.one_of(
    adversarial, adversarial, adversarial, st.sampled_from([0.0, 1.5, 1e16, 1e17, INF, -INF, NAN])
)


def reference(terms: list[float]) -> float:
    """The sum as np.sum treats non-finite values, and math.fsum of the finite ones."""
    if any(math.isnan(t) for t in terms) or (INF in terms and -INF in terms):
        return NAN
    if INF in terms:
        return INF
    if -INF in terms:
        return -INF
    return math.fsum(terms)


def same(got: float, want: float) -> bool:
    return (math.isnan(got) and math.isnan(want)) or got == want


def check_state(state: FloatSums, row: int, terms: list[float]) -> None:
    """Value to the last bit, and the components: canonical, exact as rationals."""
    assert same(float(state.values()[row]), reference(terms)), (terms, state.parts[row])
    finite = [t for t in terms if math.isfinite(t)]
    parts = [float(p) for p in state.parts[row]]
    assert sum(map(Fraction, parts)) == sum(map(Fraction, finite), Fraction(0))
    assert parts[0] == math.fsum(finite)
    rest = Fraction(0)
    for k in range(K - 1, -1, -1):  # each component is the rounded rest of the ones below it
        rest += Fraction(parts[k])
        assert parts[k] == float(rest) or parts[k] == 0.0 == rest
    assert state.nonfinite[row].tolist() == [
        sum(t == INF for t in terms),
        sum(t == -INF for t in terms),
        sum(math.isnan(t) for t in terms),
    ]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.booleans(), values, st.integers(0, 10**6)), max_size=60))
def test_interleaved_inserts_and_deletes_equal_fsum_of_the_survivors(operations) -> None:
    """One cell: insert values, delete earlier ones (any order); after every step the state equals
    math.fsum of the values still there."""
    state = FloatSums.zeros(1)
    alive: list[float] = []
    for insert, value, pick in operations:
        if insert or not alive:
            delta, sign = value, 1
            alive.append(value)
        else:
            delta, sign = alive.pop(pick % len(alive)), -1
        rows = FloatSums.concat([state, FloatSums.of_values(np.array([delta]))])
        state = rows.combine(np.zeros(2, np.int64), 1, np.array([1, sign]))
        check_state(state, 0, alive)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), values, st.sampled_from([1, -1])), max_size=80))
def test_grouped_signed_sums(rows) -> None:
    """Many cells at once: signed rows combined per group equal fsum of the signed finite terms."""
    groups = np.array([g for g, _, _ in rows], np.int64)
    signs = np.array([s for _, _, s in rows], np.int64)
    terms = FloatSums.of_values(np.array([v for _, v, _ in rows], np.float64))
    combined = terms.combine(groups, 5, signs)
    for g in range(5):
        mine = [(v, s) for h, v, s in rows if h == g]
        finite = [s * v for v, s in mine if math.isfinite(v)]
        assert float(combined.parts[g, 0]) == math.fsum(finite)
        assert sum(map(Fraction, combined.parts[g].tolist())) == sum(map(Fraction, finite), Fraction(0))
        counted = [
            sum(s for v, s in mine if v == INF),
            sum(s for v, s in mine if v == -INF),
            sum(s for v, s in mine if math.isnan(v)),
        ]
        assert combined.nonfinite[g].tolist() == counted


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(values, max_size=40), max_size=8))
def test_sums_of_lists(lists) -> None:
    flat = np.array([v for values in lists for v in values], np.float64)
    offsets = np.cumsum([0] + [len(values) for values in lists])
    sums = FloatSums.of_lists(flat, offsets)
    for row, terms in enumerate(lists):
        check_state(sums, row, terms)


# small integers and halves (their running sums round at no step: the one-pass path), now and then a
# term that makes a running sum round (1e16, 2**53 + 2, 0.1) or is not finite (the expansion path)
representable = st.one_of(
    st.integers(-1000, 1000).map(float),
    st.integers(-1000, 1000).map(lambda n: n / 2),
    st.sampled_from([0.0, -0.0, 1e16, 2.0**53 + 2, -(2.0**53), 0.1, 1e308, INF, -INF, NAN]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(representable, max_size=20), max_size=10))
def test_sums_of_lists_with_exact_running_sums(lists) -> None:
    flat = np.array([v for values in lists for v in values], np.float64)
    offsets = np.cumsum([0] + [len(values) for values in lists])
    try:
        sums = FloatSums.of_lists(flat, offsets)
    except ExactSumError:  # only where fsum itself overflows
        assert any(_fsum_overflows(terms) for terms in lists)
        return
    for row, terms in enumerate(lists):
        check_state(sums, row, terms)
        if sums.parts[row, 0] == 0.0:  # a zero sum is +0.0, whichever path summed it
            assert math.copysign(1.0, sums.parts[row, 0]) == 1.0


def _fsum_overflows(terms: list[float]) -> bool:
    try:
        math.fsum([t for t in terms if math.isfinite(t)])
    except OverflowError:
        return True
    return False


def test_zero_sums_are_positive_zero_on_both_paths() -> None:
    # one-pass: [-0.0], [1, -1], [-0.0, -0.0]; expansion: [1e16, 1, -1e16, -1] (1e16 + 1 rounds)
    lists = [[-0.0], [1.0, -1.0], [-0.0, -0.0], [1e16, 1.0, -1e16, -1.0]]
    flat = np.array([v for terms in lists for v in terms])
    sums = FloatSums.of_lists(flat, np.cumsum([0] + [len(t) for t in lists]))
    assert sums.parts.tolist() == [[0.0] * K] * len(lists)
    assert all(math.copysign(1.0, p) == 1.0 for p in sums.parts[:, 0])


def test_the_issue_cases() -> None:
    # a cell whose neighbours are 1e16 and 1.0 holds 1.0 after the 1e16 neighbour leaves
    state = FloatSums.of_lists(np.array([1e16, 1.0]), np.array([0, 2]))
    state = FloatSums.concat([state, FloatSums.of_values(np.array([1e16]))]).combine(
        np.zeros(2, np.int64), 1, np.array([1, -1])
    )
    assert state.values()[0] == 1.0
    # {1e17, 1.5, 1e-10} spans ~145 bits: three components, exact
    sums = FloatSums.of_lists(np.array([1e17, 1.5, 1e-10]), np.array([0, 3]))
    check_state(sums, 0, [1e17, 1.5, 1e-10])
    assert np.count_nonzero(sums.parts[0]) == 3
    # an infinity added and taken away again leaves the finite sum
    state = FloatSums.of_lists(np.array([2.5, INF]), np.array([0, 2]))
    state = FloatSums.concat([state, FloatSums.of_values(np.array([INF]))]).combine(
        np.zeros(2, np.int64), 1, np.array([1, -1])
    )
    assert state.values()[0] == 2.5


def test_half_even_rounding_across_components() -> None:
    # 2**53 + 1 is a tie between 2**53 and 2**53 + 2; a tiny third term decides it, as in fsum
    for terms in ([2.0**53, 1.0, 1e-10], [2.0**53, 1.0, -1e-10], [2.0**53, 1.0], [2.0**53 + 2, 1.0]):
        sums = FloatSums.of_lists(np.array(terms), np.array([0, len(terms)]))
        check_state(sums, 0, terms)


def test_k_components_cover_the_adversarial_range_and_more_raise() -> None:
    # the widest spread 1e-10 .. 1e17 with many terms: at most K components
    terms = [1e17] * 1000 + [1e-10 * (1 + 2.0**-52), -3e-10, 1.5e-10 * 3, 7.0]
    sums = FloatSums.of_lists(np.array(terms), np.array([0, len(terms)]))
    check_state(sums, 0, terms)
    # values 2**-1074 .. 2**1000 need more components than K: a clear error naming the row
    wide = [2.0**1000, 1.0, 2.0**-500, 2.0**-1074, 2.0**500]
    with pytest.raises(ExactSumError, match="more than 4 float64 components") as caught:
        FloatSums.of_lists(np.array([1.0] + wide), np.array([0, 1, 1 + len(wide)]))
    assert caught.value.index == 1


def test_a_sum_beyond_float64_raises_like_fsum() -> None:
    with pytest.raises(OverflowError):
        math.fsum([1e308, 1e308])
    with pytest.raises(ExactSumError, match="float64 range"):
        FloatSums.of_lists(np.array([1e308, 1e308]), np.array([0, 2]))


int64 = st.integers(-(2**63), 2**63 - 1)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), int64, st.sampled_from([1, -1])), max_size=60))
def test_int128_sums_equal_python_integers(rows) -> None:
    groups = np.array([g for g, _, _ in rows], np.int64)
    signs = np.array([s for _, _, s in rows], np.int64)
    terms = IntSums.of_values(np.array([v for _, v, _ in rows], np.int64))
    combined = terms.combine(groups, 4, signs)
    for g in range(4):
        exact = sum(s * v for h, v, s in rows if h == g)
        assert combined.to_python(g) == exact
        fits = -(2**63) <= exact < 2**63
        assert bool(combined.fits()[g]) == fits
        if fits:
            assert int(combined.values()[g]) == exact
        assert float(combined.to_float()[g]) == float(exact)  # correctly rounded


def test_int64_sums_that_leave_int64() -> None:
    sums = IntSums.of_values(np.array([2**62, 2**62, 2**63 - 1, 2**63 - 1], np.int64)).combine(
        np.array([0, 0, 1, 1]), 2
    )
    assert sums.to_python(0) == 2**63 and sums.to_python(1) == 2**64 - 2
    assert not sums.fits().any()
    # a state may leave int64 and come back under add and subtract
    back = IntSums.concat([sums, IntSums.of_values(np.array([2**62], np.int64))]).combine(
        np.array([0, 1, 0]), 2, np.array([1, 1, -1])
    )
    assert back.fits()[0] and back.values()[0] == 2**62


# -- the Spark SQL functions of streams/exact_sums.py, called on Arrow arrays (no JVM) -----------------


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(values, max_size=4), min_size=1, max_size=12), st.integers(1, 4))
def test_cumulative_sums_minus_an_earlier_one_equal_fsum_of_the_window(parts, width) -> None:
    """The subtractable sliding window: Helper[j] = Helper[j-1] + sum of part j (exact states), the
    window sum = Helper[j] - Helper[j-width]; it equals the reference over the window's values."""
    import pyarrow as pa

    from arrayviews.streams.exact_sums import exact_add, exact_difference, exact_sum

    label = pa.array(["view T, sum of y"])
    cumulative = [None]  # Helper[0] is empty (a NULL state)
    empty = pa.array(
        [None],
        pa.struct(
            [(f, pa.float64()) for f in ("s0", "s1", "s2", "s3")]
            + [(f, pa.int64()) for f in ("pinf", "ninf", "nan")]
        ),
    )
    for part in parts:
        batch = exact_sum(pa.array([part], pa.list_(pa.float64())), label)
        previous = cumulative[-1] if cumulative[-1] is not None else empty
        cumulative.append(exact_add(previous, batch, label))
    for j in range(1, len(parts) + 1):
        old = cumulative[j - width] if j - width >= 1 else empty
        got = exact_difference(cumulative[j], old, label)[0].as_py()
        window = [v for part in parts[max(0, j - width) : j] for v in part]
        assert same(got, reference(window)), (window, got)


def test_stream_sum_errors_name_the_view_and_column() -> None:
    import pyarrow as pa

    from arrayviews.streams.exact_sums import exact_sum

    with pytest.raises(ArithmeticError, match="view T, sum of y: its exact sum leaves the float64 range"):
        exact_sum(pa.array([[1e308, 1e308]], pa.list_(pa.float64())), pa.array(["view T, sum of y"]))
