"""What LOAD got wrong for file formats (round 26), on both readers (``execution="local"``, read
in-process, and ``execution="spark"``): an uncertain array's empty text fields, times written as
text in Parquet, Parquet times in nanoseconds, and an adversarial pass (mixed and drifting folders,
zones in text times, floats in integer columns, empty and vanishing files). References are worked
out by hand from RFC 4180 and ISO 8601 with Python's datetime; every refused LOAD changes nothing."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import arrayviews
from arrayviews.execution import local_cells, local_rows
from arrayviews.model.errors import ArrayViewsError, NotFoundError, ValidationError

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
    row = texts.index(value) + 1  # the file's row of the first bad value, named since round 29
    assert errors[0].startswith(f"array bad_{name}, column {column}: {value!r} in {path} (data row {row}) is not ")
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


# -- 4. an adversarial pass: folders, empty and vanishing files ----------------------------------------
def _parquet(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


ONE = _parquet(pa.table({"i": [1], "v": [1.0]}))
FOLDERS = [
    # before: 'a Spark job failed: file:.../b.csv is not a Parquet file', naming no array
    ("mixed", {"a.parquet": ONE, "b.csv": b"i,v\n2,2.0\n"}, "b.csv is not a Parquet file"),
    ("zero_bytes", {"a.parquet": b""}, "a.parquet is not a Parquet file"),
    # before: 'a Spark job failed: [UNABLE_TO_INFER_SCHEMA] Unable to infer schema for Parquet'
    ("no_files", {"_SUCCESS": b"", ".hidden": ONE}, "holds no file to load"),
    # before: Spark took a.parquet's columns and dropped the three values of w in b.parquet
    (
        "column_drift",
        {
            "a.parquet": ONE,
            "b.parquet": _parquet(pa.table({"i": [4, 5, 6], "v": [4.0, 5, 6], "w": [5, 6, 7]})),
        },
        "a.parquet and .*b.parquet differ in their columns \\(column w is in one file only\\)",
    ),
    # before: 'missing dimension column 'i'', naming no file
    ("empty_csv", {"a.csv": b"", "b.csv": b"\n"}, "a.csv is empty"),
    # before: 'a Spark job failed: column: [v], physicalType: INT64, logicalType: int'
    (
        "type_drift",
        {"a.parquet": ONE, "b.parquet": _parquet(pa.table({"i": [2], "v": pa.array([2.0], pa.float32())}))},
        "column v is stored as DOUBLE NONE in one, FLOAT NONE in the other",
    ),
    # before: Spark read b.csv by a.csv's header: v and w of row 3 swapped, silently
    (
        "header_drift",
        {"a.csv": b"i,v,w\n1,1,5\n2,2,6\n", "b.csv": b"i,w,v\n3,7,3\n"},
        "header i,v,w and header i,w,v",
    ),
]


@pytest.mark.parametrize(("name", "files", "message"), FOLDERS, ids=[f[0] for f in FOLDERS])
def test_folders_spark_reads_wrongly_or_fails_on_are_refused_by_name(dbs, name, files, message) -> None:
    local, on_spark, root = dbs
    folder = root / f"folder_{name}"
    folder.mkdir()
    for file, data in files.items():
        (folder / file).write_bytes(data)
    form = "csv" if all(file.endswith(".csv") for file in files) else None
    errors = []
    for db in (local, on_spark):
        error = _refused(db, f"f_{name}", "<v:float64, w:int64 NULL>[i=0:9:5]", folder, form)
        assert isinstance(error, ValidationError)
        errors.append(str(error))
    assert errors[0] == errors[1]
    assert errors[0].startswith(f"array f_{name}: ")
    assert re.search(message, errors[0]), errors[0]
    if name == "header_drift":  # a stream's LOAD took a folder's columns by position too
        rows = root / "drifting_rows"
        rows.mkdir()
        (rows / "a.csv").write_text("ts,v,w\n2026-01-01 00:00:00,1,5\n2026-01-01 00:00:02,2,6\n")
        (rows / "b.csv").write_text("ts,w,v\n2026-01-01 00:00:01,7,3\n")
        for db in (local, on_spark):
            stream = db.create_stream("drift_rows", "ts timestamp, v bigint, w bigint", 60, "ts")
            with pytest.raises(ValidationError, match=r"^stream drift_rows: the files .*header ts,w,v"):
                stream.load(str(rows), "csv")
            assert stream.version == 0


def test_a_file_removed_while_it_is_loaded_is_named_and_nothing_is_loaded(dbs, monkeypatch) -> None:
    """Before: a file removed after the in-process reader listed the folder was skipped (Spark
    listed the folder again) and the rest loaded; removed after Spark listed it, 'a Spark job
    failed: File file:... does not exist', naming no array; a stream's CSV read in-process: a bare
    FileNotFoundError. Now one NotFoundError naming the array or stream and the file."""
    local, on_spark, root = dbs
    for db, executor in ((local, "local"), (on_spark, "spark")):
        folder = root / f"vanishing_{executor}"
        folder.mkdir()
        gone = folder / "a.parquet"
        pq.write_table(pa.table({"i": [1, 2], "v": [1.0, 2.0]}), gone)
        pq.write_table(pa.table({"i": [3], "v": [3.0]}), folder / "b.parquet")
        if executor == "local":  # removed between the listing and the reading of the file
            read = local_cells.parquet_table

            def removing(fs, path, read=read, gone=gone):
                gone.unlink(missing_ok=True)
                return read(fs, path)

            monkeypatch.setattr(local_cells, "parquet_table", removing)
        else:  # removed after Spark listed the folder, before its job reads it
            read = db.executors.spark.read_cell_files

            def removing(*args, read=read, gone=gone):
                frame = read(*args)
                gone.unlink()
                return frame

            monkeypatch.setattr(db.executors.spark, "read_cell_files", removing)
        array = db.create_array("vanishing<v:float64>[i=0:9:5]")
        with pytest.raises(
            NotFoundError, match=f"^array vanishing: {re.escape(str(gone))} was removed while"
        ):
            array.load(str(folder))
        monkeypatch.undo()
        assert array.versions().empty
    rows = root / "vanishing_rows.csv"
    rows.write_text("ts,v\n2026-01-01 00:00:00,2\n")
    fields = local_rows.csv_fields

    def removing_rows(fs, path):
        rows.unlink(missing_ok=True)
        return fields(fs, path)

    monkeypatch.setattr(local_rows, "csv_fields", removing_rows)
    stream = local.create_stream("vanishing_rows", "ts timestamp, v bigint", 60, "ts")
    with pytest.raises(
        NotFoundError, match=f"^stream vanishing_rows: {re.escape(str(rows))} was removed while"
    ):
        stream.load(str(rows))
    assert stream.version == 0


def test_an_uncertain_arrays_load_reads_text_times_as_insert_and_refuses_drifting_parquet(dbs) -> None:
    """Bugs of an uncertain array's LOAD: a CSV time naming its zone ('2026-01-01T06:00+01:00',
    which an array's LOAD and the INSERT statement read) failed with Arrow's 'cannot read ... as CSV:
    ... expected no zone offset', and Parquet text times were refused; a Parquet column of only some
    files of a folder was dropped (the dataset took the first file's columns: n read as missing);
    an empty folder was 'column x: missing column'. Reference: Python's datetime."""
    local, _, root = dbs
    texts = [
        "2026-01-01T06:00+01:00",
        " 2026-01-01 06:00 ",
        "2026-01-02",
        "2026-01-01T00:00:00.000000001Z",
        "",
    ]
    # Python's datetime holds no nanoseconds: the 1 ns of the fourth time is added below
    want = [
        dt.datetime.fromisoformat(t.strip().replace("Z", "+00:00").replace(".000000001", "")) if t else None
        for t in texts
    ]
    want = [None if w is None else (w if w.tzinfo else w.replace(tzinfo=dt.UTC)) for w in want]
    nanos = [
        None
        if w is None
        else (w - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1) * 1000
        for w in want
    ]
    nanos[3] += 1
    csv_path = root / "u_times.csv"
    csv_path.write_text("x,x_sigma,d\n" + "".join(f"{k}.0,0.5,{t}\n" for k, t in enumerate(texts)))
    parquet_path = root / "u_times.parquet"
    pq.write_table(
        pa.table({"x": [float(k) for k in range(5)], "x_sigma": [0.5] * 5, "d": texts}), parquet_path
    )
    got = []
    for form, path in (("csv", csv_path), ("parquet", parquet_path), ("insert", None)):
        local.sql(f"CREATE UNCERTAIN ARRAY u_times_{form} <d:datetime64 NULL> [x=0:9:5]")
        if path is None:
            rows = ", ".join(f"({k}.0, 0.5, {repr(t.strip()) if t else 'NULL'})" for k, t in enumerate(texts))
            local.sql(f"INSERT INTO u_times_insert (x, x_sigma, d) VALUES {rows}")
        else:
            local.sql(f"LOAD u_times_{form} FROM '{path}'")
        frame = local.uncertain_array(f"u_times_{form}").to_pandas().sort_values("x")
        got.append([None if pd.isna(d) else int(pd.Timestamp(d).value) for d in frame.d])
    assert got[0] == got[1] == got[2] == nanos
    bad = root / "u_bad_time.csv"
    bad.write_text("x,x_sigma,d\n1.0,0.5,2026-01-01\n2.0,0.5,noon\n")
    with pytest.raises(
        ValidationError, match=r"^uncertain array u_times_csv, column d: .*'noon'.*\(row 1 of "
    ):
        local.sql(f"LOAD u_times_csv FROM '{bad}'")
    folder = root / "u_drift"
    folder.mkdir()
    pq.write_table(pa.table({"x": [1.0], "x_sigma": [0.5]}), folder / "a.parquet")
    pq.write_table(
        pa.table({"x": [2.0, 3.0], "x_sigma": [0.5, 0.5], "d": ["2026-01-01", None]}), folder / "b.parquet"
    )
    with pytest.raises(
        ValidationError, match=r"^uncertain array u_times_csv: the files .* \(column d is in one"
    ):
        local.sql(f"LOAD u_times_csv FROM '{folder}'")
    (root / "u_empty").mkdir()
    with pytest.raises(ValidationError, match=r"^uncertain array u_times_csv: the folder .* holds no file"):
        local.sql(f"LOAD u_times_csv FROM '{root / 'u_empty'}'")
    assert local.uncertain_array("u_times_csv").version == 1


def test_a_streams_csv_times_naming_their_zone_after_the_minutes_are_read_as_an_arrays(dbs) -> None:
    """Bug: a stream's LOAD refused '2026-01-01T06:00+01:00' and '2026-01-01T06:00Z' ('is not a
    timestamp value': Spark's CSV parser reads a zone only after the seconds), which an array's LOAD
    reads; and times written as text in Parquet ('expected timestamp, got string'). Reference: Python's datetime (UTC unless the text names its zone); bad text is still
    named, and nothing is appended. The in-process reader leaves these texts to Spark's (one
    database runs both: its check of the files, then Spark's reading)."""
    local, _, root = dbs
    texts = [
        "2026-01-01T06:00+01:00",
        "2026-01-01T06:00Z",
        "2026-01-01 07:00:00",
        "2026-01-01T08:00:00-01:00",
    ]
    path = root / "zoned_rows.csv"
    path.write_text("ts,v\n" + "".join(f"{t},{k}\n" for k, t in enumerate(texts)))
    moments = [dt.datetime.fromisoformat(t.replace("Z", "+00:00")) for t in texts]
    want = [
        (m if m.tzinfo else m.replace(tzinfo=dt.UTC)).astimezone(dt.UTC).replace(tzinfo=None) for m in moments
    ]
    bad = root / "zoned_bad.csv"
    bad.write_text("ts,v\n2026-01-01T06:00Z,1\n2026-01-01T06:00+25:00,2\n")
    for db in (local,):
        stream = db.create_stream("zoned", "ts timestamp, v bigint", 60, "ts")
        stream.load(str(path))
        frame = stream.read().toPandas().sort_values("v")
        assert [pd.Timestamp(t).to_pydatetime() for t in frame.ts] == want
        # the same texts in Parquet (before: 'column ts: expected timestamp, got string')
        parquet = root / "zoned_rows.parquet"
        pq.write_table(pa.table({"ts": texts, "v": pa.array([10, 11, 12, 13], pa.int64())}), parquet)
        stream.load(str(parquet))
        frame = stream.read().toPandas().sort_values("v")
        assert [pd.Timestamp(t).to_pydatetime() for t in frame.ts] == want * 2
        with pytest.raises(ValidationError, match=r"^stream zoned, column ts: '2026-01-01T06:00\+25:00' in "):
            stream.load(str(bad))
        assert stream.version == 2


def test_a_streams_times_finer_than_a_microsecond_are_refused_not_cut(dbs) -> None:
    """Bug: '2026-01-01T06:00:00.1234567' was appended as 06:00:00.123456 (Spark's cast cuts the
    seventh digit; the in-process reader leaves such text to Spark's). Now it is refused, naming
    the value, and nothing is appended; trailing zeros past the sixth digit are exact and load.
    Reference: Python's datetime."""
    local, _, root = dbs
    exact = root / "fine_exact.csv"
    exact.write_text("ts,v\n2026-01-01T06:00:00.1234560,1\n2026-01-01 06:00:01.5,2\n")
    finer = root / "fine_cut.csv"
    finer.write_text("ts,v\n2026-01-01T06:00:02,3\n2026-01-01T06:00:00.1234567,4\n")
    stream = local.create_stream("fine", "ts timestamp, v bigint", 60, "ts")
    stream.load(str(exact))
    frame = stream.read().toPandas().sort_values("v")
    assert [pd.Timestamp(t).to_pydatetime() for t in frame.ts] == [
        dt.datetime(2026, 1, 1, 6, 0, 0, 123456),
        dt.datetime(2026, 1, 1, 6, 0, 1, 500000),
    ]
    with pytest.raises(ValidationError, match=r"'2026-01-01T06:00:00\.1234567' in .* is finer than a microsecond"):
        stream.load(str(finer))
    assert stream.version == 1 and stream.read().count() == 2


def test_files_whose_column_names_differ_only_in_case_still_load(dbs) -> None:
    """Not drift: Spark resolves a folder's columns without regard to case (in the same order for a
    CSV), so these folders load, by name (the in-process reader leaves them to Spark's, so one
    database runs both readers' checks)."""
    local, _, root = dbs
    texts = root / "cased_csv"
    texts.mkdir()
    (texts / "a.csv").write_text("I,V\n1,2\n")
    (texts / "b.csv").write_text("i,v\n3,4\n")
    tables = root / "cased_parquet"
    tables.mkdir()
    pq.write_table(pa.table({"i": [1], "v": [2]}), tables / "a.parquet")
    pq.write_table(pa.table({"V": [4], "i": [3]}), tables / "b.parquet")
    for folder, form in ((texts, "csv"), (tables, None)):
        array = local.create_array(f"{folder.name}<v:int64>[i=0:9:5]")
        array.load(str(folder), form)
        frame = array.to_pandas()
        assert sorted(zip(frame.i, frame.v, strict=True)) == [(1, 2), (3, 4)]
