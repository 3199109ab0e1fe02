"""Small work in-process, large work on Spark (issue 11): the same operations on both executors and
against numpy/scipy, measured in one run.

1. One-cell insert + refresh of a neighbour-count view (L1 radius 1) over a 20,000-cell array:
   refresh on Spark (forced) against refresh with ``execution="auto"`` (in-process here).
2. 5x5 window average over the 344 x 403 Jacksboro fault elevation grid (matplotlib's sample data):
   in-process and Spark against ``scipy.ndimage.uniform_filter`` (the same average, borders shrunk).
3. A 50 x 50 subarray read of that grid, and a 316 x 316 one (10^5 cells, across 16 chunks):
   in-process and Spark against numpy slicing (with a copy); a 4 x 4 regrid (block average) of the
   whole grid against numpy's reshape-and-mean of the same blocks. In-process subarray reads are
   timed warm (repeated reads, the chunk cache holding the chunks) and cold (the cache cleared before
   each read), with the Python calls per read (cProfile) as a count that does not depend on the load.
4. A 200-cell batch in one chunk (0.25% of the chunks at 4e6 cells) over growing base arrays
   (2.5e5 to 1.6e7 cells): ``refresh("auto")`` (median of three batches, after a one-cell refresh
   that fills the process's caches, timed apart) against a full
   recomputation (``refresh("full")``) of the same view; the growth of the refresh time across the
   64x range is the ratio of the medians at the largest and smallest array.
5. Batches of 200, 2,000 and 9,999 cells, each filling part of an empty 100 x 100 chunk of a
   4e6-cell array (so the batch reaches the chunks beside it): ``refresh("auto")`` against the goal
   of 0.3 s for batches under 10^4 cells, and a full recomputation after the last.

Run: ``.venv/bin/python -m benchmarks.run engine`` (``--quick``: smaller sizes). With
``ARRAYVIEWS_ENGINE_SMALL=1`` only the in-process small operations run (window, subarray, regrid and
the catalog floor: the SQL lookup of a table's current metadata location that any fresh read makes),
written to engine-small.json / .png.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

import numpy as np

import arrayviews
from arrayviews.model.shapes import L1
from arrayviews.views.definition import similarity
from benchmarks.common import RESULTS, bar_plot, timed, write_results

DEM = Path(np.__file__).resolve().parents[1] / "matplotlib/mpl-data/sample_data/jacksboro_fault_dem.npz"
COUNT = ["count(*) as cnt"]
#: The larger subarray of the elevation grid: 316 x 316 = 99,856 cells across 4 x 4 chunks.
LARGE_BOX = ((14, 329), (43, 358))


def _seconds(function) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def _one_cell(dbs: dict, repeats: int) -> dict:
    """Insert one cell into a 20,000-cell array, then refresh its neighbour-count view."""
    auto, spark = dbs["auto"], dbs["spark"]
    base = auto.create_array("small<v:float64>[i=0:199:50; j=0:199:50]")
    values = np.random.default_rng(1).random((200, 200))
    present = np.zeros((200, 200), bool)
    present[:, :100] = True  # 20,000 cells; the right half is free for the inserts
    base.write_dense(np.ma.MaskedArray(values, mask=~present))
    auto.create_view("near_auto", similarity("small", "small", L1(1), COUNT))
    spark.create_view("near_spark", similarity("small", "small", L1(1), COUNT))
    times = {"insert": [], "auto": [], "spark": []}
    executors = {}
    for k in range(repeats):
        times["insert"].append(_seconds(lambda k=k: base.insert({"i": [k], "j": [150], "v": [1.0]})))
        for mode, name in (("auto", "near_auto"), ("spark", "near_spark")):
            view = dbs[mode].view(name)
            started = time.perf_counter()
            result = view.refresh()
            times[mode].append(time.perf_counter() - started)
            executors[mode] = (result.strategy, result.executor)
        assert auto.view("near_auto").verify()
    medians = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"one-cell insert {medians['insert']:.3f} s; refresh auto ({executors['auto']}) "
        f"{medians['auto']:.3f} s, Spark {medians['spark']:.3f} s: "
        f"{medians['spark'] / medians['auto']:.1f}x faster"
    )
    return {
        "seconds": medians,
        "executors": executors,
        "speedup_vs_spark": medians["spark"] / medians["auto"],
    }


def _dem(dbs: dict, repeats: int, modes: tuple[str, ...] = ("auto", "spark")) -> dict:
    """Window and subarray over the elevation grid against scipy and numpy."""
    from scipy import ndimage

    elevation = np.load(DEM)["elevation"].astype(np.float64)
    rows, columns = elevation.shape
    dem = dbs["auto"].create_array(f"dem<v:float64>[i=0:{rows - 1}:100; j=0:{columns - 1}:100]")
    dem.write_dense(elevation)

    def scipy_average() -> np.ndarray:
        total = ndimage.uniform_filter(elevation, 5, mode="constant")
        count = ndimage.uniform_filter(np.ones_like(elevation), 5, mode="constant")
        return total / count

    def numpy_regrid() -> np.ndarray:
        padded = np.full((-(-rows // 4) * 4, -(-columns // 4) * 4), np.nan)
        padded[:rows, :columns] = elevation
        blocks = padded.reshape(padded.shape[0] // 4, 4, padded.shape[1] // 4, 4)
        return np.nanmean(blocks, axis=(1, 3))

    results: dict = {"window": {}, "subarray": {}, "regrid": {}}
    results["regrid"]["numpy"], coarse = timed(numpy_regrid, repeats)
    results["window"]["scipy"], expected = timed(scipy_average, repeats)
    results["subarray"]["numpy"], block = timed(lambda: elevation[100:150, 200:250].copy(), repeats)
    large = {"i": LARGE_BOX[0], "j": LARGE_BOX[1]}
    (i0, i1), (j0, j1) = LARGE_BOX
    results["subarray_large"] = {"cells": (i1 - i0 + 1) * (j1 - j0 + 1)}
    results["subarray_large"]["numpy"], large_block = timed(
        lambda: elevation[i0 : i1 + 1, j0 : j1 + 1].copy(), repeats
    )
    for mode in modes:
        array = dbs[mode].array("dem")
        seconds, got = timed(lambda a=array: a.window([2, 2, 2, 2], "avg(v)").to_numpy(), repeats)
        assert np.allclose(got, expected, rtol=1e-9, atol=1e-9)
        results["window"][mode] = seconds
        seconds, cut = timed(lambda a=array: a.subarray(i=(100, 149), j=(200, 249)).to_numpy(), repeats)
        assert np.array_equal(cut, block)
        results["subarray"][mode] = seconds
        seconds, cut = timed(lambda a=array: a.subarray(**large).to_numpy(), repeats)
        assert np.array_equal(cut, large_block)
        results["subarray_large"][mode] = seconds
        seconds, got = timed(lambda a=array: a.regrid([4, 4], "avg(v)").to_numpy(), repeats)
        assert np.allclose(got, coarse, rtol=1e-12)
        results["regrid"][mode] = seconds
    if "spark" not in modes:
        return results
    window, cut, regrid = results["window"], results["subarray"], results["regrid"]
    print(
        f"5x5 window average on {rows}x{columns}: scipy {window['scipy']:.4f} s, in-process "
        f"{window['auto']:.3f} s ({window['auto'] / window['scipy']:.0f}x scipy), Spark {window['spark']:.3f} s "
        f"({window['spark'] / window['scipy']:.0f}x scipy)"
    )
    print(
        f"50x50 subarray read: numpy {cut['numpy'] * 1e6:.0f} us, in-process {cut['auto']:.3f} s, "
        f"Spark {cut['spark']:.3f} s ({cut['spark'] / cut['auto']:.1f}x the in-process read)"
    )
    print(
        f"4x4 regrid average: numpy {regrid['numpy'] * 1e3:.2f} ms, in-process {regrid['auto']:.3f} s "
        f"({regrid['auto'] / regrid['numpy']:.0f}x numpy), Spark {regrid['spark']:.3f} s"
    )
    return results


def _growing(dbs: dict, sides: list[int], repeats: int = 3) -> list[dict]:
    """A 200-cell batch in one chunk of a side x side array (chunks of 100 x 100)."""
    db = dbs["auto"]
    rows = []
    for side in sides:
        name = f"grow{side}"
        base = db.create_array(f"{name}<v:float64>[i=0:{side - 1}:100; j=0:{side - 1}:100]")
        present = np.ones((side, side), bool)
        present[10:40, 10:40] = False  # 900 free cells in chunk (0, 0): batches of 200
        base.write_dense(np.ma.MaskedArray(np.random.default_rng(side).random((side, side)), mask=~present))
        view = db.create_view(f"{name}_near", similarity(name, name, L1(1), COUNT))
        free = np.argwhere(~present)
        batches = [free[200 * k : 200 * (k + 1)] for k in range(repeats + 1)]
        # the first refresh after the view's computation fills this process's caches (the view's
        # file metadata, 1.9-0.10 s at 1.6e7 cells after a Spark computation): one cell, timed apart
        base.insert({"i": free[-1:, 0], "j": free[-1:, 1], "v": np.ones(1)})
        started = time.perf_counter()
        view.refresh("auto")
        first = time.perf_counter() - started
        times = []
        for batch in batches[:-1]:
            base.insert({"i": batch[:, 0], "j": batch[:, 1], "v": np.ones(200)})
            started = time.perf_counter()
            result = view.refresh("auto")
            times.append(time.perf_counter() - started)
        incremental = statistics.median(times)
        if side <= 1000:  # the maintained view equals its recomputation (checked where it is cheap)
            assert view.verify()
        base.insert({"i": batches[-1][:, 0], "j": batches[-1][:, 1], "v": np.ones(200)})
        started = time.perf_counter()
        view.refresh("full")
        full = time.perf_counter() - started
        row = {
            "cells": side * side - 900 + 200 * repeats + 1,
            "chunks": (side // 100) ** 2,
            "auto_seconds": incremental,
            "auto_all_seconds": times,
            "first_refresh_seconds": first,
            "auto_strategy": result.strategy,
            "auto_executor": result.executor,
            "auto_estimates": result.estimates,
            "full_seconds": full,
            "speedup": full / incremental,
        }
        rows.append(row)
        print(
            f"{row['cells']:>10,} cells: refresh auto ({result.strategy}, {result.executor}) "
            f"{incremental:.3f} s, full {full:.3f} s: {full / incremental:.1f}x (first refresh, one cell: "
            f"{first:.3f} s)"
        )
        db.drop_view(f"{name}_near")
        db.drop_array(name)
    return rows


def _batch_sizes(db, side: int, sizes: tuple[int, ...] = (200, 2_000, 9_999)) -> dict:
    """Refreshes of growing batches, each in an empty chunk of its own (chunks of 100 x 100)."""
    name = f"sizes{side}"
    base = db.create_array(f"{name}<v:float64>[i=0:{side - 1}:100; j=0:{side - 1}:100]")
    present = np.ones((side, side), bool)
    holes = [(100 * (3 + 3 * k), 100 * (3 + 3 * k)) for k in range(len(sizes))]  # chunks (3,3), (6,6)...
    for i, j in holes:
        present[i : i + 100, j : j + 100] = False
    base.write_dense(np.ma.MaskedArray(np.random.default_rng(side).random((side, side)), mask=~present))
    view = db.create_view(f"{name}_near", similarity(name, name, L1(1), COUNT))
    rows = []
    for size, (i, j) in zip(sizes, holes, strict=True):
        cells = np.argwhere(np.ones((100, 100), bool))[:size] + [i, j]  # row by row from the corner
        base.insert({"i": cells[:, 0], "j": cells[:, 1], "v": np.ones(size)})
        started = time.perf_counter()
        result = view.refresh("auto")
        seconds = time.perf_counter() - started
        rows.append(
            {
                "cells": size,
                "auto_seconds": seconds,
                "strategy": result.strategy,
                "executor": result.executor,
                "view_chunks_rewritten": result.view_chunks_rewritten,
            }
        )
        print(
            f"{size:>6,}-cell batch over {side * side:,} cells: refresh auto ({result.strategy}, "
            f"{result.executor}) {seconds:.3f} s, {result.view_chunks_rewritten} view chunks rewritten"
        )
    if side <= 1000:  # the maintained view equals its recomputation (checked where it is cheap)
        assert view.verify()
    i, j = holes[-1]
    base.insert({"i": [i + 99], "j": [j + 99], "v": [1.0]})  # the last cell of the last chunk
    started = time.perf_counter()
    view.refresh("full")
    full = time.perf_counter() - started
    print(f"full recomputation of the view (one more cell): {full:.3f} s")
    db.drop_view(f"{name}_near")
    db.drop_array(name)
    return {"array_cells": side * side, "batches": rows, "full_seconds": full}


def catalog_floor(db, repeats: int) -> float:
    """Best time of the SQL lookup of one table's current metadata location: the least a read that
    must see another process's commit pays before it touches any file (one statement, built once,
    on a plain connection: no ORM session)."""
    from pyiceberg.catalog.sql import IcebergTables
    from sqlalchemy import select

    catalog = db.warehouse.catalog
    identifier = db.warehouse._identifier("dem")
    statement = select(IcebergTables.metadata_location).where(
        IcebergTables.catalog_name == catalog.name,
        IcebergTables.table_namespace == identifier[0],
        IcebergTables.table_name == identifier[-1],
    )

    def lookup() -> str:
        with catalog.engine.connect() as connection:
            return connection.execute(statement).scalar_one()

    seconds, location = timed(lookup, repeats)
    assert location.endswith(".metadata.json")
    return seconds


def _clear_chunk_cache() -> None:
    """Empty this process's chunk cache (a no-op on code that has none)."""
    try:
        from arrayviews.storage.chunk_cache import process_cache
    except ImportError:
        return
    process_cache().clear()


