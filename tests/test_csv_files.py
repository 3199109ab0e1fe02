"""CSV files read by LOAD (arrays and streams) and written by the CSV output, as RFC 4180 says: a
quoted field holds separators, line breaks and doubled quotes; an empty field is a null and a quoted
empty field (``""``) the empty text; spaces are part of a text. The expected values are written out
by hand from the file's text, and the round trip is checked against the values put in."""

from __future__ import annotations

import io
import itertools

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import arrayviews
from arrayviews.cli.render import print_frame, render

#: Each line: the coordinate, the text field as written in the file, and what it stands for.
FIELDS = [
    (0, '""', ""),
    (1, "", None),
    (2, '"a\nb"', "a\nb"),
    (3, '"x,""y"""', 'x,"y"'),
    (4, " pad ", " pad "),
    (5, '"\\"', "\\"),
    (6, '"two\r\nlines"', "two\r\nlines"),
]


@pytest.fixture(scope="module")
def local_db(spark, tmp_path_factory):
    return arrayviews.connect(str(tmp_path_factory.mktemp("csv_files")), spark=spark, execution="local")


def _values(array) -> dict[int, object]:
    frame = array.to_pandas()
    return {int(i): (None if pd.isna(s) else s) for i, s in zip(frame["i"], frame["s"], strict=True)}


def test_load_reads_quoted_line_breaks_quotes_and_empty_texts(local_db, tmp_path) -> None:
    """Before: a quoted line break split a cell in two ("'b\\"' is not an integer coordinate"), a
    doubled quote was not one quote, ``""`` read as a null and the spaces around a text were cut."""
    path = tmp_path / "cells.csv"
    lines = [f"{i},{field},{i * 10 if i % 2 else ''}" for i, field, _ in FIELDS]
    path.write_bytes(("i,s,n\n" + "\n".join(lines) + "\n").encode())
    A = local_db.create_array("csv_in<s:string NULL, n:int64 NULL>[i=0:9:5]")
    local_db.sql(f"LOAD csv_in FROM '{path}'")
    assert _values(A) == {i: value for i, _, value in FIELDS}
    numbers = A.to_pandas().set_index("i")["n"]
    assert {int(i): (None if pd.isna(n) else int(n)) for i, n in numbers.items()} == {
        i: (i * 10 if i % 2 else None) for i, _, _ in FIELDS
    }


def test_numbers_padded_with_spaces_still_read(local_db, tmp_path) -> None:
    path = tmp_path / "padded.csv"
    path.write_text("i,n\n 1 , 7 \n2,-3\n")
    A = local_db.create_array("csv_padded<n:int64>[i=0:9:5]")
    local_db.sql(f"LOAD csv_padded FROM '{path}'")
    assert dict(zip(A.to_pandas()["i"], A.to_pandas()["n"], strict=True)) == {1: 7, 2: -3}


def test_stream_load_reads_the_same_fields(local_db, tmp_path) -> None:
    path = tmp_path / "rows.csv"
    lines = [f"2026-01-01 00:00:{i:02d},{field},{i}" for i, field, _ in FIELDS]
    path.write_bytes(("ts,who,v\n" + "\n".join(lines) + "\n").encode())
    stream = local_db.create_stream("csv_rows", "ts TIMESTAMP, who STRING, v BIGINT", 60, "ts")
    stream.load(str(path))
    frame = stream.read().toPandas()
    got = {int(v): (None if pd.isna(w) else w) for v, w in zip(frame["v"], frame["who"], strict=True)}
    assert got == {i: value for i, _, value in FIELDS}


def test_csv_output_writes_an_empty_text_apart_from_a_null() -> None:
    """Before: pandas wrote both as an empty field, so LOAD read the empty text back as a null."""
    frame = pd.DataFrame({"a": pd.array(["", None, "x", "\ue000"], dtype="string"), "b": [1, 2, 3, 4]})
    out = io.StringIO()
    print_frame(frame, output="csv", file=out)
    assert out.getvalue() == 'a,b\n"",1\n,2\nx,3\n\ue000,4\n'


_ROUND_TRIPS = itertools.count()
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=6)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.none() | TEXT, min_size=1, max_size=6))
def test_csv_output_loads_back_as_it_was(local_db, tmp_path_factory, texts) -> None:
    """Every text (separators, quotes, line breaks, spaces, the empty text) and every null written by
    the CSV output comes back unchanged through LOAD. The NUL character is left out: it is the null
    marker of the reader (no text file holds it)."""
    name = f"csv_rt_{next(_ROUND_TRIPS)}"
    A = local_db.create_array(f"{name}<s:string NULL>[i=0:99:50]")
    A.insert({"i": np.arange(len(texts)), "s": pa.array(texts, pa.string())})
    path = tmp_path_factory.mktemp("rt") / "out.csv"
    path.write_text(render(A, "csv"), newline="")
    B = local_db.create_array(f"{name}_b<s:string NULL>[i=0:99:50]")
    local_db.sql(f"LOAD {name}_b FROM '{path}'")
    assert _values(B) == dict(enumerate(texts))
