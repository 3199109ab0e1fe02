"""Scripts that mix every relation kind in one ``db.sql`` call, through the one statement language:
arrays, array views, streams, stream views and Spark SQL queries over them. References are plain
pandas computations over the rows inserted."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from arrayviews.model.errors import NotFoundError, ParseError, ValidationError

SCRIPT = """
CREATE ARRAY A <v:double> [i=1:6:3; j=1:4:2];
INSERT INTO A VALUES (1, 1, 1.5), (1, 2, -2.0), (2, 2, 4.0), (5, 3, 0.5);
CREATE ARRAY VIEW N AS SELECT count(*) AS cnt, sum(b.v) AS s FROM A a SIMILARITY JOIN A b
  WITH SHAPE L1(1) GROUP BY a.i, a.j;
CREATE STREAM M (ts timestamp, src string, loss int) PARTITION LENGTH 60 TIME COLUMN ts;
INSERT INTO M VALUES
  ('2015-01-01 00:00:10', 'x', 12), ('2015-01-01 00:00:20', 'y', 3),
  ('2015-01-01 00:01:10', 'x', 15), ('2015-01-01 00:02:30', 'x', 20),
  ('2015-01-01 00:02:40', 'y', 30), ('2015-01-01 00:03:05', 'y', 40);
CREATE VIEW Worst AS SELECT src, max(loss) AS m FROM M [WINDOW 2 MINUTES] GROUP BY src;
CREATE VIEW Totals WITH LATENESS 2 PARTS AS
  INITIALIZE Totals[i] AS SELECT src, sum(loss) AS total FROM M[i] GROUP BY src
  UPDATE Totals[j] AS SELECT src, sum(loss) AS total FROM M[j] GROUP BY src
  PARTITION LENGTH 60;
