"""A maintenance pass plans only the stream views whose sources moved since their last step: a view
over an idle stream costs a version comparison, and passing it over never hides a change."""

from __future__ import annotations

from collections import defaultdict

import pandas as pd

from arrayviews.streams import maintainer

EPOCH = 1_700_000_040  # a minute boundary


def _rows(minutes: list[int], groups: list[str], values: list[int]) -> pd.DataFrame:
    seconds = [EPOCH + 60 * m + 7 for m in minutes]
    return pd.DataFrame({"ts": pd.to_datetime(seconds, unit="s", utc=True), "g": groups, "v": values})


def _window_sums(rows: list[tuple[int, str, int]], minutes: int, start: int = 0) -> list[tuple[str, int]]:
    """Plain Python: per minute from ``start`` on, per group, the sum over that minute and the
    ``minutes`` - 1 before it, in the order (minute, group)."""
    last = max(m for m, _, _ in rows)
    out = []
    for minute in range(start, last + 1):
        sums: dict[str, int] = defaultdict(int)
        for m, g, v in rows:
            if minute - minutes < m <= minute:
                sums[g] += v
        out.extend(sorted(sums.items()))
    return out


def _planned(monkeypatch) -> list[str]:
    """The views each later pass plans (calls of maintainer.maintain_view), in order."""
    seen: list[str] = []
    original = maintainer.maintain_view

    def spy(spark, world, name, fusion=None):
        seen.append(name)
        return original(spark, world, name, fusion)

    monkeypatch.setattr(maintainer, "maintain_view", spy)
    return seen


def test_a_pass_plans_only_views_whose_sources_moved(db, monkeypatch) -> None:
    busy = db.create_stream("Busy", "ts timestamp, g string, v int", 60, "ts")
    idle = db.create_stream("Idle", "ts timestamp, g string, v int", 60, "ts")
    db.sql("CREATE VIEW OnBusy AS SELECT g, sum(v) AS t FROM Busy [WINDOW 2 MINUTES] GROUP BY g")
    db.sql("CREATE VIEW OnIdle AS SELECT g, sum(v) AS t FROM Idle [WINDOW 2 MINUTES] GROUP BY g")
    db.sql(
        "CREATE VIEW Chained AS INITIALIZE Chained[i] AS SELECT g, t FROM OnBusy[i] WHERE t > 1 "
        "UPDATE Chained[j] AS SELECT g, t FROM OnBusy[j] WHERE t > 1 PARTITION LENGTH 60"
    )
    busy_rows = [(0, "a", 1), (0, "b", 2), (1, "a", 3)]
    idle_rows = [(0, "x", 5), (1, "x", 6)]
    busy.append(_rows(*map(list, zip(*busy_rows, strict=True))), maintain=False)
    idle.append(_rows(*map(list, zip(*idle_rows, strict=True))), maintain=False)
    db.maintain_streams()

    planned = _planned(monkeypatch)
    more = [(2, "a", 4), (2, "c", 1)]
    busy.append(_rows(*map(list, zip(*more, strict=True))), maintain=False)
    results = db.maintain_streams()
    assert sorted(planned) == ["chained", "onbusy"]
    assert sorted(r.view for r in results) == ["Chained", "OnBusy"]

    planned.clear()
    assert db.maintain_streams() == [] and planned == []  # nothing moved: nothing planned

    got = db.sql("SELECT g, t FROM OnBusy ORDER BY PART_TIMESTAMP, g").toPandas()
    assert list(got.itertuples(index=False, name=None)) == _window_sums(busy_rows + more, 2)
    # a view over a view starts at the part its source had when it was first built (minute 1)
    chained = db.sql("SELECT g, t FROM Chained ORDER BY PART_TIMESTAMP, g").toPandas()
    assert list(chained.itertuples(index=False, name=None)) == [
        (g, t) for g, t in _window_sums(busy_rows + more, 2, start=1) if t > 1
    ]
    kept = db.sql("SELECT g, t FROM OnIdle ORDER BY PART_TIMESTAMP, g").toPandas()
    assert list(kept.itertuples(index=False, name=None)) == _window_sums(idle_rows, 2)


def test_a_view_passed_over_still_takes_late_rows_of_its_idle_source(db, monkeypatch) -> None:
    """After passes that skipped it, a late row into an old part of the idle stream moves its
    version: the view is planned again and recomputes the parts the row reaches."""
    busy = db.create_stream("Busy2", "ts timestamp, g string, v int", 60, "ts")
    idle = db.create_stream("Idle2", "ts timestamp, g string, v int", 60, "ts")
    db.sql("CREATE VIEW OnBusy2 AS SELECT g, max(v) AS t FROM Busy2 [WINDOW 2 MINUTES] GROUP BY g")
    db.sql("CREATE VIEW OnIdle2 AS SELECT g, sum(v) AS t FROM Idle2 [WINDOW 2 MINUTES] GROUP BY g")
    idle_rows = [(0, "x", 5), (1, "x", 6), (2, "y", 1)]
    idle.append(_rows(*map(list, zip(*idle_rows, strict=True))), maintain=False)
    busy.append(_rows([0], ["a"], [1]), maintain=False)
    db.maintain_streams()
    planned = _planned(monkeypatch)
    for minute in (1, 2):
        busy.append(_rows([minute], ["a"], [minute]), maintain=False)
        db.maintain_streams()
    assert planned == ["onbusy2", "onbusy2"]

    late = [(1, "y", 10)]
    idle.append(_rows(*map(list, zip(*late, strict=True))), maintain=False)
    results = db.maintain_streams()
    assert planned[-1:] == ["onidle2"]
    assert [r.view for r in results] == ["OnIdle2"] and results[0].recomputed
    got = db.sql("SELECT g, t FROM OnIdle2 ORDER BY PART_TIMESTAMP, g").toPandas()
    assert list(got.itertuples(index=False, name=None)) == _window_sums(idle_rows + late, 2)
