"""Regrid in-process on a dense block (operators/regrid_dense.py) against brute force (Python
integers, math.fsum), against the two-stage reduction on the same engine, and against Spark."""

from __future__ import annotations

import itertools
import math
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import arrayviews
from arrayviews.operators import regrid_dense

FRESH = itertools.count()
CALLS = ("count(*)", "count(v)", "sum(v)", "avg(v)", "min(v)", "max(v)")


@pytest.fixture(scope="module")
def local_db(spark, tmp_path_factory):
    return arrayviews.connect(str(tmp_path_factory.mktemp("regrid")), spark=spark, execution="local")


def reference(values: np.ndarray, present: np.ndarray, null: np.ndarray, lows, blocks) -> dict:
    """Per output cell (coordinates): count(*), count(v), exact sum, min, max of its present cells."""
    groups: dict[tuple, list] = {}
    for index in zip(*np.nonzero(present), strict=True):
        out = tuple(low + i // b for i, low, b in zip(index, lows, blocks, strict=True))
        groups.setdefault(out, []).append(None if null[index] else values[index].item())
    result = {}
    for out, items in groups.items():
        kept = [x for x in items if x is not None]
        if values.dtype.kind == "f":
            total = math.fsum(kept) if kept else None
        else:
            total = sum(int(x) for x in kept) if kept else None
        result[out] = (len(items), len(kept), total, min(kept) if kept else None, max(kept) if kept else None)
    return result


def frame_cells(frame, names) -> dict:
    rows = {}
    for row in frame.itertuples(index=False):
        record = row._asdict()
        key = tuple(int(record[n]) for n in names)
        nullable = [
            None if pd.isna(record[c]) else record[c]
            for c in ("v_sum", "v_min", "v_max")
        ]
        rows[key] = (int(record["count"]), int(record["v_count"]), *nullable)
    return rows


@settings(max_examples=12, deadline=None)
@given(
    st.sampled_from(["float64", "int64", "float32"]),
    st.tuples(st.integers(1, 23), st.integers(1, 19)),
    st.tuples(st.integers(1, 9), st.integers(1, 9)),
    st.tuples(st.integers(1, 5), st.integers(1, 4)),
    st.tuples(st.integers(-7, 7), st.integers(-7, 7)),
    st.floats(0.3, 1.0),
    st.integers(0, 2**32 - 1),
)
def test_dense_regrid_equals_brute_force_and_the_two_stage_path(
    local_db, kind, shape, chunks, blocks, lows, fill, seed
) -> None:
    rng = np.random.default_rng(seed)
    present = rng.random(shape) < fill
    null = rng.random(shape) < 0.1
    if kind == "int64":
        values = rng.integers(-(2**40), 2**40, shape)
    else:
        values = (rng.normal(0, 1, shape) * 10.0 ** rng.integers(-3, 12, shape)).astype(kind)
    schema = (
        f"r{next(FRESH)}<v:{kind} NULL>[i={lows[0]}:{lows[0] + shape[0] - 1}:{chunks[0]}; "
        f"j={lows[1]}:{lows[1] + shape[1] - 1}:{chunks[1]}]"
    )
    array = local_db.create_array(schema)
    masked = np.ma.MaskedArray(values, mask=~present)
    array.write_dense(masked)
    if null.any() and present.any():
        cells = np.argwhere(present & null)
        if len(cells):
            array.insert(
                {"i": cells[:, 0] + lows[0], "j": cells[:, 1] + lows[1], "v": [None] * len(cells)},
                on_conflict="replace",
            )
    null &= present
    placed = []
    original = regrid_dense.halo.place
    with mock.patch.object(regrid_dense.halo, "place", lambda *a, **k: placed.append(1) or original(*a, **k)):
        dense = array.regrid(list(blocks), *CALLS).to_pandas()
    with mock.patch.object(regrid_dense, "DENSE_FRACTION", 2.0):  # every input takes the two-stage path
        two_stage = array.regrid(list(blocks), *CALLS).to_pandas()
    expected = reference(values, present, null, lows, blocks)
    assert frame_cells(dense, ["i", "j"]) == expected
    assert frame_cells(two_stage, ["i", "j"]) == expected
    for column in dense.columns:
        np.testing.assert_array_equal(dense[column].to_numpy(), two_stage[column].to_numpy(), err_msg=column)
    aligned = math.prod(-(-n // b) * b for n, b in zip(shape, blocks, strict=True))
    if present.all() and present.size >= regrid_dense.DENSE_FRACTION * aligned:
        assert placed, "a dense input did not take the dense path"


def test_dense_regrid_equals_the_spark_regrid(spark, tmp_path) -> None:
    """Bit for bit on both engines (the dense path in-process, the two-stage reduction on Spark),
    with NULLs, cancelling terms, a partial edge block, a scaled coordinate and an output spanning
    several chunks."""
    rng = np.random.default_rng(8)
    local = arrayviews.connect(str(tmp_path / "w"), spark=spark, execution="local")
    array = local.create_array("s<v:float64 NULL>[y=-3:40:8 SCALE 0.5; x=0:57:10]")
    values = rng.normal(0, 1e6, (44, 58))
    values[3, 4] = 1e16
    values[3, 5] = -1e16
    array.write_dense(np.ma.MaskedArray(values, mask=rng.random((44, 58)) < 0.1))
    array.insert({"y": [0, 5], "x": [1, 2], "v": [None, None]}, on_conflict="replace")
    calls = ("count(*)", "sum(v)", "avg(v)", "min(v)", "max(v)")
    got = array.regrid([3, 4], *calls).to_pandas()
    remote = arrayviews.connect(local.warehouse.location, spark=spark, execution="spark")
    expected = remote.array("s").regrid([3, 4], *calls).to_pandas()
    assert len(got) == len(expected) > 0
    for column in expected.columns:
        np.testing.assert_array_equal(got[column].to_numpy(), expected[column].to_numpy(), err_msg=column)


# -- from the chunk cache (regrid_dense.regrid_box): arrays whose attributes have no NULL ----------------


def reference_no_nulls(values: np.ndarray, present: np.ndarray, lows, blocks) -> dict:
    """Per output cell: count(*), count(v), exact sum (math.fsum, Python integers), min, max; NaN
    cells are values (a NaN makes the sum, min and max NaN, as np.sum and np.min do)."""
    groups: dict[tuple, list] = {}
    for index in zip(*np.nonzero(present), strict=True):
        out = tuple(low + i // b for i, low, b in zip(index, lows, blocks, strict=True))
        groups.setdefault(out, []).append(values[index].item())
    result = {}
    for out, items in groups.items():
        if any(x != x for x in items):
            result[out] = (len(items), len(items), "nan", "nan", "nan")
            continue
        total = math.fsum(items) if values.dtype.kind == "f" else sum(int(x) for x in items)
        result[out] = (len(items), len(items), total, min(items), max(items))
    return result


def cells_no_nulls(frame, names) -> dict:
    rows = {}
    for row in frame.itertuples(index=False):
        record = row._asdict()
        key = tuple(int(record[n]) for n in names)
        rest = ["nan" if record[c] != record[c] else record[c] for c in ("v_sum", "v_min", "v_max")]
        rows[key] = (int(record["count"]), int(record["v_count"]), *rest)
    return rows


def counted_box_regrids(monkeypatch) -> list:
    """Record what regrid_box returned (None: it left the regrid to the fragment path)."""
    done = []
    original = regrid_dense.regrid_box
    monkeypatch.setattr(
        regrid_dense, "regrid_box", lambda *a, **k: done.append(original(*a, **k)) or done[-1]
    )
    return done


@settings(max_examples=15, deadline=None)
@given(
    st.sampled_from(["float64", "int64", "float32"]),
    st.tuples(st.integers(1, 23), st.integers(1, 19)),
    st.tuples(st.integers(1, 9), st.integers(1, 9)),
    st.tuples(st.integers(1, 5), st.integers(1, 4)),
    st.tuples(st.integers(-7, 7), st.integers(-7, 7)),
    st.sampled_from([0.2, 0.6, 0.9, 1.0]),
    st.booleans(),
    st.integers(0, 2**32 - 1),
)
def test_regrid_from_cached_chunks_equals_brute_force_and_the_fragment_path(
    local_db, kind, shape, chunks, blocks, lows, fill, with_nan, seed
) -> None:
    rng = np.random.default_rng(seed)
    present = rng.random(shape) < fill
    if kind == "int64":
        values = rng.integers(-(2**40), 2**40, shape)
    elif seed % 2:  # integer-valued floats: the exact sums' one-pass path
        values = rng.integers(-1000, 1000, shape).astype(kind)
    else:
        values = (rng.normal(0, 1, shape) * 10.0 ** rng.integers(-3, 12, shape)).astype(kind)
    if with_nan and kind != "int64":
        values[rng.random(shape) < 0.05] = np.nan
    schema = (
        f"c{next(FRESH)}<v:{kind}>[i={lows[0]}:{lows[0] + shape[0] - 1}:{chunks[0]}; "
        f"j={lows[1]}:{lows[1] + shape[1] - 1}:{chunks[1]}]"
    )
    array = local_db.create_array(schema)
    array.write_dense(np.ma.MaskedArray(values, mask=~present))
    results = []
    original = regrid_dense.regrid_box

    def recording(*arguments, **options):
        results.append(original(*arguments, **options))
        return results[-1]

    with mock.patch.object(regrid_dense, "regrid_box", recording):
        cached = [array.regrid(list(blocks), *CALLS).to_pandas() for _ in range(2)]  # cold, then warm
    with mock.patch.object(regrid_dense, "regrid_box", lambda *a, **k: None):  # the fragment path
        fragments = array.regrid(list(blocks), *CALLS).to_pandas()
    expected = reference_no_nulls(values, present, lows, blocks)
    for got in (*cached, fragments):
        assert cells_no_nulls(got, ["i", "j"]) == expected
        for column in fragments.columns:
            np.testing.assert_array_equal(
                got[column].to_numpy(), fragments[column].to_numpy(), err_msg=column
            )
    aligned = math.prod(-(-n // b) * b for n, b in zip(shape, blocks, strict=True))
    dense_enough = present.sum() >= regrid_dense.DENSE_FRACTION * aligned
    assert len(results) == 2 and all((r is not None) == dense_enough for r in results)


def test_regrid_box_takes_the_cache_and_follows_commits_and_pinned_versions(local_db, monkeypatch) -> None:
    """A 4 x 4 average with partial edge blocks and NaN cells, through the box path, before and after
    a commit through a second connection, a pinned older version after the newer one, and over a
    subarray: each against numpy's padded reshape-and-average (exact sums checked with math.fsum)."""
    rng = np.random.default_rng(11)
    values = rng.integers(0, 5000, (29, 38)).astype(np.float64)
    values[rng.random(values.shape) < 0.02] = np.nan
    array = local_db.create_array(f"g{next(FRESH)}<v:float64>[i=0:28:10; j=0:37:10]")
    array.write_dense(values)
    done = counted_box_regrids(monkeypatch)

    def numpy_average(grid: np.ndarray) -> np.ndarray:
        rows, columns = grid.shape
        padded = np.full((-(-rows // 4) * 4, -(-columns // 4) * 4), np.inf)
        padded[:rows, :columns] = grid
        blocks = padded.reshape(padded.shape[0] // 4, 4, padded.shape[1] // 4, 4).transpose(0, 2, 1, 3)
        out = np.empty(blocks.shape[:2])
        for index in np.ndindex(out.shape):
            kept = [x for x in blocks[index].ravel().tolist() if x != np.inf]
            out[index] = np.nan if any(x != x for x in kept) else math.fsum(kept) / len(kept)
        return out

    for _ in range(2):
        np.testing.assert_array_equal(array.regrid([4, 4], "avg(v)").to_numpy(), numpy_average(values))
    other = arrayviews.connect(local_db.warehouse.location, spark=local_db.spark, execution="local")
    other.array(array.name).insert({"i": [0, 28], "j": [0, 37], "v": [1e16, -3.25]}, on_conflict="replace")
    newer = values.copy()
    newer[0, 0], newer[28, 37] = 1e16, -3.25
    np.testing.assert_array_equal(array.regrid([4, 4], "avg(v)").to_numpy(), numpy_average(newer))
    pinned = array.at_version(1)
    np.testing.assert_array_equal(pinned.regrid([4, 4], "avg(v)").to_numpy(), numpy_average(values))
    cut = array.subarray(i=(3, 21), j=(5, 30))
    np.testing.assert_array_equal(cut.regrid([4, 4], "avg(v)").to_numpy(), numpy_average(newer[3:22, 5:31]))
    assert len(done) == 5 and all(result is not None for result in done)
