"""``to_arrow(labels=True)`` and ``to_spark(labels=True)`` give each scaled dimension's coordinates
as ``to_pandas(labels=True)`` does (before, both gave only cell numbers, and Spark SQL over the same
array showed times). Checked against plain Python float and ``datetime`` arithmetic."""

from __future__ import annotations

import datetime as dt

import pytest

from arrayviews import ValidationError

ORIGIN = dt.datetime(2026, 1, 1, 6, 0)


@pytest.fixture(scope="module")
def grid(spark, tmp_path_factory):
    import arrayviews

    db = arrayviews.connect(str(tmp_path_factory.mktemp("labelled")), spark=spark, execution="local")
    db.sql(
        "CREATE ARRAY G <v:int> [time=0:*:4 SCALE -90 MINUTES OFFSET '2026-01-01T06:00'; "
        "lat=0:9:5 SCALE 0.1 OFFSET -0.3; i=0:3:4]"
    )
    cells = [(t, lat, i, 100 * t + 10 * lat + i) for t in (0, 1, 7) for lat in (0, 3, 9) for i in (0, 2)]
    db.sql("INSERT INTO G VALUES " + ", ".join(f"({t}, {lat}, {i}, {v})" for t, lat, i, v in cells))
    expected = sorted(
        (ORIGIN - dt.timedelta(minutes=90 * t), -0.3 + lat * 0.1, i, v) for t, lat, i, v in cells
    )
    return db, expected


def test_to_arrow_with_labels_gives_times_and_coordinates(grid):
    db, expected = grid
    table = db.array("G").to_arrow(labels=True)
    assert str(table.schema.field("time").type) == "timestamp[s, tz=UTC]"
    rows = zip(*(table.column(n).to_pylist() for n in ("time", "lat", "i", "v")), strict=True)
    assert sorted((t.replace(tzinfo=None), lat, i, v) for t, lat, i, v in rows) == expected
    assert db.array("G").to_arrow().column("time").to_pylist()[:1] == [0]  # cells without labels


def test_to_spark_with_labels_gives_what_to_arrow_gives(grid):
    db, expected = grid
    frame = db.array("G").to_spark(labels=True)
    assert dict(frame.dtypes) | {"v": None} == {
        "time": "timestamp",
        "lat": "double",
        "i": "bigint",
        "v": None,
    }
    assert sorted(tuple(r) for r in frame.collect()) == expected  # UTC: the session's zone
    assert sorted(r.lat for r in db.array("G").to_spark().select("lat").collect())[0] == 0


def test_times_finer_than_a_microsecond_are_refused_for_spark_by_name(grid):
    db, _ = grid
    db.sql("CREATE ARRAY N <v:int> [time=0:9:10 SCALE 500 NANOSECONDS OFFSET '2026-01-01T00:00']")
    db.sql("INSERT INTO N VALUES (3, 1)")
    with pytest.raises(ValidationError, match=r"array N, dimension time: .*microsecond"):
        db.array("N").to_spark(labels=True)
    (label,) = db.array("N").to_arrow(labels=True).column("time").to_pylist()
    assert label.value == 1_767_225_600_000_000_000 + 1500  # 2026-01-01T00:00 UTC + 3 * 500 ns
