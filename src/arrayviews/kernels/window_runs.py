"""The numba loops of the window kernels: sliding sums and maxima along one axis (running sums for
integers, van Herk / Gil-Werman blocks for float sums and maxima) and gathered sums and maxima for
windows taken one by one. :mod:`arrayviews.kernels.window` arranges the axes and calls these."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, inline="always")
def _max(a, b):
    """max(a, b) that propagates NaN from either side, like np.maximum."""
    return a if (a > b) | (a != a) else b


@numba.njit(cache=True)
def run_sum(x, w, out):
    """Sliding sums of length ``w`` along axis 1: ``out[o, i, j] = sum(x[o, i:i + w, j])``, as running
    sums (add the cell that enters, subtract the one that leaves).

    ``x`` has shape (outer, L, inner) and ``out`` (outer, L - w + 1, inner); ``out``'s dtype is the
    accumulator. Used for integers (int64 running sums are exact, even through wrap-around) and for
    float windows of length <= 2; longer float windows use :func:`block_sum`.
    """
    outer, length, inner = x.shape
    n = length - w + 1
    if inner == 1:
        for o in range(outer):
            out[o, 0, 0] = 0
            acc = out[o, 0, 0]
            for t in range(w):
                acc += x[o, t, 0]
            out[o, 0, 0] = acc
            for i in range(1, n):
                acc += x[o, i + w - 1, 0] - x[o, i - 1, 0]
                out[o, i, 0] = acc
        return
    for o in range(outer):
        for j in range(inner):
            out[o, 0, j] = 0
        for t in range(w):
            for j in range(inner):
                out[o, 0, j] += x[o, t, j]
        for i in range(1, n):
            for j in range(inner):
                out[o, i, j] = out[o, i - 1, j] + (x[o, i + w - 1, j] - x[o, i - 1, j])


@numba.njit(cache=True)
def block_sum(x, w, out, acc):
    """Sliding float sums of length ``w`` along axis 1 without running-sum drift: the line is cut into
    blocks of ``w`` cells and the window starting at ``i`` is a suffix sum of its block plus a prefix
    sum of the next one (the van Herk / Gil-Werman decomposition), so a window sum only ever adds
    the values of two blocks: no subtraction, and a huge value cannot leave rounding residue in the
    windows after it. Two additions per cell. Shapes as :func:`run_sum`; ``acc`` has length inner.
    """
    outer, length, inner = x.shape
    n = length - w + 1
    if inner == 1:
        for o in range(outer):
            for s in range(0, n, w):
                e = s + w - 1
                a = x[o, e, 0]
                if e < n:
                    out[o, e, 0] = a
                for i in range(e - 1, s - 1, -1):
                    a = x[o, i, 0] + a
                    if i < n:
                        out[o, i, 0] = a
                stop = min(s + w, n)
                if s + 1 < stop:
                    a = x[o, s + w, 0]
                    out[o, s + 1, 0] += a
                    for i in range(s + 2, stop):
                        a += x[o, i + w - 1, 0]
                        out[o, i, 0] += a
        return
    for o in range(outer):
        for s in range(0, n, w):
            e = s + w - 1
            for j in range(inner):
                acc[j] = x[o, e, j]
            if e < n:
                for j in range(inner):
                    out[o, e, j] = acc[j]
            for i in range(e - 1, s - 1, -1):
                if i < n:
                    for j in range(inner):
                        v = x[o, i, j] + acc[j]
                        acc[j] = v
                        out[o, i, j] = v
                else:
                    for j in range(inner):
                        acc[j] += x[o, i, j]
            stop = min(s + w, n)
            if s + 1 < stop:
                for j in range(inner):
                    acc[j] = x[o, s + w, j]
                    out[o, s + 1, j] += acc[j]
                for i in range(s + 2, stop):
                    for j in range(inner):
                        v = acc[j] + x[o, i + w - 1, j]
                        acc[j] = v
                        out[o, i, j] += v


@numba.njit(cache=True)
def run_max(x, w, out, acc):
    """Sliding max of length ``w`` along axis 1 (van Herk / Gil-Werman): ``out[o, i, j] = max(x[o,
    i:i + w, j])`` with NaN propagating. ``acc`` is a scratch vector of length ``inner``.

    The line is cut into blocks of ``w`` cells; the window starting at ``i`` (inside block ``[s, s +
    w)``) is the max of a suffix of that block and a prefix of the next one, so every cell costs three
    comparisons whatever ``w``.
    """
    outer, length, inner = x.shape
    n = length - w + 1
    if inner == 1:
        for o in range(outer):
            for s in range(0, n, w):
                e = s + w - 1
                a = x[o, e, 0]
                if e < n:
                    out[o, e, 0] = a
                for i in range(e - 1, s - 1, -1):
                    a = _max(x[o, i, 0], a)
                    if i < n:
                        out[o, i, 0] = a
                stop = min(s + w, n)
                if s + 1 < stop:
                    a = x[o, s + w, 0]
                    out[o, s + 1, 0] = _max(out[o, s + 1, 0], a)
                    for i in range(s + 2, stop):
                        a = _max(a, x[o, i + w - 1, 0])
                        out[o, i, 0] = _max(out[o, i, 0], a)
        return
    for o in range(outer):
        for s in range(0, n, w):
            e = s + w - 1
            for j in range(inner):
                acc[j] = x[o, e, j]
            if e < n:
                for j in range(inner):
                    out[o, e, j] = acc[j]
            for i in range(e - 1, s - 1, -1):
                if i < n:
                    for j in range(inner):
                        v = _max(x[o, i, j], acc[j])
                        acc[j] = v
                        out[o, i, j] = v
                else:
                    for j in range(inner):
                        acc[j] = _max(x[o, i, j], acc[j])
            stop = min(s + w, n)
            if s + 1 < stop:
                for j in range(inner):
                    acc[j] = x[o, s + w, j]
                    out[o, s + 1, j] = _max(out[o, s + 1, j], acc[j])
                for i in range(s + 2, stop):
                    for j in range(inner):
                        v = _max(acc[j], x[o, i + w - 1, j])
                        acc[j] = v
                        out[o, i, j] = _max(out[o, i, j], v)


@numba.njit(cache=True)
def gather_sum(src, bases, offsets, run, out):
    """Naive window sums of several states at once: ``out[c, s] = sum over t, u of src[bases[c] +
    offsets[t] + u, s]`` for ``u < run``; ``src`` (N, k), ``out`` (M, k). One or two states are
    accumulated in registers, more in a small scratch vector."""
    k = src.shape[1]
    if k == 1:
        for c in range(bases.size):
            base = bases[c]
            out[c, 0] = 0
            a = out[c, 0]
            for t in range(offsets.size):
                start = base + offsets[t]
                for u in range(start, start + run):
                    a += src[u, 0]
            out[c, 0] = a
        return
    if k == 2:
        for c in range(bases.size):
            base = bases[c]
            out[c, 0] = 0
            a = out[c, 0]
            b = a
            for t in range(offsets.size):
                start = base + offsets[t]
                for u in range(start, start + run):
                    a += src[u, 0]
                    b += src[u, 1]
            out[c, 0] = a
            out[c, 1] = b
        return
    acc = np.empty(k, dtype=out.dtype)
    for c in range(bases.size):
        base = bases[c]
        acc[:] = 0
        for t in range(offsets.size):
            start = base + offsets[t]
            for u in range(start, start + run):
                for s in range(k):
                    acc[s] += src[u, s]
        out[c, :] = acc


@numba.njit(cache=True)
def gather_max(src, bases, offsets, run, out):
    """Naive window max (NaN propagating): ``out[c] = max of src[bases[c] + offsets[t] + u]``."""
    for c in range(bases.size):
        base = bases[c]
        best = src[base + offsets[0]]
        for t in range(offsets.size):
            start = base + offsets[t]
            for u in range(start, start + run):
                best = _max(best, src[u])
        out[c] = best


# -- passes over whole blocks -------------------------------------------------------------------------
