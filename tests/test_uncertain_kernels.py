"""Uncertain-array kernels against independent references: probabilities against mpmath quadrature,
copy layouts against brute-force coverage and exhaustive minimum covers (Prop. 3.2), fences against
per-cell stamping, block probabilities against scipy. No Spark."""

from __future__ import annotations

import itertools
import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate
from scipy.special import ndtr
from scipy.stats import norm

from arrayviews.kernels.block_probabilities import block_contributions
from arrayviews.kernels.fences import batch_fences
from arrayviews.kernels.join_pairs import all_pairs, pairs_in_boxes
from arrayviews.kernels.probability import (
    band_probability,
    bvn_upper,
    interval_probability,
    pair_probability,
    rectangle_probability,
)
from arrayviews.model.copy_layout import copies_per_dimension, copy_cells, copy_counts, positions_1d

mpmath.mp.dps = 25


def mp_interval(mu, sigma, a, b):
    return mpmath.ncdf(b, mu, sigma) - mpmath.ncdf(a, mu, sigma)


def _steps(centres, width, low, high):
    """Break points around the places where an integrand steps (centre +- a few widths); ``width``
    is one width for all centres or one per centre."""
    points = {low, high}
    widths = width if isinstance(width, list | tuple) else [width] * len(centres)
    for centre, w in zip(centres, widths, strict=True):
        points |= {x for x in centre + w * np.array([-12, -6, -3, -1.5, 0, 1.5, 3, 6, 12]) if low < x < high}
    return sorted(points)


def mp_rectangle(mu1, mu2, s1, s2, rho, a1, b1, a2, b2):
    """P(a1 < X < b1, a2 < Y < b2) by mpmath quadrature of the conditional form (high precision)."""
    c = mpmath.sqrt(1 - mpmath.mpf(rho) ** 2)
    lo_z, hi_z = (a2 - mu2) / s2, (b2 - mu2) / s2

    def inner(x):
        return mpmath.npdf(x) * (mpmath.ncdf((hi_z - rho * x) / c) - mpmath.ncdf((lo_z - rho * x) / c))

    za, zb = max((a1 - mu1) / s1, -40), min((b1 - mu1) / s1, 40)
    if za >= zb:
        return mpmath.mpf(0)
    centres = [0.0] if rho == 0 else [0.0, lo_z / rho, hi_z / rho]
    width = 1.0 if rho == 0 else min(1.0, float(c) / abs(rho))
    return mpmath.quad(inner, _steps(centres, width, za, zb))


finite = st.floats(-30, 30, allow_nan=False)
sigma = st.floats(0.01, 20)
corr = st.floats(-0.995, 0.995)


@settings(max_examples=100, deadline=None)
@given(finite, sigma, finite, st.floats(0, 40))
def test_interval_matches_high_precision(mu, s, a, width):
    b = a + width
    expected = float(mp_interval(mu, s, a, b))
    assert abs(interval_probability(mu, s, a, b, True) - expected) <= 1e-15 + 1e-13 * expected


def test_interval_tails_have_no_cancellation():
    # Far in the upper tail a naive Phi(b) - Phi(a) gives 0; erfc differences keep the digits.
    value = interval_probability(0.0, 1.0, 9.0, 10.0, True)
    assert value == pytest.approx(float(mp_interval(0, 1, 9, 10)), rel=1e-12)
    assert value > 0


def test_zero_sigma_is_an_exact_position():
    assert interval_probability(3.0, 0.0, 3.0, 4.0, True) == 1.0  # cells are [c, c + 1)
    assert interval_probability(4.0, 0.0, 3.0, 4.0, True) == 0.0
    assert interval_probability(3.0, 0.0, 3.0, 4.0, False) == 0.0  # join bands are open
    assert band_probability(1.0, 0.0, 1.0) == 0.0
    assert band_probability(0.99, 0.0, 1.0) == 1.0


@settings(max_examples=60, deadline=None)
@given(finite, finite, sigma, sigma, corr, finite, st.floats(0.05, 30), finite, st.floats(0.05, 30))
def test_rectangle_matches_high_precision(m1, m2, s1, s2, rho, a1, w1, a2, w2):
    expected = float(mp_rectangle(m1, m2, s1, s2, rho, a1, a1 + w1, a2, a2 + w2))
    got = rectangle_probability(m1, m2, s1, s2, rho, a1, a1 + w1, a2, a2 + w2, True, np.inf)
    assert abs(got - expected) <= 2e-14


