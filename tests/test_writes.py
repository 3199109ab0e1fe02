"""Writes: every input format into insert/load/write_dense, nullable/NaN/bool/int32 values, sparse
arrays, conflicts and replace, deletes of cells and boxes; each compared to reference cells."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arrayviews.model.errors import ConflictError

SCHEMA = "A<r:int64, s:float64>[i=1:20:4; j=1:15:6]"
DIMS = ["i", "j"]


# -- helpers -----------------------------------------------------------------------------------------
def reference_cells(n: int = 40, seed: int = 1, low=(1, 1), shape=(20, 15)) -> pd.DataFrame:
    """``n`` distinct random cells of SCHEMA (sorted), with a few NaN values in ``s``."""
    rng = np.random.default_rng(seed)
    flat = np.sort(rng.choice(shape[0] * shape[1], size=n, replace=False))
    i, j = np.unravel_index(flat, shape)
    s = np.round(rng.normal(size=n), 6)
    s[[1, n // 2]] = np.nan
    return pd.DataFrame(
        {
            "i": (i + low[0]).astype(np.int64),
            "j": (j + low[1]).astype(np.int64),
            "r": rng.integers(-1000, 1000, size=n).astype(np.int64),
            "s": s,
        }
    )


def sorted_cells(frame: pd.DataFrame, dims=DIMS) -> pd.DataFrame:
    return frame.sort_values(list(dims), kind="stable").reset_index(drop=True)


def assert_cells(array, expected: pd.DataFrame, dims=DIMS) -> None:
    """The array's cells (to_pandas) equal ``expected`` exactly (NaN equals NaN), whatever the order."""
    actual = array.to_pandas()
    pd.testing.assert_frame_equal(actual, sorted_cells(expected, dims), check_dtype=True)
    assert array.count() == len(expected)


def python_rows(frame: pd.DataFrame) -> list[tuple]:
    """Rows as Python values (pd.NA -> None; NaN stays NaN) for spark.createDataFrame."""
    return [
        tuple(None if x is pd.NA else (x.item() if hasattr(x, "item") else x) for x in row)
        for row in frame.itertuples(index=False, name=None)
    ]


def spark_frame(spark, frame: pd.DataFrame, ddl: str):
    # From Python rows with a schema: spark.createDataFrame(pandas) would turn NaN into null (Arrow).
    return spark.createDataFrame(python_rows(frame), ddl)


def as_format(spark, frame: pd.DataFrame, fmt: str, ddl: str = "i long, j long, r long, s double"):
    if fmt == "pandas":
        return frame
    if fmt == "arrow_table":
        return pa.table({name: pa.array(frame[name].to_numpy()) for name in frame.columns})
    if fmt == "record_batch":
        return pa.RecordBatch.from_arrays(
            [pa.array(frame[name].to_numpy()) for name in frame.columns], names=list(frame.columns)
        )
    if fmt == "dict":
        return {name: frame[name].to_numpy() for name in frame.columns}
    if fmt == "spark":
        return spark_frame(spark, frame, ddl)
    raise AssertionError(fmt)


FORMATS = ["pandas", "arrow_table", "record_batch", "dict", "spark"]


# -- insert from every format ----------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", FORMATS)
def test_insert_round_trip(db, fmt: str) -> None:
    array = db.create_array(SCHEMA)
    expected = reference_cells()
    result = array.insert(as_format(db.spark, expected, fmt))
    assert (result.array, result.operation, result.version, result.committed) == ("A", "insert", 1, True)
    assert (result.cells_added, result.cells_removed) == (40, 0)
    assert "40 cell(s)" in str(result) and "version 1" in str(result)
    assert_cells(array, expected)
    assert array.version == 1
    # NaN is a stored value: the cell is present (not masked) and reads back as NaN.
    s = array.to_numpy("s", masked=True)
    for row in expected[expected["s"].isna()].itertuples():
        assert not s.mask[row.i - 1, row.j - 1]
        assert np.isnan(s.data[row.i - 1, row.j - 1])


def test_insert_unsorted_batch_in_several_calls(db) -> None:
    array = db.create_array(SCHEMA)
    expected = reference_cells(60, seed=2)
    shuffled = expected.sample(frac=1.0, random_state=3).reset_index(drop=True)
    for part in np.array_split(np.arange(60), 3):
        array.insert(shuffled.iloc[part].reset_index(drop=True))
    assert array.version == 3
    assert_cells(array, expected)


