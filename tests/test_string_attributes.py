"""String attributes: variable-width chunk payloads, every way in and out, the operators that make
sense for text (against plain-Python references and Spark itself), and the refusals by name; plus
uint64 values above 2**63 through statements."""

from __future__ import annotations

import re
from decimal import Decimal

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import arrayviews
from arrayviews.kernels.evaluate import evaluate_predicate
from arrayviews.model.errors import ArrayViewsError, ParseError, ValidationError
from arrayviews.model.expression_parser import parse_expression
from arrayviews.model.expression_tree import Literal, string_literal_text
from arrayviews.model.schema import ArraySchema
from arrayviews.model.schema_parser import parse_schema
from arrayviews.model.shapes import L1
from arrayviews.storage import codec, layout
from arrayviews.storage.assemble import encode_sorted, sort_cells

# Text with what breaks naive codecs: empty strings, NUL, quotes, backslashes, line breaks, non-BMP
# characters and long runs.
TEXT = st.one_of(
    st.text(max_size=12),
    st.text(alphabet="\x00'\"\\\n%_aé\U0001f389", max_size=8),
    # valid Unicode only: a lone surrogate is not text UTF-8 can hold
    st.builds(lambda c, n: c * n, st.characters(codec="utf-8"), st.integers(100, 2000)),
)
MAYBE_TEXT = st.one_of(st.none(), TEXT)


def utf8_min(values: list[str]) -> str:
    return min(values, key=lambda v: v.encode("utf-8"))


def utf8_max(values: list[str]) -> str:
    return max(values, key=lambda v: v.encode("utf-8"))


@pytest.fixture(params=["local", "spark"])
def both(request, spark, tmp_path):
    """A database whose operators run in-process or on Spark (the two executors must agree)."""
    return arrayviews.connect(str(tmp_path / request.param), spark=spark, execution=request.param)


# -- the codec ------------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(st.lists(MAYBE_TEXT, min_size=1, max_size=20), st.data())
def test_codec_round_trips_any_text_dense_and_sparse(values: list[str | None], data) -> None:
    schema = parse_schema("A<s:string NULL>[i=0:29:10]")
    n = len(values)
    coords = np.array(sorted(data.draw(st.sets(st.integers(0, 29), min_size=n, max_size=n))), dtype=np.int64)
    column = np.array(["" if v is None else v for v in values], dtype=object)
    nulls = np.array([v is None for v in values])
    cells = sort_cells(coords[:, None], {"s": column}, {"s": nulls}, schema)
    table = pa.concat_tables(encode_sorted(cells, schema, 1))
    decoded = layout.fragments_to_cells(table, schema).sort_by("i")
    assert decoded.column("i").to_pylist() == coords.tolist()
    assert decoded.column("s").to_pylist() == values
    # the chunk statistics are the smallest and largest by UTF-8 bytes of each chunk's non-null values
    for row in table.to_pylist():
        chunk = row[layout.chunk_column("i")]
        present = [v for c, v in zip(coords, values, strict=True) if c // 10 == chunk and v is not None]
        assert row[layout.min_column("s")] == (utf8_min(present) if present else None)
        assert row[layout.max_column("s")] == (utf8_max(present) if present else None)
    # one fragment at a time too (the dense path scatters into a box of empty strings)
    for fragment in layout.iter_fragments(table, schema):
        for offset, value in zip(fragment.offsets, fragment.values["s"], strict=True):
            expected = values[coords.tolist().index(chunk_start(fragment.chunk) + offset)]
            assert value == ("" if expected is None else expected)


def chunk_start(chunk: tuple[int, ...]) -> int:
    return chunk[0] * 10


def test_payload_is_the_arrow_string_layout() -> None:
    payload = codec.text_bytes(np.array(["", "ab", "é"], dtype=object))
    offsets = np.frombuffer(payload[:16].tobytes(), dtype="<i4")
    assert offsets.tolist() == [0, 0, 2, 4]
    assert payload[16:].tobytes() == "abé".encode()
    assert codec.text_values(payload, 3).tolist() == ["", "ab", "é"]


# -- round trips through storage -------------------------------------------------------------------
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(MAYBE_TEXT, min_size=1, max_size=12))
def test_any_text_round_trips_through_storage(db, values: list[str | None]) -> None:
    name = f"T{len(db.arrays())}"
    A = db.create_array(f"{name}<s:string NULL, k:int32>[i=0:15:4]")
    A.insert({"i": np.arange(len(values)), "s": np.array(values, dtype=object), "k": np.arange(len(values))})
    cells = A.to_arrow()
    assert cells.schema.field("s").type == pa.string()
    assert cells.column("s").to_pylist() == values
    dense = A.to_numpy("s", masked=True)
    assert dense.dtype == object
    assert [None if m else v for v, m in zip(dense.data, dense.mask, strict=True)][: len(values)] == values
    stats = A.chunks()
    present = [v for v in values if v is not None]
    if present:
        assert stats["s_min"].dropna().tolist() and min(stats["s_min"].dropna(), key=str.encode) == utf8_min(
            present
        )
        assert max(stats["s_max"].dropna(), key=str.encode) == utf8_max(present)


