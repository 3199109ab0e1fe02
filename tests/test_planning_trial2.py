"""Round 23 trial of maintenance, refresh limits and answers through views, as a user who depends
on them: pending batches once base history has expired, a base whose batch cannot be applied, and
the work EXPLAIN counts for a view behind the query, each checked against plain Python."""

from __future__ import annotations

import datetime as dt
import math
import os
import re

import pytest
from pyspark.errors import PySparkException

import arrayviews
from arrayviews import L1, NotFoundError, ValidationError, similarity
from arrayviews.model.errors import MaintenanceError
from arrayviews.model.faults import inject
from arrayviews.scheduling.refresh_limit import since_complete_refresh

L1_OFFSETS = [(0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)]
LINF_OFFSETS = [(a, b) for a in (-1, 0, 1) for b in (-1, 0, 1)]


@pytest.fixture
def local_db(spark, tmp_path):
    """A database whose work runs in-process (Spark is not the point of these tests)."""
    return arrayviews.connect(str(tmp_path / "warehouse"), spark=spark, execution="local")


def _cells(i, j, v) -> dict:
    return {"i": list(i), "j": list(j), "v": list(v)}


def _reference(left: dict, right: dict, offsets) -> dict:
    """Plain Python: per left cell with a pair, (count, sum of the right values)."""
    out = {}
    for i, j in left:
        found = [right[(i + a, j + b)] for a, b in offsets if (i + a, j + b) in right]
        if found:
            out[(i, j)] = (len(found), sum(found))
    return out


def _view_cells(view) -> dict:
    return {(r.i, r.j): (r.n, r.s) for r in view.to_pandas().itertuples()}


# -- pending batches once the base's history has expired -----------------------------------------
def test_expired_base_history_counts_every_batch_and_verify_says_behind(local_db):
    """Failed before: after A.expire_versions() dropped the versions V had not absorbed, V.status()
    counted only the versions still held (1 of 3 batches; 0 when the newest held version is a
    compaction, so V was called up to date and MAINTAIN ALL left it behind), and V.verify() compared
    with A's current version (True for a view behind an insert and a delete that cancel out)."""
    db = local_db
    A = db.create_array("A<v:int64>[i=0:9:5; j=0:9:5]")
    cells = {(0, 0): 1, (1, 1): 2}
    A.insert(_cells([0, 1], [0, 1], [1, 2]))
    V = db.create_view("V", similarity("A", "A", L1(1), ["count(*) as n", "sum(right.v) as s"]))
    W = db.create_view("W", similarity("A", "A", L1(1), ["count(*) as n", "sum(right.v) as s"]))
    # V: three batches, then every version but the newest expired
    A.insert(_cells([2], [2], [3]))
    A.insert(_cells([1], [2], [4]))  # next to (1, 1) and (2, 2): changes their sums
    A.insert(_cells([6], [6], [5]))
    cells.update({(2, 2): 3, (1, 2): 4, (6, 6): 5})
    A.expire_versions()
    assert A.versions().version.tolist() == [4]
    status = V.status()
    assert status["bases"] == [{"base": "A", "reflected": 1, "current": 4, "pending_batches": 3}]
    assert status["pending"] and status["expired"] == ["A"]
    assert V.verify() is False
    assert "history of A since the version reflected has expired" in repr(V)
    assert int(V.pending_costs().pending_batches.iloc[0]) == 3
    assert db.sql("SHOW STATUS OF V").pending.tolist() == [True]
    # W is refreshed; then a batch and its undoing, a compaction, and the history expired: W is
    # behind (its content happens to equal the current one) and says so
    W.refresh()
    assert _view_cells(W) == _reference(cells, cells, L1_OFFSETS)
    A.insert(_cells([8], [8], [9]))
    A.delete(_cells([8], [8], [0]))
    A.compact()
    A.expire_versions()
    reflected = W.status()["bases"][0]["reflected"]
    assert (reflected, A.version) == (4, 7) and A.versions().version.tolist() == [7]
    assert W.status()["bases"][0]["pending_batches"] == 2 and W.status()["pending"]  # not the compaction
    assert W.verify() is False
    report = db.maintain(refresh_all=True)
    assert report.ok and sorted(r.view for r in report.refreshed) == ["V", "W"]
    for view in (V, W):
        assert _view_cells(view) == _reference(cells, cells, L1_OFFSETS)
        assert view.status()["bases"][0]["reflected"] == 7 and not view.status()["pending"]
        assert view.verify() is True
    # a compaction alone after the version reflected, which then expires, leaves V up to date
    A.insert(_cells([9], [9], [6]))
    cells[(9, 9)] = 6
    V.refresh()
    assert A.compact().committed
    A.expire_versions()
    assert V.status()["bases"][0] == {"base": "A", "reflected": 8, "current": 9, "pending_batches": 0}
    assert not V.status()["pending"] and V.verify() is True
    assert _view_cells(V) == _reference(cells, cells, L1_OFFSETS)


