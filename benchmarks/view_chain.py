"""A chain of derived products kept fresh: a similarity view over an array, and a window view and a
similarity view over that view (views over views). Per batch of new cells, the seconds of
refreshing the chain incrementally (each view from the delta of the one below) against recomputing
every view of an identical chain in full, measured in the same run on the same data; the two
chains' contents are compared cell for cell after every batch.

The array is query_through_view's sky (a dense band across the middle rows, chunks of 100).
Run: ``python -m benchmarks.run view_chain [--quick]``.
"""

from __future__ import annotations

import time

import pyarrow as pa
import pyarrow.compute as pc

from arrayviews.model.shapes import L1, Linf
from arrayviews.views.definition import similarity, window
from benchmarks.common import bar_plot, write_results
from benchmarks.query_through_view import CHUNK, EXTENT, sky_cells

BATCHES = 4
BATCH_CELLS = 500


def _chain(db, prefix: str) -> list[str]:
    """Three views: {prefix}1 over SKY, {prefix}2 (window) and {prefix}3 (similarity) over {prefix}1."""
    lower, smooth, around = f"{prefix}1", f"{prefix}2", f"{prefix}3"
    db.create_view(lower, similarity("SKY", "SKY", L1(1), ["count(*) as n", "sum(right.w) as s"]))
    db.create_view(smooth, window(lower, [2, 2, 2, 2], ["sum(s)", "max(n)"]))
    db.create_view(around, similarity(lower, lower, Linf(1), ["count(*) as k", "sum(right.s) as ss"]))
    return [lower, smooth, around]


def _refresh(db, names: list[str], strategy: str) -> tuple[float, list[float]]:
    each = []
    for name in names:  # bottom first: each view reads the version of the one below just made
        started = time.perf_counter()
        result = db.view(name).refresh(strategy)
        assert result.committed, str(result)
        each.append(time.perf_counter() - started)
    return sum(each), each


def _same(db, left: str, right: str) -> bool:
    a = db.view(left).to_arrow()
    b = db.view(right).to_arrow().rename_columns(a.column_names)
    return a.equals(b)


def _new_cells(array, cells: int, extent: int, count: int, seed_offset: int) -> pa.Table:
    batch = sky_cells(cells + count * (seed_offset + 1), extent).slice(cells + count * seed_offset, count)
    held = array.to_arrow()
    keys = pc.add(pc.multiply(held["i"], extent), held["j"])
    return batch.filter(pc.invert(pc.is_in(pc.add(pc.multiply(batch["i"], extent), batch["j"]), value_set=keys)))


def run(db, quick: bool = False) -> dict:
    extent = EXTENT // 2 if quick else EXTENT
    cells = 30_000 if quick else 150_000
    array = db.create_array(f"SKY <v:double, w:int64> [i=0:{extent - 1}:{CHUNK}; j=0:{extent - 1}:{CHUNK}]")
    array.insert(sky_cells(cells, extent))
    incremental, full = _chain(db, "INC"), _chain(db, "FULL")
    rows = []
    for number in range(BATCHES):
        batch = _new_cells(array, cells, extent, BATCH_CELLS, number)
        array.insert(batch)
        inc_total, inc_each = _refresh(db, incremental, "baseline")
        full_total, full_each = _refresh(db, full, "full")
        same = all(_same(db, a, b) for a, b in zip(incremental, full, strict=True))
        rows.append(
            {
                "batch": number + 1,
                "batch_cells": batch.num_rows,
                "incremental_seconds": inc_total,
                "full_seconds": full_total,
                "incremental_each": inc_each,
                "full_each": full_each,
                "full_over_incremental": full_total / inc_total,
                "identical": same,
            }
        )
    return {"extent": extent, "cells": array.count(), "chunk": CHUNK, "batches": rows}


def report(results: dict, quick: bool = False) -> None:
    print(f"a chain of three views over {results['cells']:,} cells ({results['extent']}^2, chunks {CHUNK})")
    print("  batch  cells  incremental s (V1, window, sim)   full s (V1, window, sim)   full/incremental  same")
    for row in results["batches"]:
        inc = ", ".join(f"{s:.2f}" for s in row["incremental_each"])
        full = ", ".join(f"{s:.2f}" for s in row["full_each"])
        print(
            f"  {row['batch']:>5d}  {row['batch_cells']:>5d}  {row['incremental_seconds']:6.2f} ({inc})"
            f"   {row['full_seconds']:6.2f} ({full})   {row['full_over_incremental']:8.2f}x    {row['identical']}"
        )
    tail = "_quick" if quick else ""
    write_results("view_chain" + tail, results)
    labels = [f"batch {row['batch']}" for row in results["batches"]]
    bar_plot(
        "view_chain" + tail,
        "A chain of views (similarity view, window and similarity views over it): refresh per batch",
        labels,
        {
            "incremental (each from the delta below)": [r["incremental_seconds"] for r in results["batches"]],
            "full recomputation": [r["full_seconds"] for r in results["batches"]],
        },
        "seconds",
    )