def mp_tail_rectangle(mu1, mu2, s1, s2, rho, a1, b1, a2, b2):
    """P(a1 < X < b1, a2 < Y < b2) relatively exact however small: the conditional form with each
    conditional interval a difference of erfc on the side away from its mean (30 digits)."""
    with mpmath.workdps(30):
        c = mpmath.sqrt(1 - mpmath.mpf(rho) ** 2)
        lo_z, hi_z = (mpmath.mpf(a2) - mu2) / s2, (mpmath.mpf(b2) - mu2) / s2
        root2 = mpmath.sqrt(2)

        def inner(x):
            low, high = (lo_z - rho * x) / c, (hi_z - rho * x) / c
            if low + high > 0:
                tail = (mpmath.erfc(low / root2) - mpmath.erfc(high / root2)) / 2
            else:
                tail = (mpmath.erfc(-high / root2) - mpmath.erfc(-low / root2)) / 2
            return mpmath.npdf(x) * tail

        za, zb = max((mpmath.mpf(a1) - mu1) / s1, -40), min((mpmath.mpf(b1) - mu1) / s1, 40)
        if za >= zb:
            return mpmath.mpf(0)
        centres = [0.0] if rho == 0 else [0.0, float(lo_z / rho), float(hi_z / rho)]
        width = 1.0 if rho == 0 else min(1.0, float(c) / abs(rho))
        points = _steps(centres, width, float(za), float(zb))
        # pieces over which the integrand changes by at most about a factor e: the density's log
        # moves by |z| per unit, the conditional interval's by up to |rho| / c times its bounds' reach
        reach = float(max(abs(lo_z), abs(hi_z)) + abs(rho) * max(abs(za), abs(zb))) / float(c)
        step = min(0.5, 1.0 / (1.0 + max(abs(float(za)), abs(float(zb))) + abs(rho) / float(c) * (1 + reach)))
        pieces = min(120, int(np.ceil(float(zb - za) / step)))
        points = sorted(set(points) | set(np.linspace(float(za), float(zb), pieces + 1).tolist()))
        return mpmath.quad(inner, points, method="gauss-legendre")


@settings(max_examples=20, deadline=None, derandomize=True)  # the mpmath reference is slow on rare draws
@given(
    st.floats(-3, 3),
    st.floats(-3, 3),
    st.floats(0.1, 3),
    st.floats(0.1, 3),
    st.floats(-0.99, 0.99).filter(lambda r: abs(r) > 0.01),
    st.floats(-12, 12),
    st.floats(1e-4, 3),
    st.floats(-12, 12),
    st.floats(1e-4, 3),
)
def test_small_rectangles_are_relatively_exact(m1, m2, s1, s2, rho, a1, w1, a2, w2):
    """Bug: a far-tail or thin rectangle's probability came from four orthants of 1e-15 absolute
    accuracy, so a 1e-60 probability read as 0 (a correlated tuple dropped from a subarray with a
    1e-80 threshold). Reference: the conditional form in 30-digit mpmath with erfc tails."""
    expected = float(mp_tail_rectangle(m1, m2, s1, s2, rho, a1, a1 + w1, a2, a2 + w2))
    got = rectangle_probability(m1, m2, s1, s2, rho, a1, a1 + w1, a2, a2 + w2, True, 0.0)
    assert abs(got - expected) <= 1e-10 * expected + 1e-300, (got, expected)


@pytest.mark.parametrize("rho", [-0.999, -0.93, -0.5, 0.0, 0.2, 0.74, 0.76, 0.924, 0.926, 0.9999])
@pytest.mark.parametrize("h,k", [(-2.0, 1.0), (0.0, 0.0), (1.5, 1.5), (3.0, -4.0), (-6.0, -6.0)])
def test_bivariate_upper_orthant_across_branches(h, k, rho):
    # P(X > h, Y > k) = integral over x > h of phi(x) * P(Y > k | x), in high precision
    c = mpmath.sqrt(1 - mpmath.mpf(rho) ** 2)
    # break the range where P(Y > k | x) steps (x = k / rho, width c / |rho|)
    points = _steps(
        [0.0] if rho == 0 else [0.0, k / rho], 1.0 if rho == 0 else min(1.0, float(c) / abs(rho)), h, 40.0
    )
    expected = mpmath.quad(lambda x: mpmath.npdf(x) * mpmath.ncdf((rho * x - k) / c), points)
    assert abs(bvn_upper(h, k, rho) - float(expected)) <= 1e-14