def test_every_input_form_and_every_read(db, spark) -> None:
    A = db.create_array("A<s:string NULL, v:float64>[i=0:11:4]")
    assert A.attrs == {"s": "string", "v": "float64"}
    A.insert(pd.DataFrame({"i": [0, 1], "s": ["it's", None], "v": [1.0, 2.0]}))
    A.insert(pa.table({"i": pa.array([2, 3]), "s": pa.array(["ünï", "\x00"]), "v": pa.array([3.0, 4.0])}))
    A.insert({"i": np.array([4, 5]), "s": np.array(["fixed", "width"]), "v": np.array([5.0, 6.0])})
    A.insert({"i": np.array([6]), "s": np.array(["\U0001f389"], dtype=object), "v": np.array([7.0])})
    A.insert(spark.createDataFrame([(7, "from spark", 8.0), (8, None, 9.0)], "i long, s string, v double"))
    db.sql(
        "INSERT INTO A VALUES (9, 'quote''s \\\\ back', 10.0), (10, \"dq\\\"\", 11.0), (11, '\\u00e9\\n', 12.0)"
    )
    expected = ["it's", None, "ünï", "\x00", "fixed", "width", "\U0001f389", "from spark", None]
    expected += ["quote's \\ back", 'dq"', "é\n"]
    assert A.to_arrow().column("s").to_pylist() == expected
    frame = A.to_pandas()
    assert [None if pd.isna(v) else v for v in frame["s"]] == expected
    assert [None if v is None else v for v in A.to_numpy("s")] == expected
    assert A.to_numpy("s", fill="?")[1] == "?"
    assert A[2:4].to_arrow().column("s").to_pylist() == expected[2:4]
    dataset = A.to_xarray()
    assert dataset["s"].dtype == object  # xarray's missing value (NaN) where a cell is empty
    assert [None if pd.isna(v) else v for v in dataset["s"].values.tolist()] == expected
    S = db.create_array("S<s:string>[i=0:2:2]")
    S.write_dense(np.array(["x", "", "z"]))
    assert np.asarray(S).tolist() == ["x", "", "z"]
    assert db.from_xarray(S.to_xarray(), "S2").attrs == {"s": "string"}
    spark_rows = A.to_spark().orderBy("i").select("s").collect()
    assert [r.s for r in spark_rows] == expected


def test_wrong_values_for_a_string_attribute_are_refused_by_name(db) -> None:
    A = db.create_array("A<s:string>[i=0:3:2]")
    with pytest.raises(
        ValidationError, match="column s: values of type int64 cannot be stored in attribute s"
    ):
        A.insert({"i": np.array([0]), "s": np.array([5])})
    with pytest.raises(ValidationError, match=r"attribute s: 5 is not a string \(block index \(1,\)\)"):
        A.write_dense(np.array(["a", 5, "c"], dtype=object))
    with pytest.raises(ValidationError, match=r"attribute s: 3 is not a string .* at line 2, column 16"):
        db.sql("INSERT INTO A VALUES\n (0, 'a'), (1, 3)")
    with pytest.raises(ValidationError, match="null in row 0"):
        A.insert({"i": pa.array([0]), "s": pa.array([None], pa.string())})
    assert A.count() == 0 and A.version == 0


