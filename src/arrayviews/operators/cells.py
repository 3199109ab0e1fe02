"""Helpers shared by operators that work on the cells of a batch of fragments and re-encode them."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

from arrayviews.model.schema import ArraySchema
from arrayviews.storage import layout
from arrayviews.storage.assemble import encode_sorted, sort_cells

#: Version stamped on fragments that are computed but not stored yet.
UNSTORED_VERSION = 0

CellFunction = Callable[[pa.Table], pa.Table]


def cell_columns(cells: pa.Table, schema: ArraySchema) -> tuple[np.ndarray, dict, dict]:
    """Coordinates (n, d), attribute values and null masks of a cell table."""
    coords = np.stack(
        [np.asarray(cells.column(d), dtype=np.int64) for d in schema.dimension_names], axis=1
    ).reshape(cells.num_rows, schema.ndim)
    values, nulls = {}, {}
    for attribute in schema.attributes:
        column = cells.column(attribute.name)
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        if column.null_count:
            nulls[attribute.name] = np.asarray(column.is_null())
            column = column.fill_null(layout.null_filler(column.type))
        values[attribute.name] = np.asarray(column)
    return coords, values, nulls


def cells_to_fragment_table(
    cells: pa.Table, schema: ArraySchema, version: int = UNSTORED_VERSION
) -> pa.Table:
    """Encode a cell table (cells must be distinct and inside the range) as fragment rows."""
    if cells.num_rows == 0:
        return layout.empty_fragment_table(schema)
    coords, values, nulls = cell_columns(cells, schema)
    tables = encode_sorted(sort_cells(coords, values, nulls, schema), schema, version, target_bytes=1 << 62)
    return tables[0]


def transform_cells(
    table: pa.Table, in_schema: ArraySchema, out_schema: ArraySchema, function: CellFunction
) -> pa.Table:
    """Decode a fragment batch to cells, apply ``function`` (cells in, cells out), encode again."""
    cells = layout.fragments_to_cells(table, in_schema)
    return cells_to_fragment_table(function(cells), out_schema)
