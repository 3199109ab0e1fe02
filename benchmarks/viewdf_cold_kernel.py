"""How much a window view's step kernel and naive recomputation slow down when the code they run was
not run just before (round 37): each timed hot (called again at once, the baseline), after 1 ms of
other Python work, after a 5 ms sleep, and after the other one (the kernel after naive, naive after
the kernel, as ``viewdf_scope`` interleaves them).

The ``viewdf_scope`` stream (10**4 rows a part, 1,000 source/destination pairs) and a sum and a max
window of 100 parts (20 with ``--quick``), stepped in process until full; then the inputs of the
next step (the stream's new part, the view's parts j-1 and j-W) are read once and the kernel
(kernels/window_steps.py) is called on them repeatedly, as is naive recomputation of the same part
(DuckDB over the window's parts, result written bare). Ratios are each condition's median over the
hot median of the same run. A step makes some 150 numpy and Arrow calls, each its own code; naive is
one long DuckDB loop: where the kernel slows by more than naive does, the ratio of the two that
``viewdf_scope`` reports falls, whatever either does."""

from __future__ import annotations

import json
import time

import numpy as np

from benchmarks.common import RESULTS, write_results
from benchmarks.viewdf import (
    Bench,
    _set_execution,
    fresh_window_view,
    minute_batch,
    naive_local,
    naive_window_sql,
)

CONDITIONS = ("hot", "after 1 ms of other work", "after a 5 ms sleep", "after the other")
REPEATS = 60
#: Python objects that 1 ms of json.dumps walks (a few MB: more than a core's 2 MB L2 cache).
_OTHER = {str(i): [i, str(i) * 3, {"a": i}] for i in range(20_000)}


def _other_work(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        json.dumps(_OTHER)


def _next_step_inputs(db, stream, name: str, window: int):
    """(WindowStep, batch, previous, old) of the view's next step, read as its step reads them."""
    from arrayviews.storage.part_table import PartTable
    from arrayviews.streams.local_step import Input, read_input
    from arrayviews.streams.part_files import part_files

    handle = db.stream_view(name)._handle
    step = handle.definition.window_step
    view = PartTable.open(db.warehouse.catalog, "streams", name)
    newest = stream.part_range()[1]

    def rows(table, part: int, keep_part: bool):
        uris = tuple(f.uri for f in part_files(table, part, part))
        return read_input(Input(table, uris, keep_part=keep_part))

    old = rows(view, newest - window, True) if step.cumulated() else None
    return step, rows(stream.table, newest, False), rows(view, newest - 1, True), old


def _timed(action, before, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        before()
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _one(bench: Bench, aggregate: str, window: int, repeats: int) -> dict:
    from arrayviews.kernels.window_steps import window_step

    db, stream, name = fresh_window_view(bench, aggregate, window)
    try:
        for minute in range(1, window + 3):
            bench.append(stream, minute_batch(minute, 1000, readings_per_pair=10))
            bench.maintain()
        bench.append(stream, minute_batch(window + 3, 1000, readings_per_pair=10))
        step, batch, previous, old = _next_step_inputs(db, stream, name, window)
        newest = stream.part_range()[1]
        sql = naive_window_sql(aggregate)

        def kernel():
            window_step(step, batch, previous, old)

        def naive():
            naive_local(bench, stream, newest, window, sql=sql)

        found = {}
        for label, action, other in (("kernel", kernel, naive), ("naive", naive, kernel)):
            conditions = {
                "hot": lambda: None,
                "after 1 ms of other work": lambda: _other_work(0.001),
                "after a 5 ms sleep": lambda: time.sleep(0.005),
                "after the other": other,
            }
            action()
            found[label] = {c: _timed(action, conditions[c], repeats) for c in CONDITIONS}
    finally:
        _set_execution(db, "auto")
    row = {"aggregate": aggregate, "window": window}
    for label, times in found.items():
        for condition, seconds in times.items():
            row[f"{label}|{condition}"] = seconds
            row[f"{label}|{condition}|over hot"] = seconds / times["hot"]
    row["naive over kernel, hot"] = found["naive"]["hot"] / found["kernel"]["hot"]
    row["naive over kernel, each after the other"] = (
        found["naive"]["after the other"] / found["kernel"]["after the other"]
    )
    return row


def run(db, quick: bool = False) -> dict:
    bench = Bench(db)
    window, repeats = (20, 20) if quick else (100, REPEATS)
    rows = []
    try:
        for aggregate in ("sum", "max"):
            row = _one(bench, aggregate, window, repeats)
            rows.append(row)
            for label in ("kernel", "naive"):
                print(
                    f"{aggregate} W={window} {label}: "
                    + ", ".join(
                        f"{c} {row[f'{label}|{c}'] * 1e3:.2f} ms ({row[f'{label}|{c}|over hot']:.2f}x)"
                        for c in CONDITIONS
                    )
                )
            print(
                f"{aggregate} W={window}: naive / kernel {row['naive over kernel, hot']:.1f}x hot, "
                f"{row['naive over kernel, each after the other']:.1f}x each run after the other"
            )
    finally:
        bench.close()
    return {"window": window, "repeats": repeats, "rows": rows}


def report(results: dict, quick: bool) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    name = "viewdf_cold_kernel_quick" if quick else "viewdf_cold_kernel"
    write_results(name, {"quick": quick, **results})
    rows = results["rows"]
    figure, axes = plt.subplots(1, len(rows), figsize=(6 * len(rows), 4), squeeze=False)
    places = np.arange(len(CONDITIONS))
    for axis, row in zip(axes[0], rows, strict=True):
        for offset, label in ((-0.2, "kernel"), (0.2, "naive")):
            ratios = [row[f"{label}|{c}|over hot"] for c in CONDITIONS]
            axis.bar(places + offset, ratios, width=0.4, label=label)
        axis.axhline(1.0, color="grey", linewidth=0.8)
        axis.set_xticks(
            places, [c.replace(" of other work", "\nof other work") for c in CONDITIONS], fontsize=8
        )
        axis.set(title=f"{row['aggregate']} window, W={row['window']}: time over hot", ylabel="ratio")
        axis.legend()
    figure.tight_layout()
    figure.savefig(RESULTS / f"{name}.png", dpi=110)
    plt.close(figure)
