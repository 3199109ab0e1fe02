"""Ingest and full read of a dense grid and of a very sparse array, against plain Parquet with pyarrow;
subarray pruning; read time after many small batches, before and after compaction.

Run: ``.venv/bin/python -m benchmarks.run ingest`` (``--quick`` for a small smoke run). With
``ARRAYVIEWS_INGEST_SPARSE=1`` only the sparse case runs (10^6 cells with ``--quick``, 10^7 without;
``ARRAYVIEWS_INGEST_SPARSE_CELLS=n`` sets the number), its reads timed alternately with the baseline's
(best of five each, so both see the same load), to ingest-sparse.json / .png. With
``ARRAYVIEWS_INGEST_DENSE=1`` only the dense case runs (a 2000^2 grid with ``--quick``, 10^4^2
without): writes into fresh arrays alternating with the baseline's Parquet writes, reads likewise
(best of ``ARRAYVIEWS_INGEST_DENSE_REPEAT``, default 3, each), to ingest-dense.json / .png.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.common import bar_plot, scratch_dir, timed, write_results


def _parquet_dense(data: np.ndarray, folder: Path) -> tuple[float, float]:
    """Baseline: the grid as one Parquet column in row-major order, written and read back with pyarrow."""
    path = folder / "dense.parquet"
    write_time, _ = timed(lambda: pq.write_table(pa.table({"v": data.reshape(-1)}), path))
    read_time, back = timed(lambda: pq.read_table(path).column("v").to_numpy().reshape(data.shape))
    assert np.array_equal(back, data)
    return write_time, read_time


def _parquet_plain_write(data: np.ndarray, folder: Path) -> float:
    """A stricter write baseline: the same Parquet column without pyarrow's default dictionary
    encoding, which random float64 values defeat (pyarrow hashes values until the dictionary page
    overflows, then falls back to plain encoding), the way arrayviews writes its value payloads."""
    path = folder / "dense-plain.parquet"
    seconds, _ = timed(lambda: pq.write_table(pa.table({"v": data.reshape(-1)}), path, use_dictionary=False))
    path.unlink()
    return seconds


def _plain_row(write: float, plain_writes: list[float]) -> dict:
    """The dense write against the stricter baseline (no dictionary encoding)."""
    return {
        "parquet_no_dictionary_write_s": min(plain_writes),
        "parquet_no_dictionary_write_s_each": plain_writes,
        "write_ratio_no_dictionary": write / min(plain_writes),
    }


def _sparse_row(cells: dict, extent: int, write: tuple[float, float], read: tuple[float, float]) -> dict:
    """The sparse case's figures: (arrayviews, plain Parquet) seconds of the write and of the read."""
    return {"cells": len(cells["v"]), "domain_cells": extent**3, **_timings(write, read)}


def _timings(write: tuple[float, float], read: tuple[float, float]) -> dict:
    """(arrayviews, plain Parquet) seconds of a write and of a read, and their ratios."""
    return {
        "arrayviews_write_s": write[0],
        "parquet_write_s": write[1],
        "write_ratio": write[0] / write[1],
        "arrayviews_read_s": read[0],
        "parquet_read_s": read[1],
        "read_ratio": read[0] / read[1],
    }


def _parquet_sparse(cells: dict[str, np.ndarray], folder: Path) -> tuple[float, float]:
    """Baseline: one row per cell (coordinates and value) written and read back with pyarrow."""
    path = folder / "sparse.parquet"
    write_time, _ = timed(lambda: pq.write_table(pa.table(cells), path))
    read_time, back = timed(lambda: pq.read_table(path))
    assert back.num_rows == len(cells["v"])
    return write_time, read_time