# -- operators against plain-Python references, on both executors ---------------------------------
WORDS = ["", "a", "ab", "a_b", "A", "b", "é", "zz", "it's", "a\x00", "\U0001f389", "%", "ba"]


def random_cells(seed: int, count: int = 40) -> tuple[np.ndarray, list[str | None], np.ndarray]:
    rng = np.random.default_rng(seed)
    coords = rng.choice(16 * 6, size=count, replace=False)
    words = [None if rng.random() < 0.15 else WORDS[k] for k in rng.integers(0, len(WORDS), count)]
    return np.stack(np.unravel_index(coords, (16, 6)), axis=1), words, rng.integers(-5, 5, count)


def load(db, name: str, seed: int):
    coords, words, numbers = random_cells(seed)
    A = db.create_array(f"{name}<s:string NULL, x:int64>[i=0:15:4; j=0:5:3]")
    A.insert({"i": coords[:, 0], "j": coords[:, 1], "s": np.array(words, dtype=object), "x": numbers})
    cells = {(int(c[0]), int(c[1])): (w, int(n)) for c, w, n in zip(coords, words, numbers, strict=True)}
    return A, cells


def rows(array, attribute: str) -> dict:
    table = array.to_arrow()
    keys = zip(table.column("i").to_pylist(), table.column("j").to_pylist(), strict=True)
    return dict(zip(keys, table.column(attribute).to_pylist(), strict=True))


def like(value: str, pattern: str) -> bool:
    """A plain regular-expression reference for LIKE with backslash escapes."""
    parts, k = [], 0
    while k < len(pattern):
        if pattern[k] == "\\":
            parts.append(re.escape(pattern[k + 1]))
            k += 2
            continue
        parts.append({"%": ".*", "_": "."}.get(pattern[k], re.escape(pattern[k])))
        k += 1
    return re.fullmatch("".join(parts), value, flags=re.S) is not None


PREDICATES = [
    ("s = 'a'", lambda s, x: s == "a"),
    ("s <> 'a'", lambda s, x: s != "a"),
    ("s < 'b'", lambda s, x: s.encode() < b"b"),
    ("s > 'a' AND x > 0", lambda s, x: s.encode() > b"a" and x > 0),
    ("s >= 'é'", lambda s, x: s.encode() >= "é".encode()),
    ("s LIKE 'a%'", lambda s, x: like(s, "a%")),
    ("s LIKE '_'", lambda s, x: like(s, "_")),
    ("s LIKE 'a\\\\_b'", lambda s, x: like(s, "a\\_b")),
    ("length(s) = 2", lambda s, x: len(s) == 2),
    ("s IN ('ab', 'zz', 'it\\'s')", lambda s, x: s in ("ab", "zz", "it's")),
    ("s BETWEEN 'a' AND 'b'", lambda s, x: b"a" <= s.encode() <= b"b"),
]


@pytest.mark.parametrize(("text", "reference"), PREDICATES, ids=[p[0] for p in PREDICATES])
def test_filter_on_strings_matches_python_and_spark(spark, text: str, reference) -> None:
    coords, words, numbers = random_cells(7, 60)
    expected = [w is not None and reference(w, int(n)) for w, n in zip(words, numbers, strict=True)]
    column = np.array(["" if w is None else w for w in words], dtype=object)
    nulls = {"s": np.array([w is None for w in words])}
    expr = parse_expression(text)
    ours = evaluate_predicate(expr, {"s": column, "x": numbers}, len(words), nulls)
    assert ours.tolist() == expected
    frame = spark.createDataFrame(
        [(k, w, int(n)) for k, (w, n) in enumerate(zip(words, numbers, strict=True))],
        "k int, s string, x long",
    )
    kept = {r.k for r in frame.filter(expr.to_text()).select("k").collect()}
    assert kept == {k for k, e in enumerate(expected) if e}


