"""Tests of cell expressions without Spark: parsing Spark SQL, canonical printing and round trips,
syntax errors, typing, and the numpy evaluator against the semantic table (tests/expression_cases.py)
and against an independent plain-Python reference (tests/expression_reference.py).

tests/test_expression_spark.py checks the same table, the typing rules and random expressions
against Spark itself.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from arrayviews.kernels.evaluate import evaluate, evaluate_predicate
from arrayviews.model.errors import ParseError, ValidationError
from arrayviews.model.expressions import (
    FUNCTIONS,
    INT64_MAX,
    MAX_DEPTH,
    Between,
    Binary,
    Call,
    Case,
    Cast,
    Expr,
    In,
    IsNull,
    Literal,
    Name,
    Unary,
    depth,
    infer_type,
    nullable,
    parse_expression,
    referenced_names,
    resolve_names,
)
from expression_cases import CASE_COLUMNS, ROWS, SEMANTICS, Raises, case_columns, same_values
from expression_reference import SparkError, TypeProblem, evaluate_cells, evaluate_rows, type_of
from expression_strategies import COLUMNS, TRANSCENDENTAL, any_trees, expression_chunks, typed, well_typed

N, L, U, B = Name, Literal, Unary, Binary


def C(function: str, *args: Expr) -> Call:
    return Call(function, args)


# ---------------------------------------------------------------------------------------------
# Parsing: golden cases (how Spark SQL text reads)

GOLDEN = [
    ("v", N("v")),
    ("`my col`", N("my col")),
    ("`a``b`", N("a`b")),
    ("42", L(42, "int32")),
    ("2147483647", L(2147483647, "int32")),
    ("2147483648", L(2147483648, "int64")),
    ("-2147483648", L(-(2**31), "int32")),  # Spark: a minus sign right before a number is the literal
    ("- 2147483648", L(-(2**31), "int32")),
    ("-(2147483648)", U("-", L(2147483648, "int64"))),
    ("-9223372036854775808", L(-(2**63), "int64")),
    ("7L", L(7, "int64")),
    ("-7L", L(-7, "int64")),
    ("1.5", L(1.5, "float64")),  # a DECIMAL in Spark: read as DOUBLE (the documented divergence)
    ("1.5D", L(1.5, "float64")),
    (".5", L(0.5, "float64")),
    ("2.", L(2.0, "float64")),
    ("1e-3", L(0.001, "float64")),
    ("1E+3", L(1000.0, "float64")),
    ("1.5F", L(1.5, "float32")),
    ("0.1F", L(float(np.float32(0.1)), "float32")),
    ("-0.0D", L(-0.0, "float64")),
    ("TRUE", L(True)),
    ("false", L(False)),
    ("NULL", L(None)),
    ("CAST('NaN' AS DOUBLE)", L(math.nan, "float64")),
    ("CAST('nan' AS FLOAT)", L(math.nan, "float32")),
    ("double('-inf')", L(-math.inf, "float64")),
    ("double(' Infinity ')", L(math.inf, "float64")),
    ("CAST('7' AS BIGINT)", L(7, "int64")),
    ("CAST('yes' AS BOOLEAN)", L(True)),
    ("- -5", U("-", L(-5))),
    ("-x", U("-", N("x"))),
    ("+x", U("+", N("x"))),
    ("~x", U("~", N("x"))),
    ("a + b * c", B("+", N("a"), B("*", N("b"), N("c")))),
    ("(a + b) * c", B("*", B("+", N("a"), N("b")), N("c"))),
    ("a - b - c", B("-", B("-", N("a"), N("b")), N("c"))),
    ("a / b % c * d", B("*", B("%", B("/", N("a"), N("b")), N("c")), N("d"))),
    ("a DIV b", B("div", N("a"), N("b"))),
    ("-a * b", B("*", U("-", N("a")), N("b"))),
    ("a ^ b", B("^", N("a"), N("b"))),  # XOR, as in Spark
    ("a | b & c", B("|", N("a"), B("&", N("b"), N("c")))),  # & binds tighter than ^, ^ than |
    ("a ^ b | c", B("|", B("^", N("a"), N("b")), N("c"))),
    ("a | b ^ c", B("|", N("a"), B("^", N("b"), N("c")))),
    ("a & b ^ c & d", B("^", B("&", N("a"), N("b")), B("&", N("c"), N("d")))),
    ("a + b & c", B("&", B("+", N("a"), N("b")), N("c"))),
    ("a = b", B("=", N("a"), N("b"))),
    ("a == b", B("=", N("a"), N("b"))),
    ("a != b", B("<>", N("a"), N("b"))),
    ("a <=> b", B("<=>", N("a"), N("b"))),
    ("a IS NOT DISTINCT FROM b", B("<=>", N("a"), N("b"))),
    ("a IS DISTINCT FROM b", U("not", B("<=>", N("a"), N("b")))),
    ("a = b < c", B("<", B("=", N("a"), N("b")), N("c"))),  # one comparison level, left to right
    ("a < b = c", B("=", B("<", N("a"), N("b")), N("c"))),
    ("a<=b+1", B("<=", N("a"), B("+", N("b"), L(1)))),
    ("v > 0.5 and i < 10", B("and", B(">", N("v"), L(0.5)), B("<", N("i"), L(10)))),
    ("a or b and c", B("or", N("a"), B("and", N("b"), N("c")))),
    ("not a and b", B("and", U("not", N("a")), N("b"))),
    ("NOT a = b", U("not", B("=", N("a"), N("b")))),
    ("!a", U("not", N("a"))),
    ("a IS NULL", IsNull(N("a"))),
    ("a IS NOT NULL", IsNull(N("a"), negated=True)),
    ("NOT a IS NULL", IsNull(N("a"), negated=True)),
    ("NOT (a IS NULL)", U("not", IsNull(N("a")))),
    ("a = b IS NULL", IsNull(B("=", N("a"), N("b")))),
    ("a IN (1, b)", In(N("a"), (L(1), N("b")))),
    ("a NOT IN (1)", In(N("a"), (L(1),), negated=True)),
    ("a BETWEEN 1 AND b + 1", Between(N("a"), L(1), B("+", N("b"), L(1)))),
    ("a NOT BETWEEN 1 AND 2 AND c", B("and", Between(N("a"), L(1), L(2), negated=True), N("c"))),
    ("CASE WHEN a THEN 1 WHEN b THEN 2 ELSE 3 END", Case(((N("a"), L(1)), (N("b"), L(2))), L(3))),
    ("CASE x WHEN 1 THEN 2 END", Case(((B("=", N("x"), L(1)), L(2)),))),
    ("CAST(v AS INT)", Cast(N("v"), "int32")),
    ("CAST(v AS integer)", Cast(N("v"), "int32")),
    ("CAST(v AS LONG)", Cast(N("v"), "int64")),
    ("CAST(v AS real)", Cast(N("v"), "float32")),
    ("v::double", Cast(N("v"), "float64")),
    ("CAST(1 AS BIGINT)", Cast(L(1), "int64")),
    ("boolean(v)", Cast(N("v"), "bool")),
    ("bigint(v)", Cast(N("v"), "int64")),
    ("sqrt(v) * 2 + j", B("+", B("*", C("sqrt", N("v")), L(2)), N("j"))),
    ("SQRT(v)", C("sqrt", N("v"))),
    ("power(a, 2)", C("pow", N("a"), L(2))),
    ("ceiling(a)", C("ceil", N("a"))),
    ("nvl(a, b)", C("coalesce", N("a"), N("b"))),
    ("if(a > 0, a, -a)", C("if", B(">", N("a"), L(0)), N("a"), U("-", N("a")))),
    ("IF (a, 1, 2)", C("if", N("a"), L(1), L(2))),
    ("log(v)", C("log", N("v"))),
    ("log(2, v)", C("log", L(2), N("v"))),
    ("log10(v)", C("log10", N("v"))),
    ("least(a, b, 3)", C("least", N("a"), N("b"), L(3))),
    ("try_divide(a, 0)", C("try_divide", N("a"), L(0))),
    (
        "android + notes + inform + nan1",
        B("+", B("+", B("+", N("android"), N("notes")), N("inform")), N("nan1")),
    ),
    ("nan + inf", B("+", N("nan"), N("inf"))),  # names: Spark spells NaN as CAST('NaN' AS DOUBLE)
    ("  a\n  +\tb  ", B("+", N("a"), N("b"))),
    ("a + b -- a comment", B("+", N("a"), N("b"))),
    ("a /* a comment */ + b", B("+", N("a"), N("b"))),
    ("((a))", N("a")),
    ("(a < b) = (c < d)", B("=", B("<", N("a"), N("b")), B("<", N("c"), N("d")))),
]


@pytest.mark.parametrize(("text", "expected"), GOLDEN, ids=[text for text, _ in GOLDEN])
def test_golden_parse(text: str, expected: Expr) -> None:
    assert parse_expression(text) == expected


CANONICAL = [
    ("a+b*c", "a + b * c"),
    ("(a + b) + c", "a + b + c"),
    ("a + (b + c)", "a + (b + c)"),
    ("a - (b - c)", "a - (b - c)"),
    ("-(-x)", "- -x"),
    ("-(5)", "-(5)"),
    ("- -5", "- -5"),
    ("-5", "-5"),
    ("a == b", "a = b"),
    ("a != b", "a <> b"),
    ("a = b < c", "(a = b) < c"),
    ("a | b & c", "a | (b & c)"),
    ("a & b & c", "a & b & c"),
    ("(a & b) | c", "(a & b) | c"),
    ("!a and b or c", "NOT a AND b OR c"),
    ("not (a and b)", "NOT (a AND b)"),
    ("(not a) = b", "(NOT a) = b"),
    ("a and (b or c)", "a AND (b OR c)"),
    ("a IS NOT NULL", "a IS NOT NULL"),
    ("NOT (a IN (1))", "NOT (a IN (1))"),
    ("a NOT IN (1,2)", "a NOT IN (1, 2)"),
    ("(a = b) IN (TRUE)", "(a = b) IN (TRUE)"),
    ("a BETWEEN (b = c) AND d", "a BETWEEN (b = c) AND d"),
    ("SQRT( v )", "sqrt(v)"),
    ("1E3 + .5 + 7 + 7L + 2.5F", "1000.0D + 0.5D + 7 + 7L + 2.5F"),
    ("1e300 * 1e-7", "1e+300D * 1e-07D"),
    ("3000000000", "3000000000"),
    ("-2147483648L", "-2147483648L"),
    ("True or FALSE or null", "TRUE OR FALSE OR NULL"),
    ("double('nan') + float('-inf')", "CAST('NaN' AS DOUBLE) + CAST('-Infinity' AS FLOAT)"),
    ("`and` + `x` + `a b` + `from` + date + `a``b`", "`and` + x + `a b` + `from` + `date` + `a``b`"),
    ("case when a then 1 end", "CASE WHEN a THEN 1 END"),
    ("int(v)", "CAST(v AS INT)"),
    ("a div b", "a DIV b"),
    ("a IS DISTINCT FROM b", "NOT a <=> b"),
]


@pytest.mark.parametrize(("text", "printed"), CANONICAL, ids=[text for text, _ in CANONICAL])
def test_canonical_text(text: str, printed: str) -> None:
    expr = parse_expression(text)
    assert expr.to_text() == printed
    assert str(expr) == printed
    assert parse_expression(printed) == expr


# ---------------------------------------------------------------------------------------------
# Tree construction


def test_nodes_are_immutable_and_hashable() -> None:
    expr = parse_expression("a + sqrt(b) > 1")
    with pytest.raises(AttributeError):
        expr.op = "<"  # type: ignore[misc]
    assert hash(expr) == hash(parse_expression("a+sqrt(b)>1"))
    assert {expr, parse_expression("(a + sqrt(b)) > 1")} == {expr}


def test_literals_compare_by_type_value_and_sign() -> None:
    assert L(1) != L(1, "int64")
    assert L(1) != L(1.0)
    assert L(1) != L(True)
    assert L(0.0) != L(-0.0)
    assert L(None) == L(None, "void")
    assert L(math.nan) == L(float("nan"))
    assert hash(L(math.nan)) == hash(L(float("nan")))
    assert L(np.float64(2.5)) == L(2.5)
    assert L(np.int64(3)) == L(3)
    assert (L(1).type, L(2**31).type, L(1.0).type, L(False).type, L(None).type) == (
        "int32",
        "int64",
        "float64",
        "bool",
        "void",
    )
    assert L(1, "BIGINT") == L(1, "int64") and L(1.5, "FLOAT") == L(1.5, "float32")


@pytest.mark.parametrize(
    ("value", "kind", "error"),
    [
        (2**31, "int32", ValueError),
        (2**63, "int64", ValueError),
        (2**64, None, ValueError),
        (2**63 - 1, "uint64", ValueError),
        (0.1, "float32", ValueError),  # not a FLOAT value
        (1.5, "int32", TypeError),
        (True, "int32", TypeError),
        (1, "bool", TypeError),
        ("1", "int32", TypeError),
        (1, "string", TypeError),
        (1, "void", ValueError),
    ],
)
def test_literal_validation(value, kind, error) -> None:
    with pytest.raises(error):
        Literal(value, kind)


def test_node_validation() -> None:
    assert B("==", N("a"), N("b")) == B("=", N("a"), N("b"))
    assert B("AND", N("a"), N("b")).op == "and"
    assert U("!", N("a")).op == "not"
    assert C("LEAST", N("a"), N("b")).function == "least"
    assert C("power", N("a"), N("b")).function == "pow"
    with pytest.raises(ValueError, match="unknown operator"):
        B("**", N("a"), N("b"))
    with pytest.raises(ValueError, match="unknown function 'frob'"):
        Call("frob", (N("a"),))
    with pytest.raises(ValueError, match="takes 1 argument, got 2"):
        Call("sqrt", (N("a"), N("b")))
    with pytest.raises(ValueError, match="takes 2 arguments, got 3"):
        Call("nvl", (N("a"), N("b"), N("c")))
    with pytest.raises(ValueError, match="invalid name"):
        Name("a\nb")
    with pytest.raises(ValueError, match="at least one value"):
        In(N("a"), ())
    with pytest.raises(ValueError, match="at least one WHEN"):
        Case(())
    with pytest.raises(ValueError):
        Cast(N("a"), "void")


def test_referenced_and_resolved_names() -> None:
    expr = parse_expression("sqrt(v) * 2 + j > least(v, `k`, 3) AND NOT flag")
    assert referenced_names(expr) == frozenset({"v", "j", "k", "flag"})
    assert referenced_names(parse_expression("1 + 2")) == frozenset()
    # Names match as in Spark: without regard to case, an exact match first.
    assert resolve_names(parse_expression("V + v2"), ["v", "V2", "v2"]) == parse_expression("v + v2")
    assert resolve_names(parse_expression("ab"), ["ab", "AB"]) == N("ab")
    with pytest.raises(ValidationError, match="ambiguous: it matches ab, AB"):
        resolve_names(parse_expression("Ab"), ["ab", "AB"])
    with pytest.raises(ValidationError, match="unknown name 'z'; available: a, b"):
        resolve_names(parse_expression("z + 1"), ["a", "b"])


# ---------------------------------------------------------------------------------------------
# Round trip of random trees


def _fully_parenthesised(expr: Expr) -> str:
    """An independent printer that wraps every compound node in parentheses."""
    if isinstance(expr, Binary):
        op = {"and": "AND", "or": "OR", "div": "DIV"}.get(expr.op, expr.op)
        return f"({_fully_parenthesised(expr.left)} {op} {_fully_parenthesised(expr.right)})"
    if isinstance(expr, Unary):
        return f"({'NOT' if expr.op == 'not' else expr.op} {_fully_parenthesised(expr.operand)})"
    if isinstance(expr, Call):
        return f"{expr.function}({', '.join(_fully_parenthesised(a) for a in expr.args)})"
    if isinstance(expr, IsNull):
        return f"({_fully_parenthesised(expr.operand)} IS {'NOT ' if expr.negated else ''}NULL)"
    if isinstance(expr, In):
        values = ", ".join(_fully_parenthesised(v) for v in expr.values)
        return f"({_fully_parenthesised(expr.operand)} {'NOT ' if expr.negated else ''}IN ({values}))"
    if isinstance(expr, Between):
        parts = [_fully_parenthesised(p) for p in expr.children()]
        return f"({parts[0]} {'NOT ' if expr.negated else ''}BETWEEN {parts[1]} AND {parts[2]})"
    if isinstance(expr, Case):
        whens = " ".join(
            f"WHEN {_fully_parenthesised(c)} THEN {_fully_parenthesised(v)}" for c, v in expr.branches
        )
        otherwise = f" ELSE {_fully_parenthesised(expr.otherwise)}" if expr.otherwise is not None else ""
        return f"(CASE {whens}{otherwise} END)"
    if isinstance(expr, Cast):
        return f"CAST({_fully_parenthesised(expr.operand)} AS {expr.to_text().rsplit(' AS ', 1)[1]}"
    if isinstance(expr, Literal) and expr.type in ("int32", "int64", "float32", "float64"):
        return f"({expr.to_text()})"  # "(-5)" is still the literal -5
    return expr.to_text()


@settings(max_examples=400, deadline=None)
@given(any_trees())
def test_printed_form_round_trips(expr: Expr) -> None:
    assume(depth(expr) <= MAX_DEPTH)
    text = expr.to_text()
    assert parse_expression(text) == expr
    assert parse_expression(text).to_text() == text
    assert parse_expression(_fully_parenthesised(expr)) == expr


# ---------------------------------------------------------------------------------------------
# Syntax errors

SYNTAX_ERRORS = [
    # text, line, column, start of the reason, expected (None: not checked)
    ("", 1, 1, "expression is empty", ("expression",)),
    ("   \n ", 1, 1, "expression is empty", ("expression",)),
    ("v +", 1, 4, "unexpected end of input", ("expression",)),
    ("v + ", 1, 4, "unexpected end of input", ("expression",)),
    ("a != ", 1, 5, "unexpected end of input", ("expression",)),
    ("v + * 3", 1, 5, "unexpected '*'", ("expression",)),
    ("v +\n  * 2", 2, 3, "unexpected '*'", ("expression",)),
    ("a\n\n  b", 3, 3, "unexpected 'b' after the end of the expression", ("operator", "end of input")),
    ("(v", 1, 3, "unexpected end of input", ("')'",)),
    ("(v + 1", 1, 7, "unexpected end of input", ("')'",)),
    ("v)", 1, 2, "unexpected ')'", ("operator", "end of input")),
    ("v $ 3", 1, 3, "unexpected '$'", None),
    ("v + #", 1, 5, "unexpected '#'", None),
    ("v ? 1", 1, 3, "unexpected '?'", None),
    ("a && b", 1, 3, "unexpected '&&' (write AND)", None),
    ("1 2", 1, 3, "unexpected '2'", ("operator", "end of input")),
    ("a = = b", 1, 5, "unexpected '='", ("expression",)),
    ("sqrt(v,)", 1, 8, "unexpected ')'", ("expression",)),
    ("sqrt(,v)", 1, 6, "unexpected ','", ("expression",)),
    ("f(a b)", 1, 5, "unexpected 'b'", ("')'",)),
    ("f(a", 1, 4, "unexpected end of input", ("')'",)),
    ("CAST(a AS INT", 1, 14, "unexpected end of input", ("')'",)),
    ("and", 1, 1, "unexpected 'and'", ("expression",)),
    ("a and or b", 1, 7, "unexpected 'or'", ("expression",)),
    ("not", 1, 4, "unexpected end of input", ("expression",)),
    ("()", 1, 2, "unexpected ')'", ("expression",)),
    ("a; b", 1, 2, "unexpected ';'", ("operator", "end of input")),
    ("a AS b", 1, 3, "unexpected 'AS' after the end of the expression", None),
    ("`x", 1, 1, "unterminated name", ("expression",)),
    ("a + 'x", 1, 5, "unterminated string", ("expression",)),
    ("``", 1, 1, "invalid name ''", ()),
    ("a +\n`b\nc`", 2, 1, "invalid name 'b\\nc'", ()),
    ("CASE WHEN a THEN 1", 1, 19, "unexpected end of input", ("END",)),
    ("CAST(a AS foo)", 1, 11, "unexpected 'foo'; a cast needs a type", None),
    ("a IN ()", 1, 1, "IN needs at least one value", ("expression",)),
    ("18446744073709551616", 1, 1, "integer 18446744073709551616 is outside the BIGINT range", ("number",)),
    ("1 + 99999999999999999999", 1, 5, "integer 99999999999999999999 is outside the BIGINT range", None),
    ("1e400", 1, 1, "number 1e400 is outside the DOUBLE range", ("number",)),
    ("1e39F", 1, 1, "number 1e39F is outside the FLOAT range", ("number",)),
    ("frob(a)", 1, 1, "unknown function 'frob'; supported: abs,", ("function",)),
    ("a +\n  count(*)", 2, 3, "unknown function 'count'", ("function",)),
    ("sqrt(a, b)", 1, 1, "function sqrt() takes 1 argument, got 2", ()),
    ("nvl(a)", 1, 1, "function nvl() takes 2 arguments, got 1", ()),
    ("least(a)", 1, 1, "function least() takes at least 2 arguments, got 1", ()),
    ("if(a, 1)", 1, 4, "function if() takes 3 arguments, got 2", ()),
    ("CAST('abc' AS DOUBLE)", 1, 6, "cannot cast 'abc' to DOUBLE", ()),
    ("CAST('1.5' AS INT)", 1, 6, "cannot cast '1.5' to INT", ()),
    ("a + not b", 1, 5, "NOT needs parentheses here", ()),
    ("a = NOT b", 1, 5, "NOT needs parentheses here", ()),
    ("a = b IN (1)", 1, 5, "IN needs parentheses here", ()),
    ("a IN (1) = b", 1, 1, "IN needs parentheses here", ()),
    ("a < b BETWEEN 1 AND 2", 1, 5, "BETWEEN needs parentheses here", ()),
]


@pytest.mark.parametrize(
    ("text", "line", "column", "reason", "expected"),
    SYNTAX_ERRORS,
    ids=[repr(case[0]) for case in SYNTAX_ERRORS],
)
def test_syntax_errors(text: str, line: int, column: int, reason: str, expected: tuple | None) -> None:
    with pytest.raises(ParseError) as caught:
        parse_expression(text)
    error = caught.value
    assert (error.line, error.column) == (line, column), error.reason
    assert error.reason.startswith(reason), error.reason
    assert error.text == text
    if expected is not None:
        assert error.expected == expected
    assert f"line {line}, column {column}" in str(error)


UNSUPPORTED = [
    ("a || b", "'||' (string concatenation; write OR for a condition)"),
    ("a ILIKE 'x%'", "ILIKE"),
    ("a.b + 1", "the qualified name 'a.b'"),
    ("*", "'*'"),
    ("(a, b)", "row values"),
    ("a[1]", "unexpected '['"),
    ("1.5.3", "'.'"),
    ("TRY_CAST(a AS INT)", "TRY_CAST"),
    ("CAST(a AS SMALLINT)", "arrays have no SMALLINT type"),
    ("CAST(a AS DECIMAL(10, 2))", "arrays have no DECIMAL(10, 2) type"),
    ("CAST(a AS STRING)", "arrays have no STRING type"),
    ("1S + 1Y", "the SMALLINT literal 1S"),
    ("2BD", "arrays have no DECIMAL"),
    ("a IS TRUE", "IS TRUE"),
    ("EXISTS (SELECT 1)", "EXISTS"),
    ("sum(a)", "unknown function 'sum'"),
    ("substring(a, 1)", "unknown function 'substring'"),
    ("INTERVAL 1 DAY", "INTERVAL"),
    ("a << 1", "unexpected '<'"),
]


@pytest.mark.parametrize(("text", "reason"), UNSUPPORTED, ids=[text for text, _ in UNSUPPORTED])
def test_unsupported_spark_constructs(text: str, reason: str) -> None:
    with pytest.raises(ParseError) as caught:
        parse_expression(text)
    assert reason in caught.value.reason
    if "not supported" in caught.value.reason:
        assert "supported: numbers, TRUE, FALSE, NULL, names" in caught.value.reason


def test_nesting_depth_is_limited() -> None:
    columns = {"v": np.arange(3, dtype=np.int32)}
    for text in ["+".join(["v"] * MAX_DEPTH), "abs(" * (MAX_DEPTH - 1) + "v" + ")" * (MAX_DEPTH - 1)]:
        expr = parse_expression(text)  # the deepest accepted nesting works end to end
        assert depth(expr) == MAX_DEPTH
        assert parse_expression(expr.to_text()) == expr
        expected = MAX_DEPTH * columns["v"] if "+" in text else columns["v"]
        np.testing.assert_array_equal(evaluate(expr, columns, 3), expected)
    with pytest.raises(ParseError, match=f"nested more than {MAX_DEPTH} levels deep") as caught:
        parse_expression("+".join(["v"] * (MAX_DEPTH + 1)))
    assert (caught.value.line, caught.value.column) == (1, 1)
    with pytest.raises(ParseError, match="nested more than") as caught:
        parse_expression("w +\n" + "- " * MAX_DEPTH + "v")
    assert (caught.value.line, caught.value.column) == (2, 2 * MAX_DEPTH - 1)
    with pytest.raises(ParseError, match="nested more than") as caught:
        parse_expression("(" * (MAX_DEPTH + 1) + "v" + ")" * (MAX_DEPTH + 1))
    assert (caught.value.line, caught.value.column) == (1, MAX_DEPTH + 1)


def test_largest_literals_parse() -> None:
    assert parse_expression("9223372036854775807") == L(INT64_MAX, "int64")
    assert parse_expression("-9223372036854775807") == L(-INT64_MAX, "int64")
    assert parse_expression("1.7976931348623157e308") == L(1.7976931348623157e308)
    assert parse_expression("3.4028235e38F") == L(float(np.finfo(np.float32).max), "float32")


# ---------------------------------------------------------------------------------------------
# Typing

TYPES = {"a32": "int32", "a64": "int64", "x32": "float32", "x64": "float64", "p": "bool", "q": "bool"}

TYPE_CASES = [
    ("a32", "int32"),
    ("1", "int32"),
    ("1L", "int64"),
    ("1.0", "float64"),
    ("NULL", "void"),
    ("TRUE", "bool"),
    ("a32 + a32", "int32"),
    ("a32 * a64 % 3", "int64"),
    ("a32 + x32", "float64"),  # an integer with a FLOAT is a DOUBLE
    ("a64 - x32", "float64"),
    ("x32 + x32", "float32"),
    ("x32 - 1", "float64"),
    ("x32 % 2.5F", "float32"),
    ("-a32", "int32"),
    ("+x32", "float32"),
    ("-NULL", "float64"),
    ("NULL + NULL", "float64"),
    ("NULL + 1", "int32"),
    ("NULL % 1L", "int64"),
    ("a64 / a64", "float64"),
    ("x32 / x32", "float64"),
    ("a32 DIV a32", "int64"),
    ("a32 ^ a64", "int64"),
    ("~a32", "int32"),
    ("~NULL", "int32"),
    ("pow(a32, 2)", "float64"),
    ("sqrt(a64)", "float64"),
    ("exp(x32)", "float64"),
    ("ln(a32) + log10(1) + log2(1) + log(2, 1) + sin(1) + cos(1) + tan(1)", "float64"),
    ("abs(a32)", "int32"),
    ("abs(x32)", "float32"),
    ("abs(NULL)", "float64"),
    ("floor(x32)", "int64"),
    ("ceil(a32)", "int64"),
    ("round(x64)", "float64"),
    ("round(x32)", "float32"),
    ("round(a32)", "int32"),
    ("least(a32, a32)", "int32"),
    ("least(a32, a64)", "int64"),
    ("greatest(x32, x32, x32)", "float32"),
    ("greatest(x32, a32)", "float64"),
    ("least(p, q)", "bool"),
    ("least(NULL, NULL)", "void"),
    ("coalesce(a32, x32)", "float64"),
    ("if(p, a32, a32)", "int32"),
    ("if(p, a32, 0L)", "int64"),
    ("if(p, x32, a64)", "float64"),
    ("if(NULL, p, q)", "bool"),
    ("CASE WHEN p THEN NULL ELSE x32 END", "float32"),
    ("CASE WHEN p THEN NULL END", "void"),
    ("nullif(a32, a64)", "int32"),
    ("nullif(NULL, 1)", "void"),
    ("nanvl(a32, a32)", "float64"),
    ("nanvl(x32, x32)", "float32"),
    ("nanvl(x32, NULL)", "float32"),
    ("nanvl(NULL, x32)", "float64"),
    ("try_add(a32, 1)", "int32"),
    ("try_divide(a32, 1)", "float64"),
    ("CAST(x64 AS INT)", "int32"),
    ("CAST(p AS BIGINT)", "int64"),
    ("CAST(a64 AS FLOAT)", "float32"),
    ("CAST(NULL AS DOUBLE)", "float64"),
    ("x32 < a64", "bool"),
    ("p = q", "bool"),
    ("p < q", "bool"),  # BOOLEANs are ordered: false < true
    ("p <=> NULL", "bool"),
    ("isnan(x32)", "bool"),
    ("isnan(a32)", "bool"),
    ("a32 IN (1, 2.5, NULL)", "bool"),
    ("a32 BETWEEN x32 AND 3", "bool"),
    ("NOT p AND q OR a32 > 1", "bool"),
    ("a32 IS NULL", "bool"),
]


@pytest.mark.parametrize(("text", "expected"), TYPE_CASES, ids=[text for text, _ in TYPE_CASES])
def test_infer_type(text: str, expected: str) -> None:
    assert infer_type(parse_expression(text), TYPES) == expected


def test_infer_type_accepts_type_aliases_and_any_case_of_names() -> None:
    assert infer_type(parse_expression("v + 1"), {"v": "double"}) == "float64"
    assert infer_type(parse_expression("V + 1"), {"v": "int32"}) == "int32"


TYPE_ERRORS = [
    ("zz + 1", "unknown name 'zz'; available: a32, a64, x32, x64, p, q in expression 'zz + 1'"),
    ("NOT x64", "NOT needs a condition (BOOLEAN), got DOUBLE, in 'NOT x64'"),
    ("-p", "'-' needs a number, got BOOLEAN; convert it with CAST(... AS INT) first, in '-p'"),
    ("p + 1", "'+' needs a number, got BOOLEAN"),
    ("p * q", "'*' needs a number, got BOOLEAN"),
    ("a32 AND p", "AND needs a condition (BOOLEAN), got INT"),
    ("p OR 1.5", "OR needs a condition (BOOLEAN), got DOUBLE"),
    ("p = 1.5", "'=' cannot compare BOOLEAN with DOUBLE, in 'p = 1.5D'"),
    ("a64 <> q", "cannot compare BIGINT with BOOLEAN"),
    ("x64 & 1", "'&' needs an integer (INT or BIGINT), got DOUBLE"),
    ("x64 DIV 2", "DIV needs an integer (INT or BIGINT), got DOUBLE"),
    ("~x32", "'~' needs an integer (INT or BIGINT), got FLOAT"),
    ("sqrt(p)", "sqrt() needs a number, got BOOLEAN"),
    ("isnan(p)", "isnan() needs a number, got BOOLEAN"),
    ("least(a32, p)", "least() cannot mix INT, BOOLEAN"),
    ("if(a32, 1, 2)", "if() needs a condition (BOOLEAN), got INT"),
    ("if(p, 1, q)", "if() cannot mix INT, BOOLEAN"),
    ("CASE WHEN NULL THEN 1 END", "CASE needs a condition (BOOLEAN), got VOID"),
    ("CASE WHEN a32 THEN 1 END", "CASE needs a condition (BOOLEAN), got INT"),
    ("a32 IN (p)", "IN cannot mix INT, BOOLEAN"),
    ("p BETWEEN 1 AND 2", "BETWEEN cannot mix BOOLEAN, INT"),
    ("nanvl(p, 1)", "nanvl() needs a number, got BOOLEAN"),
    ("try_add(p, 1)", "'+' needs a number, got BOOLEAN"),
    ("nullif(p, 1)", "nullif() cannot compare BOOLEAN with INT"),
]


@pytest.mark.parametrize(("text", "message"), TYPE_ERRORS, ids=[text for text, _ in TYPE_ERRORS])
def test_type_errors(text: str, message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        infer_type(parse_expression(text), TYPES)
    assert message in str(caught.value)


def test_unknown_name_reports_the_column() -> None:
    with pytest.raises(ValidationError) as caught:
        infer_type(parse_expression("w > 0"), {})
    assert caught.value.column == "w"
    assert "available: (none)" in str(caught.value)


def test_nullable() -> None:
    types = {"a": "int32", "b": "float64", "n": "int32"}
    cases = {
        "a + 1": False,
        "n + 1": True,
        "ln(b)": True,
        "coalesce(n, a)": False,
        "coalesce(n, n)": True,
        "n IS NULL": False,
        "n <=> a": False,
        "isnan(b)": False,
        "CASE WHEN a > 0 THEN 1 END": True,
        "CASE WHEN a > 0 THEN 1 ELSE 2 END": False,
        "try_add(a, 1)": True,
        "nullif(a, 1)": True,
        "a + NULL": True,
        "b / a": False,  # division by zero raises: no NULL
    }
    for text, expected in cases.items():
        assert nullable(parse_expression(text), types, {"n"}) is expected, text


# ---------------------------------------------------------------------------------------------
# Evaluation: the semantic table


def _as_list(result: np.ma.MaskedArray) -> list:
    mask = np.ma.getmaskarray(result)
    return [
        None if masked else value.item() for value, masked in zip(np.ma.getdata(result), mask, strict=True)
    ]


@pytest.mark.parametrize(("text", "kind", "expected"), SEMANTICS, ids=[text for text, _, _ in SEMANTICS])
def test_semantics(text: str, kind: str, expected) -> None:
    columns, nulls = case_columns()
    expr = parse_expression(text)
    types = {name: column_kind for name, (column_kind, _) in CASE_COLUMNS.items()}
    assert infer_type(expr, types) == kind
    if isinstance(expected, Raises):
        with pytest.raises(ValidationError, match=expected.message):
            evaluate(expr, columns, ROWS, nulls)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = evaluate(expr, columns, ROWS, nulls)
    if kind != "void":
        assert result.dtype == np.dtype({"bool": np.bool_}.get(kind, kind))
    assert same_values(_as_list(result), expected), (_as_list(result), expected)


def test_semantic_table_agrees_with_the_python_reference() -> None:
    """The independent reference gives the table's values too (it is checked against Spark as well)."""
    columns, nulls = case_columns()
    types = {name: kind for name, (kind, _) in CASE_COLUMNS.items()}
    rows = [
        {name: (None if values[r] is None else values[r]) for name, (_, values) in CASE_COLUMNS.items()}
        for r in range(ROWS)
    ]
    for text, _, expected in SEMANTICS:
        outcome = evaluate_cells(parse_expression(text), types, rows)
        if isinstance(expected, Raises):
            assert isinstance(outcome, Exception), text
        else:
            assert not isinstance(outcome, Exception), (text, outcome)
            assert same_values(outcome, expected), (text, outcome, expected)


