"""The executor estimate of the uncertain operators (paper 001): tuple copies, bytes and candidate
pairs from metadata, checked against brute-force counts in plain Python; the choice it drives."""

from __future__ import annotations

import json
import math
import os
from urllib.parse import urlparse

import numpy as np
import pyarrow.parquet as pq
import pytest

from arrayviews.execution.cost import CostModel, EngineCost
from arrayviews.storage import uncertain_layout as ul

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
        slow_pairs = EngineCost(default.local.fixed, 0.0, default.local.per_cell, default.local.per_copy, 1.0)
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


@pytest.mark.slow
def test_calibrate_engines_stores_fitted_uncertain_terms(db) -> None:
    from arrayviews.execution.cost import load_costs
    from arrayviews.operators.uncertain_calibration import calibrate_engines

    before = db.uncertain_arrays()
    calibrated = calibrate_engines(db, sizes=(100, 400), repeats=1)
    assert db.uncertain_arrays() == before  # the scratch arrays are dropped
    stored = load_costs(db.executors.warehouse)
    assert stored == calibrated and stored.calibrated is not None
    for engine in ("local", "spark"):
        samples = stored.notes["uncertain"][engine]
        assert len(samples) == 4  # two operators at two sizes
        # the regrid reads the outer array alone: its copies grow with the size, and it has no pairs
        regrid_small, join_small, regrid_large, _ = samples
        assert regrid_small[1] == 0 and join_small[1] > 0 and regrid_large[0] > regrid_small[0]
        terms = getattr(stored, engine)
        assert terms.per_copy > 0 and terms.per_pair > 0
    assert db.uncertain_arrays() == before
