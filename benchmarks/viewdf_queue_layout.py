"""A max window's state in its two layouts, in the same run: each group's earlier queue entries as a
list in the group's one row (streams/windows.py since round 36) against each entry as a row of its
own (the layout of views made before, the baseline, made here by the translation's
``nested=False``, as those views' stored definitions keep it).

The ``viewdf_scope`` stream (10**4 rows a part, 1,000 source/destination pairs, values in random
order). In process: a window of 100 parts, naive recomputation of the newest part run between
steps as in ``viewdf_scope``. On Spark (``execution="spark"``): a window of 20 parts. Each (executor,
layout) runs in a fresh warehouse; the layouts alternate, three rounds, the order turned each round.
Per run: the median step after the window is full, and the newest part's rows and file bytes.
Ratios are the rows layout over the lists layout, per round and for the medians of the rounds."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from benchmarks.common import RESULTS, write_results
from benchmarks.viewdf import (
    SCHEMA,
    Bench,
    _set_execution,
    _window_views,
    minute_batch,
    naive_local,
    naive_window_sql,
)

LAYOUTS = ("lists", "rows")
ROUNDS = 3
#: executor -> (window in parts, steps measured after it is full)
SHAPES = {"local": (100, 150), "spark": (20, 20)}


@contextmanager
def _layout(layout: str):
    """Views created inside are made in ``layout`` (``rows``: the translation's ``nested=False``)."""
    from arrayviews.streams.windows import WindowTranslation

    defaults = WindowTranslation.__init__.__defaults__
    if layout == "rows":
        WindowTranslation.__init__.__defaults__ = (*defaults[:-1], False)
    try:
        yield
    finally:
        WindowTranslation.__init__.__defaults__ = defaults


def _shape(executor: str, quick: bool) -> tuple[int, int]:
    window, measured = SHAPES[executor]
    return (min(window, 20), min(measured, 10)) if quick else (window, measured)


def _one_run(bench: Bench, executor: str, layout: str, quick: bool) -> dict:
    window, measured = _shape(executor, quick)
    bench.reset()
    db = bench.db
    _set_execution(db, executor)
    try:
        stream = db.create_stream("s", SCHEMA, 60, "ts")
        bench.append(stream, minute_batch(0, 1000, readings_per_pair=10))
        with _layout(layout):
            name = _window_views(db, "s", "max", window, "generated", "INCREMENTAL")
        sql = naive_window_sql("max")
        steps = []
        for minute in range(1, window + 5 + measured):
            bench.append(stream, minute_batch(minute, 1000, readings_per_pair=10))
            seconds = bench.maintain()
            if minute > window + 4:
                steps.append(seconds)
                if executor == "local":
                    naive_local(bench, stream, stream.part_range()[1], window, sql=sql)
        table = db.stream_view(name)._handle.table
        table.refresh()
        newest = table.part_range()[1]
        (uri, _, rows, size), *_ = table.sized_files_of_parts(newest, newest)
    finally:
        _set_execution(db, "auto")
    return {"step_s": float(np.median(steps)), "steps": len(steps), "part_rows": rows, "part_bytes": size}


def run(db, quick: bool = False) -> dict:
    bench = Bench(db)
    rows = []
    try:
        for executor in SHAPES:
            rounds = []
            for number in range(ROUNDS):
                order = LAYOUTS if number % 2 == 0 else LAYOUTS[::-1]
                found = {layout: _one_run(bench, executor, layout, quick) for layout in order}
                found["step_ratio"] = found["rows"]["step_s"] / found["lists"]["step_s"]
                rounds.append(found)
                print(
                    f"max on {executor}, round {number + 1}: step lists {found['lists']['step_s'] * 1e3:.2f} ms, "
                    f"rows {found['rows']['step_s'] * 1e3:.2f} ms ({found['step_ratio']:.2f}x); part "
                    f"{found['lists']['part_rows']:,} rows {found['lists']['part_bytes']:,} bytes against "
                    f"{found['rows']['part_rows']:,} rows {found['rows']['part_bytes']:,} bytes"
                )
            row = {"executor": executor, "window": _shape(executor, quick)[0], "rounds": rounds}
            for layout in LAYOUTS:
                for what in ("step_s", "part_rows", "part_bytes"):
                    row[f"{layout}_{what}"] = float(np.median([r[layout][what] for r in rounds]))
            row["step_ratio"] = row["rows_step_s"] / row["lists_step_s"]
            row["rows_ratio"] = row["rows_part_rows"] / row["lists_part_rows"]
            row["bytes_ratio"] = row["rows_part_bytes"] / row["lists_part_bytes"]
            print(
                f"max on {executor} (W={row['window']}), medians of {ROUNDS} rounds: step "
                f"{row['lists_step_s'] * 1e3:.2f} ms with lists against {row['rows_step_s'] * 1e3:.2f} ms with "
                f"rows ({row['step_ratio']:.2f}x); a part {row['rows_ratio']:.2f}x fewer rows, "
                f"{row['bytes_ratio']:.2f}x fewer bytes"
            )
            rows.append(row)
    finally:
        bench.close()
    return {"rows": rows}


def report(results: dict, quick: bool) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    name = "viewdf_queue_layout_quick" if quick else "viewdf_queue_layout"
    write_results(name, {"quick": quick, **results})
    rows = results["rows"]
    figure, axes = plt.subplots(1, len(rows), figsize=(5 * len(rows), 4))
    for axis, row in zip(np.atleast_1d(axes), rows, strict=True):
        values = [row[f"{layout}_step_s"] * 1e3 for layout in LAYOUTS]
        axis.bar(list(LAYOUTS), values, color=["tab:blue", "tab:gray"])
        axis.set(
            title=f"max window, {row['executor']}, W={row['window']} ({row['step_ratio']:.2f}x)",
            ylabel="step, ms (median of rounds)",
        )
    figure.tight_layout()
    figure.savefig(RESULTS / f"{name}.png", dpi=110)
    plt.close(figure)
