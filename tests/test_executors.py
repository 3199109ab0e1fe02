"""One contract, every executor: operators, writes, view refreshes and stream steps run on Spark and
in-process, and both equal an independent reference (numpy brute force, a dict of every cell, pandas
recomputation of each stream part) and each other, bit for bit; the cost model's choice.

tests/test_cluster.py runs this module again in a child process whose Spark session has the master
``local-cluster[2,1,1024]`` (two executor JVMs with their own Python workers): nothing here may rely
on tasks sharing the driver's process.
"""

from __future__ import annotations

import json
import math
import os
import time

import numpy as np
import pyarrow as pa
import pytest

import arrayviews
from arrayviews.execution.cost import CostModel, Estimate, choose, load_costs, save_costs
from arrayviews.model.errors import ConflictError
from arrayviews.model.shapes import L1, Linf
from arrayviews.views.definition import similarity, window
from conftest import MASTER_VARIABLE
from test_stream_views import (
    M0,
    RECENT,
    RECENT_COLUMNS,
    SCHEMA,
    VIEW2,
    Truth,
    at_least,
    contents,
    helper_text,
    late_c,
    network,
    run_lengths,
    windows,
)

#: Whether this is the rerun on ``local-cluster[2,1,1024]`` (tests/test_cluster.py).
CLUSTER = (os.environ.get(MASTER_VARIABLE) or "").startswith("local-cluster")
#: The engines each contract test runs on. In the cluster rerun only Spark's runs again: the
#: in-process engine does not depend on the master, and the ordinary run holds it to the references.
EXECUTORS = ("spark",) if CLUSTER else ("spark", "local")
#: The engines of the slow contract tests (writes, view refreshes): their Spark half runs in the
#: cluster rerun only (the stricter setting; tests/test_writes.py and tests/test_views.py run these
#: Spark paths on local[2] at length), their in-process half in the ordinary run. Both halves meet the
#: same independent reference, so their results are identical.
SLOW_EXECUTORS = ("spark",) if CLUSTER else ("local",)
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
    for mode in EXECUTORS:
        assert results[mode] == results["spark"], mode
    return results["spark"]


def test_the_session_runs_on_the_configured_master(spark) -> None:
    """local[2] in the suite; local-cluster[2,1,1024] when tests/test_cluster.py reruns this module,
    with two executors (the driver is listed too) whose tasks run outside the driver's JVM."""
    master = os.environ.get(MASTER_VARIABLE) or "local[2]"
    context = spark.sparkContext
    assert context.master == master
    tracker = context._jsc.sc().statusTracker()
    if master.startswith("local-cluster"):
        deadline = time.monotonic() + 120  # executors register a few seconds after the session starts
        while len(tracker.getExecutorInfos()) - 1 < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert len(tracker.getExecutorInfos()) - 1 == 2
        hosts = set(context.parallelize(range(8), 4).map(lambda _: os.getpid()).collect())
        assert os.getpid() not in hosts
    else:
        assert len(tracker.getExecutorInfos()) - 1 == 0


