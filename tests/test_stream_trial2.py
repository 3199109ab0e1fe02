"""Streams and their views tried a second time, where the first trial (test_stream_trial.py) did not
go: names readers reserve, patterns of every shape against a regular-expression search, HAVING,
group keys of NULL and floating point, Flink habits (PREV, LAST), and both executors side by side."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from pattern_reference import Pattern, Predicate, pattern_results

import arrayviews
from arrayviews.model.errors import ParseError, ValidationError

EPOCH = 1_420_070_400  # 2015-01-01 00:00 UTC, a whole minute
FIRST = EPOCH // 60  # its part number


@pytest.fixture(scope="module")
def scratch(spark, tmp_path_factory):
    """A function making a fresh warehouse (in-process unless told otherwise)."""
    made = iter(range(10**6))

    def make(execution: str = "local"):
        path = tmp_path_factory.mktemp("trial2") / f"warehouse{next(made)}"
        return arrayviews.connect(str(path), spark=spark, execution=execution)

    return make


def batch(rows: list[tuple], kind: pa.DataType = pa.int64(), keys: pa.DataType = pa.string()) -> pa.Table:
    """Rows ``(part, second, group, value)`` as an Arrow batch of the stream ``ts, g, v``."""
    return pa.table(
        {
            "ts": pa.array(
                [(60 * (FIRST + p) + s) * 10**6 for p, s, _, _ in rows], pa.timestamp("us", tz="UTC")
            ),
            "g": pa.array([g for _, _, g, _ in rows], keys),
            "v": pa.array([v for _, _, _, v in rows], kind),
        }
    )


def stream(db, kind: str = "bigint", keys: str = "string"):
    return db.create_stream("S", f"ts timestamp, g {keys}, v {kind}", partition_length=60, time_column="ts")


def shown(db, view: str, columns: list[str]) -> set[tuple]:
    """The view's rows as ``(part, *columns)``, read by SQL (numbers as Python ints where whole)."""
    listed = ", ".join(columns)
    rows = db.sql(f"SELECT unix_seconds(PART_TIMESTAMP) AS at, {listed} FROM {view}").collect()
    return {(row[0] // 60 - FIRST, *(_plain(v) for v in row[1:])) for row in rows}


def _plain(value):
    if hasattr(value, "as_integer_ratio") and not isinstance(value, float) and value == int(value):
        return int(value)  # DECIMAL(38,0) sums
    return value


def errors_of(result) -> list[str]:
    return [m.error for m in result.maintenance if m.error]


# -- 1. the name readers see each part's start under --------------------------------------------
def test_an_output_column_named_part_timestamp_is_refused_where_it_is_written(scratch) -> None:
    """Failed before: ``sum(v) AS PART_TIMESTAMP`` was accepted and the sums silently vanished
    (readers replace that column with the part's start time)."""
    db = scratch()
    s = stream(db)
    s.append(batch([(0, 0, "p", 5)]))
    statements = [
        ("SELECT g, sum(v) AS part_timestamp FROM S [WINDOW 2 MINUTES] GROUP BY g", 28),
        ("SELECT g, count(*) AS PART_TIMESTAMP FROM S PATTERN [a] WHERE a.v > 1 GROUP BY g", 28),
    ]
    for query, column in statements:
        with pytest.raises(ParseError, match=rf"'(?i:part_timestamp)' is reserved.* line 1, column {column}"):
            db.sql(f"CREATE VIEW w AS {query}")
    written = (
        "CREATE VIEW h AS\nINITIALIZE h[i] AS SELECT g, v AS Part_Timestamp FROM S[i]\n"
        "UPDATE h[j] AS SELECT g, v AS Part_Timestamp FROM S[j]\nPARTITION LENGTH 60"
    )
    with pytest.raises(ValidationError, match=r"view h: column name Part_Timestamp is reserved.*line 2, column 30"):
        db.sql(written)
    assert db.stream_views(helpers=True) == []
