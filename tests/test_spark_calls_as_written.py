"""Spark SQL calls in statements reach Spark as written: sqlglot's Spark parser maps many function
names onto its own nodes and prints some back changed (``date_trunc('DAY', t)`` lost its unit,
``to_char(n, '999')`` became ``CAST(n AS STRING)``), so such a query was refused or silently
rewritten. Checked against the text written and, end to end, against Python's ``datetime``."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from sqlglot import exp

from arrayviews.execution.local_sql import CannotRunLocally, run_sql
from arrayviews.model.sql_dialect import parse_spark_query
from arrayviews.streams import literals

#: Calls whose string arguments sqlglot used to rewrite or lose (each refused or changed before).
CALLS = [
    "date_trunc('DAY', t)",
    "date_trunc('hour', t)",
    "trunc(d, 'MM')",
    "date_format(t, 'yyyy-MM-dd HH:mm')",
    "to_date(s, 'yyyy-MM-dd')",
    "to_timestamp(s, 'yyyy-MM-dd HH:mm')",
    "unix_timestamp(s, 'yyyy-MM-dd')",
    "from_unixtime(n, 'yyyy')",
    "get_json_object(s, '$.a')",
    "to_char(n, '999')",
    "initcap('ab')",
    "json_parse(s)",
    "from_utc_timestamp(t, 'Asia/Tokyo')",
    "regexp_extract(s, 'a(b)', 1)",
]
#: Calls the checks must still tell apart (aggregates, random functions, structs) and plain ones.
KEPT = ["count(*)", "sum(n)", "max(n)", "percentile_approx(n, 0.5)", "rand()", "element_at(m, 'k')"]


@pytest.mark.parametrize("call", CALLS + KEPT)
def test_a_call_prints_back_as_written(call):
    text = f"SELECT {call} AS x FROM T"
    protected, originals = literals.protect(text)
    printed = literals.restore(parse_spark_query(protected), originals).sql(dialect="spark")
    assert printed.lower() == text.lower()


def test_aggregates_are_still_aggregates():
    tree = parse_spark_query(
        "SELECT count(*), sum(n), collect_list(s), percentile_approx(n, 0.5), rand() FROM T"
    )
    kinds = [type(node) for node in tree.expressions]
    assert all(issubclass(kind, exp.AggFunc) for kind in kinds[:4]) and kinds[4] is exp.Rand


def test_a_viewdf_view_groups_by_a_truncated_time(db):
    """Before: CREATE VIEW refused date_trunc('MINUTE', ts) ("string literal not read as Spark
    reads it"); the view's rows are checked against Python's datetime."""
    db.sql("CREATE STREAM clicks (ts timestamp, n bigint) PARTITION LENGTH 3600 TIME COLUMN ts")
    db.sql(
        "CREATE VIEW per_minute AS "
        "INITIALIZE per_minute[i] AS SELECT date_trunc('MINUTE', ts) AS minute, "
        "date_format(ts, 'HH:mm') AS label, sum(n) AS total FROM clicks[i] GROUP BY 1, 2 "
        "UPDATE per_minute[j] AS SELECT date_trunc('MINUTE', ts) AS minute, "
        "date_format(ts, 'HH:mm') AS label, sum(n) AS total FROM clicks[j] GROUP BY 1, 2 "
        "PARTITION LENGTH 3600"
    )
    start = dt.datetime(2026, 3, 1, 10, 0, 0)
    rows = [(start + dt.timedelta(seconds=37 * k), k) for k in range(1, 12)]
    values = ", ".join(f"('{moment.isoformat(sep=' ')}', {n})" for moment, n in rows)
    db.sql(f"INSERT INTO clicks VALUES {values}")
    expected: dict[dt.datetime, int] = {}
    for moment, n in rows:
        minute = moment.replace(second=0)
        expected[minute] = expected.get(minute, 0) + n
    got = db.sql("SELECT minute, label, total FROM per_minute").collect()
    assert {(r.minute, r.label, r.total) for r in got} == {
        (minute, minute.strftime("%H:%M"), total) for minute, total in expected.items()
    }
    by_hour = db.sql("SELECT date_trunc('HOUR', ts) AS h, count(*) AS c FROM clicks GROUP BY 1").collect()
    assert [(r.h, r.c) for r in by_hour] == [(start, len(rows))]


@pytest.mark.parametrize(
    "call",
    [
        "trunc(CAST(ts AS DATE), 'MM')",
        "date_format(ts, 'yyyy-MM-dd EEEE QQQ')",  # fields time_formatting.py leaves to Spark
        "to_date(s, 'dd/MM/yyyy')",
        "to_char(n, '999')",
        "to_unix_timestamp(s, 'yyyy')",
        "from_utc_timestamp(ts, 'Asia/Tokyo')",
        "get_json_object(s, '$.a')",
    ],
)
def test_in_process_sql_leaves_format_calls_to_spark(call):
    """Before: sqlglot's DuckDB form ran in-process with another meaning (to_char as a CAST,
    to_date(s, fmt) as a lenient TRY_CAST without its format, 'MM' as DuckDB reads it)."""
    t = pa.table({"ts": pa.array([dt.datetime(2026, 3, 1, 10, 5)]), "s": ["01/03/2026"], "n": [7]})
    with pytest.raises(CannotRunLocally, match="only Spark"):
        run_sql(f"SELECT {call} AS x FROM t", {"t": t}, arrow_first=True)