@pytest.mark.parametrize("fmt", ["parquet", "parquet_folder", "csv"])
def test_load_round_trip(db, tmp_path: Path, fmt: str) -> None:
    array = db.create_array(SCHEMA)
    expected = reference_cells(seed=4)
    if fmt == "csv":
        path = tmp_path / "cells.csv"
        expected.to_csv(path, index=False, na_rep="NaN")
    else:
        # pyarrow from numpy keeps NaN as a value (pandas.to_parquet would write nulls).
        table = pa.table({name: pa.array(expected[name].to_numpy()) for name in expected.columns})
        if fmt == "parquet":
            path = tmp_path / "cells.parquet"
            pq.write_table(table, path)
        else:
            path = tmp_path / "cells"
            path.mkdir()
            pq.write_table(table.slice(0, 15), path / "part-0.parquet")
            pq.write_table(table.slice(15), path / "part-1.parquet")
    result = array.load(str(path))
    assert (result.operation, result.version, result.cells_added, result.committed) == ("load", 1, 40, True)
    assert array.versions()["operation"].tolist() == ["load"]
    assert_cells(array, expected)


# -- write_dense -------------------------------------------------------------------------------------
DENSE_LAYOUTS = {
    # schema, block shape, origin
    "small-chunks-aligned": ("D<v:float64>[i=0:9:4; j=0:11:5]", (10, 12), None),
    "unaligned-many-chunks": ("D<v:float64>[i=0:99:10; j=0:99:10]", (35, 47), (13, 28)),
    "whole-array-64-chunks": ("D<v:float64>[i=0:63:8; j=0:63:8]", (64, 64), None),
    "negative-origin": ("D<v:float64>[i=-10:9:6; j=-3:20:5]", (13, 9), (-8, 2)),
    "3d-unaligned": ("D<v:float64>[i=1:30:7; j=1:20:9; k=0:9:10]", (17, 11, 6), (5, 3, 2)),
}


@pytest.mark.parametrize("masked", [False, True], ids=["plain", "masked"])
@pytest.mark.parametrize("layout", list(DENSE_LAYOUTS))
def test_write_dense_round_trip(db, layout: str, masked: bool) -> None:
    text, shape, origin = DENSE_LAYOUTS[layout]
    array = db.create_array(text)
    rng = np.random.default_rng(len(layout))
    block = rng.normal(size=shape)
    if masked:
        mask = rng.random(shape) < 0.3
        block = np.ma.MaskedArray(block, mask=mask)
    result = array.write_dense(block, origin=origin)
    present = ~np.ma.getmaskarray(block)
    assert (result.operation, result.version, result.committed) == ("write_dense", 1, True)
    assert result.cells_added == int(present.sum()) == array.count()

    lows = [d.low for d in array.schema.dimensions]
    start = lows if origin is None else origin
    window = tuple(slice(o - lo, o - lo + n) for o, lo, n in zip(start, lows, shape, strict=True))
    expected = np.full(array.schema.shape, np.nan)
    expected_present = np.zeros(array.schema.shape, dtype=bool)
    expected[window] = np.ma.filled(block, np.nan)
    expected_present[window] = present
    got = array.to_numpy(masked=True)
    np.testing.assert_array_equal(~np.ma.getmaskarray(got), expected_present)
    np.testing.assert_array_equal(array.to_numpy(), expected)


def test_write_dense_multiple_attributes_and_int32(db) -> None:
    array = db.create_array("M<r:int64, s:float64, b:bool>[i=1:12:5; j=1:9:4]")
    rng = np.random.default_rng(5)
    r = rng.integers(-100, 100, size=(6, 7)).astype(np.int32)  # int32 into int64 is allowed
    s = rng.normal(size=(6, 7))
    s[2, 3] = np.nan
    b = rng.random((6, 7)) < 0.5
    result = array.write_dense({"r": r, "s": s, "b": b}, origin=(4, 2))
    assert result.cells_added == 42
    window = (slice(3, 9), slice(1, 8))
    full_r = array.to_numpy("r", masked=True)
    assert full_r.dtype == np.int64
    assert int((~np.ma.getmaskarray(full_r)).sum()) == 42
    np.testing.assert_array_equal(full_r[window].data, r.astype(np.int64))
    np.testing.assert_array_equal(array.to_numpy("s")[window], s)
    np.testing.assert_array_equal(array.to_numpy("b")[window], b)
    assert int(array.to_numpy("b").sum()) == int(b.sum())
    cells = array.to_pandas()
    assert list(cells.columns) == ["i", "j", "r", "s", "b"]
    assert cells["b"].dtype == np.bool_ and cells["r"].dtype == np.int64
    one = cells[(cells["i"] == 6) & (cells["j"] == 5)].iloc[0]
    assert np.isnan(one["s"]) and one["r"] == r[2, 3] and one["b"] == b[2, 3]


