"""The statement language tried as a new user and as an adversary: the statements of docs/language.md
as written (through ``db.sql`` and the CLI's script path), round trips of generated statements with
their literals checked against Python's own readers and Spark's, and errors (named object, line and
column in the script, nothing changed, no traceback in the CLI)."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from tests.spark_literals import spark_literal
from tests.window_reference import window_averages

from arrayviews.cli.main import Context, cli
from arrayviews.language.parser import parse
from arrayviews.language.printer import to_text
from arrayviews.model.errors import AlreadyExistsError, ArrayViewsError, ParseError

INT64_MIN, INT64_MAX, UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1
FAST = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # a failure is reported as drawn, unshrunk
)


# ---------------------------------------------------------------------------------------------
# Round trips: parse(print(parse(s))) == parse(s), printing is stable, literals keep their values

KEYWORD_NAMES = ["values", "update", "select", "from", "where", "view", "stream", "nan", "inf", "true", "max"]
NAMES = st.one_of(
    st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,7}", fullmatch=True).filter(lambda n: "__" not in n),
    st.sampled_from(KEYWORD_NAMES),
)
#: Names that are no keyword of Spark SQL either (they end in a digit): they stand in expressions.
PLAIN_NAMES = st.from_regex(r"[A-Za-z][A-Za-z0-9]{0,6}", fullmatch=True).map(lambda n: n + "9")


def _round_trip(text: str) -> list:
    statements = parse(text)
    printed = [to_text(s) for s in statements]
    again = parse(";\n".join(printed))
    assert again == statements, (text, printed)
    assert [to_text(s) for s in again] == printed
    return statements


INTEGERS = st.integers(INT64_MIN, UINT64_MAX)
FLOATS = st.floats(allow_nan=False, allow_infinity=False)
STRING_VALUES = st.text(alphabet=st.sampled_from(list("ab'\"\\%_ \n\tZu0é中😀")), max_size=8)
STRING_STYLES = st.sampled_from(["backslash", "doubled", "double-quoted"])


@st.composite
def float_spellings(draw) -> str:
    """A float literal as people write it: repr, or mantissa and exponent, or with a sign."""
    kind = draw(st.sampled_from(["repr", "exponent", "dot"]))
    if kind == "repr":
        return repr(draw(FLOATS))
    sign = draw(st.sampled_from(["", "-", "+"]))
    if kind == "exponent":
        return f"{sign}{draw(st.integers(0, 999))}e{draw(st.integers(-300, 300))}"
    return f"{sign}{draw(st.integers(0, 10**6))}.{draw(st.integers(0, 999)):03d}"


@st.composite
def insert_literals(draw) -> tuple[str, object]:
    """(literal text, the value it stands for) read by an independent reader: Python's int and
    float for numbers, the encoder of tests/spark_literals.py for strings."""
    kind = draw(st.sampled_from(["int", "float", "string", "word"]))
    if kind == "int":
        value = draw(INTEGERS)
        return str(value), value
    if kind == "float":
        text = draw(float_spellings())
        return text, float(text)
    if kind == "string":
        value = draw(STRING_VALUES)
        return spark_literal(value, draw(STRING_STYLES)), value
    return draw(st.sampled_from([("true", True), ("FALSE", False), ("null", None), ("-inf", -math.inf)]))


def _same_value(got: object, want: object) -> bool:
    if isinstance(want, float):
        return isinstance(got, float) and got == want and math.copysign(1, got) == math.copysign(1, want)
    return type(got) is type(want) and got == want


@FAST
@given(
    name=NAMES,
    columns=st.lists(NAMES, min_size=1, max_size=4, unique_by=str.lower),
    data=st.data(),
)
def test_insert_round_trips_and_keeps_every_literal(name, columns, data) -> None:
    rows = [[data.draw(insert_literals()) for _ in columns] for _ in range(data.draw(st.integers(1, 3)))]
    text = f"INSERT INTO {name} ({', '.join(columns)}) VALUES " + ", ".join(
        "(" + ", ".join(literal for literal, _ in row) + ")" for row in rows
    )
    (statement,) = _round_trip(text)
    assert statement.array == name and statement.columns == tuple(columns)
    for got_row, row in zip(statement.rows, rows, strict=True):
        for got, (literal, want) in zip(got_row, row, strict=True):
            assert _same_value(got, want), (literal, got, want)


def test_big_and_signed_zero_literals_keep_their_value() -> None:
    (statement,) = _round_trip(
        "INSERT INTO A VALUES (18446744073709551615, -9223372036854775808, -0.0, 1e308, 5e-324, 9007199254740993)"
    )
    big, low, zero, large, tiny, odd = statement.rows[0]
    assert (big, low, odd) == (UINT64_MAX, INT64_MIN, 2**53 + 1)
    assert all(isinstance(v, int) for v in (big, low, odd))  # never turned into floats
    assert math.copysign(1, zero) == -1 and (large, tiny) == (1e308, 5e-324)
    with pytest.raises(ParseError, match=r"18446744073709551616 is outside .* at line 1, column 23"):
        parse("INSERT INTO A VALUES (18446744073709551616)")


@FAST
@given(
    names=st.lists(PLAIN_NAMES, min_size=4, max_size=4, unique_by=str.lower),
    low=st.integers(INT64_MIN, INT64_MAX),
    high=st.integers(INT64_MIN, INT64_MAX),
    threshold=st.floats(min_value=1e-6, max_value=1.0),
    path=STRING_VALUES.filter(lambda p: "\n" not in p),
    amount=st.integers(1, 10**6),
    data=st.data(),
)
def test_statements_of_every_kind_round_trip(names, low, high, threshold, path, amount, data) -> None:
    a, b, v, i = names
    number = data.draw(float_spellings())
    statements = [
        f"CREATE ARRAY {a} <{v}:double NULL, w:int64> [{i}=-5:{amount}:3; j=0:*:7]",
        f"SELECT {v} INTO {b} FROM subarray({a}, {low}, {high}) WHERE {v} > {number}",
        f"SELECT * FROM regrid(filter({a}, {v} <> {low}), 2, {amount}, avg({v}), max(w))",
        f"SELECT * FROM apply(project({a}, {v}), z, {v} * {number})",
        f"DELETE FROM subarray({a}, {low}, {low}, {high}, {high})",
        f"LOAD {a} FROM {spark_literal(path, data.draw(STRING_STYLES))} AS CSV",
        f"CREATE ARRAY VIEW {b} WITH CHUNKS ({amount}, 2) AS SELECT count(*), sum(y.{v}) AS s "
        f"FROM {a} x SIMILARITY JOIN {a} y ON (y.{i} = x.{i} * 2 - {amount}) WITH SHAPE "
        f"UNION(L1({amount}), BOX(-{amount}:0)) GROUP BY x.{i}",
        f"CREATE ARRAY VIEW {b} AS SELECT * FROM window({a}, {amount}, 0, 1, 1, avg({v}))",
        f"REFRESH VIEW {b} USING BASELINE ON {a}",
        f"ALTER VIEW {b} SET REFRESH LIMIT {threshold!r} SECONDS",
        f"ALTER VIEW {b} SET KEEP {amount} VERSIONS",
        f"CREATE STREAM {a} (ts timestamp, {v} string) PARTITION LENGTH {amount} MINUTES TIME COLUMN ts "
        f"WITH MAX GAP {amount} PARTS",
        f"CREATE VIEW {b} WITH LATENESS {amount} PARTS USING RECOMPUTE AS SELECT {v}, max(x) AS m "
        f"FROM {a} [WINDOW {amount} SECONDS] GROUP BY {v}",
        f"CREATE UNCERTAIN ARRAY {a} <f:gaussian> [x=0:99:10; y=0:99:10; corr(x, y)] STORE MULTIPLE "
        f"STEP ({amount}, 2) SIGMAS {threshold * 5!r} WORKLOAD ({number}, 5) THRESHOLD {threshold!r}",
        f"SELECT * FROM subarray({a}, {low}, 0, {high}, 9, THRESHOLD {threshold!r}, METHOD RTREE)",
        f"SHOW SCHEMA OF {a}",
        f"DROP STREAM {a}",
    ]
    for text in statements:
        try:
            _round_trip(text)
        except ParseError as error:
            # only values the language refuses on purpose (with their place) may fail to parse
            assert re.search(r"(outside|must|positive|probability|sigma)", error.reason), (text, error)
            assert error.line == 1 and error.column is not None


def test_string_literals_are_read_as_spark_reads_them(spark) -> None:
    """Backslash escapes Spark keeps (``\\%`` and ``\\_`` for LIKE), octal escapes, ``\\u``, doubled
    quotes: INSERT and LOAD read the same string as Spark does (the reference is Spark itself)."""
    literals = [
        r"'50\%'",
        r"'a\_b'",
        r"'\101\102'",
        r"'\u00e9t\u00E9'",
        r"'it''s'",
        r"'\x\q'",
        r'"say ""hi"""',
    ]
    text = "INSERT INTO A VALUES (" + ", ".join(literals) + ")"
    (statement,) = _round_trip(text)
    spark_values = list(spark.sql("SELECT " + ", ".join(literals)).collect()[0])
    assert list(statement.rows[0]) == spark_values
    (load,) = parse(r"LOAD A FROM 'data\%\101.csv'")
    assert load.path == spark.sql(r"SELECT 'data\%\101.csv'").collect()[0][0]


