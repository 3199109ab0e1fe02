"""Probabilities of Gaussian positions: intervals, bands and rectangles, exact and deterministic.

* One dimension: P(a <= X < b) for X ~ N(mu, sigma) as a difference of complementary error
  functions, taken on the side of the mean where both terms are small (no cancellation in the tails),
  or of error functions within a sigma of the mean (no 1 - (1 - p) for narrow intervals there).
* The band |X_A - X_B| < delta of two independent Gaussians: X_A - X_B is N(mu_A - mu_B,
  sqrt(sigma_A^2 + sigma_B^2)), an interval again.
* A correlated pair: the rectangle probability of a bivariate normal by inclusion-exclusion of four
  lower-orthant probabilities, each computed with the Drezner-Wesolowsky method in Genz's double
  precision form (Gauss-Legendre rules of 6, 12 or 20 points on the integral over the correlation,
  and an asymptotic expansion for |r| >= 0.925); deterministic, about 1e-15 absolute accuracy.
  Below 1e-5 (far tails, thin rectangles) the rectangle is instead integrated over one dimension of
  the conditional interval probability, relatively accurate down to the smallest doubles.

No sampling anywhere: the same inputs give the same bits. A standard deviation of 0 means an exact
position (the probability is then 0 or 1; the lower bound of a subarray interval is inclusive).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_SQRT2 = math.sqrt(2.0)
_TWO_PI = 2.0 * math.pi
_SQRT_TWO_PI = math.sqrt(_TWO_PI)

# Gauss-Legendre rules on [-1, 1] with 6, 12 and 20 points (all nodes, both signs).
_GL6 = np.polynomial.legendre.leggauss(6)
_GL12 = np.polynomial.legendre.leggauss(12)
_GL20 = np.polynomial.legendre.leggauss(20)
_X6, _W6 = _GL6[0].copy(), _GL6[1].copy()
_X12, _W12 = _GL12[0].copy(), _GL12[1].copy()
_X20, _W20 = _GL20[0].copy(), _GL20[1].copy()


@njit(cache=True)
def norm_cdf(z: float) -> float:
    """Phi(z), the standard normal CDF, via erfc (accurate in both tails)."""
    return 0.5 * math.erfc(-z / _SQRT2)


@njit(cache=True)
def interval_probability(mu: float, sigma: float, a: float, b: float, closed_low: bool) -> float:
    """P(a <= X < b) (``closed_low``) or P(a < X < b) for X ~ N(mu, sigma); bounds may be infinite."""
    if not b > a:
        return 0.0
    if sigma == 0.0:
        inside_low = mu >= a if closed_low else mu > a
        return 1.0 if (inside_low and mu < b) else 0.0
    za = (a - mu) / sigma
    zb = (b - mu) / sigma
    width = (b - a) / sigma  # from the bounds' own difference, not zb - za (cancellation)
    middle = (0.5 * (a + b) - mu) / sigma
    if width <= 0.5 and width * (abs(middle) + 1.0) <= 1.0:
        # A narrow interval: a difference of two close CDF values would keep only the digits the
        # bounds differ in, so integrate the density over it (12-point Gauss-Legendre: the density
        # changes by at most a factor e over the interval, so the rule is exact to rounding).
        total = 0.0
        for j in range(len(_X12)):
            z = middle + 0.5 * width * _X12[j]
            total += _W12[j] * math.exp(-0.5 * z * z)
        return min(1.0, max(0.0, total * 0.5 * width / _SQRT_TWO_PI))
    if za >= 1.0:
        # Both bounds a sigma or more above the mean: upper tails are small and exact.
        p = 0.5 * (math.erfc(za / _SQRT2) - math.erfc(zb / _SQRT2))
    elif zb <= -1.0:
        p = 0.5 * (math.erfc(-zb / _SQRT2) - math.erfc(-za / _SQRT2))
    else:
        # Near the mean: erf is exact relative to its (small) argument, and over an interval holding
        # the mean the two terms add; 1 - tails or a difference of erfc near 1 would lose a small p.
        p = 0.5 * (math.erf(zb / _SQRT2) - math.erf(za / _SQRT2))
    return min(1.0, max(0.0, p))


@njit(cache=True)
def band_probability(m: float, s: float, delta: float) -> float:
    """P(|D| < delta) for D ~ N(m, s) (the l1 band of one dimension of a structure join)."""
    return interval_probability(m, s, -delta, delta, False)


@njit(cache=True)
def bvn_upper(h: float, k: float, r: float) -> float:
    """P(X > h, Y > k) for a standard bivariate normal with correlation r (|r| <= 1).

    Drezner & Wesolowsky (1989) with Genz's double-precision modifications.
    """
    if h == np.inf or k == np.inf:
        return 0.0
    if h == -np.inf:
        return 1.0 if k == -np.inf else norm_cdf(-k)
    if k == -np.inf:
        return norm_cdf(-h)
    if abs(r) < 0.3:
        xs_, ws_ = _X6, _W6
    elif abs(r) < 0.75:
        xs_, ws_ = _X12, _W12
    else:
        xs_, ws_ = _X20, _W20
    hk = h * k
    bvn = 0.0
    if abs(r) < 0.925:
        hs = (h * h + k * k) / 2.0
        asr = math.asin(r)
        for j in range(len(xs_)):
            sn = math.sin(asr * (1.0 + xs_[j]) / 2.0)
            bvn += ws_[j] * math.exp((sn * hk - hs) / (1.0 - sn * sn))
        bvn = bvn * asr / (4.0 * math.pi) + norm_cdf(-h) * norm_cdf(-k)
    else:
        if r < 0.0:
            k = -k
            hk = -hk
        if abs(r) < 1.0:
            as_ = (1.0 - r) * (1.0 + r)
            a = math.sqrt(as_)
            bs = (h - k) ** 2
            c = (4.0 - hk) / 8.0
            d = (12.0 - hk) / 16.0
            asr = -(bs / as_ + hk) / 2.0
            if asr > -100.0:
                bvn = (
                    a
                    * math.exp(asr)
                    * (1.0 - c * (bs - as_) * (1.0 - d * bs / 5.0) / 3.0 + c * d * as_ * as_ / 5.0)
                )
            if hk > -100.0:
                b = math.sqrt(bs)
                sp = _SQRT_TWO_PI * norm_cdf(-b / a)
                bvn -= math.exp(-hk / 2.0) * sp * b * (1.0 - c * bs * (1.0 - d * bs / 5.0) / 3.0)
            a = a / 2.0
            for j in range(len(xs_)):
                xs = (a * (1.0 + xs_[j])) ** 2
                rs = math.sqrt(1.0 - xs)
                asr = -(bs / xs + hk) / 2.0
                if asr > -100.0:
                    sp = 1.0 + c * xs * (1.0 + d * xs)
                    ep = math.exp(-hk * (1.0 - rs) / (2.0 * (1.0 + rs))) / rs
                    bvn += a * ws_[j] * math.exp(asr) * (ep - sp)
            bvn = -bvn / _TWO_PI
        if r > 0.0:
            bvn += norm_cdf(-max(h, k))
        if r < 0.0:
            bvn = -bvn + max(0.0, norm_cdf(-h) - norm_cdf(-k))
    return min(1.0, max(0.0, bvn))


@njit(cache=True)
def _lower(h: float, k: float, r: float) -> float:
    """P(X < h, Y < k)."""
    return bvn_upper(-h, -k, r)


@njit(cache=True)
def rectangle_probability(
    mu1: float,
    mu2: float,
    s1: float,
    s2: float,
    rho: float,
    a1: float,
    b1: float,
    a2: float,
    b2: float,
    closed_low: bool,
    relative_from: float,
) -> float:
    """P(a1 < X < b1, a2 < Y < b2) for a bivariate Gaussian (means, standard deviations, correlation).

    With a zero standard deviation or correlation the dimensions are independent (a product of
    intervals, which also decides the degenerate bounds by ``closed_low``). Otherwise the result is
    accurate to about 1e-15 absolute, and relatively accurate however small when it may be at or
    above ``relative_from`` (0: always; inf: never, absolute accuracy is enough).
    """
    p1 = interval_probability(mu1, s1, a1, b1, closed_low)
    p2 = interval_probability(mu2, s2, a2, b2, closed_low)
    if s1 == 0.0 or s2 == 0.0 or rho == 0.0 or p1 == 0.0 or p2 == 0.0:
        return p1 * p2
    # Standardized bounds beyond +-40 sigma hold no double's worth of mass (Phi(-40) < 1e-349):
    # clamped, so a sigma of 1e-200 does not give the orthants bounds of 1e200, whose squares
    # overflow (inf * 0 = nan there made P = 0.68 come out as 0 for r = -0.95).
    za1 = min(max((a1 - mu1) / s1, -_Z_CLAMP), _Z_CLAMP)
    zb1 = min(max((b1 - mu1) / s1, -_Z_CLAMP), _Z_CLAMP)
    za2 = min(max((a2 - mu2) / s2, -_Z_CLAMP), _Z_CLAMP)
    zb2 = min(max((b2 - mu2) / s2, -_Z_CLAMP), _Z_CLAMP)
    r = rho
    # Reflect each dimension so the rectangle's centre is at or below the mean: the four orthant
    # probabilities are then the small ones and their alternating sum loses little.
    if za1 + zb1 > 0.0:
        za1, zb1 = -zb1, -za1
        r = -r
    if za2 + zb2 > 0.0:
        za2, zb2 = -zb2, -za2
        r = -r
    p = _lower(zb1, zb2, r) - _lower(za1, zb2, r) - _lower(zb1, za2, r) + _lower(za1, za2, r)
    if p < TAIL_CUTOFF and p + 1e-14 >= relative_from and abs(r) < RELATIVE_CORRELATION:
        # Four orthants of about 1e-15 absolute accuracy cannot give a small p relatively exactly
        # (|r| >= 0.999 once kept them: 3.4e-64 at r = 0.9995 came out as 0).
        if zb1 - za1 <= zb2 - za2:
            p = conditional_rectangle(za1, zb1, za2, zb2, r)
        else:
            p = conditional_rectangle(za2, zb2, za1, zb1, r)
    return min(min(p1, p2), max(0.0, p))


#: Below this a rectangle probability is integrated by :func:`conditional_rectangle` (relative
#: accuracy) instead of taken from the orthants (absolute accuracy about 1e-15).
TAIL_CUTOFF = 1e-5
_Z_LIMIT = 38.5  # Phi(-38.5) is below the smallest double: nothing lies beyond
_Z_CLAMP = 40.0  # rectangle bounds are clamped to +-40 sigma (the mass beyond is below 1e-349)
#: Closer to +-1 the conditional interval is a near step (its sigma sqrt(1 - r^2) below 0.01) and
#: the adaptive rule can take 0.1 to 1.5 s for one rectangle: such pairs keep the orthants.
RELATIVE_CORRELATION = 0.99995


@njit(cache=True)
def _conditional_density(z: float, r: float, c: float, l2: float, u2: float) -> float:
    """phi(z) * P(l2 < Y < u2 | X = z) for standard X, Y of correlation r (c = sqrt(1 - r^2))."""
    return math.exp(-0.5 * z * z) / _SQRT_TWO_PI * interval_probability(r * z, c, l2, u2, False)


@njit(cache=True)
def _gauss_pair(a: float, b: float, r: float, c: float, l2: float, u2: float) -> tuple[float, float]:
    """The 12- and 6-point Gauss-Legendre values of the conditional density's integral over [a, b]."""
    half, centre = 0.5 * (b - a), 0.5 * (a + b)
    fine = 0.0
    for j in range(len(_X12)):
        fine += _W12[j] * _conditional_density(centre + half * _X12[j], r, c, l2, u2)
    coarse = 0.0
    for j in range(len(_X6)):
        coarse += _W6[j] * _conditional_density(centre + half * _X6[j], r, c, l2, u2)
    return fine * half, coarse * half


