"""Read paths (to_numpy, to_arrow, to_pandas, to_spark, to_xarray, count, chunks) against numpy/pandas
references computed from the cells that were written, for dense (write_dense) and sparse (insert) arrays."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import arrayviews
from arrayviews import ValidationError
from strategies import (
    NUMPY,
    ArrayCase,
    Attr,
    Cells,
    Dim,
    array_cases,
    assert_tables_equal,
    chunk_numbers,
    make_cells,
    write_case,
    written_versions,
)

_names = itertools.count()


@pytest.fixture(scope="module")
def mdb(spark, tmp_path_factory):
    """One warehouse for the whole module (hypothesis examples each create their own arrays)."""
    return arrayviews.connect(str(tmp_path_factory.mktemp("reads") / "warehouse"), spark=spark)


def fresh(db, case: ArrayCase):
    """Write the case into a new array; returns it and, per reference cell, the version that wrote it."""
    return write_case(db, f"R{next(_names)}", case), written_versions(case)


DEFAULT_FILL = {"int32": 0, "int64": 0, "float32": np.nan, "float64": np.nan, "bool": False}
EXPLICIT_FILL = {"int32": -7, "int64": -7, "float32": -7.5, "float64": -7.5, "bool": True}


# -- helpers checking one read path against the reference ------------------------------------------


def exact_frame(table: pa.Table) -> pd.DataFrame:
    """The pandas frame of a cell table with exact integers: an integer column holding nulls as
    pandas' nullable integer dtype of its width, built from the Python values."""
    frame = table.to_pandas()
    for index, field in enumerate(table.schema):
        column = table.column(index)
        if pa.types.is_integer(field.type) and column.null_count:
            dtype = pd.api.types.pandas_dtype(str(field.type).replace("int", "Int").replace("uInt", "UInt"))
            frame.isetitem(index, pd.array(column.to_pylist(), dtype=dtype))
    return frame


def check_to_arrow_and_pandas(array, cells: Cells) -> None:
    expected = cells.arrow()
    actual = array.to_arrow()
    assert_tables_equal(actual, expected)
    for attr in cells.attrs:
        assert actual.schema.field(attr.name).nullable or not attr.nullable
    frame = array.to_pandas()
    pd.testing.assert_frame_equal(frame, exact_frame(expected), check_dtype=True)
    assert list(frame.columns) == [*cells.dim_names, *cells.attr_names]
    unsorted = array.to_arrow(sort=False)
    assert_tables_equal(unsorted.sort_by([(d, "ascending") for d in cells.dim_names]), expected)


def check_to_numpy(array, cells: Cells) -> None:
    for attr in cells.attrs:
        dtype = NUMPY[attr.type]
        # Default fill: NaN / 0 / False by type, in the attribute's own dtype.
        expected, missing = cells.dense(attr.name, DEFAULT_FILL[attr.type])
        actual = array.to_numpy(attr.name)
        assert actual.shape == cells.shape
        assert actual.dtype == dtype, f"{attr.name}: dtype {actual.dtype}, expected {dtype}"
        np.testing.assert_array_equal(actual, expected)
        # Explicit fill.
        fill = EXPLICIT_FILL[attr.type]
        expected, _ = cells.dense(attr.name, fill)
        actual = array.to_numpy(attr.name, fill=fill)
        np.testing.assert_array_equal(actual, expected)
        # Masked: the mask marks empty and null cells; the other cells hold the values.
        masked = array.to_numpy(attr.name, masked=True)
        assert isinstance(masked, np.ma.MaskedArray)
        np.testing.assert_array_equal(np.ma.getmaskarray(masked), missing)
        values, _ = cells.dense(attr.name, DEFAULT_FILL[attr.type])
        np.testing.assert_array_equal(np.asarray(masked.data)[~missing], values[~missing])


def check_count(array, cells: Cells) -> None:
    assert array.count() == cells.n


