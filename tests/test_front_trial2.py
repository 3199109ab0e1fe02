"""Round 23 trial of the front: line endings of scripts, the time axis from the command line, results
printed exactly, and the command's answers on bad input, each checked against values computed here
independently (plain Python line splitting, Python integers and floats, hand-built tables)."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import arrayviews
from arrayviews.language.parser import parse_statements
from arrayviews.model.errors import ArrayViewsError, ParseError
from arrayviews.model.text_lines import pointer, position


@pytest.fixture(scope="module")
def local_db(spark, tmp_path_factory):
    """One in-process database for the module (Spark is the point of only one test)."""
    return arrayviews.connect(str(tmp_path_factory.mktemp("front_trial2")), spark=spark, execution="local")


# -- line endings: the line and column an editor shows ----------------------------------------------------
def _editor_position(text: str, offset: int) -> tuple[int, int]:
    """The reference: walk the lines ``str.splitlines`` finds (the text holds no other breaks than
    \\r\\n, \\r and \\n), counting the characters before ``offset``."""
    start = 0
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        last = start + len(line) == len(text) and not line.endswith(("\n", "\r"))
        if offset < start + len(line) or last:
            return number, offset - start + 1
        start += len(line)
    return len(text.splitlines()) + 1, offset - start + 1


_BREAKS = st.sampled_from(["\n", "\r", "\r\n"])
_WORDS = st.text(alphabet=st.sampled_from("ab \t'é漢"), max_size=6)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_WORDS, _BREAKS), max_size=8), _WORDS, st.data())
def test_positions_count_lines_as_an_editor_does(pieces, tail, data) -> None:
    text = "".join(w + b for w, b in pieces) + tail
    offset = data.draw(st.integers(0, len(text)))
    assert position(text, offset) == _editor_position(text, offset)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["SELECT 1", "  SELECT 2 ", "-- c\r", "/* a\r\nb */"]), _BREAKS),
        min_size=1,
        max_size=5,
    ),
    _BREAKS,
)
def test_statements_and_errors_are_placed_by_the_lines_an_editor_shows(pieces, last) -> None:
    """Before: lines were counted at '\\n' only, so a script saved with old Mac endings ('\\r') was
    all on line 1, and an error after '\\r\\n' showed the wrong source line."""
    script = "".join(f"{s};{b}" for s, b in pieces) + "SELECT a,\r\t" + last + "  b FROM t WHERE (x = ;"
    with pytest.raises(ParseError) as raised:
        parse_statements(script)
    error = raised.value
    at = script.rindex(";")
    assert (error.line, error.column) == _editor_position(script, at)
    shown = str(error).splitlines()
    assert shown[1] == "  " + script.splitlines()[error.line - 1]
    good = script[: script.rindex("SELECT a,")]
    parsed = parse_statements(good)
    starts = [k for k in range(len(good)) if good.startswith("SELECT", k)]
    assert [(p.line, p.column) for p in parsed] == [_editor_position(good, k) for k in starts]


@pytest.mark.parametrize("newline", ["\r", "\r\n"])
def test_errors_of_the_pieces_of_a_statement_are_placed_after_old_mac_and_windows_endings(newline) -> None:
    """Before, with '\\r' endings: each error below was "at line 1" with a column past the line's end
    (the schema reader, the cell-expression reader and the aggregate reader counted '\\n' only)."""
    cases = [
        ("CREATE ARRAY a <v:int64,{n}  w:bla>[i=0:3:2];", "bla"),  # a schema
        ("SELECT * FROM filter(A,{n} v > (1 +{n}));", ")"),  # a cell expression
        ("SELECT * FROM regrid(A, 2,{n}\t avg(v) ? 1);", "?"),  # an aggregate call
        ("CREATE ARRAY b <v:int64>[i=0:3:2;{n} i=0:3:2];", "i=0:3:2]"),  # a schema check
    ]
    for template, culprit in cases:
        script = f"SELECT 1;{newline}{newline}" + template.format(n=newline)
        with pytest.raises(ParseError) as raised:
            parse_statements(script)
        error = raised.value
        assert (error.line, error.column) == _editor_position(script, script.rindex(culprit)), script
        source, caret = str(error).splitlines()[1:3]
        assert source == "  " + script.splitlines()[error.line - 1]
        assert len(caret.expandtabs()) == len(("  " + source[2 : 2 + error.column - 1]).expandtabs()) + 1


def test_the_caret_stands_under_the_column_on_screen() -> None:
    """Before: the caret line was blanks only, so after a tab or a wide character it stood left of
    the column it names."""
    assert pointer("\tab", 3) == "\t ^"
    assert pointer("漢字x", 3) == "    ^"
    assert pointer("e\u0301x", 3) == " ^"  # a combining accent takes no cell


def test_a_spark_sql_error_after_old_mac_endings_is_placed_in_the_script(local_db) -> None:
    """Spark counts a query's lines at '\\n' only ("line 1 pos 12" here). Before: shown as line 2,
    column 13 of the script, where the editor shows line 4, column 2."""
    script = "SELECT 1 AS x;\r\nSELECT a,\r\r nosuchcol FROM VALUES (1) t(a)"
    with pytest.raises(ArrayViewsError) as raised:
        local_db.sql(script)
    assert "nosuchcol" in str(raised.value)
    assert " at line 4, column 2" in str(raised.value), str(raised.value)
    assert str(raised.value).endswith("(statement at line 2, column 1)")
    assert _editor_position(script, script.index("nosuchcol")) == (4, 2)


def test_a_comment_ends_at_an_old_mac_line_end(tmp_path, monkeypatch, capsys) -> None:
    """Before: '--' comments ran to the next '\\n', so in a script saved with '\\r' endings the
    first comment swallowed every statement after it (parsed: none), and the shell waited for a ';'
    that was there."""
    from arrayviews.cli import main as cli_main
    from arrayviews.cli.shell import is_complete

    script = (
        "-- make it\rCREATE ARRAY c <v:int64>[i=0:3:2];\r-- fill it\rINSERT INTO c VALUES (1, 2) -- one\r;"
    )
    assert [(p.line, p.column, p.text.split()[0]) for p in parse_statements(script)] == [
        (2, 1, "CREATE"),
        (4, 1, "INSERT"),
    ]
    assert is_complete("SELECT 1 -- done\r;")
    bad = tmp_path / "mac.sql"  # a Latin-1 byte on the third line an editor shows
    bad.write_bytes(b"SELECT 1;\rSELECT 2;\rSELECT 'caf\xe9';\r")
    monkeypatch.setattr("sys.argv", ["arrayviews", "--warehouse", str(tmp_path / "w"), "sql", "-f", str(bad)])
    with pytest.raises(SystemExit) as exited:
        cli_main.main()
    assert exited.value.code == 2
    assert "byte 0xe9 on line 3" in capsys.readouterr().err


# -- a damaged warehouse ----------------------------------------------------------------------------------
def test_a_truncated_metadata_file_is_one_clear_line_and_check_restores_it(spark, tmp_path, caplog) -> None:
    """Before: the error of reading the array spanned four lines (pydantic's report, with the file's
    JSON quoted and a help link), so the command's one error line stopped in the middle of it and
    lost the advice to run `arrayviews check`; `check` quoted the JSON too."""
    import glob

    from click.testing import CliRunner

    from arrayviews.cli import main as cli_main

    db = arrayviews.connect(str(tmp_path / "w"), spark=spark, execution="local")
    db.sql("CREATE ARRAY d <v:int64>[i=0:9:5]; INSERT INTO d VALUES (1, 10); INSERT INTO d VALUES (2, 20)")
    newest = sorted(glob.glob(str(tmp_path / "w" / "**" / "*.metadata.json"), recursive=True))[-1]
    with open(newest, "r+") as handle:
        text = handle.read()
        handle.seek(0)
        handle.truncate()
        handle.write(text[: len(text) // 2])
    with pytest.raises(ArrayViewsError) as raised:
        db.sql("SELECT * FROM d")
    message = str(raised.value)
    assert "\n" not in message and "input_value" not in message, message
    assert "Invalid JSON" in message and "run `arrayviews check`" in message
    context = cli_main.Context.of(db)
    with caplog.at_level("WARNING", logger="arrayviews"):
        listed = CliRunner().invoke(cli_main.cli, ["arrays"], obj=context)
    assert listed.exit_code == 0 and "(no rows)" in listed.stdout
    warned = [r.getMessage() for r in caplog.records if "cannot be read" in r.getMessage()]
    # once per command (r23 lead: the two listings a command runs each warned, the same line twice)
    assert len(warned) == 1 and "\n" not in warned[0] and "input_value" not in warned[0], warned
    checked = CliRunner().invoke(cli_main.cli, ["check"], obj=context)
    assert checked.exit_code == 1
    lines = checked.stdout.splitlines()
    assert len(lines) == 2 and "metadata cannot be read (ValidationError: " in lines[1], lines
    assert "input_value" not in lines[1] and "[to repair: restore from 00001-" in lines[1]
    repaired = CliRunner().invoke(cli_main.cli, ["check", "--repair"], obj=context)
    assert repaired.exit_code == 0, repaired.output
    assert db.array("d").to_pandas()[["i", "v"]].values.tolist() == [[1, 10]]  # the version before


# -- results on screen and in files ----------------------------------------------------------------------
def _invoke(db, *args: str, input: str | None = None):
    from click.testing import CliRunner

    from arrayviews.cli import main as cli_main

    return CliRunner().invoke(cli_main.cli, list(args), obj=cli_main.Context.of(db), input=input)


def test_a_long_spark_sql_result_says_how_many_rows_it_has(local_db) -> None:
    """Before: a long Spark SQL result ended with "... 21 rows in all (20 shown)" whatever its length
    (the preview reads one row past the 20 shown, and those were counted)."""
    result = _invoke(local_db, "sql", "SELECT id, id * id AS sq FROM (SELECT explode(sequence(0, 99)) AS id)")
    assert result.exit_code == 0, result.output
    shown = [line.split() for line in result.stdout.splitlines() if line.strip()[:1].isdigit()]
    assert shown == [[str(k), str(k * k)] for k in range(20)]
    assert "21 rows in all" not in result.stdout, result.stdout
    assert result.stdout.rstrip().splitlines()[-1].strip() == "... more rows (20 shown)"


def test_json_of_spark_decimals_is_the_same_numbers_as_the_array_forms(local_db) -> None:
    """Before: through Spark SQL a uint64 attribute (Spark's DECIMAL(20, 0)) came out in JSON as
    strings ("18446744073709551615"), where the array query of the same cells gives numbers, and a
    DECIMAL(5, 2) 1.25 as "1.25"; a decimal no float holds stays text, unrounded."""
    import json
    from decimal import Decimal

    values = {1: 2**64 - 1, 2: 2**63 + 1, 3: 0}
    local_db.sql("CREATE ARRAY dec_u <u:uint64>[i=0:9:5]")
    local_db.sql("INSERT INTO dec_u VALUES " + ", ".join(f"({i}, {u})" for i, u in values.items()))
    array_rows = json.loads(_invoke(local_db, "sql", "--format", "json", "SELECT * FROM dec_u").stdout)
    query = (
        "SELECT i, u, CAST(1.25 AS DECIMAL(5, 2)) AS q, "
        "CAST('0.1000000000000000000000000001' AS DECIMAL(38, 28)) AS r FROM dec_u ORDER BY i"
    )
    spark_rows = json.loads(_invoke(local_db, "sql", "--format", "json", query).stdout)
    assert array_rows == [{"i": i, "u": u} for i, u in values.items()]
    assert [{"i": row["i"], "u": row["u"]} for row in spark_rows] == array_rows
    assert all(type(row["u"]) is int and row["q"] == 1.25 for row in spark_rows)
    assert {Decimal(row["r"]) for row in spark_rows} == {Decimal("0.1000000000000000000000000001")}
    from arrayviews.cli.render import render

    decimals = pd.DataFrame({"u": [Decimal(2**64 - 1), Decimal(0)]})  # right-aligned, as numbers are
    assert render(decimals, width=40).splitlines()[3:5] == [
        "  18446744073709551615  ",
        "                     0  ",
    ]


# -- the time axis from the command line -------------------------------------------------------------------
def test_a_time_axis_is_shown_as_its_times_and_its_csv_reads_back(local_db) -> None:
    """Before: rows of an array query showed a time dimension as cell numbers (12 for what INSERT and
    WHERE wrote as '2026-03-02 00:00'), in the table, JSON and CSV alike, and that CSV did not say
    which times its cells were."""
    import csv
    import datetime as dt
    import io
    import json

    origin, step = dt.datetime(2026, 3, 1, 6), dt.timedelta(minutes=90)
    local_db.sql(
        "CREATE ARRAY tz <v:float64 NULL>[t=0:*:8 SCALE 90 MINUTES OFFSET '2026-03-01T06:00'; k=0:1:2];\r\n"
        "CREATE ARRAY tz_copy <v:float64 NULL>[t=0:*:8 SCALE 90 MINUTES OFFSET '2026-03-01T06:00'; k=0:1:2];\r\n"
        "INSERT INTO tz VALUES ('2026-03-01T06:00', 0, 1.5), ('2026-03-01T09:30+02:00', 1, -0.0),\r\n"
        "  ('2026-03-02 00:00:00', 0, NULL), ('2026-03-01T07:30Z', 0, nan)"
    )
    cells = {(0, 0): 1.5, (1, 1): -0.0, (12, 0): None, (1, 0): float("nan")}
    expected = [
        {"t": (origin + c * step).isoformat(), "k": k, "v": "NaN" if v != v else v}
        for (c, k), v in sorted(cells.items())
    ]
    rows = json.loads(_invoke(local_db, "sql", "--format", "json", "SELECT * FROM tz").stdout)
    assert rows == expected
    table = _invoke(local_db, "sql", "SELECT * FROM tz WHERE t >= '2026-03-01T07:30'").stdout
    shown = [line.split() for line in table.splitlines() if line.strip().startswith("2026")]
    assert shown == [
        [
            str((origin + c * step).date()),
            str((origin + c * step).time()),
            str(k),
            "NaN" if v != v else str(v).replace("None", "NULL"),
        ]
        for (c, k), v in sorted(cells.items())
        if c >= 1
    ]
    printed = _invoke(local_db, "sql", "--format", "csv", "SELECT * FROM tz").stdout
    header, *lines = list(csv.reader(io.StringIO(printed)))
    assert header == ["t", "k", "v"]
    assert lines == [
        [e["t"].replace("T", " "), str(e["k"]), "" if e["v"] is None else str(e["v"])] for e in expected
    ]
    values = ", ".join(f"('{t}', {k}, {v or 'NULL'})" for t, k, v in lines)  # the times as INSERT reads them
    local_db.sql(f"INSERT INTO tz_copy VALUES {values}")
    original, copy = local_db.array("tz").to_pandas(), local_db.array("tz_copy").to_pandas()
    assert original[["t", "k"]].values.tolist() == copy[["t", "k"]].values.tolist()
    assert [repr(v) for v in original["v"]] == [repr(v) for v in copy["v"]]
    labelled = local_db.array("tz").to_pandas(labels=True)
    assert [str(t) for t in labelled["t"]] == [str(origin + c * step) for c, _ in sorted(cells)]


def test_control_characters_in_values_never_reach_the_terminal(local_db) -> None:
    """Before: an ESC sequence held by a value went to the terminal as is (here: clear the screen),
    a CR or BEL vanished ('p\\rq' shown as 'pq'), and a tab folded the cell as a line break does
    ('a\\tb' shown as 'a' over 'b'). CSV and JSON keep every character."""
    import json

    texts = ["a\tb", "x\x1b[2Jy", "p\rq", "z\x07w\x00", "c\x85d", "e\u2028f", "l1\nl2"]
    local_db.sql("CREATE ARRAY ctl <s:string>[i=0:9:10]")
    local_db.array("ctl").insert({"i": list(range(len(texts))), "s": texts})
    table = _invoke(local_db, "sql", "SELECT * FROM ctl").stdout
    assert not any(ord(c) < 0x20 and c != "\n" or 0x7F <= ord(c) < 0xA0 or c in "\u2028\u2029" for c in table)
    rows = [line.strip() for line in table.splitlines()]
    for shown in [
        "0   a       b",
        "1   x␛[2Jy",
        "2   p␍q",
        "3   z␇w␀",
        "4   c\\x85d",
        "5   e\\u2028f",
        "6   l1",
    ]:
        assert shown in rows, (shown, table)
    assert rows[rows.index("6   l1") + 1] == "l2"
    back = json.loads(_invoke(local_db, "sql", "--format", "json", "SELECT * FROM ctl").stdout)
    assert [row["s"] for row in back] == texts


# -- scripts run by the command ------------------------------------------------------------------------
def test_a_windows_script_that_fails_halfway_keeps_what_ran_and_says_where(
    local_db, tmp_path, monkeypatch, capsys
) -> None:
    """`arrayviews sql -f` on a script saved by a Windows editor (BOM, CRLF, tabs): the statements
    before the failing one stay, the rest do not run, one error line gives the failing statement's
    line in the editor, exit status 1. A name with a letter outside ASCII runs nothing and says why
    (before: "unexpected 'ße' after the end of the statement", naming no rule)."""
    from arrayviews.cli import main as cli_main

    monkeypatch.setattr(arrayviews, "connect", lambda *args, **kwargs: local_db)

    def run(script: str) -> tuple[int, str, str]:
        path = tmp_path / "script.sql"
        path.write_bytes(script.encode("utf-8-sig"))
        monkeypatch.setattr("sys.argv", ["arrayviews", "--warehouse", str(tmp_path), "sql", "-f", str(path)])
        with pytest.raises(SystemExit) as exited:
            cli_main.main()
        out, err = capsys.readouterr()
        return exited.value.code, out, err

    code, out, err = run(
        "-- setup\r\nCREATE ARRAY sf <v:int64>[i=0:9:5];\r\n\tINSERT INTO sf VALUES (1, 10);\r\n"
        "INSERT INTO sf VALUES\r\n\t(1, 11);\r\nINSERT INTO sf VALUES (2, 20);\r\n"
    )
    assert code == 1 and out == "" and "Traceback" not in err
    assert err.count("\n") == 1 and err.startswith("error: array sf: 1 cell(s) of the batch already exist")
    assert err.rstrip().endswith("(statement at line 4, column 1)")
    assert local_db.array("sf").to_pandas()[["i", "v"]].values.tolist() == [[1, 10]]
    assert list(local_db.array("sf").versions()["version"]) == [1]
    before = sorted(local_db.arrays())
    code, out, err = run("CREATE ARRAY sf_ok <v:int64>[i=0:3:4];\r\n\tDROP ARRAY straße;")
    assert code == 1 and "Traceback" not in err and sorted(local_db.arrays()) == before
    assert err.startswith("error: unexpected 'ße' after the end of the statement: names are written in ASCII")
    assert err.rstrip().endswith("at line 2, column 17")


def test_spark_sql_reads_an_array_with_a_datetime_attribute(local_db) -> None:
    """Before: any Spark SQL query over an array with a datetime64 attribute failed with Spark's
    "[UNSUPPORTED_ARROWTYPE] Unsupported arrow type Timestamp(NANOSECOND, null)". Spark holds
    microseconds: whole microseconds are read exactly; a time with a nanosecond part is refused by
    name (r23 lead: it was cut toward the earlier time, a silent change of the value), and the array
    keeps it."""
    import numpy as np

    from arrayviews.execution.failures import translated_errors
    from arrayviews.model.errors import ValidationError

    times = ["2020-01-01T00:00:01.123456", "1969-12-31T23:59:59.999999", None]
    local_db.sql("CREATE ARRAY dt_attr <d:datetime64 NULL, w:int64>[i=0:9:5]")
    local_db.array("dt_attr").insert(
        {"i": [0, 1, 2], "d": [None if t is None else np.datetime64(t, "ns") for t in times], "w": [1, 2, 3]}
    )
    frame = local_db.sql("SELECT i, d, w FROM dt_attr ORDER BY i").toPandas()
    got = [None if pd_t is None or pd_t != pd_t else np.datetime64(pd_t, "us") for pd_t in frame["d"]]
    assert got == [None if t is None else np.datetime64(t, "us") for t in times]
    assert frame["w"].tolist() == [1, 2, 3]
    local_db.array("dt_attr").insert(
        {"i": [3], "d": [np.datetime64("2020-01-01T00:00:01.123456789", "ns")], "w": [4]}
    )
    with pytest.raises(
        ValidationError,
        match=r"array dt_attr, attribute d: 2020-01-01T00:00:01.123456789 has a nanosecond part",
    ), translated_errors():
        local_db.sql("SELECT count(*) AS n FROM dt_attr").collect()
    kept = local_db.array("dt_attr").to_pandas().sort_values("i")["d"]
    assert str(kept.iloc[3]) == "2020-01-01 00:00:01.123456789"


def test_plot_refuses_what_it_cannot_draw_or_write_by_name(local_db, tmp_path) -> None:
    """Before: a string attribute gave "internal error: ValueError: could not convert string to float:
    'a'", '--dpi 0' "internal error: ValueError: dpi must be positive", 'p.txt' matplotlib's
    ValueError after drawing, and a path without extension was reported as written where the file
    was '<path>.png'."""
    from arrayviews.model.errors import ValidationError

    local_db.sql(
        "CREATE ARRAY pl <v:float64 NULL, s:string>[t=0:*:4 SCALE 1 DAY OFFSET '2026-01-01'];"
        "INSERT INTO pl VALUES ('2026-01-01', 1.5, 'a'), ('2026-01-03', -2.0, 'b')"
    )
    cases = {
        ("--attr", "s", str(tmp_path / "s.png")): "array pl: attribute s is string; plot draws numbers",
        ("--attr", "v", str(tmp_path / "p.txt")): "plot: cannot write "
        + str(tmp_path / "p.txt")
        + ": '.txt' is no",
        ("--attr", "v", str(tmp_path / "no" / "p.png")): "plot: cannot write "
        + str(tmp_path / "no" / "p.png"),
    }
    for (option, attribute, path), message in cases.items():
        result = _invoke(local_db, "plot", "pl", path, option, attribute)
        assert isinstance(result.exception, ValidationError) and str(result.exception).startswith(message)
    zero = _invoke(local_db, "plot", "pl", str(tmp_path / "z.png"), "--attr", "v", "--dpi", "0")
    assert zero.exit_code == 2 and "--dpi" in zero.output
    drawn = _invoke(local_db, "plot", "pl", str(tmp_path / "time_axis"), "--attr", "v")
    assert drawn.exit_code == 0 and drawn.stdout.strip() == f"wrote {tmp_path / 'time_axis.png'}"
    assert (tmp_path / "time_axis.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["time_axis.png"]


def test_to_pandas_and_to_xarray_of_the_same_cells_agree_with_what_was_written(local_db) -> None:
    """Tried, correct: NaN, -0.0, inf, nulls and empty cells of a time-labelled array read the same
    through to_pandas(labels=True) and to_xarray as written (an empty cell NaN in xarray only)."""
    import math

    import numpy as np

    written = {(0, 0): -0.0, (0, 2): float("nan"), (1, 1): None, (2, 0): float("inf"), (3, 2): 1e-310}
    local_db.sql("CREATE ARRAY agree <v:float64 NULL>[t=0:*:4 SCALE 6 HOURS OFFSET '2026-01-01'; k=0:2:3]")
    local_db.array("agree").insert(
        {"t": [c[0] for c in written], "k": [c[1] for c in written], "v": list(written.values())}
    )
    A = local_db.array("agree")
    frame = A.to_pandas(labels=True)
    data = A.to_xarray()["v"]
    origin = np.datetime64("2026-01-01T00:00", "s")
    assert [str(t) for t in data["t"].values] == [str(origin + np.timedelta64(6 * c, "h")) for c in range(4)]
    for row in frame.itertuples(index=False):
        cell = (int((row.t - origin) // np.timedelta64(6, "h")), row.k)
        value = written[cell]
        shown = data.sel(t=row.t, k=row.k).item()
        if value is None:
            assert math.isnan(shown) and (row.v is None or row.v != row.v)
        else:
            assert repr(float(row.v)) == repr(value) == repr(shown)
    empty = [(c, k) for c in range(4) for k in range(3) if (c, k) not in written]
    assert all(math.isnan(data.values[c, k]) for c, k in empty) and len(frame) == len(written)


def test_a_time_no_cell_has_is_named_with_its_row_and_place_in_the_script(local_db) -> None:
    """Before: "'2026-01-01T05:30' (row 0) labels no cell": the row counted from 0 (INSERT's other
    errors count from 1) and no line or column, unlike every other refused value of INSERT."""
    local_db.sql("CREATE ARRAY tcell <v:float64>[t=0:*:24 SCALE 1 HOUR OFFSET '2026-01-01T00:00']")
    cases = {
        "'2026-01-01T05:30'": "'2026-01-01T05:30' labels no cell of the dimension (SCALE 1 HOUR OFFSET '2026-01-01T00:00')",
        "'2025-12-31T23:00'": "coordinate -1 is outside the dimension range 0:*",
        "'soon'": "'soon'",
    }
    for bad, problem in cases.items():
        script = f"INSERT INTO tcell VALUES ('2026-01-01T01:00', 1.0),\r\n\t({bad}, 2.0)"
        with pytest.raises(ArrayViewsError) as raised:
            local_db.sql(script)
        line, column = _editor_position(script, script.index(bad))
        message = str(raised.value)
        assert message.startswith(f"array tcell, dimension t: {problem}"), message
        assert message.endswith(
            f" in row 2 at line {line}, column {column} (statement at line 1, column 1)"
        ), message
    assert local_db.array("tcell").count() == 0 and list(local_db.array("tcell").versions()["version"]) == []


def test_a_deleted_data_file_is_named_as_damage_to_check(spark, tmp_path) -> None:
    """Before: reading, inserting into or listing the chunks of an array whose data file was deleted
    raised a bare FileNotFoundError naming only the path (the command printed "error: <path>", the
    shell "internal error: FileNotFoundError: <path>"), with no array and no way out."""
    import glob
    import os

    db = arrayviews.connect(str(tmp_path / "w"), spark=spark, execution="local")
    db.sql(
        "CREATE ARRAY dmg <v:int64>[i=0:9:5]; INSERT INTO dmg VALUES (1, 10); INSERT INTO dmg VALUES (7, 20)"
    )
    newest = max(
        glob.glob(str(tmp_path / "w" / "**" / "data" / "*.parquet"), recursive=True), key=os.path.getmtime
    )
    os.remove(newest)
    shown = _invoke(db, "sql", "SELECT * FROM dmg")
    assert str(shown.exception).startswith(f"array dmg: a data file of version 2 is missing ({newest})")
    assert "run `arrayviews check`" in str(shown.exception)
    for script in ("SELECT 1;\nINSERT INTO dmg VALUES (8, 1)", "SELECT 1;\nSHOW CHUNKS OF dmg"):
        with pytest.raises(ArrayViewsError) as raised:
            db.sql(script)
        message = str(raised.value)
        assert newest in message and "run `arrayviews check`" in message, message
        assert message.endswith("(statement at line 2, column 1)")
    assert list(db.array("dmg").versions()["version"]) == [1, 2]
    assert _invoke(db, "check").exit_code == 1
    assert _invoke(db, "check", "--repair").exit_code == 0
    assert db.array("dmg").to_pandas()[["i", "v"]].values.tolist() == [[1, 10]]
