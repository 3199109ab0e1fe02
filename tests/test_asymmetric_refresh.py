"""Refreshing a view on some of its base arrays only (the action of paper 003's maintenance
plans): the view then equals a brute-force recomputation over the advanced bases' current cells and
the other bases' cells as of the versions the view reflects; verify() checks exactly that."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arrayviews.model.errors import ValidationError
from arrayviews.model.shapes import Linf
from arrayviews.views.definition import SimilarityViewDefinition, ViewAggregate

EXTENT = 6
AGGREGATES = (
    ViewAggregate("count", None, None, "cnt"),
    ViewAggregate("sum", "right", "v", "total"),
    ViewAggregate("min", "right", "v", "low"),
)


def expected(left: dict, right: dict) -> list[dict]:
    """Per left cell with at least one right cell in its 3x3 box: count, sum and min of the right
    values there (cells without a pair are not in the view), by plain Python."""
    rows = []
    for i, j in sorted(left):
        found = [v for (a, b), v in right.items() if abs(a - i) <= 1 and abs(b - j) <= 1]
        if found:
            rows.append({"i": i, "j": j, "cnt": len(found), "total": sum(found), "low": min(found)})
    return rows


def batch(cells: dict) -> pa.Table:
    coords = sorted(cells)
    return pa.table(
        {
            "i": pa.array([c[0] for c in coords], pa.int64()),
            "j": pa.array([c[1] for c in coords], pa.int64()),
            "v": pa.array([cells[c] for c in coords], pa.int64()),
        }
    )


def two_bases(db, left_cells: dict, right_cells: dict):
    schema = "<v:int64>[i=0:{e}:3; j=0:{e}:3]".format(e=EXTENT - 1)
    left = db.create_array("L" + schema)
    right = db.create_array("R" + schema)
    left.insert(batch(left_cells))
    right.insert(batch(right_cells))
    view = db.create_view("V", SimilarityViewDefinition("L", "R", Linf(1), AGGREGATES))
    return left, right, view


def test_refresh_one_base_then_the_other(db_on) -> None:
    db, executor = db_on
    left_cells = {(0, 0): 1, (2, 2): 5, (4, 4): 7}
    right_cells = {(0, 1): 10, (3, 3): -4, (5, 5): 2}
    left, right, view = two_bases(db, left_cells, right_cells)
    assert view.to_arrow().to_pylist() == expected(left_cells, right_cells)

    new_left = {(1, 1): 3, (5, 4): 0}
    new_right = {(1, 2): -20, (4, 5): 8}
    left.insert(batch(new_left))
    right.insert(batch(new_right))
    right.delete(np.array([[3, 3]], dtype=np.int64))
    all_left = {**left_cells, **new_left}
    all_right = {k: v for k, v in {**right_cells, **new_right}.items() if k != (3, 3)}

    result = view.refresh("baseline", bases="L")
    assert result.committed and result.executor == executor
    assert result.base_versions == {"L": (1, 2), "R": (1, 1)}
    assert "on L" in result.message
    assert view.to_arrow().to_pylist() == expected(all_left, right_cells)
    status = {row["base"]: row for row in view.status()["bases"]}
    assert (status["L"]["reflected"], status["R"]["reflected"], status["R"]["current"]) == (2, 1, 3)
    assert view.verify()  # against the bases at the versions the view reflects

    again = view.refresh("baseline", bases=["L"])
    assert not again.committed and "up to date on L" in again.message

    result = view.refresh("auto", bases=["R"])
    assert result.committed and result.base_versions == {"L": (2, 2), "R": (1, 3)}
    assert view.to_arrow().to_pylist() == expected(all_left, all_right)
    assert view.verify()
    assert not view.status()["pending"]


def test_verify_compares_with_the_reflected_versions(db) -> None:
    """Before, verify() recomputed from the current bases, so a view that was merely behind (or
    advanced on one base) was reported wrong."""
    left, right, view = two_bases(db, {(0, 0): 1}, {(0, 1): 2})
    right.insert(batch({(1, 1): 9}))
    assert view.verify()
    assert view.to_arrow().to_pylist() == expected({(0, 0): 1}, {(0, 1): 2})


def test_bad_bases_are_refused_and_change_nothing(db) -> None:
    left, right, view = two_bases(db, {(0, 0): 1}, {(0, 1): 2})
    right.insert(batch({(1, 1): 9}))
    versions = len(view.versions())
    with pytest.raises(
        ValidationError, match=r"view V: Q is not a base array of the view \(its bases: L, R\)"
    ):
        view.refresh(bases=["R", "Q"])
    with pytest.raises(ValidationError, match="at least one base array"):
        view.refresh(bases=[])
    with pytest.raises(ValidationError, match="Q is not a base array"):
        view.explain_refresh(bases="Q")
    assert len(view.versions()) == versions
    assert view.status()["pending"]


def test_pending_costs_name_each_base(db) -> None:
    left, right, view = two_bases(db, {(0, 0): 1, (3, 3): 2}, {(0, 1): 2})
    costs = view.pending_costs().set_index("base")
    assert list(costs["pending_batches"]) == [0, 0]
    assert list(costs["predicted_seconds"]) == [0.0, 0.0]
    for k in range(3):
        right.insert(batch({(k, 2): k}))
    left.insert(batch({(5, 5): 1}))
    costs = view.pending_costs().set_index("base")
    assert costs.loc["R", "pending_batches"] == 3 and costs.loc["L", "pending_batches"] == 1
    assert (costs.loc["R", "reflected"], costs.loc["R", "current"]) == (1, 4)
    for base in ("L", "R"):
        assert costs.loc[base, "strategy"] in ("baseline", "full")
        assert costs.loc[base, "predicted_seconds"] > 0
    assert "refresh of view V on R" in view.explain_refresh(bases="R")
    versions = len(view.versions())
    view.pending_costs()
    assert len(view.versions()) == versions  # nothing ran


cells = st.dictionaries(
    st.tuples(st.integers(0, EXTENT - 1), st.integers(0, EXTENT - 1)), st.integers(-50, 50), max_size=6
)
steps = st.lists(
    st.tuples(st.sampled_from(["L", "R"]), cells, st.sampled_from([("L",), ("R",), ("L", "R"), ()])),
    min_size=1,
    max_size=5,
)


@pytest.mark.slow
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    first_left=cells, first_right=cells, steps=steps, strategy=st.sampled_from(["baseline", "full", "auto"])
)
def test_any_order_of_partial_refreshes(db, first_left, first_right, steps, strategy) -> None:
    """Random inserts (replacing cells) on either base, each followed by a refresh of a random set
    of bases: the view always equals the brute force over the versions it reflects."""
    for name in ("V", "L", "R"):
        if db.warehouse.exists(name):
            db.drop(name)
    left, right, view = two_bases(db, first_left, first_right)
    arrays = {"L": left, "R": right}
    # the cells of each base by version (an empty first batch commits nothing: version 0)
    history = {"L": {left.version: dict(first_left)}, "R": {right.version: dict(first_right)}}
    for base, new, advance in steps:
        if new:
            array = arrays[base]
            before = history[base][array.version]
            if array.insert(batch(new), on_conflict="replace").committed:
                history[base][array.version] = {**before, **new}
        if advance:
            view.refresh(strategy, bases=list(advance))
        reflected = {row["base"]: row["reflected"] for row in view.status()["bases"]}
        assert view.to_arrow().to_pylist() == expected(
            history["L"][reflected["L"]], history["R"][reflected["R"]]
        )


def test_the_statement_refreshes_named_bases(db) -> None:
    left, right, view = two_bases(db, {(0, 0): 1}, {(0, 1): 2})
    left.insert(batch({(1, 1): 4}))
    right.insert(batch({(1, 2): 8}))
    assert "refresh of view V on R (auto)" in db.sql("EXPLAIN REFRESH VIEW V ON R")
    result = db.sql("REFRESH VIEW V USING BASELINE ON R")
    assert result.committed and result.base_versions == {"L": (1, 1), "R": (1, 2)}
    assert view.to_arrow().to_pylist() == expected({(0, 0): 1}, {(0, 1): 2, (1, 2): 8})
    with pytest.raises(ValidationError, match="view V: Q is not a base array"):
        db.sql("REFRESH VIEW V ON Q")
    assert db.sql("REFRESH VIEW V ON L, R").base_versions == {"L": (1, 2), "R": (2, 2)}
