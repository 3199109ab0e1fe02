"""The R-tree baseline (the paper's index schemes, with the ``rtree`` library): an R-tree over the
possible ranges of a version's tuples, probed with a query box (Subarray) or with every outer
tuple's widened range (index join); the candidates' tuples are then fetched from the chunks of
their home copies and validated exactly like the native operators do.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from rtree import index as rtree_index

from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.uncertain import ID
from arrayviews.operators.uncertain_regions import QueryBox, union_chunks
from arrayviews.operators.uncertain_subarray import (
    SubarrayStatistics,
    evaluate_rows,
    result_schema,
    rows_to_result,
)
from arrayviews.storage import uncertain_layout as ul
from arrayviews.storage.uncertain_table import UncertainTable


@dataclass
class PossibleRangeIndex:
    """An in-memory R-tree over the possible ranges [first, last + 1) of every tuple of one version."""

    table: UncertainTable
    version: int
    tree: rtree_index.Index
    ids: np.ndarray  # entry -> tuple id
    home_cells: np.ndarray  # entry -> cell of the tuple's home copy
    build_seconds: float

    @classmethod
    def build(cls, table: UncertainTable, version: int) -> PossibleRangeIndex:
        started = time.perf_counter()
        storage = table.storage
        schema = table.schema
        columns = [ID, ul.ROLE] + [ul.first_column(d) for d in schema.dimension_names]
        columns += [ul.last_column(d) for d in schema.dimension_names]
        fragments = table.read(version, columns, roles="tuples")
        rows = ul.decode_rows(fragments, storage, columns)
        rows = rows.take(np.flatnonzero(rows.columns[ul.ROLE] == ul.ROLE_HOME))
        first = np.stack([rows.columns[ul.first_column(d)] for d in schema.dimension_names], axis=1)
        last = np.stack([rows.columns[ul.last_column(d)] for d in schema.dimension_names], axis=1)
        properties = rtree_index.Property()
        properties.dimension = max(2, schema.ndim)  # libspatialindex needs 2 dimensions at least
        properties.interleaved = True
        entries = np.arange(len(rows), dtype=np.int64)
        if len(rows):
            lows, highs = _padded(first.astype(np.float64), (last + 1).astype(np.float64))
            tree = rtree_index.Index((entries, lows, highs), properties=properties)
        else:
            tree = rtree_index.Index(properties=properties)
        return cls(table, version, tree, rows.columns[ID], rows.cells, time.perf_counter() - started)

    def candidates(self, lows: np.ndarray, highs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(query, entry) pairs whose boxes intersect, for query boxes given as (m, d) arrays."""
        if len(self.ids) == 0 or len(lows) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        lows, highs = _padded(np.asarray(lows, np.float64), np.asarray(highs, np.float64))
        hits, counts = self.tree.intersection_v(np.ascontiguousarray(lows), np.ascontiguousarray(highs))
        return np.repeat(np.arange(len(lows), dtype=np.int64), counts.astype(np.int64)), hits.astype(np.int64)

    def fetch(self, entries: np.ndarray, stats) -> ul.Rows:
        """The stored rows (home copies) of the given entries, read from the chunks holding them."""
        storage = self.table.storage
        if len(entries) == 0:
            return ul.decode_rows(ul.read_fragments([], storage, None), storage)
        entries = np.unique(entries)
        cells = self.home_cells[entries]
        selection = union_chunks(self.table.schema, cells, cells)
        files = self.table.dataset(self.version)
        before = files.row_groups_read
        fragments = ul.read_fragments(
            files, storage, None, selection.ranges, selection.filter(ChunkGrid.of(storage)), roles="tuples"
        )
        if hasattr(stats, "row_groups_read"):
            stats.row_groups_read += files.row_groups_read - before
        rows = ul.decode_rows(fragments, storage)
        stats.fragments_read += fragments.num_rows
        stats.copies_read += len(rows)
        wanted = np.isin(rows.columns[ID], self.ids[entries]) & (rows.columns[ul.ROLE] == ul.ROLE_HOME)
        return rows.take(np.flatnonzero(wanted))


def _padded(lows: np.ndarray, highs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Boxes of a 1-D array as 2-D boxes (the second side [0, 1] for all), others unchanged."""
    if lows.shape[1] >= 2:
        return lows, highs
    return np.pad(lows, ((0, 0), (0, 1))), np.pad(highs, ((0, 0), (0, 1)), constant_values=1.0)


def index_subarray(
    table: UncertainTable,
    version: int,
    box: QueryBox | None,
    threshold: float,
    tree: PossibleRangeIndex | None = None,
) -> tuple[pa.Table, SubarrayStatistics]:
    """Subarray through the R-tree: probe with the query box, fetch the candidates, validate."""
    stats = SubarrayStatistics()
    schema = table.schema
    if box is None or version == 0:
        return result_schema(schema).empty_table(), stats
    tree = tree or PossibleRangeIndex.build(table, version)
    stats.extra["index_build_seconds"] = tree.build_seconds
    started = time.perf_counter()
    low = np.array([[lo for lo, _ in box.cells]], np.float64)
    high = np.array([[hi + 1 for _, hi in box.cells]], np.float64)
    _, entries = tree.candidates(low, high)
    stats.extra["index_candidates"] = len(entries)
    rows = tree.fetch(entries, stats)
    stats.seconds_io = time.perf_counter() - started
    started = time.perf_counter()
    kept, probabilities = evaluate_rows(rows, schema, box, threshold, stats)
    result = rows_to_result(kept, probabilities, schema)
    stats.results = result.num_rows
    stats.seconds_cpu = time.perf_counter() - started
    return result, stats
