"""Answering a similarity aggregate through a materialized view (paper 000, section 5 and Fig. 6):
the seconds of the query through a view over another shape against the same query from the base
arrays, measured in the same run, and whether ``through="auto"`` picked the faster way.

A sky-like 2-D array (``EXTENT`` x ``EXTENT``, chunks of ``CHUNK``, a dense band of cells across the
middle rows like PTF's declination skew, float and integer values) with two stored views: count, sum
and max over L1(1) and over Linf(2). The queries, written view <- query as in the paper:
Linf(1) <- L1(1) (a delta of 4 offsets against 9), Linf(1) <- Linf(2) (16 against 9), L1(1) <- L1(1)
(the view itself), L1(2) <- Linf(2) (12 against 13); then, after a batch of 500 new cells, L1(1) <- L1(1)
with the view one batch behind (brought forward in memory first). Each way runs ``REPEAT`` times, best taken; the
answers are compared cell for cell. Run: ``python -m benchmarks.run query_through_view [--quick]``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute

from arrayviews.model.shapes import L1, Linf
from arrayviews.views.definition import similarity
from benchmarks.common import bar_plot, timed, write_results

EXTENT = 1200
CHUNK = 100
SEED = 2013
REPEAT = 2
AGGREGATES = ("count(*) as n", "sum(right.v) as s", "max(right.w) as m")
VIEWS = {"VL1": L1(1), "VLINF2": Linf(2)}
#: (label, view, query shape)
QUERIES = (
    ("Linf(1) <- L1(1)", "VL1", Linf(1)),
    ("Linf(1) <- Linf(2)", "VLINF2", Linf(1)),
    ("L1(1) <- L1(1)", "VL1", L1(1)),
    ("L1(2) <- Linf(2)", "VLINF2", L1(2)),
)


def sky_cells(cells: int, extent: int) -> pa.Table:
    """``cells`` distinct cells, most in a band across the middle rows (a telescope's latitude)."""
    rng = np.random.default_rng(SEED)
    rows = np.clip(rng.normal(extent / 2, extent / 10, cells * 2), 0, extent - 1).astype(np.int64)
    cols = rng.integers(0, extent, cells * 2)
    flat = np.unique(rows * extent + cols)[:cells]
    rng.shuffle(flat)
    flat = np.sort(flat[:cells])
    return pa.table(
        {
            "i": pa.array(flat // extent, pa.int64()),
            "j": pa.array(flat % extent, pa.int64()),
            "v": pa.array(rng.normal(size=len(flat)) * 1e3, pa.float64()),
            "w": pa.array(rng.integers(-1000, 1000, len(flat)), pa.int64()),
        }
    )


def measure(db, label: str, view: str, shape) -> dict:
    """Both ways of one query, timed in the same run, the answers compared, and what auto picks."""
    join = db.similarity_join("SKY", "SKY", shape)
    forced = join.plan(*AGGREGATES, through=view)
    auto = join.plan(*AGGREGATES)
    scratch_seconds, scratch = timed(lambda: join.aggregate(*AGGREGATES, through="none").to_pandas(), REPEAT)
    view_seconds, answer = timed(lambda: join.aggregate(*AGGREGATES, through=view).to_pandas(), REPEAT)
    assert answer.equals(scratch), f"{label}: the answers differ"
    faster = "view" if view_seconds < scratch_seconds else "scratch"
    picked = auto.chosen if auto.view == view or auto.chosen == "scratch" else "other view"
    return {
        "delta_offsets": len(forced.added or []) + len(forced.removed or []),
        "query_offsets": len(shape),
        "scratch_seconds": scratch_seconds,
        "view_seconds": view_seconds,
        "scratch_over_view": scratch_seconds / view_seconds,
        "predicted_scratch": forced.scratch.seconds,
        "predicted_view": forced.through_view.seconds,
        "auto_chose": auto.chosen,
        "auto_view": auto.view,
        "faster": faster,
        "auto_right": picked == faster,
        "auto_over_best": (view_seconds if auto.chosen == "view" else scratch_seconds)
        / min(view_seconds, scratch_seconds),
    }


def run(db, quick: bool = False) -> dict:
    extent = EXTENT // 2 if quick else EXTENT
    cells = 30_000 if quick else 150_000
    array = db.create_array(f"SKY <v:double, w:int64> [i=0:{extent - 1}:{CHUNK}; j=0:{extent - 1}:{CHUNK}]")
    array.insert(sky_cells(cells, extent))
    for name, shape in VIEWS.items():
        db.create_view(name, similarity("SKY", "SKY", shape, AGGREGATES))
    results = {"extent": extent, "cells": array.count(), "chunk": CHUNK, "queries": {}}
    for label, view, shape in QUERIES:
        results["queries"][label] = measure(db, label, view, shape)
    # a view one small batch behind: brought forward in memory, then answered (its own shape)
    batch = sky_cells(cells + 500, extent).slice(cells, 500)  # cells the catalog does not hold yet
    held = array.to_arrow()
    batch = batch.filter(
        pa.compute.invert(
            pa.compute.is_in(
                pa.compute.add(pa.compute.multiply(batch["i"], extent), batch["j"]),
                value_set=pa.compute.add(pa.compute.multiply(held["i"], extent), held["j"]),
            )
        )
    )
    array.insert(batch)
    label = "L1(1) <- L1(1), view behind"
    results["queries"][label] = {**measure(db, label, "VL1", L1(1)), "batch_cells": batch.num_rows}
    return results


def report(results: dict, quick: bool = False) -> None:
    print(f"similarity aggregates over {results['cells']:,} cells ({results['extent']}^2, chunks {CHUNK})")
    print("  view <- query         delta/query  scratch s   view s   scratch/view  predicted s/v   auto")
    for label, row in results["queries"].items():
        print(
            f"  {label:<20s}  {row['delta_offsets']:>4d}/{row['query_offsets']:<4d}   {row['scratch_seconds']:8.3f} "
            f"{row['view_seconds']:8.3f}   {row['scratch_over_view']:8.2f}x    "
            f"{row['predicted_scratch'] / row['predicted_view']:8.2f}x    {row['auto_chose']}"
            f" ({'right' if row['auto_right'] else 'wrong'}, {row['auto_over_best']:.2f}x the faster way)"
        )
    tail = "_quick" if quick else ""
    write_results("query_through_view" + tail, results)
    labels = list(results["queries"])
    bar_plot(
        "query_through_view" + tail,
        "Similarity aggregate: from the base arrays vs through a view (paper 000 Fig. 6)",
        labels,
        {
            "from scratch": [results["queries"][k]["scratch_seconds"] for k in labels],
            "through the view": [results["queries"][k]["view_seconds"] for k in labels],
        },
        "seconds (best of 2)",
    )
