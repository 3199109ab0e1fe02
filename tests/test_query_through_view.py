"""Answering a similarity aggregate through a materialized view (paper 000, section 5): the answer
through a view over another shape equals a plain-Python brute force over the cells (exact sums by
math.fsum and Python integers), the cost model picks a way and says why, and a view that cannot
answer is refused with its reason."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arrayviews import L1, Linf, NotFoundError, ValidationError, box, stencil
from arrayviews.language.parser import parse
from arrayviews.language.printer import to_text
from arrayviews.views.definition import similarity

AGGREGATES = (
    "count(*) as n",
    "sum(right.v) as s",
    "min(right.w) as lo",
    "max(right.v) as hi",
    "avg(right.w) as a",
    "count(right.v) as nv",
)
VIEW_SQL = (
    "SELECT count(*) AS n, sum(b.v) AS s, min(b.w) AS lo, max(b.v) AS hi, avg(b.w) AS a, count(b.v) AS nv "
    "FROM A a SIMILARITY JOIN A b WITH SHAPE {shape} GROUP BY a.i, a.j"
)


def _cells(seed: int, n: int, size: int = 24) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    flat = rng.choice(size * size, size=n, replace=False)
    values = rng.normal(size=n) * 10.0 ** rng.integers(-3, 6, size=n)  # magnitudes that cancel badly
    return pd.DataFrame(
        {
            "i": flat // size,
            "j": flat % size,
            "v": values,
            "w": rng.integers(-(2**62), 2**62, size=n),  # sums far beyond int64: exact or loud
        }
    )


def _brute_force(cells: pd.DataFrame, offsets: np.ndarray) -> pd.DataFrame:
    """Per cell with at least one neighbour inside the shape: the aggregates by plain Python."""
    where = {(int(i), int(j)): k for k, (i, j) in enumerate(zip(cells.i, cells.j, strict=True))}
    v, w = cells.v.tolist(), [int(x) for x in cells.w]
    rows = []
    for (i, j), _ in sorted(where.items()):
        found = [where[(i + int(a), j + int(b))] for a, b in offsets if (i + int(a), j + int(b)) in where]
        if not found:
            continue
        vs = [v[k] for k in found]
        ws = [w[k] for k in found]
        rows.append(
            {
                "i": i,
                "j": j,
                "n": len(found),
                "s": math.fsum(vs),
                "lo": min(ws),
                "hi": max(vs),
                "a": sum(ws) / len(ws),  # Python integers: the exact mean, rounded once
                "nv": len(vs),
            }
        )
    return pd.DataFrame(rows)


def _check(answer: pd.DataFrame, expected: pd.DataFrame) -> None:
    assert len(answer) == len(expected)
    assert answer.i.tolist() == expected.i.tolist() and answer.j.tolist() == expected.j.tolist()
    assert answer.n.tolist() == expected.n.tolist()
    assert answer.nv.tolist() == expected.nv.tolist()
    assert answer.lo.tolist() == expected.lo.tolist()
    assert answer.s.tolist() == expected.s.tolist()  # math.fsum: exact, rounded once
    assert answer.hi.tolist() == expected.hi.tolist()
    # the mean of int64 values: the exact mean rounded once (it was one unit off before
    # kernels/exact_divide.py)
    assert answer.a.tolist() == expected.a.tolist()


SHAPES = {
    "L1(1)": L1(1),
    "Linf(1)": Linf(1),
    "L1(2)": L1(2),
    "Linf(2)": Linf(2),
    "row": box([(0, 0), (-2, 2)]),
    "ring": stencil(np.array([[1, 1, 1], [1, 0, 1], [1, 1, 1]], dtype=bool)),
}


@pytest.fixture
def loaded(db):
    cells = _cells(7, 160)
    db.create_array("A <v:double, w:int64> [i=0:23:6; j=0:23:6]").insert(cells)
    return db, cells


@pytest.mark.parametrize(
    ("view_shape", "query_shape"),
    [("L1(1)", "Linf(1)"), ("Linf(2)", "L1(1)"), ("ring", "L1(1)"), ("row", "Linf(1)"), ("L1(2)", "L1(2)")],
)
def test_answer_through_view_equals_brute_force(loaded, view_shape, query_shape):
    db, cells = loaded
    db.create_view("V", similarity("A", "A", SHAPES[view_shape], AGGREGATES))
    query = SHAPES[query_shape]
    join = db.similarity_join("A", "A", query)
    plan = join.plan(*AGGREGATES, through="V")
    assert plan.chosen == "view" and plan.view == "V"
    answer = join.aggregate(*AGGREGATES, through="V").to_pandas()
    _check(answer, _brute_force(cells, query.offsets()))
    scratch = join.aggregate(*AGGREGATES, through="none").to_pandas()
    pd.testing.assert_frame_equal(answer, scratch)  # the same to the last bit, nulls and NaN alike


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 10_000),
    view_mask=st.lists(st.booleans(), min_size=9, max_size=9),
    query_mask=st.lists(st.booleans(), min_size=25, max_size=25),
)
def test_any_two_shapes(db, seed, view_mask, query_mask):
    """Any view stencil (3x3) and query stencil (5x5, centred): through the view = brute force."""
    if not any(view_mask) or not any(query_mask):
        return
    name = f"A{seed}"
    cells = _cells(seed, 70, size=16)
    db.create_array(f"{name} <v:double, w:int64> [i=0:15:5; j=0:15:5]").insert(cells)
    view_shape = stencil(np.array(view_mask, dtype=bool).reshape(3, 3))
    query_shape = stencil(np.array(query_mask, dtype=bool).reshape(5, 5))
    db.create_view(f"V{seed}", similarity(name, name, view_shape, AGGREGATES))
    answer = db.similarity_join(name, name, query_shape).aggregate(*AGGREGATES, through=f"V{seed}")
    _check(answer.to_pandas(), _brute_force(cells, query_shape.offsets()))
    db.drop_view(f"V{seed}")
    db.drop_array(name)


def test_two_arrays_with_a_mapping(db_on):
    """A left array over a coarse grid, a right array over a fine one (j = 2 * j'): the view's mapping
    carries into the answer."""
    db, _ = db_on
    rng = np.random.default_rng(3)
    left = pd.DataFrame({"i": np.arange(12) % 6, "j": np.arange(12) // 6 * 3, "x": rng.integers(0, 9, 12)})
    flat = rng.choice(12 * 24, size=90, replace=False)
    right = pd.DataFrame({"i": flat // 24, "j": flat % 24, "v": rng.normal(size=90)})
    db.create_array("L <x:int64> [i=0:11:4; j=0:11:4]").insert(left)
    db.create_array("R <v:double> [i=0:11:4; j=0:23:8]").insert(right)
    db.create_view(
        "V",
        "SELECT count(*) AS n, sum(r.v) AS s FROM L l SIMILARITY JOIN R r ON (r.i = l.i) AND "
        "(r.j = l.j * 2) WITH SHAPE L1(1) GROUP BY l.i, l.j",
    )
    mapping = db.view("V").definition.mapping
    join = db.similarity_join("L", "R", Linf(2), mapping)
    answer = join.aggregate("count(*) as n", "sum(right.v) as s", through="V").to_pandas()
    where = {(int(i), int(j)): float(v) for i, j, v in zip(right.i, right.j, right.v, strict=True)}
    rows = []
    for i, j in sorted(zip(left.i.tolist(), left.j.tolist(), strict=True)):
        found = [
            where[(i + a, 2 * j + b)]
            for a in range(-2, 3)
            for b in range(-2, 3)
            if (i + a, 2 * j + b) in where
        ]
        if found:
            rows.append((i, j, len(found), math.fsum(found)))
    assert list(answer.itertuples(index=False, name=None)) == rows


def test_auto_chooses_by_cost_and_says_why(loaded):
    db, _ = loaded
    db.create_view("V", VIEW_SQL.format(shape="Linf(3)"))
    same = db.similarity_join("A", "A", Linf(3)).plan(*AGGREGATES)
    assert same.chosen == "view" and same.added is None and same.removed is None
    # the view's own shape reads the view and merges none of its chunks (it was priced as merging
    # every one, which made the view's way look 4x dearer than measured)
    assert same.through_view.view_chunks == 0 and same.through_view.chunk_pairs == 0
    assert same.through_view.cells == len(db.view("V").to_pandas())
    far = db.similarity_join("A", "A", L1(1)).plan(*AGGREGATES)  # 44 offsets to take away, 5 asked
    assert far.chosen == "scratch" and far.view == "V" and len(far.removed) == 44
    assert "from scratch is predicted" in far.reason
    text = db.similarity_join("A", "A", L1(1)).explain(*AGGREGATES)
    assert "answered from the base arrays" in text and "view:" in text and "scratch:" in text


def test_views_that_cannot_answer_are_refused_with_the_reason(loaded):
    db, cells = loaded
    db.create_view(
        "V", "SELECT count(*) AS n FROM A a SIMILARITY JOIN A b WITH SHAPE L1(1) GROUP BY a.i, a.j"
    )
    join = db.similarity_join("A", "A", Linf(1))
    with pytest.raises(
        ValidationError, match=r"view V cannot answer .* keeps no state sum\(right.v\) can be computed from"
    ):
        join.aggregate("count(*) as n", "sum(right.v) as s", through="V")
    # a view ahead of the version a query reads (a pinned older version) cannot answer it
    db.array("A").insert(pd.DataFrame({"i": [23], "j": [23], "v": [1.0], "w": [1]}), on_conflict="replace")
    db.view("V").refresh()
    old = db.similarity_join(db.array("A").at_version(1), db.array("A").at_version(1), Linf(1))
    plan = old.plan("count(*) as n")
    assert (
        plan.chosen == "scratch" and "reflects A v2, newer than the v1 the query reads" in plan.refused["V"]
    )
    with pytest.raises(ValidationError, match="newer than the v1 the query reads"):
        old.aggregate("count(*) as n", through="V")
    assert join.plan("count(*) as n", through="V").chosen == "view"
    with pytest.raises(NotFoundError, match=r"no view named W to answer through \(views: V;"):
        join.aggregate("count(*) as n", through="W")
    # a computed array is not what any view holds
    computed = db.similarity_join(db.array("A").filter("v > 0"), "A", Linf(1))
    assert computed.plan("count(*) as n").chosen == "scratch"


def test_the_statement_and_its_explain(loaded):
    db, cells = loaded
    db.sql("CREATE ARRAY VIEW V AS " + VIEW_SQL.format(shape="L1(1)"))
    text = "SELECT count(*) AS n, max(b.v) AS hi FROM A a SIMILARITY JOIN A b WITH SHAPE LINF(1) GROUP BY a.i, a.j"
    for suffix in ("", " USING VIEW V", " USING BASE ARRAYS"):
        statement = parse(text + suffix)[0]
        assert to_text(statement) == text + suffix
        answer = db.sql(text + suffix).to_pandas()
        expected = _brute_force(cells, Linf(1).offsets())
        assert answer.n.tolist() == expected.n.tolist()
        assert answer.hi.tolist() == expected.hi.tolist()
    explained = db.sql("EXPLAIN " + text + " USING VIEW V")
    assert "answered through view V" in explained and "4 offset(s) added" in explained
    with pytest.raises(Exception, match="USING VIEW name or USING BASE ARRAYS"):
        parse(text + " USING SOME ARRAYS")


def test_a_commit_during_the_query_does_not_mix_versions(loaded, monkeypatch):
    """Another writer commits to A after the plan checked the view against A's version: the answer
    is still the query at the version it started on (the view's state is never combined with newer
    base cells)."""
    from arrayviews.views import answering

    db, cells = loaded
    db.create_view("V", similarity("A", "A", L1(1), AGGREGATES))
    taken = set(zip(cells.i.tolist(), cells.j.tolist(), strict=True))
    fresh = [(i, 0) for i in range(24) if (i, 0) not in taken]
    planned = answering.plan_answer

    def racing(*args, **kwargs):
        plan = planned(*args, **kwargs)
        db.array("A").insert(
            pd.DataFrame({"i": [c[0] for c in fresh], "j": [0] * len(fresh), "v": 1.0, "w": 1})
        )
        return plan

    monkeypatch.setattr(answering, "plan_answer", racing)
    answer = db.similarity_join("A", "A", Linf(1)).aggregate(*AGGREGATES, through="V").to_pandas()
    _check(answer, _brute_force(cells, Linf(1).offsets()))
    assert db.array("A").version == 2  # the other writer did commit


def test_a_view_chunked_unlike_its_base(loaded):
    """The view's own chunking (4 x 4 over a base of 6 x 6 chunks): the answer is chunked like the
    view and equals the brute force."""
    db, cells = loaded
    db.create_view("V", similarity("A", "A", Linf(1), AGGREGATES), chunks=(4, 4))
    answer = db.similarity_join("A", "A", L1(2)).aggregate(*AGGREGATES, through="V")
    assert [d.chunk_length for d in answer.schema.dimensions] == [4, 4]
    _check(answer.to_pandas(), _brute_force(cells, L1(2).offsets()))


@pytest.mark.parametrize("executor", ["local", "spark"])
def test_a_view_behind_its_bases_is_brought_forward_in_memory(spark, tmp_path, executor):
    """Inserts, replaced values and deletes after the view's refresh: the answer through the view
    (its own incremental refresh run in memory, then the delta shape) equals the brute force at the
    current version, min/max included, and the view itself is left as it was."""
    import arrayviews

    db = arrayviews.connect(str(tmp_path / "warehouse"), spark=spark, execution=executor)
    cells = _cells(11, 150)
    array = db.create_array("A <v:double, w:int64> [i=0:23:6; j=0:23:6]")
    array.insert(cells)
    view = db.create_view("V", similarity("A", "A", Linf(2), AGGREGATES))
    versions = len(view.versions())
    rng = np.random.default_rng(5)
    gone = cells.sample(20, random_state=1)
    array.delete(gone[["i", "j"]])
    changed = cells.drop(gone.index).sample(15, random_state=2).assign(v=lambda f: f.v * -3.0, w=7)
    array.insert(changed, on_conflict="replace")
    taken = set(zip(cells.i.tolist(), cells.j.tolist(), strict=True))
    new = [(int(i), int(j)) for i, j in rng.integers(0, 24, (40, 2)) if (int(i), int(j)) not in taken]
    new = sorted(set(new))
    array.insert(
        pd.DataFrame(
            {"i": [c[0] for c in new], "j": [c[1] for c in new], "v": rng.normal(size=len(new)), "w": 3}
        )
    )
    now = pd.concat([cells.drop(gone.index).drop(changed.index), changed]).sort_values(["i", "j"])
    now = pd.concat(
        [now, pd.DataFrame({"i": [c[0] for c in new], "j": [c[1] for c in new]})], ignore_index=True
    )
    current = array.to_pandas()  # v and w as stored now (the new cells' values come from the array)
    for query in (L1(1), Linf(2)):  # view \ query with a max and a min; the view's own shape
        join = db.similarity_join("A", "A", query)
        plan = join.plan(*AGGREGATES, through="V")
        assert plan.catch_up is not None and "brought forward in memory" in plan.text()
        answer = join.aggregate(*AGGREGATES, through="V").to_pandas()
        _check(answer, _brute_force(current, query.offsets()))
    assert len(current) == len(now)
    assert len(view.versions()) == versions and view.status()["pending"]  # nothing was stored


def test_aggregates_computed_from_the_views_state(loaded):
    """The query asks for other aggregates than the view keeps, computable from its state: an avg
    from a kept sum, counts from a kept min, a left sum from a kept left max; a right max from a view
    keeping only the min is refused."""
    db, cells = loaded
    db.create_view(
        "V",
        similarity(
            "A", "A", L1(1), ["count(*) as n", "sum(right.v) as s", "min(right.w) as lo", "max(left.v) as lv"]
        ),
    )
    asked = ("avg(right.v) as m", "count(right.w) as cw", "sum(left.v) as ls", "count(*) as pairs")
    join = db.similarity_join("A", "A", Linf(1))
    answer = join.aggregate(*asked, through="V").to_pandas()
    assert list(answer.columns) == ["i", "j", "m", "cw", "ls", "pairs"]
    where = {(int(i), int(j)): k for k, (i, j) in enumerate(zip(cells.i, cells.j, strict=True))}
    v = cells.v.tolist()
    rows = []
    for (i, j), k in sorted(where.items()):
        found = [where[(i + a, j + b)] for a, b in Linf(1).offsets() if (i + int(a), j + int(b)) in where]
        if found:
            rows.append(
                (i, j, math.fsum(v[f] for f in found) / len(found), len(found), len(found) * v[k], len(found))
            )
    assert list(answer.itertuples(index=False, name=None)) == rows
    pd.testing.assert_frame_equal(answer, join.aggregate(*asked, through="none").to_pandas())
    with pytest.raises(ValidationError, match=r"keeps no state max\(right.w\) can be computed from"):
        join.aggregate("max(right.w) as hi", through="V")
