"""Shape-based similarity join of two point sets (numba): per left cell, signed aggregates of the right
cells inside the shape centred on it, without materializing the pairs; or the pairs themselves.

Sums are exact (kernels/exact_sum.py): integer sums in 128 bits, float sums as floating-point
expansions with counts of non-finite values, so a signed delta adds and subtracts without error.

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

from arrayviews.kernels import exact_sum
from arrayviews.kernels.exact_sum import FloatSums, IntSums
from arrayviews.model.shapes import Shape


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
    count, int_valid_count, float_valid_count, int_high, int_low, float_parts, float_nonfinite,
    int_min, int_max, float_min, float_max, int_has, float_has,
    int_gone_min, int_gone_max, float_gone_min, float_gone_max, int_gone, float_gone, negative, status,
):  # fmt: skip
    n, d = left.shape
    n_int = int_values.shape[1]
    n_float = float_values.shape[1]
    partials = np.empty((n_float, exact_sum.CAPACITY), dtype=np.float64)
    scratch = np.empty(exact_sum.CAPACITY, dtype=np.float64)
    lengths = np.zeros(n_float, dtype=np.int64)
    corner = np.empty(d, dtype=np.int64)
    first_bucket = np.empty(d, dtype=np.int64)
    span = np.empty(d, dtype=np.int64)
    step = np.empty(d, dtype=np.int64)
    for i in range(n):
        lengths[:] = 0
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
                        int_high[i, c], int_low[i, c] = exact_sum.add_int(
                            int_high[i, c], int_low[i, c], value, sign < 0
                        )
                        if sign > 0:
                            if not int_has[i, c] or value < int_min[i, c]:
                                int_min[i, c] = value
                            if not int_has[i, c] or value > int_max[i, c]:
                                int_max[i, c] = value
                            int_has[i, c] = True
                        else:
                            if not int_gone[i, c] or value < int_gone_min[i, c]:
                                int_gone_min[i, c] = value
                            if not int_gone[i, c] or value > int_gone_max[i, c]:
                                int_gone_max[i, c] = value
                            int_gone[i, c] = True
                for c in range(n_float):
                    if float_valid[j, c]:
                        value = float_values[j, c]
                        float_valid_count[i, c] += sign
                        if value - value != 0.0:  # counted, never summed: exactly invertible
                            kind = (
                                exact_sum.NAN
                                if value != value
                                else (exact_sum.POSINF if value > 0 else exact_sum.NEGINF)
                            )
                            float_nonfinite[i, c, kind] += sign
                        else:
                            grown = exact_sum.add_term(
                                partials[c], lengths[c], scratch, value if sign > 0 else -value
                            )
                            if grown < 0:
                                status[0], status[1], status[2] = -grown, i, c
                                return
                            lengths[c] = grown
                        if sign > 0:
                            _extend(float_min, float_max, float_has, i, c, value)
                        else:
                            _extend(float_gone_min, float_gone_max, float_gone, i, c, value)
        for c in range(n_float):
            written = exact_sum.canonical(partials[c], lengths[c], float_parts[i, c])
            if written < 0:
                status[0], status[1], status[2] = -written, i, c
                return


@numba.njit(cache=True, inline="always")
def _extend(low, high, has, i, c, value):
    """Take ``value`` into the running float min and max of row i, column c (NaN propagates, as in
    np.min)."""
    if not has[i, c]:
        low[i, c] = value
        high[i, c] = value
    elif value != value or low[i, c] != low[i, c]:
        low[i, c] = np.nan
        high[i, c] = np.nan
    else:
        low[i, c] = min(low[i, c], value)
        high[i, c] = max(high[i, c], value)
    has[i, c] = True


@dataclass
class JoinResult:
    """Signed aggregates per left cell.

    ``count`` is the signed number of pairs; per right column, ``valid_count`` the signed number of
    pairs whose value is not null, ``sums`` their exact signed sum (:class:`IntSums` for integer
    columns, :class:`FloatSums` for float columns), ``minimum``/``maximum`` the extremes over the
    positive pairs (``has_extreme`` false where there was none) and ``gone_minimum``/``gone_maximum``
    those over the negative pairs (``has_gone`` false where there was none): the values that left.
    ``negative`` marks left cells touched by a negative pair.
    """

    count: np.ndarray
    int_columns: list[str]
    float_columns: list[str]
    valid_count: dict[str, np.ndarray]
    sums: dict[str, IntSums | FloatSums]
    minimum: dict[str, np.ndarray]
    maximum: dict[str, np.ndarray]
    has_extreme: dict[str, np.ndarray]
    gone_minimum: dict[str, np.ndarray]
    gone_maximum: dict[str, np.ndarray]
    has_gone: dict[str, np.ndarray]
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
    of the right cells ``r`` with ``r - left`` in ``shape``. Raises :class:`ExactSumError` (with the
    left row and the float column's position) where a float sum cannot be kept exactly."""
    left = np.ascontiguousarray(left, dtype=np.int64).reshape(-1, shape.ndim)
    right = np.ascontiguousarray(right, dtype=np.int64).reshape(-1, shape.ndim)
    n, m = len(left), len(right)
    right_valid = right_valid or {}
    # the kernel works on int64: uint64 values are shifted by -2**63 (order kept, undone below), times
    # are their int64 ticks (viewed back below)
    original = {c: np.asarray(v).dtype for c, v in (right_values or {}).items()}
    right_values = {c: _as_kernel_values(np.asarray(v)) for c, v in (right_values or {}).items()}
    int_columns = [c for c, v in right_values.items() if v.dtype.kind in "iub"]
    float_columns = [c for c, v in right_values.items() if v.dtype.kind == "f"]

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
    ni, nf = len(int_columns), len(float_columns)
    outputs = {
        "int_valid_count": np.zeros((n, ni), np.int64),
        "float_valid_count": np.zeros((n, nf), np.int64),
        "int_high": np.zeros((n, ni), np.int64),
        "int_low": np.zeros((n, ni), np.uint64),
        "float_parts": np.zeros((n, nf, exact_sum.K), np.float64),
        "float_nonfinite": np.zeros((n, nf, exact_sum.NONFINITE), np.int64),
    }
    for kind, columns, dtype in (("int", ni, np.int64), ("float", nf, np.float64)):
        for part in ("min", "max", "gone_min", "gone_max"):
            outputs[f"{kind}_{part}"] = np.zeros((n, columns), dtype)
        outputs[f"{kind}_has"] = np.zeros((n, columns), np.bool_)
        outputs[f"{kind}_gone"] = np.zeros((n, columns), np.bool_)
    negative = np.zeros(n, np.bool_)
    status = np.zeros(3, np.int64)
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
            outputs["int_valid_count"], outputs["float_valid_count"], outputs["int_high"], outputs["int_low"],
            outputs["float_parts"], outputs["float_nonfinite"],
            outputs["int_min"], outputs["int_max"], outputs["float_min"], outputs["float_max"],
            outputs["int_has"], outputs["float_has"],
            outputs["int_gone_min"], outputs["int_gone_max"], outputs["float_gone_min"],
            outputs["float_gone_max"], outputs["int_gone"], outputs["float_gone"], negative, status,
        )  # fmt: skip
        if status[0] != exact_sum.OK:
            raise exact_sum.ExactSumError(int(status[0]), int(status[1]), int(status[2]))
    result = JoinResult(count, int_columns, float_columns, {}, {}, {}, {}, {}, {}, {}, {}, negative)
    for kind, columns in (("int", int_columns), ("float", float_columns)):
        for k, name in enumerate(columns):
            result.valid_count[name] = outputs[f"{kind}_valid_count"][:, k]
            if kind == "int":
                sums = IntSums(outputs["int_high"][:, k].copy(), outputs["int_low"][:, k].copy())
                if original[name] == np.uint64:  # each valid value was summed 2**63 short
                    sums = _plus_times_2_63(sums, result.valid_count[name])
                result.sums[name] = sums
            else:
                result.sums[name] = FloatSums(
                    outputs["float_parts"][:, k].copy(), outputs["float_nonfinite"][:, k].copy()
                )
            back = (lambda v, dtype=original[name]: _from_kernel_values(v, dtype)) if kind == "int" else None
            for field, part in (("minimum", "min"), ("maximum", "max"), ("gone_minimum", "gone_min"),
                                ("gone_maximum", "gone_max")):  # fmt: skip
                column = outputs[f"{kind}_{part}"][:, k]
                getattr(result, field)[name] = column if back is None else back(column)
            result.has_extreme[name] = outputs[f"{kind}_has"][:, k]
            result.has_gone[name] = outputs[f"{kind}_gone"][:, k]
    return result


