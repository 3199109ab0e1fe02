"""The window on Spark at 10^8 cells against single-threaded scipy (issue 11: "the Spark path kept
within 3x of scipy at 10^8 cells").

A dense 10,000 x 10,000 float64 array in 1000 x 1000 chunks, an 11 x 11 average, end to end to a
numpy array (``to_numpy``) with ``execution="spark"``: the tiled path (each task reads its tile of
chunks and the chunks within reach, no shuffle) and the halo exchange (every cell cut, shuffled and
grouped by target chunk) against ``scipy.ndimage.uniform_filter`` on the same data in memory.

Run: ``.venv/bin/python -m benchmarks.run window_spark`` (``--quick``: 2000 x 2000).
"""

from __future__ import annotations

import os

import numpy as np
import scipy.ndimage as ndi

import arrayviews
from arrayviews.operators import reads
from arrayviews.operators import window as window_operator
from arrayviews.operators.source import ComputedSource
from benchmarks.common import bar_plot, timed, write_results


def _exchange(array, engine):
    """The same window through the halo exchange (the path before tiles), as a numpy array."""
    source = array.source
    schema = source.schema
    job = window_operator.WindowJob.of(schema, [5, 5, 5, 5], ["avg(v)"])
    data = window_operator.halo_exchange(source.data(engine), engine, job)
    return reads.to_numpy(ComputedSource(job.out_schema, data, engine=engine), None, None, False)


def run(db, quick: bool = False) -> dict:
    side = 2000 if quick else 10000
    spark_db = arrayviews.connect(db.warehouse.location, spark=db.spark, execution="spark")
    array = spark_db.create_array(f"dense<v:float64>[y=0:{side - 1}:1000; x=0:{side - 1}:1000]")
    data = np.random.default_rng(11).random((side, side))
    array.write_dense(data)
    window = array.window([5, 5, 5, 5], "avg(v)")
    timed(window.to_numpy)  # warm-up: Python workers, numba
    tiled_s, tiled = timed(window.to_numpy, repeat=3)
    engine = window.source.engine
    exchange_s, exchanged = timed(lambda: _exchange(array, engine), repeat=2)
    scipy_s, expected = timed(lambda: ndi.uniform_filter(data, size=11, mode="constant"), repeat=3)
    inner = (slice(5, -5), slice(5, -5))
    assert np.allclose(tiled[inner], expected[inner]) and np.array_equal(tiled, exchanged)
    results = {
        "cells": side * side,
        "tiled_s": tiled_s,
        "exchange_s": exchange_s,
        "scipy_s": scipy_s,
        "tiled_over_scipy": tiled_s / scipy_s,
        "exchange_over_scipy": exchange_s / scipy_s,
        "exchange_over_tiled": exchange_s / tiled_s,
        "load": os.getloadavg()[0],
    }
    print(
        f"{side * side:.0e} cells: tiled {tiled_s:.2f} s ({results['tiled_over_scipy']:.2f}x scipy), "
        f"exchange {exchange_s:.2f} s ({results['exchange_over_scipy']:.2f}x), scipy {scipy_s:.2f} s, "
        f"load {results['load']:.1f}"
    )
    return results


def report(results: dict, quick: bool) -> None:
    name = "window_spark_quick" if quick else "window_spark"
    write_results(name, {"quick": quick, "results": results})
    bar_plot(
        name,
        f"11x11 average over {results['cells']:.0e} cells, end to end",
        ["seconds"],
        {
            "Spark, tiled": [results["tiled_s"]],
            "Spark, halo exchange": [results["exchange_s"]],
            "scipy uniform_filter": [results["scipy_s"]],
        },
        "s",
    )