# -- one base's batch that cannot be applied ------------------------------------------------------
def test_a_failing_base_batch_holds_back_that_base_only(local_db):
    """Failed before: B's batch overflows V's int64 sum, and every maintenance pass failed V as a
    whole, so A's good batch was never applied to V either (V stayed at A v1). Now V is brought
    forward on A, B is left at the version V reflects, the error names B, the cell and the value,
    and the other views are maintained; V stays consistent (verify) and equals plain Python at
    the versions it reflects. Under a refresh limit the ONLINE decision does the same."""
    db = local_db
    A = db.create_array("A<v:int64>[i=0:9:5; j=0:9:5]")
    B = db.create_array("B<v:int64>[i=0:9:5; j=0:9:5]")
    a, b = {(0, 0): 1, (1, 1): 2}, {(0, 0): 1, (1, 1): 2}
    A.insert(_cells([0, 1], [0, 1], [1, 2]))
    B.insert(_cells([0, 1], [0, 1], [1, 2]))
    spec = ["count(*) as n", "sum(right.v) as s"]
    db.create_view("V", similarity("A", "B", L1(1), spec))
    L = db.create_view("L", similarity("A", "B", L1(1), spec))
    W = db.create_view("W", similarity("A", "A", L1(1), spec))
    L.set_refresh_limit(1e-9)  # always over it: every pass takes an ONLINE decision
    A.insert(_cells([2], [2], [3]))
    a_new = {**a, (2, 2): 3}
    B.insert(_cells([0, 1], [1, 0], [2**62, 2**62]))  # (0, 0) sums 1 + 2**63: beyond int64
    before = {name: db.view(name).versions().version.tolist() for name in ("V", "L")}
    with pytest.raises(MaintenanceError) as caught:
        db.sql("MAINTAIN ALL")
    report = caught.value.report
    assert set(report.errors) == {"V", "L"}, report.errors
    for name in ("V", "L"):
        text = report.errors[name]
        assert text.startswith(f"view {name}: refreshing on B failed, B stays at v1: "), text
        assert "at cell (i=0, j=0)" in text and str(2**63 + 1) in text and "brought forward on A" in text
        view = db.view(name)
        assert view.versions().version.tolist() == [*before[name], before[name][-1] + 1]
        assert {r["base"]: r["reflected"] for r in view.status()["bases"]} == {"A": 2, "B": 1}
        assert _view_cells(view) == _reference(a_new, b, L1_OFFSETS)
        assert view.verify() is True
    assert _view_cells(W) == _reference(a_new, a_new, L1_OFFSETS)
    table = report.to_pandas().set_index("view")
    assert table.loc["W", "error"] == "" and table.loc["V", "error"].startswith("view V: refreshing on B")
    decision = next(d for d in report.decisions if d.view == "L")
    assert decision.advanced == ("A",) and decision.failed.startswith("view L: refreshing on B failed")
    # B's bad batch undone: the next pass brings both views forward on B
    B.delete(_cells([0, 1], [1, 0], [0, 0]))
    report = db.maintain(refresh_all=True)
    assert report.ok, report.errors
    for name in ("V", "L"):
        assert _view_cells(db.view(name)) == _reference(a_new, b, L1_OFFSETS)
        assert not db.view(name).status()["pending"]