def test_probability_kernel_is_deterministic():
    args = (0.3, -1.2, 1.7, 0.4, 0.81, -1.0, 2.5, -2.0, 0.0, True, 0.0)
    values = {rectangle_probability(*args) for _ in range(50)}
    assert len(values) == 1


@settings(max_examples=100, deadline=None)
@given(finite, sigma, finite, sigma, st.floats(0.1, 10))
def test_band_of_two_gaussians_matches_integration(ma, sa, mb, sb, delta):
    # P(|X - Y| < delta) integrated over x piece by piece (scipy quad between the places where the
    # integrand steps), never through the difference formula
    def inner(x):
        return (
            math.exp(-0.5 * ((x - ma) / sa) ** 2)
            / (sa * math.sqrt(2 * math.pi))
            * (ndtr((x + delta - mb) / sb) - ndtr((x - delta - mb) / sb))
        )

    points = _steps([ma, mb - delta, mb + delta], [sa, sb, sb], ma - 13 * sa, ma + 13 * sa)
    expected = math.fsum(
        integrate.quad(inner, a, b, epsabs=1e-17, epsrel=1e-13, limit=200)[0]
        for a, b in zip(points[:-1], points[1:], strict=True)
    )
    got = band_probability(ma - mb, math.hypot(sa, sb), delta)
    assert abs(got - expected) <= 1e-12


def test_correlated_pair_probability_matches_double_integration():
    rng = np.random.default_rng(7)
    for _ in range(6):
        ma, mb = rng.normal(0, 1, 2), rng.normal(0, 1, 2)
        sa, sb = rng.uniform(0.2, 1.5, 2), rng.uniform(0.2, 1.5, 2)
        ra, rb = rng.uniform(-0.9, 0.9, 2)
        delta = rng.uniform(0.3, 2.0)
        # the difference of the two tuples is Gaussian with covariance Sigma_a + Sigma_b
        cov = np.array([[sa[0] ** 2, ra * sa[0] * sa[1]], [ra * sa[0] * sa[1], sa[1] ** 2]]) + np.array(
            [[sb[0] ** 2, rb * sb[0] * sb[1]], [rb * sb[0] * sb[1], sb[1] ** 2]]
        )
        mean = ma - mb
        inv = np.linalg.inv(cov)
        scale = 1 / (2 * np.pi * math.sqrt(np.linalg.det(cov)))

        def density(y, x, mean=mean, inv=inv, scale=scale):
            v = np.array([x, y]) - mean
            return scale * math.exp(-0.5 * v @ inv @ v)

        expected, _ = integrate.dblquad(density, -delta, delta, -delta, delta, epsabs=1e-12, epsrel=1e-10)
        got, _ = pair_probability(
            ma,
            sa,
            np.array([ra]),
            mb,
            sb,
            np.array([rb]),
            delta,
            np.zeros(0, np.int64),
            np.array([[0, 1]]),
            0.0,
        )
        assert got == pytest.approx(expected, abs=1e-9)


# -- copy layouts ------------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 3).flatmap(
        lambda d: st.tuples(
            st.lists(st.tuples(st.integers(-5, 5), st.integers(0, 14)), min_size=d, max_size=d),
            st.lists(st.integers(0, 5), min_size=d, max_size=d),
        )
    )
)
def test_copy_layout_covers_the_possible_range(case):
    ranges, steps = case
    first = np.array([[lo for lo, _ in ranges]])
    last = np.array([[lo + w for lo, w in ranges]])
    mean = (first + last) // 2
    owner, cells, home = copy_cells(first, last, mean, steps)
    # every copy inside the range, one home copy, the Prop. 3.2 count
    assert np.all((cells >= first) & (cells <= last))
    assert home.sum() == 1
    expected = math.prod(
        (u - lo) // (2 * k + 1) + 1 for lo, u, k in zip(first[0], last[0], steps, strict=True)
    )
    assert len(cells) == expected == copy_counts(first, last, steps)[0]
    # from every cell of the range, a copy within k_i cells along every dimension
    for cell in itertools.product(*(range(lo, u + 1) for lo, u in zip(first[0], last[0], strict=True))):
        near = np.all(np.abs(cells - np.array(cell)) <= np.array(steps), axis=1)
        assert near.any(), (cell, cells)


