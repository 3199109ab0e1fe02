"""The statements of uncertain arrays (issue 12) in the one statement language.

Parser and printer (no Spark): the nodes behind the texts, print -> parse round trips of every new
statement (hypothesis), and error positions checked against where the bad text sits (found with
plain string search). Executor (Spark fixtures): CREATE / INSERT / LOAD, the probabilistic Subarray
and Structure-Join run as statements and checked against the brute-force references of
tests/test_uncertain.py (every tuple or pair integrated on its own with scipy), EXPLAIN against
Prop. 3.1 worked out by hand, and SHOW / DROP of the "uncertain array" kind.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from arrayviews.language import syntax as ast
from arrayviews.language.parser import parse
from arrayviews.language.printer import script_text, to_text
from arrayviews.model.errors import NotFoundError, ParseError, SchemaError, ValidationError
from arrayviews.model.schema import Dimension
from arrayviews.model.types import ATTRIBUTE_TYPES
from arrayviews.model.uncertain import UncertainAttribute, UncertainSchema
from arrayviews.model.uncertain_schema_parser import parse_uncertain_schema
from test_uncertain import catalog, check_join, check_result, interval, join_reference

SCHEMA = "<flux:gaussian, mag:float32>[x=0:59:8; y=0:39:8]"
U = ast.ArrayName("U")


# -- parsing: the nodes behind the texts ------------------------------------------------------------
def test_create_uncertain_array_nodes() -> None:
    sky, w, mean = parse(
        "CREATE UNCERTAIN ARRAY sky <mag:float64, flux:gaussian, size:uniform> [x=0:511:16; y=0:511:16; corr(x, y)];\n"
        "create uncertain array W <v:int64 NULL>[x=0:99, y=0:9] store multiple step (2, 0) sigmas 4.5\n"
        "  workload (5, 5), (50.5, 2) threshold 0.25;\n"
        "CREATE UNCERTAIN ARRAY M <> [t=0:9:5] STORE MEAN SIGMAS 2"
    )
    schema = parse_uncertain_schema(
        "sky<mag:float64, flux:gaussian, size:uniform>[x=0:511:16; y=0:511:16; corr(x, y)]"
    )
    assert sky == ast.CreateUncertainArray(schema, "store-multiple", "auto", 3.0, None)
    assert w.schema == UncertainSchema(
        "W",
        (UncertainAttribute("v", "exact", "int64", True),),
        (Dimension("x", 0, 99, 64), Dimension("y", 0, 9, 10)),
    )
    assert (w.scheme, w.step, w.sigmas) == ("store-multiple", (2, 0), 4.5)
    assert (w.workload, w.workload_threshold) == (((5.0, 5.0), (50.5, 2.0)), 0.25)
    assert (mean.scheme, mean.step, mean.sigmas, mean.workload) == ("store-mean", None, 2.0, None)
    # one step for every dimension
    (one,) = parse("CREATE UNCERTAIN ARRAY U <>[x=0:9; y=0:9; z=0:9] STORE MULTIPLE STEP 2")
    assert one.step == (2, 2, 2)


def test_operator_and_insert_nodes() -> None:
    sub, rtree, join, options, explain, insert = parse(
        "SELECT * FROM subarray(U, 10, 0, 19, 4, THRESHOLD 0.9);"
        "select * from Subarray(U, -1, 2, threshold 1, method RTree);"
        "SELECT * FROM structure_join(U, W, 2, 0.5);"
        "SELECT * FROM structure_join(U, W, 1e-1, .5, OUTER left, engine LOCAL, METHOD index);"
        "EXPLAIN SELECT * FROM subarray(U, 1, 2, THRESHOLD 0.5);"
        "INSERT INTO U (id, x, x_sigma) VALUES (1, 2.5, 0), (2, 3, 0.25)"
    )
    assert sub == ast.Select(ast.ProbabilisticSubarray(U, (10, 0), (19, 4), 0.9))
    assert rtree.source == ast.ProbabilisticSubarray(U, (-1,), (2,), 1.0, "rtree")
    assert join.source == ast.StructureJoin(U, ast.ArrayName("W"), 2.0, 0.5, "sbj", "auto", "auto")
    assert options.source == ast.StructureJoin(U, ast.ArrayName("W"), 0.1, 0.5, "index", "local", "left")
    assert explain == ast.Explain(ast.Select(ast.ProbabilisticSubarray(U, (1,), (2,), 0.5)))
    assert insert == ast.Insert("U", ((1, 2.5, 0), (2, 3, 0.25)), ("id", "x", "x_sigma"))
    # a plain subarray stays the array operator
    (plain,) = parse("SELECT * FROM subarray(U, 1, 2)")
    assert plain.source == ast.Subarray(U, (1,), (2,))


def test_new_keywords_are_still_names() -> None:
    create, select, insert = parse(
        "CREATE UNCERTAIN ARRAY threshold <step:gaussian> [store=0:9; sigmas=0:9];"
        "SELECT * FROM subarray(threshold, 1, 2, 3, 4, THRESHOLD 0.5);"
        "INSERT INTO uncertain (workload, step) VALUES (1, 2)"
    )
    assert create.name == "threshold" and create.schema.dimension_names == ("store", "sigmas")
    assert select.source.source == ast.ArrayName("threshold")
    assert insert.columns == ("workload", "step")


# -- round trips ------------------------------------------------------------------------------------
_identifiers = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,5}", fullmatch=True).filter(lambda n: "__" not in n)
_keywords = st.sampled_from(
    ["threshold", "STEP", "store", "sigmas", "workload", "uncertain", "values", "method"]
)
_names = st.one_of(_identifiers, _keywords)
_probabilities = st.floats(min_value=0.0, max_value=1.0, exclude_min=True)
_positive = st.floats(min_value=0.0, exclude_min=True, allow_infinity=False)


@st.composite
def uncertain_schemas(draw) -> UncertainSchema:
    names = draw(st.lists(_names, min_size=1, max_size=6, unique_by=str.lower))
    ndim = draw(st.integers(1, min(3, len(names))))
    dimensions = []
    for name in names[:ndim]:
        low = draw(st.integers(-1000, 1000))
        high = draw(st.integers(low, low + 1000))
        dimensions.append(Dimension(name, low, high, draw(st.integers(1, min(high - low + 1, 100)))))
    attributes = []
    for name in names[ndim:]:
        kind = draw(st.sampled_from(["exact", "gaussian", "uniform"]))
        if kind == "exact":
            attributes.append(
                UncertainAttribute(
                    name,
                    kind,
                    draw(st.sampled_from(ATTRIBUTE_TYPES)),
                    draw(st.booleans()),
                )
            )
        else:
            attributes.append(UncertainAttribute(name, kind))
    pairs = ()
    if ndim >= 2 and draw(st.booleans()):
        pairs = ((names[0], names[1]),)
    try:
        return UncertainSchema(draw(_names), tuple(attributes), tuple(dimensions), pairs)
    except SchemaError:  # column names that clash (x and x_sigma, say)
        assume(False)


@st.composite
def create_statements(draw) -> ast.CreateUncertainArray:
    schema = draw(uncertain_schemas())
    scheme = draw(st.sampled_from(["store-all", "store-mean", "store-multiple"]))
    step = None
    if scheme == "store-multiple":
        step = draw(
            st.one_of(
                st.just("auto"),
                st.integers(0, 2**40),
                st.lists(st.integers(0, 2**40), min_size=schema.ndim, max_size=schema.ndim).map(tuple),
            )
        )
    workload = draw(
        st.none()
        | st.lists(
            st.lists(_positive, min_size=schema.ndim, max_size=schema.ndim).map(tuple), min_size=1, max_size=3
        ).map(tuple)
    )
    threshold = 0.9 if workload is None else draw(_probabilities)
    return ast.CreateUncertainArray(schema, scheme, step, draw(_positive), workload, threshold)


_coordinates = st.integers(-(2**63), 2**63 - 1)
subarrays = st.integers(1, 3).flatmap(
    lambda d: st.builds(
        ast.ProbabilisticSubarray,
        _names.map(ast.ArrayName),
        st.lists(_coordinates, min_size=d, max_size=d).map(tuple),
        st.lists(_coordinates, min_size=d, max_size=d).map(tuple),
        _probabilities,
        st.sampled_from(ast.SUBARRAY_METHODS),
    )
)
joins = st.builds(
    ast.StructureJoin,
    _names.map(ast.ArrayName),
    _names.map(ast.ArrayName),
    _positive,
    _probabilities,
    st.sampled_from(ast.JOIN_METHODS),
    st.sampled_from(ast.JOIN_ENGINES),
    st.sampled_from(ast.JOIN_OUTER),
)
_values = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=True, allow_infinity=True)
)
inserts = st.lists(_names, min_size=1, max_size=4, unique=True).flatmap(
    lambda columns: st.builds(
        ast.Insert,
        _names,
        st.lists(
            st.lists(_values, min_size=len(columns), max_size=len(columns)).map(tuple), min_size=1, max_size=3
        ).map(tuple),
        st.just(tuple(columns)),
    )
)
statements = st.one_of(
    create_statements(),
    st.one_of(subarrays, joins).map(ast.Select),
    st.one_of(subarrays, joins).map(lambda s: ast.Explain(ast.Select(s))),
    inserts,
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)
@given(statements)
def test_printed_uncertain_statements_parse_back(statement: ast.Statement) -> None:
    printed = to_text(statement)
    assert parse(printed) == [statement], printed
    assert parse(printed + ";") == [statement]
    assert to_text(parse(printed)[0]) == printed


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)
@given(st.lists(statements, min_size=1, max_size=4))
def test_printed_uncertain_scripts_parse_back(items: list[ast.Statement]) -> None:
    assert parse(script_text(items)) == items


# -- errors at their place --------------------------------------------------------------------------
def _position(text: str, needle: str) -> tuple[int, int]:
    """1-based line and column of the last occurrence of ``needle`` in ``text`` (plain string search)."""
    offset = text.rindex(needle)
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(
        [
            ("SELECT * FROM subarray(U, 0, 9, THRESHOLD {bad})", "THRESHOLD {bad}", "THRESHOLD"),
            ("SELECT * FROM structure_join(A, B, 1, {bad})", "{bad})", "threshold"),
            ("CREATE UNCERTAIN ARRAY U <>[x=0:9] WORKLOAD (3) THRESHOLD {bad}", "{bad}", "THRESHOLD"),
        ]
    ),
    st.sampled_from(["0", "1.5", "-0.25", "2e3", "abc", "0.0"]),
    st.lists(st.sampled_from(["SHOW ARRAYS;\n", "\n", "  ", "-- note\n", "/* x */ "]), max_size=4).map(
        "".join
    ),
)
def test_bad_thresholds_are_reported_where_they_are_written(case, bad, prefix) -> None:
    template, needle, word = case
    text = prefix + template.format(bad=bad)
    with pytest.raises(ParseError) as caught:
        parse(text)
    assert (caught.value.line, caught.value.column) == _position(text, needle.format(bad=bad))
    reason = caught.value.reason
    assert (
        word in reason and "(0, 1]" in reason
    ) or reason == f"unexpected {bad!r}"  # abc is no number token


@pytest.mark.parametrize(
    "text,needle,reason",
    [
        ("CREATE UNCERTAIN ARRAY U <v:gaussian>\n  [x=0:9; corr(x, q)]", "corr", "names 'q'"),
        ("CREATE UNCERTAIN ARRAY U <v:gaussian NULL> [x=0:9]", "gaussian", "cannot be NULL"),
        ("CREATE UNCERTAIN ARRAY U <x_sigma:int32> [x=0:9]", "x_sigma", "clashes"),
        ("CREATE UNCERTAIN ARRAY U <> [x=0:9;\n y=0:9] STORE MULTIPLE STEP (1, -2)", "-2", "integer >= 0"),
        ("CREATE UNCERTAIN ARRAY U <> [x=0:9] STORE ALL STEP 1", "STEP", "STORE MULTIPLE only"),
        ("CREATE UNCERTAIN ARRAY U <> [x=0:9] WORKLOAD (0)", "0)", "positive numbers"),
        ("SELECT * FROM\n  subarray(U, 1, 2, 3, THRESHOLD 0.5)", ")", "an even number"),
        ("SELECT * FROM subarray(U, THRESHOLD 0.5)", ")", "too few arguments"),
        ("SELECT * FROM structure_join(A, B, 1, 0.5, METHOD bnl, METHOD sbj)", "METHOD sbj", "given twice"),
        ("SELECT * FROM structure_join(A, filter(B, v > 0), 1, 0.5)", "filter", "must name a stored"),
        ("SELECT * FROM join(A, structure_join(A, B, 1, 0.5))", "structure_join", "stands alone"),
        ("SELECT * INTO C FROM structure_join(A, B, 1, 0.5)", "C", "without INTO"),
        ("INSERT INTO U (x, y)\nVALUES (1, 2),\n (1, 2, 3)", "(1, 2, 3)", "3 value(s) for the 2"),
    ],
)
def test_statement_errors_point_at_the_culprit(text: str, needle: str, reason: str) -> None:
    with pytest.raises(ParseError) as caught:
        parse(text)
    assert (caught.value.line, caught.value.column) == _position(text, needle)
    assert reason in caught.value.reason


@pytest.mark.parametrize(
    "build",
    [
        lambda: ast.ProbabilisticSubarray(U, (1,), (2,), 0.0),
        lambda: ast.ProbabilisticSubarray(U, (1,), (2, 3), 0.5),
        lambda: ast.ProbabilisticSubarray(ast.Filter(U, None), (1,), (2,), 0.5),
        lambda: ast.StructureJoin(U, U, math.inf, 0.5),
        lambda: ast.StructureJoin(U, U, 1.0, 0.5, "hash"),
        lambda: ast.CreateUncertainArray(parse_uncertain_schema("U<>[x=0:9]"), "store-mean", (1,)),
        lambda: ast.CreateUncertainArray(parse_uncertain_schema("U<>[x=0:9]"), "store-multiple", (1, 1)),
        lambda: ast.CreateUncertainArray(parse_uncertain_schema("U<>[x=0:9]"), sigmas=0),
        lambda: ast.CreateUncertainArray(parse_uncertain_schema("U<>[x=0:9]"), workload_threshold=0.5),
        lambda: ast.Insert("U", ((1, 2),), ("x",)),
        lambda: ast.Insert("U", ((1, 2),), ("x", "x")),
    ],
)
def test_constructors_check_shapes(build) -> None:
    with pytest.raises(ValueError):
        build()


# -- running them (Spark) ----------------------------------------------------------------------------
def _rows(data: dict, columns: list[str], rows: range) -> str:
    return ", ".join("(" + ", ".join(repr(float(data[c][i])) for c in columns) + ")" for i in rows)


@pytest.mark.spark
@pytest.mark.parametrize(
    "layout", ["STORE ALL", "STORE MEAN", "STORE MULTIPLE STEP 1", "STORE MULTIPLE STEP (3, 2)"]
)
def test_subarray_statements_match_brute_force(db, tmp_path, layout) -> None:
    rng = np.random.default_rng(40)
    data = catalog(rng, 600)
    pq.write_table(pa.table({k: v[20:] for k, v in data.items()}), tmp_path / "tuples.parquet")
    columns = ["x", "x_sigma", "y", "y_sigma", "flux", "flux_sigma", "mag"]
    created = db.sql(
        f"CREATE UNCERTAIN ARRAY U {SCHEMA} {layout};\n"
        f"INSERT INTO U VALUES {_rows(data, columns, range(20))};\n"
        f"LOAD U FROM '{tmp_path / 'tuples.parquet'}'"
    )
    assert created.version == 2
    stored = db.sql("SELECT * FROM U").to_pandas()
    assert stored["id"].tolist() == list(range(600))
    for column in columns:  # the float32 mag holds the float32 values whichever way they came in
        assert np.array_equal(stored[column].to_numpy(), data[column]), column
    for _ in range(5):
        x0, y0 = int(rng.integers(0, 55)), int(rng.integers(0, 36))
        w, h = int(rng.integers(0, 8)), int(rng.integers(0, 6))
        threshold = float(rng.choice([0.01, 0.3, 0.5, 0.9, 1.0]))
        result = db.sql(f"SELECT * FROM subarray(U, {x0}, {y0}, {x0 + w}, {y0 + h}, THRESHOLD {threshold})")
        reference = interval(data["x"], data["x_sigma"], x0, min(60, x0 + w + 1)) * interval(
            data["y"], data["y_sigma"], y0, min(40, y0 + h + 1)
        )
        check_result(result.to_pandas(), reference, threshold)
    rtree = db.sql("SELECT * FROM subarray(U, 10, 5, 14, 9, THRESHOLD 0.5, METHOD RTREE)").to_pandas()
    check_result(
        rtree, interval(data["x"], data["x_sigma"], 10, 15) * interval(data["y"], data["y_sigma"], 5, 10), 0.5
    )


@pytest.mark.spark
def test_structure_join_statements_match_brute_force(db) -> None:
    rng = np.random.default_rng(41)
    a, b = catalog(rng, 120, heavy=12.0), catalog(rng, 300)
    db.sql(
        f"CREATE UNCERTAIN ARRAY A {SCHEMA} STORE MULTIPLE STEP 1; CREATE UNCERTAIN ARRAY B {SCHEMA} STORE MEAN"
    )
    db.uncertain_array("A").insert(a)
    db.uncertain_array("B").insert(b)
    for method in ("SBJ", "BNL", "INDEX"):
        join = db.sql(f"SELECT * FROM structure_join(A, B, 1.5, 0.3, METHOD {method}, ENGINE LOCAL)")
        check_join(join.to_pandas(), join_reference(a, b, 1.5), 0.3)
    right = db.sql("SELECT * FROM structure_join(A, B, 2, 0.05, ENGINE local, OUTER right)").to_pandas()
    check_join(right, join_reference(a, b, 2.0), 0.05)
    on_spark = db.sql("SELECT * FROM structure_join(A, B, 1, 0.5)").to_pandas()  # the default: SBJ on Spark
    check_join(on_spark, join_reference(a, b, 1.0), 0.5)


@pytest.mark.spark
def test_explain_shows_the_expanded_region_and_the_step(db) -> None:
    db.sql(
        f"CREATE UNCERTAIN ARRAY A {SCHEMA} STORE MULTIPLE STEP (2, 1);"
        f"CREATE UNCERTAIN ARRAY B {SCHEMA} STORE ALL"
    )
    db.uncertain_array("A").insert(catalog(np.random.default_rng(42), 80))
    db.uncertain_array("B").insert(catalog(np.random.default_rng(43), 80))
    box, steps = ((10, 12), (0, 3)), (2, 1)
    text = db.sql("EXPLAIN SELECT * FROM subarray(A, 10, 0, 12, 3, THRESHOLD 0.8)")
    # Prop. 3.1 by hand: the box widened by k_i cells per dimension, clipped to x 0..59, y 0..39
    region = [
        (max(0, lo - k), min(top, hi + k)) for (lo, hi), k, top in zip(box, steps, (59, 39), strict=True)
    ]
    cells = math.prod(hi - lo + 1 for lo, hi in region)
    chunks = math.prod(hi // 8 - lo // 8 + 1 for lo, hi in region)
    assert region == [(8, 14), (0, 4)]
    assert f"expanded region: x 8..14, y 0..4 ({cells} cells;" in text
    assert f"chunks to read: {chunks}" in text
    assert "store-multiple, step [2, 1]" in text and "threshold: 0.8" in text
    assert "query: x 10..12, y 0..3 (12 cells)" in text
    text = db.sql("EXPLAIN SELECT * FROM subarray(B, 10, 0, 12, 3, THRESHOLD 0.8)")
    assert "expanded region: x 10..12, y 0..3 (12 cells;" in text  # store-all reads the query box only
    text = db.sql("EXPLAIN SELECT * FROM structure_join(A, B, 2, 0.5, OUTER left)")
    assert "outer: A (left), version 1, store-multiple, step [2, 1]" in text
    assert "inner: B (right), version 1, store-all" in text
    assert "Prop. 4.3" in text and "k_A = [2, 1]" in text
    assert "inner expansion of each outer-cell region (cells below, above): x 0, 0, y 0, 0" in text
    assert db.uncertain_array("A").version == 1  # EXPLAIN ran nothing


@pytest.mark.spark
def test_inserts_by_name_and_from_csv(db, tmp_path) -> None:
    db.sql("CREATE UNCERTAIN ARRAY C <n:int32 NULL, v:uniform> [x=0:9:5; y=0:9:5; corr(x, y)] STORE MEAN")
    db.sql(
        "INSERT INTO C (y_sigma, id, x, y, x_sigma, v_low, v_high) VALUES (0.5, 40, 1.25, 2, 0, -1, 1);\n"
        "INSERT INTO C VALUES (3, 0.25, 4, 0.5, -0.5, 7, 0, 2)"  # x, x_sigma, y, y_sigma, x_y_corr, n, v_low, v_high
    )
    pd.DataFrame(
        {"x": [9.75], "x_sigma": [1.0], "y": [0], "y_sigma": [2], "v_low": [3], "v_high": [3.5], "n": [""]}
    ).to_csv(tmp_path / "more.csv", index=False)
    result = db.sql(f"LOAD C FROM '{tmp_path / 'more.csv'}'")
    assert result.version == 3
    frame = db.sql("SELECT * FROM C").to_pandas()
    assert frame["id"].tolist() == [40, 41, 42]  # ids given, then numbered on
    assert frame["x"].tolist() == [1.25, 3.0, 9.75] and frame["x_y_corr"].tolist() == [0.0, -0.5, 0.0]
    assert frame["n"].isna().tolist() == [True, False, True] and frame["n"][1] == 7
    assert frame["v_high"].tolist() == [1.0, 2.0, 3.5]


@pytest.mark.spark
@pytest.mark.parametrize(
    "statement,error,message",
    [
        (
            "INSERT INTO C VALUES (1, 0.5, 1, 0.5, 0, null, 0, 1), (2, -1, 1, 0.5, 0, 1, 0, 1)",
            ValidationError,
            "column x_sigma: negative standard deviation",
        ),
        ("INSERT INTO C VALUES (10.5, 0, 1, 0, 0, 1, 0, 1)", ValidationError, "outside the dimension range"),
        ("INSERT INTO C VALUES (1, 0, 1, 0, 0, 'a', 0, 1)", ValidationError, "column n: 'a' is a string"),
        ("INSERT INTO C VALUES (1, 0, 1, 0, 0, 1.5, 0, 1)", ValidationError, "column n: 1.5 is not an int32"),
        ("INSERT INTO C VALUES (1, 0, 1, 0)", ValidationError, "row 1 has 4 value(s); each row needs 8"),
        (
            "INSERT INTO C (x, x_sigma, y, y_sigma, v_low, v_high, w) VALUES (1, 0, 1, 0, 0, 1, 2)",
            ValidationError,
            "column w: unknown column",
        ),
        (
            "INSERT INTO C (x, x_sigma, y, y_sigma, v_low) VALUES (1, 0, 1, 0, 0)",
            ValidationError,
            "column v_high: missing column",
        ),
        ("SELECT * FROM subarray(C, 1, 1, THRESHOLD 0.5)", ValidationError, "needs 4 coordinates"),
        (
            "SELECT * FROM subarray(C, 1, 1, 2, 2, THRESHOLD 0.001)",
            ValidationError,
            "must lie in (0.0027, 1]",
        ),
        ("SELECT * FROM subarray(C, 1, 1, 2, 2)", ValidationError, "its subarray needs a threshold"),
        (
            "SELECT * FROM filter(C, n > 1)",
            ValidationError,
            "C is an uncertain array: array functions read arrays",
        ),
        ("SELECT n FROM C", ValidationError, "a list of columns is not supported"),
        ("SELECT * FROM C WHERE n > 1", ValidationError, "WHERE is not supported"),
        ("SELECT count(*) FROM C", ValidationError, "Spark SQL queries do not read"),
        (
            "SELECT * FROM subarray(A, 1, 2, THRESHOLD 0.5)",
            ValidationError,
            "A is an array, not an uncertain array",
        ),
        (
            "SELECT * FROM structure_join(C, nothing, 1, 0.5)",
            NotFoundError,
            "no uncertain array named nothing",
        ),
        ("DELETE FROM C", ValidationError, "DELETE removes cells of arrays"),
        ("SHOW CHUNKS OF C", ValidationError, "SHOW CHUNKS lists the chunks of arrays"),
        ("DROP VIEW C", ValidationError, "C is an uncertain array, not a view"),
        ("DROP STREAM C", ValidationError, "use DROP ARRAY C"),
        ("LOAD C FROM '/no/such/file.parquet'", NotFoundError, "no file or folder"),
    ],
)
def test_bad_statements_change_nothing(db, statement, error, message) -> None:
    db.sql(
        "CREATE UNCERTAIN ARRAY C <n:int32 NULL, v:uniform> [x=0:9:5; y=0:9:5; corr(x, y)]; CREATE ARRAY A <v:float64> [i=0:3:2]"
    )
    db.sql("INSERT INTO C VALUES (3, 0.25, 4, 0.5, -0.5, 7, 0, 2)")
    with pytest.raises(error) as caught:
        db.sql("SHOW ARRAYS;\n" + statement)
    assert message in str(caught.value) and "(statement at line 2, column 1)" in str(caught.value)
    array = db.uncertain_array("C")
    assert (array.version, array.count()) == (1, 1)


@pytest.mark.spark
def test_show_and_drop_uncertain_arrays(db) -> None:
    db.sql(
        "CREATE ARRAY A <v:float64> [i=0:3:2]; CREATE UNCERTAIN ARRAY sky <> [x=0:9:5] STORE ALL;"
        "CREATE UNCERTAIN ARRAY Bright <f:gaussian> [x=0:9:5]; INSERT INTO sky VALUES (1.5, 0.5), (2, 0)"
    )
    arrays = db.sql("SHOW ARRAYS")
    assert arrays[["name", "kind", "version", "cells"]].values.tolist() == [
        ["A", "array", 0, 0],
        ["Bright", "uncertain array", 0, 0],
        ["sky", "uncertain array", 1, 2],
    ]
    assert arrays.schema.tolist()[2] == "sky<>[x=0:9:5]"
    relations = db.sql("SHOW RELATIONS")
    assert relations[["name", "kind"]].values.tolist() == [
        ["A", "array"],
        ["Bright", "uncertain array"],
        ["sky", "uncertain array"],
    ]
    assert db.sql("SHOW SCHEMA OF Bright") == "Bright<f:gaussian>[x=0:9:5]"
    assert db.sql("SHOW VERSIONS OF sky").tuples_total.tolist() == [2]
    assert db.sql("DROP ARRAY sky") is None
    assert db.uncertain_arrays() == ["Bright"]
    assert db.sql("SHOW RELATIONS").name.tolist() == ["A", "Bright"]
    db.sql("DROP ARRAY Bright; DROP ARRAY A")
    assert db.sql("SHOW ARRAYS").empty


@pytest.mark.spark
def test_column_lists_of_array_inserts_name_every_column(db) -> None:
    db.sql("CREATE ARRAY A <v:float64, n:int64 NULL> [i=0:3:2; j=0:3:2]")
    db.sql("INSERT INTO A (n, v, j, i) VALUES (7, 0.5, 3, 1), (null, -1.5, 0, 2)")
    cells = db.array("A").to_pandas().sort_values(["i", "j"]).reset_index(drop=True)
    assert cells[["i", "j", "v"]].values.tolist() == [[1, 3, 0.5], [2, 0, -1.5]]
    assert cells["n"].isna().tolist() == [False, True] and cells["n"][0] == 7
    for text, message in [
        ("INSERT INTO A (i, j, v) VALUES (1, 1, 1.0)", "array A needs a value for column n"),
        ("INSERT INTO A (i, j, v, n, w) VALUES (1, 1, 1.0, 1, 2)", "array A has no column 'w'"),
    ]:
        with pytest.raises(ValidationError, match=message):
            db.sql(text)
    assert db.array("A").version == 1
