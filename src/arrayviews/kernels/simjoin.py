"""Shape-based similarity join of two point sets (numba): per left cell, signed aggregates of the right
cells inside the shape centred on it, without materializing the pairs; or the pairs themselves.

Signs make one kernel serve both full computation (every sign +1) and view maintenance, where a
delta is a set of cells with sign +1 (inserted, or new value) or -1 (deleted, or old value) and a
pair counts with the product of its two signs: (alpha + d_alpha) join (beta + d_beta) expands into
signed terms whose sum is the change of the view.

Right cells are bucketed on a grid whose cells are the size of the shape's bounding box, so a left
cell's window overlaps at most 2^d buckets; each candidate is tested against the shape's stencil.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from arrayviews.model.shapes import Shape


@dataclass
class SignedAggregates:
    """Per left cell: signed pair counts and, per right column, signed sums and min/max.

    ``count`` is the signed number of pairs; ``valid_count[:, k]`` the signed number of pairs whose
    right value in column k is not null; ``sums[:, k]`` the signed sum of those values (int64 for
    integer columns, float64 for float columns); ``minimum``/``maximum`` are taken over positive pairs
    only (``has_extreme`` false where there was none); ``negative`` marks left cells touched by a
    negative pair, whose min/max can only be known by recomputing.
    """

    count: np.ndarray
    valid_count: np.ndarray
    int_sums: np.ndarray
    float_sums: np.ndarray
    minimum: np.ndarray
    maximum: np.ndarray
    has_extreme: np.ndarray
    negative: np.ndarray


@numba.njit(cache=True)
def _bucket_keys(points, origin, size, strides):
    n, d = points.shape
    keys = np.empty(n, dtype=np.int64)
    for i in range(n):
        key = 0
        for k in range(d):
            key += ((points[i, k] - origin[k]) // size[k]) * strides[k]
        keys[i] = key
    return keys


@numba.njit(cache=True)
def _join(
    left, left_sign, right, right_sign, right_keys, order, origin, size, strides, counts_per_dim,
    stencil, centre, int_values, float_values, int_valid, float_valid,
    count, int_valid_count, float_valid_count, int_sums, float_sums,
    int_min, int_max, float_min, float_max, int_has, float_has, negative,
):  # fmt: skip
    n, d = left.shape
    n_int = int_values.shape[1]
    n_float = float_values.shape[1]
    corner = np.empty(d, dtype=np.int64)
    first_bucket = np.empty(d, dtype=np.int64)
    span = np.empty(d, dtype=np.int64)
    step = np.empty(d, dtype=np.int64)
    for i in range(n):
        total = 1
        for k in range(d):
            low = left[i, k] - centre[k]
            high = low + stencil.shape[k] - 1
            corner[k] = low
            b0 = (low - origin[k]) // size[k]
            b1 = (high - origin[k]) // size[k]
            b0 = max(b0, 0)
            b1 = min(b1, counts_per_dim[k] - 1)
            first_bucket[k] = b0
            span[k] = b1 - b0 + 1
            if span[k] <= 0:
                total = 0
            total *= max(span[k], 0)
        for combo in range(total):
            rest = combo
            key = 0
            for k in range(d - 1, -1, -1):
                step[k] = rest % span[k]
                rest //= span[k]
                key += (first_bucket[k] + step[k]) * strides[k]
            lo = np.searchsorted(right_keys, key)
            hi = np.searchsorted(right_keys, key, side="right")
            for p in range(lo, hi):
                j = order[p]
                inside = True
                flat = 0
                for k in range(d):
                    offset = right[j, k] - corner[k]
                    if offset < 0 or offset >= stencil.shape[k]:
                        inside = False
                        break
                    flat = flat * stencil.shape[k] + offset
                if not inside or not stencil.flat[flat]:
                    continue
                sign = left_sign[i] * right_sign[j]
                count[i] += sign
                if sign < 0:
                    negative[i] = True
                for c in range(n_int):
                    if int_valid[j, c]:
                        value = int_values[j, c]
                        int_valid_count[i, c] += sign
                        int_sums[i, c] += sign * value
                        if sign > 0:
                            if not int_has[i, c] or value < int_min[i, c]:
                                int_min[i, c] = value
                            if not int_has[i, c] or value > int_max[i, c]:
                                int_max[i, c] = value
                            int_has[i, c] = True
                for c in range(n_float):
                    if float_valid[j, c]:
                        value = float_values[j, c]
                        float_valid_count[i, c] += sign
                        float_sums[i, c] += sign * value
                        if sign > 0:
                            if not float_has[i, c]:
                                float_min[i, c] = value
                                float_max[i, c] = value
                            elif value != value or float_min[i, c] != float_min[i, c]:
                                float_min[i, c] = np.nan  # NaN propagates, as np.min would
                                float_max[i, c] = np.nan
                            else:
                                float_min[i, c] = min(float_min[i, c], value)
                                float_max[i, c] = max(float_max[i, c], value)
                            float_has[i, c] = True


@dataclass
class JoinResult:
    """Signed aggregates per left cell, for integer and float right columns separately."""

    count: np.ndarray
    int_columns: list[str]
    float_columns: list[str]
    valid_count: dict[str, np.ndarray]
    sums: dict[str, np.ndarray]
    minimum: dict[str, np.ndarray]
    maximum: dict[str, np.ndarray]
    has_extreme: dict[str, np.ndarray]
    negative: np.ndarray


def join_aggregate(
    left: np.ndarray,
    right: np.ndarray,
    shape: Shape,
    right_values: dict[str, np.ndarray] | None = None,
    right_valid: dict[str, np.ndarray] | None = None,
    left_sign: np.ndarray | None = None,
    right_sign: np.ndarray | None = None,
) -> JoinResult:
    """For every left cell (already mapped into the right array's coordinates), the signed aggregates
    of the right cells ``r`` with ``r - left`` in ``shape``."""
    left = np.ascontiguousarray(left, dtype=np.int64).reshape(-1, shape.ndim)
    right = np.ascontiguousarray(right, dtype=np.int64).reshape(-1, shape.ndim)
    n, m = len(left), len(right)
    right_values = right_values or {}
    right_valid = right_valid or {}
    int_columns = [c for c, v in right_values.items() if np.asarray(v).dtype.kind in "iub"]
    float_columns = [c for c, v in right_values.items() if np.asarray(v).dtype.kind == "f"]

    def matrix(columns, dtype):
        if not columns:
            return np.zeros((m, 0), dtype=dtype)
        return np.ascontiguousarray(
            np.stack([np.asarray(right_values[c]).astype(dtype) for c in columns], axis=1)
        )

    def valid_matrix(columns):
        if not columns:
            return np.zeros((m, 0), dtype=np.bool_)
        return np.ascontiguousarray(
            np.stack(
                [np.asarray(right_valid.get(c, np.ones(m, dtype=bool)), dtype=bool) for c in columns], axis=1
            )
        )

    int_values, float_values = matrix(int_columns, np.int64), matrix(float_columns, np.float64)
    int_valid, float_valid = valid_matrix(int_columns), valid_matrix(float_columns)
    left_sign = np.ones(n, np.int64) if left_sign is None else np.asarray(left_sign, dtype=np.int64)
    right_sign = np.ones(m, np.int64) if right_sign is None else np.asarray(right_sign, dtype=np.int64)
    count = np.zeros(n, np.int64)
    outputs = {
        "int_valid_count": np.zeros((n, len(int_columns)), np.int64),
        "float_valid_count": np.zeros((n, len(float_columns)), np.int64),
        "int_sums": np.zeros((n, len(int_columns)), np.int64),
        "float_sums": np.zeros((n, len(float_columns)), np.float64),
        "int_min": np.zeros((n, len(int_columns)), np.int64),
        "int_max": np.zeros((n, len(int_columns)), np.int64),
        "float_min": np.zeros((n, len(float_columns)), np.float64),
        "float_max": np.zeros((n, len(float_columns)), np.float64),
        "int_has": np.zeros((n, len(int_columns)), np.bool_),
        "float_has": np.zeros((n, len(float_columns)), np.bool_),
    }
    negative = np.zeros(n, np.bool_)
    if n and m:
        size = np.asarray(shape.stencil.shape, dtype=np.int64)
        origin = right.min(axis=0)
        counts_per_dim = (right.max(axis=0) - origin) // size + 1
        strides = np.ones(shape.ndim, dtype=np.int64)
        for k in range(shape.ndim - 2, -1, -1):
            strides[k] = strides[k + 1] * counts_per_dim[k + 1]
        keys = _bucket_keys(right, origin, size, strides)
        order = np.argsort(keys, kind="stable")
        _join(
            left, left_sign, right, right_sign, keys[order], order, origin, size, strides, counts_per_dim,
            np.ascontiguousarray(shape.stencil), np.asarray(shape.centre, dtype=np.int64),
            int_values, float_values, int_valid, float_valid, count,
            outputs["int_valid_count"], outputs["float_valid_count"], outputs["int_sums"], outputs["float_sums"],
            outputs["int_min"], outputs["int_max"], outputs["float_min"], outputs["float_max"],
            outputs["int_has"], outputs["float_has"], negative,
        )  # fmt: skip
    result = JoinResult(count, int_columns, float_columns, {}, {}, {}, {}, {}, negative)
    for kind, columns in (("int", int_columns), ("float", float_columns)):
        for k, name in enumerate(columns):
            result.valid_count[name] = outputs[f"{kind}_valid_count"][:, k]
            result.sums[name] = outputs[f"{kind}_sums"][:, k]
            result.minimum[name] = outputs[f"{kind}_min"][:, k]
            result.maximum[name] = outputs[f"{kind}_max"][:, k]
            result.has_extreme[name] = outputs[f"{kind}_has"][:, k]
    return result


@numba.njit(cache=True)
def _pairs(
    left,
    right,
    right_keys,
    order,
    origin,
    size,
    strides,
    counts_per_dim,
    stencil,
    centre,
    fill,
    out_left,
    out_right,
):
    """Count (fill=False) or write (fill=True) the pairs; returns how many there are."""
    n, d = left.shape
    corner = np.empty(d, dtype=np.int64)
    first_bucket = np.empty(d, dtype=np.int64)
    span = np.empty(d, dtype=np.int64)
    found = 0
    for i in range(n):
        total = 1
        for k in range(d):
            low = left[i, k] - centre[k]
            corner[k] = low
            b0 = max((low - origin[k]) // size[k], 0)
            b1 = min((low + stencil.shape[k] - 1 - origin[k]) // size[k], counts_per_dim[k] - 1)
            first_bucket[k] = b0
            span[k] = b1 - b0 + 1
            total *= max(span[k], 0)
        for combo in range(total):
            rest = combo
            key = 0
            for k in range(d - 1, -1, -1):
                key += (first_bucket[k] + rest % span[k]) * strides[k]
                rest //= span[k]
            lo = np.searchsorted(right_keys, key)
            hi = np.searchsorted(right_keys, key, side="right")
            for p in range(lo, hi):
                j = order[p]
                flat = 0
                inside = True
                for k in range(d):
                    offset = right[j, k] - corner[k]
                    if offset < 0 or offset >= stencil.shape[k]:
                        inside = False
                        break
                    flat = flat * stencil.shape[k] + offset
                if inside and stencil.flat[flat]:
                    if fill:
                        out_left[found] = i
                        out_right[found] = j
                    found += 1
    return found


def join_pairs(left: np.ndarray, right: np.ndarray, shape: Shape) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs ``(i, j)`` with ``right[j] - left[i]`` in ``shape`` (left already mapped), by ``i``."""
    left = np.ascontiguousarray(left, dtype=np.int64).reshape(-1, shape.ndim)
    right = np.ascontiguousarray(right, dtype=np.int64).reshape(-1, shape.ndim)
    if len(left) == 0 or len(right) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    size = np.asarray(shape.stencil.shape, dtype=np.int64)
    origin = right.min(axis=0)
    counts_per_dim = (right.max(axis=0) - origin) // size + 1
    strides = np.ones(shape.ndim, dtype=np.int64)
    for k in range(shape.ndim - 2, -1, -1):
        strides[k] = strides[k + 1] * counts_per_dim[k + 1]
    keys = _bucket_keys(right, origin, size, strides)
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    stencil = np.ascontiguousarray(shape.stencil)
    centre = np.asarray(shape.centre, dtype=np.int64)
    empty = np.zeros(0, np.int64)
    count = _pairs(
        left,
        right,
        sorted_keys,
        order,
        origin,
        size,
        strides,
        counts_per_dim,
        stencil,
        centre,
        False,
        empty,
        empty,
    )
    out_left, out_right = np.empty(count, np.int64), np.empty(count, np.int64)
    _pairs(
        left,
        right,
        sorted_keys,
        order,
        origin,
        size,
        strides,
        counts_per_dim,
        stencil,
        centre,
        True,
        out_left,
        out_right,
    )
    return out_left, out_right
