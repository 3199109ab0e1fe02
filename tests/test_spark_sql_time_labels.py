"""Spark SQL over an array shows a time dimension as its times (Spark TIMESTAMPs), not as cell
numbers: ``max(time)``, ``ORDER BY time``, ``date_trunc('DAY', time)``, a condition on ISO text and a
join of two arrays of different steps mean what they say. Checked against Python's ``datetime``."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict

import pytest

SIX_HOURLY = dt.datetime(2026, 1, 1)
HOURLY = dt.datetime(2025, 12, 31, 22)
#: (cell, lat, value) of the six-hourly array G and (cell, value) of the hourly array H.
G_CELLS = [(0, 0, 1.5), (1, 1, 2.5), (4, 2, 3.5), (5, 0, -1.0), (9, 3, 8.0)]
H_CELLS = [(2, 10), (3, 11), (8, 12), (26, 13), (56, 14), (57, 15)]


@pytest.fixture(scope="module")
def arrays(spark, tmp_path_factory):
    import arrayviews

    db = arrayviews.connect(str(tmp_path_factory.mktemp("labels")), spark=spark)
    db.sql("CREATE ARRAY G <t2m:double> [time=0:*:24 SCALE 6 HOURS OFFSET '2026-01-01T00:00'; lat=0:3:4]")
    db.sql("CREATE ARRAY H <n:int64> [time=0:*:100 SCALE 1 HOUR OFFSET '2025-12-31T22:00']")
    db.sql("INSERT INTO G VALUES " + ", ".join(f"({c}, {lat}, {v})" for c, lat, v in G_CELLS))
    db.sql("INSERT INTO H VALUES " + ", ".join(f"({c}, {v})" for c, v in H_CELLS))
    return db


def _g_times():
    return [(SIX_HOURLY + dt.timedelta(hours=6 * c), lat, v) for c, lat, v in G_CELLS]


def _h_times():
    return [(HOURLY + dt.timedelta(hours=c), v) for c, v in H_CELLS]


def test_aggregates_order_and_conditions_read_times(arrays):
    """Before: max(time) was the cell 9, ORDER BY time sorted cells, and the condition on ISO text
    failed with CAST_INVALID_INPUT ('2026-01-02' is no BIGINT)."""
    times = _g_times()
    (row,) = arrays.sql("SELECT max(time) AS last, min(time) AS first FROM G").collect()
    assert (row.first, row.last) == (min(t for t, _, _ in times), max(t for t, _, _ in times))
    (row,) = arrays.sql("SELECT count(*) AS n FROM G WHERE time >= '2026-01-02T00:00'").collect()
    assert row.n == sum(t >= dt.datetime(2026, 1, 2) for t, _, _ in times)
    ordered = arrays.sql("SELECT time, lat FROM G ORDER BY time DESC LIMIT 2").collect()
    assert [(r.time, r.lat) for r in ordered] == [(t, lat) for t, lat, _ in sorted(times, reverse=True)[:2]]


def test_grouping_by_day(arrays):
    days = defaultdict(list)
    for moment, _, value in _g_times():
        days[dt.datetime(moment.year, moment.month, moment.day)].append(value)
    rows = arrays.sql("SELECT date_trunc('DAY', time) AS day, avg(t2m) AS a FROM G GROUP BY 1").collect()
    assert {r.day: r.a for r in rows} == {day: sum(v) / len(v) for day, v in days.items()}


def test_a_join_of_two_steps_meets_at_equal_times(arrays):
    """An hourly and a six-hourly array joined on time meet where their times are equal (before,
    on cell numbers, which name different times in the two)."""
    rows = arrays.sql(
        "SELECT G.time AS time, G.t2m AS t2m, H.n AS n FROM G JOIN H ON G.time = H.time ORDER BY 1"
    ).collect()
    hourly = dict(_h_times())
    expected = sorted((t, v, hourly[t]) for t, _, v in _g_times() if t in hourly)
    assert [(r.time, r.t2m, r.n) for r in rows] == expected and expected


def test_a_falling_axis_and_a_sub_microsecond_step(spark, tmp_path):
    import arrayviews

    db = arrayviews.connect(str(tmp_path), spark=spark)
    db.sql("CREATE ARRAY F <v:int> [time=0:9:10 SCALE -1 HOUR OFFSET '2026-01-01T00:00']")
    db.sql("INSERT INTO F VALUES (0, 1), (3, 2)")
    rows = db.sql("SELECT time, v FROM F ORDER BY time").collect()
    assert [(r.time, r.v) for r in rows] == [(dt.datetime(2025, 12, 31, 21), 2), (dt.datetime(2026, 1, 1), 1)]
    # a step of 500 ns has no exact TIMESTAMP: the dimension keeps its cells (docs/notebooks.md)
    db.sql("CREATE ARRAY N <v:int> [time=0:9:10 SCALE 500 NANOSECONDS OFFSET '2026-01-01T00:00']")
    db.sql("INSERT INTO N VALUES (3, 7)")
    assert [tuple(r) for r in db.sql("SELECT time, v FROM N ORDER BY time").collect()] == [(3, 7)]