def test_errors_name_the_part_the_expression_the_columns_and_the_value() -> None:
    columns, nulls = case_columns()
    with pytest.raises(ValidationError) as caught:
        evaluate(parse_expression("v + (w + 1) * 2"), columns, ROWS, nulls)
    message = str(caught.value)
    assert "INT overflow" in message
    assert "'w + 1'" in message and "'v + (w + 1) * 2'" in message
    assert "w = 2147483647" in message and "use try_add to get NULL instead" in message
    assert (caught.value.column, caught.value.value) == ("w", 2147483647)
    with pytest.raises(ValidationError) as caught:
        evaluate(parse_expression("CAST(f AS INT)"), columns, ROWS, nulls)
    assert "cannot cast to INT" in str(caught.value) and "f = inf" in str(caught.value)
    with pytest.raises(ValidationError, match="division by zero in '1 / w'.*w = 0"):
        evaluate(parse_expression("1 / w"), columns, ROWS, nulls)


def test_result_is_a_fresh_array() -> None:
    columns, nulls = case_columns()
    for text in ("w", "+w", "CAST(w AS INT)"):
        result = evaluate(parse_expression(text), columns, ROWS, nulls)
        assert result.dtype == np.int32
        result[0] = 99
        assert columns["w"][0] == 1


def test_constants_broadcast_to_length() -> None:
    result = evaluate(parse_expression("2.5 * 2"), {}, 3)
    assert result.shape == (3,) and not np.ma.getmaskarray(result).any()
    np.testing.assert_array_equal(result, [5.0, 5.0, 5.0])
    assert evaluate(parse_expression("TRUE"), {}, 0).shape == (0,)
    assert np.ma.getmaskarray(evaluate(parse_expression("NULL"), {}, 2)).all()