def test_floor_keys_are_exact_floor_division_on_every_engine(dbs) -> None:
    """The chunk-number keys ingest shuffles by: floor((x - origin) / length) for any sign, with
    Python integers as the reference (beyond 2**53 too, where a float division would round)."""
    values = [-(2**62), -13, -8, -7, -1, 0, 1, 6, 7, 8, 2**53 + 1, 2**62 - 1, None]
    table = pa.table({"x": pa.array(values, pa.int64())})
    keys = [("k7", "x", -1, 7), ("k3", "x", 5, 3)]
    expected = {
        "k7": [None if x is None else (x + 1) // 7 for x in values],
        "k3": [None if x is None else (x - 5) // 3 for x in values],
    }
    out = pa.schema([("x", pa.int64()), ("k7", pa.int64()), ("k3", pa.int64())])
    for mode, db in dbs.items():
        engine = db.executors.engine(mode)
        got = engine.collect(engine.with_floor_keys(engine.from_arrow(table, table.schema), keys), out)
        rows = {r["x"]: (r["k7"], r["k3"]) for r in got.to_pylist()}
        assert rows == {x: (a, b) for x, a, b in zip(values, expected["k7"], expected["k3"], strict=True)}, (
            mode
        )


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
    results, totals = {}, {}
    for mode, db in dbs.items():
        frame = db.array("A").aggregate("sum(v)", "max(v)", by=["i"]).to_pandas()
        results[mode] = {int(r.i): (r.v_sum, r.v_max) for r in frame.itertuples(index=False)}
        whole = db.array("A").aggregate("sum(v)", "count(*)", "min(v)").to_pandas()
        totals[mode] = [tuple(row) for row in whole[["v_sum", "count", "v_min"]].itertuples(index=False)]
    for mode in EXECUTORS:
        assert results[mode] == results["spark"], mode
        assert totals[mode] == [
            (float(values[present].sum()), int(present.sum()), float(values[present].min()))
        ]
    expected = {
        int(a): (float(values[a][present[a]].sum()), float(values[a][present[a]].max()))
        for a in range(SHAPE[0])
        if present[a].any()
    }
    assert results["spark"] == expected


def test_join_across_chunk_grids(dbs, grid) -> None:
    present, values, other, other_present = grid
    got = run_both(dbs, lambda db: db.array("A").join(db.array("B")), ["v", "w"])
    assert got == dense_cells(present & other_present, [values, other])


# -- writes ---------------------------------------------------------------------------------------
WRITE_SHAPE = (24, 18)


def test_similarity_aggregate_through_a_view(dbs, grid) -> None:
    """A neighbour count and sum over Linf(1) answered through a stored L1(1) view (paper 000,
    section 5: the view's state plus the delta shape's join), on every engine, against brute force."""
    present, values, _, _ = grid
    for mode, db in dbs.items():
        if f"Q_{mode}" not in db.views():
            db.create_view(
                f"Q_{mode}", similarity("A", "A", L1(1), ["count(*) as cnt", "sum(right.v) as total"])
            )
    coords = np.argwhere(present)
    expected = {}
    for a, b in coords:
        near = np.abs(coords - (a, b)).max(axis=1) <= 1
        expected[(int(a), int(b))] = (int(near.sum()), float(values[tuple(coords[near].T)].sum()))

    def build(db):
        mode = db.executors.mode
        join = db.similarity_join("A", "A", Linf(1))
        return join.aggregate("count(*) as cnt", "sum(right.v) as total", through=f"Q_{mode}")

    assert run_both(dbs, build, ["cnt", "total"]) == expected


@pytest.mark.slow
@pytest.mark.parametrize("mode", SLOW_EXECUTORS)
def test_writes_on_every_executor_against_a_dict_of_every_cell(spark, tmp_path, mode) -> None:
    """Cells from a Spark DataFrame (chunked and written by Spark tasks), replacing inserts (chunk
    rewrites), a rejected conflicting insert, a masked dense block, deletes of cells and of a box and
    a compaction, with rewrites and compaction on the executor ``mode``; after every write the
    array holds exactly the cells of a dict updated by hand, one version per write."""
    rng = np.random.default_rng(20261125)
    db = arrayviews.connect(str(tmp_path / "warehouse"), spark=spark, execution=mode)
    A = db.create_array("A<v:float64, k:int64>[i=0:23:5; j=0:17:4]")
    model: dict[tuple[int, int], tuple[float, int]] = {}
    versions = [0]

    def wrote(result, added: int, removed: int) -> None:
        assert result.committed, result
        assert (result.cells_added, result.cells_removed) == (added, removed), result
        versions.append(result.version)
        assert versions[-1] == versions[-2] + 1
        frame = A.to_pandas()
        assert cells(frame, ["v", "k"]) == model
        assert A.count() == len(model)

    flat = rng.choice(WRITE_SHAPE[0] * WRITE_SHAPE[1], size=150, replace=False)
    i, j = (a.astype(np.int64) for a in np.unravel_index(flat, WRITE_SHAPE))
    v = rng.integers(-1000, 1000, len(flat)) / 8.0  # exact binary fractions
    k = rng.integers(-50, 50, len(flat)).astype(np.int64)
    rows = list(zip(i.tolist(), j.tolist(), v.tolist(), k.tolist(), strict=True))
    frame = spark.createDataFrame(rows, "i long, j long, v double, k long").repartition(3)
    model.update({(a, b): (c, d) for a, b, c, d in rows})
    wrote(A.insert(frame), 150, 0)

    # half old cells, half new: the old ones are replaced by rewriting the chunks holding them
    old = rng.permutation(flat)[:20]
    new = rng.permutation(np.setdiff1d(np.arange(WRITE_SHAPE[0] * WRITE_SHAPE[1]), flat))[:20]
    ri, rj = (a.astype(np.int64) for a in np.unravel_index(np.concatenate([old, new]), WRITE_SHAPE))
    rv, rk = np.arange(40) + 0.5, np.arange(40, dtype=np.int64) * 3
    with pytest.raises(ConflictError, match="20 cell\\(s\\) of the batch already exist"):
        A.insert({"i": ri, "j": rj, "v": rv, "k": rk})
    assert A.version == versions[-1] and cells(A.to_pandas(), ["v", "k"]) == model
    model.update({(int(a), int(b)): (float(c), int(d)) for a, b, c, d in zip(ri, rj, rv, rk, strict=True)})
    wrote(A.insert({"i": ri, "j": rj, "v": rv, "k": rk}, on_conflict="replace"), 40, 20)

    # a dense block at (5, 4) of 9 x 7 cells with a checkerboard of holes, replacing what it covers
    block_v = np.arange(63, dtype=np.float64).reshape(9, 7) - 30
    block_k = np.arange(63, dtype=np.int64).reshape(9, 7) * -1
    holes = (np.add.outer(np.arange(9), np.arange(7)) % 3) == 0
    covered = [(5 + a, 4 + b) for a, b in zip(*np.nonzero(~holes), strict=True)]
    replaced = sum(c in model for c in covered)
    for a, b in zip(*np.nonzero(~holes), strict=True):
        model[(5 + int(a), 4 + int(b))] = (float(block_v[a, b]), int(block_k[a, b]))
    dense = {"v": np.ma.array(block_v, mask=holes), "k": np.ma.array(block_k, mask=holes)}
    wrote(A.write_dense(dense, origin=(5, 4), on_conflict="replace"), len(covered), replaced)

    listed = list(dict.fromkeys([*sorted(model)[::7], (23, 17), (0, 0)]))  # absent ones are ignored
    gone = [c for c in listed if c in model]
    for c in gone:
        del model[c]
    wrote(A.delete(np.array(listed, dtype=np.int64)), 0, len(gone))

    inside = [c for c in model if 3 <= c[0] <= 12 and 2 <= c[1] <= 9]
    for c in inside:
        del model[c]
    wrote(A.delete(box={"i": (3, 12), "j": (2, 9)}), 0, len(inside))

    refill = {"i": np.arange(3, 8), "j": np.arange(2, 7), "v": np.full(5, 0.25), "k": np.arange(5)}
    model.update({(3 + n, 2 + n): (0.25, n) for n in range(5)})
    wrote(A.insert(refill), 5, 0)  # a second file at least: compaction has work to do
    compacted = A.compact()
    assert compacted.committed and "into 1 of array A" in compacted.message, compacted
    wrote(compacted, 0, 0)
    history = A.versions()
    assert list(history.operation)[-7:] == [
        "insert",
        "insert",
        "write_dense",
        "delete",
        "delete",
        "insert",
        "compact",
    ]
    assert history.cells_total.iloc[-1] == len(model)


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
    dbs = {mode: arrayviews.connect(location, spark=spark, execution=mode) for mode in SLOW_EXECUTORS}
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
    last = SLOW_EXECUTORS[-1]
    history = dbs[last].view(f"N_{last}").refresh_history()
    assert list(history.version) == [1, 2, 3, 4]
    assert list(history.requested)[1:] == ["baseline", "full", "auto"]
    assert list(history.executor) == [last] * 4
    assert (history.measured_seconds.iloc[1:] > 0).all()
    assert (history.estimated_cells.iloc[1:] > 0).all()


# -- stream steps ---------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("mode", SLOW_EXECUTORS)
def test_viewdf_steps_of_a_pattern_view_and_a_window_view(spark, tmp_path, mode) -> None:
    """A stream with the paper's Helper/View2 pair (a pattern: runs of high readings) and a window
    over the last three parts. Each append runs the ViewDF steps of the new parts; late rows
    recompute the parts downstream of them. Every part equals pandas recomputation from all rows,
    and every step ran on the engine ``execution`` names (DuckDB in-process, or Spark SQL)."""
    db = arrayviews.connect(str(tmp_path / "warehouse"), spark=spark, execution=mode)
    truth = Truth()
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    stream.append(truth.add(network(range(3), missing=(1,))))
    for text in (helper_text(), VIEW2, RECENT):
        db.sql(text)

    def check(last: int) -> None:
        reference = run_lengths(truth.rows(), M0 + 2, last)
        assert contents(db, "Helper") == reference
        assert contents(db, "View2") == at_least(reference)
        assert contents(db, "Recent", RECENT_COLUMNS) == windows(truth.rows(), M0 + 2, last)

    steps = stream.append(truth.add(network(range(3, 6), missing=(4,))))
    built = {r.view: (r.built, r.recomputed) for r in steps.maintenance}
    assert {r.executor for r in steps.maintenance} == {mode}, [r.executor_reason for r in steps.maintenance]
    new_parts = [M0 + 3, M0 + 4, M0 + 5]
    assert built == {name: (new_parts, []) for name in ("Helper", "View2", "Recent")}
    check(M0 + 5)
    assert contents(db, "View2")  # the pattern is found: the reference is not trivially empty
    late = stream.append(truth.add(late_c(1, 4)))
    assert late.late_parts == [M0 + 1, M0 + 4]
    recomputed = {r.view: r.recomputed for r in late.maintenance}
    assert {r.executor for r in late.maintenance} == {mode}
    assert recomputed["Recent"] == [M0 + 2, M0 + 3, M0 + 4, M0 + 5]
    assert M0 + 4 in recomputed["Helper"]
    check(M0 + 5)


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


# -- uncertain operators (paper 001) ---------------------------------------------------------------
@pytest.fixture(scope="module")
def uncertain(spark, tmp_path_factory):
    """A warehouse with uncertain arrays UA (store-multiple, two inserts) and UB (store-mean), and the
    tuples they hold, opened by one database per executor."""
    from test_uncertain import SCHEMA as UNCERTAIN_SCHEMA
    from test_uncertain import catalog

    location = str(tmp_path_factory.mktemp("uncertain") / "warehouse")
    rng = np.random.default_rng(60)
    a, b = catalog(rng, 160), catalog(rng, 300)
    a["flux"] = a["flux"] * rng.choice([1e12, -1e12, 1.0], 160)  # sums that cancel
    db = arrayviews.connect(location, spark=spark, execution="spark")
    UA = db.create_uncertain_array(UNCERTAIN_SCHEMA.format(name="UA"), scheme="store-multiple", step=1)
    for part in np.array_split(np.arange(160), 2):
        UA.insert({k: v[part] for k, v in a.items()})
    db.create_uncertain_array(UNCERTAIN_SCHEMA.format(name="UB"), scheme="store-mean").insert(b)
    return {mode: arrayviews.connect(location, spark=spark, execution=mode) for mode in EXECUTORS}, a, b


def test_uncertain_aggregates(uncertain) -> None:
    from test_uncertain import interval

    dbs_, a, _ = uncertain
    results = {}
    for mode, db in dbs_.items():
        regrid = db.uncertain_array("UA").regrid({"x": 20, "y": 10}, "count(*)", "sum(flux)")
        assert regrid.explain()["executor"] == mode
        by_y = db.uncertain_array("UA").aggregate("count(*)", by=["y"], threshold=0.5)
        results[mode] = (regrid.to_pandas(), by_y.to_pandas())
        assert regrid.choice.executor == mode and "forced" in regrid.choice.reason
    first = next(iter(results.values()))
    for other in results.values():  # the same bits on every executor
        for mine, theirs in zip(first, other, strict=True):
            assert mine.equals(theirs)
    regrid, by_y = first
    for _, row in regrid.iterrows():  # scipy per tuple, math.fsum per block
        x, y = int(row["x"]), int(row["y"])
        p = interval(a["x"], a["x_sigma"], 20 * x, 20 * x + 20) * interval(
            a["y"], a["y_sigma"], 10 * y, 10 * y + 10
        )
        assert row["count"] == pytest.approx(math.fsum(p), abs=1e-9)
        assert row["flux_sum"] == pytest.approx(math.fsum(p * a["flux"]), abs=1e-9 * 1e12)
    for _, row in by_y.iterrows():
        p = interval(a["y"], a["y_sigma"], row["y"], row["y"] + 1) * interval(a["x"], a["x_sigma"], 0, 60)
        assert row["count"] == pytest.approx(math.fsum(p[p >= 0.5]), abs=1e-9)


def test_uncertain_structure_join(uncertain) -> None:
    from test_uncertain import check_join, join_reference

    dbs_, a, b = uncertain
    results = {}
    for mode, db in dbs_.items():
        join = db.uncertain_array("UA").structure_join(db.uncertain_array("UB"), 1.5, 0.3, outer="left")
        assert join.explain()["executor"] == mode
        results[mode] = join.to_pandas()
    first = next(iter(results.values()))
    for other in results.values():
        assert first.equals(other)
    check_join(first, join_reference(a, b, 1.5), 0.3)


def test_auto_runs_small_uncertain_operations_in_process(spark, uncertain) -> None:
    location = next(iter(uncertain[0].values())).warehouse.location
    db = arrayviews.connect(location, spark=spark)
    regrid = db.uncertain_array("UA").regrid([20, 10], "count(*)")
    assert regrid.explain()["executor"] == "local" and "predicted in-process" in regrid.choice.reason
    join = db.uncertain_array("UA").structure_join(db.uncertain_array("UB"), 1.0, 0.5)
    assert join.explain()["executor"] == "local"
    forced = db.uncertain_array("UA").regrid([20, 10], "count(*)", engine="spark")
    assert forced.explain()["executor"] == "spark" and forced.choice.reason == "forced by execution='spark'"
    with pytest.raises(arrayviews.model.errors.ValidationError, match="engine must be one of"):
        db.uncertain_array("UA").regrid([20, 10], "count(*)", engine="gpu")