def test_write_dense_masked_multiple_attributes_keep_union_of_masks_empty(db) -> None:
    array = db.create_array("M<r:int64, s:float64>[i=0:7:3; j=0:7:3]")
    r = np.ma.MaskedArray(np.arange(64).reshape(8, 8), mask=np.eye(8, dtype=bool))
    s = np.ma.MaskedArray(np.ones((8, 8)), mask=np.fliplr(np.eye(8, dtype=bool)))
    array.write_dense({"r": r, "s": s})
    present = ~(np.eye(8, dtype=bool) | np.fliplr(np.eye(8, dtype=bool)))
    assert array.count() == int(present.sum())
    got = array.to_numpy("r", masked=True)
    np.testing.assert_array_equal(~np.ma.getmaskarray(got), present)
    np.testing.assert_array_equal(got.data[present], np.arange(64).reshape(8, 8)[present])


# -- value kinds ---------------------------------------------------------------------------------------
NULLABLE = "N<r:int64 NULL, s:float64>[i=1:6:2; j=1:8:3]"


@pytest.mark.parametrize("fmt", ["pandas", "arrow_table", "dict_without_column", "spark"])
def test_nullable_attribute(db, fmt: str) -> None:
    array = db.create_array(NULLABLE)
    i = np.array([1, 2, 3, 5, 6], dtype=np.int64)
    j = np.array([1, 4, 8, 2, 7], dtype=np.int64)
    r = [10, None, 30, None, 50]
    s = np.array([0.5, 1.5, np.nan, 3.5, 4.5])
    if fmt == "pandas":
        batch = pd.DataFrame({"i": i, "j": j, "r": pd.array(r, dtype="Int64"), "s": s})
    elif fmt == "arrow_table":
        batch = pa.table({"i": i, "j": j, "r": pa.array(r, pa.int64()), "s": pa.array(s)})
    elif fmt == "dict_without_column":
        batch = {"i": i, "j": j, "s": s}
        r = [None] * 5
    else:
        frame = pd.DataFrame({"i": i, "j": j, "r": pd.array(r, dtype="Int64"), "s": s})
        batch = spark_frame(db.spark, frame, "i long, j long, r long, s double")
    assert array.insert(batch).cells_added == 5
    table = array.to_arrow()
    assert table.column("r").to_pylist() == r
    values = table.column("s").to_numpy()
    np.testing.assert_array_equal(values, s)
    assert table.column("s").null_count == 0
    masked = array.to_numpy("r", masked=True)
    # empty cells and null cells are both masked; cells with a value are not
    assert int((~np.ma.getmaskarray(masked)).sum()) == sum(x is not None for x in r)


def test_bool_attribute(db) -> None:
    array = db.create_array("B<flag:bool, v:float64>[i=1:10:4; j=1:10:4]")
    expected = pd.DataFrame(
        {
            "i": np.array([1, 2, 5, 9, 10], dtype=np.int64),
            "j": np.array([10, 3, 5, 1, 10], dtype=np.int64),
            "flag": np.array([True, False, True, False, True]),
            "v": np.array([1.0, 2.0, 3.0, np.nan, 5.0]),
        }
    )
    array.insert(expected)
    assert_cells(array, expected)
    flags = array.to_numpy("flag")
    assert flags.dtype == np.bool_ and int(flags.sum()) == 3 and flags[0, 9] and not flags[1, 2]


def test_int32_columns_into_int64(db) -> None:
    array = db.create_array(SCHEMA)
    expected = reference_cells(10, seed=6)
    batch = expected.astype({"i": np.int32, "j": np.int32, "r": np.int32})
    array.insert(batch)
    assert_cells(array, expected)
    more = reference_cells(8, seed=7, low=(1, 1))
    more = more[~more.set_index(DIMS).index.isin(expected.set_index(DIMS).index)]
    frame = spark_frame(db.spark, more, "i int, j int, r int, s float")
    array.insert(frame)
    combined = pd.concat([expected, more.astype({"s": np.float32}).astype({"s": np.float64})])
    assert_cells(array, combined)