def test_evaluate_predicate_keeps_only_true() -> None:
    columns, nulls = case_columns()
    mask = evaluate_predicate(parse_expression("n > 0 OR b"), columns, ROWS, nulls)
    assert mask.dtype == np.bool_
    np.testing.assert_array_equal(mask, [True, False, True, False, True, False])
    np.testing.assert_array_equal(evaluate_predicate(parse_expression("NULL"), columns, ROWS), [False] * ROWS)
    with pytest.raises(ValidationError, match="filter predicate must be a condition, got DOUBLE"):
        evaluate_predicate(parse_expression("v + 1"), columns, ROWS)


def test_evaluate_rejects_unknown_names_and_bad_columns() -> None:
    columns, _ = case_columns()
    with pytest.raises(ValidationError, match="unknown name 'zz'"):
        evaluate(parse_expression("zz + 1"), columns, ROWS)
    columns["u8"] = np.zeros(ROWS, dtype=np.uint8)
    assert evaluate(parse_expression("w"), columns, ROWS).dtype == np.int32  # unused columns may be anything
    with pytest.raises(ValidationError, match="column 'u8'"):
        evaluate(parse_expression("u8 + 1"), columns, ROWS)
    with pytest.raises(ValueError, match="shape"):
        evaluate(parse_expression("w + 1"), columns, ROWS - 1)