def reference_chunks(cells: Cells, versions: np.ndarray | None = None) -> dict[tuple, dict]:
    """Per chunk (floor((x - low) / chunk_length) per dimension): cells, bounds, min/max ignoring NaN
    and nulls (None where the chunk has no such value), newest version of its cells."""
    numbers = chunk_numbers(cells.coords, cells.dims)
    out: dict[tuple, dict] = {}
    for key in sorted({tuple(int(x) for x in row) for row in numbers}):
        rows = np.all(numbers == np.array(key), axis=1)
        entry = {"cells": int(rows.sum())}
        for k, dim in enumerate(cells.dims):
            start = dim.low + key[k] * dim.chunk
            entry[f"{dim.name}_low"] = start
            entry[f"{dim.name}_high"] = min(start + dim.chunk - 1, dim.high)
        for attr in cells.attrs:
            values = cells.values[attr.name][rows & ~cells.nulls[attr.name]]
            if values.dtype.kind == "f":
                values = values[~np.isnan(values)]
            entry[f"{attr.name}_min"] = values.min().item() if len(values) else None
            entry[f"{attr.name}_max"] = values.max().item() if len(values) else None
        if versions is not None:
            entry["version"] = int(versions[rows].max())
        out[key] = entry
    return out


def check_chunks(array, cells: Cells, versions: np.ndarray | None = None) -> None:
    stats = array.chunks()
    expected = reference_chunks(cells, versions)
    assert len(stats) == len(expected)
    for column in [*cells.dim_names, "cells", "bytes", "fragments", "version"]:
        assert column in stats.columns
    if not expected:
        return
    assert (stats["bytes"] > 0).all()
    assert (stats["fragments"] >= 1).all()
    assert int(stats["cells"].sum()) == cells.n
    for row in stats.to_dict("records"):
        key = tuple(int(row[d]) for d in cells.dim_names)
        assert key in expected, f"chunk {key} is not in the reference chunks {sorted(expected)}"
        entry = expected[key]
        for name, value in entry.items():
            got = row[name]
            if value is None:
                assert got is None or pd.isna(got), f"chunk {key} {name}: {got!r}, expected null"
            else:
                assert got == value, f"chunk {key} {name}: {got!r}, expected {value!r}"


def check_xarray(array, cells: Cells) -> None:
    dataset = array.to_xarray()
    assert tuple(dataset.sizes) == cells.dim_names or set(dataset.sizes) == set(cells.dim_names)
    for dim in cells.dims:
        np.testing.assert_array_equal(dataset.coords[dim.name].values, np.arange(dim.low, dim.high + 1))
    assert list(dataset.data_vars) == list(cells.attr_names)
    for attr in cells.attrs:
        variable = dataset[attr.name]
        assert variable.dims == cells.dim_names
        values, missing = cells.dense(attr.name, DEFAULT_FILL[attr.type])
        expected = values.astype(np.float64)
        expected[missing] = np.nan
        if missing.any():  # NaN marks empty cells: integers and bools become float64
            assert variable.dtype.kind == "f"
        else:  # every cell present: the attribute's own dtype, exactly
            assert variable.dtype == np.dtype(attr.type if attr.type != "bool" else np.bool_)
            np.testing.assert_array_equal(variable.values, values)
        np.testing.assert_array_equal(variable.values.astype(np.float64), expected)


def check_to_spark(array, cells: Cells) -> None:
    frame = array.to_spark()
    assert frame.columns == [*cells.dim_names, *cells.attr_names]
    expected = cells.arrow()
    rows = frame.collect()
    columns = {
        name: pa.array([row[name] for row in rows], expected.schema.field(name).type)
        for name in expected.column_names
    }
    actual = pa.table(columns)
    if actual.num_rows:
        actual = actual.sort_by([(d, "ascending") for d in cells.dim_names])
    assert_tables_equal(actual, expected)


