"""The statement language tried a second time, where the first trial (test_language_trial.py) did not
go: SELECTs that are Spark SQL although they start like array queries, conditions only Spark reads,
Spark's doubled quotes in cell expressions, comments and keyword case anywhere in a statement, and
column names without regard to case. References: Spark itself, plain Python, the unadorned text."""

from __future__ import annotations

import math
import random
import re
from collections import Counter

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import arrayviews
from arrayviews.language import syntax as ast
from arrayviews.language.parser import parse
from arrayviews.model.errors import ArrayViewsError, ParseError
from arrayviews.model.expressions import parse_expression

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: (i, j, v, w, s): the cells of the arrays below
CELLS = [
    (1, 0, 0.5, 3, "a"),
    (2, 1, -1.5, None, "it's"),
    (3, 3, 2.5, 3, None),
    (4, 4, 0.0, -7, 'say "hi"'),
    (5, 2, 4.0, 9, "its"),
]


@pytest.fixture
def local_db(tmp_path):
    """A warehouse worked on in-process (no statement here needs Spark) holding the array A."""
    db = arrayviews.connect(str(tmp_path / "warehouse"), execution="local")
    db.sql("CREATE ARRAY A <v:double, w:int64 NULL, s:string NULL> [i=1:10:5; j=0:9:5]")
    db.array("A").insert({name: [c[k] for c in CELLS] for k, name in enumerate("ijvws")})
    return db


def _cells(frame) -> set[tuple]:
    """The rows of a pandas frame as tuples, missing values as None."""
    return {
        tuple(None if x is None or x != x else x for x in row)
        for row in frame.astype(object).itertuples(index=False)
    }


# ---------------------------------------------------------------------------------------------
# The two SELECT forms: a WHERE followed by more Spark SQL is a Spark SQL query


SPARK_AFTER_WHERE = [
    "SELECT w, count(*) AS n FROM A WHERE v > 0 GROUP BY w ORDER BY w",
    "SELECT * FROM A WHERE v > 0 ORDER BY v DESC",
    "SELECT * FROM A WHERE v > 0 LIMIT 2",
    "SELECT v FROM A WHERE v > 0 UNION ALL SELECT v FROM A WHERE v < 0",
    "SELECT * FROM A WHERE v > 0 ORDER BY v -- a comment\n",
]


def test_a_where_followed_by_more_spark_sql_is_a_spark_query(db) -> None:
    """Before, the array form swallowed what followed WHERE as its condition: ORDER BY, GROUP BY and
    LIMIT were refused ("unexpected 'ORDER BY'"), UNION too ("UNION is not supported in array
    expressions"), though docs/language.md makes them Spark SQL queries, which read arrays."""
    for text in SPARK_AFTER_WHERE:
        (statement,) = parse(text)
        assert isinstance(statement, ast.Query) and statement.relations == ("A",), text
    for text in ("SELECT * FROM A WHERE v > 0", "SELECT v, w FROM A WHERE v IN (SELECT v FROM B)"):
        (statement,) = parse(text)  # still the array form (the second one's condition kept as text)
        assert isinstance(statement, ast.Select), text
    db.sql("CREATE ARRAY A <v:double, w:int64 NULL> [i=1:10:5; j=0:9:5]")
    rows = ", ".join(f"({i}, {j}, {v}, {'null' if w is None else w})" for i, j, v, w, _ in CELLS)
    db.sql(f"INSERT INTO A VALUES {rows}")
    counts = Counter(c[3] for c in CELLS if c[2] > 0)
    got = db.sql(SPARK_AFTER_WHERE[0]).collect()
    assert [(r.w, r.n) for r in got] == sorted(counts.items(), key=lambda kv: (kv[0] is not None, kv[0]))
    # its EXPLAIN is Spark's plan (before: "EXPLAIN is not available for SELECT w,; it explains SELECT")
    plan = db.sql("EXPLAIN " + SPARK_AFTER_WHERE[0])
    assert plan.startswith("Spark SQL query reading A (array):") and "Physical Plan" in plan


