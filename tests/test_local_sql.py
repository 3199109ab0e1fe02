"""Spark SQL run in-process by DuckDB (execution/local_sql.py) means what it means on Spark in ANSI
mode, or is refused: each difference between the engines, against plain-Python references."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


GROUPED = (
    "SELECT n.g AS g, sum(n.v) AS total, count(p.g) AS matched FROM new AS n "
    "LEFT OUTER JOIN prev AS p ON n.g = p.g GROUP BY n.g"
)


def _grouped_reference(new: pa.Table, prev: pa.Table) -> dict:
    """Plain Python: per group of ``new``, the sum of v over its rows times the matches in prev,
    and the count of matched prev rows (a left join, then grouping)."""
    found: dict = {}
    prev_groups = prev.column("g").to_pylist()
    for g, v in zip(new.column("g").to_pylist(), new.column("v").to_pylist(), strict=True):
        matches = prev_groups.count(g)
        total, matched = found.get(g, (0, 0))
        found[g] = (total + v * max(matches, 1), matched + matches)
    return found


def _result(rows: list[dict]) -> dict:
    return {r["g"]: (r["total"], r["matched"]) for r in rows}


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.tuples(st.sampled_from("abcdef"), st.integers(-50, 50)), max_size=300),
            st.lists(st.sampled_from("abcdefgh"), max_size=40),
            st.booleans(),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_a_query_run_again_on_new_rows_reads_the_new_rows(runs) -> None:
    """The prepared form of a query is kept between runs (by thread and input shape) while its
    inputs' rows change: every run answers for the rows it was given, of every size, and for
    string or integer group keys (another input schema, another prepared query)."""
    for rows, prev_groups, as_numbers in runs:
        kind = pa.int64() if as_numbers else pa.string()
        cast = (lambda g: "abcdefgh".index(g)) if as_numbers else (lambda g: g)
        new = pa.table(
            {"g": pa.array([cast(g) for g, _ in rows], kind), "v": pa.array([v for _, v in rows], pa.int64())}
        )
        prev = pa.table({"g": pa.array([cast(g) for g in prev_groups], kind)})
        assert _result(_run(GROUPED, new=new, prev=prev)) == _grouped_reference(new, prev)


def test_threads_running_one_query_on_their_own_rows() -> None:
    def one(seed: int) -> bool:
        new = pa.table({"g": [f"g{seed % 3}", "x"], "v": pa.array([seed, 1], pa.int64())})
        prev = pa.table({"g": [f"g{seed % 3}"] * (seed % 4)})
        return all(
            _result(_run(GROUPED, new=new, prev=prev)) == _grouped_reference(new, prev) for _ in range(20)
        )

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(one, range(16)))


def test_a_query_that_raised_runs_again() -> None:
    query = "SELECT coalesce(try_add(a, 1), raise_error('overflow')) AS s FROM t"
    with pytest.raises(RaisedByQuery):
        _run(query, t=pa.table({"a": pa.array([BIG], pa.int64())}))
    assert _run(query, t=pa.table({"a": pa.array([1, 2], pa.int64())})) == [{"s": 2}, {"s": 3}]