def _has_cover(cells_to_cover: np.ndarray, candidates: np.ndarray, steps: np.ndarray, size: int) -> bool:
    covers = np.all(np.abs(candidates[:, None, :] - cells_to_cover[None, :, :]) <= steps, axis=2)
    for chosen in itertools.combinations(range(len(candidates)), size):
        if covers[list(chosen)].any(axis=0).all():
            return True
    return False


@pytest.mark.parametrize(
    "widths,steps",
    [((5,), (1,)), ((7,), (1,)), ((3, 4), (1, 1)), ((6, 2), (1, 0)), ((4, 4), (1, 1)), ((5, 3), (2, 1))],
)
def test_prop_3_2_count_is_the_minimum_cover(widths, steps):
    """No set of fewer cells (anywhere, not only inside the range) covers the range."""
    steps_arr = np.array(steps)
    target = np.array(list(itertools.product(*(range(w) for w in widths))))
    candidates = np.array(
        list(itertools.product(*(range(-k, w + k) for w, k in zip(widths, steps, strict=True))))
    )
    minimum = copy_counts(np.zeros((1, len(widths)), int), np.array([[w - 1 for w in widths]]), steps)[0]
    assert not _has_cover(target, candidates, steps_arr, int(minimum) - 1)
    owner, cells, _ = copy_cells(
        np.zeros((1, len(widths)), int),
        np.array([[w - 1 for w in widths]]),
        np.zeros((1, len(widths)), int),
        steps,
    )
    assert len(cells) == minimum


def test_single_copy_goes_to_the_middle_and_home_is_nearest_the_mean():
    counts, positions, _, home = positions_1d(np.array([10]), np.array([12]), 1, np.array([12]))
    assert counts.tolist() == [1] and positions.tolist() == [11] and home.tolist() == [True]
    counts, positions, _, home = positions_1d(np.array([0]), np.array([20]), 2, np.array([17]))
    assert counts[0] == copies_per_dimension(np.array([0]), np.array([20]), 2)[0] == 5
    assert positions[0] == 2 and positions[-1] == 18  # first at l + k, last at u - k
    assert positions[home][0] == min(positions, key=lambda p: abs(p - 17))


# -- fences -------------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 9), st.integers(1, 9))
def test_fences_match_per_cell_stamping(seed, chunk_x, chunk_y):
    rng = np.random.default_rng(seed)
    n, size = int(rng.integers(1, 60)), 30
    first = rng.integers(0, size, (n, 2))
    last = np.minimum(first + rng.integers(0, 12, (n, 2)), size - 1)
    mean = first + rng.integers(0, 1000, (n, 2)) % (last - first + 1)
    cells, low, high = batch_fences(
        first,
        last,
        mean,
        np.array([0, 0]),
        np.array([chunk_x, chunk_y]),
        np.array([0, 0]),
        np.array([size - 1] * 2),
    )
    lowest = np.full((size, size, 2), np.iinfo(np.int64).max)
    highest = np.full((size, size, 2), np.iinfo(np.int64).min)
    for t in range(n):
        box = (slice(first[t, 0], last[t, 0] + 1), slice(first[t, 1], last[t, 1] + 1))
        lowest[box] = np.minimum(lowest[box], mean[t])
        highest[box] = np.maximum(highest[box], mean[t])
    covered = np.argwhere(lowest[:, :, 0] != np.iinfo(np.int64).max)
    order = np.lexsort((cells[:, 1], cells[:, 0]))
    assert np.array_equal(cells[order], covered)
    assert np.array_equal(low[order], lowest[covered[:, 0], covered[:, 1]])
    assert np.array_equal(high[order], highest[covered[:, 0], covered[:, 1]])


