"""Small Spark SQL queries run by pyarrow compute alone (execution/arrow_sql.py) give what DuckDB
gives for them (execution/local_sql.py, itself checked against plain-Python references in
test_local_sql.py), or are refused and left to DuckDB: never a different answer."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arrayviews.execution import arrow_sql, local_sql
from arrayviews.execution.arrow_sql import Unsupported, run_arrow
from arrayviews.execution.local_sql import RaisedByQuery, run_sql

BIG = 2**63 - 1

#: Queries inside the subset: on the drawn tables (small integers) they are never refused.
SUPPORTED = (
    "SELECT g, a FROM t",
    "SELECT * FROM t WHERE a IS NOT NULL AND NOT b IS NULL",
    "SELECT g AS name, a + b AS s, a - 3 AS d, -a AS n, a * 2 AS m FROM t WHERE a > b OR g = 'x'",
    "SELECT g, CASE WHEN a > 2 THEN 'big' WHEN a IS NULL THEN NULL ELSE 'small' END AS size FROM t",
    "SELECT g, IF(b <= a, a, b) AS top, coalesce(a, b, 7) AS c, greatest(a, b) AS hi, least(a, b) AS lo FROM t",
    "SELECT g, CAST(a AS STRING) AS text, CAST(b AS BIGINT) AS wide, CAST(NULL AS BIGINT) AS none FROM t",
    "SELECT g, count(*) AS n, count(a) AS na, min(a) AS lo, max(b) AS hi, sum(a) AS s, min(g) AS first FROM t GROUP BY g",
    "SELECT g, CASE WHEN count(a) < count(*) THEN NULL ELSE min(a) END AS a FROM t GROUP BY g",
    "SELECT t.g AS g, t.a AS a, u.c AS c FROM t LEFT OUTER JOIN u ON t.k = u.k",
    "SELECT t.g AS g, u.c AS c FROM t FULL OUTER JOIN u ON t.k = u.k AND t.a = (u.c - 1)",
    "SELECT t.g AS g, u.c AS c FROM t JOIN u ON t.k = u.k",
    "SELECT t.a AS a, u.c AS c FROM t LEFT OUTER JOIN u ON t.g <=> u.g AND t.k <=> u.k",
    "SELECT t.a AS a, u.c AS c FROM t FULL OUTER JOIN u ON t.g <=> u.g",
    "SELECT X.g AS g, X.total + 1 AS total FROM (SELECT g, sum(b) AS total FROM t GROUP BY g) AS X WHERE X.total > 0",
    # a pattern view's running sum: raise_error only where both are present and try_add overflows
    "SELECT g, CASE WHEN a IS NULL THEN b WHEN b IS NULL THEN a "
    "ELSE coalesce(try_add(a, b), raise_error(concat('overflow for ', concat_ws(', ', g, 'x')))) END AS s FROM t",
    "SELECT g, CASE WHEN a IS NULL THEN raise_error('never') ELSE a END AS a FROM t WHERE a IS NOT NULL",
    # UNION ALL: integer widening (INT and BIGINT), typed and bare NULLs, grouping over the union
    "SELECT g, b AS v FROM t WHERE a > 0 UNION ALL SELECT g, c AS v FROM u",
    "SELECT g, k, CAST(NULL AS INT) AS v FROM t UNION ALL SELECT g, k, c AS v FROM u UNION ALL SELECT g, NULL AS k, b AS v FROM t",
    "SELECT g, count(*) AS n, max(v) AS top, min(p) AS low FROM ("
    "SELECT g, a AS v, NULL AS p FROM t UNION ALL SELECT g, NULL AS v, c AS p FROM u) AS Q GROUP BY g",
)

_values = st.one_of(st.none(), st.integers(-5, 5))
_keys = st.one_of(st.none(), st.integers(0, 3))
_rows = st.lists(st.tuples(st.sampled_from(["x", "y", "zz", None]), _values, _values, _keys), max_size=12)
_others = st.lists(st.tuples(_keys, _values, st.sampled_from(["x", "zz", None])), max_size=8)


def _tables(rows, others) -> dict[str, pa.Table]:
    t = pa.table(
        {
            "g": pa.array([r[0] for r in rows], pa.string()),
            "a": pa.array([r[1] for r in rows], pa.int64()),
            "b": pa.array([r[2] for r in rows], pa.int32()),
            "k": pa.array([r[3] for r in rows], pa.int64()),
        }
    )
    u = pa.table(
        {
            "k": pa.array([o[0] for o in others], pa.int64()),
            "c": pa.array([o[1] for o in others], pa.int64()),
            "g": pa.array([o[2] for o in others], pa.string()),
        }
    )
    return {"t": t, "u": u}


def _rows_of(table: pa.Table) -> list[tuple]:
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=repr)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=_rows, others=_others, query=st.sampled_from(SUPPORTED))
def test_the_subset_gives_what_duckdb_gives(rows, others, query) -> None:
    tables = _tables(rows, others)
    expected = run_sql(query, tables)
    got = run_arrow(query, tables)
    assert got.column_names == expected.column_names
    assert _rows_of(got) == _rows_of(expected)


@pytest.mark.parametrize("query", SUPPORTED)
def test_every_supported_query_runs_here(query) -> None:
    """So the comparison above cannot pass by refusing: each query runs on a fixed table."""
    tables = _tables(
        [("x", 1, 2, 0), ("y", None, 3, 1), (None, 4, None, 1)],
        [(0, 2, "x"), (1, None, None), (None, 5, "zz")],
    )
    assert _rows_of(run_arrow(query, tables)) == _rows_of(run_sql(query, tables))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=_rows, others=_others, query=st.sampled_from(SUPPORTED), pieces=st.integers(2, 6))
def test_inputs_of_many_small_chunks_give_the_same_rows(rows, others, query, pieces) -> None:
    """A view's parts read together arrive as one chunk each; such inputs are made one chunk
    before the plan runs (arrow_sql.SMALL_CHUNK_ROWS), with DuckDB's answer unchanged."""
    tables = _tables(rows, others)
    chunked = {}
    for name, table in tables.items():
        size = max(1, -(-table.num_rows // pieces))
        batches = [table.slice(start, size) for start in range(0, table.num_rows, size)] or [table]
        chunked[name] = pa.concat_tables(batches)
    assert _rows_of(run_arrow(query, chunked)) == _rows_of(run_sql(query, tables))


def test_a_reached_raise_error_is_left_to_duckdb_which_raises_it() -> None:
    tables = {
        "t": pa.table(
            {"g": ["a", "b"], "a": pa.array([BIG, 1], pa.int64()), "b": pa.array([1, 1], pa.int32())}
        )
    }
    query = "SELECT g, coalesce(try_add(a, b), raise_error(concat('overflow for ', g))) AS s FROM t"
    with pytest.raises(Unsupported):
        run_arrow(query, tables)
    with pytest.raises(RaisedByQuery, match="overflow for a"):
        run_sql(query, tables, arrow_first=True)
    reached = "SELECT g, CASE WHEN a > 5 THEN raise_error(concat('too big: ', g)) ELSE a END AS a FROM t"
    with pytest.raises(RaisedByQuery, match="too big: a"):
        run_sql(reached, tables, arrow_first=True)


@pytest.mark.parametrize(
    "query",
    [
        "SELECT a + 1 AS s FROM t",  # overflows BIGINT: refused, never wrapped
        "SELECT sum(a) AS s FROM t GROUP BY one",  # the sum could pass BIGINT
        "SELECT a / 2 AS h FROM t",
        "SELECT min(f) AS m FROM t GROUP BY g",  # NaN orders differently
        "SELECT f + 1.5 AS x FROM t",  # a decimal literal
        "SELECT try_cast(g AS INT) AS v FROM t",
        "SELECT count(*) AS n FROM t",  # a global aggregate
        "SELECT g FROM t ORDER BY g",
        "SELECT DISTINCT g FROM t",
        "SELECT upper(g) AS u FROM t",
        "SELECT t.g AS g FROM t JOIN u ON t.f <=> u.f",  # IS NOT DISTINCT FROM over doubles
        "SELECT a + 1 FROM t",  # a result column without a name
        "SELECT CAST(g AS INT) AS v FROM t",
        "SELECT t.s.x AS x FROM t",  # a struct field
        "SELECT t.g AS g FROM t JOIN u ON t.g = u.g WHERE a < 2 ORDER BY g",
        "SELECT g FROM t UNION SELECT g FROM u",  # UNION (distinct)
        "SELECT g, a FROM t UNION ALL SELECT g FROM u",  # different numbers of columns
        "SELECT a FROM t UNION ALL SELECT f FROM u",  # BIGINT with DOUBLE
        "SELECT g FROM t EXCEPT SELECT g FROM u",
    ],
)
def test_what_it_cannot_compute_exactly_is_refused(query) -> None:
    tables = {
        "t": pa.table(
            {
                "g": ["a", None],
                "one": ["x", "x"],
                "a": pa.array([BIG, 1], pa.int64()),
                "f": [float("nan"), 1.0],
            }
        ),
        "u": pa.table({"g": ["a", None], "f": [1.0, None]}),
    }
    with pytest.raises(Unsupported):
        run_arrow(query, tables)


def test_a_large_query_goes_to_duckdb_a_small_one_does_not(monkeypatch) -> None:
    tables = {"t": pa.table({"g": ["a", "b"], "a": pa.array([1, None], pa.int64())})}
    small = "SELECT g, a AS value FROM t WHERE a IS NOT NULL"
    large = "SELECT g, " + " + ".join(["coalesce(a, 0)"] * arrow_sql.NODE_LIMIT) + " AS s FROM t"
    assert run_arrow("SELECT g, coalesce(a, 0) + coalesce(a, 0) AS s FROM t", tables).num_rows == 2
    with pytest.raises(Unsupported, match="expression nodes"):
        run_arrow(large, tables)

    def no_duckdb(*args, **kwargs):
        raise AssertionError("DuckDB was asked")

    monkeypatch.setattr(local_sql, "_prepared", no_duckdb)
    assert run_sql(small, tables, arrow_first=True).to_pylist() == [{"g": "a", "value": 1}]
    with pytest.raises(AssertionError, match="DuckDB was asked"):
        run_sql(small, tables)
    with pytest.raises(AssertionError, match="DuckDB was asked"):
        run_sql(large, tables, arrow_first=True)


def test_the_overflow_check_is_skipped_only_when_no_group_sum_can_leave_bigint() -> None:
    # at most prod(rows + 1) rows over the references reach the grouping, each |x| <= the largest
    ran = []
    checked = lambda inputs: ran.append("checked")  # noqa: E731
    plain = lambda inputs: ran.append("plain")  # noqa: E731
    tables = {"t": pa.table({"a": [1, 2, 3]}), "u": pa.table({"a": [1]})}  # 4 and 2 with the +1
    for references, largest, expected in [
        (("t",), BIG // 4, "plain"),  # 4 * (BIG // 4) <= BIG
        (("t",), BIG // 4 + 1, "checked"),
        (("t", "u"), BIG // 8, "plain"),  # a join of t and u: 4 * 2 rows bound
        (("t", "u"), BIG // 8 + 1, "checked"),
        (("t", "t"), BIG // 16, "plain"),  # a self-join names t twice
        (("t", "t"), BIG // 16 + 1, "checked"),
    ]:
        ran.clear()
        arrow_sql._unless_bounded(checked, plain, references, [largest, 1])(tables)
        assert ran == [expected], (references, largest)
    ran.clear()
    arrow_sql._unless_bounded(checked, plain, ("u",), [None, 1])(tables)  # a BIGINT summand
    assert ran == ["checked"]


@pytest.mark.parametrize("kind", [pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16(), pa.uint32()])
def test_sums_of_narrow_integers_are_pythons_at_the_types_extremes(kind) -> None:
    info = (kind.bit_width, pa.types.is_unsigned_integer(kind))
    low, high = (0, 2**info[0] - 1) if info[1] else (-(2 ** (info[0] - 1)), 2 ** (info[0] - 1) - 1)
    values = [high] * 500 + [low] * 300 + [high, None]
    groups = ["a"] * 400 + ["b"] * 402
    table = pa.table({"g": groups, "v": pa.array(values, kind)})
    result = run_arrow("SELECT g, sum(v) AS s, count(v) AS n FROM t GROUP BY g", {"t": table})
    expected = {}
    for g, v in zip(groups, values, strict=True):
        if v is not None:
            expected[g] = expected.get(g, 0) + v
    assert dict(zip(result["g"].to_pylist(), result["s"].to_pylist(), strict=True)) == expected
