"""Per-cell fences of store-mean (paper 001, section 3.1): for every cell some tuple's possible range
covers, the lowest and highest mean cell (per dimension) of the tuples covering it.

A query region is expanded by walking, from each of its cells, to the cells its fences name; every
tuple whose possible range meets the region has its mean cell inside that walk. The fences of a
batch are computed chunk by chunk on dense blocks, each the bounding box of the ranges' parts in
its chunk (work proportional to the total area of the possible ranges, the same as the copies of
store-all).
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
    group_bounds, owner, box_starts, box_sizes = _fence_groups(
        first, last, np.asarray(chunk_origin, np.int64), np.asarray(chunk_length, np.int64), low, high
    )
    capacity = int(np.prod(box_sizes, axis=1).sum())
    return _stamp(box_starts, box_sizes, group_bounds, owner, first, last, mean_cells, capacity)


def _fence_groups(first, last, origin, length, low, high):
    """The dense blocks fences are computed on: per touched chunk, the bounding box of the parts of
    the possible ranges inside it (not the whole chunk: a chunk of 2**30 cells holding one narrow
    tuple is one cell of work), with the tuples touching it. Returns (group bounds into ``owner``,
    ``owner`` (tuples, grouped by chunk), box starts (g, d), box sizes (g, d))."""
    d = first.shape[1]
    chunks, owner = _touched_chunks(first, last, origin, length)
    order = np.lexsort(tuple(chunks[:, k] for k in range(d - 1, -1, -1)))
    chunks, owner = chunks[order], owner[order]
    boundary = np.flatnonzero(np.concatenate(([True], np.any(chunks[1:] != chunks[:-1], axis=1))))
    group_bounds = np.append(boundary, len(owner)).astype(np.int64)
    group_chunks = chunks[boundary]
    reach_low = np.minimum.reduceat(first[owner], boundary, axis=0)
    reach_high = np.maximum.reduceat(last[owner], boundary, axis=0)
    box_starts = np.maximum(np.maximum(origin + group_chunks * length, low), reach_low)
    box_ends = np.minimum(np.minimum(origin + (group_chunks + 1) * length - 1, high), reach_high)
    return group_bounds, owner, box_starts, box_ends - box_starts + 1


def _chunk_spans(first, last, origin, length) -> tuple[np.ndarray, np.ndarray]:
    """First chunk index and chunks spanned (n, d) of every possible range."""
    chunk_first = (first - origin) // length
    return chunk_first, (last - origin) // length - chunk_first + 1


def _touched_chunks(first, last, origin, length) -> tuple[np.ndarray, np.ndarray]:
    """Every (chunk index (m, d), tuple (m,)) pair of a chunk a possible range touches."""
    n, d = first.shape
    chunk_first, spans = _chunk_spans(first, last, origin, length)
    per_tuple = np.prod(spans, axis=1)
    owner = np.repeat(np.arange(n, dtype=np.int64), per_tuple)
    starts = np.concatenate(([0], np.cumsum(per_tuple)[:-1]))
    rest = np.arange(int(per_tuple.sum()), dtype=np.int64) - np.repeat(starts, per_tuple)
    chunks = np.empty((len(owner), d), dtype=np.int64)
    for k in range(d - 1, -1, -1):
        chunks[:, k] = chunk_first[owner, k] + rest % spans[owner, k]
        rest = rest // spans[owner, k]
    return chunks, owner


def fence_capacity(
    first: np.ndarray,
    last: np.ndarray,
    chunk_origin: np.ndarray,
    chunk_length: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
    limit: float,
) -> float:
    """Cells of the dense blocks ``batch_fences`` computes fences on (the rows it allocates). The
    chunks are enumerated only while the (tuple, chunk) pairs stay within ``limit``; beyond it the
    number of pairs is returned (itself above ``limit``)."""
    first = np.ascontiguousarray(first, dtype=np.int64)
    last = np.ascontiguousarray(last, dtype=np.int64)
    if len(first) == 0:
        return 0.0
    origin = np.asarray(chunk_origin, np.int64)
    length = np.asarray(chunk_length, np.int64)
    _, spans = _chunk_spans(first, last, origin, length)
    pairs = float(np.prod(spans.astype(np.float64), axis=1).sum())
    if pairs > limit:
        return pairs
    sizes = _fence_groups(first, last, origin, length, low, high)[3]
    return float(np.prod(sizes.astype(np.float64), axis=1).sum())
