"""Candidate pairs and pair probabilities of a probabilistic structure join (paper 001, section 4).

Candidates are pairs that satisfy Prop. 4.1: the possible range of the outer tuple widened by delta
overlaps the possible range of the inner tuple in every dimension (in continuous cell coordinates a
range of cells [f, l] is [f, l + 1)). Any other pair has probability below epsilon < lambda. The
subarray-based join only pairs an outer row with inner rows whose cell lies in the outer row's
candidate box; block nested loops pair everything.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from arrayviews.kernels.probability import pair_probability

# numba's on-disk cache (cache=True) is keyed on this file alone, not on the kernels it inlines:
# change this file when kernels/probability.py changes (last: relative rectangles up to |r| 0.99995).


@njit(cache=True)
def _overlaps(a_first, a_last, b_first, b_last, i, j, delta) -> bool:
    for k in range(a_first.shape[1]):
        if a_first[i, k] - delta > b_last[j, k] + 1.0:
            return False
        if b_first[j, k] > a_last[i, k] + 1.0 + delta:
            return False
    return True


@njit(cache=True)
def _grow(array: np.ndarray, size: int) -> np.ndarray:
    bigger = np.empty(max(16, 2 * size), dtype=array.dtype)
    bigger[:size] = array[:size]
    return bigger


@njit(cache=True)
def pairs_in_boxes(
    box_low: np.ndarray,
    box_high: np.ndarray,
    a_first: np.ndarray,
    a_last: np.ndarray,
    b_cells: np.ndarray,
    b_first: np.ndarray,
    b_last: np.ndarray,
    b_tuple: np.ndarray,
    delta: float,
) -> tuple[np.ndarray, np.ndarray, int]:
    """(outer row, inner row) pairs with the inner row's cell in the outer row's candidate box
    [box_low, box_high] that pass Prop. 4.1, each inner tuple (``b_tuple``: a dense tuple number per
    inner row, copies share it) paired at most once with each outer row; also the number of inner
    rows looked at."""
    nb = b_cells.shape[0]
    d = b_cells.shape[1]
    order = np.argsort(b_cells[:, 0], kind="mergesort")
    keys = b_cells[order, 0]
    seen = np.full(np.max(b_tuple) + 1 if nb else 0, -1, dtype=np.int64)
    out_a = np.empty(1024, dtype=np.int64)
    out_b = np.empty(1024, dtype=np.int64)
    count = 0
    looked = 0
    for i in range(box_low.shape[0]):
        start = np.searchsorted(keys, box_low[i, 0], side="left")
        stop = np.searchsorted(keys, box_high[i, 0], side="right")
        for position in range(start, stop):
            j = order[position]
            inside = True
            for k in range(1, d):
                if b_cells[j, k] < box_low[i, k] or b_cells[j, k] > box_high[i, k]:
                    inside = False
                    break
            if not inside:
                continue
            looked += 1
            if seen[b_tuple[j]] == i:
                continue  # another copy of an inner tuple already paired with this row
            seen[b_tuple[j]] = i
            if not _overlaps(a_first, a_last, b_first, b_last, i, j, delta):
                continue
            if count == out_a.shape[0]:
                out_a = _grow(out_a, count)
                out_b = _grow(out_b, count)
            out_a[count] = i
            out_b[count] = j
            count += 1
    return out_a[:count], out_b[:count], looked


@njit(cache=True)
def all_pairs(
    a_first: np.ndarray, a_last: np.ndarray, b_first: np.ndarray, b_last: np.ndarray, delta: float
) -> tuple[np.ndarray, np.ndarray, int]:
    """Every (outer row, inner row) pair passing Prop. 4.1 (the block nested loops baseline)."""
    out_a = np.empty(1024, dtype=np.int64)
    out_b = np.empty(1024, dtype=np.int64)
    count = 0
    for i in range(a_first.shape[0]):
        for j in range(b_first.shape[0]):
            if _overlaps(a_first, a_last, b_first, b_last, i, j, delta):
                if count == out_a.shape[0]:
                    out_a = _grow(out_a, count)
                    out_b = _grow(out_b, count)
                out_a[count] = i
                out_b[count] = j
                count += 1
    return out_a[:count], out_b[:count], a_first.shape[0] * b_first.shape[0]


@njit(cache=True)
def pair_probabilities(
    ia: np.ndarray,
    ib: np.ndarray,
    a_means: np.ndarray,
    a_sigmas: np.ndarray,
    a_corrs: np.ndarray,
    b_means: np.ndarray,
    b_sigmas: np.ndarray,
    b_corrs: np.ndarray,
    delta: float,
    single_dims: np.ndarray,
    pair_dims: np.ndarray,
    threshold: float,
) -> tuple[np.ndarray, int]:
    """P(|a - b| < delta in every dimension) for each candidate pair (values below ``threshold`` may
    be upper bounds), and the number of bivariate integrals computed."""
    out = np.empty(ia.shape[0], dtype=np.float64)
    integrals = 0
    for m in range(ia.shape[0]):
        i, j = ia[m], ib[m]
        p, done = pair_probability(
            a_means[i],
            a_sigmas[i],
            a_corrs[i],
            b_means[j],
            b_sigmas[j],
            b_corrs[j],
            delta,
            single_dims,
            pair_dims,
            threshold,
        )
        out[m] = p
        integrals += done
    return out, integrals