def test_very_sparse_3d_array(db) -> None:
    array = db.create_array("S<v:float64>[x=0:99999:1000; y=0:99999:1000; z=0:99999:1000]")
    rng = np.random.default_rng(8)
    coords = np.unique(rng.integers(0, 100_000, size=(300, 3)), axis=0)
    expected = pd.DataFrame(
        {"x": coords[:, 0], "y": coords[:, 1], "z": coords[:, 2], "v": rng.normal(size=len(coords))}
    )
    array.insert(expected.iloc[:250])
    array.insert(spark_frame(db.spark, expected.iloc[250:], "x long, y long, z long, v double"))
    assert_cells(array, expected, dims=["x", "y", "z"])
    chunks = array.chunks()
    assert int(chunks["cells"].sum()) == len(expected)
    assert len(chunks) == len({tuple(c // 1000) for c in coords})
    box = expected[(expected.x.between(20_000, 60_000)) & (expected.z.between(0, 49_999))]
    sub = array.subarray(x=(20_000, 60_000), z=(0, 49_999))
    pd.testing.assert_frame_equal(sub.to_pandas(), sorted_cells(box, ["x", "y", "z"]))


# -- conflicts and replace --------------------------------------------------------------------------
def test_insert_existing_cells_is_a_conflict(db) -> None:
    array = db.create_array(SCHEMA)
    existing = reference_cells()
    array.insert(existing)
    before = array.versions()
    batch = pd.DataFrame({"i": [20, 3, 20], "j": [15, 1, 14], "r": [1, 2, 3], "s": [1.0, 2.0, 3.0]})
    clash = existing.iloc[[5, 17]][["i", "j"]]
    batch = pd.concat([batch, clash.assign(r=7, s=7.0)]).drop_duplicates(DIMS, keep="last")
    batch = batch.reset_index(drop=True)
    with pytest.raises(ConflictError) as raised:
        array.insert(batch)
    error = raised.value
    assert error.array == "A" and "array A" in str(error)
    clashing = {tuple(x) for x in clash.to_numpy()}
    assert tuple(error.value) in clashing
    i, j = error.value
    assert f"(i={i}, j={j})" in str(error)
    assert "on_conflict='replace'" in str(error)
    pd.testing.assert_frame_equal(array.versions(), before)
    assert_cells(array, existing)


@pytest.mark.parametrize("fmt", ["pandas", "spark"])
def test_replace_overwrites_values_and_keeps_count(db, fmt: str) -> None:
    array = db.create_array(SCHEMA)
    existing = reference_cells()
    array.insert(existing)
    replacement = existing.iloc[::4].assign(r=lambda f: f["r"] + 5000, s=99.5).reset_index(drop=True)
    result = array.insert(as_format(db.spark, replacement, fmt), on_conflict="replace")
    assert (result.cells_added, result.cells_removed, result.version) == (
        len(replacement),
        len(replacement),
        2,
    )
    expected = existing.set_index(DIMS)
    expected.update(replacement.set_index(DIMS))
    expected = expected.reset_index().astype({"r": np.int64})
    assert_cells(array, expected)
    row = array.versions().iloc[-1]
    assert (row["operation"], row["cells_total"]) == ("insert", 40)


@pytest.mark.parametrize("fmt", ["pandas", "spark"])
def test_replace_with_partially_overlapping_batches(db, fmt: str) -> None:
    array = db.create_array(SCHEMA)
    model: dict[tuple[int, int], tuple[int, float]] = {}
    rng = np.random.default_rng(9)
    for step in range(3):
        cells = rng.choice(20 * 15, size=30, replace=False)
        i, j = np.unravel_index(cells, (20, 15))
        batch = pd.DataFrame(
            {"i": i + 1, "j": j + 1, "r": np.full(30, step, np.int64), "s": rng.normal(size=30)}
        ).astype({"i": np.int64, "j": np.int64})
        overlap = sum((a, b) in model for a, b in zip(batch.i, batch.j, strict=True))
        result = array.insert(as_format(db.spark, batch, fmt), on_conflict="replace")
        assert (result.cells_added, result.cells_removed) == (30, overlap)
        for row in batch.itertuples():
            model[(row.i, row.j)] = (row.r, row.s)
        assert array.versions().iloc[-1]["cells_total"] == len(model)
    expected = pd.DataFrame(
        [(a, b, r, s) for (a, b), (r, s) in model.items()], columns=["i", "j", "r", "s"]
    ).astype({"i": np.int64, "j": np.int64, "r": np.int64})
    assert_cells(array, expected)


def test_write_dense_replace_over_sparse_cells(db) -> None:
    array = db.create_array("D<v:float64>[i=0:19:5; j=0:19:5]")
    array.insert(pd.DataFrame({"i": [0, 7, 19], "j": [0, 8, 19], "v": [1.0, 2.0, 3.0]}))
    with pytest.raises(ConflictError, match=r"\(i=7, j=8\)"):
        array.write_dense(np.zeros((10, 10)), origin=(5, 5))
    result = array.write_dense(np.zeros((10, 10)), origin=(5, 5), on_conflict="replace")
    assert (result.cells_added, result.cells_removed) == (100, 1)
    got = array.to_numpy()
    assert got[7, 8] == 0.0 and got[0, 0] == 1.0 and got[19, 19] == 3.0
    assert array.count() == 102


# -- deletes --------------------------------------------------------------------------------------------
def test_delete_cells_including_absent_ones(db) -> None:
    array = db.create_array(SCHEMA)
    existing = reference_cells()
    array.insert(existing)
    present = existing.iloc[[0, 7, 8, 30]][DIMS]
    occupied = set(map(tuple, existing[DIMS].to_numpy()))
    absent = [(a, b) for a in range(1, 21) for b in range(1, 16) if (a, b) not in occupied][:3]
    batch = pd.concat([present, pd.DataFrame(absent, columns=DIMS)]).reset_index(drop=True)
    result = array.delete(batch)
    assert (result.operation, result.cells_removed, result.cells_added, result.version) == ("delete", 4, 0, 2)
    assert "removed 4 cell(s)" in str(result)
    keep = ~existing.set_index(DIMS).index.isin(present.set_index(DIMS).index)
    assert_cells(array, existing[keep])
    assert array.versions().iloc[-1]["cells_total"] == 36
    # only absent cells: nothing changes and the message says so
    again = array.delete(pd.DataFrame(absent, columns=DIMS))
    assert not again.committed and again.version == 2 and "nothing deleted" in str(again)
    assert array.version == 2


def test_delete_box_partial_and_whole_chunks(db) -> None:
    array = db.create_array("D<v:float64>[i=1:20:4; j=1:15:6]")
    data = np.arange(300, dtype=np.float64).reshape(20, 15)
    array.write_dense(data)
    chunks_before = array.chunks()
    # i 3..12: chunk 0 partly (3-4), chunks 1 and 2 whole; j 4..12: chunk 0 partly, chunk 1 whole
    result = array.delete(box={"i": (3, 12), "j": (4, 12)})
    expected = data.copy()
    expected[2:12, 3:12] = np.nan
    assert result.cells_removed == 10 * 9
    np.testing.assert_array_equal(array.to_numpy(), expected)
    chunks = array.chunks()
    gone = {(1, 1), (2, 1)}  # chunks entirely inside the box hold nothing any more
    assert gone <= set(zip(chunks_before["i"], chunks_before["j"], strict=True))
    assert not gone & set(zip(chunks["i"], chunks["j"], strict=True))
    assert int(chunks["cells"].sum()) == 300 - 90
    # a box over one dimension only spans the whole other dimension
    array.delete(box={"i": (20, 20)})
    expected[19, :] = np.nan
    np.testing.assert_array_equal(array.to_numpy(), expected)
    empty = array.delete(box={"i": (5, 8), "j": (7, 12)})
    assert not empty.committed and "nothing deleted" in str(empty)


def test_delete_then_reinsert(db) -> None:
    array = db.create_array(SCHEMA)
    existing = reference_cells()
    array.insert(existing)
    gone = existing.iloc[[3, 4, 20]].reset_index(drop=True)
    array.delete(gone[DIMS])
    array.delete(box={"i": (1, 4)})
    in_box = existing["i"] <= 4
    back = pd.concat([gone, existing[in_box]]).drop_duplicates(DIMS).assign(r=-1, s=-1.5)
    result = array.insert(back.reset_index(drop=True))  # default on_conflict: no conflict any more
    assert result.cells_added == len(back) and result.cells_removed == 0
    expected = existing.set_index(DIMS)
    expected.update(back.set_index(DIMS))
    assert_cells(array, expected.reset_index().astype({"r": np.int64}))
    assert [v for v in array.versions()["operation"]] == ["insert", "delete", "delete", "insert"]
