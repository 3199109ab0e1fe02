"""Columns named by statement words (show, drop, insert, create, alter, grant, explain) read as
Spark reads them, anywhere in a cell expression, a condition or a Spark SQL query; and a SELECT
list may name dimensions. Results are checked against plain Python over the inserted rows."""

from __future__ import annotations

import pytest

from arrayviews import ValidationError
from arrayviews.model.expression_parser import parse_expression
from arrayviews.model.sql_dialect import parse_spark
from arrayviews.streams.sql import check_query

WORDS = ("show", "drop", "insert", "create", "alter", "grant", "explain", "uncache", "rollback")
ROWS = [(i, *(10 * i + k for k in range(len(WORDS)))) for i in range(1, 6)]


@pytest.fixture(scope="module")
def words_db(spark, tmp_path_factory):
    import arrayviews

    db = arrayviews.connect(str(tmp_path_factory.mktemp("words") / "warehouse"), spark=spark)
    attributes = ", ".join(f"{w}:int64" for w in WORDS)
    db.sql(f"CREATE ARRAY W <{attributes}>[i=0:9:4]")
    db.sql("INSERT INTO W VALUES " + ", ".join(str(row) for row in ROWS))
    return db


def _rows(result) -> list[dict]:
    frame = result.to_pandas() if hasattr(result, "to_pandas") else result.toPandas()
    return sorted(frame.to_dict("records"), key=lambda r: tuple(r.values()))


@pytest.mark.parametrize("word", WORDS)
def test_a_statement_word_is_a_column_in_a_condition_anywhere(words_db, word):
    """Before: ``show > 1`` read the rest after SHOW as one command string ("unexpected '> 1'"),
    and ``drop > 1``, ``insert = 30`` or ``1 + create`` were malformed."""
    k = WORDS.index(word) + 1
    threshold = 10 * 3 + k - 1
    got = _rows(words_db.sql(f"SELECT * FROM W WHERE {word} > {threshold} AND 1 + {word} > 0"))
    expected = [dict(zip(("i", *WORDS), row, strict=True)) for row in ROWS if row[k] > threshold]
    assert got == sorted(expected, key=lambda r: tuple(r.values()))


@pytest.mark.parametrize("word", ["drop", "show", "insert"])
def test_a_statement_word_is_a_column_in_a_spark_sql_select_list(words_db, word):
    """Before: ``SELECT i, drop * 2 AS d FROM W`` was refused ("malformed expression near 'drop'")."""
    k = WORDS.index(word) + 1
    got = _rows(words_db.sql(f"SELECT i, {word} * 2 AS d FROM W WHERE {word} >= 30"))
    assert got == [{"i": row[0], "d": row[k] * 2} for row in ROWS if row[k] >= 30]


def test_a_select_list_may_name_dimensions(words_db):
    """Before: ``SELECT i, show FROM W`` said "array W has no attribute 'i'"."""
    assert _rows(words_db.sql("SELECT i, show FROM W WHERE i > 3")) == [
        {"i": row[0], "show": row[1]} for row in ROWS if row[0] > 3
    ]
    assert _rows(words_db.sql("SELECT I FROM W")) == [{"i": row[0]} for row in ROWS]
    with pytest.raises(ValidationError, match="array W has no attribute 'nothing'"):
        words_db.sql("SELECT i, nothing FROM W")


def test_statements_stay_statements_and_query_words_keep_their_meaning():
    parse_expression("desc + pivot")  # names in a cell expression
    (query,) = parse_spark("SELECT i FROM t ORDER BY i DESC")
    assert query.args["order"].expressions[0].args["desc"] is True
    for statement in ("DROP TABLE t", "SHOW TABLES", "SELECT 1; DROP TABLE t", "INSERT INTO t SELECT 1"):
        with pytest.raises(ValidationError, match="query not accepted"):
            check_query(statement, {"t"})
