"""Calibrating the in-process stream step costs (``execution.cost.StreamStepCost``) on the running
machine: window views of both plans stepped over scratch streams of three part shapes (two sizes,
and the larger one with a group per row), fitted to
``per_view + per_part * parts read + per_row * rows read + per_group * rows written`` and the
incremental plans' extra costs
(a sum window's, and a max window's monotonic queue's), each as the window kernel runs it and as
the step's SQL runs it (a view the kernel does not take: a HAVING, a float column's maximum); and
the in-process build of a part by the window kernel and by a query's SQL (what picks its executor),
fitted to those steps' builds and to builds over a stream of 10^6 rows a part."""

from __future__ import annotations

import statistics
import uuid
from dataclasses import replace

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from arrayviews.execution.cost import StreamStepCost
from arrayviews.streams.maintainer import WINDOW_KERNEL, maintain_view
from arrayviews.streams.window_plans import queue_step
from arrayviews.streams.world import StreamWorld

#: Rows per part of the scratch streams (see :func:`stream_shapes`).
ROWS = (1000, 10000)
#: Windows (parts) of the recompute views, and of the incremental view. The widest recompute
#: window reads 32 parts: the rows-read term must stand out of a step's noise (0.5-1 ms on a busy
#: machine), which windows of 2 to 8 parts did not (round 28: the fit's per-row cost came out 0).
RECOMPUTE_WINDOWS = (2, 8, 32)
INCREMENTAL_WINDOW = 4
#: Parts appended before the steps are timed (every window full), and the steps timed (their
#: median is kept).
WARM_PARTS, TIMED_PARTS = max(RECOMPUTE_WINDOWS), 5
_START = 1_600_000_020  # a minute boundary


def _part(minute: int, rows: int, groups: int, rng: np.random.Generator) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "ts": pd.to_datetime(_START + 60 * minute + rng.integers(0, 60, rows), unit="s", utc=True),
            "g": [f"g{k}" for k in rng.integers(0, groups, rows)],
            "v": rng.integers(-1000, 1000, rows),
            "f": rng.uniform(-1000.0, 1000.0, rows),
        }
    )


#: Per kind of calibration view: its plan, what it selects and its HAVING. The ``_sql`` views are
#: the same windows in a form the kernel does not take (a HAVING; a float column's maximum), so
#: their steps run their SQL.
_USING = {
    "recompute": "RECOMPUTE",
    "incremental": "INCREMENTAL",
    "queue": "INCREMENTAL",
    "incremental_sql": "INCREMENTAL",
    "queue_sql": "INCREMENTAL",
}
_SELECTED = {
    "recompute": "sum(v)",
    "incremental": "sum(v)",
    "queue": "max(v)",
    "incremental_sql": "sum(v)",
    "queue_sql": "max(f)",
}
_HAVING = {"incremental_sql": " HAVING count(*) > 0"}


def _steps(db, rows: int, groups: int, rng: np.random.Generator) -> list[dict]:
    """Per view of a scratch stream of ``rows`` rows a part over ``groups`` groups, the median step
    time with what it read."""
    tag = uuid.uuid4().hex[:8]
    stream_name = f"calibration_stream_{tag}"
    views = {f"calibration_r{w}_{tag}": ("recompute", w) for w in RECOMPUTE_WINDOWS}
    views[f"calibration_i{INCREMENTAL_WINDOW}_{tag}"] = ("incremental", INCREMENTAL_WINDOW)
    views[f"calibration_q{INCREMENTAL_WINDOW}_{tag}"] = ("queue", INCREMENTAL_WINDOW)
    views[f"calibration_is{INCREMENTAL_WINDOW}_{tag}"] = ("incremental_sql", INCREMENTAL_WINDOW)
    views[f"calibration_qs{INCREMENTAL_WINDOW}_{tag}"] = ("queue_sql", INCREMENTAL_WINDOW)
    stream = db.create_stream(stream_name, "ts timestamp, g string, v int, f double", 60, "ts")
    try:
        stream.append(_part(0, rows, groups, rng), maintain=False)
        for name, (plan, window) in views.items():
            db.sql(
                f"CREATE VIEW {name} USING {_USING[plan]} AS SELECT g, {_SELECTED[plan]} AS total "
                f"FROM {stream_name} [WINDOW {window} MINUTES] GROUP BY g{_HAVING.get(plan, '')}"
            )
        order = list(views)
        timed: dict[str, list[float]] = {}
        for minute in range(1, WARM_PARTS + TIMED_PARTS + 1):
            stream.append(_part(minute, rows, groups, rng), maintain=False)
            world = StreamWorld(db.spark, db.warehouse.catalog, "local", db.executors.costs)
            # the first view stepped after an append also reads the stream's new snapshot: each
            # view takes that turn in rotation, and the median of its steps leaves it out
            order = order[1:] + order[:1]
            for name in order:
                result = maintain_view(db.spark, world, name)
                if minute > WARM_PARTS and result is not None:
                    timed.setdefault(name, []).append(result.seconds)
        present = len(_part(0, rows, groups, np.random.default_rng(0)).g.unique())
        samples = []
        for name, (plan, window) in views.items():
            sample = {"plan": plan, "window": window, "rows": rows, "groups": present}
            sample["seconds"] = statistics.median(timed[name])
            if plan in ("incremental", "queue"):
                sample["builds"] = _builds(db, name, TIMED_PARTS, kernel=True)
            else:
                sample["sql_builds"] = _builds(db, name, TIMED_PARTS, kernel=False)
            samples.append(sample)
        return samples
    finally:
        for name in views:
            if name in db.stream_views():
                db.drop_stream_view(name)
        db.drop_stream(stream_name)


