"""One contract, every executor: operators and view refreshes run on Spark and in-process, and both
equal an independent numpy reference (and each other, bit for bit); the cost model's choice."""

from __future__ import annotations

import json

import numpy as np
import pytest

import arrayviews
from arrayviews.execution.cost import CostModel, Estimate, choose, load_costs, save_costs
from arrayviews.model.shapes import L1
from arrayviews.views.definition import similarity, window

EXECUTORS = ("spark", "local")
SHAPE = (12, 10)  # i = 0..11 (chunks of 5), j = 0..9 (chunks of 4)


@pytest.fixture(scope="module")
def grid():
    """A 12 x 10 array with holes; integer values (as float64) so every sum is exact."""
    rng = np.random.default_rng(11)
    present = rng.random(SHAPE) < 0.7
    values = rng.integers(-20, 20, SHAPE).astype(np.float64)
    other = rng.integers(0, 9, SHAPE).astype(np.int64)
    other_present = rng.random(SHAPE) < 0.6
    return present, values, other, other_present


@pytest.fixture(scope="module")
def warehouse(spark, tmp_path_factory, grid):
    """One warehouse with arrays A and B, opened by one database per executor."""
    location = str(tmp_path_factory.mktemp("executors") / "warehouse")
    present, values, other, other_present = grid
    db = arrayviews.connect(location, spark=spark, execution="spark")
    i, j = np.nonzero(present)
    A = db.create_array("A<v:float64>[i=0:11:5; j=0:9:4]")
    A.insert({"i": i, "j": j, "v": values[i, j]})
    bi, bj = np.nonzero(other_present)
    B = db.create_array("B<w:int64>[i=0:11:3; j=0:9:3]")
    B.insert({"i": bi, "j": bj, "w": other[bi, bj]})
    return location


@pytest.fixture(scope="module")
def dbs(spark, warehouse):
    return {mode: arrayviews.connect(warehouse, spark=spark, execution=mode) for mode in EXECUTORS}


def cells(frame, columns):
    """{(i, j): tuple of values} of a result frame."""
    return {
        (int(r.i), int(r.j)): tuple(getattr(r, c) for c in columns) for r in frame.itertuples(index=False)
    }


def dense_cells(present, arrays):
    i, j = np.nonzero(present)
    return {(int(a), int(b)): tuple(x[a, b] for x in arrays) for a, b in zip(i, j, strict=True)}


def window_reference(present, values, before, after):
    """Brute force: per present cell, count, sum and average of the present cells in its window."""
    out = {}
    for a, b in zip(*np.nonzero(present), strict=True):
        box = (
            slice(max(a - before[0], 0), a + after[0] + 1),
            slice(max(b - before[1], 0), b + after[1] + 1),
        )
        inside = values[box][present[box]]
        out[(int(a), int(b))] = (len(inside), float(inside.sum()), float(inside.sum()) / len(inside))
    return out


def neighbour_reference(present, values):
    """Brute force: per present cell, the count of present cells within L1 distance 1 and the sum of
    their values."""
    out = {}
    coords = np.argwhere(present)
    for a, b in coords:
        near = np.abs(coords - (a, b)).sum(axis=1) <= 1
        out[(int(a), int(b))] = (int(near.sum()), float(values[tuple(coords[near].T)].sum()))
    return out


def run_both(dbs, build, columns):
    """The result cells of ``build(db)`` on every executor; all executors must agree exactly."""
    results = {}
    for mode, db in dbs.items():
        array = build(db)
        assert array.explain().startswith("computed in-process" if mode == "local" else "computed on Spark")
        results[mode] = cells(array.to_pandas(), columns)
    assert results["spark"] == results["local"]
    return results["local"]


# -- operators ------------------------------------------------------------------------------------
def test_subarray(dbs, grid) -> None:
    present, values, _, _ = grid
    got = run_both(dbs, lambda db: db.array("A").subarray(i=(3, 9), j=(2, 6)), ["v"])
    cut = np.zeros_like(present)
    cut[3:10, 2:7] = present[3:10, 2:7]
    assert got == dense_cells(cut, [values])


