"""A refresh-time limit on an array view (paper 003 at run time): the decision refreshes nothing
while everything pending is predicted within the limit, else a greedy minimal set of bases (checked
against the planner's own per-base predictions, independently of the scheduler's choice), and the
view then equals the brute force over the versions it reflects."""

from __future__ import annotations

import datetime as dt
import itertools
import math
from types import SimpleNamespace

import pytest

from arrayviews.model.errors import ValidationError
from arrayviews.scheduling import refresh_limit as limits
from test_asymmetric_refresh import batch, expected, two_bases

NOW = dt.datetime(2026, 11, 27, 12, 0, tzinfo=dt.UTC)


def version(number: int, seconds_ago: float, **properties: str):
    return SimpleNamespace(
        version=number, time=NOW - dt.timedelta(seconds=seconds_ago), properties=properties
    )


def test_fit_through_the_planners_two_predictions() -> None:
    load = limits.fit("A", {"pending_batches": 5, "predicted_seconds": 3.0, "first_batch_seconds": 1.0}, 0.5)
    assert (load.per_batch, load.fixed) == (0.5, 0.5)  # 1.0 = 0.5 + 0.5 * 1; 3.0 = 0.5 + 0.5 * 5
    f = load.cost()
    assert (f(0), f(1), f(5), f(9)) == (0.0, 1.0, 3.0, 5.0)
    one = limits.fit("B", {"pending_batches": 1, "predicted_seconds": 2.0, "first_batch_seconds": 2.0}, 0.0)
    assert (one.per_batch, one.fixed) == (0.0, 2.0)
    falling = limits.fit(
        "C", {"pending_batches": 3, "predicted_seconds": 1.0, "first_batch_seconds": 2.0}, 0.0
    )
    assert (falling.per_batch, falling.fixed) == (0.0, 2.0)  # clamped: no negative growth
    assert falling.cost()(3) == 1.0  # the planner's own figure for the batches pending


def test_arrival_rate_and_time_since_the_last_complete_refresh() -> None:
    assert limits.arrival_rate([], NOW) == 0.0
    assert limits.arrival_rate([version(v, 10 * (4 - v)) for v in range(1, 5)], NOW) == 4 / 30
    many = [version(v, 100 - v) for v in range(1, 31)]  # one a second; the newest 10 count
    assert math.isclose(limits.arrival_rate(many, NOW), 10 / 79)
    table = SimpleNamespace(
        versions=lambda: [
            version(1, 500),  # no "advanced": every base (a refresh from before partial ones)
            version(2, 300, advanced="L,R", **{"refresh.seconds": "9.0"}),
            version(3, 200, advanced="L", **{"refresh.seconds": "0.25"}),
            version(4, 100, advanced="R", **{"refresh.seconds": "0.5"}),
        ]
    )
    assert limits.since_complete_refresh(table, ["L", "R"], NOW) == (0.75, 300.0)
    first = SimpleNamespace(versions=lambda: [version(1, 60)])
    assert limits.since_complete_refresh(first, ["L", "R"], NOW) == (0.0, 60.0)


def test_limits_are_checked(db) -> None:
    left, right, view = two_bases(db, {(0, 0): 1}, {(0, 1): 2})
    assert view.refresh_limit is None
    for bad in (0, -1.0, "2", True, math.nan, math.inf):
        with pytest.raises(ValidationError, match="view V: the refresh limit"):
            view.set_refresh_limit(bad)
    assert view.refresh_limit is None
    with pytest.raises(ValidationError, match="view V has no refresh limit"):
        view.keep_within_limit()
    db.sql("ALTER VIEW V SET REFRESH LIMIT 2.5 SECONDS")
    assert view.refresh_limit == 2.5
    db.sql("ALTER VIEW V SET REFRESH LIMIT NONE")
    assert view.refresh_limit is None
    assert db.maintain_views() == []


def _minimal_sets(pending: dict[str, float], limit: float) -> list[set[str]]:
    """Sets of bases whose refresh leaves at most ``limit`` seconds pending and no proper subset of
    which does, by enumeration."""
    names = [b for b, s in pending.items() if s > 0]
    fits = [
        set(c)
        for r in range(len(names) + 1)
        for c in itertools.combinations(names, r)
        if sum(s for b, s in pending.items() if b not in c) <= limit
    ]
    return [s for s in fits if not any(other < s for other in fits)]


