"""Where the copies of an uncertain tuple go under each storage scheme (paper 001, section 3.1-3.2).

* ``store-mean``: one copy, in the cell of the mean.
* ``store-multiple`` with step k (per dimension): the fewest copies such that walking at most k_i cells
  along every dimension i from any cell of the tuple's possible range reaches a copy. Per dimension
  with possible range [l, u] that takes floor((u - l) / (2k + 1)) + 1 copies (Prop. 3.2), placed
  inside the range: one copy in the middle cell floor((l + u) / 2), or, when more are needed, the
  first at l + k, the last at u - k and the others evenly spaced in between (gaps of at most 2k + 1
  cells, so every cell is within k of a copy). The copies of a tuple are the cartesian product of its
  per-dimension positions.
* ``store-all``: a copy in every cell of the possible range (store-multiple with k = 0).

One copy of every tuple is its *home* copy (the one nearest the mean cell); scanning home copies
visits every tuple exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from arrayviews.model.errors import ValidationError

STORE_ALL, STORE_MEAN, STORE_MULTIPLE = "store-all", "store-mean", "store-multiple"
SCHEMES = (STORE_ALL, STORE_MEAN, STORE_MULTIPLE)


def copies_per_dimension(first: np.ndarray, last: np.ndarray, step: int) -> np.ndarray:
    """Copies needed along one dimension (Prop. 3.2): floor((u - l) / (2k + 1)) + 1."""
    return (np.asarray(last, np.int64) - np.asarray(first, np.int64)) // (2 * int(step) + 1) + 1


def copy_counts(first: np.ndarray, last: np.ndarray, steps) -> np.ndarray:
    """Copies per tuple under store-multiple with ``steps`` (Prop. 3.2, the product over dimensions)."""
    first = np.asarray(first, np.int64).reshape(len(first), -1)
    last = np.asarray(last, np.int64).reshape(len(last), -1)
    counts = np.ones(len(first), dtype=np.int64)
    for i, step in enumerate(steps):
        counts *= copies_per_dimension(first[:, i], last[:, i], step)
    return counts


def positions_1d(
    first: np.ndarray, last: np.ndarray, step: int, mean_cells: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Copy positions along one dimension for every tuple.

    Returns ``counts`` (copies per tuple), ``positions`` (all copies, tuple by tuple), ``owner`` (the
    tuple of each position) and ``home`` (True for the position nearest the tuple's mean cell).
    """
    first = np.asarray(first, np.int64)
    last = np.asarray(last, np.int64)
    counts = copies_per_dimension(first, last, step)
    owner = np.repeat(np.arange(len(first), dtype=np.int64), counts)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1])) if len(counts) else np.zeros(0, np.int64)
    j = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(starts, counts)
    c = counts[owner]
    lo, hi = first[owner], last[owner]
    single = c == 1
    span = hi - lo - 2 * step  # distance between the first and the last copy when c > 1
    spread = lo + step + (j * span) // np.maximum(c - 1, 1)
    positions = np.where(single, (lo + hi) // 2, spread)
    distance = np.abs(positions - np.asarray(mean_cells, np.int64)[owner])
    # The home copy is the first position at the smallest distance from the mean cell.
    best = np.full(len(first), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(best, owner, distance)
    candidate = distance == best[owner]
    first_candidate = np.full(len(first), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first_candidate, owner, np.where(candidate, j, np.iinfo(np.int64).max))
    home = j == first_candidate[owner]
    return counts, positions, owner, home


def copy_cells(
    first: np.ndarray, last: np.ndarray, mean_cells: np.ndarray, steps
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All copies of all tuples under store-multiple with ``steps`` (one step per dimension).

    ``first``, ``last`` and ``mean_cells`` are (n, d). Returns ``owner`` (m,), the tuple of each copy,
    in tuple order; ``cells`` (m, d); ``home`` (m,) marking one copy per tuple.
    """
    first = np.asarray(first, np.int64)
    n, d = first.shape
    owner = np.arange(n, dtype=np.int64)
    cells = np.zeros((n, 0), dtype=np.int64)
    home = np.ones(n, dtype=bool)
    for i in range(d):
        counts, positions, _, home_1d = positions_1d(first[:, i], last[:, i], int(steps[i]), mean_cells[:, i])
        starts = np.concatenate(([0], np.cumsum(counts)[:-1])) if n else np.zeros(0, np.int64)
        per_row = counts[owner]  # copies so far are expanded by this dimension's positions
        new_owner = np.repeat(owner, per_row)
        row_starts = np.concatenate(([0], np.cumsum(per_row)[:-1])) if len(per_row) else np.zeros(0, np.int64)
        j = np.arange(int(per_row.sum()), dtype=np.int64) - np.repeat(row_starts, per_row)
        picked = starts[new_owner] + j
        cells = np.concatenate([np.repeat(cells, per_row, axis=0), positions[picked][:, None]], axis=1)
        home = np.repeat(home, per_row) & home_1d[picked]
        owner = new_owner
    return owner, cells, home


def scheme_copies(
    scheme: str, first: np.ndarray, last: np.ndarray, mean_cells: np.ndarray, steps
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Copies of every tuple under ``scheme`` (see :func:`copy_cells` for the result)."""
    first = np.asarray(first, np.int64)
    if scheme == STORE_MEAN:
        n = len(first)
        return np.arange(n, dtype=np.int64), np.asarray(mean_cells, np.int64).copy(), np.ones(n, dtype=bool)
    if scheme == STORE_ALL:
        steps = [0] * first.shape[1]
    return copy_cells(first, last, mean_cells, steps)


def normalize_scheme(scheme: str, array: str) -> str:
    key = str(scheme).strip().lower().replace("_", "-")
    if key not in SCHEMES:
        raise ValidationError(
            f"uncertain array {array}: unknown storage scheme {scheme!r}; choose one of {', '.join(SCHEMES)}",
            array=array,
            value=scheme,
        )
    return key


def normalize_steps(step, ndim: int, array: str) -> tuple[int, ...]:
    """A step size per dimension from an int or a sequence (non-negative integers)."""
    values = [step] * ndim if isinstance(step, int | np.integer) and not isinstance(step, bool) else step
    try:
        values = list(values)
    except TypeError:
        raise ValidationError(
            f"uncertain array {array}: step must be a non-negative integer or one per dimension, got {step!r}",
            array=array,
            value=step,
        ) from None
    if len(values) != ndim or any(
        isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 0 for v in values
    ):
        raise ValidationError(
            f"uncertain array {array}: step must be a non-negative integer or {ndim} of them (one per "
            f"dimension), got {step!r}",
            array=array,
            value=step,
        )
    return tuple(int(v) for v in values)


@dataclass(frozen=True)
class StorageLayout:
    """How one version of an uncertain array stores its tuples: scheme, step per dimension, and k of
    the possible range mean +- k * sigma. ``steps`` is None while a step is still to be chosen by the
    cost model (at the first insert)."""

    scheme: str
    steps: tuple[int, ...] | None
    sigmas: float

    @property
    def effective_steps(self) -> tuple[int, ...]:
        """The step used for query expansion: k for store-multiple, 0 for store-all (store-mean uses fences)."""
        if self.steps is None:
            raise ValueError("the step of this layout is not chosen yet")
        return self.steps

    def describe(self) -> str:
        if self.scheme == STORE_MULTIPLE:
            step = "auto" if self.steps is None else "(" + ", ".join(str(s) for s in self.steps) + ")"
            return f"{self.scheme} step {step}, possible range mean +- {self.sigmas:g} sigma"
        return f"{self.scheme}, possible range mean +- {self.sigmas:g} sigma"