def test_a_condition_only_spark_reads_is_refused_at_its_place_and_changes_nothing(local_db) -> None:
    """A condition cell expressions cannot read (kept as Spark SQL in case the name is a stream) over
    an array: before, the error was placed in the condition alone ("line 1, column 1" of ``upper(s)
    = 'A'``), not in the script."""
    before = local_db.array("A").version
    for k, (condition, message) in enumerate(
        [
            ("upper(s) = 'A'", "unknown function 'upper'"),
            ("v IN (SELECT v FROM A)", "IN with a subquery is not supported"),
            ("s || 'x' = 'ax'", "'||' (string concatenation"),
        ]
    ):
        head = f"SHOW ARRAYS;\n\t-- é 中 😀\n\tINSERT INTO A VALUES (9, {k}, 9.5, 1, 'x'); SELECT v FROM A WHERE\tv > 0 AND "
        text = head + condition + ";\nDELETE FROM A"
        with pytest.raises(ParseError) as caught:
            local_db.sql(text)
        at = text.index(condition)
        line = text.count("\n", 0, at) + 1
        column = at - text.rfind("\n", 0, at)
        assert (caught.value.line, caught.value.column) == (line, column), str(caught.value)
        assert message in caught.value.reason
        # the INSERT before it committed, the DELETE after it did not run
        before += 1
        assert local_db.array("A").version == before
    assert local_db.sql("SELECT * FROM A").to_pandas().shape[0] == len(CELLS) + 3


# ---------------------------------------------------------------------------------------------
# Spark's quotes in cell expressions

QUOTED = ["'it''s'", "'it' 's'", "''''", '"say ""hi"""', "'a''b' \"c\"", "'it''''s'", r"'it\'s'"]


def test_doubled_quotes_in_cell_expressions_read_as_spark_reads_them(spark, local_db) -> None:
    """Before, ``s = 'it''s'`` in a WHERE or filter was refused ("CONCAT is not supported in array
    expressions": sqlglot reads a doubled quote as two literals), though INSERT read the same
    literal as Spark does (docs/language.md: "strings use Spark's escapes (`''` and `\\'`)")."""
    spark_values = list(spark.sql("SELECT " + ", ".join(QUOTED)).collect()[0])
    for literal, want in zip(QUOTED, spark_values, strict=True):
        expression = parse_expression(f"s = {literal}")
        assert expression.right.value == want, literal
        assert parse_expression(expression.to_text()) == expression
        for query in (f"SELECT * FROM A WHERE s = {literal}", f"SELECT * FROM filter(A, s = {literal})"):
            got = local_db.sql(query).to_pandas()
            assert sorted(got.i) == [c[0] for c in CELLS if c[4] == want], query


# ---------------------------------------------------------------------------------------------
# Comments, line breaks and keyword case anywhere

STATEMENTS = [
    "CREATE ARRAY a1 <v:double NULL, w:int64> [i=-5:100:3; j=0:*:7]",
    "CREATE ARRAY s1 <flux:double> [ra=0:359:90 SCALE 0.5 OFFSET -90 UNIT 'deg'; t=0:9:10]",
    "SELECT v INTO b1 FROM subarray(a1, 1, 2, 3, 4) WHERE v > 1.5 AND NOT w IS NULL",
    "SELECT * FROM regrid(filter(a1, v <> 3), 2, 2, avg(v), max(w))",
    "INSERT INTO a1 (i, j, v, w) VALUES (1, 2, 3.5, 4), (5, 6, null, -7)",
    "CREATE ARRAY VIEW b1 WITH CHUNKS (10, 2) AS SELECT count(*), sum(y.v) AS s FROM a1 x SIMILARITY JOIN "
    "a1 y ON (y.i = x.i * 2 - 3) WITH SHAPE UNION(L1(2), BOX(-2:0)) GROUP BY x.i",
    "REFRESH VIEW b1 USING BASELINE ON a1",
    "ALTER VIEW b1 SET REFRESH LIMIT 2.5 SECONDS",
    "CREATE STREAM m1 (ts timestamp, src string) PARTITION LENGTH 5 MINUTES TIME COLUMN ts WITH MAX GAP 4 PARTS",
    "CREATE VIEW w1 WITH LATENESS 2 PARTS USING RECOMPUTE AS SELECT src, max(x) AS m FROM m1 [WINDOW 10 SECONDS] "
    "GROUP BY src",
    "CREATE VIEW p1 AS SELECT src, count(*) AS c FROM m1 PATTERN [a, b+] WHERE a.x > 1 GROUP BY src",
    "CREATE UNCERTAIN ARRAY u1 <f:gaussian> [x=0:99:10; y=0:99:10; corr(x, y)] STORE MULTIPLE STEP (2, 2) "
    "SIGMAS 3 WORKLOAD (5, 5) THRESHOLD 0.9",
    "SELECT src, count(*) AS n FROM m1 WHERE src <> 'x' GROUP BY src ORDER BY n",
    "SELECT * FROM a1 WHERE v > 0 ORDER BY v",
    "EXPLAIN SELECT count(*) FROM a1 x SIMILARITY JOIN a1 y WITH SHAPE L1(1) GROUP BY x.i, x.j USING BASE ARRAYS",
]
TOKEN = re.compile(r"'[^']*'|-?\d+(?:\.\d+)?|[A-Za-z_][A-Za-z0-9_]*|<>|\S")
SEPARATORS = [" ", "\n", "\t", " /* c */ ", " -- c; 'x' [\n", "\n\t/* é [\n中 ] */  ", "/*]*/"]


