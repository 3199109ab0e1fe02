"""Probabilistic Structure-Join with the l1 band (Definition 2.2): pairs (t, u) with
|t.d - u.d| < delta in every dimension with probability at least lambda.

Three evaluations, all returning each qualifying pair once with its exact probability:

* ``sbj``, the subarray-based join (Alg. 1): outer blocks; for every outer cell a Subarray region on
  the inner array, tight by Prop. 4.2 (outer under store-mean: the cell's widest possible range
  widened by delta) or Prop. 4.3 (outer under store-multiple/store-all: the cell widened by k_A and
  delta); the inner rows read are those of the inner array's expanded region of that region (+k_B, or
  the fences); pairs are filtered by Prop. 4.1, de-duplicated, then validated. On Spark, outer rows
  are routed to the inner chunks their regions touch and co-grouped with those chunks' fragments.
* ``bnl``, block nested loops: every outer block against the whole inner array (read once per block).
* ``index``, the R-tree index join: every outer tuple probes an R-tree over the inner possible ranges.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa

from arrayviews.execution.cost import Choice
from arrayviews.execution.cost import choose as choose_executor
from arrayviews.execution.failures import translating
from arrayviews.kernels.join_pairs import all_pairs, pair_probabilities, pairs_in_boxes
from arrayviews.model.copy_layout import STORE_ALL, STORE_MEAN, StorageLayout
from arrayviews.model.errors import ValidationError
from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.schema import ArraySchema
from arrayviews.model.uncertain import ID, PROBABILITY, UncertainSchema, unclipped_possible_range
from arrayviews.operators.uncertain_engine import JOIN_JOBS, check_engine, read_estimate
from arrayviews.operators.uncertain_files import naming_missing_files
from arrayviews.operators.uncertain_index import PossibleRangeIndex
from arrayviews.operators.uncertain_regions import as_number, check_threshold, union_chunks
from arrayviews.storage import layout
from arrayviews.storage import uncertain_layout as ul
from arrayviews.storage.uncertain_table import UncertainTable

METHODS = ("sbj", "bnl", "index")
ID_LEFT, ID_RIGHT = "id_left", "id_right"
RESULT_SCHEMA = pa.schema([(ID_LEFT, pa.int64()), (ID_RIGHT, pa.int64()), (PROBABILITY, pa.float64())])
#: Outer copies per block of the in-process SBJ and BNL (the memory quota of Alg. 1).
BLOCK_COPIES = 200_000


@dataclass
class JoinStatistics:
    blocks: int = 0
    outer_copies_read: int = 0
    inner_fragments_read: int = 0
    inner_copies_read: int = 0
    pairs_looked_at: int = 0
    candidate_pairs: int = 0  # passing Prop. 4.1, before duplicate removal
    distinct_pairs: int = 0
    integrals: int = 0
    results: int = 0
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "extra"} | self.extra


@dataclass(frozen=True)
class SideSpec:
    """What a Spark task needs to know about one side (plain, picklable data)."""

    schema: UncertainSchema
    storage: ArraySchema
    layout: StorageLayout


@dataclass(frozen=True)
class Side:
    """One input of the join at a version."""

    table: UncertainTable
    version: int
    layout: StorageLayout

    @property
    def schema(self) -> UncertainSchema:
        return self.table.schema

    @property
    def spec(self) -> SideSpec:
        return SideSpec(self.table.schema, self.table.storage, self.layout)


@dataclass
class SideRows:
    """Rows of one side in kernel form: possible ranges (``first``, ``last``) as floats, not clipped to
    the side's domain, for the Prop. 4.1 test (two arrays' tuples may meet outside either domain)."""

    ids: np.ndarray
    cells: np.ndarray
    first: np.ndarray
    last: np.ndarray
    means: np.ndarray
    sigmas: np.ndarray
    corrs: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)

    def take(self, index: np.ndarray) -> SideRows:
        return SideRows(
            *(getattr(self, f)[index] for f in ("ids", "cells", "first", "last", "means", "sigmas", "corrs"))
        )


def pair_structure(left: UncertainSchema, right: UncertainSchema) -> tuple[np.ndarray, np.ndarray]:
    """Independent dimensions and correlated pairs of the difference of two tuples (positional)."""
    pairs = sorted({tuple(int(x) for x in p) for p in np.vstack([left.pair_indices, right.pair_indices])})
    used: dict[int, tuple[int, int]] = {}
    for pair in pairs:
        for k in pair:
            if k in used and used[k] != pair:
                raise ValidationError(
                    f"structure join of {left.name} and {right.name}: dimension {k} is correlated with two "
                    "different dimensions across the arrays (only disjoint pairs are supported)"
                )
            used[k] = pair
    singles = np.array([k for k in range(left.ndim) if k not in used], np.int64)
    return singles, np.array(pairs, np.int64).reshape(-1, 2)


def side_rows(rows: ul.Rows, schema: UncertainSchema, pairs: np.ndarray, sigmas: float) -> SideRows:
    """Decoded rows in kernel form; ``sigmas`` is the side's k of the possible range mean +- k sigma."""
    names = schema.dimension_names

    def stack(column):
        return np.stack([rows.columns[column(d)] for d in names], axis=1).reshape(len(rows), len(names))

    own = {
        tuple(int(x) for x in p): schema.correlation_column(c)
        for p, c in zip(schema.pair_indices, schema.correlations, strict=True)
    }
    corrs = np.zeros((len(rows), len(pairs)), np.float64)
    for q, pair in enumerate(pairs):
        column = own.get(tuple(int(x) for x in pair))
        if column is not None:
            corrs[:, q] = rows.columns[column]
    means = np.ascontiguousarray(stack(ul.mean_column), np.float64)
    deviations = np.ascontiguousarray(stack(ul.sigma_column), np.float64)
    first, last = unclipped_possible_range(means, deviations, sigmas)
    return SideRows(rows.columns[ID], rows.cells, first, last, means, deviations, corrs)


