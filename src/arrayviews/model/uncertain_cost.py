"""Cost models choosing the step size k of store-multiple (paper 001, section 3.3 for Subarray, Eq.
1-5, and section 4.2 for the subarray-based join, Eq. 6), on this system's storage.

The paper counts chunks (pages) and validations. Here the I/O unit is a Parquet row group holding
the fragments of a tile of chunks (``tile`` chunks per dimension) written by one batch, so a query
pays a *seek* per row group overlapping its expanded region, a *copy* cost per tuple copy in those
row groups (read, decode and duplicate removal), a *filter* cost per distinct tuple retrieved and an
*integral* cost per bivariate integration. The unit costs are measured on the machine (``calibrate`` in the operators);
the statistics are the tuples' possible range sizes (grouped, the paper's generalized model), the
domain, the chunking and the number of batches.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

#: Candidate step sizes tried per dimension (the same k in every dimension, as in the paper).
STEP_CANDIDATES = (0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)


@dataclass(frozen=True)
class UnitCosts:
    """Seconds per unit of work. The defaults were measured on the development machine (2 cores,
    November 2026) with ``operators.uncertain_calibration.calibrate``; measure again on yours."""

    seek: float = 3.0e-5  # per row group read
    copy: float = 5.0e-7  # per tuple copy read, decoded and de-duplicated
    filter: float = 7.0e-7  # per distinct tuple retrieved (range check and closed-form factors)
    integral: float = 3.0e-6  # per bivariate normal rectangle
    pair: float = 2.0e-6  # per candidate pair of a join (search and closed forms)

    def as_dict(self) -> dict[str, float]:
        return {k: getattr(self, k) for k in ("seek", "copy", "filter", "integral", "pair")}


@dataclass(frozen=True)
class RangeStatistics:
    """What the model needs to know about a set of tuples: grouped possible range sizes and layout."""

    spans: np.ndarray  # (g, d): distinct u - l (cells spanned minus one) per dimension
    counts: np.ndarray  # (g,): tuples with that span
    domain: tuple[int, ...]  # n_i, cells per dimension
    chunk: tuple[int, ...]  # chunk length per dimension
    batches: int = 1  # fragments per chunk (one per insert batch)
    correlated: bool = False
    tile: tuple[int, ...] | None = None  # chunks per row group per dimension (None: 1)

    @classmethod
    def from_ranges(
        cls,
        first: np.ndarray,
        last: np.ndarray,
        domain: Sequence[int],
        chunk: Sequence[int],
        batches: int = 1,
        correlated: bool = False,
        tile: Sequence[int] | None = None,
    ) -> RangeStatistics:
        spans = np.asarray(last, np.int64) - np.asarray(first, np.int64)
        groups, counts = np.unique(spans.reshape(len(spans), len(domain)), axis=0, return_counts=True)
        return cls(
            groups,
            counts,
            tuple(int(n) for n in domain),
            tuple(int(c) for c in chunk),
            batches,
            correlated,
            None if tile is None else tuple(int(t) for t in tile),
        )

    @property
    def unit(self) -> tuple[int, ...]:
        """Cells per I/O unit (row group) along each dimension."""
        tile = self.tile or (1,) * len(self.chunk)
        return tuple(c * t for c, t in zip(self.chunk, tile, strict=True))

    @property
    def tuples(self) -> int:
        return int(self.counts.sum())

    @property
    def ndim(self) -> int:
        return len(self.domain)

    @property
    def cells(self) -> int:
        return math.prod(self.domain)

    def mean_cells_spanned(self) -> np.ndarray:
        """Average number of cells a possible range covers, per dimension (the paper's pr/s + 1)."""
        return (self.spans * self.counts[:, None]).sum(axis=0) / max(1, self.tuples) + 1


@dataclass(frozen=True)
class CostBreakdown:
    """Estimated work and seconds of one operation under one step configuration."""

    steps: tuple[int, ...]
    fragments: float
    copies_read: float
    validations: float
    integrals: float
    pairs: float
    seconds: float
    parts: dict[str, float] = field(default_factory=dict)


def copies_total(stats: RangeStatistics, steps: Sequence[int]) -> float:
    """Stored copies of all tuples (Eq. 2 per group of equal range sizes)."""
    per_group = np.ones(len(stats.counts))
    for i, k in enumerate(steps):
        per_group *= stats.spans[:, i] // (2 * int(k) + 1) + 1
    return float((per_group * stats.counts).sum())


def _chunks_overlapped(length_cells: float, chunk: int, total_chunks: int) -> float:
    """Expected chunks a run of ``length_cells`` cells overlaps (the analogue of Eq. 1)."""
    return min(float(total_chunks), (max(1.0, length_cells) - 1.0) / chunk + 1.0)


def subarray_cost(
    stats: RangeStatistics,
    steps: Sequence[int],
    query: Sequence[float],
    threshold: float,
    units: UnitCosts,
) -> CostBreakdown:
    """Estimated cost of one Subarray query of ``query`` cells per dimension under store-multiple."""
    n = np.asarray(stats.domain, np.float64)
    q = np.asarray(query, np.float64)
    k = np.asarray(steps, np.float64)
    copies = copies_total(stats, steps)
    per_cell = copies / stats.cells  # Eq. 3 (without page rounding)
    expanded = np.minimum(n, q + 1 + 2 * k)  # cells of the expanded region per dimension (Eq. 4)
    unit = stats.unit
    total_units = [math.ceil(n_i / c) for n_i, c in zip(stats.domain, unit, strict=True)]
    per_dimension = [_chunks_overlapped(e, c, t) for e, c, t in zip(expanded, unit, total_units, strict=True)]
    unit_count = math.prod(per_dimension)
    # a row group holds whole units of cells, so the copies read are those of the units overlapped
    copies_read = per_cell * math.prod(
        min(n_i, u * c) for n_i, u, c in zip(stats.domain, per_dimension, unit, strict=True)
    )
    per_unit_batch = copies / max(1, math.prod(total_units)) / max(1, stats.batches)
    fragments = unit_count * stats.batches * (1.0 - math.exp(-per_unit_batch))
    # Eq. 5: tuples to validate, per group of equal range sizes.
    density = stats.counts / stats.cells
    spans = stats.spans.astype(np.float64)
    z = np.where(spans < 2 * k + 1, 2 * k, spans)
    validations = float((density * np.prod(np.minimum(n, q + 1 + z), axis=1)).sum())
    integrals = 0.0
    if stats.correlated:
        reach = np.minimum(n, np.maximum(0.0, q + 1 + spans * (1.0 - 2.0 * threshold)))
        integrals = float((density * np.prod(reach, axis=1)).sum())
    parts = {
        "seek": units.seek * fragments,
        "copies": units.copy * copies_read,
        "filter": units.filter * validations,
        "integrals": units.integral * integrals,
    }
    return CostBreakdown(
        tuple(int(s) for s in steps),
        fragments,
        copies_read,
        validations,
        integrals,
        0.0,
        sum(parts.values()),
        parts,
    )


def workload_cost(
    stats: RangeStatistics,
    steps: Sequence[int],
    queries: Sequence[Sequence[float]],
    threshold: float,
    units: UnitCosts,
) -> float:
    """Average estimated seconds over the workload's queries."""
    return float(np.mean([subarray_cost(stats, steps, q, threshold, units).seconds for q in queries]))


@dataclass(frozen=True)
class StepChoice:
    """The step the model chose and the estimate for every candidate."""

    steps: tuple[int, ...]
    estimates: dict[tuple[int, ...], float]
    copies: dict[tuple[int, ...], float]

    def table(self) -> list[dict]:
        return [
            {"steps": list(s), "estimated_seconds": e, "copies": self.copies[s], "chosen": s == self.steps}
            for s, e in sorted(self.estimates.items())
        ]


def candidate_steps(
    stats: RangeStatistics, candidates: Sequence[int] = STEP_CANDIDATES
) -> list[tuple[int, ...]]:
    """Equal steps per dimension, up to the first one that stores a single copy of every tuple."""
    widest = int(stats.spans.max()) if len(stats.spans) else 0
    limit = max(1, (widest + 1) // 2)
    values = [k for k in candidates if k <= limit]
    if limit not in values and limit <= max(candidates):
        values.append(limit)
    return [(k,) * stats.ndim for k in sorted(set(values))]


def choose_subarray_steps(
    stats: RangeStatistics,
    queries: Sequence[Sequence[float]],
    threshold: float,
    units: UnitCosts,
    candidates: Sequence[tuple[int, ...]] | None = None,
) -> StepChoice:
    """The step minimizing the estimated workload cost (section 3.3, Implementation)."""
    options = candidates or candidate_steps(stats)
    estimates = {tuple(s): workload_cost(stats, s, queries, threshold, units) for s in options}
    copies = {tuple(s): copies_total(stats, s) for s in options}
    best = min(estimates, key=lambda s: (estimates[s], s))
    return StepChoice(best, estimates, copies)


def join_cost(
    outer: RangeStatistics,
    inner: RangeStatistics,
    outer_steps: Sequence[int],
    inner_steps: Sequence[int],
    delta: float,
    units: UnitCosts,
    block_copies: float = 200_000,
) -> CostBreakdown:
    """Estimated cost of the subarray-based join with both sides under store-multiple (section 4.2).

    The outer array is read once, in blocks of about ``block_copies`` copies (slabs along the first
    dimension, the memory quota of Alg. 1); each block reads the inner row groups of the union of its
    cells' candidate regions (the cells widened by k_A and delta, Prop. 4.3, then by k_B: beta_{R_A});
    every outer tuple is paired with the inner copies of the union of its copies' candidate cells.
    """
    ka = np.asarray(outer_steps, np.float64)
    kb = np.asarray(inner_steps, np.float64)
    nb = np.asarray(inner.domain, np.float64)
    copies_a = copies_total(outer, outer_steps)
    copies_b = copies_total(inner, inner_steps)
    blocks = max(1.0, math.ceil(copies_a / block_copies))
    extent = np.asarray(outer.domain, np.float64)
    extent[0] = extent[0] / blocks
    beta_cells = np.minimum(nb, extent + 2 * ka + 2 * delta + 1 + 2 * kb)  # beta_{R_A} per dimension
    units_b = [math.ceil(n / c) for n, c in zip(inner.domain, inner.unit, strict=True)]
    per_dimension = [
        _chunks_overlapped(c, u, t) for c, u, t in zip(beta_cells, inner.unit, units_b, strict=True)
    ]
    units_a = [math.ceil(n / c) for n, c in zip(outer.domain, outer.unit, strict=True)]
    row_groups = outer.batches * math.prod(units_a) + blocks * inner.batches * math.prod(per_dimension)
    read_b = math.prod(min(n, p * u) for n, p, u in zip(inner.domain, per_dimension, inner.unit, strict=True))
    copies_read = copies_a + blocks * read_b * copies_b / inner.cells
    # Eq. 6 counts the candidate cells of every outer copy; the join searches the union of a tuple's
    # copies' boxes once (its possible range widened by delta and k_B), so pairs follow the tuples.
    reach = np.minimum(nb, outer.spans + 1 + 2 * delta + 2 * kb)
    pairs = float((outer.counts * np.prod(reach, axis=1)).sum()) * copies_b / inner.cells
    parts = {"seek": units.seek * row_groups, "copies": units.copy * copies_read, "pairs": units.pair * pairs}
    steps = tuple(int(s) for s in outer_steps) + tuple(int(s) for s in inner_steps)
    return CostBreakdown(steps, row_groups, copies_read, 0.0, 0.0, pairs, sum(parts.values()), parts)


def choose_join_steps(
    outer: RangeStatistics,
    inner: RangeStatistics,
    delta: float,
    units: UnitCosts,
    block_copies: float = 200_000,
    candidates: Sequence[tuple[int, ...]] | None = None,
) -> tuple[tuple[int, ...], tuple[int, ...], dict]:
    """The (outer, inner) steps minimizing the join cost model, with every estimate."""
    estimates = {}
    for ka in candidates or candidate_steps(outer):
        for kb in candidates or candidate_steps(inner):
            estimates[(ka, kb)] = join_cost(outer, inner, ka, kb, delta, units, block_copies).seconds
    best = min(estimates, key=lambda s: (estimates[s], s))
    return best[0], best[1], estimates
