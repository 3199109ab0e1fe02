"""Probabilistic Subarray (Definition 2.1): every tuple whose probability of lying in the query box
is at least lambda, once, with that probability.

Two steps (section 3). I/O: read the chunks of the expanded query region of the version's scheme
(store-all: the box; store-multiple: the box widened by k_i cells, Prop. 3.1; store-mean: the union
of the walks to the per-cell fences). CPU: drop the copies of tuples already seen (the duplicates of
replication) before any arithmetic, keep tuples whose possible range meets the box (a tuple outside
it has probability below epsilon < lambda), then compute the exact probability, cheap factors first
(closed forms for independent dimensions, the Frechet bound before a bivariate integral), and keep
those at or above lambda.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from arrayviews.kernels.probability import box_probabilities
from arrayviews.model.copy_layout import StorageLayout
from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.types import arrow_type
from arrayviews.model.uncertain import ID, PROBABILITY, UncertainSchema
from arrayviews.operators.uncertain_regions import ExpandedRegion, QueryBox, expand
from arrayviews.storage import uncertain_layout as ul
from arrayviews.storage.uncertain_table import UncertainTable


@dataclass
class SubarrayStatistics:
    """What one evaluation did (the I/O and CPU work the cost model estimates)."""

    fragments_read: int = 0
    row_groups_read: int = 0
    copies_read: int = 0
    tuples_read: int = 0  # distinct tuples after duplicate removal
    tuples_in_range: int = 0  # after the possible-range filter
    integrals: int = 0  # bivariate integrations
    results: int = 0
    seconds_io: float = 0.0
    seconds_cpu: float = 0.0
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "fragments_read": self.fragments_read,
            "row_groups_read": self.row_groups_read,
            "copies_read": self.copies_read,
            "tuples_read": self.tuples_read,
            "tuples_in_range": self.tuples_in_range,
            "integrals": self.integrals,
            "results": self.results,
            "seconds_io": self.seconds_io,
            "seconds_cpu": self.seconds_cpu,
            **self.extra,
        }


def result_schema(schema: UncertainSchema) -> pa.Schema:
    """Columns of a Subarray result: the input columns of the tuples, then ``probability``."""
    fields = [pa.field(ID, pa.int64())]
    for d in schema.dimension_names:
        fields += [pa.field(d, pa.float64()), pa.field(f"{d}_sigma", pa.float64())]
    fields += [pa.field(schema.correlation_column(p), pa.float64()) for p in schema.correlations]
    for name, kind in ul.value_columns(schema):
        fields.append(pa.field(name, arrow_type(kind)))
    fields.append(pa.field(PROBABILITY, pa.float64()))
    return pa.schema(fields)


def rows_to_result(rows: ul.Rows, probabilities: np.ndarray, schema: UncertainSchema) -> pa.Table:
    """The result table of tuples given as storage rows, sorted by id."""
    order = np.argsort(rows.columns[ID], kind="stable")
    target = result_schema(schema)
    arrays = [pa.array(rows.columns[ID][order], pa.int64())]
    for d in schema.dimension_names:
        arrays.append(pa.array(rows.columns[ul.mean_column(d)][order], pa.float64()))
        arrays.append(pa.array(rows.columns[ul.sigma_column(d)][order], pa.float64()))
    for p in schema.correlations:
        arrays.append(pa.array(rows.columns[schema.correlation_column(p)][order], pa.float64()))
    for name, _ in ul.value_columns(schema):
        mask = rows.nulls.get(name)
        arrays.append(
            pa.array(
                rows.columns[name][order], target.field(name).type, mask=None if mask is None else mask[order]
            )
        )
    arrays.append(pa.array(np.asarray(probabilities)[order], pa.float64()))
    return pa.Table.from_arrays(arrays, schema=target)


def position_arrays(rows: ul.Rows, schema: UncertainSchema) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Means (n, d), sigmas (n, d) and correlations (n, p) of rows, contiguous for the kernels."""
    n = len(rows)
    means = np.empty((n, schema.ndim), np.float64)
    sigmas = np.empty((n, schema.ndim), np.float64)
    for k, d in enumerate(schema.dimension_names):
        means[:, k] = rows.columns[ul.mean_column(d)]
        sigmas[:, k] = rows.columns[ul.sigma_column(d)]
    corrs = np.empty((n, len(schema.correlations)), np.float64)
    for q, p in enumerate(schema.correlations):
        corrs[:, q] = rows.columns[schema.correlation_column(p)]
    return means, sigmas, corrs


