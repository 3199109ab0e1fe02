"""Regrid in-process on a dense block (operators/regrid_dense.py) against brute force (Python
integers, math.fsum), against the two-stage reduction on the same engine, and against Spark."""

from __future__ import annotations

import itertools
import math
from unittest import mock

import numpy as np
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
            None if record[c] is None or record[c] != record[c] else record[c]
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