def _cold(function, repeats: int) -> float:
    """Best time of ``function`` with the chunk cache emptied before each run."""
    best = float("inf")
    for _ in range(repeats):
        _clear_chunk_cache()
        best = min(best, _seconds(function))
    return best


def _calls(function, repeats: int = 5) -> float:
    """Python function calls per run of ``function`` (cProfile), after one warm-up run."""
    import cProfile
    import pstats

    function()
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(repeats):
        function()
    profile.disable()
    return pstats.Stats(profile).total_calls / repeats


def small_operations(db, repeats: int = 20) -> dict:
    """The in-process small operations on the elevation grid against numpy/scipy and the catalog floor."""
    results = _dem({"auto": db}, repeats, modes=("auto",))
    results["catalog_floor"] = catalog_floor(db, repeats)
    array = db.array("dem")
    large = {"i": LARGE_BOX[0], "j": LARGE_BOX[1]}
    reads = {
        "subarray": lambda: array.subarray(i=(100, 149), j=(200, 249)).to_numpy(),
        "subarray_large": lambda: array.subarray(**large).to_numpy(),
    }
    for name, read in reads.items():
        results[name]["auto_cold"] = _cold(read, repeats)
        results[name]["calls_per_read"] = _calls(read)
    results["load"] = os.getloadavg()
    ratios = {
        "window_vs_scipy": results["window"]["auto"] / results["window"]["scipy"],
        "subarray_vs_numpy": results["subarray"]["auto"] / results["subarray"]["numpy"],
        "subarray_vs_catalog_floor": results["subarray"]["auto"] / results["catalog_floor"],
        "subarray_cold_vs_catalog_floor": results["subarray"]["auto_cold"] / results["catalog_floor"],
        "subarray_large_vs_numpy": results["subarray_large"]["auto"] / results["subarray_large"]["numpy"],
        "subarray_large_vs_catalog_floor": results["subarray_large"]["auto"] / results["catalog_floor"],
        "subarray_large_cold_vs_numpy": results["subarray_large"]["auto_cold"]
        / results["subarray_large"]["numpy"],
        "catalog_floor_vs_numpy": results["catalog_floor"] / results["subarray"]["numpy"],
        "regrid_vs_numpy": results["regrid"]["auto"] / results["regrid"]["numpy"],
    }
    results["ratios"] = ratios
    print(f"load average {results['load'][0]:.1f}; best of {repeats}")
    print(
        f"5x5 window: scipy {results['window']['scipy'] * 1e3:.2f} ms, in-process "
        f"{results['window']['auto'] * 1e3:.2f} ms ({ratios['window_vs_scipy']:.1f}x)"
    )
    print(
        f"50x50 subarray: numpy {results['subarray']['numpy'] * 1e6:.1f} us, catalog floor "
        f"{results['catalog_floor'] * 1e3:.3f} ms, in-process {results['subarray']['auto'] * 1e3:.2f} ms "
        f"({ratios['subarray_vs_numpy']:.0f}x numpy, {ratios['subarray_vs_catalog_floor']:.1f}x the floor)"
    )
    print(
        f"50x50 subarray cold (chunk cache emptied): {results['subarray']['auto_cold'] * 1e3:.2f} ms; "
        f"{results['subarray']['calls_per_read']:.0f} Python calls per read"
    )
    big = results["subarray_large"]
    print(
        f"{big['cells']:,}-cell subarray: numpy copy {big['numpy'] * 1e6:.1f} us, in-process "
        f"{big['auto'] * 1e3:.2f} ms warm ({ratios['subarray_large_vs_numpy']:.0f}x numpy, "
        f"{ratios['subarray_large_vs_catalog_floor']:.1f}x the floor), {big['auto_cold'] * 1e3:.2f} ms cold; "
        f"{big['calls_per_read']:.0f} Python calls per read"
    )
    print(
        f"4x4 regrid average: numpy {results['regrid']['numpy'] * 1e3:.2f} ms, in-process "
        f"{results['regrid']['auto'] * 1e3:.2f} ms ({ratios['regrid_vs_numpy']:.1f}x)"
    )
    return results


