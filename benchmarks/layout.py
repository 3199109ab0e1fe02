"""The measurement behind the storage layout (docs/storage-layout.md): chunk rows with a dense/sparse
encoding, against one row per cell and against chunk rows that are always sparse.

All three are written and read with pyarrow alone (no Spark), so only the layout differs. A full
read produces what a reader wants: the dense numpy grid for the dense array (block copies from chunk
rows, a scatter by coordinates from cell rows) and the table of cells for the sparse one.
Run: ``.venv/bin/python -m benchmarks.run layout``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.schema_parser import parse_schema
from arrayviews.operators import staging
from arrayviews.storage import assemble, codec, layout
from arrayviews.storage.files import write_parquet
from benchmarks.common import bar_plot, scratch_dir, timed, write_results


def _write_chunked(cells, schema, folder: Path, force_sparse: bool) -> tuple[float, Path]:
    path = folder / ("sparse_chunks.parquet" if force_sparse else "chunks.parquet")

    def write() -> None:
        if schema.name == "D" and not force_sparse:
            # A dense grid arrives as a block: arrayviews encodes it chunk by chunk without coordinates.
            block = cells["v"].reshape(schema.shape)
            tables = list(staging.dense_block_tables(schema, {"v": block}, (0, 0), None, 1))
            write_parquet(pa.concat_tables(tables), str(path))
            return
        coords = np.stack([cells[d] for d in schema.dimension_names], axis=1)
        sorted_cells = assemble.sort_cells(coords, {"v": cells["v"]}, {}, schema)
        if force_sparse:
            sorted_cells.volumes = sorted_cells.volumes * 10**6  # never dense
        tables = assemble.encode_sorted(sorted_cells, schema, 1, target_bytes=1 << 62)
        write_parquet(tables[0], str(path))

    seconds, _ = timed(write)
    return seconds, path


def _write_cells(cells, folder: Path) -> tuple[float, Path]:
    path = folder / "cells.parquet"
    seconds, _ = timed(lambda: pq.write_table(pa.table(cells), path, row_group_size=1 << 20))
    return seconds, path


def _dense_from_chunks(path: Path, schema) -> np.ndarray:
    """The dense grid from chunk rows: one block copy per chunk."""
    out = np.empty(schema.shape)
    grid = ChunkGrid.of(schema)
    for batch in pq.read_table(path).to_batches():
        cell_data, cell_offsets = layout.binary_parts(batch.column(layout.CELLS))
        value_data, value_offsets = layout.binary_parts(batch.column(layout.value_column("v")))
        for row in range(batch.num_rows):
            chunk = tuple(batch.column(layout.chunk_column(d))[row].as_py() for d in schema.dimension_names)
            low, _ = grid.chunk_bounds(chunk)
            shape = grid.chunk_shape(chunk)
            block, _ = codec.dense_block(
                bool(batch.column(layout.DENSE)[row].as_py()),
                batch.column(layout.N_CELLS)[row].as_py(),
                int(np.prod(shape)),
                value_data[value_offsets[row] : value_offsets[row + 1]],
                np.float64,
                cell_data[cell_offsets[row] : cell_offsets[row + 1]],
            )
            out[tuple(slice(lo, lo + n) for lo, n in zip(low, shape, strict=True))] = block.reshape(shape)
    return out


def _dense_from_cells(path: Path, shape) -> np.ndarray:
    """The dense grid from one row per cell: read, then scatter by coordinates."""
    table = pq.read_table(path)
    out = np.empty(shape)
    out[np.asarray(table.column("i")), np.asarray(table.column("j"))] = np.asarray(table.column("v"))
    return out


def _read_chunked(path: Path, schema, box=None) -> int:
    if box is None:
        if schema.name == "D":
            return _dense_from_chunks(path, schema).size
        return layout.fragments_to_cells(pq.read_table(path), schema).num_rows
    grid_ranges = [
        ((lo - d.chunk_origin) // d.chunk_length, (hi - d.chunk_origin) // d.chunk_length)
        for d, (lo, hi) in zip(schema.dimensions, box, strict=True)
    ]
    condition = None
    for d, (first, last) in zip(schema.dimension_names, grid_ranges, strict=True):
        term = (ds.field(layout.chunk_column(d)) >= first) & (ds.field(layout.chunk_column(d)) <= last)
        condition = term if condition is None else condition & term
    cells = layout.fragments_to_cells(ds.dataset(path).to_table(filter=condition), schema)
    keep = np.ones(cells.num_rows, dtype=bool)
    for d, (lo, hi) in zip(schema.dimension_names, box, strict=True):
        column = np.asarray(cells.column(d))
        keep &= (column >= lo) & (column <= hi)
    return int(keep.sum())


def _read_cells(path: Path, names, box=None, shape=None) -> int:
    if box is None:
        if shape is not None:
            return _dense_from_cells(path, shape).size
        return pq.read_table(path).num_rows
    condition = None
    for d, (lo, hi) in zip(names, box, strict=True):
        term = (ds.field(d) >= lo) & (ds.field(d) <= hi)
        condition = term if condition is None else condition & term
    return ds.dataset(path).to_table(filter=condition).num_rows


def _measure(cells, schema, box, folder: Path) -> dict:
    rows = {}
    for label, writer in (
        ("chunk rows, dense/sparse", lambda: _write_chunked(cells, schema, folder, False)),
        ("chunk rows, always sparse", lambda: _write_chunked(cells, schema, folder, True)),
        ("one row per cell", lambda: _write_cells(cells, folder)),
    ):
        write_s, path = writer()
        if label == "one row per cell":
            dense_shape = schema.shape if schema.name == "D" else None
            read_s, n = timed(
                lambda p=path, s=dense_shape: _read_cells(p, schema.dimension_names, shape=s), repeat=2
            )
            box_s, m = timed(lambda p=path: _read_cells(p, schema.dimension_names, box), repeat=2)
        else:
            read_s, n = timed(lambda p=path: _read_chunked(p, schema), repeat=2)
            box_s, m = timed(lambda p=path: _read_chunked(p, schema, box), repeat=2)
        rows[label] = {
            "bytes": path.stat().st_size,
            "write_s": write_s,
            "read_s": read_s,
            "box_read_s": box_s,
            "cells": n,
            "box_cells": m,
        }
    counts = {r["box_cells"] for r in rows.values()} | set()
    assert len({r["cells"] for r in rows.values()}) == 1 and len(counts) == 1, rows
    return rows


def run(db, quick: bool = False) -> dict:
    del db  # layout measurements use pyarrow only
    rng = np.random.default_rng(7)
    folder = Path(scratch_dir("arrayviews-layout-"))
    try:
        side = 1000 if quick else 4000
        grid = np.indices((side, side)).reshape(2, -1)
        dense_cells = {"i": grid[0], "j": grid[1], "v": rng.normal(size=side * side)}
        dense_schema = parse_schema(f"D<v:float64>[i=0:{side - 1}:500; j=0:{side - 1}:500]")
        box = ((side // 3, side // 3 + side // 10 - 1),) * 2
        dense = _measure(dense_cells, dense_schema, box, folder)
        n = 200_000 if quick else 2_000_000
        extent = 100_000
        sparse_cells = {d: rng.integers(0, extent, n) for d in ("t", "ra", "dec")}
        keys = (sparse_cells["t"] * extent + sparse_cells["ra"]) * extent + sparse_cells["dec"]
        _, first = np.unique(keys, return_index=True)
        sparse_cells = {k: v[first] for k, v in sparse_cells.items()}
        sparse_cells["v"] = rng.normal(size=len(first))
        sparse_schema = parse_schema(
            f"S<v:float64>[t=0:{extent - 1}:5000; ra=0:{extent - 1}:5000; dec=0:{extent - 1}:5000]"
        )
        sparse_box = ((0, 20_000 - 1), (0, 20_000 - 1), (0, 100_000 - 1))
        sparse = _measure(sparse_cells, sparse_schema, sparse_box, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {
        "dense": {"cells": side * side, "layouts": dense},
        "sparse": {"cells": len(first), "layouts": sparse},
    }


def report(results: dict, quick: bool) -> None:
    name = "layout_quick" if quick else "layout"
    write_results(name, {"quick": quick, "results": results})
    labels, series = [], {"write": [], "full read": [], "1% box read": []}
    for kind in ("dense", "sparse"):
        base = results[kind]["layouts"]["one row per cell"]
        for label, row in results[kind]["layouts"].items():
            labels.append(f"{kind}: {label}")
            series["write"].append(row["write_s"])
            series["full read"].append(row["read_s"])
            series["1% box read"].append(row["box_read_s"])
            print(
                f"{kind:6} {label:26} {row['bytes'] / 1e6:8.1f} MB ({row['bytes'] / base['bytes']:.2f}x of per-cell), "
                f"write {row['write_s']:.2f} s ({row['write_s'] / base['write_s']:.2f}x), "
                f"read {row['read_s']:.2f} s ({row['read_s'] / base['read_s']:.2f}x), "
                f"box {row['box_read_s']:.3f} s ({row['box_read_s'] / base['box_read_s']:.2f}x)"
            )
    bar_plot(name, "storage layouts, pyarrow only (ratios in the JSON)", labels, series, "seconds")
