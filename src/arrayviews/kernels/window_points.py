"""Window aggregates over sparse points (for chunks far too sparse for a dense block): numpy + numba.

For every query cell ``q`` the window is the box ``[q - before, q + after]``; the points ``(coords,
values)`` inside it are aggregated with the semantics, result dtypes and null rules of
:mod:`arrayviews.kernels.window` (count, sum, avg, min, max, var, stdev; NaN and infinities
propagate as in numpy; null values -- ``valid`` False -- are left out like empty cells).

Method: grid hashing. The points are bucketed on a grid whose cells are exactly one window large
(``before + after + 1`` per dimension), so a window overlaps at most two buckets per dimension; the
points are sorted by bucket key, and each query looks up its (at most ``2**d``) buckets by binary
search and scans their points. Cost O((n + m * 2**d) log n + points scanned), where the points scanned
are at most the points of ``2**d`` windows around each query. The bucket key is the mixed-radix number
of the bucket coordinates; if the grid is too large for int64 the key wraps, which costs only extra
scanning (every point is checked against the box and each key is scanned once per query).

var/stdev use a per-window shift (the first finite value met in the window), so they are accurate for
data far from zero (1e8 with spread 1 keeps ~1e-12 relative error); sums of integers are exact: in int64
when no window can leave it, else in 128 bits, and a sum that does not fit int64 raises
:class:`~arrayviews.kernels.exact_sum.SumOverflow` (its index is the query's).
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

from arrayviews.kernels.exact_divide import int_quotient, wide_quotient
from arrayviews.kernels.exact_sum import ExactSumError, FloatSums, IntSums, SumOverflow, add_int
from arrayviews.kernels.window import CANCELLATION_TOLERANCE, _functions, _window_lengths

Result = dict[str, tuple[np.ndarray, np.ndarray | None]]

# output columns of the float statistics computed by the numba kernel
_COUNT, _SUM, _VAR, _BAD = 0, 1, 2, 3


@numba.njit(cache=True, inline="always")
def _max(a, b):
    return a if (a > b) | (a != a) else b


@numba.njit(cache=True, inline="always")
def _min(a, b):
    return a if (a < b) | (a != a) else b


@numba.njit(cache=True)
def _query_kernel(
    coords,
    values,
    keys,
    starts,
    unique,
    queries,
    low,
    high,
    bucket,
    origin,
    radix,
    sums,
    wide,
    stats,
    total,
    total_high,
    smallest,
    largest,
):
    """Aggregate the points of every query box ``[queries + low, queries + high]``.

    ``coords``/``values`` are sorted by bucket key; ``unique[b]`` is the b-th distinct key and its
    points are ``starts[b]:starts[b + 1]``. Outputs (length m): ``stats[q, :]`` = count, float sum,
    variance of the finite values, non-finite count; ``total`` (int64 or float64 sum),
    ``smallest``/``largest`` (min and max; untouched where the window is empty). With ``wide``,
    integer sums are exact 128-bit integers: ``total_high`` the high words, ``total`` the low words.
    """
    m, d = queries.shape
    lo = np.empty(d, dtype=np.int64)
    span = np.empty(d, dtype=np.int64)
    pick = np.empty(d, dtype=np.int64)
    seen = np.empty(1 << d, dtype=np.int64)
    for q in range(m):
        empty = False
        for k in range(d):
            first = (queries[q, k] + low[k] - origin[k]) // bucket[k]
            last = (queries[q, k] + high[k] - origin[k]) // bucket[k]
            if first < 0:
                first = 0
            if last > radix[k] - 1:
                last = radix[k] - 1
            if first > last:
                empty = True
            lo[k] = first
            span[k] = last - first + 1
        if empty:
            continue
        combos = 1
        for k in range(d):
            combos *= span[k]
        count = 0
        shift = 0.0
        have_shift = False
        s1 = 0.0
        s2 = 0.0
        bad = 0
        fsum = 0.0
        acc = total[q]
        acc_high = np.int64(0)
        acc_low = np.uint64(0)
        lo_v = smallest[q]
        hi_v = largest[q]
        n_seen = 0
        for combo in range(combos):
            rest = combo
            for k in range(d - 1, -1, -1):
                pick[k] = lo[k] + rest % span[k]
                rest //= span[k]
            key = np.int64(0)
            for k in range(d):
                key = key * radix[k] + pick[k]
            duplicate = False
            for t in range(n_seen):
                if seen[t] == key:
                    duplicate = True
            if duplicate:
                continue
            seen[n_seen] = key
            n_seen += 1
            b = np.searchsorted(unique, key)
            if b >= unique.size or unique[b] != key:
                continue
            for p in range(starts[b], starts[b + 1]):
                inside = True
                for k in range(d):
                    c = coords[p, k] - queries[q, k]
                    if c < low[k] or c > high[k]:
                        inside = False
                        break
                if not inside:
                    continue
                v = values[p]
                if count == 0:
                    lo_v = v
                    hi_v = v
                else:
                    lo_v = _min(lo_v, v)
                    hi_v = _max(hi_v, v)
                count += 1
                if sums:
                    if wide:
                        acc_high, acc_low = add_int(acc_high, acc_low, np.int64(v), False)
                    else:
                        acc += v
                fv = np.float64(v)
                fsum += fv
                if fv - fv != 0.0:
                    bad += 1
                else:
                    if not have_shift:
                        shift = fv
                        have_shift = True
                    y = fv - shift
                    s1 += y
                    s2 += y * y
        stats[q, _COUNT] = count
        stats[q, _SUM] = fsum
        stats[q, _VAR] = 0.0
        if count - bad >= 2:
            n = count - bad
            stats[q, _VAR] = (s2 - s1 * s1 / n) / (n - 1)
        stats[q, _BAD] = bad
        if wide:
            total[q] = np.int64(acc_low)
            total_high[q] = acc_high
        else:
            total[q] = acc
        smallest[q] = lo_v
        largest[q] = hi_v


def _bucket_keys(cells: np.ndarray, origin: np.ndarray, bucket: np.ndarray, radix: np.ndarray) -> np.ndarray:
    grid = (cells - origin) // bucket
    keys = np.zeros(len(cells), dtype=np.int64)
    with np.errstate(over="ignore"):
        for k in range(cells.shape[1]):
            keys = keys * radix[k] + grid[:, k]
    return keys


def _exact_where_cancelled(
    sums: np.ndarray,
    count: np.ndarray,
    coords: np.ndarray,
    work: np.ndarray,
    queries: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
) -> None:
    """Exact or loud float window sums (in place), as :func:`arrayviews.kernels.window.
    _exact_where_cancelled` for blocks: a window's points are added one after another, so its sum's
    error is at most ``count * 2**-53 * sum(|values|)``; where that exceeds the tolerance of the sum
    the values cancel, and the window's points are summed again exactly."""
    finite = np.isfinite(work)
    magnitude = window_points(
        coords[finite], np.abs(work[finite]), queries, low * -1, high, "sum", exact_sums=False
    )["sum"][0]
    bound = magnitude * (count * 2.0**-53 * (1 + 2.0**-20))
    # a sum of finite terms whose float sum or magnitude overflowed: its exact sum decides
    cancelled = np.flatnonzero((bound > CANCELLATION_TOLERANCE * np.abs(sums)) | ~np.isfinite(magnitude))
    if cancelled.size == 0:
        return
    order = np.argsort(coords[:, 0], kind="stable")
    first_coordinate = coords[order, 0]
    terms, offsets = [], [0]
    for query in cancelled:
        corner_low, corner_high = queries[query] + low, queries[query] + high
        lo, hi = np.searchsorted(first_coordinate, [corner_low[0], corner_high[0] + 1])
        candidates = order[lo:hi]
        inside = np.all((coords[candidates] >= corner_low) & (coords[candidates] <= corner_high), axis=1)
        terms.append(work[candidates[inside]])
        offsets.append(offsets[-1] + int(inside.sum()))
    try:
        exact = FloatSums.of_lists(np.concatenate(terms), np.asarray(offsets, dtype=np.int64))
    except ExactSumError as error:
        raise ExactSumError(error.code, int(cancelled[error.index])) from None
    sums[cancelled] = exact.values()