def report_small(results: dict) -> None:
    write_results("engine-small", results)
    big = results["subarray_large"]
    labels = ["5x5 window 344x403", "50x50 subarray", "316x316 subarray", "4x4 regrid 344x403"]
    series = {
        "in-process": [
            results["window"]["auto"],
            results["subarray"]["auto"],
            big["auto"],
            results["regrid"]["auto"],
        ],
        "in-process, chunk cache cold": [0.0, results["subarray"]["auto_cold"], big["auto_cold"], 0.0],
        "scipy / numpy": [
            results["window"]["scipy"],
            results["subarray"]["numpy"],
            big["numpy"],
            results["regrid"]["numpy"],
        ],
        "catalog lookup (floor)": [0.0, results["catalog_floor"], results["catalog_floor"], 0.0],
    }
    bar_plot(
        "engine-small", "Small operations in-process vs numpy/scipy (same run)", labels, series, "seconds"
    )
    print(f"results in {RESULTS / 'engine-small.json'}")


def run(db, quick: bool = False) -> dict:
    if os.environ.get("ARRAYVIEWS_ENGINE_SMALL"):
        return {"small": small_operations(db)}
    location = db.warehouse.location
    dbs = {
        "auto": db,
        "spark": arrayviews.connect(location, spark=db.spark, execution="spark"),
    }
    repeats = 2 if quick else 3
    results = {"one_cell": _one_cell(dbs, repeats), "dem": _dem(dbs, repeats)}
    results["growing"] = _growing(dbs, [500, 1000] if quick else [500, 1000, 2000, 4000])
    results["batch_sizes"] = _batch_sizes(dbs["auto"], 1000 if quick else 2000)
    first, last = results["growing"][0], results["growing"][-1]
    results["refresh_growth"] = last["auto_seconds"] / first["auto_seconds"]
    print(
        f"refresh time across {last['cells'] / first['cells']:.0f}x array growth: "
        f"{results['refresh_growth']:.2f}x"
    )
    return results