# -- the work counted for a view behind the query -------------------------------------------------
def test_explain_counts_only_view_chunks_that_can_hold_cells(local_db):
    """Failed before: a view chunked finer than its base (2 x 2 over 8 x 8), one batch behind,
    was said to bring forward 32 view chunks in EXPLAIN (every view chunk overlapping the left chunks
    with work) though it holds 4 and gains 1; its refresh estimate said 'rewrites 32 of 4 view
    chunk(s)' and auto refreshed in full because the batch 'touches more chunks than the view
    holds'. Now both count the chunks that can hold cells, at most the chunks holding view cells
    before or after (plain Python), and the answer equals the join computed by brute force."""
    db = local_db
    A = db.create_array("A<v:int64>[i=0:39:8; j=0:39:8]")
    cells = {(0, 0): 1, (1, 1): 2, (10, 10): 3, (20, 20): 4, (30, 30): 5}
    A.insert(_cells(*zip(*[(i, j, v) for (i, j), v in cells.items()], strict=True)))
    db.sql(
        "CREATE ARRAY VIEW V WITH CHUNKS (2, 2) AS SELECT COUNT(*) AS n, SUM(a2.v) AS s FROM A a1 "
        "SIMILARITY JOIN A a2 ON (a1.i = a2.i) AND (a1.j = a2.j) WITH SHAPE L1(1) GROUP BY a1.i, a1.j"
    )
    V = db.view("V")
    A.insert(_cells([2], [2], [7]))
    new = {**cells, (2, 2): 7}
    holding = {(i // 2, j // 2) for i, j in new}  # view chunks holding cells before or after
    query = (
        "SELECT COUNT(*) AS n, SUM(a2.v) AS s FROM A a1 SIMILARITY JOIN A a2 ON (a1.i = a2.i) AND "
        "(a1.j = a2.j) WITH SHAPE LINF(1) GROUP BY a1.i, a1.j USING VIEW V"
    )
    text = str(db.sql("EXPLAIN " + query))
    caught_up = re.search(r"brought forward in memory first \((\d+) chunk pair\(s\), (\d+) view chunk", text)
    assert caught_up is not None, text
    assert 1 <= int(caught_up.group(2)) <= len(holding), text
    answer = db.sql(query).to_pandas()
    assert {(r.i, r.j): (r.n, r.s) for r in answer.itertuples()} == _reference(new, new, LINF_OFFSETS)
    plan = V.explain_refresh("baseline")
    rewrites = re.search(r"rewrites (\d+) of (\d+) view chunk", plan)
    assert rewrites is not None and 1 <= int(rewrites.group(1)) <= len(holding), plan
    assert "touches more chunks than the view holds" not in V.explain_refresh()
    V.refresh()
    assert _view_cells(V) == _reference(new, new, L1_OFFSETS)


def test_a_partial_refresh_over_an_expired_base_names_the_view_and_changes_nothing(local_db):
    """Failed before: ``V.refresh(bases=["B"])`` (and REFRESH / EXPLAIN REFRESH ... ON B) with the
    version of A that V reflects expired said "A v1, the version the view reflects, has expired"
    without naming the view. Nothing is committed; a refresh of every base then equals plain Python."""
    db = local_db
    A = db.create_array("A<v:int64>[i=0:9:5; j=0:9:5]")
    B = db.create_array("B<v:int64>[i=0:9:5; j=0:9:5]")
    a, b = {(0, 0): 1, (1, 1): 2, (2, 2): 3}, {(0, 0): 1, (1, 1): 2, (2, 1): 4}
    A.insert(_cells([0, 1], [0, 1], [1, 2]))
    B.insert(_cells([0, 1], [0, 1], [1, 2]))
    V = db.create_view("V", similarity("A", "B", L1(1), ["count(*) as n", "sum(right.v) as s"]))
    A.insert(_cells([2], [2], [3]))
    B.insert(_cells([2], [1], [4]))
    A.expire_versions()
    expected = r"^view V: A v1, the version the view reflects, has expired: .* \(on B only\)"
    for call in (
        lambda: V.refresh(bases=["B"]),
        lambda: db.sql("REFRESH VIEW V USING BASELINE ON B"),
        lambda: db.sql("EXPLAIN REFRESH VIEW V ON b"),
    ):
        with pytest.raises(NotFoundError, match=expected):
            call()
    assert V.versions().version.tolist() == [1] and V.status()["pending"]
    assert V.refresh().committed
    assert _view_cells(V) == _reference(a, b, L1_OFFSETS) and V.verify() is True


def test_time_since_the_complete_refresh_survives_its_expiry(local_db):
    """Failed before: once the view's last complete refresh had expired (V.expire_versions()), the
    ONLINE decision counted t = 0 s since it ('over 0 s since the last complete refresh') however
    long ago it was; now t runs from the oldest version held (a lower bound), and F_t sums the
    partial refreshes held, as plain Python adds them from V.refresh_history()."""
    db = local_db
    A = db.create_array("A<v:int64>[i=0:9:5; j=0:9:5]")
    B = db.create_array("B<v:int64>[i=0:9:5; j=0:9:5]")
    A.insert(_cells([0, 1], [0, 1], [1, 2]))
    B.insert(_cells([0, 1], [0, 1], [1, 2]))
    V = db.create_view("V", similarity("A", "B", L1(1), ["count(*) as n", "sum(right.v) as s"]))
    for k in range(2):
        A.insert(_cells([2 + k], [2], [3]))
        V.refresh(bases="A")
    V.expire_versions()
    history = V.refresh_history()
    assert history.version.tolist() == [3] and history.advanced.tolist() == [("A",)]
    now = history.time.iloc[0].to_pydatetime() + dt.timedelta(seconds=90)
    spent, elapsed = since_complete_refresh(V._current().table, ["A", "B"], now)
    assert elapsed == pytest.approx(90.0) and spent == pytest.approx(math.fsum(history.measured_seconds))


def _lose_newest_file(array) -> None:
    """Delete the data file A's newest version added (as a lost disk would)."""
    table = array._current().table
    older = {f.file_path for f in table.live_files(array.version - 1)}
    newest = [f.file_path for f in table.live_files(array.version) if f.file_path not in older]
    os.remove(newest[0].removeprefix("file://"))


def test_a_base_rolled_back_past_the_view_is_behind_not_up_to_date(local_db):
    """Failed before: after db.check(repair=True) rolled A back past the version V reflects (A v2's
    file was lost) and a new insert made another v2, V said it reflected A v2 and was up to date
    while holding (6, 6), which A no longer has, and lacking (3, 3); MAINTAIN ALL left it so and a
    query USING VIEW V answered from it. Now V is pending (A named in ``expired``), the query refuses
    V (auto answers from the base arrays), and a pass refreshes V in full, equal to plain Python."""
    db = local_db
    A = db.create_array("A<v:int64>[i=0:9:5; j=0:9:5]")
    A.insert(_cells([0, 1], [0, 1], [1, 2]))
    A.insert(_cells([6], [6], [5]))
    V = db.create_view("V", similarity("A", "A", L1(1), ["count(*) as n", "sum(right.v) as s"]))
    _lose_newest_file(A)
    assert "rolled back to the newest intact version" in str(db.check(repair=True))
    A = db.array("A")
    cells = {(0, 0): 1, (1, 1): 2}
    assert A.version == 1 and V.status()["pending"] and V.status()["expired"] == ["A"]  # v2 is gone
    A.insert(_cells([3], [3], [7]))
    cells[(3, 3)] = 7
    assert A.version == 2
    status = V.status()
    assert status["bases"] == [{"base": "A", "reflected": 2, "current": 2, "pending_batches": 1}]
    assert status["pending"] and status["expired"] == ["A"] and V.verify() is False
    query = (
        "SELECT COUNT(*) AS n, SUM(a2.v) AS s FROM A a1 SIMILARITY JOIN A a2 ON (a1.i = a2.i) AND "
        "(a1.j = a2.j) WITH SHAPE L1(1) GROUP BY a1.i, a1.j"
    )
    with pytest.raises(ValidationError, match=r"view V cannot answer .*: A was rolled back past the version"):
        db.sql(query + " USING VIEW V")
    answer = db.sql(query).to_pandas()
    assert {(r.i, r.j): (r.n, r.s) for r in answer.itertuples()} == _reference(cells, cells, L1_OFFSETS)
    report = db.maintain(refresh_all=True)
    assert report.ok and [r.strategy for r in report.refreshed] == ["full"]
    assert _view_cells(V) == _reference(cells, cells, L1_OFFSETS)
    assert not V.status()["pending"] and V.verify() is True



def test_a_spark_failure_in_a_refresh_is_the_view_s_error_and_the_pass_goes_on(local_db):
    """Failed before 1d2797a: an exception PySpark raised inside a view's refresh (injected where
    the refresh has computed, as a failed Spark job raises it) escaped db.maintain(refresh_all=True)
    and stopped the pass, since the pass called the refresh below the API; now each view that
    failed is named with the translated error ("a Spark job failed: ...") and nothing changed."""
    db = local_db
    A = db.create_array("A<v:int64>[i=0:9:5; j=0:9:5]")
    B = db.create_array("B<v:int64>[i=0:9:5; j=0:9:5]")
    A.insert(_cells([0, 1], [0, 1], [1, 2]))
    B.insert(_cells([0, 1], [0, 1], [1, 2]))
    spec = ["count(*) as n", "sum(right.v) as s"]
    views = [db.create_view(n, similarity("A", r, L1(1), spec)) for n, r in (("V", "B"), ("W", "A"))]
    A.insert(_cells([2], [2], [3]))
    B.insert(_cells([2], [1], [4]))
    with inject("refresh.computed", PySparkException(message="task failed: injected")):
        report = db.maintain(refresh_all=True)
    assert set(report.errors) == {"V", "W"} and not report.refreshed
    assert all(text.startswith("a Spark job failed: ") for text in report.errors.values()), report.errors
    assert [view.versions().version.tolist() for view in views] == [[1], [1]]


def test_maintain_views_decides_every_view_when_one_fails(local_db):
    """Failed before: db.maintain_views() stopped at the first view whose decision failed (V, whose
    only pending batch overflows its sum), so W, after it in name order, kept its batch. Now W is
    refreshed, equal to plain Python, and MaintenanceError names V with the decisions taken."""
    db = local_db
    A = db.create_array("A<v:int64>[i=0:9:5; j=0:9:5]")
    A.insert(_cells([0, 1], [0, 1], [1, 2]))
    spec = ["count(*) as n", "sum(right.v) as s"]
    V = db.create_view("V", similarity("A", "A", L1(1), spec))
    W = db.create_view("W", similarity("A", "A", L1(1), ["count(*) as n"]))
    for view in (V, W):
        view.set_refresh_limit(1e-9)
    A.insert(_cells([0, 1], [1, 0], [2**62, 2**62]))  # V's sum at (0, 0): 1 + 2**63
    with pytest.raises(MaintenanceError, match=r"^maintain_views: 1 view\(s\) failed \(V: view V: sum") as caught:
        db.maintain_views()
    assert set(caught.value.views) == {"V"} and [d.view for d in caught.value.report] == ["W"]
    assert V.versions().version.tolist() == [1]
    cells = {(0, 0): 1, (1, 1): 2, (0, 1): 2**62, (1, 0): 2**62}
    expected = {c: n for c, (n, _) in _reference(cells, cells, L1_OFFSETS).items()}
    assert {(r.i, r.j): r.n for r in W.to_pandas().itertuples()} == expected