SHOW VIEWS
"""

ROWS = pd.DataFrame(
    {
        "ts": pd.to_datetime(
            [
                "2015-01-01 00:00:10",
                "2015-01-01 00:00:20",
                "2015-01-01 00:01:10",
                "2015-01-01 00:02:30",
                "2015-01-01 00:02:40",
                "2015-01-01 00:03:05",
            ]
        ),
        "src": ["x", "y", "x", "x", "y", "y"],
        "loss": [12, 3, 15, 20, 30, 40],
    }
)


def _part(times: pd.Series) -> pd.Series:
    return (times - pd.Timestamp("1970-01-01")) // pd.Timedelta(seconds=60)


@pytest.fixture
def scripted(db):
    views = db.sql(SCRIPT)
    return db, views


@pytest.mark.slow
def test_one_script_creates_every_relation_kind(scripted, tmp_path) -> None:
    db, views = scripted
    assert views.to_dict("list") == {
        "name": ["N", "Totals", "Worst"],  # stream views as created (lower case before round 27)
        "kind": ["array view", "stream view", "stream view"],
        "definition": views.definition.tolist(),
        "version": views.version.tolist(),
        "pending": [False, False, False],
    }
    relations = db.sql("SHOW RELATIONS")
    assert dict(zip(relations.name.str.lower(), relations.kind, strict=True)) == {
        "a": "array",
        "m": "stream",
        "n": "array view",
        "totals": "stream view",
        "worst": "stream view",
    }
    streams = db.sql("SHOW STREAMS")
    assert streams.to_dict("records")[0] | {"columns": None} == {
        "name": "M",
        "columns": None,
        "partition_length": 60,
        "time_column": "ts",
        "version": 1,
        "parts": 4,
    }
    assert list(db.sql("SHOW ARRAYS").name) == ["A"]

    # the stream views equal a recomputation over the rows (pandas)
    rows = ROWS.assign(part=_part(ROWS.ts))
    expected_totals = rows.groupby(["part", "src"]).loss.sum().reset_index()
    totals = db.sql("SELECT src, total, PART_TIMESTAMP FROM Totals").toPandas()
    totals["part"] = _part(totals.PART_TIMESTAMP.dt.tz_localize(None))
    got = totals.sort_values(["part", "src"])[["part", "src", "total"]].reset_index(drop=True)
    # a hand-written ViewDF starts at the newest part its sources have (paper 004)
    assert set(got.part) == {rows.part.max()}
    expected_totals = expected_totals[expected_totals.part.isin(set(got.part))]
    assert got.values.tolist() == expected_totals.values.tolist()

    # the last part of the 2-minute window: max(loss) over parts {newest - 1, newest}
    newest = rows.part.max()
    window = rows[rows.part >= newest - 1].groupby("src").loss.max().to_dict()
    worst = db.sql(f"SELECT src, m FROM Worst WHERE PART_TIMESTAMP = '{_timestamp(newest)}'").toPandas()
    assert dict(zip(worst.src, worst.m, strict=True)) == window
    _spark_sql_over_every_kind_and_errors(db, tmp_path)


def _timestamp(part: int) -> str:
    return str(pd.Timestamp("1970-01-01") + pd.Timedelta(seconds=60 * int(part)))


@pytest.mark.slow
def test_statements_mean_the_same_whatever_names_exist(db) -> None:
    """A stream called m does not turn an array query into Spark SQL (the old router did)."""
    db.sql("CREATE ARRAY A <m:int64> [i=1:4:2]; INSERT INTO A VALUES (1, 5), (2, -1), (3, 7)")
    before = db.sql("SELECT * FROM filter(A, m > 0)").to_pandas()
    db.sql("CREATE STREAM m (ts timestamp, x int) PARTITION LENGTH 60 TIME COLUMN ts")
    after = db.sql("SELECT * FROM filter(A, m > 0)").to_pandas()
    assert after.to_dict("list") == before.to_dict("list") == {"i": [1, 3], "m": [5, 7]}


def _spark_sql_over_every_kind_and_errors(db, tmp_path) -> None:
    # arrays are registered as one row per cell, streams with PART_TIMESTAMP
    joined = db.sql(
        "SELECT a.i, a.j, a.v, n.cnt FROM A a JOIN N n ON a.i = n.i AND a.j = n.j ORDER BY a.i, a.j"
    ).toPandas()
    assert joined.values.tolist() == [[1, 1, 1.5, 2], [1, 2, -2.0, 3], [2, 2, 4.0, 2], [5, 3, 0.5, 1]]
    per_source = db.sql("SELECT src, count(*) AS n, sum(loss) AS lost FROM M GROUP BY src ORDER BY src")
    expected = ROWS.groupby("src").loss.agg(["count", "sum"]).reset_index().values.tolist()
    assert per_source.toPandas().values.tolist() == expected
    with pytest.raises(NotFoundError, match="no relation named nowhere"):
        db.sql("SELECT * FROM nowhere JOIN M ON nowhere.x = M.loss")
    with pytest.raises(ValidationError, match="SELECT ... INTO stores array queries only"):
        db.sql("SELECT * INTO B FROM Worst")

    # LOAD into a stream appends a file's rows; a stream read by views cannot be dropped
    extra = pd.DataFrame(
        {"ts": pd.to_datetime(["2015-01-01 00:04:01"]), "src": ["z"], "loss": np.array([7], dtype=np.int32)}
    )
    path = tmp_path / "extra.parquet"
    extra.to_parquet(path)
    result = db.sql(f"LOAD M FROM '{path}'")
    assert result.rows == 1
    assert db.sql("SELECT count(*) AS n FROM M").toPandas().n.tolist() == [7]
    with pytest.raises(ValidationError, match="read by view"):
        db.sql("DROP STREAM M")
    with pytest.raises(ValidationError, match="is a stream view, not a stream"):
        db.sql("DROP STREAM Worst")

    # ALTER VIEW sets a stream view's lateness; array views have none
    assert db.stream_view("Totals").lateness_parts == 2
    db.sql("ALTER VIEW Totals SET LATENESS 7 PARTS")
    assert db.stream_view("Totals").lateness_parts == 7
    with pytest.raises(ValidationError, match="belongs to stream views"):
        db.sql("ALTER VIEW N SET LATENESS 1 PARTS")
    # ... and how many versions it keeps (stream_views/bounded_history.py)
    db.sql("ALTER VIEW Totals SET KEEP 12 VERSIONS")
    assert db.stream_view("Totals")._handle.table.properties["arrayviews.viewdf.keep-versions"] == "12"
    with pytest.raises(ValidationError, match="number of versions kept belongs to stream views"):
        db.sql("ALTER VIEW N SET KEEP 3 VERSIONS")
    for bad, found in (
        ("ALTER VIEW Totals SET KEEP 0 VERSIONS", "at least 1, got '0'"),
        ("ALTER VIEW Totals SET KEEP 3 PARTS", "counted in VERSIONS, got 'PARTS'"),
        ("ALTER VIEW Totals SET HOLD 3 VERSIONS", "LATENESS or KEEP, got 'HOLD'"),
    ):
        with pytest.raises(ParseError, match=found) as error:
            db.sql(bad)
        assert "line 1" in str(error.value)
    assert db.stream_view("Totals")._handle.table.properties["arrayviews.viewdf.keep-versions"] == "12"

    # EXPLAIN of a stream view, of an array query
    assert "final view" in db.sql(
        "EXPLAIN CREATE VIEW W2 AS SELECT src, sum(loss) FROM M [WINDOW 3 MINUTES] GROUP BY src"
    )
    assert "result schema: A<v:float64>" in db.sql("EXPLAIN SELECT * FROM filter(A, v > 0)")

    # DROP VIEW works for both kinds; then the stream can go
    db.sql("DROP VIEW Worst; DROP VIEW Totals; DROP VIEW N")
    assert db.sql("SHOW VIEWS").empty
    db.sql("DROP STREAM M")
    assert db.sql("SHOW STREAMS").empty


@pytest.mark.slow
def test_a_failing_script_stops_at_the_failing_statement(db) -> None:
    with pytest.raises(ParseError):  # a syntax error anywhere runs nothing
        db.sql("CREATE ARRAY A <v:double> [i=1:4:2]; CREATE STREAM S (ts timestamp) PARTITION LENGTH x")
    assert db.arrays() == [] and db.streams() == []
    with pytest.raises(ValidationError, match=r"statement at line 2"):
        db.sql(
            "CREATE STREAM S (ts timestamp, v int) PARTITION LENGTH 60 TIME COLUMN ts;\n"
            "INSERT INTO S VALUES ('2015-01-01 00:00:00', 'not a number')"
        )
    assert db.streams() == ["S"] and db.stream("S").version == 0
