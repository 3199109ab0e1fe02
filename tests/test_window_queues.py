"""Sliding windows with min or max keep a monotonic queue per group in the view's one table
(streams/windows.py): the entries no newer value beats, the summary row holding the newest. Checked
step by step against plain Python over the window's rows, with streams whose values fall (the queue
holds the whole window), rise (one entry), repeat (ties go to the newer) or are NULL, groups that
leave and come back, and the NULL group; on the in-process executor (Hypothesis) and on Spark."""

from __future__ import annotations

import math

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import arrayviews
from arrayviews.storage.files import read_parquet_files

EPOCH = 1_700_000_040  # a minute boundary
# (name, window in parts, query items): max alone, min and max of one column, and extremes beside sums
VIEWS = (
    ("one", 1, "max(x) AS hi"),
    ("four", 4, "max(x) AS hi, min(x) AS lo"),
    ("six", 6, "min(x) AS lo, max(x) AS hi, sum(x) AS total, count(*) AS n"),
)


def _reference(parts: list[list[tuple]], window: int, items: str) -> dict[int, set[tuple]]:
    """Per part, plain Python over the rows of the window's parts: each group with a row in it."""
    result = {}
    for part in range(len(parts)):
        groups: dict = {}
        for rows in parts[max(0, part - window + 1) : part + 1]:
            for g, x in rows:
                groups.setdefault(g, []).append(x)
        found = set()
        for g, values in groups.items():
            present = [v for v in values if v is not None]
            row = {
                "hi": max(present) if present else None,
                "lo": min(present) if present else None,
                "total": sum(present) if present else None,
                "n": len(values),
            }
            found.add((g, *(row[name] for name in _columns(items))))
        if found:
            result[EPOCH // 60 + part] = found
    return result


def _columns(items: str) -> list[str]:
    return [item.split(" AS ")[1] for item in items.split(", ")]


def _frame(part: int, rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "ts": pd.to_datetime([EPOCH + 60 * part + k for k in range(len(rows))], unit="s", utc=True),
            "g": pd.Series([g for g, _ in rows], dtype=object),
            "x": pd.array([x for _, x in rows], dtype="Int64"),
        }
    )


