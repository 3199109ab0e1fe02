"""The MAINTAIN statement: parsing and printing (round trips, errors with positions), one pass over
array views (a window view and a similarity view checked against numpy brute force over the base
array's cells), the table the CLI prints, a failing view named while the others are maintained,
and EXPLAIN MAINTAIN."""

from __future__ import annotations

import io
import re

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from arrayviews.cli.main import Context, cli
from arrayviews.cli.render import render
from arrayviews.cli.shell import Shell
from arrayviews.language import syntax as ast
from arrayviews.language.parser import parse, parse_statement, parse_statements
from arrayviews.language.printer import script_text, to_text
from arrayviews.model.errors import MaintenanceError, ParseError

BIG = 2**62
SIMILARITY = (
    "CREATE ARRAY VIEW {} AS SELECT count(*) AS n, sum(b.v) AS s FROM {} a SIMILARITY JOIN {} b "
    "WITH SHAPE L1(1) GROUP BY a.i, a.j"
)


# -- parsing and printing --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "refresh_all"),
    [
        ("MAINTAIN", False),
        ("maintain all", True),
        ("  Maintain\n  ALL ;", True),
        ("MAINTAIN /* x */ -- y\n", False),
    ],
)
def test_maintain_parses(text: str, refresh_all: bool) -> None:
    assert parse(text) == [ast.Maintain(refresh_all)]


def test_maintain_prints_and_round_trips() -> None:
    for node in (ast.Maintain(), ast.Maintain(True), ast.Explain(ast.Maintain(True))):
        assert parse_statement(to_text(node)) == node
    assert to_text(ast.Maintain(True)) == "MAINTAIN ALL"
    assert to_text(ast.Explain(ast.Maintain())) == "EXPLAIN MAINTAIN"
    with pytest.raises(ValueError, match="refresh_all must be True or False, got 'yes'"):
        ast.Maintain("yes")


@settings(max_examples=40, deadline=None)
@given(
    every=st.lists(st.booleans(), min_size=1, max_size=5),
    cases=st.lists(st.sampled_from([str.upper, str.lower, str.title]), min_size=2, max_size=2),
    gap=st.sampled_from([" ", "\n", "\t ", " /* c */ ", " -- c\n"]),
)
def test_maintain_scripts_round_trip(every: list[bool], cases: list, gap: str) -> None:
    """Scripts of MAINTAIN [ALL] in any letter case and spacing: parsed as written (a regular
    expression tells what was written) and reprinted to the same statements."""
    text = ";\n".join(cases[0]("maintain") + (gap + cases[1]("all") if a else "") for a in every)
    expected = [bool(re.search(r"all\s*$", part, re.I)) for part in text.split(";")]
    statements = parse(text)
    assert [s.refresh_all for s in statements] == expected == every
    assert parse(script_text(statements)) == statements


@pytest.mark.parametrize(
    ("text", "line", "column", "word"),
    [
        ("MAINTAIN VIEWS", 1, 10, "VIEWS"),
        ("SHOW ARRAYS;\nMAINTAIN ALL ALL", 2, 14, "ALL"),
        ("MAINTAIN ALL V", 1, 14, "V"),
        ("EXPLAIN MAINTAIN NOW", 1, 18, "NOW"),
    ],
)
def test_maintain_syntax_errors_say_where(text: str, line: int, column: int, word: str) -> None:
    with pytest.raises(ParseError) as caught:
        parse(text)
    assert (caught.value.line, caught.value.column) == (line, column)
    assert f"unexpected {word!r}" in str(caught.value)


def test_maintain_and_all_stay_names_elsewhere() -> None:
    statements = parse("CREATE ARRAY maintain <v:int64> [i=0:9:5]; SELECT all FROM maintain")
    assert statements[0].schema.name == "maintain"
    assert statements[1].attributes == ("all",)
    assert parse("SELECT a FROM x UNION ALL SELECT a FROM y")[0].relations == ("x", "y")


