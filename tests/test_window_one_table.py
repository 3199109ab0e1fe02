"""A subtractable sliding-window view (count, sum, avg) is one table: its stored rows are the
Helper's cumulative sums per group (paper 004, section 5.2.2) with the window's values beside them,
read back by its own next step (the previous part, and the part one window earlier to subtract),
and readers see the query's columns of the rows where HAVING holds (streams/presentation.py). One
maintenance step is one commit. Against pandas recomputation of every window, on both executors."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from test_translated_views import (
    SCHEMA,
    SUM_VIEW,
    assert_same,
    readings,
    stored,
    window_reference,
    with_parts,
)

READER = """CREATE VIEW copied AS
INITIALIZE copied[i] AS SELECT src, total, n, mean FROM recent[i]
UPDATE copied[j] AS SELECT src, total, n, mean FROM recent[j]
PARTITION LENGTH 60"""


@pytest.mark.slow
def test_a_window_step_is_one_commit_and_readers_see_the_rows_having_holds(db_on) -> None:
    db, executor = db_on
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    first, _ = readings(range(0, 3), seed=21)
    stream.append(first)
    view = db.stream_view(db.create_stream_view(SUM_VIEW.replace(" AS\n", " USING INCREMENTAL AS\n", 1)).name)
    db.create_stream_view(READER)
    assert set(db.stream_views(helpers=True)) == {"recent", "copied"}  # no helper table
    assert view.status()["plan"]["plan"] == "incremental"
    frames = [first]
    for minute in range(3, 9):
        now, _ = readings([minute], seed=30 + minute)
        before = view.status()["version"]
        result = stream.append(now)
        frames.append(now)
        assert {m.executor for m in result.maintenance} == {executor}
        assert view.status()["version"] == before + 1  # the whole step: one commit
    expected = window_reference(with_parts(frames), 3, "sum")
    columns = ["src", "total", "n", "mean"]
    assert_same(stored(db, "recent", columns), expected)
    copied = stored(db, "copied", columns)
    # it starts at the newest part when it was created (a hand-written ViewDF is not backfilled)
    assert_same(copied, {part: rows for part, rows in expected.items() if part >= min(copied)})
    assert list(view.read().columns) == [*columns, "PART_TIMESTAMP"]
    over_sql = db.sql("SELECT src, total, n FROM recent").toPandas()
    assert sorted(map(tuple, over_sql.itertuples(index=False))) == sorted(
        row[:3] for rows in expected.values() for row in rows
    )
    # the stored rows hold every group with a row in the window (its running sums, age and idle),
    # HAVING's marker unset for a group with one reading; readers never see them
    raw = view._handle.table.read_parts(db.spark, *view.parts()[:: len(view.parts()) - 1]).toPandas()
    assert {"age", "idle", "sum_loss", "shown"} <= set(raw.columns)
    assert raw["shown"].isna().any() and len(raw) > sum(len(rows) for rows in expected.values())


@pytest.mark.slow
def test_auto_over_an_empty_stream_is_incremental_at_once_with_a_renamed_group(db_on) -> None:
    """A subtractable window created before any rows is incremental from the start (its one table
    cannot become the recompute plan later); a group column shown under another name."""
    db, _ = db_on
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    db.sql("CREATE VIEW r AS SELECT src AS source, sum(loss) AS total FROM M [WINDOW 2 MINUTES] GROUP BY src")
    plan = db.stream_view("r").status()["plan"]
    assert plan["plan"] == "incremental" and "no rows yet" in plan["reason"]
    assert db.stream_views(helpers=True) == ["r"]
    frames = []
    for minutes, seed in ((range(0, 3), 41), (range(3, 5), 42)):
        now, _ = readings(minutes, seed=seed)
        frames.append(now)
        stream.append(now)
    rows = with_parts(frames)
    expected = {}
    for part in range(int(rows.part.min()), int(rows.part.max()) + 1):
        window = rows[(rows.part > part - 2) & (rows.part <= part)]
        found = {(src, int(group.loss.astype(int).sum())) for src, group in window.groupby("src")}
        if found:
            expected[part] = found
    assert_same(stored(db, "r", ["source", "total"]), expected)
    assert list(db.stream_view("r").read().columns) == ["source", "total", "PART_TIMESTAMP"]


def test_explain_says_what_readers_see(db_on) -> None:
    db, _ = db_on
    db.create_stream("M", SCHEMA, 60, "ts")
    shown = db.sql("EXPLAIN " + SUM_VIEW)
    text = shown if isinstance(shown, str) else "\n".join(str(r[0]) for r in shown.collect())
    assert "view recent: one table holding the Helper's rows; readers see src, total, n, mean" in text
    assert "of the rows where shown IS NOT NULL" in text
    assert "recent[j-1]" in text and "recent[j-3]" in text and "__helper" not in text


EPOCH = 1_700_000_040  # a minute boundary
EXTREMES = """CREATE VIEW ext AS
SELECT g, max(v) AS top, min(v) AS low, sum(v) AS total, count(*) AS n FROM E [WINDOW 3 MINUTES]
GROUP BY g HAVING count(*) >= 2"""
# per minute, (group, value): a's maximum 9 leaves at minute 3 (7 is the largest left), b's minimum
# -4 leaves while a tie of it stays, c has only NULL values for a while, d leaves and comes back
MINUTES = [
    [("a", 9), ("a", 5), ("b", -4), ("c", None), ("d", 1)],
    [("a", 7), ("b", -4), ("b", 0), ("c", None)],
    [("a", 1), ("b", 3), ("c", None), ("c", None)],
    [("a", 2), ("b", 2), ("c", 6)],
    [("b", -1)],
    [("a", 8), ("a", 8), ("d", 4), ("d", -2)],
    [("b", 5), ("c", None)],
    [],
    [("d", 0), ("d", 0)],
]


def _frame(minute: int) -> pd.DataFrame:
    rows = MINUTES[minute]
    return pd.DataFrame(
        {
            "ts": pd.to_datetime([EPOCH + 60 * minute + k for k in range(len(rows))], unit="s", utc=True),
            "g": [g for g, _ in rows],
            "v": pd.array([v for _, v in rows], dtype="Int64"),
        }
    )


def _extremes_reference(upto: int) -> dict[int, set[tuple]]:
    """Per part, pandas over the rows of its window (3 parts), groups with at least two rows."""
    result = {}
    for minute in range(upto + 1):
        rows = [row for m in range(max(0, minute - 2), minute + 1) for row in MINUTES[m]]
        frame = pd.DataFrame(rows, columns=["g", "v"]).astype({"v": "Int64"})
        found = set()
        for g, group in frame.groupby("g"):
            values = group.v.dropna()
            if len(group) >= 2:
                top = int(values.max()) if len(values) else None
                low = int(values.min()) if len(values) else None
                found.add((g, top, low, int(values.sum()) if len(values) else None, len(group)))
        if found:
            result[EPOCH // 60 + minute] = found
    return result


@pytest.mark.slow
def test_a_window_with_extremes_follows_a_leaving_maximum(db_on) -> None:
    """max/min/sum/count over 3 parts (one table: monotonic queues and cumulative sums): a maximum
    (minimum) that leaves the window while a tie or a smaller value stays, NULL-only groups, a
    group that leaves and comes back; one commit of the view a step. Against pandas."""
    db, executor = db_on
    stream = db.create_stream("E", "ts timestamp, g string, v bigint", 60, "ts")
    stream.append(_frame(0))
    view = db.stream_view(db.create_stream_view(EXTREMES.replace(" AS\n", " USING INCREMENTAL AS\n", 1)).name)
    assert db.stream_views(helpers=True) == ["ext"]  # one table: a queue per min/max and the sums
    for minute in range(1, len(MINUTES)):
        before = view.status()["version"]
        result = stream.append(_frame(minute)) if MINUTES[minute] else None
        if result is not None:
            assert {m.executor for m in result.maintenance} == {executor}
            assert view.status()["version"] == before + 1
    found = stored(db, "ext", ["g", "top", "low", "total", "n"])
    found = {  # NULL values come back from pandas as NaN
        part: {tuple(None if isinstance(v, float) and math.isnan(v) else v for v in row) for row in rows}
        for part, rows in found.items()
    }
    assert_same(found, _extremes_reference(len(MINUTES) - 1))