@pytest.mark.parametrize(
    ("text", "message", "at"),
    [
        (
            "CREATE STREAM X (ts timestamp) PARTITION LENGTH 99999999999999999999 TIME COLUMN ts",
            "partition length in seconds is too large",
            "9999",
        ),
        (
            "CREATE STREAM X (ts timestamp) PARTITION LENGTH 200000000000 MINUTES TIME COLUMN ts",
            "partition length in seconds is too large: 12000000000000",
            "2000",
        ),
        (
            "CREATE STREAM X (ts timestamp) PARTITION LENGTH 60 TIME COLUMN ts WITH MAX GAP "
            "99999999999999999999 PARTS",
            "MAX GAP is too large",
            "9999",
        ),
        (
            "CREATE VIEW W WITH LATENESS 99999999999999999999 PARTS AS SELECT s, max(x) AS m FROM M "
            "[WINDOW 1 MINUTES] GROUP BY s",
            "lateness allowance is too large",
            "9999",
        ),
        (
            "CREATE VIEW W AS SELECT s, max(x) AS m FROM M [WINDOW 99999999999999 SECONDS] GROUP BY s",
            "window length in seconds is too large",
            "9999",
        ),
        (
            "CREATE VIEW H AS INITIALIZE H[i] AS SELECT 1 FROM M[i] UPDATE H[j] AS SELECT 1 FROM M[j] "
            "PARTITION LENGTH 99999999999999999999",
            "partition length in seconds is too large",
            "9999",
        ),
        ("ALTER VIEW W SET KEEP 99999999999999999999 VERSIONS", "versions kept is too large", "9999"),
    ],
)
def test_stream_numbers_beyond_what_fits_are_refused_where_written(text, message, at) -> None:
    """Before, these were accepted (a stream "every 99999999999999999999 s", whose first INSERT then
    failed with an internal OverflowError)."""
    with pytest.raises(ParseError) as caught:
        parse("SHOW STREAMS;\n" + text)
    assert message in caught.value.reason
    assert (caught.value.line, caught.value.column) == (2, text.index(at) + 1)