def _stored(db, name: str, columns: list[str]) -> dict[int, set[tuple]]:
    frame = db.stream_view(name).to_pandas()
    result: dict[int, set[tuple]] = {}
    stamps = pd.to_datetime(frame["PART_TIMESTAMP"]).dt.tz_localize(None)
    for stamp, row in zip(stamps, frame[["g", *columns]].itertuples(index=False, name=None), strict=True):
        part = int((stamp - pd.Timestamp(0)) // pd.Timedelta(seconds=60))
        values = tuple(
            None
            if (v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA)
            else int(v)
            if not isinstance(v, str)
            else v
            for v in row
        )
        result.setdefault(part, set()).add(values)
    return result


def _run(db, parts: list[list[tuple]]) -> None:
    stream = db.create_stream("S", "ts timestamp, g string, x bigint", 60, "ts")
    stream.append(_frame(0, parts[0]))
    for name, window, items in VIEWS:
        db.sql(
            f"CREATE VIEW {name} USING INCREMENTAL AS SELECT g, {items} FROM S [WINDOW {window} MINUTES] GROUP BY g"
        )
    assert db.stream_views(helpers=True) == sorted(name for name, _, _ in VIEWS)  # one table each
    for part in range(1, len(parts)):
        if parts[part]:
            stream.append(_frame(part, parts[part]))
    last = max(number for number, rows in enumerate(parts) if rows)  # the stream's newest part
    for name, window, items in VIEWS:
        expected = _reference(parts[: last + 1], window, items)
        got = _stored(db, name, _columns(items))
        assert sorted(got) == sorted(expected), name
        for part, rows in expected.items():
            assert sorted(got[part], key=repr) == sorted(rows, key=repr), (name, part)


@st.composite
def streams(draw) -> list[list[tuple]]:
    """Parts of (group, value) rows: values falling, rising, repeating or small and random, some
    NULL; the first part not empty (the views are built over it)."""
    trend = draw(st.sampled_from(["falling", "rising", "repeating", "random"]))
    count = draw(st.integers(2, 14))
    parts = []
    for part in range(count):
        rows = []
        for k in range(draw(st.integers(1 if part == 0 else 0, 4))):
            g = draw(st.sampled_from(["a", "b", None]))
            if draw(st.integers(0, 5)) == 0:
                x = None
            elif trend == "falling":
                x = 100 - 5 * part - k
            elif trend == "rising":
                x = 5 * part + k
            elif trend == "repeating":
                x = 7
            else:
                x = draw(st.integers(-3, 3))
            rows.append((g, x))
        parts.append(rows)
    return parts


@pytest.mark.slow
@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(parts=streams())
def test_queued_extremes_equal_plain_python_in_process(spark, tmp_path_factory, parts) -> None:
    db = arrayviews.connect(
        str(tmp_path_factory.mktemp("queues") / "warehouse"), spark=spark, execution="local"
    )
    _run(db, parts)


# a falling run fills the queue of a (the whole window), a rise empties it, b repeats one value,
# c has NULL values only, then leaves for longer than the window and comes back
FIXED = [
    [("a", 9), ("b", 5), ("c", None)],
    [("a", 8), ("b", 5)],
    [("a", 7), ("b", 5), ("c", None)],
    [("a", 6), (None, 3)],
    [("a", 5), ("b", 5)],
    [("a", 10)],
    [],
    [("a", 4), (None, None)],
    [("b", 1), ("c", 2)],
    [("a", 3), ("a", 11)],
]


@pytest.mark.slow
@pytest.mark.parametrize("execution", ["local", "spark"])
def test_queued_extremes_on_each_executor(spark, tmp_path, execution: str) -> None:
    db = arrayviews.connect(str(tmp_path / "warehouse"), spark=spark, execution=execution)
    _run(db, FIXED)
    # the queue of a held the falling run whole: at part 4, the summary row and the four earlier
    # values of the six-part window (9 .. 6, none beaten by a newer one)
    table = db.stream_view("six")._handle.table
    table.refresh()
    part = EPOCH // 60 + 4
    queued = read_parquet_files(table.files_of_parts(part, part))
    (row,) = [row for row in queued.to_pylist() if row["g"] == "a"]  # a row per group
    assert row["earlier_min_x"] == []
    assert row["earlier_max_x"] == [
        {"v": 9, "at": 1},
        {"v": 8, "at": 2},
        {"v": 7, "at": 3},
        {"v": 6, "at": 4},
    ]


def _spark_order(value: float) -> tuple:
    """Spark's order of doubles: NaN above every other value (+inf included)."""
    return (1, 0.0) if math.isnan(value) else (0, value)


def _arrow_part(number: int, rows: list[tuple], column: str) -> pa.Table:
    """Part ``number`` of (group, DOUBLE value) rows as Arrow, so that NaN stays NaN and None is NULL."""
    stamps = [(EPOCH + 60 * number + k) * 1_000_000 for k in range(len(rows))]
    return pa.table(
        {
            "ts": pa.array(stamps, pa.timestamp("us", "UTC")),
            "g": pa.array([g for g, _ in rows], pa.string()),
            column: pa.array([x for _, x in rows], pa.float64()),
        }
    )


def _read_reprs(db, name: str, columns: list[str]) -> dict[int, set]:
    """Per part (counted from EPOCH), the rows' group and the ``repr`` of ``columns``, read through
    Spark, whose rows keep NULL apart from NaN."""
    found: dict[int, set] = {}
    for row in db.stream_view(name).read().collect():
        stamp = pd.Timestamp(row["PART_TIMESTAMP"]).tz_localize(None)
        number = int((stamp - pd.Timestamp(0)) // pd.Timedelta(seconds=60)) - EPOCH // 60
        found.setdefault(number, set()).add((row["g"], *(repr(row[c]) for c in columns)))
    return found


def _window_values(parts: list[list[tuple]], number: int, window: int) -> dict:
    """Group -> the non-NULL values of the window of ``window`` parts ending at part ``number``."""
    groups: dict = {}
    for rows in parts[max(0, number - window + 1) : number + 1]:
        for g, x in rows:
            groups.setdefault(g, []).append(x)
    return {g: [v for v in values if v is not None] for g, values in groups.items()}


FLOATS = [
    [("a", 1.5), ("b", float("nan")), ("c", -0.0)],
    [("a", float("inf")), ("b", 2.0), ("c", None)],
    [("a", 3.0), ("b", float("-inf"))],
    [("a", float("nan")), ("b", 1.0)],
    [("a", 2.5), ("b", None)],
    [("a", 1.0), ("c", 0.0)],
]


@pytest.mark.slow
@pytest.mark.parametrize("execution", ["local", "spark"])
def test_queued_extremes_of_doubles_order_nan_above_infinity(spark, tmp_path, execution: str) -> None:
    """Extremes of a DOUBLE column (the in-process step runs on DuckDB: Acero refuses float
    extremes): NaN is above +inf, as Spark orders them, when it enters, is beaten and leaves."""
    db = arrayviews.connect(str(tmp_path / "warehouse"), spark=spark, execution=execution)
    stream = db.create_stream("F", "ts timestamp, g string, x double", 60, "ts")
    frames = [_arrow_part(part, rows, "x") for part, rows in enumerate(FLOATS)]
    stream.append(frames[0])
    db.sql(
        "CREATE VIEW fx USING INCREMENTAL AS SELECT g, max(x) AS hi, min(x) AS lo FROM F [WINDOW 3 MINUTES] GROUP BY g"
    )
    for frame in frames[1:]:
        stream.append(frame)
    found = _read_reprs(db, "fx", ["hi", "lo"])
    for part in range(len(FLOATS)):
        expected = set()
        for g, present in _window_values(FLOATS, part, 3).items():
            hi = max(present, key=_spark_order) if present else None
            lo = min(present, key=_spark_order) if present else None
            expected.add((g, repr(hi), repr(lo)))
        assert found[part] == expected, part


def test_explain_names_the_queue_and_no_helper() -> None:
    from arrayviews.language.parser import parse_statement
    from arrayviews.streams.translate import explain

    text = "CREATE VIEW w AS SELECT g, max(x) AS hi, count(*) AS n FROM S [WINDOW 5 MINUTES] GROUP BY g"
    shown = explain(parse_statement("EXPLAIN " + text), 60, types={"g": "string", "x": "bigint"})
    assert "min/max, one table: a monotonic queue per group" in shown
    assert "cumulative sums per epoch minus the part one window earlier" in shown  # count(*) beside it
    assert "w[j-1]" in shown and "w[j-5]" in shown and "__helper" not in shown
    alone = explain(parse_statement("EXPLAIN " + text.replace(", count(*) AS n", "")), 60)
    assert "w[j-5]" not in alone  # nothing to subtract: the part one window back is not read


FLOAT_SUMS = [
    [("a", 1e17), ("a", 1.0), ("b", float("nan"))],
    [("a", -1e17), ("b", 2.0)],
    [("a", 3.0), ("a", float("inf"))],
    [("a", 0.5), ("b", None)],
    [("a", 1e-3), ("a", -1e17)],
]


@pytest.mark.slow
@pytest.mark.parametrize("execution", ["local", "spark"])
def test_float_sums_beside_max_are_exact(spark, tmp_path, execution: str) -> None:
    """A float sum beside max (the queue's one table) is the exact sum of the window's values,
    rounded once (``math.fsum``), whatever large or infinite values left it; and such a view keeps
    the incremental plan. Before round 14 this window summed per-part sums with Spark's SUM: 0.0
    for 1e17 + 1 - 1e17."""
    db = arrayviews.connect(str(tmp_path / "warehouse"), spark=spark, execution=execution)
    stream = db.create_stream("F", "ts timestamp, g string, y double", 60, "ts")

    stream.append(_arrow_part(0, FLOAT_SUMS[0], "y"))
    db.sql("CREATE VIEW fw AS SELECT g, sum(y) AS s, max(y) AS hi FROM F [WINDOW 2 MINUTES] GROUP BY g")
    assert db.stream_view("fw").status()["plan"]["plan"] == "incremental"
    for number in range(1, len(FLOAT_SUMS)):
        stream.append(_arrow_part(number, FLOAT_SUMS[number], "y"))
    found = _read_reprs(db, "fw", ["s", "hi"])
    for number in range(len(FLOAT_SUMS)):
        expected = set()
        for g, present in _window_values(FLOAT_SUMS, number, 2).items():
            total = math.fsum(present) if present else None
            expected.add((g, repr(total), repr(max(present, key=_spark_order) if present else None)))
        assert found[number] == expected, number