# -- property tests ----------------------------------------------------------------------------------


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=array_cases())
def test_stored_reads_match_reference(mdb, case: ArrayCase) -> None:
    """Every local read path of a stored array, for random schemas, densities and write paths."""
    array, versions = fresh(mdb, case)
    cells = case.cells
    check_count(array, cells)
    check_to_arrow_and_pandas(array, cells)
    check_to_numpy(array, cells)
    check_chunks(array, cells, versions)
    check_xarray(array, cells)


@pytest.mark.slow
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=array_cases(densities=("very_sparse", "half", "full")))
def test_to_spark_matches_reference(mdb, case: ArrayCase) -> None:
    array, _ = fresh(mdb, case)
    check_to_spark(array, case.cells)


# -- fixed cases ------------------------------------------------------------------------------------

# 11 x 5 cells in chunks of 4 x 3: neither extent is a multiple of its chunk length.
ODD_DIMS = (Dim("i", -3, 7, 4), Dim("j", 2, 6, 3))
MIXED_ATTRS = (Attr("v", "float64"), Attr("r", "int32"), Attr("b", "bool"), Attr("f", "float32"))


def test_dense_array_with_partial_edge_chunks(mdb) -> None:
    cells = make_cells(ODD_DIMS, MIXED_ATTRS, seed=1, density=1.0, nan=False)
    array, versions = fresh(mdb, ArrayCase(cells, "dense"))
    check_count(array, cells)
    check_to_numpy(array, cells)
    check_to_arrow_and_pandas(array, cells)
    check_chunks(array, cells, versions)
    stats = array.chunks().sort_values(["i", "j"])
    # Chunks of 4 x 3 over 11 x 5 cells: edge chunks are cut to 3 rows and 2 columns.
    assert stats["cells"].tolist() == [12, 8, 12, 8, 9, 6]
    assert stats["i_high"].tolist() == [0, 0, 4, 4, 7, 7]


def test_sparse_array_with_empty_chunks(mdb) -> None:
    # Cells only in chunks (0, 0) and (2, 1); chunks (0, 1), (1, *), (2, 0) stay empty.
    coords = np.array([[-3, 2], [-1, 4], [0, 3], [5, 5], [7, 6]])
    cells = Cells(
        ODD_DIMS,
        (Attr("v", "float64"), Attr("n", "int64", nullable=True)),
        coords,
        {"v": np.array([0.5, np.nan, -2.0, 3.25, 1e300]), "n": np.array([1, 0, 3, 0, -5])},
        {"n": np.array([False, True, False, True, False])},
    )
    array, versions = fresh(mdb, ArrayCase(cells, "insert"))
    check_count(array, cells)
    check_to_numpy(array, cells)
    check_to_arrow_and_pandas(array, cells)
    check_chunks(array, cells, versions)
    check_xarray(array, cells)
    stats = array.chunks()
    assert sorted(zip(stats["i"], stats["j"], strict=True)) == [(0, 0), (2, 1)]
    assert stats.set_index(["i", "j"]).loc[(0, 0), "v_max"] == 0.5  # NaN ignored in min/max


def test_empty_array_reads(mdb) -> None:
    dims = (Dim("i", -2, 4, 3), Dim("j", 0, 2, 2))
    cells = make_cells(dims, MIXED_ATTRS, seed=3, density=0.0)
    array, _ = fresh(mdb, ArrayCase(cells, "insert"))
    assert array.count() == 0
    check_to_numpy(array, cells)
    check_to_arrow_and_pandas(array, cells)
    frame = array.to_pandas()
    assert frame.empty
    assert frame.dtypes.to_dict() == {
        "i": np.dtype(np.int64),
        "j": np.dtype(np.int64),
        "v": np.dtype(np.float64),
        "r": np.dtype(np.int32),
        "b": np.dtype(np.bool_),
        "f": np.dtype(np.float32),
    }
    assert array.chunks().empty
    check_xarray(array, cells)