def position_names(schema: UncertainSchema) -> list[str]:
    return ul.position_columns(schema)


# -- candidate regions (Prop. 4.2 / 4.3) -----------------------------------------------------------
def outer_regions(
    rows: SideRows, outer: SideSpec, inner: SideSpec, delta: float
) -> tuple[np.ndarray, np.ndarray]:
    """The Subarray region on the inner array of every outer row's cell, as the open interval
    (lower, upper) per dimension (floats, possibly infinite; not yet clipped to the inner domain)."""
    if len(rows) == 0:
        z = np.zeros((0, outer.schema.ndim))
        return z, z
    if outer.layout.scheme == STORE_MEAN:
        # Prop. 4.2: the widest possible range among the tuples of the cell, widened by delta.
        (
            _,
            cell_of,
        ) = np.unique(rows.cells, axis=0, return_inverse=True)[:2]
        cell_of = cell_of.reshape(-1)
        groups = cell_of.max() + 1
        low = np.full((groups, rows.cells.shape[1]), np.inf)
        high = np.full((groups, rows.cells.shape[1]), -np.inf)
        np.minimum.at(low, cell_of, rows.first)
        np.maximum.at(high, cell_of, rows.last)
        return low[cell_of] - delta, high[cell_of] + 1.0 + delta
    # Prop. 4.3: the cell widened by the outer step, then by delta.
    k = (
        np.zeros(rows.cells.shape[1])
        if outer.layout.scheme == STORE_ALL
        else np.asarray(outer.layout.steps, float)
    )
    lower, upper = rows.cells - k - delta, rows.cells + k + 1.0 + delta
    # Copies lie in the possible range clipped to the outer domain, so Prop. 4.3 covers the part of
    # the range inside it. Where the inner domain reaches beyond the outer's, a tuple whose range
    # leaves its own domain may meet inner tuples out there: its region covers that part too.
    outer_low, outer_high = _domain(outer.schema)
    inner_low, inner_high = _domain(inner.schema)
    beyond_low = (rows.first < outer_low) & (inner_low < outer_low)
    beyond_high = (rows.last > outer_high) & (inner_high > outer_high)
    lower = np.where(beyond_low, np.minimum(lower, rows.first - delta), lower)
    upper = np.where(beyond_high, np.maximum(upper, rows.last + 1.0 + delta), upper)
    return lower, upper


def _domain(schema: UncertainSchema) -> tuple[np.ndarray, np.ndarray]:
    """First and last cell of every dimension (int64)."""
    return (
        np.array([d.low for d in schema.dimensions], np.int64),
        np.array([d.high for d in schema.dimensions], np.int64),
    )


