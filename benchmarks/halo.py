"""Halo planning in many dimensions: a window over d dimensions of extent 50 (chunks of 10) holding
50 scattered cells, window reach 1 in every dimension, d = 2 .. 10.

Baseline (measured in the same run): the halo planned by visiting every neighbour chunk of each
fragment (``3**d`` of them, 59049 in 10 dimensions), as the window operator did before. New: the
targets found from the fragment's cells. Both cut the same fragments (in-process, single thread),
and both run end to end on Spark (same pipeline as ``Array.window``, only the planning differs).

Run: ``.venv/bin/python -m benchmarks.run halo`` (``--quick``: d up to 6).
"""

from __future__ import annotations

import functools

import numpy as np

from arrayviews.execution import jobs
from arrayviews.operators import halo
from arrayviews.operators.reduce import output_attributes, parse_calls
from arrayviews.operators.window import WindowJob, _window_chunk
from arrayviews.storage import layout
from benchmarks.common import RESULTS, bar_plot, timed, write_results

EXTENT, CHUNK, CELLS = 50, 10, 50
CALLS = ("sum(v)", "count(*)")


def _array(db, ndim: int, seed: int = 0):
    name = f"halo{ndim}"
    if name in db.arrays():
        db.drop_array(name)
    dims = "; ".join(f"d{k}=0:{EXTENT - 1}:{CHUNK}" for k in range(ndim))
    array = db.create_array(f"{name}<v:float64>[{dims}]")
    rng = np.random.default_rng(seed)
    coords = np.unique(rng.integers(0, EXTENT, size=(CELLS, ndim)), axis=0)
    cells = {f"d{k}": coords[:, k] for k in range(ndim)}
    cells["v"] = rng.random(len(coords))
    array.insert(cells)
    return array


def _window(db, array, plan: str) -> int:
    """``array.window`` with reach 1 everywhere, halo planned by ``plan``; returns the output cells."""
    schema = array.schema
    before = after = (1,) * schema.ndim
    calls = parse_calls(schema, CALLS)
    out_schema = schema.with_attributes(output_attributes(schema, calls, schema.dimension_names))
    pieces = jobs.map_batches(
        array.source.frame(db.spark),
        functools.partial(halo.cut_pieces, schema=schema, before=before, after=after, plan=plan),
        halo.piece_schema(schema),
    )
    function = functools.partial(_window_chunk, job=WindowJob(schema, out_schema, before, after, calls))
    frame = jobs.group_tables(
        pieces, halo.target_columns(schema), function, layout.fragment_schema(out_schema)
    )
    return int(sum(row["n_cells"] for row in frame.select("n_cells").collect()))


def run(db, quick: bool = False) -> dict:
    dimensions = [2, 4, 6] if quick else [2, 4, 6, 8, 10]
    warm = _array(db, 3, seed=1)  # Python workers, numba kernels and the JIT of Spark warmed up first
    for plan in ("cells", "neighbours"):
        _window(db, warm, plan)
    rows = []
    for ndim in dimensions:
        array = _array(db, ndim)
        table = array.source.frame(db.spark).toArrow()
        reach = (1,) * ndim
        cut = {}
        for plan in ("neighbours", "cells"):
            cutting = functools.partial(halo.cut_pieces, table, array.schema, reach, reach, plan=plan)
            seconds, pieces = timed(cutting)
            cut[plan] = (seconds, pieces.num_rows)
        assert cut["neighbours"][1] == cut["cells"][1], "both plans must cut the same pieces"
        end = {}
        for plan in ("cells", "neighbours"):
            seconds, cells = timed(functools.partial(_window, db, array, plan))
            end[plan] = (seconds, cells)
        assert end["cells"][1] == end["neighbours"][1] == array.count()
        row = {
            "ndim": ndim,
            "cells": array.count(),
            "pieces": cut["cells"][1],
            "cut_neighbours_s": cut["neighbours"][0],
            "cut_cells_s": cut["cells"][0],
            "cut_ratio": cut["neighbours"][0] / cut["cells"][0],
            "window_neighbours_s": end["neighbours"][0],
            "window_cells_s": end["cells"][0],
            "window_ratio": end["neighbours"][0] / end["cells"][0],
        }
        print(
            f"d={ndim:2d}: cut {row['cut_neighbours_s']:.3f} s -> {row['cut_cells_s']:.4f} s "
            f"({row['cut_ratio']:.0f}x); window end to end {row['window_neighbours_s']:.1f} s -> "
            f"{row['window_cells_s']:.1f} s ({row['window_ratio']:.1f}x)",
            flush=True,
        )
        rows.append(row)
    return {"rows": rows}


def report(results: dict, quick: bool) -> None:
    rows = results["rows"]
    name = "halo-quick" if quick else "halo"
    write_results(name, {**results, "quick": quick})
    bar_plot(
        name,
        "window over d dimensions, 50 cells: end-to-end seconds by halo planning",
        [f"d={r['ndim']}" for r in rows],
        {
            "every neighbour chunk (baseline)": [r["window_neighbours_s"] for r in rows],
            "chunks the cells reach": [r["window_cells_s"] for r in rows],
        },
        "seconds",
    )
    print(f"results in {RESULTS / (name + '.json')}")
