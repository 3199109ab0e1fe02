"""Ordering a batch of cells by (chunk, local offset) in a few linear passes (numba kernels).

One pass gives every cell its chunk code (row-major over the batch's chunk ranges) and its local
offset; a counting sort on the code then buckets the cells by chunk, and each bucket (a few thousand
cells at most, usually) is sorted by offset on its own, or left alone when already in order. The
order is stable: cells with the same chunk and offset keep their input order.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: A counting sort over the chunk codes is used while there are at most this many codes per cell
#: (its table of counts is then no larger than a few columns of the batch).
CODES_PER_CELL = 2


@njit(cache=True)
def codes_and_offsets(
    coords: np.ndarray,
    origins: np.ndarray,
    lengths: np.ndarray,
    chunk_low: np.ndarray,
    spans: np.ndarray,
    edge_chunk: np.ndarray,
    edge_low: np.ndarray,
    edge_size: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Chunk code and C-order local offset of every cell (n, d).

    Chunk number ``k`` of a cell is ``floor((x - origin) / length)``; its code is row-major over
    ``chunk_low + [0, spans)``. ``edge_chunk[k]`` holds the first and last chunk of dimension ``k``
    where they are clipped (and -1 with ``edge_size`` 0 where not): cells there are numbered from
    ``edge_low`` in a box of ``edge_size``.
    """
    n, d = coords.shape
    codes = np.empty(n, dtype=np.int64)
    offsets = np.empty(n, dtype=np.int64)
    for i in range(n):
        code = 0
        offset = 0
        for k in range(d):
            x = coords[i, k]
            shifted = x - origins[k]
            chunk = shifted // lengths[k]
            local = shifted - chunk * lengths[k]
            size = lengths[k]
            for e in range(2):
                if edge_size[k, e] > 0 and chunk == edge_chunk[k, e]:
                    local = x - edge_low[k, e]
                    size = edge_size[k, e]
            offset = offset * size + local
            code = code * spans[k] + (chunk - chunk_low[k])
        codes[i] = code
        offsets[i] = offset
    return codes, offsets


@njit(cache=True)
def is_ordered(codes: np.ndarray, offsets: np.ndarray) -> bool:
    """Whether (code, offset) never decreases along the batch."""
    for i in range(1, len(codes)):
        if codes[i] < codes[i - 1] or (codes[i] == codes[i - 1] and offsets[i] < offsets[i - 1]):
            return False
    return True


@njit(cache=True)
def runs_of_codes(codes: np.ndarray) -> np.ndarray:
    """Start index of every run of equal codes in a sorted array, and its length as the last entry."""
    n = len(codes)
    starts = np.empty(n + 1, dtype=np.int64)
    m = 0
    for i in range(n):
        if i == 0 or codes[i] != codes[i - 1]:
            starts[m] = i
            m += 1
    starts[m] = n
    return starts[: m + 1].copy()


@njit(cache=True)
def counting_order(
    codes: np.ndarray, offsets: np.ndarray, code_count: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Stable order of cells by (code, offset): counting sort on the code, then each bucket by offset.

    Returns the order (input position of each sorted cell), the sorted offsets, the distinct codes
    in increasing order and the bucket bounds (one more than the codes).
    """
    n = len(codes)
    starts = np.zeros(code_count + 1, dtype=np.int64)
    for i in range(n):
        starts[codes[i] + 1] += 1
    used = 0
    for c in range(code_count):
        if starts[c + 1] > 0:
            used += 1
        starts[c + 1] += starts[c]
    distinct = np.empty(used, dtype=np.int64)
    bounds = np.empty(used + 1, dtype=np.int64)
    j = 0
    for c in range(code_count):
        if starts[c + 1] > starts[c]:
            distinct[j] = c
            bounds[j] = starts[c]
            j += 1
    bounds[used] = n
    order = np.empty(n, dtype=np.int64)
    sorted_offsets = np.empty(n, dtype=np.int64)
    for i in range(n):
        p = starts[codes[i]]
        starts[codes[i]] = p + 1
        order[p] = i
        sorted_offsets[p] = offsets[i]
    for b in range(used):
        lo, hi = bounds[b], bounds[b + 1]
        ordered = True
        for p in range(lo + 1, hi):
            if sorted_offsets[p] < sorted_offsets[p - 1]:
                ordered = False
                break
        if ordered:
            continue
        within = np.argsort(sorted_offsets[lo:hi], kind="mergesort")
        moved_order = order[lo:hi][within]
        moved_offsets = sorted_offsets[lo:hi][within]
        order[lo:hi] = moved_order
        sorted_offsets[lo:hi] = moved_offsets
    return order, sorted_offsets, distinct, bounds