def test_every_function_is_evaluated() -> None:
    columns = {
        "x": np.array([0.5, 2.0]),
        "p": np.array([True, False]),
        "s": np.array(["a", "é"], dtype=object),
    }
    for function, (fewest, _) in FUNCTIONS.items():
        args = (N("p"), N("x"), N("x")) if function == "if" else (N("x"),) * fewest
        if function in ("length", "like"):  # the string functions
            args = (N("s"), Literal("a%")) if function == "like" else (N("s"),)
        result = evaluate(Call(function, args), columns, 2)
        assert result.shape == (2,)


# ---------------------------------------------------------------------------------------------
# Evaluation against the plain-Python reference, one cell at a time


def _rows(length: int, columns: dict[str, np.ndarray], nulls: dict[str, np.ndarray]) -> list[dict]:
    return [
        {name: None if nulls[name][r] else columns[name][r].item() for name in columns} for r in range(length)
    ]


def check_against_reference(expr: Expr, chunk, tolerance: float = 0.0) -> None:
    """The evaluator gives the reference's values and NULLs on the cells where the reference raises
    nothing, and raises on each cell where it does (checked one cell at a time, up to three); an
    expression the typing rules reject is rejected by the reference's own typing too."""
    length, columns, nulls = chunk
    try:
        infer_type(expr, COLUMNS)
    except ValidationError:
        with pytest.raises(TypeProblem):
            type_of(expr, COLUMNS)
        return
    outcomes = evaluate_rows(expr, COLUMNS, _rows(length, columns, nulls))
    failing = np.array([isinstance(outcome, SparkError) for outcome in outcomes], dtype=bool)
    for row in np.flatnonzero(failing)[:3]:
        with pytest.raises(ValidationError):
            evaluate(expr, *_subset(columns, nulls, np.arange(length) == row))
    expected = [outcome for outcome in outcomes if not isinstance(outcome, SparkError)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = evaluate(expr, *_subset(columns, nulls, ~failing))
    actual = _as_list(result)
    if tolerance:
        for a, e in zip(actual, expected, strict=True):
            if isinstance(e, float) and isinstance(a, float) and math.isfinite(e) and math.isfinite(a):
                assert math.isclose(a, e, rel_tol=tolerance, abs_tol=1e-300), (expr.to_text(), a, e)
            else:
                assert same_values([a], [e]), (expr.to_text(), a, e)
    else:
        assert same_values(actual, expected), (expr.to_text(), actual, expected)


def _subset(columns: dict, nulls: dict, rows: np.ndarray) -> tuple[dict, int, dict]:
    return {k: v[rows] for k, v in columns.items()}, int(rows.sum()), {k: v[rows] for k, v in nulls.items()}


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(well_typed(depth=4), expression_chunks())
def test_evaluate_matches_python_reference(expr: Expr, chunk) -> None:
    check_against_reference(expr, chunk)
    check_against_reference(parse_expression(expr.to_text()), chunk)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        st.builds(lambda f, a: Call(f, (a,)), st.sampled_from(TRANSCENDENTAL[:-1]), typed("number", 1)),
        st.builds(lambda a, b: Call("pow", (a, b)), typed("number", 1), typed("number", 1)),
        st.builds(lambda a, b: Call("log", (a, b)), typed("number", 1), typed("number", 1)),
    ),
    expression_chunks(),
)
def test_transcendental_functions_match_math_module(expr: Expr, chunk) -> None:
    # numpy and libm may differ in the last bits here, so results are compared with a tolerance.
    check_against_reference(expr, chunk, tolerance=1e-13)


