"""Round 20 trial of what a new user touches first: the command line, scripts, the rendering of
results and the xarray / pandas interop, each checked against values computed here independently."""

from __future__ import annotations

import json
import math
import re
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import arrayviews
from arrayviews.cli import main as cli_main
from arrayviews.cli.render import cell_text, print_frame, render
from arrayviews.model.errors import ArrayViewsError, ParseError, ValidationError

xr = pytest.importorskip("xarray")


@pytest.fixture(scope="module")
def local_db(spark, tmp_path_factory):
    """One in-process database for the module (Spark is never the point here)."""
    return arrayviews.connect(str(tmp_path_factory.mktemp("front_trial")), spark=spark, execution="local")


def _versions(array) -> list[int]:
    return list(array.versions()["version"])


# -- from_xarray: each variable's missing cells -------------------------------------------------------
def test_from_xarray_keeps_each_variables_missing_cells_as_its_nulls(local_db) -> None:
    """Before: a Dataset whose variables are NaN in different cells was refused ("variable b is
    missing (NaN) in other cells than the first variable")."""
    rng = np.random.default_rng(20)
    shape = (12, 17)
    a, b = rng.normal(size=shape), rng.normal(size=shape)
    a[rng.random(shape) < 0.4] = np.nan
    b[rng.random(shape) < 0.4] = np.nan
    a[0, 0] = b[0, 0] = np.nan  # missing everywhere: an empty cell
    words = np.array([f"w{k}é;" for k in range(a.size)], dtype=object).reshape(shape)
    words[rng.random(shape) < 0.4] = None
    words[0, 0] = None
    times = np.arange(a.size, dtype=np.int64).reshape(shape).astype("datetime64[s]").astype("datetime64[ns]")
    times[np.isnan(a)] = np.datetime64("NaT")  # missing exactly where a is
    data = xr.Dataset(
        {"a": (("y", "x"), a), "b": (("y", "x"), b), "s": (("y", "x"), words), "t": (("y", "x"), times)},
        coords={"y": np.arange(-4, 8), "x": np.arange(3, 20)},
    )
    A = local_db.from_xarray(data, "xr_mixed")
    assert A.schema.to_text() == (
        "xr_mixed<a:float64 NULL, b:float64 NULL, s:string NULL, t:datetime64 NULL>[y=-4:7:12; x=3:19:17]"
    )
    missing = {"a": np.isnan(a), "b": np.isnan(b), "s": np.equal(words, None), "t": np.isnat(times)}
    empty = missing["a"] & missing["b"] & missing["s"] & missing["t"]
    assert A.count() == int((~empty).sum())
    for name, values in (("a", a), ("b", b), ("s", words), ("t", times)):
        got = A.to_numpy(name, masked=True)
        np.testing.assert_array_equal(np.ma.getmaskarray(got), missing[name])
        keep = ~missing[name]
        assert list(np.ma.getdata(got)[keep]) == list(values[keep])
    frame = A.to_pandas()  # one row per non-empty cell, nulls where that attribute is missing
    rows = {(int(y), int(x)) for y, x in zip(frame["y"], frame["x"], strict=True)}
    assert rows == {(int(y) - 4, int(x) + 3) for y, x in np.argwhere(~empty)}
    assert int(frame["b"].isna().sum()) == int((missing["b"] & ~empty).sum())


def test_from_xarray_names_the_variable_of_an_unsupported_dtype(local_db) -> None:
    """Before: "numpy dtype complex128 has no arrayviews attribute type", naming no variable."""
    data = xr.Dataset({"a": (("t",), [1.0, np.nan]), "c": (("t",), np.array([1 + 2j, 0]))})
    before = local_db.arrays()
    with pytest.raises(
        ValidationError, match=r"^array X: variable c: numpy dtype complex128 has no"
    ) as raised:
        local_db.from_xarray(data, "X")
    assert (raised.value.array, raised.value.column) == ("X", "c") and local_db.arrays() == before