def _same(statement: ast.Statement) -> object:
    """What must not change: a Spark SQL query is kept verbatim, so only the relations it reads."""
    inner = statement.statement if isinstance(statement, ast.Explain) else statement
    return ("query", inner.relations) if isinstance(inner, ast.Query) else statement


@FAST
@given(seed=st.integers(0, 2**32 - 1), which=st.integers(0, len(STATEMENTS) - 1))
def test_comments_line_breaks_and_keyword_case_anywhere_change_nothing(seed, which) -> None:
    """Before: a block comment inside a schema (``<v:double /* m/s */>``), a ``--`` comment holding a
    bracket in one, a comment between PARTITION and LENGTH, and one between GROUP and BY (or ORDER
    and BY) of a Spark SQL query were syntax errors."""
    rng = random.Random(seed)
    text = STATEMENTS[which]
    tokens = TOKEN.findall(text)
    pieces = []
    for k, token in enumerate(tokens):
        if token.isalpha() and token.isupper():  # keywords are written upper case above
            token = "".join(c.lower() if rng.random() < 0.5 else c for c in token)
        pieces.append(token)
        if k < len(tokens) - 1:
            pieces.append(rng.choice(SEPARATORS) if rng.random() < 0.4 else " ")
    varied = "".join(pieces)
    assert [_same(s) for s in parse(varied)] == [_same(s) for s in parse(text)], varied


@pytest.mark.parametrize(
    ("commented", "plain"),
    [
        (
            "CREATE ARRAY A <v:double /* m/s */, w:int64 -- [count]\n> [i=0:9:5 /* ] */; j=0:9:5]",
            "CREATE ARRAY A <v:double, w:int64> [i=0:9:5; j=0:9:5]",
        ),
        (
            "CREATE UNCERTAIN ARRAY U <f:gaussian /* Jy */> [x=0:99:10; /* ] */ y=0:99:10]",
            "CREATE UNCERTAIN ARRAY U <f:gaussian> [x=0:99:10; y=0:99:10]",
        ),
        (
            "CREATE STREAM M (ts timestamp) PARTITION /* of time */ LENGTH 60 TIME COLUMN ts",
            "CREATE STREAM M (ts timestamp) PARTITION LENGTH 60 TIME COLUMN ts",
        ),
        (
            "SELECT s, count(*) FROM M GROUP /* c */ BY s ORDER /* c */ BY s",
            "SELECT s, count(*) FROM M GROUP BY s",
        ),
    ],
)
def test_comments_where_they_were_syntax_errors(commented, plain) -> None:
    assert [_same(s) for s in parse(commented)] == [_same(s) for s in parse(plain)]


# ---------------------------------------------------------------------------------------------
# Column names without regard to case