def test_nullable_attributes_in_reads(mdb) -> None:
    dims = (Dim("i", 0, 4, 2),)
    attrs = (Attr("a", "int32", True), Attr("b", "bool", True), Attr("c", "float64", True))
    cells = Cells(
        dims,
        attrs,
        np.array([[0], [1], [3]]),
        {"a": np.array([5, 0, -1]), "b": np.array([True, False, False]), "c": np.array([np.nan, 0.0, 2.5])},
        {
            "a": np.array([False, True, False]),
            "b": np.array([False, False, True]),
            "c": np.array([False, True, False]),
        },
    )
    array, _ = fresh(mdb, ArrayCase(cells, "insert"))
    table = array.to_arrow()
    assert table.column("a").to_pylist() == [5, None, -1]
    assert table.column("b").to_pylist() == [True, False, None]
    c = table.column("c").to_pylist()
    assert np.isnan(c[0]) and c[1:] == [None, 2.5]  # NaN is a value, null is not
    check_to_numpy(array, cells)
    masked = array.to_numpy("c", masked=True)
    assert np.ma.getmaskarray(masked).tolist() == [False, True, True, False, True]
    np.testing.assert_array_equal(array.to_numpy("a", fill=-9), [5, -9, -9, -1, -9])
    frame = array.to_pandas()
    assert frame["a"].isna().tolist() == [False, True, False]
    check_chunks(array, cells)
    check_xarray(array, cells)


def test_to_numpy_needs_attribute_name_when_several(mdb) -> None:
    cells = make_cells(ODD_DIMS, MIXED_ATTRS, seed=5, density=0.5)
    array, _ = fresh(mdb, ArrayCase(cells, "insert"))
    with pytest.raises(ValidationError):
        array.to_numpy()
    with pytest.raises(arrayviews.SchemaError):
        array.to_numpy("nope")
    single = make_cells((Dim("i", 1, 5, 2),), (Attr("v", "int64"),), seed=6, density=0.5)
    one, _ = fresh(mdb, ArrayCase(single, "insert"))
    np.testing.assert_array_equal(one.to_numpy(), single.dense("v", 0)[0])


def test_reads_of_earlier_version(mdb) -> None:
    dims = (Dim("i", 0, 9, 4),)
    first = Cells(dims, (Attr("v", "int64"),), np.array([[0], [5]]), {"v": np.array([1, 2])})
    second = Cells(dims, (Attr("v", "int64"),), np.array([[5], [9]]), {"v": np.array([20, 30])})
    array, _ = fresh(mdb, ArrayCase(first, "insert"))
    array.insert(second.arrow(), on_conflict="replace")
    old = array.at_version(1)
    check_to_arrow_and_pandas(old, first)
    check_to_numpy(old, first)
    check_count(old, first)
    now = Cells(dims, (Attr("v", "int64"),), np.array([[0], [5], [9]]), {"v": np.array([1, 20, 30])})
    check_to_arrow_and_pandas(array, now)
    check_chunks(array, now, np.array([1, 2, 2]))


def test_reads_of_computed_array(mdb) -> None:
    """to_numpy, to_pandas, count, chunks and to_xarray of an operator result (run by Spark)."""
    cells = make_cells(ODD_DIMS, (Attr("v", "float64"), Attr("r", "int32")), seed=7, density=0.6)
    array, _ = fresh(mdb, ArrayCase(cells, "dense"))
    box = {"i": (-1, 5), "j": (3, 6)}
    result = array.subarray(**box)
    dims = (Dim("i", -1, 5, 4), Dim("j", 3, 6, 3))
    inside = (cells.coords[:, 0] >= -1) & (cells.coords[:, 0] <= 5) & (cells.coords[:, 1] >= 3)
    expected = cells.take(inside, dims)
    check_to_arrow_and_pandas(result, expected)
    check_count(result, expected)
    values, _ = expected.dense("v", np.nan)
    np.testing.assert_array_equal(result.to_numpy("v"), values)
    # Chunk numbers and bounds of a subarray follow the input's grid (origin -3).
    stats = result.chunks()
    numbers = np.floor_divide(expected.coords - np.array([-3, 2]), np.array([4, 3]))
    keys, counts = np.unique(numbers, axis=0, return_counts=True)
    got = stats.sort_values(["i", "j"])
    assert [tuple(k) for k in keys] == list(zip(got["i"], got["j"], strict=True))
    assert counts.tolist() == got["cells"].tolist()
    assert (got["bytes"] > 0).all()


