"""Tests of the statement language's parser and printer (no Spark): golden files, errors, round trips.

Golden files: every ``tests/language/golden/<name>.aql`` has a ``<name>.expected`` holding the
canonical form of each statement (one per line, ending with ';'), or, for ``error_*.aql``, the exact
message of the ParseError. Set ARRAYVIEWS_UPDATE_GOLDEN=1 to rewrite the expected files (then
review the diff).
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arrayviews.language import functions as functions_module
from arrayviews.language import printer as printer_module
from arrayviews.language import syntax as ast
from arrayviews.language.parser import parse, parse_array_expression, parse_statements, parse_view_query
from arrayviews.language.printer import script_text, to_text
from arrayviews.model.aggregate_calls import FUNCTIONS as AGGREGATES
from arrayviews.model.aggregate_calls import AggregateCall
from arrayviews.model.errors import ParseError, SchemaError
from arrayviews.model.expressions import Binary, Literal, Name, parse_expression
from arrayviews.model.schema import UNBOUNDED_HIGH, ArraySchema, Attribute, CoordinateScale, Dimension
from arrayviews.model.types import ATTRIBUTE_TYPES
from expression_strategies import ODD_NAMES, any_trees

GOLDEN = Path(__file__).parent / "language" / "golden"
GOLDEN_FILES = sorted(GOLDEN.glob("*.aql"))
STATEMENT_FILES = [p for p in GOLDEN_FILES if not p.name.startswith("error_")]
UPDATE = os.environ.get("ARRAYVIEWS_UPDATE_GOLDEN") == "1"


def _golden_output(path: Path) -> str:
    text = path.read_text()
    if path.name.startswith("error_"):
        with pytest.raises(ParseError) as caught:
            parse(text)
        return str(caught.value) + "\n"
    return script_text(parse(text))


# -- golden files -------------------------------------------------------------------------------
def test_golden_files_exist() -> None:
    assert len(STATEMENT_FILES) >= 4
    assert len(GOLDEN_FILES) - len(STATEMENT_FILES) >= 10


@pytest.mark.parametrize("path", GOLDEN_FILES, ids=[p.stem for p in GOLDEN_FILES])
def test_golden(path: Path) -> None:
    expected_path = path.with_suffix(".expected")
    output = _golden_output(path)
    if UPDATE:
        expected_path.write_text(output)
    assert output == expected_path.read_text()


@pytest.mark.parametrize("path", STATEMENT_FILES, ids=[p.stem for p in STATEMENT_FILES])
def test_golden_statements_round_trip(path: Path) -> None:
    statements = parse(path.read_text())
    assert statements
    for statement in statements:
        printed = to_text(statement)
        assert parse(printed) == [statement]
        assert parse(printed + ";") == [statement]
        assert to_text(parse(printed)[0]) == printed
    assert parse(script_text(statements)) == statements


def test_golden_select_nodes() -> None:
    """Spot checks of the trees behind some golden statements."""
    A = ast.ArrayName("A")
    (statement,) = parse("SELECT r INTO B FROM subarray(A, 1, 1, 3, 3) WHERE (r + 1) * 2 >= 10")
    assert statement == ast.Select(
        ast.Subarray(A, (1, 1), (3, 3)), ("r",), parse_expression("(r + 1) * 2 >= 10"), "B"
    )
    (statement,) = parse("SELECT * FROM regrid(A, 2, 3, avg(v), count(*), stdev(v) as s, MEAN(r) AS m)")
    assert statement == ast.Select(
        ast.Regrid(
            A,
            (2, 3),
            (
                AggregateCall("avg", "v"),
                AggregateCall("count"),
                AggregateCall("stdev", "v", "s"),
                AggregateCall("avg", "r", "m"),
            ),
        )
    )
    (statement,) = parse("SELECT * FROM aggregate(A, count(*), sum(v), i, j)")
    assert statement.source == ast.Aggregate(
        A, (AggregateCall("count"), AggregateCall("sum", "v")), ("i", "j")
    )
    (statement,) = parse("SELECT * FROM apply(A, w, least(v, 1, i), z, if(v > 0, v, -v))")
    assert statement.source == ast.Apply(
        A, (("w", parse_expression("least(v, 1, i)")), ("z", parse_expression("if(v > 0, v, -v)")))
    )
    (statement,) = parse("SELECT * FROM join(subarray(A, 1, 4), filter(B, w > 0))")
    assert statement.source == ast.Join(
        ast.Subarray(A, (1,), (4,)), ast.Filter(ast.ArrayName("B"), parse_expression("w > 0"))
    )
    (statement,) = parse("SELECT * FROM subarray(A, -5, 0, -1, 7)")
    assert statement.source == ast.Subarray(A, (-5, 0), (-1, 7))


def test_golden_other_nodes() -> None:
    create, comma = parse(
        "CREATE ARRAY A <r:int64, s:float64> [i=1:6:2; j=1:8:2]; create array A<r:int64, s:double>[i=1,6,2; j=1,8,2]"
    )
    schema = ArraySchema(
        "A",
        (Attribute("r", "int64"), Attribute("s", "float64")),
        (Dimension("i", 1, 6, 2), Dimension("j", 1, 8, 2)),
    )
    assert create == comma == ast.CreateArray(schema)
    insert, load, delete = parse(
        "INSERT INTO A VALUES (1, 1, null, nan), (2, 2, -7, -inf), (3, 3, TRUE, 1e3);"
        "LOAD A FROM 'it''s.txt' AS Csv; DELETE FROM subarray(A, 1, 1, 3, 3)"
    )
    assert insert == ast.Insert("A", ((1, 1, None, math.nan), (2, 2, -7, -math.inf), (3, 3, True, 1000.0)))
    assert isinstance(insert.rows[2][3], float) and insert.rows[2][2] is True
    assert load == ast.Load("A", "it's.txt", "csv")
    assert delete == ast.Delete(ast.Subarray(ast.ArrayName("A"), (1, 1), (3, 3)))
    assert delete.array == "A"
    assert parse("show versions of A; SHOW CHUNKS OF A; Show Schema Of A; SHOW ARRAYS; DROP ARRAY A") == [
        ast.ShowVersions("A"),
        ast.ShowChunks("A"),
        ast.ShowSchema("A"),
        ast.ShowRelations("arrays"),
        ast.DropArray("A"),
    ]


# -- statements, positions, comments ------------------------------------------------------------
def test_empty_texts_have_no_statements() -> None:
    assert parse("") == []
    assert parse("  ;; -- nothing here\n ;") == []


def test_statement_positions_and_text() -> None:
    text = "SHOW ARRAYS;\n  -- comment\n  SELECT *\n FROM A  ; DROP ARRAY A"
    parsed = parse_statements(text)
    assert [(p.line, p.column, p.text) for p in parsed] == [
        (1, 1, "SHOW ARRAYS"),
        (3, 3, "SELECT *\n FROM A"),
        (4, 12, "DROP ARRAY A"),
    ]


def test_keywords_are_case_insensitive_and_only_reserved_where_expected() -> None:
    assert parse("sElEcT * fRoM A wHeRe v > 1") == parse("SELECT * FROM A WHERE v > 1")
    # An array may be called like a keyword: the grammar only takes a keyword where it expects one.
    # (In the Spark SQL condition a keyword used as a name is backquoted.)
    (statement,) = parse("SELECT from, into INTO values FROM select WHERE `where` > 1")
    assert statement == ast.Select(
        ast.ArrayName("select"), ("from", "into"), parse_expression("`where` > 1"), "values"
    )
    assert to_text(statement) == "SELECT from, into INTO values FROM select WHERE `where` > 1"
    # A name that merely starts with a keyword is a name.
    assert parse("SELECT * FROM selection") == [ast.Select(ast.ArrayName("selection"))]


def test_comments_inside_raw_spans_are_blanked() -> None:
    (statement,) = parse("SELECT * FROM filter(A, v > 1 -- big\n and w < 2) WHERE x = 1 -- end")
    assert statement == ast.Select(
        ast.Filter(ast.ArrayName("A"), parse_expression("v > 1 and w < 2")), None, parse_expression("x = 1")
    )
    # '--' always starts a comment outside quoted names and strings, as in SQL
    (statement,) = parse("SELECT * FROM A WHERE v--1\n > 2")
    assert statement.where == parse_expression("v > 2")
    statement, load = parse("SELECT * FROM filter(A, `a--b` > 1); LOAD A FROM 'x--y.csv'")
    assert statement.source.predicate == Binary(">", Name("a--b"), Literal(1))
    assert load.path == "x--y.csv"


def test_quoted_names_may_hold_separators() -> None:
    (statement,) = parse("SELECT * FROM filter(A, `a, b` > 1 and `c);d` < 2)")
    assert statement.source.predicate == parse_expression("`a, b` > 1 and `c);d` < 2")


def test_array_functions_are_case_insensitive() -> None:
    assert parse_array_expression("REGRID(A, 2, Avg(v))") == ast.Regrid(
        ast.ArrayName("A"), (2,), (AggregateCall("avg", "v"),)
    )


def test_array_function_table_can_be_extended() -> None:
    """A new operator is one node, one builder and one printer: no grammar change."""

    @dataclass(frozen=True)
    class Smooth(ast.ArrayExpr):
        function: ClassVar[str] = "smooth"
        source: ast.ArrayExpr
        sizes: tuple[int, ...]
        aggregates: tuple[AggregateCall, ...]

        def inputs(self):
            return (self.source,)

    def build(args: functions_module.Arguments) -> ast.ArrayExpr:
        args.count(3, None, "smooth(array, size..., aggregate...)")
        sizes = [args.integer(k) for k in range(1, len(args)) if args.is_integer(k)]
        calls = [args.aggregate(k) for k in range(1 + len(sizes), len(args))]
        return Smooth(args.array(0), tuple(sizes), tuple(calls))

    saved_parsers = dict(functions_module.ARRAY_FUNCTIONS)
    saved_printers = dict(printer_module._ARGUMENTS)
    try:
        functions_module.array_function("smooth")(build)
        printer_module.array_argument_printer(Smooth)(
            lambda n: [str(s) for s in n.sizes] + [c.to_text() for c in n.aggregates]
        )
        (statement,) = parse("SELECT * FROM smooth(subarray(A, 1, 1, 9, 9), 25, 25, 25, 25, avg(v))")
        assert statement.source == Smooth(
            ast.Subarray(ast.ArrayName("A"), (1, 1), (9, 9)), (25, 25, 25, 25), (AggregateCall("avg", "v"),)
        )
        assert to_text(statement) == "SELECT * FROM smooth(subarray(A, 1, 1, 9, 9), 25, 25, 25, 25, avg(v))"
        with pytest.raises(ParseError) as caught:
            parse("SELECT * FROM smoth(A, 1, avg(v))")
        assert "smooth" in caught.value.expected
    finally:
        functions_module.ARRAY_FUNCTIONS.clear()
        functions_module.ARRAY_FUNCTIONS.update(saved_parsers)
        printer_module._ARGUMENTS.clear()
        printer_module._ARGUMENTS.update(saved_printers)


# -- syntax errors ------------------------------------------------------------------------------
ERRORS = [
    # text, line, column, reason (start of the message), expected (None: not checked)
    ("CREATE ARAY A", 1, 8, "unexpected 'ARAY'", ("ARRAY", "STREAM", "UNCERTAIN", "VIEW")),
    ("DROP ARRAY", 1, 11, "unexpected end of input", ("identifier",)),
    ("DROP ARRAY\n  -- comment\n", 1, 11, "unexpected end of input", ("identifier",)),
    (
        "SELEC * FROM A",
        1,
        1,
        "unexpected 'SELEC'",
        (
            "';'",
            "ALTER",
            "CREATE",
            "DELETE",
            "DROP",
            "EXPLAIN",
            "INSERT",
            "LOAD",
            "MAINTAIN",
            "REFRESH",
            "SELECT",
            "SHOW",
            "VERIFY",
            "WITH",
            "end of input",
        ),
    ),
    ("SHOW ARRAYS foo", 1, 13, "unexpected 'foo' after the end of the statement", ("';'", "end of input")),
    (
        "SHOW TABLES",
        1,
        6,
        "unexpected 'TABLES'",
        ("ARRAYS", "CHUNKS", "RELATIONS", "SCHEMA", "STATUS", "STREAMS", "VERSIONS", "VIEWS"),
    ),
    ("SELECT * FROM", 1, 14, "unexpected end of input", ("'('", "expression")),
    ("SELECT FROM A", 1, 7, "SELECT needs a select list", ("expression",)),
    ("SELECT * FROM A WHERE", 1, 22, "unexpected end of input", ("'('", "expression")),
    ("SELECT * FROM A WHERE v > 1, 2", 1, 28, "unexpected ','", ("'('", "';'", "end of input", "expression")),
    ("SELECT * FROM A;\nSELECT * FROM A WHERE v $ 1", 2, 25, "unexpected '$'", None),
    ("SELECT * FROM A WHERE v > 1 1", 1, 29, "unexpected '1'", None),
    ("SELECT *\n  FROM filter(A, v > )", 2, 21, "unexpected end of input", None),
    ("SELECT * FROM filter(A, )", 1, 25, "unexpected ')'", ("'('", "expression")),
    ("SELECT * FROM filter(A, `x)", 1, 25, "unterminated quoted name", None),
    ("SELECT * FROM filter(A)", 1, 23, "filter: too few arguments (1)", ("','",)),
    ("SELECT * FROM filter(A, v > 1, 2)", 1, 32, "filter: too many arguments (3)", ("')'",)),
    ("SELECT * FROM wobble(A, 1, avg(v))", 1, 15, "unknown array function 'wobble'", None),
    ("SELECT * FROM subarray(A, 1, x, 3, 4)", 1, 30, "subarray: argument 3 must be an integer", ("integer",)),
    ("SELECT * FROM subarray(A, 1, 2, 3)", 1, 34, "subarray: needs a low and a high coordinate", ("','",)),
    ("SELECT * FROM subarray(A, 1, 2**70)", 1, 30, "subarray: argument 3 must be an integer", ("integer",)),
    (
        "SELECT * FROM subarray(A, 1, 99999999999999999999)",
        1,
        30,
        "subarray: integer 99999999999999999999 is outside",
        None,
    ),
    ("SELECT * FROM subarray(subarray(A, 1), 1, 2)", 1, 37, "subarray: too few arguments (2)", ("','",)),
    ("SELECT * FROM join(subarray(A, 1, 2), foo(B))", 1, 39, "unknown array function 'foo'", None),
    ("SELECT * FROM join(subarray(A 1, 2), B)", 1, 31, "unexpected '1'", ("'('", "end of input")),
    ("SELECT * FROM project(A, 1)", 1, 26, "project: argument 2 must be an attribute name", ("identifier",)),
    ("SELECT * FROM apply(A, w)", 1, 25, "apply: too few arguments (2)", ("','",)),
    ("SELECT * FROM apply(A, w, 1, z)", 1, 31, "apply: the last name has no expression", ("','",)),
    (
        "SELECT * FROM apply(A, 1, 1)",
        1,
        24,
        "apply: argument 2 must be a new attribute name",
        ("identifier",),
    ),
    ("SELECT * FROM apply(A, w, 1 +)", 1, 30, "unexpected end of input", None),
    ("SELECT * FROM regrid(A, 2, 2)", 1, 29, "regrid: needs at least one aggregate call", ("','",)),
    ("SELECT * FROM regrid(A, avg(v))", 1, 31, "regrid: too few arguments (2)", ("','",)),
    (
        "SELECT * FROM regrid(A, avg(v), sum(v))",
        1,
        25,
        "regrid: argument 2 must be a block size",
        ("integer",),
    ),
    ("SELECT * FROM regrid(A, 2, avg(v), 2)", 1, 36, "regrid: block sizes come before", ("aggregate call",)),
    ("SELECT * FROM regrid(A, 2, 2, median(v))", 1, 31, "unknown aggregate function 'median'", None),
    ("SELECT * FROM regrid(A, 2, avg(*))", 1, 32, "avg needs an attribute", ("attribute name",)),
    ("SELECT * FROM regrid(A, 2, avg(v) sa x)", 1, 35, "unexpected 'sa' after the call", None),
    (
        "SELECT * FROM aggregate(A, i, count(*))",
        1,
        31,
        "aggregate: aggregate calls come before",
        ("identifier",),
    ),
    ("SELECT * FROM aggregate(A, i)", 1, 28, "aggregate: needs at least one aggregate call", None),
    ("INSERT INTO A VALUES (1, 2", 1, 27, "unexpected end of input", ("')'", "','")),
    (
        "INSERT INTO A VALUES (1, x)",
        1,
        26,
        "unexpected 'x'",
        ("false", "inf", "nan", "null", "number", "string", "true"),
    ),
    ("INSERT INTO A VALUES ()", 1, 23, "unexpected ')'", None),
    ("INSERT INTO A VALUES (1, 2) (3, 4)", 1, 29, "unexpected '('", None),
    (
        "INSERT INTO A VALUES (99999999999999999999)",
        1,
        23,
        "integer 99999999999999999999 is outside",
        ("number",),
    ),
    ("INSERT INTO A VALUES (1.2.3)", 1, 23, "unexpected '1.2.3'", None),
    ("LOAD A FROM 'x.json' AS JSON", 1, 25, "unexpected 'JSON'", ("CSV", "PARQUET")),
    ("LOAD A FROM x.csv", 1, 13, "unexpected 'x'", ("string",)),
    ("LOAD A FROM 'x.csv", 1, 13, "unterminated string literal", ("string",)),
    ("DELETE FROM filter(A, v > 1)", 1, 13, "DELETE FROM takes an array name or subarray", None),
    (
        "DELETE FROM subarray(filter(A, v > 1), 1, 2)",
        1,
        13,
        "DELETE FROM takes an array name or subarray",
        None,
    ),
    ("CREATE ARRAY A <r:int64>[i=1:x]", 1, 30, "unexpected 'x'", ("'*'", "integer")),
    ("CREATE ARRAY A <r:int64>", 1, 25, "unexpected end of input", ("'['",)),
    ("CREATE ARRAY A <r:int64>;\nSELECT * FROM A", 1, 25, "unexpected ';'", ("'['",)),
    ("CREATE ARRAY A\n  <r:int64,\n   s:floot> [i=1:6]", 3, 6, "unknown attribute type 'floot'", None),
    ("CREATE ARRAY A <r:int64> [i=1:6; j=1:8; i=1:2]", 1, 41, "array A: name 'i' is used twice", None),
    ("CREATE ARRAY A <r:int64> [i=6:1]", 1, 31, "dimension i: low 6 is greater than high 1", None),
    ("CREATE ARRAY a__b <v:int64> [i=1:2]", 1, 14, "invalid array name 'a__b'", ("identifier",)),
    ("CREATE ARRAY A v:int64 [i=1:2]", 1, 16, "unexpected 'v'", ("schema",)),
]


@pytest.mark.parametrize(("text", "line", "column", "reason", "expected"), ERRORS, ids=[e[0] for e in ERRORS])
def test_syntax_errors(text: str, line: int, column: int, reason: str, expected: tuple | None) -> None:
    with pytest.raises(ParseError) as caught:
        parse(text)
    error = caught.value
    assert (error.line, error.column) == (line, column), str(error)
    assert error.reason.startswith(reason), error.reason
    if expected is not None:
        assert error.expected == expected
    assert error.text == text
    assert str(error).startswith(f"{error.reason} at line {line}, column {column}\n")


def test_unknown_function_lists_the_known_ones() -> None:
    with pytest.raises(ParseError) as caught:
        parse("SELECT * FROM windw(A, 1)")
    assert caught.value.expected == tuple(sorted(functions_module.ARRAY_FUNCTIONS))
    assert "known: aggregate, apply, filter, join, project, regrid, structure_join, subarray" in caught.value.reason


# -- views ----------------------------------------------------------------------------------------
_SIM = "CREATE ARRAY VIEW V AS SELECT count(*) FROM A a SIMILARITY JOIN B b "
_TAIL = " WITH SHAPE L1(1) GROUP BY a.i"


def test_view_nodes() -> None:
    (statement,) = parse(
        "CREATE ARRAY VIEW V AS SELECT COUNT(*) AS cnt, AVG(A2.v) AS mean_v FROM A A1 SIMILARITY JOIN A A2 "
        "ON (A1.i = A2.i) AND (A1.j = A2.j) WITH SHAPE L1(1) GROUP BY A1.i, A1.j"
    )
    assert statement == ast.CreateView(
        "V",
        ast.SimilaritySelect(
            (ast.ViewAggregateItem("count", name="cnt"), ast.ViewAggregateItem("avg", "A2", "v", "mean_v")),
            "A",
            "A",
            ast.BallShape("L1", 1),
            ("i", "j"),
            (ast.AxisEquation("i", "i"), ast.AxisEquation("j", "j")),
            "A1",
            "A2",
        ),
    )
    query = statement.query
    assert query.side("A1") == "left" and query.side("A2") == "right"
    assert query.locations == (
        ("left", 1, 73),
        ("right", 1, 94),
        ("aggregate cnt", 1, 31),
        ("aggregate mean_v", 1, 48),
        ("on", 1, 99),
        ("shape", 1, 145),
        ("group_by", 1, 160),
    )
    assert query.location("on") == (1, 99) and query.location("nowhere") is None
    # either side of an equality first, parentheses optional, affine forms
    (a,) = parse(_SIM + "ON (b.i = a.i * 2 / 3 - 4) AND (a.j = b.j)" + _TAIL)
    (b,) = parse(_SIM + "ON a.i*2/3-4 = b.i AND b.j = a.j" + _TAIL)
    assert a == b
    assert a.query.mapping == (ast.AxisEquation("i", "i", 2, 3, -4), ast.AxisEquation("j", "j"))
    # default names and aliases
    (c,) = parse(
        "CREATE ARRAY VIEW V AS SELECT count(*), mean(B.w), max(A.v) FROM A SIMILARITY JOIN B"
        + _TAIL.replace("a.i", "A.i")
    )
    assert [x.name for x in c.query.aggregates] == ["count", "w_avg", "v_max"]
    assert (c.query.left_alias, c.query.right_alias, c.query.mapping) == ("A", "B", None)
    # shapes
    (d,) = parse(
        "CREATE ARRAY VIEW V AS SELECT count(*) FROM A a SIMILARITY JOIN B b "
        "WITH SHAPE union(product(box(-200:0), linf(1)), difference(BOX(0:0, -1:1, 2:3), l1(0))) GROUP BY a.t"
    )
    assert d.query.shape == ast.SetShape(
        "UNION",
        (
            ast.ProductShape((ast.BoxShape(((-200, 0),)), ast.BallShape("LINF", 1))),
            ast.SetShape("DIFFERENCE", (ast.BoxShape(((0, 0), (-1, 1), (2, 3))), ast.BallShape("L1", 0))),
        ),
    )
    assert d.query.shape.fixed_ndim() == 3
    # window views and the chunks clause
    (w,) = parse(
        "CREATE ARRAY VIEW W WITH CHUNKS (2, 3) AS SELECT * FROM window(A, 1, 1, 2, 2, avg(v), max(v))"
    )
    assert w == ast.CreateView(
        "W",
        ast.WindowSelect(
            ast.Window(
                ast.ArrayName("A"), (1, 1, 2, 2), (AggregateCall("avg", "v"), AggregateCall("max", "v"))
            )
        ),
        (2, 3),
    )
    assert w.query.base == "A"


def test_parse_view_query_reads_the_select_alone() -> None:
    text = "SELECT count(*) AS n -- neighbours\nFROM A a SIMILARITY JOIN A b WITH SHAPE LINF(1) GROUP BY a.i"
    query = parse_view_query(text)
    assert isinstance(query, ast.SimilaritySelect)
    assert (
        to_text(query) == "SELECT count(*) AS n FROM A a SIMILARITY JOIN A b WITH SHAPE LINF(1) GROUP BY a.i"
    )
    assert parse_view_query(to_text(query)) == query
    assert query.location("group_by") == (2, 58)
    assert parse_view_query("select * from window(A, 0, 1, sum(v))") == ast.WindowSelect(
        ast.Window(ast.ArrayName("A"), (0, 1), (AggregateCall("sum", "v"),))
    )
    with pytest.raises(ParseError) as caught:
        parse_view_query("SELECT * FROM window(A, 0, 1, sum(v));")
    assert caught.value.reason == "unexpected ';' after the end of the view definition"
    assert (caught.value.line, caught.value.column) == (1, 38)


VIEW_ERRORS = [
    # text, line, column, reason (start of the message), expected (None: not checked)
    ("DROP VIEW", 1, 10, "unexpected end of input", ("identifier",)),
    ("SHOW STATUS V", 1, 13, "unexpected 'V'", ("OF",)),
    ("REFRESH VIEW V USING FAST", 1, 22, "unexpected 'FAST'", ("AUTO", "BASELINE", "FULL")),
    ("REFRESH V", 1, 9, "unexpected 'V'", ("VIEW",)),
    ("VERIFY VIEW V W", 1, 15, "unexpected 'W' after the end of the statement", None),
    ("CREATE ARRAY VIEW V", 1, 20, "unexpected end of input", ("AS", "WITH")),
    ("CREATE ARRAY VIEW V AS SELECT * FROM A", 1, 38, "a window view is SELECT * FROM window(", ("window",)),
    (
        "CREATE ARRAY VIEW V AS SELECT * FROM window(filter(A, v > 1), 1, 1, avg(v))",
        1,
        38,
        "a window view",
        None,
    ),
    (
        "CREATE ARRAY VIEW V WITH CHUNKS (0) AS SELECT * FROM window(A, 1, 1, avg(v))",
        1,
        34,
        "chunk lengths must",
        None,
    ),
    (
        "CREATE ARRAY VIEW V WITH CHUNKS (2.5) AS SELECT * FROM window(A, 1, 1, avg(v))",
        1,
        34,
        "expected a chunk",
        None,
    ),
    (
        "CREATE ARRAY VIEW V WITH CHUNKS () AS SELECT * FROM window(A, 1, 1, avg(v))",
        1,
        34,
        "unexpected ')'",
        ("number",),
    ),
    ("CREATE ARRAY VIEW V AS SELECT v FROM A", 1, 33, "unexpected 'FROM'", ("'('",)),
    (
        "CREATE ARRAY VIEW V AS SELECT count(*) FROM A",
        1,
        46,
        "unexpected end of input",
        ("SIMILARITY", "identifier"),
    ),
    ("CREATE ARRAY VIEW V AS SELECT count(*) FROM A a JOIN B b", 1, 49, "unexpected 'JOIN'", ("SIMILARITY",)),
    (_SIM + _TAIL.replace("L1(1)", "L1(-1)"), 1, 84, "L1: the radius must be an integer >= 0", ("integer",)),
    (_SIM + _TAIL.replace("L1(1)", "L1(1.5)"), 1, 84, "L1: expected a radius", ("integer",)),
    (_SIM + _TAIL.replace("L1(1)", "L1(1, 2, 3)"), 1, 90, "L1: too many arguments (3)", ("')'",)),
    (_SIM + _TAIL.replace("L1(1)", "L1(1, 0)"), 1, 87, "L1: the dimension count must be an integer >= 1", ("integer",)),
    (_SIM + _TAIL.replace("L1(1)", "L1(0:1)"), 1, 84, "L1: argument 1 must be a radius", ("integer",)),
    (_SIM + _TAIL.replace("L1(1)", "l2(1)"), 1, 81, "unknown shape 'l2'; known: BOX, DIFFERENCE", None),
    (_SIM + _TAIL.replace("L1(1)", "L1()"), 1, 84, "unexpected ')'", None),
    (_SIM + _TAIL.replace("L1(1)", "L1"), 1, 84, "unexpected 'GROUP'", ("'('",)),
    (_SIM + _TAIL.replace("L1(1)", "BOX(1)"), 1, 85, "BOX: argument 1 must be a range low:high", ("range",)),
    (_SIM + _TAIL.replace("L1(1)", "BOX(1:2, L1(1))"), 1, 90, "BOX: argument 2 must be a range", ("range",)),
    (_SIM + _TAIL.replace("L1(1)", "BOX(1:x)"), 1, 87, "unexpected 'x'", ("number",)),
    (_SIM + _TAIL.replace("L1(1)", "PRODUCT(L1(1))"), 1, 94, "PRODUCT: too few arguments (1)", ("','",)),
    (_SIM + _TAIL.replace("L1(1)", "PRODUCT(L1(1), 2)"), 1, 96, "PRODUCT: argument 2 must be a shape", None),
    (
        _SIM + _TAIL.replace("L1(1)", "PRODUCT(L1(1), BOX(0:1), LINF(1))"),
        1,
        106,
        "PRODUCT: at most one part",
        None,
    ),
    (
        _SIM + _TAIL.replace("L1(1)", "UNION(BOX(0:1), BOX(0:1, 0:1))"),
        1,
        81,
        "UNION: the shapes have different",
        None,
    ),
    (
        _SIM + _TAIL.replace("L1(1)", "DIFFERENCE(L1(1), L1(2), L1(3))"),
        1,
        106,
        "DIFFERENCE: too many arguments (3)",
        None,
    ),
    (
        _SIM + "ON (b.i = a.i / 0)" + _TAIL,
        1,
        85,
        "the divisor must be a positive integer, got 0",
        ("integer",),
    ),
    (_SIM + "ON (b.i = a.i * 0)" + _TAIL, 1, 85, "the multiplier must not be 0", ("integer",)),
    (_SIM + "ON (b.i = a.i * 1.5)" + _TAIL, 1, 85, "expected an integer, got '1.5'", ("integer",)),
    (_SIM + "ON (b.i = a.i + 1 + 2)" + _TAIL, 1, 87, "unexpected '+': write the left side as", None),
    (_SIM + "ON (b.i = a.i / 2 * 3)" + _TAIL, 1, 87, "unexpected '*'", None),
    (_SIM + "ON (b.i - 1 = a.i)" + _TAIL, 1, 77, "the right array's dimension stands alone", None),
    (
        _SIM + "ON (a.i = a.j)" + _TAIL,
        1,
        72,
        "each equality of ON relates a dimension of the right array",
        None,
    ),
    (
        _SIM + "ON (b.i = c.i)" + _TAIL,
        1,
        79,
        "unknown alias 'c'; FROM names a (left) and b (right)",
        ("a", "b"),
    ),
    (_SIM + "ON (b.i = i)" + _TAIL, 1, 80, "unexpected ')'", ("'.'",)),
    (_SIM + "ON (b.i = a.i) (b.j = a.j)" + _TAIL, 1, 84, "unexpected '('", ("AND", "WITH")),
    (
        _SIM + "ON (b.i = a.i) AND (b.i = a.j)" + _TAIL,
        1,
        88,
        "ON maps dimension i of the right array twice",
        None,
    ),
    # 'with' after ON is read as an alias (a keyword only where the grammar expects one)
    (_SIM + "ON" + _TAIL, 1, 77, "unexpected 'SHAPE'", ("'.'",)),
    (_SIM + "WITH SHAPE L1(1) GROUP BY i", 1, 96, "unexpected end of input", ("'.'",)),
    (
        _SIM + "WITH SHAPE L1(1) GROUP BY b.i",
        1,
        95,
        "GROUP BY b.i: only grouping by the left array's cells",
        None,
    ),
    (_SIM + "WITH SHAPE L1(1) GROUP BY a.i, x.j", 1, 100, "unknown alias 'x'", ("a", "b")),
    (_SIM + "WITH SHAPE L1(1) GROUP BY a.i, a.i", 1, 100, "GROUP BY lists a.i twice", None),
    (_SIM + "WITH SHAPE L1(1)", 1, 85, "unexpected end of input", ("GROUP",)),
    (
        "CREATE ARRAY VIEW V AS SELECT avg(*) FROM A a SIMILARITY JOIN B b" + _TAIL,
        1,
        35,
        "avg(*) is not an aggregate",
        None,
    ),
    (
        "CREATE ARRAY VIEW V AS SELECT var(a.v) FROM A a SIMILARITY JOIN B b" + _TAIL,
        1,
        31,
        "unknown view aggregate 'var'",
        None,
    ),
    (
        "CREATE ARRAY VIEW V AS SELECT sum(c.v) FROM A a SIMILARITY JOIN B b" + _TAIL,
        1,
        35,
        "unknown alias 'c'",
        None,
    ),
    (
        "CREATE ARRAY VIEW V AS SELECT sum(v) FROM A a SIMILARITY JOIN B b" + _TAIL,
        1,
        36,
        "unexpected ')'",
        ("'.'",),
    ),
    ("CREATE ARRAY VIEW V AS SELECT sum(a.v) FROM A a SIMILARITY JOIN B b" + _TAIL, 1, 1, "", None),
    (
        "CREATE ARRAY VIEW V AS SELECT count(*),\n  count(*) FROM A a SIMILARITY JOIN B b" + _TAIL,
        2,
        3,
        "view output 'count' is named twice",
        None,
    ),
    (
        "CREATE ARRAY VIEW V AS SELECT count(*) FROM A x SIMILARITY JOIN B x" + _TAIL,
        1,
        67,
        "both sides",
        None,
    ),
]


@pytest.mark.parametrize(
    ("text", "line", "column", "reason", "expected"), VIEW_ERRORS, ids=[f"{e[0]}@{e[2]}" for e in VIEW_ERRORS]
)
def test_view_syntax_errors(text: str, line: int, column: int, reason: str, expected: tuple | None) -> None:
    if not reason:  # a control: the statement is fine
        assert len(parse(text)) == 1
        return
    test_syntax_errors(text, line, column, reason, expected)


def test_shape_function_table_can_be_extended() -> None:
    """A new shape is one builder and one printer (plus one executor builder): no grammar change."""

    @dataclass(frozen=True)
    class Ring(ast.ShapeExpr):
        function: ClassVar[str] = "RING"
        radius: int

    saved_parsers = dict(functions_module.SHAPE_FUNCTIONS)
    saved_printers = dict(printer_module._SHAPES)
    try:
        functions_module.shape_function("ring")(
            lambda args: (args.count(1, 1, "RING(r)"), Ring(args.integer(0)))[1]
        )
        printer_module.shape_printer(Ring)(lambda n: f"RING({n.radius})")
        (statement,) = parse(_SIM + _TAIL.replace("L1(1)", "UNION(Ring(2), L1(0))"))
        assert statement.query.shape == ast.SetShape("UNION", (Ring(2), ast.BallShape("L1", 0)))
        assert "WITH SHAPE UNION(RING(2), L1(0))" in to_text(statement)
    finally:
        functions_module.SHAPE_FUNCTIONS.clear()
        functions_module.SHAPE_FUNCTIONS.update(saved_parsers)
        printer_module._SHAPES.clear()
        printer_module._SHAPES.update(saved_printers)


# -- the syntax tree ----------------------------------------------------------------------------
def test_nodes_are_frozen_and_hashable() -> None:
    (statement,) = parse("SELECT r INTO B FROM regrid(A, 2, avg(v)) WHERE r > 1")
    with pytest.raises(AttributeError):
        statement.into = "C"
    assert hash(statement) == hash(parse(to_text(statement))[0])


@pytest.mark.parametrize(
    "build",
    [
        lambda: ast.ArrayName("1A"),
        lambda: ast.Subarray(ast.ArrayName("A"), (1,), (2, 3)),
        lambda: ast.Subarray(ast.ArrayName("A"), (), ()),
        lambda: ast.Subarray(ast.ArrayName("A"), (1.5,), (2,)),
        lambda: ast.Project(ast.ArrayName("A"), ()),
        lambda: ast.Apply(ast.ArrayName("A"), ()),
        lambda: ast.Apply(ast.ArrayName("A"), (("w", "v * 2"),)),
        lambda: ast.Regrid(ast.ArrayName("A"), (), (AggregateCall("count"),)),
        lambda: ast.Regrid(ast.ArrayName("A"), (2,), ()),
        lambda: ast.Aggregate(ast.ArrayName("A"), ("count(*)",)),
        lambda: ast.Select(ast.ArrayName("A"), ()),
        lambda: ast.Select("A"),
        lambda: ast.Select(ast.ArrayName("A"), where="v > 1"),
        lambda: ast.Insert("A", ()),
        lambda: ast.Insert("A", ((),)),
        lambda: ast.Insert("A", ((2**64,),)),
        lambda: ast.Insert("A", ((-(2**63) - 1,),)),
        lambda: ast.Load("A", "x.json", "json"),
        lambda: ast.Load("A", "a\nb"),
        lambda: ast.Delete(ast.Filter(ast.ArrayName("A"), Literal(True))),
        lambda: ast.DropArray("a b"),
    ],
)
def test_constructors_check_shapes(build) -> None:
    with pytest.raises(ValueError):
        build()


def test_insert_values_normalise_nan() -> None:
    assert ast.Insert("A", ((1, float("nan")),)) == ast.Insert("A", ((1, math.nan),))


# -- property: print -> parse is the identity ---------------------------------------------------
_identifiers = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,5}", fullmatch=True)
# names the model accepts: no leading underscore and no double underscore (reserved for its own names)
_model_names = _identifiers.filter(lambda n: not n.startswith("_") and "__" not in n)
_keywords = st.sampled_from(
    ["select", "FROM", "where", "values", "as", "into", "array", "show", "nan", "count"]
)
_names = st.one_of(_identifiers, _keywords)

# Cell expressions of any shape (tests/expression_strategies.py), with names that need backquotes.
_expr_names = [*ODD_NAMES, "a--b", "x;y", "c);d", "'q'"]
expressions = any_trees(names=_expr_names, max_leaves=8)
aggregate_calls = st.one_of(
    st.builds(AggregateCall, st.just("count"), st.none(), st.none() | _model_names),
    st.builds(AggregateCall, st.sampled_from(AGGREGATES), _identifiers, st.none() | _model_names),
)
_coordinates = st.integers(-(2**63), 2**63 - 1)
_small = st.integers(1, 3)


def _operators(children: st.SearchStrategy[ast.ArrayExpr]) -> st.SearchStrategy[ast.ArrayExpr]:
    subarrays = _small.flatmap(
        lambda d: st.builds(
            ast.Subarray,
            children,
            st.lists(_coordinates, min_size=d, max_size=d).map(tuple),
            st.lists(_coordinates, min_size=d, max_size=d).map(tuple),
        )
    )
    return st.one_of(
        subarrays,
        st.builds(ast.Filter, children, expressions),
        st.builds(ast.Project, children, st.lists(_names, min_size=1, max_size=3).map(tuple)),
        st.builds(
            ast.Apply, children, st.lists(st.tuples(_names, expressions), min_size=1, max_size=2).map(tuple)
        ),
        st.builds(
            ast.Regrid,
            children,
            st.lists(st.integers(1, 2**40), min_size=1, max_size=3).map(tuple),
            st.lists(aggregate_calls, min_size=1, max_size=3).map(tuple),
        ),
        st.builds(
            ast.Aggregate,
            children,
            st.lists(aggregate_calls, min_size=1, max_size=3).map(tuple),
            st.lists(_names, max_size=2).map(tuple),
        ),
        st.builds(ast.Join, children, children),
    )


array_expressions = st.recursive(_names.map(ast.ArrayName), _operators, max_leaves=4)


_scales = st.builds(
    CoordinateScale,
    st.floats(min_value=1e-9, max_value=1e9).flatmap(lambda s: st.sampled_from([s, -s])),
    st.one_of(st.just(0.0), st.floats(min_value=-1e9, max_value=1e9)),
    st.one_of(st.just(""), st.sampled_from(["deg", "m/s", "K", "km s^-1", "°", "day (UTC)"])),
)


@st.composite
def schemas(draw) -> ArraySchema:
    names = draw(st.lists(_model_names, min_size=1, max_size=5, unique_by=str.lower))
    ndim = draw(st.integers(1, len(names)))
    dimensions = []
    for name in names[:ndim]:
        low = draw(st.integers(-1000, 1000))
        high = draw(st.one_of(st.integers(low, low + 1000), st.just(UNBOUNDED_HIGH)))
        chunk = draw(st.integers(1, min(high - low + 1, 100)))
        scale = draw(st.one_of(st.none(), _scales))
        try:
            dimensions.append(Dimension(name, low, high, chunk, scale=scale))
        except SchemaError:  # a step too fine for float64 at these cells: none
            dimensions.append(Dimension(name, low, high, chunk))
    attributes = [
        Attribute(n, draw(st.sampled_from(ATTRIBUTE_TYPES)), draw(st.booleans())) for n in names[ndim:]
    ]
    return ArraySchema(draw(_model_names), tuple(attributes), tuple(dimensions))


_values = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=True, allow_infinity=True)
)
_delete_targets = st.one_of(
    _names.map(ast.ArrayName),
    _small.flatmap(
        lambda d: st.builds(
            ast.Subarray,
            _names.map(ast.ArrayName),
            st.lists(_coordinates, min_size=d, max_size=d).map(tuple),
            st.lists(_coordinates, min_size=d, max_size=d).map(tuple),
        )
    ),
)

# -- view statements --
_NOT_ALIASES = {"similarity", "on", "with"}  # keywords where an alias may stand
_aliases = _names.filter(lambda n: n.lower() not in _NOT_ALIASES)
_small_ints = st.integers(-50, 50)
_ranges = st.tuples(_small_ints, _small_ints).map(lambda p: (min(p), max(p)))
_balls = st.builds(
    ast.BallShape, st.sampled_from(["L1", "LINF", "l1", "Linf"]), st.integers(0, 9), st.none() | st.integers(1, 4)
)
_boxes = st.lists(_ranges, min_size=1, max_size=3).map(lambda r: ast.BoxShape(tuple(r)))


def _try(build, *args):
    try:
        return build(*args)
    except ValueError:
        return None


def _grow_shapes(children):
    products = st.lists(children, min_size=2, max_size=3).map(lambda p: _try(ast.ProductShape, tuple(p)))
    sets = st.tuples(
        st.sampled_from(ast.SetShape.OPERATIONS), st.lists(children, min_size=2, max_size=3)
    ).map(lambda o: _try(ast.SetShape, o[0], tuple(o[1][:2] if o[0] == "DIFFERENCE" else o[1])))
    return st.one_of(products, sets).filter(lambda n: n is not None)


shape_expressions = st.recursive(st.one_of(_balls, _boxes), _grow_shapes, max_leaves=5)
_equations = st.builds(
    ast.AxisEquation,
    _names,
    _names,
    st.integers(-5, 5).filter(bool),
    st.integers(1, 5),
    st.integers(-(2**40), 2**40),
)


@st.composite
def similarity_selects(draw) -> ast.SimilaritySelect:
    left, right = draw(_names), draw(_names)
    left_alias = draw(st.none() | _aliases)
    right_alias = draw((st.none() | _aliases).filter(lambda a: (a or right) != (left_alias or left)))
    aliases = [left_alias or left, right_alias or right]
    items = draw(
        st.lists(
            st.one_of(
                st.builds(ast.ViewAggregateItem, st.just("count"), name=st.none() | _names),
                st.builds(
                    ast.ViewAggregateItem,
                    st.sampled_from([*ast.VIEW_FUNCTIONS, "MEAN"]),
                    st.sampled_from(aliases),
                    _names,
                    st.none() | _names,
                ),
            ),
            min_size=1,
            max_size=4,
            unique_by=lambda item: item.name,
        )
    )
    mapping = draw(st.none() | st.lists(_equations, min_size=1, max_size=3, unique_by=lambda e: e.target))
    return ast.SimilaritySelect(
        tuple(items),
        left,
        right,
        draw(shape_expressions),
        tuple(draw(st.lists(_names, min_size=1, max_size=3, unique=True))),
        None if mapping is None else tuple(mapping),
        left_alias,
        right_alias,
    )


window_selects = st.builds(
    ast.WindowSelect,
    st.builds(
        ast.Window,
        _names.map(ast.ArrayName),
        st.integers(1, 3)
        .flatmap(lambda d: st.lists(st.integers(0, 2**40), min_size=2 * d, max_size=2 * d))
        .map(tuple),
        st.lists(aggregate_calls, min_size=1, max_size=3).map(tuple),
    ),
)
view_queries = st.one_of(similarity_selects(), window_selects)
view_statements = st.one_of(
    st.builds(
        ast.CreateView,
        _names,
        view_queries,
        st.none() | st.lists(st.integers(1, 2**40), min_size=1, max_size=3).map(tuple),
    ),
    st.builds(ast.DropView, _names),
    st.just(ast.ShowRelations("views")),
    st.builds(ast.ShowStatus, _names),
    st.builds(ast.RefreshView, _names, st.sampled_from([None, "full", "baseline", "FULL"])),
    st.builds(ast.VerifyView, _names),
)

statements = st.one_of(
    st.builds(ast.CreateArray, schemas()),
    st.builds(ast.DropArray, _names),
    st.just(ast.ShowRelations("arrays")),
    st.builds(ast.ShowVersions, _names),
    st.builds(ast.ShowChunks, _names),
    st.builds(ast.ShowSchema, _names),
    st.builds(
        ast.Select,
        array_expressions,
        st.none() | st.lists(_names, min_size=1, max_size=3).map(tuple),
        st.none() | expressions,
        st.none() | _names,
    ),
    st.builds(
        ast.Insert,
        _names,
        st.integers(1, 4)
        .flatmap(
            lambda n: st.lists(st.lists(_values, min_size=n, max_size=n).map(tuple), min_size=1, max_size=3)
        )
        .map(tuple),
        allow_gap=st.booleans(),
        on_conflict=st.sampled_from(["error", "replace"]),
    ),
    st.builds(
        ast.Load,
        _names,
        st.text(min_size=0, max_size=12).filter(lambda p: "\n" not in p),
        st.sampled_from([None, "csv", "parquet"]),
        allow_gap=st.booleans(),
        on_conflict=st.sampled_from(["error", "replace"]),
    ),
    st.builds(ast.Delete, _delete_targets),
    view_statements,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(statements)
def test_printed_statements_parse_back(statement: ast.Statement) -> None:
    printed = to_text(statement)
    assert parse(printed) == [statement], printed
    assert to_text(parse(printed)[0]) == printed


@settings(max_examples=50, deadline=None)
@given(st.lists(statements, min_size=1, max_size=4))
def test_printed_scripts_parse_back(items: list[ast.Statement]) -> None:
    assert parse(script_text(items)) == items


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)
@given(view_statements)
def test_printed_view_statements_parse_back(statement: ast.Statement) -> None:
    printed = to_text(statement)
    assert parse(printed) == [statement], printed
    assert to_text(parse(printed)[0]) == printed
    if isinstance(statement, ast.CreateView):
        query = statement.query
        assert parse_view_query(to_text(query)) == query
        assert printed.endswith(" AS " + to_text(query))


# -- model shapes print as text that parses back to the same shape --------------------------------
@pytest.mark.parametrize("norm", ["L1", "Linf"])
@pytest.mark.parametrize("radius", [0, 1, 3])
@pytest.mark.parametrize("ndim", [1, 2, 3, 4])
def test_ball_shapes_print_their_dimension_count_and_parse_back(norm: str, radius: int, ndim: int) -> None:
    from arrayviews.language.view_executor import build_shape
    from arrayviews.model import shapes

    shape = getattr(shapes, norm)(radius, ndim)
    text = repr(shape)
    assert text == f"{norm}({radius}, {ndim})"
    query = parse_view_query(f"SELECT count(*) AS n FROM A a SIMILARITY JOIN A b WITH SHAPE {text} GROUP BY a.i")
    assert query.shape == ast.BallShape(norm, radius, ndim)
    assert to_text(query.shape) == f"{norm.upper()}({radius}, {ndim})"
    # the same offsets, whatever number of dimensions the array would have lent a bare ball
    assert build_shape(query.shape, ndim) == shape
    # an independent reference: the offsets in the box of half-width ``radius`` within the norm
    grid = np.indices((2 * radius + 1,) * ndim).reshape(ndim, -1).T - radius
    distance = np.abs(grid).sum(axis=1) if norm == "L1" else np.abs(grid).max(axis=1)
    assert sorted(map(tuple, shape.offsets())) == sorted(map(tuple, grid[distance <= radius]))


# -- ALLOW GAP: INSERT and LOAD into a stream past its gap limit --------------------------------------
def _one(text: str):
    (statement,) = parse(text)
    return statement


@pytest.mark.parametrize(
    "text",
    [
        "INSERT INTO M VALUES ('2015-01-01 00:00:00', 1), ('2015-01-01 00:01:00', 2) allow gap",
        "INSERT INTO M (ts, v) VALUES ('2015-01-01 00:00:00', 1) ALLOW GAP",
        "LOAD M FROM 'far.csv' AS CSV ALLOW GAP",
        "LOAD M FROM 'far.parquet' Allow Gap",
    ],
)
def test_insert_and_load_may_allow_a_gap(text: str) -> None:
    statement = _one(text)
    assert statement.allow_gap
    assert to_text(statement).endswith(" ALLOW GAP")
    assert _one(to_text(statement)) == statement
    plain = _one(text[: text.lower().rindex(" allow gap")])
    assert not plain.allow_gap and plain == dataclasses.replace(statement, allow_gap=False)
    assert "ALLOW" not in to_text(plain)


@pytest.mark.parametrize(
    ("text", "piece", "word"),
    [
        ("INSERT INTO M VALUES (1, 2) ALLOW GAPS", "GAPS", "GAP"),
        ("LOAD M FROM 'x.csv' PERMIT GAP", "PERMIT", "ALLOW"),
    ],
)
def test_allow_gap_errors(text: str, piece: str, word: str) -> None:
    with pytest.raises(ParseError) as caught:
        parse(text)
    error = caught.value
    assert error.reason.startswith("expected ALLOW GAP at the end of the statement")
    assert (error.line, error.column) == (1, text.index(piece) + 1) and error.expected == (word,)
