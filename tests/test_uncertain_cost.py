"""The executor estimate of the uncertain operators (paper 001): tuple copies, bytes and candidate
pairs from metadata, checked against brute-force counts in plain Python; the choice it drives."""

from __future__ import annotations

import json
import math
import os
from dataclasses import replace
from urllib.parse import urlparse

import numpy as np
import pyarrow.parquet as pq
import pytest
from scipy.optimize import lsq_linear

from arrayviews.execution.cost import CostModel, EngineCost
from arrayviews.model.errors import ValidationError
from arrayviews.storage import uncertain_layout as ul
from test_uncertain import SCHEMA as CATALOG_SCHEMA
from test_uncertain import catalog, check_join, join_reference

SCHEMA = "{name}<flux:gaussian>[x=0:59:8; y=0:39:8]"


def _tuples(rng, n: int) -> dict:
    sigmas = rng.lognormal(np.log(0.4), 0.6, (n, 2))
    return {
        "x": rng.uniform(0, 60, n),
        "y": rng.uniform(0, 40, n),
        "x_sigma": sigmas[:, 0],
        "y_sigma": sigmas[:, 1],
        "flux": rng.normal(20, 3, n),
        "flux_sigma": rng.uniform(0, 1, n),
    }


def _brute_copies(data: dict, sigmas: float, step: int) -> int:
    """Eq. 2 per tuple in plain Python: copies every 2k + 1 cells of the possible range."""
    total = 0
    for x, y, sx, sy in zip(data["x"], data["y"], data["x_sigma"], data["y_sigma"], strict=True):
        copies = 1
        for mean, sigma, high in ((x, sx, 59), (y, sy, 39)):
            first = math.floor(min(max(mean - sigmas * sigma, 0), high))
            last = math.floor(min(max(mean + sigmas * sigma, 0), high))
            copies *= (last - first) // (2 * step + 1) + 1
        total += copies
    return total


def _stored_copy_cells(array) -> list[tuple[int, int]]:
    """Cells of the stored copies (replicas and homes, not fences), read straight from the files."""
    table = array.table
    cells = []
    for path in table.files(array.version):
        fragments = pq.read_table(urlparse(path).path if path.startswith("file:") else path)
        rows = ul.decode_rows(fragments, table.storage, columns=[ul.ROLE])
        roles = rows.columns[ul.ROLE]
        cells += [
            tuple(int(v) for v in c) for c, r in zip(rows.cells, roles, strict=True) if r <= ul.ROLE_HOME
        ]
    return cells


def _file_bytes(array) -> int:
    return sum(
        os.path.getsize(urlparse(p).path if p.startswith("file:") else p)
        for p in array.table.files(array.version)
    )