def test_column_names_are_matched_without_regard_to_case(local_db) -> None:
    """Column names are case-insensitive (a schema may not hold v and V; WHERE V > 0 reads v), but
    before, SELECT V, project(A, V), aggregate(A, sum(V), I), regrid(..., MAX(V)) and INSERT INTO A
    (V, ...) said "array A has no attribute 'V'"."""
    local_db.sql("INSERT INTO A (S, W, V, J, I) VALUES ('x', 1, 6.5, 1, 6)")
    cells = [*CELLS, (6, 1, 6.5, 1, "x")]
    got = local_db.sql("select V from a where V > 0").to_pandas()
    assert _cells(got) == {(i, j, v) for i, j, v, _, _ in cells if v > 0}
    got = local_db.sql("SELECT * FROM project(A, S, V)").to_pandas()
    assert _cells(got) == {(i, j, s, v) for i, j, v, _, s in cells}
    got = local_db.sql("SELECT * FROM aggregate(A, SUM(V), count(W), I)").to_pandas()
    want: dict[int, list] = {}
    for i, _, v, w, _ in cells:
        want.setdefault(i, []).append((v, w))
    assert {(r.i, r.v_sum, r.w_count) for r in got.itertuples()} == {
        (i, math.fsum(v for v, _ in vs), sum(w is not None for _, w in vs)) for i, vs in want.items()
    }
    got = local_db.sql("SELECT * FROM regrid(A, 5, 10, MAX(V))").to_pandas()
    blocks: dict[tuple[int, int], float] = {}
    for i, j, v, _, _ in cells:
        key = ((i - 1) // 5 + 1, j // 10)
        blocks[key] = max(blocks.get(key, -math.inf), v)
    assert dict(zip(zip(got.i, got.j, strict=True), got.v_max, strict=True)) == blocks
    with pytest.raises(ArrayViewsError, match="array A has no attribute 'x'; attributes: v, w, s"):
        local_db.sql("SELECT x FROM A")
    with pytest.raises(ParseError, match="INSERT names column V twice"):
        local_db.sql("INSERT INTO A (v, w, i, j, s, V) VALUES (1, 1, 1, 1, 'a', 2)")


# ---------------------------------------------------------------------------------------------
# Errors say what is wrong, where, and change nothing


def test_errors_of_insert_and_explain_say_what_is_wrong_where(local_db) -> None:
    """Before: a coordinate outside its dimension was reported by the API as "(row 0)" with no
    place in the script; INSERT INTO a view complained about the first value that did not fit the
    view's schema instead of saying it is a view; EXPLAIN SELECT ... INTO an existing name described
    storing "into the new array A" although the statement is refused."""
    local_db.sql("CREATE ARRAY VIEW W AS SELECT * FROM window(A, 1, 1, 0, 0, sum(v))")
    versions = (local_db.array("A").version, local_db.array("W").version)
    script = "SHOW ARRAYS;\nINSERT INTO A VALUES (8, 8, 1.0, 1, 'a'),\n\t(11, 0, 1.0, 1, 'b')"
    with pytest.raises(ArrayViewsError) as caught:
        local_db.sql(script)
    assert str(caught.value).startswith(
        "array A, dimension i: coordinate 11 is outside the dimension range 1:10 in row 2 at line 3, column 3"
    )
    with pytest.raises(ArrayViewsError, match=r"^W is a view: write to its base arrays and refresh it"):
        local_db.sql("INSERT INTO W VALUES (1, 1, 'not a number')")
    for target, kind in (("a", "an array"), ("w", "an array view")):
        with pytest.raises(ArrayViewsError, match=f"^{kind} named {target} already exists"):
            local_db.sql(f"EXPLAIN SELECT * INTO {target} FROM A")
    assert (local_db.array("A").version, local_db.array("W").version) == versions
    assert local_db.sql("SHOW ARRAYS").name.tolist() == ["A"]


# ---------------------------------------------------------------------------------------------
# Printing: the text the executor hands to the API means what the statement said

BOUNDARY_LITERALS = [
    "2147483647", "2147483648", "9223372036854775807", "9223372036854775808", "18446744073709551615",
    "-2147483648", "-9223372036854775808", "0", "1.5", "1e308", "0.0D", "1.5F", "7L",
]  # fmt: skip


def test_negated_literals_print_back_to_the_same_expression(local_db) -> None:
    """Before, ``-(9223372036854775808)`` (minus a uint64 literal, which arithmetic refuses) printed
    as ``-9223372036854775808``, a BIGINT literal: the array query the executor hands on as text then
    matched w = -2^63, while the same text through the API (``A.filter``) was refused."""
    for literal in BOUNDARY_LITERALS:
        for form in (f"-({literal})", f"- -({literal})", f"-(-({literal}))", f"w = -({literal})"):
            expression = parse_expression(form)
            assert parse_expression(expression.to_text()) == expression, form
        condition = f"w = -({literal})"
        try:
            want = sorted(local_db.array("A").filter(condition).to_pandas().i)
        except ArrayViewsError as error:
            want = type(error).__name__
        try:
            got = sorted(local_db.sql(f"SELECT * FROM filter(A, {condition})").to_pandas().i)
        except ArrayViewsError as error:
            got = type(error).__name__
        assert got == want, literal


#: Literals at the edges of their types, odd strings (doubled quotes, adjacent literals, comment
#: starts) and names that need backquotes.
EDGE_ATOMS = [
    *BOUNDARY_LITERALS, "-0.0", "1e-320", "NULL", "TRUE", "'a''b'", "'x' 'y'", "'1' '2'", r"'\n\u00e9'",
    '"q"', "'--'", "'/*'", "CAST('NaN' AS DOUBLE)", "double('-inf')", "v", "`odd name`", "`a``b`",
    "`select`", "`é`",
]  # fmt: skip
OPERATORS = ["+", "-", "*", "/", "%", "DIV", "&", "|", "^", "=", "<>", "<", ">=", "<=>", "AND", "OR"]


def _expression_texts() -> st.SearchStrategy[str]:
    def extend(part: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(part, st.sampled_from(OPERATORS), part).map(" ".join),
            st.tuples(st.sampled_from(["-", "- ", "+", "~", "NOT ", "!"]), part).map("".join),
            part.map(lambda p: f"({p})"),
            part.map(lambda p: f"(({p}))"),
            st.tuples(part, st.sampled_from(["INT", "BIGINT", "DOUBLE", "FLOAT", "BOOLEAN"])).map(
                lambda t: f"CAST({t[0]} AS {t[1]})"
            ),
            st.tuples(part, part, part).map(lambda t: f"{t[0]} BETWEEN {t[1]} AND {t[2]}"),
            st.tuples(part, part, part).map(lambda t: f"CASE WHEN {t[0]} THEN {t[1]} ELSE {t[2]} END"),
            st.tuples(part, part).map(lambda t: f"{t[0]} NOT IN ({t[1]}, {t[0]})"),
            st.tuples(st.sampled_from(["abs", "coalesce", "greatest", "nullif", "try_add"]), part, part).map(
                lambda t: f"{t[0]}({t[1]})" if t[0] == "abs" else f"{t[0]}({t[1]}, {t[2]})"
            ),
        )

    return st.recursive(st.sampled_from(EDGE_ATOMS), extend, max_leaves=8)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_expression_texts())
