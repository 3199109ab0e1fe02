"""The tiled window on Spark (operators/tiles.py): tile plans against brute-force chunk geometry, and
tiled results against exact sums by numpy slicing and the in-process window, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import arrayviews
from arrayviews.execution.spark_engine import SparkEngine
from arrayviews.model.schema_parser import parse_schema
from arrayviews.operators import reads, tiles
from arrayviews.operators import window as window_operator
from arrayviews.operators.source import ComputedSource, StoredSource


def chunk_numbers(low: int, origin: int, length: int, first_cell: int, last_cell: int) -> set[int]:
    """Chunk numbers of the cells first_cell..last_cell clipped to [low, ...] (Python integers)."""
    return {(x - origin) // length for x in range(max(first_cell, low), last_cell + 1)}


@st.composite
def tiling_cases(draw):
    ndim = draw(st.integers(1, 3))
    dims, reach_before, reach_after = [], [], []
    for k in range(ndim):
        low = draw(st.integers(-20, 20))
        extent = draw(st.integers(1, 40 if ndim < 3 else 12))
        length = draw(st.integers(1, 12))
        dims.append((f"d{k}", low, low + extent - 1, length))
        reach_before.append(draw(st.integers(0, 14)))
        reach_after.append(draw(st.integers(0, 14)))
    schema = parse_schema(
        "T<v:int64>[" + "; ".join(f"{n}={lo}:{hi}:{length}" for n, lo, hi, length in dims) + "]"
    )
    counts = [-(-(hi - lo + 1) // length) for _, lo, hi, length in dims]
    present = draw(st.lists(st.booleans(), min_size=int(np.prod(counts)), max_size=int(np.prod(counts))))
    chunks = [c for c, keep in zip(np.ndindex(*counts), present, strict=True) if keep]
    if not chunks:
        chunks = [tuple(0 for _ in counts)]
    tasks = draw(st.integers(1, 9))
    limit = draw(st.sampled_from([10**9, 4000, 300]))
    return schema, dims, chunks, tuple(reach_before), tuple(reach_after), tasks, limit


@settings(max_examples=150, deadline=None)
@given(tiling_cases())
def test_tiles_cover_each_chunk_once_and_read_every_chunk_in_reach(case) -> None:
    schema, dims, chunks, before, after, tasks, limit = case
    import pyarrow as pa

    metadata = pa.table(
        {f"c__{name}": [c[k] for c in chunks] for k, (name, *_rest) in enumerate(dims)}
        | {"n_cells": [1] * len(chunks)}
    )
    planned = tiles.plan(schema, metadata, lambda box: [repr(box)], before, after, tasks, limit, 0.0)
    if planned is None:
        return
    owners: dict[tuple, int] = {}
    for number, tile in enumerate(planned):
        assert tile.uris == (repr(tile.read),)
        read_cells = 1
        for k, (_name, low, high, length) in enumerate(dims):
            first, last = tile.read[k]
            read_cells *= min(high, low + (last + 1) * length - 1) - max(low, low + first * length) + 1
        assert read_cells <= limit
        for chunk in tile.own_chunks():
            if chunk not in set(chunks):
                continue
            assert chunk not in owners, "a chunk in two tiles"
            owners[chunk] = number
            for k, (_name, low, high, length) in enumerate(dims):
                chunk_low = max(low, low + chunk[k] * length)
                chunk_high = min(high, low + (chunk[k] + 1) * length - 1)
                needed = chunk_numbers(
                    low, low, length, chunk_low - before[k], min(high, chunk_high + after[k])
                )
                first, last = tile.read[k]
                assert needed <= set(range(first, last + 1))
    assert set(owners) == set(chunks)
    if limit == 10**9 and len(chunks) == np.prod([-(-(hi - lo + 1) // n) for _, lo, hi, n in dims]):
        assert len(planned) >= min(tasks, len(chunks)) or len(planned) == len(chunks)


def exact_windows(present: np.ndarray, values: np.ndarray, before, after):
    """Count and exact (Python integer) sum of the present cells in every cell's window."""
    pad = [(b, a) for b, a in zip(before, after, strict=True)]
    padded_present, padded_values = np.pad(present, pad), np.pad(values, pad)
    count = np.zeros(present.shape, np.int64)
    total = np.zeros(present.shape, object)
    for di in range(before[0] + after[0] + 1):
        for dj in range(before[1] + after[1] + 1):
            box = (slice(di, di + present.shape[0]), slice(dj, dj + present.shape[1]))
            count += padded_present[box]
            total += (padded_values[box] * padded_present[box]).astype(object)
    return count, total


def tiled(array, spark, extents, *calls) -> ComputedSource:
    """The window of a stored array computed by the tiled Spark path itself (asserted taken)."""
    source = array.source
    assert isinstance(source, StoredSource)
    schema = source.schema
    engine = SparkEngine(spark)
    job = window_operator.WindowJob.of(schema, extents, calls)
    data = window_operator._tiled_window(source, engine, job)
    assert data is not None, "the tiled path was not taken"
    return ComputedSource(job.out_schema, data, engine=engine)