@settings(max_examples=100, deadline=None)
@given(TEXT)
def test_string_literals_print_as_spark_reads_them(value: str) -> None:
    literal = Literal(value)
    assert parse_expression(literal.to_text()) == literal
    assert parse_expression(f"s = {string_literal_text(value)}").children()[1].value == value


def test_string_literals_against_spark(spark) -> None:
    values = ["", "it's", "\\", "a\\%b", "\x00x", "line\nbreak\ttab\r", '"', "é\U0001f389"]
    printed = ", ".join(f"{Literal(v).to_text()} AS c{k}" for k, v in enumerate(values))
    assert list(spark.sql(f"SELECT {printed}").collect()[0]) == values


def test_operators_and_aggregates_carry_strings_on_both_executors(both) -> None:
    A, cells = load(both, "A", 3)
    B, other = load(both, "B", 4)
    kept = A.filter("s LIKE '%a%' OR length(s) > 2")
    assert rows(kept, "s") == {
        c: w for c, (w, _) in cells.items() if w is not None and ("a" in w or len(w) > 2)
    }
    assert kept.schema.attribute("s").type == "string"
    assert rows(A.project("s"), "s") == {c: w for c, (w, _) in cells.items()}
    assert rows(A[4:9, 1:4], "s") == {c: w for c, (w, _) in cells.items() if 4 <= c[0] < 9 and 1 <= c[1] < 4}
    joined = A.join(B.apply("t", "s").project("t"))
    expected = {c: (w, other[c][0]) for c, (w, _) in cells.items() if c in other}
    got_s, got_t = rows(joined, "s"), rows(joined, "t")
    assert {c: (got_s[c], got_t[c]) for c in got_s} == expected
    applied = A.apply("u", "coalesce(s, 'none')")
    assert rows(applied, "u") == {c: "none" if w is None else w for c, (w, _) in cells.items()}
    lengths = A.apply("n", "length(s)")
    assert rows(lengths, "n") == {c: None if w is None else len(w) for c, (w, _) in cells.items()}
    check_count_min_max(A, cells)


