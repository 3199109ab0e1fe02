"""What LOAD got wrong for file formats (round 26), on both readers (``execution="local"``, read
in-process, and ``execution="spark"``): an uncertain array's empty text fields, times written as
text in Parquet, Parquet times in nanoseconds, and an adversarial pass (mixed and drifting folders,
zones in text times, floats in integer columns, empty and vanishing files). References are worked
out by hand from RFC 4180 and ISO 8601 with Python's datetime; every refused LOAD changes nothing."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import arrayviews
from arrayviews.model.errors import ArrayViewsError, ValidationError

TIMES = "t=0:*:8 SCALE 6 HOURS OFFSET '2026-01-01T00:00'"
ORIGIN = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def dbs(spark, tmp_path_factory):
    """A database whose LOADs run in-process and one whose LOADs run on Spark, and a folder."""
    root = tmp_path_factory.mktemp("load_formats")
    local = arrayviews.connect(str(root / "local"), spark=spark, execution="local")
    on_spark = arrayviews.connect(str(root / "spark"), spark=spark, execution="spark")
    return local, on_spark, root


def _cell(text: str) -> int:
    """The cell of an ISO time (UTC unless it names a zone) on the 6-hour scale, by Python's datetime."""
    moment = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    moment = moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)
    cells, rest = divmod(moment - ORIGIN, dt.timedelta(hours=6))
    assert not rest
    return cells


def _refused(db, name: str, schema: str, path: Path, form: str | None = None) -> ArrayViewsError:
    """The error of loading ``path`` into a new array, checked to have committed nothing."""
    array = db.create_array(f"{name}{schema}")
    with pytest.raises(ArrayViewsError) as caught:
        array.load(str(path), form)
    assert array.versions().empty
    return caught.value


# -- 1. an uncertain array's empty text field ----------------------------------------------------------
def test_an_empty_csv_field_of_a_text_is_missing_for_an_uncertain_array_as_for_an_array(dbs) -> None:
    """Bug: LOAD of an uncertain array read an empty field of a nullable string attribute as the
    empty text "", where an array's LOAD (both readers) and INSERT ... NULL give a null. Now: an
    empty field is missing, a quoted empty field ("") is the empty text, on both kinds of array."""
    local, on_spark, root = dbs
    folder = root / "texts"
    folder.mkdir()
    # two files (the second pass over the text columns must keep the rows of each)
    (folder / "a.csv").write_text('x,x_sigma,s,n\n1.0,0.5,,\n2.0,0.5,"",""\n')
    (folder / "b.csv").write_text("x,x_sigma,s,n\n3.0,0.5,a,7\n4.0,0.5, b ,\n")
    want = {1: None, 2: "", 3: "a", 4: " b "}  # RFC 4180, by hand
    local.sql("CREATE UNCERTAIN ARRAY u_texts <s:string NULL, n:int64 NULL> [x=0:9:5]")
    local.sql(f"LOAD u_texts FROM '{folder}' AS CSV")
    local.sql("INSERT INTO u_texts (x, x_sigma, s) VALUES (5.0, 0.5, NULL), (6.0, 0.5, '')")
    got = local.uncertain_array("u_texts").to_pandas()
    texts = {int(x): (None if s is None or s != s else s) for x, s in zip(got.x, got.s, strict=True)}
    assert texts == {**want, 5: None, 6: ""}
    assert [None if pd.isna(n) else int(n) for n in got.sort_values("x").n] == [
        None,
        None,
        7,
        None,
        None,
        None,
    ]
    for db in (local, on_spark):  # an array's LOAD of the same fields
        text = root / "texts_array.csv"
        text.write_text('x,s\n1,\n2,""\n3,a\n4, b \n')
        array = db.create_array("a_texts<s:string NULL>[x=0:9:5]")
        array.load(str(text))
        frame = array.to_pandas()
        assert {int(x): (None if pd.isna(s) else s) for x, s in zip(frame.x, frame.s, strict=True)} == want


def test_an_empty_text_field_of_a_text_that_is_not_nullable_is_refused(dbs) -> None:
    local, _, root = dbs
    path = root / "not_null.csv"
    path.write_text('x,x_sigma,s\n1.0,0.5,""\n2.0,0.5,\n')
    local.sql("CREATE UNCERTAIN ARRAY u_strict <s:string> [x=0:9:5]")
    with pytest.raises(ValidationError, match=r"uncertain array u_strict, column s: null in row 1"):
        local.sql(f"LOAD u_strict FROM '{path}'")
    assert local.uncertain_array("u_strict").version == 0


# -- 2. times written as text in Parquet ---------------------------------------------------------------
TEXT_TIMES = [
    "2026-01-01T06:00:00",
    " 2026-01-02 ",
    "3",
    "2026-01-01T18:00+06:00",
    "2026-01-02T00:00:00-06:00",
]
TEXT_STAMPS = ["2026-01-01", None, "2026-01-01T00:00:00.5Z", "", "2026-03-01 01:02"]