def report(results: dict, quick: bool) -> None:
    if "small" in results:
        report_small(results["small"])
        return
    name = "engine-quick" if quick else "engine"
    write_results(name, {**results, "quick": quick})
    window, cut = results["dem"]["window"], results["dem"]["subarray"]
    labels = [
        "one-cell refresh",
        "5x5 window 344x403",
        "50x50 subarray",
        *[f"200-cell refresh, {g['cells']:.0e} cells" for g in results["growing"]],
        *[f"{b['cells']:,}-cell batch, 4e6 cells" for b in results["batch_sizes"]["batches"]],
    ]
    series = {
        "in-process (auto)": [
            results["one_cell"]["seconds"]["auto"],
            window["auto"],
            cut["auto"],
            *[g["auto_seconds"] for g in results["growing"]],
            *[b["auto_seconds"] for b in results["batch_sizes"]["batches"]],
        ],
        "Spark / full recomputation": [
            results["one_cell"]["seconds"]["spark"],
            window["spark"],
            cut["spark"],
            *[g["full_seconds"] for g in results["growing"]],
            *[results["batch_sizes"]["full_seconds"] for _ in results["batch_sizes"]["batches"]],
        ],
        "scipy / numpy": [
            0.0,
            window["scipy"],
            cut["numpy"],
            *[0.0 for _ in results["growing"]],
            *[0.0 for _ in results["batch_sizes"]["batches"]],
        ],
    }
    bar_plot(name, "Executors: in-process vs Spark (same run)", labels, series, "seconds")
    print(f"results in {RESULTS / (name + '.json')}")