def _builds(db, view: str, steps: int, kernel: bool) -> list[dict]:
    """The parts built in this process in ``view``'s last ``steps`` steps, by the window kernel
    (``kernel``) or by their query's SQL: rows read and written and the seconds of each build, from
    the reports kept with the view's versions."""
    history = db.stream_view(view).maintenance_history().tail(steps)
    return [
        {"rows_read": p["rows_read"], "rows_written": p["rows_written"], "seconds": p["seconds"]}
        for reason, parts in zip(history["reason"], history["parts"], strict=True)
        if (WINDOW_KERNEL in reason) == kernel
        for p in parts
        if p["executor"] == "local" and "rows_read" in p
    ]


#: Rows a part of the stream whose builds pin the cost of a row read: parts that large
#: are not kept in memory (``storage.recent_parts``), so each build reads its stream part from its
#: file, as a user's steps over parts that large do; the window and the steps timed.
LARGE_ROWS, LARGE_WINDOW, LARGE_TIMED = 1_000_000, 2, 3


def _large_builds(db, rows: int, rng: np.random.Generator) -> tuple[list[dict], list[dict]]:
    """The builds over a scratch stream of ``rows`` rows a part of a sum window of ``LARGE_WINDOW``
    parts by the window kernel and by its recompute plan (SQL), each stepped ``LARGE_TIMED``
    times once full: their rows read stand out of a build's noise, which those of the other
    streams' parts do not (10^4 rows are 1 ms or less). Returns (kernel builds, SQL builds)."""
    tag = uuid.uuid4().hex[:8]
    stream_name = f"calibration_stream_{tag}"
    kernel_view, sql_view = f"calibration_k{LARGE_WINDOW}_{tag}", f"calibration_r{LARGE_WINDOW}_{tag}"
    views = {kernel_view: "INCREMENTAL", sql_view: "RECOMPUTE"}
    stream = db.create_stream(stream_name, "ts timestamp, g string, v int, f double", 60, "ts")
    try:
        stream.append(_part(0, rows, rows // 100, rng), maintain=False)
        for view, plan in views.items():
            db.sql(
                f"CREATE VIEW {view} USING {plan} AS SELECT g, sum(v) AS total "
                f"FROM {stream_name} [WINDOW {LARGE_WINDOW} MINUTES] GROUP BY g"
            )
        for minute in range(1, LARGE_WINDOW + LARGE_TIMED + 1):
            stream.append(_part(minute, rows, rows // 100, rng), maintain=False)
            world = StreamWorld(db.spark, db.warehouse.catalog, "local", db.executors.costs)
            for view in views:
                maintain_view(db.spark, world, view)
        return (
            _builds(db, kernel_view, LARGE_TIMED, kernel=True),
            _builds(db, sql_view, LARGE_TIMED, kernel=False),
        )
    finally:
        for view in views:
            if view in db.stream_views():
                db.drop_stream_view(view)
        db.drop_stream(stream_name)


def fit_builds(builds: list[dict], defaults: tuple[float, float, float]) -> tuple[float, float, float]:
    """Non-negative least squares of part builds' seconds over a fixed cost, the rows read and the
    rows written: ``(fixed, per row read, per row written)``; ``defaults`` without builds."""
    if not builds:
        return defaults
    matrix = np.array([[1.0, b["rows_read"], b["rows_written"]] for b in builds], dtype=float)
    seconds = np.array([b["seconds"] for b in builds], dtype=float)
    fixed, per_row, per_written = nnls(matrix, seconds)[0]
    return float(fixed), float(per_row), float(per_written)


def fit_kernel_builds(builds: list[dict]) -> tuple[float, float, float]:
    """:func:`fit_builds` of the window kernel's builds: ``StreamStepCost``'s ``kernel_*`` terms."""
    defaults = StreamStepCost()
    return fit_builds(builds, (defaults.kernel_fixed, defaults.kernel_per_row, defaults.kernel_per_written))


def fit_sql_builds(builds: list[dict]) -> tuple[float, float, float]:
    """:func:`fit_builds` of builds by a query's SQL: ``StreamStepCost``'s ``sql_*`` terms."""
    defaults = StreamStepCost()
    return fit_builds(builds, (defaults.sql_fixed, defaults.sql_per_row, defaults.sql_per_written))


def fit_stream_steps(samples: list[dict]) -> StreamStepCost:
    """Non-negative least squares over the recompute views' steps (a view, W parts, W x rows
    rows read, a row written per group), then the incremental plan's extra cost: the median of its one-table view's steps less
    what a view, three parts and their rows (the stream part's, and the groups of its own previous
    part and of the part one window back) predict; and the same for a max window's queue
    (``queue`` samples, less what ``window_plans.queue_step`` predicts without the extra). Each
    extra is fitted twice: from views the window kernel runs and from views whose SQL runs
    (``incremental_sql``, ``queue_sql``); a kind without samples keeps its default."""
    recompute = [s for s in samples if s["plan"] == "recompute"]
    matrix = np.array([[1.0, s["window"], s["window"] * s["rows"], s["groups"]] for s in recompute])
    seconds = np.array([s["seconds"] for s in recompute])
    (per_view, per_part, per_row, per_group), _ = nnls(matrix, seconds)
    known = StreamStepCost(
        float(per_view), float(per_part), float(per_row), 0.0, 0.0, 0.0, 0.0, per_group=float(per_group)
    )

    def extra(plan: str) -> list[float]:
        """What the ``plan`` samples took beyond what the fitted terms predict."""
        found = []
        for s in (s for s in samples if s["plan"] == plan):
            if plan.startswith("queue"):
                predicted = queue_step(known, s["rows"], s["groups"], s["window"], False, plan == "queue")
            else:
                read = s["rows"] + 2 * s["groups"]
                predicted = per_view + 3 * per_part + per_row * read + per_group * s["groups"]
            found.append(s["seconds"] - predicted)
        return found

    defaults = StreamStepCost()

    def term(plan: str, default: float) -> float:
        found = extra(plan)
        return max(0.0, float(statistics.median(found))) if found else default

    kernel_fixed, kernel_per_row, kernel_per_written = fit_kernel_builds(
        [build for s in samples for build in s.get("builds", ())]
    )
    sql_fixed, sql_per_row, sql_per_written = fit_sql_builds(
        [build for s in samples for build in s.get("sql_builds", ())]
    )
    return StreamStepCost(
        per_view=float(per_view),
        per_part=float(per_part),
        per_row=float(per_row),
        per_helper=term("incremental", defaults.per_helper),
        per_queue=term("queue", defaults.per_queue),
        per_helper_sql=term("incremental_sql", defaults.per_helper_sql),
        per_queue_sql=term("queue_sql", defaults.per_queue_sql),
        per_group=float(per_group),
        kernel_fixed=kernel_fixed,
        kernel_per_row=kernel_per_row,
        kernel_per_written=kernel_per_written,
        sql_fixed=sql_fixed,
        sql_per_row=sql_per_row,
        sql_per_written=sql_per_written,
    )


def stream_shapes(rows: tuple[int, ...]) -> list[tuple[int, int]]:
    """The scratch streams' rows per part and the groups their rows are drawn from: a tenth as many
    groups as rows for each of ``rows``, and as many groups as rows for the largest (about 63% of
    its rows are then groups of their own), so that the rows a step writes (one a group; a queue's
    entries too) vary apart from the rows it reads.

    With groups always a tenth of the rows, the cost of a row written (``per_group``) could only be
    told from the larger part's other costs by a few hundred rows, below a step's noise: fits on
    one machine gave 1.0-1.6 us a row (round 33), which priced a max window's queue (1 + H(W) rows
    a group) far above its measured steps, so that a calibrated AUTO took the recompute plan for
    max windows of 10-50 parts, which the incremental plan steps 1.15-2.7x faster
    (``benchmarks.run viewdf_scope``). With the third stream thirteen fits gave 0.28-0.58 us a row."""
    return [(size, max(1, size // 10)) for size in rows] + [(max(rows), max(rows))]


def calibrate_stream_steps(
    db, rows: tuple[int, ...] = ROWS, seed: int = 0, large_rows: int = LARGE_ROWS
) -> StreamStepCost:
    """Measure the in-process stream step costs here and store them with the database's calibrated
    costs (``execution.json``): what ``CREATE VIEW ... [WINDOW ...]`` prices its plans with. The
    scratch streams and views are dropped. Their steps are run view by view; creating them brings
    the warehouse's pending stream views up to date first, as any CREATE VIEW does."""
    rng = np.random.default_rng(seed)
    samples = [sample for size, groups in stream_shapes(rows) for sample in _steps(db, size, groups, rng)]
    kernel_builds, sql_builds = _large_builds(db, large_rows, rng)
    samples.append(
        {
            "plan": "kernel",
            "window": LARGE_WINDOW,
            "rows": large_rows,
            "groups": large_rows // 100,
            "builds": kernel_builds,
            "sql_builds": sql_builds,
        }
    )
    fitted = fit_stream_steps(samples)
    model = db.executors.costs
    db.executors.store_costs(
        replace(model, stream_step=fitted).stamped({**model.notes, "stream_step": samples})
    )
    return fitted


__all__ = [
    "calibrate_stream_steps",
    "fit_builds",
    "fit_kernel_builds",
    "fit_sql_builds",
    "fit_stream_steps",
    "stream_shapes",
]