CASES = {
    # name: (schema, shape, fill fraction, window extents [b0, a0, b1, a1])
    "clipped edge chunks": ("G<v:int64>[i=0:66:10; j=0:60:8]", (67, 61), 0.9, [2, 1, 1, 3]),
    "reach over two chunks": ("R<v:int64>[i=0:39:5; j=0:29:4]", (40, 30), 0.8, [7, 0, 0, 6]),
    "one dense half, sparse other half": ("H<v:int64>[i=0:99:10; j=0:99:10]", (100, 100), None, [1, 1, 2, 2]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_tiled_window_equals_exact_sums_and_the_in_process_window(spark, tmp_path, name) -> None:
    schema_text, shape, fill, extents = CASES[name]
    rng = np.random.default_rng(len(name))
    if fill is None:  # a sparse neighbourhood inside a tile: the task falls back to the exchange
        present = np.zeros(shape, bool)
        present[:, : shape[1] // 2] = True
        present[rng.integers(0, shape[0], 6), rng.integers(shape[1] // 2, shape[1], 6)] = True
    else:
        present = rng.random(shape) < fill
    values = rng.integers(-(10**12), 10**12, shape)
    db = arrayviews.connect(str(tmp_path / "warehouse"), spark=spark, execution="spark")
    array = db.create_array(schema_text)
    half = shape[0] // 2
    # two writes: chunks of the second half of the rows hold fragments of both
    array.write_dense(np.ma.MaskedArray(values, mask=~present | (np.arange(shape[0])[:, None] >= half + 3)))
    rest = np.argwhere(present & (np.arange(shape[0])[:, None] >= half + 3))
    names = array.schema.dimension_names
    array.insert({names[0]: rest[:, 0], names[1]: rest[:, 1], "v": values[tuple(rest.T)]})
    before, after = (extents[0], extents[2]), (extents[1], extents[3])
    calls = ("count(*)", "sum(v)", "avg(v)")
    frame = reads.to_pandas(tiled(array, spark, extents, *calls), True)
    count, total = exact_windows(present, values, before, after)
    np.testing.assert_array_equal(frame[list(names)].to_numpy(), np.argwhere(present))
    np.testing.assert_array_equal(frame["count"].to_numpy(), count[present])
    assert frame["v_sum"].tolist() == total[present].tolist()
    local = arrayviews.connect(db.warehouse.location, spark=spark, execution="local")
    in_process = local.array(array.name).window(extents, *calls).to_pandas()
    public = array.window(extents, *calls).to_pandas()
    for column in in_process.columns:
        np.testing.assert_array_equal(frame[column].to_numpy(), in_process[column].to_numpy(), err_msg=column)
        np.testing.assert_array_equal(
            public[column].to_numpy(), in_process[column].to_numpy(), err_msg=column
        )


def test_tiled_float_window_is_bit_for_bit_the_in_process_one(spark, tmp_path) -> None:
    """Float sums depend on the block they are added over: each tile computes every chunk on the
    same block (chunk and reach) as the in-process window and the exchange."""
    rng = np.random.default_rng(5)
    db = arrayviews.connect(str(tmp_path / "warehouse"), spark=spark, execution="spark")
    array = db.create_array("F<v:float64>[t=-30:49:7; s=5:64:9]")
    values = rng.normal(0, 1e6, (80, 60)) * 10.0 ** rng.integers(-8, 8, (80, 60))
    array.write_dense(np.ma.MaskedArray(values, mask=rng.random((80, 60)) < 0.15))
    calls = ("count(*)", "sum(v)", "avg(v)", "var(v)", "min(v)", "max(v)")
    got = reads.to_pandas(tiled(array, spark, [3, 2, 4, 1], *calls), True)
    local = arrayviews.connect(db.warehouse.location, spark=spark, execution="local")
    expected = local.array("F").window([3, 2, 4, 1], *calls).to_pandas()
    assert len(got) == len(expected) > 0
    for column in expected.columns:
        np.testing.assert_array_equal(got[column].to_numpy(), expected[column].to_numpy(), err_msg=column)


def test_a_sparse_array_is_not_tiled(spark, tmp_path) -> None:
    """Cells filling under 5% of the box of their chunks go through the halo exchange."""
    db = arrayviews.connect(str(tmp_path / "warehouse"), spark=spark, execution="spark")
    array = db.create_array("S<v:int64>[i=0:999:10; j=0:999:10]")
    array.insert({"i": [0, 500, 999], "j": [0, 500, 999], "v": [1, 2, 3]})
    source = array.source
    assert (
        tiles.plan(source.schema, source.metadata(), source.file_uris, (1, 1), (1, 1), 4, 10**9, 0.05) is None
    )
    assert array.window([1, 1, 1, 1], "count(*)").to_pandas()["count"].tolist() == [1, 1, 1]