def test_estimate_counts_match_brute_force(db) -> None:
    rng = np.random.default_rng(11)
    a_data, b_data = _tuples(rng, 300), _tuples(rng, 500)
    a = db.create_uncertain_array(SCHEMA.format(name="CA"), scheme="store-multiple", step=1)
    b = db.create_uncertain_array(SCHEMA.format(name="CB"), scheme="store-multiple", step=1)
    a.insert(a_data)
    b.insert(b_data)
    a, b = db.uncertain_array("CA"), db.uncertain_array("CB")

    regrid = a.regrid({"x": 10, "y": 10}, "count(*)").choose().estimate
    assert regrid.cells == 0  # tuple copies are no longer passed off as array cells
    assert regrid.copies == _brute_copies(a_data, a.layout.sigmas, 1) == len(_stored_copy_cells(a))
    assert regrid.bytes == _file_bytes(a)

    delta = 1.0
    join = a.structure_join(b, delta, 0.5, outer="left").choose().estimate
    assert join.copies == _brute_copies(a_data, a.layout.sigmas, 1) + _brute_copies(
        b_data, b.layout.sigmas, 1
    )
    assert join.bytes == _file_bytes(a) + _file_bytes(b)
    # candidate pairs: every outer copy against the inner copies within k_A + ceil(delta) + k_B cells
    reach = 1 + math.ceil(delta) + 1
    inner_cells = _stored_copy_cells(b)
    brute = sum(
        1
        for ax, ay in _stored_copy_cells(a)
        for bx, by in inner_cells
        if abs(ax - bx) <= reach and abs(ay - by) <= reach
    )
    # the estimate assumes a uniform inner density (and does not clip boxes at the edges): a model,
    # so within 30% of the exact count on uniformly placed tuples
    assert brute > 0 and 0.85 <= join.pairs / brute <= 1.3, (join.pairs, brute)

    # the routed plan's work: every outer copy goes to each inner chunk (8 x 8 cells) its candidate
    # box (the copy's cell +- reach, clipped to the domain) overlaps; the chunks co-grouped are those
    # holding inner copies
    plans = a.structure_join(b, delta, 0.5, outer="left", engine="local")
    plans.choose()
    routed = plans.plan.estimates["routed"]
    sent = sum(
        ((min(59, x + reach) // 8) - (max(0, x - reach) // 8) + 1)
        * ((min(39, y + reach) // 8) - (max(0, y - reach) // 8) + 1)
        for x, y in _stored_copy_cells(a)
    )
    assert 0.85 <= routed.routed / sent <= 1.3, (routed.routed, sent)  # edges are not clipped
    assert routed.groups == len({(x // 8, y // 8) for x, y in inner_cells})


def test_choice_follows_the_uncertain_terms_and_is_explained(db) -> None:
    rng = np.random.default_rng(12)
    a = db.create_uncertain_array(SCHEMA.format(name="DA"), scheme="store-multiple", step=1)
    a.insert(_tuples(rng, 200))
    b = db.create_uncertain_array(SCHEMA.format(name="DB"), scheme="store-mean")
    b.insert(_tuples(rng, 200))
    regrid = a.regrid({"x": 10, "y": 10}, "count(*)")
    assert regrid.explain()["executor"] == "local"
    assert "tuple copies" in regrid.choice.reason and "predicted in-process" in regrid.choice.reason
    default = CostModel()
    try:
        # a driver whose per-copy cost is high: the same metadata now says Spark
        slow_copies = EngineCost(
            default.local.fixed, 0.0, default.local.per_cell, 1.0, default.local.per_pair
        )
        db.executors.store_costs(CostModel(local=slow_copies))
        plan = a.regrid({"x": 10, "y": 10}, "count(*)").explain()
        assert plan["executor"] == "spark" and "predicted in-process" in plan["reason"]
        # per-pair cost only: the aggregate stays in-process, the join (pairs > 0) moves to Spark
        slow_pairs = replace(default.local, per_pair=1.0, per_routed_pair=1.0)  # both in-process plans
        db.executors.store_costs(CostModel(local=slow_pairs))
        assert a.regrid({"x": 10, "y": 10}, "count(*)").explain()["executor"] == "local"
        join = a.structure_join(b, 1.0, 0.5, outer="left")
        assert join.explain()["executor"] == "spark" and "candidate pairs" in join.choice.reason
        text = db.sql("EXPLAIN SELECT * FROM structure_join(DA, DB, 1, 0.5, OUTER left)")
        assert "executor: spark" in text and "candidate pairs" in text and "predicted in-process" in text
    finally:
        db.executors.store_costs(default)
    assert a.structure_join(b, 1.0, 0.5, outer="left").explain()["executor"] == "local"
    text = db.sql("EXPLAIN SELECT * FROM structure_join(DA, DB, 1, 0.5, OUTER left)")
    assert "executor: local" in text and "tuple copies" in text


def test_old_calibration_files_get_each_engines_default_uncertain_terms() -> None:
    data = json.loads(CostModel(max_local_cells=77).to_json())
    for engine in ("local", "spark"):  # as stored before per_copy and per_pair existed
        del data[engine]["per_copy"], data[engine]["per_pair"]
    loaded = CostModel.from_json(json.dumps(data))
    default = CostModel()
    assert loaded.max_local_cells == 77
    assert (loaded.local.per_copy, loaded.local.per_pair) == (default.local.per_copy, default.local.per_pair)
    assert (loaded.spark.per_copy, loaded.spark.per_pair) == (default.spark.per_copy, default.spark.per_pair)
    assert default.spark.per_copy != default.local.per_copy  # so the check above can tell them apart


def _bounded_fit(points: list[dict], columns: list[str], offsets: dict[str, float]) -> np.ndarray:
    """The non-negative least-squares fit by another solver (scipy's bounded lsq_linear)."""
    design = np.array([[p[c] for c in columns] for p in points])
    target = np.array([max(0.0, p["seconds"] - sum(t * p[c] for c, t in offsets.items())) for p in points])
    scale = design.max(axis=0)
    return lsq_linear(design / scale, target, bounds=(0, np.inf), method="bvls").x / scale


def check_fitted_terms(terms: EngineCost, samples: list[dict], engine: str) -> None:
    """The stored terms are the least-squares fits of the stored samples, stage by stage (aggregates,
    then the join(s) after the per-copy cost), refitted here by an independent solver."""

    def close(stored: float, fitted: float, floor: float) -> bool:
        return math.isclose(stored, max(fitted, floor), rel_tol=1e-5, abs_tol=1e-12)

    aggregates = [p for p in samples if p["operation"] in ("regrid", "group_by")]
    copy, aggregate, contribution = _bounded_fit(aggregates, ["copies", "aggregates", "contributions"], {})
    assert close(terms.per_copy, copy, 1e-9) and close(terms.per_aggregate, aggregate, 0.0)
    assert close(terms.per_contribution, contribution, 1e-10)
    offsets = {"copies": terms.per_copy}
    if engine == "local":
        block = [p for p in samples if p["operation"] == "join_block"]
        per_block, per_pair = _bounded_fit(block, ["blocks", "pairs"], offsets)
        assert close(terms.per_block, per_block, 0.0) and close(terms.per_pair, per_pair, 1e-11)
        routed = [p for p in samples if p["operation"] == "join_routed"]
        group, route, pair = _bounded_fit(routed, ["groups", "routed", "routed_pairs"], offsets)
        assert close(terms.per_group, group, 0.0) and close(terms.per_route, route, 0.0)
        assert close(terms.per_routed_pair, pair, 1e-11)
    else:
        (per_pair,) = _bounded_fit([p for p in samples if p["operation"] == "join"], ["pairs"], offsets)
        assert close(terms.per_pair, per_pair, 1e-11)


def _blocks_reached(mean: float, sigma: float, low: int, high: int, block: int) -> int:
    """Blocks of ``block`` cells of [low, high] that mean +- 8.3 sigma meets (plain Python)."""
    a, b = max(low, mean - 8.3 * sigma), min(high + 1, mean + 8.3 * sigma)
    if a > b:
        return 0
    last_block = (high - low) // block
    return min(last_block, math.floor((b - low) / block)) - max(0, math.floor((a - low) / block)) + 1


def test_aggregate_contributions_from_metadata_match_a_plain_count(db) -> None:
    rng = np.random.default_rng(13)
    data = _tuples(rng, 400)
    a = db.create_uncertain_array(SCHEMA.format(name="GA"), scheme="store-multiple", step=1)
    a.insert(data)
    for blocks, make in (
        ({"x": 1}, lambda: a.aggregate("count(*)", by=["x"])),
        ({"x": 1, "y": 1}, lambda: a.aggregate("count(*)", "sum(flux)", by=["x", "y"])),
        ({"x": 10, "y": 10}, lambda: a.regrid({"x": 10, "y": 10}, "count(*)")),
    ):
        estimate = make().choose().estimate
        brute = 0
        for x, y, sx, sy in zip(data["x"], data["y"], data["x_sigma"], data["y_sigma"], strict=True):
            count = 1
            for name, mean, sigma, high in (("x", x, sx, 59), ("y", y, sy, 39)):
                if name in blocks:
                    count *= _blocks_reached(mean, sigma, 0, high, blocks[name])
            brute += count
        # the estimate sees each fragment's smallest and largest sigma only: a model, within 25%
        assert estimate.aggregates == 1 and 0.75 <= estimate.contributions / brute <= 1.25, (blocks, brute)
        # and the result has the contributions it counted: the expected count is the tuple count
        # (every tuple's mass lies inside the domain up to 1e-16 per tuple, so compare loosely)
        assert make().to_pandas()["count"].sum() == pytest.approx(400 - _mass_outside(data), abs=1e-6)


def _mass_outside(data: dict) -> float:
    from scipy.stats import norm

    inside = (norm.cdf(60, data["x"], data["x_sigma"]) - norm.cdf(0, data["x"], data["x_sigma"])) * (
        norm.cdf(40, data["y"], data["y_sigma"]) - norm.cdf(0, data["y"], data["y_sigma"])
    )
    return float(len(inside) - inside.sum())


def test_in_process_aggregate_is_priced_per_run_and_per_contribution(db) -> None:
    rng = np.random.default_rng(14)
    a = db.create_uncertain_array(SCHEMA.format(name="HA"), scheme="store-multiple", step=1)
    a.insert(_tuples(rng, 300))
    default = CostModel()
    aggregate = a.aggregate("count(*)", by=["x", "y"])
    estimate = aggregate.choose().estimate
    assert aggregate.choice.executor == "local" and "block contributions" in aggregate.choice.reason
    expected = (
        default.local.fixed
        + default.local.per_copy * estimate.copies
        + default.local.per_aggregate
        + default.local.per_contribution * estimate.contributions
    )
    assert aggregate.choice.predicted["local"] == pytest.approx(expected, rel=1e-12)
    try:  # contributions priced high in-process: the same metadata now says Spark, and why
        db.executors.store_costs(CostModel(local=replace(default.local, per_contribution=1.0)))
        plan = a.aggregate("count(*)", by=["x", "y"]).explain()
        assert plan["executor"] == "spark" and "block contributions" in plan["reason"]
    finally:
        db.executors.store_costs(default)


def _join_plan_costs(plan: str) -> CostModel:
    """Default costs with the other in-process join plan priced far higher."""
    slow = {"block": {"per_group": 100.0}, "routed": {"per_block": 100.0}}[plan]
    return CostModel(local=replace(CostModel().local, **slow))


@pytest.mark.parametrize("left", [("store-multiple", 1), ("store-mean", 0), ("store-all", 0)])
def test_join_plan_follows_the_costs_and_both_plans_match_brute_force(db, left) -> None:
    from arrayviews.operators.uncertain_join_plans import plan_estimates

    rng = np.random.default_rng(33)
    a, b = catalog(rng, 150, heavy=12.0), catalog(rng, 400)
    outer = db.create_uncertain_array(CATALOG_SCHEMA.format(name="pa"), scheme=left[0], step=left[1])
    inner = db.create_uncertain_array(CATALOG_SCHEMA.format(name="pb"), scheme="store-multiple", step=(3, 2))
    outer.insert(a)
    inner.insert(b)
    results = {}
    try:
        for plan in ("block", "routed"):
            db.executors.store_costs(_join_plan_costs(plan))
            for delta, threshold in [(1.0, 0.5), (2.5, 0.05)]:
                join = outer.structure_join(inner, delta, threshold, engine="local", outer="left")
                explained = join.explain()
                assert explained["plan"] == plan and f"{plan} plan" in explained["reason"]
                assert (
                    join.plan.predicted[plan]
                    < join.plan.predicted[{"block": "routed", "routed": "block"}[plan]]
                )
                check_join(join.to_pandas(), join_reference(a, b, delta), threshold)
                assert (join.statistics.blocks == -1) == (plan == "routed")  # the plan that ran
                report = join.statistics.as_dict()
                assert (
                    report["plan"] == plan
                    and report["executor"] == "local"
                    and "routed plan" in report["reason"]
                )
                results[plan, delta] = join.to_arrow()
            text = db.sql("EXPLAIN SELECT * FROM structure_join(pa, pb, 1, 0.5, OUTER left)")
            assert f"plan: {plan}" in text and "routed plan" in text and "block plan" in text
    finally:
        db.executors.store_costs(CostModel())
    for delta in (1.0, 2.5):
        assert results["block", delta].equals(results["routed", delta])
    with pytest.raises(ValidationError, match="plan must be 'block' or 'routed', got 'nested'"):
        outer.structure_join(inner, 1.0, 0.5).force_plan("nested")
    # the plans' work from metadata: one outer block (150 tuples); the routed plan sends every outer
    # copy to each inner chunk its candidate box overlaps, counted here from the stored copies
    join = outer.structure_join(inner, 1.0, 0.5, engine="local", outer="left")
    join.choose()
    estimates = join.plan.estimates
    assert estimates["block"].blocks == 1 and estimates["routed"].groups > 0
    assert estimates["routed"].routed_pairs == join.choice.estimate.pairs and estimates["routed"].pairs == 0
    base = join.choice.estimate
    assert plan_estimates(*join._sides()[:2], 1.0, base) == estimates


@pytest.mark.slow
def test_db_calibrate_stores_the_uncertain_terms_and_the_next_connect_uses_them(db, spark) -> None:
    import arrayviews
    from arrayviews.execution.cost import calibration_uri

    rng = np.random.default_rng(15)
    a = db.create_uncertain_array(SCHEMA.format(name="KA"), scheme="store-multiple", step=1)
    a.insert(_tuples(rng, 300))
    b = db.create_uncertain_array(SCHEMA.format(name="KB"), scheme="store-mean")
    b.insert(_tuples(rng, 600))
    returned = db.calibrate(repeats=1, uncertain_sizes=(100, 300, 600))
    assert db.uncertain_arrays() == ["KA", "KB"]  # the scratch arrays are dropped
    uri = calibration_uri(db.executors.warehouse)
    path = urlparse(uri).path if uri.startswith("file:") else uri
    with open(path) as stream:
        stored = json.load(stream)
    # one file: the array terms (the line through the two window timings) and the uncertain terms
    # (the fits of their samples), each engine's as returned
    assert {"local", "spark", "uncertain", "stream_step"} <= set(stored["notes"]) and stored["calibrated"]
    assert stored["stream_step"] == returned["stream_step"] and stored["stream_step"]["per_view"] > 0
    (n1, t1), (n2, t2) = stored["notes"]["local"]
    assert stored["local"]["per_cell"] == pytest.approx(max((t2 - t1) / (n2 - n1), 1e-12), rel=1e-3)
    for engine in ("local", "spark"):
        assert stored[engine] == returned[engine]
        samples = stored["notes"]["uncertain"][engine]
        operations = ["regrid", "group_by"] + (
            ["join_block", "join_routed"] if engine == "local" else ["join"]
        )
        assert sorted(p["operation"] for p in samples) == sorted(operations * 3)  # three sizes
        by = {(p["operation"], p["tuples"]): p for p in samples}
        # the regrid reads the outer array alone: its copies grow with the size, and it has no pairs
        assert by["regrid", 100]["pairs"] == 0 and by["regrid", 600]["copies"] > by["regrid", 100]["copies"]
        # grouping by both dimensions: many more block contributions per tuple than 10 x 10 blocks
        assert by["group_by", 300]["contributions"] > 5 * by["regrid", 300]["contributions"]
        check_fitted_terms(EngineCost(**stored[engine]), samples, engine)
    assert stored["local"]["per_routed_pair"] > 0 and stored["spark"]["per_routed_pair"] == 0.0

    def reconnect(**patch: float):
        for name, value in patch.items():
            stored["local"][name] = value
        with open(path, "w") as stream:
            json.dump(stored, stream)
        return arrayviews.connect(db.executors.warehouse, spark=spark)

    # the next connect prices with the stored terms (worked out here from the file's numbers)
    again = reconnect()
    aggregate = again.uncertain_array("KA").aggregate("count(*)", by=["x", "y"])
    work, local = aggregate.choose().estimate, stored["local"]
    by_hand = (
        local["fixed"]
        + local["per_job"] * work.jobs
        + local["per_copy"] * work.copies
        + local["per_aggregate"]
        + local["per_contribution"] * work.contributions
    )
    assert aggregate.choice.predicted["local"] == pytest.approx(by_hand, rel=1e-12)
    assert "calibrated costs" in aggregate.choice.reason
    # a stored term patched high moves the next connect's choice, and EXPLAIN says why
    patched = reconnect(per_contribution=10.0)
    plan = patched.uncertain_array("KA").aggregate("count(*)", by=["x", "y"]).explain()
    assert plan["executor"] == "spark" and "block contributions" in plan["reason"]
    assert "calibrated costs" in plan["reason"]
    query = "EXPLAIN SELECT * FROM structure_join(KA, KB, 1, 0.5, OUTER left)"
    fitted = {term: stored["local"][term] for term in ("per_block", "per_group")}
    for term, plan_name in (("per_group", "block"), ("per_block", "routed")):
        patched = reconnect(**{**fitted, term: 100.0})
        text = patched.sql(query)
        assert "executor: local" in text and f"plan: {plan_name}" in text
        assert "calibrated costs" in text and "predicted block plan" in text


def test_block_plan_with_many_outer_blocks_prices_the_inner_rereads(db, monkeypatch) -> None:
    from arrayviews.operators import uncertain_join

    rng = np.random.default_rng(34)
    a, b = catalog(rng, 200, heavy=12.0), catalog(rng, 500)
    outer = db.create_uncertain_array(CATALOG_SCHEMA.format(name="ra"), scheme="store-multiple", step=1)
    inner = db.create_uncertain_array(CATALOG_SCHEMA.format(name="rb"), scheme="store-mean")
    outer.insert(a)
    inner.insert(b)
    monkeypatch.setattr(uncertain_join, "BLOCK_COPIES", 40)  # a small memory quota: many outer blocks
    try:
        for plan in ("block", "routed"):
            db.executors.store_costs(_join_plan_costs(plan))
            join = outer.structure_join(inner, 1.5, 0.3, engine="local", outer="left")
            check_join(join.to_pandas(), join_reference(a, b, 1.5), 0.3)
            assert join.explain()["plan"] == plan
            if plan == "block":
                block, stats = join.plan.estimates["block"], join.statistics
                assert block.blocks == stats.blocks > 3
                # the estimate reads each block's slab of the inner array (a superset of the union of
                # its cells' regions that the plan reads): at least what was read, within 2x
                read = stats.outer_copies_read + stats.inner_copies_read
                base = join.choice.estimate.copies
                assert read > base and read <= block.copies <= 2 * read, (read, block.copies, base)
    finally:
        db.executors.store_costs(CostModel())