def _sparse_cells(rng: np.random.Generator, n: int, extent: int) -> dict[str, np.ndarray]:
    """About ``n`` distinct random cells (t, ra, dec) in ``extent``^3 and a value each."""
    cells = {
        "t": rng.integers(0, extent, n),
        "ra": rng.integers(0, extent, n),
        "dec": rng.integers(0, extent, n),
    }
    keys = (cells["t"] * extent + cells["ra"]) * extent + cells["dec"]
    _, first = np.unique(keys, return_index=True)
    cells = {k: v[first] for k, v in cells.items()}
    cells["v"] = rng.normal(size=len(first))
    return cells


def _alternating(first, second, repeat: int) -> tuple[float, float, object]:
    """Best wall times of ``first`` and ``second`` run in turn ``repeat`` times, and first's result."""
    best = [float("inf"), float("inf")]
    result = None
    for _ in range(repeat):
        for k, function in enumerate((first, second)):
            start = time.perf_counter()
            value = function()
            best[k] = min(best[k], time.perf_counter() - start)
            if k == 0:
                result = value
    return best[0], best[1], result


def _warm(db, cells: dict[str, np.ndarray], extent: int) -> None:
    """Insert 2^16 of the cells into a scratch array first (enough for the compiled sort kernels), so
    the timed insert does not pay the one-time load of those kernels (numba's cache, about 1 s per
    process)."""
    if "bench_warm" in db.arrays():
        db.drop_array("bench_warm")
    warm = db.create_array(
        f"bench_warm<v:float64>[t=0:{extent - 1}:5000; ra=0:{extent - 1}:5000; dec=0:{extent - 1}:5000]"
    )
    warm.insert({name: column[: 1 << 16][::-1].copy() for name, column in cells.items()})
    db.drop_array("bench_warm")


def sparse_only(db, quick: bool) -> dict:
    """The sparse case alone: insert, then full reads alternating with plain Parquet's."""
    rng = np.random.default_rng(42)
    scratch = Path(scratch_dir("arrayviews-bench-"))
    n = int(os.environ.get("ARRAYVIEWS_INGEST_SPARSE_CELLS") or (1_000_000 if quick else 10_000_000))
    extent = 100_000
    try:
        cells = _sparse_cells(rng, n, extent)
        _warm(db, cells, extent)
        if "bench_sparse" in db.arrays():
            db.drop_array("bench_sparse")
        sparse = db.create_array(
            f"bench_sparse<v:float64>[t=0:{extent - 1}:5000; ra=0:{extent - 1}:5000; dec=0:{extent - 1}:5000]"
        )
        write_time, _ = timed(lambda: sparse.insert(cells))
        base_write, _ = _parquet_sparse(cells, scratch)
        path = scratch / "sparse.parquet"
        load = os.getloadavg()[0]
        read_time, base_read, table = _alternating(
            lambda: sparse.to_arrow(sort=False), lambda: pq.read_table(path), repeat=5
        )
        assert table.num_rows == len(cells["v"])
        row = _sparse_row(cells, extent, (write_time, base_write), (read_time, base_read))
        return {"sparse": {**row, "load_1min": [load, os.getloadavg()[0]]}}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _dense_row(cells: int, write: tuple[float, float], read: tuple[float, float]) -> dict:
    """The dense case's figures: (arrayviews, plain Parquet) seconds of the write and of the read."""
    return {"cells": cells, **_timings(write, read)}


