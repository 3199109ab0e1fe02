"""A busy stream view's maintenance step in a warehouse that also holds idle streams and views (their
streams get no rows): the step's time with 0, 5, 10 and 20 idle stream+view pairs beside it, each
in a fresh warehouse, rounds alternated so every count meets the same machine. The ratio is
against the warehouse without idle pairs, from the same round."""

from __future__ import annotations

import shutil
import statistics

import numpy as np

from benchmarks.common import bar_plot, scratch_dir, write_results
from benchmarks.viewdf import SCHEMA, Bench, _window_views, minute_batch

#: Steps timed after the window filled; the median is the step's time.
MEASURED = 25


def _step_time(first_db, idle: int, window: int, pairs: int, folders: list[str]) -> float:
    import arrayviews

    folder = scratch_dir("idle-views-")
    folders.append(folder)  # deleted when the benchmark ends: a drop's deletions slow new files
    db = arrayviews.connect(folder, spark=first_db.spark, execution="local")
    bench = Bench(db)
    for k in range(idle):
        stream = db.create_stream(f"idle{k}", SCHEMA, 60, "ts")
        for minute in range(3):
            bench.append(stream, minute_batch(minute, pairs, readings_per_pair=10))
        _window_views(db, f"idle{k}", "max", window, "generated")
        db.maintain_streams()
    stream = db.create_stream("busy", SCHEMA, 60, "ts")
    bench.append(stream, minute_batch(0, pairs, readings_per_pair=10))
    _window_views(db, "busy", "max", window, "generated")
    times = []
    for minute in range(1, window + MEASURED + 6):
        bench.append(stream, minute_batch(minute, pairs, readings_per_pair=10))
        times.append(bench.maintain())
    folders.append(bench.scratch)
    return float(np.median(times[-MEASURED:]))


def run(db, quick: bool = False) -> dict:
    counts = (0, 5) if quick else (0, 5, 10, 20)
    rounds = 1 if quick else 3
    window, pairs = (5, 100) if quick else (20, 1_000)
    db.spark.range(1).collect()  # the streams' code builds Spark schemas: start it before timing
    folders: list[str] = []
    seconds: dict[int, list[float]] = {count: [] for count in counts}
    try:
        for _ in range(rounds):
            for count in counts:
                seconds[count].append(_step_time(db, count, window, pairs, folders))
    finally:
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
    medians = {count: statistics.median(times) for count, times in seconds.items()}
    rows = [
        {
            "idle_pairs": count,
            "step_s": medians[count],
            "step_over_no_idle": medians[count] / medians[0],
            "per_idle_pair_s": (medians[count] - medians[0]) / count if count else 0.0,
            "rounds_s": seconds[count],
        }
        for count in counts
    ]
    return {"window": window, "tuples_per_part": pairs * 10, "rounds": rounds, "rows": rows}


def report(results: dict, quick: bool) -> None:
    for row in results["rows"]:
        print(
            f"{row['idle_pairs']:>3} idle stream+view pairs: busy max view's step "
            f"{row['step_s'] * 1e3:.2f} ms ({row['step_over_no_idle']:.2f}x of none; "
            f"{row['per_idle_pair_s'] * 1e6:.0f} us per idle pair)"
        )
    name = "idle_views" + ("_quick" if quick else "")
    write_results(name, results)
    bar_plot(
        name,
        f"A max window view's step (W = {results['window']}) beside idle stream views",
        [f"{row['idle_pairs']} idle pairs" for row in results["rows"]],
        {
            f"round {k + 1}": [row["rounds_s"][k] * 1e3 for row in results["rows"]]
            for k in range(results["rounds"])
        },
        "milliseconds (median of 25 steps)",
    )