# ---------------------------------------------------------------------------------------------
# The statements of docs/language.md, as written

CELLS = [(1, 0, 0.5, 3), (2, 1, 1.5, None), (3, 3, 2.5, 4)]


def _catalog(db) -> tuple:
    """What a failed statement must not change: every relation with its kind and version."""
    listing = db.relations()
    versions = []
    for name, kind in zip(listing.name, listing.kind, strict=True):
        if kind in ("array", "array view"):
            versions.append(db.array(name).version)
        elif kind == "stream":
            versions.append(db.stream(name).version)
        else:
            versions.append(None)
    return tuple(sorted(zip(listing.name, listing.kind, versions, strict=True), key=str))


def test_documented_array_statements_run_as_written(db, tmp_path) -> None:
    db.sql(
        "CREATE ARRAY A <v:double, w:int64 NULL> [i=1:100:10; j=0:*:50];\n"
        "CREATE ARRAY S <flux:double> [ra=0:359:90 SCALE 0.5 OFFSET -90 UNIT 'deg'; t=0:9:10]"
    )
    assert str(db.sql("SHOW SCHEMA OF A")) == "A<v:float64, w:int64 NULL>[i=1:100:10; j=0:*:50]"
    db.sql("INSERT INTO A VALUES (1, 0, 0.5, 3), (2, 1, 1.5, null)")
    db.sql("INSERT INTO A (w, v, i, j) VALUES (4, 2.5, 3, 3)")
    cells = db.sql("SELECT * FROM A").to_pandas().sort_values(["i", "j"])
    assert [
        (int(i), int(j), float(v), None if pd.isna(w) else int(w))
        for i, j, v, w in cells.itertuples(index=False)
    ] == CELLS
    # regrid by 2x2 blocks against plain Python averages of the cells in each block
    stored = db.sql("SELECT * INTO B FROM regrid(A, 2, 2, avg(v)) WHERE v_avg < 10").to_pandas()
    blocks: dict[tuple[int, int], list[float]] = {}
    for i, j, v, _ in CELLS:
        blocks.setdefault(((i - 1) // 2 + 1, j // 2), []).append(v)
    want = {key: math.fsum(vs) / len(vs) for key, vs in blocks.items()}
    assert dict(zip(zip(stored.i, stored.j, strict=True), stored.v_avg, strict=True)) == want
    # a similarity view counting the L1(1) neighbours of each cell, against brute force
    view = db.sql(
        "CREATE ARRAY VIEW V WITH CHUNKS (50, 50) AS SELECT count(*) AS n, sum(b.v) AS s "
        "FROM A a SIMILARITY JOIN A b WITH SHAPE L1(1) GROUP BY a.i, a.j"
    ).to_pandas()
    for i, j, n, s in view[["i", "j", "n", "s"]].itertuples(index=False):
        near = [c for c in CELLS if abs(c[0] - i) + abs(c[1] - j) <= 1]
        assert (n, s) == (len(near), math.fsum(c[2] for c in near))
    assert db.sql("VERIFY VIEW V") is True
    for statement in ("REFRESH VIEW V", "REFRESH VIEW V USING FULL", "REFRESH VIEW V USING BASELINE ON A"):
        assert "up to date" in str(db.sql(statement))
    assert db.sql("ALTER VIEW V SET REFRESH LIMIT 5 SECONDS") is None
    assert db.sql("ALTER VIEW V SET REFRESH LIMIT NONE") is None
    status = db.sql("SHOW STATUS OF V")
    assert status.to_dict("list") == {"base": ["A"], "reflected": [2], "current": [2], "pending": [False]}
    listed = db.sql("SHOW RELATIONS")
    assert dict(zip(listed.name, listed.kind, strict=True)) == {
        "A": "array",
        "B": "array",
        "S": "array",
        "V": "array view",
    }
    path = tmp_path / "cells.csv"
    path.write_text("i,j,v,w\n7,7,7.5,7\n")
    assert "wrote 1 cell" in str(db.sql(f"LOAD A FROM '{path}' AS CSV"))
    assert "removed 1 cell" in str(db.sql("DELETE FROM subarray(A, 7, 7, 7, 7)"))
    db.sql("DROP VIEW V; DROP ARRAY B")
    assert "removed 3 cell" in str(db.sql("DELETE FROM A"))


def test_documented_script_runs_through_the_cli(db, tmp_path) -> None:
    script = tmp_path / "script.sql"
    script.write_text(
        "-- a script as docs/language.md writes one\n"
        "CREATE ARRAY A <v:double, w:int64 NULL> [i=1:100:10; j=0:*:50];\n"
        "INSERT INTO A VALUES (1, 0, 0.5, 3), (2, 1, 1.5, null), (3, 3, 2.5, 4);\n"
        "CREATE STREAM M (ts timestamp, src string, loss int) PARTITION LENGTH 60 TIME COLUMN ts;\n"
        "INSERT INTO M VALUES ('2015-01-01 00:00:10', 'x', 12), ('2015-01-01 00:01:10', 'y', 3);\n"
        "SELECT src, sum(loss) AS total FROM M GROUP BY src ORDER BY src;\n"
    )
    result = CliRunner().invoke(
        cli, ["sql", "-f", str(script), "--format", "csv"], obj=Context.of(db), catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert result.output.split() == ["src,total", "x,12", "y,3"]
    assert db.sql("SELECT count(*) AS n FROM A").collect()[0].n == 3


# ---------------------------------------------------------------------------------------------
# Errors: named, placed in the script, nothing changed

FIRST_TWO = (
    "CREATE ARRAY A <v:double, s:string NULL> [i=1:10:5; j=1:10:5];\n"
    "INSERT INTO A VALUES (1, 1, 0.5, 'a'), (2, 2, 1.5, null);\n"
)


@pytest.mark.parametrize(
    ("third", "error", "names"),
    [
        ("INSERT INTO Nope VALUES (1, 1, 0.5, 'b')", "NotFoundError", ["Nope"]),
        ("SELECT * FROM filter(A, x > 0)", "ValidationError", ["'x'"]),
        (
            "INSERT INTO A VALUES (3, 3, 'x', 'b')",
            "ValidationError",
            ["attribute v", "'x'", "line 4, column 31"],
        ),
        ("SELECT nope(v) FROM A GROUP BY i", "ValidationError", ["`nope`", "at line 4, column 10"]),
        (
            "CREATE STREAM a (ts timestamp) PARTITION LENGTH 60 TIME COLUMN ts",
            "AlreadyExistsError",
            ["array named a"],
        ),
        ("EXPLAIN DROP ARRAY A", "ValidationError", ["EXPLAIN is not available for DROP ARRAY;"]),
    ],
)
def test_a_failing_statement_is_named_placed_and_changes_nothing(db, third, error, names) -> None:
    """The third statement of a script fails: the error names the object, says where the statement
    starts in the script, the statements before it stay committed (docs/language.md) and the failing
    one and those after it change nothing."""
    with pytest.raises(ArrayViewsError) as caught:
        db.sql(FIRST_TWO + "SHOW ARRAYS;\n  " + third + ";\nINSERT INTO A VALUES (9, 9, 9.5, 'after')")
    assert type(caught.value).__name__ == error
    message = str(caught.value)
    assert message.endswith("(statement at line 4, column 3)"), message
    for name in names:
        assert name in message, message
    assert _catalog(db) == (("A", "array", 1),)
    assert sorted(db.sql("SELECT * FROM A").to_pandas().i.tolist()) == [1, 2]


def test_names_are_unique_across_relation_kinds(db) -> None:
    db.sql(
        "CREATE STREAM M (ts timestamp, loss int) PARTITION LENGTH 60 TIME COLUMN ts;\n"
        "CREATE ARRAY A <v:double> [i=1:10:5]"
    )
    before = _catalog(db)
    attempts = {
        "CREATE ARRAY m <v:double> [i=1:10:5]": "a stream named m already exists",
        "SELECT * INTO M FROM A": "a stream named M already exists",
        "CREATE STREAM A (ts timestamp) PARTITION LENGTH 60 TIME COLUMN ts": "an array named A already exists",
        "CREATE UNCERTAIN ARRAY M <f:gaussian> [x=0:9:5]": "a stream named M already exists",
        "CREATE VIEW a AS SELECT loss, max(loss) AS m FROM M [WINDOW 1 MINUTES] GROUP BY loss": "an array named a already exists",
    }
    for statement, message in attempts.items():
        with pytest.raises(AlreadyExistsError, match=re.escape(message)):
            db.sql(statement)
        assert _catalog(db) == before, statement
    assert db.kind_of("M") == "stream" and db.kind_of("A") == "array"


def test_spark_sql_errors_are_placed_in_the_script(db) -> None:
    db.sql("CREATE ARRAY A <v:double> [i=1:10:5]")
    with pytest.raises(ArrayViewsError) as caught:
        db.sql("SELECT 1;\nSELECT v,\n    nope(v) FROM A GROUP BY v")
    message = str(caught.value)
    assert "`nope`" in message and "at line 3, column 5" in message and "line 1 pos" not in message
    assert message.endswith("(statement at line 2, column 1)")


def test_cli_reports_a_failing_script_in_one_line_without_traceback(tmp_path) -> None:
    script = tmp_path / "bad.sql"
    script.write_text(
        "CREATE ARRAY A <v:double> [i=1:10:5];\n"
        "INSERT INTO A VALUES (1, 2.0);\n"
        "SELECT nope(v) FROM A GROUP BY i;\n"
        "INSERT INTO A VALUES (2, 3.0);\n"
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "arrayviews.cli.main",
            "--warehouse",
            str(tmp_path / "w"),
            "--master",
            "local[1]",
            "sql",
            "-f",
            str(script),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "ARRAYVIEWS_LOG_LEVEL": "OFF"},
    )
    assert run.returncode == 1
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr[:2000]
    assert lines[0].startswith("error: Spark SQL could not run the query") and "`nope`" in lines[0]
    assert lines[0].endswith("(statement at line 3, column 1)")
    assert "Traceback" not in run.stderr and "at org.apache" not in run.stderr
    assert not Path(tmp_path / "w").joinpath("nothing").exists()


STREAM_ROWS = [
    ("2015-01-01 00:00:10", "x", 12),
    ("2015-01-01 00:00:20", "y", 3),
    ("2015-01-01 00:01:10", "x", 15),
]


@pytest.mark.slow
def test_documented_stream_and_uncertain_statements_run_as_written(db, tmp_path) -> None:
    """The stream, stream-view and uncertain-array rows of docs/language.md's table, each as written,
    with the result kind the table gives; stream sums against plain Python."""
    values = ", ".join(f"('{ts}', '{src}', {loss})" for ts, src, loss in STREAM_ROWS)
    db.sql(
        "CREATE STREAM M (ts timestamp, src string, loss int) PARTITION LENGTH 1 MINUTES TIME COLUMN ts "
        "WITH MAX GAP 5 PARTS;\n"
        f"INSERT INTO M VALUES {values}"
    )
    assert "appended 1 row" in str(db.sql("INSERT INTO M VALUES ('2015-01-01 00:09:00', 'x', 1) ALLOW GAP"))
    rows = [*STREAM_ROWS, ("2015-01-01 00:09:00", "x", 1)]
    view = db.sql(
        "CREATE VIEW H WITH LATENESS 2 PARTS AS INITIALIZE H[i] AS SELECT src, sum(loss) AS total FROM M[i] "
        "GROUP BY src UPDATE H[j] AS SELECT src, sum(loss) AS total FROM M[j] GROUP BY src PARTITION LENGTH 60"
    )
    assert type(view).__name__ == "StreamView"
    want: dict[tuple[str, str], int] = {}
    for ts, src, loss in rows:
        key = (ts[:16] + ":00", src)
        want[key] = want.get(key, 0) + loss
    got = db.sql("SELECT src, total, PART_TIMESTAMP FROM H").toPandas()
    got = {(str(t), s): int(n) for s, n, t in got.itertuples(index=False)}
    # the view holds its newest parts (older ones fall out past the lateness allowance)
    parts = {t for t, _ in got}
    assert "2015-01-01 00:09:00" in parts
    assert got == {key: total for key, total in want.items() if key[0] in parts}
    db.sql(
        "CREATE VIEW P AS SELECT src, count(*) AS c, sum(loss) AS s FROM M PATTERN [a, b, c+] WHERE a.loss > 1 GROUP BY src"
    )
    db.sql(
        "CREATE VIEW W USING INCREMENTAL AS SELECT src, max(loss) AS m FROM M [WINDOW 10 MINUTES] GROUP BY src HAVING max(loss) > 0"
    )
    for statement in ("ALTER VIEW H SET LATENESS 3 PARTS", "ALTER VIEW H SET KEEP 5 VERSIONS"):
        assert db.sql(statement) is None
    assert db.sql("SHOW STATUS OF W").to_dict("list")["pending"] == [False]
    assert "states" in db.sql(
        "EXPLAIN CREATE VIEW P2 AS SELECT src, count(*) AS c FROM M PATTERN [a, b+] GROUP BY src"
    )
    db.sql(
        "CREATE UNCERTAIN ARRAY U <flux:gaussian> [x=0:99:10; y=0:99:10; corr(x, y)] STORE MULTIPLE STEP AUTO "
        "SIGMAS 3 WORKLOAD (5, 5), (50, 50) THRESHOLD 0.9;\n"
        "CREATE UNCERTAIN ARRAY U2 <flux:gaussian> [x=0:99:10; y=0:99:10];\n"
        "INSERT INTO U VALUES (10, 0.5, 10, 0.5, 0.1, 3.0, 0.2), (20, 0.5, 20, 0.5, 0.0, 4.0, 0.3);\n"
        "INSERT INTO U2 (x, x_sigma, y, y_sigma, flux, flux_sigma) VALUES (10, 0.5, 10, 0.5, 3.0, 0.2)"
    )
    kinds = {
        "SELECT * FROM U": "UncertainArray",
        "SELECT * FROM subarray(U, 0, 0, 30, 30, THRESHOLD 0.5, METHOD RTREE)": "UncertainSubarray",
        "SELECT * FROM structure_join(U, U2, 2, 0.5, METHOD BNL)": "StructureJoin",
    }
    for statement, kind in kinds.items():
        assert type(db.sql(statement)).__name__ == kind, statement
    assert sorted(db.sql("SELECT * FROM subarray(U, 0, 0, 14, 14, THRESHOLD 0.5)").to_pandas().x) == [10.0]
    listed = db.sql("SHOW RELATIONS")
    assert dict(zip(listed.name.str.lower(), listed.kind, strict=True)) == {
        "m": "stream",
        "h": "stream view",
        "p": "stream view",
        "w": "stream view",
        "u": "uncertain array",
        "u2": "uncertain array",
    }
    db.sql("DROP VIEW H; DROP VIEW P; DROP VIEW W; DROP STREAM M; DROP ARRAY U; DROP ARRAY U2")
    assert db.relations().empty


WINDOW_CELLS = [(1, 0, 0.5), (2, 0, 1.5), (5, 7, 2.0), (9, 7, -4.0), (9, 60, 8.0)]


def _window_reference(before: tuple[int, int], after: tuple[int, int]) -> dict[tuple[int, int], float]:
    return window_averages(WINDOW_CELLS, before, after)


@pytest.mark.parametrize(
    ("dimension", "extents"),
    [
        ("j=0:99:50", (1000, 0, 0, 0)),
        ("j=0:99:50", (INT64_MAX, 0, 0, 0)),
        ("j=0:99:50", (0, 0, INT64_MAX, 0)),
        ("j=0:99:50", (0, INT64_MAX, 3, INT64_MAX)),
        ("j=0:*:50", (0, 0, INT64_MAX, 0)),  # before: enumerated 2**61 / 50 chunks, out of memory
    ],
)
def test_windows_reaching_past_the_dimension_cover_it_whole(db, dimension, extents) -> None:
    """Before, an extent near the int64 edge overflowed: every average came out 0.0 (silently), or
    the job failed with an internal ValueError."""
    db.sql(
        f"CREATE ARRAY A <v:double> [i=1:100:10; {dimension}];\n"
        "INSERT INTO A VALUES " + ", ".join(f"({i}, {j}, {v})" for i, j, v in WINDOW_CELLS)
    )
    want = _window_reference((extents[0], extents[2]), (extents[1], extents[3]))
    arguments = ", ".join(map(str, extents))
    for statement in (
        f"SELECT * FROM window(A, {arguments}, avg(v))",
        f"CREATE ARRAY VIEW W AS SELECT * FROM window(A, {arguments}, avg(v))",
    ):
        got = db.sql(statement).to_pandas()
        assert dict(zip(zip(got.i, got.j, strict=True), got.v_avg, strict=True)) == pytest.approx(want)
    db.sql("INSERT INTO A VALUES (3, 0, 10.0); REFRESH VIEW W")
    assert db.sql("VERIFY VIEW W") is True


def test_statements_on_the_wrong_kind_say_what_to_write(db) -> None:
    db.sql(
        "CREATE STREAM M (ts timestamp, loss int) PARTITION LENGTH 60 TIME COLUMN ts;\n"
        "CREATE UNCERTAIN ARRAY U <flux:gaussian> [x=0:99:10; y=0:99:10]"
    )
    before = _catalog(db)
    wrong = {
        # before: AttributeError: 'UncertainArray' object has no attribute 'window'
        "CREATE ARRAY VIEW W AS SELECT * FROM window(U, 1, 1, 1, 1, avg(flux))": "U is an uncertain array",
        "DROP ARRAY M": "M is a stream; drop it with DROP STREAM M",  # before: "use drop_stream"
        "ALTER VIEW M SET LATENESS 2 PARTS": "M is a stream: the lateness",  # before: "an stream"
    }
    for statement, message in wrong.items():
        with pytest.raises(ArrayViewsError, match=re.escape(message)):
            db.sql(statement)
        assert _catalog(db) == before


@pytest.mark.parametrize(
    "shape",
    [
        "L1(9223372036854775807)",  # before: an internal ValueError (Maximum allowed dimension exceeded)
        "BOX(0:99999999999, 0:0)",
        "UNION(BOX(0:0, 0:0), BOX(100000000000:100000000000, 0:0))",
        "PRODUCT(BOX(-5000:5000), L1(5000))",
    ],
)
def test_shapes_too_large_to_build_are_refused_by_name(db, shape) -> None:
    db.sql("CREATE ARRAY A <v:double> [i=1:10:5; j=1:10:5]; INSERT INTO A VALUES (1, 1, 0.5)")
    before = _catalog(db)
    for statement in (
        f"CREATE ARRAY VIEW V AS SELECT count(*) FROM A a SIMILARITY JOIN A b WITH SHAPE {shape} GROUP BY a.i, a.j",
        f"SELECT count(*) FROM A a SIMILARITY JOIN A b WITH SHAPE {shape} GROUP BY a.i, a.j",
    ):
        with pytest.raises(ArrayViewsError, match=r"is too large: its stencil would hold \d+ cells"):
            db.sql(statement)
        assert _catalog(db) == before


def test_shell_reports_a_failing_spark_job_as_an_error_not_a_bug(db) -> None:
    """Before, the shell printed ``internal error: NumberFormatException: ...`` (the PySpark exception
    of the job that showing the result runs was not translated)."""
    import io

    from arrayviews.cli.shell import Shell

    db.sql(
        "CREATE STREAM M (ts timestamp, loss int) PARTITION LENGTH 60 TIME COLUMN ts;\n"
        "INSERT INTO M VALUES ('2015-01-01 00:00:10', 12)"
    )
    out = io.StringIO()
    shell = Shell(lambda: db, out=out, width=100)
    shell.run("SELECT * FROM M WHERE loss > 'a';")
    text = out.getvalue()
    assert text.startswith("error: a Spark job failed: [CAST_INVALID_INPUT] The value 'a'"), text
    assert "internal" not in text and "Traceback" not in text


def test_cli_shows_no_pyspark_warning_before_the_error(db) -> None:
    """Before, ``arrayviews sql`` printed PySpark's UserWarning about the failed toPandas (with the
    whole Spark error and the query) on standard error ahead of the one-line error."""
    import warnings

    db.sql(
        "CREATE STREAM M (ts timestamp, loss int) PARTITION LENGTH 60 TIME COLUMN ts;\n"
        "INSERT INTO M VALUES ('2015-01-01 00:00:10', 12)"
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = CliRunner().invoke(cli, ["sql", "SELECT * FROM M WHERE loss > 'a'"], obj=Context.of(db))
    assert result.exit_code != 0 and "CAST_INVALID_INPUT" in str(result.exception)
    assert [str(w.message)[:80] for w in caught if "pyspark" in w.filename] == []