@example(text="v = -(9223372036854775808)")
@example(text="CAST((('xy')) AS BOOLEAN)")
@example(text="NOT CAST((('1' '2')) AS INT) = 12")
def test_every_expression_read_prints_back_to_itself(text) -> None:
    """parse(print(e)) == e for whatever text parses. Before: ``-(9223372036854775808)`` came back a
    BIGINT literal, and ``CAST((('xy')) AS BOOLEAN)`` (a string cast inside two pairs of
    parentheses, read later than in one) printed as text that no longer parsed."""
    try:
        expression = parse_expression(text)
    except ParseError:
        return
    assert parse_expression(expression.to_text()) == expression, (text, expression.to_text())


def test_array_statements_on_a_stream_say_it_is_a_stream(db) -> None:
    """Before, each of these said "no array named M (arrays: none)", as if M did not exist."""
    db.sql("CREATE STREAM M (ts timestamp, loss int) PARTITION LENGTH 60 TIME COLUMN ts")
    for statement, what in [
        ("SELECT * FROM filter(M, loss > 5)", "array functions read arrays"),
        ("SELECT * FROM subarray(M, 1, 2)", "array functions read arrays"),
        ("DELETE FROM M", "DELETE removes cells of arrays"),
        ("SHOW VERSIONS OF M", "SHOW VERSIONS lists those of arrays"),
        ("SHOW SCHEMA OF M", "SHOW SCHEMA shows those of arrays"),
        ("SHOW CHUNKS OF M", "SHOW CHUNKS lists the chunks of arrays"),
    ]:
        with pytest.raises(ArrayViewsError) as caught:
            db.sql(statement)
        assert str(caught.value).startswith(
            f"M is a stream, not an array: {what} (Spark SQL reads a stream"
        ), statement
    assert db.stream("M").version == 0 and db.relations().name.tolist() == ["M"]


