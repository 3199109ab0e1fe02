"""Means of integers correctly rounded: ``total / count`` as the float64 nearest the exact quotient
(what Python's ``int / int`` gives), for int64 totals and for 128-bit exact sums.

The quotient is split as ``q + r / count`` with ``q`` truncated toward zero, so both parts share the
sign and nothing cancels, and evaluated in the platform's extended precision (64-bit mantissa on
x86-64): its error is under two extended-precision units, far below half a float64 unit. Rounding
that to float64 is correct unless the extended value lies within a few units of a point halfway
between two float64 values; those rare quotients, totals beyond int64, and every quotient on a
platform without extended precision are divided exactly by Python integers.
"""

from __future__ import annotations

import numpy as np

#: Whether ``np.longdouble`` carries at least a 64-bit mantissa (x86-64 Linux: yes).
EXTENDED = np.finfo(np.longdouble).nmant >= 63
#: Extended-precision units around a float64 halfway point inside which the exact division decides.
_MARGIN = 8


def _exactly(totals, counts) -> np.ndarray:
    return np.array([int(t) / int(c) for t, c in zip(totals, counts, strict=True)], dtype=np.float64)


def int_quotient(total: np.ndarray, count: np.ndarray) -> np.ndarray:
    """``total / count`` correctly rounded, element by element (int64 totals, counts >= 1; any
    shapes that broadcast)."""
    total, count = np.broadcast_arrays(np.asarray(total, dtype=np.int64), np.asarray(count, dtype=np.int64))
    shape = total.shape
    total, count = total.ravel(), count.ravel()
    if len(total) == 0:
        return np.zeros(shape, np.float64)
    if not EXTENDED:
        return _exactly(total.tolist(), count.tolist()).reshape(shape)
    quotient, remainder = np.divmod(total, count)  # floor: remainder in [0, count)
    negative = (remainder != 0) & (total < 0)
    quotient = quotient + negative  # toward zero: remainder in (-count, 0] for negative totals
    remainder = remainder - count * negative
    wide = quotient.astype(np.longdouble) + remainder.astype(np.longdouble) / count.astype(np.longdouble)
    result = wide.astype(np.float64)
    toward = np.where(wide >= result.astype(np.longdouble), np.inf, -np.inf)
    halfway = (result.astype(np.longdouble) + np.nextafter(result, toward).astype(np.longdouble)) / 2
    risky = np.flatnonzero(np.abs(wide - halfway) <= _MARGIN * np.spacing(np.abs(wide)))
    if len(risky):
        result[risky] = _exactly(total[risky].tolist(), count[risky].tolist())
    return result.reshape(shape)


def wide_quotient(high: np.ndarray, low: np.ndarray, count: np.ndarray) -> np.ndarray:
    """``(high * 2**64 + low) / count`` correctly rounded (128-bit sums: int64 high words, uint64 low
    words; counts >= 1), by Python integers: only for sums beyond int64, which are rare."""
    totals = [(int(h) << 64) + int(lo) for h, lo in zip(high.tolist(), low.tolist(), strict=True)]
    return _exactly(totals, np.asarray(count).tolist())


__all__ = ["EXTENDED", "int_quotient", "wide_quotient"]
