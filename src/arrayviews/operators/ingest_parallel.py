"""Inserting cells that arrive as an engine's data set (a user's Spark DataFrame, or cell files the
engine read): tasks gather each chunk's cells, find duplicates, and write the fragments as new files.

The driver has checked the data set first (``Engine.checked_cells``: names, types, ranges, nulls).
Duplicate cells are found inside the tasks: every cell of a chunk meets in one task.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from arrayviews.execution.engine import Data, Engine, WrittenFile, conform
from arrayviews.model.schema import ArraySchema
from arrayviews.operators.cells import cell_columns
from arrayviews.operators.ingest import describe_cells
from arrayviews.operators.rechunk import CHUNK_KEY_PREFIX
from arrayviews.storage import layout
from arrayviews.storage.assemble import encode_sorted, sort_cells
from arrayviews.storage.files import new_data_file_uri, write_parquet

#: What each task reports: the files it wrote, or (one row) how many duplicate cells it found.
TASK_SCHEMA = pa.schema(
    [
        ("uri", pa.string()),
        ("rows", pa.int64()),
        ("nbytes", pa.int64()),
        ("cells", pa.int64()),
        ("duplicates", pa.int64()),
        ("duplicate_example", pa.string()),
    ]
)


def _assemble_and_write(
    tables: Iterator[pa.Table], schema: ArraySchema, version: int, directory: str
) -> Iterator[pa.Table]:
    target = layout.cell_schema(schema)
    parts = [conform(t, target) for t in tables]
    if not parts:
        return
    coords, values, nulls = cell_columns(pa.concat_tables(parts), schema)
    cells = sort_cells(coords, values, nulls, schema)
    duplicates = cells.duplicates()
    if len(duplicates):
        example = describe_cells(schema, duplicates)
        yield pa.table(
            {
                "uri": [""],
                "rows": [0],
                "nbytes": [0],
                "cells": [0],
                "duplicates": [len(duplicates)],
                "duplicate_example": [example],
            },
            schema=TASK_SCHEMA,
        )
        return
    written = []
    for table in encode_sorted(cells, schema, version):
        uri = new_data_file_uri(directory)
        size = write_parquet(table, uri)
        written.append((uri, table.num_rows, size, int(np.sum(table.column(layout.N_CELLS)))))
    yield pa.table(
        {
            "uri": [w[0] for w in written],
            "rows": [w[1] for w in written],
            "nbytes": [w[2] for w in written],
            "cells": [w[3] for w in written],
            "duplicates": [0] * len(written),
            "duplicate_example": [""] * len(written),
        },
        schema=TASK_SCHEMA,
    )


def stage_cells(
    engine: Engine, cells: Data, schema: ArraySchema, version: int, directory: str
) -> tuple[list[WrittenFile], int, str]:
    """Tasks chunk and write checked cells (one shuffle by chunk); returns the files written, the
    number of duplicate cells found and an example of them."""
    keys = [(CHUNK_KEY_PREFIX + d.name, d.name, d.chunk_origin, d.chunk_length) for d in schema.dimensions]
    keyed = engine.with_floor_keys(cells, keys)
    function = functools.partial(_assemble_and_write, schema=schema, version=version, directory=directory)
    reports = engine.collect(
        engine.map_partitions_by(keyed, [k[0] for k in keys], function, TASK_SCHEMA), TASK_SCHEMA
    ).to_pylist()
    files = [WrittenFile(r["uri"], r["rows"], r["nbytes"], r["cells"]) for r in reports if r["uri"]]
    duplicates = sum(r["duplicates"] for r in reports)
    example = next((r["duplicate_example"] for r in reports if r["duplicates"]), "")
    return files, duplicates, example
