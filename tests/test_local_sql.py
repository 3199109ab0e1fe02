"""Spark SQL run in-process by DuckDB (execution/local_sql.py) means what it means on Spark in ANSI
mode, or is refused: each difference between the engines, against plain-Python references."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest

from arrayviews.execution.local_sql import CannotRunLocally, RaisedByQuery, run_sql
from arrayviews.streams import exact_sums

BIG = 2**63 - 1


def _run(text: str, **tables: pa.Table) -> list[dict]:
    return run_sql(text, tables, exact_sums.LOCAL_FUNCTIONS, exact_sums.LOCAL_MACROS).to_pylist()


def test_integer_overflow_is_refused_never_wrapped() -> None:
    rows = pa.table({"a": pa.array([BIG], pa.int64()), "b": pa.array([1], pa.int64())})
    with pytest.raises(CannotRunLocally, match="Overflow"):
        _run("SELECT a + b AS s FROM t", t=rows)
    with pytest.raises(CannotRunLocally, match="Overflow"):
        _run("SELECT a * 2 AS s FROM t", t=rows)


def test_try_add_is_null_on_overflow_and_raise_error_keeps_its_text() -> None:
    """The pattern views' overflow check: try_add is NULL past the type, and raise_error's message
    comes back whole (with the group's name, quotes included)."""
    rows = pa.table({"a": pa.array([BIG, 5], pa.int64()), "g": ["it's", "b"]})
    assert _run("SELECT try_add(a, 1) AS s FROM t ORDER BY g", t=rows) == [{"s": 6}, {"s": None}]
    query = (
        "SELECT coalesce(try_add(a, 1), raise_error(concat('arrayviews: overflow for g=', g))) AS s FROM t"
    )
    with pytest.raises(RaisedByQuery) as raised:
        _run(query, t=rows)
    assert raised.value.args[0] == "arrayviews: overflow for g=it's"
    big = pa.table({"x": pa.array([6 * 10**37], pa.decimal128(38, 0))})
    assert _run("SELECT CAST(try_add(x, x) AS DECIMAL(38, 0)) AS s FROM t", t=big) == [{"s": None}]


def test_cast_and_division_raise_as_in_ansi_mode() -> None:
    """Spark (ANSI) raises on a bad CAST and on division by zero; the query is refused in-process
    (sqlglot reads Spark's CAST as TRY_CAST, and DuckDB divides by zero to infinity or NULL)."""
    rows = pa.table({"s": ["12", "x"], "d": [0, 2]})
    with pytest.raises(CannotRunLocally):
        _run("SELECT CAST(s AS INT) AS v FROM t", t=rows)
    assert _run("SELECT try_cast(s AS INT) AS v FROM t", t=rows) == [{"v": 12}, {"v": None}]
    with pytest.raises(CannotRunLocally, match="division by zero"):
        _run("SELECT 6 / d AS v FROM t", t=rows)
    assert _run("SELECT CASE WHEN d > 0 THEN 6 / d END AS v FROM t", t=rows) == [{"v": None}, {"v": 3.0}]


def test_null_semantics_follow_spark() -> None:
    """concat is NULL with a NULL argument, collect_list skips NULLs, ascending order puts NULLs
    first, NULL group keys form one group, greatest skips NULLs."""
    rows = pa.table({"g": ["a", None, "a", None], "v": [1.0, 2.0, None, 3.0]})
    assert _run("SELECT concat('x', g) AS c FROM t", t=rows) == [
        {"c": "xa"},
        {"c": None},
        {"c": "xa"},
        {"c": None},
    ]
    listed = _run("SELECT g, collect_list(v) AS l FROM t GROUP BY g ORDER BY g", t=rows)
    assert listed == [{"g": None, "l": [2.0, 3.0]}, {"g": "a", "l": [1.0]}]
    first = _run("SELECT v, ROW_NUMBER() OVER (ORDER BY v) AS r FROM t", t=rows)
    assert min(first, key=lambda row: row["r"])["v"] is None
    assert _run("SELECT greatest(v, 2.5) AS m FROM t WHERE g IS NULL", t=rows) == [{"m": 2.5}, {"m": 3.0}]


def test_string_literals_with_quotes_and_backslashes() -> None:
    rows = pa.table({"s": ["it's", "a\\b", 'say "hi"']})
    found = _run(r"SELECT s FROM t WHERE s IN ('it\'s', 'a\\b', 'say \"hi\"')", t=rows)
    assert [row["s"] for row in found] == ["it's", "a\\b", 'say "hi"']


def test_timestamps_are_utc() -> None:
    stamps = pa.array([1_420_070_400_000_000 + 3_600_000_000 * 5], pa.timestamp("us", tz="UTC"))
    found = _run("SELECT hour(ts) AS h, ts FROM t", t=pa.table({"ts": stamps}))
    assert found[0]["h"] == 5
    assert found[0]["ts"].isoformat().startswith("2015-01-01T05:00:00")


def test_exact_float_sums_in_process() -> None:
    """The exact-sum state functions of translated window views, against math.fsum."""
    values = [1e17, 1.5, 1e-10, -1e17, 1.5]
    rows = pa.table({"g": ["a"] * len(values), "y": values})
    state = "av_exact_sum(collect_list(y), 'view W, sum of y')"
    found = _run(
        f"SELECT av_exact_difference(STRUCT(s.s0, s.s1, s.s2, s.s3, s.pinf, s.ninf, s.nan), "
        f"STRUCT(CAST(NULL AS DOUBLE), 0.0, 0.0, 0.0, 0, 0, 0), 'l') AS total "
        f"FROM (SELECT {state} AS s FROM t GROUP BY g)",
        t=rows,
    )
    assert found == [{"total": math.fsum(values)}]
    assert math.fsum(values) != sum(values)
