"""ViewDF steps over large stream parts (issue 11: "a cost-based choice per operation"): where
``execution='auto'`` builds a window view's or a pattern view's part, and how long that takes
against the same step forced onto Spark and forced in-process, in the same run.

A sum and a max window of 3 minutes (built by the window kernel) and a pattern view (built by its
query's SQL) over streams of 10**6 and 2.5 * 10**6 rows a part (10**4 and 2.5 * 10**4
source/destination pairs, 100 readings each; 10**5 rows with --quick). Each view is
stepped, in turn, with ``auto``, ``spark`` and ``local`` (one part per step, a new part appended
before each), three rounds after one warm-up round, the order turned each round so that each mode
follows each other once; the figures are the medians per mode. The
step's report gives the executor AUTO chose, its estimate of the cells read and the cost model's
prediction of the in-process build, which is set beside the build time measured."""

from __future__ import annotations

import numpy as np

from arrayviews.datasets.network import minute_batch
from benchmarks.common import RESULTS, write_results
from benchmarks.viewdf import SCHEMA, Bench

MODES = ("auto", "spark", "local")
ROUNDS = 3


def _measure(bench: Bench, db, aggregate: str, pairs: int, tag: str) -> dict:
    stream = db.create_stream(f"big_{tag}", SCHEMA, 60, "ts")
    minute = 0
    bench.append(stream, minute_batch(minute, pairs, readings_per_pair=100))
    if aggregate == "pattern":  # built by its query's SQL, not the window kernel
        db.sql(
            f"CREATE VIEW big_{tag}_w AS SELECT src, dest, count(*) AS ct FROM big_{tag} PATTERN [a, b+] "
            "WHERE a.loss > 50 AND b.loss < 50 GROUP BY src, dest"
        )
    else:
        db.sql(
            f"CREATE VIEW big_{tag}_w AS SELECT src, dest, {aggregate}(loss) AS value "
            f"FROM big_{tag} [WINDOW 3 MINUTES] GROUP BY src, dest"
        )
    view = db.stream_view(f"big_{tag}_w")
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    reports: dict[str, list] = {mode: [] for mode in MODES}
    try:
        for round_number in range(ROUNDS + 1):
            order = MODES[round_number % 3 :] + MODES[: round_number % 3]  # each mode after each other
            for mode in order:
                minute += 1
                bench.append(stream, minute_batch(minute, pairs, readings_per_pair=100))
                db.executors.mode = mode
                seconds = bench.maintain()
                if round_number:  # the first round warms both executors up
                    times[mode].append(seconds)
                    reports[mode].append(view.maintenance_history().iloc[-1])
    finally:
        db.executors.mode = "auto"
    last = reports["auto"][-1]
    local_builds = [r["build_seconds"] for r in reports["local"]]
    row = {
        "aggregate": aggregate,
        "rows_per_part": pairs * 100,
        "estimated_cells": int(last["estimated_cells"]),
        "auto_executor": sorted({r["executor"] for r in reports["auto"]}),
        "auto_reason": last["reason"],
        **{f"{mode}_s": float(np.median(times[mode])) for mode in MODES},
        "predicted_local_build_s": float(np.median([r["predicted_seconds"] for r in reports["local"]])),
        "measured_local_build_s": float(np.median(local_builds)),
    }
    row["spark_over_auto"] = row["spark_s"] / row["auto_s"]
    row["local_over_auto"] = row["local_s"] / row["auto_s"]
    row["predicted_over_measured_local_build"] = (
        row["predicted_local_build_s"] / row["measured_local_build_s"]
    )
    print(
        f"{aggregate} view, {row['rows_per_part']:,} rows a part ({row['estimated_cells']:,} cells read): AUTO "
        f"ran on {'+'.join(row['auto_executor'])} in {row['auto_s']:.3f} s; forced Spark {row['spark_s']:.3f} s "
        f"({row['spark_over_auto']:.2f}x AUTO), forced in-process {row['local_s']:.3f} s "
        f"({row['local_over_auto']:.2f}x); in-process build predicted {row['predicted_local_build_s']:.3f} s, "
        f"measured {row['measured_local_build_s']:.3f} s ({row['predicted_over_measured_local_build']:.2f}x)"
    )
    return row


def run(db, quick: bool = False) -> dict:
    sizes = (1_000,) if quick else (10_000, 25_000)
    bench = Bench(db)
    rows = []
    try:
        for pairs in sizes:
            for aggregate in ("sum", "max", "pattern"):
                bench.reset()
                rows.append(_measure(bench, bench.db, aggregate, pairs, f"{aggregate}{pairs}"))
    finally:
        bench.close()
    return {"rows": rows}


def report(results: dict, quick: bool) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    name = "viewdf_large_parts_quick" if quick else "viewdf_large_parts"
    write_results(name, {"quick": quick, **results})
    rows = results["rows"]
    labels = [f"{r['aggregate']}, {r['rows_per_part'] / 1e6:g}M rows" for r in rows]
    positions = np.arange(len(rows))
    figure, axis = plt.subplots(figsize=(11, 4.5))
    for offset, mode in zip((-0.27, 0.0, 0.27), MODES, strict=True):
        axis.bar(positions + offset, [r[f"{mode}_s"] for r in rows], width=0.27, label=f"{mode}")
    axis.set_xticks(positions, labels)
    axis.set(title="ViewDF step over large parts: execution mode", ylabel="seconds per step (median)")
    axis.legend()
    figure.tight_layout()
    figure.savefig(RESULTS / f"{name}.png", dpi=110)
    plt.close(figure)