# Every operator and function on its own, over columns cycling through boundary values.
_OPERANDS = {
    "integer": [N("a32"), N("a64"), L(0), L(-1), L(2**31 - 1), L(-(2**63), "int64"), L(None)],
    "number": [N("a32"), N("a64"), N("x32"), N("x64"), L(2.5), L(-0.0), L(math.nan), L(None)],
    "condition": [N("p"), N("q"), L(True), L(None)],
}
_SINGLE = {f"'{op}'": (lambda a, b, op=op: B(op, a, b), "nn") for op in ["+", "-", "*", "/", "%"]}
_SINGLE |= {f"'{op}'": (lambda a, b, op=op: B(op, a, b), "ii") for op in ["div", "&", "|", "^"]}
_SINGLE |= {
    f"'{op}'": (lambda a, b, op=op: B(op, a, b), "nn") for op in ["=", "<>", "<", "<=", ">", ">=", "<=>"]
}
_SINGLE |= {f"bool {op}": (lambda a, b, op=op: B(op, a, b), "cc") for op in ["=", "<", "and", "or"]}
_SINGLE |= {f"unary {op}": (lambda a, op=op: U(op, a), "n") for op in ["-", "+"]}
_SINGLE |= {"'~'": (lambda a: U("~", a), "i"), "NOT": (lambda a: U("not", a), "c")}
_SINGLE |= {f: (lambda a, f=f: C(f, a), "n") for f in ["abs", "floor", "ceil", "round", "sqrt", "isnan"]}
_SINGLE |= {
    f"CAST {t}": (lambda a, t=t: Cast(a, t), "n") for t in ["int32", "int64", "float32", "float64", "bool"]
}
_SINGLE |= {f"CAST bool {t}": (lambda a, t=t: Cast(a, t), "c") for t in ["int32", "float32"]}
_SINGLE |= {f: (lambda a, b, c, f=f: C(f, a, b, c), "nnn") for f in ["least", "greatest", "coalesce"]}
_SINGLE |= {f: (lambda a, b, f=f: C(f, a, b), "nn") for f in ["nanvl", "nullif", "try_add", "try_subtract"]}
_SINGLE |= {f: (lambda a, b, f=f: C(f, a, b), "nn") for f in ["try_multiply", "try_divide"]}
_SINGLE |= {
    "if": (lambda c, a, b: C("if", c, a, b), "cnn"),
    "IN": (lambda a, b, c: In(a, (b, c)), "nnn"),
    "BETWEEN": (lambda a, b, c: Between(a, b, c), "nnn"),
    "IS NULL": (lambda a: IsNull(a), "n"),
    "CASE": (lambda c, a, b: Case(((c, a),), b), "cnn"),
}
_KIND = {"n": "number", "i": "integer", "c": "condition"}


