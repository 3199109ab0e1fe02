"""Round 20 trial of maintenance plans, refresh-time limits and answers through views, as an
adversary: every answer and every refreshed view is checked against an independent reference
(plain Python brute force, numpy recomputation), and bad input is refused by name with nothing
changed."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import arrayviews
from arrayviews import L1, Linf, NotFoundError, RangeError, ValidationError, similarity, window
from arrayviews.cli.main import Context, cli
from arrayviews.execution.cost import CostModel, load_costs
from arrayviews.model.mappings import AxisMap
from arrayviews.views.refresh_cost import decide


@pytest.fixture
def local_db(spark, tmp_path):
    """A database whose work runs in-process (Spark is not the point of most of these tests)."""
    return arrayviews.connect(str(tmp_path / "warehouse"), spark=spark, execution="local")


def _versions(relation) -> list[int]:
    return relation.versions().version.tolist()


# -- errors name the view, and a query's overflow is the query's -----------------------------------
def test_a_view_s_missing_version_is_named_as_a_view(local_db):
    """Failed before: ``V.at_version(99)`` said "array V has no version 99"; a version of the wrong
    type reached the catalog unchecked; compacting a view said "array V"."""
    A = local_db.create_array("A<v:int64>[i=0:9:5; j=0:9:5]")
    A.insert({"i": [0, 1], "j": [0, 1], "v": [1, 2]})
    V = local_db.create_view("V", similarity("A", "A", L1(1), ["count(*) as n"]))
    with pytest.raises(NotFoundError, match=r"^view V has no version 99 \(versions held: 1\)"):
        V.at_version(99)
    for bad in ("1", 1.5, True):
        with pytest.raises(ValidationError, match=r"view V: a version is an integer"):
            V.at_version(bad)
    assert V.at_version(1).to_pandas().n.tolist() == [1, 1]
    assert "nothing to compact; view V stays at version 1" in V.compact().message


def test_an_overflow_answering_through_a_view_names_the_query(local_db):
    """Failed before: an int64 sum beyond int64 in the answer through view V was reported as
    "view V: ..." though V (a smaller shape, whose sums fit) is fine; now the query is named with
    its arrays, the column and the value, and V is said to be unchanged (and is)."""
    db = local_db
    A = db.create_array("A<v:int64>[i=0:9:5; j=0:9:5]")
    A.insert({"i": [0, 1, 5], "j": [0, 1, 5], "v": [2**62, 2**62, 2**62]})
    V = db.create_view("V", similarity("A", "A", L1(1), ["count(*) as n", "sum(right.v) as s"]))
    before = _versions(V)
    join = db.similarity_join("A", "A", Linf(1))
    with pytest.raises(RangeError) as caught:
        join.aggregate("sum(right.v) as s", through="V").to_pandas()
    text = str(caught.value)
    assert text.startswith("similarity join of A and A answered through view V: sum(right.v) (s) at cell")
    assert str(2**63) in text and "view V is unchanged" in text
    assert (caught.value.array, caught.value.column, caught.value.value) == ("A", "s", 2**63)
    assert _versions(V) == before
    assert V.to_pandas().s.tolist() == [2**62, 2**62, 2**62]  # L1(1): only the cell itself


# -- bad input to refreshes and limits is refused by name, and changes nothing -----------------------
@pytest.fixture
def two_bases(local_db):
    """A view V over A similarity-joined with B (count and sum), both bases with one batch."""
    A = local_db.create_array("A<v:int64>[i=0:11:4; j=0:11:4]")
    B = local_db.create_array("B<v:int64>[i=0:11:4; j=0:11:4]")
    A.insert({"i": [0, 1, 2], "j": [0, 1, 2], "v": [1, 2, 3]})
    B.insert({"i": [0, 1, 3], "j": [0, 1, 2], "v": [1, 2, 3]})
    V = local_db.create_view("V", similarity("A", "B", L1(1), ["count(*) as n", "sum(right.v) as s"]))
    return local_db, A, B, V


def test_bad_limits_strategies_and_bases_are_refused_by_name(two_bases):
    """Failed before: a limit of 10**400 raised a bare OverflowError, np.int64(3) was refused while
    np.float64(3.0) was taken, ``V.refresh(bases=5)`` raised a bare TypeError, and a misspelt
    strategy was refused without naming the view."""
    db, A, _, V = two_bases
    A.insert({"i": [5], "j": [5], "v": [4]})
    V.set_refresh_limit(2.5)
    for bad in (10**400, -1, 0, "5", float("nan"), float("inf"), True, [1]):
        with pytest.raises(ValidationError, match=r"^view V: the refresh limit") as caught:
            V.set_refresh_limit(bad)
        assert caught.value.array == "V"
    assert V.refresh_limit == 2.5
    V.set_refresh_limit(np.int64(3))
    assert V.refresh_limit == 3.0
    for strategy in ("Full", "fulll", None, 3):
        with pytest.raises(ValidationError, match=r"^view V: refresh strategy must be one of auto, full"):
            V.refresh(strategy)
    for bases in (5, b"A", {"A": 1}):
        with pytest.raises(
            ValidationError, match=r"^view V: the bases to refresh are .* \(its bases: A, B\)"
        ):
            V.refresh(bases=bases)
    with pytest.raises(ValidationError, match=r"view V: C is not a base array of the view"):
        V.refresh(bases=["A", "C"])
    assert _versions(V) == [1] and V.status()["pending"]


def test_a_limit_that_cannot_be_kept_is_said_and_the_refresh_is_whole(two_bases):
    """Failed before: under a limit below what one batch costs the decision refreshed and said
    nothing of it; now it names the bases one batch of which exceeds the limit. The refresh it ran
    is whole: the view then equals a recomputation by plain Python."""
    db, A, B, V = two_bases
    for k in range(2):
        A.insert({"i": [4 + k], "j": [5], "v": [k]})
        B.insert({"i": [4 + k], "j": [6 - k], "v": [10 + k]})
    V.set_refresh_limit(1e-9)
    decision = V.keep_within_limit()
    assert decision.unmeetable == ("A", "B")
    assert "the limit cannot be kept: one batch alone is predicted over it (A at" in decision.reason
    assert decision.result is not None and decision.result.committed
    left = {(0, 0): 1, (1, 1): 2, (2, 2): 3, (4, 5): 0, (5, 5): 1}
    right = {(0, 0): 1, (1, 1): 2, (3, 2): 3, (4, 6): 10, (5, 5): 11}
    expected = {}
    for i, j in left:
        found = [right[c] for c in ((i, j), (i + 1, j), (i - 1, j), (i, j + 1), (i, j - 1)) if c in right]
        if found:
            expected[(i, j)] = (len(found), sum(found))
    got = V.to_pandas()
    assert {(r.i, r.j): (r.n, r.s) for r in got.itertuples()} == expected
    assert "array view V: within its limit of 1e-09 s" in db.sql("EXPLAIN MAINTAIN")
    A.insert({"i": [9], "j": [9], "v": [1]})
    explained = db.sql("EXPLAIN MAINTAIN")  # said "an ONLINE decision" whatever the prediction
    assert (
        "array view V: over its limit of 1e-09 s (refreshing everything pending is predicted at" in explained
    )
    assert "an ONLINE decision refreshes some of its bases" in explained
    row = db.maintain().to_pandas().iloc[0]
    assert row.view == "V" and row.action.startswith(
        "refreshed on A (limit 1e-09 s); the limit cannot be kept"
    )


# -- answers through views equal plain Python, stale, after deletes, after a view is recreated ------
AGGREGATES = ("count(*) as n", "sum(right.v) as s", "min(right.w) as lo", "max(right.v) as hi")
OFFSETS = {
    "L1": [(0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)],
    "Linf": [(a, b) for a in (-1, 0, 1) for b in (-1, 0, 1)],
}


def _reference(cells: dict, offsets: list, right: dict | None = None) -> dict:
    """Per cell of ``cells`` with a neighbour inside the shape among ``right`` (default: ``cells``
    themselves): count, exact sum, min and max by plain Python."""
    right = cells if right is None else right
    out = {}
    for i, j in cells:
        found = [right[(i + a, j + b)] for a, b in offsets if (i + a, j + b) in right]
        if found:
            out[(i, j)] = (
                len(found),
                sum(v for v, _ in found),
                min(w for _, w in found),
                max(v for v, _ in found),
            )
    return out


def _answer(db, shape, through) -> tuple[str, dict]:
    join = db.similarity_join("A", "A", shape)
    plan = join.plan(*AGGREGATES, through=through)
    frame = join.aggregate(*AGGREGATES, through=through).to_pandas()
    got = {(r.i, r.j): (r.n, r.s, r.lo, r.hi) for r in frame.itertuples()}
    return plan.chosen + (" caught up" if plan.catch_up is not None else ""), got


def test_answers_through_stale_and_recreated_views_equal_plain_python(local_db):
    """Through a view of another shape (offsets added, and offsets taken away from a min/max view),
    fresh, behind its base (inserts, replacing inserts, deletes), and after it was dropped and
    created again under its name with another shape: always the plain-Python answer. Also: a
    ``through=`` that is an array handle is refused by name; a view's handle is taken."""
    db = local_db
    rng = np.random.default_rng(20)
    A = db.create_array("A<v:int64, w:float64>[i=0:11:4; j=0:11:4]")
    cells: dict = {}

    def write(n: int, replace: bool = False) -> None:
        pool = (
            sorted(cells)
            if replace
            else [(i, j) for i in range(12) for j in range(12) if (i, j) not in cells]
        )
        picked = [pool[k] for k in rng.choice(len(pool), n, replace=False)]
        v, w = rng.integers(-(2**40), 2**40, n), np.round(rng.normal(size=n), 3)
        A.insert(
            {"i": [p[0] for p in picked], "j": [p[1] for p in picked], "v": v, "w": w},
            on_conflict="replace" if replace else "error",
        )
        cells.update({p: (int(a), float(b)) for p, a, b in zip(picked, v, w, strict=True)})

    write(45)
    db.create_view("V", similarity("A", "A", L1(1), AGGREGATES))
    seen = []
    for step in ("fresh", "insert", "replace", "delete", "box delete"):
        if step == "insert":
            write(8)
        elif step == "replace":
            write(6, replace=True)
        elif step == "delete":
            gone = sorted(cells)[::7]
            A.delete({"i": [c[0] for c in gone], "j": [c[1] for c in gone]})
            for c in gone:
                del cells[c]
        elif step == "box delete":
            A.delete(box={"i": (0, 2), "j": (0, 11)})
            cells = {c: x for c, x in cells.items() if c[0] > 2}
        how, got = _answer(db, Linf(1), "V")
        seen.append(how)
        assert got == _reference(cells, OFFSETS["Linf"]), step
    assert seen == ["view"] + ["view caught up"] * 4
    assert db.view("V").versions().version.tolist() == [1]  # answering stores nothing
    db.drop_view("V")
    V = db.create_view("V", similarity("A", "A", Linf(1), AGGREGATES))
    write(5)
    how, got = _answer(db, L1(1), V)  # offsets taken away from a min/max view, caught up
    assert how == "view caught up" and got == _reference(cells, OFFSETS["L1"])
    # from scratch is cheaper here: the plan does not claim V is brought forward (it said so before)
    plan = db.similarity_join("A", "A", L1(1)).plan(*AGGREGATES)
    assert plan.chosen == "scratch" and plan.catch_up is not None
    assert "brought forward in memory first" not in plan.text()
    assert (
        "view V is behind the query's versions: through it, it would first be brought forward" in plan.text()
    )
    with pytest.raises(ValidationError, match=r"^through=A: a query is answered through a view"):
        db.similarity_join("A", "A", L1(1)).aggregate("count(*) as n", through=A)
    with pytest.raises(ValidationError, match=r"^through=V: .* not through an array such as V"):
        db.similarity_join("A", "A", L1(1)).aggregate("count(*) as n", through=V.at_version(1))


