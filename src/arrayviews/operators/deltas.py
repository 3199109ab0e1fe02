"""What changed in an array between two versions, at cell level: the signed delta of view maintenance.

Every version of an array is an Iceberg snapshot, so the history itself is the change log: the files
a later snapshot dropped and the files it added hold the fragments that may have changed. The work is
planned per chunk from fragment metadata first (chunk numbers, cell counts and the version that wrote
each fragment; no cell data): a chunk whose added fragments were all written at or before the old
version and hold as many cells as its dropped fragments is unchanged (see :func:`changed_chunks`), so
a compaction reads no cells at all. Only the other chunks are read, from the dropped and added files
alone, and compared cell by cell: cells only in dropped files were deleted (``minus``), cells only in
added files were inserted (``plus``), cells in both with different values were updated (old value in
``minus``, new value in ``plus``), and cells present in both with equal values (fragments that a
rewrite merely copied) cancel out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.schema import ArraySchema
from arrayviews.operators.cells import cell_columns
from arrayviews.operators.staging import bounding_ranges, chunk_matrix, member_rows
from arrayviews.storage import layout
from arrayviews.storage.array_table import ArrayTable
from arrayviews.storage.assemble import sort_cells
from arrayviews.storage.files import read_parquet_files

if TYPE_CHECKING:
    from arrayviews.operators.source import StoredSource


@dataclass
class Delta:
    """The cells removed (old values) and added (new values) between two versions, in cell form."""

    schema: ArraySchema
    old_version: int
    new_version: int
    minus: pa.Table
    plus: pa.Table

    @property
    def empty(self) -> bool:
        return self.minus.num_rows == 0 and self.plus.num_rows == 0

    def coords(self, which: str) -> np.ndarray:
        table = self.minus if which == "minus" else self.plus
        return np.stack(
            [np.asarray(table.column(d), dtype=np.int64) for d in self.schema.dimension_names], axis=1
        ).reshape(table.num_rows, self.schema.ndim)

    def touched_chunks(self) -> np.ndarray:
        """Chunk numbers (k, d) of every chunk with a changed cell."""
        coords = np.vstack([self.coords("minus"), self.coords("plus")])
        if len(coords) == 0:
            return np.zeros((0, self.schema.ndim), dtype=np.int64)
        return np.unique(ChunkGrid.of(self.schema).chunk_of(coords), axis=0)


def _files(array: ArrayTable, version: int) -> dict[str, object]:
    return {f.file_path: f for f in array.data_files(version)} if version else {}


def _equal(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Element-wise equality where NaN equals NaN (a NaN that stays NaN is no change)."""
    same = left == right
    if left.dtype.kind == "f":
        same |= np.isnan(left) & np.isnan(right)
    return same


def _metadata(paths: list[str], schema: ArraySchema) -> pa.Table:
    """Chunk numbers, cell counts and writing versions of the fragments of ``paths`` (no cell data)."""
    columns = [*layout.chunk_columns(schema), layout.N_CELLS, layout.VERSION]
    return read_parquet_files(paths, columns=columns, schema=layout.fragment_schema(schema))


def changed_chunks(schema: ArraySchema, removed: pa.Table, added: pa.Table, old_version: int) -> np.ndarray:
    """The chunks (m, d) that may hold a change, from the metadata of the fragments of the dropped
    (``removed``) and added files between ``old_version`` and a later version.

    A chunk is unchanged when every fragment added for it was written at or before ``old_version``
    and the added fragments hold as many cells as the dropped ones. Why that is exact: a fragment is
    stamped with the version that wrote it, and a compaction stamps a merged fragment with the newest
    version among its inputs; files never return once dropped, so a fragment stamped at or before
    ``old_version`` and present later holds only cells (with their values) that were present at
    ``old_version``. The cells of one chunk in one version are disjoint across fragments, so such
    added cells lie among the dropped cells of the chunk, and as many of them means the same cells.
    """
    keys = np.vstack([chunk_matrix(removed, schema), chunk_matrix(added, schema)])
    if len(keys) == 0:
        return np.zeros((0, schema.ndim), np.int64)
    chunks, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    dropped, new = inverse[: removed.num_rows], inverse[removed.num_rows :]
    removed_cells = np.zeros(len(chunks), np.int64)
    np.add.at(removed_cells, dropped, np.asarray(removed.column(layout.N_CELLS), np.int64))
    added_cells = np.zeros(len(chunks), np.int64)
    np.add.at(added_cells, new, np.asarray(added.column(layout.N_CELLS), np.int64))
    newest = np.full(len(chunks), -1, np.int64)
    np.maximum.at(newest, new, np.asarray(added.column(layout.VERSION), np.int64))
    return chunks[(newest > old_version) | (removed_cells != added_cells)]