def _boundary_chunk(length: int = 29):
    """Columns cycling through boundary values (different cycle lengths mix them across rows)."""
    specials = {
        "a32": [0, 1, -1, 2, -3, 7, -7, 2**31 - 1, -(2**31), 46341, None],
        "a64": [0, 1, -1, 3, -7, 2**53 + 1, -(2**53) - 1, 2**63 - 1, -(2**63), 2**31, None, 3037000500],
        "x32": [0.0, -0.0, 0.5, -0.5, 1.5, -2.5, 2.0**31, math.nan, math.inf, -math.inf, None, 3.0],
        "x64": [0.5, -0.5, 2.5, -1.5, 0.0, -0.0, 3.0, math.nan, math.inf, -math.inf, 2.0**63, 1e300, None],
        "p": [True, False, None],
        "q": [True, True, False, None, False],
    }
    columns, nulls = {}, {}
    for name, values in specials.items():
        cells = [values[row % len(values)] for row in range(length)]
        nulls[name] = np.array([value is None for value in cells])
        dtype = {"int32": np.int32, "int64": np.int64, "float32": np.float32}.get(COLUMNS[name])
        dtype = dtype or (np.float64 if COLUMNS[name] == "float64" else np.bool_)
        columns[name] = np.array([0 if value is None else value for value in cells], dtype=dtype)
    return length, columns, nulls