# -- running ---------------------------------------------------------------------------------------
def _cells(seed: int, n: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    flat = rng.choice(16 * 16, size=n, replace=False)
    return pd.DataFrame({"i": flat // 16, "j": flat % 16, "v": rng.integers(-1000, 1000, size=n)})


def _brute(cells: pd.DataFrame, offsets: np.ndarray) -> dict[tuple[int, int], tuple[int, int]]:
    """Per cell of the base: (count, sum of v) over the cells at the given offsets, by numpy
    broadcasting over every pair of cells (Python integers for the sums)."""
    coords = cells[["i", "j"]].to_numpy(dtype=np.int64)
    values = cells.v.to_numpy(dtype=np.int64)
    delta = coords[None, :, :] - coords[:, None, :]
    inside = np.any(np.all(delta[:, :, None, :] == offsets[None, None, :, :], axis=3), axis=2)
    return {
        (int(i), int(j)): (int(row.sum()), sum(int(x) for x in values[row]))
        for (i, j), row in zip(coords, inside, strict=True)
    }


L1 = np.array([(0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)])
BOX = np.array([(a, b) for a in (-1, 0, 1) for b in (-1, 0, 1)])


def _similarity(view) -> dict[tuple[int, int], tuple[int, int]]:
    f = view.to_pandas()
    return {(int(i), int(j)): (int(n), int(s)) for i, j, n, s in zip(f.i, f.j, f.n, f.s, strict=True)}


def _window(view) -> dict[tuple[int, int], tuple[int, int]]:
    f = view.to_pandas()
    return {
        (int(i), int(j)): (int(n), int(s)) for i, j, n, s in zip(f.i, f.j, f["count"], f.v_sum, strict=True)
    }


def _add_new_cells(array, seed: int, n: int) -> None:
    taken = set(zip(array.to_pandas().i, array.to_pandas().j, strict=True))
    new = _cells(seed, 120)
    array.insert(new[[(i, j) not in taken for i, j in zip(new.i, new.j, strict=True)]].head(n))


def _warehouse(db):
    a = db.create_array("A<v:int64>[i=0:15:4; j=0:15:4]")
    a.insert(_cells(1, 70))
    db.sql(SIMILARITY.format("V", "A", "A"))
    db.sql("CREATE ARRAY VIEW W AS SELECT * FROM window(A, 1, 1, 1, 1, sum(v), count(*))")
    db.sql(SIMILARITY.format("L", "A", "A"))
    db.sql("ALTER VIEW L SET REFRESH LIMIT 100000 SECONDS")
    _add_new_cells(a, 2, 20)
    return a


def test_maintain_keeps_limits_and_maintain_all_refreshes_against_brute_force(db) -> None:
    a = _warehouse(db)
    versions = {name: len(db.view(name).versions()) for name in ("V", "W", "L")}

    report = db.sql("MAINTAIN")
    assert report.ok
    rows = report.to_pandas()
    assert rows.view.tolist() == ["L"] and "within its limit of 100000 s" in rows.action[0]
    assert {name: len(db.view(name).versions()) for name in ("V", "W", "L")} == versions
    assert all(db.view(name).status()["pending"] for name in ("V", "W", "L"))

    report = db.sql("maintain all")
    assert report.ok
    rows = report.to_pandas().set_index("view")
    assert sorted(rows.index) == ["L", "V", "W"]
    assert rows.loc["V", "action"].startswith("refreshed (") and rows.loc["W", "action"].startswith(
        "refreshed ("
    )
    assert rows.loc[["V", "W"], "seconds"].gt(0).all() and (rows.error == "").all()
    cells = a.to_pandas()
    assert _similarity(db.view("V")) == _brute(cells, L1)
    assert _window(db.view("W")) == _brute(cells, BOX)
    assert not db.view("V").status()["pending"] and not db.view("W").status()["pending"]

    again = db.sql("MAINTAIN ALL")
    rows = again.to_pandas().set_index("view")
    assert again.ok and not again.changed
    assert rows.loc["V", "action"] == "up to date" and rows.loc["W", "action"] == "up to date"


def test_the_table_the_cli_prints(db) -> None:
    _warehouse(db)
    report = db.sql("MAINTAIN ALL")
    text = render(report, width=200)
    assert text.startswith("maintenance pass at ")
    header = next(line for line in text.splitlines() if "view" in line and "action" in line)
    assert re.search(r"view\s+kind\s+action\s+seconds\s+error", header)
    assert re.search(r"^\s*V\s+array view\s+refreshed \(\w+\)\s+\d+\.\d+", text, re.M)
    assert re.search(r"^\s*L\s+array view\s+within its limit", text, re.M)
    as_json = render(report, output="json")
    assert '"view": "W"' in as_json and '"kind": "array view"' in as_json

    command = ["sql", "MAINTAIN ALL"]
    result = CliRunner().invoke(
        cli, command, obj=Context.of(db), catch_exceptions=False, env={"COLUMNS": "160"}
    )
    assert result.exit_code == 0, result.output
    assert re.search(r"^\s*V\s+array view\s+up to date", result.output, re.M)
    narrow = CliRunner().invoke(
        cli, command, obj=Context.of(db), catch_exceptions=False, env={"COLUMNS": "40"}
    )
    assert re.search(r"^\s*view\s+. V\s*$", narrow.output, re.M)  # one block per view when narrow

    db.drop_view("V"), db.drop_view("W"), db.drop_view("L")
    assert render(db.sql("MAINTAIN"), width=120).rstrip().endswith(": nothing to do")


def _failing_warehouse(db):
    """VA cannot take A's new batch (a sum beyond int64: exact or loud); VC over C can."""
    db.create_array("A<v:int64>[i=0:15:4; j=0:15:4]").insert(pd.DataFrame({"i": [5], "j": [5], "v": [BIG]}))
    c = db.create_array("C<v:int64>[i=0:15:4; j=0:15:4]")
    c.insert(_cells(4, 40))
    db.sql(SIMILARITY.format("VA", "A", "A"))
    db.sql(SIMILARITY.format("VC", "C", "C"))
    db.array("A").insert(pd.DataFrame({"i": [5, 6], "j": [6, 5], "v": [BIG, BIG]}))
    _add_new_cells(c, 5, 10)
    return c


def test_a_failing_view_is_named_and_the_others_are_maintained(db) -> None:
    c = _failing_warehouse(db)
    before = len(db.view("VA").versions()), db.view("VA").to_pandas()

    with pytest.raises(MaintenanceError) as caught:
        db.sql(
            "CREATE ARRAY Before <v:int64>[i=0:3:2];\nMAINTAIN ALL;\nCREATE ARRAY After <v:int64>[i=0:3:2]"
        )
    message = str(caught.value)
    assert message.startswith("MAINTAIN ALL: 1 view(s) failed (VA: ")
    assert "does not fit int64" in message and "the other views were maintained" in message
    assert message.endswith("(statement at line 2, column 1)")
    assert set(caught.value.views) == {"VA"}
    rows = caught.value.report.to_pandas().set_index("view")
    assert rows.loc["VA", "action"] == "failed" and "does not fit int64" in rows.loc["VA", "error"]
    assert rows.loc["VC", "action"].startswith("refreshed")

    assert _similarity(db.view("VC")) == _brute(c.to_pandas(), L1)  # maintained all the same
    assert len(db.view("VA").versions()) == before[0] and db.view("VA").status()["pending"]
    pd.testing.assert_frame_equal(db.view("VA").to_pandas(), before[1])
    assert "Before" in db.arrays() and "After" not in db.arrays()  # the script stopped at MAINTAIN

    with pytest.raises(MaintenanceError, match=r"^MAINTAIN: 1 view\(s\) failed"):
        db.sql("ALTER VIEW VA SET REFRESH LIMIT 0.000001 SECONDS; MAINTAIN")


def test_a_failing_pass_in_the_cli_and_the_shell(db) -> None:
    _failing_warehouse(db)
    runner = CliRunner()
    result = runner.invoke(cli, ["sql", "MAINTAIN ALL"], obj=Context.of(db))
    assert result.exit_code != 0 and isinstance(result.exception, MaintenanceError)

    out = io.StringIO()
    Shell(lambda: db, out=out, width=200).run("MAINTAIN ALL;")
    text = out.getvalue()
    assert re.search(r"^\s*VA\s+array view\s+failed\s+.*does not fit int64", text, re.M)
    assert re.search(r"^error: MAINTAIN ALL: 1 view\(s\) failed \(VA: ", text, re.M)


def test_explain_maintain_runs_nothing(db) -> None:
    _warehouse(db)
    versions = {name: len(db.view(name).versions()) for name in ("V", "W", "L")}
    text = db.sql("EXPLAIN MAINTAIN")
    assert "array view V: left alone (batches pending, no refresh limit; MAINTAIN ALL refreshes it)" in text
    assert re.search(
        r"array view L: within its limit of 100000 s \(refreshing everything pending is predicted at "
        r"[0-9.]+ s\): left alone",
        text,
    )
    text = db.sql("EXPLAIN MAINTAIN ALL")
    assert "array view W: refreshed (auto): batches pending" in text
    assert {name: len(db.view(name).versions()) for name in ("V", "W", "L")} == versions
    assert all(db.view(name).status()["pending"] for name in ("V", "W", "L"))
    for parsed in parse_statements("EXPLAIN MAINTAIN ALL"):
        assert isinstance(parsed.statement.statement, ast.Maintain)


RECENT = """CREATE VIEW Recent AS
INITIALIZE Recent[i] AS SELECT src, sum(loss) AS total FROM M[i-1 .. i] GROUP BY src
UPDATE Recent[j] AS SELECT src, sum(loss) AS total FROM M[j-1 .. j] GROUP BY src
PARTITION LENGTH 60"""


def _readings(minute: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "ts": pd.to_datetime([60 * minute + 7 * k for k in range(3)], unit="s", utc=True),
            "src": [f"s{k % 2}" for k in range(3)],
            "loss": [minute * 10 + k for k in range(3)],
        }
    )


def test_maintain_brings_stream_views_up_to_date(db) -> None:
    """Parts appended without maintenance are built by MAINTAIN; the view's sums over the last two
    minutes are checked against a pandas group-by of the rows appended."""
    stream = db.create_stream("M", "ts timestamp, src string, loss int", 60, "ts")
    stream.append(_readings(0))
    db.sql(RECENT)
    for minute in (1, 2, 3):
        stream.append(_readings(minute), maintain=False)
    assert "stream view recent: brought up to date (a source changed)" in db.sql("EXPLAIN MAINTAIN").lower()

    report = db.sql("MAINTAIN")
    (row,) = report.to_pandas().itertuples()
    assert (row.view.lower(), row.kind, row.error) == ("recent", "stream view", "")
    assert row.action.startswith("built 3 part(s) (parts 1..3)")

    rows = pd.concat([_readings(m) for m in range(4)])
    rows["part"] = (rows.ts - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(minutes=1)
    recent = db.stream_view("Recent").to_pandas()
    for part in range(4):
        window = rows[(rows.part >= part - 1) & (rows.part <= part)]
        expected = sorted((s, int(g.loss.sum())) for s, g in window.groupby("src"))
        mine = recent[pd.to_datetime(recent.PART_TIMESTAMP) == pd.Timestamp(part * 60, unit="s")]
        assert sorted(zip(mine.src, mine.total.astype(int), strict=True)) == expected
    again = db.sql("MAINTAIN")
    assert again.ok and not again.changed and again.to_pandas().empty  # nothing to do: no row
    assert render(again, width=120).rstrip().endswith(": nothing to do")
    assert "stream view recent: up to date" in db.sql("EXPLAIN MAINTAIN").lower()