# -- join candidates and blocks -------------------------------------------------------------------
def test_join_candidates_in_boxes_are_the_brute_force_ones():
    rng = np.random.default_rng(3)
    na, nb = 40, 300
    a_first = rng.integers(0, 40, (na, 2)).astype(float)
    a_last = a_first + rng.integers(0, 4, (na, 2))
    b_cells = rng.integers(0, 40, (nb, 2))
    b_first = (b_cells - rng.integers(0, 3, (nb, 2))).astype(float)
    b_last = (b_cells + rng.integers(0, 3, (nb, 2))).astype(float)
    # rows 150..299 are second copies (elsewhere) of the tuples of rows 0..149: same possible range
    b_first[150:], b_last[150:] = b_first[:150], b_last[:150]
    b_tuple = np.arange(nb, dtype=np.int64) % 150
    low = (a_first - 6).astype(np.int64)
    high = (a_last + 6).astype(np.int64)
    ia, ib, _ = pairs_in_boxes(low, high, a_first, a_last, b_cells, b_first, b_last, b_tuple, 1.5)
    got = list(zip(ia.tolist(), b_tuple[ib].tolist(), strict=True))
    assert len(got) == len(set(got))  # each inner tuple at most once per outer row
    in_box = np.all((b_cells[None] >= low[:, None]) & (b_cells[None] <= high[:, None]), axis=2)
    overlap = np.all(
        (a_first[:, None] - 1.5 <= b_last[None] + 1) & (b_first[None] <= a_last[:, None] + 1 + 1.5), axis=2
    )
    expected = {(int(i), int(j) % 150) for i, j in zip(*np.nonzero(in_box & overlap), strict=True)}
    assert set(got) == expected
    ia2, ib2, looked = all_pairs(a_first, a_last, b_first[:150], b_last[:150], 1.5)
    assert looked == na * 150
    overlap_all = {(int(i), int(j)) for i, j in zip(*np.nonzero(overlap[:, :150]), strict=True)}
    assert set(zip(ia2.tolist(), ib2.tolist(), strict=True)) == overlap_all


def test_block_probabilities_match_scipy():
    rng = np.random.default_rng(11)
    n = 25
    means = np.stack([rng.uniform(0, 20, n), rng.uniform(0, 12, n)], axis=1)
    sigmas = rng.uniform(0.05, 3, (n, 2))
    owner, index, weight = block_contributions(
        means,
        sigmas,
        np.zeros((n, 0)),
        np.array([0, 1]),
        np.zeros((0, 2), np.int64),
        np.array([0.0, 0.0]),
        np.array([20.0, 12.0]),
        np.array([3, 5]),
        0.0,
    )
    for t in range(n):
        for bx in range(7):
            for by in range(3):
                px = norm.cdf(min(20, 3 * bx + 3), means[t, 0], sigmas[t, 0]) - norm.cdf(
                    3 * bx, means[t, 0], sigmas[t, 0]
                )
                py = norm.cdf(min(12, 5 * by + 5), means[t, 1], sigmas[t, 1]) - norm.cdf(
                    5 * by, means[t, 1], sigmas[t, 1]
                )
                hit = (owner == t) & (index[:, 0] == bx) & (index[:, 1] == by)
                got = weight[hit].sum()
                assert got == pytest.approx(px * py, abs=1e-15), (t, bx, by)


@pytest.mark.parametrize(
    "m,s,d", [(-10.0, 6.5, 1e-6), (-13.0 + 3.0, 6.5, 1e-6), (0.5, 1.0, 1e-3), (40.0, 20.0, 0.05)]
)
def test_narrow_bands_keep_their_relative_accuracy(m, s, d) -> None:
    """Bug: a narrow band's probability was a difference of two close CDF values, so it kept only
    the digits the bounds differ in (3.758968941669494e-08 for 3.7589689477698377e-08, 1.6e-9
    relative, failed a Hypothesis join test). Reference: mpmath at 50 digits."""
    import mpmath

    from arrayviews.kernels.probability import band_probability

    with mpmath.workdps(50):
        want = float(mpmath.ncdf(d, mu=m, sigma=s) - mpmath.ncdf(-d, mu=m, sigma=s))
    assert abs(band_probability(m, s, d) - want) <= 1e-12 * want