def test_parquet_times_written_as_text_are_read_as_a_csvs(dbs) -> None:
    """Bug: a Parquet time column holding ISO text was refused on a time dimension ('coordinates
    must be integers, got string') and for a datetime64 attribute by both readers, while the same
    text in a CSV was read. Now both readers read it as the CSV's fields: a cell number, or a time
    (UTC unless it names its zone) labelling a cell; the column matched without regard to case."""
    local, on_spark, root = dbs
    path = root / "text_times.parquet"
    table = pa.table({"T": TEXT_TIMES, "v": [1.0, 2.0, 3.0, 4.0, 5.0], "d": TEXT_STAMPS})
    pq.write_table(table, path)
    frames = []
    for db, executor in ((local, "local"), (on_spark, "spark")):
        array = db.create_array(f"text_times<v:float64, d:datetime64 NULL>[{TIMES}]")
        result = array.load(str(path))
        assert result.executor == executor
        frames.append(array.to_pandas().sort_values("t").reset_index(drop=True))
    pd.testing.assert_frame_equal(frames[0], frames[1])
    want = {
        (int(text) if text.isdigit() else _cell(text)): v
        for text, v in zip(TEXT_TIMES, table["v"].to_pylist(), strict=True)
    }
    assert dict(zip(frames[0].t, frames[0].v, strict=True)) == want
    stamps = {
        v: None
        if not s
        else pd.Timestamp(dt.datetime.fromisoformat(s.replace("Z", "+00:00")).replace(tzinfo=None))
        for v, s in zip(table["v"].to_pylist(), TEXT_STAMPS, strict=True)
    }
    assert {v: (None if pd.isna(d) else d) for v, d in zip(frames[0].v, frames[0].d, strict=True)} == stamps


@pytest.mark.parametrize(
    ("name", "column", "texts", "value"),
    [
        ("off_grid", "t", ["2026-01-01T06:00", "2026-01-01T06:01Z", "no"], "2026-01-01T06:01Z"),
        ("stamp", "d", ["x"], "x"),
    ],
)
def test_bad_text_times_in_parquet_are_refused_as_in_a_csv(dbs, name, column, texts, value) -> None:
    local, on_spark, root = dbs
    path = root / f"bad_{name}.parquet"
    n = len(texts)
    columns = {"t": [str(k) for k in range(n)], "d": ["2026-01-01"] * n, column: texts}
    pq.write_table(pa.table(columns), path)
    errors = [
        str(_refused(db, f"bad_{name}", f"<d:datetime64 NULL>[{TIMES}]", path)) for db in (local, on_spark)
    ]
    assert errors[0] == errors[1]
    count = 2 if name == "off_grid" else 1
    assert errors[0].startswith(f"array bad_{name}, column {column}: {value!r} in {path} is not ")
    assert errors[0].endswith(f"({count} such value(s))")


# -- 3. Parquet times in nanoseconds -------------------------------------------------------------------
def test_parquet_times_in_nanoseconds_are_refused_naming_the_file_and_column(dbs) -> None:
    """Bug: a Parquet file of times in nanoseconds (pyarrow's for numpy's
    datetime64[ns], pandas' before 3.0) failed on both readers with
    Spark's 'a Spark job failed: [PARQUET_TYPE_ILLEGAL] Illegal Parquet type: INT64
    (TIMESTAMP(NANOS,false))', naming no array, stream, file or column. Now one ValidationError
    naming them and saying how to write the file; the advice works."""
    local, on_spark, root = dbs
    folder = root / "nanos"
    folder.mkdir()
    good = pa.table({"t": pa.array([ORIGIN.replace(tzinfo=None)], pa.timestamp("us")), "v": [1.0]})
    pq.write_table(good, folder / "a.parquet")
    nanos = pa.table({"t": pa.array(np.array(["2026-01-01T06:00"], "datetime64[ns]")), "v": [2.0]})
    pq.write_table(nanos, folder / "b.parquet")  # pyarrow's default for numpy's nanoseconds
    for db in (local, on_spark):
        error = _refused(db, "nanos", f"<v:float64>[{TIMES}]", folder)
        assert isinstance(error, ValidationError)
        assert str(error).startswith(
            f"array nanos, column t: {folder / 'b.parquet'} stores its times in nanoseconds"
        )
        stream = db.create_stream("nano_rows", "t timestamp, v double", 60, "t")
        with pytest.raises(
            ValidationError, match=r"^stream nano_rows, column t: .*b\.parquet stores its times"
        ):
            stream.load(str(folder / "b.parquet"))
        assert stream.version == 0
    pq.write_table(nanos, folder / "b.parquet", coerce_timestamps="us")  # as the message says
    for db, executor in ((local, "local"), (on_spark, "spark")):
        array = db.array("nanos")
        assert array.load(str(folder)).executor == executor
        assert sorted(array.to_pandas().t) == [0, 1]