def dimension_groups(schema: UncertainSchema) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the independent dimensions and (p, 2) indices of the correlated pairs."""
    pairs = schema.pair_indices
    paired = set(pairs.reshape(-1).tolist())
    singles = np.array([k for k in range(schema.ndim) if k not in paired], dtype=np.int64)
    return singles, pairs


def range_overlaps(rows: ul.Rows, schema: UncertainSchema, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Mask of rows whose possible range meets the cell box [low, high] in every dimension."""
    keep = np.ones(len(rows), dtype=bool)
    for k, d in enumerate(schema.dimension_names):
        keep &= (rows.columns[ul.first_column(d)] <= high[k]) & (rows.columns[ul.last_column(d)] >= low[k])
    return keep


def evaluate_rows(
    rows: ul.Rows, schema: UncertainSchema, box: QueryBox, threshold: float, stats: SubarrayStatistics
) -> tuple[ul.Rows, np.ndarray]:
    """The CPU step on retrieved copies: duplicates out, range filter, exact probabilities, threshold."""
    _, first = np.unique(rows.columns[ID], return_index=True)
    rows = rows.take(np.sort(first))
    stats.tuples_read += len(rows)
    low = np.array([lo for lo, _ in box.cells], np.int64)
    high = np.array([hi for _, hi in box.cells], np.int64)
    rows = rows.take(np.flatnonzero(range_overlaps(rows, schema, low, high)))
    stats.tuples_in_range += len(rows)
    means, sigmas, corrs = position_arrays(rows, schema)
    singles, pairs = dimension_groups(schema)
    probabilities, integrals = box_probabilities(
        means, sigmas, corrs, box.lows, box.highs, singles, pairs, float(threshold)
    )
    stats.integrals += int(integrals)
    keep = probabilities >= threshold
    return rows.take(np.flatnonzero(keep)), probabilities[keep]


@dataclass(frozen=True)
class SubarrayPlan:
    """The I/O plan of one query: the version, its layout, the box and its expanded region."""

    table: UncertainTable
    version: int
    layout: StorageLayout
    box: QueryBox | None
    threshold: float
    region: ExpandedRegion | None

    def describe(self) -> dict:
        """What EXPLAIN shows: scheme and step, the query, the expanded region, the chunks to read."""
        schema = self.table.schema
        description = {
            "operator": "subarray",
            "array": schema.name,
            "version": self.version,
            "scheme": self.layout.scheme,
            "step": list(self.layout.steps) if self.layout.steps is not None else None,
            "sigmas": self.layout.sigmas,
            "threshold": self.threshold,
            "query": None
            if self.box is None
            else {
                d: list(c)
                for d, c, k in zip(schema.dimension_names, self.box.cells, self.box.constrained, strict=True)
                if k
            },
            "query_cells": 0 if self.box is None else self.box.cell_count,
        }
        if self.region is not None:
            description["expanded_region"] = {
                d: [lo, hi]
                for d, lo, hi in zip(schema.dimension_names, self.region.low, self.region.high, strict=True)
            }
            description["expanded_cells"] = self.region.cells
            description["chunks_to_read"] = self.region.chunks.count
            if self.region.fence_records:
                description["fence_records_read"] = self.region.fence_records
                description["fence_boxes"] = self.region.fence_boxes
        return description


def plan_subarray(
    table: UncertainTable, version: int, box: QueryBox | None, threshold: float
) -> SubarrayPlan:
    layout_ = table.layout_at(version)
    if box is None or version == 0:
        return SubarrayPlan(table, version, layout_, box, threshold, None)
    return SubarrayPlan(table, version, layout_, box, threshold, expand(table, version, layout_, box))


def run_subarray(plan: SubarrayPlan) -> tuple[pa.Table, SubarrayStatistics]:
    """Execute a plan on the driver (pyarrow reads of the chunks, numba kernels)."""
    schema = plan.table.schema
    stats = SubarrayStatistics()
    if plan.region is None or plan.region.chunks.ranges is None:
        return result_schema(schema).empty_table(), stats
    started = time.perf_counter()
    storage = plan.table.storage
    selection = plan.region.chunks
    files = plan.table.dataset(plan.version)
    before = files.row_groups_read
    fragments = ul.read_fragments(
        files, storage, None, selection.ranges, selection.filter(ChunkGrid.of(storage)), roles="tuples"
    )
    stats.row_groups_read = files.row_groups_read - before
    rows = ul.decode_rows(fragments, storage)
    stats.fragments_read = fragments.num_rows
    stats.copies_read = len(rows)
    stats.seconds_io = time.perf_counter() - started
    started = time.perf_counter()
    kept, probabilities = evaluate_rows(rows, schema, plan.box, plan.threshold, stats)
    result = rows_to_result(kept, probabilities, schema)
    stats.results = result.num_rows
    stats.seconds_cpu = time.perf_counter() - started
    return result, stats
