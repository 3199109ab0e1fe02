"""Exact sums that stay exact under add and subtract (numba): float sums as floating-point expansions
with counts of their non-finite terms, integer sums as 128-bit (high, low) word pairs.

Float sums
----------
A float sum is kept per cell as ``K`` float64 components plus three counts (+inf, -inf and NaN
terms). The components hold the exact sum ``S`` of the finite terms in *canonical greedy form*:
``c[0] = RN(S)``, ``c[1] = RN(S - c[0])``, ``c[2] = RN(S - c[0] - c[1])``, ... (``RN``: round to
nearest, ties to even), zeros after the last one. So ``c[0]`` is the correctly rounded sum, equal to
``math.fsum`` of the terms, and components never overlap (``|c[k+1]| <= ulp(c[k]) / 2``). Non-finite
terms are counted instead of summed, so adding and then subtracting an infinity or a NaN restores
the finite sum exactly; the value is NaN while a NaN or both infinities are counted (as ``np.sum``),
else +-inf while one infinity is, else ``c[0]``.

Arithmetic (Shewchuk, "Adaptive precision floating-point arithmetic", 1997): terms are added with
Grow-Expansion (Fast-Two-Sum per partial, zeros dropped, as CPython's ``math.fsum`` keeps its
partials), which keeps an exact nonoverlapping expansion of increasing magnitude; the expansion is
rounded with fsum's final step (sum from the top while exact, then the half-even correction across
partials); canonical form is reached by repeatedly taking ``c = RN(rest)`` and adding ``-c`` to the
rest exactly.

Why ``K = 4`` suffices for terms of magnitude 1e-10 .. 1e17 with any signs: every such term is an
integer multiple of ``2**-86`` (1e-10 >= 2**-34, and a double's last bit is 52 places below its
leading bit), hence so are ``S`` and every remainder. If ``c[0]`` has exponent ``e``, the remainder
after ``k`` components is at most ``2**(e - 53k)`` in magnitude, and a remainder below ``2**-33``
that is a multiple of ``2**-86`` fits in 53 bits and is the last component. ``|S| <= N * 1e17 <
N * 2**57`` for ``N`` terms, so ``e <= 57 + log2(N)``, and four components suffice while
``57 + log2(N) - 3 * 53 <= -34``, i.e. for ``N <= 2**68`` terms -- more than an int64 can count.
(In general, terms whose magnitudes span ``b`` binary orders need about ``(b + 53) / 53``
components; a cell needing more than ``K`` raises :class:`ExactSumError`, as does an exact sum
beyond the float64 range, where ``math.fsum`` raises OverflowError.)

Integer sums
------------
An integer sum is a two's-complement 128-bit integer: a signed int64 high word and an unsigned low
word (stored as int64 bits). Adding or subtracting up to 2**63 int64 terms cannot overflow it, so
intermediate states may leave the int64 range under add/subtract; a *final* value that does not fit
int64 raises (the caller names the view, attribute and cell).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

#: Float64 components per exact float sum (see the module docstring for why 4).
K = 4
#: Columns of the non-finite counts.
POSINF, NEGINF, NAN = 0, 1, 2
NONFINITE = 3
CAPACITY = 4 * K  # scratch partials per sum before it is compressed to canonical form

#: Status codes of the kernels.
OK, TOO_MANY_COMPONENTS, FLOAT_OVERFLOW = 0, 1, 2


class ExactSumError(ArithmeticError):
    """An exact sum cannot be represented: ``index`` is the row (cell) that failed."""

    def __init__(self, code: int, index: int, column: int = 0) -> None:
        self.code = code
        self.index = index
        self.column = column
        super().__init__(describe(code))


class SumOverflow(ArithmeticError):
    """An integer sum does not fit int64: ``index`` is the position of the first such result and
    ``value`` its exact value (a Python int)."""

    def __init__(self, index, value: int) -> None:
        self.index = index
        self.value = value
        super().__init__(f"the sum is {value}, which does not fit int64")


def describe(code: int) -> str:
    """What a status code means, in words."""
    if code == TOO_MANY_COMPONENTS:
        return (
            f"its exact sum needs more than {K} float64 components (the summed values span more "
            f"than about {53 * (K - 1)} binary orders of magnitude)"
        )
    if code == FLOAT_OVERFLOW:
        return "its exact sum leaves the float64 range (as math.fsum, it cannot be rounded to a double)"
    return "ok"


def _raise(status: np.ndarray) -> None:
    if status[0] != OK:
        raise ExactSumError(int(status[0]), int(status[1]), int(status[2]))


# -- expansion arithmetic (numba) --------------------------------------------------------------------


@numba.njit(cache=True, inline="always")
def grow(partials, n, x):
    """Add ``x`` exactly to the nonoverlapping expansion ``partials[:n]`` (increasing magnitude, no
    zeros); returns the new length (at most n + 1), or -1 when the sum overflows float64."""
    i = 0
    for j in range(n):
        y = partials[j]
        if abs(x) < abs(y):
            x, y = y, x
        hi = x + y
        lo = y - (hi - x)
        if lo != 0.0:
            partials[i] = lo
            i += 1
        x = hi
    if x - x != 0.0:
        return -1
    if x != 0.0:
        partials[i] = x
        i += 1
    return i


@numba.njit(cache=True, inline="always")
def rounded(partials, n):
    """``RN(sum(partials[:n]))`` for a nonoverlapping expansion of increasing magnitude (the final
    step of CPython's math.fsum, with its half-even correction across partials)."""
    if n == 0:
        return 0.0
    n -= 1
    hi = partials[n]
    lo = 0.0
    while n > 0:
        x = hi
        n -= 1
        y = partials[n]
        hi = x + y
        lo = y - (hi - x)
        if lo != 0.0:
            break
    if n > 0 and ((lo < 0.0 and partials[n - 1] < 0.0) or (lo > 0.0 and partials[n - 1] > 0.0)):
        y = lo * 2.0
        x = hi + y
        if y == x - hi:
            hi = x
    return hi


@numba.njit(cache=True)
def canonical(partials, n, out):
    """Write the canonical components of ``sum(partials[:n])`` to ``out`` (decreasing, zero-filled),
    consuming ``partials``; returns how many there are, or -TOO_MANY_COMPONENTS / -FLOAT_OVERFLOW."""
    m = 0
    while n > 0:
        c = rounded(partials, n)
        if c - c != 0.0:
            return -FLOAT_OVERFLOW
        if m == out.size:
            return -TOO_MANY_COMPONENTS
        out[m] = c
        m += 1
        n = grow(partials, n, -c)
        if n < 0:
            return -FLOAT_OVERFLOW
    for k in range(m, out.size):
        out[k] = 0.0
    return m


@numba.njit(cache=True)
def compress(partials, n, scratch):
    """Shrink ``partials[:n]`` to its canonical components, kept in increasing order; returns the new
    length or a negative status as :func:`canonical`."""
    m = canonical(partials, n, scratch)
    if m < 0:
        return m
    for k in range(m):
        partials[k] = scratch[m - 1 - k]
    return m


@numba.njit(cache=True, inline="always")
def add_term(partials, n, scratch, x):
    """Add the finite ``x`` to the scratch expansion ``partials[:n]``, compressing it when full;
    returns the new length or a negative status."""
    if n >= partials.size - 1:
        n = compress(partials, n, scratch)
        if n < 0:
            return n
    n = grow(partials, n, x)
    if n < 0:
        return -FLOAT_OVERFLOW
    return n


@numba.njit(cache=True)
def _combine_float(parts, nonfinite, signs, order, groups, starts, out_parts, out_nonfinite, status):
    """Per group (rows ``order[starts[g]:starts[g + 1]]``), the signed exact sum of the rows' sums."""
    k = parts.shape[1]
    partials = np.empty(CAPACITY, dtype=np.float64)
    scratch = np.empty(CAPACITY, dtype=np.float64)
    for g in range(groups.size):
        n = 0
        for p in range(starts[g], starts[g + 1]):
            row = order[p]
            sign = signs[row]
            for t in range(NONFINITE):
                out_nonfinite[g, t] += sign * nonfinite[row, t]
            for c in range(k):
                x = parts[row, c]
                if x == 0.0:
                    break
                n = add_term(partials, n, scratch, x if sign > 0 else -x)
                if n < 0:
                    status[0] = -n
                    status[1] = groups[g]
                    return
        m = canonical(partials, n, out_parts[g])
        if m < 0:
            status[0] = -m
            status[1] = groups[g]
            return


@numba.njit(cache=True, inline="always")
def _exact_running_sum(values, start, stop):
    """(s, True) when every step of the running float sum of ``values[start:stop]`` was exact (its
    Two-Sum error zero, every term and partial sum finite): ``s`` is then the exact sum of the list,
    and its canonical form is ``s`` alone. (anything, False) otherwise."""
    s = 0.0
    exact = True
    for p in range(start, stop):
        x = values[p]
        hi = s + x
        b = hi - s
        # Two-Sum (Knuth): the rounding error of s + x; NaN when a term or the sum is not finite
        exact = exact and (s - (hi - b)) + (x - b) == 0.0
        s = hi
    return s, exact and s - s == 0.0


@numba.njit(cache=True)
def _sum_lists(values, offsets, out_parts, out_nonfinite, status):
    """Per list ``values[offsets[i]:offsets[i + 1]]``, its exact sum. A list whose running sum
    rounds at no step (integer-valued data, few terms) is summed in one cheap pass; the others grow
    an expansion term by term."""
    partials = np.empty(CAPACITY, dtype=np.float64)
    scratch = np.empty(CAPACITY, dtype=np.float64)
    for i in range(offsets.size - 1):
        s, exact = _exact_running_sum(values, offsets[i], offsets[i + 1])
        if exact:
            out_parts[i, 0] = s + 0.0  # +0.0 for a zero sum, as the expansion's empty sum
            for c in range(1, out_parts.shape[1]):
                out_parts[i, c] = 0.0
            continue
        n = 0
        for p in range(offsets[i], offsets[i + 1]):
            x = values[p]
            if x - x != 0.0:
                if x != x:
                    out_nonfinite[i, NAN] += 1
                elif x > 0:
                    out_nonfinite[i, POSINF] += 1
                else:
                    out_nonfinite[i, NEGINF] += 1
                continue
            n = add_term(partials, n, scratch, x)
            if n < 0:
                status[0] = -n
                status[1] = i
                return
        m = canonical(partials, n, out_parts[i])
        if m < 0:
            status[0] = -m
            status[1] = i
            return


# -- float sums ------------------------------------------------------------------------------------------


@dataclass
class FloatSums:
    """Exact float sums of ``len(self)`` cells: ``parts`` (n, K) canonical components (``parts[:, 0]``
    is the rounded sum) and ``nonfinite`` (n, 3) signed counts of +inf, -inf and NaN terms."""

    parts: np.ndarray
    nonfinite: np.ndarray

    def __len__(self) -> int:
        return len(self.parts)

    @classmethod
    def zeros(cls, n: int) -> FloatSums:
        return cls(np.zeros((n, K), np.float64), np.zeros((n, NONFINITE), np.int64))

    @classmethod
    def of_lists(cls, values: np.ndarray, offsets: np.ndarray) -> FloatSums:
        """The exact sum of each list ``values[offsets[i]:offsets[i + 1]]`` (terms may be non-finite)."""
        offsets = np.asarray(offsets, dtype=np.int64)
        out = cls.zeros(max(len(offsets) - 1, 0))
        status = np.zeros(3, np.int64)
        _sum_lists(np.ascontiguousarray(values, dtype=np.float64), offsets, out.parts, out.nonfinite, status)
        _raise(status)
        return out

    @classmethod
    def of_values(cls, values: np.ndarray) -> FloatSums:
        """One sum per value (each value a sum of one term)."""
        values = np.asarray(values, dtype=np.float64)
        return cls.of_lists(values, np.arange(len(values) + 1, dtype=np.int64))

    @classmethod
    def concat(cls, sums: list[FloatSums]) -> FloatSums:
        if not sums:
            return cls.zeros(0)
        return cls(np.concatenate([s.parts for s in sums]), np.concatenate([s.nonfinite for s in sums]))

    def take(self, index: np.ndarray) -> FloatSums:
        return FloatSums(self.parts[index], self.nonfinite[index])

    def combine(self, group: np.ndarray, n_groups: int, signs: np.ndarray | None = None) -> FloatSums:
        """Per group ``g`` in ``range(n_groups)``, the exact sum of the rows with ``group == g`` (each
        row's sum multiplied by its sign, +1 or -1). Raises :class:`ExactSumError` naming the group."""
        group = np.asarray(group, dtype=np.int64)
        signs = np.ones(len(group), np.int64) if signs is None else np.asarray(signs, dtype=np.int64)
        out = FloatSums.zeros(n_groups)
        if len(group) == 0:
            return out
        order = np.argsort(group, kind="stable")
        ordered = group[order]
        starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
        groups = ordered[starts]
        bounds = np.append(starts, len(ordered)).astype(np.int64)
        parts = np.zeros((len(groups), K), np.float64)
        nonfinite = np.zeros((len(groups), NONFINITE), np.int64)
        status = np.zeros(3, np.int64)
        _combine_float(
            np.ascontiguousarray(self.parts), np.ascontiguousarray(self.nonfinite), signs, order.astype(np.int64),
            groups, bounds, parts, nonfinite, status,
        )  # fmt: skip
        _raise(status)
        out.parts[groups] = parts
        out.nonfinite[groups] = nonfinite
        return out

    def values(self) -> np.ndarray:
        """The correctly rounded sums (``math.fsum`` of the terms), non-finite terms as in ``np.sum``:
        NaN with a NaN or with both infinities, else +-inf with an infinity."""
        result = self.parts[:, 0].copy()
        posinf = self.nonfinite[:, POSINF] > 0
        neginf = self.nonfinite[:, NEGINF] > 0
        result[posinf] = np.inf
        result[neginf] = -np.inf
        result[(self.nonfinite[:, NAN] > 0) | (posinf & neginf)] = np.nan
        return result


# -- integer sums -------------------------------------------------------------------------------------


@numba.njit(cache=True, inline="always")
def add_int(high, low, value, negate):
    """``(high, low) + value`` (or ``- value``) in 128-bit two's complement; ``low`` is uint64."""
    v_low = np.uint64(value)
    v_high = np.int64(-1) if value < 0 else np.int64(0)
    if negate:
        v_low = ~v_low + np.uint64(1)
        v_high = ~v_high + (np.int64(1) if v_low == np.uint64(0) else np.int64(0))
    total = low + v_low
    carry = np.int64(1) if total < low else np.int64(0)
    return high + v_high + carry, total


@numba.njit(cache=True, inline="always")
def add_int128(high, low, other_high, other_low, negate):
    """``(high, low) + (other_high, other_low)`` (or minus it) in 128-bit two's complement."""
    if negate:
        other_low = ~other_low + np.uint64(1)
        other_high = ~other_high + (np.int64(1) if other_low == np.uint64(0) else np.int64(0))
    total = low + other_low
    carry = np.int64(1) if total < low else np.int64(0)
    return high + other_high + carry, total


@numba.njit(cache=True)
def _combine_int(high, low, signs, group, out_high, out_low):
    for row in range(group.size):
        g = group[row]
        out_high[g], out_low[g] = add_int128(out_high[g], out_low[g], high[row], low[row], signs[row] < 0)


@numba.njit(cache=True)
def _int_to_float(high, low, out):
    """The int128 values rounded to the nearest float64 (four exact 32-bit limbs, summed exactly)."""
    partials = np.empty(8, dtype=np.float64)
    two32 = 4294967296.0
    mask = np.uint64(0xFFFFFFFF)
    for i in range(high.size):
        h = high[i]
        limbs = (
            np.float64(h >> 32) * two32 * two32 * two32,
            np.float64(np.uint64(h) & mask) * two32 * two32,
            np.float64(low[i] >> np.uint64(32)) * two32,
            np.float64(low[i] & mask),
        )
        n = 0
        for x in limbs:
            n = grow(partials, n, x)
        out[i] = rounded(partials, n)


@dataclass
class IntSums:
    """Exact integer sums as 128-bit integers: ``high`` int64 words and ``low`` uint64 words."""

    high: np.ndarray
    low: np.ndarray

    def __len__(self) -> int:
        return len(self.high)

    @classmethod
    def zeros(cls, n: int) -> IntSums:
        return cls(np.zeros(n, np.int64), np.zeros(n, np.uint64))

    @classmethod
    def of_values(cls, values: np.ndarray) -> IntSums:
        values = np.asarray(values, dtype=np.int64)
        return cls(np.where(values < 0, -1, 0).astype(np.int64), values.view(np.uint64).copy())

    @classmethod
    def from_words(cls, high: np.ndarray, low_bits: np.ndarray) -> IntSums:
        """From stored words (the low word as int64 bits)."""
        return cls(np.asarray(high, dtype=np.int64), np.asarray(low_bits, dtype=np.int64).view(np.uint64))

    @classmethod
    def shifted(cls, high: np.ndarray, low: np.ndarray) -> IntSums:
        """``high * 2**32 + low`` exactly, for int64 arrays of any shape with ``0 <= low < 2**63``."""
        high = np.asarray(high, dtype=np.int64)
        shifted = high.view(np.uint64) << np.uint64(32)
        total = shifted + np.asarray(low, dtype=np.int64).view(np.uint64)
        carry = (total < shifted).astype(np.int64)
        return cls((high >> 32) + carry, total)

    @classmethod
    def concat(cls, sums: list[IntSums]) -> IntSums:
        if not sums:
            return cls.zeros(0)
        return cls(np.concatenate([s.high for s in sums]), np.concatenate([s.low for s in sums]))

    def take(self, index: np.ndarray) -> IntSums:
        return IntSums(self.high[index], self.low[index])

    @property
    def low_bits(self) -> np.ndarray:
        """The low words as int64 bits (the sum itself wherever it fits int64)."""
        return self.low.view(np.int64)

    def combine(self, group: np.ndarray, n_groups: int, signs: np.ndarray | None = None) -> IntSums:
        """Per group, the exact signed sum of its rows."""
        group = np.asarray(group, dtype=np.int64)
        signs = np.ones(len(group), np.int64) if signs is None else np.asarray(signs, dtype=np.int64)
        out = IntSums.zeros(n_groups)
        _combine_int(self.high, self.low, signs, group, out.high, out.low)
        return out

    def fits(self) -> np.ndarray:
        """Where the sum fits int64 (the high word is the sign extension of the low one)."""
        return self.high == (self.low_bits >> 63)

    def values(self) -> np.ndarray:
        """The sums as int64; the caller checks :meth:`fits` first."""
        return self.low_bits.copy()

    def to_float(self) -> np.ndarray:
        """The sums rounded to the nearest float64."""
        out = np.empty(len(self), np.float64)
        _int_to_float(self.high, self.low, out)
        return out

    def to_python(self, index: int) -> int:
        """One sum (by flat index) as a Python integer (for error messages)."""
        return (int(self.high.ravel()[index]) << 64) + int(self.low.ravel()[index])


__all__ = [
    "K",
    "ExactSumError",
    "FloatSums",
    "IntSums",
    "SumOverflow",
    "add_int",
    "add_term",
    "canonical",
    "compress",
    "grow",
    "rounded",
]