def _priced(monkeypatch, combine) -> None:
    """Price one refresh of several bases as ``combine`` of the planner's per-base predictions
    (the paper's additive costs with ``sum``; an engine whose refreshes share everything with ``max``)."""
    from arrayviews.views import pending as planner

    def joint(db, view, bases=None):
        rows = planner.pending_costs(db, view, first_batch=False)
        chosen = [r["predicted_seconds"] for r in rows if bases is None or r["base"] in bases]
        return combine(chosen) if chosen else 0.0

    monkeypatch.setattr(limits, "joint_seconds", joint)


def test_decisions_on_a_live_view(db, monkeypatch) -> None:
    left_cells, right_cells = {(0, 0): 1, (2, 2): 5}, {(0, 1): 10, (3, 3): -4}
    left, right, view = two_bases(db, left_cells, right_cells)
    left.insert(batch({(4, 4): 7}))
    right.insert(batch({(1, 2): 3}))
    right.insert(batch({(4, 5): 8}))
    pending = {r.base: r.predicted_seconds for r in view.pending_costs().itertuples()}
    assert all(s > 0 for s in pending.values())
    versions = len(view.versions())

    view.set_refresh_limit(sum(pending.values()) * 2)  # within the limit: nothing runs
    decision = view.keep_within_limit()
    assert decision.advanced == () and decision.result is None and "nothing to do now" in str(decision)
    assert len(view.versions()) == versions

    # additive costs (the paper's model): a limit above the larger base's cost and below the total:
    # refreshing one base is enough
    _priced(monkeypatch, sum)
    limit = (max(pending.values()) + sum(pending.values())) / 2
    view.set_refresh_limit(limit)
    (decision,) = db.maintain_views()
    assert set(decision.advanced) in _minimal_sets(pending, limit)
    assert len(decision.advanced) == 1 and decision.result.committed
    reflected = {row["base"]: row["reflected"] for row in view.status()["bases"]}
    cells = {
        "L": {1: left_cells, 2: {**left_cells, (4, 4): 7}},
        "R": {1: right_cells, 2: {**right_cells, (1, 2): 3}, 3: {**right_cells, (1, 2): 3, (4, 5): 8}},
    }
    assert view.to_arrow().to_pylist() == expected(cells["L"][reflected["L"]], cells["R"][reflected["R"]])
    assert view.verify()
    # what is left was within the limit as predicted when deciding (predictions move afterwards:
    # each refresh's measurement corrects the view's model)
    assert sum(b.seconds for b in decision.bases if b.base not in decision.advanced) <= limit
    spent, _ = limits.since_complete_refresh(view._current().table, ["L", "R"], dt.datetime.now(dt.UTC))
    assert spent > 0  # the partial refresh counts towards F_t

    # a limit below either base's cost: both are refreshed
    left.insert(batch({(5, 5): 2}))
    right.insert(batch({(5, 4): 6}))
    pending = {r.base: r.predicted_seconds for r in view.pending_costs().itertuples()}
    view.set_refresh_limit(min(pending.values()) / 2)
    decision = view.keep_within_limit()
    assert set(decision.advanced) == {"L", "R"} == _minimal_sets(pending, min(pending.values()) / 2)[0]
    assert not view.status()["pending"]
    assert view.verify()

    # shared costs (one refresh of both costs what the dearer one does): ONLINE's single base is
    # widened to every base, which empties both for the same predicted time
    _priced(monkeypatch, max)
    left.insert(batch({(5, 0): 3}))
    right.insert(batch({(5, 1): 9}))
    right.insert(batch({(0, 5): 1}))
    pending = {r.base: r.predicted_seconds for r in view.pending_costs().itertuples()}
    limit = (max(pending.values()) + min(pending.values())) / 2  # over: the dearer base must go
    view.set_refresh_limit(limit)
    decision = view.keep_within_limit()
    assert decision.pending_seconds == max(pending.values())
    assert set(decision.advanced) == {"L", "R"} and "refreshing every base" in decision.reason
    assert not view.status()["pending"]
    assert view.to_arrow().to_pylist() == expected(
        {**left_cells, (4, 4): 7, (5, 5): 2, (5, 0): 3},
        {**right_cells, (1, 2): 3, (4, 5): 8, (5, 4): 6, (5, 1): 9, (0, 5): 1},
    )
