"""A Spark-path refresh of every array view kind runs at most two Spark jobs (issue 11), with results
equal to brute force and to the in-process executor's refresh of the same views."""

from __future__ import annotations

import numpy as np
import pytest

import arrayviews
from arrayviews.model.shapes import L1
from arrayviews.views.definition import similarity, window
from test_executors import cells, neighbour_reference, window_reference

SHAPE = (12, 10)
VIEWS = {
    "N": (similarity, ("A", "A", L1(1), ["count(*) as cnt", "sum(right.v) as total"])),
    "M": (similarity, ("A", "A", L1(1), ["max(right.v) as hi", "min(right.v) as lo"])),
    "W": (window, ("A", [1, 1, 1, 1], ["count(*)", "sum(v)", "avg(v)"])),
}
COLUMNS = {"N": ["cnt", "total"], "M": ["hi", "lo"], "W": ["count", "v_sum", "v_avg"]}


def extremes_reference(present, values):
    """Brute force: per present cell, the max and min of the present values within L1 distance 1."""
    out = {}
    coords = np.argwhere(present)
    for a, b in coords:
        near = values[tuple(coords[np.abs(coords - (a, b)).sum(axis=1) <= 1].T)]
        out[(int(a), int(b))] = (float(near.max()), float(near.min()))
    return out


def references(present, values):
    return {
        "N": neighbour_reference(present, values),
        "M": extremes_reference(present, values),
        "W": window_reference(present, values, (1, 1), (1, 1)),
    }


@pytest.mark.slow
def test_a_spark_refresh_runs_at_most_two_jobs_for_every_view_kind(spark, tmp_path) -> None:
    rng = np.random.default_rng(21)
    present = rng.random(SHAPE) < 0.5
    values = rng.integers(-9, 9, SHAPE).astype(np.float64)
    location = str(tmp_path / "warehouse")
    dbs = {mode: arrayviews.connect(location, spark=spark, execution=mode) for mode in ("spark", "local")}
    base = dbs["local"].create_array("A<v:float64>[i=0:11:5; j=0:9:4]")
    i, j = np.nonzero(present)
    base.insert({"i": i, "j": j, "v": values[i, j]})
    for mode, db in dbs.items():
        for name, (kind, arguments) in VIEWS.items():
            db.create_view(f"{name}_{mode}", kind(*arguments))
    tracker = spark.sparkContext.statusTracker()
    # inserts only; a delete (the min/max view recomputes the extremes that left); both; a full refresh
    steps = [("baseline", 5, 0), ("baseline", 0, 3), ("baseline", 4, 2), ("full", 3, 1)]
    for strategy, added, removed in steps:
        empty = np.argwhere(~present)[rng.permutation(int((~present).sum()))[:added]]
        new_values = rng.integers(-9, 9, len(empty)).astype(np.float64)
        if added:
            base.insert({"i": empty[:, 0], "j": empty[:, 1], "v": new_values})
        present[tuple(empty.T)] = True
        values[tuple(empty.T)] = new_values
        gone = np.argwhere(present)[rng.permutation(int(present.sum()))[:removed]]
        if removed:
            base.delete(cells={"i": gone[:, 0], "j": gone[:, 1]})
            present[tuple(gone.T)] = False
        expected = references(present, values)
        for name in VIEWS:
            before = set(tracker.getJobIdsForGroup())
            result = dbs["spark"].view(f"{name}_spark").refresh(strategy)
            jobs = set(tracker.getJobIdsForGroup()) - before
            assert result.committed and result.executor == "spark", (name, result)
            assert result.strategy == strategy
            assert 1 <= len(jobs) <= 2, (name, strategy, added, removed, sorted(jobs))
            assert dbs["local"].view(f"{name}_local").refresh(strategy).executor == "local"
            got = {
                mode: cells(db.view(f"{name}_{mode}").to_pandas(), COLUMNS[name]) for mode, db in dbs.items()
            }
            assert got["spark"] == expected[name], (name, strategy)
            assert got["local"] == got["spark"], (name, strategy)


@pytest.mark.parametrize("columns", [1, 2, 3])
def test_where_keys_by_filter_keeps_and_drops_the_rows_a_set_of_tuples_names(spark, columns) -> None:
    """The filter that selects small key sets (and the broadcast join past FILTER_KEYS) against
    plain-Python set membership, keeping and dropping, with duplicate and absent keys."""
    import pyarrow as pa

    from arrayviews.execution import spark_engine
    from arrayviews.execution.spark_engine import SparkEngine

    rng = np.random.default_rng(columns)
    names = [f"c{k}" for k in range(columns)]
    rows = rng.integers(-3, 3, (200, columns))
    keys = np.vstack([rows[rng.integers(0, 200, 25)], rng.integers(-5, 5, (10, columns))])
    wanted = {tuple(int(v) for v in k) for k in keys}
    engine = SparkEngine(spark)
    table = pa.table({n: rows[:, k] for k, n in enumerate(names)} | {"row": np.arange(200)})
    data = engine.from_arrow(table, table.schema)
    expected = {True: set(), False: set()}
    for number, row in enumerate(rows):
        expected[tuple(int(v) for v in row) in wanted].add(number)
    for limit in (spark_engine.FILTER_KEYS, 0):  # the filter, then the broadcast join
        spark_engine.FILTER_KEYS, saved = limit, spark_engine.FILTER_KEYS
        try:
            for keep in (True, False):
                got = engine.where_keys(data, names, keys, keep=keep).toArrow().column("row").to_pylist()
                assert sorted(got) == sorted(expected[keep]), (limit, keep)
        finally:
            spark_engine.FILTER_KEYS = saved
    assert engine.where_keys(data, names, np.zeros((0, columns), np.int64)).count() == 0
