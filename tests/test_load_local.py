"""LOAD of small files without Spark (issue 11): the same files loaded with ``execution="local"``
(read in-process by execution/local_cells.py) and ``execution="spark"`` give identical cells and
rows, and identical errors for bad files; Spark is the reference, and a plain-Python one (the csv
module, Python numbers) for the CSV fields. A LOAD of a small CSV in a fresh process starts no Spark."""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import arrayviews
from arrayviews.execution import local_rows
from arrayviews.model.errors import ArrayViewsError

TIMES = "t=0:*:8 SCALE 6 HOURS OFFSET '2026-01-01T00:00'"

#: CSV records (the fields as written in the file) and the cells they stand for, worked out by hand
#: from RFC 4180 and Spark's casts: (i, t cell, s, n, f, g, b, k, u).
ROWS = [
    (["0", "0", '""', "1", "2.5", "0.1", "true", "-128", "255"], (0, 0, "", 1, 2.5, 0.1, True, -128, 255)),
    (["1", " 3 ", "", "", "", "", "", "", ""], (1, 3, None, None, None, None, None, None, None)),
    (
        ["2", "2026-01-01T06:00Z", '"a\r\nb"', " -4 ", "nan", "1e39", "N", "127", "0"],
        (2, 1, "a\r\nb", -4, math.nan, math.inf, False, 127, 0),
    ),
    (
        ["3", "2026-01-01 12:00", '"x,""y"""', "+7", "-Infinity", "3.4028235e38", "YES", "0", "1"],
        (3, 2, 'x,"y"', 7, -math.inf, 3.4028235e38, True, 0, 1),
    ),
    (
        ["4", "2026-01-02T00:00:00+06:00", " pad ", "  ", "1e400", "-0", "f", " 5 ", "7"],
        (4, 3, " pad ", None, math.inf, -0.0, False, 5, 7),
    ),
    (
        ["5", "2026-01-03", '"two\nlines, ""quoted"""', "9223372036854775807", ".5", "16777217", "0", "-1", " 200 "],
        (5, 8, 'two\nlines, "quoted"', 2**63 - 1, 0.5, 16777216.0, False, -1, 200),
    ),
    (
        # just above the midpoint of 1 and the next float32: one rounding (Java's) goes up, two go down
        [" 6 ", "2026-01-02T18:00:00.000000Z", "plain", "-9223372036854775808", "1E-5",
         "1.0000000596046447753906251", "no", "", ""],
        (6, 7, "plain", -(2**63), 1e-5, 1 + 2**-23, False, None, None),
    ),
]  # fmt: skip
#: A datetime64 attribute's field per record and the time it stands for (UTC): by hand.
TIMES_OF = [
    ("2026-01-01 06:00:00", "2026-01-01T06:00"),
    ("", None),
    ("2026-01-02T06:00Z", "2026-01-02T06:00"),
    ("2026-01-01T00:00:00.5+01:00", "2025-12-31T23:00:00.5"),
    (" 2026-03-04 ", "2026-03-04"),
    ("1969-12-31 23:59:59.999999", "1969-12-31T23:59:59.999999"),
    ("2026-01-01T00:00", "2026-01-01"),
]
SCHEMA = (
    "<s:string NULL, n:int64 NULL, f:float64 NULL, g:float32 NULL, b:bool NULL, k:int8 NULL, u:uint8 NULL, "
    "d:datetime64 NULL>"
)


@pytest.fixture(scope="module")
def dbs(spark, tmp_path_factory):
    """Two databases on one warehouse each: every LOAD in-process, and every LOAD on Spark."""
    root = tmp_path_factory.mktemp("load_local")
    local = arrayviews.connect(str(root / "local"), spark=spark, execution="local")
    on_spark = arrayviews.connect(str(root / "spark"), spark=spark, execution="spark")
    return local, on_spark, root


def _csv(records: list[list[str]], header: str = "i,t,s,n,f,g,b,k,u,d") -> bytes:
    return (header + "\n" + "\n".join(",".join(r) for r in records) + "\n").encode()


