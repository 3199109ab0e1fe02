"""In-process DECIMAL arithmetic equals Spark's (ANSI) exactly, value and type, or is refused
(``CannotRunLocally``, so Spark runs it): avg, sum, ``/ * + -`` on adversarial decimals (both signs,
HALF_UP halfway cases, the largest values of their type), against the shared Spark session and
Python's ``decimal`` sums."""

from __future__ import annotations

from decimal import Context, Decimal, localcontext

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arrayviews.execution.local_sql import CannotRunLocally, run_sql
from arrayviews.streams import exact_sums

TYPES = [(10, 2), (38, 0), (38, 10), (20, 10), (6, 6)]
QUERIES = [
    "SELECT g, avg(v) AS r FROM t GROUP BY g",
    "SELECT g, sum(v) AS r FROM t GROUP BY g",
    "SELECT g, sum(v) OVER (PARTITION BY g) AS r FROM t",
    "SELECT g, v / w AS r FROM t",
    "SELECT g, v * w AS r FROM t",
    "SELECT g, v + w AS r FROM t",
    "SELECT g, v - w AS r FROM t",
    "SELECT g, v / 3 AS r FROM t",
    "SELECT g, v * 1.5 AS r FROM t",
]


@st.composite
def decimals(draw, precision: int, scale: int) -> Decimal:
    """A value of DECIMAL(precision, scale): near its bounds, a HALF_UP halfway case, or any."""
    top = 10**precision - 1
    unscaled = draw(
        st.one_of(
            st.integers(-top, top),
            st.sampled_from([top, -top, top - 1, 1, -1, 0, 5, -5, 15, 25, 10**precision // 2]),
            st.integers(-99, 99).map(lambda k: k * 10 + 5),  # ...5 in the last place
        )
    )
    return Decimal(f"{max(-top, min(top, unscaled))}e-{scale}")  # exact (no context rounding)


@st.composite
def cases(draw):
    precision, scale = draw(st.sampled_from(TYPES))
    rows = draw(
        st.lists(
            st.tuples(st.sampled_from("ab"), decimals(precision, scale), decimals(precision, scale)),
            min_size=1,
            max_size=4,
        )
    )
    return precision, scale, rows, draw(st.sampled_from(QUERIES))


def _spark_rows(spark, query: str, precision: int, scale: int, rows: list[tuple]):
    kind = f"DECIMAL({precision},{scale})"
    values = ", ".join(f"('{g}', CAST('{v}' AS {kind}), CAST('{w}' AS {kind}))" for g, v, w in rows)
    frame = spark.sql(query.replace("FROM t", f"FROM VALUES {values} AS t(g, v, w)"))
    return frame.collect(), frame.schema["r"].dataType


@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(case=cases(), arrow_first=st.booleans())
def test_in_process_decimals_equal_spark_or_are_refused(spark, case, arrow_first) -> None:
    from pyspark.errors import PySparkException

    precision, scale, rows, query = case
    kind = pa.decimal128(precision, scale)
    table = pa.table(
        {
            "g": [g for g, _, _ in rows],
            "v": pa.array([v for _, v, _ in rows], kind),
            "w": pa.array([w for _, _, w in rows], kind),
        }
    )
    try:
        local = run_sql(
            query, {"t": table}, exact_sums.LOCAL_FUNCTIONS, exact_sums.LOCAL_MACROS, arrow_first=arrow_first
        )
    except CannotRunLocally:
        return  # Spark runs it
    try:
        expected, spark_type = _spark_rows(spark, query, precision, scale, rows)
    except PySparkException as error:
        pytest.fail(f"in-process gave {local.to_pylist()} where Spark raised {str(error)[:200]}")
    # the view's column has Spark's type: the in-process value is cast to it (refused if it does
    # not fit exactly, as execution/local_sql's callers do) and must equal Spark's
    target = pa.decimal128(spark_type.precision, spark_type.scale)
    got = local.column("r").cast(target, safe=True).to_pylist()
    assert sorted(zip(local.column("g").to_pylist(), got, strict=True)) == sorted(
        (r.g, r.r) for r in expected
    )
    if "sum(v)" in query:  # and both equal the exact sum (Python decimals, no context rounding)
        with localcontext(Context(prec=80)):
            for g, total in zip(local.column("g").to_pylist(), got, strict=True):
                assert total == sum((v for h, v, _ in rows if h == g), Decimal(0))


def test_a_decimal_average_and_division_run_on_spark() -> None:
    table = pa.table({"v": pa.array([Decimal("1.25"), Decimal("99999999.99")], pa.decimal128(10, 2))})
    for query in [
        "SELECT avg(v) AS a FROM t",
        "SELECT v / 2 AS a FROM t",
        "SELECT sum(v) / count(v) AS a FROM t",
    ]:
        with pytest.raises(CannotRunLocally, match="division or average of a DECIMAL"):
            run_sql(query, {"t": table})


def test_a_decimal_sum_past_38_digits_is_refused_never_returned() -> None:
    table = pa.table({"v": pa.array([Decimal(6 * 10**37)] * 2, pa.decimal128(38, 0))})
    with pytest.raises(CannotRunLocally, match="DECIMAL sum past 38 digits"):
        run_sql("SELECT sum(v) AS s FROM t", {"t": table})
    small = pa.table({"v": pa.array([Decimal(4 * 10**37)] * 2, pa.decimal128(38, 0))})
    assert run_sql("SELECT sum(v) AS s FROM t", {"t": small}).to_pylist() == [{"s": Decimal(8 * 10**37)}]


def test_integer_division_still_runs_in_process() -> None:
    table = pa.table(
        {"i": pa.array([1, 2], pa.int64()), "v": pa.array([Decimal(1)] * 2, pa.decimal128(5, 0))}
    )
    assert run_sql("SELECT i / 2 AS h FROM t", {"t": table}).to_pylist() == [{"h": 0.5}, {"h": 1.0}]
