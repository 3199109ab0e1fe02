"""Distinct rows of small integer coordinate arrays, fast: rows folded into one int64 key when their
ranges allow, so numpy sorts one column instead of comparing rows as opaque records."""

from __future__ import annotations

import numpy as np


def _keys(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(keys, lows, spans) with ``keys`` ordered as the rows are lexicographically, or None when the
    product of the per-column spans does not fit in int64."""
    lows = rows.min(axis=0)
    # spans in Python integers: max - min + 1 may not fit int64
    spans_list = [
        int(h) - int(lo) + 1 for h, lo in zip(rows.max(axis=0).tolist(), lows.tolist(), strict=True)
    ]
    total = 1
    for span in spans_list:
        total *= span
    if total >= 2**62:
        return None
    spans = np.array(spans_list, dtype=np.int64)
    strides = np.ones(rows.shape[1], dtype=np.int64)
    for k in range(rows.shape[1] - 2, -1, -1):
        strides[k] = strides[k + 1] * spans[k + 1]
    return (rows - lows) @ strides, lows, spans


def unique_rows(rows: np.ndarray, return_inverse: bool = False):
    """``np.unique(rows, axis=0[, return_inverse=True])`` for an (n, d) integer array: the same
    sorted distinct rows (and the same inverse, flat), by sorting one folded int64 key."""
    rows = np.asarray(rows, dtype=np.int64)
    if rows.ndim != 2 or len(rows) == 0:
        return np.unique(rows, axis=0, return_inverse=return_inverse)
    folded = _keys(rows)
    if folded is None:
        result = np.unique(rows, axis=0, return_inverse=return_inverse)
        return (result[0], result[1].reshape(-1)) if return_inverse else result
    keys, lows, spans = folded
    if return_inverse:
        distinct, inverse = np.unique(keys, return_inverse=True)
    else:
        distinct = np.unique(keys)
    out = np.empty((len(distinct), rows.shape[1]), dtype=np.int64)
    rest = distinct
    for k in range(rows.shape[1] - 1, -1, -1):
        out[:, k] = rest % spans[k] + lows[k]
        rest = rest // spans[k]
    return (out, inverse.reshape(-1)) if return_inverse else out


__all__ = ["unique_rows"]