def _chunk_cells(paths: list[str], schema: ArraySchema, chunks: np.ndarray) -> pa.Table:
    """The cells of ``chunks`` held in the files ``paths`` (only the fragments of those chunks)."""
    if not paths or len(chunks) == 0:
        return layout.fragments_to_cells(layout.empty_fragment_table(schema), schema)
    fragments = read_parquet_files(
        paths,
        row_filter=layout.chunk_ranges_filter(schema, bounding_ranges(chunks)),
        schema=layout.fragment_schema(schema),
    )
    fragments = fragments.filter(pa.array(member_rows(chunk_matrix(fragments, schema), chunks)))
    return layout.fragments_to_cells(fragments, schema)


def version_delta(
    array: ArrayTable, old_version: int, new_version: int, schema: ArraySchema | None = None
) -> Delta:
    """The cell-level delta of ``array`` from ``old_version`` to ``new_version``, over the attributes
    of ``schema`` (default the table's; a view read as an array passes its public ones, so a cell
    whose hidden state alone changed is not in the delta)."""
    schema = schema if schema is not None else array.schema
    before, after = _files(array, old_version), _files(array, new_version)
    removed = [path for path in before if path not in after]
    added = [path for path in after if path not in before]
    changed = changed_chunks(schema, _metadata(removed, schema), _metadata(added, schema), old_version)
    old = _chunk_cells(removed, schema, changed)
    new = _chunk_cells(added, schema, changed)
    if old.num_rows == 0 or new.num_rows == 0:
        return Delta(schema, old_version, new_version, old, new)
    # Sort both sides together; a coordinate held by both shows up as two adjacent cells.
    both = pa.concat_tables([old, new])
    coords, _, _ = cell_columns(both, schema.with_attributes([]))
    sorted_cells = sort_cells(coords, {}, {}, schema)  # order: row of ``both``; old rows come first
    order = sorted_cells.order
    bounds = sorted_cells.bounds
    same_chunk = np.ones(len(order) - 1, dtype=bool)
    same_chunk[bounds[1:-1] - 1] = False
    pair = np.flatnonzero(same_chunk & (sorted_cells.offsets[1:] == sorted_cells.offsets[:-1]))
    first, second = order[pair], order[pair + 1]  # rows of ``both``: the old cell sorts first
    first, second = np.minimum(first, second), np.maximum(first, second)
    unchanged = np.ones(len(pair), dtype=bool)
    for attribute in schema.attributes:
        column = both.column(attribute.name).combine_chunks()
        values = np.asarray(column.fill_null(layout.null_filler(column.type)))
        nulls = np.asarray(column.is_null())
        unchanged &= (nulls[first] == nulls[second]) & (nulls[first] | _equal(values[first], values[second]))
    drop = np.zeros(both.num_rows, dtype=bool)
    drop[first[unchanged]] = True
    drop[second[unchanged]] = True
    keep_old = ~drop[: old.num_rows]
    keep_new = ~drop[old.num_rows :]
    return Delta(
        schema, old_version, new_version, old.filter(pa.array(keep_old)), new.filter(pa.array(keep_new))
    )


def source_delta(old: StoredSource, new: StoredSource) -> Delta:
    """The delta between two versions of one source, over the attributes the source reads."""
    return version_delta(new.table, old.version, new.version, new.schema)
