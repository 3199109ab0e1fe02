"""Tests of the statement language's parser and printer (no Spark): golden files, errors, round trips.

Golden files: every ``tests/language/golden/<name>.aql`` has a ``<name>.expected`` holding the
canonical form of each statement (one per line, ending with ';'), or, for ``error_*.aql``, the exact
message of the ParseError. Set ARRAYVIEWS_UPDATE_GOLDEN=1 to rewrite the expected files (then
review the diff).
"""

from __future__ import annotations

import math
import os
import string
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arrayviews.language import parser as parser_module
from arrayviews.language import printer as printer_module
from arrayviews.language import syntax as ast
from arrayviews.language.parser import parse, parse_array_expression, parse_statements
from arrayviews.language.printer import script_text, to_text
from arrayviews.model.aggregate_calls import FUNCTIONS as AGGREGATES
from arrayviews.model.aggregate_calls import AggregateCall
from arrayviews.model.errors import ParseError
from arrayviews.model.expressions import (
    BINARY_OPS,
    Binary,
    Call,
    Expr,
    Literal,
    Name,
    Unary,
    parse_expression,
)
from arrayviews.model.schema import UNBOUNDED_HIGH, ArraySchema, Attribute, Dimension
from arrayviews.model.types import ATTRIBUTE_TYPES

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
    (statement,) = parse("SELECT * FROM apply(A, w, least(v, 1, i), z, iif(v > 0, v, -v))")
    assert statement.source == ast.Apply(
        A, (("w", parse_expression("least(v, 1, i)")), ("z", parse_expression("iif(v > 0, v, -v)")))
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
        ast.ShowArrays(),
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
    (statement,) = parse("SELECT from, into INTO values FROM select WHERE where > 1")
    assert statement == ast.Select(
        ast.ArrayName("select"), ("from", "into"), parse_expression("where > 1"), "values"
    )
    assert to_text(statement) == "SELECT from, into INTO values FROM select WHERE where > 1"
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

    def build(args: parser_module.Arguments) -> ast.ArrayExpr:
        args.count(3, None, "smooth(array, size..., aggregate...)")
        sizes = [args.integer(k) for k in range(1, len(args)) if args.is_integer(k)]
        calls = [args.aggregate(k) for k in range(1 + len(sizes), len(args))]
        return Smooth(args.array(0), tuple(sizes), tuple(calls))

    saved_parsers = dict(parser_module.ARRAY_FUNCTIONS)
    saved_printers = dict(printer_module._ARGUMENTS)
    try:
        parser_module.array_function("smooth")(build)
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
        parser_module.ARRAY_FUNCTIONS.clear()
        parser_module.ARRAY_FUNCTIONS.update(saved_parsers)
        printer_module._ARGUMENTS.clear()
        printer_module._ARGUMENTS.update(saved_printers)


# -- syntax errors ------------------------------------------------------------------------------
ERRORS = [
    # text, line, column, reason (start of the message), expected (None: not checked)
    ("CREATE ARAY A", 1, 8, "unexpected 'ARAY'", ("ARRAY",)),
    ("DROP ARRAY", 1, 11, "unexpected end of input", ("identifier",)),
    ("DROP ARRAY\n  -- comment\n", 1, 11, "unexpected end of input", ("identifier",)),
    (
        "SELEC * FROM A",
        1,
        1,
        "unexpected 'SELEC'",
        ("';'", "CREATE", "DELETE", "DROP", "INSERT", "LOAD", "SELECT", "SHOW", "end of input"),
    ),
    ("SHOW ARRAYS foo", 1, 13, "unexpected 'foo' after the end of the statement", ("';'", "end of input")),
    ("SHOW TABLES", 1, 6, "unexpected 'TABLES'", ("ARRAYS", "CHUNKS", "SCHEMA", "VERSIONS")),
    ("SELECT * FROM", 1, 14, "unexpected end of input", ("identifier",)),
    ("SELECT FROM A", 1, 13, "unexpected 'A'", ("','", "FROM", "INTO")),
    ("SELECT * FROM A WHERE", 1, 22, "unexpected end of input", ("'('", "expression")),
    ("SELECT * FROM A WHERE v > 1, 2", 1, 28, "unexpected ','", ("'('", "';'", "end of input", "expression")),
    ("SELECT * FROM A;\nSELECT * FROM A WHERE v $ 1", 2, 25, "unexpected character '$'", None),
    ("SELECT * FROM A WHERE v > 1 1", 1, 29, "unexpected '1'", None),
    ("SELECT *\n  FROM filter(A, v > )", 2, 21, "unexpected end of input", None),
    ("SELECT * FROM filter(A, )", 1, 25, "unexpected ')'", ("'('", "expression")),
    ("SELECT * FROM filter(A, `x)", 1, 25, "unexpected character '`'", ("'('", "expression")),
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
        ("false", "inf", "nan", "null", "number", "true"),
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
    ("LOAD A FROM x.csv", 1, 13, "unexpected 'x.csv'", ("string",)),
    ("LOAD A FROM 'x.csv", 1, 13, 'unexpected "\'x.csv"', ("string",)),
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
    ("CREATE ARRAY A v:int64 [i=1:2]", 1, 16, "unexpected 'v:int64'", ("schema",)),
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
    assert caught.value.expected == tuple(sorted(parser_module.ARRAY_FUNCTIONS))
    assert "known: aggregate, apply, filter, join, project, regrid, subarray" in caught.value.reason


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
        lambda: ast.Insert("A", ((2**63,),)),
        lambda: ast.Insert("A", (("x",),)),
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
_model_names = _identifiers.filter(lambda n: "__" not in n)
_keywords = st.sampled_from(
    ["select", "FROM", "where", "values", "as", "into", "array", "show", "nan", "count"]
)
_names = st.one_of(_identifiers, _keywords)

_literals = st.one_of(
    st.booleans(),
    st.integers(0, 2**63 - 1),
    st.floats(min_value=0.0).filter(lambda f: math.copysign(1.0, f) > 0),
    st.just(math.nan),
).map(Literal)
_expr_names = st.one_of(
    _identifiers.filter(lambda n: n.lower() not in {"and", "or", "not", "true", "false", "nan", "inf"}),
    st.text(string.ascii_letters + " ,;()'-<>[]*", min_size=1, max_size=6),
).map(Name)


def _grow(children: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
    return st.one_of(
        st.builds(Unary, st.sampled_from(["-", "+", "not"]), children),
        st.builds(Binary, st.sampled_from(sorted(BINARY_OPS)), children, children),
        st.builds(
            Call,
            st.sampled_from(["sqrt", "pow", "least", "iif", "f"]),
            st.lists(children, max_size=3).map(tuple),
        ),
    )


expressions = st.recursive(st.one_of(_literals, _expr_names), _grow, max_leaves=8)
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


@st.composite
def schemas(draw) -> ArraySchema:
    names = draw(st.lists(_model_names, min_size=1, max_size=5, unique=True))
    ndim = draw(st.integers(1, len(names)))
    dimensions = []
    for name in names[:ndim]:
        low = draw(st.integers(-1000, 1000))
        high = draw(st.one_of(st.integers(low, low + 1000), st.just(UNBOUNDED_HIGH)))
        chunk = draw(st.integers(1, min(high - low + 1, 100)))
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

statements = st.one_of(
    st.builds(ast.CreateArray, schemas()),
    st.builds(ast.DropArray, _names),
    st.just(ast.ShowArrays()),
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
    ),
    st.builds(
        ast.Load,
        _names,
        st.text(min_size=0, max_size=12).filter(lambda p: "\n" not in p),
        st.sampled_from([None, "csv", "parquet"]),
    ),
    st.builds(ast.Delete, _delete_targets),
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