_TOP_BIT = np.uint64(1 << 63)


def _as_kernel_values(values: np.ndarray) -> np.ndarray:
    """A right column as the kernel takes it: uint64 shifted into int64 by -2**63 (keeping the
    order, so min and max stay right), datetime64 and timedelta64 as their int64 ticks."""
    if values.dtype == np.uint64:
        return (values ^ _TOP_BIT).view(np.int64)
    if values.dtype.kind in "mM":
        return values.view(np.int64)
    return values


def _from_kernel_values(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Extremes computed on :func:`_as_kernel_values` back in the column's own type."""
    if dtype == np.uint64:
        return values.view(np.uint64) ^ _TOP_BIT
    if dtype.kind in "mM":
        return values.view(dtype)
    return values


def _plus_times_2_63(sums: IntSums, count: np.ndarray) -> IntSums:
    """``sums + count * 2**63`` exactly (``count`` signed): ``count * 2**63`` is ``count >> 1`` in
    the high word and ``(count & 1) << 63`` in the low one."""
    count = np.asarray(count, dtype=np.int64)
    low = (count & 1).astype(np.uint64) << np.uint64(63)
    total = sums.low + low
    carry = (total < sums.low).astype(np.int64)
    return IntSums(sums.high + (count >> 1) + carry, total)


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