def window_points(
    coords: np.ndarray,
    values: np.ndarray | None,
    queries: np.ndarray,
    before: Sequence[int],
    after: Sequence[int],
    functions: Sequence[str] | str,
    valid: np.ndarray | None = None,
    *,
    exact_sums: bool = True,
) -> Result:
    """Window aggregates of the points ``(coords (n, d) int64, values (n,))`` around every query cell
    (``queries`` (m, d) int64). ``values`` None: count only. ``valid`` (n,) bool marks non-null values;
    null points are left out of every aggregate. ``exact_sums`` False leaves float sums as added (the error
    bounds of exact sums use that). Returns per canonical function name ``(result (m,),
    null mask or None)``; types and null rules as :func:`arrayviews.kernels.window.window_block`.
    """
    names = _functions(functions)
    coords = np.asarray(coords, dtype=np.int64)
    queries = np.asarray(queries, dtype=np.int64)
    if coords.ndim != 2 or queries.ndim != 2 or coords.shape[1] != queries.shape[1]:
        raise ValueError("coords and queries must be (n, d) and (m, d) arrays with the same d")
    d = coords.shape[1]
    if values is None:
        if any(name != "count" for name in names):
            raise ValueError("values are needed for aggregates other than count")
        values = np.zeros(len(coords), dtype=np.bool_)
    values = np.asarray(values)
    if values.shape != (len(coords),):
        raise ValueError("values must have one entry per point")
    if values.dtype.kind == "M" and all(name == "count" for name in names):
        values = np.zeros(values.shape, dtype=np.bool_)  # instants are counted, never summed
    if values.dtype.kind not in "biuf":
        raise TypeError(f"cannot aggregate values of dtype {values.dtype}")
    before, after = _window_lengths(d, before, after)
    if valid is not None:
        keep = np.asarray(valid, dtype=np.bool_)
        coords, values = coords[keep], values[keep]
    dtype = values.dtype
    is_float = dtype.kind == "f"
    work = values.astype(np.float64 if is_float else np.int64)
    m = len(queries)

    low = -np.asarray(before, dtype=np.int64)
    high = np.asarray(after, dtype=np.int64)
    bucket = high - low + 1
    stats = np.zeros((m, 4), dtype=np.float64)
    total = np.zeros(m, dtype=work.dtype)
    total_high = np.zeros(m, dtype=np.int64)
    # integer sums that may leave int64 (largest magnitude times points) are kept in 128 bits
    largest_magnitude = max(int(work.max()), -int(work.min())) if len(work) and not is_float else 0
    wide = largest_magnitude * len(work) >= 2**63
    if is_float:
        smallest = np.full(m, np.inf)
        largest = np.full(m, -np.inf)
    else:
        smallest = np.zeros(m, dtype=np.int64)
        largest = np.zeros(m, dtype=np.int64)
    if len(coords) and m:
        origin = coords.min(axis=0)
        radix = (coords.max(axis=0) - origin) // bucket + 1
        keys = _bucket_keys(coords, origin, bucket, radix)
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        unique, first = np.unique(keys, return_index=True)
        starts = np.append(first, len(keys)).astype(np.int64)
        _query_kernel(
            np.ascontiguousarray(coords[order]),
            work[order],
            keys,
            starts,
            unique,
            queries,
            low,
            high,
            bucket,
            origin,
            radix,
            bool({"sum", "avg"} & set(names)) and not is_float,
            wide,
            stats,
            total,
            total_high,
            smallest,
            largest,
        )
    count = stats[:, _COUNT].astype(np.int64)
    empty = count == 0
    exact = IntSums.from_words(total_high, total) if wide else None
    if exact_sums and is_float and {"sum", "avg"} & set(names) and len(work):
        finite_work = work[np.isfinite(work)]
        mixed = len(finite_work) and finite_work.min() < 0.0 < finite_work.max()
        if mixed or not np.isfinite(stats[:, _SUM]).all():  # cancelling terms, or an overflow
            with np.errstate(over="ignore", invalid="ignore"):
                _exact_where_cancelled(stats[:, _SUM], count, coords, work, queries, low, high)
    results: Result = {}
    for name in names:
        if name == "count":
            results[name] = (count, None)
            continue
        if name in ("var", "stdev"):
            result = stats[:, _VAR].copy()
            np.maximum(result, 0.0, out=result)
            result[stats[:, _BAD] > 0] = np.nan
            if name == "stdev":
                np.sqrt(result, out=result)
            null = count < 2
        elif name == "sum":
            if exact is not None and not exact.fits().all():
                index = int(np.flatnonzero(~exact.fits())[0])
                raise SumOverflow((index,), exact.to_python(index))
            result = stats[:, _SUM].copy() if is_float else total.copy()
            null = empty
        elif name == "avg":
            safe = np.maximum(count, 1)
            if is_float:
                result = stats[:, _SUM] / safe
            else:
                result = int_quotient(total, safe)  # correctly rounded, as aggregate gives it
                if exact is not None and not exact.fits().all():
                    beyond = ~exact.fits()
                    result[beyond] = wide_quotient(exact.high[beyond], exact.low[beyond], safe[beyond])
            null = empty
        else:
            result = (smallest if name == "min" else largest).astype(dtype)
            null = empty
        if null.any():
            result[null] = 0
            results[name] = (result, null)
        else:
            results[name] = (result, None)
    return results
