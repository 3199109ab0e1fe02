"""Calibrating the executor cost model on the running machine: the same window operation timed on
both engines at two sizes, fitted to ``fixed + per_job * jobs + per_cell * cells``."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pyarrow as pa

from arrayviews.execution.cost import CostModel
from arrayviews.execution.engine import Engine
from arrayviews.execution.executors import Executors
from arrayviews.model.schema_parser import parse_schema
from arrayviews.operators.cells import cells_to_fragment_table
from arrayviews.operators.source import ComputedSource
from arrayviews.operators.window import window
from arrayviews.storage import layout

#: Sides of the square test grids (cells = side**2), small and large.
SIDES = (100, 400)
#: Jobs one timed run of the window runs on Spark (the halo shuffle and the collect).
JOBS_PER_RUN = 1


def _fragments(side: int) -> tuple[pa.Table, object]:
    schema = parse_schema(f"calibration<v:float64>[i=0:{side - 1}:100; j=0:{side - 1}:100]")
    i, j = np.meshgrid(np.arange(side), np.arange(side), indexing="ij")
    values = np.random.default_rng(0).random(side * side)
    cells = pa.table({"i": i.reshape(-1), "j": j.reshape(-1), "v": values})
    return cells_to_fragment_table(cells, schema), schema


def _time(engine: Engine, fragments: pa.Table, schema, repeats: int) -> float:
    """The best of ``repeats`` runs of a 5x5 window average over the fragments on ``engine``."""
    best = float("inf")
    arrow_schema = layout.fragment_schema(schema)
    for _ in range(repeats):
        started = time.perf_counter()
        source = ComputedSource(schema, engine.from_arrow(fragments, arrow_schema), engine=engine)
        result = window(source, engine, [2, 2, 2, 2], ["avg(v)"])
        engine.collect(result.plan, layout.fragment_schema(result.schema))
        best = min(best, time.perf_counter() - started)
    return best


def _fit(small: tuple[int, float], large: tuple[int, float]) -> tuple[float, float]:
    """(intercept, slope) of the line through two (cells, seconds) points, both kept >= 0."""
    (n1, t1), (n2, t2) = small, large
    slope = max((t2 - t1) / (n2 - n1), 1e-12)
    return max(t1 - slope * n1, 0.0), slope


def calibrate(executors: Executors, repeats: int = 2) -> CostModel:
    """Measure both engines here and store the fitted costs in the warehouse (``execution.json``).

    The in-process limit on cells stays at least the default and grows to what the driver handles
    in about 10 seconds, so a faster machine keeps more work in-process."""
    measured: dict[str, list[tuple[int, float]]] = {"local": [], "spark": []}
    for side in SIDES:
        fragments, schema = _fragments(side)
        for name in measured:
            engine = executors.engine(name)
            _time(engine, fragments, schema, 1)  # warm-up (Python workers, numba compilation)
            measured[name].append((side * side, _time(engine, fragments, schema, repeats)))
    local_fixed, local_per_cell = _fit(*measured["local"])
    spark_fixed, spark_per_cell = _fit(*measured["spark"])
    # Spark's fixed cost dominates both sizes, so its slope is noise: never credit it with more
    # than its cores' worth of the in-process speed.
    cores = max(1, executors.spark.spark.sparkContext.defaultParallelism)
    spark_per_cell = max(spark_per_cell, local_per_cell / cores)
    default = CostModel()
    kept = executors.costs  # the uncertain per-copy and per-pair terms (uncertain_calibration.py)
    model = replace(
        kept,  # the refresh and stream step terms too
        local=replace(kept.local, fixed=local_fixed, per_job=0.0, per_cell=local_per_cell),
        spark=replace(kept.spark, fixed=0.0, per_job=spark_fixed / JOBS_PER_RUN, per_cell=spark_per_cell),
        max_local_cells=max(
            default.max_local_cells, min(5 * default.max_local_cells, int(10.0 / local_per_cell))
        ),
        max_local_bytes=default.max_local_bytes,
    ).stamped({name: [[n, round(t, 6)] for n, t in points] for name, points in measured.items()})
    executors.store_costs(model)
    return model