def _clamped_box(
    lower: np.ndarray, upper: np.ndarray, inner: SideSpec, walks: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Inner cells to search for regions given as open intervals (lower, upper): the cells meeting
    the interval, *moved into* the inner domain (a region beyond it becomes its nearest edge cell,
    where the clipped possible ranges of inner tuples reaching the region end), then expanded by the
    inner scheme's walks and clipped. Moving, not cutting: clipping a range and a region to the same
    box keeps every meeting, so no inner tuple whose full range meets the region is missed."""
    low_cell, high_cell = _domain(inner.schema)
    with np.errstate(invalid="ignore"):
        # cells c meeting the open interval (lower, upper): floor(lower) <= c <= ceil(upper) - 1
        low = np.clip(np.floor(lower), low_cell, high_cell).astype(np.int64)
        high = np.clip(np.ceil(upper) - 1, low_cell, high_cell).astype(np.int64)
    return np.maximum(low - walks[0], low_cell), np.minimum(high + walks[1], high_cell)


def inner_walks_from_metadata(inner: Side) -> tuple[np.ndarray, np.ndarray]:
    """How far (cells) the inner array's expanded region reaches beyond a query region, per dimension
    below and above: k_B for store-multiple/store-all; for store-mean the largest fence walk of any
    fence fragment (a bound from metadata only)."""
    d = inner.schema.ndim
    if inner.layout.scheme != STORE_MEAN:
        k = (
            np.zeros(d, np.int64)
            if inner.layout.scheme == STORE_ALL
            else np.asarray(inner.layout.steps, np.int64)
        )
        return k, k
    metadata = inner.table.metadata(inner.version)
    if metadata.num_rows == 0:
        return np.zeros(d, np.int64), np.zeros(d, np.int64)
    roles = np.asarray(metadata.column(layout.min_column(ul.ROLE)))
    fences = metadata.filter(pa.array(roles == ul.ROLE_FENCE))
    if fences.num_rows == 0:
        return np.zeros(d, np.int64), np.zeros(d, np.int64)
    grid = ChunkGrid.of(inner.table.storage)
    chunks = np.stack(
        [np.asarray(fences.column(c)) for c in layout.chunk_columns(inner.table.storage)], axis=1
    )
    starts, sizes = layout.box_geometry(grid, chunks)
    names = inner.schema.dimension_names
    low_walk = np.zeros(d, np.int64)
    high_walk = np.zeros(d, np.int64)
    for k, name in enumerate(names):
        lowest = np.asarray(fences.column(layout.min_column(ul.first_column(name))))
        highest = np.asarray(fences.column(layout.max_column(ul.last_column(name))))
        low_walk[k] = max(0, int((starts[:, k] + sizes[:, k] - 1 - lowest).max()))
        high_walk[k] = max(0, int((highest - starts[:, k]).max()))
    return low_walk, high_walk


def expected_pairs(outer: Side, inner: Side, delta: float) -> float:
    """Candidate (outer copy, inner copy) pairs the join searches, from metadata only: every outer
    copy's candidate box (its cell widened by the outer step, or for store-mean by the outer's widest
    fence walk, Prop. 4.2 / 4.3; then by delta and the inner walks, clipped to the inner domain)
    times the inner array's copies per cell (uniform density)."""
    outer_copies = outer.table.copies_at(outer.version) if outer.version else 0
    inner_copies = inner.table.copies_at(inner.version) if inner.version else 0
    if outer_copies == 0 or inner_copies == 0:
        return 0.0
    own_low, own_high = inner_walks_from_metadata(outer)  # k_A, or the outer's widest fence walk
    low_walk, high_walk = inner_walks_from_metadata(inner)
    reach = math.ceil(delta)
    domain = np.array([d.high - d.low + 1 for d in inner.schema.dimensions], np.float64)
    box = np.minimum(domain, 1 + own_low + own_high + 2 * reach + low_walk + high_walk)
    return float(outer_copies * np.prod(box) * inner_copies / np.prod(domain))


