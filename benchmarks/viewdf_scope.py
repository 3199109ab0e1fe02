"""The ViewDF scope sweep alone (issue 11): one pattern view's maintenance step in-process and on
Spark against naive recomputation over the last 5 .. 100 parts, on Spark and in-process, the
in-process result written as a bare Parquet file and, as a materialized view keeps it, committed
as one part of a table (one Iceberg commit); and sliding-window views (sum, max) over windows of
5 .. 100 parts, in-process, by each of their two plans (AUTO's choice marked), against naive
recomputation of the window the same two ways."""

from __future__ import annotations

from benchmarks.common import RESULTS, write_results
from benchmarks.viewdf import run_scope

SERIES = (
    ("viewdf_local_s", "ViewDF step, in-process"),
    ("viewdf_spark_s", "ViewDF step, Spark"),
    ("naive_spark_s", "naive, Spark"),
    ("naive_local_s", "naive, in-process"),
    ("naive_committed_s", "naive, in-process, committed"),
)


#: (plot, result key, marker, label) of the window views' series.
WINDOW_SERIES = (
    ("times", "viewdf_local_s", "o", "ViewDF step (AUTO's plan)"),
    ("times", "incremental_s", "v", "incremental plan"),
    ("times", "recompute_s", "^", "recompute plan"),
    ("times", "naive_local_s", "x", "naive"),
    ("times", "naive_committed_s", "s", "naive committed"),
    ("ratios", "naive_local_median_over_viewdf_local", "D", "naive / ViewDF, interleaved medians"),
    ("ratios", "naive_committed_median_over_viewdf_local", "P", "naive committed / ViewDF, interleaved"),
    ("ratios", "naive_local_over_viewdf_local", "o", "naive best of 3 after / ViewDF"),
    ("ratios", "naive_committed_over_viewdf_local", "s", "naive committed best of 3 after / ViewDF"),
)


def run(db, quick: bool = False) -> dict:
    return run_scope(db, quick)


def report(results: dict, quick: bool) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    name = "viewdf_scope_quick" if quick else "viewdf_scope"
    write_results(name, {"quick": quick, "results": results})
    rows = results["pattern_scope"]
    windows = results.get("window_scope", [])
    figure, axes = plt.subplots(2 if windows else 1, 2, figsize=(12, 9 if windows else 4.5), squeeze=False)
    (times, ratios) = axes[0]
    for key, label in SERIES:
        times.plot([r["scope"] for r in rows], [r[key] for r in rows], marker="o", label=label)
    times.set(title="pattern [a, b, c, d+]: seconds per new part", xlabel="naive scope (parts)", ylabel="s")
    times.set(yscale="log")
    times.legend()
    for key, label in (
        ("naive_spark_over_viewdf_local", "naive Spark / ViewDF in-process"),
        ("naive_local_over_viewdf_local", "naive in-process / ViewDF in-process"),
        ("naive_committed_over_viewdf_local", "naive in-process committed / ViewDF in-process"),
        ("naive_spark_over_viewdf_spark", "naive Spark / ViewDF Spark"),
    ):
        ratios.plot([r["scope"] for r in rows], [r[key] for r in rows], marker="o", label=label)
    ratios.axhline(1.0, color="grey", linewidth=0.8)
    ratios.set(
        title="speed-up of ViewDF over naive", xlabel="naive scope (parts)", ylabel="ratio", yscale="log"
    )
    ratios.legend()
    if windows:
        window_times, window_ratios = axes[1]
        for aggregate in sorted({r["aggregate"] for r in windows}):
            found = [r for r in windows if r["aggregate"] == aggregate]
            sizes = [r["window"] for r in found]
            for axis, key, marker, label in WINDOW_SERIES:
                axis_of = window_times if axis == "times" else window_ratios
                axis_of.plot(sizes, [r[key] for r in found], marker=marker, label=f"{aggregate}: {label}")
        window_times.set(
            title="window views, in-process: seconds per new part", xlabel="window (parts)", ylabel="s"
        )
        window_times.set(yscale="log")
        window_times.legend(fontsize=8)
        window_ratios.axhline(1.0, color="grey", linewidth=0.8)
        window_ratios.set(
            title="speed-up of ViewDF over naive", xlabel="window (parts)", ylabel="ratio", yscale="log"
        )
        window_ratios.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(RESULTS / f"{name}.png", dpi=110)
    plt.close(figure)