def check_count_min_max(A, cells: dict) -> None:
    whole = A.aggregate("count(s) as n", "min(s) as lo", "max(s) as hi").to_arrow().to_pylist()[0]
    present = [w for w, _ in cells.values() if w is not None]
    assert (whole["n"], whole["lo"], whole["hi"]) == (len(present), utf8_min(present), utf8_max(present))
    blocks = A.regrid([4, 3], "count(*) as cells", "min(s) as lo", "max(s) as hi").to_arrow().to_pylist()
    for block in blocks:
        members = [w for c, (w, _) in cells.items() if c[0] // 4 == block["i"] and c[1] // 3 == block["j"]]
        values = [w for w in members if w is not None]
        assert block["cells"] == len(members)
        assert block["lo"] == (utf8_min(values) if values else None)
        assert block["hi"] == (utf8_max(values) if values else None)
    by_row = A.aggregate("max(s) as hi", by=["i"]).to_arrow().to_pylist()
    for group in by_row:
        values = [w for c, (w, _) in cells.items() if c[0] == group["i"] and w is not None]
        assert group["hi"] == (utf8_max(values) if values else None)


def test_similarity_join_carries_strings(db) -> None:
    A, cells = load(db, "A", 6)
    B, other = load(db, "B", 8)
    join = db.similarity_join(A.project("s"), B.project("s"), L1(1, 2))
    materialized = join.materialize()
    dims, names = materialized.schema.dimension_names, materialized.schema.attribute_names
    got = {tuple(r[d] for d in dims): (r[names[0]], r[names[1]]) for r in materialized.to_arrow().to_pylist()}
    expected = {
        (*c, *d): (w, v)
        for c, (w, _) in cells.items()
        for d, (v, _) in other.items()
        if abs(c[0] - d[0]) + abs(c[1] - d[1]) <= 1
    }
    assert got == expected
    counts = join.aggregate("count(*) as n").to_arrow().to_pylist()
    assert {(r["i"], r["j"]): r["n"] for r in counts} == {
        c: sum(1 for d in other if abs(c[0] - d[0]) + abs(c[1] - d[1]) <= 1)
        for c in cells
        if any(abs(c[0] - d[0]) + abs(c[1] - d[1]) <= 1 for d in other)
    }


# -- refusals ------------------------------------------------------------------------------------
def test_arithmetic_on_strings_is_refused_by_name(db) -> None:
    A, _ = load(db, "A", 9)
    for run, message in [
        (
            lambda: A.aggregate("sum(s)"),
            "array A, attribute s (string): sum(s) does not apply to string values",
        ),
        (lambda: A.regrid([2, 2], "avg(s)"), "array A, attribute s (string): avg(s) does not apply"),
        (lambda: A.aggregate("var(s)"), "array A, attribute s (string): var(s) does not apply"),
        (lambda: A.aggregate("stdev(s)"), "array A, attribute s (string): stdev(s) does not apply"),
        (lambda: A.window([1, 1, 1, 1], "max(s)"), "array A, attribute s (string): max(s) in a window"),
        (lambda: A.window([1, 1, 1, 1], "count(s)"), "array A, attribute s (string): count(s) in a window"),
        (lambda: A.filter("s > 1"), "cannot compare STRING with INT"),
        (lambda: A.apply("t", "s + 1"), "'+' needs a number, got STRING"),
        (lambda: A.filter("s LIKE x"), "needs a quoted pattern"),
        (lambda: A.filter("s LIKE 'a\\\\b'"), "the escape character may not precede 'b'"),
    ]:
        with pytest.raises(ArrayViewsError, match=re.escape(message)):
            run().to_pandas()


def test_similarity_sums_over_strings_are_refused_by_name(db) -> None:
    from arrayviews.views.definition import similarity

    ball = L1
    A, _ = load(db, "A", 10)
    message = "array A, attribute s (string): {}(right.s) does not apply to string values in similarity"
    with pytest.raises(ArrayViewsError, match=re.escape(message.format("sum"))):
        db.similarity_join(A, A, ball(1, 2)).aggregate("sum(right.s) as total").to_pandas()
    with pytest.raises(ArrayViewsError, match=re.escape(message.format("avg"))):
        db.create_view("V", similarity("A", "A", ball(1, 2), ["avg(right.s) as mean"]))
    assert "V" not in db.views()


# -- uint64 beyond 2**63 through statements -------------------------------------------------------
def test_uint64_values_above_2_63_round_trip_through_statements(db) -> None:
    top = 2**64 - 1
    db.sql("CREATE ARRAY U <u:uint64, n:int64> [i=0:3:2]")
    db.sql(f"INSERT INTO U VALUES (0, {top}, 1), (1, {2**63}, 2), (2, {2**63 - 1}, 3), (3, 0, 4)")
    cells = db.array("U").to_pandas()
    assert cells["u"].dtype == np.uint64
    assert [int(v) for v in cells["u"]] == [top, 2**63, 2**63 - 1, 0]
    selected = db.sql("SELECT * FROM U")
    assert [int(v) for v in selected.to_pandas()["u"]] == [top, 2**63, 2**63 - 1, 0]
    stats = db.array("U").chunks()
    assert int(stats["u_max"].max()) == top
    with pytest.raises(
        ValidationError, match=rf"attribute n: {top} is outside the int64 range .* at line 2, column 12"
    ):
        db.sql(f"INSERT INTO U VALUES\n    (3, 1, {top})")
    with pytest.raises(
        ValidationError, match=r"attribute u: -1 is outside the uint64 range 0\.\.18446744073709551615"
    ):
        db.sql("INSERT INTO U (i, n, u) VALUES (3, 1, -1)")
    with pytest.raises(ParseError, match="outside the int64 and uint64 ranges at line 1, column 26"):
        db.sql(f"INSERT INTO U VALUES (3, {top + 1}, 1)")
    assert db.array("U").count() == 4


def test_string_type_names(db) -> None:
    for spelling in ("string", "str", "text", "varchar", "utf8"):
        schema: ArraySchema = parse_schema(f"A<s:{spelling}>[i=0:1:2]")
        assert schema.attribute("s").type == "string"


UINT64_PREDICATES = [
    ("u = 18446744073709551615", lambda u, n: u == 2**64 - 1),
    ("u > 9223372036854775807", lambda u, n: u > 2**63 - 1),
    ("u >= 9223372036854775808", lambda u, n: u >= 2**63),
    ("u < 5", lambda u, n: u < 5),
    ("u > -1", lambda u, n: u > -1),
    ("u <> n", lambda u, n: u != n),
    ("u <= n OR u = 0", lambda u, n: u <= n or u == 0),
]


@pytest.mark.parametrize(("text", "reference"), UINT64_PREDICATES, ids=[p[0] for p in UINT64_PREDICATES])
def test_uint64_comparisons_are_exact_against_python_and_spark(spark, text: str, reference) -> None:
    us = [2**64 - 1, 2**64 - 2, 2**63, 2**63 - 1, 2**53 + 1, 5, 0, 4]
    ns = [-1, 2**63 - 1, 2**63 - 1, 2**63 - 1, 2**53, 5, -(2**63), 3]
    expected = [reference(u, n) for u, n in zip(us, ns, strict=True)]
    expr = parse_expression(text)
    ours = evaluate_predicate(expr, {"u": np.array(us, np.uint64), "n": np.array(ns, np.int64)}, len(us))
    assert ours.tolist() == expected
    frame = spark.createDataFrame(
        [(k, Decimal(u), n) for k, (u, n) in enumerate(zip(us, ns, strict=True))],
        "k int, u decimal(20,0), n long",
    )
    kept = {r.k for r in frame.filter(expr.to_text()).select("k").collect()}
    assert kept == {k for k, e in enumerate(expected) if e}


def test_uint64_filters_through_statements_and_refusals(db) -> None:
    db.sql("CREATE ARRAY U <u:uint64> [i=0:3:2]")
    db.sql(f"INSERT INTO U VALUES (0, {2**64 - 1}), (1, {2**63}), (2, 7), (3, 0)")
    kept = db.sql("SELECT * FROM U WHERE u > 9223372036854775807")
    assert [int(v) for v in kept.to_pandas()["u"]] == [2**64 - 1, 2**63]
    assert kept.schema.attribute("u").type == "uint64"
    U = db.array("U")
    for run, message in [
        (lambda: U.filter("u > 1.5"), "cannot compare UINT64 with DOUBLE"),
        (lambda: U.apply("v", "u + 1"), "'+' needs a number, got UINT64"),
        (lambda: U.filter("u IN (1, 2)"), "cannot mix UINT64, INT"),
        (lambda: U.filter("u > 18446744073709551616"), "outside the BIGINT range"),
    ]:
        with pytest.raises(ArrayViewsError, match=re.escape(message)):
            run().to_pandas()


def test_a_lone_surrogate_is_refused_naming_column_and_row(tmp_path, spark) -> None:
    """A Python string holding a lone surrogate is not Unicode text: a clear error, nothing written
    (before: a raw UnicodeDecodeError from inside pyarrow)."""
    from arrayviews.model.errors import ValidationError

    db = arrayviews.connect(str(tmp_path / "w"), spark=spark, execution="local")
    array = db.create_array("s<name:string>[i=0:9:5]")
    with pytest.raises(ValidationError, match=r"column name, row 1: .*lone surrogate"):
        array.insert({"i": [1, 2], "name": ["fine", "\ud800x"]})
    assert array.count() == 0
