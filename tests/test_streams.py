"""Streams and part tables: part numbers against Python's floor division, one snapshot per append, late
rows, reads by part range against pandas filters, per-part history, replace/retention commits,
rejected input, crash safety and commit conflicts."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlparse

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import types as T

from arrayviews.execution.part_jobs import SparkPartTable as PartTable
from arrayviews.model.errors import (
    AlreadyExistsError,
    CommitConflictError,
    NotFoundError,
    ParseError,
    ValidationError,
)
from arrayviews.model.faults import InjectedFault, inject
from arrayviews.storage.part_table import PART, format_parts, parse_parts
from arrayviews.stream import create_stream, drop_stream, open_stream, stream_names

LENGTH = 10  # seconds per part
SECOND = 1_000_000  # microseconds


def events(micros: list[int], first_id: int = 0) -> pd.DataFrame:
    """A batch of the ``events`` stream: times given in microseconds since 1970, ids from ``first_id``."""
    return pd.DataFrame(
        {
            "ts": pd.to_datetime(pd.Series(micros, dtype="int64"), unit="us", utc=True),
            "src": [f"s{k % 3}" for k in range(len(micros))],
            "loss": list(range(first_id, first_id + len(micros))),
        }
    )


def expected_part(micro: int, length: int = LENGTH) -> int:
    """The reference: Python's integer floor division, first to whole seconds, then to parts."""
    return (micro // SECOND) // length


def rows_of(frame) -> pa.Table:
    """A Spark frame's rows as Arrow, times as integer microseconds, sorted by id."""
    table = frame.toArrow()
    table = table.set_column(0, "ts", table.column("ts").cast(pa.int64()))
    return table.sort_by("loss")


def folder_files(table: PartTable) -> set[str]:
    folder = Path(urlparse(table.data_directory).path)
    return {p.name for p in folder.iterdir()} if folder.exists() else set()


def state(table: PartTable) -> tuple:
    """Everything a rejected or failed write must leave unchanged."""
    table.refresh()
    return (
        [(v.version, v.snapshot_id) for v in table.versions()],
        len(table.table.metadata.snapshots),
        sorted(table.all_files()),
        folder_files(table),
    )


@pytest.fixture
def stream(db):
    return create_stream(db, "Events", "ts timestamp, src string, loss int", LENGTH, "ts")


# -- part numbers -----------------------------------------------------------------------------------
def test_part_text_round_trips_runs_and_negative_parts() -> None:
    parts = [-7, -6, -5, -1, 0, 1, 2, 9, 12, 13]
    assert format_parts(parts) == "-7--5,-1-2,9,12-13"
    assert parse_parts(format_parts(parts)) == parts
    assert format_parts([]) == "" and parse_parts("") == []


def test_parts_are_floor_division_for_any_sign_and_at_boundaries(stream) -> None:
    micros = [
        -10 * SECOND - SECOND // 2,  # -10.5 s: second -11, part -2
        -10 * SECOND,
        -10 * SECOND + 1,
        -1,
        0,
        10 * SECOND - 1,
        10 * SECOND,
        25 * SECOND,
        1_700_000_000 * SECOND + 123_456,
        -100 * 365 * 86_400 * SECOND,
    ]
    # the batch spans 270 years of 10-second parts: far more than max_gap_parts, so allowed here
    result = stream.append(events(micros), allow_gap=True)
    expected = [expected_part(m) for m in micros]
    assert result.version == 1 and result.rows == len(micros) and result.late_parts == []
    assert result.parts == sorted(set(expected))

    rows = rows_of(stream.read())
    assert rows.column("ts").to_pylist() == micros
    assert rows.column(PART).to_pylist() == expected
    assert stream.part_range() == (min(expected), max(expected))

    # One file per part (a single batch), each holding rows of its part only.
    files = stream.table.all_files()
    assert len(files) == len(set(expected))
    for uri in files:
        assert len(set(pq.read_table(urlparse(uri).path).column(PART).to_pylist())) == 1


def test_each_append_is_one_snapshot_and_late_rows_go_to_their_old_parts(stream) -> None:
    first = [1 * SECOND, 12 * SECOND, 15 * SECOND, 29 * SECOND]  # parts 0, 1, 1, 2
    second = [11 * SECOND, 55 * SECOND]  # part 1 is late, part 5 is new
    one = stream.append(events(first))
    snapshots = len(stream.table.table.metadata.snapshots)
    two = stream.append(events(second, first_id=100))
    assert len(stream.table.table.metadata.snapshots) == snapshots + 1
    assert (one.version, one.parts, one.late_parts) == (1, [0, 1, 2], [])
    assert (two.version, two.parts, two.late_parts) == (2, [1, 5], [1])
    assert [(v.version, v.operation, v.parts) for v in stream.versions()] == [
        (1, "append", [0, 1, 2]),
        (2, "append", [1, 5]),
    ]

    table = stream.table
    assert table.changes_since(0) == [0, 1, 2, 5]
    assert table.changes_since(1) == [1, 5]
    assert table.changes_since(2) == []
    v1, v2 = (v.time for v in table.versions())
    assert table.part_updated() == {0: v1, 1: v2, 2: v1, 5: v2}

    reference = pd.concat([events(first), events(second, first_id=100)], ignore_index=True)
    reference["part"] = [expected_part(t.value // 1000) for t in reference["ts"]]
    for low, high in [(1, 1), (0, 2), (2, 5), (3, 4), (-5, 0), (-9, -1)]:
        rows = rows_of(stream.read(low, high))
        wanted = reference[(reference["part"] >= low) & (reference["part"] <= high)]
        assert rows.column("loss").to_pylist() == sorted(wanted["loss"])
        assert rows.column(PART).to_pylist() == list(wanted.sort_values("loss")["part"])
    assert stream.read(-9, -1).columns == ["ts", "src", "loss", PART]

    # The range comes from manifests alone: it survives the data files vanishing.
    for uri in table.all_files():
        Path(urlparse(uri).path).unlink()
    assert stream.part_range() == (0, 5)


def test_every_supported_type_round_trips(db) -> None:
    ddl = (
        "ts timestamp, b boolean, i int, l bigint, f float, d double, s string, day date, "
        "amount decimal(10,2), local timestamp_ntz"
    )
    stream = create_stream(db, "typed", ddl, 3600, "ts")
    batch = pa.table(
        {
            "ts": pa.array([0, -3_600_000_001, 7_200_000_000], pa.timestamp("us", tz="UTC")),
            "b": [True, None, False],
            "i": pa.array([1, -2, None], pa.int32()),
            "l": pa.array([10, 20, 30], pa.int64()),
            "f": pa.array([1.5, None, -0.25], pa.float32()),
            "d": [2.5, 3.5, None],
            "s": ["x", None, "zé"],
            "day": pa.array([dt.date(2020, 1, 1), None, dt.date(1960, 2, 29)], pa.date32()),
            "amount": pa.array([Decimal("1.25"), None, Decimal("-99999999.99")], pa.decimal128(10, 2)),
            "local": pa.array([1, None, 3], pa.timestamp("us")),
        }
    )
    result = stream.append(batch)
    assert result.parts == [-2, 0, 2]
    back = stream.read().toArrow().sort_by("l")
    assert back.drop_columns([PART]).equals(batch)


# -- part tables: replacing, retention, properties, conflicts ------------------------------------------
def test_replace_parts_drop_below_and_property_snapshots(db, spark) -> None:
    catalog = db.warehouse.catalog
    schema = T.StructType.fromDDL("k int, v double")
    table = PartTable.create(catalog, "views", "T", schema, 60, "viewdf", {"definition": "SELECT 1"})
    assert (table.kind, table.partition_length, table.table_properties["definition"]) == (
        "viewdf",
        60,
        "SELECT 1",
    )
    assert table.current_version() == 0 and table.part_range() is None and table.files_of_parts(0, 9) == []
    assert table.read_parts(spark, 0, 9).columns == ["k", "v", PART]

    def frame(rows: list[tuple[int, float, int]]):
        return spark.createDataFrame(pd.DataFrame(rows, columns=["k", "v", PART]), schema=table.read_schema)

    original = [(k, float(k), k // 2) for k in range(10)]  # parts 0..4, two rows each
    staged = table.stage(frame(original))
    assert sorted(s.part for s in staged) == [0, 1, 2, 3, 4] and sum(s.rows for s in staged) == 10
    assert table.commit(staged, operation="initialize", expected_version=0) == 1
    first_files = set(table.files_of_parts(0, 4))

    replacement = table.stage(frame([(100, -1.0, 2), (101, -2.0, 2)]))
    version = table.commit(
        replacement, replace_parts=[2, 3], drop_below=1, operation="update", expected_version=1
    )
    assert version == 2
    expected = sorted([r for r in original if r[2] in (1, 4)] + [(100, -1.0, 2), (101, -2.0, 2)])
    got = table.read_parts(spark, -10, 10).toPandas()
    assert sorted(got.itertuples(index=False, name=None)) == expected
    assert table.part_range() == (1, 4)
    last = table.versions()[-1]
    assert (last.operation, last.parts, last.dropped_below) == ("update", [2, 3], 1)
    times = {v.version: v.time for v in table.versions()}
    assert table.part_updated() == {1: times[1], 2: times[2], 3: times[2], 4: times[1]}
    assert set(table.files_of_parts(0, 4, version=1)) == first_files  # older versions stay readable
    by_part = table.files_by_part()
    assert sorted(by_part) == [1, 2, 4] and by_part[2] == [s.uri for s in replacement]
    assert table.read_files(spark, by_part[2]).count() == 2

    # Progress alone is recorded as its own snapshot; a commit with nothing at all makes none.
    snapshots = len(table.table.metadata.snapshots)
    files = sorted(table.all_files())
    assert table.commit([], operation="progress", properties={"next-part": "5"}, expected_version=2) == 3
    assert len(table.table.metadata.snapshots) == snapshots + 1 and sorted(table.all_files()) == files
    assert table.latest_properties() == {"next-part": "5"}
    assert table.versions()[-1].parts == [] and table.changes_since(2) == []
    assert table.commit([], operation="nothing", expected_version=3) == 3
    assert len(table.table.metadata.snapshots) == snapshots + 1

    reopened = PartTable.open(catalog, "views", "t")
    assert reopened.name == "T" and reopened.spark_schema == schema and reopened.current_version() == 3
    assert PartTable.names(catalog, "views") == ["T"] and PartTable.names(catalog, "views", "stream") == []
    folder = Path(urlparse(reopened.table.location()).path)
    reopened.drop()
    assert not PartTable.exists(catalog, "views", "T") and not folder.exists()


def test_commit_conflict_commits_nothing(stream, spark) -> None:
    stream.append(events([SECOND]))
    other = open_stream(stream.db, "events")
    other.append(events([2 * SECOND], first_id=1))  # moves the table to version 2 behind our back
    table = stream.table
    frame = spark.createDataFrame(
        pd.DataFrame({"ts": [pd.Timestamp(0, tz="UTC")], "src": ["x"], "loss": [9], PART: [0]}),
        schema=table.read_schema,
    )
    before = state(table)
    staged = table.stage(frame)
    with pytest.raises(CommitConflictError, match="version 2"):
        table.commit(staged, operation="append", expected_version=1)
    assert table.current_version() == 2
    table.discard(staged)
    assert state(table) == before
    assert not any(Path(urlparse(s.uri).path).exists() for s in staged)


# -- rejected input and crashes ---------------------------------------------------------------------
def test_rejected_batches_leave_the_stream_unchanged(stream, spark) -> None:
    stream.append(events([SECOND, 11 * SECOND]))
    before = state(stream.table)
    good = events([3 * SECOND])
    with_null_time = good.copy()
    with_null_time.loc[0, "ts"] = pd.NaT
    spark_null_time = spark.createDataFrame(
        [(None, "a", 1), (dt.datetime(2020, 1, 1, tzinfo=dt.UTC), "b", 2)],
        "ts timestamp, src string, loss int",
    )
    cases = [
        (good.drop(columns=["loss"]), "loss"),
        (good.assign(extra=1), "extra"),
        (good.assign(loss=["many"]), "loss"),
        (good.assign(loss=[2**40]), "loss"),
        (with_null_time, "ts"),
        (pa.table({"ts": ["1970-01-01"], "src": ["a"], "loss": [1]}), "ts"),
        (spark.createDataFrame([(0, "a", 1)], "ts bigint, src string, loss int"), "ts"),
        (
            spark.createDataFrame(
                [(dt.datetime(2020, 1, 1), "a", 1)], "ts timestamp, src string, loss bigint"
            ),
            "loss",
        ),
        (spark_null_time, "ts"),
        ([1, 2, 3], "Events"),
    ]
    for batch, column in cases:
        with pytest.raises(ValidationError, match=column):
            stream.append(batch)
        assert state(stream.table) == before, column


def test_empty_batches_commit_nothing(stream, spark) -> None:
    before = state(stream.table)
    assert stream.append(events([])).version == 0
    empty = spark.createDataFrame([], "ts timestamp, src string, loss int")
    assert stream.append(empty) == stream.append(events([]))
    assert state(stream.table) == before and stream.read().count() == 0


@pytest.mark.parametrize("point", ["stream.staged", "stream.before-commit"])
def test_a_crash_while_appending_leaves_no_version_and_no_files(stream, point) -> None:
    stream.append(events([SECOND]))
    before = state(stream.table)
    with inject(point), pytest.raises(InjectedFault):
        stream.append(events([2 * SECOND, 40 * SECOND], first_id=1))
    assert state(stream.table) == before
    assert stream.append(events([3 * SECOND], first_id=5)).version == 2


# -- creating, opening, dropping --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("schema", "length", "time_column", "error", "message"),
    [
        ("ts timestamp, src string", 10, "time", ValidationError, "time column time"),
        (
            "ts string, src string",
            10,
            "ts",
            ValidationError,
            "column ts: the time column must be a timestamp",
        ),
        ("ts timestamp", 0, "ts", ValidationError, "partition length"),
        ("ts timestamp", -5, "ts", ValidationError, "partition length"),
        ("ts timestamp", 1.5, "ts", ValidationError, "partition length"),
        ("ts timestamp", True, "ts", ValidationError, "partition length"),
        ("ts timestamp, _part bigint", 10, "ts", ValidationError, "_part"),
        ("ts timestamp, PART_TIMESTAMP timestamp", 10, "ts", ValidationError, "PART_TIMESTAMP"),
        ("ts timestamp, tags array<string>", 10, "ts", ValidationError, "column tags: type array<string>"),
        ("ts timestamp, a int, A int", 10, "ts", ValidationError, "column A appears twice"),
        ("ts timestamp, src strin", 10, "ts", ParseError, "line 1, column 19"),
    ],
)
def test_create_stream_rejects_bad_definitions(db, schema, length, time_column, error, message) -> None:
    with pytest.raises(error, match=message) as raised:
        create_stream(db, "bad", schema, length, time_column)
    assert "bad" in str(raised.value)
    assert stream_names(db) == []


def test_streams_are_created_listed_opened_and_dropped(stream, spark) -> None:
    db = stream.db
    with pytest.raises(AlreadyExistsError, match="events"):
        create_stream(db, "events", "ts timestamp", 5, "ts")
    create_stream(db, "other", T.StructType.fromDDL("at timestamp, n bigint, x double"), 60, "at")
    assert stream_names(db) == ["Events", "other"]

    other = open_stream(db, "OTHER")
    assert (other.name, other.partition_length, other.time_column) == ("other", 60, "at")
    assert other.schema == T.StructType.fromDDL("at timestamp, n bigint, x double")
    # Spark input may use narrower numeric types; they are widened.
    batch = spark.createDataFrame(
        [(dt.datetime(1970, 1, 1, 0, 2, tzinfo=dt.UTC), 7, 1.5)], "at timestamp, n int, x float"
    )
    assert other.append(batch).parts == [2]
    assert other.read().toPandas()[["n", "x", PART]].values.tolist() == [[7, 1.5, 2]]

    folder = Path(urlparse(other.table.table.location()).path)
    assert folder.exists()
    drop_stream(db, "other")
    assert not folder.exists() and stream_names(db) == ["Events"]
    with pytest.raises(NotFoundError, match="streams: Events"):
        open_stream(db, "other")