def test_a_view_with_a_mapping_given_as_a_dict_answers_like_plain_python(local_db):
    """Failed before: ``similarity(..., mapping={"x": AxisMap(...), ...})`` (the form
    ``db.similarity_join`` takes) crashed view creation with a bare AttributeError; now the mapping
    is resolved against the bases, and the view, and a query of another shape through it with
    NULL values, equal plain Python."""
    db = local_db
    A = db.create_array("A<v:int64 NULL>[i=0:7:4; j=0:7:4]")
    B = db.create_array("B<v:int64 NULL>[x=0:15:8; y=0:15:8]")
    rng = np.random.default_rng(3)
    left = {(int(k) // 8, int(k) % 8): None for k in rng.choice(64, 30, replace=False)}
    right = {
        (int(k) // 16, int(k) % 16): int(rng.integers(-9, 9)) for k in rng.choice(256, 150, replace=False)
    }
    for key in list(right)[::5]:
        right[key] = None
    A.insert({"i": [c[0] for c in left], "j": [c[1] for c in left], "v": np.zeros(len(left), np.int64)})
    B.insert(
        pd.DataFrame(
            {
                "x": [c[0] for c in right],
                "y": [c[1] for c in right],
                "v": pd.array(list(right.values()), dtype="Int64"),
            }
        )
    )
    mapping = {"x": AxisMap("x", "i", 2, 1, 1), "y": AxisMap("y", "j", 2, 1, 0)}  # x = 2i + 1, y = 2j
    aggregates = ("count(*) as n", "count(right.v) as nv", "sum(right.v) as s")
    V = db.create_view("V", similarity("A", "B", L1(1), aggregates, mapping))

    def reference(offsets):
        out = {}
        for i, j in left:
            found = [
                right[(2 * i + 1 + a, 2 * j + b)] for a, b in offsets if (2 * i + 1 + a, 2 * j + b) in right
            ]
            values = [v for v in found if v is not None]
            if found:
                out[(i, j)] = (len(found), len(values), sum(values) if values else None)
        return out

    def rows(frame):
        return {(r.i, r.j): (r.n, r.nv, None if pd.isna(r.s) else r.s) for r in frame.itertuples()}

    assert rows(V.to_pandas()) == reference(OFFSETS["L1"])
    join = db.similarity_join("A", "B", Linf(1), mapping)
    assert join.plan(*aggregates, through="V").chosen == "view"
    assert rows(join.aggregate(*aggregates, through="V").to_pandas()) == reference(OFFSETS["Linf"])


def test_a_batch_adding_view_chunks_is_not_said_to_touch_over_100_percent():
    """Failed before: a batch adding chunks to a one-chunk view was reported as touching "200% of
    the view's chunks"."""
    decision = decide({"full": 1.0, "baseline": 0.5}, {}, {}, 2.0)
    assert decision.strategy == "full" and decision.kind == "touched"
    assert "%" not in decision.reason.split(" (at least")[0]
    assert "touches more chunks than the view holds (2.0 times as many: it adds chunks)" in decision.reason
    assert "touches 95% of the view's chunks" in decide({"full": 1.0, "baseline": 0.5}, {}, {}, 0.95).reason


def test_a_self_join_view_spelt_in_other_cases_has_one_base(local_db):
    """Failed before: ``similarity("sky", "SKY", ...)`` over the array Sky made a view with two bases
    'sky' and 'SKY': a fresh view was said to be behind (and caught up) when answering, and
    ``refresh(bases=["Sky"])`` advanced one side only, leaving a self-join of two versions."""
    db = local_db
    A = db.create_array("Sky<v:int64>[i=0:11:4; j=0:11:4]")
    A.insert({"i": [0, 1, 2], "j": [0, 1, 2], "v": [1, 2, 3]})
    V = db.create_view("V", similarity("sky", "SKY", L1(1), ["count(*) as n", "sum(right.v) as s"]))
    assert V.definition.bases == ("Sky",) and db.view("V").definition.bases == ("Sky",)
    join = db.similarity_join("Sky", "Sky", Linf(1))
    assert join.plan("count(*) as n", through="V").catch_up is None
    A.insert({"i": [3], "j": [3], "v": [4]})
    assert [r["base"] for r in V.status()["bases"]] == ["Sky"]
    V.refresh(bases=["sky"])
    cells = {(0, 0): 1, (1, 1): 2, (2, 2): 3, (3, 3): 4}
    expected = {
        (i, j): (len(found), sum(found))
        for (i, j) in cells
        if (found := [cells[(i + a, j + b)] for a, b in OFFSETS["L1"] if (i + a, j + b) in cells])
    }
    assert {(r.i, r.j): (r.n, r.s) for r in V.to_pandas().itertuples()} == expected
    assert not V.status()["pending"]


@pytest.mark.parametrize(
    "term", [{"fixed": "x"}, {"per_cell": None}, {"per_cell": -1.0}, {"per_job": float("nan")}]
)
def test_a_calibration_file_with_a_bad_cost_means_the_defaults(tmp_path, term):
    """Failed before: an ``execution.json`` whose costs parse as JSON but are not numbers crashed
    every later operation with a bare TypeError, and a negative or NaN cost was taken (NaN sends
    everything to Spark, a negative cost prices work below nothing); now such a file means the
    defaults, as a file that is not JSON does."""
    model = json.loads(CostModel().to_json())
    model["local"].update(term)
    (tmp_path / "execution.json").write_text(json.dumps(model))
    assert load_costs(str(tmp_path)) == CostModel()
    model["local"] = {"fixed": 0.5}  # a sound file keeps its terms, the missing ones default
    (tmp_path / "execution.json").write_text(json.dumps(model))
    assert load_costs(str(tmp_path)).local == replace(CostModel().local, fixed=0.5)


def test_partial_refreshes_and_every_strategy_equal_plain_python_at_the_versions_reflected(local_db):
    """A view over A and B refreshed on one base at a time (the asymmetric refreshes of paper 003),
    and views refreshed full, baseline and auto, through inserts, replacing inserts and deletes of
    both bases: each equals plain Python over the base versions it says it reflects. Failed before:
    ``refresh_history()`` did not say which bases a refresh brought forward, nor the versions its
    view version reflects, so a partial refresh could not be told from a complete one."""
    db = local_db
    rng = np.random.default_rng(7)
    history = {"A": [{}], "B": [{}]}  # base -> cells at each version
    arrays = {n: db.create_array(f"{n}<v:int64, w:float64>[i=0:9:3; j=0:9:3]") for n in "AB"}

    def write(name: str, n: int, replace: bool = False) -> None:
        cells = dict(history[name][-1])
        pool = (
            sorted(cells)
            if replace
            else [(i, j) for i in range(10) for j in range(10) if (i, j) not in cells]
        )
        picked = [pool[k] for k in rng.choice(len(pool), n, replace=False)]
        v, w = rng.integers(-50, 50, n), np.round(rng.normal(size=n), 3)
        arrays[name].insert(
            {"i": [p[0] for p in picked], "j": [p[1] for p in picked], "v": v, "w": w},
            on_conflict="replace" if replace else "error",
        )
        cells.update({p: (int(a), float(b)) for p, a, b in zip(picked, v, w, strict=True)})
        history[name].append(cells)

    def delete(name: str, n: int) -> None:
        cells = dict(history[name][-1])
        gone = [sorted(cells)[k] for k in rng.choice(len(cells), n, replace=False)]
        arrays[name].delete({"i": [g[0] for g in gone], "j": [g[1] for g in gone]})
        history[name].append({c: x for c, x in cells.items() if c not in gone})

    def reference(view) -> dict:
        reflected = {b["base"]: b["reflected"] for b in view.status()["bases"]}
        return _reference(history["A"][reflected["A"]], OFFSETS["L1"], history["B"][reflected["B"]])

    for name in "AB":
        write(name, 30)
    views = {
        s: db.create_view(f"V_{s}", similarity("A", "B", L1(1), AGGREGATES))
        for s in ("full", "baseline", "auto", "one")
    }
    for step in range(4):
        for name in "AB":
            (write, delete, lambda n, k: write(n, k, replace=True))[(step + (name == "B")) % 3](name, 4)
        for strategy in ("full", "baseline", "auto"):
            views[strategy].refresh(strategy)
        views["one"].refresh(bases=["A" if step % 2 else "B"])
        for view in views.values():
            got = {(r.i, r.j): (r.n, r.s, r.lo, r.hi) for r in view.to_pandas().itertuples()}
            assert got == reference(view), (step, view.name)
    assert {b["base"]: b["reflected"] for b in views["one"].status()["bases"]} == {"A": 5, "B": 4}
    # the refresh reports say which bases each refresh brought forward (they did not before)
    history = views["one"].refresh_history()
    assert history.advanced.tolist() == [("A", "B"), ("B",), ("A",), ("B",), ("A",)]
    assert history.reflected.tolist()[-2:] == [{"A": 3, "B": 4}, {"A": 5, "B": 4}]
    assert (history.measured_seconds > 0).all() and history.estimates.map(bool).all()


@pytest.mark.parametrize("every", ["nan", "inf", "1e308", "-1", "0"])
def test_maintain_every_takes_a_finite_interval_only(local_db, every):
    """Failed before: ``arrayviews maintain --every nan`` passed click's range check and ran the
    passes back to back (a busy loop without --passes), and ``--every inf`` (or 1e308) crashed
    after the first pass with an internal OverflowError from the wait; now each is a usage error
    naming the value, and no pass runs."""
    result = CliRunner().invoke(
        cli, ["maintain", "--every", every, "--passes", "2"], obj=Context.of(local_db)
    )
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--every'" in result.output and "maintenance pass" not in result.output


def test_maintain_views_decides_a_view_after_the_views_it_reads(local_db):
    """Failed before: ``db.maintain_views()`` took the decisions in name order, so a view named
    before the view it reads (A_smooth over Z) was decided on Z's old version and left behind
    after the call; now it comes after Z, as in a maintenance pass, and equals a window over Z
    recomputed with numpy."""
    db = local_db
    B = db.create_array("B<v:float64>[x=0:7:4; y=0:7:4]")
    B.write_dense(np.arange(64, dtype=np.float64).reshape(8, 8))
    Z = db.create_view("Z", window("B", [1, 1, 1, 1], ["sum(v)"]))
    S = db.create_view("A_smooth", window("Z", [0, 0, 1, 1], ["max(v_sum)"]))
    for view in (Z, S):
        view.set_refresh_limit(1e-9)
    B.insert({"x": [3], "y": [4], "v": [1000.0]}, on_conflict="replace")
    decisions = db.maintain_views()
    assert [d.view for d in decisions] == ["Z", "A_smooth"]
    assert not Z.status()["pending"] and not S.status()["pending"]
    grid = B.to_numpy("v")
    sums = np.array(
        [[grid[max(0, i - 1) : i + 2, max(0, j - 1) : j + 2].sum() for j in range(8)] for i in range(8)]
    )
    assert np.array_equal(Z.to_numpy("v_sum"), sums)
    expected = np.array([[sums[i, max(0, j - 1) : j + 2].max() for j in range(8)] for i in range(8)])
    assert np.array_equal(S.to_numpy("v_sum_max"), expected)


def test_an_aggregate_asked_twice_under_two_names_through_a_view(local_db):
    """Failed before: ``count(*) as a, count(*) as b`` answered through a view keeping count(*)
    raised "SchemaError: array V: name 'n' is used twice"; now both columns hold the count, as
    plain Python counts it, and as the answer from the base arrays."""
    db = local_db
    A = db.create_array("A<v:int64>[i=0:11:4; j=0:11:4]")
    cells = {(0, 0): 1, (1, 1): 2, (2, 2): 3, (2, 3): 4}
    A.insert({"i": [c[0] for c in cells], "j": [c[1] for c in cells], "v": list(cells.values())})
    db.create_view("V", similarity("A", "A", L1(1), ["count(*) as n", "sum(right.v) as s"]))
    expected = {}
    for i, j in cells:
        found = [cells[(i + a, j + b)] for a, b in OFFSETS["Linf"] if (i + a, j + b) in cells]
        expected[(i, j)] = (len(found), len(found), sum(found), sum(found))
    asked = ("count(*) as a", "count(*) as b", "sum(right.v) as x", "sum(right.v) as y")
    for through in ("V", "none"):
        frame = db.similarity_join("A", "A", Linf(1)).aggregate(*asked, through=through).to_pandas()
        assert {(r.i, r.j): (r.a, r.b, r.x, r.y) for r in frame.itertuples()} == expected, through


def test_an_estimate_counts_fragments_and_says_so(local_db):
    """Two writes into one chunk are two stored fragments: EXPLAIN said '2 chunk(s)' for one chunk."""
    A = local_db.create_array("Frag<v:float64>[i=0:9:10]")
    A.insert({"i": [1], "v": [1.0]})
    A.insert({"i": [2], "v": [2.0]})
    listing = A.chunks()
    assert len(listing) == 1 and int(listing.fragments.sum()) == 2
    text = str(local_db.sql("EXPLAIN SELECT * FROM Frag"))
    assert "2 fragment(s)" in text and "chunk(s)" not in text, text