def dense_only(db, quick: bool) -> dict:
    """The dense case alone: writes into fresh arrays and full reads, each alternating with plain
    Parquet's (so both see the same load); the first write's time is kept apart (one-time costs)."""
    rng = np.random.default_rng(42)
    scratch = Path(scratch_dir("arrayviews-bench-"))
    side = 2000 if quick else 10000
    chunk = 500 if quick else 1000
    repeat = int(os.environ.get("ARRAYVIEWS_INGEST_DENSE_REPEAT") or 3)
    data = rng.normal(size=(side, side))
    path = scratch / "dense.parquet"
    schema = f"<v:float64>[i=0:{side - 1}:{chunk}; j=0:{side - 1}:{chunk}]"
    try:
        load = os.getloadavg()[0]
        writes, base_writes, plain_writes = [], [], []
        for attempt in range(repeat):
            name = f"bench_dense_{attempt}"
            if name in db.arrays():
                db.drop_array(name)
            dense = db.create_array(name + schema)
            seconds, _ = timed(lambda dense=dense: dense.write_dense(data))
            writes.append(seconds)
            seconds, _ = timed(lambda: pq.write_table(pa.table({"v": data.reshape(-1)}), path))
            base_writes.append(seconds)
            plain_writes.append(_parquet_plain_write(data, scratch))
            if attempt < repeat - 1:
                db.drop_array(name)
        read_time, base_read, back = _alternating(
            lambda: dense.to_numpy(),
            lambda: pq.read_table(path).column("v").to_numpy().reshape(side, side),
            repeat,
        )
        assert np.array_equal(back, data)
        row = _dense_row(side * side, (min(writes), min(base_writes)), (read_time, base_read))
        row.update(
            write_s_each=writes,
            parquet_write_s_each=base_writes,
            **_plain_row(min(writes), plain_writes),
            load_1min=[load, os.getloadavg()[0]],
        )
        return {"dense": row}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run(db, quick: bool = False) -> dict:
    if os.environ.get("ARRAYVIEWS_INGEST_SPARSE"):
        return sparse_only(db, quick)
    if os.environ.get("ARRAYVIEWS_INGEST_DENSE"):
        return dense_only(db, quick)
    rng = np.random.default_rng(42)
    scratch = Path(scratch_dir("arrayviews-bench-"))
    results: dict[str, dict] = {}
    try:
        # 1. dense grid ------------------------------------------------------------------------------
        side = 2000 if quick else 10000
        chunk = 500 if quick else 1000
        data = rng.normal(size=(side, side))
        for name in ("bench_dense", "bench_sparse", "bench_batches"):
            if name in db.arrays():
                db.drop_array(name)
        dense = db.create_array(f"bench_dense<v:float64>[i=0:{side - 1}:{chunk}; j=0:{side - 1}:{chunk}]")
        load = os.getloadavg()[0]
        write_time, _ = timed(lambda: dense.write_dense(data))
        read_time, back = timed(lambda: dense.to_numpy(), repeat=2)
        assert np.array_equal(back, data)
        base_write, base_read = _parquet_dense(data, scratch)
        plain_write = _parquet_plain_write(data, scratch)
        results["dense"] = {
            "cells": side * side,
            "arrayviews_write_s": write_time,
            "parquet_write_s": base_write,
            "write_ratio": write_time / base_write,
            "arrayviews_read_s": read_time,
            "parquet_read_s": base_read,
            "read_ratio": read_time / base_read,
            **_plain_row(write_time, [plain_write]),
            "load_1min": load,
        }
        # subarray of a 1% box, not aligned to chunks
        edge = side // 10
        low = side // 3 + 7
        box = {"i": (low, low + edge - 1), "j": (low, low + edge - 1)}
        sub_time, sub = timed(lambda: dense.subarray(**box).to_numpy(), repeat=2)
        assert np.array_equal(sub, data[low : low + edge, low : low + edge])
        ranges = [(low // chunk, (low + edge - 1) // chunk)] * 2
        chunks_read = dense.source.metadata(ranges).num_rows
        chunks_total = dense.source.metadata().num_rows
        results["subarray_1pct"] = {
            "box": box,
            "seconds": sub_time,
            "chunks_read": chunks_read,
            "chunks_total": chunks_total,
            "fraction_of_chunks_read": chunks_read / chunks_total,
            "full_read_s": read_time,
        }

        # 2. sparse array: 10 million cells in a domain of 10^15 cells ------------------------------
        n = 1_000_000 if quick else 10_000_000
        extent = 100_000
        cells = _sparse_cells(rng, n, extent)
        _warm(db, cells, extent)
        sparse = db.create_array(
            f"bench_sparse<v:float64>[t=0:{extent - 1}:5000; ra=0:{extent - 1}:5000; dec=0:{extent - 1}:5000]"
        )
        load = os.getloadavg()[0]
        write_time, _ = timed(lambda: sparse.insert(cells))
        read_time, table = timed(lambda: sparse.to_arrow(sort=False), repeat=2)
        assert table.num_rows == len(cells["v"])
        base_write, base_read = _parquet_sparse(cells, scratch)
        results["sparse"] = _sparse_row(cells, extent, (write_time, base_write), (read_time, base_read))
        results["sparse"]["load_1min"] = [load, os.getloadavg()[0]]

        # 3. many small batches, then compaction -----------------------------------------------------
        batches = 50 if quick else 500
        per_batch = 2000
        grid = db.create_array("bench_batches<v:float64>[i=0:999:100; j=0:999:100]")
        order = rng.permutation(1000 * 1000)[: batches * per_batch]
        batch_time, _ = timed(
            lambda: [
                grid.insert({"i": part // 1000, "j": part % 1000, "v": part.astype(np.float64)})
                for part in np.array_split(order, batches)
            ]
        )
        files_before = len(grid.source.file_uris())
        before_time, before = timed(lambda: grid.to_numpy(), repeat=3)
        compact_time, _ = timed(lambda: grid.compact())
        files_after = len(grid.source.file_uris())
        after_time, after = timed(lambda: grid.to_numpy(), repeat=3)
        assert np.array_equal(before, after, equal_nan=True)
        results["small_batches"] = {
            "batches": batches,
            "cells_per_batch": per_batch,
            "ingest_s": batch_time,
            "seconds_per_batch": batch_time / batches,
            "files_before": files_before,
            "files_after": files_after,
            "read_before_compaction_s": before_time,
            "read_after_compaction_s": after_time,
            "read_speedup_from_compaction": before_time / after_time,
            "compaction_s": compact_time,
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return results


def _report_case(results: dict, quick: bool, case: str, title: str, extra: dict[str, list[float]]) -> None:
    """The JSON and plot of a run of one case (``sparse`` or ``dense``): write and read against
    plain Parquet, plus ``extra`` series."""
    name = f"ingest-{case}_quick" if quick else f"ingest-{case}"
    write_results(name, {"quick": quick, "results": results})
    found = results[case]
    bar_plot(
        name,
        title,
        [f"{case} write", f"{case} read"],
        {
            "arrayviews (s)": [found["arrayviews_write_s"], found["arrayviews_read_s"]],
            "plain Parquet (s)": [found["parquet_write_s"], found["parquet_read_s"]],
            **extra,
        },
        "seconds",
    )


def _report_sparse(results: dict, quick: bool) -> None:
    sparse = results["sparse"]
    title = f"sparse {sparse['cells']:,} cells: arrayviews vs plain Parquet (pyarrow), same run"
    _report_case(results, quick, "sparse", title, {})
    print(
        f"sparse {sparse['cells']} cells in 10^15: write {sparse['arrayviews_write_s']:.3f} s vs "
        f"{sparse['parquet_write_s']:.3f} s (ratio {sparse['write_ratio']:.2f}); read "
        f"{sparse['arrayviews_read_s']:.3f} s vs {sparse['parquet_read_s']:.3f} s (ratio {sparse['read_ratio']:.2f}); "
        f"load {sparse['load_1min'][0]:.1f} -> {sparse['load_1min'][1]:.1f}"
    )


def _report_dense(results: dict, quick: bool) -> None:
    dense = results["dense"]
    title = f"dense {dense['cells']:,} cells vs Parquet (pyarrow), same run"
    _report_case(
        results,
        quick,
        "dense",
        title,
        {"Parquet, no dictionary (s)": [dense["parquet_no_dictionary_write_s"], 0]},
    )
    print(
        f"dense {dense['cells']} cells: write {dense['arrayviews_write_s']:.3f} s vs "
        f"{dense['parquet_write_s']:.3f} s (ratio {dense['write_ratio']:.2f}; each "
        f"{', '.join(f'{a:.2f}/{b:.2f}' for a, b in zip(dense['write_s_each'], dense['parquet_write_s_each'], strict=True))}); "
        f"read {dense['arrayviews_read_s']:.3f} s vs {dense['parquet_read_s']:.3f} s (ratio {dense['read_ratio']:.2f}); "
        f"write vs Parquet without dictionary {dense['parquet_no_dictionary_write_s']:.3f} s "
        f"(ratio {dense['write_ratio_no_dictionary']:.2f}); "
        f"load {dense['load_1min'][0]:.1f} -> {dense['load_1min'][1]:.1f}"
    )


def report(results: dict, quick: bool) -> None:
    if "sparse" in results and "dense" not in results:
        _report_sparse(results, quick)
        return
    if "dense" in results and "sparse" not in results:
        _report_dense(results, quick)
        return
    name = "ingest_quick" if quick else "ingest"
    write_results(name, {"quick": quick, "results": results})
    dense, sparse, batches = results["dense"], results["sparse"], results["small_batches"]
    bar_plot(
        name,
        "arrayviews vs plain Parquet (pyarrow), same run",
        ["dense write", "dense read", "sparse write", "sparse read", "read, 500 batches", "read, compacted"],
        {
            "arrayviews (s)": [
                dense["arrayviews_write_s"],
                dense["arrayviews_read_s"],
                sparse["arrayviews_write_s"],
                sparse["arrayviews_read_s"],
                batches["read_before_compaction_s"],
                batches["read_after_compaction_s"],
            ],
            "plain Parquet (s)": [
                dense["parquet_write_s"],
                dense["parquet_read_s"],
                sparse["parquet_write_s"],
                sparse["parquet_read_s"],
                0,
                0,
            ],
        },
        "seconds",
    )
    print(
        f"dense {dense['cells']} cells: write {dense['arrayviews_write_s']:.2f} s vs Parquet {dense['parquet_write_s']:.2f} s "
        f"(ratio {dense['write_ratio']:.2f}); read {dense['arrayviews_read_s']:.2f} s vs {dense['parquet_read_s']:.2f} s "
        f"(ratio {dense['read_ratio']:.2f}); write vs Parquet without dictionary "
        f"{dense['parquet_no_dictionary_write_s']:.2f} s (ratio {dense['write_ratio_no_dictionary']:.2f}); "
        f"load {dense['load_1min']:.1f}"
    )
    print(
        f"sparse {sparse['cells']} cells in 10^15: write {sparse['arrayviews_write_s']:.2f} s vs {sparse['parquet_write_s']:.2f} s "
        f"(ratio {sparse['write_ratio']:.2f}); read {sparse['arrayviews_read_s']:.2f} s vs {sparse['parquet_read_s']:.2f} s "
        f"(ratio {sparse['read_ratio']:.2f}); load {sparse['load_1min'][0]:.1f} -> {sparse['load_1min'][1]:.1f}"
    )
    sub = results["subarray_1pct"]
    print(
        f"subarray 1% box: {sub['seconds']:.2f} s (full read {sub['full_read_s']:.2f} s), "
        f"{sub['chunks_read']}/{sub['chunks_total']} chunks read ({sub['fraction_of_chunks_read']:.1%})"
    )
    print(
        f"{batches['batches']} small batches: {batches['seconds_per_batch']:.3f} s each; read {batches['read_before_compaction_s']:.2f} s "
        f"over {batches['files_before']} files, {batches['read_after_compaction_s']:.2f} s over {batches['files_after']} after compaction "
        f"(speedup {batches['read_speedup_from_compaction']:.1f}x; compaction took {batches['compaction_s']:.1f} s)"
    )