def test_to_spark_types_and_values(mdb) -> None:
    cells = make_cells(ODD_DIMS, MIXED_ATTRS, seed=8, density=0.5)
    array, _ = fresh(mdb, ArrayCase(cells, "insert"))
    frame = array.to_spark()
    types = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
    assert types == {"i": "bigint", "j": "bigint", "v": "double", "r": "int", "b": "boolean", "f": "float"}
    check_to_spark(array, cells)


def test_to_spark_with_nulls_and_empty_chunks(mdb) -> None:
    dims = (Dim("i", -5, 6, 5), Dim("j", 0, 3, 3))
    attrs = (Attr("a", "int64", True), Attr("b", "bool", True))
    cells = make_cells(dims, attrs, seed=9, density=0.5, empty_chunks=True)
    array, _ = fresh(mdb, ArrayCase(cells, "insert", batches=2, seed=9))
    check_to_spark(array, cells)


@pytest.mark.parametrize("write", ["dense", "insert"])
@pytest.mark.parametrize("density", [0.04, 0.5, 1.0])
def test_three_dimensional_reads(mdb, write: str, density: float) -> None:
    dims = (Dim("i", -4, 1, 4), Dim("j", 10, 14, 2), Dim("k", -1, 1, 5))
    attrs = (Attr("v", "float32"), Attr("w", "int64", nullable=True))
    cells = make_cells(dims, attrs, seed=11, density=density, nulls=write == "insert")
    array, versions = fresh(mdb, ArrayCase(cells, write))
    check_count(array, cells)
    check_to_numpy(array, cells)
    check_to_arrow_and_pandas(array, cells)
    check_chunks(array, cells, versions)
    check_xarray(array, cells)


@settings(max_examples=10, deadline=None)
@given(fill=st.sampled_from([-1, 0, 7, 2.5, np.nan]))
def test_explicit_fill_of_int_attribute(mdb, fill) -> None:
    cells = make_cells((Dim("i", 0, 6, 3),), (Attr("a", "int32", True),), seed=12, density=0.5)
    array, _ = fresh(mdb, ArrayCase(cells, "insert"))
    expected, _ = cells.dense("a", fill)
    np.testing.assert_array_equal(array.to_numpy("a", fill=fill), expected)


@pytest.mark.parametrize("masked", [False, True])
def test_to_numpy_of_full_array_written_in_two_batches(mdb, masked: bool) -> None:
    """Every cell present, but each chunk split over two half-full fragments (dense with a mask)."""
    dims = (Dim("i", 0, 1, 1), Dim("j", 0, 1, 2))
    attrs = (Attr("v", "int32"),)
    cells = Cells(dims, attrs, np.array([[0, 0], [0, 1], [1, 0], [1, 1]]), {"v": np.array([-3, 32, 15, 42])})
    array = mdb.create_array(cells.schema_text(f"R{next(_names)}"))
    array.insert(cells.take(np.array([0, 3])).arrow())
    array.insert(cells.take(np.array([1, 2])).arrow())
    assert (array.chunks()["fragments"] == 2).all()
    actual = array.to_numpy("v", masked=masked)
    np.testing.assert_array_equal(np.ma.getdata(actual), [[-3, 32], [15, 42]])
    if masked:
        assert not np.ma.getmaskarray(actual).any()
