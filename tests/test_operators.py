"""Operators (subarray, filter, project, apply, regrid, aggregate, join, store and compositions) against
numpy/pandas references computed from the cells that were written, never from arrayviews output."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import arrayviews
from arrayviews import SchemaError, ValidationError
from strategies import (
    NUMERIC_TYPES,
    ArrayCase,
    Attr,
    Call,
    Cells,
    Dim,
    approx_columns,
    array_cases,
    assert_tables_equal,
    boxes,
    calls_for,
    isnan_atom,
    make_cells,
    negation,
    predicates,
    reference_aggregate,
    reference_filter,
    reference_regrid,
    spark_compare,
    subsets,
    write_case,
)

_names = itertools.count()
PROPERTY = settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


def new_name() -> str:
    return f"P{next(_names)}"


@pytest.fixture(scope="module")
def odb(spark, tmp_path_factory):
    """One warehouse for the module: fixed arrays are shared, hypothesis examples create their own."""
    return arrayviews.connect(str(tmp_path_factory.mktemp("operators") / "warehouse"), spark=spark)


# A full 3-D array of 7 x 5 x 4 cells in chunks of 3 x 2 x 3 (no extent is a multiple of its chunk
# length), written with write_dense; v holds some NaN.
DENSE3_DIMS = (Dim("i", -3, 3, 3), Dim("j", 1, 5, 2), Dim("k", 0, 3, 3))
DENSE3_ATTRS = (Attr("v", "float64"), Attr("r", "int32"), Attr("b", "bool"))
# A sparse 2-D array of 14 x 7 cells in chunks of 4 x 3 with some entirely empty chunks and nulls in
# n, inserted in two batches.
SPARSE2_DIMS = (Dim("i", -5, 8, 4), Dim("j", 0, 6, 3))
SPARSE2_ATTRS = (Attr("v", "float64"), Attr("n", "int64", nullable=True), Attr("f", "float32"))


@pytest.fixture(scope="module")
def dense3(odb):
    cells = make_cells(DENSE3_DIMS, DENSE3_ATTRS, seed=21, density=1.0)
    assert np.isnan(cells.values["v"]).any()
    return write_case(odb, "D3", ArrayCase(cells, "dense")), cells


@pytest.fixture(scope="module")
def sparse2(odb):
    cells = make_cells(SPARSE2_DIMS, SPARSE2_ATTRS, seed=22, density=0.35, empty_chunks=True)
    assert cells.nulls["n"].any() and 0 < cells.n < 14 * 7
    chunks = {tuple(c) for c in (cells.coords - cells.lows) // np.array([4, 3])}
    assert len(chunks) < 4 * 3  # some chunks are entirely empty
    return write_case(odb, "S2", ArrayCase(cells, "insert", batches=2, seed=22)), cells


# -- references ---------------------------------------------------------------------------------


def narrowed(cells: Cells, box: dict[str, tuple[int, int]]) -> tuple[Dim, ...]:
    out = []
    for dim in cells.dims:
        low, high = box.get(dim.name, (dim.low, dim.high))
        out.append(Dim(dim.name, max(low, dim.low), min(high, dim.high), dim.chunk))
    return tuple(out)


def reference_subarray(cells: Cells, box: dict[str, tuple[int, int]]) -> Cells:
    dims = narrowed(cells, box)
    inside = np.ones(cells.n, dtype=bool)
    for k, dim in enumerate(dims):
        inside &= (cells.coords[:, k] >= dim.low) & (cells.coords[:, k] <= dim.high)
    return cells.take(inside, dims)


def regrid_dims(cells: Cells, blocks) -> tuple[Dim, ...]:
    out = []
    for dim, block in zip(cells.dims, blocks, strict=True):
        extent = math.ceil(dim.extent / block)
        out.append(Dim(dim.name, dim.low, dim.low + extent - 1, min(dim.chunk, extent)))
    return tuple(out)


def reference_join(left: Cells, right: Cells) -> Cells:
    dims = tuple(
        Dim(a.name, max(a.low, b.low), min(a.high, b.high), a.chunk)
        for a, b in zip(left.dims, right.dims, strict=True)
    )
    where = {tuple(int(x) for x in c): r for r, c in enumerate(right.coords)}
    pairs = [
        (r, where[tuple(int(x) for x in c)])
        for r, c in enumerate(left.coords)
        if tuple(int(x) for x in c) in where
    ]
    pairs = [
        (lr, rr) for lr, rr in pairs if all(d.low <= left.coords[lr, k] <= d.high for k, d in enumerate(dims))
    ]
    li = np.array([p[0] for p in pairs], dtype=np.int64)
    ri = np.array([p[1] for p in pairs], dtype=np.int64)
    values = {a: v[li] for a, v in left.values.items()} | {a: v[ri] for a, v in right.values.items()}
    nulls = {a: m[li] for a, m in left.nulls.items()} | {a: m[ri] for a, m in right.nulls.items()}
    return Cells(dims, left.attrs + right.attrs, left.coords[li], values, nulls)


def project_cells(cells: Cells, names) -> Cells:
    return Cells(
        cells.dims,
        tuple(cells.attr(n) for n in names),
        cells.coords,
        {n: cells.values[n] for n in names},
        {n: cells.nulls[n] for n in names},
    )


def check_dims(array, dims) -> None:
    got = [(d.name, d.low, d.high) for d in array.schema.dimensions]
    assert got == [(d.name, d.low, d.high) for d in dims]


# -- subarray -------------------------------------------------------------------------------------

SUBARRAY_BOXES = {
    "inside": {"i": (-2, 1), "j": (2, 4), "k": (1, 2)},
    "overlapping_low_edges": {"i": (-10, -2), "k": (-4, 0)},
    "overlapping_high_edges": {"i": (2, 50), "j": (4, 9)},
    "single_cell": {"i": (0, 0), "j": (3, 3), "k": (2, 2)},
    "whole_array_and_more": {"i": (-3, 3), "j": (-100, 100), "k": (0, 3)},
}


@pytest.mark.parametrize("label", list(SUBARRAY_BOXES))
def test_subarray_of_dense_array(dense3, label: str) -> None:
    array, cells = dense3
    box = SUBARRAY_BOXES[label]
    result = array.subarray(**box)
    expected = reference_subarray(cells, box)
    check_dims(result, expected.dims)
    assert_tables_equal(result.to_arrow(), expected.arrow())
    if label in ("overlapping_low_edges", "single_cell"):
        values, _ = expected.dense("r", 0)
        actual = result.to_numpy("r")
        assert actual.shape == expected.shape
        np.testing.assert_array_equal(actual, values)


@pytest.mark.parametrize(
    "box",
    [{"i": (-5, -2), "j": (1, 3)}, {"i": (-5, 8), "j": (0, 6)}],
    ids=["low_corner", "whole"],
)
def test_subarray_of_sparse_array(sparse2, box) -> None:
    array, cells = sparse2
    result = array.subarray(box)
    expected = reference_subarray(cells, box)
    check_dims(result, expected.dims)
    assert_tables_equal(result.to_arrow(), expected.arrow())


def test_subarray_errors(dense3) -> None:
    array, _ = dense3
    with pytest.raises(SchemaError):
        array.subarray(q=(0, 1))
    with pytest.raises(ValidationError):
        array.subarray(i=(4, 10))  # outside the range 0..3 entirely
    with pytest.raises(ValidationError):
        array.subarray(j=(-5, 0))
    with pytest.raises(ValidationError):
        array.subarray(i=(2, 1))  # low > high


@pytest.mark.slow
@PROPERTY
@given(case=array_cases(), data=st.data())
def test_subarray_property(odb, case: ArrayCase, data) -> None:
    cells = case.cells
    box = data.draw(boxes(cells.dims))
    array = write_case(odb, new_name(), case)
    result = array.subarray(**box)
    expected = reference_subarray(cells, box)
    check_dims(result, expected.dims)
    assert_tables_equal(result.to_arrow(), expected.arrow())


# -- filter ---------------------------------------------------------------------------------------


def _certain(function, used=()):
    """A reference predicate over non-NULL operands: its value, known wherever ``used`` attributes are
    not NULL (for a single comparison that is SQL's three-valued logic)."""

    def predicate(c):
        known = np.ones(c.n, dtype=bool)
        for name in used:
            known &= ~c.nulls[name]
        return np.asarray(function(c), dtype=bool), known

    return predicate


@pytest.mark.parametrize(
    ("predicate", "function"),
    [
        # NaN is larger than every number in Spark SQL, so NaN cells fail NOT (v > 0)
        ("not (v > 0)", lambda c: ~spark_compare(c.values["v"], 0.0, ">")),
        ("v = CAST('NaN' AS DOUBLE)", lambda c: np.isnan(c.values["v"])),  # NaN equals NaN
        (
            "isnan(v) OR (b AND i % 2 = -1)",  # % is Java's remainder: the sign of the dividend
            lambda c: np.isnan(c.values["v"]) | (c.values["b"] & (np.fmod(c.coords[:, 0], 2) == -1)),
        ),
        (
            "i + j > k * 2 and r / 4 >= -3.5",
            lambda c: (c.coords[:, 0] + c.coords[:, 1] > 2 * c.coords[:, 2]) & (c.values["r"] / 4 >= -3.5),
        ),
    ],
    ids=["not_gt", "nan_only", "nan_or_dims", "dims_arith"],
)
def test_filter_dense(dense3, predicate: str, function) -> None:
    array, cells = dense3
    expected = reference_filter(cells, (predicate, _certain(function), frozenset()))
    assert 0 < expected.n < cells.n
    assert_tables_equal(array.filter(predicate).to_arrow(), expected.arrow())


@pytest.mark.parametrize(
    ("predicate", "function", "used"),
    [
        ("n > 0", lambda c: c.values["n"] > 0, {"n"}),
        ("not (n > 0)", lambda c: ~(c.values["n"] > 0), {"n"}),
        (  # NaN >= 0.5 is TRUE (NaN is the largest number)
            "f >= 0.5 and j <> 3",
            lambda c: spark_compare(c.values["f"], 0.5, ">=") & (c.coords[:, 1] != 3),
            set(),
        ),
    ],
    ids=["null_gt", "null_not_gt", "float32_and_dim"],
)
def test_filter_sparse_with_nulls(sparse2, predicate: str, function, used) -> None:
    """A NULL comparison is NULL, and NOT NULL is NULL: null cells pass neither ``n > 0`` nor ``not (n > 0)``."""
    array, cells = sparse2
    expected = reference_filter(cells, (predicate, _certain(function, used), frozenset(used)))
    assert 0 < expected.n < cells.n
    assert_tables_equal(array.filter(predicate).to_arrow(), expected.arrow())


def test_filter_errors(dense3) -> None:
    array, _ = dense3
    with pytest.raises(ValidationError):
        array.filter("v + 1")  # not a condition
    with pytest.raises(ValidationError):
        array.filter("nope > 1")
    with pytest.raises(ValidationError):
        array.filter("b > 1")  # bool compared with a number
    with pytest.raises(arrayviews.ParseError):
        array.filter("v >")


def test_isnan_of_a_null_cell_is_false_as_in_spark(spark, odb) -> None:
    """Found by hypothesis: NOT isnan(v) over a NULL v keeps the cell (Spark: isnan(NULL) is false)."""
    assert spark.sql("SELECT isnan(CAST(NULL AS FLOAT)) AS x").collect()[0].x is False
    cells = Cells(
        dims=(Dim("i", 0, 1, 2),),
        attrs=(Attr("v", "float32", nullable=True), Attr("w", "int32")),
        coords=np.array([[0], [1]]),
        values={"v": np.array([0.0, np.nan], dtype=np.float32), "w": np.array([-23, 4], dtype=np.int32)},
        nulls={"v": np.array([True, False])},
    )
    array = write_case(odb, new_name(), ArrayCase(cells, "insert"))
    for predicate, kept in ((negation(isnan_atom("v")), [0]), (isnan_atom("v"), [1])):
        expected = reference_filter(cells, predicate).arrow()
        assert expected.column("i").to_pylist() == kept
        assert_tables_equal(array.filter(predicate[0]).to_arrow(), expected)


@pytest.mark.slow
@PROPERTY
@given(case=array_cases(), data=st.data())
def test_filter_property(odb, case: ArrayCase, data) -> None:
    cells = case.cells
    predicate = data.draw(predicates(cells))
    array = write_case(odb, new_name(), case)
    result = array.filter(predicate[0])
    assert_tables_equal(result.to_arrow(), reference_filter(cells, predicate).arrow())


# -- project --------------------------------------------------------------------------------------


def test_project_order(dense3) -> None:
    array, cells = dense3
    result = array.project("b", "v")
    assert result.schema.attribute_names == ("b", "v")
    assert_tables_equal(result.to_arrow(), project_cells(cells, ["b", "v"]).arrow())


def test_project_single_nullable_then_to_numpy(sparse2) -> None:
    array, cells = sparse2
    result = array.project("n")
    expected = project_cells(cells, ["n"])
    values, missing = expected.dense("n", -1)
    np.testing.assert_array_equal(result.to_numpy(fill=-1), values)
    assert result.count() == cells.n


def test_project_errors(dense3) -> None:
    array, _ = dense3
    with pytest.raises(ValidationError):
        array.project("v", "v")
    with pytest.raises(SchemaError):
        array.project("nope")
    with pytest.raises(SchemaError):
        array.project("i")  # a dimension, not an attribute


# -- apply ----------------------------------------------------------------------------------------

APPLIED = [
    ("a_int", "r + 1", "int32", lambda c, i, j, k: c["r"] + np.int32(1)),
    ("a_dims", "r * i - j", "int64", lambda c, i, j, k: c["r"].astype(np.int64) * i - j),
    ("a_div", "r / 2", "float64", lambda c, i, j, k: c["r"] / 2),
    ("a_int_div", "i / 2", "float64", lambda c, i, j, k: i / 2),
    ("a_cmp", "v > 0", "bool", lambda c, i, j, k: spark_compare(c["v"], 0.0, ">")),  # NaN > 0
    ("a_mod", "r % 3", "int32", lambda c, i, j, k: np.fmod(c["r"], np.int32(3))),  # Java remainder
    ("a_float", "v * 2 + k", "float64", lambda c, i, j, k: c["v"] * 2 + k),
    ("a_logic", "b and r > 0", "bool", lambda c, i, j, k: c["b"] & (c["r"] > 0)),
    ("a_cast", "CAST(b AS BIGINT) + k", "int64", lambda c, i, j, k: c["b"].astype(np.int64) + k),
]


def test_apply_types(dense3) -> None:
    """Spark's result types: INT + INT is INT, BIGINT when a BIGINT takes part, / gives DOUBLE,
    comparisons BOOLEAN (types known without running)."""
    array, _ = dense3
    for name, expression, type_name, _ in APPLIED:
        assert array.apply(name, expression).schema.attribute(name).type == type_name


def test_apply_values(dense3) -> None:
    array, cells = dense3
    chosen = [a for a in APPLIED if a[0] in ("a_dims", "a_div", "a_cmp", "a_mod")]
    result = array
    for name, expression, _, _ in chosen:
        result = result.apply(name, expression)
    i, j, k = (cells.coords[:, n] for n in range(3))
    values = dict(cells.values)
    attrs = list(cells.attrs)
    for name, _, type_name, function in chosen:
        values[name] = function(cells.values, i, j, k)
        attrs.append(Attr(name, type_name))
    expected = Cells(cells.dims, tuple(attrs), cells.coords, values)
    assert_tables_equal(result.to_arrow(), expected.arrow())


def test_apply_over_nullable_attribute(sparse2) -> None:
    array, cells = sparse2
    result = array.apply("t", "n * 2 + i")
    assert result.schema.attribute("t").type == "int64"
    assert result.schema.attribute("t").nullable
    t = cells.values["n"] * 2 + cells.coords[:, 0]
    t[cells.nulls["n"]] = 0
    expected = Cells(
        cells.dims,
        (*cells.attrs, Attr("t", "int64", True)),
        cells.coords,
        {**cells.values, "t": t},
        {**cells.nulls, "t": cells.nulls["n"]},
    )
    assert_tables_equal(result.to_arrow(), expected.arrow())


def test_apply_errors(dense3) -> None:
    array, _ = dense3
    with pytest.raises(ValidationError):
        array.apply("v", "r + 1")  # clashes with an attribute
    with pytest.raises(ValidationError):
        array.apply("j", "r + 1")  # clashes with a dimension
    with pytest.raises(ValidationError):
        array.apply("z", "b + 1")  # bool takes no part in arithmetic
    with pytest.raises(SchemaError):
        array.apply("bad__name", "r")
    with pytest.raises(ValidationError, match="always an untyped NULL"):
        array.apply("z", "NULL")


def test_apply_gives_null_where_spark_does(dense3) -> None:
    """ln of a number <= 0 is NULL (and NaN stays NaN); names match without regard to case."""
    array, cells = dense3
    result = array.apply("l", "ln(V)")
    assert result.schema.attribute("l").type == "float64" and result.schema.attribute("l").nullable
    v = cells.values["v"]
    with np.errstate(all="ignore"):
        logs = np.where(v > 0, np.log(np.where(v > 0, v, 1.0)), 0.0)
    logs[np.isnan(v)] = np.nan
    expected = Cells(
        cells.dims,
        (*cells.attrs, Attr("l", "float64", True)),
        cells.coords,
        {**cells.values, "l": logs},
        {**cells.nulls, "l": v <= 0},
    )
    assert expected.nulls["l"].any()
    assert_tables_equal(result.to_arrow(), expected.arrow(), approx=["l"], rtol=1e-15)


def test_apply_raises_where_spark_raises(dense3) -> None:
    """INT * INT overflows: an error naming the part, the column and its value, never a wrapped value."""
    array, cells = dense3
    big = int(np.abs(cells.values["r"]).max())
    factor = 2**31 // big + 1
    assert big > 1 and factor < 2**31
    result = array.apply("o", f"r * {factor}")
    with pytest.raises(Exception) as caught:  # raised in a Spark task (translated by the executor)
        result.to_arrow()
    message = str(caught.value)
    assert "INT overflow" in message and f"'r * {factor}'" in message and "r = " in message
    # if() evaluates the multiplication only where it is chosen, as Spark does
    table = array.apply("o", f"if(abs(r) < 2, r * {factor}, 0)").to_arrow()
    r = table.column("r").to_numpy().astype(np.int64)
    np.testing.assert_array_equal(table.column("o").to_numpy(), np.where(np.abs(r) < 2, r * factor, 0))
    assert len(r) == cells.n


# -- regrid ---------------------------------------------------------------------------------------


def check_regrid(array, cells: Cells, blocks, calls) -> None:
    result = array.regrid(list(blocks), *[c.text for c in calls])
    check_dims(result, regrid_dims(cells, blocks))
    assert result.schema.attribute_names == tuple(c.output for c in calls)
    expected = reference_regrid(cells, blocks, calls)
    assert_tables_equal(result.to_arrow(), expected, approx=approx_columns(calls, cells))


def test_regrid_dense_blocks_not_dividing_extent(dense3) -> None:
    array, cells = dense3
    check_regrid(array, cells, (2, 3, 3), calls_for(cells))


def test_regrid_sparse_with_nulls(sparse2) -> None:
    array, cells = sparse2
    check_regrid(array, cells, (3, 4), calls_for(cells))


def test_regrid_single_cell_blocks_give_null_variance(sparse2) -> None:
    array, cells = sparse2
    calls = [Call("count", None), Call("var", "v"), Call("stdev", "f"), Call("avg", "n")]
    result = array.regrid([1, 1], *[c.text for c in calls])
    table = result.to_arrow()
    assert table.column("v_var").null_count == table.num_rows == cells.n
    assert table.column("f_stdev").null_count == cells.n
    assert np.isnan(result.to_numpy("v_var")).all()
    expected = reference_regrid(cells, (1, 1), calls)
    assert_tables_equal(table, expected, approx=approx_columns(calls, cells))


def test_regrid_blocks_by_name_and_whole_extent(dense3) -> None:
    array, cells = dense3
    calls = [Call("sum", "r"), Call("max", "v"), Call("min", "b")]
    result = array.regrid({"j": 10, "k": 4}, *[c.text for c in calls])
    check_dims(result, regrid_dims(cells, (1, 10, 4)))
    assert_tables_equal(result.to_arrow(), reference_regrid(cells, (1, 10, 4), calls))


def test_regrid_errors(dense3) -> None:
    array, _ = dense3
    with pytest.raises(ValidationError):
        array.regrid([2, 2], "count(*)")  # one block size per dimension
    with pytest.raises(ValidationError):
        array.regrid([0, 1, 1], "count(*)")
    with pytest.raises(ValidationError):
        array.regrid([1, 1, 1], "var(b)")
    with pytest.raises(ValidationError):
        array.regrid([1, 1, 1], "sum(nope)")
    with pytest.raises(SchemaError):
        array.regrid({"q": 2}, "count(*)")


@pytest.mark.slow
@PROPERTY
@given(case=array_cases(), data=st.data())
def test_regrid_property(odb, case: ArrayCase, data) -> None:
    cells = case.cells
    blocks = tuple(data.draw(st.integers(1, d.extent + 1), label=f"block {d.name}") for d in cells.dims)
    array = write_case(odb, new_name(), case)
    check_regrid(array, cells, blocks, calls_for(cells))


# -- aggregate ------------------------------------------------------------------------------------


def check_aggregate(array, cells: Cells, by, calls) -> None:
    result = array.aggregate(*[c.text for c in calls], by=list(by))
    assert result.schema.dimension_names == (tuple(by) if by else ("i",))
    expected = reference_aggregate(cells, by, calls)
    assert_tables_equal(result.to_arrow(), expected, approx=approx_columns(calls, cells))


@pytest.mark.parametrize("by", subsets(("i", "j", "k")), ids=lambda by: "by_" + ("_".join(by) or "none"))
def test_aggregate_by_each_subset_of_dimensions(dense3, by) -> None:
    array, cells = dense3
    check_aggregate(array, cells, by, calls_for(cells))


@pytest.mark.parametrize("by", [(), ("j", "i")], ids=["global", "by_j_i"])
def test_aggregate_sparse_with_nulls(sparse2, by) -> None:
    array, cells = sparse2
    check_aggregate(array, cells, by, calls_for(cells))


def test_global_aggregate_of_empty_input(dense3) -> None:
    array, cells = dense3
    calls = [Call("count", None), Call("sum", "r"), Call("avg", "v")]
    empty = cells.take(np.zeros(cells.n, dtype=bool))
    check_aggregate(array.filter("r > 1000"), empty, (), calls)


def test_aggregate_errors(dense3) -> None:
    array, _ = dense3
    with pytest.raises(SchemaError):
        array.aggregate("count(*)", by=["q"])
    with pytest.raises(ValidationError):
        array.aggregate("count(*)", by=["i", "i"])
    with pytest.raises(ValidationError):
        array.aggregate("stdev(b)")
    with pytest.raises(ValidationError):
        array.aggregate("sum(v)", "sum(v)")  # same output name twice
    with pytest.raises(arrayviews.ParseError):
        array.aggregate("median(v)")


@pytest.mark.slow
@PROPERTY
@given(case=array_cases(), data=st.data())
def test_aggregate_property(odb, case: ArrayCase, data) -> None:
    cells = case.cells
    by = data.draw(st.sampled_from(subsets(cells.dim_names)), label="by")
    by = data.draw(st.permutations(by), label="by order") if by else by
    array = write_case(odb, new_name(), case)
    check_aggregate(array, cells, tuple(by), calls_for(cells))


# -- join -----------------------------------------------------------------------------------------


def joined(odb, dense3, dims, seed: int, density: float = 0.6):
    """The projection of dense3 on v, joined with a new sparse array over ``dims`` (attribute z, nullable)."""
    array, cells = dense3
    other = make_cells(dims, (Attr("z", "int64", True),), seed=seed, density=density)
    right = write_case(odb, new_name(), ArrayCase(other, "insert"))
    result = array.project("v").join(right)
    expected = reference_join(project_cells(cells, ["v"]), other)
    assert expected.n > 0
    check_dims(result, expected.dims)
    assert result.schema.attribute_names == ("v", "z")
    assert_tables_equal(result.to_arrow(), expected.arrow())


def test_join_same_grid(odb, dense3) -> None:
    joined(odb, dense3, DENSE3_DIMS, seed=31)


def test_join_different_chunk_lengths(odb, dense3) -> None:
    dims = (Dim("i", -3, 3, 2), Dim("j", 1, 5, 5), Dim("k", 0, 3, 1))
    joined(odb, dense3, dims, seed=32)


def test_join_partially_overlapping_ranges(odb, dense3) -> None:
    dims = (Dim("i", -1, 6, 3), Dim("j", 3, 8, 2), Dim("k", -2, 1, 3))
    joined(odb, dense3, dims, seed=33, density=0.8)


def test_join_subarray_on_same_grid_and_nullable_sparse(odb, sparse2) -> None:
    """Left: a subarray of the sparse array (grid kept); right: a sparse array with the same grid."""
    array, cells = sparse2
    box = {"i": (-2, 6)}
    left = reference_subarray(cells, box)
    other = make_cells(SPARSE2_DIMS, (Attr("z", "bool", True),), seed=34, density=0.5)
    right = write_case(odb, new_name(), ArrayCase(other, "insert"))
    result = array.subarray(**box).join(right)
    expected = reference_join(left, other)
    assert expected.n > 0
    check_dims(result, expected.dims)
    assert_tables_equal(result.to_arrow(), expected.arrow())


@pytest.mark.slow
@settings(PROPERTY, max_examples=6)
@given(case=array_cases(max_attrs=2), data=st.data())
def test_join_property(odb, case: ArrayCase, data) -> None:
    """Join with a random array over overlapping ranges with random chunk lengths (attribute z)."""
    cells = case.cells
    dims = []
    for dim in cells.dims:
        low = data.draw(st.integers(dim.low - 3, dim.high), label=f"low {dim.name}")
        high = data.draw(st.integers(max(low, dim.low), dim.high + 3), label=f"high {dim.name}")
        dims.append(Dim(dim.name, low, high, data.draw(st.integers(1, high - low + 2), label="chunk")))
    right_case = data.draw(
        st.builds(
            lambda seed, density, write: ArrayCase(
                make_cells(dims, (Attr("z", "int32", True),), seed, density, nulls=write == "insert"), write
            ),
            st.integers(0, 2**32 - 1),
            st.sampled_from([0.3, 0.7, 1.0]),
            st.sampled_from(["dense", "insert"]),
        ),
        label="right",
    )
    left = write_case(odb, new_name(), case)
    right = write_case(odb, new_name(), right_case)
    result = left.join(right)
    expected = reference_join(cells, right_case.cells)
    check_dims(result, expected.dims)
    assert_tables_equal(result.to_arrow(), expected.arrow())


def test_join_errors(odb, dense3, sparse2) -> None:
    array, _ = dense3
    with pytest.raises(ValidationError):
        array.join(array.project("v"))  # attribute v on both sides
    with pytest.raises(ValidationError):
        array.project("v").join(sparse2[0].project("n"))  # different dimensions
    far = odb.create_array(f"{new_name()}<z:int64>[i=10:12:2; j=1:5:2; k=0:3:3]")
    with pytest.raises(ValidationError):
        array.project("v").join(far)  # ranges do not overlap


# -- store ----------------------------------------------------------------------------------------


def test_store_computed_result(odb, sparse2) -> None:
    array, cells = sparse2
    name = new_name()
    stored = array.filter("v > 0").apply("w", "f * 2").store(name)
    keep = spark_compare(cells.values["v"], 0.0, ">")  # NaN > 0 in Spark SQL
    kept = cells.take(keep)
    expected = Cells(
        kept.dims,
        (*kept.attrs, Attr("w", "float64")),
        kept.coords,
        {**kept.values, "w": kept.values["f"].astype(np.float64) * 2},
        dict(kept.nulls),
    )
    assert stored.stored and name in odb.arrays()
    for handle in (stored, odb.array(name)):
        assert_tables_equal(handle.to_arrow(), expected.arrow())
        assert handle.count() == expected.n
    versions = stored.versions()
    assert versions["operation"].tolist() == ["store"]
    assert versions["version"].tolist() == [1]
    assert versions["cells_added"].tolist() == [expected.n]
    assert int(stored.chunks()["cells"].sum()) == expected.n


def test_store_regrid_keeps_nulls(odb, sparse2) -> None:
    array, cells = sparse2
    calls = [Call("count", None), Call("var", "v"), Call("sum", "n")]
    stored = array.regrid([2, 5], *[c.text for c in calls]).store(new_name())
    assert stored.schema.attribute("v_var").nullable
    expected = reference_regrid(cells, (2, 5), calls)
    assert expected.column("v_var").null_count > 0
    assert_tables_equal(stored.to_arrow(), expected, approx=approx_columns(calls, cells))
    assert stored.versions()["operation"].tolist() == ["store"]


# -- compositions ---------------------------------------------------------------------------------


def test_subarray_then_regrid_then_filter(dense3) -> None:
    array, cells = dense3
    box = {"i": (-2, 3), "k": (1, 3)}
    calls = [Call("avg", "v"), Call("count", None), Call("max", "r")]
    result = (
        array.subarray(**box).regrid([2, 2, 2], *[c.text for c in calls]).filter("count > 4 and r_max > 0")
    )
    inner = reference_subarray(cells, box)
    grouped = reference_regrid(inner, (2, 2, 2), calls)
    keep = (grouped.column("count").to_numpy() > 4) & (grouped.column("r_max").to_numpy() > 0)
    expected = grouped.filter(pa.array(keep))
    assert 0 < expected.num_rows < grouped.num_rows
    check_dims(result, regrid_dims(inner, (2, 2, 2)))
    assert_tables_equal(result.to_arrow(), expected, approx=["v_avg"])


def test_filter_then_aggregate(sparse2) -> None:
    array, cells = sparse2
    calls = [Call("sum", "v"), Call("count", None), Call("min", "n"), Call("stdev", "f")]
    result = array.filter("n > 0 or f < 0").aggregate(*[c.text for c in calls], by=["j"])
    # SQL's OR: a NULL n > 0 still passes where f < 0 is TRUE.
    n_positive = (cells.values["n"] > 0) & ~cells.nulls["n"]
    kept = cells.take(n_positive | (cells.values["f"] < 0))
    expected = reference_aggregate(kept, ("j",), calls)
    assert_tables_equal(result.to_arrow(), expected, approx=approx_columns(calls, cells))


def test_apply_subarray_join_project(odb, dense3) -> None:
    array, cells = dense3
    other = make_cells(DENSE3_DIMS, (Attr("z", "float32"),), seed=35, density=0.4)
    right = write_case(odb, new_name(), ArrayCase(other, "dense"))
    result = array.apply("s", "r * 2").subarray(j=(2, 4)).join(right.subarray(i=(-1, 3))).project("z", "s")
    left = reference_subarray(cells, {"j": (2, 4)})
    left = Cells(
        left.dims, (Attr("s", "int32"),), left.coords, {"s": left.values["r"] * 2}
    )  # INT * INT is INT
    expected = reference_join(left, reference_subarray(other, {"i": (-1, 3)}))
    expected = project_cells(expected, ["z", "s"])
    check_dims(result, expected.dims)
    assert_tables_equal(result.to_arrow(), expected.arrow())


def test_regrid_then_subarray_then_aggregate(dense3) -> None:
    array, cells = dense3
    grouped = reference_regrid(cells, (3, 1, 2), [Call("sum", "r")])
    dims = regrid_dims(cells, (3, 1, 2))
    inner = reference_subarray(Cells.from_arrow(grouped, dims), {"j": (2, 4)})
    calls = [Call("max", "r_sum"), Call("count", None), Call("avg", "r_sum")]
    expected = reference_aggregate(inner, ("k",), calls)
    result = (
        array.regrid([3, 1, 2], "sum(r)").subarray(j=(2, 4)).aggregate(*[c.text for c in calls], by=["k"])
    )
    assert_tables_equal(result.to_arrow(), expected, approx=["r_sum_avg"])


@pytest.mark.slow
@PROPERTY
@given(case=array_cases(types=NUMERIC_TYPES, max_attrs=2), data=st.data())
def test_subarray_filter_regrid_property(odb, case: ArrayCase, data) -> None:
    cells = case.cells
    box = data.draw(boxes(cells.dims))
    predicate = data.draw(predicates(cells, depth=1))
    inner = reference_subarray(cells, box)
    blocks = tuple(data.draw(st.integers(1, d.extent + 1), label=f"block {d.name}") for d in inner.dims)
    calls = calls_for(cells, ("count", "sum", "min", "var"))
    array = write_case(odb, new_name(), case)
    result = array.subarray(**box).filter(predicate[0]).regrid(list(blocks), *[c.text for c in calls])
    expected = reference_regrid(reference_filter(inner, predicate), blocks, calls)
    assert_tables_equal(result.to_arrow(), expected, approx=approx_columns(calls, cells))