def test_drop_array_of_a_view_in_other_case_says_drop_view(local_db) -> None:
    """Before, ``DROP ARRAY w`` for the view W fell through to the Python API's "use drop_view"."""
    local_db.sql("CREATE ARRAY VIEW W AS SELECT * FROM window(A, 1, 1, 0, 0, sum(v))")
    for name in ("W", "w"):
        with pytest.raises(ArrayViewsError, match=rf"^{name} is a view; drop it with DROP VIEW {name} "):
            local_db.sql(f"DROP ARRAY {name}")
    assert local_db.relations().name.tolist() == ["A", "W"]


STATEMENT_WORDS = ["update", "merge", "desc", "cache", "set", "use", "comment", "delete", "truncate"]


def test_attributes_named_like_statements_are_read_as_spark_reads_them(spark, tmp_path) -> None:
    """Before, a condition starting with such a name (``update > 0``) was read by sqlglot as a
    statement ("malformed expression near '>': Expected table name but got <Token token_type:
    TokenType.GT, ...>"), though Spark reads it as the column; the message showed sqlglot's repr."""
    db = arrayviews.connect(str(tmp_path / "warehouse"), execution="local")
    attributes = ", ".join(f"{w}:int64" for w in STATEMENT_WORDS)
    db.sql(f"CREATE ARRAY K <{attributes}> [i=0:9:5]")
    rows = [(i, *[(i * 7 + k) % 5 - 2 for k in range(len(STATEMENT_WORDS))]) for i in range(6)]
    db.sql("INSERT INTO K VALUES " + ", ".join(str(row) for row in rows))
    columns = ", ".join(STATEMENT_WORDS)
    values = ", ".join(str(row[1:]) for row in rows)
    conditions = [f"{word} > 0 AND {word} IS NOT NULL" for word in STATEMENT_WORDS]
    read = ", ".join(f"{c} AS r{k}" for k, c in enumerate(conditions))
    spark_rows = spark.sql(f"SELECT {read} FROM VALUES {values} AS t({columns})").collect()
    for k, condition in enumerate(conditions):
        assert [r[k] for r in spark_rows] == [row[k + 1] > 0 for row in rows], condition  # Spark's reading
        got = db.sql(f"SELECT * FROM K WHERE {condition}").to_pandas()
        assert sorted(got.i) == [row[0] for row in rows if row[k + 1] > 0], condition
    with pytest.raises(ParseError) as caught:
        parse_expression("from > 1")
    assert "<Token" not in str(caught.value) and "got '>'" in caught.value.reason


def test_insert_into_a_stream_places_a_refused_value_and_appends_nothing(db) -> None:
    """Before: a bigint value past int64 crashed with "OverflowError: Python int too large to convert
    to C long"; other refused values were reported as "expected int32, got double" or with the
    0-based "(row 1)" for the second row, never at their line and column."""
    db.sql(
        "CREATE STREAM M (ts timestamp, src string, loss int, n bigint) PARTITION LENGTH 60 TIME COLUMN ts"
    )
    good = "('2015-01-01 00:00:10', 'a', 1, 5)"
    for bad, message in [
        (
            "('2015-01-01 00:00:20', 'b', 1, 18446744073709551615)",
            "column n: 18446744073709551615 is outside the int64 range",
        ),
        ("('2015-01-01 00:00:20', 'b', 2147483648, 5)", "column loss: 2147483648 is outside the int32 range"),
        ("('2015-01-01 00:00:20', 'b', 1.5, 5)", "column loss: 1.5 is not an int32 value"),
        ("('2015-01-01 00:00:20', 7, 1, 5)", "column src: 7 is not a string"),
        ("('yesterday', 'b', 1, 5)", "column ts: 'yesterday' is not a timestamp"),
    ]:
        text = f"SHOW STREAMS;\nINSERT INTO M VALUES {good},\n\t{bad}"
        with pytest.raises(ArrayViewsError) as caught:
            db.sql(text)
        value = message.split(": ")[1].split(" ")[0]  # the value as written
        at = text.index(value, text.index("\t"))
        assert f"stream M, {message}" in str(caught.value)
        assert f" in row 2 at line 3, column {at - text.rfind(chr(10), 0, at)}" in str(caught.value)
    assert db.stream("M").version == 0