def _both(
    dbs, name: str, schema: str, path: Path, form: str | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The cells of ``path`` loaded in-process and on Spark, each checked to have run where asked."""
    local, on_spark, _ = dbs
    frames = []
    for db, executor in ((local, "local"), (on_spark, "spark")):
        array = db.create_array(f"{name}{schema}")
        result = array.load(str(path), form)
        assert (result.executor, result.committed) == (executor, True), result.message
        frame = array.to_pandas()
        frames.append(frame.sort_values(list(array.dims)).reset_index(drop=True))
    pd.testing.assert_frame_equal(frames[0], frames[1])
    return frames[0], frames[1]


def test_csv_fields_match_spark_and_plain_python(dbs) -> None:
    """Quotes, doubled quotes, quoted line breaks, nulls and empty texts, spaces, special floats,
    float32 rounding, narrow integers, and time-labelled cells (a cell number or ISO times)."""
    _, _, root = dbs
    path = root / "edges.csv"
    path.write_bytes(_csv([[*fields, d] for (fields, _), (d, _) in zip(ROWS, TIMES_OF, strict=True)]))
    # the file says what ROWS say: the csv module splits it into the same texts (nulls as "")
    with path.open(newline="") as handle:
        parsed = list(csv.reader(handle))[1:]
    assert [row[2] for row in parsed] == ["" if cells[2] is None else cells[2] for _, cells in ROWS]
    local, _ = _both(dbs, "edges", f"{SCHEMA}[i=0:99:10; {TIMES}]", path)
    got = {int(r.i): r for r in local.itertuples()}
    for (_, (i, t, s, n, f, g, b, k, u)), (_, d) in zip(ROWS, TIMES_OF, strict=True):
        row = got[i]
        assert (pd.isna(row.d) and d is None) or row.d == pd.Timestamp(d)
        assert row.t == t
        assert (None if pd.isna(row.s) else row.s) == s
        for value, want in ((row.n, n), (row.b, b), (row.k, k), (row.u, u)):
            assert (None if pd.isna(value) else value) == want
        assert _same(row.f, f) and _same(row.g, None if g is None else np.float32(g))


def _same(value, want) -> bool:
    """Equal floats (of the same width), both NaN, or both null."""
    if want is None or pd.isna(want):
        return pd.isna(value) if want is None else bool(np.isnan(value))
    return type(value)(want) == value


def test_parquet_folder_gzip_csv_and_hidden_files(dbs) -> None:
    """A Parquet folder (two files, nullable columns, times on a time dimension, a _SUCCESS and a
    hidden file Spark skips) and a CSV folder with a gzip file (CRLF lines) give the same cells on
    both engines."""
    _, _, root = dbs
    folder = root / "parquet"
    folder.mkdir()
    times = pa.array(
        np.array(["2026-01-01T00:00", "2026-01-01T06:00", "2026-01-03T18:00"], "datetime64[us]"),
        pa.timestamp("us", "UTC"),
    )
    big = pa.table(
        {
            "i": pa.array([1, 2, 3], pa.int16()),
            "T": times,
            "v": pa.array([1.5, None, math.nan]),
            "w": pa.array([None, 7, -3], pa.int32()),
            "s": pa.array(["a", None, ""]),
        }
    )
    pq.write_table(big, folder / "part-0.parquet")
    pq.write_table(big.slice(0, 1).set_column(0, "i", pa.array([9], pa.int16())), folder / "part-1.parquet")
    (folder / "_SUCCESS").write_bytes(b"")
    (folder / ".notes").write_bytes(b"not parquet")
    local, _ = _both(
        dbs, "pq_in", f"<v:float64 NULL, w:int64 NULL, s:string NULL>[i=0:99:10; {TIMES}]", folder
    )
    assert sorted(zip(local.i, local.t, strict=True)) == [(1, 0), (2, 1), (3, 11), (9, 0)]
    assert local.w.isna().tolist() == [True, False, False, True]

    texts = root / "csv_folder"
    texts.mkdir()
    (texts / "a.csv").write_bytes(b"i,v\n1,10\n2,\n")
    (texts / "b.csv.gz").write_bytes(gzip.compress(b'i,v\r\n3,"30"\r\n4, -40 \r\n5,50\r\n'))
    (texts / "_SUCCESS").write_bytes(b"")
    (texts / ".c.csv").write_bytes(b"i,v\n6,60\n")
    local, _ = _both(dbs, "csv_dir", "<v:int32 NULL>[i=0:9:5]", texts, "csv")
    assert local.v.tolist()[:1] == [10] and local.i.tolist() == [1, 2, 3, 4, 5]


BAD = [
    ("bad_text", "<n:int8>[i=0:9:5]", {"x.csv": b"i,n\n1,x\n2,300\n3,4\n"}, None),
    ("outside", "<n:int8>[i=0:9:5]", {"x.csv": b"i,n\n1,1\n12,2\n-1,3\n"}, None),
    ("nulls", "<n:int8>[i=0:9:5]", {"x.csv": b"i,n\n1,1\n2,\n3,\n"}, None),
    ("twice", "<n:int8>[i=0:9:5]", {"x.csv": b"i,n\n1,1\n1,2\n"}, None),
    ("unknown", "<n:int8>[i=0:9:5]", {"x.csv": b"i,m\n1,1\n"}, None),
    ("no_cell", f"<n:int8 NULL>[{TIMES}]", {"x.csv": b"t,n\n0,1\n2026-01-01T06:01Z,1\n2026-02-30,2\n"}, None),
    # before: a bare failure of a job (ArrowInvalid in-process, a Python worker's trace on Spark)
    ("dt_range", "<d:datetime64 NULL>[i=0:9:5]", {"x.csv": b"i,d\n1,2026-01-01\n2,9999-12-31\n"}, None),
    # the first bad value is the larger file's: Spark reads a folder's files largest first
    ("order", "<n:int8>[i=0:9:5]", {"a.csv": b"i,n\n1,x\n", "b.csv": b"i,n\n2,1\n3,y\n4,z\n"}, "csv"),
]


def _parquet(table: pa.Table) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


BAD += [
    ("pq_type", "<n:int8>[i=0:9:5]", {"x.parquet": _parquet(pa.table({"i": [1], "n": [1.5]}))}, None),
    (
        "pq_range",
        "<n:uint8>[i=0:9:5]",
        {"x.parquet": _parquet(pa.table({"i": [1, 2, 3], "n": pa.array([3, 300, -1], pa.int16())}))},
        None,
    ),
    (
        "pq_time",
        f"<n:int8 NULL>[{TIMES}]",
        {"x.parquet": _parquet(pa.table({"t": pa.array([0, 3_600_000_000], pa.timestamp("us", "UTC"))}))},
        None,
    ),
]


@pytest.mark.parametrize("name, schema, files, form", BAD, ids=[b[0] for b in BAD])
def test_bad_files_give_sparks_error_and_change_nothing(dbs, name, schema, files, form) -> None:
    local, on_spark, root = dbs
    folder = root / f"bad_{name}"
    folder.mkdir()
    for file, data in files.items():
        (folder / file).write_bytes(data)
    path = str(folder if len(files) > 1 else folder / next(iter(files)))
    errors = []
    for db in (local, on_spark):
        array = db.create_array(f"bad_{name}{schema}")
        if db is local:  # the in-process reader gives the error itself: no fallback to Spark
            db.executors.spark.read_cell_files = _no_spark
        try:
            with pytest.raises(ArrayViewsError) as caught:
                array.load(path, form)
        finally:
            db.executors.spark.__dict__.pop("read_cell_files", None)
        errors.append((type(caught.value), str(caught.value)))
        assert "array bad_" in errors[-1][1]  # every error names the array
        assert array.versions().empty  # nothing was committed
    assert errors[0] == errors[1]


def _no_spark(*args, **kwargs):
    raise AssertionError("the in-process LOAD fell back to Spark")


_DRAWS = iter(range(1000))
_DIGITS = st.text("0123456789", min_size=1, max_size=20)
_SPACES = st.sampled_from(["", " ", "  "])
INTEGERS = st.builds(
    lambda a, sign, d, b: f"{a}{sign}{d}{b}", _SPACES, st.sampled_from(["", "-", "+"]), _DIGITS, _SPACES
)
DECIMALS = st.builds(
    lambda sign, whole, point, part, exponent: f"{sign}{whole}{point}{part}{exponent}" or "0",
    st.sampled_from(["", "-", "+"]),
    st.text("0123456789", min_size=1, max_size=12),
    st.sampled_from(["", "."]),
    st.text("0123456789", max_size=30),
    st.sampled_from(["", "e", "E-", "e+"]).flatmap(
        lambda e: st.just("") if not e else st.integers(0, 330).map(lambda n: f"{e}{n}")
    ),
)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(numbers=st.lists(st.tuples(INTEGERS, DECIMALS), min_size=1, max_size=8))
def test_adversarial_numbers_match_spark(dbs, numbers) -> None:
    """Long digit runs, signs, spaces, exponents past the float range and float32 rounding: the
    same cells or the same error (an integer past int64) in-process and on Spark."""
    local, on_spark, root = dbs
    draw = next(_DRAWS)
    path = root / f"numbers_{draw}.csv"
    lines = [f"{k},{n},{f},{f}" for k, (n, f) in enumerate(numbers)]
    path.write_text("i,n,f,g\n" + "\n".join(lines) + "\n")
    outcomes = []
    for db in (local, on_spark):
        array = db.create_array(f"numbers_{draw}<n:int64, f:float64, g:float32>[i=0:9:5]")
        try:
            result = array.load(str(path))
        except ArrayViewsError as error:
            outcomes.append((type(error).__name__, str(error)))
            assert array.versions().empty
            continue
        assert result.executor == ("local" if db is local else "spark"), result.message
        outcomes.append(array.to_pandas())
    if isinstance(outcomes[0], pd.DataFrame):
        pd.testing.assert_frame_equal(outcomes[0], outcomes[1])
        # plain Python: int() of the text, float() for doubles
        want = [(int(n), float(f)) for n, f in numbers]
        assert list(zip(outcomes[0].n, outcomes[0].f, strict=True)) == want
    else:
        assert outcomes[0] == outcomes[1]
        assert any(not -(2**63) <= int(n) < 2**63 for n, _ in numbers)


def test_uncertain_texts_are_read_by_spark(dbs) -> None:
    """A text whose meaning to Spark's casts is not certain here (a tab before a number) is read by
    Spark even when the in-process executor is asked for, and the result says so."""
    local, on_spark, root = dbs
    path = root / "uncertain.csv"
    path.write_bytes(b"i,n\n1,\t3\n2,4\n")
    results = [db.create_array("unsure<n:int64 NULL>[i=0:9:5]").load(str(path)) for db in (local, on_spark)]
    assert [r.executor for r in results] == ["spark", "spark"]
    assert "not certain in-process" in results[0].executor_reason
    frames = [db.array("unsure").to_pandas() for db in (local, on_spark)]
    pd.testing.assert_frame_equal(frames[0], frames[1])
    assert frames[0].n.tolist() == [3, 4]  # Spark's cast trims the tab


def test_stream_load_matches_spark(dbs) -> None:
    """CSV rows (a gzip file; columns by name, in another order than the stream's) and Parquet rows
    (times without a zone, in UTC) appended in-process and by Spark are the same rows. Before, on
    Spark: a stream's .csv.gz was read as Parquet, and CSV columns were taken by position (a header
    naming src and dest the other way round swapped them silently)."""
    local, on_spark, root = dbs
    rows = root / "rows.csv.gz"
    text = (
        'x,dest,src,ts,v\n1.5,b,"a,b",2026-01-01 00:00:01,3\n,,,2026-01-01T00:01:00.25,\n'
        '-2e3,to,"",2026-01-01 00:00:02,-4\n'
    )
    rows.write_bytes(gzip.compress(text.encode()))
    parquet = root / "rows.parquet"
    times = pa.array(np.array(["2026-01-01T00:02:00"], "datetime64[us]"))
    columns = {"ts": times, "src": ["p"], "dest": ["q"], "v": pa.array([9], pa.int64()), "x": [0.25]}
    pq.write_table(pa.table(columns), parquet)
    bad = root / "bad_rows.csv"
    bad.write_text("ts,src,dest,v,x\n2026-01-01 00:05:00,a,b,1.5,1\n")
    frames, errors = [], []
    for db in (local, on_spark):
        stream = db.create_stream(
            "rows", "ts timestamp, src string, dest string, v bigint, x double", 60, "ts"
        )
        stream.load(str(rows))
        stream.load(str(parquet))
        frame = stream.read().toPandas()
        frames.append(frame.sort_values("ts").reset_index(drop=True))
        # before: "a Spark job failed: For input string: "1.5"", naming no stream, column or file
        with pytest.raises(ArrayViewsError) as caught:
            stream.load(str(bad))
        errors.append(str(caught.value))
        assert stream.version == 2  # nothing was appended
    pd.testing.assert_frame_equal(frames[0], frames[1])
    assert (
        errors[0]
        == errors[1]
        == f"stream rows, column v: '1.5' in {bad} is not a bigint value; nothing was appended"
    )
    # plain Python: the csv module's fields by the header's names, in time order; an empty field
    # is a null (the csv module gives ""), except the quoted empty src of the -4 row
    with gzip.open(rows, "rt", newline="") as handle:
        records = sorted(csv.DictReader(handle), key=lambda r: r["ts"].replace("T", " "))
    want = [(r["src"] or None, r["dest"] or None, r["v"] or None) for r in records] + [("p", "q", "9")]
    want[1] = ("", *want[1][1:])
    got = [
        tuple(None if pd.isna(v) else str(int(v)) if isinstance(v, float) else str(v) for v in row)
        for row in zip(frames[0].src, frames[0].dest, frames[0].v, strict=True)
    ]
    assert got == want
    assert [None if pd.isna(v) else float(v) for v in frames[0].x] == [1.5, -2000.0, None, 0.25]
    # the in-process engine read both files itself (no fallback to Spark)
    target = pa.schema(
        [(n, pa.string()) for n in ("src", "dest")]
        + [("ts", pa.timestamp("us", "UTC")), ("v", pa.int64()), ("x", pa.float64())]
    )
    for path in (rows, parquet):
        assert local_rows.read_stream_rows(str(path), None, target, "ts").num_rows in (1, 3)


SCRIPT = textwrap.dedent(
    """
    import json, sys
    from pyspark import SparkContext
    import arrayviews

    db = arrayviews.connect(sys.argv[1], execution="auto")
    db.sql("CREATE ARRAY A <v:int64 NULL, s:string NULL> [i=0:9:5]")
    result = db.sql("LOAD A FROM '" + sys.argv[2] + "'")
    frame = db.array("A").to_pandas()
    print(json.dumps({
        "started": SparkContext._active_spark_context is not None,
        "executor": result.executor,
        "cells": [
            [int(i), None if v is None or v != v else int(v), None if s != s else s]
            for i, v, s in zip(frame.i, frame.v.astype(object).where(frame.v.notna(), None), frame.s)
        ],
    }))
    """
)


def test_small_csv_load_starts_no_spark(tmp_path: Path) -> None:
    """Before: LOAD always read the files with Spark, starting it (24-29 s for a 10-row CSV)."""
    path = tmp_path / "small.csv"
    path.write_text('i,v,s\n1,10,"a ""b"""\n2,,\n3, 30 , c \n')
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "warehouse"), str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["cells"] == [[1, 10, 'a "b"'], [2, None, None], [3, 30, " c "]]
    assert (out["started"], out["executor"]) == (False, "local")
