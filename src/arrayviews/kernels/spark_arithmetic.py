"""Spark's arithmetic on numpy arrays (ANSI mode): checked integer operations, Java remainders and
divisions, NaN-aware ordering, HALF_UP rounding, Java ``pow``, and the checked casts.

Every function works on whole arrays (or 0-d constants) and returns the values together with a mask
of the elements where Spark would raise (overflow, division by zero, invalid cast; ``NEVER`` when
none can); callers decide which of those elements Spark actually evaluates. Nothing here wraps
silently.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from arrayviews.storage import codec

INT_BOUNDS = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
DTYPES = {
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "bool": np.dtype(np.bool_),
    "string": np.dtype(object),
    "uint64": np.dtype(
        np.uint64
    ),  # compared exactly with integers (numpy compares mixed signs exactly)  # str values; compared by UTF-8 bytes through pyarrow
    "void": np.dtype(np.bool_),  # NULL literals: the values are never read
}
_TWO_63 = 2.0**63
NEVER = np.False_  # "no element fails", without allocating a mask


def add(a: np.ndarray, b: np.ndarray, kind: str, op: str) -> tuple[np.ndarray, np.ndarray]:
    """``a + b``, ``a - b`` or ``a * b`` (``op``) in type ``kind``, and where an integer overflows."""
    if kind in ("float32", "float64"):
        result = {"+": np.add, "-": np.subtract, "*": np.multiply}[op](a, b)
        return result, NEVER
    if kind == "int32":
        wide = {"+": np.add, "-": np.subtract, "*": np.multiply}[op](a.astype(np.int64), b.astype(np.int64))
        low, high = INT_BOUNDS["int32"]
        return wide.astype(np.int32), (wide < low) | (wide > high)
    low = np.int64(INT_BOUNDS["int64"][0])
    if op == "+":
        result = a + b  # int64 arrays wrap around silently: the overflow test below catches it
        return result, ((a ^ result) & (b ^ result)) < 0
    if op == "-":
        result = a - b
        return result, ((a ^ b) & (a ^ result)) < 0
    result = a * b
    divisor = np.where(a == 0, 1, a)
    wrong = (a != 0) & (np.floor_divide(result, divisor) != b)  # exact unless the product wrapped
    wrong |= ((a == -1) & (b == low)) | ((b == -1) & (a == low))
    return result, wrong


def negate(a: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """``-a``, and where it overflows (the smallest integer has no negation)."""
    if kind in INT_BOUNDS:
        return np.negative(a), a == INT_BOUNDS[kind][0]
    return np.negative(a), NEVER


def absolute(a: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """``abs(a)``, and where it overflows."""
    if kind in INT_BOUNDS:
        return np.abs(a), a == INT_BOUNDS[kind][0]
    return np.abs(a), NEVER


def divide(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``a / b`` in DOUBLE, and where ``b`` is zero (either sign: Spark raises)."""
    zero = b == 0
    return np.true_divide(a, np.where(zero, 1.0, b)), zero