@pytest.mark.parametrize("form", sorted(_SINGLE))
def test_each_operation_on_boundary_values(form: str) -> None:
    build, kinds = _SINGLE[form]
    pools = [_OPERANDS[_KIND[kind]] if len(kinds) < 3 else _OPERANDS[_KIND[kind]][:5] for kind in kinds]
    chunk = _boundary_chunk()
    for operands in itertools.product(*pools):
        check_against_reference(build(*operands), chunk)


@pytest.mark.parametrize("length", [0, 5])
@pytest.mark.parametrize(
    "text",
    [
        "CASE WHEN false AND CASE WHEN NULL < a32 THEN NULL < NULL END THEN 1 END",
        "CASE WHEN false AND CASE WHEN a32 > 0 THEN true ELSE p END THEN a64 ELSE 2 END",
        "true OR CASE WHEN a32 > 1 THEN q END",
    ],
)
def test_a_case_evaluated_for_no_cell_by_a_constant_short_circuit(text: str, length: int) -> None:
    """A CASE under ``false AND ...`` (or ``true OR ...``) is evaluated for no cell, with a
    constant mask of the cells evaluated: it still gives the reference's values (found by the
    hypothesis test above, which failed with a broadcasting error on an empty chunk)."""
    rng = np.random.default_rng(length)
    columns = {
        "a32": rng.integers(-3, 3, length).astype(np.int32),
        "a64": rng.integers(-3, 3, length).astype(np.int64),
        "x32": rng.random(length).astype(np.float32),
        "x64": rng.random(length),
        "p": rng.random(length) < 0.5,
        "q": rng.random(length) < 0.5,
    }
    nulls = {name: rng.random(length) < 0.3 for name in columns}
    check_against_reference(parse_expression(text), (length, columns, nulls))


@pytest.mark.parametrize("rows", [0, 3])
def test_coalesce_under_a_constant_false_and(rows: int) -> None:
    """Before: ``false AND NOT (coalesce(p) < coalesce(q))`` failed with numpy's "non-broadcastable
    output operand" (found by the Hypothesis test above on an empty chunk): coalesce narrowed a
    constant ``active`` flag in place, as CASE already did not."""
    columns = {"p": np.array([True, False, True][:rows]), "q": np.array([False, False, True][:rows])}
    nulls = {"p": np.array([False, True, False][:rows])}
    expr = parse_expression("false AND NOT (coalesce(p) < coalesce(q))")
    values = np.ma.getdata(evaluate(expr, columns, rows, nulls))
    assert values.shape == (rows,) and not values.any()
