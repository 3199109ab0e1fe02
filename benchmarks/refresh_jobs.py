"""Spark jobs and seconds of a Spark-path view refresh (issue 11: "a Spark-path refresh runs at most
two jobs"), the one-job refresh against today's baseline in the same run.

Two copies of each view (neighbour count; count + max + avg, whose deletes recheck extremes; a 3 x 3
window) over a 20,000-cell array (the one-cell refresh of benchmarks/engine.py), all refreshed on
Spark after the same batch: the "before" copy with each action split into jobs as adaptive execution
does and the chunk keys broadcast (the engine's behaviour before the one-job refresh, restored for
those refreshes only), the "after" copy as the engine runs now; the order alternates per batch. The
batches: a one-cell insert (incremental), a two-cell delete (incremental), a one-cell insert
refreshed fully. Jobs are counted with Spark's status tracker; the ratio is the geometric mean of
the paired refreshes. Run: ``.venv/bin/python -m benchmarks.run refresh_jobs`` (``--quick``: one
batch each, a 100 x 100 array).
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import time

import numpy as np

import arrayviews
from arrayviews.execution import spark_engine
from arrayviews.execution.spark_engine import SparkEngine
from arrayviews.model.shapes import L1
from arrayviews.views.definition import similarity, window
from benchmarks.common import bar_plot, write_results

KINDS = {
    "count": lambda: similarity("A", "A", L1(1), ["count(*) as cnt"]),
    "minmax": lambda: similarity(
        "A", "A", L1(1), ["count(*) as cnt", "max(right.v) as hi", "avg(right.v) as m"]
    ),
    "window": lambda: window("A", [1, 1, 1, 1], ["count(*)", "sum(v)", "avg(v)"]),
}
MODES = ("before", "after")


@contextlib.contextmanager
def _mode(mode: str):
    """Today's engine ("after") or the engine before the one-job refresh ("before")."""
    one_job, filter_keys = SparkEngine.one_job, spark_engine.FILTER_KEYS
    if mode == "before":
        SparkEngine.one_job = lambda self, cells=None: contextlib.nullcontext()
        spark_engine.FILTER_KEYS = -1
    try:
        yield
    finally:
        SparkEngine.one_job, spark_engine.FILTER_KEYS = one_job, filter_keys


def run(db, quick: bool = False) -> dict:
    side, chunk, repeats = (100, 25, 1) if quick else (200, 50, 3)
    spark_db = arrayviews.connect(db.warehouse.location, spark=db.spark, execution="spark")
    tracker = db.spark.sparkContext.statusTracker()
    rng = np.random.default_rng(1)
    base = spark_db.create_array(f"A<v:float64>[i=0:{side - 1}:{chunk}; j=0:{side - 1}:{chunk}]")
    present = np.zeros((side, side), bool)
    present[:, : side // 2] = True
    base.write_dense(np.ma.MaskedArray(rng.random((side, side)), mask=~present))
    for kind, definition in KINDS.items():
        for mode in MODES:
            spark_db.create_view(f"{kind}_{mode}", definition())
    runs: dict[str, dict[str, list]] = {}

    def refresh_all(tag: str, strategy: str, batch: int) -> None:
        for kind in KINDS:
            for mode in MODES if batch % 2 == 0 else MODES[::-1]:
                before = set(tracker.getJobIdsForGroup())
                started = time.perf_counter()
                with _mode(mode):
                    spark_db.view(f"{kind}_{mode}").refresh(strategy)
                seconds = time.perf_counter() - started
                jobs = len(set(tracker.getJobIdsForGroup()) - before)
                runs.setdefault(f"{kind} {tag}", {m: [] for m in MODES})[mode].append(
                    {"seconds": seconds, "jobs": jobs, "load": os.getloadavg()[0]}
                )

    for batch in range(repeats):
        base.insert({"i": [batch], "j": [side // 2 + 5], "v": [1.0]})
        refresh_all("insert", "baseline", batch)
        base.delete({"i": [batch, batch + 10], "j": [side // 2 + 5, side // 2 - 1]})
        refresh_all("delete", "baseline", batch)
        base.insert({"i": [batch + 20], "j": [side // 2 + 9], "v": [3.0]})
        refresh_all("full", "full", batch)
    agree = {}
    for kind in KINDS:
        frames = [
            spark_db.view(f"{kind}_{m}").to_pandas().sort_values(["i", "j"]).reset_index(drop=True)
            for m in MODES
        ]
        agree[kind] = bool(frames[0].equals(frames[1])) and all(
            spark_db.view(f"{kind}_{m}").verify() for m in MODES
        )
    cases = {}
    for case, modes in runs.items():
        pairs = [a["seconds"] / b["seconds"] for a, b in zip(modes["after"], modes["before"], strict=True)]
        cases[case] = {
            **{f"{m}_seconds": statistics.median(r["seconds"] for r in modes[m]) for m in MODES},
            **{f"{m}_jobs": [r["jobs"] for r in modes[m]] for m in MODES},
            "after_over_before": math.exp(sum(map(math.log, pairs)) / len(pairs)),
            "loads": [r["load"] for m in MODES for r in modes[m]],
        }
    return {"cells": int(present.sum()), "identical_and_verified": agree, "cases": cases}


def report(results: dict, quick: bool) -> None:
    for case, row in results["cases"].items():
        print(
            f"{case:16s} before {row['before_seconds']:6.2f} s, jobs {row['before_jobs']}; "
            f"after {row['after_seconds']:6.2f} s, jobs {row['after_jobs']}; "
            f"after / before {row['after_over_before']:.2f}"
        )
    print("identical and verified:", results["identical_and_verified"])
    name = "refresh_jobs" + ("-quick" if quick else "")
    write_results(name, results)
    labels = list(results["cases"])
    series = {f"{m} (s)": [results["cases"][c][f"{m}_seconds"] for c in labels] for m in MODES}
    bar_plot(
        name,
        "Spark-path refresh: adaptive jobs (before) vs one job (after), same run",
        labels,
        series,
        "seconds",
    )
