"""Where ViewDF parts are built: a query without an in-process meaning runs on Spark and the step
says why; a BIGINT sum past 2**63 - 1 fails the view with Spark's error on both executors."""

from __future__ import annotations

import pandas as pd
import pytest

import arrayviews
from test_stream_views import EPOCH, M0, SCHEMA, Truth, contents, network


@pytest.fixture(params=["local", "spark"])
def db_on(request, spark, tmp_path):
    """(database, executor): stream views maintained in-process or on Spark (each test runs on both)."""
    return arrayviews.connect(
        str(tmp_path / "warehouse"), spark=spark, execution=request.param
    ), request.param


# -- where parts are built: queries DuckDB cannot run, sums past BIGINT -------------------------------
ROUNDED = """CREATE VIEW Rounded AS
INITIALIZE Rounded[i] AS SELECT src, loss, bround(loss / 4, 0) AS q FROM M[i]
UPDATE Rounded[j] AS SELECT src, loss, bround(loss / 4, 0) AS q FROM M[j]
PARTITION LENGTH 60"""


def test_a_query_without_an_in_process_meaning_runs_on_spark_and_says_why(spark, tmp_path) -> None:
    """bround (Spark's half-even rounding) has no DuckDB equal: with execution='local' the step
    still builds the parts, on Spark, and its report says why; values against Python's round."""
    db = arrayviews.connect(str(tmp_path / "warehouse"), spark=spark, execution="local")
    truth = Truth()
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    stream.append(truth.add(network([0])))
    db.sql(ROUNDED)
    result = stream.append(truth.add(network([1, 2])))
    (step,) = result.maintenance
    assert step.executor == "spark"
    assert "not in-process" in step.executor_reason and "bround" in step.executor_reason
    frame = db.stream_view("Rounded").to_pandas()
    rows = truth.rows()
    assert sorted(
        (s, int(v), float(q)) for s, v, q in frame[["src", "loss", "q"]].itertuples(index=False)
    ) == sorted((s, int(v), float(round(v / 4))) for s, v in rows[["src", "loss"]].itertuples(index=False))


BIG_TOTALS = """CREATE VIEW Totals AS
INITIALIZE Totals[i] AS SELECT g, sum(x) AS total FROM N[i-1 .. i] GROUP BY g
UPDATE Totals[j] AS SELECT g, sum(x) AS total FROM N[j-1 .. j] GROUP BY g
PARTITION LENGTH 60"""


def test_integer_sum_overflow_fails_the_view_on_both_executors(db_on) -> None:
    """A BIGINT sum past 2**63 - 1: the view fails with Spark's overflow error in-process too
    (DuckDB sums in 128 bits; the result does not fit the view's BIGINT column, so Spark runs the
    query and reports), never a wrapped total."""
    db, _ = db_on
    stream = db.create_stream("N", "ts timestamp, g string, x bigint", 60, "ts")

    def minute(m: int, x: int) -> pd.DataFrame:
        return pd.DataFrame({"ts": [pd.Timestamp(EPOCH + 60 * m, unit="s", tz="UTC")], "g": ["a"], "x": [x]})

    stream.append(minute(0, 5))
    db.sql(BIG_TOTALS)
    result = stream.append(minute(1, 2**63 - 10))  # parts 0..1: 2**63 - 5 fits
    assert not result.failed, result.failed
    assert contents(db, "Totals", (["g", "total"], ["total"])) == {M0: [("a", 5)], M0 + 1: [("a", 2**63 - 5)]}
    before = db.stream_view("Totals").status()
    result = stream.append(minute(2, 100))  # parts 1..2: 2**63 + 90 does not
    assert "ARITHMETIC_OVERFLOW" in result.failed.get("Totals", ""), result.failed
    after = db.stream_view("Totals").status()
    assert {k: v for k, v in after.items() if k != "failed"} == {
        k: v for k, v in before.items() if k != "failed"
    }
