"""Spark's ``date_format`` runs in-process with Spark's meaning (execution/time_formatting.py):
before, every query holding it was sent to Spark, so a stream view labelling rows by the hour paid a
Spark job a step. Checked against Spark itself on the same rows, and against Python's ``datetime``."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arrayviews.execution.local_sql import CannotRunLocally, duckdb_sql, run_sql
from arrayviews.execution.time_formatting import SPARK_FIELDS, strftime_of

UTC = dt.UTC
TIMES = pa.timestamp("us", tz="UTC")
MOMENTS = [
    dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
    dt.datetime(2024, 2, 29, 0, 0, 0, 1),  # a leap day, just after midnight (12 AM)
    dt.datetime(2024, 7, 4, 12, 30, 5, 123456),  # noon (12 PM)
    dt.datetime(2001, 10, 9, 9, 5, 7, 5000),  # one-digit fields
    dt.datetime(1900, 1, 1, 13, 0, 0),
    dt.datetime(9999, 12, 31, 23, 59, 59),
    dt.datetime(1, 1, 1, 0, 0, 0),  # the first year Spark keeps: four digits, 0001
]
#: Every field alone, and patterns as written in practice (quotes, '' as a quote, adjacent literals
#: that Spark joins, a percent sign, characters copied as they are).
PATTERNS = [
    *("".join([letter] * count) for letter, count in SPARK_FIELDS),
    "yyyy-MM-dd HH:mm:ss.SSS",
    "yyyy-MM-dd'T'HH:mm:ss.SSSSSS",
    "dd/MM/yy hh:mm a",
    "EEE, d MMM yyyy",
    "H'h'm'm' s's' '100%'",
    "'quoted '' text' yyyy",
    "M/d/yyyy",
]


def test_every_field_and_pattern_agrees_with_spark(spark):
    # a pattern holding a quote is written as a double-quoted literal (the in-process path leaves
    # a backslash escape to Spark)
    def written(pattern: str) -> str:
        return f"'{pattern}'" if "'" not in pattern else f'"{pattern}"'

    columns = ", ".join(f"date_format(ts, {written(p)}) AS p{k}" for k, p in enumerate(PATTERNS))
    query = f"SELECT n, {columns}, date_format(CAST(ts AS DATE), 'yyyy-MM-dd HH:mm') AS day FROM t ORDER BY n"
    table = pa.table(
        {"ts": pa.array([m.replace(tzinfo=UTC) for m in MOMENTS] + [None], TIMES), "n": list(range(len(MOMENTS) + 1))}
    )
    assert "strftime" in duckdb_sql(query, schemas={"t": table.schema}).lower()  # it runs here
    local = run_sql(query, {"t": table}).to_pylist()
    spark.createDataFrame(table.to_pandas()).createOrReplaceTempView("t")
    try:
        remote = [row.asDict() for row in spark.sql(query).collect()]
    finally:
        spark.catalog.dropTempView("t")
    assert [{k: v for k, v in row.items() if v != remote[n][k]} for n, row in enumerate(local)] == [{}] * len(local)
    assert local == remote


@settings(max_examples=60, deadline=None)
@given(moment=st.datetimes(dt.datetime(1000, 1, 1), dt.datetime(2999, 12, 31)))
def test_a_timestamp_label_matches_python(moment):
    """The usual label against Python's own formatting of the same moment."""
    table = pa.table({"ts": pa.array([moment.replace(tzinfo=UTC)], TIMES)})
    got = run_sql("SELECT date_format(ts, 'yyyy-MM-dd HH:mm:ss.SSSSSS') AS x FROM t", {"t": table}, arrow_first=True)
    assert got.column(0).to_pylist() == [moment.strftime("%Y-%m-%d %H:%M:%S.%f")]


@pytest.mark.parametrize(
    "call",
    [
        "date_format(ts, f)",  # a pattern per row
        "date_format(ts, 'yyyy-MM-dd EEEE')",  # a field not spelled here
        "date_format(ts, 'yyy')",
        "date_format(ts, 'yyyy[-MM]')",  # an optional section
        "date_format(ts, \"yyyy 'open\")",  # an unclosed quote
        "date_format(s, 'yyyy')",  # text Spark would cast to a time its own way
        "date_format(ts, 'yyyy') AS a, date_format(ts, f)",  # all or nothing
        "date_format(ts, concat('yyyy', '-MM'))",  # a pattern computed
    ],
)
def test_what_cannot_be_told_is_still_left_to_spark(call):
    table = pa.table({"ts": pa.array([dt.datetime(2026, 3, 1, 10, 5)]), "f": ["yyyy"], "s": ["2026-03-01"]})
    with pytest.raises(CannotRunLocally, match="only Spark"):
        run_sql(f"SELECT {call} AS x FROM t", {"t": table}, arrow_first=True)


def test_the_spelling_of_fields_and_literals():
    assert strftime_of("yyyy-MM-dd'T'HH:mm") == "%Y-%m-%dT%H:%M"
    assert strftime_of("'it''s' 100%") == "it's 100%%"  # '' is one quote, inside quotes or out
    assert strftime_of("'' HH") == "' %H"
    assert strftime_of("'100%' yy") == "100%% %y"
    assert strftime_of("Q") is None and strftime_of("'open") is None


def test_a_stream_view_labelled_by_the_hour_is_maintained_in_process(db):
    db.sql("CREATE STREAM hits (ts timestamp, n bigint) PARTITION LENGTH 3600 TIME COLUMN ts")
    db.sql(
        "CREATE VIEW per_label AS "
        "INITIALIZE per_label[i] AS SELECT date_format(ts, 'yyyy-MM-dd HH:00') AS label, sum(n) AS total "
        "FROM hits[i] GROUP BY 1 "
        "UPDATE per_label[j] AS SELECT date_format(ts, 'yyyy-MM-dd HH:00') AS label, sum(n) AS total "
        "FROM hits[j] GROUP BY 1 PARTITION LENGTH 3600"
    )
    start = dt.datetime(2026, 3, 1, 10, 0, 0)
    rows = [(start + dt.timedelta(minutes=7 * k), k) for k in range(1, 12)]
    hits = db.stream("hits")
    steps = []
    for batch in (rows[:8], rows[8:]):
        moments = pa.array([m.replace(tzinfo=UTC) for m, _ in batch], TIMES)
        appended = hits.append(pa.table({"ts": moments, "n": pa.array([n for _, n in batch], pa.int64())}))
        steps += [r for r in appended.maintenance if r.view == "per_label"]
    assert steps and all(s.executor == "local" for s in steps), steps  # before: "spark"
    expected: dict[str, int] = {}
    for moment, n in rows:
        label = moment.strftime("%Y-%m-%d %H:00")
        expected[label] = expected.get(label, 0) + n
    got = db.sql("SELECT label, total FROM per_label").collect()
    assert {r.label: r.total for r in got} == expected