def candidate_boxes(
    rows: SideRows, outer: SideSpec, inner: SideSpec, delta: float, walks: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Candidate inner cells per outer row: its region moved into the inner domain, expanded by the
    inner scheme, clipped (``_clamped_box``)."""
    lower, upper = outer_regions(rows, outer, inner, delta)
    return _clamped_box(lower, upper, inner, walks)


def per_tuple(rows: SideRows, low: np.ndarray, high: np.ndarray) -> tuple[SideRows, np.ndarray, np.ndarray]:
    """One outer row per tuple with the bounding box of its copies' candidate boxes. The copies of a
    tuple are at most 2k + 1 cells apart and every candidate box reaches more than k + 1 cells from
    its copy, so the boxes overlap and their union is this bounding box: searching it once per tuple
    finds each inner cell once instead of once per copy."""
    if len(rows) == 0:
        return rows, low, high
    ids, first, inverse = np.unique(rows.ids, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    box_low = np.full((len(ids), low.shape[1]), np.iinfo(np.int64).max, np.int64)
    box_high = np.full((len(ids), low.shape[1]), np.iinfo(np.int64).min, np.int64)
    np.minimum.at(box_low, inverse, low)
    np.maximum.at(box_high, inverse, high)
    return rows.take(first), box_low, box_high


def tuple_numbers(ids: np.ndarray) -> np.ndarray:
    """A dense number per row, shared by the copies of one tuple."""
    if len(ids) == 0:
        return np.zeros(0, np.int64)
    return np.unique(ids, return_inverse=True)[1].reshape(-1).astype(np.int64)


def pairs_within_boxes(
    outer_rows: SideRows, low: np.ndarray, high: np.ndarray, inner_rows: SideRows, delta: float
) -> tuple[np.ndarray, np.ndarray, int]:
    """The (outer, inner) row pairs whose inner row lies in the outer row's candidate box and whose
    time ranges meet within ``delta`` (kernels/join_pairs.py), and how many pairs were looked at."""
    return pairs_in_boxes(
        low,
        high,
        outer_rows.first,
        outer_rows.last,
        inner_rows.cells,
        inner_rows.first,
        inner_rows.last,
        tuple_numbers(inner_rows.ids),
        float(delta),
    )


# -- reading ---------------------------------------------------------------------------------------
def inner_chunk_ranges(outer: Side, inner: Side, delta: float, walks) -> tuple[tuple[int, int], ...] | None:
    """Inner chunk ranges any outer region can reach (from the outer possible ranges in metadata)."""
    metadata = outer.table.metadata(outer.version)
    if metadata.num_rows == 0:
        return None
    metadata = ul.home_fragments(metadata)
    if metadata.num_rows == 0:
        return None
    names = outer.schema.dimension_names
    k = (
        np.zeros(len(names))
        if outer.layout.scheme in (STORE_ALL, STORE_MEAN)
        else np.asarray(outer.layout.steps, float)
    )
    low = np.array(
        [min(np.asarray(metadata.column(layout.min_column(ul.first_column(d))))) for d in names], float
    )
    high = np.array(
        [max(np.asarray(metadata.column(layout.max_column(ul.last_column(d))))) for d in names], float
    )
    # the stored ranges are clipped to the outer domain: one that ends on its edge may reach on
    outer_low, outer_high = _domain(outer.schema)
    lower = np.where(low <= outer_low, -np.inf, low - k - delta)
    upper = np.where(high >= outer_high, np.inf, high + 1 + k + delta)
    low, high = _clamped_box(lower[None, :], upper[None, :], inner.spec, walks)
    return ChunkGrid.of(inner.table.storage).chunk_ranges_overlapping(low[0], high[0])


def read_side(side: Side, pairs: np.ndarray, selection=None, stats_target=None) -> SideRows:
    storage = side.table.storage
    columns = position_names(side.schema)
    ranges = None if selection is None else selection.ranges
    chunk_filter = None if selection is None else selection.filter(ChunkGrid.of(storage))
    fragments = side.table.read(side.version, columns, ranges, chunk_filter, roles="tuples")
    rows = ul.decode_rows(fragments, storage, columns)
    if stats_target is not None:
        stats_target[0] += fragments.num_rows
        stats_target[1] += len(rows)
    return side_rows(rows, side.schema, pairs, side.layout.sigmas)


def _outer_blocks(outer: Side) -> list[tuple[tuple[int, int], ...]]:
    """Chunk ranges of the outer blocks: runs of outer chunks holding about BLOCK_COPIES copies."""
    metadata = outer.table.metadata(outer.version)
    if metadata.num_rows == 0:
        return []
    metadata = ul.home_fragments(metadata)
    names = layout.chunk_columns(outer.table.storage)
    chunks = np.stack([np.asarray(metadata.column(c)) for c in names], axis=1)
    counts = np.asarray(metadata.column(layout.N_CELLS))
    first_dim = np.unique(chunks[:, 0])
    per_slab = np.array([counts[chunks[:, 0] == c].sum() for c in first_dim])
    blocks, start, total = [], 0, 0
    for i, copies in enumerate(per_slab):
        if total and total + copies > BLOCK_COPIES:
            blocks.append((int(first_dim[start]), int(first_dim[i - 1])))
            start, total = i, 0
        total += copies
    blocks.append((int(first_dim[start]), int(first_dim[-1])))
    rest = [(int(chunks[:, k].min()), int(chunks[:, k].max())) for k in range(1, chunks.shape[1])]
    return [((a, b), *rest) for a, b in blocks]


def _validate(
    outer_rows: SideRows,
    inner_rows: SideRows,
    ia: np.ndarray,
    ib: np.ndarray,
    delta: float,
    singles: np.ndarray,
    pairs: np.ndarray,
    threshold: float,
    stats: JoinStatistics,
) -> pa.Table:
    """Distinct (outer id, inner id) candidate pairs, their exact probabilities, the threshold."""
    stats.candidate_pairs += len(ia)
    if len(ia) == 0:
        return RESULT_SCHEMA.empty_table()
    left_ids, right_ids = outer_rows.ids[ia], inner_rows.ids[ib]
    order = np.lexsort((right_ids, left_ids))  # stable: the first of equal pairs stays first
    left_sorted, right_sorted = left_ids[order], right_ids[order]
    new_pair = np.ones(len(order), bool)
    new_pair[1:] = (left_sorted[1:] != left_sorted[:-1]) | (right_sorted[1:] != right_sorted[:-1])
    first = order[new_pair]
    ia, ib = ia[first], ib[first]
    stats.distinct_pairs += len(ia)
    probabilities, integrals = pair_probabilities(
        ia,
        ib,
        outer_rows.means,
        outer_rows.sigmas,
        outer_rows.corrs,
        inner_rows.means,
        inner_rows.sigmas,
        inner_rows.corrs,
        float(delta),
        singles,
        pairs,
        float(threshold),
    )
    stats.integrals += int(integrals)
    keep = probabilities >= threshold
    return pa.table(
        {
            ID_LEFT: pa.array(outer_rows.ids[ia][keep], pa.int64()),
            ID_RIGHT: pa.array(inner_rows.ids[ib][keep], pa.int64()),
            PROBABILITY: pa.array(probabilities[keep], pa.float64()),
        },
        schema=RESULT_SCHEMA,
    )


def _finish(parts: list[pa.Table], swapped: bool, stats: JoinStatistics) -> pa.Table:
    table = pa.concat_tables(parts) if parts else RESULT_SCHEMA.empty_table()
    if swapped:
        table = pa.table(
            {
                ID_LEFT: table.column(ID_RIGHT),
                ID_RIGHT: table.column(ID_LEFT),
                PROBABILITY: table.column(PROBABILITY),
            },
            schema=RESULT_SCHEMA,
        )
    if table.num_rows:
        keys = np.stack([np.asarray(table.column(ID_LEFT)), np.asarray(table.column(ID_RIGHT))], axis=1)
        _, first = np.unique(keys, axis=0, return_index=True)
        table = table.take(pa.array(np.sort(first)))
        table = table.sort_by([(ID_LEFT, "ascending"), (ID_RIGHT, "ascending")])
    stats.results = table.num_rows
    return table


# -- the three evaluations, in-process -------------------------------------------------------------
def sbj_local(outer: Side, inner: Side, delta: float, threshold: float, structure, stats: JoinStatistics):
    singles, pairs = structure
    walks = inner_walks_from_metadata(inner)
    parts = []
    for block in _outer_blocks(outer):
        stats.blocks += 1
        target = [0, 0]
        outer_rows = read_side(outer, pairs, _Ranges(block), target)
        stats.outer_copies_read += target[1]
        low, high = candidate_boxes(outer_rows, outer.spec, inner.spec, delta, walks)
        usable = np.all(low <= high, axis=1)
        if not usable.any():
            continue
        selection = union_chunks(inner.schema, low[usable], high[usable])
        target = [0, 0]
        inner_rows = read_side(inner, pairs, selection, target)
        stats.inner_fragments_read += target[0]
        stats.inner_copies_read += target[1]
        outer_rows, low, high = per_tuple(outer_rows.take(np.flatnonzero(usable)), low[usable], high[usable])
        ia, ib, looked = pairs_within_boxes(outer_rows, low, high, inner_rows, delta)
        stats.pairs_looked_at += int(looked)
        parts.append(_validate(outer_rows, inner_rows, ia, ib, delta, singles, pairs, threshold, stats))
    return parts


def bnl_local(outer: Side, inner: Side, delta: float, threshold: float, structure, stats: JoinStatistics):
    singles, pairs = structure
    parts = []
    for block in _outer_blocks(outer):
        stats.blocks += 1
        target = [0, 0]
        outer_rows = read_side(outer, pairs, _Ranges(block), target)
        stats.outer_copies_read += target[1]
        _, first = np.unique(outer_rows.ids, return_index=True)
        outer_rows = outer_rows.take(np.sort(first))
        target = [0, 0]
        inner_rows = read_side(inner, pairs, None, target)  # the whole inner array, once per block
        stats.inner_fragments_read += target[0]
        stats.inner_copies_read += target[1]
        _, first = np.unique(inner_rows.ids, return_index=True)
        inner_rows = inner_rows.take(np.sort(first))
        ia, ib, looked = all_pairs(
            outer_rows.first, outer_rows.last, inner_rows.first, inner_rows.last, float(delta)
        )
        stats.pairs_looked_at += int(looked)
        parts.append(_validate(outer_rows, inner_rows, ia, ib, delta, singles, pairs, threshold, stats))
    return parts


def index_local(
    outer: Side, inner: Side, delta: float, threshold: float, structure, stats: JoinStatistics, tree=None
):
    singles, pairs = structure
    tree = tree or PossibleRangeIndex.build(inner.table, inner.version)
    stats.extra["index_build_seconds"] = tree.build_seconds
    parts = []
    for block in _outer_blocks(outer):
        stats.blocks += 1
        target = [0, 0]
        outer_rows = read_side(outer, pairs, _Ranges(block), target)
        stats.outer_copies_read += target[1]
        _, first = np.unique(outer_rows.ids, return_index=True)
        outer_rows = outer_rows.take(np.sort(first))
        # the tree holds the inner ranges clipped to the inner domain: probe with each outer range
        # (widened by delta) moved into that domain too, so a meeting outside it is still found
        inner_low, inner_high = _domain(inner.schema)
        lows = np.clip(outer_rows.first - delta, inner_low, inner_high + 0.5)
        highs = np.clip(outer_rows.last + 1.0 + delta, inner_low, inner_high + 0.5)
        query, entries = tree.candidates(lows, highs)
        stats.pairs_looked_at += len(entries)
        fetched = tree.fetch(entries, _Counter(stats))
        inner_rows = side_rows(fetched, inner.schema, pairs, inner.layout.sigmas)
        position = {int(i): n for n, i in enumerate(inner_rows.ids)}
        ib = (
            np.array([position[int(i)] for i in tree.ids[entries]], np.int64)
            if len(entries)
            else np.zeros(0, np.int64)
        )
        ia = query
        keep = np.ones(len(ia), bool)
        for k in range(outer_rows.first.shape[1]):
            keep &= (outer_rows.first[ia, k] - delta <= inner_rows.last[ib, k] + 1.0) & (
                inner_rows.first[ib, k] <= outer_rows.last[ia, k] + 1.0 + delta
            )
        parts.append(
            _validate(outer_rows, inner_rows, ia[keep], ib[keep], delta, singles, pairs, threshold, stats)
        )
    return parts


class _Ranges:
    """A chunk selection given by ranges only (duck-types ChunkSelection for read_side)."""

    def __init__(self, ranges) -> None:
        self.ranges = ranges

    def filter(self, grid):
        return None


class _Counter:
    """Adapts JoinStatistics to the counters PossibleRangeIndex.fetch updates."""

    def __init__(self, stats: JoinStatistics) -> None:
        self.stats = stats

    @property
    def fragments_read(self) -> int:
        return self.stats.inner_fragments_read

    @fragments_read.setter
    def fragments_read(self, value: int) -> None:
        self.stats.inner_fragments_read = value

    @property
    def copies_read(self) -> int:
        return self.stats.inner_copies_read

    @copies_read.setter
    def copies_read(self, value: int) -> None:
        self.stats.inner_copies_read = value


#: The largest band: regions widened by delta are counted in whole cells (int64).
MAX_DELTA = float(2**52)


@naming_missing_files(
    lambda join: [(join.left.table, join.left.version), (join.right.table, join.right.version)]
)
@translating
class StructureJoin:
    """A probabilistic Structure-Join, evaluated when read."""

    def __init__(self, left, right, delta, threshold, method, engine, outer_side: str) -> None:
        self.left, self.right = left, right
        self.delta, self.threshold = delta, threshold
        self.method, self.engine = method, engine
        self.outer_side = outer_side
        self.statistics: JoinStatistics | None = None
        #: Which engine runs the join, and why (set when first asked or run).
        self.choice: Choice | None = None
        #: The in-process plan (block or routed) of the subarray-based join, and why.
        self.plan = None
        self._forced_plan: str | None = None
        self._result: pa.Table | None = None
        #: The versions of the left and right arrays the result was computed from (set when read).
        self._versions: tuple[int, int] | None = None

    @classmethod
    def create(cls, left, right, delta, threshold, method, engine, outer) -> StructureJoin:
        if not isinstance(getattr(right, "table", None), UncertainTable):  # an UncertainArray handle
            raise ValidationError(
                f"structure join of {left.schema.name}: the other side must be an uncertain array, got "
                f"{type(right).__name__}",
                array=left.schema.name,
            )
        ls, rs = left.schema, right.schema
        if ls.ndim != rs.ndim:
            raise ValidationError(
                f"structure join of {ls.name} ({ls.ndim} dimensions) and {rs.name} ({rs.ndim}): the arrays "
                "need the same number of dimensions",
                array=rs.name,
            )
        given = delta
        delta = as_number(delta)
        if not (0 < delta <= MAX_DELTA):
            raise ValidationError(
                f"structure join of {ls.name} and {rs.name}: delta must be a positive number of cells up to "
                f"2**52 (regions are whole cells in int64), got {given!r}",
                value=given,
            )
        lam = check_threshold(ls, left.layout, threshold, "structure join")
        check_threshold(rs, right.layout, threshold, "structure join")
        pair_structure(ls, rs)
        if method not in METHODS:
            raise ValidationError(
                f"structure join: method must be one of {', '.join(METHODS)}, got {method!r}"
            )
        check_engine(engine, "structure join")
        if outer not in ("auto", "left", "right"):
            raise ValidationError(f"structure join: outer must be 'auto', 'left' or 'right', got {outer!r}")
        if outer == "auto":
            outer = "left" if left.count() <= right.count() else "right"
        return cls(left, right, delta, lam, method, engine, outer)

    def _sides(self) -> tuple[Side, Side, bool]:
        """(outer, inner, swapped) at the newest versions until the result is read, then at the
        versions read (as a subarray's plan does)."""
        versions = self._versions or (self.left.version, self.right.version)
        left, right = (
            Side(h.table, v, h.table.layout_at(v))
            for h, v in zip((self.left, self.right), versions, strict=True)
        )
        return (left, right, False) if self.outer_side == "left" else (right, left, True)

    def force_plan(self, plan: str) -> StructureJoin:
        """Run the in-process subarray-based join with ``plan`` (block or routed) whatever the costs
        say (calibration times each plan); returns the join."""
        if plan not in ("block", "routed"):
            raise ValidationError(f"structure join: plan must be 'block' or 'routed', got {plan!r}")
        self._forced_plan, self.choice, self.plan = plan, None, None
        return self

    def choose(self) -> Choice:
        """Which engine runs the join, and why, from both sides' metadata (nothing is read). The
        baselines (``bnl``, ``index``) always run in-process."""
        if self.choice is None:
            outer, inner, _ = self._sides()
            estimate = read_estimate(outer.table, outer.version, jobs=JOIN_JOBS) + read_estimate(
                inner.table, inner.version, jobs=0
            )
            estimate = replace(estimate, pairs=expected_pairs(outer, inner, self.delta))
            if self.method != "sbj":
                reason = f"method {self.method} is an in-process baseline"
                self.choice = Choice("local", reason, estimate, {})
            else:
                from arrayviews.operators.uncertain_join_plans import choose_plan, plan_estimates

                executors = self.left._db.executors
                self.plan = choose_plan(
                    executors.costs, plan_estimates(outer, inner, self.delta, estimate), self._forced_plan
                )
                mode = executors.mode if self.engine == "auto" else self.engine
                choice = choose_executor(executors.costs, estimate, mode, self.plan.estimates[self.plan.plan])
                if choice.executor == "local":
                    choice = replace(
                        choice, reason=f"{choice.reason}; {self.plan.plan} plan: {self.plan.reason}"
                    )
                self.choice = choice
        return self.choice

    def explain(self) -> dict:
        """The evaluation plan: sides, layouts, per-cell Subarray regions (Prop. 4.2 / 4.3), and the
        executor with the reason it was chosen."""
        outer, inner, swapped = self._sides()
        choice = self.choose()
        walks = inner_walks_from_metadata(inner)

        def layout_of(side: Side) -> dict:
            return {
                "array": side.schema.name,
                "version": side.version,
                "scheme": side.layout.scheme,
                "step": None if side.layout.steps is None else list(side.layout.steps),
                "sigmas": side.layout.sigmas,
            }

        if outer.layout.scheme == STORE_MEAN:
            region = "Prop. 4.2: (min possible-range low of the cell's tuples - delta, max high + delta)"
        else:
            k = [0] * outer.schema.ndim if outer.layout.scheme == STORE_ALL else list(outer.layout.steps)
            region = f"Prop. 4.3: (cell - k_A - delta, cell + 1 + k_A + delta) with k_A = {k}"
        return {
            "operator": "structure_join",
            "method": self.method,
            "engine": choice.executor,
            "delta": self.delta,
            "threshold": self.threshold,
            "outer": layout_of(outer),
            "inner": layout_of(inner),
            "outer_is": "right" if swapped else "left",
            "outer_cell_region": region,
            "inner_expansion": {
                d: [int(lo), int(hi)]
                for d, lo, hi in zip(inner.schema.dimension_names, walks[0], walks[1], strict=True)
            },
            "outer_blocks": len(_outer_blocks(outer))
            if self.method != "sbj" or (choice.executor == "local" and self.plan.plan == "block")
            else "per inner chunk",
            "executor": choice.executor,
            "reason": choice.reason,
            **({"plan": self.plan.plan} if self.plan is not None and choice.executor == "local" else {}),
        }

    def to_arrow(self) -> pa.Table:
        if self._result is None:
            outer, inner, swapped = self._sides()
            structure = pair_structure(outer.schema, inner.schema)
            stats = JoinStatistics()
            started = time.perf_counter()
            if outer.version == 0 or inner.version == 0:
                parts = []
            elif self.method == "bnl":
                parts = bnl_local(outer, inner, self.delta, self.threshold, structure, stats)
            elif self.method == "index":
                parts = index_local(outer, inner, self.delta, self.threshold, structure, stats)
            elif self.choose().executor == "local" and self.plan.plan == "block":
                # in-process, the block plan: Alg. 1 in outer blocks under the memory quota
                parts = sbj_local(outer, inner, self.delta, self.threshold, structure, stats)
            else:
                # the routed plan: on Spark, or in-process when the cost model prices it lower
                from arrayviews.operators.uncertain_join_routed import sbj_routed

                engine = self.left._db.executors.engine(self.choose().executor)
                parts = sbj_routed(engine, outer, inner, self.delta, self.threshold, structure, stats)
            if self.method == "sbj" and self.choice is not None:
                # the run's report: which executor and plan ran, and why
                stats.extra["executor"] = self.choice.executor
                stats.extra["plan"] = self.plan.plan if self.choice.executor == "local" else "routed"
                stats.extra["reason"] = self.choice.reason
            self._result = _finish(parts, swapped, stats)
            self._versions = (inner.version, outer.version) if swapped else (outer.version, inner.version)
            stats.seconds = time.perf_counter() - started
            self.statistics = stats
        return self._result

    def to_pandas(self):
        return self.to_arrow().to_pandas()

    def count(self) -> int:
        return self.to_arrow().num_rows
