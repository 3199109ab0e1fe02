"""Window aggregates over one dense d-dimensional block (a chunk plus its halo): numpy + numba.

Semantics (SciDB ``window`` and Li & Onizuka's recursive incremental computation): for a cell ``x`` the
window is the box ``[x_k - before_k, x_k + after_k]`` in every dimension ``k``; only non-empty cells of
the box count (an empty cell is absent, not zero). :func:`window_block` computes the aggregates for the
*core* of a block, the cells whose whole window lies inside the block: ``core_k = shape_k - before_k -
after_k``, and core cell ``i`` is block cell ``i + before``. The caller pads the block with empty cells
where it reaches past the array bounds, so that windows are cut at the bounds (see
:func:`window_array`, which does exactly that for a whole in-memory array).

Aggregates: count, sum, avg, min, max, var, stdev. ``var`` is the sample variance (divisor n - 1) and
``stdev`` its square root. Result dtypes: count int64; sum int64 for integer and bool input (exact:
where a window may leave int64 the sums are taken in 128 bits, and a sum of a wanted cell that does
not fit int64 raises :class:`~arrayviews.kernels.exact_sum.SumOverflow`; avg is then computed from
the exact sum) and float64 for float input; avg, var and stdev float64; min and max keep
the input dtype. Null rules (the same as :func:`arrayviews.kernels.aggregates.finalize`): sum, avg, min
and max are null where the window holds no counted cell, var and stdev where it holds fewer than two;
count is never null. Null positions hold 0 (False for bool) in the value array; the null mask is None
when nothing is null. NaN and infinities are ordinary values and propagate as in numpy (``np.sum``,
``np.min``, ``np.var``): a window with a NaN has sum, avg, min, max, var NaN; ``inf`` and ``-inf``
together give a NaN sum; any non-finite value gives a NaN var.

Null values: the optional ``valid`` mask marks non-null values; a null value does not count in any
aggregate, count included -- it is treated exactly like an empty cell. (``count(*)``, which counts
cells whatever their values, is obtained by passing ``valid=None``.)

Methods, all giving the same results (up to float rounding):

``naive``
    every window scanned on its own, O(N * W) (like SciDB's built-in ``window``); with ``targets``
    only the wanted windows are scanned (SciDB skips empty cells);
``basic``
    incremental along the last dimension only (one 1-D pass along every line), the line aggregates
    then combined naively over the other dimensions, O(N * W / w_last);
``incremental`` (default)
    the recursive incremental computation: one separable 1-D pass per dimension, each pass turning
    the window aggregates of one dimension fewer into those of one more, O(d * N), independent of the
    window size.

The 1-D pass: integer sums (counts, int64 sums) are running sums (exact). Float sums and min/max use
the van Herk / Gil-Werman block decomposition: the line is cut into blocks of the window length, and a
window is a suffix of one block joined with a prefix of the next, so every cell costs two additions or
three comparisons whatever the window length, and (unlike running sums, which subtract) a huge value
leaves no rounding residue in the windows after it (windows of one or two cells are added directly).
Exact or loud: when the block holds values of both signs, the window sums of their magnitudes bound
each sum's rounding error, and a window whose bound exceeds :data:`CANCELLATION_TOLERANCE` (2**-36)
of its sum -- its terms cancel -- is summed again exactly, giving ``math.fsum`` of its cells; one
whose exact sum needs more components than kept raises. min is a max over the negated (float) or
bit-inverted (integer) data: both exact.

Numerical care for var/stdev: values are shifted by a per-block reference (the median of a sample of
the counted finite values, rounded for integers) before the sums and sums of squares are accumulated
in float64, and var is ``(S2 - S1**2 / n) / (n - 1)`` from the shifted sums, clamped at 0. The error
of var is about ``1e-16 * W * (var + (local mean - reference) ** 2)``: data around 1e8 with spread 1
keeps ~1e-14 relative, integer data with a moderate range is exact (constant windows give exactly 0);
only windows whose values are nearly constant *and* far from the block's median lose digits.
sum and avg are always computed from the unshifted values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numba
import numpy as np

from arrayviews.kernels.exact_divide import int_quotient, wide_quotient
from arrayviews.kernels.exact_sum import ExactSumError, FloatSums, IntSums, SumOverflow
from arrayviews.kernels.window_runs import block_sum, gather_max, gather_sum, run_max, run_sum
from arrayviews.model.aggregate_calls import canonical_function

METHODS: tuple[str, ...] = ("naive", "basic", "incremental")
FUNCTIONS: tuple[str, ...] = ("count", "sum", "avg", "min", "max", "var", "stdev")
_INT64_MIN = np.iinfo(np.int64).min
_SAMPLE = 1 << 16

Result = dict[str, tuple[np.ndarray, np.ndarray | None]]


def _as3(array: np.ndarray, axis: int) -> np.ndarray:
    shape = array.shape
    outer = math.prod(shape[:axis])
    inner = math.prod(shape[axis + 1 :])
    return array.reshape(outer, shape[axis], inner)


def _slide(array: np.ndarray, axis: int, width: int, kind: str, out_dtype=None) -> np.ndarray:
    """One incremental pass: the sliding sum (``kind`` "sum") or max of length ``width`` along ``axis``."""
    array = np.ascontiguousarray(array)
    shape = list(array.shape)
    shape[axis] -= width - 1
    if kind == "sum":
        out = np.empty(shape, dtype=out_dtype or array.dtype)
        if not out.size:  # no complete window along this axis: nothing to compute
            return out
        if out.dtype.kind == "f":
            # float sums never subtract (a running sum would leave the rounding residue of a large
            # value in every later window): blocks for long windows, direct adds for short ones
            if array.dtype != out.dtype:
                array = array.astype(out.dtype)
            if width > 2:
                scratch = np.empty(math.prod(shape[axis + 1 :]), dtype=out.dtype)
                block_sum(_as3(array, axis), width, _as3(out, axis), scratch)
            elif width == 2:
                lines = _as3(array, axis)
                np.add(lines[:, :-1, :], lines[:, 1:, :], out=_as3(out, axis))
            else:
                out[...] = array
        else:
            run_sum(_as3(array, axis), width, _as3(out, axis))
    else:
        out = np.empty(shape, dtype=array.dtype)
        if out.size:
            scratch = np.empty(math.prod(shape[axis + 1 :]), dtype=array.dtype)
            run_max(_as3(array, axis), width, _as3(out, axis), scratch)
    return out


def _incremental(array: np.ndarray, widths: Sequence[int], kind: str, out_dtype=None) -> np.ndarray:
    """All passes, the last dimension first (contiguous lines), skipping windows of length 1."""
    for axis in reversed(range(array.ndim)):
        if widths[axis] > 1 or out_dtype is not None:
            array = _slide(array, axis, widths[axis], kind, out_dtype)
            out_dtype = None
    return array


def _gather_plan(
    shape: Sequence[int], core: Sequence[int], widths: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """For a C-ordered array of ``shape``: the flat index of the window start of every core cell, and
    the flat offsets of the window lines (every combination over the dimensions but the last)."""
    ndim = len(shape)
    strides = [math.prod(shape[k + 1 :]) for k in range(ndim)]
    bases = np.zeros((1,) * ndim, dtype=np.int64)
    for k in range(ndim):
        view = [1] * ndim
        view[k] = core[k]
        bases = bases + (np.arange(core[k], dtype=np.int64) * strides[k]).reshape(view)
    offsets = np.zeros((1,) * ndim, dtype=np.int64)
    for k in range(ndim - 1):
        view = [1] * ndim
        view[k] = widths[k]
        offsets = offsets + (np.arange(widths[k], dtype=np.int64) * strides[k]).reshape(view)
    return np.broadcast_to(bases, tuple(core)).ravel(), offsets.ravel()


class _Reducer:
    """Reduces per-cell states over every window with one of the three methods.

    ``targets`` (flat bool over the core, or None for all): naive and basic compute the windows of
    these core cells only and leave 0 elsewhere; incremental computes every window anyway.
    """

    def __init__(self, shape: tuple[int, ...], widths: tuple[int, ...], method: str, targets=None):
        self.shape = shape
        self.widths = widths
        self.method = method
        self.core = tuple(s - w + 1 for s, w in zip(shape, widths, strict=True))
        self.targets = targets
        self._plan: tuple[np.ndarray, np.ndarray] | None = None

    def _line_pass(self, states: list[np.ndarray], kind: str, out_dtype=None):
        """basic: the incremental pass along the last dimension; naive: nothing. Also returns the
        shape of the line states and the run length of a window line in them."""
        if self.method == "basic":
            axis = len(self.shape) - 1
            states = [_slide(s, axis, self.widths[axis], kind, out_dtype) for s in states]
            return states, self.shape[:-1] + (self.core[-1],), 1
        return states, self.shape, self.widths[-1]

    def _bases(self, shape) -> tuple[np.ndarray, np.ndarray]:
        if self._plan is None:
            bases, offsets = _gather_plan(shape, self.core, self.widths)
            if self.targets is not None:
                bases = bases[self.targets]
            self._plan = bases, offsets
        return self._plan

    def _scatter(self, out: np.ndarray) -> np.ndarray:
        if self.targets is None:
            return out.reshape(self.core + out.shape[1:])
        full = np.zeros((self.targets.size,) + out.shape[1:], dtype=out.dtype)
        full[self.targets] = out
        return full.reshape(self.core + out.shape[1:])

    def sums(self, states: list[np.ndarray], out_dtype) -> list[np.ndarray]:
        """Window sums of every state (all accumulated in ``out_dtype``: int64 or float64)."""
        if not states:
            return []
        if self.method == "incremental":
            return [_incremental(s, self.widths, "sum", out_dtype) for s in states]
        lines, shape, run = self._line_pass(states, "sum", out_dtype)
        stack = np.empty((math.prod(shape), len(lines)), dtype=out_dtype)
        for index, line in enumerate(lines):
            stack[:, index] = line.ravel()
        bases, offsets = self._bases(shape)
        out = np.zeros((bases.size, len(lines)), dtype=out_dtype)
        if out.size:
            gather_sum(stack, bases, offsets, run, out)
        full = self._scatter(out)
        return [np.ascontiguousarray(full[..., index]) for index in range(len(lines))]

    def maximum(self, state: np.ndarray) -> np.ndarray:
        """Window max (NaN propagating) of one int64 or float64 state."""
        if self.method == "incremental":
            return _incremental(state, self.widths, "max")
        (line,), shape, run = self._line_pass([state], "max")
        bases, offsets = self._bases(shape)
        out = np.zeros(bases.size, dtype=state.dtype)
        if out.size:
            gather_max(np.ascontiguousarray(line).ravel(), bases, offsets, run, out)
        return self._scatter(out)


# -- the public kernel ------------------------------------------------------------------------------


def _functions(functions: Sequence[str] | str) -> list[str]:
    if isinstance(functions, str):
        functions = [functions]
    result: list[str] = []
    for function in functions:
        name = canonical_function(function)
        if name not in result:
            result.append(name)
    if not result:
        raise ValueError("no aggregate function given")
    return result


def _window_lengths(ndim: int, before: Sequence[int], after: Sequence[int]) -> tuple[tuple, tuple]:
    before = tuple(int(b) for b in before)
    after = tuple(int(a) for a in after)
    if len(before) != ndim or len(after) != ndim:
        raise ValueError(f"need before and after for each of the {ndim} dimensions")
    if any(b < 0 for b in before) or any(a < 0 for a in after):
        raise ValueError("window extents must be >= 0")
    return before, after


def _shift_of(values: np.ndarray, mask: np.ndarray | None) -> float:
    """A reference value near the data: the median of a sample of the counted finite values (rounded
    for integer data); the median, unlike the mean, is not dragged away from the bulk by outliers."""
    flat = values.ravel()
    flat_mask = None if mask is None else mask.ravel()
    for step in (max(1, flat.size // _SAMPLE), 1):
        sample = flat[::step].astype(np.float64)
        keep = np.isfinite(sample)
        if flat_mask is not None:
            keep &= flat_mask[::step]
        if keep.any():
            middle = float(np.median(sample[keep]))
            # an integer shift keeps integer data exact in the shifted sums (constant windows give 0)
            return middle if values.dtype.kind == "f" else float(round(middle))
    return 0.0


def window_block(
    values: np.ndarray | None,
    present: np.ndarray | None,
    before: Sequence[int],
    after: Sequence[int],
    functions: Sequence[str] | str,
    method: str = "incremental",
    valid: np.ndarray | None = None,
    targets: np.ndarray | None = None,
) -> Result:
    """Window aggregates for the core of a dense block (see the module docstring for the semantics).

    ``values``: the block (1 to 5 dimensions -- any number works -- of bool, int or float), None for
    count only (the shape is then ``present``'s). ``present``: bool mask of the non-empty cells (None:
    all). ``valid``: bool mask of the non-null values (None: all); null values count as empty cells.
    ``targets``: optional bool mask of the *core* shape, the cells whose results are wanted (typically
    ``present`` at the core); ``naive`` and ``basic`` then scan only those windows, as SciDB skips empty
    cells, and report the others as empty windows (count 0, null); ``incremental`` computes them all.
    An integer sum beyond int64 raises only at wanted cells (all cells when ``targets`` is None).
    Returns, per canonical function name, ``(result, null mask or None)`` with the core shape
    ``shape - before - after``.
    """
    if method not in METHODS:
        raise ValueError(f"unknown window method {method!r}; use one of {', '.join(METHODS)}")
    names = _functions(functions)
    if values is None:
        if present is None or any(name != "count" for name in names):
            raise ValueError("values are needed for aggregates other than count (and present for count)")
        values = np.zeros(np.shape(present), dtype=np.bool_)
    values = np.asarray(values)
    if values.ndim < 1:
        raise ValueError("values must have at least one dimension")
    if values.dtype.kind == "M" and all(name == "count" for name in names):
        values = np.zeros(values.shape, dtype=np.bool_)  # instants are counted, never summed
    if values.dtype.kind not in "biuf":
        raise TypeError(f"cannot aggregate values of dtype {values.dtype}")
    before, after = _window_lengths(values.ndim, before, after)
    widths = tuple(b + a + 1 for b, a in zip(before, after, strict=True))
    core = tuple(s - w + 1 for s, w in zip(values.shape, widths, strict=True))
    if any(c < 0 for c in core):
        raise ValueError(f"block {values.shape} is smaller than its windows (before {before}, after {after})")
    mask = _combined_mask(values.shape, present, valid)
    flat_targets = None
    if targets is not None and method != "incremental":
        flat_targets = np.asarray(targets, dtype=np.bool_)
        if flat_targets.shape != core:
            raise ValueError(f"targets shape {flat_targets.shape} differs from the core shape {core}")
        flat_targets = None if flat_targets.all() else flat_targets.ravel()
        if flat_targets is not None and mask is None:
            mask = np.ones(values.shape, dtype=np.bool_)  # counts differ between targets and the rest
    checked = None
    if targets is not None:
        checked = np.asarray(targets, dtype=np.bool_)
        if checked.shape != core:
            raise ValueError(f"targets shape {checked.shape} differs from the core shape {core}")
    reducer = _Reducer(values.shape, widths, method, flat_targets)
    return _compute(values, mask, reducer, names, checked)


def _combined_mask(shape, present, valid) -> np.ndarray | None:
    mask = None
    for part in (present, valid):
        if part is None:
            continue
        part = np.asarray(part, dtype=np.bool_)
        if part.shape != tuple(shape):
            raise ValueError(f"mask shape {part.shape} differs from the values shape {tuple(shape)}")
        mask = part if mask is None else mask & part
    if mask is not None and mask.all():
        return None
    return None if mask is None else np.ascontiguousarray(mask)


@numba.njit(cache=True)
def _nonfinite_kinds(values, mask, has_mask):
    """Which non-finite values occur among the counted cells: (any NaN, any +inf, any -inf)."""
    nan = posinf = neginf = False
    for index in range(values.size):
        v = values[index]
        if v - v != 0.0 and (not has_mask or mask[index]):
            if v != v:
                nan = True
            elif v > 0:
                posinf = True
            else:
                neginf = True
    return nan, posinf, neginf


def _compute(
    values: np.ndarray, mask: np.ndarray | None, reducer: _Reducer, names: list[str], checked=None
) -> Result:
    dtype = values.dtype
    is_float = dtype.kind == "f"
    if is_float and dtype != np.float64:
        values = values.astype(np.float64)
    values = np.ascontiguousarray(values)
    core = reducer.core
    wanted = set(names)
    moments = bool(wanted & {"var", "stdev"})
    sums = bool(wanted & {"sum", "avg"})

    # count: a plain int when every cell counts
    count: np.ndarray | int
    if mask is None:
        count = math.prod(reducer.widths)
    else:
        (count,) = reducer.sums([mask], np.int64)

    # non-finite values are left out of the running sums and counted apart (float sums and moments)
    bad: dict[str, np.ndarray] = {}
    keep = mask
    if is_float and (sums or moments):
        flat_mask = mask.ravel() if mask is not None else np.zeros(1, dtype=np.bool_)
        found = _nonfinite_kinds(values.ravel(), flat_mask, mask is not None)
        if any(found):
            finite = np.isfinite(values)
            keep = finite if mask is None else finite & mask
            tests = {"nan": np.isnan, "posinf": np.isposinf, "neginf": np.isneginf}
            kinds = [name for name, hit in zip(tests, found, strict=True) if hit]
            parts = [tests[name](values) if mask is None else tests[name](values) & mask for name in kinds]
            bad = dict(zip(kinds, reducer.sums(parts, np.int64), strict=True))

    total = first_moment = second_moment = None
    shift = 0.0
    if moments:
        shift = _shift_of(values, keep)
        shifted = np.subtract(values, shift, dtype=np.float64)
        if keep is not None:
            shifted[~keep] = 0.0
        first_moment, second_moment = reducer.sums([shifted, shifted * shifted], np.float64)
        del shifted
    if sums:
        if not is_float:
            source = values.astype(np.int64)
            if keep is not None:
                source[~keep] = 0
            total = _integer_sums(source, reducer)
        else:
            source = values if keep is None else np.where(keep, values, 0.0)
            with np.errstate(over="ignore", invalid="ignore"):  # overflows are found just below
                if source.size and source.min() < 0.0 < source.max():  # terms of both signs may cancel
                    total, magnitude = reducer.sums([source, np.abs(source)], np.float64)
                    total = _exact_where_cancelled(total, magnitude, source, reducer)
                else:
                    (total,) = reducer.sums([source], np.float64)
                    if not np.isfinite(total).all():  # finite terms whose float sum overflowed
                        total = _exact_where_cancelled(total, np.abs(total), source, reducer)

    results: Result = {}
    for name in names:
        if name == "count":
            result = count if isinstance(count, np.ndarray) else np.full(core, count, dtype=np.int64)
            results[name] = (result, None)
        elif name in ("sum", "avg"):
            results[name] = _finish_sum(name, total, count, is_float, bad, checked)
        elif name in ("var", "stdev"):
            results[name] = _finish_var(name, first_moment, second_moment, count, bad)
        else:
            results[name] = _extreme(name, values, dtype, mask, reducer, count)
    return results


def _null(result: np.ndarray, count: np.ndarray | int, least: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Null where ``count < least``; null positions hold 0."""
    if isinstance(count, np.ndarray):
        null = count < least
        if not null.any():
            return result, None
    elif count >= least:
        return result, None
    else:
        null = np.ones(result.shape, dtype=np.bool_)
    result[null] = 0
    return result, null