def test_filter_and_apply(dbs, grid) -> None:
    present, values, _, _ = grid
    got = run_both(
        dbs, lambda db: db.array("A").filter("v > 3 AND i < 10").apply("u", "v * 2 + i"), ["v", "u"]
    )
    i_index = np.indices(SHAPE)[0]
    kept = present & (values > 3) & (i_index < 10)
    assert got == dense_cells(kept, [values, values * 2 + i_index])


def test_window(dbs, grid) -> None:
    present, values, _, _ = grid
    got = run_both(
        dbs,
        lambda db: db.array("A").window([1, 2, 2, 1], "count(*)", "sum(v)", "avg(v)"),
        ["count", "v_sum", "v_avg"],
    )
    assert got == window_reference(present, values, (1, 2), (2, 1))


def test_regrid(dbs, grid) -> None:
    present, values, _, _ = grid
    got = run_both(dbs, lambda db: db.array("A").regrid([3, 4], "sum(v)", "count(*)"), ["v_sum", "count"])
    expected = {}
    for a, b in zip(*np.nonzero(present), strict=True):
        key = (int(a) // 3, int(b) // 4)
        total, count = expected.get(key, (0.0, 0))
        expected[key] = (total + values[a, b], count + 1)
    assert got == expected


def test_aggregate_by(dbs, grid) -> None:
    present, values, _, _ = grid
    results = {}
    for mode, db in dbs.items():
        frame = db.array("A").aggregate("sum(v)", "max(v)", by=["i"]).to_pandas()
        results[mode] = {int(r.i): (r.v_sum, r.v_max) for r in frame.itertuples(index=False)}
    assert results["spark"] == results["local"]
    expected = {
        int(a): (float(values[a][present[a]].sum()), float(values[a][present[a]].max()))
        for a in range(SHAPE[0])
        if present[a].any()
    }
    assert results["local"] == expected


def test_join_across_chunk_grids(dbs, grid) -> None:
    present, values, other, other_present = grid
    got = run_both(dbs, lambda db: db.array("A").join(db.array("B")), ["v", "w"])
    assert got == dense_cells(present & other_present, [values, other])


# -- view refreshes -------------------------------------------------------------------------------
@pytest.mark.slow
def test_view_refreshes_agree_with_recomputation(spark, tmp_path) -> None:
    """Neighbour-count and window views created, refreshed incrementally and fully on each executor,
    against brute force after every step."""
    rng = np.random.default_rng(5)
    present = rng.random(SHAPE) < 0.5
    values = rng.integers(-9, 9, SHAPE).astype(np.float64)
    location = str(tmp_path / "warehouse")
    seed = arrayviews.connect(location, spark=spark, execution="local")
    base = seed.create_array("A<v:float64>[i=0:11:5; j=0:9:4]")
    i, j = np.nonzero(present)
    base.insert({"i": i, "j": j, "v": values[i, j]})
    dbs = {mode: arrayviews.connect(location, spark=spark, execution=mode) for mode in EXECUTORS}
    for mode, db in dbs.items():
        db.create_view(f"N_{mode}", similarity("A", "A", L1(1), ["count(*) as cnt", "sum(right.v) as total"]))
        db.create_view(f"W_{mode}", window("A", [1, 1, 1, 1], ["count(*)", "sum(v)", "avg(v)"]))

    def check() -> None:
        for mode, db in dbs.items():
            neighbours = cells(db.view(f"N_{mode}").to_pandas(), ["cnt", "total"])
            assert neighbours == neighbour_reference(present, values), mode
            windows = cells(db.view(f"W_{mode}").to_pandas(), ["count", "v_sum", "v_avg"])
            assert windows == window_reference(present, values, (1, 1), (1, 1)), mode

    check()
    steps = [("baseline", 6, 0), ("full", 4, 3), ("auto", 3, 2)]
    for strategy, added, removed in steps:
        empty = np.argwhere(~present)[rng.permutation(int((~present).sum()))[:added]]
        new_values = rng.integers(-9, 9, len(empty)).astype(np.float64)
        base.insert({"i": empty[:, 0], "j": empty[:, 1], "v": new_values})
        present[tuple(empty.T)] = True
        values[tuple(empty.T)] = new_values
        gone = np.argwhere(present)[rng.permutation(int(present.sum()))[:removed]]
        if len(gone):
            base.delete(cells={"i": gone[:, 0], "j": gone[:, 1]})
            present[tuple(gone.T)] = False
        for mode, db in dbs.items():
            for name in (f"N_{mode}", f"W_{mode}"):
                result = db.view(name).refresh(strategy)
                assert result.committed and result.executor == mode, (name, result)
                assert result.requested == strategy
                if strategy != "auto":
                    assert result.strategy == strategy
                assert set(result.estimates) == ({"baseline", "full"} if strategy == "auto" else {strategy})
                assert [o["operation"] for o in result.operations] == ["plan", "compute+write", "commit"]
        check()
    history = dbs["local"].view("N_local").refresh_history()
    assert list(history.version) == [1, 2, 3, 4]
    assert list(history.requested)[1:] == ["baseline", "full", "auto"]
    assert list(history.executor) == ["local"] * 4
    assert (history.measured_seconds.iloc[1:] > 0).all()
    assert (history.estimated_cells.iloc[1:] > 0).all()


# -- the choice -----------------------------------------------------------------------------------
def test_the_cost_model_sends_small_work_in_process_and_large_work_to_spark() -> None:
    model = CostModel()
    small = choose(model, Estimate(cells=20_000, bytes=200_000, chunks=4))
    assert small.executor == "local" and small.predicted["local"] < small.predicted["spark"]
    huge = choose(model, Estimate(cells=10**9, bytes=8 * 10**9, chunks=1000))
    assert huge.executor == "spark" and "in-process limit" in huge.reason
    # a calibrated machine where Spark is cheap per cell and in-process slow: the break-even moves
    slow_driver = CostModel(local=model.local.__class__(0.0, 0.0, 1e-5), max_local_cells=10**9)
    assert choose(slow_driver, Estimate(cells=10**6)).executor == "spark"
    assert choose(model, Estimate(cells=10**9), "local").executor == "local"
    assert choose(model, Estimate(cells=1), "spark").reason == "forced by execution='spark'"
    with pytest.raises(arrayviews.model.errors.ValidationError, match="execution must be one of"):
        choose(model, Estimate(), "gpu")


def test_calibrated_costs_are_stored_and_a_damaged_file_means_defaults(tmp_path) -> None:
    assert load_costs(str(tmp_path)) == CostModel()
    model = CostModel(max_local_cells=123).stamped({"local": [[1, 0.5]]})
    save_costs(str(tmp_path), model)
    assert load_costs(str(tmp_path)) == model
    assert json.loads((tmp_path / "execution.json").read_text())["max_local_cells"] == 123
    (tmp_path / "execution.json").write_text("{not json")
    assert load_costs(str(tmp_path)) == CostModel()


def test_auto_runs_small_operations_in_process_and_obeys_the_stored_limit(spark, warehouse) -> None:
    db = arrayviews.connect(warehouse, spark=spark)
    assert db.executors.mode == "auto"
    assert "in-process" in db.array("A").window([1, 1, 1, 1], "avg(v)").explain()
    db.executors.store_costs(CostModel(max_local_cells=30))  # this machine allows 30 cells in-process
    try:
        fresh = arrayviews.connect(warehouse, spark=spark)
        explained = fresh.array("A").window([1, 1, 1, 1], "avg(v)").explain()
        assert explained.startswith("computed on Spark") and "exceed the in-process limit" in explained
        assert "in-process" in fresh.array("A").subarray(i=(0, 1), j=(0, 1)).explain()  # one chunk: 20 cells
    finally:
        db.executors.store_costs(CostModel())


def test_an_unknown_execution_mode_is_refused(spark, tmp_path) -> None:
    with pytest.raises(
        arrayviews.model.errors.ValidationError, match="execution must be one of auto, spark, local"
    ):
        arrayviews.connect(str(tmp_path / "w"), spark=spark, execution="fast")