def remainder(a: np.ndarray, b: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Java's ``a % b`` (the sign of ``a``; ``fmod`` for floats), and where ``b`` is zero."""
    zero = b == 0
    if kind in INT_BOUNDS:
        minus_one = b == -1  # Java: MIN % -1 is 0 (the hardware division would trap)
        result = np.fmod(a, np.where(zero | minus_one, 1, b).astype(a.dtype))
        return np.where(minus_one, 0, result).astype(a.dtype), zero
    return np.fmod(a, np.where(zero, 1, b).astype(a.dtype)), zero


def integral_divide(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``a DIV b`` on BIGINT (truncated toward zero), where ``b`` is zero, and where it overflows."""
    low = INT_BOUNDS["int64"][0]
    zero = b == 0
    overflow = (a == low) & (b == -1)
    safe = np.where(zero | overflow, 1, b)
    quotient = np.floor_divide(a, safe)
    inexact = np.fmod(a, safe) != 0
    quotient = quotient + (inexact & ((a < 0) != (safe < 0)))
    return quotient, zero, overflow


def bitwise(a: np.ndarray, b: np.ndarray, op: str) -> np.ndarray:
    return {"&": np.bitwise_and, "|": np.bitwise_or, "^": np.bitwise_xor}[op](a, b)


def _number(x: np.ndarray) -> bool:
    """True if ``x`` is a constant that is not NaN (then the NaN rules need no array passes)."""
    return x.ndim == 0 and not np.isnan(x)


def _text(values: np.ndarray) -> pa.Array | pa.Scalar:
    if values.ndim == 0:
        return pa.scalar(values.item(), pa.string())
    return codec.text_array(values)


def text_compare(a: np.ndarray, b: np.ndarray, function: str) -> np.ndarray:
    """``pyarrow.compute.<function>`` (equal, less...) of two string operands (arrays or 0-d), by
    UTF-8 bytes, which is Spark's string order; a numpy bool array (0-d when both are 0-d)."""
    result = getattr(pc, function)(_text(a), _text(b))
    if isinstance(result, pa.Scalar):
        return np.bool_(result.as_py())
    return result.to_numpy(zero_copy_only=False).astype(bool, copy=False)


def equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Spark's equality: NaN equals NaN, -0.0 equals 0.0; strings equal when their bytes are."""
    if a.dtype.kind == "O":
        return text_compare(a, b, "equal")
    if a.dtype.kind == "f" and not (_number(a) or _number(b)):
        return (a == b) | (np.isnan(a) & np.isnan(b))
    return a == b


def less(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Spark's ordering: NaN is larger than every other number (infinity included); strings in the
    order of their UTF-8 bytes."""
    if a.dtype.kind == "O":
        return text_compare(a, b, "less")
    if a.dtype.kind == "f":
        if _number(b):
            return a < b  # a NaN a is not less
        if _number(a):
            return (a < b) | np.isnan(b)
        return (a < b) | (~np.isnan(a) & np.isnan(b))
    if a.dtype.kind == "b":
        return ~a & b
    return a < b


def compare(a: np.ndarray, b: np.ndarray, op: str) -> np.ndarray:
    """``a op b`` for ``= <> < <= > >=`` with Spark's NaN semantics."""
    if op == "=":
        return equal(a, b)
    if op == "<>":
        return ~equal(a, b)
    if op == "<":
        return less(a, b)
    if op == ">":
        return less(b, a)
    if op == "<=":
        return less(a, b) | equal(a, b)
    return less(b, a) | equal(a, b)


def floor_or_ceil(a: np.ndarray, kind: str, function: str) -> np.ndarray:
    """``floor``/``ceil`` as BIGINT: Java's double-to-long conversion (NaN is 0, beyond the range
    saturates at the bounds)."""
    if kind in INT_BOUNDS:
        return a.astype(np.int64)
    whole = (np.floor if function == "floor" else np.ceil)(a.astype(np.float64))
    return saturating_long(whole)


def saturating_long(value: np.ndarray) -> np.ndarray:
    """Java's ``(long) double``: truncation, NaN to 0, saturation at the BIGINT bounds."""
    value = np.trunc(value)
    high = value >= _TWO_63
    low = value < -_TWO_63
    inside = np.where(np.isnan(value) | high | low, 0.0, value).astype(np.int64)
    result = np.where(high, INT_BOUNDS["int64"][1], inside)
    return np.where(low, INT_BOUNDS["int64"][0], result).astype(np.int64)


def round_half_up(a: np.ndarray, kind: str) -> np.ndarray:
    """``round(a)``: halves away from zero (Spark's HALF_UP on the exact value); a zero result is +0.0."""
    if kind in INT_BOUNDS:
        return a
    whole = np.trunc(a)
    step = np.where(np.abs(a - whole) >= 0.5, np.sign(a), 0.0).astype(a.dtype)
    result = whole + step
    result = np.where(result == 0, np.zeros_like(result), result)  # BigDecimal has no negative zero
    return np.where(np.isfinite(a), result, a).astype(a.dtype)


def power(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Java's ``Math.pow``: as C's ``pow`` except that a NaN exponent gives NaN (even for base 1) and
    a base of magnitude 1 to an infinite exponent gives NaN."""
    shape = np.broadcast_shapes(np.shape(a), np.shape(b))
    # numpy takes x ** 0.5 as sqrt(x) when the exponent is one number (a scalar, or an array of
    # stride 0), so (-inf) ** 0.5 is NaN and (-0.0) ** 0.5 is -0.0 there; C's pow (and Java's) give
    # inf and 0.0. An exponent written out in full takes pow's path for every element.
    flat = shape or (1,)
    exponent = np.array(np.broadcast_to(b, flat))
    result = np.power(np.broadcast_to(a, flat), exponent).reshape(shape)
    undefined = np.isnan(b) | ((np.abs(a) == 1) & np.isinf(b))
    return np.where(undefined, np.nan, result)


def logarithm(a: np.ndarray, function: str) -> tuple[np.ndarray, np.ndarray]:
    """``ln``, ``log``, ``log10``, ``log2`` of ``a`` and where Spark gives NULL (``a <= 0``)."""
    undefined = a <= 0
    safe = np.where(undefined, 1.0, a)
    if function == "log10":
        return np.log10(safe), undefined
    if function == "log2":
        return np.log(safe) / math.log(2.0), undefined  # Spark: ln(x) / ln(2)
    return np.log(safe), undefined


def cast(value: np.ndarray, source: str, target: str) -> tuple[np.ndarray, np.ndarray]:
    """``CAST(value AS target)`` from ``source`` (ANSI), and where Spark raises CAST_OVERFLOW."""
    dtype = DTYPES[target]
    if source == target or source == "void":
        return value.astype(dtype), NEVER
    if target == "bool":
        return value != 0, NEVER  # NaN is true
    if source == "bool" or target in ("float32", "float64"):
        return value.astype(dtype), NEVER  # float64 -> float32 rounds (to infinity beyond the range)
    low, high = INT_BOUNDS[target]
    if source in INT_BOUNDS:
        bad = (value < low) | (value > high)
        return np.where(bad, 0, value).astype(dtype), bad
    as_double = value.astype(np.float64)
    bad = np.isnan(as_double) | (np.floor(as_double) > float(high)) | (np.ceil(as_double) < float(low))
    if target == "int64":
        return saturating_long(np.where(bad, 0.0, as_double)), bad
    return np.where(bad, 0.0, np.trunc(as_double)).astype(dtype), bad
