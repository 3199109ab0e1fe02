"""Per-cell fences of store-mean (paper 001, section 3.1): for every cell some tuple's possible range
covers, the lowest and highest mean cell (per dimension) of the tuples covering it.

A query region is expanded by walking, from each of its cells, to the cells its fences name; every
tuple whose possible range meets the region has its mean cell inside that walk. The fences of a
batch are computed chunk by chunk on dense blocks (work proportional to the total area of the
possible ranges, the same as the copies of store-all).
"""

from __future__ import annotations

import numpy as np
from numba import njit

_BIG = np.iinfo(np.int64).max
_SMALL = np.iinfo(np.int64).min


@njit(cache=True)
def _stamp(
    box_starts: np.ndarray,
    box_sizes: np.ndarray,
    group_bounds: np.ndarray,
    members: np.ndarray,
    first: np.ndarray,
    last: np.ndarray,
    mean_cells: np.ndarray,
    capacity: int,
):
    ndim = first.shape[1]
    out_cells = np.empty((capacity, ndim), dtype=np.int64)
    out_low = np.empty((capacity, ndim), dtype=np.int64)
    out_high = np.empty((capacity, ndim), dtype=np.int64)
    written = 0
    volume_max = 1
    for g in range(box_sizes.shape[0]):
        v = 1
        for k in range(ndim):
            v *= box_sizes[g, k]
        volume_max = max(volume_max, v)
    low = np.empty((volume_max, ndim), dtype=np.int64)
    high = np.empty((volume_max, ndim), dtype=np.int64)
    covered = np.zeros(volume_max, dtype=np.bool_)
    lo = np.empty(ndim, dtype=np.int64)
    hi = np.empty(ndim, dtype=np.int64)
    cursor = np.empty(ndim, dtype=np.int64)
    strides = np.empty(ndim, dtype=np.int64)
    for g in range(box_sizes.shape[0]):
        volume = 1
        for k in range(ndim - 1, -1, -1):
            strides[k] = volume
            volume *= box_sizes[g, k]
        for c in range(volume):
            covered[c] = False
            for k in range(ndim):
                low[c, k] = _BIG
                high[c, k] = _SMALL
        for m in range(group_bounds[g], group_bounds[g + 1]):
            t = members[m]
            empty = False
            for k in range(ndim):
                lo[k] = max(first[t, k], box_starts[g, k]) - box_starts[g, k]
                hi[k] = min(last[t, k], box_starts[g, k] + box_sizes[g, k] - 1) - box_starts[g, k]
                if lo[k] > hi[k]:
                    empty = True
            if empty:
                continue
            for k in range(ndim):
                cursor[k] = lo[k]
            while True:
                offset = 0
                for k in range(ndim):
                    offset += cursor[k] * strides[k]
                covered[offset] = True
                for k in range(ndim):
                    if mean_cells[t, k] < low[offset, k]:
                        low[offset, k] = mean_cells[t, k]
                    if mean_cells[t, k] > high[offset, k]:
                        high[offset, k] = mean_cells[t, k]
                # odometer over the intersection box (last dimension fastest)
                k = ndim - 1
                while k >= 0:
                    cursor[k] += 1
                    if cursor[k] <= hi[k]:
                        break
                    cursor[k] = lo[k]
                    k -= 1
                if k < 0:
                    break
        for c in range(volume):
            if covered[c]:
                rest = c
                for k in range(ndim):
                    out_cells[written, k] = box_starts[g, k] + rest // strides[k]
                    rest = rest % strides[k]
                    out_low[written, k] = low[c, k]
                    out_high[written, k] = high[c, k]
                written += 1
    return out_cells[:written], out_low[:written], out_high[:written]


def batch_fences(
    first: np.ndarray,
    last: np.ndarray,
    mean_cells: np.ndarray,
    chunk_origin: np.ndarray,
    chunk_length: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fence records of one batch: covered cells (m, d) and their lowest / highest mean cells (m, d).

    ``first``/``last`` are the tuples' possible ranges (n, d) in cells (inside [low, high]),
    ``mean_cells`` their mean cells; chunks are ``chunk_length`` cells from ``chunk_origin``.
    """
    first = np.ascontiguousarray(first, dtype=np.int64)
    last = np.ascontiguousarray(last, dtype=np.int64)
    mean_cells = np.ascontiguousarray(mean_cells, dtype=np.int64)
    n, d = first.shape
    if n == 0:
        empty = np.zeros((0, d), np.int64)
        return empty, empty, empty
    origin = np.asarray(chunk_origin, np.int64)
    length = np.asarray(chunk_length, np.int64)
    chunk_first = (first - origin) // length
    chunk_last = (last - origin) // length
    spans = chunk_last - chunk_first + 1
    per_tuple = np.prod(spans, axis=1)
    owner = np.repeat(np.arange(n, dtype=np.int64), per_tuple)
    starts = np.concatenate(([0], np.cumsum(per_tuple)[:-1]))
    index = np.arange(int(per_tuple.sum()), dtype=np.int64) - np.repeat(starts, per_tuple)
    chunks = np.empty((len(owner), d), dtype=np.int64)
    rest = index
    for k in range(d - 1, -1, -1):
        chunks[:, k] = chunk_first[owner, k] + rest % spans[owner, k]
        rest = rest // spans[owner, k]
    order = np.lexsort(tuple(chunks[:, k] for k in range(d - 1, -1, -1)))
    chunks, owner = chunks[order], owner[order]
    boundary = np.flatnonzero(np.concatenate(([True], np.any(chunks[1:] != chunks[:-1], axis=1))))
    group_bounds = np.append(boundary, len(owner)).astype(np.int64)
    group_chunks = chunks[boundary]
    box_starts = np.maximum(origin + group_chunks * length, low)
    box_ends = np.minimum(origin + (group_chunks + 1) * length - 1, high)
    box_sizes = box_ends - box_starts + 1
    capacity = int(np.prod(box_sizes, axis=1).sum())
    return _stamp(box_starts, box_sizes, group_bounds, owner, first, last, mean_cells, capacity)