def _nonfinite_sum(result: np.ndarray, bad: dict[str, np.ndarray]) -> None:
    """Where non-finite values were left out of a float sum, put the value numpy's sum would give."""
    posinf, neginf, nan = bad.get("posinf"), bad.get("neginf"), bad.get("nan")
    if posinf is not None:
        result[posinf > 0] = np.inf
    if neginf is not None:
        negative = neginf > 0
        if posinf is not None:
            result[negative & (posinf > 0)] = np.nan
            negative &= posinf == 0
        result[negative] = -np.inf
    if nan is not None:
        result[nan > 0] = np.nan


#: Largest relative error a float window sum may carry; windows whose error bound exceeds it (their
#: terms cancel) are summed again exactly.
CANCELLATION_TOLERANCE = 2.0**-36
#: Terms gathered at once for the exact sums of cancelling windows.
_EXACT_BATCH_TERMS = 1 << 22


def _exact_where_cancelled(
    total: np.ndarray, magnitude: np.ndarray, source: np.ndarray, reducer: _Reducer
) -> np.ndarray:
    """Exact or loud float window sums. Every window sum here is a tree of float additions over the
    window's terms; no term passes through more than ``depth`` of them (incremental: one block
    prefix/suffix chain and a join per dimension, ``sum(widths) + ndim``; basic: that along the last
    dimension, then a scan of the others; naive: a scan of the window), so the sum's error is at most
    ``depth * 2**-53 * sum(|terms|)``
    (``magnitude``; Higham, Accuracy and Stability of Numerical Algorithms, eq. 4.4). Where that bound
    exceeds :data:`CANCELLATION_TOLERANCE` of the sum, the terms cancel: those windows are summed
    again exactly (floating-point expansions, kernels/exact_sum.py) and get the correctly rounded
    sum, as ``math.fsum``; so are those whose float sum overflowed. Raises :class:`ExactSumError`
    (``index``: the flat core cell) when an exact sum needs more components than kept or leaves the
    float64 range."""
    widths = reducer.widths
    if reducer.method == "incremental":
        depth = sum(widths) + len(widths)
    elif reducer.method == "basic":
        depth = widths[-1] + 1 + math.prod(widths[:-1])
    else:
        depth = math.prod(widths)
    total = np.ascontiguousarray(total)
    bound = magnitude * (depth * 2.0**-53 * (1 + 2.0**-20))
    # the terms are finite: a non-finite float sum overflowed, and its exact sum decides
    suspect = (bound > CANCELLATION_TOLERANCE * np.abs(total)) | ~np.isfinite(total)
    cancelled = np.flatnonzero(suspect.ravel())
    if cancelled.size == 0:
        return total
    core = total.shape
    offsets = np.ravel_multi_index(np.indices(widths).reshape(len(widths), -1), source.shape)
    starts = np.ravel_multi_index(np.unravel_index(cancelled, core), source.shape)
    flat_source, flat_total = source.ravel(), total.reshape(-1)
    cells = len(offsets)
    step = max(1, _EXACT_BATCH_TERMS // cells)
    for first in range(0, len(cancelled), step):
        chosen = starts[first : first + step]
        terms = flat_source[(chosen[:, None] + offsets[None, :]).ravel()]
        try:
            sums = FloatSums.of_lists(terms, np.arange(0, terms.size + 1, cells, dtype=np.int64))
        except ExactSumError as error:
            raise ExactSumError(error.code, int(cancelled[first + error.index])) from None
        flat_total[cancelled[first : first + step]] = sums.values()
    return total


def _integer_sums(source: np.ndarray, reducer: _Reducer) -> np.ndarray | IntSums:
    """Window sums of int64 values: plain int64 sums when no window can leave int64 (largest
    magnitude times window cells below 2**63), else exact 128-bit sums from the window sums of the
    values' high and low 32-bit halves (each below 2**63 for windows under 2**31 cells)."""
    cells = math.prod(reducer.widths)
    largest = max(int(source.max()), -int(source.min())) if source.size else 0
    if largest * cells < 2**63:
        (total,) = reducer.sums([source], np.int64)
        return total
    if cells >= 2**31:
        raise ValueError(f"exact integer window sums need windows under 2**31 cells, got {cells}")
    high, low = reducer.sums([source >> 32, source & 0xFFFFFFFF], np.int64)
    return IntSums.shifted(high, low)


def _finish_sum(name, total, count, is_float, bad, checked=None):
    wide = isinstance(total, IntSums)
    if wide:
        exact, total = total, total.values()
        outside = ~exact.fits() & (count > 0)
        if checked is not None:
            outside &= checked
        if name == "sum" and outside.any():
            index = np.unravel_index(int(np.flatnonzero(outside.ravel())[0]), outside.shape)
            raise SumOverflow(
                tuple(int(i) for i in index), exact.to_python(int(np.ravel_multi_index(index, outside.shape)))
            )
    with np.errstate(invalid="ignore", divide="ignore"):
        if not is_float:
            if name == "sum":
                result = total.copy()
            else:
                # correctly rounded, as aggregate and regrid give it (q + r / n rounded twice)
                safe = np.maximum(count, 1)
                result = int_quotient(total, safe)
                if wide and not exact.fits().all():
                    beyond = ~exact.fits()
                    result[beyond] = wide_quotient(
                        exact.high[beyond], exact.low[beyond], np.broadcast_to(safe, beyond.shape)[beyond]
                    )
        else:
            result = total.copy() if name == "sum" else total / count
    if is_float and bad:
        _nonfinite_sum(result, bad)
    return _null(result, count, 1)


def _finish_var(name, first_moment, second_moment, count, bad):
    with np.errstate(invalid="ignore", divide="ignore"):
        result = first_moment * first_moment
        result /= count
        np.subtract(second_moment, result, out=result)
        result /= np.subtract(count, 1, dtype=np.float64)
    np.maximum(result, 0.0, out=result)
    for part in bad.values():
        result[part > 0] = np.nan
    if name == "stdev":
        np.sqrt(result, out=result)
    return _null(result, count, 2)


def _extreme(name, values, dtype, mask, reducer, count):
    """min or max: the window max of the data (min: of the negated / bit-inverted data)."""
    if values.dtype.kind == "f":
        if name == "min":
            work = np.negative(values)
        elif mask is not None:
            work = values.copy()
        else:
            work = values
        if mask is not None:
            work[~mask] = -np.inf
    else:
        work = values.astype(np.int64)
        if name == "min":
            np.invert(work, out=work)
        if mask is not None:
            work[~mask] = _INT64_MIN
    best = reducer.maximum(work)
    if best is values:
        best = best.copy()
    if name == "min":
        if values.dtype.kind == "f":
            np.negative(best, out=best)
        else:
            np.invert(best, out=best)
    return _null(best.astype(dtype, copy=False), count, 1)


def window_array(
    values: np.ndarray | None,
    present: np.ndarray | None,
    before: Sequence[int],
    after: Sequence[int],
    functions: Sequence[str] | str,
    method: str = "incremental",
    valid: np.ndarray | None = None,
) -> Result:
    """Window aggregates for every cell of a whole in-memory array, windows cut at its bounds.

    The array is padded with ``before``/``after`` empty cells and handed to :func:`window_block`, so
    the results have the shape of ``values``.
    """
    reference = values if values is not None else present
    if reference is None:
        raise ValueError("values or present is needed")
    shape = np.shape(reference)
    before, after = _window_lengths(len(shape), before, after)
    pad = list(zip(before, after, strict=True))
    inside = np.ones(shape, dtype=np.bool_) if present is None else np.asarray(present, dtype=np.bool_)
    padded_present = np.pad(inside, pad, constant_values=False)
    padded_values = None if values is None else np.pad(np.asarray(values), pad)
    padded_valid = None if valid is None else np.pad(np.asarray(valid, dtype=np.bool_), pad)
    return window_block(padded_values, padded_present, before, after, functions, method, padded_valid)
