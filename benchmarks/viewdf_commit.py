"""The commit of a ViewDF window step through its two paths, in the same run: the append path
(storage/append_commit.py, what every commit that removes nothing takes) against pyiceberg's
transaction and merging-append producer (storage/snapshots.py ``commit_snapshot``, the baseline
and the path of every other commit).

A sum and a max window of 100 parts over the ``viewdf_scope`` stream (10**4 rows a part, 1,000
source/destination pairs), maintained in-process, naive recomputation of the newest part run
between steps as in ``viewdf_scope`` (so each step meets the caches naive just filled). Each
(window, path) runs in a fresh warehouse; the two paths alternate, three rounds, the order turned
each round. Per run: the median step and the median commit (``PartTable.commit``) of the steps
after the window is full. Ratios are pyiceberg's path over the append path, per round (both from
the same round of the same run) and for the medians of the rounds."""

from __future__ import annotations

import time
from contextlib import contextmanager

import numpy as np

from benchmarks.common import RESULTS, write_results
from benchmarks.viewdf import (
    Bench,
    _set_execution,
    fresh_window_view,
    minute_batch,
    naive_local,
    naive_window_sql,
)

PATHS = ("append", "pyiceberg")
ROUNDS = 3
WINDOW = 100


@contextmanager
def _commit_path(path: str, commits: list[float]):
    """Commits through ``path``, each commit's seconds appended to ``commits``."""
    from arrayviews.storage import part_table, versioned

    real_append, real_commit = versioned.commit_append, part_table.PartTable.commit

    def timed(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return real_commit(self, *args, **kwargs)
        finally:
            commits.append(time.perf_counter() - start)

    if path == "pyiceberg":
        versioned.commit_append = lambda *args, **kwargs: None  # every commit through pyiceberg's path
    part_table.PartTable.commit = timed
    try:
        yield
    finally:
        versioned.commit_append, part_table.PartTable.commit = real_append, real_commit


def _one_run(bench: Bench, aggregate: str, path: str, steps: int) -> dict:
    db, stream, _ = fresh_window_view(bench, aggregate, WINDOW)
    try:
        sql = naive_window_sql(aggregate)
        step_times, commits, measured = [], [], []
        with _commit_path(path, commits):
            for minute in range(1, steps):
                bench.append(stream, minute_batch(minute, 1000, readings_per_pair=10))
                before = len(commits)
                seconds = bench.maintain()
                if minute > WINDOW + 5:
                    step_times.append(seconds)
                    measured.extend(commits[before:])
                    naive_local(bench, stream, stream.part_range()[1], WINDOW, sql=sql)
    finally:
        _set_execution(db, "auto")
    return {
        "step_s": float(np.median(step_times)),
        "commit_s": float(np.median(measured)),
        "steps": len(step_times),
    }


def run(db, quick: bool = False) -> dict:
    steps = WINDOW + 40 if quick else WINDOW + 160
    bench = Bench(db)
    rows = []
    try:
        for aggregate in ("sum", "max"):
            rounds = []
            for number in range(ROUNDS):
                order = PATHS if number % 2 == 0 else PATHS[::-1]
                found = {path: _one_run(bench, aggregate, path, steps) for path in order}
                found["commit_ratio"] = found["pyiceberg"]["commit_s"] / found["append"]["commit_s"]
                found["step_ratio"] = found["pyiceberg"]["step_s"] / found["append"]["step_s"]
                rounds.append(found)
                print(
                    f"{aggregate} W={WINDOW} round {number + 1}: commit append {found['append']['commit_s'] * 1e3:.3f} ms, "
                    f"pyiceberg {found['pyiceberg']['commit_s'] * 1e3:.3f} ms ({found['commit_ratio']:.2f}x); step "
                    f"{found['append']['step_s'] * 1e3:.3f} against {found['pyiceberg']['step_s'] * 1e3:.3f} ms "
                    f"({found['step_ratio']:.2f}x)"
                )
            row = {"aggregate": aggregate, "window": WINDOW, "rounds": rounds}
            for what in ("commit_s", "step_s"):
                for path in PATHS:
                    row[f"{path}_{what}"] = float(np.median([r[path][what] for r in rounds]))
            row["commit_ratio"] = row["pyiceberg_commit_s"] / row["append_commit_s"]
            row["step_ratio"] = row["pyiceberg_step_s"] / row["append_step_s"]
            print(
                f"{aggregate} W={WINDOW}, medians of {ROUNDS} rounds: commit {row['append_commit_s'] * 1e3:.3f} ms "
                f"against pyiceberg's {row['pyiceberg_commit_s'] * 1e3:.3f} ms ({row['commit_ratio']:.2f}x), step "
                f"{row['append_step_s'] * 1e3:.3f} against {row['pyiceberg_step_s'] * 1e3:.3f} ms ({row['step_ratio']:.2f}x)"
            )
            rows.append(row)
    finally:
        bench.close()
    return {"rows": rows}


def report(results: dict, quick: bool) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    name = "viewdf_commit_quick" if quick else "viewdf_commit"
    write_results(name, {"quick": quick, **results})
    rows = results["rows"]
    figure, axes = plt.subplots(1, 2, figsize=(10, 4))
    for axis, what, title in ((axes[0], "commit_s", "commit"), (axes[1], "step_s", "whole step")):
        positions = np.arange(len(rows))
        for offset, path in zip((-0.2, 0.2), PATHS, strict=True):
            axis.bar(positions + offset, [r[f"{path}_{what}"] * 1e3 for r in rows], width=0.4, label=path)
        axis.set_xticks(positions, [f"{r['aggregate']}, W={r['window']}" for r in rows])
        axis.set(title=f"ViewDF window step: {title}", ylabel="ms (median of rounds)")
        axis.legend()
    figure.tight_layout()
    figure.savefig(RESULTS / f"{name}.png", dpi=110)
    plt.close(figure)