def test_insert_into_an_uncertain_array_places_a_refused_value(tmp_path) -> None:
    """Before: the array's checks named the statement's first row "row 0" (its batch index) with no
    line and column, and ``INSERT INTO U (X, X_SIGMA, ...)`` said "unknown column X"."""
    db = arrayviews.connect(str(tmp_path / "warehouse"), execution="local")
    db.sql("CREATE UNCERTAIN ARRAY U <flux:gaussian> [x=0:99:10; y=0:99:10]")
    good = "(10, 0.5, 10, 0.5, 3.0, 0.2)"
    for bad, written, message in [
        (
            "(20, -0.5, 20, 0.5, 3.0, 0.2)",
            "-0.5",
            "column x_sigma: negative standard deviation -0.5 in row 2",
        ),
        ("(null, 0.5, 20, 0.5, 3.0, 0.2)", "null", "column x: missing value (null) in row 2"),
        ("(500, 0.5, 20, 0.5, 3.0, 0.2)", "500", "column x: mean 500.0 in row 2"),
        ("('a', 0.5, 20, 0.5, 3.0, 0.2)", "'a'", "column x: 'a' is a string, not a float64 value in row 2"),
    ]:
        text = f"SHOW ARRAYS;\nINSERT INTO U VALUES {good},\n\t{bad}"
        with pytest.raises(ArrayViewsError) as caught:
            db.sql(text)
        at = text.index(written, text.index("\t"))
        assert f"uncertain array U, {message} at line 3, column {at - text.rfind(chr(10), 0, at)}" in str(
            caught.value
        ), str(caught.value)
    assert db.uncertain_array("U").to_pandas().empty
    db.sql(f"INSERT INTO U (X, X_SIGMA, Y, Y_SIGMA, FLUX, FLUX_SIGMA) VALUES {good}")
    assert db.uncertain_array("U").to_pandas()[["x", "flux"]].values.tolist() == [[10.0, 3.0]]


def test_aggregate_calls_read_backquoted_names_and_quote_whole_words(local_db) -> None:
    """Before, ``avg(`v`)`` (Spark's way to write a name) was refused with "expected attribute name",
    and ``mediän(v)`` was reported as "unknown aggregate function 'medi'"."""
    got = local_db.sql("SELECT * FROM regrid(A, 5, 10, avg(`v`) AS `m`, MAX(`V`))").to_pandas()
    blocks: dict[tuple[int, int], list[float]] = {}
    for i, j, v, _, _ in CELLS:
        blocks.setdefault(((i - 1) // 5 + 1, j // 10), []).append(v)
    assert {(r.i, r.j, r.m, r.v_max) for r in got.itertuples()} == {
        (*key, math.fsum(vs) / len(vs), max(vs)) for key, vs in blocks.items()
    }
    with pytest.raises(ParseError) as caught:
        local_db.sql("SELECT * FROM regrid(A, 5, 10,\n\tmediän(v))")
    assert caught.value.reason == "unknown aggregate function 'mediän'"
    assert (caught.value.line, caught.value.column) == (2, 2)


@pytest.mark.parametrize(
    ("text", "reason", "at"),
    [
        ("ALTER VIEW V SET REFRESH LIMIT nan SECONDS", "a number of SECONDS or NONE, got 'nan'", "nan"),
        ("ALTER VIEW V SET REFRESH LIMIT NONE SECONDS", "a number of SECONDS or NONE, got 'NONE'", "NONE"),
        ("ALTER VIEW V SET REFRESH LIMIT 5;\nSHOW ARRAYS", "counted in SECONDS: write LIMIT n SECONDS", ";"),
        (
            "ALTER VIEW V SET REFRESH LIMIT 1e400 SECONDS",
            "a finite number of seconds above 0, got '1e400'",
            "1e4",
        ),
    ],
)
def test_refresh_limits_that_are_no_number_of_seconds_are_refused_where_written(text, reason, at) -> None:
    """Before: "unexpected 'SECONDS' after the end of the statement" for nan and NONE SECONDS, an
    error at the next statement's end for a missing unit, and 1e400 parsed (refused only when run)."""
    with pytest.raises(ParseError) as caught:
        parse(text)
    assert reason in caught.value.reason
    assert (caught.value.line, caught.value.column) == (1, text.index(at) + 1)