def test_write_dense_keeps_the_cells_of_a_nullable_attributes_masked_entries(local_db) -> None:
    """Before: a cell where only the nullable attribute was masked was dropped, with the value of the
    other attribute (so a block read with ``to_numpy(masked=True)`` lost its null cells when written)."""
    A = local_db.create_array("dense_masks<v:float64, n:int64 NULL>[i=0:5:3; j=0:3:2]")
    v = np.ma.MaskedArray(np.arange(24.0).reshape(6, 4), mask=np.zeros((6, 4), bool))
    n = np.ma.MaskedArray(np.arange(24).reshape(6, 4) * 10, mask=np.zeros((6, 4), bool))
    v[1, 1] = np.ma.masked  # v is not nullable: an empty cell, as before
    n[2, 3] = np.ma.masked  # n is: a null in a kept cell
    v[4, 0] = n[4, 0] = np.ma.masked  # both: an empty cell
    A.write_dense({"v": v, "n": n})
    cells = A.to_pandas()
    expected = {(i, j) for i in range(6) for j in range(4)} - {(1, 1), (4, 0)}
    assert set(zip(cells["i"].tolist(), cells["j"].tolist(), strict=True)) == expected
    nulls = cells[cells["n"].isna()]
    assert list(zip(nulls["i"], nulls["j"], strict=True)) == [(2, 3)] and nulls["v"].tolist() == [11.0]
    kept = cells[cells["n"].notna()]
    assert (kept["n"].astype(np.int64) == (kept["i"] * 4 + kept["j"]) * 10).all()
    B = local_db.create_array("dense_masks_copy<v:float64, n:int64 NULL>[i=0:5:3; j=0:3:2]")
    B.write_dense({"v": A.to_numpy("v", masked=True), "n": A.to_numpy("n", masked=True)})
    pd.testing.assert_frame_equal(B.to_pandas(), cells)  # read and written back: the same cells


# -- exact integers in pandas and on screen -----------------------------------------------------------
BIG = [2**63 - 1, -(2**63), 2**53 + 1, None, -(2**53) - 3]


def test_to_pandas_keeps_nullable_integers_exact(local_db) -> None:
    """Before: an int64 NULL attribute holding a null came out as float64 (2**53 + 1 read as 2**53,
    2**63 - 1 as 9.223372e18)."""
    A = local_db.create_array("exact_ints<w:int64 NULL, u:uint64 NULL, k:int8 NULL>[i=0:9:5]")
    unsigned = [2**64 - 1, 2**63 + 1, None, 0, 7]
    small = [-128, None, 127, 0, None]
    A.insert(
        {
            "i": np.arange(5),
            "w": pa.array(BIG, pa.int64()),
            "u": pa.array(unsigned, pa.uint64()),
            "k": pa.array(small, pa.int8()),
        }
    )
    frame = A.to_pandas()
    for name, expected in (("w", BIG), ("u", unsigned), ("k", small)):
        got = [None if v is pd.NA else int(v) for v in frame[name]]
        assert got == expected, name
    table = render(A, width=200)
    for value in (2**63 - 1, -(2**63), 2**53 + 1, 2**64 - 1, 2**63 + 1):
        assert str(value) in table
    rows = json.loads(render(A, "json"))
    assert [r["w"] for r in rows] == BIG and [r["u"] for r in rows] == unsigned
    csv_w = [line.split(",")[1] for line in render(A, "csv").splitlines()[1:]]
    assert csv_w == ["" if v is None else str(v) for v in BIG]


@settings(max_examples=60, deadline=None)
@given(st.floats(allow_nan=False) | st.floats(width=32, allow_nan=False).map(np.float32))
def test_a_table_shows_each_float_as_the_same_number(value) -> None:
    """Before: floats were shown to 6 significant digits (1.0000001 as 1, 1234567.0 as 1.23457e+06,
    -0.0 as -0)."""
    text = cell_text(value)
    back = type(value)(text) if isinstance(value, np.float32) else float(text)
    assert back == value and math.copysign(1.0, back) == math.copysign(1.0, float(value))