@njit(cache=True)
def conditional_rectangle(l1: float, u1: float, l2: float, u2: float, r: float) -> float:
    """P(l1 < X < u1, l2 < Y < u2) for standard normals of correlation r (|r| < 1), relatively
    accurate however small: the integral over x of phi(x) P(l2 < Y < u2 | X = x), each conditional
    interval relatively exact (interval_probability) and every term positive, by adaptive
    Gauss-Legendre (a piece is halved until its 12- and 6-point values agree to 1e-13 of itself or
    of the whole)."""
    a, b = max(l1, -_Z_LIMIT), min(u1, _Z_LIMIT)
    if not b > a:
        return 0.0
    c = math.sqrt((1.0 - r) * (1.0 + r))
    pieces = min(400, max(1, int(math.ceil((b - a) / 0.5))))
    step = (b - a) / pieces
    fines = np.empty(pieces)
    coarses = np.empty(pieces)
    whole = 0.0
    for k in range(pieces):
        fines[k], coarses[k] = _gauss_pair(a + k * step, a + (k + 1) * step, r, c, l2, u2)
        whole += fines[k]
    if whole == 0.0:
        return 0.0
    tolerance = 1e-13 * whole / pieces
    total = 0.0
    lows = np.empty(64)
    highs = np.empty(64)
    depths = np.empty(64, dtype=np.int64)
    for k in range(pieces):
        if abs(fines[k] - coarses[k]) <= max(1e-13 * fines[k], tolerance):
            total += fines[k]
            continue
        lows[0], highs[0], depths[0] = a + k * step, a + (k + 1) * step, 1
        lows[1], highs[1], depths[1] = a + (k + 0.5) * step, a + (k + 1) * step, 1
        highs[0] = lows[1]
        top = 2
        while top > 0:
            top -= 1
            lo, hi, depth = lows[top], highs[top], depths[top]
            fine, coarse = _gauss_pair(lo, hi, r, c, l2, u2)
            if abs(fine - coarse) <= max(1e-13 * fine, tolerance) or depth >= 40:
                total += fine
                continue
            middle = 0.5 * (lo + hi)
            lows[top], highs[top], depths[top] = middle, hi, depth + 1
            lows[top + 1], highs[top + 1], depths[top + 1] = lo, middle, depth + 1
            top += 2
    return total


