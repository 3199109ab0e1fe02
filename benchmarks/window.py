"""Window aggregates: the paper's experiments (002, Fig. 12-15, 24, Tables 5-6) at this machine's scale.

1. NDVI-like gridding: a 2-D array with ~26% non-empty cells clustered like land masses, windows
   11x11 to 51x51, avg; naive vs basic vs incremental, end to end on Spark.
2. Dimensionality: arrays of 2^20 cells with windows of 1024 cells in 2 to 5 dimensions; sum, min, var.
3. Array size 10^3 .. 10^8 cells with windows 5x10, 10x10, 10x50 (incremental; naive up to 10^6).
4. Window size up to 121x121 on a dense array (incremental flat in the window size).
5. The per-chunk kernel against scipy.ndimage (uniform_filter, maximum_filter) on the same chunk,
   both single-threaded; and the end-to-end Spark run on the largest dense array against
   single-threaded scipy.ndimage on the same data in memory.

Run: ``.venv/bin/python -m benchmarks.run window`` (``--quick`` for a small smoke run).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.ndimage as ndi

from arrayviews.kernels.window import window_block
from benchmarks.common import RESULTS, timed, write_results


def land_mask(side: int, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """Clustered 'land masses': a smoothed random field thresholded to the wanted fraction."""
    coarse = max(8, side // 10)
    field = ndi.gaussian_filter(rng.normal(size=(coarse, coarse)), sigma=coarse / 25)
    field = ndi.zoom(field, side / coarse, order=1)[:side, :side]
    return field > np.quantile(field, 1 - fraction)


def ndvi_like(side: int, rng: np.random.Generator) -> np.ma.MaskedArray:
    land = land_mask(side, 0.26, rng)
    coarse = max(8, side // 50)
    green = ndi.zoom(rng.random((coarse, coarse)), side / coarse, order=1)[:side, :side]
    values = np.clip(0.2 + 0.6 * green + 0.05 * rng.normal(size=(side, side)), -0.2, 0.95)
    return np.ma.MaskedArray(values, mask=~land)


def _fresh(db, name: str, schema: str):
    if name in db.arrays():
        db.drop_array(name)
    return db.create_array(schema)


def _run(array, extents, calls, method) -> float:
    seconds, _ = timed(lambda: array.window(extents, *calls, method=method).count())
    return seconds


def run(db, quick: bool = False) -> dict:
    rng = np.random.default_rng(2026)
    results: dict = {}

    # 5. kernel vs scipy.ndimage (single-threaded, same chunk, same output) ---------------------------
    side = 1000 if quick else 2000
    chunk = rng.random((side, side))
    kernel = []
    for width in (11, 51, 121):
        half = width // 2
        padded = np.pad(chunk, half, mode="constant")
        window_block(padded, None, (half, half), (half, half), ["avg"])  # compile / warm
        ours_avg, _ = timed(lambda p=padded, h=half: window_block(p, None, (h, h), (h, h), ["avg"]), repeat=3)
        ours_max, _ = timed(lambda p=padded, h=half: window_block(p, None, (h, h), (h, h), ["max"]), repeat=3)
        scipy_avg, _ = timed(lambda w=width: ndi.uniform_filter(chunk, size=w, mode="constant"), repeat=3)
        scipy_max, _ = timed(lambda w=width: ndi.maximum_filter(chunk, size=w, mode="constant"), repeat=3)
        kernel.append(
            {
                "window": width,
                "kernel_avg_s": ours_avg,
                "scipy_uniform_s": scipy_avg,
                "avg_speedup_vs_scipy": scipy_avg / ours_avg,
                "kernel_max_s": ours_max,
                "scipy_maximum_s": scipy_max,
                "max_speedup_vs_scipy": scipy_max / ours_max,
            }
        )
    results["kernel_vs_scipy"] = {"chunk": [side, side], "rows": kernel}

    # 1. NDVI-like gridding, three methods ------------------------------------------------------------
    side = 1000 if quick else 4000
    ndvi = ndvi_like(side, rng)
    array = _fresh(db, "bench_ndvi", f"bench_ndvi<ndvi:float64>[y=0:{side - 1}:500; x=0:{side - 1}:500]")
    array.write_dense({"ndvi": ndvi})
    for method in ("incremental", "basic", "naive"):  # warm-up: numba caches and worker memory
        _run(array, [5, 5, 5, 5], ["avg(ndvi)"], method)
    rows = []
    for width in (11, 21, 31, 41, 51):
        half = width // 2
        row = {"window": width}
        for method in ("incremental", "basic", "naive"):
            row[f"{method}_s"] = _run(array, [half, half, half, half], ["avg(ndvi)"], method)
        row["naive_over_incremental"] = row["naive_s"] / row["incremental_s"]
        row["basic_over_incremental"] = row["basic_s"] / row["incremental_s"]
        rows.append(row)
    results["ndvi"] = {"shape": [side, side], "non_empty_fraction": float((~ndvi.mask).mean()), "rows": rows}

    # 4. window size up to 121x121 on a dense array (incremental) --------------------------------------
    side = 2000 if quick else 10000
    dense = _fresh(db, "bench_dense_w", f"bench_dense_w<v:float64>[y=0:{side - 1}:1000; x=0:{side - 1}:1000]")
    data = rng.random((side, side))
    dense.write_dense(data)
    _run(dense, [5] * 4, ["avg(v)"], "incremental")  # warm-up
    sizes = []
    for width in (11, 31, 61, 91, 121):
        half = width // 2
        sizes.append({"window": width, "incremental_s": _run(dense, [half] * 4, ["avg(v)"], "incremental")})
    for row in sizes:
        row["over_11x11"] = row["incremental_s"] / sizes[0]["incremental_s"]
    end_to_end, _ = timed(lambda: dense.window([5, 5, 5, 5], "avg(v)").to_numpy(), repeat=2)
    scipy_full, _ = timed(lambda: ndi.uniform_filter(data, size=11, mode="constant"))
    results["window_sizes"] = {
        "shape": [side, side],
        "rows": sizes,
        "end_to_end_to_numpy_11x11_s": end_to_end,
        "scipy_uniform_filter_in_memory_s": scipy_full,
        "end_to_end_over_scipy": end_to_end / scipy_full,
    }
    # naive at 51x51 on a dense array (a 4000x4000 part of the one above: naive there takes minutes)
    part = 1000 if quick else 4000
    sub = dense.subarray(y=(0, part - 1), x=(0, part - 1)).store("bench_dense_sub")
    naive_sub = _run(sub, [25] * 4, ["avg(v)"], "naive")
    incremental_sub = _run(sub, [25] * 4, ["avg(v)"], "incremental")
    block = np.pad(data[:2000, :2000], 25)
    kernel_naive, _ = timed(lambda: window_block(block, None, (25, 25), (25, 25), ["avg"], "naive"))
    kernel_incremental, _ = timed(lambda: window_block(block, None, (25, 25), (25, 25), ["avg"]), repeat=3)
    results["dense_51x51"] = {
        "shape": [part, part],
        "naive_s": naive_sub,
        "incremental_s": incremental_sub,
        "naive_over_incremental": naive_sub / incremental_sub,
        "kernel_chunk": [2000, 2000],
        "kernel_naive_s": kernel_naive,
        "kernel_incremental_s": kernel_incremental,
        "kernel_naive_over_incremental": kernel_naive / kernel_incremental,
    }

    # 2. dimensionality: 2^20 cells, windows of 1024 cells --------------------------------------------
    dims = []
    for ndim, window in ((2, (32, 32)), (3, (16, 8, 8)), (4, (8, 8, 4, 4)), (5, (4, 4, 4, 4, 4))):
        extent = round(2 ** (20 / ndim))
        shape = (extent,) * ndim
        chunk_length = max(4, extent // 2)
        names = [f"d{k}" for k in range(ndim)]
        schema = "; ".join(f"{n}=0:{extent - 1}:{chunk_length}" for n in names)
        array = _fresh(db, f"bench_dim{ndim}", f"bench_dim{ndim}<v:float64>[{schema}]")
        array.write_dense(rng.random(shape))
        flat = [x for w in window for x in (w // 2, w - 1 - w // 2)]
        row = {"ndim": ndim, "cells": math.prod(shape), "window": list(window)}
        for method in ("incremental", "basic", "naive"):
            row[f"{method}_s"] = _run(array, flat, ["sum(v)", "min(v)", "var(v)"], method)
        dims.append(row)
    results["dimensionality"] = dims

    # 3. array size with windows 5x10, 10x10, 10x50 ----------------------------------------------------
    sizes_rows = []
    for cells in [10**3, 10**4, 10**5, 10**6] if quick else [10**3, 10**4, 10**5, 10**6, 10**7, 10**8]:
        rows_, cols = (10 ** (round(math.log10(cells)) // 2), None)
        cols = cells // rows_
        chunk = (min(rows_, 1000), min(cols, 1000))
        array = _fresh(
            db, "bench_size", f"bench_size<v:float64>[y=0:{rows_ - 1}:{chunk[0]}; x=0:{cols - 1}:{chunk[1]}]"
        )
        array.write_dense(rng.random((rows_, cols)))
        for window in ((5, 10), (10, 10), (10, 50)):
            flat = [
                window[0] // 2,
                window[0] - 1 - window[0] // 2,
                window[1] // 2,
                window[1] - 1 - window[1] // 2,
            ]
            row = {
                "cells": cells,
                "window": list(window),
                "incremental_s": _run(array, flat, ["avg(v)"], "incremental"),
            }
            if cells <= 10**6:
                row["naive_s"] = _run(array, flat, ["avg(v)"], "naive")
            sizes_rows.append(row)
    results["array_size"] = sizes_rows
    return results


def report(results: dict, quick: bool) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    name = "window_quick" if quick else "window"
    write_results(name, {"quick": quick, "results": results})
    figure, axes = plt.subplots(2, 2, figsize=(11, 8))
    ndvi = results["ndvi"]["rows"]
    for method in ("naive", "basic", "incremental"):
        axes[0, 0].plot(
            [r["window"] for r in ndvi], [r[f"{method}_s"] for r in ndvi], marker="o", label=method
        )
    axes[0, 0].set(
        title=f"NDVI-like {results['ndvi']['shape']} avg (Fig. 12-15)",
        xlabel="window side",
        ylabel="s",
        yscale="log",
    )
    axes[0, 0].legend()
    sizes = results["window_sizes"]["rows"]
    axes[0, 1].plot([r["window"] for r in sizes], [r["incremental_s"] for r in sizes], marker="o")
    axes[0, 1].set(
        title=f"dense {results['window_sizes']['shape']}: incremental vs window (Fig. 24)",
        xlabel="window side",
        ylabel="s",
        ylim=(0, None),
    )
    dims = results["dimensionality"]
    for method in ("naive", "basic", "incremental"):
        axes[1, 0].plot([r["ndim"] for r in dims], [r[f"{method}_s"] for r in dims], marker="o", label=method)
    axes[1, 0].set(
        title="2^20 cells, 1024-cell windows (Table 5)", xlabel="dimensions", ylabel="s", yscale="log"
    )
    axes[1, 0].legend()
    kernel = results["kernel_vs_scipy"]["rows"]
    axes[1, 1].plot(
        [r["window"] for r in kernel], [r["kernel_avg_s"] for r in kernel], marker="o", label="kernel avg"
    )
    axes[1, 1].plot(
        [r["window"] for r in kernel],
        [r["scipy_uniform_s"] for r in kernel],
        marker="o",
        label="scipy uniform_filter",
    )
    axes[1, 1].plot(
        [r["window"] for r in kernel], [r["kernel_max_s"] for r in kernel], marker="s", label="kernel max"
    )
    axes[1, 1].plot(
        [r["window"] for r in kernel],
        [r["scipy_maximum_s"] for r in kernel],
        marker="s",
        label="scipy maximum_filter",
    )
    axes[1, 1].set(title="per-chunk kernel vs scipy.ndimage", xlabel="window side", ylabel="s")
    axes[1, 1].legend()
    figure.tight_layout()
    figure.savefig(RESULTS / f"{name}.png", dpi=110)
    plt.close(figure)
    for row in kernel:
        print(
            f"kernel {row['window']}x{row['window']}: avg {row['kernel_avg_s'] * 1000:.1f} ms vs scipy {row['scipy_uniform_s'] * 1000:.1f} ms "
            f"({row['avg_speedup_vs_scipy']:.1f}x); max {row['kernel_max_s'] * 1000:.1f} ms vs {row['scipy_maximum_s'] * 1000:.1f} ms "
            f"({row['max_speedup_vs_scipy']:.1f}x)"
        )
    for row in ndvi:
        print(
            f"NDVI {row['window']}x{row['window']}: incremental {row['incremental_s']:.2f} s, basic {row['basic_s']:.2f} s "
            f"({row['basic_over_incremental']:.1f}x), naive {row['naive_s']:.2f} s ({row['naive_over_incremental']:.1f}x)"
        )
    ws = results["window_sizes"]
    for row in ws["rows"]:
        print(
            f"dense {ws['shape']} {row['window']}x{row['window']}: {row['incremental_s']:.2f} s ({row['over_11x11']:.2f}x of 11x11)"
        )
    print(
        f"end to end (Spark, to numpy) 11x11 avg: {ws['end_to_end_to_numpy_11x11_s']:.2f} s vs scipy in memory "
        f"{ws['scipy_uniform_filter_in_memory_s']:.2f} s ({ws['end_to_end_over_scipy']:.1f}x)"
    )
    d51 = results["dense_51x51"]
    print(
        f"dense 51x51 on {d51['shape']}: naive {d51['naive_s']:.2f} s vs incremental {d51['incremental_s']:.2f} s "
        f"({d51['naive_over_incremental']:.1f}x); kernel on {d51['kernel_chunk']}: naive {d51['kernel_naive_s']:.2f} s "
        f"vs incremental {d51['kernel_incremental_s'] * 1000:.0f} ms ({d51['kernel_naive_over_incremental']:.0f}x)"
    )
    for row in dims:
        print(
            f"{row['ndim']}-D {row['cells']} cells: incremental {row['incremental_s']:.2f} s, basic {row['basic_s']:.2f} s, naive {row['naive_s']:.2f} s"
        )
    for row in results["array_size"]:
        naive = f", naive {row['naive_s']:.2f} s" if "naive_s" in row else ""
        print(f"{row['cells']:>10} cells {row['window']}: incremental {row['incremental_s']:.2f} s{naive}")