def test_nulls_nan_and_empty_strings_differ_on_screen(local_db) -> None:
    """Before: a null string showed as NaN and a null integer as NaN (a float NaN looked the same)."""
    A = local_db.create_array("shown<v:float64, s:string NULL, w:int64 NULL>[i=0:9:5]")
    A.insert(
        {
            "i": np.arange(4),
            "v": np.array([np.nan, -0.0, np.inf, 1.0000001]),
            "s": pa.array([None, "", "ünï;", "x"]),
            "w": pa.array([None, 1, 2, 3], pa.int64()),
        }
    )
    lines = [line.split() for line in render(A, width=120).splitlines()]
    rows = {int(line[0]): line[1:] for line in lines if line and line[0].isdigit()}
    assert rows == {
        0: ["NaN", "NULL", "NULL"],
        1: ["-0.0", "1"],
        2: ["inf", "ünï;", "2"],
        3: ["1.0000001", "x", "3"],
    }


def test_rows_of_wide_characters_too_wide_for_the_terminal_turn_vertical() -> None:
    """Before: the width check counted characters, not terminal columns, so two columns of ten CJK
    characters (20 columns each) were judged to fit 30 columns and their values were folded."""
    frame = pd.DataFrame({"a": ["東京都千代田区丸の内"], "b": ["大阪府大阪市北区梅田"]})
    lines = render(frame, width=30).splitlines()
    assert any(line.split() == ["a", "│", "東京都千代田区丸の内"] for line in lines), lines
    assert any(line.split() == ["b", "│", "大阪府大阪市北区梅田"] for line in lines), lines


def test_nan_values_and_nulls_differ_in_every_format(local_db) -> None:
    """Before: a NaN value and a null of a float attribute were both NaN on screen, null in JSON and
    an empty field in CSV, which LOAD reads as a null (so a CSV export of NaN values did not load
    back into a float attribute that is not nullable; LOAD reads the field NaN as NaN)."""
    A = local_db.create_array("nan_or_null<v:float64, f:float64 NULL>[i=0:9:5]")
    A.insert(
        {
            "i": np.arange(4),
            "v": np.array([np.nan, 1.5, -np.inf, np.nan]),
            "f": pa.array([np.nan, None, 2.5, None], pa.float64(), from_pandas=False),
        }
    )
    lines = [line.split() for line in render(A, width=120).splitlines()]
    assert {int(r[0]): r[1:] for r in lines if r and r[0].isdigit()} == {
        0: ["NaN", "NaN"],
        1: ["1.5", "NULL"],
        2: ["-inf", "2.5"],
        3: ["NaN", "NULL"],
    }
    assert json.loads(render(A, "json")) == [
        {"i": 0, "v": "NaN", "f": "NaN"},
        {"i": 1, "v": 1.5, "f": None},
        {"i": 2, "v": "-inf", "f": 2.5},
        {"i": 3, "v": "NaN", "f": None},
    ]
    text = render(A, "csv")
    assert text.splitlines() == ["i,v,f", "0,NaN,NaN", "1,1.5,", "2,-inf,2.5", "3,NaN,"]


def test_json_keeps_every_value_of_repeated_column_names() -> None:
    """Before: ``SELECT 1 AS a, 2 AS a`` printed as JSON kept one ``a`` (the other value was lost)."""
    frame = pd.DataFrame([[1, 2, 3, b"\x00\xff"]], columns=["a", "a", "a_2", "b"])
    out = __import__("io").StringIO()
    print_frame(frame, output="json", file=out)
    assert json.loads(out.getvalue()) == [{"a": 1, "a_3": 2, "a_2": 3, "b": "00ff"}]