@njit(cache=True)
def tuple_probability(
    means: np.ndarray,
    sigmas: np.ndarray,
    corrs: np.ndarray,
    lows: np.ndarray,
    highs: np.ndarray,
    single_dims: np.ndarray,
    pair_dims: np.ndarray,
    threshold: float,
    closed_low: bool,
) -> tuple[float, bool, int]:
    """Probability that one tuple lies in the box [lows, highs) (one row of means, sigmas, corrs).

    Cheap factors first; the running product bounds the result from above, so as soon as it falls
    below ``threshold`` the remaining factors (and the costly bivariate integrals) are skipped.
    Returns (probability or an upper bound below the threshold, exact?, bivariate integrals done).
    """
    p = 1.0
    for i in single_dims:
        p *= interval_probability(means[i], sigmas[i], lows[i], highs[i], closed_low)
        if p < threshold:
            return p, False, 0
    integrals = 0
    for q in range(pair_dims.shape[0]):
        i, j = pair_dims[q, 0], pair_dims[q, 1]
        pi = interval_probability(means[i], sigmas[i], lows[i], highs[i], closed_low)
        pj = interval_probability(means[j], sigmas[j], lows[j], highs[j], closed_low)
        if p * min(pi, pj) < threshold:  # Frechet upper bound of the pair
            return p * min(pi, pj), False, integrals
        rho = corrs[q]
        if rho == 0.0 or sigmas[i] == 0.0 or sigmas[j] == 0.0:
            p *= pi * pj
        else:
            p *= rectangle_probability(
                means[i],
                means[j],
                sigmas[i],
                sigmas[j],
                rho,
                lows[i],
                highs[i],
                lows[j],
                highs[j],
                closed_low,
                threshold / p if p > 0.0 else np.inf,
            )
            integrals += 1
        if p < threshold:
            return p, True, integrals
    return p, True, integrals


