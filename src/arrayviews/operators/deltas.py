"""What changed in an array between two versions, at cell level: the signed delta of view maintenance.

Every version of an array is an Iceberg snapshot, so the history itself is the change log: the files
a later snapshot dropped and the files it added hold the fragments that may have changed. Cells are
compared chunk by chunk: cells only in dropped files were deleted (``minus``), cells only in added
files were inserted (``plus``), cells in both with different values were updated (old value in
``minus``, new value in ``plus``), and cells present in both with equal values (fragments that a
rewrite or a compaction merely copied) cancel out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.schema import ArraySchema
from arrayviews.operators.cells import cell_columns
from arrayviews.storage import layout
from arrayviews.storage.array_table import ArrayTable
from arrayviews.storage.assemble import sort_cells
from arrayviews.storage.files import read_parquet_files


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


def version_delta(array: ArrayTable, old_version: int, new_version: int) -> Delta:
    """The cell-level delta of ``array`` from ``old_version`` to ``new_version``."""
    schema = array.schema
    before, after = _files(array, old_version), _files(array, new_version)
    removed = [path for path in before if path not in after]
    added = [path for path in after if path not in before]
    fragment_schema = layout.fragment_schema(schema)
    old = layout.fragments_to_cells(read_parquet_files(removed, schema=fragment_schema), schema)
    new = layout.fragments_to_cells(read_parquet_files(added, schema=fragment_schema), schema)
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
        values = np.asarray(column.fill_null(False if pa.types.is_boolean(column.type) else 0))
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
