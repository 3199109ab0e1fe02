"""Tests of the SciDB-style schema parser: golden inputs, error positions and round trips."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arrayviews.model.errors import ParseError
from arrayviews.model.schema import (
    UNBOUNDED_HIGH,
    ArraySchema,
    Attribute,
    Dimension,
    default_chunk_length,
)
from arrayviews.model.schema_parser import parse_schema
from arrayviews.model.types import ATTRIBUTE_TYPES


def schema(name: str, attributes: list[tuple], dimensions: list[tuple]) -> ArraySchema:
    return ArraySchema(
        name, tuple(Attribute(*a) for a in attributes), tuple(Dimension(*d) for d in dimensions)
    )


GOLDEN = [
    (
        "A<r:int64, s:float64>[i=1:6:2; j=1:8:2]",
        schema("A", [("r", "int64"), ("s", "float64")], [("i", 1, 6, 2), ("j", 1, 8, 2)]),
    ),
    (
        "A<r:int,s:int>[i=1,6,2,0;j=1,8,2,0]",
        schema("A", [("r", "int64"), ("s", "int64")], [("i", 1, 6, 2), ("j", 1, 8, 2)]),
    ),
    (
        "A<r:int,s:int>[i=1,6,2; j=1,8,2]",
        schema("A", [("r", "int64"), ("s", "int64")], [("i", 1, 6, 2), ("j", 1, 8, 2)]),
    ),
    (
        "A<r:int>[i=1,6,2,0, j=1,8,2,0]",
        schema("A", [("r", "int64")], [("i", 1, 6, 2), ("j", 1, 8, 2)]),
    ),
    (
        "A<r:int>[i=1:6:2, j=1:8:2]",
        schema("A", [("r", "int64")], [("i", 1, 6, 2), ("j", 1, 8, 2)]),
    ),
    (
        "A<r:int>[i=1:6,2,0; j=1:8,2,0]",  # classic SciDB: low:high,chunk,overlap
        schema("A", [("r", "int64")], [("i", 1, 6, 2), ("j", 1, 8, 2)]),
    ),
    ("A<r:int64>[i=1:6:2:0]", schema("A", [("r", "int64")], [("i", 1, 6, 2)])),
    ("A<r:int64>[i=0:*:100]", schema("A", [("r", "int64")], [("i", 0, UNBOUNDED_HIGH, 100)])),
    (
        "A<r:int64>[i=1:6; j=0:*]",
        schema(
            "A",
            [("r", "int64")],
            [
                ("i", 1, 6, default_chunk_length(6, 2)),
                ("j", 0, UNBOUNDED_HIGH, default_chunk_length(UNBOUNDED_HIGH + 1, 2)),
            ],
        ),
    ),
    ("A<r:int64>[i=1:6:*]", schema("A", [("r", "int64")], [("i", 1, 6, 6)])),
    ("A<r:int64>[i=-5:5:2]", schema("A", [("r", "int64")], [("i", -5, 5, 2)])),
    ("A<r:int64>[i=-9:-3:4]", schema("A", [("r", "int64")], [("i", -9, -3, 4)])),
    ("A<>[i=0:9:5]", schema("A", [], [("i", 0, 9, 5)])),
    (
        "A<a:double NULL, b:float not null, c:boolean Null, d:integer, e:int32 NOT  NULL>[i=0:9:5]",
        schema(
            "A",
            [("a", "float64", True), ("b", "float32"), ("c", "bool", True), ("d", "int64"), ("e", "int32")],
            [("i", 0, 9, 5)],
        ),
    ),
    (
        "  Grid_2 \n<\n  v : DOUBLE ,\n  w:INT32\n>\n[\n  x = -2 : 7 : 3 ;\n  y=0:0:1\n]\n",
        schema("Grid_2", [("v", "float64"), ("w", "int32")], [("x", -2, 7, 3), ("y", 0, 0, 1)]),
    ),
    (
        # keywords are still fine as names
        "A<null:int64, not:bool>[i=0:3:2]",
        schema("A", [("null", "int64"), ("not", "bool")], [("i", 0, 3, 2)]),
    ),
    (
        "A<r:int64>[a=0:1:1; b=0:1:1; c=0:1:1; d=0:1:1; e=0:1:1]",
        schema("A", [("r", "int64")], [(n, 0, 1, 1) for n in "abcde"]),
    ),
]


@pytest.mark.parametrize(("text", "expected"), GOLDEN, ids=[g[0] for g in GOLDEN])
def test_golden(text: str, expected: ArraySchema) -> None:
    assert parse_schema(text) == expected


def test_name_from_argument_when_text_has_none() -> None:
    assert parse_schema("<r:int64>[i=1:6:2]", name="B") == schema("B", [("r", "int64")], [("i", 1, 6, 2)])


def test_name_argument_wins_over_text() -> None:
    assert parse_schema("A<r:int64>[i=1:6:2]", name="B").name == "B"


def test_comma_form_equals_colon_form() -> None:
    colon = parse_schema("A<r:int64, s:int64>[i=1:6:2; j=1:8:2]")
    assert parse_schema("A<r:int,s:int>[i=1,6,2,0;j=1,8,2,0]") == colon
    assert parse_schema("A<r:int,s:int>[i=1,6,2;j=1,8,2]") == colon
    assert parse_schema("A<r:int,s:int>[i=1,6,2,0,j=1,8,2,0]") == colon


def test_parse_is_inverse_of_to_text_on_golden() -> None:
    for _, expected in GOLDEN:
        assert parse_schema(expected.to_text()) == expected


# text, line, column, a piece of the reason, expected terminals (None: not checked)
ERRORS = [
    ("", 1, 1, "schema text is empty", ("'<'", "identifier")),
    ("   \n  ", 1, 1, "schema text is empty", ("'<'", "identifier")),
    ("<r:int64>[i=1:6:2]", 1, 1, "schema needs an array name", ()),
    ("A<r:int64>[i=1:6", 1, 17, "unexpected end of input", ("','", "':'", "';'", "']'", "SCALE")),
    ("A<r:int64\n", 1, 10, "unexpected end of input", ("','", "'>'", "NOT", "NULL")),
    ("A<r:int64>[i=1:6:2] extra", 1, 21, "after the end of the schema", ("end of input",)),
    ("A<r:int64>[i=1:6:2];", 1, 20, "after the end of the schema", ("end of input",)),
    ("A<r:int64>[i=1:6:2] @", 1, 21, "after the end of the schema", ("end of input",)),
    ("A<r int64>[i=1:6:2]", 1, 5, "unexpected 'int64'", ("':'",)),
    ("A<r:int64>[i=1:6:2 j=1:2]", 1, 20, "unexpected 'j'", ("','", "':'", "';'", "']'", "SCALE")),
    ("A<r:int64>[i:1:6]", 1, 13, "unexpected ':'", ("'='",)),
    ("A<r:int64>[i=x:6]", 1, 14, "unexpected 'x'", ("integer",)),
    ("A<r:int64>[i=*:6]", 1, 14, "unexpected '*'", ("integer",)),
    ("A<r:int64>[i=1:6:2:0:0]", 1, 21, "unexpected ':'", ("','", "';'", "']'", "SCALE")),
    ("A<r:int64>[]", 1, 12, "unexpected ']'", ("identifier",)),
    ("A<r:int64>[i=1:6;]", 1, 18, "unexpected ']'", ("identifier",)),
    ("A<r:int64,>[i=1:6]", 1, 11, "unexpected '>'", ("identifier",)),
    ("A<r:int64 NOT>[i=1:6]", 1, 14, "unexpected '>'", ("NULL",)),
    ("A<r:int64>[i=1:6:2:x]", 1, 20, "unexpected 'x'", ("integer",)),
    ("A<r:int64>[i=1:6:2:*]", 1, 20, "unexpected '*'", ("integer",)),
    ("A<r:int64>(i=1:6)", 1, 11, "unexpected character '('", ("'['",)),
    ("A<r:in$t64>[i=1:6]", 1, 7, "unexpected character '$'", None),
    ("A<r:int64>\n[i=1:6;\n j=1:é]", 3, 6, "unexpected character 'é'", ("'*'", "integer")),
    # semantic errors
    ("A<r:int64>[i=1:6:2:1]", 1, 20, "overlap is not supported", ()),
    ("A<r:int64>[i=1,6,2,3]", 1, 20, "overlap is not supported", ()),
    ("A<r:int64>[i=1:6:2;\n  j=1:8:2:-1]", 2, 11, "overlap is not supported", ()),
    ("A<r:int64>[i=6:1:2]", 1, 16, "low 6 is greater than high 1", ()),
    ("A<r:int64>[i=0:9:0]", 1, 18, "chunk length must be at least 1", ()),
    ("A<r:int64>[i=0:9:-3]", 1, 18, "chunk length must be at least 1", ()),
    ("A<r:int64>[i=0:99999999999999999999:3]", 1, 16, "bounds must lie within", ()),
    ("A<r:int64>[i=-99999999999999999999:0:3]", 1, 14, "bounds must lie within", ()),
    ("A<r:strings>[i=0:9]", 1, 5, "unknown attribute type 'strings'", ()),
    ("A<r:int64,\n  s:texts NULL>[i=0:9]", 2, 5, "unknown attribute type 'texts'", ()),
    ("A<r:int64, r:float64>[i=0:9]", 1, 12, "name 'r' is used twice", ()),
    ("A<r:int64>[i=0:9; r=0:9]", 1, 19, "name 'r' is used twice", ()),
    ("A<r:int64>[i=0:9;\n    i=0:9]", 2, 5, "name 'i' is used twice", ()),
    ("A__B<r:int64>[i=0:9]", 1, 1, "double underscores are reserved", ()),
    ("A<r__x:int64>[i=0:9]", 1, 3, "double underscores are reserved", ()),
    ("A<r:int64>[_i__:0:9]", 1, 16, "unexpected ':'", ("'='",)),
    ("A<r:int64>[i__j=0:9]", 1, 12, "double underscores are reserved", ()),
    ("A<r:int64>[i=0:9:3000000000; j=0:9:3000000000]", 1, 11, "a chunk would hold", ()),
]


@pytest.mark.parametrize(("text", "line", "column", "reason", "expected"), ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(text: str, line: int, column: int, reason: str, expected: tuple[str, ...] | None) -> None:
    with pytest.raises(ParseError) as caught:
        parse_schema(text)
    error = caught.value
    assert (error.line, error.column) == (line, column), str(error)
    assert reason in error.reason
    assert error.text == text
    if expected is not None:
        assert error.expected == expected
    assert f"line {line}, column {column}" in str(error)


def test_invalid_name_argument_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="invalid array name 'b c'"):
        parse_schema("A<r:int64>[i=0:9]", name="b c")


def test_semantic_errors_are_reported_in_reading_order() -> None:
    # The unknown type comes before the bad dimension range, so it is the one reported.
    with pytest.raises(ParseError) as caught:
        parse_schema("A<r:bogus>[i=9:0]")
    assert (caught.value.line, caught.value.column) == (1, 5)


# -- round trips ---------------------------------------------------------------------------------

NAMES = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,5}", fullmatch=True).filter(lambda s: "__" not in s)


@st.composite
def dimensions(draw: st.DrawFn, name: str) -> Dimension:
    low = draw(st.one_of(st.integers(-1000, 1000), st.integers(-UNBOUNDED_HIGH, UNBOUNDED_HIGH)))
    high = draw(
        st.one_of(
            st.integers(low, low + 1000).filter(lambda h: h <= UNBOUNDED_HIGH),
            st.integers(low, UNBOUNDED_HIGH),
            st.just(UNBOUNDED_HIGH),
        )
    )
    return Dimension(name, low, high, draw(st.integers(1, 2**12)))


@st.composite
def schemas(draw: st.DrawFn) -> ArraySchema:
    ndim = draw(st.integers(1, 5))
    nattr = draw(st.integers(0, 4))
    # names of one array must differ in more than case (Spark compares column names without case)
    names = draw(st.lists(NAMES, min_size=ndim + nattr, max_size=ndim + nattr, unique_by=str.lower))
    attrs = [Attribute(n, draw(st.sampled_from(ATTRIBUTE_TYPES)), draw(st.booleans())) for n in names[:nattr]]
    dims = [draw(dimensions(n)) for n in names[nattr:]]
    return ArraySchema(draw(NAMES), tuple(attrs), tuple(dims))


@settings(max_examples=300, deadline=None)
@given(schemas())
def test_round_trip(s: ArraySchema) -> None:
    assert parse_schema(s.to_text()) == s


SPACE = st.sampled_from(["", " ", "\n", "\t", "  \n  "])
GAP = st.sampled_from([" ", "\n", "\t", " \n "])  # where a separator is required


@st.composite
def spelled(draw: st.DrawFn, s: ArraySchema) -> str:
    """A free spelling of ``s``: random whitespace, ':' or ',' forms, ';' or ',' between dimensions."""
    tokens: list[str] = [s.name, "<"]
    for i, a in enumerate(s.attributes):
        tokens += ([","] if i else []) + [a.name, ":", a.type]
        if a.nullable:
            tokens += [draw(GAP), "NULL"]
        elif draw(st.booleans()):
            tokens += [draw(GAP), draw(st.sampled_from(["NOT", "not"])), draw(GAP), "NULL"]
    tokens += [">", "["]
    for i, d in enumerate(s.dimensions):
        sep = draw(st.sampled_from([":", ","]))
        high = "*" if d.unbounded else str(d.high)
        parts = [str(d.low), high, str(d.chunk_length)] + (["0"] if draw(st.booleans()) else [])
        tokens += ([draw(st.sampled_from([";", ","]))] if i else []) + [d.name, "="]
        for k, part in enumerate(parts):
            tokens += ([sep] if k else []) + [part]
    tokens.append("]")
    return "".join(t if t.isspace() else t + draw(SPACE) for t in tokens)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_free_spelling_parses_to_the_same_schema(data: st.DataObject) -> None:
    s = data.draw(schemas())
    assert parse_schema(data.draw(spelled(s))) == s