@njit(cache=True)
def box_probabilities(
    means: np.ndarray,
    sigmas: np.ndarray,
    corrs: np.ndarray,
    lows: np.ndarray,
    highs: np.ndarray,
    single_dims: np.ndarray,
    pair_dims: np.ndarray,
    threshold: float,
) -> tuple[np.ndarray, int]:
    """Probability of every tuple (rows of means, sigmas, corrs) in the box [lows, highs) (values below
    ``threshold`` may be upper bounds), and the number of bivariate integrals computed."""
    n = means.shape[0]
    out = np.empty(n, dtype=np.float64)
    integrals = 0
    for t in range(n):
        p, _, done = tuple_probability(
            means[t], sigmas[t], corrs[t], lows, highs, single_dims, pair_dims, threshold, True
        )
        out[t] = p
        integrals += done
    return out, integrals


@njit(cache=True)
def pair_probability(
    ma: np.ndarray,
    sa: np.ndarray,
    ca: np.ndarray,
    mb: np.ndarray,
    sb: np.ndarray,
    cb: np.ndarray,
    delta: float,
    single_dims: np.ndarray,
    pair_dims: np.ndarray,
    threshold: float,
) -> tuple[float, int]:
    """P(|a_i - b_i| < delta for every dimension i) for independent tuples a and b (Def. 2.2 with the
    l1 band); values below ``threshold`` may be upper bounds. Returns (probability, integrals done)."""
    p = 1.0
    for i in single_dims:
        p *= band_probability(ma[i] - mb[i], math.hypot(sa[i], sb[i]), delta)
        if p < threshold:
            return p, 0
    integrals = 0
    for q in range(pair_dims.shape[0]):
        i, j = pair_dims[q, 0], pair_dims[q, 1]
        m1, m2 = ma[i] - mb[i], ma[j] - mb[j]
        s1 = math.hypot(sa[i], sb[i])  # no overflow or underflow of the squares
        s2 = math.hypot(sa[j], sb[j])
        p1 = band_probability(m1, s1, delta)
        p2 = band_probability(m2, s2, delta)
        if p * min(p1, p2) < threshold:
            return p * min(p1, p2), integrals
        if s1 == 0.0 or s2 == 0.0:
            rho = 0.0
        else:  # the covariance over s1 * s2, scaled first (no overflow of the products)
            rho = ca[q] * (sa[i] / s1) * (sa[j] / s2) + cb[q] * (sb[i] / s1) * (sb[j] / s2)
        if rho == 0.0:
            p *= p1 * p2
        else:
            rho = max(-1.0, min(1.0, rho))
            floor = threshold / p if p > 0.0 else np.inf
            p *= rectangle_probability(m1, m2, s1, s2, rho, -delta, delta, -delta, delta, False, floor)
            integrals += 1
        if p < threshold:
            return p, integrals
    return p, integrals
