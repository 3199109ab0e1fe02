"""Existence probabilities of uncertain tuples in blocks of cells (paper 001, Appendix A: regrid and
group-by as repeated Subarrays): for every tuple, P(tuple in block) for each block it can reach.

Blocks along dimension k have ``blocks[k]`` cells starting at the domain's low end (the last one may
be shorter); ``blocks[k] == 0`` makes the whole domain one block (a dimension that is aggregated
away). A tuple reaches the blocks within mean +- REACH sigma: beyond that the Gaussian mass per side
is below 5e-17, so the expected counts are exact to that absolute error per tuple.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from arrayviews.kernels.probability import interval_probability, rectangle_probability

# numba's on-disk cache (cache=True) is keyed on this file alone, not on the kernels it inlines:
# change this file when kernels/probability.py changes (last: relative rectangles up to |r| 0.99995).

#: Standard deviations beyond which a tuple's mass is ignored (Phi(-8.3) < 5.3e-17).
REACH = 8.3


@njit(cache=True)
def _block_range(mu: float, sigma: float, low: float, high: float, block: int) -> tuple[int, int]:
    """First and last block index a tuple reaches along one dimension (last < first: none)."""
    if block == 0:
        return 0, 0
    a = max(low, mu - REACH * sigma)
    b = min(high, mu + REACH * sigma)
    if a >= high or b < low or a > b:
        return 0, -1
    first = int(math.floor((a - low) / block))
    last = int(math.floor((b - low) / block))
    count = int(math.ceil((high - low) / block))
    return max(0, first), min(count - 1, last)


@njit(cache=True)
def _bounds(j: int, low: float, high: float, block: int) -> tuple[float, float]:
    if block == 0:
        return low, high
    return low + j * block, min(high, low + (j + 1) * block)


@njit(cache=True)
def block_contributions(
    means: np.ndarray,
    sigmas: np.ndarray,
    corrs: np.ndarray,
    single_dims: np.ndarray,
    pair_dims: np.ndarray,
    lows: np.ndarray,
    highs: np.ndarray,
    blocks: np.ndarray,
    threshold: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tuple index (m,), block indices (m, d), probability (m,)) for every tuple and block with a
    probability above zero and at least ``threshold``; ``lows``/``highs`` bound the domain
    [low, high + 1) per dimension."""
    n, d = means.shape
    first = np.empty((n, d), dtype=np.int64)
    last = np.empty((n, d), dtype=np.int64)
    total = 0
    for t in range(n):
        count = 1
        for k in range(d):
            f, g = _block_range(means[t, k], sigmas[t, k], lows[k], highs[k], blocks[k])
            first[t, k], last[t, k] = f, g
            count *= max(0, g - f + 1)
        total += count
    owner = np.empty(total, dtype=np.int64)
    index = np.empty((total, d), dtype=np.int64)
    weight = np.empty(total, dtype=np.float64)
    cursor = np.empty(d, dtype=np.int64)
    written = 0
    for t in range(n):
        empty = False
        for k in range(d):
            if last[t, k] < first[t, k]:
                empty = True
            cursor[k] = first[t, k]
        if empty:
            continue
        while True:
            p = 1.0
            for k in single_dims:
                a, b = _bounds(cursor[k], lows[k], highs[k], blocks[k])
                p *= interval_probability(means[t, k], sigmas[t, k], a, b, True)
            for q in range(pair_dims.shape[0]):
                i, j = pair_dims[q, 0], pair_dims[q, 1]
                a1, b1 = _bounds(cursor[i], lows[i], highs[i], blocks[i])
                a2, b2 = _bounds(cursor[j], lows[j], highs[j], blocks[j])
                p *= rectangle_probability(
                    means[t, i],
                    means[t, j],
                    sigmas[t, i],
                    sigmas[t, j],
                    corrs[t, q],
                    a1,
                    b1,
                    a2,
                    b2,
                    True,
                    np.inf,  # expected counts: absolute accuracy (weights are rounded to a grid)
                )
            if p > 0.0 and p >= threshold:
                owner[written] = t
                for k in range(d):
                    index[written, k] = cursor[k]
                weight[written] = p
                written += 1
            k = d - 1
            while k >= 0:
                cursor[k] += 1
                if cursor[k] <= last[t, k]:
                    break
                cursor[k] = first[t, k]
                k -= 1
            if k < 0:
                break
    return owner[:written], index[:written], weight[:written]