def test_spark_sql_results_show_integers_exactly_and_keep_repeated_columns(local_db) -> None:
    """Before: a Spark SQL BIGINT column holding a null went through toPandas as float64
    (9007199254740993 shown as 9.0072e+15), and JSON kept one of two columns named ``a``."""
    query = local_db.sql(
        "SELECT CAST(9007199254740993 AS BIGINT) AS x, 1 AS a, TIMESTAMP'2015-01-01 00:05:00' AS t, "
        "'x' AS a UNION ALL SELECT NULL, 2, NULL, NULL"
    )
    rows = json.loads(render(query, "json"))
    assert rows == [
        {"x": 2**53 + 1, "a": 1, "t": "2015-01-01T00:05:00", "a_2": "x"},
        {"x": None, "a": 2, "t": None, "a_2": None},
    ]
    table = render(query, width=100)
    assert re.search(r"^\s*9007199254740993\s+1\s+2015-01-01 00:05:00\s+x\s*$", table, re.M), table
    assert re.search(r"^\s*NULL\s+2\s+NaT\s+NULL\s*$", table, re.M), table


# -- scripts ---------------------------------------------------------------------------------------------
def test_a_script_stops_at_its_failing_statement_and_places_the_error(local_db) -> None:
    script = (
        "-- cells; one per line\n"
        "CREATE ARRAY script_a <s:string, v:int64>[i=0:9:5]; /* ; */\n"
        "INSERT INTO script_a VALUES (0, 'a;b', 1), (1, 'it''s -- no comment', 2);\n"
        "  INSERT INTO script_a VALUES (1, 'again', 3);\n"  # a cell that exists: fails here
        "INSERT INTO script_a VALUES (2, 'never', 4)"
    )
    with pytest.raises(ArrayViewsError, match=r"already exist.*\(statement at line 4, column 3\)$"):
        local_db.sql(script)
    A = local_db.array("script_a")
    assert A.to_pandas()[["i", "s", "v"]].values.tolist() == [[0, "a;b", 1], [1, "it's -- no comment", 2]]
    assert _versions(A) == [1]  # the one insert; the failing one changed nothing


# -- the command ------------------------------------------------------------------------------------------
def _run_main(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["arrayviews", *args])
    with pytest.raises(SystemExit) as exited:
        cli_main.main()
    out, err = capsys.readouterr()
    return exited.value.code, out, err


def test_a_warehouse_under_a_file_is_one_error_line(tmp_path, monkeypatch, capsys) -> None:
    """Before: ``--warehouse file/sub`` printed "internal error: NotADirectoryError ..."."""
    blocker = tmp_path / "plain_file"
    blocker.write_text("not a folder")
    code, out, err = _run_main(monkeypatch, capsys, "--warehouse", str(blocker / "sub"), "arrays")
    assert code == 1 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1
    assert "internal error" not in err and "Traceback" not in err and "plain_file" in err
    assert blocker.read_text() == "not a folder"


def test_sql_without_a_statement_says_what_is_missing(tmp_path, monkeypatch, capsys) -> None:
    """Before: ``arrayviews sql`` alone answered "give a statement or --file, not both"."""
    code, _, err = _run_main(monkeypatch, capsys, "--warehouse", str(tmp_path / "w"), "sql")
    assert code == 2 and "not both" not in err and "--file" in err


