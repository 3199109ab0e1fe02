"""In-process SQL where DuckDB reads Spark SQL otherwise (execution/local_sql.py): a zero divisor of
``DIV``, ``%`` and ``mod`` (Spark raises, DuckDB gave NULL), ``substr`` positions 0 and before the
start (DuckDB counted from 0), and case mapping beyond ASCII (Java's 'SS' for 'ß', DuckDB's 'ẞ').
Checked against Spark itself on the same rows, as reported by the r24 streams helper."""

from __future__ import annotations

import itertools

import pyarrow as pa
import pytest

from arrayviews.execution.local_sql import CannotRunLocally, run_sql

TEXTS = ["pq", "abcdef", "", None, "e\u0301x", "\U0001f1eb\U0001f1f7z"]  # a combining accent; a flag
POSITIONS = [-9, -2, -1, 0, 1, 2, 5, None]
LENGTHS = [-1, 0, 1, 3, 9, None]


_SPARK_TYPES = {pa.int64(): "BIGINT", pa.int32(): "INT", pa.string(): "STRING"}


def _spark_rows(spark, table: pa.Table, query: str) -> list[dict]:
    schema = ", ".join(f"{f.name} {_SPARK_TYPES[f.type]}" for f in table.schema)
    spark.createDataFrame(table.to_pylist(), schema=schema).createOrReplaceTempView("t")
    try:
        return [row.asDict() for row in spark.sql(query).collect()]
    finally:
        spark.catalog.dropTempView("t")


def test_substr_positions_and_lengths_are_sparks(spark):
    rows = list(itertools.product(TEXTS, POSITIONS, LENGTHS))
    table = pa.table(
        {
            "n": list(range(len(rows))),
            "s": pa.array([r[0] for r in rows], pa.string()),
            "p": pa.array([r[1] for r in rows], pa.int32()),
            "k": pa.array([r[2] for r in rows], pa.int32()),
        }
    )
    query = "SELECT n, substr(s, p, k) AS a, substr(s, p) AS b, substring(s, 0, 2) AS c FROM t ORDER BY n"
    assert run_sql(query, {"t": table}).to_pylist() == _spark_rows(spark, table, query)


def test_case_mapping_runs_here_for_ascii_and_is_left_to_spark_otherwise(spark):
    table = pa.table({"n": [0, 1, 2], "s": pa.array(["Ab-1", None, "zZ"], pa.string())})
    query = "SELECT n, upper(s) AS u, lower(s) AS l FROM t ORDER BY n"
    assert run_sql(query, {"t": table}).to_pylist() == _spark_rows(spark, table, query)
    for text in ("straße", "İstanbul"):  # Java's full case mapping: 'STRASSE', 'i̇stanbul'
        with pytest.raises(CannotRunLocally, match="non-ASCII"):
            run_sql("SELECT upper(s) AS u, lower(s) AS l FROM t", {"t": pa.table({"s": [text]})})


@pytest.mark.parametrize("expression", ["a DIV b", "a % b", "mod(a, b)"])
def test_a_zero_divisor_is_left_to_spark_which_raises(spark, expression):
    pairs = [(7, 2), (-7, 2), (7, -2), (-7, -2), (0, 5), (None, 3), (4, None)]
    table = pa.table(
        {
            "n": list(range(len(pairs))),
            "a": pa.array([p[0] for p in pairs], pa.int64()),
            "b": pa.array([p[1] for p in pairs], pa.int64()),
        }
    )
    query = f"SELECT n, {expression} AS x FROM t ORDER BY n"
    assert run_sql(query, {"t": table}).to_pylist() == _spark_rows(spark, table, query)
    zero = pa.table({"n": [0], "a": pa.array([10], pa.int64()), "b": pa.array([0], pa.int64())})
    with pytest.raises(CannotRunLocally, match="division by zero"):  # before: NULL, silently
        run_sql(query, {"t": zero})
