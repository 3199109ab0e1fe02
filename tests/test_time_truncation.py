"""Spark's ``date_trunc`` runs in-process with Spark's meaning (execution/time_truncation.py): before,
every query holding it was sent to Spark, so a stream view grouping by the hour paid a Spark job a
step. Checked against Python's ``datetime`` and against Spark itself on the same rows."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arrayviews.execution.local_sql import CannotRunLocally, run_sql
from arrayviews.execution.time_truncation import SPARK_UNITS

UTC = dt.UTC
TIMES = pa.timestamp("us", tz="UTC")


def truncated(moment: dt.datetime, unit: str) -> dt.datetime:
    """Spark's documented truncation, in plain datetime arithmetic."""
    name = SPARK_UNITS[unit.upper()]
    midnight = dt.datetime(moment.year, moment.month, moment.day)
    return {
        "year": lambda: dt.datetime(moment.year, 1, 1),
        "quarter": lambda: dt.datetime(moment.year, 3 * ((moment.month - 1) // 3) + 1, 1),
        "month": lambda: dt.datetime(moment.year, moment.month, 1),
        "week": lambda: midnight - dt.timedelta(days=moment.weekday()),  # the Monday
        "day": lambda: midnight,
        "hour": lambda: moment.replace(minute=0, second=0, microsecond=0),
        "minute": lambda: moment.replace(second=0, microsecond=0),
        "second": lambda: moment.replace(microsecond=0),
        "millisecond": lambda: moment.replace(microsecond=moment.microsecond // 1000 * 1000),
        "microsecond": lambda: moment,
    }[name]()


def _run(query: str, moments: list, kind: pa.DataType = TIMES) -> list:
    table = pa.table({"ts": pa.array(moments, kind), "n": list(range(len(moments)))})
    result = run_sql(query, {"t": table}, arrow_first=True)
    return [None if v is None else v.replace(tzinfo=None) for v in result.column(0).to_pylist()]


_moments = st.datetimes(dt.datetime(1000, 1, 8), dt.datetime(2999, 12, 24))
_units = st.sampled_from(sorted(SPARK_UNITS)).flatmap(
    lambda u: st.sampled_from([u, u.lower(), u.capitalize()])
)


@settings(max_examples=60, deadline=None)
@given(moments=st.lists(_moments, min_size=1, max_size=6), unit=_units)
def test_every_unit_truncates_as_spark_documents(moments, unit):
    aware = [m.replace(tzinfo=UTC) for m in moments]
    got = _run(f"SELECT date_trunc('{unit}', ts) AS x FROM t ORDER BY n", aware)
    assert got == [truncated(m, unit) for m in moments]


def test_a_grouping_by_the_hour_runs_here_with_nulls_and_dates():
    moments = [dt.datetime(1969, 12, 31, 23, 59, 59, 999999), dt.datetime(1969, 12, 31, 23, 0), None]
    aware = [None if m is None else m.replace(tzinfo=UTC) for m in moments]
    table = pa.table({"ts": pa.array(aware, pa.timestamp("us", tz="UTC"))})
    grouped = run_sql("SELECT date_trunc('HOUR', ts) AS h, count(*) AS c FROM t GROUP BY 1", {"t": table})
    counts = {
        (h.replace(tzinfo=None) if h else None): c for h, c in zip(*grouped.to_pydict().values(), strict=True)
    }
    assert counts == {dt.datetime(1969, 12, 31, 23): 2, None: 1}
    days = [dt.date(2024, 2, 29), dt.date(2021, 1, 3)]  # a leap day; a Sunday whose Monday is in 2020
    for unit in ("WEEK", "MM", "QUARTER", "DD"):
        got = _run(f"SELECT date_trunc('{unit}', ts) AS x FROM t ORDER BY n", days, pa.date32())
        assert got == [truncated(dt.datetime(d.year, d.month, d.day), unit) for d in days]


@pytest.mark.parametrize(
    "call",
    [
        "date_trunc(u, ts)",  # a unit per row: left to Spark
        "date_trunc('FORTNIGHT', ts)",  # not a unit of Spark's (Spark gives NULL)
        "date_trunc('DAY', s)",  # text Spark would cast to a time its own way
        "date_trunc('DAY', ts) AS d, date_trunc(u, ts)",  # all or nothing
    ],
)
def test_what_cannot_be_told_is_still_left_to_spark(call):
    table = pa.table({"ts": pa.array([dt.datetime(2026, 3, 1, 10, 5)]), "u": ["DAY"], "s": ["2026-03-01"]})
    with pytest.raises(CannotRunLocally, match="only Spark"):
        run_sql(f"SELECT {call} AS x FROM t", {"t": table}, arrow_first=True)


def test_in_process_agrees_with_spark_on_the_same_rows(spark):
    moments = [
        dt.datetime(1969, 12, 29, 0, 0, 0, 1),  # a Monday before 1970
        dt.datetime(1960, 3, 31, 23, 59, 59, 999999),
        dt.datetime(2024, 2, 29, 12, 30, 45, 123456),
        dt.datetime(2021, 1, 3, 1, 2, 3, 4),  # a Sunday
        dt.datetime(1999, 12, 31, 23, 59, 59, 999000),
    ]
    units = sorted(SPARK_UNITS)
    query = "SELECT n, " + ", ".join(f"date_trunc('{u}', ts) AS u{k}" for k, u in enumerate(units))
    query += " FROM t ORDER BY n"
    table = pa.table(
        {
            "ts": pa.array([m.replace(tzinfo=UTC) for m in moments], pa.timestamp("us", tz="UTC")),
            "n": [0, 1, 2, 3, 4],
        }
    )
    local = run_sql(query, {"t": table}).to_pylist()
    spark.createDataFrame(table.to_pandas()).createOrReplaceTempView("t")
    try:
        remote = [row.asDict() for row in spark.sql(query).collect()]
    finally:
        spark.catalog.dropTempView("t")
    assert [
        {k: (v.replace(tzinfo=None) if isinstance(v, dt.datetime) else v) for k, v in r.items()}
        for r in local
    ] == remote


def test_a_stream_view_grouping_by_the_minute_is_maintained_in_process(db):
    db.sql("CREATE STREAM taps (ts timestamp, n bigint) PARTITION LENGTH 3600 TIME COLUMN ts")
    db.sql(
        "CREATE VIEW per_minute AS "
        "INITIALIZE per_minute[i] AS SELECT date_trunc('MINUTE', ts) AS minute, sum(n) AS total "
        "FROM taps[i] GROUP BY 1 "
        "UPDATE per_minute[j] AS SELECT date_trunc('MINUTE', ts) AS minute, sum(n) AS total "
        "FROM taps[j] GROUP BY 1 PARTITION LENGTH 3600"
    )
    start = dt.datetime(2026, 3, 1, 10, 0, 0)
    rows = [(start + dt.timedelta(seconds=37 * k), k) for k in range(1, 12)]
    rows.append((start + dt.timedelta(hours=1, seconds=5), 100))
    taps = db.stream("taps")
    steps = []
    for batch in (rows[:-1], rows[-1:]):
        moments = pa.array([m.replace(tzinfo=UTC) for m, _ in batch], TIMES)
        appended = taps.append(pa.table({"ts": moments, "n": pa.array([n for _, n in batch], pa.int64())}))
        steps += [r for r in appended.maintenance if r.view == "per_minute"]
    assert steps and all(s.executor == "local" for s in steps), steps  # before: "spark"
    expected: dict[dt.datetime, int] = {}
    for moment, n in rows:
        expected[truncated(moment, "MINUTE")] = expected.get(truncated(moment, "MINUTE"), 0) + n
    got = db.sql("SELECT minute, total FROM per_minute").collect()
    assert {r.minute: r.total for r in got} == expected