def test_a_piped_shell_script_goes_on_after_an_error_and_exits_with_status_one(local_db) -> None:
    """Before: ``arrayviews shell < script.sql`` printed the error among the results on standard
    output and exited with status 0, so a failed statement went unnoticed by the caller; errors
    gave the line in the statement, not in the script."""
    script = (
        "CREATE ARRAY piped <v:int64> [i=0:9:5];\n"
        "INSERT INTO piped VALUES (1, 10);\n"
        "INSERT INTO piped VALUES\n  (1, 11);\n"  # the cell exists: this one fails
        "INSERT INTO piped VALUES (2, 9223372036854775807);\n"
        "-- a comment line\n"
        "  SELECT * FROM piped WHERE v >;\n"  # a syntax error, at line 7 of the script
        "SELECT * FROM piped;\n"
    )
    result = CliRunner().invoke(cli_main.cli, ["shell"], input=script, obj=cli_main.Context.of(local_db))
    assert result.exit_code == 1, result.output
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 2 and errors[0].startswith(
        "error: array piped: 1 cell(s) of the batch already exist"
    )
    assert errors[0].endswith("(statement at line 3, column 1)")  # its line in the script
    assert errors[1] == "error: unexpected end of input at line 7, column 32"
    assert "error" not in result.stdout
    assert re.search(r"^\s*2\s+9223372036854775807\s*$", result.stdout, re.M)  # ran after the error
    assert local_db.array("piped").to_pandas()["v"].tolist() == [10, 2**63 - 1]


def test_spark_sql_with_named_struct_runs(local_db) -> None:
    """Before: ``named_struct('x', 1)`` was refused ("string literal not read as Spark reads it"):
    sqlglot reads the field names as names, so the literal guard found literals it could not place.
    A field name with an escape in it stays refused by name."""
    from arrayviews.language.parser import parse_statements

    assert len(parse_statements("SELECT named_struct('x', 1) AS s")) == 1
    row = local_db.sql("SELECT named_struct('x', 1, 'a b', 'c''d', 'n', named_struct('w', 2)) AS s").first()
    assert row["s"].asDict(recursive=True) == {"x": 1, "a b": "c'd", "n": {"w": 2}}
    with pytest.raises(ParseError, match="string literal not read as Spark reads it"):
        local_db.sql("SELECT named_struct('x\\\\y', 1) AS s")


def test_a_script_that_is_not_utf8_is_a_usage_error(tmp_path, monkeypatch, capsys) -> None:
    """Before: ``arrayviews sql -f latin1.sql`` printed "internal error: UnicodeDecodeError ..."."""
    script = tmp_path / "latin1.sql"
    script.write_bytes("SELECT 1;\nSELECT 'café';\n".encode("latin-1"))
    code, out, err = _run_main(
        monkeypatch, capsys, "--warehouse", str(tmp_path / "w"), "sql", "-f", str(script)
    )
    assert code == 2 and out == "" and "internal error" not in err
    assert "is not UTF-8 text: byte 0xe9 on line 2" in err


def test_a_script_saved_with_a_byte_order_mark_runs(local_db, tmp_path) -> None:
    """Before: a script saved as "UTF-8 with BOM" failed with "unexpected '\\ufeffCREATE'"."""
    script = tmp_path / "bom.sql"
    script.write_bytes(
        "CREATE ARRAY bom <v:int64>[i=0:3:2];\nINSERT INTO bom VALUES (1, 5)".encode("utf-8-sig")
    )
    context = cli_main.Context.of(local_db)
    result = CliRunner().invoke(cli_main.cli, ["sql", "-f", str(script)], obj=context)
    assert result.exit_code == 0, result.output
    piped = CliRunner().invoke(
        cli_main.cli, ["shell"], input="\ufeffINSERT INTO bom VALUES (2, 6);\n", obj=context
    )
    assert piped.exit_code == 0, piped.output
    assert local_db.array("bom").to_pandas()["v"].tolist() == [5, 6]


def test_a_value_of_the_wrong_kind_is_named_with_the_right_article() -> None:
    import datetime

    from arrayviews.model.types import python_value_problem

    assert python_value_problem(datetime.date(2020, 1, 1), "int64") == (
        "datetime.date(2020, 1, 1) is not an int64 value"  # "not a int64" before
    )
    assert python_value_problem(b"x", "uint8") == "b'x' is not a uint8 value"
