"""ViewDF maintenance steps over a long stream history (issue 11: "its planning work does not grow
with the stream's history"): one pattern view (a helper and a final view) maintained in-process
after each of 800 minute batches (10**4 pairs per part; 100 batches of 10**3 with --quick).

Per history depth (about steps 10, 50, 100, 200, 400 and 800: the median of five steps there) it
reports the wall time of a step and the Python function calls it makes (counted by cProfile over the same five steps
run again under the profiler; a count does not depend on the machine's load, which wall times on a
shared machine do). The baseline is the step at depth 10, measured in the same run: the figures are
the ratios of each depth to it. Naive recomputation in-process over the last 5 parts (DuckDB over
the parts' files, result written with pyarrow) is timed at each depth as well, as the scale of what
a step is compared with."""

from __future__ import annotations

import cProfile
import pstats

import numpy as np

from benchmarks.common import RESULTS, write_results
from benchmarks.viewdf import SCHEMA, Bench, _pattern_views, _set_execution, minute_batch, naive_local

DEPTHS = (10, 50, 100, 200, 400, 800)


def run(db, quick: bool = False) -> dict:
    pairs = 1_000 if quick else 10_000
    depths = DEPTHS[:3] if quick else DEPTHS
    bench = Bench(db)
    _set_execution(db, "local")
    rows = []
    try:
        stream = db.create_stream("m", SCHEMA, 60, "ts")
        bench.append(stream, minute_batch(0, pairs, high_share=0.1))
        _pattern_views(db, "m", ("generated",))
        minute = 0
        for depth in depths:
            while minute < depth - 5:
                minute += 1
                bench.append(stream, minute_batch(minute, pairs, high_share=0.1))
                bench.maintain()
            wall, profile = [], cProfile.Profile()
            for _ in range(5):
                minute += 1
                bench.append(stream, minute_batch(minute, pairs, high_share=0.1))
                wall.append(bench.maintain())
            for _ in range(5):  # the same kind of step again, under the profiler, for its call count
                minute += 1
                bench.append(stream, minute_batch(minute, pairs, high_share=0.1))
                profile.enable()
                bench.maintain()
                profile.disable()
            newest = stream.part_range()[1]
            naive = min(naive_local(bench, stream, newest, 5) for _ in range(3))
            row = {
                "depth": minute,
                "step_s": float(np.median(wall)),
                "calls_per_step": pstats.Stats(profile).total_calls // 5,
                "naive_scope5_s": naive,
            }
            rows.append(row)
            print(
                f"depth {row['depth']:>4}: step {row['step_s']:.3f} s, {row['calls_per_step']} calls; "
                f"naive over 5 parts {naive:.3f} s"
            )
    finally:
        _set_execution(db, "auto")
        bench.close()
    first = rows[0]
    for row in rows:
        row["step_over_depth10"] = row["step_s"] / first["step_s"]
        row["calls_over_depth10"] = row["calls_per_step"] / first["calls_per_step"]
        row["naive5_over_step"] = row["naive_scope5_s"] / row["step_s"]
    return {"pairs_per_part": pairs, "rows": rows}


def report(results: dict, quick: bool) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    name = "viewdf_history_quick" if quick else "viewdf_history"
    write_results(name, {"quick": quick, **results})
    rows = results["rows"]
    depths = [r["depth"] for r in rows]
    figure, (times, ratios) = plt.subplots(1, 2, figsize=(12, 4.5))
    times.plot(depths, [r["step_s"] for r in rows], marker="o", label="ViewDF step, in-process")
    times.plot(
        depths, [r["naive_scope5_s"] for r in rows], marker="s", label="naive over 5 parts, in-process"
    )
    times.set(title="seconds per step vs stream history", xlabel="steps so far", ylabel="s")
    times.legend()
    ratios.plot(
        depths, [r["step_over_depth10"] for r in rows], marker="o", label="step time / step at depth 10"
    )
    ratios.plot(
        depths, [r["calls_over_depth10"] for r in rows], marker="s", label="calls / calls at depth 10"
    )
    ratios.axhline(1.0, color="grey", linewidth=0.8)
    ratios.set(title="growth with history", xlabel="steps so far", ylabel="ratio")
    ratios.legend()
    figure.tight_layout()
    figure.savefig(RESULTS / f"{name}.png", dpi=110)
    plt.close(figure)
